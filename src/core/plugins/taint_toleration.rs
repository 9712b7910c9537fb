//! `TaintToleration`: Filter rejects nodes with an untolerated `NoSchedule` or
//! `NoExecute` taint; Score prefers nodes with fewer untolerated
//! `PreferNoSchedule` taints.

use crate::cache::NodeState;
use crate::framework::{CycleState, FilterPlugin, Plugin, Rejection, ScorePlugin};
use crate::model::{PodInfo, TaintEffect, first_untolerated};

use super::normalize::default_normalize;

pub const NAME: &str = "TaintToleration";

const HARD_EFFECTS: [TaintEffect; 2] = [TaintEffect::NoSchedule, TaintEffect::NoExecute];

#[derive(Debug, Default, Clone, Copy)]
pub struct TaintToleration;

impl Plugin for TaintToleration {
    fn name(&self) -> &'static str {
        NAME
    }
}

impl FilterPlugin for TaintToleration {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeState) -> Result<(), Rejection> {
        match first_untolerated(
            &node.info.taints,
            &pod.constraints.tolerations,
            &HARD_EFFECTS,
        ) {
            None => Ok(()),
            // The only reason that names data, so the only one that allocates.
            Some(taint) => Err(Rejection::unresolvable(format!(
                "node(s) had untolerated taint {taint}"
            ))),
        }
    }

    fn passes(&self, _: &CycleState, pod: &PodInfo, node: &NodeState) -> bool {
        first_untolerated(
            &node.info.taints,
            &pod.constraints.tolerations,
            &HARD_EFFECTS,
        )
        .is_none()
    }
}

impl ScorePlugin for TaintToleration {
    /// The number of `PreferNoSchedule` taints the pod does not tolerate. Only
    /// tolerations with no effect or `PreferNoSchedule` can match such a taint,
    /// which `Toleration::tolerates` already enforces.
    fn score(&self, _: &CycleState, pod: &PodInfo, node: &NodeState) -> i64 {
        node.info
            .taints
            .iter()
            .filter(|t| t.effect == TaintEffect::PreferNoSchedule)
            .filter(|t| {
                !pod.constraints
                    .tolerations
                    .iter()
                    .any(|tol| tol.tolerates(t))
            })
            .count() as i64
    }

    fn normalize(&self, _: &CycleState, _: &PodInfo, scores: &mut [i64]) {
        default_normalize(scores, true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::test_util::{node, pod};
    use serde_json::json;

    #[test]
    fn untolerated_hard_taint_is_named() {
        let s = CycleState::new();
        let n = node("n", &[])
            .taint("soft", "x", TaintEffect::PreferNoSchedule)
            .taint("gpu", "true", TaintEffect::NoSchedule)
            .build();
        let err = TaintToleration.filter(&s, &pod(json!({})), &n).unwrap_err();
        assert_eq!(
            err,
            Rejection::unresolvable("node(s) had untolerated taint {gpu: true}")
        );

        let tolerant =
            pod(json!({"tolerations": [{"key": "gpu", "operator": "Equal", "value": "true"}]}));
        assert!(TaintToleration.filter(&s, &tolerant, &n).is_ok());
    }

    #[test]
    fn no_execute_counts_as_hard() {
        let s = CycleState::new();
        let n = node("n", &[])
            .taint("evict", "", TaintEffect::NoExecute)
            .build();
        assert_eq!(
            TaintToleration
                .filter(&s, &pod(json!({})), &n)
                .unwrap_err()
                .reason,
            "node(s) had untolerated taint {evict: }"
        );
    }

    #[test]
    fn score_counts_intolerable_prefer_no_schedule_and_reverses() {
        let s = CycleState::new();
        let p = pod(
            json!({"tolerations": [{"key": "a", "operator": "Exists", "effect": "PreferNoSchedule"}]}),
        );
        let nodes = [
            node("0", &[]).build(),
            node("1", &[])
                .taint("a", "", TaintEffect::PreferNoSchedule)
                .taint("b", "", TaintEffect::PreferNoSchedule)
                .build(),
            node("2", &[])
                .taint("b", "", TaintEffect::PreferNoSchedule)
                .taint("c", "", TaintEffect::PreferNoSchedule)
                .taint("d", "", TaintEffect::NoSchedule)
                .build(),
        ];
        let mut scores: Vec<i64> = nodes
            .iter()
            .map(|n| TaintToleration.score(&s, &p, n))
            .collect();
        assert_eq!(scores, [0, 1, 2]);
        TaintToleration.normalize(&s, &p, &mut scores);
        assert_eq!(scores, [100, 50, 0]);
    }
}
