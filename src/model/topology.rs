//! Topology as the dialects describe it: the hierarchies a cluster declares
//! (Kueue `Topology` objects, Volcano `HyperNode` tiers, the plugin's
//! `topologyLevels`) and what a group asks of them (`TopologyRequest`).
//!
//! These are descriptions only; the domains they induce over the node table
//! are the cache's (`cache::topology`), and placing a gang within them is the
//! gang planner's (`gang::plan`).

use std::sync::Arc;

use super::LabelSelector;

/// A level of a hierarchy as a group names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LevelRef {
    /// A node label key (Kueue, the Workload API, Muster's annotation): a
    /// domain at this level is the nodes sharing the values of this label
    /// and of every outer level of the hierarchy that lists it.
    Label(Arc<str>),
    /// A Volcano HyperNode tier (1 is the innermost): a domain is one
    /// HyperNode of that tier with every node under it.
    Tier(u32),
}

impl std::fmt::Display for LevelRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LevelRef::Label(key) => write!(f, "{key}"),
            LevelRef::Tier(t) => write!(f, "HyperNode tier {t}"),
        }
    }
}

/// `podset-slice-required-topology` with `podset-slice-size`: the gang is
/// cut into slices of `size` members, each within one domain of `level`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceRequest {
    pub level: LevelRef,
    pub size: u32,
}

/// What a group asks of topology, whatever the dialect.
///
/// The planner tries levels from the narrowest asked for outwards: from
/// `preferred` (when set) up to `required`; the gang goes into one domain of
/// the first level that holds it. With no `required` level a gang that fits
/// no domain is placed across the cluster; with one, it is refused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopologyRequest {
    /// The widest level the gang may span (PodGroup
    /// `schedulingConstraints.topology`, Kueue `podset-required-topology`,
    /// Volcano hard mode's `highestTierAllowed`).
    pub required: Option<LevelRef>,
    /// The level to try first (Kueue `podset-preferred-topology`, Muster's
    /// `muster.dev/preferred-topology`, Volcano's tier 1).
    pub preferred: Option<LevelRef>,
    /// Slices within the required (or preferred) domain.
    pub slice: Option<SliceRequest>,
    /// Kueue `podset-unconstrained-topology: "true"`: no constraint; the
    /// gang is packed into as few domains as the heuristics find.
    pub unconstrained: bool,
}

impl TopologyRequest {
    /// Nothing asked.
    pub fn is_empty(&self) -> bool {
        self.required.is_none()
            && self.preferred.is_none()
            && self.slice.is_none()
            && !self.unconstrained
    }

    /// Only a required level (the common case: one label, one domain).
    pub fn required(level: LevelRef) -> Self {
        TopologyRequest {
            required: Some(level),
            ..TopologyRequest::default()
        }
    }

    /// Only a preferred level, falling back to the whole cluster.
    pub fn preferred(level: LevelRef) -> Self {
        TopologyRequest {
            preferred: Some(level),
            ..TopologyRequest::default()
        }
    }
}

/// A Kueue `Topology` object (`kueue.x-k8s.io`): node label keys, outermost
/// level first (`spec.levels[].nodeLabel`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyDef {
    pub name: Arc<str>,
    pub levels: Vec<Arc<str>>,
}

/// The most levels a hierarchy may have (Kueue's limit is 16).
pub const MAX_TOPOLOGY_LEVELS: usize = 16;

/// A Volcano `HyperNode` (`topology.volcano.sh`): one domain of its tier,
/// whose members are nodes (tier 1) or HyperNodes of a lower tier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HyperNodeDef {
    pub name: Arc<str>,
    pub tier: u32,
    pub members: Vec<HyperNodeMember>,
}

/// One `spec.members[]` entry of a HyperNode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HyperNodeMember {
    /// `type`: `Node` or `HyperNode`.
    pub kind: HyperNodeMemberKind,
    pub selector: MemberSelector,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HyperNodeMemberKind {
    Node,
    HyperNode,
}

/// `selector` of a HyperNode member: exactly one of these is set upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberSelector {
    /// `exactMatch.name`.
    Exact(Arc<str>),
    /// `regexMatch.pattern`, validated when read (a pattern that does not
    /// compile makes the HyperNode invalid, never a match-everything).
    Regex(Arc<str>),
    /// `labelMatch`: a label selector over nodes.
    Labels(LabelSelector),
}

/// A change to the topology objects a cluster declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopologyChange {
    TopologyUpserted(TopologyDef),
    TopologyDeleted(Arc<str>),
    HyperNodeUpserted(HyperNodeDef),
    HyperNodeDeleted(Arc<str>),
}
