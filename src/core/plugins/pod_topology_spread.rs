//! `PodTopologySpread`: spreads matching pods evenly over topology domains.
//!
//! Filter enforces `whenUnsatisfiable: DoNotSchedule` constraints: placing the
//! pod on a node must keep `matching pods in the node's domain + 1 (if the pod
//! matches itself) − the global minimum` at most `maxSkew`, where the global
//! minimum is over the eligible domains and counts as 0 while fewer than
//! `minDomains` domains exist. Score prefers nodes whose domains hold fewer
//! matching pods for `ScheduleAnyway` constraints (`scoring`).
//!
//! Eligible nodes carry every constraint's topology key and, per the
//! constraint's `nodeAffinityPolicy` / `nodeTaintsPolicy`, pass the pod's
//! node selector and required affinity / tolerate its hard taints. Pods
//! without constraints of their own get the default constraints (`args`),
//! with the selector of the Services and controllers that select them.
//! Counts come from the snapshot's per-node pod lists (bound and reserved
//! pods, so reserved gang members count) through a cross-cycle memo
//! (`counts`); PreFilter precomputes them so Filter is O(constraints): on
//! the nodes the cache's `LabelIds` numbered, one lookup of the node's value
//! id for the key and an index into counts by value id (strings otherwise).

mod args;
mod counts;
mod scoring;
#[cfg(test)]
mod tests;

use std::sync::{Arc, Mutex, PoisonError};

pub use args::{DefaultingType, PodTopologySpreadArgs, decode_args, system_default_constraints};

use crate::cache::{ClusterFacts, LabelIds, NodeState};
use crate::framework::{
    CycleState, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult, Rejection, Snapshot,
};
use crate::model::spread::InclusionPolicy;
use crate::model::{PodInfo, SpreadConstraint, TaintEffect, WhenUnsatisfiable, first_untolerated};
use counts::{DomainIds, MISSING, Memo};

pub const NAME: &str = "PodTopologySpread";
/// A node whose domain would exceed `maxSkew`.
pub const REASON_CONSTRAINTS_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints";
/// A node without a constraint's topology key.
pub const REASON_NODE_LABEL_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";

const PRE_FILTER_KEY: &str = "PreFilterPodTopologySpread";

/// The taint effects a pod must tolerate for `nodeTaintsPolicy: Honor`.
const HARD_EFFECTS: [TaintEffect; 2] = [TaintEffect::NoSchedule, TaintEffect::NoExecute];

pub struct PodTopologySpread {
    /// The default constraints in force (system or configured list).
    defaults: Vec<SpreadConstraint>,
    /// Using kube-scheduler's system defaults: nodes missing a key are then
    /// still scored on the keys they have.
    system_defaulted: bool,
    memo: Mutex<Memo>,
}

impl Default for PodTopologySpread {
    fn default() -> Self {
        PodTopologySpread::new(&PodTopologySpreadArgs::default())
    }
}

impl PodTopologySpread {
    /// The plugin for `args`, which [`decode_args`] validated.
    pub fn new(args: &PodTopologySpreadArgs) -> Self {
        PodTopologySpread {
            defaults: args.effective_defaults(),
            system_defaulted: args.defaulting_type == DefaultingType::System,
            memo: Mutex::new(Memo::default()),
        }
    }

    /// The constraints with `action` that apply to `pod`: its own, or (when
    /// it declares none) the defaults with the selector of the objects
    /// selecting it — none when nothing selects it.
    fn constraints(
        &self,
        pod: &PodInfo,
        facts: &ClusterFacts,
        action: WhenUnsatisfiable,
    ) -> Vec<SpreadConstraint> {
        if !pod.constraints.spread.constraints.is_empty() {
            return pod
                .constraints
                .spread
                .with_action(action)
                .cloned()
                .collect();
        }
        if !self.defaults.iter().any(|c| c.when_unsatisfiable == action) {
            return Vec::new();
        }
        let selector = facts.workloads.default_selector(pod);
        if selector.is_empty() {
            return Vec::new();
        }
        self.defaults
            .iter()
            .filter(|c| c.when_unsatisfiable == action)
            .map(|c| SpreadConstraint {
                selector: selector.clone(),
                ..c.clone()
            })
            .collect()
    }

    fn memo(&self) -> std::sync::MutexGuard<'_, Memo> {
        // The memo holds no invariant a panic could break halfway that the
        // stamps would not catch: recover it.
        self.memo.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Plugin for PodTopologySpread {
    fn name(&self) -> &'static str {
        NAME
    }
}

/// Whether `node` counts for `c` under its inclusion policies.
fn node_included(c: &SpreadConstraint, pod: &PodInfo, node: &NodeState) -> bool {
    if c.node_affinity_policy == InclusionPolicy::Honor && !matches_node_affinity(pod, node) {
        return false;
    }
    c.node_taints_policy == InclusionPolicy::Ignore
        || first_untolerated(
            &node.info.taints,
            &pod.constraints.tolerations,
            &HARD_EFFECTS,
        )
        .is_none()
}

/// The pod's `nodeSelector` and required node affinity, as NodeAffinity's
/// Filter checks them.
fn matches_node_affinity(pod: &PodInfo, node: &NodeState) -> bool {
    let labels = &node.info.labels;
    pod.constraints
        .node_selector
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v))
        && pod
            .constraints
            .required_affinity
            .as_ref()
            .is_none_or(|a| a.matches(&node.info.name, labels))
}

/// One DoNotSchedule constraint, with its counts for this cycle.
struct FilterConstraint {
    topology_key: String,
    max_skew: i64,
    /// 1 when the incoming pod matches the selector itself.
    self_match: i64,
    /// Domain ids by topology value.
    ids: DomainIds,
    /// Matching pods per domain id, over eligible nodes.
    counts: Vec<i64>,
    /// The global minimum, 0 while fewer than `minDomains` domains exist.
    min: i64,
    /// The counts by the snapshot's `LabelIds` (when maintained).
    label_ids: Option<FilterIds>,
}

/// A constraint's counts for the nodes one `LabelIds` table numbered.
struct FilterIds {
    stamp: u64,
    /// The topology key's id (`None`: no numbered node has the key).
    key: Option<u32>,
    /// Matching pods per value id of the key.
    by_value: Vec<i64>,
}

impl FilterConstraint {
    /// Matching pods in `node`'s domain; `None` when it lacks the key.
    fn matching_on(&self, node: &NodeState) -> Option<i64> {
        if let Some(ids) = &self.label_ids
            && ids.stamp == node.label_ids.stamp()
        {
            let value = node.label_ids.value(ids.key?)?;
            let at = usize::try_from(value).ok();
            return Some(at.and_then(|v| ids.by_value.get(v)).copied().unwrap_or(0));
        }
        let value = node.info.labels.get(&self.topology_key)?;
        Some(
            self.ids
                .get(value.as_str())
                .and_then(|id| self.counts.get(*id as usize))
                .copied()
                .unwrap_or(0),
        )
    }
}

/// `counts` (by domain id) by the value ids of `table` for `key`.
fn by_value_id(table: &LabelIds, key: Option<u32>, value_ids: &[u32], counts: &[i64]) -> Vec<i64> {
    let mut by_value = vec![0; key.map_or(0, |k| table.value_count(k))];
    for (value, n) in value_ids.iter().zip(counts) {
        if let Some(slot) = usize::try_from(*value)
            .ok()
            .and_then(|v| by_value.get_mut(v))
        {
            *slot = *n;
        }
    }
    by_value
}

/// PreFilter's result: empty when the pod has no hard constraints.
#[derive(Default)]
struct PreFilterState {
    constraints: Vec<FilterConstraint>,
}

impl PreFilterPlugin for PodTopologySpread {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot<'_>,
    ) -> PreFilterResult {
        let constraints = self.constraints(pod, snapshot.facts, WhenUnsatisfiable::DoNotSchedule);
        let computed = if constraints.is_empty() {
            PreFilterState::default()
        } else {
            self.count_for_filter(pod, snapshot, &constraints)
        };
        state.write(PRE_FILTER_KEY, computed);
        PreFilterResult::AllNodes
    }
}

impl PodTopologySpread {
    fn count_for_filter(
        &self,
        pod: &PodInfo,
        snapshot: &Snapshot<'_>,
        constraints: &[SpreadConstraint],
    ) -> PreFilterState {
        let (nodes, table) = (snapshot.nodes, &snapshot.facts.label_ids);
        let mut memo = self.memo();
        let domains: Vec<(Vec<u32>, DomainIds, Arc<Vec<u32>>)> = constraints
            .iter()
            .map(|c| {
                let d = memo.domains(nodes, &c.topology_key, table);
                (d.of_node, d.ids, d.value_ids)
            })
            .collect();
        let matching: Vec<Vec<u32>> = constraints
            .iter()
            .map(|c| memo.counts(nodes, &pod.key.namespace, &c.selector))
            .collect();
        drop(memo);
        let mut per_domain: Vec<Vec<i64>> = domains
            .iter()
            .map(|(_, ids, _)| vec![0; ids.len()])
            .collect();
        let mut present: Vec<Vec<bool>> = domains
            .iter()
            .map(|(_, ids, _)| vec![false; ids.len()])
            .collect();
        for (i, node) in nodes.iter().enumerate() {
            // Only nodes with every constraint's key take part.
            if domains
                .iter()
                .any(|(d, _, _)| d.get(i).is_none_or(|id| *id == MISSING))
            {
                continue;
            }
            for (k, c) in constraints.iter().enumerate() {
                if !node_included(c, pod, node) {
                    continue;
                }
                let id = domains[k].0[i] as usize;
                let add = i64::from(matching[k].get(i).copied().unwrap_or(0));
                if let (Some(count), Some(seen)) =
                    (per_domain[k].get_mut(id), present[k].get_mut(id))
                {
                    *count = count.saturating_add(add);
                    *seen = true;
                }
            }
        }
        let constraints = constraints
            .iter()
            .zip(domains)
            .zip(per_domain.into_iter().zip(present))
            .map(|((c, (_, ids, value_ids)), (counts, seen))| {
                let eligible = counts.iter().zip(&seen).filter(|(_, s)| **s);
                let domain_count = eligible.clone().count();
                let global_min = eligible.map(|(n, _)| *n).min().unwrap_or(0);
                let below_min_domains =
                    i64::try_from(domain_count).unwrap_or(i64::MAX) < i64::from(c.min_domains);
                let label_ids = (table.stamp() != 0).then(|| {
                    let key = table.key(&c.topology_key);
                    FilterIds {
                        stamp: table.stamp(),
                        key,
                        by_value: by_value_id(table, key, &value_ids, &counts),
                    }
                });
                FilterConstraint {
                    topology_key: c.topology_key.clone(),
                    max_skew: i64::from(c.max_skew),
                    self_match: i64::from(c.selector.matches(&pod.labels)),
                    ids,
                    counts,
                    min: if below_min_domains { 0 } else { global_min },
                    label_ids,
                }
            })
            .collect();
        PreFilterState { constraints }
    }
}

impl FilterPlugin for PodTopologySpread {
    fn filter(&self, state: &CycleState, _: &PodInfo, node: &NodeState) -> Result<(), Rejection> {
        let Some(s) = state.read::<PreFilterState>(PRE_FILTER_KEY) else {
            return Ok(());
        };
        for c in &s.constraints {
            let Some(matching) = c.matching_on(node) else {
                return Err(Rejection::unresolvable(REASON_NODE_LABEL_NOT_MATCH));
            };
            let skew = matching.saturating_add(c.self_match).saturating_sub(c.min);
            if skew > c.max_skew {
                // Resolvable: removing matching pods from the domain helps.
                return Err(Rejection::new(REASON_CONSTRAINTS_NOT_MATCH));
            }
        }
        Ok(())
    }
}
