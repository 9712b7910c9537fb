//! Graceful pod deletion, as the API server's pod strategy decides it: how
//! long a deleted pod keeps running before it is removed. A pod on a node
//! that has not finished gets `deletionTimestamp` (when it will be gone) and
//! `deletionGracePeriodSeconds`, and stays until the fake kubelet
//! (`kubelet`) removes it once the grace has passed; an unscheduled or
//! finished pod, or a grace of 0, goes at once.

use std::time::Duration;

use serde_json::Value;

use super::objects::str_at;

/// What `terminationGracePeriodSeconds` defaults to on a real server.
pub const DEFAULT_GRACE_SECONDS: i64 = 30;

/// The grace a delete gives `pod`: the request's `gracePeriodSeconds`, else
/// the pod's `spec.terminationGracePeriodSeconds`, else 30; 0 for a pod not
/// on a node or already finished; a negative request counts as 1 (as
/// upstream); at most `cap` (the `--max-termination-grace` of load tests).
pub fn grace_seconds(pod: &Value, requested: Option<i64>, cap: Option<Duration>) -> i64 {
    let mut period = requested
        .or_else(|| {
            pod.pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
        })
        .unwrap_or(DEFAULT_GRACE_SECONDS);
    let unscheduled = str_at(pod, "/spec/nodeName").is_none_or(str::is_empty);
    let finished = matches!(str_at(pod, "/status/phase"), Some("Succeeded" | "Failed"));
    if unscheduled || finished {
        period = 0;
    }
    if period < 0 {
        period = 1;
    }
    match cap {
        Some(cap) => period.min(i64::try_from(cap.as_secs()).unwrap_or(i64::MAX)),
        None => period,
    }
}

/// What a delete does to a pod already being deleted gracefully: only a
/// shorter grace changes anything (upstream never lengthens one).
pub fn shortens(pod: &Value, grace: i64) -> bool {
    let current = pod
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64);
    current.is_none_or(|c| grace < c)
}

/// `deletionTimestamp` for a grace starting now: when the pod will be gone.
pub fn deletion_timestamp(grace: i64) -> String {
    let at = chrono::Utc::now() + chrono::Duration::seconds(grace.clamp(0, 365 * 24 * 3600));
    at.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `gracePeriodSeconds` from the query string or the DeleteOptions body.
pub fn requested_grace(
    query: Option<&str>,
    options: Option<&Value>,
) -> Result<Option<i64>, String> {
    if let Some(q) = query {
        return q
            .parse::<i64>()
            .map(Some)
            .map_err(|_| format!("invalid gracePeriodSeconds {q:?}"));
    }
    Ok(options
        .and_then(|o| o.get("gracePeriodSeconds"))
        .and_then(Value::as_i64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn grace_follows_the_pod_strategy() {
        let bound = json!({"spec": {"nodeName": "n", "terminationGracePeriodSeconds": 5},
                           "status": {"phase": "Running"}});
        let cases: &[(&Value, Option<i64>, Option<u64>, i64)] = &[
            // The request wins over the pod's value.
            (&bound, None, None, 5),
            (&bound, Some(2), None, 2),
            (&bound, Some(0), None, 0),
            (&bound, Some(-4), None, 1),
            (&bound, None, Some(1), 1),
            (&bound, Some(100), Some(3), 3),
        ];
        for (pod, requested, cap, want) in cases {
            let cap = cap.map(Duration::from_secs);
            assert_eq!(
                grace_seconds(pod, *requested, cap),
                *want,
                "{requested:?} {cap:?}"
            );
        }
        let defaulted = json!({"spec": {"nodeName": "n"}, "status": {"phase": "Running"}});
        assert_eq!(grace_seconds(&defaulted, None, None), 30);
        // Unscheduled or finished pods go at once, whatever was asked.
        let pending = json!({"spec": {"terminationGracePeriodSeconds": 5}});
        assert_eq!(grace_seconds(&pending, Some(10), None), 0);
        for phase in ["Succeeded", "Failed"] {
            let done = json!({"spec": {"nodeName": "n"}, "status": {"phase": phase}});
            assert_eq!(grace_seconds(&done, None, None), 0);
        }
    }

    #[test]
    fn a_graceful_deletion_is_only_ever_shortened() {
        let deleting = json!({"metadata": {"deletionGracePeriodSeconds": 10}});
        assert!(shortens(&deleting, 3));
        assert!(!shortens(&deleting, 10));
        assert!(!shortens(&deleting, 30));
        assert!(shortens(&json!({"metadata": {}}), 30));
    }

    #[test]
    fn requested_grace_from_query_or_body() {
        assert_eq!(requested_grace(Some("3"), None), Ok(Some(3)));
        assert!(requested_grace(Some("x"), None).is_err());
        let body = json!({"gracePeriodSeconds": 0});
        assert_eq!(requested_grace(None, Some(&body)), Ok(Some(0)));
        assert_eq!(requested_grace(None, None), Ok(None));
    }
}
