//! Scheduler configuration: a subset of `kubescheduler.config.k8s.io/v1`
//! `KubeSchedulerConfiguration`, parsed, defaulted and validated.
//!
//! Users bring what they know from kube-scheduler: profiles with scheduler names,
//! enabled/disabled plugins and weights, plugin args, sampling and backoff, and
//! leader election. Anything Muster does not honour — an unknown field, an unknown
//! or unsupported plugin, an out-of-range value — is a `ConfigError` whose message
//! starts with the path of the offending field.

mod raw;

use std::path::{Path, PathBuf};
use std::time::Duration;

use raw::*;

pub use crate::framework::ConfigError;
use crate::framework::{Args, Framework};
pub use crate::gang::GangArgs;
use crate::plugins::{EnabledPlugins, Point, build_plugins, merge_args, merge_plugins};

pub const API_VERSION: &str = "kubescheduler.config.k8s.io/v1";
pub const KIND: &str = "KubeSchedulerConfiguration";
pub const DEFAULT_SCHEDULER_NAME: &str = "muster";

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

/// One profile: a scheduler name, the plugins that serve it and their
/// arguments, and the `Framework` built from them when the profile was
/// validated (so it cannot fail to build later).
#[derive(Debug, Clone)]
pub struct Profile {
    pub scheduler_name: String,
    /// The profile's own `percentageOfNodesToScore` (`None`: the global one,
    /// else adaptive); the framework has the value in force.
    pub percentage_of_nodes_to_score: Option<u32>,
    pub plugins: EnabledPlugins,
    pub args: Args,
    pub framework: Framework,
    /// `None` when the gang plugin is disabled: every pod is scheduled alone.
    pub gang: Option<GangArgs>,
    /// `None` when DefaultPreemption is disabled: no pod preempts.
    pub preemption: Option<crate::preemption::PreemptionArgs>,
}

impl PartialEq for Profile {
    /// The framework is built from the other fields, so it is not compared.
    fn eq(&self, other: &Self) -> bool {
        self.scheduler_name == other.scheduler_name
            && self.percentage_of_nodes_to_score == other.percentage_of_nodes_to_score
            && self.plugins == other.plugins
            && self.args == other.args
            && self.gang == other.gang
            && self.preemption == other.preemption
    }
}

impl Profile {
    /// Enabled Filter plugins, in run order.
    pub fn filters(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.plugins.at(Point::Filter).iter().map(|e| e.plugin.name)
    }

    /// Enabled Score plugins with their weights.
    pub fn scores(&self) -> impl Iterator<Item = (&'static str, i64)> + '_ {
        self.plugins
            .at(Point::Score)
            .iter()
            .map(|e| (e.plugin.name, e.weight))
    }

    /// The typed arguments of `plugin` (its defaults unless configured).
    pub fn plugin_args<T: 'static>(&self, plugin: &str) -> Option<&T> {
        self.args.get::<T>(plugin)
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
        let profile = profile(&format!("profiles[{i}]"), p, percentage)?;
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
                Some(s) => match s.parse::<kube_core::Duration>() {
                    Ok(d) if !d.is_negative() && Duration::from(d) > Duration::ZERO => {
                        Ok(Duration::from(d))
                    }
                    Ok(_) => Err(ConfigError::at(
                        format!("leaderElection.{field}"),
                        "must be positive",
                    )),
                    Err(e) => Err(ConfigError::at(
                        format!("leaderElection.{field}"),
                        format!("duration {s:?}: {e}"),
                    )),
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

fn profile(
    path: &str,
    raw: RawProfile,
    global_percentage: Option<u32>,
) -> Result<Profile, ConfigError> {
    let scheduler_name = non_empty(
        &format!("{path}.schedulerName"),
        raw.scheduler_name,
        DEFAULT_SCHEDULER_NAME.into(),
    )?;
    let percentage = percentage(
        &format!("{path}.percentageOfNodesToScore"),
        raw.percentage_of_nodes_to_score,
    )?;
    let plugins = merge_plugins(&format!("{path}.plugins"), &raw.plugins.unwrap_or_default())?;
    let args = merge_args(&format!("{path}.pluginConfig"), &raw.plugin_config)?;
    let built = build_plugins(&plugins, &args, percentage.or(global_percentage));
    Ok(Profile {
        scheduler_name,
        percentage_of_nodes_to_score: percentage,
        plugins,
        args,
        framework: built.framework,
        gang: built.gang,
        preemption: built.preemption,
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

/// A whole number of seconds, 1 to a day: longer backoffs would only hide
/// pods, and every deadline stays far from overflow.
fn positive_seconds(path: &str, v: Option<i64>, default: u64) -> Result<Duration, ConfigError> {
    const DAY: u64 = 24 * 60 * 60;
    match v {
        None => Ok(Duration::from_secs(default)),
        Some(s) if s > 0 && s.unsigned_abs() <= DAY => Ok(Duration::from_secs(s.unsigned_abs())),
        Some(s) => Err(ConfigError::at(
            path,
            format!("must be between 1 and {DAY} (24 hours), got {s}"),
        )),
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
