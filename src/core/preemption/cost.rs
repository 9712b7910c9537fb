//! How candidates compare: kube-scheduler's `pickOneNodeForPreemption`
//! order, with gangs broken weighed before the number of pods.

use super::VictimUnit;

/// What evicting one candidate's victims costs; lower is better.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cost {
    /// Victims whose eviction violates a PodDisruptionBudget.
    pub pdb_violations: usize,
    /// The highest victim priority.
    pub highest_priority: i32,
    /// The sum of victim priorities, each shifted to be non-negative (as
    /// upstream, so a negative priority never makes a sum look cheaper).
    pub priority_sum: i64,
    /// Gangs evicted whole.
    pub gangs_broken: usize,
    pub pods: usize,
    /// The earliest start among the highest-priority victims: a later one
    /// (younger victims) is preferred.
    pub earliest_start_of_highest: i64,
}

impl Cost {
    /// The cost of evicting `victims`, of which `pdb_violations` pods
    /// violate a budget.
    pub fn of(victims: &[VictimUnit], pdb_violations: usize) -> Cost {
        let pods = || victims.iter().flat_map(|u| u.pods.iter());
        let highest_priority = pods().map(|p| p.priority).max().unwrap_or(i32::MIN);
        let priority_sum = pods().fold(0i64, |sum, p| {
            sum.saturating_add(i64::from(p.priority) - i64::from(i32::MIN))
        });
        let earliest_start_of_highest = pods()
            .filter(|p| p.priority == highest_priority)
            .map(|p| p.started_ms)
            .min()
            .unwrap_or(i64::MAX);
        Cost {
            pdb_violations,
            highest_priority,
            priority_sum,
            gangs_broken: victims.iter().filter(|u| u.gang.is_some()).count(),
            pods: pods().count(),
            earliest_start_of_highest,
        }
    }

    /// Orders costs, cheapest first.
    pub fn cmp_cost(&self, other: &Cost) -> std::cmp::Ordering {
        self.pdb_violations
            .cmp(&other.pdb_violations)
            .then(self.highest_priority.cmp(&other.highest_priority))
            .then(self.priority_sum.cmp(&other.priority_sum))
            .then(self.gangs_broken.cmp(&other.gangs_broken))
            .then(self.pods.cmp(&other.pods))
            .then(
                other
                    .earliest_start_of_highest
                    .cmp(&self.earliest_start_of_highest),
            )
    }

    /// The index of the cheapest of `costs`, the first on ties.
    pub fn cheapest<'a>(costs: impl IntoIterator<Item = &'a Cost>) -> Option<usize> {
        let mut best: Option<(usize, &Cost)> = None;
        for (i, c) in costs.into_iter().enumerate() {
            if best.is_none_or(|(_, b)| c.cmp_cost(b).is_lt()) {
                best = Some((i, c));
            }
        }
        best.map(|(i, _)| i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::fixtures::pod;
    use crate::model::{DefinitionKey, GroupKey, GroupSource};
    use std::sync::Arc;

    fn unit(specs: &[(i32, i64)], gang: bool) -> VictimUnit {
        let pods: Vec<_> = specs
            .iter()
            .enumerate()
            .map(|(i, (priority, start))| {
                let mut p = pod(&format!("p{i}"), 100, 1);
                p.priority = *priority;
                p.started_ms = *start;
                Arc::new(p)
            })
            .collect();
        let priority = pods.iter().map(|p| p.priority).max().unwrap_or(0);
        let started_ms = pods.iter().map(|p| p.started_ms).min().unwrap_or(0);
        VictimUnit {
            pods,
            gang: gang.then(|| GroupKey::new(DefinitionKey::new("d", GroupSource::PodGroup, "g"))),
            priority,
            started_ms,
            blocked: None,
            keep_at_least: None,
        }
    }

    // The cases of upstream's TestPickOneNodeForPreemption, one rule each.
    #[test]
    fn fewer_budget_violations_win_first() {
        let a = Cost::of(&[unit(&[(1, 0)], false)], 1);
        let b = Cost::of(&[unit(&[(9, 0), (9, 0)], false)], 0);
        assert_eq!(Cost::cheapest([&a, &b]), Some(1));
    }

    #[test]
    fn then_the_lowest_highest_priority() {
        let a = Cost::of(&[unit(&[(5, 0)], false)], 0);
        let b = Cost::of(&[unit(&[(1, 0), (2, 0), (3, 0)], false)], 0);
        assert_eq!(Cost::cheapest([&a, &b]), Some(1));
    }

    #[test]
    fn then_the_lowest_sum_of_priorities_counting_negatives_as_upstream() {
        let a = Cost::of(&[unit(&[(3, 0), (-5, 0)], false)], 0);
        let b = Cost::of(&[unit(&[(3, 0)], false)], 0);
        // Shifted, two pods always outweigh one of the same top priority.
        assert_eq!(Cost::cheapest([&a, &b]), Some(1));
    }

    #[test]
    fn then_fewer_gangs_then_fewer_pods_then_the_youngest() {
        let gang = Cost::of(&[unit(&[(1, 0)], true)], 0);
        let pod = Cost::of(&[unit(&[(1, 0)], false)], 0);
        assert_eq!(Cost::cheapest([&gang, &pod]), Some(1));
        let old = Cost::of(&[unit(&[(1, 10)], false)], 0);
        let young = Cost::of(&[unit(&[(1, 20)], false)], 0);
        assert_eq!(Cost::cheapest([&old, &young]), Some(1));
        // A tie keeps the first.
        assert_eq!(Cost::cheapest([&young, &young.clone()]), Some(0));
    }
}
