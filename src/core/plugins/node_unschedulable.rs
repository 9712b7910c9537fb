//! `NodeUnschedulable`: rejects cordoned nodes (`spec.unschedulable`) unless the
//! pod tolerates the `node.kubernetes.io/unschedulable:NoSchedule` taint.

use std::sync::LazyLock;

use crate::cache::NodeState;
use crate::framework::{CycleState, FilterPlugin, Plugin, Rejection};
use crate::model::{PodInfo, Taint, TaintEffect};

pub const NAME: &str = "NodeUnschedulable";
pub const REASON: &str = "node(s) were unschedulable";
/// The taint a cordoned node is treated as carrying.
pub const UNSCHEDULABLE_TAINT_KEY: &str = "node.kubernetes.io/unschedulable";

static UNSCHEDULABLE_TAINT: LazyLock<Taint> = LazyLock::new(|| Taint {
    key: UNSCHEDULABLE_TAINT_KEY.to_owned(),
    value: String::new(),
    effect: TaintEffect::NoSchedule,
});

#[derive(Debug, Default, Clone, Copy)]
pub struct NodeUnschedulable;

impl Plugin for NodeUnschedulable {
    fn name(&self) -> &'static str {
        NAME
    }
}

impl FilterPlugin for NodeUnschedulable {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeState) -> Result<(), Rejection> {
        if !node.info.unschedulable
            || pod
                .constraints
                .tolerations
                .iter()
                .any(|t| t.tolerates(&UNSCHEDULABLE_TAINT))
        {
            return Ok(());
        }
        Err(Rejection::unresolvable(REASON))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::test_util::{node, pod};
    use serde_json::json;

    #[test]
    fn cordoned_node_is_rejected_unless_tolerated() {
        let cordoned = node("n", &[]).unschedulable().build();
        let plain = pod(json!({"containers": [{"name": "c"}]}));
        let err = NodeUnschedulable
            .filter(&CycleState::new(), &plain, &cordoned)
            .unwrap_err();
        assert_eq!(err, Rejection::unresolvable("node(s) were unschedulable"));

        let tolerant = pod(json!({"containers": [{"name": "c"}], "tolerations": [
            {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]}));
        assert!(
            NodeUnschedulable
                .filter(&CycleState::new(), &tolerant, &cordoned)
                .is_ok()
        );

        let wrong_effect = pod(json!({"containers": [{"name": "c"}], "tolerations": [
            {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoExecute"}]}));
        assert!(
            NodeUnschedulable
                .filter(&CycleState::new(), &wrong_effect, &cordoned)
                .is_err()
        );
    }

    #[test]
    fn schedulable_node_passes() {
        let n = node("n", &[]).build();
        assert!(
            NodeUnschedulable
                .filter(&CycleState::new(), &pod(json!({})), &n)
                .is_ok()
        );
    }
}
