//! Writes to existing objects: update, patch (every type), delete with
//! finalizers, preconditions and pods' grace periods, deletecollection. Each decodes outside the
//! store lock and commits with a compare-and-swap on the resourceVersion.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::SimState;
use super::create::{check_type, create_checked, resolve_namespace};
use super::fields;
use super::kinds::after_delete;
use super::kubelet::Terminating;
use super::objects::{as_map, meta_mut, now, str_at};
use super::patch::{self, PatchType};
use super::registry::ResourceDef;
use super::request::{RETRIES, ResourceRequest, name_of, ns_key, parse_rv, selectors};
use super::response::{commit_error, list_body, object_response, with_warnings};
use super::status::{ApiError, ApiResult};
use super::store::{CommitError, Stored};
use super::{termination, validate, views};

/// The object a write produces from the stored one and the client's
/// version: system metadata is kept, and status vs. the rest is split the
/// way the main resource and `/status` split it on a real server.
fn merge_update(def: &ResourceDef, sub: Option<&str>, old: &Value, mut new: Value) -> Value {
    if sub == Some("status") {
        let mut out = old.clone();
        match new.get_mut("status").map(Value::take) {
            Some(status) => as_map(&mut out).insert("status".into(), status),
            None => as_map(&mut out).remove("status"),
        };
        return out;
    }
    let old_meta = old.get("metadata").cloned().unwrap_or_default();
    let meta = meta_mut(&mut new);
    for key in [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        match old_meta.get(key) {
            Some(v) => meta.insert(key.into(), v.clone()),
            None => meta.remove(key),
        };
    }
    let map = as_map(&mut new);
    map.insert("apiVersion".into(), json!(def.stored_api_version()));
    map.insert("kind".into(), json!(def.kind));
    if def.status {
        match old.get("status") {
            Some(s) => map.insert("status".into(), s.clone()),
            None => map.remove("status"),
        };
    }
    if old.get("spec") != new.get("spec") {
        let generation = old_meta
            .get("generation")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            + 1;
        meta_mut(&mut new).insert("generation".into(), json!(generation));
    }
    new
}

pub(super) fn update(state: &SimState, req: &ResourceRequest) -> ApiResult<Response> {
    let name = name_of(req)?;
    let def = &req.def;
    let mut body = req.json_body()?;
    if !body.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    check_type(def, &mut body)?;
    let warnings = fields::check(state, def, req.field_validation()?, &mut body)?;
    let mut body = views::to_storage(def, body);
    let meta = meta_mut(&mut body);
    if let Some(n) = meta.get("name").and_then(Value::as_str)
        && n != name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({name})"
        )));
    }
    resolve_namespace(def, req.namespace.as_deref(), meta)?;
    let expected = match meta.get("resourceVersion").and_then(Value::as_str) {
        Some(rv) if !rv.is_empty() => Some(parse_rv(rv)?),
        _ => None,
    };
    // Without a resourceVersion the update is unconditional: retry races.
    for _ in 0..RETRIES {
        let current = state
            .store
            .get(&def.key(), ns_key(req), name)
            .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?;
        // A stale resourceVersion is a conflict before the update is
        // validated, as kube-apiserver's store checks it first: a writer
        // that lost a race re-reads rather than being told its now-stale
        // object is invalid.
        if expected.is_some_and(|rv| rv != current.rv) {
            return Err(commit_error(def, name, CommitError::Conflict));
        }
        let old = current.value();
        let mut merged = merge_update(def, req.sub.as_deref(), &old, body.clone());
        validate::decode_quantities(state, def, &mut merged);
        validate::written(state, def, req.sub.as_deref(), name, &mut merged)?;
        validate::update(state, def, name, &old, &merged)?;
        match state
            .store
            .replace(&def.key(), Some(expected.unwrap_or(current.rv)), merged)
        {
            Ok(stored) => {
                let response = object_response(StatusCode::OK, def, &stored);
                return Ok(with_warnings(response, &warnings));
            }
            Err(CommitError::Conflict) if expected.is_none() => continue,
            Err(e) => return Err(commit_error(def, name, e)),
        }
    }
    Err(commit_error(def, name, CommitError::Conflict))
}

pub(super) fn patch(state: &SimState, req: &ResourceRequest) -> ApiResult<Response> {
    let name = name_of(req)?;
    let def = &req.def;
    let kind = PatchType::from_content_type(req.content_type())
        .ok_or_else(|| ApiError::unsupported_media_type(req.content_type()))?;
    let body: Value = if kind == PatchType::Apply {
        serde_norway::from_slice(&req.body)
            .map_err(|e| ApiError::bad_request(format!("invalid apply patch: {e}")))?
    } else {
        serde_json::from_slice(&req.body)
            .map_err(|e| ApiError::bad_request(format!("invalid patch body: {e}")))?
    };
    let mode = req.field_validation()?;
    for _ in 0..RETRIES {
        let Some(current) = state.store.get(&def.key(), ns_key(req), name) else {
            if kind == PatchType::Apply && req.sub.is_none() {
                let mut obj = body;
                meta_mut(&mut obj).insert("name".into(), json!(name));
                let (stored, warnings) =
                    create_checked(state, def, req.namespace.as_deref(), obj, mode)?;
                let response = object_response(StatusCode::CREATED, def, &stored);
                return Ok(with_warnings(response, &warnings));
            }
            return Err(ApiError::not_found(&def.group, &def.plural, name));
        };
        let old = current.value();
        let mut new = views::to_view(def, old.clone());
        patch::apply(kind, &mut new, body.clone())
            .map_err(|e| ApiError::invalid(&def.group, &def.kind, name, &e))?;
        let warnings = fields::check(state, def, mode, &mut new)?;
        let new = views::to_storage(def, new);
        if let Some(rv) = str_at(&new, "/metadata/resourceVersion")
            && rv != current.rv.to_string()
        {
            parse_rv(rv)?;
            return Err(commit_error(def, name, CommitError::Conflict));
        }
        let mut merged = merge_update(def, req.sub.as_deref(), &old, new);
        validate::decode_quantities(state, def, &mut merged);
        validate::written(state, def, req.sub.as_deref(), name, &mut merged)?;
        validate::update(state, def, name, &old, &merged)?;
        match state.store.replace(&def.key(), Some(current.rv), merged) {
            Ok(stored) => {
                let response = object_response(StatusCode::OK, def, &stored);
                return Ok(with_warnings(response, &warnings));
            }
            Err(CommitError::Conflict) => continue,
            Err(e) => return Err(commit_error(def, name, e)),
        }
    }
    Err(commit_error(def, name, CommitError::Conflict))
}

/// What a delete request asks for: preconditions and a grace period, from
/// the query string or the DeleteOptions body.
#[derive(Debug, Default, Clone)]
pub(super) struct DeleteOptions {
    pub rv: Option<u64>,
    pub uid: Option<String>,
    /// `gracePeriodSeconds`; pods only.
    pub grace: Option<i64>,
}

impl DeleteOptions {
    /// From a DeleteOptions object (a delete's body, an Eviction's
    /// `deleteOptions`) and the query's `gracePeriodSeconds`.
    pub fn read(opts: Option<&Value>, query_grace: Option<&str>) -> ApiResult<Self> {
        let rv = match opts.and_then(|o| str_at(o, "/preconditions/resourceVersion")) {
            Some(rv) => Some(parse_rv(rv)?),
            None => None,
        };
        let uid = opts
            .and_then(|o| str_at(o, "/preconditions/uid"))
            .map(str::to_string);
        let grace =
            termination::requested_grace(query_grace, opts).map_err(ApiError::bad_request)?;
        Ok(DeleteOptions { rv, uid, grace })
    }

    fn of_request(req: &ResourceRequest) -> ApiResult<Self> {
        let body = if req.body.is_empty() {
            None
        } else {
            Some(req.json_body()?)
        };
        Self::read(body.as_ref(), req.param("gracePeriodSeconds"))
    }
}

pub(super) fn delete(state: &SimState, req: &ResourceRequest) -> ApiResult<Response> {
    let name = name_of(req)?;
    let opts = DeleteOptions::of_request(req)?;
    let stored = delete_one(state, &req.def, ns_key(req), name, &opts)?;
    Ok(object_response(StatusCode::OK, &req.def, &stored))
}

fn is_pod(def: &ResourceDef) -> bool {
    def.group.is_empty() && def.plural == "pods"
}

/// Deletes one object. A pod on a node that has not finished is deleted
/// gracefully (`termination`): marked, and removed by the fake kubelet once
/// its grace has passed. Otherwise an object with finalizers is marked with
/// `deletionTimestamp` until they are removed, and any other is removed.
pub(super) fn delete_one(
    state: &SimState,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    opts: &DeleteOptions,
) -> ApiResult<Arc<Stored>> {
    let res = def.key();
    for _ in 0..RETRIES {
        let current = state
            .store
            .get(&res, ns, name)
            .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?;
        if opts.uid.as_deref().is_some_and(|u| u != current.uid)
            || opts.rv.is_some_and(|rv| rv != current.rv)
        {
            return Err(ApiError::conflict(
                &def.group,
                &def.plural,
                name,
                "the precondition on the object's uid or resourceVersion does not hold",
            ));
        }
        let mut obj = current.value();
        let deleting = obj.pointer("/metadata/deletionTimestamp").is_some();
        let grace = if is_pod(def) {
            termination::grace_seconds(&obj, opts.grace, state.max_termination_grace)
        } else {
            0
        };
        if grace > 0 {
            if deleting && !termination::shortens(&obj, grace) {
                return Ok(current);
            }
            let meta = meta_mut(&mut obj);
            meta.insert(
                "deletionTimestamp".into(),
                json!(termination::deletion_timestamp(grace)),
            );
            meta.insert("deletionGracePeriodSeconds".into(), json!(grace));
            match state.store.replace(&res, Some(current.rv), obj) {
                Ok(stored) => {
                    state.lifecycle.pod_terminating(Terminating {
                        namespace: stored.namespace.clone(),
                        name: stored.name.clone(),
                        uid: stored.uid.clone(),
                        grace: std::time::Duration::from_secs(grace.unsigned_abs()),
                    });
                    return Ok(stored);
                }
                Err(CommitError::Conflict) => continue,
                Err(e) => return Err(commit_error(def, name, e)),
            }
        }
        let has_finalizers = obj
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        let result = if has_finalizers {
            let already_now = obj
                .pointer("/metadata/deletionGracePeriodSeconds")
                .and_then(Value::as_i64)
                == Some(0);
            if deleting && already_now {
                return Ok(current);
            }
            let meta = meta_mut(&mut obj);
            if !deleting {
                meta.insert("deletionTimestamp".into(), json!(now()));
            }
            meta.insert("deletionGracePeriodSeconds".into(), json!(0));
            state.store.replace(&res, Some(current.rv), obj)
        } else {
            state.store.remove(&res, ns, name, Some(current.rv))
        };
        match result {
            Ok(stored) => {
                if !has_finalizers {
                    after_delete(state, def, &stored);
                }
                return Ok(stored);
            }
            Err(CommitError::Conflict) => continue,
            Err(e) => return Err(commit_error(def, name, e)),
        }
    }
    Err(commit_error(def, name, CommitError::Conflict))
}

pub(super) fn delete_collection(state: &SimState, req: &ResourceRequest) -> ApiResult<Response> {
    let (labels, fields) = selectors(req)?;
    let def = &req.def;
    let (victims, _, rv) =
        state
            .store
            .list(&def.key(), req.namespace.as_deref(), None, None, |o| {
                labels.matches(|k| o.label(k)) && fields.matches(|p| o.field(p))
            });
    let mut deleted = Vec::with_capacity(victims.len());
    for v in victims {
        let opts = DeleteOptions {
            grace: termination::requested_grace(req.param("gracePeriodSeconds"), None)
                .map_err(ApiError::bad_request)?,
            ..DeleteOptions::default()
        };
        match delete_one(state, def, &v.namespace, &v.name, &opts) {
            Ok(d) => deleted.push(d),
            // Deleted concurrently: nothing left to do for it.
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let head = json!({ "kind": format!("{}List", def.kind), "apiVersion": def.api_version(),
        "metadata": { "resourceVersion": rv.to_string() } });
    Ok(list_body(head, def, &deleted))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn main_resource_update_keeps_status_and_bumps_generation() {
        let def = ResourceDef {
            group: String::new(),
            version: "v1".into(),
            plural: "pods".into(),
            singular: "pod".into(),
            kind: "Pod".into(),
            namespaced: true,
            short_names: vec![],
            categories: vec![],
            status: true,
            binding: true,
            from_crd: false,
            view: None,
            storage_version: "v1".into(),
            schema: None,
        };
        let old = json!({"metadata": {"name": "p", "uid": "u", "generation": 1}, "spec": {"a": 1}, "status": {"phase": "Running"}});
        let new = json!({"metadata": {"name": "p", "uid": "x"}, "spec": {"a": 2}, "status": {"phase": "Failed"}});
        let out = merge_update(&def, None, &old, new.clone());
        assert_eq!(out["status"]["phase"], "Running");
        assert_eq!(out["metadata"]["uid"], "u");
        assert_eq!(out["metadata"]["generation"], 2);
        let out = merge_update(&def, Some("status"), &old, new);
        assert_eq!(out["status"]["phase"], "Failed");
        assert_eq!(out["spec"]["a"], 1);
    }
}
