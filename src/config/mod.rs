//! Scheduler configuration: a subset of `kubescheduler.config.k8s.io/v1`
//! `KubeSchedulerConfiguration`, parsed, defaulted and validated.
//!
//! Users bring what they know from kube-scheduler: profiles with scheduler names,
//! enabled/disabled plugins and weights, plugin args, sampling and backoff, and
//! leader election. Anything Muster does not honour — an unknown field, an unknown
//! or unsupported plugin, an out-of-range value — is a `ConfigError` whose message
//! starts with the path of the offending field.

mod duration;
mod raw;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use duration::parse_go_duration;
use raw::*;
use serde::de::DeserializeOwned;

use crate::framework::Framework;
pub use crate::gang::GangArgs;
use crate::plugins::node_resources_fit::{
    ResourceSpec, ScoringStrategyType, UtilizationShapePoint,
};
use crate::plugins::{
    BalancedAllocationArgs, NodeResourcesFitArgs, PlacementConfig, PluginRef, PluginSet,
};

pub const API_VERSION: &str = "kubescheduler.config.k8s.io/v1";
pub const KIND: &str = "KubeSchedulerConfiguration";
pub const DEFAULT_SCHEDULER_NAME: &str = "muster";

/// Filter plugins in the order they run by default.
pub const DEFAULT_FILTERS: &[&str] = &[
    "NodeUnschedulable",
    "NodeName",
    "TaintToleration",
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
];
/// Score plugins with kube-scheduler's default weights.
pub const DEFAULT_SCORES: &[(&str, i64)] = &[
    ("NodeResourcesFit", 1),
    ("NodeResourcesBalancedAllocation", 1),
    ("NodeAffinity", 2),
    ("TaintToleration", 3),
];
/// The gang plugin and the name scheduler-plugins users know it by.
pub const GANG_PLUGIN: &str = "GangScheduling";
const GANG_ALIAS: &str = "Coscheduling";
/// Plugins whose behaviour Muster always has; naming them is accepted and changes nothing.
const BUILTIN_NOOP_PLUGINS: &[&str] = &["PrioritySort", "DefaultBinder", "SchedulingGates"];
/// kube-scheduler plugins Muster does not implement: a clear error beats silently
/// scheduling without them.
const UNSUPPORTED_PLUGINS: &[&str] = &[
    "InterPodAffinity",
    "PodTopologySpread",
    "VolumeBinding",
    "VolumeRestrictions",
    "VolumeZone",
    "NodeVolumeLimits",
    "EBSLimits",
    "GCEPDLimits",
    "AzureDiskLimits",
    "ImageLocality",
    "DefaultPreemption",
    "DynamicResources",
    "NodeDeclaredFeatures",
];

/// A configuration problem; `path` names the field (e.g. `profiles[0].plugins.score.enabled[1].weight`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid scheduler configuration{}: {path}: {message}", source_name.as_ref().map(|s| format!(" {s}")).unwrap_or_default())]
pub struct ConfigError {
    pub source_name: Option<String>,
    pub path: String,
    pub message: String,
}

impl ConfigError {
    fn at(path: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            source_name: None,
            path: path.into(),
            message: message.into(),
        }
    }
}

/// The validated configuration with every default applied.
#[derive(Debug, Clone, PartialEq)]
pub struct SchedulerConfig {
    pub profiles: Vec<Profile>,
    pub percentage_of_nodes_to_score: Option<u32>,
    pub pod_initial_backoff: Duration,
    pub pod_max_backoff: Duration,
    /// Threads for the filter/score fan-out; `None` uses every core.
    pub parallelism: Option<usize>,
    pub leader_election: LeaderElection,
    pub client: ClientConnection,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LeaderElection {
    pub enabled: bool,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
    pub resource_name: String,
    pub resource_namespace: String,
}

impl Default for LeaderElection {
    fn default() -> Self {
        LeaderElection {
            enabled: true,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            resource_name: "muster".into(),
            resource_namespace: "kube-system".into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClientConnection {
    pub kubeconfig: Option<PathBuf>,
    /// Client-side rate limit for API writes; `None` means unlimited.
    pub qps: Option<f64>,
    pub burst: Option<u32>,
}

/// One profile: a scheduler name and the plugins that serve it.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub scheduler_name: String,
    /// The placement plugins with the profile's final plugin lists, weights,
    /// arguments and sampling, validated by building a `Framework` from it.
    pub placement: PlacementConfig,
    /// `None` when the gang plugin is disabled: every pod is scheduled alone.
    pub gang: Option<GangArgs>,
}

impl Profile {
    /// Enabled Filter plugins, in run order.
    pub fn filters(&self) -> impl Iterator<Item = &str> {
        self.placement
            .filter
            .enabled
            .iter()
            .map(|p| p.name.as_str())
    }

    /// Enabled Score plugins with their weights.
    pub fn scores(&self) -> impl Iterator<Item = (&str, i64)> {
        self.placement
            .score
            .enabled
            .iter()
            .map(|p| (p.name.as_str(), p.weight.unwrap_or(1)))
    }

    /// The placement framework for this profile.
    pub fn framework(&self) -> Framework {
        // `profile()` built one from the same config at load time, so this cannot fail.
        Framework::from_config(&self.placement).unwrap_or_else(|_| Framework::kube_default())
    }
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        // The default of an empty document always validates.
        match from_raw(RawConfig::default()) {
            Ok(c) => c,
            Err(e) => unreachable!("default configuration is invalid: {e}"),
        }
    }
}

impl SchedulerConfig {
    /// Reads and validates a YAML or JSON file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            source_name: Some(name.clone()),
            path: "<file>".into(),
            message: format!("cannot read: {e}"),
        })?;
        Self::from_yaml(&text).map_err(|e| ConfigError {
            source_name: Some(name),
            ..e
        })
    }

    /// Parses and validates a YAML (or JSON) document.
    pub fn from_yaml(text: &str) -> Result<Self, ConfigError> {
        let raw: RawConfig = if text.trim().is_empty() {
            RawConfig::default()
        } else {
            let de = serde_norway::Deserializer::from_str(text);
            serde_path_to_error::deserialize(de).map_err(|e| {
                let path = e.path().to_string();
                ConfigError::at(
                    if path == "." {
                        "<document>".into()
                    } else {
                        path
                    },
                    e.into_inner().to_string(),
                )
            })?
        };
        from_raw(raw)
    }

    /// The profile serving `scheduler_name`, if any.
    pub fn profile(&self, scheduler_name: &str) -> Option<&Profile> {
        self.profiles
            .iter()
            .find(|p| p.scheduler_name == scheduler_name)
    }
}

fn from_raw(raw: RawConfig) -> Result<SchedulerConfig, ConfigError> {
    if let Some(v) = raw.api_version.as_deref().filter(|v| *v != API_VERSION) {
        return Err(ConfigError::at(
            "apiVersion",
            format!("must be {API_VERSION:?}, got {v:?}"),
        ));
    }
    if let Some(k) = raw.kind.as_deref().filter(|k| *k != KIND) {
        return Err(ConfigError::at(
            "kind",
            format!("must be {KIND:?}, got {k:?}"),
        ));
    }
    let percentage = percentage("percentageOfNodesToScore", raw.percentage_of_nodes_to_score)?;
    let initial = positive_seconds(
        "podInitialBackoffSeconds",
        raw.pod_initial_backoff_seconds,
        1,
    )?;
    let max = positive_seconds("podMaxBackoffSeconds", raw.pod_max_backoff_seconds, 10)?;
    if max < initial {
        return Err(ConfigError::at(
            "podMaxBackoffSeconds",
            format!(
                "must be >= podInitialBackoffSeconds ({}), got {}",
                initial.as_secs(),
                max.as_secs()
            ),
        ));
    }
    let parallelism = match raw.parallelism {
        None => None,
        Some(p) if (1..=1024).contains(&p) => Some(p as usize),
        Some(p) => {
            return Err(ConfigError::at(
                "parallelism",
                format!("must be between 1 and 1024, got {p}"),
            ));
        }
    };
    let mut profiles = Vec::new();
    let raw_profiles = if raw.profiles.is_empty() {
        vec![RawProfile::default()]
    } else {
        raw.profiles
    };
    for (i, p) in raw_profiles.into_iter().enumerate() {
        let profile = profile(&format!("profiles[{i}]"), p)?;
        if profiles
            .iter()
            .any(|q: &Profile| q.scheduler_name == profile.scheduler_name)
        {
            return Err(ConfigError::at(
                format!("profiles[{i}].schedulerName"),
                format!("duplicate scheduler name {:?}", profile.scheduler_name),
            ));
        }
        profiles.push(profile);
    }
    Ok(SchedulerConfig {
        profiles,
        percentage_of_nodes_to_score: percentage,
        pod_initial_backoff: initial,
        pod_max_backoff: max,
        parallelism,
        leader_election: leader_election(raw.leader_election.unwrap_or_default())?,
        client: client_connection(raw.client_connection.unwrap_or_default())?,
    })
}

fn leader_election(raw: RawLeaderElection) -> Result<LeaderElection, ConfigError> {
    let d = LeaderElection::default();
    let dur =
        |field: &str, v: Option<String>, default: Duration| -> Result<Duration, ConfigError> {
            match v {
                None => Ok(default),
                Some(s) => match parse_go_duration(&s) {
                    Ok(d) if d > Duration::ZERO => Ok(d),
                    Ok(_) => Err(ConfigError::at(
                        format!("leaderElection.{field}"),
                        "must be positive",
                    )),
                    Err(e) => Err(ConfigError::at(format!("leaderElection.{field}"), e)),
                },
            }
        };
    let le = LeaderElection {
        enabled: raw.leader_elect.unwrap_or(d.enabled),
        lease_duration: dur("leaseDuration", raw.lease_duration, d.lease_duration)?,
        renew_deadline: dur("renewDeadline", raw.renew_deadline, d.renew_deadline)?,
        retry_period: dur("retryPeriod", raw.retry_period, d.retry_period)?,
        resource_name: non_empty(
            "leaderElection.resourceName",
            raw.resource_name,
            d.resource_name,
        )?,
        resource_namespace: non_empty(
            "leaderElection.resourceNamespace",
            raw.resource_namespace,
            d.resource_namespace,
        )?,
    };
    if let Some(lock) = raw.resource_lock.filter(|l| l != "leases") {
        return Err(ConfigError::at(
            "leaderElection.resourceLock",
            format!("only \"leases\" is supported, got {lock:?}"),
        ));
    }
    if le.renew_deadline >= le.lease_duration {
        return Err(ConfigError::at(
            "leaderElection.renewDeadline",
            "must be less than leaseDuration",
        ));
    }
    if le.retry_period >= le.renew_deadline {
        return Err(ConfigError::at(
            "leaderElection.retryPeriod",
            "must be less than renewDeadline",
        ));
    }
    Ok(le)
}

fn client_connection(raw: RawClientConnection) -> Result<ClientConnection, ConfigError> {
    let qps = match raw.qps {
        None => None,
        // 0 means unlimited, as in client-go.
        Some(q) if q >= 0.0 && q.is_finite() => (q > 0.0).then_some(q),
        Some(q) => {
            return Err(ConfigError::at(
                "clientConnection.qps",
                format!("must be >= 0, got {q}"),
            ));
        }
    };
    let burst = match raw.burst {
        None => None,
        Some(b) if (1..=i64::from(u32::MAX)).contains(&b) => Some(b as u32),
        Some(b) => {
            return Err(ConfigError::at(
                "clientConnection.burst",
                format!("must be positive, got {b}"),
            ));
        }
    };
    Ok(ClientConnection {
        kubeconfig: raw.kubeconfig.filter(|k| !k.is_empty()).map(PathBuf::from),
        qps,
        burst,
    })
}

fn profile(path: &str, raw: RawProfile) -> Result<Profile, ConfigError> {
    let scheduler_name = non_empty(
        &format!("{path}.schedulerName"),
        raw.scheduler_name,
        DEFAULT_SCHEDULER_NAME.into(),
    )?;
    let percentage = percentage(
        &format!("{path}.percentageOfNodesToScore"),
        raw.percentage_of_nodes_to_score,
    )?;
    let plugins = raw.plugins.unwrap_or_default();
    let PluginSets {
        filters,
        scores,
        gang_enabled,
    } = plugin_sets(&format!("{path}.plugins"), &plugins)?;

    let mut fit = NodeResourcesFitArgs::default();
    let mut balanced = BalancedAllocationArgs::default();
    let mut gang = GangArgs::default();
    let mut seen = Vec::new();
    for (i, pc) in raw.plugin_config.into_iter().enumerate() {
        let at = format!("{path}.pluginConfig[{i}]");
        if seen.contains(&pc.name) {
            return Err(ConfigError::at(
                format!("{at}.name"),
                format!("duplicate config for plugin {:?}", pc.name),
            ));
        }
        match pc.name.as_str() {
            "NodeResourcesFit" => {
                fit = fit_args(
                    &format!("{at}.args"),
                    args(&format!("{at}.args"), pc.args.clone())?,
                )?
            }
            "NodeResourcesBalancedAllocation" => {
                let a: RawBalancedAllocationArgs = args(&format!("{at}.args"), pc.args.clone())?;
                if let Some(rs) = a.resources {
                    balanced.resources = resource_specs(&format!("{at}.args.resources"), rs)?
                        .into_iter()
                        .map(|(n, _)| n)
                        .collect();
                }
            }
            GANG_PLUGIN | GANG_ALIAS => {
                gang = gang_args(
                    &format!("{at}.args"),
                    args(&format!("{at}.args"), pc.args.clone())?,
                )?
            }
            other => {
                return Err(ConfigError::at(
                    format!("{at}.name"),
                    unknown_plugin_message(other, "has no configurable args"),
                ));
            }
        }
        seen.push(pc.name);
    }
    let placement = PlacementConfig {
        filter: PluginSet {
            enabled: filters.iter().map(|n| PluginRef::new(n)).collect(),
            disabled: vec!["*".into()],
        },
        score: PluginSet {
            enabled: scores
                .iter()
                .map(|(n, w)| PluginRef::weighted(n, *w))
                .collect(),
            disabled: vec!["*".into()],
        },
        node_resources_fit: fit,
        balanced_allocation: balanced,
        percentage_of_nodes_to_score: percentage,
        tie_break_seed: None,
    };
    Framework::from_config(&placement)
        .map_err(|e| ConfigError::at(format!("{path}.plugins"), e.to_string()))?;
    Ok(Profile {
        scheduler_name,
        placement,
        gang: gang_enabled.then_some(gang),
    })
}

/// The plugins a profile ends up with.
struct PluginSets {
    filters: Vec<String>,
    scores: Vec<(String, i64)>,
    gang_enabled: bool,
}

/// Applies kube-scheduler's enable/disable rules to Muster's defaults:
/// `disabled` (a name or `*`) removes defaults at that point, `enabled` adds or
/// re-weights; `multiPoint` applies to every point a plugin implements.
fn plugin_sets(path: &str, p: &RawPlugins) -> Result<PluginSets, ConfigError> {
    let empty = RawPluginSet::default();
    let multi = p.multi_point.as_ref().unwrap_or(&empty);
    // Points where Muster's plugin set is fixed: only known names are accepted.
    let fixed_points = [
        ("preEnqueue", &p.pre_enqueue),
        ("queueSort", &p.queue_sort),
        ("preFilter", &p.pre_filter),
        ("postFilter", &p.post_filter),
        ("preScore", &p.pre_score),
        ("reserve", &p.reserve),
        ("permit", &p.permit),
        ("preBind", &p.pre_bind),
        ("bind", &p.bind),
        ("postBind", &p.post_bind),
    ];
    let mut gang_enabled = true;
    for (point, set) in fixed_points
        .iter()
        .map(|(n, s)| (*n, s.as_ref()))
        .chain([("multiPoint", Some(multi))])
    {
        let Some(set) = set else { continue };
        for (kind, list) in [("enabled", &set.enabled), ("disabled", &set.disabled)] {
            for (i, plugin) in list.iter().enumerate() {
                let at = format!("{path}.{point}.{kind}[{i}].name");
                check_known(&at, &plugin.name, kind == "disabled")?;
                let is_gang = plugin.name == GANG_PLUGIN || plugin.name == GANG_ALIAS;
                if kind == "disabled" && (is_gang || plugin.name == "*") && point != "queueSort" {
                    gang_enabled = false;
                }
                if kind == "enabled" && is_gang {
                    gang_enabled = true;
                }
            }
        }
    }

    let mut filters: Vec<String> = DEFAULT_FILTERS.iter().map(|s| s.to_string()).collect();
    let mut scores: Vec<(String, i64)> = DEFAULT_SCORES
        .iter()
        .map(|(n, w)| (n.to_string(), *w))
        .collect();
    let filter = p.filter.as_ref().unwrap_or(&empty);
    let score = p.score.as_ref().unwrap_or(&empty);
    for (point, set) in [("multiPoint", multi), ("filter", filter), ("score", score)] {
        for (i, plugin) in set.disabled.iter().enumerate() {
            check_known(
                &format!("{path}.{point}.disabled[{i}].name"),
                &plugin.name,
                true,
            )?;
            let all = plugin.name == "*";
            if point != "score" {
                filters.retain(|f| !all && *f != plugin.name);
            }
            if point != "filter" {
                scores.retain(|(s, _)| !all && *s != plugin.name);
            }
        }
    }
    for (point, set) in [("multiPoint", multi), ("filter", filter), ("score", score)] {
        for (i, plugin) in set.enabled.iter().enumerate() {
            let at = format!("{path}.{point}.enabled[{i}]");
            check_known(&format!("{at}.name"), &plugin.name, false)?;
            let name = plugin.name.as_str();
            let is_filter = DEFAULT_FILTERS.contains(&name);
            let default_weight = DEFAULT_SCORES
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, w)| *w);
            if point == "filter" && !is_filter {
                return Err(ConfigError::at(
                    format!("{at}.name"),
                    format!("{name:?} is not a Filter plugin"),
                ));
            }
            if point == "score" && default_weight.is_none() {
                return Err(ConfigError::at(
                    format!("{at}.name"),
                    format!("{name:?} is not a Score plugin"),
                ));
            }
            if plugin.weight.is_some() && default_weight.is_none() {
                return Err(ConfigError::at(
                    format!("{at}.weight"),
                    format!("{name:?} is not a Score plugin; weight has no meaning"),
                ));
            }
            if is_filter && point != "score" && !filters.iter().any(|f| f == name) {
                filters.push(name.to_string());
            }
            if let Some(default_weight) = default_weight.filter(|_| point != "filter") {
                let weight = match plugin.weight {
                    None | Some(0) => default_weight,
                    Some(w) if (1..=100).contains(&w) => w,
                    Some(w) => {
                        return Err(ConfigError::at(
                            format!("{at}.weight"),
                            format!("must be between 1 and 100, got {w}"),
                        ));
                    }
                };
                match scores.iter_mut().find(|(s, _)| s == name) {
                    Some(entry) => entry.1 = weight,
                    None => scores.push((name.to_string(), weight)),
                }
            }
        }
    }
    Ok(PluginSets {
        filters,
        scores,
        gang_enabled,
    })
}

fn check_known(at: &str, name: &str, allow_star: bool) -> Result<(), ConfigError> {
    let known = DEFAULT_FILTERS.contains(&name)
        || DEFAULT_SCORES.iter().any(|(n, _)| *n == name)
        || name == GANG_PLUGIN
        || name == GANG_ALIAS
        || BUILTIN_NOOP_PLUGINS.contains(&name)
        || (allow_star && name == "*");
    if known {
        Ok(())
    } else {
        Err(ConfigError::at(
            at,
            unknown_plugin_message(name, "is not a plugin Muster knows"),
        ))
    }
}

fn unknown_plugin_message(name: &str, what: &str) -> String {
    if UNSUPPORTED_PLUGINS.contains(&name) {
        format!("plugin {name:?} is a kube-scheduler plugin that Muster does not implement")
    } else {
        let mut known: Vec<&str> = DEFAULT_FILTERS.to_vec();
        known.extend(
            DEFAULT_SCORES
                .iter()
                .map(|(n, _)| *n)
                .filter(|n| !DEFAULT_FILTERS.contains(n)),
        );
        known.push(GANG_PLUGIN);
        format!("plugin {name:?} {what} (known: {})", known.join(", "))
    }
}

fn args<T: DeserializeOwned + Default>(
    path: &str,
    value: serde_json::Value,
) -> Result<T, ConfigError> {
    if value.is_null() {
        return Ok(T::default());
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let inner = e.path().to_string();
        let at = if inner == "." {
            path.to_string()
        } else {
            format!("{path}.{inner}")
        };
        ConfigError::at(at, e.into_inner().to_string())
    })
}

fn fit_args(path: &str, raw: RawNodeResourcesFitArgs) -> Result<NodeResourcesFitArgs, ConfigError> {
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
        fit.scoring_strategy.resources = resource_specs(&format!("{at}.resources"), rs)?
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
            if shape.is_empty() {
                return Err(ConfigError::at(
                    format!("{at}.requestedToCapacityRatio.shape"),
                    "must have at least one point",
                ));
            }
            let mut points: Vec<UtilizationShapePoint> = Vec::new();
            for (i, p) in shape.iter().enumerate() {
                let pat = format!("{at}.requestedToCapacityRatio.shape[{i}]");
                if !(0..=100).contains(&p.utilization) {
                    return Err(ConfigError::at(
                        format!("{pat}.utilization"),
                        format!("must be between 0 and 100, got {}", p.utilization),
                    ));
                }
                if !(0..=10).contains(&p.score) {
                    return Err(ConfigError::at(
                        format!("{pat}.score"),
                        format!("must be between 0 and 10, got {}", p.score),
                    ));
                }
                if points
                    .last()
                    .is_some_and(|q| q.utilization >= p.utilization)
                {
                    return Err(ConfigError::at(
                        format!("{pat}.utilization"),
                        "values must be strictly increasing",
                    ));
                }
                points.push(UtilizationShapePoint {
                    utilization: p.utilization,
                    score: p.score,
                });
            }
            fit.scoring_strategy.shape = points;
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

fn resource_specs(
    path: &str,
    raw: Vec<RawResourceSpec>,
) -> Result<Vec<(String, i64)>, ConfigError> {
    let mut out: Vec<(String, i64)> = Vec::new();
    for (i, r) in raw.into_iter().enumerate() {
        if r.name.is_empty() {
            return Err(ConfigError::at(
                format!("{path}[{i}].name"),
                "must not be empty",
            ));
        }
        if out.iter().any(|(n, _)| *n == r.name) {
            return Err(ConfigError::at(
                format!("{path}[{i}].name"),
                format!("duplicate resource {:?}", r.name),
            ));
        }
        let weight = match r.weight {
            None => 1,
            Some(w) if (1..=100).contains(&w) => w,
            Some(w) => {
                return Err(ConfigError::at(
                    format!("{path}[{i}].weight"),
                    format!("must be between 1 and 100, got {w}"),
                ));
            }
        };
        out.push((r.name, weight));
    }
    Ok(out)
}

fn gang_args(path: &str, raw: RawGangArgs) -> Result<GangArgs, ConfigError> {
    let d = GangArgs::default();
    Ok(GangArgs {
        permit_waiting_time: match raw.permit_waiting_time_seconds {
            None => d.permit_waiting_time,
            Some(s) => positive_seconds(&format!("{path}.permitWaitingTimeSeconds"), Some(s), 0)?,
        },
        group_backoff: match raw.pod_group_backoff_seconds {
            None => d.group_backoff,
            Some(s) if s >= 0 => Duration::from_secs(s as u64),
            Some(s) => {
                return Err(ConfigError::at(
                    format!("{path}.podGroupBackoffSeconds"),
                    format!("must be >= 0, got {s}"),
                ));
            }
        },
    })
}

fn percentage(path: &str, v: Option<i64>) -> Result<Option<u32>, ConfigError> {
    match v {
        // 0 means "use the adaptive default", as in kube-scheduler.
        None | Some(0) => Ok(None),
        Some(p) if (1..=100).contains(&p) => Ok(Some(p as u32)),
        Some(p) => Err(ConfigError::at(
            path,
            format!("must be between 0 and 100, got {p}"),
        )),
    }
}

fn positive_seconds(path: &str, v: Option<i64>, default: u64) -> Result<Duration, ConfigError> {
    match v {
        None => Ok(Duration::from_secs(default)),
        Some(s) if s > 0 => Ok(Duration::from_secs(s as u64)),
        Some(s) => Err(ConfigError::at(path, format!("must be positive, got {s}"))),
    }
}

fn non_empty(path: &str, v: Option<String>, default: String) -> Result<String, ConfigError> {
    match v {
        None => Ok(default),
        Some(s) if !s.trim().is_empty() => Ok(s),
        Some(_) => Err(ConfigError::at(path, "must not be empty")),
    }
}

#[cfg(test)]
mod tests;
