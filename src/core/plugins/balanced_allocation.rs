//! `NodeResourcesBalancedAllocation`: prefers nodes whose utilisation
//! fractions the pod brings closer to each other across resources.
//!
//! balance = (1 − std) × 100, where std is the standard deviation of the
//! per-resource fractions `requested / allocatable` (each capped at 1); with
//! exactly two resources that is `|f1 − f2| / 2`. As kube-scheduler 1.37,
//! the score is the improvement the pod makes: with `with` the balance
//! after placing it and `without` the balance before, score =
//! 50 + (50 + with − without) / 2 (integer division), around 75 when the
//! pod changes little, towards 100 when it evens the node out, towards 50
//! when it skews it. Actual requests are used, not the non-zero defaults,
//! and a pod requesting none of the resources is not scored at all
//! (kube-scheduler skips best-effort pods so they do not pile up on one
//! node).

use crate::cache::NodeState;
use crate::framework::{CycleState, MAX_NODE_SCORE, Plugin, ScorePlugin, Snapshot};
use crate::model::PodInfo;

use super::resource_allocation::{
    Requests, ResourceKey, allocatable_and_requested, pod_request, resource_specs,
    wire::WireResourceSpec,
};
use crate::framework::args::{self, ConfigError};

pub const NAME: &str = "NodeResourcesBalancedAllocation";

/// `NodeResourcesBalancedAllocationArgs`: the resources compared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BalancedAllocationArgs {
    pub resources: Vec<String>,
}

impl Default for BalancedAllocationArgs {
    fn default() -> Self {
        BalancedAllocationArgs {
            resources: vec!["cpu".into(), "memory".into()],
        }
    }
}

#[derive(Debug, Clone)]
pub struct BalancedAllocation {
    resources: Vec<ResourceKey>,
}

impl Default for BalancedAllocation {
    fn default() -> Self {
        BalancedAllocation {
            resources: vec![ResourceKey::Cpu, ResourceKey::Memory],
        }
    }
}

impl BalancedAllocation {
    /// The plugin for `args`, which [`decode_args`] validated.
    pub fn new(args: &BalancedAllocationArgs) -> Self {
        BalancedAllocation {
            resources: args
                .resources
                .iter()
                .map(|r| ResourceKey::parse(r))
                .collect(),
        }
    }

    /// Utilisation fractions of the resources the node offers, capped at 1,
    /// with the pod placed (`with_pod`) or before. Which resources count is
    /// decided by the pod's requests either way, as upstream.
    fn fractions<'a>(
        &'a self,
        state: &'a CycleState,
        pod: &'a PodInfo,
        node: &'a NodeState,
        with_pod: bool,
    ) -> impl Iterator<Item = f64> + 'a {
        self.resources.iter().filter_map(move |key| {
            let req = pod_request(key, pod, Requests::Actual);
            allocatable_and_requested(state, key, node, req, Requests::Actual).map(
                |(alloc, requested)| {
                    let requested = match with_pod {
                        true => requested,
                        false => requested.saturating_sub(req),
                    };
                    (requested as f64 / alloc as f64).min(1.0)
                },
            )
        })
    }

    /// (1 − std) × 100 of the fractions.
    fn balance(&self, state: &CycleState, pod: &PodInfo, node: &NodeState, with_pod: bool) -> i64 {
        let (mut n, mut sum, mut first, mut second) = (0usize, 0.0f64, 0.0f64, 0.0f64);
        for f in self.fractions(state, pod, node, with_pod) {
            match n {
                0 => first = f,
                1 => second = f,
                _ => {}
            }
            n += 1;
            sum += f;
        }
        let std = match n {
            0 | 1 => 0.0,
            // The common cpu+memory case, without a second pass.
            2 => ((first - second) / 2.0).abs(),
            _ => {
                let mean = sum / n as f64;
                let var = self
                    .fractions(state, pod, node, with_pod)
                    .map(|f| (f - mean) * (f - mean))
                    .sum::<f64>()
                    / n as f64;
                var.sqrt()
            }
        };
        ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
    }
}

impl Plugin for BalancedAllocation {
    fn name(&self) -> &'static str {
        NAME
    }
}

impl ScorePlugin for BalancedAllocation {
    fn pre_score(&self, _: &mut CycleState, pod: &PodInfo, _: &Snapshot<'_>, _: &[usize]) -> bool {
        self.resources
            .iter()
            .any(|key| pod_request(key, pod, Requests::Actual) != 0)
    }

    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeState) -> i64 {
        let with = self.balance(state, pod, node, true);
        let without = self.balance(state, pod, node, false);
        let half = MAX_NODE_SCORE / 2;
        half + (half + with - without) / 2
    }
}

/// `NodeResourcesBalancedAllocationArgs` as written in `pluginConfig[].args`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WireArgs {
    resources: Option<Vec<WireResourceSpec>>,
}

/// Decodes and validates `NodeResourcesBalancedAllocationArgs` at `path`:
/// resources non-empty and distinct (their weights are validated but, as in
/// kube-scheduler, do not enter the score).
pub fn decode_args(
    path: &str,
    value: serde_json::Value,
) -> Result<BalancedAllocationArgs, ConfigError> {
    let raw: WireArgs = args::decode(path, value)?;
    let Some(resources) = raw.resources else {
        return Ok(BalancedAllocationArgs::default());
    };
    let at = format!("{path}.resources");
    let specs = resource_specs(&at, resources)?;
    if specs.is_empty() {
        return Err(ConfigError::at(at, "must not be empty"));
    }
    Ok(BalancedAllocationArgs {
        resources: specs.into_iter().map(|(n, _)| n).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::test_util::{node, pod_requesting};

    #[test]
    fn two_resources_use_half_the_difference_and_score_the_improvement() {
        let s = CycleState::new();
        let ba = BalancedAllocation::default();
        // After placing: cpu 3000/4000 = 0.75, memory 5000/10000 = 0.5
        // std = 0.125 -> (1 - 0.125) * 100 = 87; before: empty, 100.
        // 50 + (50 + 87 - 100) / 2 = 68 (kube-scheduler 1.37).
        let n = node("n", &[("cpu", "4"), ("memory", "10000")]).build();
        let p = pod_requesting(&[("cpu", "3"), ("memory", "5000")]);
        assert_eq!(ba.balance(&s, &p, &n, true), 87);
        assert_eq!(ba.score(&s, &p, &n), 68);
        // Already requested counts; fractions cap at 1.
        let busy = node("n", &[("cpu", "4"), ("memory", "10000")])
            .with_pod(pod_requesting(&[("cpu", "4")]))
            .build();
        // cpu min(1, 7000/4000) = 1, memory 0.5 -> std 0.25 -> 75; before:
        // cpu 1, memory 0 -> 50; 50 + (50 + 75 - 50) / 2 = 87: the pod
        // evens the node out.
        assert_eq!(ba.balance(&s, &p, &busy, true), 75);
        assert_eq!(ba.score(&s, &p, &busy), 87);
    }

    #[test]
    fn three_resources_use_the_standard_deviation() {
        let s = CycleState::new();
        let ba = BalancedAllocation::new(&BalancedAllocationArgs {
            resources: vec!["cpu".into(), "memory".into(), "nvidia.com/gpu".into()],
        });
        let n = node(
            "n",
            &[("cpu", "4"), ("memory", "4"), ("nvidia.com/gpu", "4")],
        )
        .build();
        let p = pod_requesting(&[("cpu", "1"), ("memory", "2"), ("nvidia.com/gpu", "3")]);
        // fractions .25 .5 .75, mean .5, std sqrt(0.125/3) = 0.2041 -> 79;
        // before: 100; 50 + (50 + 79 - 100) / 2 = 64.
        assert_eq!(ba.balance(&s, &p, &n, true), 79);
        assert_eq!(ba.score(&s, &p, &n), 64);
    }

    #[test]
    fn best_effort_pods_are_skipped() {
        let mut s = CycleState::new();
        let ba = BalancedAllocation::default();
        let none = Snapshot::of_nodes(&[]);
        assert!(!ba.pre_score(&mut s, &pod_requesting(&[]), &none, &[]));
        assert!(ba.pre_score(&mut s, &pod_requesting(&[("memory", "1Gi")]), &none, &[]));
    }

    #[test]
    fn rejects_bad_args() {
        use serde_json::json;
        let e = decode_args("a", json!({"resources": []})).unwrap_err();
        assert_eq!(
            (e.path.as_str(), e.message.as_str()),
            ("a.resources", "must not be empty")
        );
        let e = decode_args(
            "a",
            json!({"resources": [{"name": "cpu"}, {"name": "cpu"}]}),
        )
        .unwrap_err();
        assert_eq!(e.path, "a.resources[1].name");
        assert!(e.message.contains("duplicate"), "{e}");
        let ok = decode_args(
            "a",
            json!({"resources": [{"name": "cpu"}, {"name": "nvidia.com/gpu"}]}),
        );
        assert_eq!(ok.unwrap().resources, ["cpu", "nvidia.com/gpu"]);
    }
}
