//! Server-side field validation, as a real API server does it on create,
//! update and patch: fields the kind does not have are never stored, and the
//! `fieldValidation` query parameter says what the client hears of them
//! (`Strict`: 400 `strict decoding error: unknown field "spec.foo"`;
//! `Warn`, the default without the parameter: accepted with a `Warning`
//! header per field; `Ignore`: dropped silently).
//!
//! The known fields come from real schemas: for built-in kinds the
//! `k8s-openapi` types of the version the request speaks (`probe`), for
//! custom resources their CRD version's structural schema (`prune`).
//! `scheduling.k8s.io/v1alpha2` (1.36) has no type in the 1.37 API the
//! crate is built for: its objects are checked through their conversion to
//! v1beta1 and back, which keeps exactly the fields v1alpha2 has. Kinds with
//! neither (the built-in stand-ins for CRD groups, `scheduling.k8s.io/v1alpha1`
//! Workloads) are stored as sent.

use k8s_openapi::api::{
    apps, batch, coordination, core, events, policy, rbac, resource, scheduling, storage,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions;
use serde_json::Value;

use super::SimState;
use super::convert::convert;
use super::probe::{FieldPath, Seg, unknown_fields};
use super::prune::unknown_in_schema;
use super::registry::ResourceDef;
use super::status::{ApiError, ApiResult};

/// What the client hears of unknown fields (`fieldValidation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Ignore,
    Warn,
    Strict,
}

impl Mode {
    /// The mode a request asks for; a real server's default is `Warn`
    /// (kubectl asks for `Strict`).
    pub fn from_param(param: Option<&str>) -> ApiResult<Mode> {
        match param {
            None | Some("Warn") => Ok(Mode::Warn),
            Some("Strict") => Ok(Mode::Strict),
            Some("Ignore") => Ok(Mode::Ignore),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation must be one of \"Ignore\", \"Warn\", or \"Strict\", got {other:?}"
            ))),
        }
    }
}

/// Drops the fields of `obj` (a request body in `def`'s version) that its
/// kind does not have; returns the warnings to send. `Strict` refuses them
/// instead. A body its kind's type cannot hold at all is a 400, as the real
/// decoder answers.
pub fn check(
    state: &SimState,
    def: &ResourceDef,
    mode: Mode,
    obj: &mut Value,
) -> ApiResult<Vec<String>> {
    if !state.validate {
        return Ok(Vec::new());
    }
    let unknown = match &def.schema {
        Some(schema) => Ok(unknown_in_schema(schema, obj)),
        None => match typed(&def.group, &def.version, &def.kind, obj) {
            Some(found) => found,
            None => return Ok(Vec::new()),
        },
    };
    let cannot_handle = |why: &str| {
        ApiError::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: {why}",
            kind = def.kind,
            version = def.version
        ))
    };
    let mut unknown = unknown.map_err(|e| cannot_handle(&e))?;
    unknown.retain(|p| !legacy_field(state, def, p));
    if unknown.is_empty() {
        return Ok(Vec::new());
    }
    let words: Vec<String> = unknown
        .iter()
        .map(|p| format!("unknown field \"{p}\""))
        .collect();
    if mode == Mode::Strict {
        return Err(cannot_handle(&format!(
            "strict decoding error: {}",
            words.join(", ")
        )));
    }
    tracing::debug!(kind = %def.kind, version = %def.version, fields = ?words, "unknown fields dropped");
    // Deepest last in document order: removing from the end keeps the
    // earlier paths valid.
    for path in unknown.iter().rev() {
        path.remove_from(obj);
    }
    Ok(if mode == Mode::Warn {
        words
    } else {
        Vec::new()
    })
}

/// Fields of an older release the types (1.37) no longer have, accepted
/// while the simulator also serves that release's API. A 1.35 pod names its Workload
/// in `spec.workloadRef` (1.36 replaced it with `spec.schedulingGroup`);
/// while v1alpha1 Workloads are served, such pods are a 1.35 cluster's.
const LEGACY_FIELDS: &[LegacyField] = &[LegacyField {
    group: "",
    kind: "Pod",
    field: "spec.workloadRef",
    while_served: ("scheduling.k8s.io", "v1alpha1", "workloads"),
}];

struct LegacyField {
    group: &'static str,
    kind: &'static str,
    field: &'static str,
    /// (group, version, plural)
    while_served: (&'static str, &'static str, &'static str),
}

fn legacy_field(state: &SimState, def: &ResourceDef, path: &FieldPath) -> bool {
    LEGACY_FIELDS.iter().any(|l| {
        let (g, v, plural) = l.while_served;
        def.group == l.group
            && def.kind == l.kind
            && path.to_string() == l.field
            && state.registry.lookup(g, v, plural).is_some()
    })
}

/// The unknown fields of a built-in kind, from its `k8s-openapi` type;
/// None for a kind without one.
fn typed(
    group: &str,
    version: &str,
    kind: &str,
    obj: &Value,
) -> Option<Result<Vec<FieldPath>, String>> {
    macro_rules! kinds {
        ($( ($g:literal, $v:literal, $k:literal) => $t:ty ),* $(,)?) => {
            match (group, version, kind) {
                $( ($g, $v, $k) => Some(unknown_fields::<$t>(obj)), )*
                ("scheduling.k8s.io", "v1alpha2", "PodGroup" | "Workload") => Some(alpha2(kind, obj)),
                _ => None,
            }
        };
    }
    kinds! {
        ("", "v1", "Namespace") => core::v1::Namespace,
        ("", "v1", "Node") => core::v1::Node,
        ("", "v1", "Pod") => core::v1::Pod,
        ("", "v1", "Binding") => core::v1::Binding,
        ("", "v1", "Event") => core::v1::Event,
        ("", "v1", "ConfigMap") => core::v1::ConfigMap,
        ("", "v1", "Secret") => core::v1::Secret,
        ("", "v1", "Service") => core::v1::Service,
        ("", "v1", "ReplicationController") => core::v1::ReplicationController,
        ("", "v1", "ServiceAccount") => core::v1::ServiceAccount,
        ("", "v1", "PersistentVolumeClaim") => core::v1::PersistentVolumeClaim,
        ("", "v1", "PersistentVolume") => core::v1::PersistentVolume,
        ("events.k8s.io", "v1", "Event") => events::v1::Event,
        ("coordination.k8s.io", "v1", "Lease") => coordination::v1::Lease,
        ("apps", "v1", "Deployment") => apps::v1::Deployment,
        ("apps", "v1", "ReplicaSet") => apps::v1::ReplicaSet,
        ("apps", "v1", "StatefulSet") => apps::v1::StatefulSet,
        ("apps", "v1", "DaemonSet") => apps::v1::DaemonSet,
        ("batch", "v1", "Job") => batch::v1::Job,
        ("batch", "v1", "CronJob") => batch::v1::CronJob,
        ("policy", "v1", "PodDisruptionBudget") => policy::v1::PodDisruptionBudget,
        ("rbac.authorization.k8s.io", "v1", "ClusterRole") => rbac::v1::ClusterRole,
        ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding") => rbac::v1::ClusterRoleBinding,
        ("rbac.authorization.k8s.io", "v1", "Role") => rbac::v1::Role,
        ("rbac.authorization.k8s.io", "v1", "RoleBinding") => rbac::v1::RoleBinding,
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition") => apiextensions::v1::CustomResourceDefinition,
        ("scheduling.k8s.io", "v1", "PriorityClass") => scheduling::v1::PriorityClass,
        ("scheduling.k8s.io", "v1beta1", "PodGroup") => scheduling::v1beta1::PodGroup,
        ("scheduling.k8s.io", "v1beta1", "Workload") => scheduling::v1beta1::Workload,
        ("scheduling.k8s.io", "v1alpha3", "PodGroup") => scheduling::v1alpha3::PodGroup,
        ("scheduling.k8s.io", "v1alpha3", "Workload") => scheduling::v1alpha3::Workload,
        ("scheduling.k8s.io", "v1alpha3", "CompositePodGroup") => scheduling::v1alpha3::CompositePodGroup,
        ("storage.k8s.io", "v1", "StorageClass") => storage::v1::StorageClass,
        ("storage.k8s.io", "v1", "CSINode") => storage::v1::CSINode,
        ("storage.k8s.io", "v1", "CSIDriver") => storage::v1::CSIDriver,
        ("resource.k8s.io", "v1", "DeviceClass") => resource::v1::DeviceClass,
        ("resource.k8s.io", "v1", "ResourceClaim") => resource::v1::ResourceClaim,
        ("resource.k8s.io", "v1", "ResourceClaimTemplate") => resource::v1::ResourceClaimTemplate,
        ("resource.k8s.io", "v1", "ResourceSlice") => resource::v1::ResourceSlice,
        ("resource.k8s.io", "v1", "DeviceTaintRule") => resource::v1::DeviceTaintRule,
        ("resource.k8s.io", "v1beta2", "DeviceClass") => resource::v1beta2::DeviceClass,
        ("resource.k8s.io", "v1beta2", "ResourceClaim") => resource::v1beta2::ResourceClaim,
        ("resource.k8s.io", "v1beta2", "ResourceClaimTemplate") => resource::v1beta2::ResourceClaimTemplate,
        ("resource.k8s.io", "v1beta2", "ResourceSlice") => resource::v1beta2::ResourceSlice,
        ("resource.k8s.io", "v1beta2", "DeviceTaintRule") => resource::v1beta2::DeviceTaintRule,
    }
}

/// A v1alpha2 object's unknown fields: converted to v1beta1, stripped of
/// what v1beta1 does not know, converted back (which drops what only
/// v1beta1 has); whatever of the original did not survive is unknown.
fn alpha2(kind: &str, obj: &Value) -> Result<Vec<FieldPath>, String> {
    let mut known = obj.clone();
    convert("scheduling.k8s.io", kind, &mut known, "v1beta1");
    let beta_unknown =
        typed("scheduling.k8s.io", "v1beta1", kind, &known).unwrap_or_else(|| Ok(Vec::new()))?;
    for path in beta_unknown.iter().rev() {
        path.remove_from(&mut known);
    }
    convert("scheduling.k8s.io", kind, &mut known, "v1alpha2");
    let mut found = Vec::new();
    missing_from(obj, &known, &FieldPath::default(), &mut found);
    Ok(found)
}

/// Paths of `sent` that `kept` lacks.
fn missing_from(sent: &Value, kept: &Value, path: &FieldPath, found: &mut Vec<FieldPath>) {
    match (sent, kept) {
        (Value::Object(s), Value::Object(k)) => {
            for (key, value) in s {
                let at = path.child(Seg::Key(key.clone()));
                match k.get(key) {
                    Some(kv) => missing_from(value, kv, &at, found),
                    None => found.push(at),
                }
            }
        }
        (Value::Array(s), Value::Array(k)) => {
            for (i, (sv, kv)) in s.iter().zip(k).enumerate() {
                missing_from(sv, kv, &path.child(Seg::Index(i)), found);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn unknown(group: &str, version: &str, kind: &str, obj: Value) -> Vec<String> {
        typed(group, version, kind, &obj)
            .unwrap()
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn modes_from_the_query() {
        assert_eq!(Mode::from_param(None).unwrap(), Mode::Warn);
        assert_eq!(Mode::from_param(Some("Strict")).unwrap(), Mode::Strict);
        assert_eq!(Mode::from_param(Some("Ignore")).unwrap(), Mode::Ignore);
        assert!(Mode::from_param(Some("strict")).is_err());
    }

    #[test]
    fn alpha2_podgroups_know_their_own_fields_only() {
        let pg = json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
            "metadata": {"name": "g"},
            "spec": {"podGroupTemplateRef": {"workload": {"workloadName": "w", "podGroupTemplateName": "t", "x": 1}},
                     "disruptionMode": "Pod", "priority": 5,
                     // v1beta1 has these; v1alpha2 does not.
                     "preemptionPolicy": "Never", "workloadRef": {"workloadName": "w"},
                     "schedulingPolicy": {"gang": {"minCount": 2, "minMember": 2}}}});
        assert_eq!(
            unknown("scheduling.k8s.io", "v1alpha2", "PodGroup", pg),
            [
                "spec.podGroupTemplateRef.workload.x",
                "spec.preemptionPolicy",
                "spec.schedulingPolicy.gang.minMember",
                "spec.workloadRef",
            ]
        );
    }

    #[test]
    fn every_version_of_the_workload_api_is_checked() {
        for version in ["v1beta1", "v1alpha3"] {
            let pg = json!({"apiVersion": format!("scheduling.k8s.io/{version}"), "kind": "PodGroup",
                "spec": {"workloadRef": {"workloadName": "w", "templateName": "t"},
                         "parentCompositePodGroupName": "c", "minMember": 3,
                         "schedulingPolicy": {"gang": {"minCount": 2}}}});
            assert_eq!(
                unknown("scheduling.k8s.io", version, "PodGroup", pg),
                ["spec.minMember"]
            );
        }
        let cpg = json!({"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
            "spec": {"schedulingPolicy": {"gang": {"minGroupCount": 2, "minCount": 1}}}});
        assert_eq!(
            unknown("scheduling.k8s.io", "v1alpha3", "CompositePodGroup", cpg),
            ["spec.schedulingPolicy.gang.minCount"]
        );
    }
}
