//! The Workload API PodGroup's spec fields beyond its policy and topology:
//! `priority`, `disruptionMode`, `preemptionPolicy`, `resourceClaims` and
//! `parentCompositePodGroupName`, read and validated. Each reader names the
//! field in its error; an unknown enum value is refused, never guessed.

use std::sync::Arc;

use serde_json::Value;

use crate::model::pod_claims::{GroupClaims, entries};
use crate::model::wire::{PodResourceClaimStatusWire, PodResourceClaimWire};
use crate::model::{DisruptionMode, MAX_GROUP_RESOURCE_CLAIMS, PreemptionPolicy};

/// `spec.priority`: a 32-bit integer when set.
pub fn priority(spec: &Value) -> Result<Option<i32>, String> {
    match &spec["priority"] {
        Value::Null => Ok(None),
        v => v
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| format!("spec.priority must be a 32-bit integer, got {v}")),
    }
}

/// `spec.disruptionMode`: the v1beta1/v1alpha3 union (`single: {}` or
/// `all: {}`, exactly one) or v1alpha2's string (`Pod` or `PodGroup`).
pub fn disruption_mode(spec: &Value) -> Result<Option<DisruptionMode>, String> {
    const FIELD: &str = "spec.disruptionMode";
    let set = |v: Option<&Value>| v.is_some_and(|v| !v.is_null());
    match &spec["disruptionMode"] {
        Value::Null => Ok(None),
        Value::String(s) => match s.as_str() {
            "Pod" => Ok(Some(DisruptionMode::Single)),
            "PodGroup" => Ok(Some(DisruptionMode::All)),
            other => Err(format!("{FIELD} must be Pod or PodGroup, got {other:?}")),
        },
        Value::Object(mode) => {
            if let Some(unknown) = mode
                .keys()
                .find(|k| !matches!(k.as_str(), "single" | "all"))
            {
                return Err(format!(
                    "{FIELD} has unknown mode {unknown:?} (expected single or all)"
                ));
            }
            match (set(mode.get("single")), set(mode.get("all"))) {
                (true, false) => Ok(Some(DisruptionMode::Single)),
                (false, true) => Ok(Some(DisruptionMode::All)),
                (true, true) => Err(format!(
                    "{FIELD} sets both single and all; exactly one is allowed"
                )),
                (false, false) => Err(format!("{FIELD} sets neither single nor all")),
            }
        }
        other => Err(format!(
            "{FIELD} must be an object with single or all, got {other}"
        )),
    }
}

/// `spec.preemptionPolicy`: `Never` or `PreemptLowerPriority` when set.
pub fn preemption_policy(spec: &Value) -> Result<Option<PreemptionPolicy>, String> {
    match &spec["preemptionPolicy"] {
        Value::Null => Ok(None),
        Value::String(s) if s == "Never" => Ok(Some(PreemptionPolicy::Never)),
        Value::String(s) if s == "PreemptLowerPriority" => {
            Ok(Some(PreemptionPolicy::PreemptLowerPriority))
        }
        other => Err(format!(
            "spec.preemptionPolicy must be Never or PreemptLowerPriority, got {other}"
        )),
    }
}

/// `spec.resourceClaims` (KEP-5729): each entry with a name and exactly
/// one of `resourceClaimName` / `resourceClaimTemplateName`, names unique,
/// at most [`MAX_GROUP_RESOURCE_CLAIMS`]; a template's entry resolved
/// against `status.resourceClaimStatuses`. `None` when the group lists none.
pub fn resource_claims(obj: &Value) -> Result<Option<Arc<GroupClaims>>, String> {
    const FIELD: &str = "spec.resourceClaims";
    let spec: Vec<PodResourceClaimWire> = match &obj["spec"]["resourceClaims"] {
        Value::Null => return Ok(None),
        Value::Array(a) if a.is_empty() => return Ok(None),
        v @ Value::Array(_) => {
            serde_json::from_value(v.clone()).map_err(|e| format!("{FIELD}: {e}"))?
        }
        other => return Err(format!("{FIELD} must be a list, got {other}")),
    };
    // A status the controller wrote badly resolves nothing: the members
    // wait for the claims as if not recorded yet.
    let status: Vec<PodResourceClaimStatusWire> =
        serde_json::from_value(obj["status"]["resourceClaimStatuses"].clone()).unwrap_or_default();
    let entries = entries(&spec, &status, MAX_GROUP_RESOURCE_CLAIMS).map_err(|e| e.0)?;
    let meta = &obj["metadata"];
    Ok(Some(Arc::new(GroupClaims {
        group: Arc::from(meta["name"].as_str().unwrap_or_default()),
        uid: Arc::from(meta["uid"].as_str().unwrap_or_default()),
        entries,
    })))
}

/// `spec.parentCompositePodGroupName`, when set and not empty.
pub fn parent_composite(spec: &Value) -> Result<Option<String>, String> {
    match &spec["parentCompositePodGroupName"] {
        Value::Null => Ok(None),
        Value::String(s) if s.is_empty() => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        other => Err(format!(
            "spec.parentCompositePodGroupName must be a string, got {other}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::pod_claims::Resolved;
    use serde_json::json;

    #[test]
    fn priority_is_bounded() {
        assert_eq!(priority(&json!({})), Ok(None));
        assert_eq!(priority(&json!({"priority": -5})), Ok(Some(-5)));
        assert_eq!(
            priority(&json!({"priority": 2_147_483_648i64})),
            Err("spec.priority must be a 32-bit integer, got 2147483648".into())
        );
        assert!(priority(&json!({"priority": "high"})).is_err());
    }

    #[test]
    fn disruption_modes_of_every_version() {
        let cases = [
            (json!({"single": {}}), Ok(Some(DisruptionMode::Single))),
            (json!({"all": {}}), Ok(Some(DisruptionMode::All))),
            (json!("Pod"), Ok(Some(DisruptionMode::Single))),
            (json!("PodGroup"), Ok(Some(DisruptionMode::All))),
            (
                json!("Everything"),
                Err("spec.disruptionMode must be Pod or PodGroup, got \"Everything\""),
            ),
            (
                json!({"some": {}}),
                Err("spec.disruptionMode has unknown mode \"some\" (expected single or all)"),
            ),
            (
                json!({"single": {}, "all": {}}),
                Err("spec.disruptionMode sets both single and all; exactly one is allowed"),
            ),
            (
                json!({}),
                Err("spec.disruptionMode sets neither single nor all"),
            ),
        ];
        for (mode, want) in cases {
            assert_eq!(
                disruption_mode(&json!({ "disruptionMode": mode })),
                want.map_err(str::to_string),
                "{mode}"
            );
        }
    }

    #[test]
    fn preemption_policies() {
        assert_eq!(
            preemption_policy(&json!({"preemptionPolicy": "Never"})),
            Ok(Some(PreemptionPolicy::Never))
        );
        assert_eq!(
            preemption_policy(&json!({"preemptionPolicy": "PreemptLowerPriority"})),
            Ok(Some(PreemptionPolicy::PreemptLowerPriority))
        );
        assert_eq!(
            preemption_policy(&json!({"preemptionPolicy": "Sometimes"})),
            Err(
                "spec.preemptionPolicy must be Never or PreemptLowerPriority, got \"Sometimes\""
                    .into()
            )
        );
    }

    #[test]
    fn resource_claims_are_validated() {
        let group = |claims: Value, status: Value| {
            json!({"metadata": {"name": "train", "uid": "u1"},
                   "spec": {"resourceClaims": claims},
                   "status": {"resourceClaimStatuses": status}})
        };
        let read = resource_claims(&group(
            json!([{"name": "gpu", "resourceClaimName": "c"},
                   {"name": "nic", "resourceClaimTemplateName": "t"},
                   {"name": "rack", "resourceClaimTemplateName": "r"}]),
            json!([{"name": "rack", "resourceClaimName": "train-rack-x1"}]),
        ))
        .unwrap()
        .unwrap();
        assert_eq!((&*read.group, &*read.uid), ("train", "u1"));
        let resolved: Vec<_> = read.entries.iter().map(|e| e.resolve()).collect();
        assert_eq!(
            resolved,
            [
                Resolved::Claim("c"),
                Resolved::Pending,
                Resolved::Claim("train-rack-x1")
            ]
        );
        assert_eq!(resource_claims(&json!({"spec": {}})), Ok(None));
        for (claims, needle) in [
            (json!([{"resourceClaimName": "c"}]), "[0].name: required"),
            (json!([{"name": "a"}]), "[0]: exactly one"),
            (
                json!([{"name": "a", "resourceClaimName": "c", "resourceClaimTemplateName": "t"}]),
                "[0]: exactly one",
            ),
            (
                json!([{"name": "a", "resourceClaimName": "c"}, {"name": "a", "resourceClaimName": "d"}]),
                "duplicate name \"a\"",
            ),
            (json!("gpu"), "must be a list"),
        ] {
            let err = resource_claims(&group(claims.clone(), Value::Null)).unwrap_err();
            assert!(err.contains(needle), "{claims}: {err}");
        }
        let many: Vec<_> = (0..33)
            .map(|i| json!({"name": format!("c{i}"), "resourceClaimName": "c"}))
            .collect();
        assert!(
            resource_claims(&group(json!(many), Value::Null))
                .unwrap_err()
                .contains("at most 32")
        );
    }
}
