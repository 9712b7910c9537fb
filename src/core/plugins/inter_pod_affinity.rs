//! `InterPodAffinity`: places a pod relative to the pods already running, by
//! topology (`spec.affinity.podAffinity` / `podAntiAffinity`), with
//! kube-scheduler's semantics.
//!
//! Filter enforces required terms — the incoming pod's affinity (a node must
//! share a topology pair with a matching pod), its anti-affinity (no matching
//! pod in any of the node's pairs) and, symmetrically, existing pods'
//! required anti-affinity against the incoming pod — from counts PreFilter
//! computes once (`filtering`). Score prefers pairs by the preferred terms of
//! both sides and existing pods' required affinity (`scoring`), normalised
//! min-max. Arguments: `hardPodAffinityWeight` and
//! `ignorePreferredTermsOfExistingPods` (`InterPodAffinityArgs`).

mod counts;
mod filtering;
mod scoring;
#[cfg(test)]
mod tests;

use crate::cache::NodeState;
use crate::framework::args::{self, ConfigError};
use crate::framework::{
    CycleState, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult, Rejection, ScorePlugin,
    Snapshot,
};
use crate::model::PodInfo;

use filtering::FilterState;
use scoring::ScoreState;

pub const NAME: &str = "InterPodAffinity";
/// The incoming pod's required affinity is not met on the node.
pub const REASON_AFFINITY: &str = "node(s) didn't match pod affinity rules";
/// The incoming pod's required anti-affinity is violated on the node.
pub const REASON_ANTI_AFFINITY: &str = "node(s) didn't match pod anti-affinity rules";
/// An existing pod's required anti-affinity selects the incoming pod.
pub const REASON_EXISTING_ANTI_AFFINITY: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";

const PRE_FILTER_KEY: &str = "PreFilterInterPodAffinity";
const PRE_SCORE_KEY: &str = "PreScoreInterPodAffinity";

/// kube-scheduler's bounds and default for `hardPodAffinityWeight`.
pub const MAX_HARD_POD_AFFINITY_WEIGHT: i32 = 100;
pub const DEFAULT_HARD_POD_AFFINITY_WEIGHT: i32 = 1;

/// `InterPodAffinityArgs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterPodAffinityArgs {
    /// Score weight of an existing pod's required affinity term that selects
    /// the incoming pod (`0..=100`; 0 ignores them).
    pub hard_pod_affinity_weight: i32,
    /// Score only by the incoming pod's preferred terms, not by existing pods'.
    pub ignore_preferred_terms_of_existing_pods: bool,
}

impl Default for InterPodAffinityArgs {
    fn default() -> Self {
        InterPodAffinityArgs {
            hard_pod_affinity_weight: DEFAULT_HARD_POD_AFFINITY_WEIGHT,
            ignore_preferred_terms_of_existing_pods: false,
        }
    }
}

/// `InterPodAffinityArgs` as written in `pluginConfig[].args`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WireArgs {
    hard_pod_affinity_weight: Option<i64>,
    ignore_preferred_terms_of_existing_pods: Option<bool>,
}

/// Decodes and validates `InterPodAffinityArgs` at `path`.
pub fn decode_args(
    path: &str,
    value: serde_json::Value,
) -> Result<InterPodAffinityArgs, ConfigError> {
    let raw: WireArgs = args::decode(path, value)?;
    let defaults = InterPodAffinityArgs::default();
    let hard_pod_affinity_weight = match raw.hard_pod_affinity_weight {
        None => defaults.hard_pod_affinity_weight,
        Some(w) => i32::try_from(w)
            .ok()
            .filter(|w| (0..=MAX_HARD_POD_AFFINITY_WEIGHT).contains(w))
            .ok_or_else(|| {
                ConfigError::at(
                    format!("{path}.hardPodAffinityWeight"),
                    format!("not in valid range [0, {MAX_HARD_POD_AFFINITY_WEIGHT}], got {w}"),
                )
            })?,
    };
    Ok(InterPodAffinityArgs {
        hard_pod_affinity_weight,
        ignore_preferred_terms_of_existing_pods: raw
            .ignore_preferred_terms_of_existing_pods
            .unwrap_or(defaults.ignore_preferred_terms_of_existing_pods),
    })
}

#[derive(Debug, Clone, Default)]
pub struct InterPodAffinity {
    args: InterPodAffinityArgs,
}

impl InterPodAffinity {
    /// The plugin for `args`, which [`decode_args`] validated.
    pub fn new(args: &InterPodAffinityArgs) -> Self {
        InterPodAffinity { args: args.clone() }
    }
}

impl Plugin for InterPodAffinity {
    fn name(&self) -> &'static str {
        NAME
    }
}

impl PreFilterPlugin for InterPodAffinity {
    /// Writes the topology counts, or nothing when no required term applies
    /// (then Filter passes every node: kube-scheduler's PreFilter `Skip`).
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot<'_>,
    ) -> PreFilterResult {
        if let Some(s) = FilterState::compute(pod, snapshot) {
            state.write(PRE_FILTER_KEY, s);
        }
        PreFilterResult::AllNodes
    }
}

impl FilterPlugin for InterPodAffinity {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeState) -> Result<(), Rejection> {
        let Some(s) = state.read::<FilterState>(PRE_FILTER_KEY) else {
            return Ok(());
        };
        // Only a pod landing in the pair could make affinity hold, and no
        // eviction creates one: unresolvable. Evicting the matching pods can
        // lift either anti-affinity: resolvable.
        if !s.satisfies_affinity(pod, node) {
            return Err(Rejection::unresolvable(REASON_AFFINITY));
        }
        if !s.satisfies_anti_affinity(pod, node) {
            return Err(Rejection::new(REASON_ANTI_AFFINITY));
        }
        if !s.satisfies_existing_anti_affinity(node) {
            return Err(Rejection::new(REASON_EXISTING_ANTI_AFFINITY));
        }
        Ok(())
    }
}

impl ScorePlugin for InterPodAffinity {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot<'_>,
        _feasible: &[usize],
    ) -> bool {
        match ScoreState::compute(&self.args, pod, snapshot) {
            Some(s) => {
                state.write(PRE_SCORE_KEY, s);
                true
            }
            None => false,
        }
    }

    fn score(&self, state: &CycleState, _: &PodInfo, node: &NodeState) -> i64 {
        state
            .read::<ScoreState>(PRE_SCORE_KEY)
            .map_or(0, |s| s.scores.sum_on(node))
    }

    fn normalize(&self, _: &CycleState, _: &PodInfo, scores: &mut [i64]) {
        scoring::normalize(scores);
    }
}
