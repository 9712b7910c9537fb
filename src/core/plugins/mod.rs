//! kube-scheduler's in-tree placement plugins Muster ships, one file each, and
//! the registry that assembles them into a profile's `Framework`.
//!
//! Which plugins there are, at which points, is the table in `registry`
//! (these and the gang plugin); their reasons and formulas are documented in
//! `docs/plugins.md`. `merge` applies a profile's `plugins` and
//! `pluginConfig` over the defaults, `build` makes the `Framework`.

pub mod balanced_allocation;
pub mod build;
pub mod dynamic_resources;
pub mod image_locality;
pub mod inter_pod_affinity;
pub mod merge;
pub mod node_affinity;
pub mod node_name;
pub mod node_ports;
pub mod node_resources_fit;
pub mod node_unschedulable;
pub mod node_volume_limits;
mod normalize;
pub mod pod_spec_fields;
pub mod pod_topology_spread;
pub mod registry;
pub mod resource_allocation;
pub mod taint_toleration;
#[cfg(test)]
pub(crate) mod test_util;
pub mod volume_binding;
pub mod volume_restrictions;
pub mod volume_zone;

pub use balanced_allocation::{BalancedAllocation, BalancedAllocationArgs};
pub use build::{BuiltPlugins, build_framework, build_plugins};
pub use inter_pod_affinity::{InterPodAffinity, InterPodAffinityArgs};
pub use merge::{EnabledPlugins, PluginConfigSpec, PluginsSpec, merge_args, merge_plugins};
pub use node_affinity::NodeAffinity;
pub use node_name::NodeName;
pub use node_ports::NodePorts;
pub use node_resources_fit::{
    NodeResourcesFit, NodeResourcesFitArgs, ResourceSpec, ScoringStrategy, ScoringStrategyType,
    UtilizationShapePoint,
};
pub use node_unschedulable::NodeUnschedulable;
pub use pod_topology_spread::{PodTopologySpread, PodTopologySpreadArgs};
pub use registry::{Point, REGISTRY, Registration};
pub use taint_toleration::TaintToleration;
