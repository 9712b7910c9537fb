//! The scheduling framework: extension points and the cycle that runs them.
//!
//! Placement (PreFilter, Filter, Score and the runner that samples, filters in
//! parallel, scores, normalises and selects a node) lives in `placement`; the
//! points around it (PreEnqueue, QueueSort, PostFilter, Reserve/Unreserve,
//! Permit) are in `lifecycle` and are driven by the engine.
//!
//! Filter and Score plugins are pure functions of `(CycleState, PodInfo,
//! NodeState)` and `Sync`, so the runner may fan out over nodes with rayon.

pub mod args;
pub mod cycle_state;
pub mod lifecycle;
pub mod pending;
pub mod placement;
pub mod queueing;
pub mod snapshot;

use std::borrow::Cow;

pub use args::{Args, ConfigError, PluginArgs};
pub use cycle_state::CycleState;
pub use pending::PendingReason;
pub use placement::{FitError, Framework, Placement};
pub use queueing::{EventSet, QueueingEvent};
pub use snapshot::Snapshot;

use crate::cache::NodeState;
use crate::model::PodInfo;

/// Highest score a Score plugin returns after normalisation (kube-scheduler's
/// `MaxNodeScore`).
pub const MAX_NODE_SCORE: i64 = 100;

/// Every plugin has a stable name (kube-scheduler's, where one exists).
pub trait Plugin: Send + Sync {
    fn name(&self) -> &'static str;
}

/// Why a node (or the whole pod, from PreFilter) was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// kube-scheduler's wording, e.g. `Insufficient cpu`,
    /// `node(s) had untolerated taint {key: value}`.
    pub reason: Cow<'static, str>,
    /// `UnschedulableAndUnresolvable`: no eviction on this node could help.
    pub unresolvable: bool,
    /// Further reasons from the same plugin, each counted on its own in a
    /// `FitError` (kube-scheduler's multi-reason `Status`, e.g. `Insufficient
    /// cpu` and `Insufficient memory` from one node). Empty, and so
    /// allocation-free, for the common single-reason case.
    pub more_reasons: Vec<Cow<'static, str>>,
    /// The plugin that rejected: the framework stamps it (`by`), so the
    /// engine knows which plugins' queueing events the pod waits for.
    pub plugin: &'static str,
}

impl Rejection {
    pub fn new(reason: impl Into<Cow<'static, str>>) -> Self {
        Rejection {
            reason: reason.into(),
            unresolvable: false,
            more_reasons: Vec::new(),
            plugin: "",
        }
    }

    pub fn unresolvable(reason: impl Into<Cow<'static, str>>) -> Self {
        Rejection {
            reason: reason.into(),
            unresolvable: true,
            more_reasons: Vec::new(),
            plugin: "",
        }
    }

    /// Adds another reason from the same plugin.
    pub fn and(mut self, reason: impl Into<Cow<'static, str>>) -> Self {
        self.more_reasons.push(reason.into());
        self
    }

    /// The rejection as made by `plugin`.
    pub fn by(mut self, plugin: &'static str) -> Self {
        self.plugin = plugin;
        self
    }

    /// Every reason, the first one first.
    pub fn reasons(&self) -> impl Iterator<Item = &Cow<'static, str>> {
        std::iter::once(&self.reason).chain(&self.more_reasons)
    }
}

/// What PreFilter decided for this cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreFilterResult {
    /// Evaluate every node (subject to sampling).
    AllNodes,
    /// Evaluate only these nodes (e.g. `NodeName`); others are rejected with the
    /// plugin's reason.
    OnlyNodes(Vec<std::sync::Arc<str>>),
    /// The pod cannot be scheduled on any node this cycle.
    Reject(Rejection),
}

/// A narrowing decided outside placement (the gang plugin's required
/// topology): only these nodes may be evaluated; every other node counts
/// `reason` in the fit error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRestriction {
    /// Indices into the node slice passed to `Framework::schedule_within`,
    /// ascending.
    pub nodes: Vec<usize>,
    /// Why the other nodes were left out, counted per node like a Filter
    /// reason (e.g. `node(s) outside topology.kubernetes.io/rack=r1 required
    /// by PodGroup ml/train`).
    pub reason: String,
}

/// PreFilter: per-cycle pre-computation into `CycleState`, optional narrowing.
/// `snapshot` is the whole cluster of this cycle (every node, with its pods),
/// for plugins that count across nodes (inter-pod affinity, spread).
pub trait PreFilterPlugin: Plugin {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot<'_>,
    ) -> PreFilterResult;
}

/// Filter: can `pod` run on `node`?
pub trait FilterPlugin: Plugin {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeState) -> Result<(), Rejection>;

    /// `filter(..).is_ok()` without building a reason. The runner calls this
    /// once it knows reasons will not be reported (a feasible node exists), so
    /// plugins whose reasons allocate should override it.
    fn passes(&self, state: &CycleState, pod: &PodInfo, node: &NodeState) -> bool {
        self.filter(state, pod, node).is_ok()
    }
}

/// Score: how good is `node` for `pod`, before normalisation.
pub trait ScorePlugin: Plugin {
    /// Per-cycle pre-computation; returning `false` skips this plugin for the pod
    /// (kube-scheduler's PreScore `Skip`). `feasible` indexes the nodes of
    /// `snapshot` that passed Filter.
    fn pre_score(
        &self,
        _state: &mut CycleState,
        _pod: &PodInfo,
        _snapshot: &Snapshot<'_>,
        _feasible: &[usize],
    ) -> bool {
        true
    }
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeState) -> i64;
    /// Rescales raw scores into `0..=MAX_NODE_SCORE` (NormalizeScore).
    fn normalize(&self, _state: &CycleState, _pod: &PodInfo, _scores: &mut [i64]) {}
}
