//! Per-kind validation a real API server performs on writes, for the fields
//! the scheduler reads: a pod's resource quantities (container and init
//! container requests and limits, pod-level resources, overhead) must parse
//! (else the body cannot be decoded: a 400 `BadRequest`, as a real server
//! answers), must not be negative, and a request must not exceed its limit.
//! A violation is a 422 `Invalid` Status whose `details.causes` name each
//! field, worded as the real server words them. The scheduler does not
//! rely on this (it refuses such pods itself, `model::requests`), but clients
//! and tests see the same answer they would from a real cluster.
//!
//! A pod's resource claims (`spec.resourceClaims`, containers'
//! `resources.claims`) are checked as pod validation checks them
//! (`dra::validate::pod_claims`), and the `resource.k8s.io` kinds by
//! `dra::validate`.
//!
//! The topology kinds served in place of their CRDs are checked as those
//! CRDs' schemas and admission webhooks would check them: a Kueue `Topology`
//! (its levels) and a Volcano `HyperNode` (tier, members, selectors), by the
//! scheduler's own readers (`dialects::topology`), answering 422.

use serde_json::Value;

use super::SimState;
use super::registry::ResourceDef;
use super::status::{ApiError, ApiResult, Cause};
use muster_core::model::Quantity;

/// Validates `obj`, about to be stored as `def`, named `name` (unless the
/// cluster was started with validation off, [`super::SimConfig::validate`]).
pub fn object(state: &SimState, def: &ResourceDef, name: &str, obj: &Value) -> ApiResult<()> {
    if !state.validate {
        return Ok(());
    }
    if let Some(why) = topology_object(def, name, obj) {
        // `<field>: <message>`, as one cause (kubectl lists the causes).
        let (field, message) = why.split_once(": ").unwrap_or(("", &why));
        let cause = Cause {
            reason: "FieldValueInvalid",
            field: field.to_string(),
            message: message.to_string(),
        };
        return Err(ApiError::invalid_fields(
            &def.group,
            &def.kind,
            name,
            vec![cause],
        ));
    }
    if def.group == super::dra::GROUP {
        let mut causes = super::dra::validate::object(&def.kind, obj);
        let admin = super::dra::validate::admin_access(&def.kind, obj);
        if !admin.is_empty() && !admin_namespace(state, obj) {
            causes.extend(admin);
        }
        if causes.is_empty() {
            return Ok(());
        }
        return Err(ApiError::invalid_fields(
            &def.group, &def.kind, name, causes,
        ));
    }
    if is_pod_group(def) {
        let causes = super::dra::validate::pod_group_claims(&obj["spec"]);
        if causes.is_empty() {
            return Ok(());
        }
        return Err(ApiError::invalid_fields(
            &def.group, &def.kind, name, causes,
        ));
    }
    if !(def.group.is_empty() && def.kind == "Pod") {
        return Ok(());
    }
    if let Some(bad) = unparsable_quantity(obj) {
        // A real server fails while decoding the body, before validation.
        return Err(ApiError::bad_request(format!(
            "Pod in version \"v1\" cannot be handled as a Pod: quantities must match the regular expression '{QUANTITY_PATTERN}' (got {bad:?})"
        )));
    }
    let causes = pod(obj);
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid_fields(
        &def.group, &def.kind, name, causes,
    ))
}

/// Does the object's namespace allow admin access to devices (the label
/// `resource.kubernetes.io/admin-access: "true"`)?
fn admin_namespace(state: &SimState, obj: &Value) -> bool {
    let Some(ns) = obj.pointer("/metadata/namespace").and_then(Value::as_str) else {
        return false;
    };
    state
        .store
        .get("/v1/namespaces", "", ns)
        .is_some_and(|n| n.label(super::dra::validate::ADMIN_ACCESS_LABEL) == Some("true"))
}

/// Validates the result of a write to `def`'s subresource `sub` (None: the
/// main resource). For `resource.k8s.io` kinds a `/status` write checks the
/// status only, as the real server's status strategy does.
pub fn written(
    state: &SimState,
    def: &ResourceDef,
    sub: Option<&str>,
    name: &str,
    obj: &mut Value,
) -> ApiResult<()> {
    if def.group != super::dra::GROUP {
        return object(state, def, name, obj);
    }
    if !state.validate {
        return Ok(());
    }
    if sub == Some("status") {
        let causes = super::dra::validate::status(&def.kind, obj);
        if causes.is_empty() {
            return Ok(());
        }
        return Err(ApiError::invalid_fields(
            &def.group, &def.kind, name, causes,
        ));
    }
    super::dra::validate::default_object(&def.plural, obj);
    object(state, def, name, obj)
}

/// Validates an update of `old` into `new` (both stored forms) beyond what
/// [`object`] checks of `new` alone: fields that may not change.
pub fn update(
    state: &SimState,
    def: &ResourceDef,
    name: &str,
    old: &Value,
    new: &Value,
) -> ApiResult<()> {
    if !state.validate {
        return Ok(());
    }
    let causes = if is_pod_group(def) {
        super::dra::validate::pod_group_update(old, new)
    } else if def.group == super::dra::GROUP {
        super::dra::validate::update(&def.kind, old, new)
    } else {
        return Ok(());
    };
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid_fields(
        &def.group, &def.kind, name, causes,
    ))
}

/// A `scheduling.k8s.io` PodGroup (the Workload API's), whose
/// `spec.resourceClaims` (KEP-5729) is checked.
fn is_pod_group(def: &ResourceDef) -> bool {
    def.group == "scheduling.k8s.io" && def.kind == "PodGroup"
}

/// Why a Kueue `Topology` or Volcano `HyperNode` (a built-in stand-in for
/// the CRD) is invalid, if it is one and is invalid: the reader's message
/// without its `<Kind> <name>: ` prefix.
fn topology_object(def: &ResourceDef, name: &str, obj: &Value) -> Option<String> {
    use muster_core::dialects::topology::{hyper_node_def, topology_def};
    let read: fn(&Value) -> Result<(), String> = match (def.group.as_str(), def.kind.as_str()) {
        ("kueue.x-k8s.io", "Topology") => |o| topology_def(o).map(drop),
        ("topology.volcano.sh", "HyperNode") => |o| hyper_node_def(o).map(drop),
        _ => return None,
    };
    // The name may come from generateName: read the object as it is stored.
    let mut named = obj.clone();
    if let Some(meta) = named.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("name".into(), Value::from(name));
    }
    let e = read(&named).err()?;
    let prefix = format!("{} {name}: ", def.kind);
    Some(e.strip_prefix(&prefix).map_or(e.clone(), str::to_string))
}

/// The grammar of a quantity, as the real server's decoding error quotes it.
const QUANTITY_PATTERN: &str = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$";

/// Every resource map of a pod with its field path.
fn resource_maps(spec: &Value) -> Vec<(String, &Value)> {
    let mut maps = Vec::new();
    for list in ["containers", "initContainers"] {
        for (i, c) in spec[list].as_array().into_iter().flatten().enumerate() {
            for part in ["requests", "limits"] {
                let path = format!("spec.{list}[{i}].resources.{part}");
                maps.push((path, &c["resources"][part]));
            }
        }
    }
    for part in ["requests", "limits"] {
        maps.push((format!("spec.resources.{part}"), &spec["resources"][part]));
    }
    maps.push(("spec.overhead".to_string(), &spec["overhead"]));
    maps
}

/// The raw text of a quantity that does not parse, if any.
fn unparsable_quantity(obj: &Value) -> Option<String> {
    resource_maps(&obj["spec"])
        .into_iter()
        .filter_map(|(_, map)| map.as_object())
        .flat_map(|map| map.values())
        .filter_map(raw_quantity)
        .find(|raw| super::quantity::decode(raw).is_err())
}

/// Decodes a pod's resource quantities as the server does before it
/// validates and stores them (`quantity`): values beyond 2^63-1 capped,
/// values finer than a nano unit rounded up. Text that does not decode is
/// left for [`object`] to refuse.
pub fn decode_quantities(state: &SimState, def: &ResourceDef, obj: &mut Value) {
    if state.validate && def.group.is_empty() && def.kind == "Pod" {
        decode_pod_quantities(obj);
    }
}

fn decode_pod_quantities(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec") else {
        return;
    };
    let rewrite = |map: &mut Value| {
        for q in map.as_object_mut().into_iter().flat_map(|m| m.values_mut()) {
            if let Some(Ok(Some(text))) = raw_quantity(q).map(|r| super::quantity::decode(&r)) {
                *q = Value::String(text);
            }
        }
    };
    for list in ["containers", "initContainers"] {
        for c in spec
            .get_mut(list)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            for part in ["requests", "limits"] {
                if let Some(map) = c.pointer_mut(&format!("/resources/{part}")) {
                    rewrite(map);
                }
            }
        }
    }
    for part in ["requests", "limits"] {
        if let Some(map) = spec.pointer_mut(&format!("/resources/{part}")) {
            rewrite(map);
        }
    }
    if let Some(map) = spec.get_mut("overhead") {
        rewrite(map);
    }
}

/// A quantity's text: a string, or a bare JSON number.
fn raw_quantity(q: &Value) -> Option<String> {
    match q {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The causes of a pod's invalidity, in field order.
fn pod(obj: &Value) -> Vec<Cause> {
    let spec = &obj["spec"];
    let mut causes = Vec::new();
    // A pod runs at least one container.
    if spec["containers"].as_array().is_none_or(Vec::is_empty) {
        causes.push(Cause {
            reason: "FieldValueRequired",
            field: "spec.containers".into(),
            message: "Required value".into(),
        });
    }
    for (path, map) in resource_maps(spec) {
        non_negative(map, &path, &mut causes);
    }
    for list in ["containers", "initContainers"] {
        for (i, c) in spec[list].as_array().into_iter().flatten().enumerate() {
            let path = format!("spec.{list}[{i}].resources.requests");
            within_limits(&c["resources"], &path, &mut causes);
        }
    }
    within_limits(&spec["resources"], "spec.resources.requests", &mut causes);
    causes.extend(super::dra::validate::pod_claims(spec));
    causes
}

/// Every request above the limit of the same resource.
fn within_limits(resources: &Value, path: &str, causes: &mut Vec<Cause>) {
    let (Some(requests), Some(limits)) = (
        resources["requests"].as_object(),
        resources["limits"].as_object(),
    ) else {
        return;
    };
    for (name, request) in requests {
        let (Some(req_raw), Some(lim_raw)) = (
            raw_quantity(request),
            limits.get(name).and_then(raw_quantity),
        ) else {
            continue;
        };
        let (Ok(req), Ok(lim)) = (Quantity::parse(&req_raw), Quantity::parse(&lim_raw)) else {
            continue;
        };
        if req > lim {
            causes.push(Cause::invalid(
                format!("{path}[{name}]"),
                &req_raw,
                &format!("must be less than or equal to {name} limit of {lim_raw}"),
            ));
        }
    }
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

    #[test]
    fn a_pod_without_containers_is_invalid() {
        for spec in [json!({}), json!({"containers": []})] {
            let causes = pod(&json!({"spec": spec}));
            assert_eq!(causes.len(), 1, "{causes:?}");
            assert_eq!(
                (causes[0].reason, causes[0].field.as_str()),
                ("FieldValueRequired", "spec.containers")
            );
        }
        assert!(pod(&json!({"spec": {"containers": [{"name": "a"}]}})).is_empty());
    }

    #[test]
    fn a_request_above_its_limit_is_invalid() {
        let p = json!({"spec": {"containers": [
            {"name": "a", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}
        ]}});
        let causes = pod(&p);
        assert_eq!(causes.len(), 1);
        assert_eq!(
            causes[0].field,
            "spec.containers[0].resources.requests[cpu]"
        );
        assert_eq!(
            causes[0].message,
            "Invalid value: \"2\": must be less than or equal to cpu limit of 1"
        );
    }

    #[test]
    fn topology_kinds_are_checked_as_their_crds_would() {
        let reg = super::super::registry::Registry::new(&Default::default());
        let topo = reg
            .lookup("kueue.x-k8s.io", "v1beta2", "topologies")
            .unwrap();
        let hn = reg
            .lookup("topology.volcano.sh", "v1alpha1", "hypernodes")
            .unwrap();
        let ok = json!({"metadata": {"generateName": "t-"},
            "spec": {"levels": [{"nodeLabel": "rack"}]}});
        assert_eq!(topology_object(&topo, "t-1", &ok), None);
        let dup = json!({"metadata": {"name": "t"},
            "spec": {"levels": [{"nodeLabel": "rack"}, {"nodeLabel": "rack"}]}});
        assert_eq!(
            topology_object(&topo, "t", &dup).as_deref(),
            Some("spec.levels[1]: \"rack\": must be unique")
        );
        let bad = json!({"metadata": {"name": "s0"}, "spec": {"tier": 1, "members": [
            {"type": "Node", "selector": {"regexMatch": {"pattern": "("}}}]}});
        assert!(topology_object(&hn, "s0", &bad).unwrap().starts_with(
            "spec.members[0].selector.regexMatch.pattern: \"(\": invalid regular expression"
        ));
        let pods = reg.lookup("", "v1", "pods").unwrap();
        assert_eq!(topology_object(&pods, "p", &json!("not an object")), None);
        assert_eq!(
            topology_object(&topo, "t", &json!("not an object")).as_deref(),
            Some("metadata.name is required")
        );
    }

    #[test]
    fn huge_quantities_decode_capped() {
        let mut p = json!({"spec": {"containers": [{"resources": {"requests": {"cpu": "1e30", "memory": "1Gi"}}}],
            "overhead": {"cpu": 1e300}}});
        assert_eq!(unparsable_quantity(&p), None);
        decode_pod_quantities(&mut p);
        assert_eq!(
            p["spec"]["containers"][0]["resources"]["requests"]["cpu"],
            "9223372036854775807"
        );
        assert_eq!(
            p["spec"]["containers"][0]["resources"]["requests"]["memory"],
            "1Gi"
        );
        assert_eq!(p["spec"]["overhead"]["cpu"], "9223372036854775807");
    }

    #[test]
    fn an_unparsable_quantity_is_found() {
        let p = json!({"spec": {"containers": [{"resources": {"limits": {"memory": "lots"}}}]}});
        assert_eq!(unparsable_quantity(&p).as_deref(), Some("lots"));
        let ok = json!({"spec": {"containers": [{"resources": {"requests": {"cpu": 2}}}]}});
        assert_eq!(unparsable_quantity(&ok), None);
    }
}
