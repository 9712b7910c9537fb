//! Gang preemption's reprieve: which of a candidate's victim units the
//! gang can do without.
//!
//! With every unit of the candidate taken off, the gang is planned and its
//! plan held (assumed). Each unit is then put back, most important and
//! budget-protected first, and kept back when the gang still places:
//!
//! * in place, when every member the unit could affect still passes
//!   PreFilter and Filter on its planned node — a unit on none of the
//!   planned nodes, with nothing that reaches across nodes, affects no
//!   member and is kept back unchecked;
//! * else re-planned: the gang is planned afresh within the placement, so
//!   members may move to make room for the unit put back.
//!
//! A unit stays a victim only when no plan of the gang fits with it back,
//! so no victim is evicted that the gang could do without (invariant I11;
//! `preempt_gang` extends this to every other placement). KEP-5710
//! reprieves a pod group's victims in the same order in kube-scheduler
//! 1.37.
//!
//! In-place checks are node-local where nothing reaches across nodes: only
//! the members on the nodes a unit's pods sit on are re-filtered. A unit
//! whose pods carry required anti-affinity, or a gang whose members carry
//! inter-pod terms or hard spread constraints, re-filters every member.
//! The plan that results is verified once, every member on its node with
//! the final victims off; should that fail (a plugin saw across nodes what
//! the local checks did not), the reprieve runs again re-planning for
//! every unit, so the answer is never wrong, only slower.
//!
//! Gangs whose members need devices always re-plan: a member's devices are
//! allocated when it is assumed, and a check that takes a member off and
//! assumes it again could lose a joint allocation (`joint_devices`).

use std::collections::HashMap;
use std::sync::Arc;

use super::Engine;
use super::gang_cycle::Batches;
use super::preempt_gang::{GangCandidate, Preemptor};
use crate::cache::WhatIf;
use crate::framework::Snapshot;
use crate::gang::PlacementTry;
use crate::model::{PodInfo, WhenUnsatisfiable};
use crate::preemption::{Blocker, Cost, VictimUnit, reprieve_order};

/// What a reprieve came to.
pub(super) enum Reprieved {
    /// Victims chosen and the plan they make room for.
    Chosen(GangCandidate),
    /// The gang does not plan even with every unit taken off.
    NoPlan,
    /// The final check of an in-place reprieve failed: run it again
    /// re-planning. The edits are as given (every unit off) and nothing
    /// is assumed.
    Unverified,
}

/// One reprieve under way: the gang, the try, the plan held.
struct Reprieve<'a> {
    gang: &'a Preemptor<'a>,
    t: &'a PlacementTry,
    held: Held,
    in_place: bool,
}

/// What putting pods back came to.
enum PutBack {
    Kept,
    /// Taken off again; the member left without room, when known.
    Evicted(Option<Blocker>),
    /// The held plan could not be assumed again, nor another found.
    Broken,
}

/// What putting a `single`-mode gang back in part came to.
enum Part {
    /// Not even `minCount` members go back: the gang goes whole.
    Whole,
    /// The members that stay victims, one unit each.
    Singles(Vec<VictimUnit>),
    Broken,
}

/// How a unit's reprieve was decided, counted in the engine's stats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Decision {
    /// Put back: the held plan still fits.
    InPlace,
    /// Put back: the gang planned again around it.
    Replanned,
    /// Kept a victim: no plan fits with it back.
    Evicted,
    /// A candidate whose victims the exact search chose
    /// (`cheapest_victims`).
    Exact,
    /// Put back after the choice: another placement try does without it
    /// (`preempt_gang::spare_elsewhere`).
    Elsewhere,
}

impl Decision {
    pub(super) fn label(self) -> &'static str {
        match self {
            Decision::InPlace => "in_place",
            Decision::Replanned => "replanned",
            Decision::Evicted => "evicted",
            Decision::Exact => "exact",
            Decision::Elsewhere => "elsewhere",
        }
    }
}

/// The plan being reprieved around, assumed in the cache: each member, its
/// node and node index, and which members sit on each node.
pub(super) struct Held {
    pub placed: Vec<(Arc<PodInfo>, Arc<str>, usize)>,
    on_node: HashMap<usize, Vec<usize>>,
    /// A member's filters read pods on other nodes.
    reaches_across: bool,
}

impl Held {
    pub(super) fn plan(&self) -> Vec<(Arc<PodInfo>, Arc<str>)> {
        self.placed
            .iter()
            .map(|(pod, node, _)| (pod.clone(), node.clone()))
            .collect()
    }
}

impl Engine {
    /// Whether the in-place check applies to `gang` (its members need no
    /// devices).
    pub(super) fn reprieves_in_place(&self, gang: &Preemptor) -> bool {
        !gang.members.iter().any(|m| self.needs_devices(m))
    }

    /// The reprieve of `units` (all taken off in `edits`) within `t`,
    /// in place first where it applies.
    pub(super) fn reprieve_units(
        &mut self,
        gang: &Preemptor,
        t: &PlacementTry,
        units: Vec<VictimUnit>,
        edits: &mut WhatIf,
        batches: &mut Batches,
    ) -> Option<GangCandidate> {
        if self.reprieves_in_place(gang) {
            match self.reprieve(gang, t, units.clone(), edits, batches, true) {
                Reprieved::Chosen(c) => return Some(c),
                Reprieved::NoPlan => return None,
                Reprieved::Unverified => {}
            }
        }
        match self.reprieve(gang, t, units, edits, batches, false) {
            Reprieved::Chosen(c) => Some(c),
            Reprieved::NoPlan | Reprieved::Unverified => None,
        }
    }

    /// See the module doc; `in_place`: try the held plan before
    /// re-planning.
    fn reprieve(
        &mut self,
        gang: &Preemptor,
        t: &PlacementTry,
        units: Vec<VictimUnit>,
        edits: &mut WhatIf,
        batches: &mut Batches,
        in_place: bool,
    ) -> Reprieved {
        let Ok(held) = self.hold_plan(gang, t, batches) else {
            return Reprieved::NoPlan;
        };
        let all_keys: Vec<_> = units.iter().flat_map(|u| u.keys().cloned()).collect();
        let mut r = Reprieve {
            gang,
            t,
            held,
            in_place,
        };
        let mut victims = Vec::new();
        let mut violations = 0usize;
        for (mut unit, violates) in reprieve_order(units, &self.cache.facts().budgets) {
            let blocked = match self.put_back(&mut r, &unit.pods, edits, batches) {
                PutBack::Kept => continue,
                PutBack::Broken => return self.unverified(&all_keys, edits),
                PutBack::Evicted(blocked) => blocked,
            };
            let singles = match unit.keep_at_least {
                Some(min) if min < unit.pods.len() => {
                    match self.put_back_in_part(&mut r, &unit.pods, min, edits, batches) {
                        Part::Whole => None,
                        Part::Singles(singles) => Some(singles),
                        Part::Broken => return self.unverified(&all_keys, edits),
                    }
                }
                _ => None,
            };
            let evicted = match singles {
                Some(singles) => singles,
                None => {
                    unit.blocked = blocked;
                    vec![unit]
                }
            };
            for unit in evicted {
                if violates {
                    violations = violations.saturating_add(unit.pods.len());
                }
                victims.push(unit);
            }
        }
        let held = r.held;
        if in_place && self.members_fit(&held, 0..held.placed.len()).is_err() {
            self.release(&held);
            return self.unverified(&all_keys, edits);
        }
        self.release(&held);
        let cost = Cost::of(&victims, violations);
        Reprieved::Chosen(GangCandidate {
            label: t.label.clone(),
            victims,
            cost,
            plan: held.plan(),
        })
    }

    /// Puts `pods` back and keeps them back when the gang still places:
    /// in place (the held plan still fits), else planned again within the
    /// try. Otherwise takes them off again with the held plan as it was.
    fn put_back(
        &mut self,
        r: &mut Reprieve,
        pods: &[Arc<PodInfo>],
        edits: &mut WhatIf,
        batches: &mut Batches,
    ) -> PutBack {
        for p in pods {
            self.cache.what_if_restore(&p.key, edits);
        }
        let mut blocked = None;
        if r.in_place {
            match self.still_fits(&r.held, pods) {
                Ok(()) => {
                    self.count_reprieve(Decision::InPlace);
                    return PutBack::Kept;
                }
                Err(b) => blocked = b,
            }
        }
        self.release(&r.held);
        // A plan is tried only where the placement's room (by resources,
        // counted for the least member) could hold the gang at all.
        let needed = u64::try_from(r.gang.needed).unwrap_or(u64::MAX);
        if self.room_in(r.t, &r.gang.least) >= needed {
            match self.hold_plan(r.gang, r.t, batches) {
                Ok(moved) => {
                    r.held = moved;
                    self.count_reprieve(Decision::Replanned);
                    return PutBack::Kept;
                }
                Err(b) => blocked = blocked.or(b),
            }
        } else if blocked.is_none() {
            blocked = r.gang.members.first().map(|m| Blocker {
                pod: m.key.clone(),
                node: None,
            });
        }
        for p in pods {
            let _ = self.cache.what_if_remove(&p.key, edits);
        }
        // The plan held before fits again without them.
        if !self.redo_held(&r.held) {
            match self.hold_plan(r.gang, r.t, batches) {
                Ok(again) => r.held = again,
                Err(_) => return PutBack::Broken,
            }
        }
        self.count_reprieve(Decision::Evicted);
        PutBack::Evicted(blocked)
    }

    /// A `single`-mode gang that could not go back whole: `min` of its
    /// members back together (those on no planned node first), then each
    /// other member on its own. The members that cannot go back are the
    /// victims, one unit each: the gang keeps running at or above its
    /// `minCount`.
    fn put_back_in_part(
        &mut self,
        r: &mut Reprieve,
        members: &[Arc<PodInfo>],
        min: usize,
        edits: &mut WhatIf,
        batches: &mut Batches,
    ) -> Part {
        let planned: std::collections::HashSet<&str> =
            r.held.placed.iter().map(|(_, n, _)| &**n).collect();
        let mut order: Vec<Arc<PodInfo>> = members.to_vec();
        order.sort_by_key(|p| p.node_name.as_deref().is_some_and(|n| planned.contains(n)));
        let (first, rest) = order.split_at(min.min(order.len()));
        match self.put_back(r, first, edits, batches) {
            PutBack::Kept => {}
            PutBack::Evicted(_) => return Part::Whole,
            PutBack::Broken => return Part::Broken,
        }
        let mut singles = Vec::new();
        for p in rest {
            match self.put_back(r, std::slice::from_ref(p), edits, batches) {
                PutBack::Kept => {}
                PutBack::Broken => return Part::Broken,
                PutBack::Evicted(blocked) => {
                    let mut single = VictimUnit::of_pod(p.clone());
                    single.blocked = blocked;
                    singles.push(single);
                }
            }
        }
        Part::Singles(singles)
    }

    /// Back to every unit off and nothing assumed.
    fn unverified(&mut self, keys: &[crate::model::PodKey], edits: &mut WhatIf) -> Reprieved {
        for key in keys {
            let _ = self.cache.what_if_remove(key, edits);
        }
        Reprieved::Unverified
    }

    pub(super) fn count_reprieve(&mut self, how: Decision) {
        *self.stats.gang_reprieves.entry(how.label()).or_default() += 1;
    }

    /// Plans the gang within `t` on the node table as it stands and keeps
    /// the plan assumed when it meets the quorum; else takes it back and
    /// names the first member no node took.
    pub(super) fn hold_plan(
        &mut self,
        gang: &Preemptor,
        t: &PlacementTry,
        batches: &mut Batches,
    ) -> Result<Held, Option<Blocker>> {
        let plan = self.plan_try(gang.members, gang.needed, t, batches);
        let fits = self
            .gang
            .placement_feasible(&self.cache, gang.group, gang.min_count);
        if !fits {
            self.undo(&plan);
            let blocker = plan
                .unplaced
                .iter()
                .find(|(_, fit)| fit.is_some())
                .or(plan.unplaced.first())
                .map(|(pod, _)| Blocker {
                    pod: pod.key.clone(),
                    node: None,
                });
            return Err(blocker);
        }
        let mut held = Held {
            placed: Vec::with_capacity(plan.placed.len()),
            on_node: HashMap::new(),
            reaches_across: false,
        };
        for p in &plan.placed {
            let Some(i) = self.cache.node_index(&p.node) else {
                self.undo(&plan);
                return Err(None);
            };
            held.on_node.entry(i).or_default().push(held.placed.len());
            held.reaches_across |= reaches_across(&p.pod);
            held.placed.push((p.pod.clone(), p.node.clone(), i));
        }
        Ok(held)
    }

    /// Takes the held plan's members off their nodes.
    pub(super) fn release(&mut self, held: &Held) {
        for (pod, _, _) in &held.placed {
            self.cache.forget(&pod.key);
        }
    }

    /// Assumes the held plan again; false (and nothing assumed) when the
    /// cache refuses a member.
    fn redo_held(&mut self, held: &Held) -> bool {
        for (at, (pod, _, node)) in held.placed.iter().enumerate() {
            if self.cache.assume(&pod.key, *node).is_err() {
                for (q, _, _) in held.placed.iter().take(at) {
                    self.cache.forget(&q.key);
                }
                return false;
            }
        }
        true
    }

    /// With `pods` put back: whether the members they could affect still
    /// fit on their planned nodes; else the member that does not (`None`:
    /// a member could not be assumed again).
    fn still_fits(&mut self, held: &Held, pods: &[Arc<PodInfo>]) -> Result<(), Option<Blocker>> {
        if held.reaches_across || pods.iter().any(|p| reaches_across(p)) {
            return self.members_fit(held, 0..held.placed.len());
        }
        let mut touched: Vec<usize> = pods
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
    fn members_fit(
        &mut self,
        held: &Held,
        which: impl IntoIterator<Item = usize>,
    ) -> Result<(), Option<Blocker>> {
        for at in which {
            let Some((pod, name, node)) = held.placed.get(at) else {
                return Err(None);
            };
            self.cache.forget(&pod.key);
            let fits = match self.profiles.get_mut(&pod.scheduler_name) {
                Some(profile) => {
                    let snapshot = Snapshot::of_cache(&self.cache);
                    super::cycle::schedule_on(&mut profile.framework, pod, &snapshot, *node).is_ok()
                }
                None => false,
            };
            self.cache.assume(&pod.key, *node).map_err(|_| None)?;
            if !fits {
                return Err(Some(Blocker {
                    pod: pod.key.clone(),
                    node: Some(name.clone()),
                }));
            }
        }
        Ok(())
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
