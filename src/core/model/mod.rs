//! Lean internal types for what scheduling needs of pods, nodes and groups.
//!
//! Built from raw JSON through the `wire` shapes (so fields newer than the compiled
//! API version are read) or from `k8s-openapi` objects. Nothing here does I/O.

mod constraints;
pub mod deadline;
pub mod disruption;
pub mod extended;
mod group;
mod node;
mod pod;
mod pod_affinity;
pub mod pod_claims;
mod quantity;
mod requests;
mod resources;
mod selector;
pub mod shared;
pub mod spread;
mod taint;
pub mod topology;
pub mod volumes;
pub mod wire;

pub use constraints::Constraints;
pub use group::{
    CappedTimeout, DefinitionKey, DisruptionMode, GroupDef, GroupExtras, GroupKey, GroupMembership,
    GroupPhase, GroupPolicy, GroupSource, KueueOptions, MAX_GROUP_COUNT, MAX_GROUP_RESOURCE_CLAIMS,
    MAX_HIERARCHY_DEPTH, MAX_SCHEDULE_TIMEOUT, OwnerKind, PreemptionPolicy, TASK_ANNOTATION,
};
pub use node::NodeInfo;
pub use pod::{
    DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST, HostPort, Ignoring, PodInfo, PodKey, PodMap,
    PodPhase, PodSet, namespace_or_default, parse_timestamp_ms,
};
pub use pod_affinity::{
    MAX_TERMS as MAX_POD_AFFINITY_TERMS, PodAffinity, PodAffinityTerm, PodAffinityTermWire,
    PodAffinityWire, WeightedPodAffinityTerm, WeightedPodAffinityTermWire,
};
pub use quantity::{Quantity, QuantityError};
pub use resources::{CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Resources, is_scalar_resource};
pub use selector::{
    LabelSelector, NodeSelector, NodeSelectorTerm, Operator, PreferredTerm, Requirement,
};
pub use spread::{PodSpread, SpreadConstraint, WhenUnsatisfiable};
pub use taint::{Taint, TaintEffect, Toleration, first_untolerated};
pub use topology::{LevelRef, SliceRequest, TopologyRequest};

/// A Kubernetes object that cannot be turned into a scheduling model; the message
/// names the object and the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ModelError(pub String);

impl ModelError {
    pub fn invalid(msg: impl Into<String>) -> Self {
        ModelError(msg.into())
    }
}

impl From<QuantityError> for ModelError {
    fn from(e: QuantityError) -> Self {
        ModelError(e.to_string())
    }
}
