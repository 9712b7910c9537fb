//! Verb dispatch for resource requests, and the reads (get, list with
//! selectors and pagination, watch). Requests are parsed in `request`,
//! responses built in `response`, writes live in `create`, `write` and
//! `binding`. Everything here is generic
//! over schemaless objects; per-kind behaviour lives in `kinds`.

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::SimState;
use super::request::{ResourceRequest, name_of, ns_key, parse_rv, selectors};
use super::response::{list_body, object_response, table_response, with_warnings};
use super::status::{ApiError, ApiResult};
use super::watch::{self, Start, WatchRequest};
use super::write::{delete, delete_collection, patch, update};
use super::{binding::bind, create::create_checked};

pub async fn handle(
    state: &Arc<SimState>,
    verb: &str,
    req: &ResourceRequest,
) -> ApiResult<Response> {
    match (verb, req.sub.as_deref()) {
        ("create", Some("binding")) => bind(state, req).await,
        ("create", Some("eviction")) => super::eviction::evict(state, req),
        ("get", _) => get(state, req),
        ("list", None) => list(state, req),
        ("watch", None) => watch(state, req),
        ("create", None) => {
            let body = req.json_body()?;
            let mode = req.field_validation()?;
            let (obj, warnings) =
                create_checked(state, &req.def, req.namespace.as_deref(), body, mode)?;
            let response = object_response(StatusCode::CREATED, &req.def, &obj);
            Ok(with_warnings(response, &warnings))
        }
        ("update", _) => update(state, req),
        ("patch", _) => patch(state, req),
        ("delete", None) => delete(state, req),
        ("deletecollection", None) => delete_collection(state, req),
        _ => Err(ApiError::method_not_allowed(format!(
            "{verb} is not supported on {}{}",
            req.def.plural,
            req.sub
                .as_ref()
                .map(|s| format!("/{s}"))
                .unwrap_or_default()
        ))),
    }
}

fn get(state: &SimState, req: &ResourceRequest) -> ApiResult<Response> {
    let name = name_of(req)?;
    let obj = state
        .store
        .get(&req.def.key(), ns_key(req), name)
        .ok_or_else(|| ApiError::not_found(&req.def.group, &req.def.plural, name))?;
    if let Some(include) = req.table() {
        let metadata = json!({ "resourceVersion": obj.rv.to_string() });
        return Ok(table_response(&req.def, metadata, &[obj], include));
    }
    Ok(object_response(StatusCode::OK, &req.def, &obj))
}

/// Continue tokens: hex of "rv/namespace/name" (opaque to clients).
fn encode_continue(rv: u64, ns: &str, name: &str) -> String {
    format!("{rv}/{ns}/{name}")
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn decode_continue(token: &str) -> ApiResult<(u64, String, String)> {
    let bad = || ApiError::bad_request(format!("invalid continue token {token:?}"));
    if !token.len().is_multiple_of(2) {
        return Err(bad());
    }
    let bytes: Vec<u8> = (0..token.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(token.get(i..i + 2).unwrap_or("zz"), 16))
        .collect::<Result<_, _>>()
        .map_err(|_| bad())?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    let mut parts = text.splitn(3, '/');
    let rv = parts.next().and_then(|r| r.parse().ok()).ok_or_else(bad)?;
    let ns = parts.next().ok_or_else(bad)?.to_string();
    let name = parts.next().ok_or_else(bad)?.to_string();
    Ok((rv, ns, name))
}

/// List: selectors, pagination. Continued pages report the version of the
/// first page, so a watch started from it replays everything after.
fn list(state: &SimState, req: &ResourceRequest) -> ApiResult<Response> {
    let (labels, fields) = selectors(req)?;
    let limit = match req.param("limit") {
        Some(l) => l
            .parse::<usize>()
            .map_err(|_| ApiError::bad_request(format!("invalid limit {l:?}")))?,
        None => 0,
    };
    if let Some(rv) = req.param("resourceVersion") {
        parse_rv(rv)?;
    }
    let (after, first_rv) = match req.param("continue") {
        Some(token) => {
            let (rv, ns, name) = decode_continue(token)?;
            (Some((ns, name)), Some(rv))
        }
        None => (None, None),
    };
    let (items, next, rv) = state.store.list(
        &req.def.key(),
        req.namespace.as_deref(),
        after.as_ref(),
        (limit > 0).then_some(limit),
        |o| labels.matches(|k| o.label(k)) && fields.matches(|p| o.field(p)),
    );
    let rv = first_rv.unwrap_or(rv);
    let mut metadata = json!({ "resourceVersion": rv.to_string() });
    if let Some((ns, name)) = next {
        metadata["continue"] = json!(encode_continue(rv, &ns, &name));
    }
    if let Some(include) = req.table() {
        return Ok(table_response(&req.def, metadata, &items, include));
    }
    let head = json!({ "kind": format!("{}List", req.def.kind), "apiVersion": req.def.api_version(), "metadata": metadata });
    Ok(list_body(head, &req.def, &items))
}

fn watch(state: &SimState, req: &ResourceRequest) -> ApiResult<Response> {
    let (labels, fields) = selectors(req)?;
    let initial_events = req.param("sendInitialEvents") == Some("true");
    let start = match req.param("resourceVersion") {
        _ if initial_events => Start::Current { end_bookmark: true },
        None | Some("0") => Start::Current {
            end_bookmark: false,
        },
        Some(rv) => Start::After(parse_rv(rv)?),
    };
    let timeout = match req.param("timeoutSeconds") {
        Some(t) => Some(Duration::from_secs(t.parse().map_err(|_| {
            ApiError::bad_request(format!("invalid timeoutSeconds {t:?}"))
        })?)),
        None => None,
    };
    let close_after = match (timeout, state.faults.watch_close_every()) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let request = WatchRequest {
        def: req.def.clone(),
        resource: req.def.key(),
        namespace: req.namespace.clone(),
        labels,
        fields,
        start,
        bookmarks: req.param("allowWatchBookmarks") == Some("true"),
        close_after,
        table: req.table(),
    };
    let faults = watch::WatchFaults {
        faults: state.faults.clone(),
        group: req.def.group.clone(),
        plural: req.def.plural.clone(),
        user_agent: req.user_agent().to_string(),
    };
    let body = watch::serve(
        state.store.clone(),
        request,
        faults,
        state.bookmark_every,
        state.shutdown.clone(),
    );
    Ok(([("content-type", "application/json")], body).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip() {
        let t = encode_continue(42, "ns", "pod-1");
        assert_eq!(
            decode_continue(&t).unwrap(),
            (42, "ns".into(), "pod-1".into())
        );
        assert!(decode_continue("zz").is_err());
        assert!(decode_continue("abc").is_err());
    }
}
