//! Creation as a real server performs it: identity checks (kind,
//! apiVersion, namespace, name or generateName), system metadata, per-kind
//! defaults from `kinds`, then the store.

use std::sync::Arc;

use serde_json::{Value, json};

use super::SimState;
use super::fields::{self, Mode};
use super::kinds::{after_create, on_create};
use super::objects::{as_map, generated_base, meta_mut, name_suffix, new_uid, now};
use super::registry::ResourceDef;
use super::response::commit_error;
use super::status::{ApiError, ApiResult, Cause};
use super::store::{CommitError, Stored};
use super::{validate, views};

/// Creates an object as a real server would, unknown fields dropped
/// without a word (the server's own writes: seeding).
pub fn create_object(
    state: &SimState,
    def: &ResourceDef,
    path_ns: Option<&str>,
    obj: Value,
) -> ApiResult<Arc<Stored>> {
    create_checked(state, def, path_ns, obj, Mode::Ignore).map(|(stored, _)| stored)
}

/// Creates an object as a real server would: validates identity and fields
/// (`mode`: what unknown fields get), fills system metadata, applies
/// per-kind defaults, then stores it. Returns the stored object and the
/// warnings for the client.
pub fn create_checked(
    state: &SimState,
    def: &ResourceDef,
    path_ns: Option<&str>,
    mut obj: Value,
    mode: Mode,
) -> ApiResult<(Arc<Stored>, Vec<String>)> {
    if !obj.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    check_type(def, &mut obj)?;
    let warnings = fields::check(state, def, mode, &mut obj)?;
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
        (None, Some(prefix)) => format!("{}{}", generated_base(prefix), name_suffix()),
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
    validate::decode_quantities(state, def, &mut obj);
    validate::object(state, def, &name, &obj)?;
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
    Ok((stored, warnings))
}

/// The body's kind and apiVersion must match the URL (filled in if absent).
pub(super) fn check_type(def: &ResourceDef, obj: &mut Value) -> ApiResult<()> {
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

pub(super) fn resolve_namespace(
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
        // One cause naming the field, as the real server's validation reports it.
        Err(ApiError::invalid_fields(
            &def.group,
            &def.kind,
            name,
            vec![Cause::invalid(
                "metadata.name".into(),
                name,
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            )],
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::registry::Registry;

    #[test]
    fn an_invalid_name_is_one_cause_on_metadata_name() {
        let registry = Registry::new(&std::collections::BTreeSet::new());
        let def = registry.lookup("", "v1", "nodes").expect("nodes");
        assert!(validate_name(&def, "good-name").is_ok());
        let err = validate_name(&def, "Bad_Name").expect_err("invalid");
        assert_eq!((err.code, err.reason), (422, "Invalid"));
        let causes = &err.details.expect("details").causes;
        assert_eq!(causes.len(), 1);
        assert_eq!(
            (causes[0].reason, causes[0].field.as_str()),
            ("FieldValueInvalid", "metadata.name")
        );
    }
}
