//! Scoring feasible nodes and selecting one: PreScore → Score → NormalizeScore →
//! weight → sum → highest total, ties broken by reservoir sampling.

use std::sync::Arc;

use rayon::prelude::*;

use super::super::{CycleState, MAX_NODE_SCORE, ScorePlugin, Snapshot};
use super::TieBreaker;
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
    /// Weighted total per feasible node, in `feasible` order.
    pub(super) fn totals(&self, state: &mut CycleState) -> Vec<i64> {
        let n = self.feasible.len();
        let mut totals = vec![0i64; n];
        // PreScore runs once per plugin; a plugin that skips is not scored.
        let active: Vec<&(Arc<dyn ScorePlugin>, i64)> = self
            .scorers
            .iter()
            .filter(|(plugin, _)| plugin.pre_score(state, self.pod, self.snapshot, self.feasible))
            .collect();
        if active.is_empty() || n == 0 {
            return totals;
        }
        let state = &*state;
        let mut raw = self.raw_scores(state, &active);
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

    /// Raw scores, plugin-major (`raw[k * n + i]` is plugin `k` on node `i`).
    /// The parallel path splits the nodes, not the plugins, so each thread
    /// touches each node once while it is hot in cache.
    fn raw_scores(&self, state: &CycleState, active: &[&(Arc<dyn ScorePlugin>, i64)]) -> Vec<i64> {
        let n = self.feasible.len();
        let score_node = |i: usize, out: &mut [i64]| {
            if let Some(&ahead) = self.feasible.get(i + 4) {
                super::filtering::prefetch(&*self.snapshot.nodes[ahead].info);
            }
            let node = &self.snapshot.nodes[self.feasible[i]];
            for (slot, (plugin, _)) in out.iter_mut().zip(active) {
                *slot = plugin.score(state, self.pod, node);
            }
        };
        let k = active.len();
        // Node-major while scoring (one contiguous row per node), transposed after.
        let mut node_major = vec![0i64; n * k];
        if rayon::current_num_threads() > 1 && n >= self.parallel_min_nodes.max(2) {
            node_major
                .par_chunks_mut(k)
                .with_min_len(64)
                .enumerate()
                .for_each(|(i, row)| score_node(i, row));
        } else {
            for (i, row) in node_major.chunks_mut(k).enumerate() {
                score_node(i, row);
            }
        }
        let mut raw = vec![0i64; n * k];
        for (i, row) in node_major.chunks(k).enumerate() {
            for (j, s) in row.iter().enumerate() {
                raw[j * n + i] = *s;
            }
        }
        raw
    }
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
