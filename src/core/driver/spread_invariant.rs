//! Invariant I5 — topology spread: no `Bind` places a pod where one of its
//! `DoNotSchedule` constraints is violated, judged when the bind is issued
//! against every other pod placed then (bound, binding, or reserved).
//!
//! Recomputed by brute force from the harness's record of nodes and pods,
//! independently of the plugin's counting. A batch of drained binds is
//! replayed in issue order, each judged against the pods placed before the
//! batch and the batch's earlier binds: exactly what a plain pod's cycle saw.
//! A gang member's placement was decided at its reservation, possibly before
//! pods were removed, so it could read as a violation when released; the
//! property test gives constraints to plain pods.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::Harness;
use crate::cache::PodState;
use crate::engine::Action;
use crate::model::spread::InclusionPolicy;
use crate::model::{NodeInfo, PodInfo, PodKey, SpreadConstraint, TaintEffect, WhenUnsatisfiable};

impl Harness {
    /// I5, as recorded while actions were drained.
    pub fn check_spread_respected(&self) -> Result<(), String> {
        match self.i5_violations.first() {
            Some(v) => Err(format!("I5: {v}")),
            None => Ok(()),
        }
    }

    /// Called with each batch of drained actions, after its binds were put
    /// in flight. Binds are judged in the order they were issued: each
    /// against what was placed before the batch plus the batch's earlier binds.
    pub(super) fn check_binds_respect_spread(&mut self, actions: &[Action]) {
        let batch: Vec<(&PodKey, &Arc<str>)> = actions
            .iter()
            .filter_map(|a| match a {
                Action::Bind { pod, node, .. } => Some((pod, node)),
                _ => None,
            })
            .collect();
        let hard = |pod: &PodKey| {
            self.pods.get(pod).is_some_and(|p| {
                p.constraints
                    .spread
                    .with_action(WhenUnsatisfiable::DoNotSchedule)
                    .next()
                    .is_some()
            })
        };
        // Nothing to judge unless a bind has a DoNotSchedule constraint.
        if !batch.iter().any(|(pod, _)| hard(pod)) {
            return;
        }
        let in_batch: HashSet<&PodKey> = batch.iter().map(|(p, _)| *p).collect();
        let mut placed: Vec<(Arc<PodInfo>, Arc<str>)> = self
            .placed_pods()
            .into_iter()
            .filter(|(key, _)| !in_batch.contains(key))
            .map(|(_, v)| v)
            .collect();
        for (pod, node) in batch {
            let Some(info) = self.pods.get(pod).cloned() else {
                continue;
            };
            let has_hard = info
                .constraints
                .spread
                .with_action(WhenUnsatisfiable::DoNotSchedule)
                .next()
                .is_some();
            if has_hard && let Err(v) = spread_holds(&info, node, &self.nodes, &placed) {
                self.i5_violations.push(v);
            }
            placed.push((info, node.clone()));
        }
    }

    /// Every pod on a node now — bound (not finished), binding or reserved —
    /// with its node.
    fn placed_pods(&self) -> HashMap<PodKey, (Arc<PodInfo>, Arc<str>)> {
        let mut placed: HashMap<PodKey, (Arc<PodInfo>, Arc<str>)> = HashMap::new();
        for p in self.pods.values().filter(|p| p.occupies_node()) {
            if let Some(n) = &p.node_name {
                placed.insert(p.key.clone(), (p.clone(), n.clone()));
            }
        }
        // A bind in flight for a pod since recreated under the same name
        // will fail on its uid: the new pod is not placed by it (I1's
        // checker reads in-flight binds the same way).
        for b in &self.in_flight {
            if let Some(p) = self.pods.get(&b.pod).filter(|p| p.uid == b.uid) {
                placed.insert(b.pod.clone(), (p.clone(), b.node.clone()));
            }
        }
        for cached in self.engine.cache().pods() {
            if let PodState::Assumed { node, .. } = &cached.state {
                placed
                    .entry(cached.info.key.clone())
                    .or_insert_with(|| (cached.info.clone(), node.clone()));
            }
        }
        placed
    }
}

/// Whether placing `pod` on `node` keeps each of its DoNotSchedule
/// constraints, given the other `placed` pods.
fn spread_holds(
    pod: &PodInfo,
    node: &str,
    nodes: &BTreeMap<Arc<str>, Arc<NodeInfo>>,
    placed: &[(Arc<PodInfo>, Arc<str>)],
) -> Result<(), String> {
    let hard: Vec<&SpreadConstraint> = pod
        .constraints
        .spread
        .with_action(WhenUnsatisfiable::DoNotSchedule)
        .collect();
    let Some(target) = nodes.get(node) else {
        return Ok(()); // A node gone since: nothing to judge against.
    };
    // Nodes with every key take part.
    let with_keys: Vec<&Arc<NodeInfo>> = nodes
        .values()
        .filter(|n| hard.iter().all(|c| n.labels.contains_key(&c.topology_key)))
        .collect();
    for c in hard {
        let Some(value) = target.labels.get(&c.topology_key) else {
            return Err(format!(
                "{} bound to {node}, which lacks topology key {}",
                pod.key, c.topology_key
            ));
        };
        let mut counts: BTreeMap<&str, i64> = BTreeMap::new();
        for n in with_keys.iter().filter(|n| included(c, pod, n)) {
            let domain = n.labels.get(&c.topology_key).map_or("", String::as_str);
            let here = placed
                .iter()
                .filter(|(p, at)| **at == *n.name && counts_for(c, pod, p))
                .count();
            *counts.entry(domain).or_default() += here as i64;
        }
        let min = if counts.len() < c.min_domains as usize {
            0
        } else {
            counts.values().copied().min().unwrap_or(0)
        };
        let own = counts.get(value.as_str()).copied().unwrap_or(0);
        let skew = own + i64::from(c.selector.matches(&pod.labels)) - min;
        if skew > i64::from(c.max_skew) {
            return Err(format!(
                "{} bound to {node} ({}={value}) with skew {skew} > maxSkew {} (domains {counts:?})",
                pod.key, c.topology_key, c.max_skew
            ));
        }
    }
    Ok(())
}

fn included(c: &SpreadConstraint, pod: &PodInfo, node: &NodeInfo) -> bool {
    let affinity_ok = pod
        .constraints
        .node_selector
        .iter()
        .all(|(k, v)| node.labels.get(k) == Some(v))
        && pod
            .constraints
            .required_affinity
            .as_ref()
            .is_none_or(|a| a.matches(&node.name, &node.labels));
    let taints_ok = node
        .taints
        .iter()
        .filter(|t| matches!(t.effect, TaintEffect::NoSchedule | TaintEffect::NoExecute))
        .all(|t| {
            pod.constraints
                .tolerations
                .iter()
                .any(|tol| tol.tolerates(t))
        });
    (c.node_affinity_policy == InclusionPolicy::Ignore || affinity_ok)
        && (c.node_taints_policy == InclusionPolicy::Ignore || taints_ok)
}

fn counts_for(c: &SpreadConstraint, pod: &PodInfo, other: &PodInfo) -> bool {
    !other.deleting
        && !other.phase.is_terminal()
        && other.key.namespace == pod.key.namespace
        && !c.selector.is_empty()
        && c.selector.matches(&other.labels)
}
