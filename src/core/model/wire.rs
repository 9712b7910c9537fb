//! Lean serde shapes of the Kubernetes objects the scheduler reads.
//!
//! Only the fields scheduling needs are decoded; everything else in the JSON is
//! skipped while parsing, so a pod costs a few hundred bytes in memory instead of
//! the kilobytes of a full `k8s_openapi` object (kube-scheduler strips
//! `managedFields` for the same reason). Fields newer than the compiled API
//! version, like `spec.schedulingGroup`, are read regardless of the cluster's
//! version. Both pod and node shapes round-trip the fields they hold.
//!
//! Metadata is lean too: `managedFields`, `finalizers`, owner references
//! other than the controller's and the like are skipped, annotations are kept only when the scheduler reads
//! them (`KEPT_ANNOTATION_PREFIXES`; kubectl's `last-applied-configuration`
//! alone is a copy of the whole object), and timestamps are parsed once, here,
//! into `DateTime<Utc>`.

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Utc};
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

/// Annotations the scheduler reads (dialects and Muster's own); others are
/// skipped while decoding.
pub const KEPT_ANNOTATION_PREFIXES: &[&str] = &[
    "muster.dev/",
    "scheduling.k8s.io/",
    "kueue.x-k8s.io/",
    "scheduling.volcano.sh/",
    "volcano.sh/task-spec",
];

/// Whether the scheduler reads this annotation.
pub fn is_kept_annotation(key: &str) -> bool {
    KEPT_ANNOTATION_PREFIXES.iter().any(|p| key.starts_with(p))
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectMetaWire {
    pub name: Option<String>,
    pub namespace: Option<String>,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    /// An unparsable timestamp reads as absent (it sorts first).
    #[serde(deserialize_with = "lenient_timestamp")]
    pub creation_timestamp: Option<DateTime<Utc>>,
    #[serde(deserialize_with = "lenient_timestamp")]
    pub deletion_timestamp: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Only the annotations the scheduler reads ([`is_kept_annotation`]).
    #[serde(
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "kept_annotations"
    )]
    pub annotations: BTreeMap<String, String>,
    /// Only the controller's reference (`controller: true`): topology
    /// spreading's default constraints take the selector of the controlling
    /// ReplicaSet, StatefulSet or ReplicationController.
    #[serde(
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "controller_refs"
    )]
    pub owner_references: Vec<OwnerReferenceWire>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct OwnerReferenceWire {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
    pub controller: Option<bool>,
}

/// `ownerReferences`, keeping only the controlling one (at most one is valid).
fn controller_refs<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<OwnerReferenceWire>, D::Error> {
    let all = Option::<Vec<OwnerReferenceWire>>::deserialize(d)?.unwrap_or_default();
    Ok(all
        .into_iter()
        .filter(|r| r.controller == Some(true))
        .take(1)
        .collect())
}

/// An RFC 3339 timestamp, `null`, or absent; anything unparsable is `None`
/// rather than an error, so one odd object does not fail a whole list.
fn lenient_timestamp<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DateTime<Utc>>, D::Error> {
    struct Timestamp;
    impl<'de> Visitor<'de> for Timestamp {
        type Value = Option<DateTime<Utc>>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an RFC 3339 timestamp or null")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(DateTime::parse_from_rfc3339(v)
                .ok()
                .map(|t| t.with_timezone(&Utc)))
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_str(self)
        }
    }
    d.deserialize_option(Timestamp)
}

/// The annotations map, keeping only [`is_kept_annotation`] entries: the
/// values of the others are skipped without being allocated.
fn kept_annotations<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    struct Kept;
    impl<'de> Visitor<'de> for Kept {
        type Value = BTreeMap<String, String>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a map of annotations or null")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut kept = BTreeMap::new();
            while let Some(key) = map.next_key::<String>()? {
                if is_kept_annotation(&key) {
                    kept.insert(key, map.next_value::<String>()?);
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(kept)
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(BTreeMap::new())
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(BTreeMap::new())
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_map(self)
        }
    }
    d.deserialize_option(Kept)
}

// ----- pods -----

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct PodWire {
    pub metadata: ObjectMetaWire,
    pub spec: PodSpecWire,
    pub status: PodStatusWire,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct PodSpecWire {
    pub node_name: Option<String>,
    pub scheduler_name: Option<String>,
    pub priority: Option<i32>,
    pub priority_class_name: Option<String>,
    /// `Never` or `PreemptLowerPriority` (the default).
    pub preemption_policy: Option<String>,
    /// Seconds the pod may run from its start: its declared end, which
    /// reservations' backfill reads.
    pub active_deadline_seconds: Option<i64>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    pub affinity: Option<AffinityWire>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<TolerationWire>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub containers: Vec<ContainerWire>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub init_containers: Vec<ContainerWire>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub overhead: BTreeMap<String, QuantityWire>,
    /// Pod-level resources (KEP-2837); when set they take precedence for cpu/memory.
    pub resources: Option<ResourceRequirementsWire>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scheduling_gates: Vec<NameWire>,
    /// Kubernetes 1.36+: `spec.schedulingGroup.podGroupName`.
    pub scheduling_group: Option<SchedulingGroupWire>,
    /// Kubernetes 1.35: `spec.workloadRef`.
    pub workload_ref: Option<WorkloadRefWire>,
    /// Dynamic resource allocation claims (`DynamicResources`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resource_claims: Vec<PodResourceClaimWire>,
    /// The volume sources the volume plugins read (`super::volumes`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<super::volumes::VolumeWire>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub topology_spread_constraints: Vec<TopologySpreadConstraintWire>,
}

/// `spec.topologySpreadConstraints[]`; numbers are read wide so that an
/// out-of-range value is refused with a message rather than a decode error.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct TopologySpreadConstraintWire {
    pub max_skew: Option<i64>,
    pub topology_key: String,
    pub when_unsatisfiable: String,
    pub label_selector: Option<LabelSelectorWire>,
    pub min_domains: Option<i64>,
    pub node_affinity_policy: Option<String>,
    pub node_taints_policy: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub match_label_keys: Vec<String>,
}

/// `metav1.LabelSelector`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct LabelSelectorWire {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<RequirementWire>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct PodStatusWire {
    pub phase: Option<String>,
    pub nominated_node_name: Option<String>,
    /// When the kubelet accepted the pod (preemption prefers victims that
    /// started last); a missing or unreadable time reads as creation.
    pub start_time: Option<String>,
    /// The claims the resourceclaim controller generated from templates.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resource_claim_statuses: Vec<PodResourceClaimStatusWire>,
}

/// `spec.resourceClaims[]`: a claim by name, or one generated per pod from
/// a template.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct PodResourceClaimWire {
    pub name: String,
    pub resource_claim_name: Option<String>,
    pub resource_claim_template_name: Option<String>,
}

/// `status.resourceClaimStatuses[]`: the claim generated for an entry.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct PodResourceClaimStatusWire {
    pub name: String,
    pub resource_claim_name: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct NameWire {
    pub name: String,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct SchedulingGroupWire {
    pub pod_group_name: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct WorkloadRefWire {
    pub name: Option<String>,
    pub pod_group: Option<String>,
    pub pod_group_replica_key: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ContainerWire {
    pub name: String,
    /// The image reference (`ImageLocality` scores nodes that have it).
    pub image: Option<String>,
    pub resources: Option<ResourceRequirementsWire>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<ContainerPortWire>,
    /// `Always` on an init container marks a sidecar.
    pub restart_policy: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ResourceRequirementsWire {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, QuantityWire>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, QuantityWire>,
}

/// Quantities arrive as strings, but hand-written JSON sometimes carries numbers.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(untagged)]
pub enum QuantityWire {
    Str(String),
    Int(i64),
    Float(f64),
}

impl QuantityWire {
    pub fn as_string(&self) -> String {
        match self {
            QuantityWire::Str(s) => s.clone(),
            QuantityWire::Int(i) => i.to_string(),
            QuantityWire::Float(f) => f.to_string(),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ContainerPortWire {
    pub container_port: i32,
    pub host_port: Option<i32>,
    /// The API spells it `hostIP`, which `camelCase` would not produce.
    #[serde(rename = "hostIP")]
    pub host_ip: Option<String>,
    pub protocol: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct TolerationWire {
    pub key: Option<String>,
    pub operator: Option<String>,
    pub value: Option<String>,
    pub effect: Option<String>,
    pub toleration_seconds: Option<i64>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct AffinityWire {
    pub node_affinity: Option<NodeAffinityWire>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_affinity: Option<super::pod_affinity::PodAffinityWire>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_anti_affinity: Option<super::pod_affinity::PodAffinityWire>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeAffinityWire {
    pub required_during_scheduling_ignored_during_execution: Option<NodeSelectorWire>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub preferred_during_scheduling_ignored_during_execution: Vec<PreferredTermWire>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeSelectorWire {
    pub node_selector_terms: Vec<NodeSelectorTermWire>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeSelectorTermWire {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<RequirementWire>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub match_fields: Vec<RequirementWire>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct RequirementWire {
    pub key: String,
    pub operator: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct PreferredTermWire {
    pub weight: i32,
    pub preference: NodeSelectorTermWire,
}

// ----- nodes -----

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeWire {
    pub metadata: ObjectMetaWire,
    pub spec: NodeSpecWire,
    pub status: NodeStatusWire,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeSpecWire {
    pub unschedulable: Option<bool>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<TaintWire>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeStatusWire {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: BTreeMap<String, QuantityWire>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub allocatable: BTreeMap<String, QuantityWire>,
    /// Images the kubelet reports present (`ImageLocality`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ContainerImageWire>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ContainerImageWire {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    pub size_bytes: Option<i64>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct TaintWire {
    pub key: String,
    pub value: Option<String>,
    pub effect: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn metadata_keeps_only_what_scheduling_reads() {
        let meta: ObjectMetaWire = serde_json::from_value(json!({
            "name": "p", "namespace": "ml", "uid": "u", "resourceVersion": "7",
            "creationTimestamp": "2026-01-02T03:04:05Z",
            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
            "ownerReferences": [{"kind": "Job", "name": "j", "uid": "x"}],
            "finalizers": ["f"],
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "{\"a huge\": \"copy\"}",
                "scheduling.k8s.io/group-name": "g",
                "muster.dev/ignore-groups": "true"
            }
        }))
        .unwrap();
        assert_eq!(
            meta.annotations.keys().collect::<Vec<_>>(),
            ["muster.dev/ignore-groups", "scheduling.k8s.io/group-name"]
        );
        let created = meta.creation_timestamp.unwrap();
        assert_eq!(created.timestamp_millis(), 1_767_323_045_000);
        // Round-trips as the API spells it.
        let back = serde_json::to_value(&meta).unwrap();
        assert_eq!(back["creationTimestamp"], "2026-01-02T03:04:05Z");
        assert_eq!(
            serde_json::from_value::<ObjectMetaWire>(back).unwrap(),
            meta
        );
    }

    #[test]
    fn odd_timestamps_and_null_maps_read_as_absent() {
        let meta: ObjectMetaWire = serde_json::from_value(json!({
            "creationTimestamp": "yesterday", "deletionTimestamp": null,
            "annotations": null, "labels": {}
        }))
        .unwrap();
        assert_eq!(meta, ObjectMetaWire::default());
        let offset: ObjectMetaWire =
            serde_json::from_value(json!({"deletionTimestamp": "2026-01-02T04:04:05+01:00"}))
                .unwrap();
        assert_eq!(
            offset.deletion_timestamp.map(|t| t.timestamp()),
            Some(1_767_323_045)
        );
    }
}
