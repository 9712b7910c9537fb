//! Patch application: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and
//! an approximation of Kubernetes strategic merge patch.
//!
//! Strategic merge here knows the merge keys of the list fields that matter in
//! practice (containers, env, ports, volumes, conditions, ...) and merges those
//! lists element by element; every other list is replaced, as merge patch
//! would. Directives: `$patch: delete|replace` on map and list elements,
//! `$retainKeys` and `$setElementOrder/...` are accepted and ignored (element
//! order is not re-sorted), `$deleteFromPrimitiveList/...` is honoured.

use serde_json::{Map, Value};

/// The patch flavours, by request `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Merge,
    Json,
    Strategic,
    /// Server-side apply, approximated (no field managers).
    Apply,
}

impl PatchType {
    pub fn from_content_type(ct: &str) -> Option<Self> {
        let media = ct.split(';').next().unwrap_or("").trim();
        match media {
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/json-patch+json" => Some(PatchType::Json),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
                Some(PatchType::Apply)
            }
            _ => None,
        }
    }
}

/// Applies `patch` (already decoded) to `target`.
pub fn apply(kind: PatchType, target: &mut Value, patch: Value) -> Result<(), String> {
    match kind {
        PatchType::Merge => {
            json_patch::merge(target, &patch);
            Ok(())
        }
        PatchType::Json => {
            let ops: json_patch::Patch =
                serde_json::from_value(patch).map_err(|e| format!("invalid JSON patch: {e}"))?;
            json_patch::patch(target, &ops).map_err(|e| format!("JSON patch failed: {e}"))
        }
        PatchType::Strategic | PatchType::Apply => {
            if !patch.is_object() {
                return Err("a strategic merge patch must be a JSON object".into());
            }
            strategic_merge(target, patch);
            Ok(())
        }
    }
}

/// The merge key of a list field, by field name. `None` means the list is
/// replaced wholesale. Primitive lists that merge as sets are handled by
/// [`is_set_list`].
fn merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "containerStatuses"
        | "initContainerStatuses"
        | "resourceClaims"
        | "podGroups"
        | "podGroupTemplates" => "name",
        "ports" => "containerPort",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "conditions" | "addresses" | "readinessGates" => "type",
        "ownerReferences" => "uid",
        "hostAliases" => "ip",
        "topologySpreadConstraints" => "topologyKey",
        _ => return None,
    })
}

fn is_set_list(field: &str) -> bool {
    field == "finalizers"
}

fn strategic_merge(target: &mut Value, patch: Value) {
    let Value::Object(patch) = patch else {
        *target = patch;
        return;
    };
    if patch.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut replaced = patch;
        replaced.remove("$patch");
        *target = Value::Object(strip_directives(replaced));
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(obj) = target else { return };
    for (key, value) in patch {
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Value::Array(gone)) = (obj.get_mut(field), &value) {
                list.retain(|x| !gone.contains(x));
            }
            continue;
        }
        if key.starts_with('$') {
            continue;
        }
        match value {
            Value::Null => {
                obj.remove(&key);
            }
            Value::Array(items) => {
                let existing = obj.remove(&key);
                obj.insert(key.clone(), merge_list(&key, existing, items));
            }
            Value::Object(_) => {
                let entry = obj.entry(key).or_insert(Value::Null);
                strategic_merge(entry, value);
            }
            other => {
                obj.insert(key, other);
            }
        }
    }
}

fn merge_list(field: &str, existing: Option<Value>, patch: Vec<Value>) -> Value {
    let mut current = match existing {
        Some(Value::Array(a)) => a,
        _ => Vec::new(),
    };
    if is_set_list(field) {
        for item in patch {
            if !current.contains(&item) {
                current.push(item);
            }
        }
        return Value::Array(current);
    }
    let Some(key) = merge_key(field) else {
        return Value::Array(patch.into_iter().map(strip_value).collect());
    };
    for item in patch {
        let id = item.get(key).cloned();
        let directive = item
            .get("$patch")
            .and_then(Value::as_str)
            .map(str::to_string);
        let position = id
            .as_ref()
            .and_then(|id| current.iter().position(|c| c.get(key) == Some(id)));
        match (directive.as_deref(), position) {
            (Some("delete"), Some(i)) => {
                current.remove(i);
            }
            (Some("delete"), None) => {}
            (_, Some(i)) => strategic_merge(&mut current[i], item),
            (_, None) => current.push(strip_value(item)),
        }
    }
    Value::Array(current)
}

fn strip_value(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(strip_directives(m)),
        other => other,
    }
}

fn strip_directives(m: Map<String, Value>) -> Map<String, Value> {
    m.into_iter()
        .filter(|(k, _)| !k.starts_with('$'))
        .map(|(k, v)| (k, strip_value(v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn smp(mut target: Value, patch: Value) -> Value {
        apply(PatchType::Strategic, &mut target, patch).unwrap();
        target
    }

    #[test]
    fn containers_merge_by_name() {
        let pod = json!({"spec": {"containers": [
            {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
            {"name": "b", "image": "b:1"}]}});
        let out = smp(
            pod,
            json!({"spec": {"containers": [
            {"name": "a", "env": [{"name": "Y", "value": "2"}]},
            {"name": "c", "image": "c:1"}]}}),
        );
        let cs = out["spec"]["containers"].as_array().unwrap();
        assert_eq!(cs.len(), 3);
        assert_eq!(cs[0]["image"], "a:1");
        assert_eq!(cs[0]["env"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn delete_directive_and_null() {
        let pod = json!({"metadata": {"labels": {"a": "1", "b": "2"}},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
        let out = smp(
            pod,
            json!({"metadata": {"labels": {"a": null}},
            "spec": {"containers": [{"name": "a", "$patch": "delete"}],
                     "$setElementOrder/containers": [{"name": "b"}]}}),
        );
        assert_eq!(out["metadata"]["labels"], json!({"b": "2"}));
        assert_eq!(out["spec"]["containers"], json!([{"name": "b"}]));
    }

    #[test]
    fn tolerations_replace_and_finalizers_union() {
        let pod = json!({"metadata": {"finalizers": ["x"]},
            "spec": {"tolerations": [{"key": "a"}]}});
        let out = smp(
            pod,
            json!({"metadata": {"finalizers": ["y"]},
            "spec": {"tolerations": [{"key": "b"}]}}),
        );
        assert_eq!(out["metadata"]["finalizers"], json!(["x", "y"]));
        assert_eq!(out["spec"]["tolerations"], json!([{"key": "b"}]));
    }

    #[test]
    fn json_patch_and_merge() {
        let mut v = json!({"a": 1});
        apply(
            PatchType::Json,
            &mut v,
            json!([{"op": "add", "path": "/b", "value": 2}]),
        )
        .unwrap();
        apply(PatchType::Merge, &mut v, json!({"a": null})).unwrap();
        assert_eq!(v, json!({"b": 2}));
        assert!(
            apply(
                PatchType::Json,
                &mut v,
                json!([{"op": "remove", "path": "/zz"}])
            )
            .is_err()
        );
    }
}
