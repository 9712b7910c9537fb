//! PodTopologySpread's Score for `ScheduleAnyway` constraints, as upstream:
//! a node's raw score sums, over the constraints whose key it has,
//! `matching pods in its domain × ln(domains + 2) + (maxSkew − 1)` (the
//! logarithm keeps a topology with many small domains, like hostname, from
//! being watered down by one with few large ones); fewer is better, so
//! NormalizeScore maps `s` to `100 × (max + min − s) / max`. Nodes missing a
//! key are "ignored" (score 0) unless the system defaults are in force, in
//! which case they are scored on the keys they have.
//!
//! Domains are those of the feasible nodes; their counts include every
//! eligible node of the cluster. Everything is computed in PreScore, keyed by
//! the node's stamp, so Score is one lookup.

use std::collections::HashMap;

use foldhash::fast::RandomState;

use super::counts::{DomainIds, MISSING};
use super::{PodTopologySpread, node_included};
use crate::cache::NodeState;
use crate::framework::{CycleState, MAX_NODE_SCORE, ScorePlugin, Snapshot};
use crate::model::spread::HOSTNAME_LABEL;
use crate::model::{PodInfo, SpreadConstraint, WhenUnsatisfiable};

const PRE_SCORE_KEY: &str = "PreScorePodTopologySpread";

struct PreScoreState {
    /// Raw score by node stamp (`NodeState::generation`).
    /// (foldhash: Score looks up every scored node, and SipHash was ~7% of
    /// `host_hard_zone_soft`.)
    raw: HashMap<u64, i64, RandomState>,
    /// Per feasible node, in the order scores are normalised: lacks a key.
    ignored: Vec<bool>,
}

/// `ln(size + 2)`: the weight of a topology with `size` domains.
fn topology_weight(size: usize) -> f64 {
    (size as f64 + 2.0).ln()
}

impl ScorePlugin for PodTopologySpread {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot<'_>,
        feasible: &[usize],
    ) -> bool {
        if snapshot.nodes.is_empty() {
            return false;
        }
        let constraints = self.constraints(pod, snapshot.facts, WhenUnsatisfiable::ScheduleAnyway);
        if constraints.is_empty() {
            return false;
        }
        // Only the system defaults tolerate nodes without every key.
        let require_all = !pod.constraints.spread.constraints.is_empty() || !self.system_defaulted;
        let computed = self.score_feasible(pod, snapshot, feasible, &constraints, require_all);
        state.write(PRE_SCORE_KEY, computed);
        true
    }

    fn score(&self, state: &CycleState, _: &PodInfo, node: &NodeState) -> i64 {
        state
            .read::<PreScoreState>(PRE_SCORE_KEY)
            .and_then(|s| s.raw.get(&node.generation))
            .copied()
            .unwrap_or(0)
    }

    fn normalize(&self, state: &CycleState, _: &PodInfo, scores: &mut [i64]) {
        let Some(s) = state.read::<PreScoreState>(PRE_SCORE_KEY) else {
            return;
        };
        let ignored = |i: usize| s.ignored.get(i).copied().unwrap_or(false);
        let counted = scores.iter().enumerate().filter(|(i, _)| !ignored(*i));
        let min = counted.clone().map(|(_, s)| *s).min().unwrap_or(0);
        let max = counted.map(|(_, s)| *s).max().unwrap_or(0).max(0);
        for (i, score) in scores.iter_mut().enumerate() {
            *score = if ignored(i) {
                0
            } else if max == 0 {
                MAX_NODE_SCORE
            } else {
                // max + min − s lies in [min, max]: no overflow past max.
                let inverted = max.saturating_add(min).saturating_sub(*score);
                MAX_NODE_SCORE.saturating_mul(inverted) / max
            };
        }
    }
}

/// One soft constraint with the domain of every node.
struct Domains {
    /// Per node position: domain id, or the empty value's id for a node
    /// without the key (upstream reads a missing label as "").
    of_node: Vec<u32>,
    /// Whether the node really has the key.
    has_key: Vec<bool>,
    /// Number of ids (the extra last one stands for "" when no node has it).
    len: usize,
}

fn domains_of(per_node: Vec<u32>, ids: &DomainIds) -> Domains {
    let empty = ids
        .get("")
        .copied()
        .unwrap_or(u32::try_from(ids.len()).unwrap_or(MISSING - 1));
    let has_key = per_node.iter().map(|id| *id != MISSING).collect();
    let of_node = per_node
        .into_iter()
        .map(|id| if id == MISSING { empty } else { id })
        .collect();
    Domains {
        of_node,
        has_key,
        len: ids.len().saturating_add(1),
    }
}

impl PodTopologySpread {
    fn score_feasible(
        &self,
        pod: &PodInfo,
        snapshot: &Snapshot<'_>,
        feasible: &[usize],
        constraints: &[SpreadConstraint],
        require_all: bool,
    ) -> PreScoreState {
        let (nodes, table) = (snapshot.nodes, &snapshot.facts.label_ids);
        let mut memo = self.memo();
        let domains: Vec<Domains> = constraints
            .iter()
            .map(|c| {
                let d = memo.domains(nodes, &c.topology_key, table);
                domains_of(d.of_node, &d.ids)
            })
            .collect();
        let matching: Vec<Vec<u32>> = constraints
            .iter()
            .map(|c| memo.counts(nodes, &pod.key.namespace, &c.selector))
            .collect();
        drop(memo);
        let has_all = |i: usize| domains.iter().all(|d| d.has_key.get(i) == Some(&true));
        let ignored: Vec<bool> = feasible
            .iter()
            .map(|&i| require_all && !has_all(i))
            .collect();
        let scored = || {
            feasible
                .iter()
                .zip(&ignored)
                .filter(|(_, ig)| !**ig)
                .map(|(i, _)| *i)
        };

        // Domains of the scored feasible nodes, and each topology's weight.
        let mut wanted: Vec<Vec<bool>> = domains.iter().map(|d| vec![false; d.len]).collect();
        let mut weights = Vec::with_capacity(constraints.len());
        for (k, c) in constraints.iter().enumerate() {
            let size = if c.topology_key == HOSTNAME_LABEL {
                scored().count()
            } else {
                let mut size = 0usize;
                for i in scored() {
                    if let Some(w) = domains[k]
                        .of_node
                        .get(i)
                        .and_then(|id| wanted[k].get_mut(*id as usize))
                        && !*w
                    {
                        *w = true;
                        size += 1;
                    }
                }
                size
            };
            weights.push(topology_weight(size));
        }

        // Matching pods per wanted domain, over every eligible node.
        let mut per_domain: Vec<Vec<i64>> = domains.iter().map(|d| vec![0; d.len]).collect();
        for (i, node) in nodes.iter().enumerate() {
            if require_all && !has_all(i) {
                continue;
            }
            for (k, c) in constraints.iter().enumerate() {
                // Hostname counts are the node's own, read when scoring.
                if c.topology_key == HOSTNAME_LABEL || !node_included(c, pod, node) {
                    continue;
                }
                let Some(id) = domains[k].of_node.get(i).map(|id| *id as usize) else {
                    continue;
                };
                if wanted[k].get(id) == Some(&true)
                    && let Some(total) = per_domain[k].get_mut(id)
                {
                    *total =
                        total.saturating_add(i64::from(matching[k].get(i).copied().unwrap_or(0)));
                }
            }
        }

        let mut raw = HashMap::with_capacity_and_hasher(feasible.len(), RandomState::default());
        for i in scored() {
            let mut score = 0.0f64;
            for (k, c) in constraints.iter().enumerate() {
                if domains[k].has_key.get(i) != Some(&true) {
                    continue;
                }
                let count = if c.topology_key == HOSTNAME_LABEL {
                    i64::from(matching[k].get(i).copied().unwrap_or(0))
                } else {
                    let id = domains[k]
                        .of_node
                        .get(i)
                        .map_or(usize::MAX, |id| *id as usize);
                    per_domain[k].get(id).copied().unwrap_or(0)
                };
                score += count as f64 * weights[k] + f64::from(c.max_skew.saturating_sub(1));
            }
            if let Some(node) = nodes.get(i) {
                // Bounded: counts and skews are far below 2^53.
                raw.insert(node.generation, score.round() as i64);
            }
        }
        PreScoreState { raw, ignored }
    }
}
