//! `NodeResourcesFit`: Filter checks the node has room for the pod's requests
//! (pod count, cpu, memory, ephemeral storage, extended resources); Score rates
//! the node by the configured strategy (`LeastAllocated`, `MostAllocated` or
//! `RequestedToCapacityRatio`) over weighted resources.

use std::borrow::Cow;

use crate::cache::NodeState;
use crate::framework::{CycleState, FilterPlugin, MAX_NODE_SCORE, Plugin, Rejection, ScorePlugin};
use crate::model::PodInfo;

use super::resource_allocation::{
    Requests, ResourceKey, WeightedResource, allocatable_and_requested, mul_div, pod_request,
    resource_specs, wire::WireResourceSpec,
};
use crate::framework::args::{self, ConfigError};

pub const NAME: &str = "NodeResourcesFit";
pub const REASON_TOO_MANY_PODS: &str = "Too many pods";
pub const REASON_CPU: &str = "Insufficient cpu";
pub const REASON_MEMORY: &str = "Insufficient memory";
pub const REASON_EPHEMERAL_STORAGE: &str = "Insufficient ephemeral-storage";

/// Utilisation is expressed in percent; shape scores in `0..=10`.
const MAX_UTILIZATION: i64 = 100;
const MAX_CUSTOM_PRIORITY_SCORE: i64 = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ScoringStrategyType {
    /// Prefer the emptiest node (spreading). kube-scheduler's default.
    #[default]
    LeastAllocated,
    /// Prefer the fullest node (bin packing).
    MostAllocated,
    /// A piecewise-linear function of utilisation (`shape`).
    RequestedToCapacityRatio,
}

/// One resource and its weight in the score.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceSpec {
    pub name: String,
    pub weight: i64,
}

impl ResourceSpec {
    pub fn new(name: &str, weight: i64) -> Self {
        ResourceSpec {
            name: name.to_owned(),
            weight,
        }
    }
}

/// A point of the `RequestedToCapacityRatio` function: utilisation in percent
/// (`0..=100`) maps to a score in `0..=10`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UtilizationShapePoint {
    pub utilization: i64,
    pub score: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScoringStrategy {
    pub kind: ScoringStrategyType,
    /// Default: cpu and memory, weight 1 each.
    pub resources: Vec<ResourceSpec>,
    /// Only for `RequestedToCapacityRatio`; ascending utilisation.
    pub shape: Vec<UtilizationShapePoint>,
}

impl Default for ScoringStrategy {
    fn default() -> Self {
        ScoringStrategy {
            kind: ScoringStrategyType::LeastAllocated,
            resources: vec![ResourceSpec::new("cpu", 1), ResourceSpec::new("memory", 1)],
            shape: Vec::new(),
        }
    }
}

/// `NodeResourcesFitArgs`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeResourcesFitArgs {
    /// Extended resources the Filter does not check.
    pub ignored_resources: Vec<String>,
    /// Extended resource domains (the part before `/`) the Filter does not check.
    pub ignored_resource_groups: Vec<String>,
    pub scoring_strategy: ScoringStrategy,
}

#[derive(Debug, Clone)]
pub struct NodeResourcesFit {
    ignored_resources: Vec<String>,
    ignored_resource_groups: Vec<String>,
    kind: ScoringStrategyType,
    resources: Vec<WeightedResource>,
    shape: Vec<UtilizationShapePoint>,
}

impl Default for NodeResourcesFit {
    fn default() -> Self {
        Self::new(&NodeResourcesFitArgs::default())
    }
}

impl NodeResourcesFit {
    /// The plugin for `args`, which [`decode_args`] validated.
    pub fn new(args: &NodeResourcesFitArgs) -> Self {
        let s = &args.scoring_strategy;
        NodeResourcesFit {
            ignored_resources: args.ignored_resources.clone(),
            ignored_resource_groups: args.ignored_resource_groups.clone(),
            kind: s.kind,
            resources: s
                .resources
                .iter()
                .map(|r| WeightedResource {
                    key: ResourceKey::parse(&r.name),
                    weight: r.weight,
                })
                .collect(),
            // Scale shape scores to MAX_NODE_SCORE once, not per node.
            shape: s
                .shape
                .iter()
                .map(|p| UtilizationShapePoint {
                    utilization: p.utilization,
                    score: p.score * (MAX_NODE_SCORE / MAX_CUSTOM_PRIORITY_SCORE),
                })
                .collect(),
        }
    }

    fn is_ignored(&self, name: &str) -> bool {
        self.ignored_resources.iter().any(|r| r == name)
            || name
                .split_once('/')
                .is_some_and(|(group, _)| self.ignored_resource_groups.iter().any(|g| g == group))
    }

    /// Weighted mean over the resources the node offers, of `per_resource`.
    fn weighted_mean(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeState,
        per_resource: impl Fn(i64, i64) -> i64,
    ) -> (i64, i64) {
        let (mut sum, mut weights) = (0i64, 0i64);
        for r in &self.resources {
            let req = pod_request(&r.key, pod, Requests::NonZero);
            if let Some((alloc, requested)) =
                allocatable_and_requested(state, &r.key, node, req, Requests::NonZero)
            {
                // Per-resource scores are 0..=100 and weights 1..=100 (validated).
                sum = sum.saturating_add(per_resource(requested, alloc).saturating_mul(r.weight));
                weights = weights.saturating_add(r.weight);
            }
        }
        (sum, weights)
    }

    /// kube-scheduler's broken-linear function over `shape`.
    fn shape_score(&self, utilization: i64) -> i64 {
        let shape = &self.shape;
        match shape.iter().position(|p| utilization <= p.utilization) {
            Some(0) => shape[0].score,
            Some(i) => {
                let (a, b) = (shape[i - 1], shape[i]);
                a.score
                    + (b.score - a.score) * (utilization - a.utilization)
                        / (b.utilization - a.utilization)
            }
            None => shape.last().map_or(0, |p| p.score),
        }
    }
}

impl Plugin for NodeResourcesFit {
    fn name(&self) -> &'static str {
        NAME
    }
}

impl FilterPlugin for NodeResourcesFit {
    /// Reports every insufficient resource, not only the first (kube-scheduler
    /// counts each in the failure message).
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeState) -> Result<(), Rejection> {
        let dra = dra_served(state);
        let want = &pod.requests;
        let alloc = &node.info.allocatable;
        let used = &node.requested;
        let mut rejection: Option<Rejection> = None;
        let mut fail = |reason: Cow<'static, str>| match &mut rejection {
            None => rejection = Some(Rejection::new(reason)),
            Some(r) => r.more_reasons.push(reason),
        };
        // Saturating throughout: amounts come from tenant quantities.
        if used.pods.saturating_add(1) > alloc.pods {
            fail(Cow::Borrowed(REASON_TOO_MANY_PODS));
        }
        let fixed = [
            (
                want.milli_cpu,
                alloc.milli_cpu.saturating_sub(used.milli_cpu),
                REASON_CPU,
            ),
            (
                want.memory,
                alloc.memory.saturating_sub(used.memory),
                REASON_MEMORY,
            ),
            (
                want.ephemeral_storage,
                alloc
                    .ephemeral_storage
                    .saturating_sub(used.ephemeral_storage),
                REASON_EPHEMERAL_STORAGE,
            ),
        ];
        for (request, free, reason) in fixed {
            if request > 0 && request > free {
                fail(Cow::Borrowed(reason));
            }
        }
        for (name, &request) in &want.scalar {
            if request == 0 || self.is_ignored(name) || dra.is_some_and(|x| x.delegates(name, node))
            {
                continue;
            }
            let free = alloc
                .scalar
                .get(name)
                .copied()
                .unwrap_or(0)
                .saturating_sub(used.scalar.get(name).copied().unwrap_or(0));
            // A node without the resource at all has 0 free: Insufficient too.
            if request > free {
                fail(Cow::Owned(format!("Insufficient {name}")));
            }
        }
        rejection.map_or(Ok(()), Err)
    }

    /// The same checks, stopping at the first short resource.
    fn passes(&self, state: &CycleState, pod: &PodInfo, node: &NodeState) -> bool {
        let dra = dra_served(state);
        let want = &pod.requests;
        let alloc = &node.info.allocatable;
        let used = &node.requested;
        let fits = |request: i64, free: i64| request <= 0 || request <= free;
        used.pods < alloc.pods
            && fits(
                want.milli_cpu,
                alloc.milli_cpu.saturating_sub(used.milli_cpu),
            )
            && fits(want.memory, alloc.memory.saturating_sub(used.memory))
            && fits(
                want.ephemeral_storage,
                alloc
                    .ephemeral_storage
                    .saturating_sub(used.ephemeral_storage),
            )
            && want.scalar.iter().all(|(name, &request)| {
                request == 0
                    || self.is_ignored(name)
                    || dra.is_some_and(|x| x.delegates(name, node))
                    || request
                        <= alloc
                            .scalar
                            .get(name)
                            .copied()
                            .unwrap_or(0)
                            .saturating_sub(used.scalar.get(name).copied().unwrap_or(0))
            })
    }
}

/// The extended resources DynamicResources' PreFilter found a DeviceClass
/// serving: on a node that does not advertise one, it is DynamicResources'
/// to allocate, not this plugin's to count (kube-scheduler's
/// `shouldDelegateResourceToDRA`).
fn dra_served(state: &CycleState) -> Option<&super::dynamic_resources::extended::ExtendedState> {
    state.read(super::dynamic_resources::extended::STATE_KEY)
}

impl ScorePlugin for NodeResourcesFit {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeState) -> i64 {
        match self.kind {
            ScoringStrategyType::LeastAllocated => {
                let (sum, weights) = self.weighted_mean(state, pod, node, |requested, capacity| {
                    if requested > capacity {
                        0
                    } else {
                        mul_div(capacity.saturating_sub(requested), MAX_NODE_SCORE, capacity)
                    }
                });
                if weights == 0 { 0 } else { sum / weights }
            }
            ScoringStrategyType::MostAllocated => {
                let (sum, weights) = self.weighted_mean(state, pod, node, |requested, capacity| {
                    mul_div(requested.min(capacity), MAX_NODE_SCORE, capacity)
                });
                if weights == 0 { 0 } else { sum / weights }
            }
            ScoringStrategyType::RequestedToCapacityRatio => self.ratio_score(state, pod, node),
        }
    }
}

impl NodeResourcesFit {
    /// Like the other strategies, but a resource scoring 0 is left out of the
    /// mean, and the mean is rounded (both as upstream).
    fn ratio_score(&self, state: &CycleState, pod: &PodInfo, node: &NodeState) -> i64 {
        let (mut sum, mut weights) = (0i64, 0i64);
        for r in &self.resources {
            let req = pod_request(&r.key, pod, Requests::NonZero);
            let Some((capacity, requested)) =
                allocatable_and_requested(state, &r.key, node, req, Requests::NonZero)
            else {
                continue;
            };
            let utilization = if requested > capacity {
                MAX_UTILIZATION
            } else {
                mul_div(requested, MAX_UTILIZATION, capacity)
            };
            let s = self.shape_score(utilization);
            if s > 0 {
                sum = sum.saturating_add(s.saturating_mul(r.weight));
                weights = weights.saturating_add(r.weight);
            }
        }
        if weights == 0 {
            0
        } else {
            (sum as f64 / weights as f64).round() as i64
        }
    }
}

/// `NodeResourcesFitArgs` as written in `pluginConfig[].args`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WireArgs {
    // Accepted because kube-scheduler allows typed args; they carry no setting.
    #[serde(default)]
    ignored_resources: Vec<String>,
    #[serde(default)]
    ignored_resource_groups: Vec<String>,
    scoring_strategy: Option<WireScoringStrategy>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WireScoringStrategy {
    #[serde(rename = "type")]
    type_: Option<String>,
    resources: Option<Vec<WireResourceSpec>>,
    requested_to_capacity_ratio: Option<WireRequestedToCapacityRatio>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WireRequestedToCapacityRatio {
    #[serde(default)]
    shape: Vec<WireShapePoint>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WireShapePoint {
    utilization: i64,
    score: i64,
}

/// Decodes and validates `NodeResourcesFitArgs` at `path` (kube-scheduler's
/// `ValidateNodeResourcesFitArgs`).
pub fn decode_args(
    path: &str,
    value: serde_json::Value,
) -> Result<NodeResourcesFitArgs, ConfigError> {
    let raw: WireArgs = args::decode(path, value)?;
    let mut fit = NodeResourcesFitArgs {
        ignored_resources: raw.ignored_resources,
        ignored_resource_groups: raw.ignored_resource_groups,
        ..NodeResourcesFitArgs::default()
    };
    let Some(s) = raw.scoring_strategy else {
        return Ok(fit);
    };
    let at = format!("{path}.scoringStrategy");
    if let Some(rs) = s.resources {
        let specs = resource_specs(&format!("{at}.resources"), rs)?;
        if specs.is_empty() {
            return Err(ConfigError::at(
                format!("{at}.resources"),
                "must not be empty",
            ));
        }
        fit.scoring_strategy.resources = specs
            .into_iter()
            .map(|(n, w)| ResourceSpec::new(&n, w))
            .collect();
    }
    fit.scoring_strategy.kind = match s.type_.as_deref().unwrap_or("LeastAllocated") {
        "LeastAllocated" => ScoringStrategyType::LeastAllocated,
        "MostAllocated" => ScoringStrategyType::MostAllocated,
        "RequestedToCapacityRatio" => {
            let shape = s
                .requested_to_capacity_ratio
                .map(|r| r.shape)
                .unwrap_or_default();
            fit.scoring_strategy.shape =
                shape_points(&format!("{at}.requestedToCapacityRatio.shape"), &shape)?;
            ScoringStrategyType::RequestedToCapacityRatio
        }
        other => {
            return Err(ConfigError::at(
                format!("{at}.type"),
                format!(
                    "must be LeastAllocated, MostAllocated or RequestedToCapacityRatio, got {other:?}"
                ),
            ));
        }
    };
    Ok(fit)
}

/// The `RequestedToCapacityRatio` shape: at least one point, utilization in
/// `0..=100` strictly increasing, score in `0..=10`.
fn shape_points(
    path: &str,
    shape: &[WireShapePoint],
) -> Result<Vec<UtilizationShapePoint>, ConfigError> {
    if shape.is_empty() {
        return Err(ConfigError::at(path, "must have at least one point"));
    }
    let mut points: Vec<UtilizationShapePoint> = Vec::new();
    for (i, p) in shape.iter().enumerate() {
        let at = format!("{path}[{i}]");
        if !(0..=MAX_UTILIZATION).contains(&p.utilization) {
            return Err(ConfigError::at(
                format!("{at}.utilization"),
                format!("must be between 0 and 100, got {}", p.utilization),
            ));
        }
        if !(0..=MAX_CUSTOM_PRIORITY_SCORE).contains(&p.score) {
            return Err(ConfigError::at(
                format!("{at}.score"),
                format!("must be between 0 and 10, got {}", p.score),
            ));
        }
        if points
            .last()
            .is_some_and(|q| q.utilization >= p.utilization)
        {
            return Err(ConfigError::at(
                format!("{at}.utilization"),
                "values must be strictly increasing",
            ));
        }
        points.push(UtilizationShapePoint {
            utilization: p.utilization,
            score: p.score,
        });
    }
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::test_util::{node, pod_requesting};

    fn reasons(r: Result<(), Rejection>) -> Vec<String> {
        r.err()
            .map(|r| r.reasons().map(|s| s.to_string()).collect())
            .unwrap_or_default()
    }

    #[test]
    fn filter_names_every_insufficient_resource() {
        let s = CycleState::new();
        let fit = NodeResourcesFit::default();
        let n = node(
            "n",
            &[
                ("cpu", "2"),
                ("memory", "4Gi"),
                ("ephemeral-storage", "10Gi"),
            ],
        )
        .with_pod(pod_requesting(&[("cpu", "1500m"), ("memory", "1Gi")]))
        .build();
        assert!(
            fit.filter(
                &s,
                &pod_requesting(&[("cpu", "500m"), ("memory", "3Gi")]),
                &n
            )
            .is_ok()
        );
        assert_eq!(
            reasons(fit.filter(
                &s,
                &pod_requesting(&[
                    ("cpu", "501m"),
                    ("memory", "4Gi"),
                    ("ephemeral-storage", "11Gi")
                ]),
                &n
            )),
            [
                "Insufficient cpu",
                "Insufficient memory",
                "Insufficient ephemeral-storage"
            ]
        );
        let err = fit
            .filter(&s, &pod_requesting(&[("cpu", "1")]), &n)
            .unwrap_err();
        assert!(!err.unresolvable);
    }

    #[test]
    fn extended_resources_missing_or_short_are_insufficient() {
        let s = CycleState::new();
        let fit = NodeResourcesFit::default();
        let gpu_pod = pod_requesting(&[("nvidia.com/gpu", "2")]);
        let no_gpu = node("a", &[("cpu", "8")]).build();
        let one_gpu = node("b", &[("cpu", "8"), ("nvidia.com/gpu", "1")]).build();
        let two_gpu = node("c", &[("cpu", "8"), ("nvidia.com/gpu", "2")]).build();
        assert_eq!(
            reasons(fit.filter(&s, &gpu_pod, &no_gpu)),
            ["Insufficient nvidia.com/gpu"]
        );
        assert_eq!(
            reasons(fit.filter(&s, &gpu_pod, &one_gpu)),
            ["Insufficient nvidia.com/gpu"]
        );
        assert!(fit.filter(&s, &gpu_pod, &two_gpu).is_ok());

        let ignoring = NodeResourcesFit::new(&NodeResourcesFitArgs {
            ignored_resource_groups: vec!["nvidia.com".into()],
            ..Default::default()
        });
        assert!(ignoring.filter(&s, &gpu_pod, &no_gpu).is_ok());
    }

    #[test]
    fn pod_count_is_checked_even_for_empty_pods() {
        let s = CycleState::new();
        let fit = NodeResourcesFit::default();
        let full = node("n", &[("cpu", "8"), ("pods", "1")])
            .with_pod(pod_requesting(&[]))
            .build();
        assert_eq!(
            reasons(fit.filter(&s, &pod_requesting(&[]), &full)),
            ["Too many pods"]
        );
        assert_eq!(
            reasons(fit.filter(&s, &pod_requesting(&[("cpu", "9")]), &full)),
            ["Too many pods", "Insufficient cpu"]
        );
    }

    #[test]
    fn least_allocated_score() {
        // Upstream example: node 4000m/10000 with nothing requested, pod 3000m/5000:
        // cpu (4000-3000)*100/4000 = 25, memory (10000-5000)*100/10000 = 50 -> 37.
        let s = CycleState::new();
        let fit = NodeResourcesFit::default();
        let n = node("n", &[("cpu", "4"), ("memory", "10000")]).build();
        let p = pod_requesting(&[("cpu", "3"), ("memory", "5000")]);
        assert_eq!(fit.score(&s, &p, &n), 37);
        // Over-requested resource scores 0.
        let big = pod_requesting(&[("cpu", "5"), ("memory", "5000")]);
        assert_eq!(fit.score(&s, &big, &n), 25);
    }

    #[test]
    fn most_allocated_score_with_weights() {
        let s = CycleState::new();
        let fit = NodeResourcesFit::new(&NodeResourcesFitArgs {
            scoring_strategy: ScoringStrategy {
                kind: ScoringStrategyType::MostAllocated,
                resources: vec![ResourceSpec::new("cpu", 3), ResourceSpec::new("memory", 1)],
                shape: vec![],
            },
            ..Default::default()
        });
        let n = node("n", &[("cpu", "4"), ("memory", "10000")]).build();
        let p = pod_requesting(&[("cpu", "3"), ("memory", "5000")]);
        // (75*3 + 50*1) / 4 = 68
        assert_eq!(fit.score(&s, &p, &n), 68);
    }

    #[test]
    fn zero_request_pods_score_with_non_zero_defaults() {
        let s = CycleState::new();
        let fit = NodeResourcesFit::default();
        let n = node("n", &[("cpu", "1"), ("memory", "1Gi")]).build();
        // cpu (1000-100)*100/1000 = 90, memory (1024-200)*100/1024 = 80 -> 85
        assert_eq!(fit.score(&s, &pod_requesting(&[]), &n), 85);
    }

    #[test]
    fn requested_to_capacity_ratio_follows_the_shape() {
        let s = CycleState::new();
        let fit = NodeResourcesFit::new(&NodeResourcesFitArgs {
            scoring_strategy: ScoringStrategy {
                kind: ScoringStrategyType::RequestedToCapacityRatio,
                resources: vec![ResourceSpec::new("cpu", 1)],
                shape: vec![
                    UtilizationShapePoint {
                        utilization: 0,
                        score: 0,
                    },
                    UtilizationShapePoint {
                        utilization: 100,
                        score: 10,
                    },
                ],
            },
            ..Default::default()
        });
        let n = node("n", &[("cpu", "4")]).build();
        assert_eq!(fit.score(&s, &pod_requesting(&[("cpu", "1")]), &n), 25);
        assert_eq!(fit.score(&s, &pod_requesting(&[("cpu", "8")]), &n), 100);
    }

    /// Trust: amounts near 64 bits (tenant requests, a huge node) never
    /// overflow a score's `amount * 100`, under any strategy.
    #[test]
    fn huge_amounts_score_without_overflow() {
        let s = CycleState::new();
        let shape = vec![
            UtilizationShapePoint {
                utilization: 0,
                score: 10,
            },
            UtilizationShapePoint {
                utilization: 100,
                score: 0,
            },
        ];
        let n = node("n", &[("cpu", "9000000000000000"), ("memory", "7Ei")])
            .with_pod(pod_requesting(&[("memory", "6Ei")]))
            .build();
        let p = pod_requesting(&[("cpu", "1"), ("memory", "1Ei")]);
        for kind in [
            ScoringStrategyType::LeastAllocated,
            ScoringStrategyType::MostAllocated,
            ScoringStrategyType::RequestedToCapacityRatio,
        ] {
            let fit = NodeResourcesFit::new(&NodeResourcesFitArgs {
                scoring_strategy: ScoringStrategy {
                    kind,
                    resources: vec![ResourceSpec::new("cpu", 1), ResourceSpec::new("memory", 1)],
                    shape: shape.clone(),
                },
                ..Default::default()
            });
            let score = fit.score(&s, &p, &n);
            assert!((0..=MAX_NODE_SCORE).contains(&score), "{kind:?}: {score}");
            assert!(fit.filter(&s, &p, &n).is_ok(), "{kind:?}");
        }
        let mut scores = [i64::MAX, i64::MAX / 2, 0];
        super::super::normalize::default_normalize(&mut scores, false);
        assert_eq!(scores, [MAX_NODE_SCORE, 49, 0]);
    }

    #[test]
    fn args_decode_with_precise_errors() {
        use serde_json::json;
        let args = decode_args(
            "a",
            json!({"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 2}]}}),
        )
        .unwrap();
        assert_eq!(
            args.scoring_strategy.kind,
            ScoringStrategyType::MostAllocated
        );
        assert_eq!(
            args.scoring_strategy.resources,
            vec![ResourceSpec::new("cpu", 2)]
        );
        let cases = [
            (
                json!({"scoringStrategy": {"resources": [{"name": "cpu", "weight": 0}]}}),
                "a.scoringStrategy.resources[0].weight",
                "between 1 and 100",
            ),
            (
                json!({"scoringStrategy": {"resources": []}}),
                "a.scoringStrategy.resources",
                "empty",
            ),
            (
                json!({"scoringStrategy": {"type": "RequestedToCapacityRatio"}}),
                "a.scoringStrategy.requestedToCapacityRatio.shape",
                "at least one point",
            ),
            (
                json!({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": [{"utilization": 50, "score": 1}, {"utilization": 40, "score": 2}]}}}),
                "a.scoringStrategy.requestedToCapacityRatio.shape[1].utilization",
                "strictly increasing",
            ),
            (
                json!({"scoringStrategy": {"typo": 1}}),
                "a.scoringStrategy.typo",
                "unknown field",
            ),
        ];
        for (value, path, needle) in cases {
            let e = decode_args("a", value).unwrap_err();
            assert_eq!(e.path, path, "{e}");
            assert!(e.message.contains(needle), "{e}");
        }
    }
}
