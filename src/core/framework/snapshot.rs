//! `Snapshot`: what a plugin may see of the cluster beyond the node it is
//! filtering or scoring — every node with the pods accounted on it, and the
//! cluster-scoped facts (namespace labels, ...) that PreFilter and PreScore
//! precompute from.
//!
//! The snapshot borrows the cache: the scheduling loop is single-threaded, so
//! it is consistent for the whole cycle (kube-scheduler copies its snapshot
//! once per cycle for the same guarantee).

use crate::cache::{Cache, ClusterFacts, NodeChanges, NodeState};

/// The cluster as one scheduling cycle sees it.
#[derive(Debug, Clone, Copy)]
pub struct Snapshot<'a> {
    /// Every node, in the cache's order; `Placement::node_index` and
    /// `NodeRestriction::nodes` index into it.
    pub nodes: &'a [NodeState],
    pub facts: &'a ClusterFacts,
    /// The log of which `nodes` changed in place, when the nodes are a
    /// cache's own: per-node memos then learn what changed from it instead
    /// of comparing every node's generation (`placement::Batch`).
    pub changes: Option<&'a NodeChanges>,
}

impl<'a> Snapshot<'a> {
    pub fn new(nodes: &'a [NodeState], facts: &'a ClusterFacts) -> Self {
        Snapshot {
            nodes,
            facts,
            changes: None,
        }
    }

    /// The cache's nodes with its facts and its node-change log.
    pub fn of_cache(cache: &'a Cache) -> Self {
        Snapshot {
            nodes: cache.nodes(),
            facts: cache.facts(),
            changes: Some(cache.node_changes()),
        }
    }

    /// Nodes only, no cluster-scoped facts (tests and benches).
    pub fn of_nodes(nodes: &'a [NodeState]) -> Self {
        Snapshot {
            nodes,
            facts: ClusterFacts::empty(),
            changes: None,
        }
    }
}
