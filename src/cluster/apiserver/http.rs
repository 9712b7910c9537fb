//! The HTTP front: one axum fallback route that reads the Kubernetes URL
//! layout (`/api/v1/...`, `/apis/<group>/<version>/...`, namespaced or not,
//! with subresources), serves discovery and `/version`, applies injected
//! faults, and hands resource requests to [`super::handlers`].

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::SimState;
use super::fault::Target;
use super::registry::verbs;
use super::request::{self, ResourceRequest};
use super::response::json_response;
use super::status::{ApiError, ApiResult};
use super::{authn, binding, handlers, openapi, rbac};

pub fn router(state: Arc<SimState>) -> Router {
    Router::new().fallback(dispatch).with_state(state)
}

async fn dispatch(
    State(state): State<Arc<SimState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().trim_end_matches('/');
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let query: HashMap<String, String> =
        form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
            .into_owned()
            .collect();
    tracing::debug!(%method, %uri, "request");
    let result = match segs.as_slice() {
        ["version"] => Ok(json_response(version())),
        ["healthz" | "readyz" | "livez"] => Ok("ok".into_response()),
        ["api"] => Ok(json_response(core_versions(&state))),
        ["apis"] => Ok(json_response(group_list(&state))),
        ["apis", group] => group_info(&state, group).map(json_response),
        ["api", "v1"] => resource_list(&state, "", "v1").map(json_response),
        ["apis", group, version] => resource_list(&state, group, version).map(json_response),
        ["openapi", "v3"] => Ok(json_response(openapi::index(&state.registry))),
        ["openapi", "v3", "api", version] => openapi_doc(&state, "", version, path),
        ["openapi", "v3", "apis", group, version] => openapi_doc(&state, group, version, path),
        ["apis", "authentication.k8s.io", "v1", "tokenreviews"] => {
            authn::serve_token_review(&state, &method, &headers, &body).await
        }
        ["apis", "authorization.k8s.io", "v1", "subjectaccessreviews"] => {
            rbac::serve_subject_access_review(&state, &method, &headers, &body).await
        }
        [
            "apis",
            "authorization.k8s.io",
            "v1",
            "selfsubjectaccessreviews",
        ] => rbac::serve_self_subject_access_review(&state, &method, &headers, &body).await,
        ["api", "v1", rest @ ..] => {
            resource(&state, &method, "", "v1", rest, query, headers, body).await
        }
        ["apis", group, version, rest @ ..] => {
            resource(&state, &method, group, version, rest, query, headers, body).await
        }
        _ => Err(ApiError::path_not_found(path)),
    };
    result.unwrap_or_else(IntoResponse::into_response)
}

#[allow(clippy::too_many_arguments)]
async fn resource(
    state: &Arc<SimState>,
    method: &Method,
    group: &str,
    version: &str,
    rest: &[&str],
    query: HashMap<String, String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let reg = &state.registry;
    let not_found = || ApiError::path_not_found(&rest.join("/"));
    // `namespaces/{ns}/bindings` is a core endpoint with no resource of its own.
    if group.is_empty()
        && let ["namespaces", ns, "bindings"] = rest
    {
        if *method != Method::POST {
            return Err(ApiError::method_not_allowed(
                "bindings only supports create",
            ));
        }
        let req = ResourceRequest {
            def: reg.lookup("", "v1", "pods").ok_or_else(not_found)?,
            namespace: Some(ns.to_string()),
            name: None,
            sub: Some("binding".into()),
            query,
            headers,
            body,
        };
        if let Some(r) = &state.recorder {
            r.record(&req.headers, "create", "", "bindings", None, Some(ns));
        }
        let asked = rbac::Asked {
            verb: "create",
            group: "",
            resource: "bindings",
            subresource: None,
            namespace: Some(ns),
            name: None,
        };
        rbac::authorize_request(state, &req.headers, &asked)?;
        let ua = request::user_agent(&req.headers);
        state
            .faults
            .before(Target::new("create", "", "bindings", ua))
            .await?;
        return binding::bind(state, &req).await;
    }
    let (namespace, plural, name, sub) = match rest {
        ["namespaces", ns, plural, tail @ ..]
            if reg.is_namespaced_plural(group, version, plural) =>
        {
            (Some(ns.to_string()), *plural, tail.first(), tail.get(1))
        }
        [plural, tail @ ..] => (None, *plural, tail.first(), tail.get(1)),
        [] => return Err(not_found()),
    };
    if rest.len() > 5 || (namespace.is_none() && rest.len() > 3) {
        return Err(not_found());
    }
    let def = reg.lookup(group, version, plural).ok_or_else(not_found)?;
    // A named cluster-scoped object under a namespace path, or the reverse.
    if namespace.is_some() != def.namespaced && name.is_some() {
        return Err(not_found());
    }
    let sub = sub.map(|s| s.to_string());
    match sub.as_deref() {
        None => {}
        Some("status") if def.status => {}
        Some("binding") if def.binding => {}
        Some("eviction") if def.binding => {}
        Some(_) => return Err(not_found()),
    }
    let req = ResourceRequest {
        def,
        namespace,
        name: name.map(|n| n.to_string()),
        sub,
        query,
        headers,
        body,
    };
    let verb = req.verb(method);
    // Refuse rather than silently apply a write the client meant to try out.
    if req.param("dryRun").is_some() && !matches!(verb, "get" | "list" | "watch") {
        return Err(ApiError::bad_request(
            "dryRun is not supported by the simulated cluster",
        ));
    }
    let fault_target = match &req.sub {
        Some(s) => format!("{plural}/{s}"),
        None => plural.to_string(),
    };
    if let Some(r) = &state.recorder {
        r.record(
            &req.headers,
            verb,
            group,
            plural,
            req.sub.as_deref(),
            req.namespace.as_deref(),
        );
    }
    let asked = rbac::Asked {
        verb,
        group,
        resource: plural,
        subresource: req.sub.as_deref(),
        namespace: req.namespace.as_deref(),
        name: req.name.as_deref(),
    };
    rbac::authorize_request(state, &req.headers, &asked)?;
    state
        .faults
        .before(Target::new(verb, group, &fault_target, req.user_agent()))
        .await?;
    handlers::handle(state, verb, &req).await
}

fn openapi_doc(state: &SimState, group: &str, version: &str, path: &str) -> ApiResult<Response> {
    openapi::group_version(&state.registry, group, version)
        .map(json_response)
        .ok_or_else(|| ApiError::path_not_found(path))
}

fn version() -> Value {
    json!({
        "major": "1",
        "minor": "37",
        "emulationMajor": "1",
        "emulationMinor": "37",
        "gitVersion": "v1.37.0-muster-sim",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.25.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

fn core_versions(state: &SimState) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": state.addr.to_string()}],
    })
}

fn group_entry(group: &str, versions: &[String]) -> Value {
    let gv = |v: &String| json!({"groupVersion": format!("{group}/{v}"), "version": v});
    json!({
        "name": group,
        "versions": versions.iter().map(gv).collect::<Vec<_>>(),
        "preferredVersion": versions.first().map(gv),
    })
}

fn group_list(state: &SimState) -> Value {
    let groups: Vec<Value> = state
        .registry
        .groups()
        .iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, vs)| group_entry(g, vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

fn group_info(state: &SimState, group: &str) -> ApiResult<Value> {
    let groups = state.registry.groups();
    let (g, vs) = groups
        .iter()
        .find(|(g, _)| g == group && !g.is_empty())
        .ok_or_else(|| ApiError::path_not_found(&format!("/apis/{group}")))?;
    let mut entry = group_entry(g, vs);
    entry["kind"] = json!("APIGroup");
    entry["apiVersion"] = json!("v1");
    Ok(entry)
}

fn resource_list(state: &SimState, group: &str, version: &str) -> ApiResult<Value> {
    let defs = state.registry.in_group_version(group, version);
    if defs.is_empty() {
        let path = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        return Err(ApiError::path_not_found(&path));
    }
    let mut resources = Vec::new();
    for d in &defs {
        let mut r = json!({
            "name": d.plural,
            "singularName": d.singular,
            "namespaced": d.namespaced,
            "kind": d.kind,
            "verbs": verbs(),
        });
        if !d.short_names.is_empty() {
            r["shortNames"] = json!(d.short_names);
        }
        if !d.categories.is_empty() {
            r["categories"] = json!(d.categories);
        }
        resources.push(r);
        if d.status {
            resources.push(
                json!({"name": format!("{}/status", d.plural), "singularName": "",
                "namespaced": d.namespaced, "kind": d.kind, "verbs": ["get", "patch", "update"]}),
            );
        }
        if d.binding {
            resources.push(
                json!({"name": format!("{}/binding", d.plural), "singularName": "",
                "namespaced": d.namespaced, "kind": "Binding", "verbs": ["create"]}),
            );
            // As a real server: the group and version tell `kubectl drain`
            // which Eviction to send.
            resources.push(
                json!({"name": format!("{}/eviction", d.plural), "singularName": "",
                "namespaced": d.namespaced, "group": "policy", "version": "v1",
                "kind": "Eviction", "verbs": ["create"]}),
            );
        }
    }
    if group.is_empty() {
        resources.push(
            json!({"name": "bindings", "singularName": "binding", "namespaced": true,
            "kind": "Binding", "verbs": ["create"]}),
        );
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Ok(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}
