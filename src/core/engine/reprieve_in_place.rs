//! Gang preemption's reprieve, in place, and the nodes it starts from.
//!
//! `cheapest_nodes` narrows a candidate placement to the nodes cheapest to
//! clear that would hold the members to place, so only the pods in the way
//! there need taking off. With every victim unit of a candidate taken off,
//! the gang is planned once and its plan stays
//! assumed; each unit is then put back, most important first, and kept
//! back when every member it could affect still passes PreFilter and
//! Filter on its planned node. A unit on none of the planned nodes, with
//! nothing that reaches across nodes, affects no member and is kept back
//! unchecked. KEP-5710 reprieves a pod group's victims the same way in
//! kube-scheduler 1.37.
//!
//! Checks are node-local where nothing reaches across nodes: only the
//! members on the nodes a unit's pods sit on are re-filtered. A unit whose
//! pods carry required anti-affinity, or a gang whose members carry
//! inter-pod terms or hard spread constraints, re-filters every member.
//! The plan that results is verified once, every member on its node with
//! the final victims off; should that fail (a plugin saw across nodes
//! what the local checks did not), the caller falls back to re-planning
//! the gang for each reprieve (`preempt_gang`), so the answer is never
//! wrong, only slower.
//!
//! Gangs whose members need devices are not reprieved here: a member's
//! devices are allocated when it is assumed, and a check that takes a
//! member off and assumes it again could lose a joint allocation
//! (`joint_devices`); they re-plan.

use std::collections::HashMap;
use std::sync::Arc;

use super::Engine;
use super::gang_cycle::Batches;
use super::preempt_gang::{GangCandidate, Preemptor};
use crate::cache::WhatIf;
use crate::framework::Snapshot;
use crate::gang::PlacementTry;
use crate::model::{PodInfo, WhenUnsatisfiable};
use crate::preemption::{Cost, VictimUnit, reprieve_order};

/// What clearing a node costs, compared in `Cost`'s order: whether a
/// budget protects one of its pods, their highest priority, the gang
/// members among them, their number.
pub(super) type Price = (bool, i32, usize, usize);

/// What the in-place reprieve came to.
pub(super) enum InPlace {
    /// Victims chosen and the plan they make room for, verified.
    Chosen(GangCandidate),
    /// The gang does not plan even with every unit taken off.
    NoPlan,
    /// The final check failed: re-plan instead. The edits are as given
    /// (every unit off) and nothing is assumed.
    Unverified,
}

/// The plan being reprieved around: each member, its node, and which
/// members sit on each node.
struct Held {
    members: Vec<(Arc<PodInfo>, usize)>,
    on_node: HashMap<usize, Vec<usize>>,
    /// A member's filters read pods on other nodes.
    reaches_across: bool,
}

impl Engine {
    /// Whether the in-place reprieve applies to `gang` (its members need
    /// no devices).
    pub(super) fn reprieves_in_place(&self, gang: &Preemptor) -> bool {
        !gang.members.iter().any(|m| self.needs_devices(m))
    }

    /// See the module doc. `units` are all taken off in `edits`.
    pub(super) fn reprieve_in_place(
        &mut self,
        gang: &Preemptor,
        t: &PlacementTry,
        units: &[VictimUnit],
        edits: &mut WhatIf,
        batches: &mut Batches,
    ) -> InPlace {
        let plan = self.plan_try(gang.members, gang.needed, t, batches);
        let fits = self
            .gang
            .placement_feasible(&self.cache, gang.group, gang.min_count);
        if !fits {
            self.undo(&plan);
            return InPlace::NoPlan;
        }
        let mut held = Held {
            members: Vec::with_capacity(plan.placed.len()),
            on_node: HashMap::new(),
            reaches_across: false,
        };
        for p in &plan.placed {
            let Some(i) = self.cache.node_index(&p.node) else {
                self.undo(&plan);
                return InPlace::Unverified;
            };
            held.on_node.entry(i).or_default().push(held.members.len());
            held.reaches_across |= reaches_across(&p.pod);
            held.members.push((p.pod.clone(), i));
        }
        let mut victims = Vec::new();
        let mut violations = 0usize;
        let mut broken = false;
        for (unit, violates) in reprieve_order(units.to_vec(), &self.cache.facts().budgets) {
            for key in unit.keys() {
                self.cache.what_if_restore(key, edits);
            }
            match self.still_fits(&held, &unit) {
                Some(true) => continue,
                Some(false) => {}
                None => {
                    broken = true;
                    break;
                }
            }
            for key in unit.keys() {
                let _ = self.cache.what_if_remove(key, edits);
            }
            if violates {
                violations = violations.saturating_add(unit.pods.len());
            }
            victims.push(unit);
        }
        let verified = !broken && self.members_fit(&held, 0..held.members.len()) == Some(true);
        if !verified {
            // Back to every unit off and nothing assumed, for re-planning.
            for key in units.iter().flat_map(|u| u.keys()) {
                let _ = self.cache.what_if_remove(key, edits);
            }
            for (pod, _) in &held.members {
                self.cache.forget(&pod.key);
            }
            return InPlace::Unverified;
        }
        self.undo(&plan);
        let cost = Cost::of(&victims, violations);
        InPlace::Chosen(GangCandidate {
            label: t.label.clone(),
            victims,
            cost,
            plan: plan
                .placed
                .iter()
                .map(|p| (p.pod.clone(), p.node.clone()))
                .collect(),
        })
    }

    /// `t` narrowed to the nodes cheapest to clear, as many as hold the
    /// members to place (one like the first member each) were every
    /// lower-priority pod on them gone. A node's price is that of those
    /// pods, in `Cost`'s order: one a budget protects, then the highest
    /// priority, then gang members, then pods; a node with room is free.
    /// `None` for a try that plans in slices or packs (its domains decide),
    /// or when no such nodes hold them or they are the whole try.
    pub(super) fn cheapest_nodes(
        &self,
        gang: &Preemptor,
        t: &PlacementTry,
    ) -> Option<PlacementTry> {
        if t.slices.is_some() || t.pack.is_some() {
            return None;
        }
        let per_member = &gang.members.first()?.requests;
        let nodes = self.cache.nodes();
        let scope: Vec<usize> = match &t.restriction {
            Some(r) => r.nodes.clone(),
            None => (0..nodes.len()).collect(),
        };
        let mut ranked: Vec<(Price, usize, u64)> = Vec::new();
        for &i in &scope {
            let Some(node) = nodes.get(i) else {
                continue;
            };
            let (free, price) = self.clearing(node, gang.priority);
            let fits = crate::gang::copies_fitting(&free, per_member);
            if fits > 0 {
                ranked.push((price, i, fits));
            }
        }
        ranked.sort_unstable();
        let needed = u64::try_from(gang.needed).unwrap_or(u64::MAX);
        let (mut room, mut chosen) = (0u64, Vec::new());
        for (_, i, fits) in ranked {
            if room >= needed {
                break;
            }
            room = room.saturating_add(fits);
            chosen.push(i);
        }
        if room < needed || chosen.len() == scope.len() {
            return None;
        }
        chosen.sort_unstable();
        let mut narrow = t.clone();
        narrow.restriction = Some(crate::framework::NodeRestriction {
            nodes: chosen,
            reason: t
                .restriction
                .as_ref()
                .map(|r| r.reason.clone())
                .unwrap_or_default(),
        });
        Some(narrow)
    }

    /// What a node would offer with every pod below `priority` gone (the
    /// pods already going count as gone), and what taking off those not
    /// yet going would cost.
    pub(super) fn clearing(
        &self,
        node: &crate::cache::NodeState,
        priority: i32,
    ) -> (crate::model::Resources, Price) {
        let budgets = &self.cache.facts().budgets;
        let protected = |p: &PodInfo| {
            budgets
                .in_namespace(&p.key.namespace)
                .iter()
                .any(|b| b.disruptions_allowed <= 0 && b.covers(&p.key.namespace, &p.labels))
        };
        let mut free = node.free();
        let mut price: Price = (false, i32::MIN, 0, 0);
        for p in node.pods.iter().filter(|p| p.priority < priority) {
            free.add(&p.requests);
            if self.is_going(p) {
                continue;
            }
            price.0 |= protected(p);
            price.1 = price.1.max(p.priority);
            price.2 += usize::from(p.group.key().is_some());
            price.3 += 1;
        }
        (free, price)
    }

    /// With `unit` put back: whether the members it could affect still
    /// fit (`None`: a member could not be assumed again).
    fn still_fits(&mut self, held: &Held, unit: &VictimUnit) -> Option<bool> {
        if held.reaches_across || unit.pods.iter().any(|p| reaches_across(p)) {
            return self.members_fit(held, 0..held.members.len());
        }
        let mut touched: Vec<usize> = unit
            .pods
            .iter()
            .filter_map(|p| self.cache.pod(&p.key).and_then(|c| c.state.node()))
            .filter_map(|n| self.cache.node_index(n))
            .flat_map(|i| held.on_node.get(&i).into_iter().flatten().copied())
            .collect();
        touched.sort_unstable();
        touched.dedup();
        self.members_fit(held, touched)
    }

    /// Re-filters each member of `which` on its node, every other member
    /// still assumed: taken off, checked, assumed again.
    fn members_fit(&mut self, held: &Held, which: impl IntoIterator<Item = usize>) -> Option<bool> {
        for at in which {
            let (pod, node) = held.members.get(at)?;
            self.cache.forget(&pod.key);
            let fits = match self.profiles.get_mut(&pod.scheduler_name) {
                Some(profile) => {
                    let snapshot = Snapshot::of_cache(&self.cache);
                    super::cycle::schedule_on(&mut profile.framework, pod, &snapshot, *node).is_ok()
                }
                None => false,
            };
            self.cache.assume(&pod.key, *node).ok()?;
            if !fits {
                return Some(false);
            }
        }
        Some(true)
    }
}

/// A pod whose presence or placement other nodes' pods' filters read:
/// required inter-pod terms, hard spread constraints, or devices (a
/// multi-node device reaches other nodes).
fn reaches_across(pod: &PodInfo) -> bool {
    let c = &pod.constraints;
    !c.pod_affinity.required_affinity.is_empty()
        || !c.pod_affinity.required_anti_affinity.is_empty()
        || c.spread
            .constraints
            .iter()
            .any(|s| s.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule)
        || !c.resource_claims.is_empty()
        || !c.extended.is_empty()
}
