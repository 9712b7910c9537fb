//! Gang preemption: a gang that fits nowhere makes room by evicting
//! lower-priority work — only after planning the whole gang (its quorum,
//! with its topology) on the node table with the victims taken off, so it
//! never evicts for a gang that would still not fit.
//!
//! Unlike kube-scheduler 1.37, which evaluates one placement for a pod
//! group, every placement try of the gang (the whole cluster, or each
//! candidate domain of its topology level) is a candidate. In each, the
//! lower-priority pods in the way are grouped into victim units (whole
//! gangs where a member may not go alone, `preemption::units_of`); the
//! cheapest units that could make room are taken off first, chosen two
//! ways and the cheaper result kept (`units_in_cost_order`,
//! `units_node_by_node`; priced per unit: a gang evicted whole costs all
//! its pods), else every unit; the gang is planned and the units reprieved,
//! most important and budget-protected first, each put back whenever any
//! plan of the gang in the try still fits (`reprieve`). The cheapest
//! candidate (`preemption::Cost`: budget violations, priorities, pods,
//! gangs broken) wins: for a rack-constrained gang, the rack cheapest to
//! free. Its victims are then offered to every other try once more
//! (`spare_elsewhere`), so no victim is evicted that any placement of the
//! gang could do without (invariant I11).
//!
//! The victims are deleted and every planned member is nominated to its
//! node; the gang waits (unschedulable, retried when pods are deleted) and
//! is planned afresh once its victims are gone, with the nominated room
//! held for it against less important pods.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use super::gang_cycle::Batches;
use super::preempt::{victim_list, victim_reasons};
use super::{Engine, EventType, ObjectRef};
use crate::cache::WhatIf;
use crate::framework::lifecycle::Refusal;
use crate::framework::{EventSet, QueueingEvent};
use crate::gang::PlacementTry;
use crate::model::{GroupKey, PodInfo, PreemptionPolicy, Resources};
use crate::preemption::{Cost, GangFacts, VictimUnit, reprieve_order, units_of};
use crate::queue::{QueueGroup, Requeue};

/// Placements evaluated in full per gang preemption; when a required level
/// has more domains, the most promising are kept (`shortlist`). Whatever
/// is chosen, its victims are offered to every placement afterwards
/// (`spare_elsewhere`), so the bound trades only how cheap the choice is
/// among domains, never minimality.
const MAX_CANDIDATE_PLACEMENTS: usize = 4;

/// What evicting units costs, in `Cost`'s order: whether a budget
/// protects one of their pods, their highest priority, their pods.
type NodePrice = (bool, i32, usize);

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
    /// The least any member asks of a node (`room_requests`, resource by
    /// resource): room bounds counted with it are optimistic for every
    /// member, so they never rule out a plan that would fit.
    pub least: crate::model::Resources,
    /// What each gang in the way is (`Engine::gang_facts`), asked once per
    /// preemption: every placement try meets the same gangs, and what-if
    /// edits change no gang's membership.
    gangs: RefCell<HashMap<GroupKey, Option<GangFacts>>>,
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
        let all_tries = tries;
        let tries = self.shortlist(tries, &first.room_requests(), needed, priority);
        let gang = Preemptor {
            group,
            members,
            needed,
            min_count,
            priority,
            least: least_of(members),
            gangs: RefCell::default(),
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
        let chosen = self.spare_elsewhere(&gang, all_tries, chosen);
        self.execute_gang_preemption(group, members, chosen, now);
        GangPreemption::Done
    }

    /// The placements worth evaluating, at most
    /// [`MAX_CANDIDATE_PLACEMENTS`]: those whose nodes could hold `needed`
    /// members (one like `per_member` each) were every lower-priority pod
    /// gone, ranked by what clearing their cheapest nodes would evict: the
    /// nodes that would hold the members, fewest such pods first, are
    /// taken until they would hold `needed`; the placements whose most
    /// important pod among them is least important come first, then those
    /// with fewer pods on them; ties keep the given order.
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
            let mut nodes: Vec<(usize, i32, u64)> = r
                .nodes
                .iter()
                .filter_map(|&i| self.cache.nodes().get(i))
                .map(|node| {
                    let (free, highest, pods) = self.clearing(node, priority);
                    (
                        pods,
                        highest,
                        crate::gang::copies_fitting(&free, per_member),
                    )
                })
                .filter(|&(_, _, copies)| copies > 0)
                .collect();
            nodes.sort_unstable();
            let (mut room, mut top, mut count) = (0u64, i32::MIN, 0usize);
            for (pods, highest, copies) in nodes {
                if room >= needed {
                    break;
                }
                top = top.max(highest);
                count = count.saturating_add(pods);
                room = room.saturating_add(copies);
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

    /// What a node would offer with every pod below `priority` gone (the
    /// pods already going count as gone), and the highest priority and
    /// number of those not yet going.
    fn clearing(
        &self,
        node: &crate::cache::NodeState,
        priority: i32,
    ) -> (crate::model::Resources, i32, usize) {
        // Counted from what the pods use, not from `free`: a node holding
        // a nominated pod beside the victims being cleared for it is
        // overcommitted until they go, and its free room, floored at none,
        // would come back as room the nominated pod holds.
        let mut used = node.requested.clone();
        let (mut highest, mut pods) = (i32::MIN, 0usize);
        for p in node.pods.iter().filter(|p| p.priority < priority) {
            used.sub(&p.requests);
            if !self.is_going(p) {
                highest = highest.max(p.priority);
                pods += 1;
            }
        }
        let mut free = node.info.allocatable.clone();
        free.sub(&used);
        (free, highest, pods)
    }

    /// Whether a PodDisruptionBudget with no disruption left covers `p`.
    fn protected(&self, p: &PodInfo) -> bool {
        self.cache
            .facts()
            .budgets
            .in_namespace(&p.key.namespace)
            .iter()
            .any(|b| b.disruptions_allowed <= 0 && b.covers(&p.key.namespace, &p.labels))
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

    /// Finds the victims that let the gang plan within `t` (see the module
    /// doc); `None` when even evicting every lower-priority pod in reach
    /// would not let it meet its quorum.
    fn gang_candidate(&mut self, gang: &Preemptor, t: &PlacementTry) -> Option<GangCandidate> {
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
        let units = units_of(in_way, gang.priority, &|p| self.gang_facts_once(gang, p));
        if units.is_empty() && edits.is_empty() {
            // Nothing to take off: the plan that failed would fail again.
            return None;
        }
        // Like members' per-node answers, for this candidate's plans (a
        // node the edits change is evaluated afresh).
        let mut batches = Batches::take_fresh(&mut self.batches);
        let result = match super::cheapest_victims::searchable(&units) {
            false => self.candidate_from(gang, t, &scope, units, &mut edits, &mut batches),
            true => self
                .candidate_from(gang, t, &scope, units.clone(), &mut edits, &mut batches)
                .map(|greedy| {
                    for key in units.iter().flat_map(|u| u.keys()) {
                        self.cache.what_if_restore(key, &mut edits);
                    }
                    self.cheaper_victims(gang, t, &units, greedy, &mut edits, &mut batches)
                }),
        };
        self.batches = batches;
        self.cache.revert(edits);
        result
    }

    /// The cheapest units that could make room first, reprieved — two
    /// selections, each judged by resources alone, the cheaper candidate
    /// kept (`units_in_cost_order`, `units_node_by_node`); when the gang
    /// plans with neither, every unit.
    fn candidate_from(
        &mut self,
        gang: &Preemptor,
        t: &PlacementTry,
        scope: &[usize],
        units: Vec<VictimUnit>,
        edits: &mut WhatIf,
        batches: &mut Batches,
    ) -> Option<GangCandidate> {
        let mut selections: Vec<Vec<usize>> = Vec::new();
        for sel in [
            self.units_in_cost_order(gang, scope, &units),
            self.units_node_by_node(gang, scope, &units),
        ]
        .into_iter()
        .flatten()
        {
            let sel = self.trimmed(gang, scope, &units, sel);
            if sel.len() < units.len() && !selections.contains(&sel) {
                selections.push(sel);
            }
        }
        let mut best: Option<GangCandidate> = None;
        for sel in selections {
            let chosen: Vec<VictimUnit> =
                sel.iter().filter_map(|&i| units.get(i).cloned()).collect();
            for key in chosen.iter().flat_map(|u| u.keys()) {
                let _ = self.cache.what_if_remove(key, edits);
            }
            let keys: Vec<_> = chosen.iter().flat_map(|u| u.keys().cloned()).collect();
            let found = self.reprieve_units(gang, t, chosen, edits, batches);
            for key in &keys {
                self.cache.what_if_restore(key, edits);
            }
            if let Some(c) = found
                && best
                    .as_ref()
                    .is_none_or(|b| c.cost.cmp_cost(&b.cost).is_lt())
            {
                best = Some(c);
            }
        }
        if best.is_some() {
            return best;
        }
        for key in units.iter().flat_map(|u| u.keys()) {
            let _ = self.cache.what_if_remove(key, edits);
        }
        self.reprieve_units(gang, t, units, edits, batches)
    }

    /// `gang_facts`, remembered for the length of one preemption.
    fn gang_facts_once(&self, gang: &Preemptor, p: &PodInfo) -> Option<(GroupKey, GangFacts)> {
        let group = p.group.key()?;
        if let Some(known) = gang.gangs.borrow().get(group) {
            return known.clone().map(|f| (group.clone(), f));
        }
        let found = self.gang_facts(p);
        gang.gangs
            .borrow_mut()
            .insert(group.clone(), found.as_ref().map(|(_, f)| f.clone()));
        found
    }

    /// Free room per node of `scope` as the table stands, and how many
    /// members like the least one it holds in all.
    pub(super) fn room_by_node(
        &self,
        gang: &Preemptor,
        scope: &[usize],
    ) -> (HashMap<usize, NodeRoom>, u64) {
        let nodes = self.cache.nodes();
        let mut free = HashMap::new();
        let mut room = 0u64;
        for &i in scope {
            if let Some(node) = nodes.get(i) {
                let mut r = NodeRoom {
                    allocatable: node.info.allocatable.clone(),
                    used: node.requested.clone(),
                    copies: 0,
                };
                r.copies = r.count(&gang.least);
                room = room.saturating_add(r.copies);
                free.insert(i, r);
            }
        }
        (free, room)
    }

    /// Takes `unit` off the room count (its pods inside `scope` only);
    /// returns the room it adds.
    pub(super) fn take_off(
        &self,
        gang: &Preemptor,
        unit: &VictimUnit,
        free: &mut HashMap<usize, NodeRoom>,
    ) -> u64 {
        self.shift(gang, unit, free, Resources::sub)
    }

    /// Puts `unit` back on the room count (its pods inside the scope of
    /// `free` only); returns the room it takes.
    fn put_on(
        &self,
        gang: &Preemptor,
        unit: &VictimUnit,
        free: &mut HashMap<usize, NodeRoom>,
    ) -> u64 {
        self.shift(gang, unit, free, Resources::add)
    }

    /// Applies `change` to what each node of `free` that `unit`'s pods sit
    /// on uses, by their requests; returns how far the room moved.
    fn shift(
        &self,
        gang: &Preemptor,
        unit: &VictimUnit,
        free: &mut HashMap<usize, NodeRoom>,
        change: fn(&mut Resources, &Resources),
    ) -> u64 {
        let mut moved = 0u64;
        for p in &unit.pods {
            let Some(r) = p
                .node_name
                .as_deref()
                .and_then(|n| self.cache.node_index(n))
                .and_then(|i| free.get_mut(&i))
            else {
                continue;
            };
            change(&mut r.used, &p.requests);
            let now = r.count(&gang.least);
            moved = moved.saturating_add(now.abs_diff(r.copies));
            r.copies = now;
        }
        moved
    }

    /// `taken` less each unit the room count does without, most important
    /// first (the reprieve's order): units a selection took on its way to
    /// the room it needed that later units made needless (taking units one
    /// by one in cost order, a node is freed only by its last unit, and
    /// the units taken before it on other nodes free nothing whole).
    /// Judged by resources alone, as the selections are; the reprieve then
    /// checks what is left against real plans.
    fn trimmed(
        &self,
        gang: &Preemptor,
        scope: &[usize],
        units: &[VictimUnit],
        mut taken: Vec<usize>,
    ) -> Vec<usize> {
        let needed = u64::try_from(gang.needed).unwrap_or(u64::MAX);
        let (mut free, mut room) = self.room_by_node(gang, scope);
        for &at in &taken {
            room = room.saturating_add(self.take_off(gang, &units[at], &mut free));
        }
        // Units are listed most important first (`units_of`).
        taken.sort_unstable();
        taken.retain(|&at| {
            let lost = self.put_on(gang, &units[at], &mut free);
            if room.saturating_sub(lost) >= needed {
                room = room.saturating_sub(lost);
                false
            } else {
                self.take_off(gang, &units[at], &mut free);
                true
            }
        });
        taken
    }

    /// The units, in `Cost`'s order — one a budget protects last, then the
    /// lowest priority, the fewest pods, the youngest, then where they sit
    /// — taken until the room they free would hold the members to place;
    /// `None` when all of them would not. A unit counts only for its pods
    /// inside `scope`; a gang evicted whole costs all its pods, wherever
    /// they are, and frees room on every node it runs on (two gangs
    /// interleaved over four nodes: one of them makes room on all four).
    fn units_in_cost_order(
        &self,
        gang: &Preemptor,
        scope: &[usize],
        units: &[VictimUnit],
    ) -> Option<Vec<usize>> {
        let (mut free, mut room) = self.room_by_node(gang, scope);
        let needed = u64::try_from(gang.needed).unwrap_or(u64::MAX);
        let mut order: Vec<usize> = (0..units.len()).collect();
        order.sort_by_cached_key(|&at| {
            let u = &units[at];
            (
                u.pods.iter().any(|p| self.protected(p)),
                u.priority,
                u.pods.len(),
                Reverse(u.started_ms),
                at,
            )
        });
        let mut taken = Vec::new();
        for at in order {
            if room >= needed {
                break;
            }
            taken.push(at);
            room = room.saturating_add(self.take_off(gang, &units[at], &mut free));
        }
        (room >= needed).then_some(taken)
    }

    /// Node by node: the node whose units not yet taken cost least (in
    /// `Cost`'s order: a budget-protected one, the highest priority, the
    /// pods) has them all taken, until the room freed would hold the
    /// members to place. Units shared by nodes are paid once, so nodes
    /// whose pods belong to gangs already taken come next: where whole
    /// nodes must be freed of gangs spread over them, this frees fewer
    /// gangs than taking units one by one.
    fn units_node_by_node(
        &self,
        gang: &Preemptor,
        scope: &[usize],
        units: &[VictimUnit],
    ) -> Option<Vec<usize>> {
        let (mut free, mut room) = self.room_by_node(gang, scope);
        let needed = u64::try_from(gang.needed).unwrap_or(u64::MAX);
        // Each unit's price, and the nodes of `scope` it sits on.
        let price_of: Vec<NodePrice> = units
            .iter()
            .map(|u| {
                (
                    u.pods.iter().any(|p| self.protected(p)),
                    u.priority,
                    u.pods.len(),
                )
            })
            .collect();
        let mut unit_nodes: Vec<Vec<usize>> = vec![Vec::new(); units.len()];
        let mut on_node: HashMap<usize, Vec<usize>> = HashMap::new();
        for (at, u) in units.iter().enumerate() {
            for p in &u.pods {
                if let Some(i) = p
                    .node_name
                    .as_deref()
                    .and_then(|n| self.cache.node_index(n))
                    && free.contains_key(&i)
                    && !unit_nodes[at].contains(&i)
                {
                    unit_nodes[at].push(i);
                    on_node.entry(i).or_default().push(at);
                }
            }
        }
        let mut is_taken = vec![false; units.len()];
        let node_price = |i: usize, is_taken: &[bool]| {
            let mut price = (false, i32::MIN, 0usize);
            for &at in on_node.get(&i).into_iter().flatten() {
                if !is_taken[at] {
                    let (protected, priority, pods) = price_of[at];
                    price.0 |= protected;
                    price.1 = price.1.max(priority);
                    price.2 += pods;
                }
            }
            price
        };
        // Cheapest node first; a node's price only falls as units are
        // taken, and each fall is pushed again, so an entry that no longer
        // matches its node's price is stale and skipped.
        let mut heap: BinaryHeap<Reverse<(NodePrice, usize)>> = on_node
            .keys()
            .map(|&i| Reverse((node_price(i, &is_taken), i)))
            .collect();
        let mut taken = Vec::new();
        while room < needed {
            let Reverse((price, next)) = heap.pop()?;
            if price.2 == 0 || price != node_price(next, &is_taken) {
                continue;
            }
            for &at in on_node.get(&next).into_iter().flatten() {
                if is_taken[at] {
                    continue;
                }
                is_taken[at] = true;
                taken.push(at);
                room = room.saturating_add(self.take_off(gang, &units[at], &mut free));
                for &i in &unit_nodes[at] {
                    let now = node_price(i, &is_taken);
                    if now.2 > 0 {
                        heap.push(Reverse((now, i)));
                    }
                }
            }
        }
        Some(taken)
    }

    /// Puts back each victim of `chosen` that the gang can do without in
    /// any placement try, most important first: the chosen try's reprieve
    /// kept back all it could there, but another try (another domain of
    /// the required level) may place the gang with one of them left.
    fn spare_elsewhere(
        &mut self,
        gang: &Preemptor,
        tries: &[PlacementTry],
        mut chosen: GangCandidate,
    ) -> GangCandidate {
        if tries.len() < 2 || chosen.victims.is_empty() {
            return chosen;
        }
        let mut edits = WhatIf::default();
        let going: Vec<_> = self
            .cache
            .nodes()
            .iter()
            .flat_map(|n| self.going_below(n, gang.priority))
            .map(|p| p.key.clone())
            .collect();
        for key in going
            .iter()
            .chain(chosen.victims.iter().flat_map(|u| u.keys()))
        {
            let _ = self.cache.what_if_remove(key, &mut edits);
        }
        let needed = u64::try_from(gang.needed).unwrap_or(u64::MAX);
        let mut batches = Batches::take_fresh(&mut self.batches);
        let victims = std::mem::take(&mut chosen.victims);
        let budgets = self.cache.facts().budgets.clone();
        let mut room = TryRoom::new(self, tries, &gang.least);
        let mut kept = Vec::new();
        for (unit, violates) in reprieve_order(victims, &budgets) {
            for key in unit.keys() {
                self.cache.what_if_restore(key, &mut edits);
            }
            room.update(self, &unit, &gang.least);
            let mut moved = None;
            for (at, t) in tries.iter().enumerate() {
                if room.of(at) < needed {
                    continue;
                }
                if let Ok(held) = self.hold_plan(gang, t, &mut batches) {
                    self.release(&held);
                    moved = Some((t.label.clone(), held.plan()));
                    break;
                }
            }
            match moved {
                Some((label, plan)) => {
                    self.count_reprieve(super::reprieve::Decision::Elsewhere);
                    chosen.label = label;
                    chosen.plan = plan;
                }
                None => {
                    for key in unit.keys() {
                        let _ = self.cache.what_if_remove(key, &mut edits);
                    }
                    room.update(self, &unit, &gang.least);
                    kept.push((unit, violates));
                }
            }
        }
        self.batches = batches;
        self.cache.revert(edits);
        let violations = kept
            .iter()
            .filter(|(_, v)| *v)
            .map(|(u, _)| u.pods.len())
            .sum();
        chosen.victims = kept.into_iter().map(|(u, _)| u).collect();
        chosen.cost = Cost::of(&chosen.victims, violations);
        chosen
    }

    /// How many members like `per_member` `t`'s nodes hold as they stand.
    pub(super) fn room_in(&self, t: &PlacementTry, per_member: &crate::model::Resources) -> u64 {
        let nodes = self.cache.nodes();
        let count =
            |n: &crate::cache::NodeState| crate::gang::copies_fitting(&n.free(), per_member);
        match &t.restriction {
            Some(r) => r
                .nodes
                .iter()
                .filter_map(|&i| nodes.get(i))
                .map(count)
                .fold(0u64, u64::saturating_add),
            None => nodes.iter().map(count).fold(0u64, u64::saturating_add),
        }
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
                    "preempting {evicted} pod(s) ({gangs} gang(s) whole){within}: {} ({})",
                    victim_list(&chosen.victims),
                    victim_reasons(&chosen.victims)
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

/// A node's room as the selections count it: counted from what its pods use
/// (units taken off give theirs back), not from its free room, which is
/// floored at none on a node overcommitted by a nominated pod.
pub(super) struct NodeRoom {
    allocatable: Resources,
    used: Resources,
    /// Members like the least one it holds.
    copies: u64,
}

impl NodeRoom {
    fn count(&self, least: &Resources) -> u64 {
        let mut free = self.allocatable.clone();
        free.sub(&self.used);
        crate::gang::copies_fitting(&free, least)
    }
}

/// How many members like the least one each placement try's nodes hold as
/// the table stands, kept up to date as units are put back and taken off
/// again (`spare_elsewhere` asks it of every try for every unit).
struct TryRoom {
    /// Members each node holds.
    copies: Vec<u64>,
    /// Each try's room: the sum over its nodes.
    room: Vec<u64>,
    /// The tries each node is in (a try of the whole cluster holds every
    /// node and is listed in `everywhere` instead).
    tries_of: HashMap<usize, Vec<usize>>,
    everywhere: Vec<usize>,
}

impl TryRoom {
    fn new(engine: &Engine, tries: &[PlacementTry], least: &Resources) -> Self {
        let nodes = engine.cache.nodes();
        let copies: Vec<u64> = nodes
            .iter()
            .map(|n| crate::gang::copies_fitting(&n.free(), least))
            .collect();
        let total = copies.iter().fold(0u64, |a, &c| a.saturating_add(c));
        let mut room = Vec::with_capacity(tries.len());
        let mut tries_of: HashMap<usize, Vec<usize>> = HashMap::new();
        let mut everywhere = Vec::new();
        for (at, t) in tries.iter().enumerate() {
            match &t.restriction {
                Some(r) => {
                    let mut sum = 0u64;
                    for &i in &r.nodes {
                        sum = sum.saturating_add(copies.get(i).copied().unwrap_or(0));
                        tries_of.entry(i).or_default().push(at);
                    }
                    room.push(sum);
                }
                None => {
                    everywhere.push(at);
                    room.push(total);
                }
            }
        }
        TryRoom {
            copies,
            room,
            tries_of,
            everywhere,
        }
    }

    fn of(&self, at: usize) -> u64 {
        self.room.get(at).copied().unwrap_or(0)
    }

    /// Counts again the nodes `unit`'s pods sit on.
    fn update(&mut self, engine: &Engine, unit: &VictimUnit, least: &Resources) {
        let nodes = engine.cache.nodes();
        for p in &unit.pods {
            let Some(i) = p
                .node_name
                .as_deref()
                .and_then(|n| engine.cache.node_index(n))
            else {
                continue;
            };
            let (Some(node), Some(old)) = (nodes.get(i), self.copies.get(i).copied()) else {
                continue;
            };
            let now = crate::gang::copies_fitting(&node.free(), least);
            if now == old {
                continue;
            }
            self.copies[i] = now;
            let tries = self.tries_of.get(&i).into_iter().flatten();
            for &at in tries.chain(self.everywhere.iter()) {
                if let Some(r) = self.room.get_mut(at) {
                    *r = r.saturating_add(now).saturating_sub(old);
                }
            }
        }
    }
}

/// The least any of `members` asks of a node, resource by resource (a
/// resource some member does not ask for counts as none).
fn least_of(members: &[Arc<PodInfo>]) -> crate::model::Resources {
    let mut all = members.iter().map(|m| m.room_requests());
    let Some(mut least) = all.next() else {
        return crate::model::Resources::default();
    };
    for r in all {
        least.milli_cpu = least.milli_cpu.min(r.milli_cpu);
        least.memory = least.memory.min(r.memory);
        least.ephemeral_storage = least.ephemeral_storage.min(r.ephemeral_storage);
        least.pods = least.pods.min(r.pods);
        least
            .scalar
            .retain(|name, v| r.scalar.get(name).is_some_and(|w| *w > 0) && *v > 0);
        for (name, v) in least.scalar.iter_mut() {
            *v = (*v).min(r.scalar.get(name).copied().unwrap_or(0));
        }
    }
    least
}
