//! Lean API types for the watch streams: `kube::Resource` implementations that
//! deserialize only what scheduling reads (see `model::wire`), so a 50,000-pod
//! watch never materialises full `k8s_openapi` pods.

use std::borrow::Cow;

use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube::api::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::model::wire::{
    NodeSpecWire, NodeStatusWire, NodeWire, ObjectMetaWire, PodSpecWire, PodStatusWire, PodWire,
};

/// A pod as the scheduler watches it.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct LeanPod {
    pub metadata: ObjectMeta,
    pub spec: PodSpecWire,
    pub status: PodStatusWire,
}

/// A node as the scheduler watches it.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct LeanNode {
    pub metadata: ObjectMeta,
    pub spec: NodeSpecWire,
    pub status: NodeStatusWire,
}

impl LeanPod {
    pub fn into_wire(self) -> PodWire {
        PodWire {
            metadata: meta_wire(self.metadata),
            spec: self.spec,
            status: self.status,
        }
    }
}

impl LeanNode {
    pub fn into_wire(self) -> NodeWire {
        NodeWire {
            metadata: meta_wire(self.metadata),
            spec: self.spec,
            status: self.status,
        }
    }
}

fn meta_wire(m: ObjectMeta) -> ObjectMetaWire {
    ObjectMetaWire {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        resource_version: m.resource_version,
        creation_timestamp: m.creation_timestamp.map(|t| t.0.to_string()),
        deletion_timestamp: m.deletion_timestamp.map(|t| t.0.to_string()),
        labels: m.labels.unwrap_or_default(),
        annotations: m.annotations.unwrap_or_default(),
    }
}

macro_rules! core_v1_resource {
    ($ty:ty, $kind:literal, $plural:literal, $scope:ty) => {
        impl kube::Resource for $ty {
            type DynamicType = ();
            type Scope = $scope;

            fn kind(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($kind)
            }
            fn group(_: &()) -> Cow<'_, str> {
                Cow::Borrowed("")
            }
            fn version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed("v1")
            }
            fn plural(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($plural)
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

/// A pod as a client sees it that only asks where it runs (the watches of
/// `muster load`): metadata and `spec.nodeName`, nothing else decoded.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct PodPlacement {
    pub metadata: ObjectMeta,
    pub spec: PlacementSpec,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PlacementSpec {
    pub node_name: Option<String>,
}

impl PodPlacement {
    /// Bound to a node.
    pub fn is_bound(&self) -> bool {
        self.spec
            .node_name
            .as_deref()
            .is_some_and(|n| !n.is_empty())
    }
}

core_v1_resource!(LeanPod, "Pod", "pods", NamespaceResourceScope);
core_v1_resource!(PodPlacement, "Pod", "pods", NamespaceResourceScope);
core_v1_resource!(LeanNode, "Node", "nodes", ClusterResourceScope);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::PodInfo;

    #[test]
    fn lean_pod_decodes_a_full_pod_and_feeds_the_model() {
        let json = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ml", "uid": "u1",
                "creationTimestamp": "2026-01-02T03:04:05Z",
                "managedFields": [{"manager": "kubectl"}],
                "labels": {"app": "x"}},
            "spec": {"schedulerName": "muster", "containers": [{"name": "c", "image": "busybox",
                "resources": {"requests": {"cpu": "250m"}}}],
                "schedulingGroup": {"podGroupName": "pg"}},
            "status": {"phase": "Pending", "conditions": []}
        });
        let pod: LeanPod = serde_json::from_value(json).unwrap();
        let info = PodInfo::from_wire_resolved(&pod.into_wire()).unwrap();
        assert_eq!(info.requests.milli_cpu, 250);
        assert_eq!(info.created_ms, 1_767_323_045_000);
        assert!(info.group.key().is_some());
    }
}
