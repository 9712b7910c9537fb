//! A minimal OpenAPI v3 surface: the index of group-versions and, per
//! group-version, one PATCH operation per kind declaring the
//! `fieldValidation` query parameter. That is what `kubectl` looks for to
//! delegate validation to the server (`fields`: unknown fields refused or
//! dropped) instead of downloading schemas to validate client-side.
//! No schemas are published, so `kubectl explain` has nothing to show.

use serde_json::{Map, Value, json};

use super::registry::Registry;

/// `/openapi/v3`: where each group-version's document lives.
pub fn index(registry: &Registry) -> Value {
    let mut paths = Map::new();
    for (group, versions) in registry.groups() {
        for version in versions {
            let path = gv_path(&group, &version);
            paths.insert(
                path.clone(),
                json!({ "serverRelativeURL": format!("/openapi/v3/{path}") }),
            );
        }
    }
    json!({ "paths": paths })
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3/api/v1`, `/openapi/v3/apis/<g>/<v>`; None if not served.
pub fn group_version(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let defs = registry.in_group_version(group, version);
    if defs.is_empty() {
        return None;
    }
    let mut kinds: Vec<(&str, bool, &str)> = defs
        .iter()
        .map(|d| (d.plural.as_str(), d.namespaced, d.kind.as_str()))
        .collect();
    // `kubectl create -f` of a Binding needs its kind listed too.
    if defs.iter().any(|d| d.binding) {
        kinds.push(("bindings", true, "Binding"));
    }
    let mut paths = Map::new();
    for (plural, namespaced, kind) in kinds {
        let scope = if namespaced {
            "namespaces/{namespace}/"
        } else {
            ""
        };
        let path = format!("/{}/{scope}{plural}/{{name}}", gv_path(group, version));
        let patch = json!({
            "x-kubernetes-group-version-kind": { "group": group, "version": version, "kind": kind },
            "x-kubernetes-action": "patch",
            "parameters": [
                { "name": "fieldValidation", "in": "query", "schema": { "type": "string" } },
                { "name": "dryRun", "in": "query", "schema": { "type": "string" } },
            ],
            "responses": { "200": { "description": "OK" } },
        });
        paths.insert(path, json!({ "patch": patch }));
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": { "title": "Muster simulated cluster", "version": "v1.37.0" },
        "paths": paths,
        "components": { "schemas": {} },
    }))
}
