//! The YAML under `deploy/kwok/` is what it claims to be: the node template
//! a `k8s_openapi` Node, and every Stage a kwok `kwok.x-k8s.io/v1alpha1`
//! Stage (its schema mirrored below with unknown fields refused) whose
//! status template, once its template actions are filled in, is a valid
//! NodeStatus or PodStatus with no field those types do not know.

use std::path::Path;

use k8s_openapi::api::core::v1::{Node, NodeStatus, PodStatus};
use serde::Deserialize;
use serde_json::Value;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/kwok");

// The Stage schema is mirrored whole, so that a field kwok does not have is
// refused; the test reads only some of them.

#[allow(dead_code)]
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Stage {
    api_version: String,
    kind: String,
    metadata: Metadata,
    spec: StageSpec,
}

#[allow(dead_code)]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Metadata {
    name: String,
}

#[allow(dead_code)]
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StageSpec {
    resource_ref: ResourceRef,
    selector: Option<Selector>,
    weight: Option<i64>,
    delay: Option<Delay>,
    next: Next,
}

#[allow(dead_code)]
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ResourceRef {
    api_group: Option<String>,
    kind: String,
}

#[allow(dead_code)]
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Selector {
    match_labels: Option<serde_json::Map<String, Value>>,
    match_annotations: Option<serde_json::Map<String, Value>>,
    match_expressions: Option<Vec<Requirement>>,
}

#[allow(dead_code)]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Requirement {
    key: String,
    operator: String,
    values: Option<Vec<String>>,
}

#[allow(dead_code)]
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Delay {
    duration_milliseconds: Option<i64>,
    duration_from: Option<ExpressionFrom>,
    jitter_duration_milliseconds: Option<i64>,
    jitter_duration_from: Option<ExpressionFrom>,
}

#[allow(dead_code)]
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ExpressionFrom {
    expression_from: String,
}

#[allow(dead_code)]
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Next {
    event: Option<Event>,
    finalizers: Option<Finalizers>,
    delete: Option<bool>,
    status_template: Option<String>,
}

#[allow(dead_code)]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Event {
    #[serde(rename = "type")]
    type_: String,
    reason: String,
    message: Option<String>,
}

#[allow(dead_code)]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Finalizers {
    add: Option<Vec<Value>>,
    remove: Option<Vec<Value>>,
    empty: Option<bool>,
}

fn documents(file: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(Path::new(DIR).join(file)).expect("file exists");
    serde_norway::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).expect("valid YAML"))
        .filter(|v| !v.is_null())
        .collect()
}

/// Fails if decoding into `T` and encoding again loses a field (a field
/// the type does not have, or one misspelt); required fields the type adds
/// with defaults are fine.
fn round_trips<T: serde::de::DeserializeOwned + serde::Serialize>(what: &str, v: &Value) {
    let typed: T = serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{what}: {e}"));
    let back = serde_json::to_value(&typed).expect("serializes");
    if let Some(path) = lost(v, &back, String::new()) {
        panic!("{what}: {path} is lost in a round trip through the type");
    }
}

/// The first path in `original` that `back` lacks or changed.
fn lost(original: &Value, back: &Value, at: String) -> Option<String> {
    match (original, back) {
        (Value::Object(a), Value::Object(b)) => a.iter().find_map(|(k, v)| match b.get(k) {
            Some(w) => lost(v, w, format!("{at}.{k}")),
            None => Some(format!("{at}.{k}")),
        }),
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (v, w))| lost(v, w, format!("{at}[{i}]"))),
        _ if original == back => None,
        _ => Some(at),
    }
}

/// The status template with its actions filled in: lines that are only an
/// action (range, end, variable) dropped, inline actions a timestamp string.
fn filled(template: &str) -> Value {
    let mut out = String::new();
    for line in template.lines() {
        let t = line.trim();
        if t.starts_with("{{") && t.ends_with("}}") && t.matches("{{").count() == 1 {
            continue;
        }
        let mut rest = line;
        while let Some(start) = rest.find("{{") {
            let end = rest[start..].find("}}").expect("balanced {{ }}") + start;
            out.push_str(&rest[..start]);
            out.push_str("\"2026-01-01T00:00:00Z\"");
            rest = &rest[end + 2..];
        }
        out.push_str(rest);
        out.push('\n');
    }
    serde_norway::from_str(&out).unwrap_or_else(|e| panic!("template is not YAML: {e}\n{out}"))
}

#[test]
fn the_node_template_is_a_kwok_node() {
    let docs = documents("node-template.yaml");
    assert_eq!(docs.len(), 1);
    round_trips::<Node>("node-template.yaml", &docs[0]);
    assert_eq!(
        docs[0]["metadata"]["annotations"]["kwok.x-k8s.io/node"],
        "fake"
    );
}

#[test]
fn every_stage_is_a_kwok_stage_with_a_valid_status() {
    let docs = documents("stages.yaml");
    let mut names = Vec::new();
    for doc in &docs {
        let stage: Stage = serde_json::from_value(doc.clone())
            .unwrap_or_else(|e| panic!("{}: {e}", doc["metadata"]["name"]));
        assert_eq!(
            (stage.api_version.as_str(), stage.kind.as_str()),
            ("kwok.x-k8s.io/v1alpha1", "Stage")
        );
        let operators = ["In", "NotIn", "Exists", "DoesNotExist"];
        for r in stage
            .spec
            .selector
            .iter()
            .flat_map(|s| s.match_expressions.iter().flatten())
        {
            assert!(
                operators.contains(&r.operator.as_str()),
                "{}: {}",
                stage.metadata.name,
                r.operator
            );
            assert!(
                r.key.starts_with('.'),
                "{}: selector keys are paths",
                stage.metadata.name
            );
            let needs_values = matches!(r.operator.as_str(), "In" | "NotIn");
            assert_eq!(
                r.values.as_ref().is_some_and(|v| !v.is_empty()),
                needs_values,
                "{}",
                r.key
            );
        }
        if let Some(template) = &stage.spec.next.status_template {
            let status = filled(template);
            match stage.spec.resource_ref.kind.as_str() {
                "Node" => round_trips::<NodeStatus>(&stage.metadata.name, &status),
                "Pod" => round_trips::<PodStatus>(&stage.metadata.name, &status),
                other => panic!("unexpected kind {other}"),
            }
        }
        assert_eq!(stage.spec.resource_ref.api_group.as_deref(), Some("v1"));
        names.push(stage.metadata.name);
    }
    assert_eq!(
        names,
        [
            "node-ready",
            "node-heartbeat",
            "pod-running",
            "pod-succeeded",
            "pod-gone"
        ]
    );
}
