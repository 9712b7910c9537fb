//! Lean API types for the watch streams: `kube::Resource` implementations that
//! deserialize only what scheduling reads (see `model::wire`), so a 50,000-pod
//! watch never materialises full `k8s_openapi` pods.
//!
//! `kube::Resource` needs an `ObjectMeta`, but it is filled only with what
//! scheduling and the watcher read (name, namespace, uid, resourceVersion,
//! timestamps, labels, the annotations the scheduler keeps): the metadata is
//! decoded as `ObjectMetaWire`, so `managedFields`, owner references other
//! than the controller's and the other annotations are skipped while parsing,
//! never held.

use std::borrow::Cow;
use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube::api::ObjectMeta;
use serde::{Deserialize, Deserializer, Serialize};

use muster_core::model::volumes;
use muster_core::model::wire::{
    NodeSpecWire, NodeStatusWire, NodeWire, ObjectMetaWire, OwnerReferenceWire, PodSpecWire,
    PodStatusWire, PodWire,
};

/// A pod as the scheduler watches it.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct LeanPod {
    #[serde(deserialize_with = "lean_meta")]
    pub metadata: ObjectMeta,
    pub spec: PodSpecWire,
    pub status: PodStatusWire,
}

/// A node as the scheduler watches it.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct LeanNode {
    #[serde(deserialize_with = "lean_meta")]
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

/// Decodes metadata through the lean wire shape into the `ObjectMeta` that
/// `kube::Resource` requires.
fn lean_meta<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    let w = ObjectMetaWire::deserialize(d)?;
    let non_empty = |m: BTreeMap<String, String>| (!m.is_empty()).then_some(m);
    Ok(ObjectMeta {
        name: w.name,
        namespace: w.namespace,
        uid: w.uid,
        resource_version: w.resource_version,
        creation_timestamp: w.creation_timestamp.and_then(to_time),
        deletion_timestamp: w.deletion_timestamp.and_then(to_time),
        labels: non_empty(w.labels),
        annotations: non_empty(w.annotations),
        owner_references: (!w.owner_references.is_empty()).then(|| {
            w.owner_references
                .into_iter()
                .map(|r| OwnerReference {
                    api_version: r.api_version,
                    kind: r.kind,
                    name: r.name,
                    uid: r.uid,
                    controller: r.controller,
                    block_owner_deletion: None,
                })
                .collect()
        }),
        ..ObjectMeta::default()
    })
}

fn meta_wire(m: ObjectMeta) -> ObjectMetaWire {
    ObjectMetaWire {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        resource_version: m.resource_version,
        creation_timestamp: m.creation_timestamp.and_then(from_time),
        deletion_timestamp: m.deletion_timestamp.and_then(from_time),
        labels: m.labels.unwrap_or_default(),
        annotations: m.annotations.unwrap_or_default(),
        owner_references: m
            .owner_references
            .unwrap_or_default()
            .into_iter()
            .map(|r| OwnerReferenceWire {
                api_version: r.api_version,
                kind: r.kind,
                name: r.name,
                uid: r.uid,
                controller: r.controller,
            })
            .collect(),
    }
}

/// Timestamp to timestamp, no text in between (microseconds: finer than the
/// API's seconds).
fn to_time(t: DateTime<Utc>) -> Option<Time> {
    Timestamp::from_microsecond(t.timestamp_micros())
        .ok()
        .map(Time)
}

fn from_time(t: Time) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp_micros(t.0.as_microsecond())
}

/// `kube::Resource` for a lean type of a built-in kind: `$group` is `""`
/// for the core group; every kind here is served as `v1`.
macro_rules! lean_v1_resource {
    ($ty:ty, $group:literal, $kind:literal, $plural:literal, $scope:ty) => {
        impl kube::Resource for $ty {
            type DynamicType = ();
            type Scope = $scope;

            fn kind(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($kind)
            }
            fn group(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($group)
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
/// `muster load`, `muster simulate`): lean metadata and `spec.nodeName`,
/// nothing else decoded.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct PodPlacement {
    #[serde(deserialize_with = "lean_meta")]
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

/// The storage objects the volume plugins read, lean like pods and nodes:
/// metadata through `lean_meta`, the rest through `model::volumes`' shapes.
macro_rules! lean_storage_object {
    ($name:ident { $($field:ident: $ty:ty),* } => $wire:ident) => {
        #[derive(Debug, Clone, Default, Deserialize, Serialize)]
        #[serde(default)]
        pub struct $name {
            #[serde(deserialize_with = "lean_meta")]
            pub metadata: ObjectMeta,
            $(pub $field: $ty,)*
        }

        impl $name {
            pub fn into_wire(self) -> volumes::$wire {
                volumes::$wire {
                    metadata: meta_wire(self.metadata),
                    $($field: self.$field,)*
                }
            }
        }
    };
}

lean_storage_object!(LeanClaim { spec: volumes::ClaimSpecWire, status: volumes::ClaimStatusWire } => ClaimWire);
lean_storage_object!(LeanVolume { spec: volumes::PvSpecWire, status: volumes::ClaimStatusWire } => PvWire);
lean_storage_object!(LeanCsiNode { spec: volumes::CsiNodeSpecWire } => CsiNodeWire);
lean_storage_object!(LeanCsiDriver { spec: volumes::CsiDriverSpecWire } => CsiDriverWire);

/// A StorageClass keeps its fields at the top level.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LeanStorageClass {
    #[serde(deserialize_with = "lean_meta")]
    pub metadata: ObjectMeta,
    pub provisioner: String,
    pub volume_binding_mode: Option<String>,
    pub allowed_topologies: Vec<volumes::TopologyTermWire>,
}

impl LeanStorageClass {
    pub fn into_wire(self) -> volumes::StorageClassWire {
        volumes::StorageClassWire {
            metadata: meta_wire(self.metadata),
            provisioner: self.provisioner,
            volume_binding_mode: self.volume_binding_mode,
            allowed_topologies: self.allowed_topologies,
        }
    }
}

lean_v1_resource!(LeanPod, "", "Pod", "pods", NamespaceResourceScope);
lean_v1_resource!(PodPlacement, "", "Pod", "pods", NamespaceResourceScope);
lean_v1_resource!(LeanNode, "", "Node", "nodes", ClusterResourceScope);
lean_v1_resource!(
    LeanClaim,
    "",
    "PersistentVolumeClaim",
    "persistentvolumeclaims",
    NamespaceResourceScope
);
lean_v1_resource!(
    LeanVolume,
    "",
    "PersistentVolume",
    "persistentvolumes",
    ClusterResourceScope
);
lean_v1_resource!(
    LeanStorageClass,
    "storage.k8s.io",
    "StorageClass",
    "storageclasses",
    ClusterResourceScope
);
lean_v1_resource!(
    LeanCsiNode,
    "storage.k8s.io",
    "CSINode",
    "csinodes",
    ClusterResourceScope
);
lean_v1_resource!(
    LeanCsiDriver,
    "storage.k8s.io",
    "CSIDriver",
    "csidrivers",
    ClusterResourceScope
);

#[cfg(test)]
mod tests {
    use super::*;
    use muster_core::model::{NodeInfo, PodInfo};

    #[test]
    fn lean_pod_decodes_a_full_pod_and_feeds_the_model() {
        let json = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ml", "uid": "u1", "resourceVersion": "42",
                "creationTimestamp": "2026-01-02T03:04:05Z",
                "deletionTimestamp": "2026-01-02T03:05:05Z",
                "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "x"}],
                "finalizers": ["example.com/f"],
                "annotations": {
                    "kubectl.kubernetes.io/last-applied-configuration": "{}",
                    "kueue.x-k8s.io/pod-group-total-count": "2"
                },
                "labels": {"app": "x"}},
            "spec": {"schedulerName": "muster", "containers": [{"name": "c", "image": "busybox",
                "resources": {"requests": {"cpu": "250m"}}}],
                "schedulingGroup": {"podGroupName": "pg"}},
            "status": {"phase": "Pending", "conditions": []}
        });
        let pod: LeanPod = serde_json::from_value(json).unwrap();
        // What the watcher reads, and nothing scheduling does not.
        let m = &pod.metadata;
        assert_eq!(m.resource_version.as_deref(), Some("42"));
        assert!(m.managed_fields.is_none() && m.owner_references.is_none());
        assert!(m.finalizers.is_none());
        let annotations = m.annotations.as_ref().unwrap();
        assert_eq!(
            annotations.keys().collect::<Vec<_>>(),
            ["kueue.x-k8s.io/pod-group-total-count"]
        );
        assert_eq!(
            m.creation_timestamp.as_ref().unwrap().0.as_second(),
            1_767_323_045
        );
        let wire = pod.into_wire();
        assert_eq!(
            wire.metadata.creation_timestamp.unwrap().timestamp(),
            1_767_323_045
        );
        let info = PodInfo::from_wire_resolved(&wire).unwrap();
        assert_eq!(info.requests.milli_cpu, 250);
        assert_eq!(info.created_ms, 1_767_323_045_000);
        assert!(info.deleting);
        assert!(info.group.key().is_some());
    }

    #[test]
    fn lean_node_keeps_labels_and_drops_the_rest() {
        let json = serde_json::json!({
            "metadata": {"name": "n1", "resourceVersion": "3", "labels": {"zone": "a"},
                "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
                "managedFields": [{"manager": "kubelet"}]},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}
        });
        let node: LeanNode = serde_json::from_value(json).unwrap();
        assert!(node.metadata.annotations.is_none() && node.metadata.managed_fields.is_none());
        let info = NodeInfo::from_wire(&node.into_wire()).unwrap();
        assert_eq!(info.labels.get("zone").map(String::as_str), Some("a"));
        assert_eq!(info.allocatable.milli_cpu, 4000);
    }
}
