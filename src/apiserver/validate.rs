//! Per-kind validation a real API server performs on writes, for the fields
//! the scheduler reads: a pod's resource quantities (container and init
//! container requests and limits, pod-level resources, overhead) must not be
//! negative. A violation is a 422 `Invalid` Status whose `details.causes` name
//! each field, worded as the real server words them. The scheduler does not
//! rely on this (it refuses such pods itself, `model::requests`), but clients
//! and tests see the same answer they would from a real cluster.

use serde_json::Value;

use super::SimState;
use super::registry::ResourceDef;
use super::status::{ApiError, ApiResult, Cause};
use crate::model::Quantity;

/// Validates `obj`, about to be stored as `def`, named `name` (unless the
/// cluster was started with validation off, [`super::SimConfig::validate`]).
pub fn object(state: &SimState, def: &ResourceDef, name: &str, obj: &Value) -> ApiResult<()> {
    if !(state.validate && def.group.is_empty() && def.kind == "Pod") {
        return Ok(());
    }
    let causes = pod(obj);
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid_fields(
        &def.group, &def.kind, name, causes,
    ))
}

/// The causes of a pod's invalidity, in field order.
fn pod(obj: &Value) -> Vec<Cause> {
    let spec = &obj["spec"];
    let mut causes = Vec::new();
    for list in ["containers", "initContainers"] {
        let Some(containers) = spec[list].as_array() else {
            continue;
        };
        for (i, c) in containers.iter().enumerate() {
            for part in ["requests", "limits"] {
                let path = format!("spec.{list}[{i}].resources.{part}");
                non_negative(&c["resources"][part], &path, &mut causes);
            }
        }
    }
    for part in ["requests", "limits"] {
        non_negative(
            &spec["resources"][part],
            &format!("spec.resources.{part}"),
            &mut causes,
        );
    }
    non_negative(&spec["overhead"], "spec.overhead", &mut causes);
    causes
}

/// Every quantity of the map at `path` that parses to a negative value.
/// Unparsable ones are left alone: a real server refuses them while decoding,
/// and the scheduler reports them precisely.
fn non_negative(map: &Value, path: &str, causes: &mut Vec<Cause>) {
    let Some(map) = map.as_object() else {
        return;
    };
    for (name, q) in map {
        let raw = match q {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            _ => continue,
        };
        if Quantity::parse(&raw).is_ok_and(Quantity::is_negative) {
            causes.push(Cause::invalid(
                format!("{path}[{name}]"),
                &raw,
                "must be greater than or equal to 0",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_every_negative_quantity() {
        let p = json!({"spec": {
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "1"}}},
                {"name": "b", "resources": {"requests": {"cpu": "-1"}, "limits": {"memory": "-2Gi"}}}
            ],
            "initContainers": [{"name": "i", "resources": {"requests": {"nvidia.com/gpu": -1}}}],
            "overhead": {"cpu": "-100m"},
            "resources": {"requests": {"memory": "-1"}}
        }});
        let fields: Vec<_> = pod(&p).into_iter().map(|c| c.field).collect();
        assert_eq!(
            fields,
            [
                "spec.containers[1].resources.requests[cpu]",
                "spec.containers[1].resources.limits[memory]",
                "spec.initContainers[0].resources.requests[nvidia.com/gpu]",
                "spec.resources.requests[memory]",
                "spec.overhead[cpu]",
            ]
        );
        assert!(
            pod(&json!({"spec": {"containers": [{"resources": {"requests": {"cpu": "x"}}}]}}))
                .is_empty()
        );
    }
}
