//! Builders for plugin and runner tests: pods from JSON specs, nodes by hand.

use std::sync::Arc;

use crate::cache::NodeState;
use crate::model::{NodeInfo, PodInfo, Resources, Taint, TaintEffect};

/// A pod `ns/<name>` with the given `spec` JSON.
pub fn pod_named(name: &str, spec: serde_json::Value) -> PodInfo {
    let v = serde_json::json!({"metadata": {"name": name, "namespace": "ns", "uid": name}, "spec": spec});
    PodInfo::from_json(&serde_json::to_vec(&v).expect("json")).expect("valid pod")
}

pub fn pod(spec: serde_json::Value) -> PodInfo {
    pod_named("p", spec)
}

/// A pod with one container requesting `requests` (e.g. `[("cpu", "1")]`).
pub fn pod_requesting(requests: &[(&str, &str)]) -> PodInfo {
    let reqs: serde_json::Map<String, serde_json::Value> = requests
        .iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.to_string())))
        .collect();
    pod(serde_json::json!({"containers": [{"name": "c", "resources": {"requests": reqs}}]}))
}

pub struct NodeBuilder {
    info: NodeInfo,
    pods: Vec<PodInfo>,
}

/// A node with `allocatable` (defaults: 110 pods).
pub fn node(name: &str, allocatable: &[(&str, &str)]) -> NodeBuilder {
    let mut alloc = Resources::from_quantities(allocatable.iter().copied()).expect("quantities");
    if alloc.pods == 0 {
        alloc.pods = 110;
    }
    NodeBuilder {
        info: NodeInfo::new(name, alloc),
        pods: Vec::new(),
    }
}

impl NodeBuilder {
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.info.labels.insert(k.into(), v.into());
        self
    }

    pub fn taint(mut self, key: &str, value: &str, effect: TaintEffect) -> Self {
        self.info.taints.push(Taint {
            key: key.into(),
            value: value.into(),
            effect,
        });
        self
    }

    pub fn unschedulable(mut self) -> Self {
        self.info.unschedulable = true;
        self
    }

    /// Accounts `pod` on the node.
    pub fn with_pod(mut self, pod: PodInfo) -> Self {
        self.pods.push(pod);
        self
    }

    pub fn build(self) -> NodeState {
        let mut state = NodeState::new(Arc::new(self.info));
        for p in &self.pods {
            state.add_pod(&Arc::new(p.clone()));
        }
        state
    }
}
