//! `NodeAffinity`: Filter enforces `nodeSelector` and required node affinity;
//! PreFilter narrows the search when every required term pins node names with
//! `matchFields` (DaemonSet pods); Score sums the weights of matching preferred
//! terms, normalised so the best node gets `MAX_NODE_SCORE`.

use std::sync::Arc;

use crate::cache::NodeState;
use crate::framework::{
    CycleState, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult, Rejection, ScorePlugin,
    Snapshot,
};
use crate::model::{NodeSelector, Operator, PodInfo};

use super::normalize::default_normalize;

pub const NAME: &str = "NodeAffinity";
pub const REASON: &str = "node(s) didn't match Pod's node affinity/selector";
/// PreFilter's reason when the required terms pin disjoint node names.
pub const REASON_CONFLICT: &str = "pod affinity terms conflict";

const NODE_NAME_FIELD: &str = "metadata.name";

#[derive(Debug, Default, Clone, Copy)]
pub struct NodeAffinity;

impl Plugin for NodeAffinity {
    fn name(&self) -> &'static str {
        NAME
    }
}

impl PreFilterPlugin for NodeAffinity {
    fn pre_filter(&self, _: &mut CycleState, pod: &PodInfo, _: &Snapshot<'_>) -> PreFilterResult {
        match pod
            .constraints
            .required_affinity
            .as_ref()
            .and_then(pinned_node_names)
        {
            None => PreFilterResult::AllNodes,
            Some(names) if names.is_empty() => {
                PreFilterResult::Reject(Rejection::unresolvable(REASON_CONFLICT))
            }
            Some(names) => PreFilterResult::OnlyNodes(names),
        }
    }
}

/// The node names the required terms allow when *every* term pins names with
/// `metadata.name In (..)` (terms are ORed: one unpinned term allows every
/// node); within a term, pinned sets are ANDed. `None` means no narrowing.
fn pinned_node_names(selector: &NodeSelector) -> Option<Vec<Arc<str>>> {
    let mut union: Vec<Arc<str>> = Vec::new();
    for term in &selector.terms {
        let mut term_names: Option<Vec<&String>> = None;
        for r in term
            .match_fields
            .iter()
            .filter(|r| r.key == NODE_NAME_FIELD && r.op == Operator::In)
        {
            term_names = Some(match term_names {
                None => r.values.iter().collect(),
                Some(prev) => prev.into_iter().filter(|n| r.values.contains(n)).collect(),
            });
        }
        for name in term_names? {
            if !union.iter().any(|u| **u == **name) {
                union.push(Arc::from(name.as_str()));
            }
        }
    }
    Some(union)
}

impl FilterPlugin for NodeAffinity {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeState) -> Result<(), Rejection> {
        let labels = &node.info.labels;
        let selector_ok = pod
            .constraints
            .node_selector
            .iter()
            .all(|(k, v)| labels.get(k).is_some_and(|have| have == v));
        let affinity_ok = || {
            pod.constraints
                .required_affinity
                .as_ref()
                .is_none_or(|a| a.matches(&node.info.name, labels))
        };
        if selector_ok && affinity_ok() {
            Ok(())
        } else {
            Err(Rejection::unresolvable(REASON))
        }
    }
}

impl ScorePlugin for NodeAffinity {
    /// Nothing to score without preferred terms (upstream skips too).
    fn pre_score(&self, _: &mut CycleState, pod: &PodInfo, _: &Snapshot<'_>, _: &[usize]) -> bool {
        !pod.constraints.preferred_affinity.is_empty()
    }

    fn score(&self, _: &CycleState, pod: &PodInfo, node: &NodeState) -> i64 {
        pod.constraints
            .preferred_affinity
            .iter()
            .filter(|p| p.weight != 0 && p.term.matches(&node.info.name, &node.info.labels))
            .map(|p| i64::from(p.weight))
            .sum()
    }

    fn normalize(&self, _: &CycleState, _: &PodInfo, scores: &mut [i64]) {
        default_normalize(scores, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::test_util::{node, pod};
    use serde_json::json;

    fn affinity(required: serde_json::Value) -> PodInfo {
        pod(json!({"affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": required}}}}))
    }

    #[test]
    fn node_selector_must_match_every_label() {
        let s = CycleState::new();
        let p = pod(json!({"nodeSelector": {"zone": "a", "disk": "ssd"}}));
        let good = node("n", &[])
            .label("zone", "a")
            .label("disk", "ssd")
            .build();
        let bad = node("n", &[]).label("zone", "a").build();
        assert!(NodeAffinity.filter(&s, &p, &good).is_ok());
        assert_eq!(
            NodeAffinity.filter(&s, &p, &bad),
            Err(Rejection::unresolvable(
                "node(s) didn't match Pod's node affinity/selector"
            ))
        );
    }

    #[test]
    fn required_terms_are_ored() {
        let s = CycleState::new();
        let p = affinity(json!([
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
            {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}
        ]));
        assert!(
            NodeAffinity
                .filter(&s, &p, &node("n", &[]).label("zone", "a").build())
                .is_ok()
        );
        assert!(
            NodeAffinity
                .filter(&s, &p, &node("n", &[]).label("gpu", "1").build())
                .is_ok()
        );
        assert!(
            NodeAffinity
                .filter(&s, &p, &node("n", &[]).label("zone", "b").build())
                .is_err()
        );
    }

    #[test]
    fn pre_filter_narrows_to_pinned_names() {
        let mut s = CycleState::new();
        let pinned = affinity(json!([
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1", "n2"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n3"]}]}
        ]));
        assert_eq!(
            NodeAffinity.pre_filter(&mut s, &pinned, &Snapshot::of_nodes(&[])),
            PreFilterResult::OnlyNodes(vec!["n1".into(), "n2".into(), "n3".into()])
        );
        let one_open = affinity(json!([
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
            {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}
        ]));
        assert_eq!(
            NodeAffinity.pre_filter(&mut s, &one_open, &Snapshot::of_nodes(&[])),
            PreFilterResult::AllNodes
        );
        let conflict = affinity(json!([{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n1"]},
            {"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]));
        assert_eq!(
            NodeAffinity.pre_filter(&mut s, &conflict, &Snapshot::of_nodes(&[])),
            PreFilterResult::Reject(Rejection::unresolvable("pod affinity terms conflict"))
        );
        assert_eq!(
            NodeAffinity.pre_filter(&mut s, &pod(json!({})), &Snapshot::of_nodes(&[])),
            PreFilterResult::AllNodes
        );
    }

    #[test]
    fn score_sums_matching_preferred_weights() {
        let mut s = CycleState::new();
        let p = pod(
            json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 2, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}},
                {"weight": 6, "preference": {"matchExpressions": [{"key": "ssd", "operator": "Exists"}]}}
            ]}}}),
        );
        assert!(NodeAffinity.pre_score(&mut s, &p, &Snapshot::of_nodes(&[]), &[]));
        assert!(!NodeAffinity.pre_score(&mut s, &pod(json!({})), &Snapshot::of_nodes(&[]), &[]));
        let nodes = [
            node("0", &[]).build(),
            node("1", &[]).label("zone", "a").build(),
            node("2", &[]).label("zone", "a").label("ssd", "").build(),
            node("3", &[]).label("ssd", "").build(),
        ];
        let mut scores: Vec<i64> = nodes
            .iter()
            .map(|n| NodeAffinity.score(&s, &p, n))
            .collect();
        assert_eq!(scores, [0, 2, 8, 6]);
        NodeAffinity.normalize(&s, &p, &mut scores);
        assert_eq!(scores, [0, 25, 100, 75]);
    }
}
