//! kube-scheduler's in-tree placement plugins Muster ships, one file each, and
//! `PlacementConfig`, which assembles them into a `Framework`.
//!
//! Filters: `NodeUnschedulable`, `NodeName`, `TaintToleration`, `NodeAffinity`,
//! `NodePorts`, `NodeResourcesFit`. Scores: `TaintToleration`, `NodeAffinity`,
//! `NodeResourcesFit`, `NodeResourcesBalancedAllocation`. Reasons and formulas
//! are documented in `docs/plugins.md`.

pub mod balanced_allocation;
pub mod config;
pub mod node_affinity;
pub mod node_name;
pub mod node_ports;
pub mod node_resources_fit;
pub mod node_unschedulable;
mod normalize;
pub mod resource_allocation;
pub mod taint_toleration;
#[cfg(test)]
pub(crate) mod test_util;

pub use balanced_allocation::{BalancedAllocation, BalancedAllocationArgs};
pub use config::{ConfigError, PlacementConfig, PluginRef, PluginSet};
pub use node_affinity::NodeAffinity;
pub use node_name::NodeName;
pub use node_ports::NodePorts;
pub use node_resources_fit::{
    NodeResourcesFit, NodeResourcesFitArgs, ResourceSpec, ScoringStrategy, ScoringStrategyType,
    UtilizationShapePoint,
};
pub use node_unschedulable::NodeUnschedulable;
pub use taint_toleration::TaintToleration;
