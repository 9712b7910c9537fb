//! kube-scheduler's in-tree placement plugins Muster ships, one file each, and
//! the registry that assembles them into a profile's `Framework`.
//!
//! Filters: `NodeUnschedulable`, `NodeName`, `TaintToleration`, `NodeAffinity`,
//! `NodePorts`, `NodeResourcesFit`, `PodTopologySpread`. Scores:
//! `TaintToleration`, `NodeAffinity`, `NodeResourcesFit`, `PodTopologySpread`,
//! `NodeResourcesBalancedAllocation`. Reasons and formulas
//! are documented in `docs/plugins.md`. `registry` is the table of every
//! plugin (these and the gang plugin), `merge` applies a profile's `plugins`
//! and `pluginConfig` over its defaults, `build` makes the `Framework`.

pub mod balanced_allocation;
pub mod build;
pub mod merge;
pub mod node_affinity;
pub mod node_name;
pub mod node_ports;
pub mod node_resources_fit;
pub mod node_unschedulable;
mod normalize;
pub mod pod_topology_spread;
pub mod registry;
pub mod resource_allocation;
pub mod taint_toleration;
#[cfg(test)]
pub(crate) mod test_util;

pub use balanced_allocation::{BalancedAllocation, BalancedAllocationArgs};
pub use build::build_framework;
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
