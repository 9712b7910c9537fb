//! The properties every fuzz target checks, shared so that each target is
//! one line: a parser never panics, and when it refuses its input the error
//! says something (a field, a reason), never nothing.

//!
//! The same functions replay the kept corpus (`tests/fuzz/regressions/`) in
//! `make test` (`tests/fuzz_regressions.rs` includes this file).

use muster::apiserver::selectors::{FieldSelector, LabelSelector};
use muster::config::SchedulerConfig;
use muster::dialects::{DEFINITION_SOURCES, KueueGroups};
use muster::model::{
    GroupPolicy, MAX_GROUP_COUNT, MAX_SCHEDULE_TIMEOUT, NodeInfo, PodInfo, Quantity,
};

/// A quantity: parsed values convert without panicking, or a reason.
pub fn quantity(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    match Quantity::parse(s) {
        Ok(q) => {
            let _ = (
                q.value(),
                q.milli_value(),
                q.checked_milli_value(),
                q.to_string(),
            );
        }
        Err(e) => assert!(!e.reason.is_empty()),
    }
}

/// Label and field selectors: parsed ones match without panicking, or a reason.
pub fn selector(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    match LabelSelector::parse(s) {
        Ok(sel) => {
            let _ = sel.matches(|k| (k.len() % 2 == 0).then_some("1"));
        }
        Err(e) => assert!(!e.is_empty()),
    }
    match FieldSelector::parse(s) {
        Ok(sel) => {
            let _ = sel.matches(|p| Some(p.to_string()));
        }
        Err(e) => assert!(!e.is_empty()),
    }
}

/// The scheduler configuration: loaded, or an error that says something.
pub fn config(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(e) = SchedulerConfig::from_yaml(s) {
        assert!(!e.to_string().is_empty());
    }
}

/// A refusal must carry a message longer than its fixed prefix.
pub fn precise(error: &str, prefix: &str) {
    assert!(
        error.starts_with(prefix) && error.len() > prefix.len(),
        "imprecise error {error:?} (expected {prefix:?}...)"
    );
}

/// Pod JSON: decoded with non-negative requests, or refused naming the pod
/// (or the JSON error); Kueue synthesis accepts whatever decoded.
pub fn pod(data: &[u8]) {
    match PodInfo::from_json(data) {
        Ok(p) => {
            let r = &p.requests;
            assert!(r.milli_cpu >= 0 && r.memory >= 0 && r.ephemeral_storage >= 0);
            assert!(r.scalar.values().all(|v| *v >= 0));
            assert!(p.non_zero_milli_cpu >= 0 && p.non_zero_memory >= 0);
            let _ = KueueGroups::default().observe(&p);
        }
        Err(e) => {
            let e = e.to_string();
            if !e.starts_with("pod JSON: ") {
                precise(&e, "pod ");
            }
        }
    }
    if let Err(e) = NodeInfo::from_json(data) {
        assert!(!e.to_string().is_empty());
    }
}

/// A group-definition object through every dialect's translator: policies
/// within bounds, or refused naming the definition.
pub fn group_definition(data: &[u8]) {
    let Ok(obj) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    for source in DEFINITION_SOURCES {
        match (source.translate)(&obj) {
            Ok(defs) => {
                for d in defs {
                    match &d.policy {
                        Ok(GroupPolicy::Gang {
                            min_count,
                            schedule_timeout,
                        }) => {
                            assert!((1..=MAX_GROUP_COUNT).contains(min_count));
                            assert!(schedule_timeout.is_none_or(|t| t <= MAX_SCHEDULE_TIMEOUT));
                        }
                        Ok(GroupPolicy::Basic) => {}
                        Err(e) => precise(e, d.key.source.kind_name()),
                    }
                    assert!(d.min_task_members.values().all(|n| *n <= MAX_GROUP_COUNT));
                }
            }
            Err(e) => assert!(!e.is_empty()),
        }
    }
}
