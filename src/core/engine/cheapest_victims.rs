//! The exact search for the cheapest victims, where a candidate is small.
//!
//! The reprieve (`reprieve`) keeps back every unit it can, most important
//! first: its victims are minimal (none could stay), but not always the
//! cheapest set in `preemption::Cost`'s order — putting back a big unit
//! first can force two small ones out where evicting the big one alone
//! would do. When a candidate has at most [`MAX_CHOICES`] choices (a unit
//! whole, or one member of a `single`-mode gang that may lose members down
//! to its `minCount`), every set cheaper than the reprieve's is weighed,
//! cheapest first, and the first with which the preemptor places wins. A
//! set is checked on resources first (the room it frees, summed over the
//! placement's nodes), then by planning the gang on the node table with the
//! set taken off; at most [`MAX_PLANS`] plans are made, a bound counted in
//! steps, not time, so the answer does not depend on the machine. Past
//! either bound the reprieve's answer stands. A cheapest set is minimal too:
//! each of its strict subsets costs less.

use std::sync::Arc;

use super::Engine;
use super::gang_cycle::Batches;
use super::preempt_gang::{GangCandidate, Preemptor};
use crate::cache::WhatIf;
use crate::gang::PlacementTry;
use crate::model::PodInfo;
use crate::model::disruption::Budgets;
use crate::preemption::{Cost, VictimUnit, split_by_budgets};

/// Choices up to which every subset is weighed (2^12 sets).
pub(super) const MAX_CHOICES: usize = 12;

/// Plans at most per candidate.
pub(super) const MAX_PLANS: usize = 64;

/// One way to choose victims among a candidate's units: the units in the
/// importance order they came in, and for each whether (and how much of
/// it) is evicted.
struct Choices<'a> {
    units: &'a [VictimUnit],
    /// For each unit, the bits of the subset that stand for it: one bit
    /// for a unit taken whole, one per member for a `single`-mode gang.
    bits: Vec<(usize, usize)>,
    count: usize,
}

impl<'a> Choices<'a> {
    fn new(units: &'a [VictimUnit]) -> Self {
        let mut bits = Vec::with_capacity(units.len());
        let mut count = 0;
        for u in units {
            let n = match u.keep_at_least {
                Some(min) if min < u.pods.len() => u.pods.len(),
                _ => 1,
            };
            bits.push((count, n));
            count += n;
        }
        Choices { units, bits, count }
    }

    /// `mask`'s cost but for budget violations (counted as none): a bound
    /// no lower than which its exact cost can be; `None` when it would
    /// leave a gang running below its `minCount`.
    fn bound(&self, mask: u32) -> Option<Cost> {
        let mut cost = Cost {
            pdb_violations: 0,
            highest_priority: i32::MIN,
            priority_sum: 0,
            gangs_broken: 0,
            pods: 0,
            earliest_start_of_highest: i64::MAX,
        };
        let add = |p: &PodInfo, cost: &mut Cost| {
            if p.priority > cost.highest_priority {
                cost.highest_priority = p.priority;
                cost.earliest_start_of_highest = p.started_ms;
            } else if p.priority == cost.highest_priority {
                cost.earliest_start_of_highest = cost.earliest_start_of_highest.min(p.started_ms);
            }
            cost.priority_sum = cost
                .priority_sum
                .saturating_add(i64::from(p.priority) - i64::from(i32::MIN));
            cost.pods += 1;
        };
        for (u, &(first, n)) in self.units.iter().zip(&self.bits) {
            let chosen = (0..n).filter(|i| mask & (1 << (first + i)) != 0).count();
            if chosen == 0 {
                continue;
            }
            if n == 1 || chosen == n {
                cost.gangs_broken += usize::from(u.gang.is_some());
                u.pods.iter().for_each(|p| add(p, &mut cost));
                continue;
            }
            if n - chosen < u.keep_at_least.unwrap_or(n) {
                return None;
            }
            (0..n)
                .filter(|i| mask & (1 << (first + i)) != 0)
                .filter_map(|i| u.pods.get(i))
                .for_each(|p| add(p, &mut cost));
        }
        Some(cost)
    }

    /// The victim units set `mask` stands for, or `None` when it would
    /// leave a gang running below its `minCount`.
    fn victims(&self, mask: u32) -> Option<Vec<VictimUnit>> {
        let mut out = Vec::new();
        for (u, &(first, n)) in self.units.iter().zip(&self.bits) {
            let chosen: Vec<usize> = (0..n).filter(|i| mask & (1 << (first + i)) != 0).collect();
            if chosen.is_empty() {
                continue;
            }
            if n == 1 || chosen.len() == n {
                out.push(u.clone());
                continue;
            }
            let min = u.keep_at_least.unwrap_or(n);
            if n - chosen.len() < min {
                return None;
            }
            out.extend(
                chosen
                    .iter()
                    .filter_map(|&i| u.pods.get(i))
                    .map(|p| VictimUnit::of_pod(p.clone())),
            );
        }
        Some(out)
    }
}

/// Whether `units` are few enough choices to search exactly.
pub(super) fn searchable(units: &[VictimUnit]) -> bool {
    let mut count = 0usize;
    for u in units {
        count += match u.keep_at_least {
            Some(min) if min < u.pods.len() => u.pods.len(),
            _ => 1,
        };
        if count > MAX_CHOICES {
            return false;
        }
    }
    true
}

/// Every set of victims from `units` that costs less than `than`, cheapest
/// first (ties in a fixed order); `None` when there are more than
/// [`MAX_CHOICES`] choices to make.
pub(super) fn cheaper_sets(
    units: &[VictimUnit],
    budgets: &Budgets,
    than: &Cost,
) -> Option<Vec<(Cost, Vec<VictimUnit>)>> {
    if !searchable(units) {
        return None;
    }
    let choices = Choices::new(units);
    let mut cheaper: Vec<(Cost, u32, Vec<VictimUnit>)> = Vec::new();
    for mask in 1..(1u32 << choices.count) {
        if !choices
            .bound(mask)
            .is_some_and(|b| b.cmp_cost(than).is_lt())
        {
            continue;
        }
        let Some(victims) = choices.victims(mask) else {
            continue;
        };
        let (violating, _) = split_by_budgets(victims.clone(), budgets);
        let cost = Cost::of(&victims, violating.iter().map(|u| u.pods.len()).sum());
        if cost.cmp_cost(than).is_lt() {
            cheaper.push((cost, mask, victims));
        }
    }
    cheaper.sort_by(|a, b| a.0.cmp_cost(&b.0).then(a.1.cmp(&b.1)));
    Some(cheaper.into_iter().map(|(c, _, v)| (c, v)).collect())
}

impl Engine {
    /// A set of `units` cheaper than `greedy`'s victims with which the gang
    /// places within `t` (see the module doc); `greedy` when there is none
    /// or the candidate is too large to search. On entry and on return the
    /// units are all on the node table (`edits` hold only the pods already
    /// going).
    pub(super) fn cheaper_victims(
        &mut self,
        gang: &Preemptor,
        t: &PlacementTry,
        units: &[VictimUnit],
        greedy: GangCandidate,
        edits: &mut WhatIf,
        batches: &mut Batches,
    ) -> GangCandidate {
        let Some(cheaper) = cheaper_sets(units, &self.cache.facts().budgets, &greedy.cost) else {
            return greedy;
        };
        let scope: Vec<usize> = match &t.restriction {
            Some(r) => r.nodes.clone(),
            None => (0..self.cache.nodes().len()).collect(),
        };
        let needed = u64::try_from(gang.needed).unwrap_or(u64::MAX);
        let mut plans = 0usize;
        for (cost, victims) in cheaper {
            if plans >= MAX_PLANS {
                break;
            }
            if self.room_without(gang, &scope, &victims) < needed {
                continue;
            }
            plans += 1;
            for key in victims.iter().flat_map(|u| u.keys()) {
                let _ = self.cache.what_if_remove(key, edits);
            }
            let placed = self.hold_plan(gang, t, batches).ok().map(|held| {
                self.release(&held);
                held.plan()
            });
            let found = placed.map(|plan| GangCandidate {
                label: t.label.clone(),
                victims: self.why_each_is_needed(gang, t, victims.clone(), edits, batches),
                cost,
                plan,
            });
            for key in victims.iter().flat_map(|u| u.keys()) {
                self.cache.what_if_restore(key, edits);
            }
            if let Some(c) = found {
                self.count_reprieve(super::reprieve::Decision::Exact);
                return c;
            }
        }
        greedy
    }

    /// How many members like the least one `scope`'s nodes would hold
    /// with `victims` gone, by resources alone.
    fn room_without(&self, gang: &Preemptor, scope: &[usize], victims: &[VictimUnit]) -> u64 {
        let (mut free, mut room) = self.room_by_node(gang, scope);
        for u in victims {
            room = room.saturating_add(self.take_off(gang, u, &mut free));
        }
        room
    }

    /// `victims` (all taken off in `edits`), each with the member that
    /// would have no room were it put back alone.
    fn why_each_is_needed(
        &mut self,
        gang: &Preemptor,
        t: &PlacementTry,
        mut victims: Vec<VictimUnit>,
        edits: &mut WhatIf,
        batches: &mut Batches,
    ) -> Vec<VictimUnit> {
        for unit in &mut victims {
            let pods: Vec<Arc<PodInfo>> = unit.pods.clone();
            for p in &pods {
                self.cache.what_if_restore(&p.key, edits);
            }
            match self.hold_plan(gang, t, batches) {
                Ok(held) => self.release(&held),
                Err(blocked) => unit.blocked = blocked,
            }
            for p in &pods {
                let _ = self.cache.what_if_remove(&p.key, edits);
            }
        }
        victims
    }
}
