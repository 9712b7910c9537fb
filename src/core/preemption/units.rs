//! Victims: the units evicted together, their order of importance, and
//! which of them a PodDisruptionBudget protects.
//!
//! A unit is one pod, or every running member of a gang when evicting
//! only the members in the way would leave it running below its
//! `minCount`, or when its `disruptionMode` is `all` (invariant I1 holds
//! for victims: a gang is evicted whole or not at all).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::model::disruption::Budgets;
use crate::model::{DisruptionMode, GroupKey, PodInfo, PodKey};

/// What preemption must know of a gang one of whose running members is in
/// the way.
#[derive(Debug, Clone)]
pub struct GangFacts {
    pub min_count: u32,
    pub mode: DisruptionMode,
    /// Every member holding a node (bound, or on its way to one), wherever
    /// it is: what goes when the gang goes whole.
    pub running: Vec<Arc<PodInfo>>,
    /// How many of them are confirmed bound: only these count towards the
    /// `minCount` a gang keeps after losing members one by one (a binding
    /// in flight may still fail).
    pub bound: usize,
}

/// Pods evicted together.
#[derive(Debug, Clone)]
pub struct VictimUnit {
    pub pods: Vec<Arc<PodInfo>>,
    /// The gang this unit evicts whole, if it does.
    pub gang: Option<GroupKey>,
    /// The highest priority among its pods.
    pub priority: i32,
    /// The earliest start among its pods.
    pub started_ms: i64,
    /// Why the reprieve could not put it back, once it is a victim.
    pub blocked: Option<Blocker>,
    /// For a gang whose `disruptionMode` is `single`, taken whole only
    /// because too many of its members are in the way: its `minCount`. The
    /// reprieve may put that many members back together, and then more one
    /// by one, leaving only single members as victims.
    pub keep_at_least: Option<usize>,
}

/// Why a victim could not be put back: the preemptor's pod (a gang's
/// member, or the pod itself) that would then have no room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocker {
    pub pod: PodKey,
    /// The node it was checked on; `None` when no node of the placement
    /// tried would take it.
    pub node: Option<Arc<str>>,
}

impl VictimUnit {
    fn new(pods: Vec<Arc<PodInfo>>, gang: Option<GroupKey>) -> Self {
        let priority = pods.iter().map(|p| p.priority).max().unwrap_or(i32::MIN);
        let started_ms = pods.iter().map(|p| p.started_ms).min().unwrap_or(0);
        VictimUnit {
            pods,
            gang,
            priority,
            started_ms,
            blocked: None,
            keep_at_least: None,
        }
    }

    /// One pod, evicted alone.
    pub fn of_pod(pod: Arc<PodInfo>) -> Self {
        VictimUnit::new(vec![pod], None)
    }

    pub fn keys(&self) -> impl Iterator<Item = &PodKey> {
        self.pods.iter().map(|p| &p.key)
    }

    /// The unit as a person names it: its gang, else its pod.
    pub fn name(&self) -> String {
        match (&self.gang, self.pods.first()) {
            (Some(g), _) => g.to_string(),
            (None, Some(p)) => p.key.to_string(),
            (None, None) => String::new(),
        }
    }

    /// Why it was not reprieved, in words: "putting default/lo-b back
    /// leaves no room for default/hi-1 on node-2".
    pub fn why_evicted(&self) -> String {
        match &self.blocked {
            Some(Blocker {
                pod,
                node: Some(node),
            }) => format!(
                "putting {} back leaves no room for {pod} on {node}",
                self.name()
            ),
            Some(Blocker { pod, node: None }) => format!(
                "putting {} back leaves no room for {pod} on any node",
                self.name()
            ),
            None => format!("{} is in the way", self.name()),
        }
    }
}

/// Groups the pods in the way (`in_way`, every one of a lower priority than
/// the preemptor, `below`) into units, most important first (priority,
/// then whole gangs before pods, then the earliest start).
/// `gang_of(pod)` gives the gang facts of a member of a gang-policy group.
/// A gang that would have to go whole but has a member at or above `below`
/// cannot be a victim: its members in the way are left out.
pub fn units_of(
    in_way: Vec<Arc<PodInfo>>,
    below: i32,
    gang_of: &dyn Fn(&PodInfo) -> Option<(GroupKey, GangFacts)>,
) -> Vec<VictimUnit> {
    let mut units = Vec::new();
    let mut by_gang: BTreeMap<GroupKey, (GangFacts, Vec<Arc<PodInfo>>)> = BTreeMap::new();
    for pod in in_way {
        match gang_of(&pod) {
            Some((group, facts)) => by_gang
                .entry(group)
                .or_insert((facts, Vec::new()))
                .1
                .push(pod),
            None => units.push(VictimUnit::new(vec![pod], None)),
        }
    }
    for (group, (facts, members)) in by_gang {
        let left = facts.bound.saturating_sub(members.len());
        let whole = facts.mode == DisruptionMode::All || left < facts.min_count as usize;
        if !whole {
            units.extend(members.into_iter().map(|p| VictimUnit::new(vec![p], None)));
        } else if facts.running.iter().all(|p| p.priority < below) {
            let mut unit = VictimUnit::new(facts.running, Some(group));
            if facts.mode == DisruptionMode::Single {
                unit.keep_at_least = Some(facts.min_count as usize);
            }
            units.push(unit);
        }
    }
    // Most important first: kube-scheduler's `MoreImportantPod` (higher
    // priority, then earlier start), with whole gangs
    // before single pods of the same priority, so the reprieve spares a
    // gang before a pod (breaking fewer gangs, as `Cost` prefers).
    units.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then(b.gang.is_some().cmp(&a.gang.is_some()))
            .then(a.started_ms.cmp(&b.started_ms))
    });
    units
}

/// kube-scheduler's `filterPodsWithPDBViolation`, by unit: walking the
/// units in order, a unit violates a budget when evicting it takes some
/// budget that covers one of its pods below zero allowed disruptions.
/// Returns the violating units and the others, each in the given order.
pub fn split_by_budgets(
    units: Vec<VictimUnit>,
    budgets: &Budgets,
) -> (Vec<VictimUnit>, Vec<VictimUnit>) {
    if budgets.is_empty() {
        return (Vec::new(), units);
    }
    let mut allowed: HashMap<(Arc<str>, Arc<str>), i64> = HashMap::new();
    let (mut violating, mut fine) = (Vec::new(), Vec::new());
    for unit in units {
        let mut violates = false;
        for pod in &unit.pods {
            for b in budgets.in_namespace(&pod.key.namespace) {
                if !b.covers(&pod.key.namespace, &pod.labels)
                    || b.disrupted_pods.contains(&pod.key.name)
                {
                    continue;
                }
                let left = allowed
                    .entry((b.namespace.clone(), b.name.clone()))
                    .or_insert(i64::from(b.disruptions_allowed));
                *left = left.saturating_sub(1);
                violates |= *left < 0;
            }
        }
        if violates {
            violating.push(unit);
        } else {
            fine.push(unit);
        }
    }
    (violating, fine)
}

/// The units in the order the reprieve tries to keep them: those whose
/// eviction would violate a budget first, then the rest, each tagged with
/// whether it violates (kube-scheduler's `selectVictimsOnNode`).
pub fn reprieve_order(units: Vec<VictimUnit>, budgets: &Budgets) -> Vec<(VictimUnit, bool)> {
    let (violating, fine) = split_by_budgets(units, budgets);
    violating
        .into_iter()
        .map(|u| (u, true))
        .chain(fine.into_iter().map(|u| (u, false)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::fixtures::pod;
    use crate::model::disruption::{BudgetChange, DisruptionBudget};
    use crate::model::{DefinitionKey, GroupSource, LabelSelector};
    use std::collections::HashSet;

    fn victim(name: &str, priority: i32, started_ms: i64) -> Arc<PodInfo> {
        let mut p = pod(name, 100, 1);
        p.priority = priority;
        p.started_ms = started_ms;
        std::sync::Arc::make_mut(&mut p.labels)
            .insert("app".into(), name.trim_end_matches(char::is_numeric).into());
        Arc::new(p)
    }

    fn gang() -> GroupKey {
        GroupKey::new(DefinitionKey::new("default", GroupSource::PodGroup, "g"))
    }

    fn names(units: &[VictimUnit]) -> Vec<Vec<String>> {
        units
            .iter()
            .map(|u| u.pods.iter().map(|p| p.key.name.to_string()).collect())
            .collect()
    }

    #[test]
    fn units_are_ordered_by_priority_then_earliest_start() {
        let units = units_of(
            vec![victim("a", 1, 5), victim("b", 3, 9), victim("c", 3, 2)],
            10,
            &|_| None,
        );
        assert_eq!(names(&units), [["c"], ["b"], ["a"]]);
    }

    #[test]
    fn a_gang_goes_whole_when_it_would_fall_below_min_count_or_asks_for_all() {
        let members: Vec<_> = (0..4).map(|i| victim(&format!("m{i}"), 1, 0)).collect();
        let facts = |mode, min_count| {
            let running = members.clone();
            move |p: &PodInfo| {
                p.key.name.starts_with('m').then_some(())?;
                Some((
                    gang(),
                    GangFacts {
                        min_count,
                        mode,
                        bound: running.len(),
                        running: running.clone(),
                    },
                ))
            }
        };
        // One member in the way, 3 left >= minCount 3, single: alone.
        let alone = units_of(
            vec![members[0].clone()],
            10,
            &facts(DisruptionMode::Single, 3),
        );
        assert_eq!(names(&alone), [["m0"]]);
        assert!(alone[0].gang.is_none());
        // Two in the way would leave 2 < 3: the whole gang, once.
        let whole = units_of(members[..2].to_vec(), 10, &facts(DisruptionMode::Single, 3));
        assert_eq!(whole.len(), 1);
        assert_eq!(whole[0].pods.len(), 4);
        assert_eq!(whole[0].gang, Some(gang()));
        // disruptionMode all: whole even for one.
        let all = units_of(vec![members[0].clone()], 10, &facts(DisruptionMode::All, 1));
        assert_eq!(all[0].pods.len(), 4);
        // Among equals, a whole gang is more important than a single pod.
        let mut mixed = units_of(
            vec![
                victim("solo", 1, -5),
                members[0].clone(),
                members[1].clone(),
            ],
            10,
            &facts(DisruptionMode::All, 1),
        );
        assert_eq!(mixed.len(), 2);
        assert!(mixed.remove(0).gang.is_some());
        // A member at or above the preemptor's priority shields the gang.
        let shielded = units_of(vec![members[0].clone()], 1, &facts(DisruptionMode::All, 1));
        assert!(shielded.is_empty());
    }

    #[test]
    fn a_member_still_binding_does_not_count_towards_what_the_gang_keeps() {
        let members: Vec<_> = (0..3).map(|i| victim(&format!("m{i}"), 1, 0)).collect();
        // Three members hold nodes, one of them still binding; minCount 2.
        let facts = |_: &PodInfo| {
            Some((
                gang(),
                GangFacts {
                    min_count: 2,
                    mode: DisruptionMode::Single,
                    running: members.clone(),
                    bound: 2,
                },
            ))
        };
        // Evicting one bound member would keep one confirmed: the gang goes whole.
        let units = units_of(vec![members[0].clone()], 10, &facts);
        assert_eq!(units.len(), 1);
        assert_eq!(units[0].pods.len(), 3);
    }

    #[test]
    fn budgets_split_violating_units_as_upstream_counts() {
        let mut budgets = Budgets::default();
        budgets.apply(BudgetChange::Upserted(DisruptionBudget {
            namespace: Arc::from("default"),
            name: Arc::from("web"),
            selector: Some(LabelSelector::from_map(&BTreeMap::from([(
                "app".to_string(),
                "web".to_string(),
            )]))),
            disruptions_allowed: 1,
            disrupted_pods: HashSet::from([Arc::from("web3")]),
        }));
        let units = units_of(
            vec![
                victim("web1", 5, 0),
                victim("web2", 4, 0),
                victim("web3", 3, 0),
                victim("db1", 2, 0),
            ],
            10,
            &|_| None,
        );
        let (violating, fine) = split_by_budgets(units, &budgets);
        // web1 uses the one allowed disruption; web2 goes below; web3 is
        // already being disrupted; db1 is not covered.
        assert_eq!(names(&violating), [["web2"]]);
        assert_eq!(names(&fine), [["web1"], ["web3"], ["db1"]]);
    }
}
