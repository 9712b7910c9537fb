//! The placement runner: PreFilter → sampled, parallel Filter → Score →
//! normalise → weighted sum → select, with kube-scheduler's `schedulePod`
//! semantics.
//!
//! Submodules each own one step: `sampling` (how many feasible nodes to find),
//! `filtering` (the rotating, chunked Filter pass), `scoring` (Score, normalise,
//! select), `fit_error` (the failure message), `tie_break` (the seeded RNG) and
//! `batch` (per-node answers reused across a run of like pods).

mod batch;
mod dry_run;
mod filtering;
mod fit_error;
mod sampling;
mod scoring;
mod tie_break;

use std::borrow::Cow;
use std::sync::Arc;

use super::{
    CycleState, FilterPlugin, NodeRestriction, PreFilterPlugin, PreFilterResult, ScorePlugin,
    Snapshot,
};
use crate::cache::NodeState;
use crate::model::PodInfo;
use filtering::{Candidates, Diagnosis, FilterPass, Search};
use scoring::ScorePass;

pub use batch::Batch;
pub use dry_run::DryRun;
pub use fit_error::FitError;
pub use sampling::{
    MIN_FEASIBLE_NODES_PERCENTAGE, MIN_FEASIBLE_NODES_TO_FIND, num_feasible_nodes_to_find,
};
pub use tie_break::{DEFAULT_TIE_BREAK_SEED, TieBreaker};

/// Below this many nodes in one pass, filtering and scoring stay on the calling
/// thread: measured on a 2-core machine, rayon's hand-off costs more than it
/// saves for shorter runs (see docs/performance.md).
pub const DEFAULT_PARALLEL_MIN_NODES: usize = 1024;

/// How much longer a pass must be to fan out when the batch memo is warm
/// (`Batch::warm`): a remembered answer is a lookup, not a filter run.
const WARM_MEMO_PARALLEL_FACTOR: usize = 16;

/// Which plugins a profile runs, with score weights and sampling.
///
/// `Framework::default()` is kube-scheduler's default profile (see
/// `crate::plugins`); `Framework::empty()` runs no plugin at all.
#[derive(Clone)]
pub struct Framework {
    pub pre_filters: Vec<Arc<dyn PreFilterPlugin>>,
    pub filters: Vec<Arc<dyn FilterPlugin>>,
    pub scorers: Vec<(Arc<dyn ScorePlugin>, i64)>,
    /// `percentageOfNodesToScore`; `None` is kube-scheduler's adaptive default.
    pub percentage_of_nodes_to_score: Option<u32>,
    /// Breaks ties between equally scored nodes; seed it for reproducible runs.
    pub tie_breaker: TieBreaker,
    /// Filter and Score fan out with rayon only for at least this many nodes.
    pub parallel_min_nodes: usize,
    /// VolumeBinding's PreBind, when enabled: after Permit the engine writes
    /// the pod's claim bindings and waits up to this long for them to be
    /// Bound before binding the pod.
    pub volume_bind_timeout: Option<std::time::Duration>,
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

impl Framework {
    /// A framework with no plugins: every node is feasible and scores 0.
    pub fn empty() -> Self {
        Framework {
            pre_filters: Vec::new(),
            filters: Vec::new(),
            scorers: Vec::new(),
            percentage_of_nodes_to_score: None,
            tie_breaker: TieBreaker::default(),
            parallel_min_nodes: DEFAULT_PARALLEL_MIN_NODES,
            volume_bind_timeout: None,
        }
    }

    /// Replaces the tie-breaking RNG with one seeded by `seed`.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.tie_breaker = TieBreaker::new(seed);
        self
    }

    /// Places one pod on `nodes`. `next_start` is the rotating start index for
    /// sampling, carried between cycles by the caller; it advances by the number
    /// of nodes run through Filter, so successive pods start where the last one
    /// stopped and every node gets its turn.
    pub fn schedule(
        &self,
        pod: &PodInfo,
        nodes: &[NodeState],
        next_start: &mut usize,
    ) -> Result<Placement, FitError> {
        self.schedule_within(pod, &Snapshot::of_nodes(nodes), next_start, None)
    }

    /// [`Framework::schedule`] on a whole snapshot, on the nodes of
    /// `restriction` only (when given); the nodes left out count its reason
    /// in the fit error.
    pub fn schedule_within(
        &self,
        pod: &PodInfo,
        snapshot: &Snapshot<'_>,
        next_start: &mut usize,
        restriction: Option<&NodeRestriction>,
    ) -> Result<Placement, FitError> {
        self.place(pod, snapshot, next_start, restriction, None)
    }

    /// [`Framework::schedule_within`] for one of a run of pods: Filter
    /// verdicts and raw scores `batch` remembers for pods like `pod` on
    /// unchanged nodes are reused (see `batch`). The placement is exactly
    /// the one `schedule_within` would make.
    pub fn schedule_batched(
        &self,
        pod: &PodInfo,
        snapshot: &Snapshot<'_>,
        next_start: &mut usize,
        restriction: Option<&NodeRestriction>,
        batch: &mut Batch,
    ) -> Result<Placement, FitError> {
        self.place(pod, snapshot, next_start, restriction, Some(batch))
    }

    fn place(
        &self,
        pod: &PodInfo,
        snapshot: &Snapshot<'_>,
        next_start: &mut usize,
        restriction: Option<&NodeRestriction>,
        batch: Option<&mut Batch>,
    ) -> Result<Placement, FitError> {
        let nodes = snapshot.nodes;
        if nodes.is_empty() {
            return Err(FitError {
                num_all_nodes: 0,
                reasons: Default::default(),
                unresolvable: true,
                pre_filter_msg: None,
                rejected_by: Vec::new(),
            });
        }
        let mut state = CycleState::new();
        let (candidates, absent) = self.run_pre_filters(&mut state, pod, snapshot, restriction)?;
        let mut memo = batch.and_then(|b| b.admit(pod, snapshot).then_some(b));
        let need = num_feasible_nodes_to_find(self.percentage_of_nodes_to_score, candidates.len());
        // Passes that mostly read the memo stay on this thread longer.
        let parallel_min_nodes = match memo.as_deref().is_some_and(Batch::warm) {
            true => self
                .parallel_min_nodes
                .saturating_mul(WARM_MEMO_PARALLEL_FACTOR),
            false => self.parallel_min_nodes,
        };
        let mut search = FilterPass {
            filters: &self.filters,
            state: &state,
            pod,
            nodes,
            candidates: &candidates,
            start: *next_start % candidates.len().max(1),
            need,
            parallel_min_nodes,
            memo: memo.as_deref(),
        }
        .run();
        if let Some(b) = memo.as_deref_mut() {
            b.remember_verdicts(nodes, std::mem::take(&mut search.learnt));
        }
        // As upstream: advance over the whole node list even when PreFilter
        // narrowed it, so the rotation is independent of the pod.
        *next_start = (*next_start + search.processed) % nodes.len();

        let chosen = match search.feasible.len() {
            0 => return Err(fit_error(nodes.len(), absent, search)),
            // One feasible node: nothing to compare, so no scoring (upstream too).
            1 => 0,
            _ => {
                let totals = ScorePass {
                    scorers: &self.scorers,
                    pod,
                    snapshot,
                    feasible: &search.feasible,
                    parallel_min_nodes,
                }
                .totals(&mut state, memo);
                scoring::select_highest(&totals, &self.tie_breaker)
            }
        };
        let node_index = search.feasible[chosen];
        Ok(Placement {
            node_index,
            node_name: nodes[node_index].info.name.clone(),
            evaluated: search.processed,
            feasible: search.feasible.len(),
        })
    }

    /// Runs every PreFilter plugin. `OnlyNodes` results are intersected (with
    /// `restriction` too); an empty intersection or a `Reject` fails the pod
    /// for every node. Returns the candidates and, for the nodes left out, the
    /// reasons with their node counts.
    fn run_pre_filters(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot<'_>,
        restriction: Option<&NodeRestriction>,
    ) -> Result<(Candidates, Absent), FitError> {
        let nodes = snapshot.nodes;
        let mut allowed: Option<Vec<Arc<str>>> = None;
        let mut narrowed_by = Vec::new();
        for plugin in &self.pre_filters {
            match plugin.pre_filter(state, pod, snapshot) {
                PreFilterResult::AllNodes => {}
                PreFilterResult::Reject(r) => {
                    return Err(FitError::pre_filter(
                        plugin.name(),
                        nodes.len(),
                        r.reason,
                        r.unresolvable,
                    ));
                }
                PreFilterResult::OnlyNodes(names) => {
                    narrowed_by.push(plugin.name());
                    let merged = match allowed.take() {
                        None => names,
                        Some(prev) => prev.into_iter().filter(|n| names.contains(n)).collect(),
                    };
                    if merged.is_empty() {
                        // kube-scheduler's wording for an empty merged result.
                        let msg = match narrowed_by.as_slice() {
                            [one] => format!("node(s) didn't satisfy plugin {one}"),
                            many => format!(
                                "node(s) didn't satisfy plugin(s) [{}] simultaneously",
                                many.join(" ")
                            ),
                        };
                        let mut err = FitError::pre_filter("", nodes.len(), Cow::Owned(msg), false);
                        err.rejected_by = fit_error::blamed(narrowed_by);
                        return Err(err);
                    }
                    allowed = Some(merged);
                }
            }
        }
        let named = |i: &usize| match &allowed {
            None => true,
            Some(names) => names.iter().any(|name| **name == *nodes[*i].info.name),
        };
        let candidates = match (restriction, &allowed) {
            (None, None) => Candidates::All(nodes.len()),
            (None, Some(_)) => Candidates::Only((0..nodes.len()).filter(named).collect()),
            (Some(r), _) => Candidates::Only(
                r.nodes
                    .iter()
                    .copied()
                    .filter(|i| *i < nodes.len())
                    .filter(named)
                    .collect(),
            ),
        };
        // The nodes left out: outside the restriction, or not named by a plugin.
        let mut absent = Absent::default();
        let inside = restriction.map_or(nodes.len(), |r| r.nodes.len().min(nodes.len()));
        if let Some(r) = restriction
            && inside < nodes.len()
        {
            absent
                .reasons
                .push((Cow::Owned(r.reason.clone()), nodes.len() - inside));
        }
        if candidates.len() < inside {
            absent.reasons.push((
                Cow::Owned(absent_nodes_reason(&narrowed_by)),
                inside - candidates.len(),
            ));
            absent.plugins.extend(narrowed_by.iter().copied());
        }
        if candidates.len() == 0 {
            if restriction.is_none() {
                // Every named node is unknown: all nodes are "absent".
                let msg = absent_nodes_reason(&narrowed_by);
                let mut err = FitError::pre_filter("", nodes.len(), Cow::Owned(msg), true);
                err.pre_filter_msg = None;
                err.rejected_by = fit_error::blamed(narrowed_by);
                return Err(err);
            }
            return Err(FitError {
                num_all_nodes: nodes.len(),
                reasons: absent.reasons.into_iter().collect(),
                unresolvable: true,
                pre_filter_msg: None,
                rejected_by: fit_error::blamed(absent.plugins),
            });
        }
        Ok((candidates, absent))
    }
}

impl std::fmt::Debug for Framework {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |it: &mut dyn Iterator<Item = &'static str>| it.collect::<Vec<_>>();
        f.debug_struct("Framework")
            .field(
                "pre_filters",
                &names(&mut self.pre_filters.iter().map(|p| p.name())),
            )
            .field(
                "filters",
                &names(&mut self.filters.iter().map(|p| p.name())),
            )
            .field(
                "scorers",
                &self
                    .scorers
                    .iter()
                    .map(|(p, w)| (p.name(), *w))
                    .collect::<Vec<_>>(),
            )
            .field(
                "percentage_of_nodes_to_score",
                &self.percentage_of_nodes_to_score,
            )
            .field("parallel_min_nodes", &self.parallel_min_nodes)
            .finish()
    }
}

/// Nodes PreFilter left out of the search: reason → node count.
/// The nodes PreFilter left out: by reason with node counts, and the
/// plugins that narrowed the candidates (none for a caller's restriction).
#[derive(Default)]
struct Absent {
    reasons: Vec<(Cow<'static, str>, usize)>,
    plugins: Vec<&'static str>,
}

/// kube-scheduler's status for nodes a PreFilter result left out.
fn absent_nodes_reason(plugins: &[&'static str]) -> String {
    let mut sorted = plugins.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    format!("node(s) didn't satisfy plugin(s) [{}]", sorted.join(" "))
}

/// Builds the error for a pass that found no feasible node; `absent` are the
/// nodes PreFilter left out, by reason.
fn fit_error(num_all_nodes: usize, absent: Absent, search: Search) -> FitError {
    let mut diagnosis: Diagnosis = search.diagnosis;
    for (reason, n) in absent.reasons {
        diagnosis.count(reason, n);
    }
    FitError {
        num_all_nodes,
        unresolvable: diagnosis.resolvable == 0,
        reasons: diagnosis.reasons.into_iter().collect(),
        pre_filter_msg: None,
        rejected_by: fit_error::blamed(diagnosis.plugins.into_iter().chain(absent.plugins)),
    }
}

#[cfg(test)]
mod batch_tests;
#[cfg(test)]
mod tests;
