//! `GangSchedulingArgs`: the gang plugin's per-profile settings, decoded and
//! validated from its `pluginConfig` entry (also accepted under the name
//! scheduler-plugins users know, `Coscheduling`, with its field names).

use std::sync::Arc;
use std::time::Duration;

use crate::dialects::owners::{TopOwnerGrouping, decode_grouping};
use crate::dialects::topology::validate_level_keys;
use crate::framework::args::{self, ConfigError};
use crate::model::{GroupSource, MAX_SCHEDULE_TIMEOUT};

/// The gang plugin's name in profiles.
pub const NAME: &str = "GangScheduling";
/// The name scheduler-plugins users know it by.
pub const ALIAS: &str = "Coscheduling";

/// Per-profile arguments (`GangScheduling`/`Coscheduling` pluginConfig).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GangArgs {
    /// `permitWaitingTimeSeconds`: the timeout when neither the definition
    /// nor [`GangArgs::dialect_timeouts`] sets one.
    pub permit_waiting_time: Duration,
    /// How long a gang is denied after a member was unschedulable.
    pub group_backoff: Duration,
    /// The default timeout of each dialect's gangs, where it has one.
    pub dialect_timeouts: DialectTimeouts,
    /// `topOwnerGrouping`: group pods by their top owner (`dialects::owners`).
    pub top_owner: TopOwnerGrouping,
    /// `topologyDomainOrder`: how a level's domains are ordered for a gang.
    pub domain_order: super::DomainOrder,
    /// `planWholeGangs`: plan a gang as one unit (the gang cycle).
    pub plan_whole_gangs: bool,
    /// `topologyLevels`: node label keys, outermost level first (block,
    /// rack, host), the hierarchy used when the cluster declares none (no
    /// Kueue `Topology`, no Volcano `HyperNode`). Empty: none.
    pub topology_levels: Vec<Arc<str>>,
    /// Reservations and backfill (`engine::reservations`).
    pub reservations: ReservationArgs,
    /// ProvisioningRequests for gangs short of capacity
    /// (`engine::provisioning`).
    pub provisioning: ProvisioningArgs,
}

/// The ProvisioningRequest class asked for by default: all or nothing.
pub const DEFAULT_PROVISIONING_CLASS: &str = "best-effort-atomic-scale-up.autoscaling.x-k8s.io";

/// Settings (GangScheduling arguments).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProvisioningArgs {
    /// `provisioningRequests`: ask for capacity where the API is served.
    pub enabled: bool,
    /// `provisioningClassName`.
    pub class: Arc<str>,
    /// `maxProvisioningRequests`: live requests in the cluster at most.
    pub max_requests: u32,
    /// `preemptionDelaySeconds`: a gang that could preempt waits this long
    /// (from its first failed gang cycle) before it evicts anyone.
    pub preemption_delay: Duration,
    /// `waitForProvisioningBeforePreemption`: while the gang's request is
    /// pending it evicts nobody.
    pub wait_before_preempting: bool,
}

impl Default for ProvisioningArgs {
    fn default() -> Self {
        ProvisioningArgs {
            enabled: true,
            class: Arc::from(DEFAULT_PROVISIONING_CLASS),
            max_requests: 100,
            preemption_delay: Duration::ZERO,
            wait_before_preempting: true,
        }
    }
}

/// `reserveAfterSeconds`, `maxReservations`, `maxReservedFraction`,
/// `reservationTimeoutSeconds`: when a gang that keeps failing gets room
/// held for it, and how much may be held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReservationArgs {
    /// How long a gang waits (from its first failed attempt) before it gets
    /// a reservation; zero turns reservations off. A group's
    /// `muster.dev/reserve-after-seconds` overrides it.
    pub reserve_after: Duration,
    /// Reservations held at once in the profile.
    pub max_reservations: u32,
    /// The most of the cluster's nodes reservations may hold, in
    /// thousandths (`maxReservedFraction` 0.5 is 500).
    pub max_reserved_per_mille: u32,
    /// A reservation whose gang has not started this long after it was
    /// made ends (its gang may get another after waiting again).
    pub timeout: Duration,
}

impl Default for ReservationArgs {
    fn default() -> Self {
        ReservationArgs {
            reserve_after: Duration::from_secs(60),
            max_reservations: 1,
            max_reserved_per_mille: 500,
            timeout: Duration::from_secs(600),
        }
    }
}

impl Default for GangArgs {
    fn default() -> Self {
        GangArgs {
            permit_waiting_time: Duration::from_secs(60),
            group_backoff: Duration::from_secs(5),
            dialect_timeouts: DialectTimeouts::UPSTREAM,
            top_owner: TopOwnerGrouping::default(),
            domain_order: super::DomainOrder::BestFit,
            plan_whole_gangs: true,
            topology_levels: Vec::new(),
            reservations: ReservationArgs::default(),
            provisioning: ProvisioningArgs::default(),
        }
    }
}

impl GangArgs {
    /// The timeout of a gang of `source` whose definition sets none.
    pub fn default_timeout(&self, source: GroupSource) -> Duration {
        self.dialect_timeouts
            .get(source)
            .unwrap_or(self.permit_waiting_time)
    }
}

/// A default gang timeout per dialect (`dialectTimeoutSeconds`); `None`
/// falls back to `permitWaitingTimeSeconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DialectTimeouts {
    /// Workload API `PodGroup` and v1alpha1 `Workload` groups.
    pub workload_api: Option<Duration>,
    pub coscheduling: Option<Duration>,
    pub volcano: Option<Duration>,
    pub kueue: Option<Duration>,
}

impl DialectTimeouts {
    /// Every dialect waits `permitWaitingTimeSeconds` (what a profile built
    /// in code, not from a configuration file, uses).
    pub const UNIFORM: DialectTimeouts = DialectTimeouts {
        workload_api: None,
        coscheduling: None,
        volcano: None,
        kueue: None,
    };

    /// Each dialect's own default: the Workload API's PodGroup scheduling
    /// timeout is 5 minutes; Kueue's counterpart, `waitForPodsReady.timeout`,
    /// also 5 minutes. Coscheduling's is scheduler-plugins'
    /// `permitWaitingTimeSeconds` itself (60 s unless configured); Volcano
    /// has no barrier timeout (it places a gang within one session), so it
    /// shares that one.
    pub const UPSTREAM: DialectTimeouts = DialectTimeouts {
        workload_api: Some(Duration::from_secs(300)),
        coscheduling: None,
        volcano: None,
        kueue: Some(Duration::from_secs(300)),
    };

    pub fn get(&self, source: GroupSource) -> Option<Duration> {
        match source {
            GroupSource::PodGroup | GroupSource::Workload | GroupSource::CompositePodGroup => {
                self.workload_api
            }
            GroupSource::Coscheduling => self.coscheduling,
            GroupSource::Volcano => self.volcano,
            GroupSource::Kueue => self.kueue,
            // Top-owner gangs (Jobs, JobSets, ...) have no upstream barrier
            // timeout: `permitWaitingTimeSeconds`.
            GroupSource::Owner(_) => None,
        }
    }
}

/// The args as written, with scheduler-plugins' `CoschedulingArgs` field names.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WireArgs {
    permit_waiting_time_seconds: Option<i64>,
    pod_group_backoff_seconds: Option<i64>,
    dialect_timeout_seconds: Option<WireDialectTimeouts>,
    top_owner_grouping: Option<serde_json::Value>,
    plan_whole_gangs: Option<bool>,
    topology_domain_order: Option<String>,
    topology_levels: Option<Vec<String>>,
    reserve_after_seconds: Option<i64>,
    max_reservations: Option<i64>,
    max_reserved_fraction: Option<f64>,
    reservation_timeout_seconds: Option<i64>,
    provisioning_requests: Option<bool>,
    provisioning_class_name: Option<String>,
    max_provisioning_requests: Option<i64>,
    preemption_delay_seconds: Option<i64>,
    wait_for_provisioning_before_preemption: Option<bool>,
}

/// `dialectTimeoutSeconds`: seconds per dialect.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct WireDialectTimeouts {
    #[serde(rename = "workloadAPI")]
    workload_api: Option<i64>,
    coscheduling: Option<i64>,
    volcano: Option<i64>,
    kueue: Option<i64>,
}

/// A timeout in seconds at `field`: between 1 and [`MAX_SCHEDULE_TIMEOUT`].
fn timeout(field: String, s: i64) -> Result<Duration, ConfigError> {
    if s > 0 && s.unsigned_abs() <= MAX_SCHEDULE_TIMEOUT.as_secs() {
        return Ok(Duration::from_secs(s.unsigned_abs()));
    }
    Err(ConfigError::at(
        field,
        format!(
            "must be between 1 and {} (24 hours), got {s}",
            MAX_SCHEDULE_TIMEOUT.as_secs()
        ),
    ))
}

/// Decodes and validates the gang plugin's args at `path`:
/// `permitWaitingTimeSeconds` and each `dialectTimeoutSeconds` entry
/// positive, `podGroupBackoffSeconds` not negative, and none above
/// [`MAX_SCHEDULE_TIMEOUT`] (the longest wait a group may ask for; a
/// configuration asking more is refused, not capped).
///
/// A dialect's default timeout is its `dialectTimeoutSeconds` entry; else
/// upstream's default for the dialect ([`DialectTimeouts::UPSTREAM`]:
/// 5 minutes for the Workload API and Kueue, `permitWaitingTimeSeconds`
/// for Coscheduling, whose argument it is, and Volcano).
pub fn decode_args(path: &str, value: serde_json::Value) -> Result<GangArgs, ConfigError> {
    let raw: WireArgs = args::decode(path, value)?;
    let reservations = reservation_args(path, &raw)?;
    let provisioning = provisioning_args(path, &raw)?;
    let d = GangArgs::default();
    let permit_waiting_time = match raw.permit_waiting_time_seconds {
        None => d.permit_waiting_time,
        Some(s) => timeout(format!("{path}.permitWaitingTimeSeconds"), s)?,
    };
    let mut dialect_timeouts = DialectTimeouts::UPSTREAM;
    if let Some(w) = raw.dialect_timeout_seconds {
        let entries = [
            (
                w.workload_api,
                "workloadAPI",
                &mut dialect_timeouts.workload_api,
            ),
            (
                w.coscheduling,
                "coscheduling",
                &mut dialect_timeouts.coscheduling,
            ),
            (w.volcano, "volcano", &mut dialect_timeouts.volcano),
            (w.kueue, "kueue", &mut dialect_timeouts.kueue),
        ];
        for (seconds, name, slot) in entries {
            if let Some(s) = seconds {
                *slot = Some(timeout(format!("{path}.dialectTimeoutSeconds.{name}"), s)?);
            }
        }
    }
    let group_backoff = match raw.pod_group_backoff_seconds {
        None => d.group_backoff,
        Some(s) if s >= 0 && s.unsigned_abs() <= MAX_SCHEDULE_TIMEOUT.as_secs() => {
            Duration::from_secs(s.unsigned_abs())
        }
        Some(s) => {
            return Err(ConfigError::at(
                format!("{path}.podGroupBackoffSeconds"),
                format!(
                    "must be between 0 and {} (24 hours), got {s}",
                    MAX_SCHEDULE_TIMEOUT.as_secs()
                ),
            ));
        }
    };
    let top_owner = match raw.top_owner_grouping {
        None => TopOwnerGrouping::default(),
        Some(v) => decode_grouping(&format!("{path}.topOwnerGrouping"), v)?,
    };
    let domain_order = match raw.topology_domain_order.as_deref() {
        None | Some("BestFit") => super::DomainOrder::BestFit,
        Some("LeastFreeCapacity") => super::DomainOrder::LeastFreeCapacity,
        Some(other) => {
            return Err(ConfigError::at(
                format!("{path}.topologyDomainOrder"),
                format!("must be BestFit or LeastFreeCapacity, got {other:?}"),
            ));
        }
    };
    let topology_levels = match raw.topology_levels {
        None => Vec::new(),
        Some(keys) => topology_levels(&format!("{path}.topologyLevels"), keys)?,
    };
    Ok(GangArgs {
        permit_waiting_time,
        group_backoff,
        dialect_timeouts,
        top_owner,
        domain_order,
        plan_whole_gangs: raw.plan_whole_gangs.unwrap_or(true),
        topology_levels,
        reservations,
        provisioning,
    })
}

/// `provisioningRequests`, `provisioningClassName` (a class name of at most
/// 253 characters), `maxProvisioningRequests` (0–10,000).
fn provisioning_args(path: &str, raw: &WireArgs) -> Result<ProvisioningArgs, ConfigError> {
    let d = ProvisioningArgs::default();
    let class = match &raw.provisioning_class_name {
        None => d.class,
        Some(c) if !c.is_empty() && c.len() <= 253 => Arc::from(c.as_str()),
        Some(_) => {
            return Err(ConfigError::at(
                format!("{path}.provisioningClassName"),
                "must be 1 to 253 characters",
            ));
        }
    };
    let max_requests = match raw.max_provisioning_requests {
        None => d.max_requests,
        Some(n) if (0..=10_000).contains(&n) => n as u32,
        Some(n) => {
            return Err(ConfigError::at(
                format!("{path}.maxProvisioningRequests"),
                format!("must be between 0 and 10000, got {n}"),
            ));
        }
    };
    let preemption_delay = match raw.preemption_delay_seconds {
        None => d.preemption_delay,
        Some(s) if s >= 0 && s.unsigned_abs() <= MAX_SCHEDULE_TIMEOUT.as_secs() => {
            Duration::from_secs(s.unsigned_abs())
        }
        Some(s) => {
            return Err(ConfigError::at(
                format!("{path}.preemptionDelaySeconds"),
                format!(
                    "must be between 0 and {} (24 hours), got {s}",
                    MAX_SCHEDULE_TIMEOUT.as_secs()
                ),
            ));
        }
    };
    Ok(ProvisioningArgs {
        enabled: raw.provisioning_requests.unwrap_or(d.enabled),
        class,
        max_requests,
        preemption_delay,
        wait_before_preempting: raw
            .wait_for_provisioning_before_preemption
            .unwrap_or(d.wait_before_preempting),
    })
}

/// The reservation fields, bounded: seconds within a day (0 allowed for
/// `reserveAfterSeconds`, turning reservations off), 0–1,000 reservations,
/// a fraction within [0, 1].
fn reservation_args(path: &str, raw: &WireArgs) -> Result<ReservationArgs, ConfigError> {
    let d = ReservationArgs::default();
    let seconds = |field: &str, v: Option<i64>, min: i64, default: Duration| match v {
        None => Ok(default),
        Some(s) if s >= min && s.unsigned_abs() <= MAX_SCHEDULE_TIMEOUT.as_secs() => {
            Ok(Duration::from_secs(s.unsigned_abs()))
        }
        Some(s) => Err(ConfigError::at(
            format!("{path}.{field}"),
            format!(
                "must be between {min} and {} (24 hours), got {s}",
                MAX_SCHEDULE_TIMEOUT.as_secs()
            ),
        )),
    };
    let reserve_after = seconds(
        "reserveAfterSeconds",
        raw.reserve_after_seconds,
        0,
        d.reserve_after,
    )?;
    let timeout = seconds(
        "reservationTimeoutSeconds",
        raw.reservation_timeout_seconds,
        1,
        d.timeout,
    )?;
    let max_reservations = match raw.max_reservations {
        None => d.max_reservations,
        Some(n) if (0..=1000).contains(&n) => n as u32,
        Some(n) => {
            return Err(ConfigError::at(
                format!("{path}.maxReservations"),
                format!("must be between 0 and 1000, got {n}"),
            ));
        }
    };
    let max_reserved_per_mille = match raw.max_reserved_fraction {
        None => d.max_reserved_per_mille,
        Some(f) if (0.0..=1.0).contains(&f) => (f * 1000.0).round() as u32,
        Some(f) => {
            return Err(ConfigError::at(
                format!("{path}.maxReservedFraction"),
                format!("must be between 0 and 1, got {f}"),
            ));
        }
    };
    Ok(ReservationArgs {
        reserve_after,
        max_reservations,
        max_reserved_per_mille,
        timeout,
    })
}

/// `topologyLevels` at `path`: as a Kueue `Topology`'s levels, 1 to 16
/// distinct valid label keys (an empty list is an error: leave the field
/// out for none).
fn topology_levels(path: &str, keys: Vec<String>) -> Result<Vec<Arc<str>>, ConfigError> {
    validate_level_keys(&keys)
        .map_err(|e| ConfigError::at(format!("{path}{}", e.at), e.message))?;
    Ok(keys.into_iter().map(Arc::from).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reservation_args_decode_and_bound() {
        let a = decode_args(
            "a",
            json!({"reserveAfterSeconds": 0, "maxReservations": 3, "maxReservedFraction": 0.25, "reservationTimeoutSeconds": 30}),
        )
        .unwrap();
        assert_eq!(
            a.reservations,
            ReservationArgs {
                reserve_after: Duration::ZERO,
                max_reservations: 3,
                max_reserved_per_mille: 250,
                timeout: Duration::from_secs(30),
            }
        );
        for (field, bad) in [
            ("reserveAfterSeconds", json!(-1)),
            ("maxReservations", json!(1001)),
            ("maxReservedFraction", json!(1.5)),
            ("reservationTimeoutSeconds", json!(0)),
        ] {
            let e = decode_args("a", json!({ field: bad })).unwrap_err();
            assert!(e.to_string().contains(&format!("a.{field}")), "{e}");
        }
    }

    #[test]
    fn decodes_and_bounds() {
        let a = decode_args(
            "a",
            json!({"permitWaitingTimeSeconds": 10, "podGroupBackoffSeconds": 0}),
        )
        .unwrap();
        assert_eq!(a.permit_waiting_time, Duration::from_secs(10));
        assert_eq!(a.group_backoff, Duration::ZERO);
        assert_eq!(
            decode_args("a", serde_json::Value::Null).unwrap(),
            GangArgs::default()
        );
        let e = decode_args("a", json!({"permitWaitingTimeSeconds": 0})).unwrap_err();
        assert_eq!(e.path, "a.permitWaitingTimeSeconds");
        let e = decode_args("a", json!({"podGroupBackoffSeconds": -1})).unwrap_err();
        assert_eq!(e.path, "a.podGroupBackoffSeconds");
        let e = decode_args("a", json!({"permitWaitingTimeSeconds": i64::MAX})).unwrap_err();
        assert!(e.message.contains("between 1 and 86400"), "{}", e.message);
        let e = decode_args("a", json!({"podGroupBackoffSeconds": 86401})).unwrap_err();
        assert_eq!(e.path, "a.podGroupBackoffSeconds");
    }

    #[test]
    fn dialect_timeouts_default_to_upstream_and_are_configurable() {
        let secs = |a: &GangArgs, s: GroupSource| a.default_timeout(s).as_secs();
        let d = decode_args("a", serde_json::Value::Null).unwrap();
        assert_eq!(secs(&d, GroupSource::PodGroup), 300);
        assert_eq!(secs(&d, GroupSource::Workload), 300);
        assert_eq!(secs(&d, GroupSource::Coscheduling), 60);
        assert_eq!(secs(&d, GroupSource::Volcano), 60);
        assert_eq!(secs(&d, GroupSource::Kueue), 300);
        // permitWaitingTimeSeconds is Coscheduling's (and Volcano's).
        let a = decode_args("a", json!({"permitWaitingTimeSeconds": 10})).unwrap();
        assert_eq!(secs(&a, GroupSource::Coscheduling), 10);
        assert_eq!(secs(&a, GroupSource::Volcano), 10);
        assert_eq!(secs(&a, GroupSource::PodGroup), 300);
        assert_eq!(secs(&a, GroupSource::Kueue), 300);
        let a = decode_args(
            "a",
            json!({"permitWaitingTimeSeconds": 10,
                   "dialectTimeoutSeconds": {"workloadAPI": 120, "volcano": 30}}),
        )
        .unwrap();
        assert_eq!(secs(&a, GroupSource::PodGroup), 120);
        assert_eq!(secs(&a, GroupSource::Volcano), 30);
        assert_eq!(secs(&a, GroupSource::Coscheduling), 10);
        let a = decode_args("a", json!({"dialectTimeoutSeconds": {"kueue": 7}})).unwrap();
        assert_eq!(secs(&a, GroupSource::Kueue), 7);
        assert_eq!(secs(&a, GroupSource::PodGroup), 300);
        let e = decode_args("a", json!({"dialectTimeoutSeconds": {"kueue": 0}})).unwrap_err();
        assert_eq!(e.path, "a.dialectTimeoutSeconds.kueue");
        let e = decode_args("a", json!({"dialectTimeoutSeconds": {"slurm": 5}})).unwrap_err();
        assert!(e.path.starts_with("a.dialectTimeoutSeconds"), "{}", e.path);
    }

    #[test]
    fn topology_levels_are_validated() {
        let a = decode_args(
            "a",
            json!({"topologyLevels": ["cloud.provider.com/topology-block",
                                      "cloud.provider.com/topology-rack",
                                      "kubernetes.io/hostname"]}),
        )
        .unwrap();
        let levels: Vec<&str> = a.topology_levels.iter().map(|l| &**l).collect();
        assert_eq!(
            levels,
            [
                "cloud.provider.com/topology-block",
                "cloud.provider.com/topology-rack",
                "kubernetes.io/hostname"
            ]
        );
        assert!(GangArgs::default().topology_levels.is_empty());
        let seventeen: Vec<String> = (0..17).map(|i| format!("l{i}")).collect();
        for (levels, path, message) in [
            (json!([]), "a.topologyLevels", "must have at least 1 item"),
            (
                json!(seventeen),
                "a.topologyLevels",
                "must have at most 16 items, got 17",
            ),
            (
                json!(["block", "rack", "block"]),
                "a.topologyLevels[2]",
                "\"block\": must be unique",
            ),
            (
                json!(["block", "Rack_"]),
                "a.topologyLevels[1]",
                "\"Rack_\": name part must consist",
            ),
            (
                json!(["example.com/a/b"]),
                "a.topologyLevels[0]",
                "\"example.com/a/b\": a qualified name must consist",
            ),
        ] {
            let e = decode_args("a", json!({"topologyLevels": levels})).unwrap_err();
            assert_eq!(e.path, path, "{levels}");
            assert!(e.message.starts_with(message), "{levels}: {}", e.message);
        }
        let e = decode_args("a", json!({"topologyLevels": "rack"})).unwrap_err();
        assert!(e.path.starts_with("a"), "{}", e.path);
    }
}
