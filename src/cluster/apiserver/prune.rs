//! Which fields of a custom resource its CRD's structural schema does not
//! declare, as the real server's pruning finds them: an object's keys must
//! be among its `properties`, unless `additionalProperties` gives every
//! value a schema (or `true`) or `x-kubernetes-preserve-unknown-fields`
//! keeps them; arrays are walked through `items`. `apiVersion` and `kind`
//! are kept at the root (and in `x-kubernetes-embedded-resource` objects),
//! and `metadata` is ObjectMeta whatever the schema says.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::probe::{FieldPath, Seg, unknown_fields};

/// The paths of `obj` outside `schema` (a CRD version's openAPIV3Schema).
pub fn unknown_in_schema(schema: &Value, obj: &Value) -> Vec<FieldPath> {
    let mut found = Vec::new();
    walk(schema, obj, &FieldPath::default(), true, &mut found);
    found
}

fn preserves(schema: &Value) -> bool {
    schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
}

fn walk(
    schema: &Value,
    value: &Value,
    path: &FieldPath,
    resource: bool,
    found: &mut Vec<FieldPath>,
) {
    match value {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            let embedded = resource
                || schema.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true));
            for (key, child) in map {
                let at = path.child(Seg::Key(key.clone()));
                if embedded && (key == "apiVersion" || key == "kind") {
                    continue;
                }
                if embedded && key == "metadata" {
                    // ObjectMeta's own fields, from its type.
                    if let Ok(paths) = unknown_fields::<ObjectMeta>(child) {
                        found.extend(paths.into_iter().map(|p| at.join(&p)));
                    }
                    continue;
                }
                match (props.and_then(|p| p.get(key)), additional) {
                    (Some(s), _) => walk(s, child, &at, false, found),
                    (None, Some(Value::Bool(true))) => {}
                    (None, Some(s)) if s.is_object() => walk(s, child, &at, false, found),
                    _ if preserves(schema) => {}
                    _ => found.push(at),
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                for (i, item) in items.iter().enumerate() {
                    walk(item_schema, item, &path.child(Seg::Index(i)), false, found);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shown(paths: Vec<FieldPath>) -> Vec<String> {
        paths.iter().map(ToString::to_string).collect()
    }

    /// The scheduler-plugins PodGroup CRD's schema (trimmed to its shape):
    /// `status.scheduled` is no longer in it.
    fn coscheduling_schema() -> Value {
        json!({"type": "object", "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {"type": "object", "properties": {
                "minMember": {"type": "integer", "format": "int32"},
                "minResources": {"type": "object", "additionalProperties": {
                    "anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": true}},
                "scheduleTimeoutSeconds": {"type": "integer", "format": "int32"}}},
            "status": {"type": "object", "properties": {
                "failed": {"type": "integer"}, "occupiedBy": {"type": "string"},
                "phase": {"type": "string"}, "running": {"type": "integer"},
                "succeeded": {"type": "integer"}}}}})
    }

    #[test]
    fn prunes_fields_outside_the_schema() {
        let pg = json!({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "g", "labels": {"a": "b"}, "nam": "x"},
            "spec": {"minMember": 2, "minResources": {"cpu": "1"}, "extra": true},
            "status": {"phase": "Running", "scheduled": 2}});
        assert_eq!(
            shown(unknown_in_schema(&coscheduling_schema(), &pg)),
            ["metadata.nam", "spec.extra", "status.scheduled"]
        );
    }

    #[test]
    fn preserve_unknown_fields_and_items() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                     "properties": {"list": {"type": "array", "items": {"type": "object",
                        "properties": {"a": {"type": "string"}}}}}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}});
        let obj = json!({"spec": {"anything": 1, "list": [{"a": "x"}, {"b": "y"}]},
            "free": {"deep": {"x": 1}}, "top": 1});
        assert_eq!(
            shown(unknown_in_schema(&schema, &obj)),
            ["spec.list[1].b", "top"]
        );
    }
}
