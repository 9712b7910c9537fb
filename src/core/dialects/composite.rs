//! Kubernetes `scheduling.k8s.io/v1alpha3` `CompositePodGroup` (1.37): a
//! group of child groups — PodGroups and composites whose
//! `spec.parentCompositePodGroupName` names it. Translated into a
//! `GroupDef` of source `CompositePodGroup` whose gang `min_count` is the
//! policy's `minGroupCount`; how the hierarchy is scheduled is
//! `gang::hierarchy`'s business.

use serde_json::Value;

use super::common::{Meta, priority_class_name};
use super::pod_group_fields;
use super::workload_api::{scheduling_policy, split_capped};
use crate::model::{DefinitionKey, GroupDef, GroupSource};

/// The condition the scheduler owns on a CompositePodGroup: whether the
/// subtree's scheduling requirement was met (terminal once `True`).
pub const CONDITION: &str = "CompositePodGroupInitiallyScheduled";

/// Translates a CompositePodGroup object. A malformed spec becomes
/// `policy: Err` with the reason (its subtree's pods are refused with it);
/// topology constraints, which Muster does not place by across child
/// groups, make it `unsupported` rather than silently ignored.
pub fn definition(obj: &Value) -> Result<GroupDef, String> {
    let meta = Meta::read(obj)?;
    let spec = &obj["spec"];
    let label = format!("CompositePodGroup {}/{}", meta.namespace, meta.name);
    let (policy, timeout_capped) = split_capped(scheduling_policy(
        &spec["schedulingPolicy"],
        "spec.schedulingPolicy",
        "minGroupCount",
        &meta,
    ));
    let mut def = GroupDef {
        priority_class_name: priority_class_name(spec),
        timeout_capped,
        ..GroupDef::new(
            DefinitionKey::new(meta.namespace, GroupSource::CompositePodGroup, meta.name),
            policy.map_err(|e| format!("{label}: {e}")),
            meta.created_ms,
        )
    };
    if let Err(e) = read_fields(spec, &mut def)
        && def.policy.is_ok()
    {
        def.policy = Err(format!("{label}: {e}"));
    }
    // A required level confines every child group to one domain of it
    // (each child may add its own, narrower level); a preferred one is not
    // placed by.
    match super::workload_api::topology(spec, &meta) {
        Err(e) => {
            if def.policy.is_ok() {
                def.policy = Err(format!("{label}: {e}"));
            }
        }
        Ok(t) if t.preferred.is_some() => {
            def.unsupported = Some(format!(
                "{label}: annotation {} on a CompositePodGroup is not supported by this scheduler",
                super::workload_api::PREFERRED_TOPOLOGY_ANNOTATION
            ));
        }
        Ok(t) => *def.topology = t,
    }
    Ok(def)
}

fn read_fields(spec: &Value, def: &mut GroupDef) -> Result<(), String> {
    def.priority = pod_group_fields::priority(spec)?;
    def.extras.disruption_mode = pod_group_fields::disruption_mode(spec)?;
    def.extras.preemption_policy = pod_group_fields::preemption_policy(spec)?;
    def.extras.parent_composite = pod_group_fields::parent_composite(spec)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::GroupPolicy;
    use k8s_openapi::api::scheduling::v1alpha3 as sched;
    use serde_json::json;

    fn typed(policy: sched::CompositePodGroupSchedulingPolicy) -> sched::CompositePodGroup {
        sched::CompositePodGroup {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("job".into()),
                namespace: Some("ml".into()),
                ..Default::default()
            },
            spec: sched::CompositePodGroupSpec {
                scheduling_policy: policy,
                workload_ref: sched::WorkloadReference {
                    template_name: "job".into(),
                    ..Default::default()
                },
                ..Default::default()
            },
            status: None,
        }
    }

    fn gang(n: i32) -> sched::CompositePodGroupSchedulingPolicy {
        sched::CompositePodGroupSchedulingPolicy {
            gang: Some(sched::CompositeGangSchedulingPolicy { min_group_count: n }),
            basic: None,
        }
    }

    /// Every field written through the k8s-openapi v1alpha3 types, so a
    /// misspelled wire name fails here.
    #[test]
    fn fields_round_trip_through_the_typed_object() {
        let mut obj = typed(gang(2));
        obj.spec.parent_composite_pod_group_name = Some("root".into());
        obj.spec.priority = Some(7);
        obj.spec.priority_class_name = Some("high".into());
        obj.spec.preemption_policy = Some("Never".into());
        let d = definition(&serde_json::to_value(&obj).unwrap()).unwrap();
        assert_eq!(d.key.to_string(), "CompositePodGroup ml/job");
        assert_eq!(
            d.policy,
            Ok(GroupPolicy::Gang {
                min_count: 2,
                schedule_timeout: None
            })
        );
        assert_eq!(d.extras.parent_composite.as_deref(), Some("root"));
        assert_eq!(
            d.parent_key().unwrap().to_string(),
            "CompositePodGroup ml/root"
        );
        assert_eq!(d.priority, Some(7));
        assert_eq!(d.priority_class_name.as_deref(), Some("high"));
        assert_eq!(d.unsupported, None);

        let basic = typed(sched::CompositePodGroupSchedulingPolicy {
            basic: Some(sched::CompositeBasicSchedulingPolicy(json!({}))),
            gang: None,
        });
        let d = definition(&serde_json::to_value(&basic).unwrap()).unwrap();
        assert_eq!(d.policy, Ok(GroupPolicy::Basic));
        assert_eq!(d.parent_key(), None);
    }

    #[test]
    fn topology_is_read_as_the_required_level() {
        let mut obj = typed(gang(1));
        obj.spec.scheduling_constraints = Some(sched::CompositePodGroupSchedulingConstraints {
            topology: Some(vec![sched::TopologyConstraint { key: "rack".into() }]),
        });
        let d = definition(&serde_json::to_value(&obj).unwrap()).unwrap();
        assert_eq!(d.unsupported, None);
        assert_eq!(
            d.topology.required,
            Some(crate::model::LevelRef::Label("rack".into()))
        );
        // Two entries are refused as the API server refuses them.
        obj.spec.scheduling_constraints = Some(sched::CompositePodGroupSchedulingConstraints {
            topology: Some(vec![
                sched::TopologyConstraint { key: "rack".into() },
                sched::TopologyConstraint {
                    key: "block".into(),
                },
            ]),
        });
        let d = definition(&serde_json::to_value(&obj).unwrap()).unwrap();
        assert!(
            d.policy.as_ref().is_err_and(|e| e.contains("Too many: 2")),
            "{:?}",
            d.policy
        );
    }

    #[test]
    fn malformed_policies() {
        for (policy, message) in [
            (
                json!({"gang": {"minGroupCount": 0}}),
                "CompositePodGroup ml/job: spec.schedulingPolicy.gang.minGroupCount must be positive, got 0",
            ),
            (
                json!({"gang": {}}),
                "CompositePodGroup ml/job: spec.schedulingPolicy.gang.minGroupCount is missing",
            ),
            (
                json!({"gang": {"minGroupCount": 1}, "basic": {}}),
                "CompositePodGroup ml/job: spec.schedulingPolicy sets both gang and basic; exactly one is allowed",
            ),
            (
                json!({}),
                "CompositePodGroup ml/job: spec.schedulingPolicy is missing (expected gang or basic)",
            ),
        ] {
            let d = definition(&json!({"metadata": {"name": "job", "namespace": "ml"},
                "spec": {"schedulingPolicy": policy}}))
            .unwrap();
            assert_eq!(d.policy, Err(message.to_string()));
        }
    }
}
