//! Scoring feasible nodes and selecting one: PreScore → Score → NormalizeScore →
//! weight → sum → highest total, ties broken by reservoir sampling.

use std::sync::Arc;

use rayon::prelude::*;

use super::super::{CycleState, MAX_NODE_SCORE, ScorePlugin, Snapshot};
use super::TieBreaker;
use super::batch::Batch;
use crate::model::PodInfo;

/// Everything one scoring pass reads.
pub(super) struct ScorePass<'a> {
    pub scorers: &'a [(Arc<dyn ScorePlugin>, i64)],
    pub pod: &'a PodInfo,
    pub snapshot: &'a Snapshot<'a>,
    /// Indices into `nodes` of the feasible nodes.
    pub feasible: &'a [usize],
    /// Score in parallel only from this many nodes.
    pub parallel_min_nodes: usize,
}

impl ScorePass<'_> {
    /// Weighted total per feasible node, in `feasible` order. With a batch
    /// memo, raw scores it holds for a node are read back instead of
    /// computed, and the ones computed are remembered.
    pub(super) fn totals(&self, state: &mut CycleState, mut memo: Option<&mut Batch>) -> Vec<i64> {
        let n = self.feasible.len();
        let mut totals = vec![0i64; n];
        // PreScore runs once per plugin; a plugin that skips is not scored.
        let mut mask = 0u64;
        let mut active: Vec<&(Arc<dyn ScorePlugin>, i64)> = Vec::new();
        for (k, scorer) in self.scorers.iter().enumerate() {
            if scorer
                .0
                .pre_score(state, self.pod, self.snapshot, self.feasible)
            {
                mask |= 1u64
                    .checked_shl(u32::try_from(k).unwrap_or(u32::MAX))
                    .unwrap_or(0);
                active.push(scorer);
            }
        }
        if active.is_empty() || n == 0 {
            return totals;
        }
        if let Some(b) = memo.as_deref_mut() {
            b.score_set(mask, active.len());
        }
        let state = &*state;
        let (node_major, computed) = self.raw_scores(state, &active, memo.as_deref());
        if let Some(b) = memo {
            self.remember(b, &node_major, &computed, active.len());
        }
        let mut raw = transpose(&node_major, n, active.len());
        for ((plugin, weight), scores) in active.iter().zip(raw.chunks_mut(n)) {
            plugin.normalize(state, self.pod, scores);
            for (total, s) in totals.iter_mut().zip(scores.iter()) {
                // kube-scheduler rejects out-of-range normalised scores as a
                // plugin bug; clamping keeps one bad plugin from dominating.
                *total += (*s).clamp(0, MAX_NODE_SCORE) * weight;
            }
        }
        totals
    }

    /// Raw scores, node-major (`raw[i * k + j]` is plugin `j` on node `i`):
    /// each thread touches each node once while it is hot in cache. Rows the
    /// memo holds are copied from it; the second vector says which rows
    /// were computed instead (the ones to remember).
    fn raw_scores(
        &self,
        state: &CycleState,
        active: &[&(Arc<dyn ScorePlugin>, i64)],
        memo: Option<&Batch>,
    ) -> (Vec<i64>, Vec<bool>) {
        let n = self.feasible.len();
        let nodes = self.snapshot.nodes;
        // As in Filter: a warm memo holds the rows, not worth fetching nodes for.
        let prefetching = !memo.is_some_and(Batch::warm);
        let score_node = |i: usize, out: &mut [i64]| -> bool {
            if let Some(&ahead) = self.feasible.get(i + 4).filter(|_| prefetching) {
                super::filtering::prefetch(&*nodes[ahead].info);
            }
            let index = self.feasible[i];
            if let Some(known) = memo.and_then(|b| b.scores(index, nodes)) {
                // The row is the score set's width, as `out` is.
                for (o, v) in out.iter_mut().zip(known) {
                    *o = *v;
                }
                return false;
            }
            let node = &nodes[index];
            for (slot, (plugin, _)) in out.iter_mut().zip(active) {
                *slot = plugin.score(state, self.pod, node);
            }
            true
        };
        let k = active.len();
        let mut node_major = vec![0i64; n * k];
        let mut computed = vec![false; n];
        if rayon::current_num_threads() > 1 && n >= self.parallel_min_nodes.max(2) {
            node_major
                .par_chunks_mut(k)
                .zip(computed.par_iter_mut())
                .with_min_len(64)
                .enumerate()
                .for_each(|(i, (row, c))| *c = score_node(i, row));
        } else {
            for ((i, row), c) in node_major.chunks_mut(k).enumerate().zip(&mut computed) {
                *c = score_node(i, row);
            }
        }
        (node_major, computed)
    }

    /// Stores the rows computed in this pass.
    fn remember(&self, memo: &mut Batch, node_major: &[i64], computed: &[bool], k: usize) {
        let rows = node_major.chunks(k).zip(computed).enumerate();
        for (i, (row, _)) in rows.filter(|(_, (_, c))| **c) {
            let index = self.feasible[i];
            memo.remember_scores(index, &self.snapshot.nodes[index], row);
        }
    }
}

/// Node-major rows of `k` scores to plugin-major (`raw[j * n + i]`).
fn transpose(node_major: &[i64], n: usize, k: usize) -> Vec<i64> {
    let mut raw = vec![0i64; n * k];
    for (i, row) in node_major.chunks(k).enumerate() {
        for (j, s) in row.iter().enumerate() {
            raw[j * n + i] = *s;
        }
    }
    raw
}

/// The position of the highest total; among equal totals each is chosen with
/// equal probability (reservoir sampling, one draw per tie, as kube-scheduler's
/// `selectHost`).
pub(super) fn select_highest(totals: &[i64], rng: &TieBreaker) -> usize {
    let mut best = 0;
    let mut ties = 1u64;
    for (i, &t) in totals.iter().enumerate().skip(1) {
        if t > totals[best] {
            best = i;
            ties = 1;
        } else if t == totals[best] {
            ties += 1;
            if rng.below(ties) == 0 {
                best = i;
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_maximum() {
        let rng = TieBreaker::new(1);
        assert_eq!(select_highest(&[3, 9, 4], &rng), 1);
        assert_eq!(select_highest(&[5], &rng), 0);
    }

    #[test]
    fn ties_are_uniform() {
        let rng = TieBreaker::new(42);
        let mut counts = [0u32; 4];
        for _ in 0..20_000 {
            counts[select_highest(&[7, 1, 7, 7], &rng)] += 1;
        }
        assert_eq!(counts[1], 0);
        for i in [0, 2, 3] {
            assert!((6_000..7_400).contains(&counts[i]), "{counts:?}");
        }
    }
}
