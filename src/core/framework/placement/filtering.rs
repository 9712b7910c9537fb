//! Finding feasible nodes: the sampled, rotating, optionally parallel Filter pass.
//!
//! Nodes are visited in the order `start, start+1, ..` (wrapping) over the
//! candidate list, and the search stops at the `need`-th feasible node, exactly
//! as a sequential kube-scheduler would. The parallel path evaluates the same
//! order in waves of contiguous chunks and merges the chunks in order, so it
//! picks the same nodes as the sequential path; the only cost of parallelism is
//! at most one wave of nodes evaluated past the cut and then ignored.

use std::borrow::Cow;
use std::ops::Range;

use rayon::prelude::*;

use super::super::{CycleState, FilterPlugin, Rejection};
use super::batch::{Batch, Known, Seen};
use crate::cache::NodeState;
use crate::model::PodInfo;
use std::sync::Arc;

/// The nodes PreFilter left to evaluate, as indices into the node slice.
pub(super) enum Candidates {
    /// Every node, `0..n`.
    All(usize),
    /// A subset, in node-slice order.
    Only(Vec<usize>),
}

impl Candidates {
    pub(super) fn len(&self) -> usize {
        match self {
            Candidates::All(n) => *n,
            Candidates::Only(v) => v.len(),
        }
    }

    fn node_index(&self, i: usize) -> usize {
        match self {
            Candidates::All(_) => i,
            Candidates::Only(v) => v[i],
        }
    }
}

/// Rejection reasons with node counts. A short vector beats a map here: a
/// cycle rarely sees more than a handful of distinct reasons.
#[derive(Debug, Default)]
pub(super) struct Diagnosis {
    pub reasons: Vec<(Cow<'static, str>, usize)>,
    pub rejected: usize,
    pub resolvable: usize,
    /// The plugins that rejected, each once.
    pub plugins: Vec<&'static str>,
}

impl Diagnosis {
    fn record(&mut self, rejection: Rejection) {
        self.rejected += 1;
        if !rejection.unresolvable {
            self.resolvable += 1;
        }
        let Rejection {
            reason,
            more_reasons,
            plugin,
            ..
        } = rejection;
        if !self.plugins.contains(&plugin) {
            self.plugins.push(plugin);
        }
        self.count(reason, 1);
        for r in more_reasons {
            self.count(r, 1);
        }
    }

    pub(super) fn count(&mut self, reason: Cow<'static, str>, n: usize) {
        match self.reasons.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, c)) => *c += n,
            None => self.reasons.push((reason, n)),
        }
    }

    fn merge(&mut self, other: Diagnosis) {
        self.rejected += other.rejected;
        self.resolvable += other.resolvable;
        for p in other.plugins {
            if !self.plugins.contains(&p) {
                self.plugins.push(p);
            }
        }
        for (r, n) in other.reasons {
            self.count(r, n);
        }
    }
}

/// What the Filter pass found.
pub(super) struct Search {
    /// Indices into the node slice, in evaluation order.
    pub feasible: Vec<usize>,
    /// Nodes run through Filter up to the cut (feasible and rejected).
    pub processed: usize,
    /// Rejections; complete only when `feasible` is empty (otherwise the
    /// reasons are never reported and collecting them would be wasted work).
    pub diagnosis: Diagnosis,
    /// Verdicts computed for the batch memo, by node index (empty without one).
    pub learnt: Vec<(usize, Known)>,
}

/// How many nodes ahead the filter loop prefetches a node's `NodeInfo`: the
/// first touch of each node's spec is a cache miss that dominates the cost of
/// the cheap filters (measured with perf on the 5,000-node benchmark).
const PREFETCH_DISTANCE: usize = 4;

/// Hints the CPU to load `value`'s first cache line.
#[inline(always)]
pub(super) fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` is a hint that never faults, and SSE is part of
    // the x86_64 baseline.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>((value as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// Everything one Filter pass reads.
pub(super) struct FilterPass<'a> {
    pub filters: &'a [Arc<dyn FilterPlugin>],
    pub state: &'a CycleState,
    pub pod: &'a PodInfo,
    pub nodes: &'a [NodeState],
    pub candidates: &'a Candidates,
    /// Position in `candidates` where the search starts.
    pub start: usize,
    /// Stop after this many feasible nodes.
    pub need: usize,
    /// Fan out over threads only for waves at least this long.
    pub parallel_min_nodes: usize,
    /// Verdicts remembered for pods like this one (opportunistic batching).
    pub memo: Option<&'a Batch>,
}

/// One contiguous run of positions, evaluated by one thread.
struct ChunkResult {
    /// Positions (not node indices) of feasible nodes, ascending.
    feasible: Vec<usize>,
    diagnosis: Diagnosis,
    learnt: Vec<(usize, Known)>,
}

impl FilterPass<'_> {
    pub(super) fn run(&self) -> Search {
        let total = self.candidates.len();
        let mut search = Search {
            feasible: Vec::with_capacity(self.need.min(total)),
            processed: total,
            diagnosis: Diagnosis::default(),
            learnt: Vec::new(),
        };
        let threads = rayon::current_num_threads();
        let mut pos = 0;
        while pos < total && search.feasible.len() < self.need {
            let still_needed = self.need - search.feasible.len();
            let (wave, parallel) = self.next_wave(pos, search.feasible.len(), still_needed, total);
            let results = if parallel {
                let chunk = wave.div_ceil(threads);
                (0..threads)
                    .into_par_iter()
                    .map(|t| {
                        let from = pos + t * chunk;
                        self.eval_chunk(
                            from.min(pos + wave)..(from + chunk).min(pos + wave),
                            still_needed,
                        )
                    })
                    .collect::<Vec<_>>()
            } else {
                vec![self.eval_chunk(pos..pos + wave, still_needed)]
            };
            pos += wave;
            if self.merge(&mut search, results) {
                break;
            }
        }
        search
    }

    /// The next wave's length, and whether to fan it out. Sequential search
    /// needs no waves (it stops by itself at the cut); a parallel wave is sized
    /// from the feasibility rate seen so far, with a quarter of slack, and is
    /// used only when that many nodes are worth the rayon hand-off.
    fn next_wave(
        &self,
        pos: usize,
        found: usize,
        still_needed: usize,
        total: usize,
    ) -> (usize, bool) {
        let left = total - pos;
        // Nodes still to visit at the feasibility rate seen so far; with no
        // feasible node yet, assume all are feasible on the first wave and
        // none after it.
        let estimate = match still_needed.saturating_mul(pos).checked_div(found) {
            Some(e) => e,
            None if pos == 0 => still_needed,
            None => left,
        };
        let wave = (estimate + estimate / 4).clamp(1, left);
        if rayon::current_num_threads() <= 1 || wave < self.parallel_min_nodes.max(2) {
            return (left, false);
        }
        (wave, true)
    }

    /// Merges chunk results in order; returns true once the cut is reached.
    fn merge(&self, search: &mut Search, results: Vec<ChunkResult>) -> bool {
        for chunk in results {
            // Every chunk's verdicts are true whether or not the cut uses them.
            search.learnt.extend(chunk.learnt);
            let had_feasible = !search.feasible.is_empty();
            for p in chunk.feasible {
                search.feasible.push(self.node_at(p));
                if search.feasible.len() == self.need {
                    search.processed = p + 1;
                    return true;
                }
            }
            if !had_feasible && search.feasible.is_empty() {
                search.diagnosis.merge(chunk.diagnosis);
            }
        }
        false
    }

    /// The node index at search position `p`: the candidates from `start`
    /// on, wrapping. `start` and `p` are below the candidate count, so one
    /// subtraction wraps it (a division per node showed in profiles).
    #[inline]
    fn node_at(&self, p: usize) -> usize {
        let m = self.candidates.len();
        let q = self.start + p;
        self.candidates.node_index(if q >= m { q - m } else { q })
    }

    /// Runs the filters over `range`, stopping early at `need` feasible nodes
    /// (nodes past that point can never be chosen).
    fn eval_chunk(&self, range: Range<usize>, need: usize) -> ChunkResult {
        let mut out = ChunkResult {
            feasible: Vec::new(),
            diagnosis: Diagnosis::default(),
            learnt: Vec::new(),
        };
        // A warm memo answers for almost every node without reading it:
        // fetching the nodes ahead would only evict the memo's tables.
        let prefetching = !self.memo.is_some_and(Batch::warm);
        let end = range.end;
        for p in range {
            if prefetching && p + PREFETCH_DISTANCE < end {
                prefetch(&*self.nodes[self.node_at(p + PREFETCH_DISTANCE)].info);
            }
            let index = self.node_at(p);
            // Once this chunk has a feasible node the pod will be placed, so
            // reasons are no longer needed and need not be built.
            let passed = match self.memo.and_then(|b| b.verdict(index, self.nodes)) {
                Some(Seen::Pass) => true,
                Some(Seen::Fail(Some(r))) if out.feasible.is_empty() => {
                    out.diagnosis.record(r.clone());
                    false
                }
                Some(Seen::Fail(_)) if !out.feasible.is_empty() => false,
                // Unknown, or a rejection whose reason is now needed.
                _ => self.evaluate(&self.nodes[index], index, &mut out),
            };
            if passed {
                out.feasible.push(p);
            }
            if out.feasible.len() == need {
                break;
            }
        }
        out
    }

    /// Runs the filters on one node: with reasons while the chunk has no
    /// feasible node, without after; learns the verdict when batching.
    fn evaluate(&self, node: &NodeState, index: usize, out: &mut ChunkResult) -> bool {
        let batching = self.memo.is_some();
        if out.feasible.is_empty() {
            match self.filter_node(node) {
                Ok(()) => {
                    if batching {
                        out.learnt.push((index, Known::Pass));
                    }
                    true
                }
                Err(r) => {
                    if batching {
                        out.learnt.push((index, Known::Fail(Some(r.clone()))));
                    }
                    out.diagnosis.record(r);
                    false
                }
            }
        } else {
            let passed = self
                .filters
                .iter()
                .all(|f| f.passes(self.state, self.pod, node));
            if batching {
                let known = if passed {
                    Known::Pass
                } else {
                    Known::Fail(None)
                };
                out.learnt.push((index, known));
            }
            passed
        }
    }

    /// Every filter in order, stopping at the first rejection (kube-scheduler's
    /// `RunFilterPlugins` outside preemption).
    fn filter_node(&self, node: &NodeState) -> Result<(), Rejection> {
        for f in self.filters {
            f.filter(self.state, self.pod, node)
                .map_err(|r| r.by(f.name()))?;
        }
        Ok(())
    }
}
