//! kube-apiserver's validation of the `resource.k8s.io` kinds, for the
//! fields that matter to allocation and to the simulator's controllers:
//! claims and claim templates (request names, `exactly` / `firstAvailable`,
//! allocation modes and counts, CEL selectors, constraints and config
//! naming existing requests, capacity requests, the status a scheduler
//! writes: results with their share IDs and consumed capacity, device
//! statuses naming allocated devices), device classes (selectors), resource
//! slices (driver, pool, node scope, devices and their attributes and
//! capacities, with the request policies of consumable capacity) and device
//! taint rules. Each violation is one
//! [`Cause`] with the field path and the wording of the real server; an
//! object with any is a 422 `Invalid`.
//!
//! Objects are checked in their storage form (`v1`); `v1beta2` has the same
//! shape, so the paths are the ones a client of either version wrote.

use serde_json::{Map, Value};

use super::cel;
use crate::apiserver::status::Cause;
use muster_core::model::Quantity;

/// Upstream's list bounds (`pkg/apis/resource` constants).
pub const MAX_REQUESTS: usize = 32;
pub const MAX_SUBREQUESTS: usize = 8;
pub const MAX_SELECTORS: usize = 32;
pub const MAX_CONSTRAINTS: usize = 32;
pub const MAX_CONFIGS: usize = 32;
/// Devices one allocation result holds.
pub const MAX_ALLOCATED_DEVICES: i64 = 32;
pub const MAX_RESERVED_FOR: usize = 256;
pub const MAX_DEVICES_PER_SLICE: usize = 128;
pub const MAX_DEVICES_PER_SLICE_WITH_TAINTS_OR_COUNTERS: usize = 64;
pub const MAX_ATTRIBUTES_AND_CAPACITIES: usize = 32;
const MAX_ATTRIBUTE_STRING: usize = 64;
const MAX_ID_LENGTH: usize = 32;

pub const EXACT_COUNT: &str = "ExactCount";
pub const ALL: &str = "All";

/// The causes of invalidity of a `resource.k8s.io` object of `kind`.
pub fn object(kind: &str, obj: &Value) -> Vec<Cause> {
    let mut v = Causes::default();
    let spec = &obj["spec"];
    match kind {
        "ResourceClaim" => {
            let names = claim_spec(&mut v, spec, "spec");
            claim_status(&mut v, &obj["status"], &names);
        }
        "ResourceClaimTemplate" => {
            claim_spec(&mut v, &spec["spec"], "spec.spec");
        }
        "DeviceClass" => {
            selectors(&mut v, &spec["selectors"], "spec.selectors");
            extended_resource_name(&mut v, &spec["extendedResourceName"]);
        }
        "ResourceSlice" => slice_spec(&mut v, spec),
        "DeviceTaintRule" => taint(&mut v, &spec["taint"], "spec.taint"),
        _ => {}
    }
    v.0
}

/// A DeviceClass's `spec.extendedResourceName`: a valid extended resource
/// name (kube-apiserver's `IsExtendedResourceName`: qualified, outside the
/// `kubernetes.io` domains, not prefixed `requests.`).
fn extended_resource_name(v: &mut Causes, name: &Value) {
    if name.is_null() {
        return;
    }
    let ok = name
        .as_str()
        .is_some_and(muster_core::model::extended::is_extended_resource_name);
    if !ok {
        v.invalid(
            "spec.extendedResourceName",
            name,
            "must be a valid extended resource name",
        );
    }
}

/// The namespace label that allows claims in it to ask for admin access.
pub const ADMIN_ACCESS_LABEL: &str = "resource.kubernetes.io/admin-access";

/// The `adminAccess: true` fields of a claim or template: each needs the
/// namespace to carry [`ADMIN_ACCESS_LABEL`]` = "true"`.
pub fn admin_access(kind: &str, obj: &Value) -> Vec<Cause> {
    let (spec, path) = match kind {
        "ResourceClaim" => (&obj["spec"], "spec"),
        "ResourceClaimTemplate" => (&obj["spec"]["spec"], "spec.spec"),
        _ => return Vec::new(),
    };
    let mut v = Causes::default();
    for (i, r) in items(&spec["devices"]["requests"]).iter().enumerate() {
        if r["exactly"]["adminAccess"].as_bool() == Some(true) {
            v.forbidden(
                &format!("{path}.devices.requests[{i}].exactly.adminAccess"),
                "admin access to devices requires the `resource.kubernetes.io/admin-access: true` label on the containing namespace",
            );
        }
    }
    v.0
}

/// Fields an update of a `kind` object may not change: a claim's spec, a
/// slice's driver and node name.
pub fn update(kind: &str, old: &Value, new: &Value) -> Vec<Cause> {
    let mut v = Causes::default();
    let mut immutable = |pointer: &str, field: &str, shown: &Value| {
        if old.pointer(pointer) != new.pointer(pointer) {
            v.invalid(field, shown, "field is immutable");
        }
    };
    match kind {
        "ResourceClaim" => {
            immutable("/spec", "spec", &Value::from("object"));
            // A populated allocation is not changed, only removed.
            let allocation = |o: &Value| {
                o.pointer("/status/allocation")
                    .filter(|a| !a.is_null())
                    .cloned()
            };
            if let (Some(before), Some(after)) = (allocation(old), allocation(new))
                && before != after
            {
                v.invalid(
                    "status.allocation",
                    &Value::from("object"),
                    "field is immutable",
                );
            }
            if new.pointer("/metadata/deletionTimestamp").is_some() {
                let uids = |o: &Value| -> Vec<String> {
                    items(o.pointer("/status/reservedFor").unwrap_or(&Value::Null))
                        .iter()
                        .map(|r| text(&r["uid"]).to_string())
                        .collect()
                };
                let before = uids(old);
                if uids(new).iter().any(|u| !before.contains(u)) {
                    v.forbidden(
                        "status.reservedFor",
                        "new entries may not be added while `deallocationRequested` or `deletionTimestamp` are set",
                    );
                }
            }
        }
        "ResourceSlice" => {
            for (pointer, field) in [
                ("/spec/driver", "spec.driver"),
                ("/spec/nodeName", "spec.nodeName"),
            ] {
                let shown = new.pointer(pointer).cloned().unwrap_or(Value::Null);
                immutable(pointer, field, &shown);
            }
        }
        _ => {}
    }
    v.0
}

/// A pod's `spec.resourceClaims` and its containers' `resources.claims`,
/// as pod validation checks them: claim names unique DNS labels, each with
/// exactly one of `resourceClaimName` / `resourceClaimTemplateName` (a DNS
/// subdomain), containers naming only the pod's claims, once each.
pub fn pod_claims(spec: &Value) -> Vec<Cause> {
    let mut v = Causes::default();
    claim_entries(&mut v, spec);
    container_claims(&mut v, spec);
    v.0
}

/// A PodGroup's `spec.resourceClaims` (KEP-5729), checked as a pod's
/// entries are: unique DNS-label names, each with exactly one source.
pub fn pod_group_claims(spec: &Value) -> Vec<Cause> {
    let mut v = Causes::default();
    claim_entries(&mut v, spec);
    v.0
}

/// `spec.resourceClaims[]` of a pod or PodGroup: names unique DNS labels,
/// each entry with exactly one of `resourceClaimName` /
/// `resourceClaimTemplateName` (a DNS subdomain).
fn claim_entries(v: &mut Causes, spec: &Value) {
    let mut names: Vec<&str> = Vec::new();
    for (i, c) in items(&spec["resourceClaims"]).iter().enumerate() {
        let at = format!("spec.resourceClaims[{i}]");
        let name = text(&c["name"]);
        dns_label(v, &c["name"], &format!("{at}.name"));
        if !name.is_empty() && names.contains(&name) {
            v.duplicate(&format!("{at}.name"), name);
        }
        names.push(name);
        let sources = [
            ("resourceClaimName", &c["resourceClaimName"]),
            ("resourceClaimTemplateName", &c["resourceClaimTemplateName"]),
        ];
        let set: Vec<_> = sources.iter().filter(|(_, s)| !s.is_null()).collect();
        match set.as_slice() {
            [(field, value)] => dns_subdomain(v, value, &format!("{at}.{field}"), 253),
            _ => v.invalid(
                &at,
                &Value::from(name),
                "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`",
            ),
        }
    }
}

/// A PodGroup update: `spec.resourceClaims` is immutable.
pub fn pod_group_update(old: &Value, new: &Value) -> Vec<Cause> {
    let mut v = Causes::default();
    if old.pointer("/spec/resourceClaims") != new.pointer("/spec/resourceClaims") {
        v.invalid(
            "spec.resourceClaims",
            &Value::from("object"),
            "field is immutable",
        );
    }
    v.0
}

/// Containers name only the pod's claims, each (claim, request) once.
fn container_claims(v: &mut Causes, spec: &Value) {
    let names: Vec<&str> = items(&spec["resourceClaims"])
        .iter()
        .map(|c| text(&c["name"]))
        .collect();
    for list in ["initContainers", "containers"] {
        for (i, c) in items(&spec[list]).iter().enumerate() {
            let mut used: Vec<(&str, &str)> = Vec::new();
            for (j, claim) in items(&c["resources"]["claims"]).iter().enumerate() {
                let at = format!("spec.{list}[{i}].resources.claims[{j}]");
                let name = text(&claim["name"]);
                let request = text(&claim["request"]);
                if name.is_empty() {
                    v.required(&format!("{at}.name"), "");
                } else if !names.contains(&name) {
                    v.push(
                        "FieldValueNotFound",
                        &format!("{at}.name"),
                        format!("Not found: {name:?}"),
                    );
                }
                if used.contains(&(name, request)) {
                    v.duplicate(&at, name);
                }
                used.push((name, request));
            }
        }
    }
}

/// API defaulting of a `resource.k8s.io` object of `plural`, as the server
/// decodes every write (create, update, patch).
pub fn default_object(plural: &str, obj: &mut Value) {
    let spec = match plural {
        "resourceclaims" => obj.get_mut("spec"),
        "resourceclaimtemplates" => obj.pointer_mut("/spec/spec"),
        _ => None,
    };
    if let Some(spec) = spec {
        default_claim_spec(spec);
    }
}

/// The causes of invalidity of a write to the `/status` subresource of a
/// `resource.k8s.io` object: only the status is checked (the rest is the
/// stored object, checked when it was written).
pub fn status(kind: &str, obj: &Value) -> Vec<Cause> {
    let mut v = Causes::default();
    if kind == "ResourceClaim" {
        // The spec is the stored one: only its request names are needed.
        let names = claim_spec(&mut Causes::default(), &obj["spec"], "spec");
        claim_status(&mut v, &obj["status"], &names);
    }
    v.0
}

/// API defaulting of a claim spec (`spec` of a claim, `spec.spec` of a
/// template): a request's `allocationMode` is `ExactCount` unless set, and
/// `count` is 1 in that mode unless set.
pub fn default_claim_spec(spec: &mut Value) {
    let Some(requests) = spec
        .pointer_mut("/devices/requests")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for r in requests.iter_mut() {
        if let Some(exact) = r.get_mut("exactly").and_then(Value::as_object_mut) {
            default_mode(exact);
        }
        if let Some(subs) = r.get_mut("firstAvailable").and_then(Value::as_array_mut) {
            subs.iter_mut()
                .filter_map(Value::as_object_mut)
                .for_each(default_mode);
        }
    }
}

fn default_mode(req: &mut Map<String, Value>) {
    let mode = req
        .entry("allocationMode")
        .or_insert_with(|| Value::from(EXACT_COUNT));
    if mode.as_str() == Some(EXACT_COUNT) {
        req.entry("count").or_insert_with(|| Value::from(1));
    }
}

#[derive(Default)]
struct Causes(Vec<Cause>);

impl Causes {
    fn push(&mut self, reason: &'static str, field: &str, message: String) {
        self.0.push(Cause {
            reason,
            field: field.to_string(),
            message,
        });
    }
    fn invalid(&mut self, field: &str, value: &Value, why: &str) {
        let shown = match value {
            Value::String(s) => format!("{s:?}"),
            other => other.to_string(),
        };
        self.push(
            "FieldValueInvalid",
            field,
            format!("Invalid value: {shown}: {why}"),
        );
    }
    fn required(&mut self, field: &str, why: &str) {
        let message = if why.is_empty() {
            "Required value".to_string()
        } else {
            format!("Required value: {why}")
        };
        self.push("FieldValueRequired", field, message);
    }
    fn duplicate(&mut self, field: &str, value: &str) {
        self.push(
            "FieldValueDuplicate",
            field,
            format!("Duplicate value: {value:?}"),
        );
    }
    fn too_many(&mut self, field: &str, have: usize, max: usize, what: &str) {
        self.push(
            "FieldValueTooMany",
            field,
            format!("Too many: {have}: must have at most {max} {what}"),
        );
    }
    fn unsupported(&mut self, field: &str, value: &Value, supported: &[&str]) {
        let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        let shown = match value {
            Value::String(s) => format!("{s:?}"),
            other => other.to_string(),
        };
        self.push(
            "FieldValueNotSupported",
            field,
            format!(
                "Unsupported value: {shown}: supported values: {}",
                list.join(", ")
            ),
        );
    }
    fn forbidden(&mut self, field: &str, why: &str) {
        self.push("FieldValueForbidden", field, format!("Forbidden: {why}"));
    }
}

fn items(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// A lowercase RFC 1123 label (request names, device names).
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && s.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric())
}

/// A lowercase RFC 1123 subdomain of at most `max` characters.
fn is_dns_subdomain(s: &str, max: usize) -> bool {
    !s.is_empty() && s.len() <= max && s.split('.').all(is_dns_label)
}

const LABEL_WORDS: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const SUBDOMAIN_WORDS: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

fn dns_label(v: &mut Causes, value: &Value, field: &str) {
    match value.as_str() {
        None | Some("") => v.required(field, ""),
        Some(s) if !is_dns_label(s) => v.invalid(field, value, LABEL_WORDS),
        _ => {}
    }
}

fn dns_subdomain(v: &mut Causes, value: &Value, field: &str, max: usize) {
    match value.as_str() {
        None | Some("") => v.required(field, ""),
        Some(s) if s.len() > max => v.push(
            "FieldValueTooLong",
            field,
            format!("Too long: may not be more than {max} bytes"),
        ),
        Some(s) if !is_dns_subdomain(s, max) => v.invalid(field, value, SUBDOMAIN_WORDS),
        _ => {}
    }
}

/// Checks a claim spec; returns the names results, constraints and config
/// may reference (`req`, `req/sub`).
fn claim_spec(v: &mut Causes, spec: &Value, path: &str) -> Vec<String> {
    let devices = &spec["devices"];
    let requests = items(&devices["requests"]);
    let req_path = format!("{path}.devices.requests");
    if requests.len() > MAX_REQUESTS {
        v.too_many(&req_path, requests.len(), MAX_REQUESTS, "items");
    }
    // Names a constraint or config may reference: `req` and `req/sub`.
    let mut names: Vec<String> = Vec::new();
    for (i, r) in requests.iter().enumerate() {
        let at = format!("{req_path}[{i}]");
        let name = text(&r["name"]);
        dns_label(v, &r["name"], &format!("{at}.name"));
        if !name.is_empty() && names.iter().any(|n| n == name) {
            v.duplicate(&format!("{at}.name"), name);
        }
        names.push(name.to_string());
        let (exact, first) = (&r["exactly"], &r["firstAvailable"]);
        // An empty firstAvailable list is no firstAvailable.
        let no_first = items(first).is_empty();
        match (exact.is_null(), no_first) {
            (true, true) => v.required(
                &at,
                "exactly one of `exactly` or `firstAvailable` is required",
            ),
            (false, false) => v.invalid(
                &at,
                &Value::Null,
                "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set",
            ),
            (false, true) => device_request(v, exact, &format!("{at}.exactly"), true),
            (true, false) => {
                let subs = items(first);
                let sub_path = format!("{at}.firstAvailable");
                if subs.is_empty() {
                    v.required(&sub_path, "");
                }
                if subs.len() > MAX_SUBREQUESTS {
                    v.too_many(&sub_path, subs.len(), MAX_SUBREQUESTS, "items");
                }
                let mut sub_names: Vec<&str> = Vec::new();
                for (j, s) in subs.iter().enumerate() {
                    let sat = format!("{sub_path}[{j}]");
                    let sname = text(&s["name"]);
                    dns_label(v, &s["name"], &format!("{sat}.name"));
                    if !sname.is_empty() && sub_names.contains(&sname) {
                        v.duplicate(&format!("{sat}.name"), sname);
                    }
                    sub_names.push(sname);
                    names.push(format!("{name}/{sname}"));
                    device_request(v, s, &sat, false);
                }
            }
        }
    }
    let constraints = items(&devices["constraints"]);
    let cpath = format!("{path}.devices.constraints");
    if constraints.len() > MAX_CONSTRAINTS {
        v.too_many(&cpath, constraints.len(), MAX_CONSTRAINTS, "items");
    }
    for (i, c) in constraints.iter().enumerate() {
        let at = format!("{cpath}[{i}]");
        request_refs(v, &c["requests"], &format!("{at}.requests"), &names);
        // matchAttribute wins when both are set, as upstream's check goes;
        // neither is worded as upstream words it.
        let (m, d) = (&c["matchAttribute"], &c["distinctAttribute"]);
        if !m.is_null() {
            fully_qualified(v, m, &format!("{at}.matchAttribute"));
        } else if !d.is_null() {
            fully_qualified(v, d, &format!("{at}.distinctAttribute"));
        } else {
            v.required(
                &at,
                "exactly one of \"matchAttribute\" or \"distinctAttribute\" is required, but multiple fields are set",
            );
        }
    }
    let configs = items(&devices["config"]);
    let fpath = format!("{path}.devices.config");
    if configs.len() > MAX_CONFIGS {
        v.too_many(&fpath, configs.len(), MAX_CONFIGS, "items");
    }
    for (i, c) in configs.iter().enumerate() {
        let at = format!("{fpath}[{i}]");
        request_refs(v, &c["requests"], &format!("{at}.requests"), &names);
        opaque(v, &c["opaque"], &format!("{at}.opaque"));
    }
    names
}

/// One `exactly` request or `firstAvailable` subrequest.
fn device_request(v: &mut Causes, r: &Value, at: &str, exact: bool) {
    dns_subdomain(
        v,
        &r["deviceClassName"],
        &format!("{at}.deviceClassName"),
        253,
    );
    let mode = &r["allocationMode"];
    let count = &r["count"];
    match mode.as_str().unwrap_or(EXACT_COUNT) {
        EXACT_COUNT => match count {
            Value::Null => {}
            Value::Number(n) => match n.as_i64() {
                Some(c) if c <= 0 => {
                    v.invalid(&format!("{at}.count"), count, "must be greater than zero")
                }
                Some(_) => {}
                None => v.invalid(&format!("{at}.count"), count, "must be an integer"),
            },
            _ => v.invalid(&format!("{at}.count"), count, "must be an integer"),
        },
        ALL => {
            if !count.is_null() && count.as_i64() != Some(0) {
                v.invalid(
                    &format!("{at}.count"),
                    count,
                    "must not be specified when allocationMode is 'All'",
                );
            }
        }
        _ => v.unsupported(&format!("{at}.allocationMode"), mode, &[ALL, EXACT_COUNT]),
    }
    selectors(v, &r["selectors"], &format!("{at}.selectors"));
    capacity_amounts(
        v,
        &r["capacity"]["requests"],
        &format!("{at}.capacity.requests"),
    );
    if !exact && r["adminAccess"].as_bool() == Some(true) {
        v.forbidden(
            &format!("{at}.adminAccess"),
            "admin access may not be requested in a subrequest",
        );
    }
}

fn selectors(v: &mut Causes, list: &Value, path: &str) {
    let list = items(list);
    if list.len() > MAX_SELECTORS {
        v.too_many(path, list.len(), MAX_SELECTORS, "items");
    }
    for (i, s) in list.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let Some(expr) = s.pointer("/cel/expression") else {
            v.required(&format!("{at}.cel"), "");
            continue;
        };
        let field = format!("{at}.cel.expression");
        let Some(text) = expr.as_str() else {
            v.invalid(&field, expr, "must be a string");
            continue;
        };
        if text.len() > cel::MAX_EXPRESSION_BYTES {
            v.push(
                "FieldValueTooLong",
                &field,
                format!(
                    "Too long: may not be more than {} bytes",
                    cel::MAX_EXPRESSION_BYTES
                ),
            );
            continue;
        }
        if let Some(why) = cel::compile_error(text) {
            v.invalid(&field, expr, &why);
        }
    }
}

const REQUEST_REF_WORDS: &str = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'";

fn request_refs(v: &mut Causes, refs: &Value, path: &str, names: &[String]) {
    for (j, r) in items(refs).iter().enumerate() {
        let name = text(r);
        if !names.iter().any(|n| n == name) {
            v.invalid(&format!("{path}[{j}]"), r, REQUEST_REF_WORDS);
        }
    }
}

/// `<domain>/<id>`: an attribute name with its domain.
fn fully_qualified(v: &mut Causes, value: &Value, field: &str) {
    let s = text(value);
    let ok = s
        .split_once('/')
        .is_some_and(|(domain, id)| is_dns_subdomain(domain, 63) && is_c_identifier(id));
    if !ok {
        v.invalid(
            field,
            value,
            "must include a domain and a C identifier of at most 32 characters, e.g. `dra.example.com/model`",
        );
    }
}

fn is_c_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_ID_LENGTH
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !s.as_bytes()[0].is_ascii_digit()
}

fn opaque(v: &mut Causes, o: &Value, path: &str) {
    if o.is_null() {
        v.required(path, "");
        return;
    }
    dns_subdomain(v, &o["driver"], &format!("{path}.driver"), 63);
    if o["parameters"].is_null() {
        v.required(&format!("{path}.parameters"), "");
    }
}

fn claim_status(v: &mut Causes, status: &Value, names: &[String]) {
    let reserved = items(&status["reservedFor"]);
    if reserved.len() > MAX_RESERVED_FOR {
        v.too_many(
            "status.reservedFor",
            reserved.len(),
            MAX_RESERVED_FOR,
            "items",
        );
    }
    if !reserved.is_empty() && status["allocation"].is_null() {
        v.forbidden(
            "status.reservedFor",
            "may not be specified when `allocated` is not set",
        );
    }
    let mut uids: Vec<&str> = Vec::new();
    for (i, r) in reserved.iter().enumerate() {
        let at = format!("status.reservedFor[{i}]");
        for key in ["resource", "name", "uid"] {
            if text(&r[key]).is_empty() {
                v.required(&format!("{at}.{key}"), "");
            }
        }
        let uid = text(&r["uid"]);
        if !uid.is_empty() && uids.contains(&uid) {
            v.duplicate(&format!("{at}.uid"), uid);
        }
        uids.push(uid);
    }
    let results = items(&status["allocation"]["devices"]["results"]);
    if results.len() > MAX_ALLOCATED_DEVICES as usize {
        v.too_many(
            "status.allocation.devices.results",
            results.len(),
            MAX_ALLOCATED_DEVICES as usize,
            "items",
        );
    }
    for (i, r) in results.iter().enumerate() {
        let at = format!("status.allocation.devices.results[{i}]");
        for key in ["request", "driver", "pool", "device"] {
            if text(&r[key]).is_empty() {
                v.required(&format!("{at}.{key}"), "");
            }
        }
        let request = text(&r["request"]);
        if !request.is_empty() && !names.iter().any(|n| n == request) {
            v.invalid(&format!("{at}.request"), &r["request"], REQUEST_REF_WORDS);
        }
        if !r["shareID"].is_null() {
            share_id(v, &r["shareID"], &format!("{at}.shareID"));
        }
        capacity_amounts(v, &r["consumedCapacity"], &format!("{at}.consumedCapacity"));
    }
    // A device's status is keyed by driver, pool, device and share ID: a
    // device shared by several results of the claim has one per share.
    let key = |d: &Value| -> String {
        let mut id = format!(
            "{}/{}/{}",
            text(&d["driver"]),
            text(&d["pool"]),
            text(&d["device"])
        );
        if let Some(share) = d["shareID"].as_str().filter(|s| !s.is_empty()) {
            id.push('/');
            id.push_str(share);
        }
        id
    };
    let allocated: Vec<String> = results.iter().map(key).collect();
    let mut listed: Vec<String> = Vec::new();
    for (i, d) in items(&status["devices"]).iter().enumerate() {
        let at = format!("status.devices[{i}]");
        for field in ["driver", "pool", "device"] {
            if text(&d[field]).is_empty() {
                v.required(&format!("{at}.{field}"), "");
            }
        }
        if !d["shareID"].is_null() {
            share_id(v, &d["shareID"], &format!("{at}.shareID"));
        }
        let id = key(d);
        // The real server shows the key as it prints it, unquoted.
        if !allocated.contains(&id) {
            v.push(
                "FieldValueInvalid",
                &at,
                format!("Invalid value: {id}: must be an allocated device in the claim"),
            );
        }
        if listed.contains(&id) {
            v.push("FieldValueDuplicate", &at, format!("Duplicate value: {id}"));
        }
        listed.push(id);
    }
}

fn slice_spec(v: &mut Causes, spec: &Value) {
    dns_subdomain(v, &spec["driver"], "spec.driver", 63);
    let pool = &spec["pool"];
    let name = &pool["name"];
    match name.as_str() {
        None | Some("") => v.required("spec.pool.name", ""),
        Some(s) if s.len() > 253 || !s.split('/').all(|p| is_dns_subdomain(p, 253)) => v.invalid(
            "spec.pool.name",
            name,
            "must be one or more DNS subdomains separated by slashes",
        ),
        _ => {}
    }
    match pool["generation"].as_i64() {
        Some(g) if g >= 0 => {}
        None if pool["generation"].is_null() => {}
        _ => v.invalid(
            "spec.pool.generation",
            &pool["generation"],
            "must be greater than or equal to zero",
        ),
    }
    match pool["resourceSliceCount"].as_i64() {
        Some(c) if c > 0 => {}
        _ => v.invalid(
            "spec.pool.resourceSliceCount",
            &pool["resourceSliceCount"],
            "must be greater than zero",
        ),
    }
    const SCOPE_WORDS: &str = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required";
    let set = node_scope(v, spec, "spec");
    match set.len() {
        0 => v.required("spec", SCOPE_WORDS),
        1 => {}
        _ => v.invalid(
            "spec",
            &Value::from(format!("{{{}}}", set.join(", "))),
            &format!("{SCOPE_WORDS}, but multiple fields are set"),
        ),
    }
    if let Some(sel) = spec.get("nodeSelector").filter(|s| !s.is_null()) {
        let terms = items(&sel["nodeSelectorTerms"]);
        if terms.len() != 1 {
            v.invalid(
                "spec.nodeSelector.nodeSelectorTerms",
                &sel["nodeSelectorTerms"],
                "must have exactly one node selector term",
            );
        }
    }
    let per_device = spec["perDeviceNodeSelection"].as_bool() == Some(true);
    let devices = items(&spec["devices"]);
    // Fewer devices per slice when they carry taints or consume counters.
    let heavy = devices
        .iter()
        .any(|d| !items(&d["taints"]).is_empty() || !items(&d["consumesCounters"]).is_empty());
    let max = if heavy {
        MAX_DEVICES_PER_SLICE_WITH_TAINTS_OR_COUNTERS
    } else {
        MAX_DEVICES_PER_SLICE
    };
    if devices.len() > max {
        v.too_many("spec.devices", devices.len(), max, "items");
    }
    let mut names: Vec<&str> = Vec::new();
    for (i, d) in devices.iter().enumerate() {
        let at = format!("spec.devices[{i}]");
        let name = text(&d["name"]);
        dns_label(v, &d["name"], &format!("{at}.name"));
        if !name.is_empty() && names.contains(&name) {
            v.duplicate(&format!("{at}.name"), name);
        }
        names.push(name);
        device(v, d, &at, per_device);
    }
}

/// The node scope fields set on a slice spec or a device (`nodeName`,
/// `nodeSelector`, `allNodes`, and for a spec `perDeviceNodeSelection`),
/// as upstream names them; a boolean set to false or an empty node name is
/// invalid rather than unset.
fn node_scope(v: &mut Causes, obj: &Value, path: &str) -> Vec<&'static str> {
    let mut set = Vec::new();
    match &obj["nodeName"] {
        Value::Null => {}
        Value::String(s) if s.is_empty() => v.invalid(
            &format!("{path}.nodeName"),
            &obj["nodeName"],
            if path == "spec" {
                "must be either unset or set to a non-empty string"
            } else {
                "must not be empty"
            },
        ),
        name => {
            set.push("`nodeName`");
            dns_subdomain(v, name, &format!("{path}.nodeName"), 253);
        }
    }
    if !obj["nodeSelector"].is_null() {
        set.push("`nodeSelector`");
    }
    let flags: &[(&str, &'static str)] = if path == "spec" {
        &[
            ("allNodes", "`allNodes`"),
            ("perDeviceNodeSelection", "`perDeviceNodeSelection`"),
        ]
    } else {
        &[("allNodes", "`allNodes`")]
    };
    for (key, word) in flags {
        match obj[*key].as_bool() {
            None => {}
            Some(true) => set.push(*word),
            Some(false) => v.invalid(
                &format!("{path}.{key}"),
                &obj[*key],
                "must be either unset or set to true",
            ),
        }
    }
    set
}

fn device(v: &mut Causes, d: &Value, at: &str, per_device: bool) {
    let attrs = d["attributes"].as_object();
    let caps = d["capacity"].as_object();
    let total = attrs.map_or(0, Map::len) + caps.map_or(0, Map::len);
    if total > MAX_ATTRIBUTES_AND_CAPACITIES {
        v.invalid(
            at,
            &Value::from(total),
            &format!(
                "the total number of attributes and capacities must not exceed {MAX_ATTRIBUTES_AND_CAPACITIES}"
            ),
        );
    }
    for (key, value) in attrs.into_iter().flatten() {
        let field = format!("{at}.attributes[{key}]");
        qualified_name(v, key, &field);
        attribute(v, value, &field);
    }
    let shared = d["allowMultipleAllocations"].as_bool() == Some(true);
    for (key, value) in caps.into_iter().flatten() {
        let field = format!("{at}.capacity[{key}]");
        qualified_name(v, key, &field);
        let total = match &value["value"] {
            Value::Null => {
                v.required(&format!("{field}.value"), "");
                None
            }
            q => quantity(v, q, &format!("{field}.value")),
        };
        let policy = &value["requestPolicy"];
        if policy.is_null() {
            continue;
        }
        let at = format!("{field}.requestPolicy");
        if shared {
            request_policy(v, total, &value["value"], policy, &at);
        } else {
            v.forbidden(
                &at,
                "only a device with `allowMultipleAllocations: true` may have a request policy",
            );
        }
    }
    const DEVICE_SCOPE_WORDS: &str = "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` is set to true in the ResourceSlice spec";
    if per_device {
        let set = node_scope(v, d, at);
        match set.len() {
            0 => v.required(at, DEVICE_SCOPE_WORDS),
            1 => {}
            _ => v.invalid(
                at,
                &Value::from(format!("{{{}}}", set.join(", "))),
                DEVICE_SCOPE_WORDS,
            ),
        }
    } else if ["nodeName", "nodeSelector", "allNodes"]
        .iter()
        .any(|k| !d[*k].is_null())
    {
        v.invalid(
            at,
            &Value::Null,
            "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set to true in the ResourceSlice spec",
        );
    }
    for (i, t) in items(&d["taints"]).iter().enumerate() {
        taint(v, t, &format!("{at}.taints[{i}]"));
    }
}

/// An attribute or capacity name: a C identifier, optionally prefixed by
/// a DNS subdomain and `/`.
fn qualified_name(v: &mut Causes, key: &str, field: &str) {
    let (domain, id) = match key.split_once('/') {
        Some((d, id)) => (Some(d), id),
        None => (None, key),
    };
    let ok = domain.is_none_or(|d| is_dns_subdomain(d, 63)) && is_c_identifier(id);
    if !ok {
        v.invalid(
            field,
            &Value::from(key),
            "must be a C identifier of at most 32 characters, optionally prefixed by a DNS subdomain and '/'",
        );
    }
}

const QUANTITY_WORDS: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// A quantity field (a string, or a number as some clients write it):
/// parsed, and not below zero.
fn quantity(v: &mut Causes, value: &Value, field: &str) -> Option<Quantity> {
    let raw = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => {
            v.invalid(field, value, QUANTITY_WORDS);
            return None;
        }
    };
    match Quantity::parse(&raw) {
        Ok(q) if q.is_negative() => {
            v.invalid(field, value, "must be greater than or equal to 0");
            None
        }
        Ok(q) => Some(q),
        Err(_) => {
            v.invalid(field, value, QUANTITY_WORDS);
            None
        }
    }
}

/// A quantity as the message of a cause shows it: as written.
fn written(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Entries a capacity's `requestPolicy.validValues` may list.
pub const MAX_VALID_VALUES: usize = 10;

/// The `requestPolicy` of a capacity of `total` (the capacity's `value`,
/// `None` when it is invalid) on a device that allows multiple
/// allocations: at most one of `validValues` / `validRange`, and with
/// either a `default` that the policy admits; every bound within the
/// capacity. Arithmetic is on whole units, rounded up, as the real server
/// does without fractional ranges.
fn request_policy(v: &mut Causes, total: Option<Quantity>, total_raw: &Value, p: &Value, at: &str) {
    let values = items(&p["validValues"]);
    let range = &p["validRange"];
    if !values.is_empty() && !range.is_null() {
        v.forbidden(
            at,
            "only one of `validValues` and `validRange` may be set, not both",
        );
        return;
    }
    let default_raw = &p["default"];
    let default = if default_raw.is_null() {
        None
    } else {
        quantity(v, default_raw, &format!("{at}.default"))
    };
    let cap_words = format!(
        "must not be larger than the capacity value {}",
        written(total_raw)
    );
    let over = |q: Quantity| total.is_some_and(|t| q > t);
    if !values.is_empty() {
        let path = format!("{at}.validValues");
        if values.len() > MAX_VALID_VALUES {
            v.too_many(&path, values.len(), MAX_VALID_VALUES, "items");
            return;
        }
        if default_raw.is_null() {
            v.required(
                &format!("{at}.default"),
                "required when `validValues` is set",
            );
            return;
        }
        let mut seen: Vec<Quantity> = Vec::new();
        let mut previous: Option<Quantity> = None;
        for (i, raw) in values.iter().enumerate() {
            let field = format!("{path}[{i}]");
            let Some(q) = quantity(v, raw, &field) else {
                continue;
            };
            if previous.is_some_and(|prev| q < prev) {
                v.invalid(&field, &Value::from(written(raw)), "must not be smaller than the value before it: values are sorted in ascending order");
            }
            previous = Some(q);
            if over(q) {
                v.invalid(&field, &Value::from(written(raw)), &cap_words);
            }
            if seen.contains(&q) {
                v.duplicate(&field, &written(raw));
            }
            seen.push(q);
        }
        if let Some(d) = default
            && !seen.contains(&d)
        {
            v.invalid(
                &path,
                &Value::from(written(default_raw)),
                "the default must be one of the valid values",
            );
        }
        return;
    }
    if range.is_null() {
        return;
    }
    let path = format!("{at}.validRange");
    if default_raw.is_null() {
        v.required(
            &format!("{at}.default"),
            "required when `validRange` is set",
        );
        return;
    }
    let min_raw = &range["min"];
    if min_raw.is_null() {
        v.required(&format!("{path}.min"), "required when `validRange` is set");
        return;
    }
    let bound = |v: &mut Causes, key: &str| {
        let raw = &range[key];
        (!raw.is_null())
            .then(|| quantity(v, raw, &format!("{path}.{key}")))
            .flatten()
    };
    let min = bound(v, "min");
    let max = bound(v, "max");
    let step_raw = &range["step"];
    let step = match step_raw {
        Value::Null => None,
        raw => match quantity(v, raw, &format!("{path}.step")) {
            Some(q) if q.sign() == 0 => {
                v.invalid(
                    &format!("{path}.step"),
                    &Value::from(written(raw)),
                    "must be greater than zero",
                );
                None
            }
            q => q,
        },
    };
    let shown = |raw: &Value| Value::from(written(raw));
    // Upstream reports the default's place in the range under
    // `validRange.default`; so does this.
    let default_at = format!("{path}.default");
    if let Some(min) = min {
        if over(min) {
            v.invalid(&format!("{path}.min"), &shown(min_raw), &cap_words);
        }
        if default.is_some_and(|d| d < min) {
            v.invalid(
                &default_at,
                &shown(default_raw),
                &format!("must not be smaller than the minimum {}", written(min_raw)),
            );
        }
    }
    if let Some(max) = max {
        let max_raw = &range["max"];
        if min.is_some_and(|m| m > max) {
            v.invalid(
                &format!("{path}.max"),
                &shown(max_raw),
                &format!("must not be smaller than the minimum {}", written(min_raw)),
            );
        }
        if over(max) {
            v.invalid(&format!("{path}.max"), &shown(max_raw), &cap_words);
        }
        if default.is_some_and(|d| d > max) {
            v.invalid(
                &default_at,
                &shown(default_raw),
                &format!("must not be larger than the maximum {}", written(max_raw)),
            );
        }
    }
    let (Some(min), Some(step)) = (min, step) else {
        return;
    };
    let step_at = format!("{path}.step");
    if let (Some(t), Some(first)) = (total, min.checked_add(step))
        && first > t
    {
        v.invalid(
            &step_at,
            &shown(step_raw),
            &format!(
                "the minimum plus one step must not be larger than the capacity value {}",
                written(total_raw)
            ),
        );
    }
    let (base, size) = (i128::from(min.value()), i128::from(step.value()));
    for (q, raw) in [(default, default_raw), (max, &range["max"])] {
        if let Some(q) = q
            && size > 0
            && (i128::from(q.value()) - base) % size != 0
        {
            v.invalid(
                &step_at,
                &shown(raw),
                &format!(
                    "must be the minimum {} plus a whole number of steps of {}",
                    written(min_raw),
                    written(step_raw)
                ),
            );
        }
    }
}

/// A map of capacity names to quantities (a request's `capacity.requests`,
/// a result's `consumedCapacity`): qualified names, quantities of at
/// least zero.
fn capacity_amounts(v: &mut Causes, map: &Value, path: &str) {
    if map.is_null() {
        return;
    }
    let Some(entries) = map.as_object() else {
        v.invalid(path, map, "must be a map of capacity names to quantities");
        return;
    };
    for (key, value) in entries {
        let field = format!("{path}[{key}]");
        qualified_name(v, key, &field);
        quantity(v, value, &field);
    }
}

/// A share ID: a UID in its normalized form (lowercase, hyphenated).
fn share_id(v: &mut Causes, value: &Value, field: &str) {
    let ok = value.as_str().is_some_and(|s| {
        s.len() == 36
            && s.bytes().enumerate().all(|(i, b)| match i {
                8 | 13 | 18 | 23 => b == b'-',
                _ => b.is_ascii_digit() || (b'a'..=b'f').contains(&b),
            })
    });
    if !ok {
        v.invalid(
            field,
            value,
            "must be a UID in its normalized form: 32 lowercase hexadecimal digits grouped 8-4-4-4-12 by hyphens",
        );
    }
}

/// A device attribute: exactly one typed value.
fn attribute(v: &mut Causes, value: &Value, field: &str) {
    const KINDS: [&str; 8] = [
        "int", "bool", "string", "version", "ints", "bools", "strings", "versions",
    ];
    let set: Vec<&str> = KINDS
        .iter()
        .copied()
        .filter(|k| value.get(*k).is_some_and(|x| !x.is_null()))
        .collect();
    if set.len() != 1 {
        // None set is shown as "", several as the attribute (upstream).
        let shown = if set.is_empty() {
            Value::from("")
        } else {
            value.clone()
        };
        v.invalid(field, &shown, "exactly one value must be specified");
        return;
    }
    let check_string = |v: &mut Causes, s: &Value| {
        if text(s).len() > MAX_ATTRIBUTE_STRING {
            v.push(
                "FieldValueTooLong",
                &format!("{field}.{}", set[0]),
                format!("Too long: may not be more than {MAX_ATTRIBUTE_STRING} bytes"),
            );
        }
    };
    match set[0] {
        "string" | "version" => check_string(v, &value[set[0]]),
        "strings" | "versions" => items(&value[set[0]])
            .iter()
            .for_each(|s| check_string(v, s)),
        _ => {}
    }
}

fn taint(v: &mut Causes, t: &Value, path: &str) {
    if t.is_null() {
        v.required(path, "");
        return;
    }
    match t["key"].as_str() {
        None | Some("") => v.required(&format!("{path}.key"), ""),
        Some(k) => qualified_name(v, k, &format!("{path}.key")),
    }
    let effect = &t["effect"];
    match effect.as_str() {
        None | Some("") => v.required(&format!("{path}.effect"), ""),
        Some("NoSchedule" | "NoExecute" | "None") => {}
        Some(_) => v.unsupported(
            &format!("{path}.effect"),
            effect,
            &["NoExecute", "NoSchedule", "None"],
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(kind: &str, obj: Value) -> Vec<String> {
        object(kind, &obj)
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    fn claim(requests: Value) -> Value {
        json!({"spec": {"devices": {"requests": requests}}})
    }

    #[test]
    fn a_valid_claim_passes() {
        let c = json!({"spec": {"devices": {
            "requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "count": 2,
                    "selectors": [{"cel": {"expression": "device.driver == \"gpu.kwok.muster.dev\""}}]}},
                {"name": "nic", "firstAvailable": [
                    {"name": "fast", "deviceClassName": "nic", "allocationMode": "All"},
                    {"name": "slow", "deviceClassName": "nic"}]}],
            "constraints": [{"requests": ["gpu", "nic/fast"], "matchAttribute": "gpu.kwok.muster.dev/pcieRoot"}],
            "config": [{"requests": ["gpu"], "opaque": {"driver": "gpu.kwok.muster.dev", "parameters": {}}}]
        }}});
        assert!(fields("ResourceClaim", c).is_empty());
    }

    #[test]
    fn request_names_are_unique_dns_labels() {
        let c = claim(json!([
            {"name": "gpu", "exactly": {"deviceClassName": "c"}},
            {"name": "gpu", "exactly": {"deviceClassName": "c"}},
            {"name": "Bad_Name", "exactly": {"deviceClassName": "c"}}
        ]));
        let f = fields("ResourceClaim", c);
        assert_eq!(
            f[0],
            "spec.devices.requests[1].name: Duplicate value: \"gpu\""
        );
        assert!(f[1].starts_with(
            "spec.devices.requests[2].name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 label"
        ));
    }

    #[test]
    fn exactly_one_of_exactly_and_first_available() {
        let f = fields(
            "ResourceClaim",
            claim(
                json!([{"name": "a"}, {"name": "b", "exactly": {"deviceClassName": "c"},
                "firstAvailable": [{"name": "x", "deviceClassName": "c"}]}]),
            ),
        );
        assert_eq!(
            f,
            [
                "spec.devices.requests[0]: Required value: exactly one of `exactly` or `firstAvailable` is required",
                "spec.devices.requests[1]: Invalid value: null: exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"
            ]
        );
    }

    #[test]
    fn allocation_modes_and_counts() {
        let f = fields(
            "ResourceClaim",
            claim(json!([
                {"name": "a", "exactly": {"deviceClassName": "c", "count": 0}},
                {"name": "b", "exactly": {"deviceClassName": "c", "allocationMode": "Some"}},
                {"name": "c", "exactly": {"deviceClassName": "c", "allocationMode": "All", "count": 3}},
                {"name": "d", "exactly": {"deviceClassName": "c", "count": 9_223_372_036_854_775_807_i64}},
                {"name": "e", "exactly": {"deviceClassName": "c", "count": 1e30}}
            ])),
        );
        assert_eq!(
            f[0],
            "spec.devices.requests[0].exactly.count: Invalid value: 0: must be greater than zero"
        );
        assert_eq!(
            f[1],
            "spec.devices.requests[1].exactly.allocationMode: Unsupported value: \"Some\": supported values: \"All\", \"ExactCount\""
        );
        assert_eq!(
            f[2],
            "spec.devices.requests[2].exactly.count: Invalid value: 3: must not be specified when allocationMode is 'All'"
        );
        // No upper bound but the integer's: a real server accepts it.
        assert_eq!(f.len(), 4);
        assert!(f[3].contains("must be an integer"), "{}", f[3]);
    }

    #[test]
    fn cel_errors_name_the_expression() {
        let f = fields(
            "ResourceClaimTemplate",
            json!({"spec": {"spec": {"devices": {"requests": [{"name": "a", "exactly": {
                "deviceClassName": "c", "selectors": [{"cel": {"expression": "device.driver =="}}]}}]}}}}),
        );
        assert_eq!(f.len(), 1);
        assert!(
            f[0].starts_with("spec.spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value: \"device.driver ==\": compilation failed"),
            "{}",
            f[0]
        );
        let f = fields(
            "DeviceClass",
            json!({"spec": {"selectors": [{"cel": {"expression": "gpu == 1"}}]}}),
        );
        assert!(f[0].ends_with("undeclared reference to 'gpu'"), "{}", f[0]);
    }

    #[test]
    fn a_class_extended_resource_name_is_a_valid_extended_resource_name() {
        let class = |name: &str| json!({"spec": {"extendedResourceName": name}});
        assert!(fields("DeviceClass", class("example.com/gpu")).is_empty());
        for bad in [
            "gpu",
            "kubernetes.io/gpu",
            "deviceclass.resource.kubernetes.io/gpu",
            "requests.example.com/gpu",
            "example.com/-gpu",
        ] {
            let f = fields("DeviceClass", class(bad));
            assert_eq!(
                f,
                [format!(
                    "spec.extendedResourceName: Invalid value: \"{bad}\": must be a valid extended resource name"
                )],
                "{bad}"
            );
        }
    }

    #[test]
    fn constraints_reference_existing_requests() {
        let c = json!({"spec": {"devices": {
            "requests": [{"name": "gpu", "exactly": {"deviceClassName": "c"}}],
            "constraints": [{"requests": ["gpu", "nic"], "matchAttribute": "x.io/numa"}]}}});
        let f = fields("ResourceClaim", c);
        assert_eq!(f.len(), 1);
        assert!(f[0].starts_with("spec.devices.constraints[0].requests[1]: Invalid value: \"nic\": must be the name of a request"));
    }

    #[test]
    fn slices_need_one_node_scope_and_unique_devices() {
        let s = json!({"spec": {"driver": "gpu.kwok.muster.dev", "nodeName": "n", "allNodes": true,
            "pool": {"name": "n", "generation": 0, "resourceSliceCount": 0},
            "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "h100"}, "index": {"int": 0, "bool": true}},
                          "capacity": {"memory": {"value": "80Gi"}}},
                        {"name": "gpu-0"}]}});
        let f = fields("ResourceSlice", s);
        assert_eq!(
            f,
            [
                "spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero",
                "spec: Invalid value: \"{`nodeName`, `allNodes`}\": exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but multiple fields are set",
                "spec.devices[0].attributes[index]: Invalid value: {\"bool\":true,\"int\":0}: exactly one value must be specified",
                "spec.devices[1].name: Duplicate value: \"gpu-0\"",
            ]
        );
        let none = json!({"spec": {"driver": "", "pool": {"name": "p", "generation": 0, "resourceSliceCount": 1}}});
        let f = fields("ResourceSlice", none);
        assert_eq!(f[0], "spec.driver: Required value");
        assert!(f[1].starts_with("spec: Required value: exactly one of `nodeName`"));
    }

    #[test]
    fn attributes_and_capacities_are_bounded() {
        let attrs: Map<String, Value> = (0..33)
            .map(|i| (format!("a{i}"), json!({"int": i})))
            .collect();
        let s = json!({"spec": {"driver": "d.io", "allNodes": true,
            "pool": {"name": "p", "generation": 0, "resourceSliceCount": 1},
            "devices": [{"name": "d", "attributes": attrs}]}});
        let f = fields("ResourceSlice", s);
        assert_eq!(
            f,
            [
                "spec.devices[0]: Invalid value: 33: the total number of attributes and capacities must not exceed 32"
            ]
        );
    }

    /// A slice of one device with capacity `bw` (`value` and the
    /// `requestPolicy` given), shared or not.
    fn shared_slice(shared: bool, policy: Value) -> Value {
        let mut device = json!({"name": "nic-0", "capacity": {"bw": {"value": "100Gi"}}});
        if shared {
            device["allowMultipleAllocations"] = json!(true);
        }
        if !policy.is_null() {
            device["capacity"]["bw"]["requestPolicy"] = policy;
        }
        json!({"spec": {"driver": "d.io", "nodeName": "n",
            "pool": {"name": "n", "generation": 0, "resourceSliceCount": 1},
            "devices": [device]}})
    }

    #[test]
    fn request_policies_of_consumable_capacity() {
        const AT: &str = "spec.devices[0].capacity[bw].requestPolicy";
        let accepted = [
            json!(null),
            json!({"default": "10Gi"}),
            json!({"default": "10Gi", "validRange": {"min": "1Gi"}}),
            json!({"default": "10Gi", "validRange": {"min": "0", "max": "100Gi", "step": "1Gi"}}),
            json!({"default": "10Gi", "validRange": {"min": "2Gi", "max": "98Gi", "step": "4Gi"}}),
            json!({"default": "10Gi", "validValues": ["1Gi", "10Gi", "100Gi"]}),
        ];
        for policy in accepted {
            let f = fields("ResourceSlice", shared_slice(true, policy.clone()));
            assert!(f.is_empty(), "{policy}: {f:?}");
        }
        let many: Vec<String> = (1..=11).map(|i| format!("{i}Gi")).collect();
        let refused = [
            (
                false,
                json!({"default": "10Gi"}),
                format!(
                    "{AT}: Forbidden: only a device with `allowMultipleAllocations: true` may have a request policy"
                ),
            ),
            (
                true,
                json!({"default": "1Gi", "validValues": ["1Gi"], "validRange": {"min": "1Gi"}}),
                format!(
                    "{AT}: Forbidden: only one of `validValues` and `validRange` may be set, not both"
                ),
            ),
            (
                true,
                json!({"validValues": ["1Gi"]}),
                format!("{AT}.default: Required value: required when `validValues` is set"),
            ),
            (
                true,
                json!({"default": "1Gi", "validValues": many}),
                format!("{AT}.validValues: Too many: 11: must have at most 10 items"),
            ),
            (
                true,
                json!({"default": "1Gi", "validValues": ["2Gi", "1Gi"]}),
                format!(
                    "{AT}.validValues[1]: Invalid value: \"1Gi\": must not be smaller than the value before it: values are sorted in ascending order"
                ),
            ),
            (
                true,
                json!({"default": "1Gi", "validValues": ["1Gi", "1024Mi"]}),
                format!("{AT}.validValues[1]: Duplicate value: \"1024Mi\""),
            ),
            (
                true,
                json!({"default": "1Gi", "validValues": ["1Gi", "200Gi"]}),
                format!(
                    "{AT}.validValues[1]: Invalid value: \"200Gi\": must not be larger than the capacity value 100Gi"
                ),
            ),
            (
                true,
                json!({"default": "3Gi", "validValues": ["1Gi", "2Gi"]}),
                format!(
                    "{AT}.validValues: Invalid value: \"3Gi\": the default must be one of the valid values"
                ),
            ),
            (
                true,
                json!({"default": "-1", "validValues": ["1Gi"]}),
                format!("{AT}.default: Invalid value: \"-1\": must be greater than or equal to 0"),
            ),
            (
                true,
                json!({"default": "1Gi", "validValues": ["1Gi", "x"]}),
                format!("{AT}.validValues[1]: Invalid value: \"x\": {QUANTITY_WORDS}"),
            ),
            (
                true,
                json!({"validRange": {"min": "1Gi"}}),
                format!("{AT}.default: Required value: required when `validRange` is set"),
            ),
            (
                true,
                json!({"default": "1Gi", "validRange": {"max": "2Gi"}}),
                format!("{AT}.validRange.min: Required value: required when `validRange` is set"),
            ),
            (
                true,
                json!({"default": "1Gi", "validRange": {"min": "-1Gi"}}),
                format!(
                    "{AT}.validRange.min: Invalid value: \"-1Gi\": must be greater than or equal to 0"
                ),
            ),
            (
                true,
                json!({"default": "200Gi", "validRange": {"min": "101Gi"}}),
                format!(
                    "{AT}.validRange.min: Invalid value: \"101Gi\": must not be larger than the capacity value 100Gi"
                ),
            ),
            (
                true,
                json!({"default": "1Gi", "validRange": {"min": "2Gi"}}),
                format!(
                    "{AT}.validRange.default: Invalid value: \"1Gi\": must not be smaller than the minimum 2Gi"
                ),
            ),
            (
                true,
                json!({"default": "4Gi", "validRange": {"min": "4Gi", "max": "3Gi"}}),
                format!(
                    "{AT}.validRange.max: Invalid value: \"3Gi\": must not be smaller than the minimum 4Gi"
                ),
            ),
            (
                true,
                json!({"default": "4Gi", "validRange": {"min": "4Gi", "max": "200Gi"}}),
                format!(
                    "{AT}.validRange.max: Invalid value: \"200Gi\": must not be larger than the capacity value 100Gi"
                ),
            ),
            (
                true,
                json!({"default": "9Gi", "validRange": {"min": "4Gi", "max": "8Gi"}}),
                format!(
                    "{AT}.validRange.default: Invalid value: \"9Gi\": must not be larger than the maximum 8Gi"
                ),
            ),
            (
                true,
                json!({"default": "4Gi", "validRange": {"min": "4Gi", "step": "0"}}),
                format!("{AT}.validRange.step: Invalid value: \"0\": must be greater than zero"),
            ),
            (
                true,
                json!({"default": "60Gi", "validRange": {"min": "60Gi", "step": "60Gi"}}),
                format!(
                    "{AT}.validRange.step: Invalid value: \"60Gi\": the minimum plus one step must not be larger than the capacity value 100Gi"
                ),
            ),
            (
                true,
                json!({"default": "5Gi", "validRange": {"min": "2Gi", "step": "2Gi"}}),
                format!(
                    "{AT}.validRange.step: Invalid value: \"5Gi\": must be the minimum 2Gi plus a whole number of steps of 2Gi"
                ),
            ),
            (
                true,
                json!({"default": "4Gi", "validRange": {"min": "2Gi", "max": "9Gi", "step": "2Gi"}}),
                format!(
                    "{AT}.validRange.step: Invalid value: \"9Gi\": must be the minimum 2Gi plus a whole number of steps of 2Gi"
                ),
            ),
        ];
        for (shared, policy, want) in refused {
            let f = fields("ResourceSlice", shared_slice(shared, policy.clone()));
            assert_eq!(f.first(), Some(&want), "{policy}");
            // A maximum below the minimum leaves no room for the default
            // either, and that is said too.
            let also = usize::from(policy.pointer("/validRange/max") == Some(&json!("3Gi")));
            assert_eq!(f.len(), 1 + also, "{policy}: {f:?}");
        }
    }

    #[test]
    fn capacity_requests_are_named_quantities() {
        let request = |requests: Value| {
            claim(json!([
                {"name": "a", "exactly": {"deviceClassName": "c", "capacity": {"requests": requests}}},
                {"name": "b", "firstAvailable": [{"name": "x", "deviceClassName": "c",
                    "capacity": {"requests": requests}}]}
            ]))
        };
        for ok in [
            json!({}),
            json!({"bw": "10Gi"}),
            json!({"nic.example.com/bandwidth": "1G", "slots": 2, "zero": "0"}),
        ] {
            let f = fields("ResourceClaim", request(ok.clone()));
            assert!(f.is_empty(), "{ok}: {f:?}");
        }
        let refused = [
            (
                json!({"Bad-Name": "1"}),
                "[Bad-Name]: Invalid value: \"Bad-Name\": must be a C identifier of at most 32 characters, optionally prefixed by a DNS subdomain and '/'",
            ),
            (
                json!({"bw": "-1Gi"}),
                "[bw]: Invalid value: \"-1Gi\": must be greater than or equal to 0",
            ),
            (
                json!({"bw": "lots"}),
                "[bw]: Invalid value: \"lots\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            ),
        ];
        for (requests, tail) in refused {
            let f = fields("ResourceClaimTemplate", {
                let c = request(requests.clone());
                json!({"spec": c})
            });
            assert_eq!(
                f,
                [
                    format!("spec.spec.devices.requests[0].exactly.capacity.requests{tail}"),
                    format!(
                        "spec.spec.devices.requests[1].firstAvailable[0].capacity.requests{tail}"
                    ),
                ],
                "{requests}"
            );
        }
    }

    #[test]
    fn shared_results_and_device_statuses() {
        const A: &str = "0b4f2f4e-5d3c-4c3b-9a1e-7f6d5c4b3a21";
        const B: &str = "1c5a3a5f-6e4d-4d4c-8b2f-8a7e6d5c4b32";
        let result = |share: Option<&str>, consumed: Value| {
            let mut r = json!({"request": "nic", "driver": "d.io", "pool": "p", "device": "nic-0"});
            if let Some(s) = share {
                r["shareID"] = json!(s);
            }
            if !consumed.is_null() {
                r["consumedCapacity"] = consumed;
            }
            r
        };
        let status_of = |results: Vec<Value>, devices: Value| {
            json!({"spec": {"devices": {"requests": [{"name": "nic", "exactly": {"deviceClassName": "c"}}]}},
                "status": {"allocation": {"devices": {"results": results}}, "devices": devices}})
        };
        let device = |share: Option<&str>| {
            let mut d = json!({"driver": "d.io", "pool": "p", "device": "nic-0"});
            if let Some(s) = share {
                d["shareID"] = json!(s);
            }
            d
        };
        let check = |c: Value| -> Vec<String> {
            status("ResourceClaim", &c)
                .into_iter()
                .map(|c| format!("{}: {}", c.field, c.message))
                .collect()
        };
        // One device shared twice, each share with its own status.
        let ok = status_of(
            vec![
                result(Some(A), json!({"bw": "10Gi"})),
                result(Some(B), json!({"bw": "20Gi"})),
            ],
            json!([device(Some(A)), device(Some(B))]),
        );
        assert!(check(ok.clone()).is_empty(), "{:?}", check(ok));
        // An unshared device keeps its status without a share ID.
        let plain = status_of(vec![result(None, Value::Null)], json!([device(None)]));
        assert!(check(plain).is_empty());

        let refused = [
            (
                status_of(vec![result(Some("not-a-uid"), Value::Null)], json!([])),
                "status.allocation.devices.results[0].shareID: Invalid value: \"not-a-uid\": must be a UID in its normalized form: 32 lowercase hexadecimal digits grouped 8-4-4-4-12 by hyphens".to_string(),
            ),
            (
                status_of(vec![result(Some(&A.to_uppercase()), Value::Null)], json!([])),
                format!(
                    "status.allocation.devices.results[0].shareID: Invalid value: \"{}\": must be a UID in its normalized form: 32 lowercase hexadecimal digits grouped 8-4-4-4-12 by hyphens",
                    A.to_uppercase()
                ),
            ),
            (
                status_of(vec![result(Some(A), json!({"bw": "-1"}))], json!([])),
                "status.allocation.devices.results[0].consumedCapacity[bw]: Invalid value: \"-1\": must be greater than or equal to 0".to_string(),
            ),
            (
                status_of(vec![result(Some(A), json!({"a/b/c": "1"}))], json!([])),
                "status.allocation.devices.results[0].consumedCapacity[a/b/c]: Invalid value: \"a/b/c\": must be a C identifier of at most 32 characters, optionally prefixed by a DNS subdomain and '/'".to_string(),
            ),
            (
                status_of(vec![result(Some(A), Value::Null)], json!([device(None)])),
                "status.devices[0]: Invalid value: d.io/p/nic-0: must be an allocated device in the claim".to_string(),
            ),
            (
                status_of(vec![result(Some(A), Value::Null)], json!([device(Some(B))])),
                format!("status.devices[0]: Invalid value: d.io/p/nic-0/{B}: must be an allocated device in the claim"),
            ),
            (
                status_of(
                    vec![result(Some(A), Value::Null)],
                    json!([device(Some(A)), device(Some(A))]),
                ),
                format!("status.devices[1]: Duplicate value: d.io/p/nic-0/{A}"),
            ),
            (
                status_of(vec![result(None, Value::Null)], json!([{"driver": "d.io", "pool": "p", "device": "nic-0", "shareID": "x"}])),
                "status.devices[0].shareID: Invalid value: \"x\": must be a UID in its normalized form: 32 lowercase hexadecimal digits grouped 8-4-4-4-12 by hyphens".to_string(),
            ),
        ];
        for (claim, want) in refused {
            let f = check(claim.clone());
            assert!(f.contains(&want), "{claim}: {f:?}");
        }
        // A status without an allocation names no allocated device.
        let unallocated = json!({"spec": {}, "status": {"devices": [device(None)]}});
        assert_eq!(
            check(unallocated),
            [
                "status.devices[0]: Invalid value: d.io/p/nic-0: must be an allocated device in the claim"
            ]
        );
    }

    #[test]
    fn claim_status_and_immutability() {
        let c = json!({"spec": {}, "status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}});
        assert_eq!(
            fields("ResourceClaim", c.clone()),
            ["status.reservedFor: Forbidden: may not be specified when `allocated` is not set"]
        );
        let mut changed = c.clone();
        changed["spec"] = json!({"devices": {}});
        let why = update("ResourceClaim", &c, &changed);
        assert_eq!(
            why[0].message,
            "Invalid value: \"object\": field is immutable"
        );
        assert!(update("ResourceClaim", &c, &c).is_empty());
        let s = json!({"spec": {"driver": "a.io", "nodeName": "n0"}});
        let moved = json!({"spec": {"driver": "a.io", "nodeName": "n1"}});
        let why = update("ResourceSlice", &s, &moved);
        assert_eq!(why.len(), 1);
        assert_eq!(why[0].field, "spec.nodeName");
        assert_eq!(why[0].message, "Invalid value: \"n1\": field is immutable");
    }

    #[test]
    fn allocations_are_replaced_only_by_removal() {
        let spec = json!({"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "c"}}]}});
        let result = |device: &str| json!({"request": "gpu", "driver": "d.io", "pool": "p", "device": device});
        let old = json!({"spec": spec, "status": {"allocation": {"devices": {"results": [result("a")]}}}});
        let mut moved = old.clone();
        moved["status"]["allocation"]["devices"]["results"][0] = result("b");
        let why = update("ResourceClaim", &old, &moved);
        assert_eq!(why[0].field, "status.allocation");
        let mut gone = old.clone();
        gone["status"] = json!({});
        assert!(update("ResourceClaim", &old, &gone).is_empty());
        let mut bad = old.clone();
        bad["status"]["allocation"]["devices"]["results"][0]["request"] = json!("nic");
        let f = status("ResourceClaim", &bad);
        assert_eq!(f[0].field, "status.allocation.devices.results[0].request");
        let mut deleting = old.clone();
        deleting["metadata"] = json!({"deletionTimestamp": "t"});
        let mut added = deleting.clone();
        added["status"]["reservedFor"] = json!([{"resource": "pods", "name": "p", "uid": "u"}]);
        assert_eq!(
            update("ResourceClaim", &deleting, &added)[0].reason,
            "FieldValueForbidden"
        );
    }

    #[test]
    fn status_writes_check_the_status_only() {
        let bad_spec_good_status = json!({"spec": {"devices": {"requests": [{"name": "Bad"}]}},
            "status": {"allocation": {}, "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}});
        assert!(status("ResourceClaim", &bad_spec_good_status).is_empty());
        assert!(!object("ResourceClaim", &bad_spec_good_status).is_empty());
        let mut t = json!({"spec": {"spec": {"devices": {"requests": [{"name": "a", "exactly": {"deviceClassName": "c"}}]}}}});
        default_object("resourceclaimtemplates", &mut t);
        assert_eq!(
            t["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"],
            1
        );
    }

    #[test]
    fn pod_claim_references() {
        let spec = json!({"resourceClaims": [
                {"name": "gpus", "resourceClaimTemplateName": "t"},
                {"name": "gpus", "resourceClaimName": "c"},
                {"name": "both", "resourceClaimName": "c", "resourceClaimTemplateName": "t"}],
            "containers": [{"name": "a", "resources": {"claims": [{"name": "gpus"}, {"name": "nic"}]}}]});
        let f: Vec<String> = pod_claims(&spec)
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        assert_eq!(
            f,
            [
                "spec.resourceClaims[1].name: Duplicate value: \"gpus\"",
                "spec.resourceClaims[2]: Invalid value: \"both\": must specify one of: `resourceClaimName`, `resourceClaimTemplateName`",
                "spec.containers[0].resources.claims[1].name: Not found: \"nic\"",
            ]
        );
    }

    #[test]
    fn admin_access_is_found() {
        let c = claim(json!([
            {"name": "a", "exactly": {"deviceClassName": "c", "adminAccess": true}},
            {"name": "b", "exactly": {"deviceClassName": "c", "adminAccess": false}}]));
        let f = admin_access("ResourceClaim", &c);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].field, "spec.devices.requests[0].exactly.adminAccess");
    }

    #[test]
    fn defaults_fill_mode_and_count() {
        let mut spec = json!({"devices": {"requests": [
            {"name": "a", "exactly": {"deviceClassName": "c"}},
            {"name": "b", "exactly": {"deviceClassName": "c", "allocationMode": "All"}},
            {"name": "c", "firstAvailable": [{"name": "x", "deviceClassName": "c"}]}]}});
        default_claim_spec(&mut spec);
        let r = &spec["devices"]["requests"];
        assert_eq!(r[0]["exactly"]["count"], 1);
        assert_eq!(r[0]["exactly"]["allocationMode"], "ExactCount");
        assert!(r[1]["exactly"].get("count").is_none());
        assert_eq!(r[2]["firstAvailable"][0]["count"], 1);
    }
}
