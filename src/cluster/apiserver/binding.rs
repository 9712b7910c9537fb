//! Pod binding: the only way a scheduler assigns a pod to a node.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};

use super::SimState;
use super::kubelet::Bound;
use super::objects::{as_map, child_mut, condition, meta_mut, set_condition, str_at};
use super::request::{RETRIES, ResourceRequest, ns_key};
use super::response::commit_error;
use super::status::{ApiError, ApiResult};
use super::store::CommitError;

/// `POST pods/{name}/binding` or `POST namespaces/{ns}/bindings`: assigns
/// the pod to a node. 409 if already assigned; 404 if the pod or the node
/// does not exist (a real server accepts a missing node).
pub async fn bind(state: &Arc<SimState>, req: &ResourceRequest) -> ApiResult<Response> {
    let binding = req.json_body()?;
    let name = match (&req.name, str_at(&binding, "/metadata/name")) {
        (Some(path), Some(body)) if path != body => {
            return Err(ApiError::bad_request(format!(
                "the name of the binding ({body}) does not match the pod name ({path})"
            )));
        }
        (Some(path), _) => path.clone(),
        (None, Some(body)) => body.to_string(),
        (None, None) => {
            return Err(ApiError::bad_request(
                "the binding needs metadata.name (the pod)",
            ));
        }
    };
    let node = str_at(&binding, "/target/name")
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ApiError::invalid("", "Binding", &name, "target.name: Required value"))?
        .to_string();
    let ns = ns_key(req).to_string();
    if state.store.get("/v1/nodes", "", &node).is_none() {
        return Err(ApiError::not_found("", "nodes", &node));
    }
    let res = req.def.key();
    let annotations = binding
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .cloned();
    for _ in 0..RETRIES {
        let pod = state
            .store
            .get(&res, &ns, &name)
            .ok_or_else(|| ApiError::not_found("", "pods", &name))?;
        let mut obj = pod.value();
        if let Some(existing) = str_at(&obj, "/spec/nodeName").filter(|n| !n.is_empty()) {
            return Err(ApiError::conflict(
                "",
                "pods/binding",
                &name,
                &format!("pod {name} is already assigned to node \"{existing}\""),
            ));
        }
        if obj.pointer("/metadata/deletionTimestamp").is_some() {
            return Err(ApiError::conflict(
                "",
                "pods/binding",
                &name,
                &format!("pod {name} is being deleted, cannot be assigned to a host"),
            ));
        }
        child_mut(as_map(&mut obj), "spec").insert("nodeName".into(), json!(node));
        if let Some(extra) = &annotations {
            child_mut(meta_mut(&mut obj), "annotations").extend(extra.clone());
        }
        set_condition(
            child_mut(as_map(&mut obj), "status"),
            condition("PodScheduled", true, None),
        );
        match state.store.replace(&res, Some(pod.rv), obj) {
            Ok(stored) => {
                state.lifecycle.pod_bound(Bound {
                    namespace: ns,
                    name,
                    uid: stored.uid.clone(),
                });
                let ok = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201});
                return Ok((
                    StatusCode::CREATED,
                    [("content-type", "application/json")],
                    Bytes::from(ok.to_string()),
                )
                    .into_response());
            }
            Err(CommitError::Conflict) => continue,
            Err(e) => return Err(commit_error(&req.def, &name, e)),
        }
    }
    Err(commit_error(&req.def, &name, CommitError::Conflict))
}
