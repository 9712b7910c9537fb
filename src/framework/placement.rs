//! The placement runner: PreFilter → sampled, parallel Filter → Score →
//! normalise → weighted sum → select.
//!
//! NOTE: placeholder implementation (first feasible node, no sampling, no
//! scoring) that fixes the API; the real runner replaces the body.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use super::{CycleState, FilterPlugin, PreFilterPlugin, PreFilterResult, ScorePlugin};
use crate::cache::NodeState;
use crate::model::PodInfo;

/// Which plugins a profile runs, with score weights and sampling.
#[derive(Clone, Default)]
pub struct Framework {
    pub pre_filters: Vec<Arc<dyn PreFilterPlugin>>,
    pub filters: Vec<Arc<dyn FilterPlugin>>,
    pub scorers: Vec<(Arc<dyn ScorePlugin>, i64)>,
    /// `percentageOfNodesToScore`; `None` is kube-scheduler's adaptive default.
    pub percentage_of_nodes_to_score: Option<u32>,
}

/// A successful placement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Index into the node slice passed to `schedule`.
    pub node_index: usize,
    pub node_name: Arc<str>,
    /// Nodes run through Filter.
    pub evaluated: usize,
    /// Nodes that passed every Filter.
    pub feasible: usize,
}

/// No node fits: per-reason node counts, formatted exactly like kube-scheduler
/// (`0/5 nodes are available: 3 Insufficient cpu, 2 node(s) had untolerated taint {a: b}.`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FitError {
    pub num_all_nodes: usize,
    /// Reason → number of nodes rejected for it.
    pub reasons: BTreeMap<Cow<'static, str>, usize>,
    /// True when every rejection was `UnschedulableAndUnresolvable`.
    pub unresolvable: bool,
}

impl fmt::Display for FitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0/{} nodes are available", self.num_all_nodes)?;
        let mut sep = ": ";
        for (reason, count) in &self.reasons {
            write!(f, "{sep}{count} {reason}")?;
            sep = ", ";
        }
        write!(f, ".")
    }
}

impl Framework {
    /// Places one pod on `nodes`. `next_start` is the rotating start index for
    /// sampling, carried between cycles by the caller.
    pub fn schedule(
        &self,
        pod: &PodInfo,
        nodes: &[NodeState],
        next_start: &mut usize,
    ) -> Result<Placement, FitError> {
        let _ = next_start;
        let mut state = CycleState::new();
        let mut reasons: BTreeMap<Cow<'static, str>, usize> = BTreeMap::new();
        for p in &self.pre_filters {
            if let PreFilterResult::Reject(r) = p.pre_filter(&mut state, pod) {
                reasons.insert(r.reason, nodes.len());
                return Err(FitError {
                    num_all_nodes: nodes.len(),
                    reasons,
                    unresolvable: r.unresolvable,
                });
            }
        }
        for (i, node) in nodes.iter().enumerate() {
            match self
                .filters
                .iter()
                .try_for_each(|f| f.filter(&state, pod, node))
            {
                Ok(()) => {
                    return Ok(Placement {
                        node_index: i,
                        node_name: node.info.name.clone(),
                        evaluated: i + 1,
                        feasible: 1,
                    });
                }
                Err(r) => *reasons.entry(r.reason).or_insert(0) += 1,
            }
        }
        Err(FitError {
            num_all_nodes: nodes.len(),
            reasons,
            unresolvable: false,
        })
    }
}
