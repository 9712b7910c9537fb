//! `POST pods/{name}/eviction` (`policy/v1` Eviction, what `kubectl drain`
//! sends): a delete that respects PodDisruptionBudgets, with the API
//! server's checks, status codes and messages.
//!
//! * A pod that cannot disrupt anything (finished, pending, already
//!   terminating) or that no budget selects is deleted.
//! * More than one budget selecting the pod: 500.
//! * One budget: a not-ready pod is deleted without spending the budget when
//!   the budget is met (`IfHealthyBudget`, the default) or always
//!   (`AlwaysAllow`); otherwise a budget not yet synced to its generation or
//!   allowing no disruption refuses with 429, and an allowed eviction
//!   decrements `disruptionsAllowed`, records the pod in `disruptedPods`
//!   and then deletes it with the Eviction's `deleteOptions`.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::SimState;
use super::disruption::{self, PDBS};
use super::objects::{now, str_at};
use super::request::{RETRIES, ResourceRequest, name_of, ns_key};
use super::status::{ApiError, ApiResult, Cause};
use super::store::{CommitError, Stored};
use super::write::{DeleteOptions, delete_one};

/// Most entries `disruptedPods` may hold before evictions are refused
/// (upstream's `MaxDisruptedPodSize`).
const MAX_DISRUPTED_PODS: usize = 2000;

/// Upstream's 429 message for an eviction the budget does not allow.
pub const VIOLATION: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

pub(super) fn evict(state: &Arc<SimState>, req: &ResourceRequest) -> ApiResult<Response> {
    let name = name_of(req)?;
    let ns = ns_key(req);
    let eviction = req.json_body()?;
    if let Some(body_name) = str_at(&eviction, "/metadata/name")
        && body_name != name
    {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let opts = DeleteOptions::read(eviction.get("deleteOptions"), None)?;
    let pod = state
        .store
        .get(disruption::PODS, ns, name)
        .ok_or_else(|| ApiError::not_found("", "pods", name))?
        .value();
    if !ignores_budgets(&pod) {
        check_budgets(state, ns, name, &pod)?;
    }
    delete_one(state, &req.def, ns, name, &opts)?;
    let ok = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201});
    Ok((
        StatusCode::CREATED,
        [("content-type", "application/json")],
        ok.to_string(),
    )
        .into_response())
}

/// Pods whose deletion disrupts nothing a budget counts: finished, not yet
/// running, or already going.
fn ignores_budgets(pod: &Value) -> bool {
    matches!(
        str_at(pod, "/status/phase"),
        Some("Succeeded" | "Failed" | "Pending")
    ) || pod
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
}

/// Admits the eviction against the pod's budget, spending one disruption
/// (retrying if the budget changes meanwhile), or refuses it.
fn check_budgets(state: &SimState, ns: &str, name: &str, pod: &Value) -> ApiResult<()> {
    let res: Arc<str> = Arc::from(PDBS);
    for _ in 0..RETRIES {
        let budget = match budget_of(state, ns, pod)? {
            Some(b) => b,
            None => return Ok(()),
        };
        let mut pdb = budget.value();
        if !disruption::is_ready(pod) && unhealthy_may_go(&pdb) {
            return Ok(());
        }
        spend(&mut pdb, &budget.name, name)?;
        match state.store.replace(&res, Some(budget.rv), pdb) {
            Ok(_) => return Ok(()),
            Err(CommitError::Conflict) => continue,
            Err(e) => return Err(ApiError::internal(format!("{e:?}"))),
        }
    }
    Err(ApiError::conflict(
        "policy",
        "poddisruptionbudgets",
        name,
        "the budget kept changing; try again",
    ))
}

/// The one budget selecting the pod, if any; more than one is an error.
fn budget_of(state: &SimState, ns: &str, pod: &Value) -> ApiResult<Option<Arc<Stored>>> {
    let labels = disruption::labels(pod);
    let (pdbs, _, _) = state.store.list(PDBS, Some(ns), None, None, |_| true);
    let mut matching = pdbs.into_iter().filter(|p| {
        // A budget whose selector cannot be read selects nothing.
        matches!(disruption::selector(&p.value()), Ok(Some(s)) if s.matches(&labels))
    });
    let first = matching.next();
    if matching.next().is_some() {
        return Err(ApiError::internal(
            "Internal error occurred: This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        ));
    }
    Ok(first)
}

/// A not-ready pod counts for nothing, so evicting it spends nothing: under
/// `AlwaysAllow` ever, under `IfHealthyBudget` (the default) while the budget
/// is met.
fn unhealthy_may_go(pdb: &Value) -> bool {
    let n = |k: &str| {
        pdb.pointer(&format!("/status/{k}"))
            .and_then(Value::as_i64)
            .unwrap_or(0)
    };
    match str_at(pdb, "/spec/unhealthyPodEvictionPolicy") {
        Some("AlwaysAllow") => true,
        _ => n("desiredHealthy") > 0 && n("currentHealthy") >= n("desiredHealthy"),
    }
}

/// Takes one disruption from the budget's status for pod `pod`, or refuses.
fn spend(pdb: &mut Value, budget: &str, pod: &str) -> ApiResult<()> {
    let status_n = |pdb: &Value, k: &str| {
        pdb.pointer(&format!("/status/{k}"))
            .and_then(Value::as_i64)
            .unwrap_or(0)
    };
    let generation = pdb
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if status_n(pdb, "observedGeneration") < generation {
        return Err(too_many_requests(format!(
            "The disruption budget {budget} is still being processed by the server."
        )));
    }
    let allowed = status_n(pdb, "disruptionsAllowed");
    if allowed < 0 {
        return Err(forbidden("pdb disruptions allowed is negative"));
    }
    let disrupted = pdb
        .pointer("/status/disruptedPods")
        .and_then(Value::as_object)
        .map_or(0, |m| m.len());
    if disrupted >= MAX_DISRUPTED_PODS {
        return Err(forbidden(
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        ));
    }
    if allowed == 0 {
        return Err(too_many_requests(format!(
            "The disruption budget {budget} needs {} healthy pods and has {} currently",
            status_n(pdb, "desiredHealthy"),
            status_n(pdb, "currentHealthy"),
        )));
    }
    let Some(status) = pdb.get_mut("status").and_then(Value::as_object_mut) else {
        return Err(ApiError::internal("the budget has no status"));
    };
    status.insert("disruptionsAllowed".into(), json!(allowed - 1));
    if allowed == 1 {
        let observed = status
            .get("observedGeneration")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let c = json!({"type": disruption::CONDITION, "status": "False",
            "reason": "InsufficientPods", "message": "", "observedGeneration": observed,
            "lastTransitionTime": now()});
        let list = status.entry("conditions").or_insert_with(|| json!([]));
        if let Some(list) = list.as_array_mut() {
            list.retain(|x| x["type"] != disruption::CONDITION);
            list.push(c);
        }
    }
    let map = status.entry("disruptedPods").or_insert_with(|| json!({}));
    if let Some(map) = map.as_object_mut() {
        map.insert(pod.to_string(), json!(now()));
    }
    Ok(())
}

/// 429 with upstream's message and a `DisruptionBudget` cause.
fn too_many_requests(cause: String) -> ApiError {
    let mut e = ApiError {
        code: 429,
        reason: "TooManyRequests",
        message: VIOLATION.to_string(),
        details: None,
    }
    .with_details("", "", "");
    if let Some(d) = e.details.as_mut() {
        d.causes.push(Cause {
            reason: "DisruptionBudget",
            field: String::new(),
            message: cause,
        });
    }
    e
}

fn forbidden(message: &str) -> ApiError {
    ApiError {
        code: 403,
        reason: "Forbidden",
        message: message.to_string(),
        details: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(allowed: i64, generation: i64, observed: i64) -> Value {
        json!({"metadata": {"name": "b", "generation": generation},
               "status": {"disruptionsAllowed": allowed, "observedGeneration": observed,
                          "desiredHealthy": 2, "currentHealthy": 2 + allowed}})
    }

    #[test]
    fn spending_decrements_and_records_the_pod() {
        let mut b = budget(2, 1, 1);
        spend(&mut b, "b", "web-0").unwrap();
        assert_eq!(b["status"]["disruptionsAllowed"], 1);
        assert!(b["status"]["disruptedPods"]["web-0"].is_string());
        assert!(b["status"].get("conditions").is_none());
        spend(&mut b, "b", "web-1").unwrap();
        assert_eq!(b["status"]["disruptionsAllowed"], 0);
        assert_eq!(b["status"]["conditions"][0]["reason"], "InsufficientPods");
        let e = spend(&mut b, "b", "web-2").unwrap_err();
        assert_eq!(
            (e.code, e.reason, e.message.as_str()),
            (429, "TooManyRequests", VIOLATION)
        );
        let cause = &e.details.unwrap().causes[0];
        assert_eq!(cause.reason, "DisruptionBudget");
        assert_eq!(
            cause.message,
            "The disruption budget b needs 2 healthy pods and has 4 currently"
        );
    }

    #[test]
    fn unsynced_negative_and_full_budgets_refuse() {
        let e = spend(&mut budget(1, 2, 1), "b", "p").unwrap_err();
        assert_eq!(e.code, 429);
        assert_eq!(
            e.details.unwrap().causes[0].message,
            "The disruption budget b is still being processed by the server."
        );
        assert_eq!(
            spend(&mut budget(-1, 1, 1), "b", "p").unwrap_err().code,
            403
        );
        let mut full = budget(1, 1, 1);
        let many: serde_json::Map<String, Value> = (0..MAX_DISRUPTED_PODS)
            .map(|i| (format!("p{i}"), json!(now())))
            .collect();
        full["status"]["disruptedPods"] = Value::Object(many);
        assert_eq!(spend(&mut full, "b", "p").unwrap_err().code, 403);
    }

    #[test]
    fn which_pods_skip_the_budget() {
        for phase in ["Succeeded", "Failed", "Pending"] {
            assert!(ignores_budgets(&json!({"status": {"phase": phase}})));
        }
        assert!(!ignores_budgets(&json!({"status": {"phase": "Running"}})));
        assert!(ignores_budgets(
            &json!({"metadata": {"deletionTimestamp": "x"},
                                        "status": {"phase": "Running"}})
        ));
        // Unhealthy pods: the default policy needs the budget met.
        let met = json!({"status": {"desiredHealthy": 2, "currentHealthy": 2}});
        let short = json!({"status": {"desiredHealthy": 2, "currentHealthy": 1}});
        assert!(unhealthy_may_go(&met));
        assert!(!unhealthy_may_go(&short));
        let always = json!({"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"},
                            "status": {"desiredHealthy": 2, "currentHealthy": 1}});
        assert!(unhealthy_may_go(&always));
    }
}
