//! Per-kind behaviour a real server (or its controllers) has: pod defaults
//! and priority resolution, node status from the fake kubelet, namespace
//! phase and cascading deletion, CRD acceptance and (un)registration.

use muster_core::model::Quantity;
use serde_json::{Value, json};

use super::SimState;
use super::kubelet::{Bound, fill_node_status};
use super::objects::{as_map, child_mut, condition, set_condition, str_at};
use super::registry::{ResourceDef, defs_from_crd};
use super::status::{ApiError, ApiResult};
use super::store::Stored;

/// Per-kind defaults at creation. Returns the node a pod was created on.
pub(super) fn on_create(
    state: &SimState,
    def: &ResourceDef,
    obj: &mut Value,
) -> ApiResult<Option<String>> {
    // Status is written through /status only, except where a kubelet-like
    // creator sets it (nodes).
    let is_node = def.group.is_empty() && def.plural == "nodes";
    if def.status && !is_node {
        as_map(obj).remove("status");
    }
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "pods") => return default_pod(state, obj),
        ("", "nodes") => fill_node_status(obj, &state.lifecycle.addresses.next_node_ip()),
        ("", "namespaces") => {
            child_mut(as_map(obj), "status").insert("phase".into(), json!("Active"));
        }
        // The PV controller's first word on new claims and volumes
        // (`provisioner.rs` takes it from there).
        ("", "persistentvolumeclaims") => {
            // DefaultStorageClass admission.
            super::provisioner::assign_default_class(&state.store, obj);
            child_mut(as_map(obj), "status").insert("phase".into(), json!("Pending"));
        }
        ("", "persistentvolumes") => {
            child_mut(as_map(obj), "status").insert("phase".into(), json!("Available"));
        }
        ("apiextensions.k8s.io", "customresourcedefinitions") => accept_crd(obj)?,
        (super::dra::GROUP, plural) => super::dra::validate::default_object(plural, obj),
        _ => {}
    }
    Ok(None)
}

fn default_pod(state: &SimState, pod: &mut Value) -> ApiResult<Option<String>> {
    let name = str_at(pod, "/metadata/name")
        .unwrap_or_default()
        .to_string();
    let spec = child_mut(as_map(pod), "spec");
    spec.entry("schedulerName")
        .or_insert_with(|| json!("default-scheduler"));
    spec.entry("restartPolicy")
        .or_insert_with(|| json!("Always"));
    spec.entry("terminationGracePeriodSeconds")
        .or_insert_with(|| json!(30));
    spec.entry("dnsPolicy")
        .or_insert_with(|| json!("ClusterFirst"));
    default_host_network_ports(spec);
    // Priority admission: resolve priorityClassName into spec.priority,
    // and the class's preemptionPolicy into the pod's when it sets none.
    if let Some(class) = spec
        .get("priorityClassName")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
        .map(str::to_string)
    {
        let class = class.as_str();
        let stored = state
            .store
            .get("scheduling.k8s.io/v1/priorityclasses", "", class);
        let policy = stored
            .as_ref()
            .and_then(|pc| pc.value().get("preemptionPolicy").cloned())
            .unwrap_or_else(|| json!("PreemptLowerPriority"));
        spec.entry("preemptionPolicy").or_insert(policy);
        let value = stored
            .and_then(|pc| pc.value().get("value").and_then(Value::as_i64))
            .or(match class {
                "system-node-critical" => Some(2_000_001_000),
                "system-cluster-critical" => Some(2_000_000_000),
                _ => None,
            })
            .ok_or_else(|| ApiError {
                code: 403,
                reason: "Forbidden",
                message: format!(
                    "pods \"{name}\" is forbidden: no PriorityClass with name {class} was found"
                ),
                details: None,
            })?;
        spec.insert("priority".into(), json!(value));
    } else {
        spec.entry("priority").or_insert_with(|| json!(0));
        spec.entry("preemptionPolicy")
            .or_insert_with(|| json!("PreemptLowerPriority"));
    }
    let node = spec
        .get("nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(str::to_string);
    let status = child_mut(as_map(pod), "status");
    status.insert("phase".into(), json!("Pending"));
    let qos = qos_class(&pod["spec"]);
    let status = child_mut(as_map(pod), "status");
    status.insert("qosClass".into(), json!(qos));
    if node.is_some() {
        set_condition(status, condition("PodScheduled", true, None));
    }
    Ok(node)
}

/// The pod's quality-of-service class, as the API server computes it for
/// `status.qosClass`: `BestEffort` when no container (init containers
/// included) requests or limits cpu or memory; `Guaranteed` when every
/// container limits both and requests no other amount than its limit
/// (a request left out counts as the limit); otherwise `Burstable`.
/// Pod-level `spec.resources`, when set, decide alone.
fn qos_class(spec: &Value) -> &'static str {
    const COMPUTE: [&str; 2] = ["cpu", "memory"];
    let amount = |r: &Value, kind: &str, name: &str| {
        r[kind][name]
            .as_str()
            .map(str::to_string)
            .or_else(|| r[kind][name].as_number().map(|n| n.to_string()))
    };
    let pod_level = &spec["resources"];
    let all: Vec<&Value> = if pod_level.is_object() {
        vec![pod_level]
    } else {
        ["containers", "initContainers"]
            .iter()
            .flat_map(|l| spec[*l].as_array().into_iter().flatten())
            .map(|c| &c["resources"])
            .collect()
    };
    let any = all.iter().any(|r| {
        COMPUTE.iter().any(|n| {
            amount(r, "requests", n).is_some_and(|q| !is_zero(&q))
                || amount(r, "limits", n).is_some_and(|q| !is_zero(&q))
        })
    });
    if !any {
        return "BestEffort";
    }
    let guaranteed = all.iter().all(|r| {
        COMPUTE.iter().all(|n| match amount(r, "limits", n) {
            None => false,
            Some(limit) => amount(r, "requests", n)
                .is_none_or(|req| Quantity::parse(&req).ok() == Quantity::parse(&limit).ok()),
        })
    });
    if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

fn is_zero(q: &str) -> bool {
    Quantity::parse(q).is_ok_and(|v| v == Quantity::ZERO)
}

/// A host-network pod's container ports are ports on the host: the API
/// server's defaulting sets each unset `hostPort` to its `containerPort`
/// (which is how NodePorts sees them).
fn default_host_network_ports(spec: &mut serde_json::Map<String, Value>) {
    if spec.get("hostNetwork").and_then(Value::as_bool) != Some(true) {
        return;
    }
    for list in ["initContainers", "containers"] {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for ports in containers
            .iter_mut()
            .filter_map(|c| c.get_mut("ports").and_then(Value::as_array_mut))
        {
            for port in ports.iter_mut().filter_map(Value::as_object_mut) {
                let unset = port.get("hostPort").and_then(Value::as_i64).unwrap_or(0) == 0;
                if let (true, Some(container)) = (unset, port.get("containerPort").cloned()) {
                    port.insert("hostPort".into(), container);
                }
            }
        }
    }
}

fn accept_crd(crd: &mut Value) -> ApiResult<()> {
    let name = str_at(crd, "/metadata/name")
        .unwrap_or_default()
        .to_string();
    let defs = defs_from_crd(crd).map_err(|e| {
        ApiError::invalid(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            &name,
            &e,
        )
    })?;
    let expected = format!("{}.{}", defs[0].plural, defs[0].group);
    if name != expected {
        return Err(ApiError::invalid(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            &name,
            &format!(
                "metadata.name: Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group ({expected})"
            ),
        ));
    }
    let names = crd.pointer("/spec/names").cloned().unwrap_or_default();
    // Objects are written in the storage version only.
    let versions = json!([defs[0].storage_version]);
    let status = child_mut(as_map(crd), "status");
    status.insert("acceptedNames".into(), names);
    status.insert("storedVersions".into(), versions);
    let ok = |kind: &str, reason: &str| {
        let mut c = condition(kind, true, Some(reason));
        if let Some(m) = c.as_object_mut() {
            m.remove("lastProbeTime");
        }
        c
    };
    set_condition(status, ok("NamesAccepted", "NoConflicts"));
    set_condition(status, ok("Established", "InitialNamesAccepted"));
    Ok(())
}

pub(super) fn after_create(
    state: &SimState,
    def: &ResourceDef,
    obj: &Stored,
    bound: Option<String>,
) {
    if bound.is_some() {
        state.lifecycle.pod_bound(Bound {
            namespace: obj.namespace.clone(),
            name: obj.name.clone(),
            uid: obj.uid.clone(),
        });
    }
    if def.group == "apiextensions.k8s.io"
        && def.plural == "customresourcedefinitions"
        && let Ok(defs) = defs_from_crd(&obj.value())
    {
        for added in state.registry.register_crd(defs) {
            tracing::info!(group = %added.group, version = %added.version, plural = %added.plural, "CRD resource registered");
        }
    }
}

/// Cascades a real server performs asynchronously, done at once here.
pub(super) fn after_delete(state: &SimState, def: &ResourceDef, obj: &Stored) {
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "namespaces") => state.store.drop_namespace(&obj.name),
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            let crd = obj.value();
            let (Some(group), Some(plural)) = (
                str_at(&crd, "/spec/group"),
                str_at(&crd, "/spec/names/plural"),
            ) else {
                return;
            };
            for gone in state.registry.unregister_crd(group, plural) {
                tracing::info!(group = %gone.group, version = %gone.version, plural = %gone.plural, "CRD resource unregistered");
                state.store.drop_resource(&gone.key());
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qos_class_follows_requests_and_limits() {
        let pod = |resources: Value| json!({"containers": [{"name": "a", "resources": resources}]});
        assert_eq!(qos_class(&pod(json!({}))), "BestEffort");
        assert_eq!(
            qos_class(&pod(json!({"requests": {"cpu": "100m", "memory": "64Mi"}}))),
            "Burstable"
        );
        assert_eq!(
            qos_class(&pod(json!({"limits": {"cpu": "1", "memory": "1Gi"}}))),
            "Guaranteed"
        );
        assert_eq!(
            qos_class(&pod(json!({"requests": {"cpu": "1000m", "memory": "1Gi"},
                                  "limits": {"cpu": "1", "memory": "1Gi"}}))),
            "Guaranteed"
        );
        assert_eq!(
            qos_class(&pod(
                json!({"requests": {"cpu": "500m"}, "limits": {"cpu": "1", "memory": "1Gi"}})
            )),
            "Burstable"
        );
        // Only cpu and memory count.
        assert_eq!(
            qos_class(&pod(json!({"requests": {"nvidia.com/gpu": "1"}}))),
            "BestEffort"
        );
    }

    #[test]
    fn host_network_pods_get_host_ports() {
        let mut spec = json!({"hostNetwork": true, "containers": [
            {"name": "a", "ports": [{"containerPort": 8080}, {"containerPort": 9090, "hostPort": 9091}]}
        ]});
        default_host_network_ports(spec.as_object_mut().unwrap());
        assert_eq!(spec["containers"][0]["ports"][0]["hostPort"], 8080);
        assert_eq!(spec["containers"][0]["ports"][1]["hostPort"], 9091);
        let mut plain = json!({"containers": [{"name": "a", "ports": [{"containerPort": 80}]}]});
        default_host_network_ports(plain.as_object_mut().unwrap());
        assert!(plain["containers"][0]["ports"][0].get("hostPort").is_none());
    }
}
