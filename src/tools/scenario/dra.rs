//! Dynamic Resource Allocation in a scenario: the DeviceClasses and
//! ResourceClaimTemplates it declares (top-level `deviceClasses` and
//! `resourceClaimTemplates`), their checks, and their manifests. Workloads
//! name templates in `claimTemplates`; each of their pods then gets one
//! claim per template (`spec.resourceClaims`, used by its container).
//!
//! The API parts of an entry (selectors, configuration, the claim's
//! `devices`) are checked here as the `resource.k8s.io/v1` types read them
//! (a field the API does not know is an error naming it) and as the
//! scheduler's allocator reads them (CEL selectors compile, counts within
//! bounds), so a bad template fails the scenario before anything is created.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use k8s_openapi::api::resource::v1 as api;
use muster_core::dra::model::{Claim, DeviceClass, Mode};

use super::validate::Problem;

/// One entry of `deviceClasses`: a cluster-scoped `DeviceClass`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeviceClassEntry {
    pub name: String,
    /// `spec.selectors`, as in the API: `[{cel: {expression: ...}}]`.
    #[serde(default)]
    pub selectors: Vec<Value>,
    /// `spec.config`, as in the API.
    #[serde(default)]
    pub config: Vec<Value>,
    /// `spec.extendedResourceName`.
    #[serde(default)]
    pub extended_resource_name: Option<String>,
}

/// One entry of `resourceClaimTemplates`: a `ResourceClaimTemplate`,
/// created in every namespace whose workloads name it.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimTemplateEntry {
    /// Also the name of the claim in each pod that uses it, so a DNS label.
    pub name: String,
    /// The claims' `spec.devices` (`requests`, `constraints`, `config`),
    /// as in the API.
    pub devices: Value,
}

impl DeviceClassEntry {
    /// The `spec` of the DeviceClass.
    pub fn spec(&self) -> Value {
        let mut spec = Map::new();
        if !self.selectors.is_empty() {
            spec.insert("selectors".into(), json!(self.selectors));
        }
        if !self.config.is_empty() {
            spec.insert("config".into(), json!(self.config));
        }
        if let Some(name) = &self.extended_resource_name {
            spec.insert("extendedResourceName".into(), json!(name));
        }
        Value::Object(spec)
    }

    /// The DeviceClass object, without labels.
    pub fn object(&self) -> Value {
        json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": self.name},
            "spec": self.spec(),
        })
    }
}

impl ClaimTemplateEntry {
    /// The ResourceClaimTemplate object in `namespace`, without labels.
    pub fn object(&self, namespace: &str) -> Value {
        json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": self.name, "namespace": namespace},
            "spec": {"spec": {"devices": self.devices}},
        })
    }

    /// The claim a pod gets from this template, as the allocator reads it
    /// (requests, their alternatives and how many devices each takes).
    pub fn claim(&self, namespace: &str) -> Result<Claim, String> {
        let object = json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": self.name, "namespace": namespace},
            "spec": {"devices": self.devices},
        });
        let claim: api::ResourceClaim = decode(&object)?;
        Claim::from_api(&claim).map_err(|e| e.to_string())
    }

    /// Devices each claim from this template takes on one node, counting
    /// each request's first alternative; `None` for a request taking every
    /// matching device (`allocationMode: All`).
    pub fn device_count(&self) -> Option<u32> {
        let claim = self.claim("default").ok()?;
        claim.requests.iter().try_fold(0u32, |sum, r| {
            match r.alternatives.first().map(|a| a.mode) {
                Some(Mode::Exact(n)) => sum.checked_add(n),
                Some(Mode::All) | None => None,
            }
        })
    }
}

/// Checks the declared classes and templates: names, uniqueness, and each
/// entry's API fields.
pub fn check(
    classes: &[DeviceClassEntry],
    templates: &[ClaimTemplateEntry],
) -> Result<(), Problem> {
    let mut names = std::collections::BTreeSet::new();
    for (i, c) in classes.iter().enumerate() {
        let at = |field: &str| format!("deviceClasses[{i}].{field}");
        if !is_dns_subdomain(&c.name) {
            return Err((
                at("name"),
                format!(
                    "{:?} must be a DNS subdomain: lowercase letters, digits, '-' and '.', at most 253",
                    c.name
                ),
            ));
        }
        if !names.insert(c.name.as_str()) {
            return Err((at("name"), format!("{:?} is declared twice", c.name)));
        }
        let object = c.object();
        let class: api::DeviceClass =
            decode_exactly(&object, "spec").map_err(|(path, m)| (at(&path), m))?;
        DeviceClass::from_api(&class).map_err(|e| (at("selectors"), e.to_string()))?;
    }
    let mut names = std::collections::BTreeSet::new();
    for (i, t) in templates.iter().enumerate() {
        let at = |field: &str| format!("resourceClaimTemplates[{i}].{field}");
        if !is_dns_label(&t.name) {
            return Err((
                at("name"),
                format!(
                    "{:?} must be a DNS label (it also names the pod's claim): 1-63 lowercase letters, digits or '-', alphanumeric at both ends",
                    t.name
                ),
            ));
        }
        if !names.insert(t.name.as_str()) {
            return Err((at("name"), format!("{:?} is declared twice", t.name)));
        }
        if !t.devices.is_object() {
            return Err((
                at("devices"),
                "must be a mapping (requests, constraints, config)".into(),
            ));
        }
        let object = t.object("default");
        let _: api::ResourceClaimTemplate =
            decode_exactly(&object, "spec.spec").map_err(|(path, m)| (at(&path), m))?;
        t.claim("default").map_err(|m| (at("devices"), m))?;
    }
    Ok(())
}

/// `object` decoded as `T`, every field of it known to `T`: an error is
/// `(path below prefix, message)`, the path relative to the entry (the
/// object's `prefix` is where the entry's own fields sit).
fn decode_exactly<T: DeserializeOwned + serde::Serialize>(
    object: &Value,
    prefix: &str,
) -> Result<T, Problem> {
    let relative = |path: String| {
        let path = path.trim_start_matches('.');
        path.strip_prefix(prefix)
            .map(|p| p.trim_start_matches('.').to_string())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| path.to_string())
    };
    let typed: T = serde_path_to_error::deserialize(object.clone()).map_err(|e| {
        let path = e.path().to_string();
        (relative(path), e.into_inner().to_string())
    })?;
    let again = serde_json::to_value(&typed).map_err(|e| (String::new(), e.to_string()))?;
    if let Some(path) = unknown_field(object, &again, String::new()) {
        return Err((relative(path), "unknown field".into()));
    }
    Ok(typed)
}

fn decode<T: DeserializeOwned>(object: &Value) -> Result<T, String> {
    serde_json::from_value(object.clone()).map_err(|e| e.to_string())
}

/// The first field of `given` that the typed round trip `kept` dropped:
/// one the API type does not know. Nulls count as absent.
fn unknown_field(given: &Value, kept: &Value, at: String) -> Option<String> {
    match (given, kept) {
        (Value::Object(g), Value::Object(k)) => g.iter().find_map(|(key, value)| {
            let path = if at.is_empty() {
                key.clone()
            } else {
                format!("{at}.{key}")
            };
            match k.get(key) {
                None if value.is_null() => None,
                None => Some(path),
                Some(kept) => unknown_field(value, kept, path),
            }
        }),
        (Value::Array(g), Value::Array(k)) => g
            .iter()
            .zip(k)
            .enumerate()
            .find_map(|(i, (g, k))| unknown_field(g, k, format!("{at}[{i}]"))),
        _ => None,
    }
}

/// A DNS-1123 label: 1-63 lowercase letters, digits or '-', alphanumeric
/// at both ends.
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A DNS-1123 subdomain: dot-separated labels, at most 253 in all.
fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}
