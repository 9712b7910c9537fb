//! The verbs: get, list, watch, create, update, patch, delete,
//! deletecollection and pod binding, for any resource in the table. Per-kind
//! behaviour a real server has (pod defaults, node status, namespaces,
//! CRD registration) lives in the `on_create` hooks; everything else is
//! generic over schemaless objects.

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Value, json};

use super::SimState;
use super::http::ResourceRequest;
use super::lifecycle::{Bound, fill_node_status};
use super::objects::{
    as_map, child_mut, condition, meta_mut, name_suffix, new_uid, now, set_condition, str_at,
};
use super::patch::{self, PatchType};
use super::registry::{ResourceDef, defs_from_crd};
use super::selectors::{FieldSelector, LabelSelector};
use super::status::{ApiError, ApiResult};
use super::store::{CommitError, Stored};
use super::views;
use super::watch::{self, Start, WatchRequest};

/// How often a write that lost a race with another writer is retried.
const RETRIES: usize = 16;

pub async fn handle(
    state: &Arc<SimState>,
    verb: &str,
    req: &ResourceRequest,
) -> ApiResult<Response> {
    match (verb, req.sub.as_deref()) {
        ("create", Some("binding")) => bind(state, req).await,
        ("get", _) => get(state, req),
        ("list", None) => list(state, req),
        ("watch", None) => watch(state, req),
        ("create", None) => {
            let body = req.json_body()?;
            let obj = create_object(state, &req.def, req.namespace.as_deref(), body)?;
            Ok(object_response(StatusCode::CREATED, &req.def, &obj))
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

fn object_response(code: StatusCode, def: &ResourceDef, obj: &Stored) -> Response {
    let body = views::render(def, obj);
    (code, [("content-type", "application/json")], body).into_response()
}

fn commit_error(def: &ResourceDef, name: &str, e: CommitError) -> ApiError {
    match e {
        CommitError::NotFound => ApiError::not_found(&def.group, &def.plural, name),
        CommitError::AlreadyExists => ApiError::already_exists(&def.group, &def.plural, name),
        CommitError::Conflict => ApiError::conflict(
            &def.group,
            &def.plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        ),
        CommitError::Encode(e) => ApiError::internal(e),
    }
}

fn ns_key(req: &ResourceRequest) -> &str {
    req.namespace.as_deref().unwrap_or("")
}

fn name_of(req: &ResourceRequest) -> ApiResult<&str> {
    req.name
        .as_deref()
        .ok_or_else(|| ApiError::bad_request("a resource name is required"))
}

fn get(state: &SimState, req: &ResourceRequest) -> ApiResult<Response> {
    let name = name_of(req)?;
    let obj = state
        .store
        .get(&req.def.key(), ns_key(req), name)
        .ok_or_else(|| ApiError::not_found(&req.def.group, &req.def.plural, name))?;
    Ok(object_response(StatusCode::OK, &req.def, &obj))
}

/// Selectors from the query string; a malformed one is a 400.
fn selectors(req: &ResourceRequest) -> ApiResult<(LabelSelector, FieldSelector)> {
    let labels = LabelSelector::parse(req.param("labelSelector").unwrap_or(""))
        .map_err(|e| ApiError::bad_request(format!("unable to parse labelSelector: {e}")))?;
    let fields = views::field_selector(&req.def, req.param("fieldSelector").unwrap_or(""));
    let fields = FieldSelector::parse(&fields)
        .map_err(|e| ApiError::bad_request(format!("unable to parse fieldSelector: {e}")))?;
    Ok((labels, fields))
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

fn parse_rv(s: &str) -> ApiResult<u64> {
    s.parse().map_err(|_| {
        ApiError::bad_request(format!("invalid resourceVersion {s:?}: must be an integer"))
    })
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
    let head = json!({ "kind": format!("{}List", req.def.kind), "apiVersion": req.def.api_version(), "metadata": metadata });
    Ok(list_body(head, &req.def, &items))
}

/// Writes `{..head.., "items": [obj, obj, ...]}` by concatenating each
/// object's stored bytes: no per-object serialization.
fn list_body(head: Value, def: &ResourceDef, items: &[Arc<Stored>]) -> Response {
    let head = head.to_string();
    let items: Vec<Bytes> = items.iter().map(|o| views::render(def, o)).collect();
    let total: usize = items.iter().map(|o| o.len() + 1).sum();
    let mut out = BytesMut::with_capacity(head.len() + total + 16);
    out.put_slice(&head.as_bytes()[..head.len() - 1]);
    out.put_slice(b",\"items\":[");
    for (i, o) in items.iter().enumerate() {
        if i > 0 {
            out.put_u8(b',');
        }
        out.put_slice(o);
    }
    out.put_slice(b"]}");
    ([("content-type", "application/json")], out.freeze()).into_response()
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
    };
    let body = watch::serve(
        state.store.clone(),
        request,
        state.bookmark_every,
        state.shutdown.clone(),
    );
    Ok(([("content-type", "application/json")], body).into_response())
}

/// Creates an object as a real server would: validates identity, fills
/// system metadata, applies per-kind defaults, then stores it.
pub fn create_object(
    state: &SimState,
    def: &ResourceDef,
    path_ns: Option<&str>,
    mut obj: Value,
) -> ApiResult<Arc<Stored>> {
    if !obj.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    check_type(def, &mut obj)?;
    let mut obj = views::to_storage(def, obj);
    let meta = meta_mut(&mut obj);
    if meta
        .get("resourceVersion")
        .is_some_and(|v| !v.is_null() && v != "")
    {
        return Err(ApiError::bad_request(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    let namespace = resolve_namespace(def, path_ns, meta)?;
    let generate = meta
        .get("generateName")
        .and_then(Value::as_str)
        .map(str::to_string);
    let given = meta
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(str::to_string);
    let name = match (given, &generate) {
        (Some(n), _) => n,
        (None, Some(prefix)) => format!("{prefix}{}", name_suffix()),
        (None, None) => {
            return Err(ApiError::invalid(
                &def.group,
                &def.kind,
                "",
                "metadata.name: Required value: name or generateName is required",
            ));
        }
    };
    validate_name(def, &name)?;
    meta.insert("name".into(), json!(name));
    meta.insert("uid".into(), json!(new_uid()));
    meta.insert("creationTimestamp".into(), json!(now()));
    meta.insert("generation".into(), json!(1));
    meta.remove("resourceVersion");
    meta.remove("deletionTimestamp");
    meta.remove("deletionGracePeriodSeconds");
    meta.remove("managedFields");
    if let Some(ns) = &namespace
        && state.store.get("/v1/namespaces", "", ns).is_none()
    {
        return Err(ApiError::not_found("", "namespaces", ns));
    }
    let bound = on_create(state, def, &mut obj)?;
    let mut attempts = 0;
    let stored = loop {
        match state.store.create(&def.key(), obj.clone()) {
            Err(CommitError::AlreadyExists) if generate.is_some() && attempts < 5 => {
                attempts += 1;
                let prefix = generate.as_deref().unwrap_or_default();
                meta_mut(&mut obj)
                    .insert("name".into(), json!(format!("{prefix}{}", name_suffix())));
            }
            other => break other.map_err(|e| commit_error(def, &name, e))?,
        }
    };
    after_create(state, def, &stored, bound);
    Ok(stored)
}

/// The body's kind and apiVersion must match the URL (filled in if absent).
fn check_type(def: &ResourceDef, obj: &mut Value) -> ApiResult<()> {
    let map = as_map(obj);
    let expected_av = def.api_version();
    match map.get("apiVersion").and_then(Value::as_str) {
        Some(av) if av != expected_av => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({expected_av})"
            )));
        }
        _ => map.insert("apiVersion".into(), json!(expected_av)),
    };
    match map.get("kind").and_then(Value::as_str) {
        Some(k) if k != def.kind => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                def.kind
            )));
        }
        _ => map.insert("kind".into(), json!(def.kind)),
    };
    Ok(())
}

fn resolve_namespace(
    def: &ResourceDef,
    path_ns: Option<&str>,
    meta: &mut serde_json::Map<String, Value>,
) -> ApiResult<Option<String>> {
    if !def.namespaced {
        meta.remove("namespace");
        return Ok(None);
    }
    let body_ns = meta
        .get("namespace")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty());
    let ns = match (path_ns, body_ns) {
        (Some(p), Some(b)) if p != b => {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        (Some(p), _) => p.to_string(),
        (None, Some(b)) => b.to_string(),
        (None, None) => {
            return Err(ApiError::bad_request(
                "a namespace is required to create this resource",
            ));
        }
    };
    meta.insert("namespace".into(), json!(ns));
    Ok(Some(ns))
}

fn validate_name(def: &ResourceDef, name: &str) -> ApiResult<()> {
    let ok = name.len() <= 253
        && name.chars().all(|c| {
            c.is_ascii_lowercase()
                || c.is_ascii_digit()
                || c == '-'
                || c == '.'
                || (c == ':' && def.group.starts_with("rbac"))
        })
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .last()
            .is_some_and(|c| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(ApiError::invalid(
            &def.group,
            &def.kind,
            name,
            &format!(
                "metadata.name: Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
            ),
        ))
    }
}

/// Per-kind defaults at creation. Returns the node a pod was created on.
fn on_create(state: &SimState, def: &ResourceDef, obj: &mut Value) -> ApiResult<Option<String>> {
    // Status is written through /status only, except where a kubelet-like
    // creator sets it (nodes).
    let is_node = def.group.is_empty() && def.plural == "nodes";
    if def.status && !is_node {
        as_map(obj).remove("status");
    }
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "pods") => return default_pod(state, obj),
        ("", "nodes") => fill_node_status(obj, &state.lifecycle.addresses.next_node_ip()),
        ("", "namespaces") => {
            child_mut(as_map(obj), "status").insert("phase".into(), json!("Active"));
        }
        ("apiextensions.k8s.io", "customresourcedefinitions") => accept_crd(obj)?,
        _ => {}
    }
    Ok(None)
}

fn default_pod(state: &SimState, pod: &mut Value) -> ApiResult<Option<String>> {
    let name = str_at(pod, "/metadata/name")
        .unwrap_or_default()
        .to_string();
    let spec = child_mut(as_map(pod), "spec");
    spec.entry("schedulerName")
        .or_insert_with(|| json!("default-scheduler"));
    spec.entry("restartPolicy")
        .or_insert_with(|| json!("Always"));
    spec.entry("terminationGracePeriodSeconds")
        .or_insert_with(|| json!(30));
    spec.entry("dnsPolicy")
        .or_insert_with(|| json!("ClusterFirst"));
    // Priority admission: resolve priorityClassName into spec.priority.
    if let Some(class) = spec
        .get("priorityClassName")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
    {
        let value = state
            .store
            .get("scheduling.k8s.io/v1/priorityclasses", "", class)
            .and_then(|pc| pc.value().get("value").and_then(Value::as_i64))
            .or(match class {
                "system-node-critical" => Some(2_000_001_000),
                "system-cluster-critical" => Some(2_000_000_000),
                _ => None,
            })
            .ok_or_else(|| ApiError {
                code: 403,
                reason: "Forbidden",
                message: format!(
                    "pods \"{name}\" is forbidden: no PriorityClass with name {class} was found"
                ),
                details: None,
            })?;
        spec.insert("priority".into(), json!(value));
    } else {
        spec.entry("priority").or_insert_with(|| json!(0));
    }
    let node = spec
        .get("nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(str::to_string);
    let status = child_mut(as_map(pod), "status");
    status.insert("phase".into(), json!("Pending"));
    status.insert("qosClass".into(), json!("BestEffort"));
    if node.is_some() {
        set_condition(status, condition("PodScheduled", true, None));
    }
    Ok(node)
}

fn accept_crd(crd: &mut Value) -> ApiResult<()> {
    let name = str_at(crd, "/metadata/name")
        .unwrap_or_default()
        .to_string();
    let defs = defs_from_crd(crd).map_err(|e| {
        ApiError::invalid(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            &name,
            &e,
        )
    })?;
    let expected = format!("{}.{}", defs[0].plural, defs[0].group);
    if name != expected {
        return Err(ApiError::invalid(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            &name,
            &format!(
                "metadata.name: Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group ({expected})"
            ),
        ));
    }
    let names = crd.pointer("/spec/names").cloned().unwrap_or_default();
    let versions: Vec<Value> = defs.iter().map(|d| json!(d.version)).collect();
    let status = child_mut(as_map(crd), "status");
    status.insert("acceptedNames".into(), names);
    status.insert("storedVersions".into(), json!(versions));
    let ok = |kind: &str, reason: &str| {
        let mut c = condition(kind, true, Some(reason));
        if let Some(m) = c.as_object_mut() {
            m.remove("lastProbeTime");
        }
        c
    };
    set_condition(status, ok("NamesAccepted", "NoConflicts"));
    set_condition(status, ok("Established", "InitialNamesAccepted"));
    Ok(())
}

fn after_create(state: &SimState, def: &ResourceDef, obj: &Stored, bound: Option<String>) {
    if bound.is_some() {
        state.lifecycle.pod_bound(Bound {
            namespace: obj.namespace.clone(),
            name: obj.name.clone(),
            uid: obj.uid.clone(),
        });
    }
    if def.group == "apiextensions.k8s.io"
        && def.plural == "customresourcedefinitions"
        && let Ok(defs) = defs_from_crd(&obj.value())
    {
        for added in state.registry.register_crd(defs) {
            tracing::info!(group = %added.group, version = %added.version, plural = %added.plural, "CRD resource registered");
        }
    }
}

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

fn update(state: &SimState, req: &ResourceRequest) -> ApiResult<Response> {
    let name = name_of(req)?;
    let def = &req.def;
    let mut body = req.json_body()?;
    if !body.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    check_type(def, &mut body)?;
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
        let merged = merge_update(def, req.sub.as_deref(), &current.value(), body.clone());
        match state
            .store
            .replace(&def.key(), Some(expected.unwrap_or(current.rv)), merged)
        {
            Ok(stored) => return Ok(object_response(StatusCode::OK, def, &stored)),
            Err(CommitError::Conflict) if expected.is_none() => continue,
            Err(e) => return Err(commit_error(def, name, e)),
        }
    }
    Err(commit_error(def, name, CommitError::Conflict))
}

fn patch(state: &SimState, req: &ResourceRequest) -> ApiResult<Response> {
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
    for _ in 0..RETRIES {
        let Some(current) = state.store.get(&def.key(), ns_key(req), name) else {
            if kind == PatchType::Apply && req.sub.is_none() {
                let mut obj = body;
                meta_mut(&mut obj).insert("name".into(), json!(name));
                let stored = create_object(state, def, req.namespace.as_deref(), obj)?;
                return Ok(object_response(StatusCode::CREATED, def, &stored));
            }
            return Err(ApiError::not_found(&def.group, &def.plural, name));
        };
        let old = current.value();
        let mut new = views::to_view(def, old.clone());
        patch::apply(kind, &mut new, body.clone())
            .map_err(|e| ApiError::invalid(&def.group, &def.kind, name, &e))?;
        let new = views::to_storage(def, new);
        if let Some(rv) = str_at(&new, "/metadata/resourceVersion")
            && rv != current.rv.to_string()
        {
            parse_rv(rv)?;
            return Err(commit_error(def, name, CommitError::Conflict));
        }
        let merged = merge_update(def, req.sub.as_deref(), &old, new);
        match state.store.replace(&def.key(), Some(current.rv), merged) {
            Ok(stored) => return Ok(object_response(StatusCode::OK, def, &stored)),
            Err(CommitError::Conflict) => continue,
            Err(e) => return Err(commit_error(def, name, e)),
        }
    }
    Err(commit_error(def, name, CommitError::Conflict))
}

/// Preconditions from an optional DeleteOptions body.
fn delete_preconditions(req: &ResourceRequest) -> ApiResult<(Option<u64>, Option<String>)> {
    if req.body.is_empty() {
        return Ok((None, None));
    }
    let opts = req.json_body()?;
    let rv = match str_at(&opts, "/preconditions/resourceVersion") {
        Some(rv) => Some(parse_rv(rv)?),
        None => None,
    };
    Ok((rv, str_at(&opts, "/preconditions/uid").map(str::to_string)))
}

fn delete(state: &SimState, req: &ResourceRequest) -> ApiResult<Response> {
    let name = name_of(req)?;
    let (rv, uid) = delete_preconditions(req)?;
    let stored = delete_one(state, &req.def, ns_key(req), name, rv, uid.as_deref())?;
    Ok(object_response(StatusCode::OK, &req.def, &stored))
}

/// Deletes one object: marks it with `deletionTimestamp` while finalizers
/// remain, removes it otherwise. Grace periods are not simulated.
fn delete_one(
    state: &SimState,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    precondition_rv: Option<u64>,
    precondition_uid: Option<&str>,
) -> ApiResult<Arc<Stored>> {
    let res = def.key();
    for _ in 0..RETRIES {
        let current = state
            .store
            .get(&res, ns, name)
            .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?;
        if precondition_uid.is_some_and(|u| u != current.uid)
            || precondition_rv.is_some_and(|rv| rv != current.rv)
        {
            return Err(ApiError::conflict(
                &def.group,
                &def.plural,
                name,
                "the precondition on the object's uid or resourceVersion does not hold",
            ));
        }
        let mut obj = current.value();
        let has_finalizers = obj
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        let result = if has_finalizers {
            if obj.pointer("/metadata/deletionTimestamp").is_some() {
                return Ok(current);
            }
            let meta = meta_mut(&mut obj);
            meta.insert("deletionTimestamp".into(), json!(now()));
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

/// Cascades a real server performs asynchronously, done at once here.
fn after_delete(state: &SimState, def: &ResourceDef, obj: &Stored) {
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "namespaces") => state.store.drop_namespace(&obj.name),
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            let crd = obj.value();
            let (Some(group), Some(plural)) = (
                str_at(&crd, "/spec/group"),
                str_at(&crd, "/spec/names/plural"),
            ) else {
                return;
            };
            for gone in state.registry.unregister_crd(group, plural) {
                tracing::info!(group = %gone.group, version = %gone.version, plural = %gone.plural, "CRD resource unregistered");
                state.store.drop_resource(&gone.key());
            }
        }
        _ => {}
    }
}

fn delete_collection(state: &SimState, req: &ResourceRequest) -> ApiResult<Response> {
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
        match delete_one(state, def, &v.namespace, &v.name, None, None) {
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
