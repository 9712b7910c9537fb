//! Dry runs for preemption: PreFilter once for a pod, then "does it pass
//! every Filter on this node as it would be?" for node states edited by the
//! caller (victims taken off a copy of the node). As kube-scheduler's
//! `SelectVictimsOnNode`, the answer is exact for node-local plugins;
//! plugins that count pods across nodes (inter-pod affinity, spread) read
//! their PreFilter state of the unedited cluster, so the engine re-checks
//! a chosen candidate on the edited node table before acting on it.

use super::filtering::Candidates;
use super::{Framework, Snapshot};
use crate::cache::NodeState;
use crate::framework::{CycleState, FitError};
use crate::model::PodInfo;

/// A pod's PreFilter state, ready to test nodes.
pub struct DryRun<'f> {
    framework: &'f Framework,
    state: CycleState,
    candidates: Candidates,
}

impl Framework {
    /// Runs PreFilter for `pod` on `snapshot`; `Err` when PreFilter alone
    /// rules out every node (no eviction can help then).
    pub fn dry_run(&self, pod: &PodInfo, snapshot: &Snapshot<'_>) -> Result<DryRun<'_>, FitError> {
        let mut state = CycleState::new();
        let (candidates, _) = self.run_pre_filters(&mut state, pod, snapshot, None)?;
        Ok(DryRun {
            framework: self,
            state,
            candidates,
        })
    }
}

impl DryRun<'_> {
    /// Whether PreFilter left node `i` to evaluate.
    pub fn considers(&self, i: usize) -> bool {
        match &self.candidates {
            Candidates::All(n) => i < *n,
            Candidates::Only(v) => v.binary_search(&i).is_ok(),
        }
    }

    /// Whether `pod` passes every Filter on `node`.
    pub fn fits(&self, pod: &PodInfo, node: &NodeState) -> bool {
        self.framework
            .filters
            .iter()
            .all(|f| f.passes(&self.state, pod, node))
    }
}
