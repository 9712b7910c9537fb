//! PodDisruptionBudget status, as kube-controller-manager's disruption
//! controller computes it: which pods a budget selects, how many of them are
//! healthy, how many must be, and so how many more may be disrupted. One task
//! recomputes the budgets of a namespace whenever one of its pods or budgets
//! changes, and every few seconds (evictions the API server admitted expire
//! from `disruptedPods` after two minutes).
//!
//! The figures follow upstream: `minAvailable` as an integer expects the
//! selected pods; a percentage, or any `maxUnavailable`, expects the scale of
//! the pods' controllers (ReplicaSet, or the Deployment owning it,
//! StatefulSet, ReplicationController) and a pod without one fails the sync
//! (`DisruptionAllowed` False, reason `SyncFailed`, nothing allowed).
//! Percentages round up.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio_util::sync::CancellationToken;

use super::objects::{now, str_at};
use super::store::{Store, Stored};
use muster_core::model::LabelSelector;
use muster_core::model::wire::LabelSelectorWire;

pub(super) const PDBS: &str = "policy/v1/poddisruptionbudgets";
pub(super) const PODS: &str = "/v1/pods";
const REPLICA_SETS: &str = "apps/v1/replicasets";
const DEPLOYMENTS: &str = "apps/v1/deployments";
const STATEFUL_SETS: &str = "apps/v1/statefulsets";
const CONTROLLERS: &str = "/v1/replicationcontrollers";

/// How long an admitted eviction stays in `disruptedPods` without the pod
/// being seen deleted (upstream's `DeletionTimeout`).
pub(super) const DELETION_TIMEOUT: chrono::TimeDelta = chrono::TimeDelta::minutes(2);
/// How often every budget is looked at again (expiring `disruptedPods`).
const RESYNC: Duration = Duration::from_secs(5);
/// The `DisruptionAllowed` condition.
pub(super) const CONDITION: &str = "DisruptionAllowed";

pub fn spawn(store: Arc<Store>, shutdown: CancellationToken) {
    tokio::spawn(run(store, shutdown));
}

async fn run(store: Arc<Store>, shutdown: CancellationToken) {
    let mut events = store.subscribe_all();
    let mut resync = tokio::time::interval(RESYNC);
    loop {
        let mut dirty = BTreeSet::new();
        let mut everything = false;
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = resync.tick() => everything = true,
            ev = events.recv() => match ev {
                Ok(ev) => note(&ev, &mut dirty),
                Err(RecvError::Lagged(_)) => everything = true,
                Err(RecvError::Closed) => return,
            },
        }
        // Whatever else is already queued is folded into this pass.
        loop {
            match events.try_recv() {
                Ok(ev) => note(&ev, &mut dirty),
                Err(TryRecvError::Lagged(_)) => everything = true,
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Closed) => return,
            }
        }
        if everything {
            let (pdbs, _, _) = store.list(PDBS, None, None, None, |_| true);
            dirty.extend(pdbs.iter().map(|p| p.namespace.clone()));
        }
        for ns in dirty {
            sync_namespace(&store, &ns);
        }
    }
}

/// The namespace an event may change budgets in.
fn note(ev: &super::store::Event, dirty: &mut BTreeSet<String>) {
    if [
        PDBS,
        PODS,
        REPLICA_SETS,
        DEPLOYMENTS,
        STATEFUL_SETS,
        CONTROLLERS,
    ]
    .contains(&&*ev.resource)
    {
        dirty.insert(ev.obj.namespace.clone());
    }
}

/// Recomputes every budget of `ns`, writing those whose status changed (a
/// write that loses a race is redone on the event of the write that won).
pub(super) fn sync_namespace(store: &Store, ns: &str) {
    let (pdbs, _, _) = store.list(PDBS, Some(ns), None, None, |_| true);
    if pdbs.is_empty() {
        return;
    }
    let (pods, _, _) = store.list(PODS, Some(ns), None, None, |_| true);
    let pods: Vec<Value> = pods.iter().map(|p| p.value()).collect();
    let res: Arc<str> = Arc::from(PDBS);
    let now = chrono::Utc::now();
    for stored in pdbs {
        let pdb = stored.value();
        let status = compute(
            &pdb,
            &pods,
            |selected| expected_scale(store, ns, selected),
            now,
        );
        if pdb.get("status") == Some(&status) {
            continue;
        }
        let mut updated = pdb;
        if let Some(map) = updated.as_object_mut() {
            map.insert("status".into(), status);
        }
        let _ = store.replace(&res, Some(stored.rv), updated);
    }
}

/// The budget's selector: `None` when nil (selects nothing); an empty one
/// selects every pod of the namespace (policy/v1).
pub(super) fn selector(pdb: &Value) -> Result<Option<LabelSelector>, String> {
    let Some(sel) = pdb.pointer("/spec/selector").filter(|s| !s.is_null()) else {
        return Ok(None);
    };
    let wire: LabelSelectorWire =
        serde_json::from_value(sel.clone()).map_err(|e| format!("spec.selector: {e}"))?;
    LabelSelector::from_wire(Some(&wire))
        .map(Some)
        .map_err(|e| e.to_string())
}

pub(super) fn labels(obj: &Value) -> BTreeMap<String, String> {
    obj.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether a pod has condition `Ready` True.
pub(super) fn is_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

fn terminating(pod: &Value) -> bool {
    pod.pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
}

fn clamp_i32(v: i64) -> i64 {
    v.clamp(0, i64::from(i32::MAX))
}

/// An int-or-percent against `total`, percentages rounded up (upstream's
/// `GetScaledValueFromIntOrPercent(.., true)`).
pub(super) fn scaled(v: &Value, total: i64) -> Result<i64, String> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .map(clamp_i32)
            .ok_or_else(|| format!("invalid value for IntOrString: {n}")),
        Value::String(s) => {
            let pct = s
                .strip_suffix('%')
                .and_then(|p| p.parse::<i64>().ok())
                .filter(|p| (0..=i64::from(i32::MAX)).contains(p))
                .ok_or_else(|| {
                    format!("invalid value for IntOrString: invalid type: string is not a percentage: {s:?}")
                })?;
            let product = pct.saturating_mul(clamp_i32(total));
            Ok(clamp_i32(product.saturating_add(99) / 100))
        }
        other => Err(format!("invalid value for IntOrString: {other}")),
    }
}

/// The status a budget gets, given the pods of its namespace. `scale`
/// finds the expected pod count from the selected pods' controllers.
pub(super) fn compute(
    pdb: &Value,
    ns_pods: &[Value],
    scale: impl Fn(&[&Value]) -> Result<i64, String>,
    now: chrono::DateTime<chrono::Utc>,
) -> Value {
    match figures(pdb, ns_pods, scale, now) {
        Ok(f) => f.status(pdb),
        Err(e) => fail_safe(pdb, &e),
    }
}

/// The numbers a sync finds.
#[derive(Debug, PartialEq, Eq)]
struct Figures {
    expected: i64,
    desired: i64,
    healthy: i64,
    disrupted: Map<String, Value>,
}

fn figures(
    pdb: &Value,
    ns_pods: &[Value],
    scale: impl Fn(&[&Value]) -> Result<i64, String>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Figures, String> {
    let selected: Vec<&Value> = match selector(pdb)? {
        Some(sel) => ns_pods.iter().filter(|p| sel.matches(&labels(p))).collect(),
        None => Vec::new(),
    };
    let spec = pdb.get("spec").cloned().unwrap_or_default();
    let (expected, desired) = match (spec.get("maxUnavailable"), spec.get("minAvailable")) {
        (Some(max), _) if !max.is_null() => {
            let expected = scale(&selected)?;
            let unavailable = scaled(max, expected)?;
            (expected, expected.saturating_sub(unavailable).max(0))
        }
        (_, Some(min @ Value::Number(_))) => (selected.len() as i64, scaled(min, 0)?),
        (_, Some(min)) if !min.is_null() => {
            let expected = scale(&selected)?;
            (expected, scaled(min, expected)?)
        }
        _ => (0, 0),
    };
    let disrupted = still_disrupted(pdb, &selected, now);
    let healthy = selected
        .iter()
        .filter(|p| !terminating(p) && is_ready(p))
        .filter(|p| !str_at(p, "/metadata/name").is_some_and(|n| disrupted.contains_key(n)))
        .count() as i64;
    Ok(Figures {
        expected: clamp_i32(expected),
        desired: clamp_i32(desired),
        healthy: clamp_i32(healthy),
        disrupted,
    })
}

/// The `disruptedPods` entries kept: the pod still selected, not yet seen
/// terminating, and its eviction younger than the timeout.
fn still_disrupted(
    pdb: &Value,
    selected: &[&Value],
    now: chrono::DateTime<chrono::Utc>,
) -> Map<String, Value> {
    let Some(old) = pdb
        .pointer("/status/disruptedPods")
        .and_then(Value::as_object)
    else {
        return Map::new();
    };
    let live: HashSet<&str> = selected
        .iter()
        .filter(|p| !terminating(p))
        .filter_map(|p| str_at(p, "/metadata/name"))
        .collect();
    old.iter()
        .filter(|(name, _)| live.contains(name.as_str()))
        .filter(|(_, at)| {
            at.as_str()
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .is_some_and(|t| t.to_utc() + DELETION_TIMEOUT > now)
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

impl Figures {
    fn allowed(&self) -> i64 {
        let spare = self.healthy - self.desired;
        if self.expected <= 0 || spare <= 0 {
            0
        } else {
            spare
        }
    }

    fn status(&self, pdb: &Value) -> Value {
        let generation = pdb
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let allowed = self.allowed();
        let reason = if allowed > 0 {
            "SufficientPods"
        } else {
            "InsufficientPods"
        };
        let mut status = json!({
            "observedGeneration": generation,
            "disruptionsAllowed": allowed,
            "currentHealthy": self.healthy,
            "desiredHealthy": self.desired,
            "expectedPods": self.expected,
            "conditions": [condition(pdb, allowed > 0, reason, "", generation)],
        });
        if !self.disrupted.is_empty() {
            status["disruptedPods"] = Value::Object(self.disrupted.clone());
        }
        status
    }
}

/// A sync that failed: nothing may be disrupted, the rest of the status is
/// kept as it was, and the condition says why.
fn fail_safe(pdb: &Value, error: &str) -> Value {
    let mut status = pdb.get("status").cloned().unwrap_or_else(|| json!({}));
    let generation = status
        .get("observedGeneration")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let c = condition(pdb, false, "SyncFailed", error, generation);
    if let Some(map) = status.as_object_mut() {
        map.insert("disruptionsAllowed".into(), json!(0));
        map.insert("conditions".into(), json!([c]));
    }
    status
}

/// The `DisruptionAllowed` condition, keeping its transition time while its
/// status stays the same.
pub(super) fn condition(
    pdb: &Value,
    allowed: bool,
    reason: &str,
    message: &str,
    generation: i64,
) -> Value {
    let status = if allowed { "True" } else { "False" };
    let previous = pdb
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == CONDITION));
    let since = previous
        .filter(|c| c["status"] == status)
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| json!(now()));
    json!({"type": CONDITION, "status": status, "reason": reason, "message": message,
           "observedGeneration": generation, "lastTransitionTime": since})
}

/// The expected pod count: the summed scale of the selected pods'
/// controllers, each counted once. A pod without a controller this finds
/// fails the sync, as upstream.
fn expected_scale(store: &Store, ns: &str, pods: &[&Value]) -> Result<i64, String> {
    let mut seen = HashSet::new();
    let mut total: i64 = 0;
    for pod in pods {
        let name = str_at(pod, "/metadata/name").unwrap_or_default();
        let owner = controller_ref(pod)
            .ok_or_else(|| format!("found no controller ref for pod {name:?}"))?;
        let uid = str_at(owner, "/uid").unwrap_or_default();
        if !seen.insert(uid.to_string()) {
            continue;
        }
        let replicas = controller_scale(store, ns, owner)
            .ok_or_else(|| format!("found no controllers for pod {name:?}"))?;
        total = total.saturating_add(replicas);
    }
    Ok(total)
}

fn controller_ref(obj: &Value) -> Option<&Value> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|r| r.get("controller") == Some(&Value::Bool(true)))
}

/// `spec.replicas` of the controller `owner` names, if it exists with that
/// UID; a ReplicaSet owned by a Deployment answers with the Deployment's.
fn controller_scale(store: &Store, ns: &str, owner: &Value) -> Option<i64> {
    let lookup = |res: &str, owner: &Value| -> Option<Arc<Stored>> {
        let found = store.get(res, ns, str_at(owner, "/name")?)?;
        (Some(found.uid.as_str()) == str_at(owner, "/uid")).then_some(found)
    };
    let replicas = |obj: &Value| {
        clamp_i32(
            obj.pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1),
        )
    };
    let group = str_at(owner, "/apiVersion").unwrap_or_default();
    match (group, str_at(owner, "/kind")?) {
        ("apps/v1", "ReplicaSet") => {
            let rs = lookup(REPLICA_SETS, owner)?.value();
            match controller_ref(&rs).filter(|r| r["kind"] == "Deployment") {
                Some(d) => Some(replicas(&lookup(DEPLOYMENTS, d)?.value())),
                None => Some(replicas(&rs)),
            }
        }
        ("apps/v1", "StatefulSet") => Some(replicas(&lookup(STATEFUL_SETS, owner)?.value())),
        ("v1", "ReplicationController") => Some(replicas(&lookup(CONTROLLERS, owner)?.value())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, ready: bool) -> Value {
        json!({"metadata": {"name": name, "labels": {"app": "web"}},
               "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
    }

    fn pdb(spec: Value) -> Value {
        json!({"metadata": {"name": "b", "generation": 3}, "spec": spec})
    }

    fn at(t: &str) -> chrono::DateTime<chrono::Utc> {
        chrono::DateTime::parse_from_rfc3339(t).unwrap().to_utc()
    }

    const NOW: &str = "2026-01-01T00:10:00Z";

    fn figures_of(spec: Value, pods: &[Value], scale: i64) -> (i64, i64, i64, i64) {
        let status = compute(&pdb(spec), pods, |_| Ok(scale), at(NOW));
        let n = |k: &str| status[k].as_i64().unwrap();
        (
            n("expectedPods"),
            n("desiredHealthy"),
            n("currentHealthy"),
            n("disruptionsAllowed"),
        )
    }

    #[test]
    fn figures_for_every_kind_of_budget() {
        let sel = json!({"matchLabels": {"app": "web"}});
        let pods = [
            pod("a", true),
            pod("b", true),
            pod("c", true),
            pod("d", false),
        ];
        // (spec, controllers' scale, (expected, desired, healthy, allowed))
        let cases = [
            (json!({"selector": sel, "minAvailable": 2}), 9, (4, 2, 3, 1)),
            (json!({"selector": sel, "minAvailable": 3}), 9, (4, 3, 3, 0)),
            (json!({"selector": sel, "minAvailable": 5}), 9, (4, 5, 3, 0)),
            // 50% of 4 = 2; 30% of 4 = 1.2, rounded up to 2.
            (
                json!({"selector": sel, "minAvailable": "50%"}),
                4,
                (4, 2, 3, 1),
            ),
            (
                json!({"selector": sel, "minAvailable": "30%"}),
                4,
                (4, 2, 3, 1),
            ),
            (
                json!({"selector": sel, "maxUnavailable": 1}),
                4,
                (4, 3, 3, 0),
            ),
            (
                json!({"selector": sel, "maxUnavailable": 2}),
                4,
                (4, 2, 3, 1),
            ),
            // 25% of 5 = 1.25 → 2 unavailable; desired 3.
            (
                json!({"selector": sel, "maxUnavailable": "25%"}),
                5,
                (5, 3, 3, 0),
            ),
            (
                json!({"selector": sel, "maxUnavailable": "100%"}),
                4,
                (4, 0, 3, 3),
            ),
            // An empty selector selects every pod of the namespace; a nil
            // one none (and nothing expected allows nothing).
            (json!({"selector": {}, "minAvailable": 1}), 0, (4, 1, 3, 2)),
            (json!({"minAvailable": 0}), 0, (0, 0, 0, 0)),
        ];
        for (spec, scale, want) in cases {
            assert_eq!(figures_of(spec.clone(), &pods, scale), want, "{spec}");
        }
    }

    #[test]
    fn terminating_and_disrupted_pods_are_not_healthy() {
        let mut gone = pod("a", true);
        gone["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:09:00Z");
        let pods = [gone, pod("b", true), pod("c", true)];
        let mut b = pdb(json!({"selector": {"matchLabels": {"app": "web"}}, "minAvailable": 1}));
        b["status"] = json!({"disruptedPods": {
            "a": "2026-01-01T00:09:30Z",     // seen terminating: dropped
            "b": "2026-01-01T00:09:30Z",     // admitted, pending: kept, not healthy
            "c": "2026-01-01T00:07:00Z",     // older than two minutes: dropped
            "zz": "2026-01-01T00:09:30Z"}}); // no such pod: dropped
        let status = compute(&b, &pods, |_| Ok(0), at(NOW));
        assert_eq!(
            status["disruptedPods"],
            json!({"b": "2026-01-01T00:09:30Z"})
        );
        assert_eq!(status["currentHealthy"], 1);
        assert_eq!(status["disruptionsAllowed"], 0);
        assert_eq!(status["observedGeneration"], 3);
        assert_eq!(status["conditions"][0]["reason"], "InsufficientPods");
    }

    #[test]
    fn a_failed_sync_allows_nothing_and_says_why() {
        let mut b = pdb(json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1}));
        b["status"] =
            json!({"disruptionsAllowed": 2, "currentHealthy": 3, "observedGeneration": 2});
        let status = compute(
            &b,
            &[pod("a", true)],
            |_| Err("found no controller ref for pod \"a\"".into()),
            at(NOW),
        );
        assert_eq!(status["disruptionsAllowed"], 0);
        assert_eq!(status["currentHealthy"], 3);
        let c = &status["conditions"][0];
        assert_eq!(
            (
                c["type"].as_str(),
                c["status"].as_str(),
                c["reason"].as_str()
            ),
            (Some(CONDITION), Some("False"), Some("SyncFailed"))
        );
        assert_eq!(c["message"], "found no controller ref for pod \"a\"");
        // An unreadable percentage fails the same way.
        let bad = pdb(json!({"selector": {}, "minAvailable": "half"}));
        let status = compute(&bad, &[], |_| Ok(1), at(NOW));
        assert_eq!(status["conditions"][0]["reason"], "SyncFailed");
    }

    #[test]
    fn the_condition_keeps_its_transition_time() {
        let mut b = pdb(json!({"selector": {}, "minAvailable": 0}));
        b["status"] = json!({"conditions": [{"type": CONDITION, "status": "True",
            "lastTransitionTime": "2020-01-01T00:00:00Z"}]});
        let kept = condition(&b, true, "SufficientPods", "", 1);
        assert_eq!(kept["lastTransitionTime"], "2020-01-01T00:00:00Z");
        let flipped = condition(&b, false, "InsufficientPods", "", 1);
        assert_ne!(flipped["lastTransitionTime"], "2020-01-01T00:00:00Z");
    }

    #[test]
    fn percentages_round_up_and_are_bounded() {
        assert_eq!(scaled(&json!("10%"), 5), Ok(1));
        assert_eq!(scaled(&json!("0%"), 5), Ok(0));
        assert_eq!(scaled(&json!("100%"), i64::MAX), Ok(i64::from(i32::MAX)));
        assert_eq!(scaled(&json!(-3), 5), Ok(0));
        assert!(scaled(&json!("3"), 5).is_err());
        assert!(scaled(&json!("-5%"), 5).is_err());
    }
}
