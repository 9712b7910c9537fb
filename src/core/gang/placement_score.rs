//! Scoring the placements a gang fits in, to commit the best rather than the
//! first (kube-scheduler 1.37's placement scoring for PodGroups, KEP-5732).
//!
//! Upstream scores every feasible placement with its PlacementScore plugins,
//! each weighted 1 by default, and keeps the highest total:
//! - `PodGroupPodsCount`: the group's members scheduled before plus those
//!   the plan places, normalised to 0–100 against the largest count among
//!   the candidates (so a plan placing every member beats one that only
//!   meets the quorum);
//! - bin packing (`NodeResourcesFit` as a placement scorer): `MostAllocated`
//!   over the placement as a whole — the placement's requested cpu and
//!   memory (non-zero requests, the members of the plan included) against
//!   its summed allocatable, each resource weighted 1 — so the tightest
//!   domain wins and roomy domains stay free for bigger gangs.
//!
//! Upstream breaks equal totals at random; Muster keeps the try order
//! (narrowest level first, then the configured domain order), which is
//! deterministic and already ranks the tighter fit first. Muster's preferred
//! levels are its own (upstream has no fallback yet): only tries of the
//! narrowest level that holds the gang compete, so a fallen-back gang still
//! lands in the narrowest level possible.

use crate::cache::NodeState;
use crate::framework::MAX_NODE_SCORE;

/// A plan that met the quorum, as the placement scorers see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// The try's level rank (0 = narrowest tried): lower ranks win outright.
    pub tier: usize,
    /// Members scheduled before plus members this plan places.
    pub pods: u64,
    /// Bin packing of the placement after the plan, 0–100.
    pub packing: i64,
}

/// `MostAllocated` over the nodes of a placement (`nodes` indexes into
/// `all`; `None` is every node), with the plan's members assumed on them.
pub fn packing_score(all: &[NodeState], nodes: Option<&[usize]>) -> i64 {
    let (mut cpu, mut cpu_cap, mut mem, mut mem_cap) = (0i128, 0i128, 0i128, 0i128);
    let mut add = |n: &NodeState| {
        cpu = cpu.saturating_add(i128::from(n.non_zero_milli_cpu));
        mem = mem.saturating_add(i128::from(n.non_zero_memory));
        cpu_cap = cpu_cap.saturating_add(i128::from(n.info.allocatable.milli_cpu.max(0)));
        mem_cap = mem_cap.saturating_add(i128::from(n.info.allocatable.memory.max(0)));
    };
    match nodes {
        None => all.iter().for_each(&mut add),
        Some(indices) => indices.iter().filter_map(|i| all.get(*i)).for_each(add),
    }
    let cpu_score = most_allocated(cpu, cpu_cap);
    let mem_score = most_allocated(mem, mem_cap);
    // Equal weights (NodeResourcesFit's default resources, cpu and memory).
    (cpu_score + mem_score) / 2
}

/// Requested over capacity in 0–100; requests above capacity count as full,
/// and no capacity scores 0 (as upstream's `mostRequestedScore`).
fn most_allocated(requested: i128, capacity: i128) -> i64 {
    if capacity <= 0 {
        return 0;
    }
    let requested = requested.clamp(0, capacity);
    let score = requested.saturating_mul(i128::from(MAX_NODE_SCORE)) / capacity;
    i64::try_from(score).unwrap_or(MAX_NODE_SCORE)
}

/// The winner among `candidates` (in try order): the narrowest tier, then
/// the highest total of the normalised pod count and the packing score,
/// then the earliest. `None` when there is none.
pub fn best(candidates: &[Candidate]) -> Option<usize> {
    let tier = candidates.iter().map(|c| c.tier).min()?;
    let most = candidates
        .iter()
        .filter(|c| c.tier == tier)
        .map(|c| c.pods)
        .max()
        .unwrap_or(0);
    let total = |c: &Candidate| -> i64 {
        let count = match most {
            0 => 0,
            m => {
                let n = u128::from(c.pods).saturating_mul(MAX_NODE_SCORE as u128) / u128::from(m);
                i64::try_from(n).unwrap_or(MAX_NODE_SCORE)
            }
        };
        count.saturating_add(c.packing)
    };
    let mut winner: Option<(usize, i64)> = None;
    for (i, c) in candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| c.tier == tier)
    {
        let t = total(c);
        // Strictly better only: an equal total keeps the earlier try.
        if winner.is_none_or(|(_, w)| t > w) {
            winner = Some((i, t));
        }
    }
    winner.map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::fixtures::node;
    use std::sync::Arc;

    fn cand(tier: usize, pods: u64, packing: i64) -> Candidate {
        Candidate {
            tier,
            pods,
            packing,
        }
    }

    #[test]
    fn selection_table() {
        let cases: &[(&str, Vec<Candidate>, Option<usize>)] = &[
            ("none", vec![], None),
            ("one", vec![cand(0, 4, 10)], Some(0)),
            (
                "a later, tighter placement beats the first that fits",
                vec![cand(0, 4, 30), cand(0, 4, 80)],
                Some(1),
            ),
            (
                "equal totals keep the try order",
                vec![cand(0, 4, 50), cand(0, 4, 50), cand(0, 4, 50)],
                Some(0),
            ),
            (
                "placing more members outweighs a little packing",
                // 100 + 40 against 50 + 60.
                vec![cand(0, 2, 60), cand(0, 4, 40)],
                Some(1),
            ),
            (
                "a narrower level wins whatever the scores",
                vec![cand(1, 4, 100), cand(0, 4, 1), cand(1, 4, 100)],
                Some(1),
            ),
            (
                "no pods at all: packing decides",
                vec![cand(0, 0, 1), cand(0, 0, 2)],
                Some(1),
            ),
        ];
        for (name, candidates, want) in cases {
            assert_eq!(best(candidates), *want, "{name}");
        }
    }

    fn state(cpu: i64, mem_gib: i64, used_cpu: i64, used_gib: i64) -> NodeState {
        let mut n = NodeState::new(Arc::new(node("n", cpu, mem_gib)));
        n.non_zero_milli_cpu = used_cpu;
        n.non_zero_memory = used_gib << 30;
        n
    }

    #[test]
    fn packing_is_most_allocated_over_the_placement() {
        let nodes = vec![
            state(4_000, 16, 4_000, 16), // full
            state(4_000, 16, 0, 0),      // empty
            state(8_000, 32, 2_000, 8),  // a quarter
        ];
        assert_eq!(packing_score(&nodes, Some(&[0])), 100);
        assert_eq!(packing_score(&nodes, Some(&[1])), 0);
        assert_eq!(packing_score(&nodes, Some(&[0, 1])), 50);
        // cpu 6/16, memory 24/64: 37 each.
        assert_eq!(packing_score(&nodes, None), 37);
        // No capacity, or requests above it.
        assert_eq!(packing_score(&nodes, Some(&[])), 0);
        assert_eq!(packing_score(&[state(1_000, 1, 5_000, 9)], None), 100);
        // Indices out of range are ignored.
        assert_eq!(packing_score(&nodes, Some(&[0, 99])), 100);
    }
}
