//! Lean serde shapes of the Kubernetes objects the scheduler reads.
//!
//! Only the fields scheduling needs are decoded; everything else in the JSON is
//! skipped while parsing, so a pod costs a few hundred bytes in memory instead of
//! the kilobytes of a full `k8s_openapi` object (kube-scheduler strips
//! `managedFields` for the same reason). Fields newer than the compiled API
//! version, like `spec.schedulingGroup`, are read regardless of the cluster's
//! version. Both pod and node shapes round-trip the fields they hold.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectMetaWire {
    pub name: Option<String>,
    pub namespace: Option<String>,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    pub creation_timestamp: Option<String>,
    pub deletion_timestamp: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
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
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct PodStatusWire {
    pub phase: Option<String>,
    pub nominated_node_name: Option<String>,
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
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct TaintWire {
    pub key: String,
    pub value: Option<String>,
    pub effect: String,
}
