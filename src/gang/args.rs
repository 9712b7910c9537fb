//! `GangSchedulingArgs`: the gang plugin's per-profile settings, decoded and
//! validated from its `pluginConfig` entry (also accepted under the name
//! scheduler-plugins users know, `Coscheduling`, with its field names).

use std::time::Duration;

use crate::dialects::owners::{TopOwnerGrouping, decode_grouping};
use crate::framework::args::{self, ConfigError};
use crate::model::MAX_SCHEDULE_TIMEOUT;

/// The gang plugin's name in profiles.
pub const NAME: &str = "GangScheduling";
/// The name scheduler-plugins users know it by.
pub const ALIAS: &str = "Coscheduling";

/// Per-profile arguments (`GangScheduling`/`Coscheduling` pluginConfig).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GangArgs {
    /// `permitWaitingTimeSeconds`: the timeout when the definition sets none.
    pub permit_waiting_time: Duration,
    /// How long a gang is denied after a member was unschedulable.
    pub group_backoff: Duration,
    /// `topOwnerGrouping`: group pods by their top owner (`dialects::owners`).
    pub top_owner: TopOwnerGrouping,
}

impl Default for GangArgs {
    fn default() -> Self {
        GangArgs {
            permit_waiting_time: Duration::from_secs(60),
            group_backoff: Duration::from_secs(5),
            top_owner: TopOwnerGrouping::default(),
        }
    }
}

/// The args as written, with scheduler-plugins' `CoschedulingArgs` field names.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WireArgs {
    #[allow(dead_code)]
    api_version: Option<String>,
    #[allow(dead_code)]
    kind: Option<String>,
    permit_waiting_time_seconds: Option<i64>,
    pod_group_backoff_seconds: Option<i64>,
    top_owner_grouping: Option<serde_json::Value>,
}

/// Decodes and validates the gang plugin's args at `path`:
/// `permitWaitingTimeSeconds` positive, `podGroupBackoffSeconds` not
/// negative, and neither above [`MAX_SCHEDULE_TIMEOUT`] (the longest wait a
/// group may ask for; a configuration asking more is refused, not capped).
pub fn decode_args(path: &str, value: serde_json::Value) -> Result<GangArgs, ConfigError> {
    let raw: WireArgs = args::decode(path, value)?;
    let d = GangArgs::default();
    let permit_waiting_time = match raw.permit_waiting_time_seconds {
        None => d.permit_waiting_time,
        Some(s) if s > 0 && s.unsigned_abs() <= MAX_SCHEDULE_TIMEOUT.as_secs() => {
            Duration::from_secs(s.unsigned_abs())
        }
        Some(s) => {
            return Err(ConfigError::at(
                format!("{path}.permitWaitingTimeSeconds"),
                format!(
                    "must be between 1 and {} (24 hours), got {s}",
                    MAX_SCHEDULE_TIMEOUT.as_secs()
                ),
            ));
        }
    };
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
    Ok(GangArgs {
        permit_waiting_time,
        group_backoff,
        top_owner,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
