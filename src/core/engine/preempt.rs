//! PostFilter: DefaultPreemption for a pod no node could take, with
//! kube-scheduler's semantics (`pkg/scheduler/framework/preemption`).
//!
//! A pod that may preempt (its policy is not `Never`, no lower-priority pod
//! is already terminating on its nominated node, and it is not a gang
//! member still to be placed — gangs preempt as a whole, `preempt_gang`)
//! looks for candidate nodes from a rotating offset: nodes where taking off
//! every pod of a lower priority lets it pass every Filter. On each it
//! keeps as many of those pods as it can, most important first and the
//! ones a PodDisruptionBudget protects first (the reprieve), so the rest
//! are the fewest victims that node needs. It stops after
//! `num_candidates` candidates and picks the cheapest (`preemption::Cost`),
//! re-checked with the victims taken off the real node table. Then its
//! victims are deleted (asynchronously: actions the daemon performs) and
//! the pod is nominated to the node; it is retried when they are gone.

use std::collections::HashSet;
use std::sync::Arc;

use super::cheapest_victims::cheaper_sets;
use super::{Engine, EventType, ObjectRef};
use crate::cache::{NodeState, PodState, WhatIf};
use crate::framework::{FitError, Snapshot};
use crate::model::{DisruptionMode, GroupKey, GroupPolicy, PodInfo, PodKey, PreemptionPolicy};
use crate::preemption::{Blocker, Cost, GangFacts, VictimUnit, reprieve_order, units_of};
use crate::queue::QueueGroup;

/// How many of the cheapest candidates are re-checked on the node table
/// before preemption gives up for this cycle.
const MAX_VERIFIED: usize = 3;

/// One node where evicting `victims` lets the preemptor fit.
pub(super) struct Candidate {
    pub node: usize,
    pub victims: Vec<VictimUnit>,
    pub cost: Cost,
}

impl Candidate {
    /// Node `node` with `victims`, each needed for the preemptor there
    /// (`blocker`).
    pub(super) fn blocked(
        node: usize,
        mut victims: Vec<VictimUnit>,
        cost: Cost,
        blocker: &Blocker,
    ) -> Self {
        for u in &mut victims {
            u.blocked = Some(blocker.clone());
        }
        Candidate {
            node,
            victims,
            cost,
        }
    }
}

impl Engine {
    /// Runs preemption for `pod`, which `fit` says no node took. Returns
    /// what to add to its FailedScheduling message, or `None` when
    /// preemption does not apply (disabled, or a gang member that the gang
    /// cycle places).
    pub(super) fn preempt_for_pod(&mut self, pod: &Arc<PodInfo>, fit: &FitError) -> Option<String> {
        let args = self.profiles.get(&pod.scheduler_name)?.preemption?;
        if self.placed_as_gang(pod) {
            return None;
        }
        if pod.preemption_policy == PreemptionPolicy::Never {
            return Some("preemption: not eligible due to preemptionPolicy=Never.".into());
        }
        let n = self.cache.nodes().len();
        if fit.unresolvable {
            return Some(format!(
                "preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling."
            ));
        }
        if self.terminating_on_nominated(pod) {
            return Some(
                "preemption: not eligible due to a terminating pod on the nominated node.".into(),
            );
        }
        self.stats.preemption_attempts += 1;
        let want = args.num_candidates(n);
        let mut candidates = match self.needs_devices(pod) {
            true => self.find_device_candidates(pod, want),
            false => self.find_candidates(pod, want),
        };
        candidates.sort_by(|a, b| a.cost.cmp_cost(&b.cost));
        let found = candidates.len();
        let chosen = candidates
            .into_iter()
            .take(MAX_VERIFIED)
            .find(|c| self.fits_without(pod, c));
        let Some(chosen) = chosen else {
            self.give_up_nomination(pod);
            let why = match found {
                0 => "No preemption victims found for incoming pod",
                _ => "victims found, but the pod still did not fit once they were removed",
            };
            return Some(format!("preemption: 0/{n} nodes are available: {n} {why}."));
        };
        let node = self
            .cache
            .nodes()
            .get(chosen.node)
            .map(|n| n.info.name.clone())?;
        let victims = chosen.victims.iter().map(|u| u.pods.len()).sum::<usize>();
        let preemptor = format!("pod {} ({})", pod.key, pod.uid);
        self.evict(
            &chosen.victims,
            (&preemptor, QueueGroup::Pod(pod.key.clone())),
            "pod",
            &pod.scheduler_name,
            &node,
        );
        self.outbox.event(
            self.pod_ref(&pod.key),
            EventType::Normal,
            "Preempting",
            format!(
                "preempting {victims} pod(s) on node {node}: {} ({})",
                victim_list(&chosen.victims),
                victim_reasons(&chosen.victims)
            ),
        );
        self.nominate(pod, node.clone());
        Some(format!(
            "preemption: nominated node {node} after preempting {victims} pod(s)."
        ))
    }

    /// A member of a gang that is not released yet: the gang cycle places
    /// (and preempts for) it as a whole; members of a released gang are
    /// placed, and preempt, as ordinary pods.
    fn placed_as_gang(&self, pod: &PodInfo) -> bool {
        let Some(group) = pod.group.key() else {
            return false;
        };
        match self.gang.min_count(group) {
            Some(min) => self.cache.group(group).map_or(0, |m| m.assumed_or_bound()) < min as usize,
            None => false,
        }
    }

    /// kube-scheduler's `PodEligibleToPreemptOthers`: a pod nominated to a
    /// node where a lower-priority pod is terminating waits for it.
    fn terminating_on_nominated(&self, pod: &PodInfo) -> bool {
        let node = match self.preemptions.nomination(&pod.key) {
            Some(n) => n.node.clone(),
            None => match &pod.nominated_node {
                Some(n) => n.clone(),
                None => return false,
            },
        };
        self.cache
            .node(&node)
            .is_some_and(|n| self.going_below(n, pod.priority).next().is_some())
    }

    /// A pod already on its way out: being deleted, or preempted by us.
    pub(super) fn is_going(&self, pod: &PodInfo) -> bool {
        pod.deleting || self.preemptions.is_going(&pod.key)
    }

    /// Pods on `node` below `priority` already on their way out: their room
    /// counts as free for a preemptor of `priority`.
    pub(super) fn going_below<'a>(
        &'a self,
        node: &'a NodeState,
        priority: i32,
    ) -> impl Iterator<Item = &'a Arc<PodInfo>> + 'a {
        node.pods
            .iter()
            .filter(move |p| p.priority < priority && self.is_going(p))
    }

    /// Pods on `node` that could be evicted for a preemptor of `priority`:
    /// bound (not in flight to a node: a reservation of ours is never a
    /// victim), of a lower priority, not already going, and not members of
    /// another scheduler's gang (whose other members are not known here).
    pub(super) fn in_the_way(&self, node: &NodeState, priority: i32) -> Vec<Arc<PodInfo>> {
        node.pods
            .iter()
            .filter(|p| p.priority < priority && !self.is_going(p))
            .filter(|p| {
                self.cache.pod(&p.key).is_some_and(|c| {
                    matches!(c.state, PodState::Bound { .. })
                        && (c.served || p.group.key().is_none())
                })
            })
            .cloned()
            .collect()
    }

    /// The gang facts of a pod's gang, when it is a member of a gang-policy
    /// group this scheduler serves.
    pub(super) fn gang_facts(&self, pod: &PodInfo) -> Option<(GroupKey, GangFacts)> {
        let group = pod.group.key()?;
        let Ok(GroupPolicy::Gang { min_count, .. }) = self.gang.policy(group) else {
            return None;
        };
        let mode = self
            .gang
            .def(&group.definition)
            .and_then(|d| d.extras.disruption_mode)
            .unwrap_or(DisruptionMode::Single);
        let members = self.cache.group(group)?;
        // Members already going (deleted, or preempted earlier) neither
        // stay nor need evicting again.
        let staying = |k: &PodKey| {
            self.cache
                .pod(k)
                .map(|c| c.info.clone())
                .filter(|p| !self.is_going(p))
        };
        let bound = members.bound().iter().filter_map(staying).count();
        let running = members
            .bound()
            .iter()
            .chain(members.assumed().iter())
            .filter_map(staying)
            .collect();
        Some((
            group.clone(),
            GangFacts {
                min_count,
                mode,
                running,
                bound,
            },
        ))
    }

    /// Candidate nodes for `pod`, from the rotating offset, until `want`
    /// are found (kube-scheduler's `DryRunPreemption`).
    fn find_candidates(&mut self, pod: &Arc<PodInfo>, want: usize) -> Vec<Candidate> {
        let Some(profile) = self.profiles.get(&pod.scheduler_name) else {
            return Vec::new();
        };
        let nodes = self.cache.nodes();
        let n = nodes.len();
        let snapshot = Snapshot::new(nodes, self.cache.facts());
        let Ok(dry) = profile.framework.dry_run(pod, &snapshot) else {
            return Vec::new();
        };
        let start = self.preemptions.search_start(n);
        let (out, visited) = rotate(n, start, want, |i| {
            if !dry.considers(i) {
                return None;
            }
            let node = &nodes[i];
            let going: Vec<&Arc<PodInfo>> = self.going_below(node, pod.priority).collect();
            let in_way = self.in_the_way(node, pod.priority);
            if in_way.is_empty() {
                return None;
            }
            let mut sim = node.clone();
            for p in going.iter().copied().chain(&in_way) {
                sim.remove_pod(p);
            }
            if !dry.fits(pod, &sim) {
                return None;
            }
            let units = units_of(in_way.clone(), pod.priority, &|p| self.gang_facts(p));
            // Pods of a gang that may not be evicted stay where they are.
            let evictable: HashSet<&PodKey> = units.iter().flat_map(|u| u.keys()).collect();
            for p in in_way.iter().filter(|p| !evictable.contains(&p.key)) {
                sim.add_pod(p);
            }
            if !dry.fits(pod, &sim) {
                return None;
            }
            let on_node: HashSet<&PodKey> = in_way.iter().map(|p| &p.key).collect();
            let blocker = Blocker {
                pod: pod.key.clone(),
                node: Some(node.info.name.clone()),
            };
            let all_units = units.clone();
            let mut victims = Vec::new();
            let mut violations = 0usize;
            for (unit, violates) in reprieve_order(units, &self.cache.facts().budgets) {
                let here: Vec<&Arc<PodInfo>> = unit
                    .pods
                    .iter()
                    .filter(|p| on_node.contains(&p.key))
                    .collect();
                for p in &here {
                    sim.add_pod(p);
                }
                if dry.fits(pod, &sim) {
                    continue;
                }
                for p in &here {
                    sim.remove_pod(p);
                }
                let mut unit = unit;
                unit.blocked = Some(blocker.clone());
                if violates {
                    violations = violations.saturating_add(unit.pods.len());
                }
                victims.push(unit);
            }
            if victims.is_empty() {
                return None;
            }
            let cost = Cost::of(&victims, violations);
            // Where the node's choices are few, a cheaper set that fits
            // (`cheapest_victims`).
            let budgets = &self.cache.facts().budgets;
            if let Some(cheaper) = cheaper_sets(&all_units, budgets, &cost) {
                for p in victims.iter().flat_map(|u| u.pods.iter()) {
                    if on_node.contains(&p.key) {
                        sim.add_pod(p);
                    }
                }
                let wanted = pod.room_requests();
                for (cost, set) in cheaper {
                    // Only a set that frees enough by resources is tried.
                    let mut free = sim.free();
                    for p in set.iter().flat_map(|u| u.pods.iter()) {
                        if on_node.contains(&p.key) {
                            free.add(&p.requests);
                        }
                    }
                    if crate::gang::copies_fitting(&free, &wanted) == 0 {
                        continue;
                    }
                    let mut without = sim.clone();
                    for p in set.iter().flat_map(|u| u.pods.iter()) {
                        if on_node.contains(&p.key) {
                            without.remove_pod(p);
                        }
                    }
                    if dry.fits(pod, &without) {
                        return Some(Candidate::blocked(i, set, cost, &blocker));
                    }
                }
            }
            Some(Candidate {
                node: i,
                victims,
                cost,
            })
        });
        self.preemptions.searched(start, visited, n);
        out
    }

    /// The exact check of a candidate: with its victims (and every pod
    /// already going) taken off the node table, does the pod pass PreFilter
    /// and Filter on that node? Cross-node plugins see the edit here.
    fn fits_without(&mut self, pod: &Arc<PodInfo>, c: &Candidate) -> bool {
        let mut edits = WhatIf::default();
        for key in c.victims.iter().flat_map(|u| u.keys()) {
            let _ = self.cache.what_if_remove(key, &mut edits);
        }
        let going: Vec<PodKey> = self
            .cache
            .nodes()
            .get(c.node)
            .map(|n| {
                self.going_below(n, pod.priority)
                    .map(|p| p.key.clone())
                    .collect()
            })
            .unwrap_or_default();
        for key in &going {
            let _ = self.cache.what_if_remove(key, &mut edits);
        }
        let fits = match self.profiles.get_mut(&pod.scheduler_name) {
            Some(profile) => {
                let snapshot = Snapshot::of_cache(&self.cache);
                super::cycle::schedule_on(&mut profile.framework, pod, &snapshot, c.node).is_ok()
            }
            None => false,
        };
        self.cache.revert(edits);
        fits
    }

    /// Deletes every victim (once: a pod already going is left alone),
    /// with the events that name the preemptor, and tells each victim
    /// gang why it lost its members.
    pub(super) fn evict(
        &mut self,
        victims: &[VictimUnit],
        (preemptor, by): (&str, QueueGroup),
        preemptor_kind: &'static str,
        scheduler: &str,
        node: &str,
    ) {
        let message = format!("{scheduler}: preempting to accommodate a higher priority pod");
        let mut count = 0usize;
        for unit in victims {
            let why: Arc<str> = Arc::from(unit.why_evicted());
            let victim_kind = if unit.gang.is_some() { "gang" } else { "pod" };
            let n = self
                .stats
                .preemptions_by_kind
                .entry((preemptor_kind, victim_kind))
                .or_default();
            *n = n.saturating_add(1);
            if let Some(group) = &unit.gang {
                let text = format!(
                    "preempted by {preemptor}: all {} running members evicted (a gang is disrupted whole)",
                    unit.pods.len()
                );
                self.outbox.event(
                    ObjectRef::Group(group.clone()),
                    EventType::Warning,
                    "Preempted",
                    text.clone(),
                );
                self.outbox.group_preempted(group, text);
            }
            for v in &unit.pods {
                if self.is_going(v) {
                    continue;
                }
                count = count.saturating_add(1);
                self.preemptions.evicting(v, by.clone(), why.clone());
                self.outbox.preempt(
                    v.key.clone(),
                    v.uid.clone(),
                    preemptor.to_string(),
                    message.clone(),
                );
                let on = v.node_name.as_deref().unwrap_or(node);
                self.outbox.event(
                    self.pod_ref(&v.key),
                    EventType::Normal,
                    "Preempted",
                    format!("Preempted by {preemptor} on node {on}"),
                );
            }
        }
        self.sample(super::Sample::PreemptionVictims(count));
    }

    /// Nominates `pod` to `node`, taking the nomination of any
    /// lower-priority pod there (its room is now the preemptor's).
    pub(super) fn nominate(&mut self, pod: &Arc<PodInfo>, node: Arc<str>) {
        let (taken, moved) = self.preemptions.nominate(pod, node.clone());
        for old in taken {
            self.outbox
                .nominate(old.pod.key.clone(), old.pod.uid.clone(), None);
        }
        if moved {
            self.outbox
                .nominate(pod.key.clone(), pod.uid.clone(), Some(node));
        }
    }

    /// The pod was retried and neither fits nor finds anything to preempt:
    /// its nomination no longer holds room for it.
    pub(super) fn give_up_nomination(&mut self, pod: &PodInfo) {
        if let Some(old) = self.preemptions.give_up(&pod.key) {
            self.stats.nominations_released += 1;
            self.outbox
                .nominate(pod.key.clone(), old.pod.uid.clone(), None);
        }
    }
}

/// Candidates from node `start` on, rotating over `n` nodes, until `want`
/// are found (`at` says whether node `i` is one); with how many nodes were
/// visited (kube-scheduler's `DryRunPreemption` offset).
pub(super) fn rotate<C>(
    n: usize,
    start: usize,
    want: usize,
    mut at: impl FnMut(usize) -> Option<C>,
) -> (Vec<C>, usize) {
    let mut out = Vec::new();
    let mut visited = 0;
    for k in 0..n {
        if out.len() >= want {
            break;
        }
        visited += 1;
        out.extend(at((start + k) % n));
    }
    (out, visited)
}

/// Why the first victim units could not be spared, for the preemptor's
/// event (an event's message is short: three named, then a count).
pub(super) fn victim_reasons(victims: &[VictimUnit]) -> String {
    const NAMED: usize = 3;
    let mut text: Vec<String> = victims
        .iter()
        .take(NAMED)
        .map(VictimUnit::why_evicted)
        .collect();
    if victims.len() > NAMED {
        text.push(format!("{} more unit(s) likewise", victims.len() - NAMED));
    }
    text.join("; ")
}

/// Up to five victims by name, for the preemptor's event.
pub(super) fn victim_list(victims: &[VictimUnit]) -> String {
    let names: Vec<String> = victims
        .iter()
        .flat_map(|u| u.pods.iter())
        .map(|p| p.key.to_string())
        .collect();
    match names.len() {
        0..=5 => names.join(", "),
        n => format!(
            "{} and {} more",
            names.iter().take(5).cloned().collect::<Vec<_>>().join(", "),
            n - 5
        ),
    }
}
