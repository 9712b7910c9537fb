//! `NodePorts`: a pod's host ports must be free on the node (same protocol and
//! port, overlapping host IP, is a conflict).

use crate::cache::NodeState;
use crate::framework::{CycleState, FilterPlugin, Plugin, Rejection};
use crate::model::PodInfo;

pub const NAME: &str = "NodePorts";
pub const REASON: &str = "node(s) didn't have free ports for the requested pod ports";

#[derive(Debug, Default, Clone, Copy)]
pub struct NodePorts;

impl Plugin for NodePorts {
    fn name(&self) -> &'static str {
        NAME
    }
}

impl FilterPlugin for NodePorts {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeState) -> Result<(), Rejection> {
        let conflict = pod
            .constraints
            .host_ports
            .iter()
            .any(|want| node.used_ports.iter().any(|used| used.conflicts(want)));
        if conflict {
            // Plain Unschedulable: evicting the pod holding the port would help.
            return Err(Rejection::new(REASON));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::test_util::{node, pod, pod_named};
    use serde_json::json;

    fn with_port(port: i32, ip: &str, proto: &str) -> PodInfo {
        pod_named(
            "holder",
            json!({"containers": [{"name": "c", "ports": [
                {"containerPort": 1, "hostPort": port, "hostIP": ip, "protocol": proto}]}]}),
        )
    }

    #[test]
    fn conflicting_port_is_rejected() {
        let s = CycleState::new();
        let n = node("n", &[]).with_pod(with_port(8080, "", "TCP")).build();
        let err = NodePorts
            .filter(&s, &with_port(8080, "10.0.0.1", "TCP"), &n)
            .unwrap_err();
        assert_eq!(
            err,
            Rejection::new("node(s) didn't have free ports for the requested pod ports")
        );
        assert!(!err.unresolvable);
        assert!(
            NodePorts
                .filter(&s, &with_port(8080, "", "UDP"), &n)
                .is_ok()
        );
        assert!(
            NodePorts
                .filter(&s, &with_port(8081, "", "TCP"), &n)
                .is_ok()
        );
        assert!(NodePorts.filter(&s, &pod(json!({})), &n).is_ok());
    }

    #[test]
    fn distinct_ips_do_not_conflict() {
        let s = CycleState::new();
        let n = node("n", &[])
            .with_pod(with_port(80, "10.0.0.1", "TCP"))
            .build();
        assert!(
            NodePorts
                .filter(&s, &with_port(80, "10.0.0.2", "TCP"), &n)
                .is_ok()
        );
        assert!(
            NodePorts
                .filter(&s, &with_port(80, "0.0.0.0", "TCP"), &n)
                .is_err()
        );
    }
}
