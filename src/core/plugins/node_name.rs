//! `NodeName`: a pod that names a node (`spec.nodeName`) fits only that node.

use crate::cache::NodeState;
use crate::framework::{CycleState, FilterPlugin, Plugin, Rejection};
use crate::model::PodInfo;

pub const NAME: &str = "NodeName";
pub const REASON: &str = "node(s) didn't match the requested node name";

#[derive(Debug, Default, Clone, Copy)]
pub struct NodeName;

impl Plugin for NodeName {
    fn name(&self) -> &'static str {
        NAME
    }
}

impl FilterPlugin for NodeName {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeState) -> Result<(), Rejection> {
        match &pod.node_name {
            Some(wanted) if **wanted != *node.info.name => Err(Rejection::unresolvable(REASON)),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::test_util::{node, pod};
    use serde_json::json;

    #[test]
    fn matches_only_the_named_node() {
        let p = pod(json!({"nodeName": "a"}));
        let s = CycleState::new();
        assert!(NodeName.filter(&s, &p, &node("a", &[]).build()).is_ok());
        assert_eq!(
            NodeName.filter(&s, &p, &node("b", &[]).build()),
            Err(Rejection::unresolvable(
                "node(s) didn't match the requested node name"
            ))
        );
        assert!(
            NodeName
                .filter(&s, &pod(json!({})), &node("b", &[]).build())
                .is_ok()
        );
    }
}
