//! Kubernetes Workload API `PodGroup` (`scheduling.k8s.io` v1alpha2, v1beta1
//! and v1alpha3): the scheduling unit pods reference with
//! `spec.schedulingGroup.podGroupName`. The versions share the policy shape;
//! v1alpha2's `podGroupTemplateRef` and the later `workloadRef` are
//! informational and not read. The status condition is named per version.

use serde_json::Value;

use super::common::{Meta, Timeout, positive_count, priority_class_name};
use super::pod_group_fields;
use crate::model::wire::PodWire;
use crate::model::{
    CappedTimeout, DefinitionKey, GroupDef, GroupKey, GroupMembership, GroupPhase, GroupPolicy,
    GroupSource,
};

/// The condition the Workload API reserves for the scheduler on a PodGroup
/// (v1beta1 and v1alpha3, Kubernetes 1.37).
pub const POD_GROUP_CONDITION: &str = "PodGroupInitiallyScheduled";
/// KEP-6413's live gang health: whether a scheduled gang still has
/// `minCount` members running (`engine::Action::GroupHealth`).
pub const POD_GROUP_SATISFIED: &str = "PodGroupSatisfied";
/// The same condition as v1alpha2 (Kubernetes 1.36) names it.
pub const POD_GROUP_CONDITION_V1ALPHA2: &str = "PodGroupScheduled";

/// The scheduler's condition type in the PodGroup version it was read in:
/// 1.37 renamed `PodGroupScheduled` to `PodGroupInitiallyScheduled`.
pub fn condition_type(version: &str) -> &'static str {
    match version {
        "v1alpha2" => POD_GROUP_CONDITION_V1ALPHA2,
        _ => POD_GROUP_CONDITION,
    }
}

/// The condition's reason for a phase, in the Workload API's vocabulary:
/// `Scheduled` when `True`; `Unschedulable` for every `False` the engine
/// reports (members missing, timeout, early release). Upstream's other
/// `False` reason, `SchedulerError`, is for internal errors; Muster refuses
/// a malformed definition's members instead (they carry the message).
pub fn condition_reason(phase: GroupPhase) -> &'static str {
    match phase {
        GroupPhase::Scheduled => "Scheduled",
        GroupPhase::WaitingForMembers | GroupPhase::MembersObserved | GroupPhase::Unschedulable => {
            "Unschedulable"
        }
    }
}

/// `spec.schedulingGroup.podGroupName` → the pod's membership, if it sets one.
pub fn membership(pod: &PodWire, namespace: &str) -> Option<GroupMembership> {
    let sg = pod.spec.scheduling_group.as_ref()?;
    Some(match sg.pod_group_name.as_deref() {
        Some(name) if !name.is_empty() => GroupMembership::Member(GroupKey::new(
            DefinitionKey::new(namespace, GroupSource::PodGroup, name),
        )),
        _ => GroupMembership::Invalid("spec.schedulingGroup.podGroupName is empty".into()),
    })
}

/// Translates a `PodGroup` object (v1alpha2, v1beta1 or v1alpha3; the policy
/// shape is the same) into a group definition. A malformed spec becomes
/// `policy: Err` with the exact reason, so its members are held and told
/// why. The claims the members share (`spec.resourceClaims`, KEP-5729) are
/// read with the generated names the group's status records. A parent
/// CompositePodGroup is recorded in `extras.parent_composite` (see
/// `gang::hierarchy`).
pub fn pod_group_definition(obj: &Value) -> Result<GroupDef, String> {
    let meta = Meta::read(obj)?;
    let spec = &obj["spec"];
    let label = format!("PodGroup {}/{}", meta.namespace, meta.name);
    let (policy, timeout_capped) = split_capped(scheduling_policy(
        &spec["schedulingPolicy"],
        "schedulingPolicy",
        "minCount",
        &meta,
    ));
    let mut def = GroupDef {
        priority_class_name: priority_class_name(spec),
        timeout_capped,
        ..GroupDef::new(
            DefinitionKey::new(meta.namespace, GroupSource::PodGroup, meta.name),
            policy.map_err(|e| format!("{label}: {e}")),
            meta.created_ms,
        )
    };
    match topology(spec, &meta) {
        Ok(t) => *def.topology = t,
        Err(e) if def.policy.is_ok() => def.policy = Err(format!("{label}: {e}")),
        Err(_) => {}
    }
    match read_fields(obj, &mut def) {
        Ok(parent) => def.extras.parent_composite = parent,
        Err(e) if def.policy.is_ok() => def.policy = Err(format!("{label}: {e}")),
        Err(_) => {}
    }
    Ok(def)
}

/// Muster's annotation on a PodGroup: a node label whose domains the gang
/// tries first, falling back level by level to the required one (or to
/// the whole cluster without one), as Kueue's `podset-preferred-topology`.
pub const PREFERRED_TOPOLOGY_ANNOTATION: &str = "muster.dev/preferred-topology";

/// `spec.schedulingConstraints.topology` (the required level) and
/// [`PREFERRED_TOPOLOGY_ANNOTATION`]. The API server admits at most one
/// topology entry ("Currently only a single topology constraint can be
/// specified", in every served version); more is refused rather than
/// reading the first, and each key must be a valid label key.
pub(super) fn topology(
    spec: &Value,
    meta: &Meta<'_>,
) -> Result<crate::model::TopologyRequest, String> {
    use super::topology::label_level;
    let field = "spec.schedulingConstraints.topology";
    let required = match &spec["schedulingConstraints"]["topology"] {
        Value::Null => None,
        Value::Array(entries) => match entries.as_slice() {
            [] => None,
            [entry] => match entry["key"].as_str() {
                Some(key) => Some(label_level(key, &format!("{field}[0].key"))?),
                None => return Err(format!("{field}[0].key: Required value")),
            },
            more => {
                return Err(format!(
                    "{field}: Too many: {}: must have at most 1 item",
                    more.len()
                ));
            }
        },
        other => return Err(format!("{field} must be a list, got {other}")),
    };
    let preferred = meta
        .annotation(PREFERRED_TOPOLOGY_ANNOTATION)
        .map(|key| label_level(key, &format!("annotation {PREFERRED_TOPOLOGY_ANNOTATION}")))
        .transpose()?;
    Ok(crate::model::TopologyRequest {
        required,
        preferred,
        ..Default::default()
    })
}

/// Reads the spec fields beyond policy and topology into `def`; returns the
/// parent composite's name, if any.
fn read_fields(obj: &Value, def: &mut GroupDef) -> Result<Option<String>, String> {
    let spec = &obj["spec"];
    def.priority = pod_group_fields::priority(spec)?;
    def.extras.disruption_mode = pod_group_fields::disruption_mode(spec)?;
    def.extras.preemption_policy = pod_group_fields::preemption_policy(spec)?;
    def.extras.resource_claims = pod_group_fields::resource_claims(obj)?;
    pod_group_fields::parent_composite(spec)
}

/// A policy object (`schedulingPolicy`, or `policy` in v1alpha1): exactly one of
/// `gang: {minCount}` or `basic: {}`. `field` names it in messages.
/// A policy read with its timeout cap → the policy, and the cap record
/// when the policy is usable.
pub(crate) fn split_capped(
    read: Result<(GroupPolicy, Option<Box<CappedTimeout>>), String>,
) -> (Result<GroupPolicy, String>, Option<Box<CappedTimeout>>) {
    match read {
        Ok((policy, capped)) => (Ok(policy), capped),
        Err(e) => (Err(e), None),
    }
}

/// `schedulingPolicy` (or a v1alpha1 entry's `policy`) at `field`, with the
/// timeout annotation; the second value records a timeout that was capped.
/// `count_key` names the gang's quorum: `minCount` for PodGroups and
/// Workloads, `minGroupCount` for CompositePodGroups.
pub(crate) fn scheduling_policy(
    policy: &Value,
    field: &str,
    count_key: &str,
    meta: &Meta<'_>,
) -> Result<(GroupPolicy, Option<Box<CappedTimeout>>), String> {
    let gang = policy.get("gang").filter(|v| !v.is_null());
    let basic = policy.get("basic").filter(|v| !v.is_null());
    match (gang, basic) {
        (Some(g), None) => {
            let min_count = positive_count(&g[count_key], &format!("{field}.gang.{count_key}"))?;
            let (schedule_timeout, capped) = Timeout::split(meta.timeout_annotation()?);
            Ok((
                GroupPolicy::Gang {
                    min_count,
                    schedule_timeout,
                },
                capped,
            ))
        }
        (None, Some(_)) => Ok((GroupPolicy::Basic, None)),
        (Some(_), Some(_)) => Err(format!(
            "{field} sets both gang and basic; exactly one is allowed"
        )),
        (None, None) => match policy.as_object().and_then(|o| o.keys().next()) {
            Some(other) => Err(format!(
                "{field} has unknown policy {other:?} (expected gang or basic)"
            )),
            None => Err(format!("{field} is missing (expected gang or basic)")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    fn def(spec: Value, annotations: Value) -> GroupDef {
        pod_group_definition(&json!({
            "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "ml", "annotations": annotations,
                "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": spec
        }))
        .unwrap()
    }

    #[test]
    fn gang_policy_with_topology_and_timeout() {
        let d = def(
            json!({"schedulingPolicy": {"gang": {"minCount": 4}},
                   "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/rack"}]}}),
            json!({"muster.dev/schedule-timeout-seconds": "30"}),
        );
        assert_eq!(d.key.to_string(), "PodGroup ml/train");
        assert_eq!(
            d.policy,
            Ok(GroupPolicy::Gang {
                min_count: 4,
                schedule_timeout: Some(Duration::from_secs(30))
            })
        );
        assert_eq!(
            d.topology.required,
            Some(crate::model::LevelRef::Label(
                "topology.kubernetes.io/rack".into()
            ))
        );
        assert!(d.created_ms > 0);
    }

    #[test]
    fn topology_constraint_and_preferred_annotation() {
        use crate::model::LevelRef;
        let gang = json!({"gang": {"minCount": 2}});
        let rack = || Some(LevelRef::Label("rack".into()));
        let block = || Some(LevelRef::Label("block".into()));
        for (constraints, annotations, required, preferred) in [
            (json!(null), json!({}), None, None),
            (json!({"topology": []}), json!({}), None, None),
            (
                json!({"topology": [{"key": "block"}]}),
                json!({}),
                block(),
                None,
            ),
            (
                json!({"topology": [{"key": "block"}]}),
                json!({PREFERRED_TOPOLOGY_ANNOTATION: "rack"}),
                block(),
                rack(),
            ),
            (
                json!({}),
                json!({PREFERRED_TOPOLOGY_ANNOTATION: "rack"}),
                None,
                rack(),
            ),
        ] {
            let d = def(
                json!({"schedulingPolicy": gang, "schedulingConstraints": constraints}),
                annotations.clone(),
            );
            assert!(
                d.policy.is_ok(),
                "{constraints} {annotations}: {:?}",
                d.policy
            );
            assert_eq!(d.topology.required, required, "{constraints}");
            assert_eq!(d.topology.preferred, preferred, "{annotations}");
        }
    }

    #[test]
    fn invalid_topology_is_refused() {
        let gang = json!({"gang": {"minCount": 2}});
        for (constraints, annotations, message) in [
            (
                json!({"topology": [{"key": "block"}, {"key": "rack"}]}),
                json!({}),
                "spec.schedulingConstraints.topology: Too many: 2: must have at most 1 item",
            ),
            (
                json!({"topology": [{}]}),
                json!({}),
                "spec.schedulingConstraints.topology[0].key: Required value",
            ),
            (
                json!({"topology": [{"key": "-rack"}]}),
                json!({}),
                "spec.schedulingConstraints.topology[0].key: Invalid value: \"-rack\": name part must consist",
            ),
            (
                json!({"topology": "rack"}),
                json!({}),
                "spec.schedulingConstraints.topology must be a list, got \"rack\"",
            ),
            (
                json!({}),
                json!({PREFERRED_TOPOLOGY_ANNOTATION: ""}),
                "annotation muster.dev/preferred-topology: Invalid value: \"\": name part must be non-empty",
            ),
        ] {
            let err = def(
                json!({"schedulingPolicy": gang, "schedulingConstraints": constraints}),
                annotations,
            )
            .policy
            .unwrap_err();
            let want = format!("PodGroup ml/train: {message}");
            assert!(err.starts_with(&want), "{err}");
        }
    }

    #[test]
    fn v1alpha2_shape_with_template_ref() {
        let d = pod_group_definition(&json!({
            "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
            "metadata": {"name": "train-0", "namespace": "ml"},
            "spec": {"podGroupTemplateRef": {"workload": {"workloadName": "train", "podGroupTemplateName": "workers"}},
                     "schedulingPolicy": {"gang": {"minCount": 2}}}
        }))
        .unwrap();
        assert_eq!(d.key.to_string(), "PodGroup ml/train-0");
        assert_eq!(
            d.policy,
            Ok(GroupPolicy::Gang {
                min_count: 2,
                schedule_timeout: None
            })
        );
    }

    #[test]
    fn condition_names_and_reasons_per_version() {
        assert_eq!(condition_type("v1alpha2"), "PodGroupScheduled");
        assert_eq!(condition_type("v1beta1"), "PodGroupInitiallyScheduled");
        assert_eq!(condition_type("v1alpha3"), "PodGroupInitiallyScheduled");
        for (phase, reason) in [
            (GroupPhase::WaitingForMembers, "Unschedulable"),
            (GroupPhase::MembersObserved, "Unschedulable"),
            (GroupPhase::Unschedulable, "Unschedulable"),
            (GroupPhase::Scheduled, "Scheduled"),
        ] {
            assert_eq!(condition_reason(phase), reason, "{phase:?}");
        }
    }

    /// Every field, written through the k8s-openapi v1beta1 types, so a
    /// misspelled wire name fails here.
    #[test]
    fn v1beta1_fields_round_trip_through_the_typed_object() {
        use k8s_openapi::api::scheduling::v1beta1 as sched;
        let typed = sched::PodGroup {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("train".into()),
                namespace: Some("ml".into()),
                ..Default::default()
            },
            spec: sched::PodGroupSpec {
                scheduling_policy: sched::PodGroupSchedulingPolicy {
                    gang: Some(sched::GangSchedulingPolicy { min_count: 4 }),
                    ..Default::default()
                },
                scheduling_constraints: Some(sched::PodGroupSchedulingConstraints {
                    topology: Some(vec![sched::TopologyConstraint { key: "rack".into() }]),
                }),
                priority: Some(1000),
                priority_class_name: Some("high".into()),
                disruption_mode: Some(sched::DisruptionMode {
                    all: Some(sched::AllDisruptionMode(json!({}))),
                    single: None,
                }),
                preemption_policy: Some("Never".into()),
                ..Default::default()
            },
            status: None,
        };
        let d = pod_group_definition(&serde_json::to_value(&typed).unwrap()).unwrap();
        assert_eq!(
            d.policy,
            Ok(GroupPolicy::Gang {
                min_count: 4,
                schedule_timeout: None
            })
        );
        assert_eq!(
            d.topology.required,
            Some(crate::model::LevelRef::Label("rack".into()))
        );
        assert_eq!(d.priority, Some(1000));
        assert_eq!(d.priority_class_name.as_deref(), Some("high"));
        assert_eq!(
            d.extras.disruption_mode,
            Some(crate::model::DisruptionMode::All)
        );
        assert_eq!(
            d.extras.preemption_policy,
            Some(crate::model::PreemptionPolicy::Never)
        );
        assert_eq!(d.unsupported, None);

        // Claims are read; a parent composite is recorded.
        let mut claimed = typed.clone();
        claimed.spec.resource_claims = Some(vec![sched::PodGroupResourceClaim {
            name: "gpu".into(),
            resource_claim_name: Some("gpus".into()),
            resource_claim_template_name: None,
        }]);
        let d = pod_group_definition(&serde_json::to_value(&claimed).unwrap()).unwrap();
        let claims = d.extras.resource_claims.as_deref().unwrap();
        assert_eq!(claims.entries.len(), 1);
        assert_eq!(&*claims.entries[0].name, "gpu");
        assert_eq!(d.unsupported, None);
        let mut child = typed;
        child.spec.parent_composite_pod_group_name = Some("job".into());
        let d = pod_group_definition(&serde_json::to_value(&child).unwrap()).unwrap();
        assert_eq!(d.unsupported, None);
        assert_eq!(d.extras.parent_composite.as_deref(), Some("job"));
        assert_eq!(
            d.parent_key().unwrap().to_string(),
            "CompositePodGroup ml/job"
        );
    }

    #[test]
    fn v1alpha2_string_disruption_mode_and_bad_fields() {
        let d = def(
            json!({"schedulingPolicy": {"basic": {}}, "disruptionMode": "PodGroup"}),
            json!({}),
        );
        assert_eq!(
            d.extras.disruption_mode,
            Some(crate::model::DisruptionMode::All)
        );
        for (spec, message) in [
            (
                json!({"schedulingPolicy": {"basic": {}}, "preemptionPolicy": "Always"}),
                "PodGroup ml/train: spec.preemptionPolicy must be Never or PreemptLowerPriority, got \"Always\"",
            ),
            (
                json!({"schedulingPolicy": {"basic": {}}, "disruptionMode": {"some": {}}}),
                "PodGroup ml/train: spec.disruptionMode has unknown mode \"some\" (expected single or all)",
            ),
            (
                json!({"schedulingPolicy": {"basic": {}}, "priority": 1e12}),
                "PodGroup ml/train: spec.priority must be a 32-bit integer, got 1000000000000.0",
            ),
        ] {
            assert_eq!(def(spec, json!({})).policy, Err(message.to_string()));
        }
    }

    #[test]
    fn unreadable_object() {
        assert!(pod_group_definition(&json!({"metadata": {}})).is_err());
    }

    #[test]
    fn basic_policy() {
        assert_eq!(
            def(json!({"schedulingPolicy": {"basic": {}}}), json!({})).policy,
            Ok(GroupPolicy::Basic)
        );
    }

    /// `i64::MAX` seconds (or more than fits 64 bits) is
    /// capped at a day, and the definition says what was asked.
    #[test]
    fn a_huge_timeout_annotation_is_capped() {
        for huge in ["9223372036854775807", "99999999999999999999999", "86401"] {
            let d = def(
                json!({"schedulingPolicy": {"gang": {"minCount": 2}}}),
                json!({"muster.dev/schedule-timeout-seconds": huge}),
            );
            assert_eq!(
                d.policy,
                Ok(GroupPolicy::Gang {
                    min_count: 2,
                    schedule_timeout: Some(Duration::from_secs(24 * 3600))
                }),
                "{huge}"
            );
            assert_eq!(
                d.timeout_capped,
                Some(Box::new(crate::model::CappedTimeout {
                    field: "annotation muster.dev/schedule-timeout-seconds".into(),
                    requested: huge.into(),
                }))
            );
        }
        let d = def(
            json!({"schedulingPolicy": {"gang": {"minCount": 2}}}),
            json!({"muster.dev/schedule-timeout-seconds": "86400"}),
        );
        assert!(
            matches!(d.policy, Ok(GroupPolicy::Gang { schedule_timeout: Some(t), .. }) if t.as_secs() == 86400)
        );
        assert_eq!(d.timeout_capped, None, "exactly the maximum is not capped");
    }

    #[test]
    fn a_count_beyond_the_maximum_is_refused() {
        let err = def(
            json!({"schedulingPolicy": {"gang": {"minCount": 100_001}}}),
            json!({}),
        )
        .policy
        .unwrap_err();
        assert_eq!(
            err,
            "PodGroup ml/train: schedulingPolicy.gang.minCount must be at most 100000, got 100001"
        );
    }

    #[test]
    fn malformed_policies_are_precise() {
        let cases = [
            (
                json!({"schedulingPolicy": {"gang": {"minCount": 0}}}),
                "minCount must be positive, got 0",
            ),
            (
                json!({"schedulingPolicy": {"gang": {"minCount": -2}}}),
                "must be positive, got -2",
            ),
            (
                json!({"schedulingPolicy": {"gang": {}}}),
                "minCount is missing",
            ),
            (
                json!({"schedulingPolicy": {"gang": {"minCount": "4"}}}),
                "must be an integer",
            ),
            (
                json!({"schedulingPolicy": {"fancy": {}}}),
                "unknown policy \"fancy\"",
            ),
            (json!({}), "schedulingPolicy is missing"),
            (
                json!({"schedulingPolicy": {"gang": {"minCount": 2}, "basic": {}}}),
                "both gang and basic",
            ),
        ];
        for (spec, needle) in cases {
            let err = def(spec.clone(), json!({})).policy.unwrap_err();
            assert!(
                err.contains(needle) && err.starts_with("PodGroup ml/train: "),
                "{spec}: {err}"
            );
        }
        let err = def(
            json!({"schedulingPolicy": {"gang": {"minCount": 2}}}),
            json!({"muster.dev/schedule-timeout-seconds": "soon"}),
        )
        .policy
        .unwrap_err();
        assert!(err.contains("muster.dev/schedule-timeout-seconds"), "{err}");
    }
}
