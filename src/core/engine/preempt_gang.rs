//! Gang preemption: a gang that fits nowhere makes room by evicting
//! lower-priority work — only after planning the whole gang (its quorum,
//! with its topology) on the node table with the victims taken off, so it
//! never evicts for a gang that would still not fit.
//!
//! Unlike kube-scheduler 1.37, which evaluates one placement for a pod
//! group, every placement try of the gang (the whole cluster, or each
//! candidate domain of its topology level) is a candidate. In each, the
//! nodes cheapest to clear are tried first, then all of the try's nodes:
//! the lower-priority pods in the way there are taken off (whole gangs
//! where a member may not go alone, `preemption::units_of`), the gang is
//! planned once and its victims reprieved in place, most important and
//! budget-protected first (`reprieve_in_place`). Gangs that need devices,
//! and plans the in-place reprieve cannot verify, are re-planned for each
//! reprieve instead. The cheapest candidate (`preemption::Cost`: budget
//! violations, priorities, gangs broken, pods) wins: for a rack-constrained
//! gang, the rack cheapest to free.
//!
//! The victims are deleted and every planned member is nominated to its
//! node; the gang waits (unschedulable, retried when pods are deleted) and
//! is planned afresh once its victims are gone, with the nominated room
//! held for it against less important pods.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use super::gang_cycle::{Batches, Plan};
use super::preempt::victim_list;
use super::reprieve_in_place::InPlace;
use super::{Engine, EventType, ObjectRef};
use crate::cache::WhatIf;
use crate::framework::lifecycle::Refusal;
use crate::framework::{EventSet, QueueingEvent};
use crate::gang::PlacementTry;
use crate::model::{GroupKey, PodInfo, PreemptionPolicy};
use crate::preemption::{Cost, VictimUnit, reprieve_order, units_of};
use crate::queue::{QueueGroup, Requeue};

/// Reprieve steps (one gang plan each) per candidate; the units left when
/// they run out stay victims (the choice is then not minimal, but the
/// cycle's cost stays bounded).
const MAX_REPRIEVE_STEPS: usize = 32;

/// Placements evaluated in full per gang preemption; when a required level
/// has more domains, the most promising are kept (`shortlist`).
const MAX_CANDIDATE_PLACEMENTS: usize = 8;

/// What gang preemption came to.
pub(super) enum GangPreemption {
    /// Victims chosen (or already terminating): the members were parked.
    Done,
    /// No preemption: the gang is refused as planned, with this note.
    NotDone(Option<String>),
}

/// One placement try where evicting `victims` lets the gang plan.
pub(super) struct GangCandidate {
    pub label: String,
    pub victims: Vec<VictimUnit>,
    pub cost: Cost,
    /// Each planned member and its node.
    pub plan: Vec<(Arc<PodInfo>, Arc<str>)>,
}

/// The gang a preemption makes room for.
pub(super) struct Preemptor<'a> {
    pub group: &'a GroupKey,
    pub members: &'a [Arc<PodInfo>],
    /// Members to place (its quorum, less those already holding a node).
    pub needed: usize,
    pub min_count: u32,
    pub priority: i32,
}

impl Engine {
    pub(super) fn preempt_for_gang(
        &mut self,
        group: &GroupKey,
        members: &[Arc<PodInfo>],
        needed: usize,
        min_count: u32,
        tries: &[PlacementTry],
        now: Instant,
    ) -> GangPreemption {
        let Some(first) = members.first() else {
            return GangPreemption::NotDone(None);
        };
        let enabled = self
            .profiles
            .get(&first.scheduler_name)
            .is_some_and(|p| p.preemption.is_some());
        // A composite's child waits at a barrier for its siblings:
        // evicting for it alone could be for nothing.
        if !enabled || self.gang.barrier_scope(group).is_some() {
            return GangPreemption::NotDone(None);
        }
        let def = self.gang.def(&group.definition);
        let never = def.and_then(|d| d.extras.preemption_policy) == Some(PreemptionPolicy::Never)
            || members
                .iter()
                .any(|m| m.preemption_policy == PreemptionPolicy::Never);
        if never {
            return GangPreemption::NotDone(Some(
                "preemption: not eligible due to preemptionPolicy=Never.".into(),
            ));
        }
        // A gang's priority is its definition's, else its members'.
        let priority = def
            .and_then(|d| d.priority)
            .unwrap_or_else(|| members.iter().map(|m| m.priority).max().unwrap_or(0));
        let terminating = self.terminating_for_gang(members, priority);
        if terminating > 0 {
            let message = format!(
                "{group} waits for {terminating} preempted pod(s) to terminate on its nominated nodes"
            );
            self.park_members(members, &message, now);
            return GangPreemption::Done;
        }
        self.stats.preemption_attempts += 1;
        let tries = self.shortlist(tries, &first.requests, needed, priority);
        let gang = Preemptor {
            group,
            members,
            needed,
            min_count,
            priority,
        };
        let mut candidates = Vec::new();
        for t in &tries {
            if let Some(c) = self.gang_candidate(&gang, t) {
                candidates.push(c);
            }
        }
        let Some(best) = Cost::cheapest(candidates.iter().map(|c| &c.cost)) else {
            for m in members {
                self.give_up_nomination(m);
            }
            return GangPreemption::NotDone(Some(format!(
                "preemption: no placement of the gang fits even with every lower-priority pod (priority below {priority}) evicted."
            )));
        };
        let chosen = candidates.swap_remove(best);
        self.execute_gang_preemption(group, members, chosen, now);
        GangPreemption::Done
    }

    /// The placements worth evaluating, at most
    /// [`MAX_CANDIDATE_PLACEMENTS`]: those whose nodes could hold `needed`
    /// members (one like `per_member` each) were every lower-priority pod
    /// gone, the ones whose most important such pod is least important
    /// first, then those with fewer such pods; ties keep the given order.
    fn shortlist(
        &self,
        tries: &[PlacementTry],
        per_member: &crate::model::Resources,
        needed: usize,
        priority: i32,
    ) -> Vec<PlacementTry> {
        if tries.len() <= MAX_CANDIDATE_PLACEMENTS {
            return tries.to_vec();
        }
        let needed = u64::try_from(needed).unwrap_or(u64::MAX);
        let mut ranked: Vec<((i32, usize), usize)> = Vec::new();
        for (at, t) in tries.iter().enumerate() {
            let Some(r) = &t.restriction else {
                ranked.push(((i32::MIN, 0), at));
                continue;
            };
            let (mut room, mut top, mut count) = (0u64, i32::MIN, 0usize);
            for node in r.nodes.iter().filter_map(|&i| self.cache.nodes().get(i)) {
                let (free, (_, highest, _, pods)) = self.clearing(node, priority);
                top = top.max(highest);
                count = count.saturating_add(pods);
                room = room.saturating_add(crate::gang::copies_fitting(&free, per_member));
            }
            if room >= needed {
                ranked.push(((top, count), at));
            }
        }
        ranked.sort();
        ranked
            .into_iter()
            .take(MAX_CANDIDATE_PLACEMENTS)
            .filter_map(|(_, at)| tries.get(at).cloned())
            .collect()
    }

    /// Lower-priority pods still terminating (deleted, or preempted by us)
    /// on the nodes the gang's members are nominated to.
    fn terminating_for_gang(&self, members: &[Arc<PodInfo>], priority: i32) -> usize {
        let nodes: HashSet<Arc<str>> = members
            .iter()
            .filter_map(|m| self.preemptions.nomination(&m.key).map(|n| n.node.clone()))
            .collect();
        nodes
            .iter()
            .filter_map(|n| self.cache.node(n))
            .flat_map(|n| self.going_below(n, priority))
            .count()
    }

    /// Finds the victims that let the gang plan within `t`, fewest first
    /// (see the module doc); `None` when even evicting every
    /// lower-priority pod in reach would not let it meet its quorum.
    fn gang_candidate(&mut self, gang: &Preemptor, t: &PlacementTry) -> Option<GangCandidate> {
        // First on the nodes cheapest to clear alone, in place.
        if self.reprieves_in_place(gang)
            && let Some(narrow) = self.cheapest_nodes(gang, t)
            && let Some(c) = self.candidate_in(gang, &narrow, true)
        {
            return Some(c);
        }
        self.candidate_in(gang, t, false)
    }

    /// [`Self::gang_candidate`] within `t`'s nodes; `in_place_only`: `None`
    /// rather than re-planning when the in-place reprieve does not verify.
    fn candidate_in(
        &mut self,
        gang: &Preemptor,
        t: &PlacementTry,
        in_place_only: bool,
    ) -> Option<GangCandidate> {
        let scope: Vec<usize> = match &t.restriction {
            Some(r) => r.nodes.clone(),
            None => (0..self.cache.nodes().len()).collect(),
        };
        let mut edits = WhatIf::default();
        let mut in_way = Vec::new();
        for &i in &scope {
            let Some(node) = self.cache.nodes().get(i) else {
                continue;
            };
            let going: Vec<_> = self
                .going_below(node, gang.priority)
                .map(|p| p.key.clone())
                .collect();
            in_way.extend(self.in_the_way(node, gang.priority));
            for key in going {
                let _ = self.cache.what_if_remove(&key, &mut edits);
            }
        }
        let units = units_of(in_way, gang.priority, &|p| self.gang_facts(p));
        if units.is_empty() && edits.is_empty() {
            // Nothing to take off: the plan that failed would fail again.
            return None;
        }
        for key in units.iter().flat_map(|u| u.keys()) {
            let _ = self.cache.what_if_remove(key, &mut edits);
        }
        let result = self.choose_gang_victims(gang, t, units, &mut edits, in_place_only);
        self.cache.revert(edits);
        result
    }

    /// With every unit of `units` taken off (in `edits`), plans the gang,
    /// keeps only the units it needs and reprieves what it can.
    fn choose_gang_victims(
        &mut self,
        gang: &Preemptor,
        t: &PlacementTry,
        units: Vec<VictimUnit>,
        edits: &mut WhatIf,
        in_place_only: bool,
    ) -> Option<GangCandidate> {
        // Like members' per-node answers, for this candidate's re-plans
        // (a node the edits change is evaluated afresh).
        let mut batches = Batches::take_fresh(&mut self.batches);
        let result = self.choose_with(gang, t, units, edits, &mut batches, in_place_only);
        self.batches = batches;
        result
    }

    /// `choose_gang_victims` with the memo tables lent to it: the gang is
    /// planned once and reprieved around in place (`reprieve_in_place`),
    /// else re-planned for each reprieve.
    fn choose_with(
        &mut self,
        gang: &Preemptor,
        t: &PlacementTry,
        units: Vec<VictimUnit>,
        edits: &mut WhatIf,
        batches: &mut Batches,
        in_place_only: bool,
    ) -> Option<GangCandidate> {
        let how = match self.reprieves_in_place(gang) {
            true => match self.reprieve_in_place(gang, t, &units, edits, batches) {
                InPlace::Chosen(c) => {
                    self.count_reprieve("in_place");
                    return Some(c);
                }
                InPlace::NoPlan => return None,
                InPlace::Unverified if in_place_only => return None,
                InPlace::Unverified => "replanned",
            },
            false => "devices",
        };
        self.count_reprieve(how);
        self.choose_by_replanning(gang, t, units, edits, batches)
    }

    fn count_reprieve(&mut self, how: &'static str) {
        *self.stats.gang_reprieves.entry(how).or_default() += 1;
    }

    /// Plans the gang, then reprieves one unit at a time (at most
    /// [`MAX_REPRIEVE_STEPS`]), re-planning the whole gang for each so the
    /// plan may move away from a unit put back.
    fn choose_by_replanning(
        &mut self,
        gang: &Preemptor,
        t: &PlacementTry,
        units: Vec<VictimUnit>,
        edits: &mut WhatIf,
        batches: &mut Batches,
    ) -> Option<GangCandidate> {
        self.plan_to_quorum(gang, t, batches)?;
        // Every unit may be reprieved, budget-protected and most important
        // first, so the plan can move away from them (units not under the
        // final plan are put back below, whether or not their turn came).
        let mut victims = Vec::new();
        let mut violations = 0usize;
        let mut steps = 0usize;
        for (unit, violates) in reprieve_order(units, &self.cache.facts().budgets) {
            if steps < MAX_REPRIEVE_STEPS {
                steps += 1;
                for key in unit.keys() {
                    self.cache.what_if_restore(key, edits);
                }
                if self.plan_to_quorum(gang, t, batches).is_some() {
                    continue;
                }
                for key in unit.keys() {
                    let _ = self.cache.what_if_remove(key, edits);
                }
            }
            if violates {
                violations = violations.saturating_add(unit.pods.len());
            }
            victims.push(unit);
        }
        // The plan the victims make room for (the last reprieve may have
        // been tried on a different table).
        let mut placed = self.plan_to_quorum(gang, t, batches)?;
        // Victims with no pod under a planned member are not in the way:
        // put them back, and keep that only if the gang still plans.
        let used: HashSet<Arc<str>> = placed.iter().map(|(_, node)| node.clone()).collect();
        let under = |u: &VictimUnit| {
            u.pods
                .iter()
                .any(|p| p.node_name.as_ref().is_some_and(|n| used.contains(n)))
        };
        let spare: Vec<VictimUnit> = victims.iter().filter(|u| !under(u)).cloned().collect();
        if !spare.is_empty() {
            for key in spare.iter().flat_map(|u| u.keys()) {
                self.cache.what_if_restore(key, edits);
            }
            if let Some(without_spare) = self.plan_to_quorum(gang, t, batches) {
                placed = without_spare;
                let back: HashSet<&crate::model::PodKey> =
                    spare.iter().flat_map(|u| u.keys()).collect();
                victims.retain(|u| !u.keys().any(|k| back.contains(k)));
                let left: usize = victims.iter().map(|u| u.pods.len()).sum();
                violations = violations.min(left);
            } else {
                for key in spare.iter().flat_map(|u| u.keys()) {
                    let _ = self.cache.what_if_remove(key, edits);
                }
            }
        }
        let cost = Cost::of(&victims, violations);
        Some(GangCandidate {
            label: t.label.clone(),
            victims,
            cost,
            plan: placed,
        })
    }

    /// Plans the gang within `t` on the node table as it stands (victims
    /// taken off by the caller's edits) and takes the plan back: each
    /// planned member and its node when the plan meets the quorum.
    fn plan_to_quorum(
        &mut self,
        gang: &Preemptor,
        t: &PlacementTry,
        batches: &mut Batches,
    ) -> Option<Vec<(Arc<PodInfo>, Arc<str>)>> {
        let plan: Plan = self.plan_try(gang.members, gang.needed, t, batches);
        let fits = self
            .gang
            .placement_feasible(&self.cache, gang.group, gang.min_count);
        let placed = fits.then(|| {
            plan.placed
                .iter()
                .map(|p| (p.pod.clone(), p.node.clone()))
                .collect()
        });
        self.undo(&plan);
        placed
    }

    fn execute_gang_preemption(
        &mut self,
        group: &GroupKey,
        members: &[Arc<PodInfo>],
        chosen: GangCandidate,
        now: Instant,
    ) {
        let preemptor = format!("{group}");
        let scheduler = members
            .first()
            .map(|m| m.scheduler_name.clone())
            .unwrap_or_else(|| Arc::from(""));
        let evicted: usize = chosen.victims.iter().map(|u| u.pods.len()).sum();
        let gangs = chosen.victims.iter().filter(|u| u.gang.is_some()).count();
        let within = match chosen.label.as_str() {
            "" => String::new(),
            l => format!(" in {l}"),
        };
        let unit = QueueGroup::Group(group.clone());
        self.evict(&chosen.victims, (&preemptor, unit), "gang", &scheduler, "");
        for (pod, node) in &chosen.plan {
            self.nominate(pod, node.clone());
        }
        if evicted > 0 {
            self.outbox.event(
                ObjectRef::Group(group.clone()),
                EventType::Normal,
                "Preempting",
                format!(
                    "preempting {evicted} pod(s) ({gangs} gang(s) whole){within}: {}",
                    victim_list(&chosen.victims)
                ),
            );
        }
        let message = format!(
            "{group} cannot be placed as the cluster stands; preemption: {} member(s) nominated{within} after preempting {evicted} pod(s) ({gangs} gang(s) whole); it is retried when they are gone",
            chosen.plan.len()
        );
        self.park_members(members, &message, now);
    }

    /// The members wait, unschedulable, for pods to be deleted (which
    /// retries them); no group backoff, since their room is being made.
    fn park_members(&mut self, members: &[Arc<PodInfo>], message: &str, now: Instant) {
        for pod in members {
            self.stats.attempts_unschedulable += 1;
            self.report_refusal(
                &pod.key,
                &Refusal::new("FailedScheduling", message.to_string()),
                false,
            );
            let order = self.gang.order_key(pod);
            self.queue.requeue(
                pod.clone(),
                order,
                Requeue::Unschedulable(
                    EventSet::ANY_NODE.union(EventSet::of(&[QueueingEvent::PodRemoved])),
                ),
                now,
            );
        }
    }
}
