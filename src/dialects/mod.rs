//! Group dialects: how a pod names its group, translated into `GroupMembership`.
//!
//! Precedence when a pod carries several references (workload-api.md §5):
//! `spec.schedulingGroup` → `spec.workloadRef` → Coscheduling label → Volcano
//! annotation → Kueue labels. `muster.dev/ignore-groups: "true"` opts a pod out.
//! Each dialect is a pure function of the pod; definitions are matched later by
//! `DefinitionKey`.

mod common;
pub mod workload_api;

pub use common::SCHEDULE_TIMEOUT_ANNOTATION;
pub use workload_api::pod_group_definition;

use crate::model::wire::PodWire;
use crate::model::{DefinitionKey, GroupDef, GroupKey, GroupMembership, GroupSource};

/// A kind of object that defines groups, and how to translate one.
pub struct DefinitionSource {
    pub group: &'static str,
    /// Served versions in order of preference: the informer watches the first
    /// one the cluster serves (one object served in two versions is one group).
    pub versions: &'static [&'static str],
    pub kind: &'static str,
    pub plural: &'static str,
    /// Object JSON → the group definitions it declares (a v1alpha1 Workload
    /// declares several). `Err` means the object itself is unreadable.
    pub translate: fn(&serde_json::Value) -> Result<Vec<GroupDef>, String>,
}

/// Every group-definition kind Muster watches.
pub const DEFINITION_SOURCES: &[DefinitionSource] = &[DefinitionSource {
    group: "scheduling.k8s.io",
    versions: &["v1beta1", "v1alpha2"],
    kind: "PodGroup",
    plural: "podgroups",
    translate: |obj| pod_group_definition(obj).map(|d| vec![d]),
}];

/// Annotation that makes a pod an ordinary pod whatever groups it references.
pub const IGNORE_GROUPS_ANNOTATION: &str = "muster.dev/ignore-groups";

/// Resolves which group (if any) a pod belongs to.
pub fn resolve_membership(pod: &PodWire) -> GroupMembership {
    if pod
        .metadata
        .annotations
        .get(IGNORE_GROUPS_ANNOTATION)
        .map(String::as_str)
        == Some("true")
    {
        return GroupMembership::None;
    }
    let namespace = pod
        .metadata
        .namespace
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or("default");
    if let Some(sg) = &pod.spec.scheduling_group {
        return match sg.pod_group_name.as_deref() {
            Some(name) if !name.is_empty() => GroupMembership::Member(GroupKey::new(
                DefinitionKey::new(namespace, GroupSource::PodGroup, name),
            )),
            _ => GroupMembership::Invalid("spec.schedulingGroup.podGroupName is empty".into()),
        };
    }
    if let Some(wr) = &pod.spec.workload_ref {
        let workload = wr.name.as_deref().unwrap_or("");
        let pod_group = wr.pod_group.as_deref().unwrap_or("");
        if workload.is_empty() {
            return GroupMembership::Invalid("spec.workloadRef.name is empty".into());
        }
        if pod_group.is_empty() {
            return GroupMembership::Invalid(format!(
                "spec.workloadRef.podGroup is empty (Workload {namespace}/{workload})"
            ));
        }
        let def = DefinitionKey::new(
            namespace,
            GroupSource::Workload,
            &format!("{workload}/{pod_group}"),
        );
        return GroupMembership::Member(
            match wr
                .pod_group_replica_key
                .as_deref()
                .filter(|k| !k.is_empty())
            {
                Some(replica) => GroupKey::with_replica(def, replica),
                None => GroupKey::new(def),
            },
        );
    }
    GroupMembership::None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn wire(v: serde_json::Value) -> PodWire {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn scheduling_group_wins_over_workload_ref() {
        let p = wire(
            json!({"metadata": {"name": "p", "namespace": "ml"}, "spec": {
            "schedulingGroup": {"podGroupName": "pg"},
            "workloadRef": {"name": "w", "podGroup": "workers"}}}),
        );
        let key = resolve_membership(&p).key().cloned().unwrap();
        assert_eq!(key.definition.source, GroupSource::PodGroup);
        assert_eq!(&*key.definition.name, "pg");
        assert_eq!(key.to_string(), "PodGroup ml/pg");
    }

    #[test]
    fn workload_ref_with_replica_key() {
        let p = wire(
            json!({"metadata": {"name": "p", "namespace": "ml"}, "spec": {
            "workloadRef": {"name": "training", "podGroup": "workers", "podGroupReplicaKey": "1"}}}),
        );
        let key = resolve_membership(&p).key().cloned().unwrap();
        assert_eq!(key.replica.as_deref(), Some("1"));
        assert_eq!(
            key.to_string(),
            "Workload ml/training podGroup \"workers\" replica \"1\""
        );
    }

    #[test]
    fn malformed_and_opt_out() {
        let empty = wire(json!({"spec": {"schedulingGroup": {"podGroupName": ""}}}));
        assert!(matches!(
            resolve_membership(&empty),
            GroupMembership::Invalid(_)
        ));
        let opted_out = wire(
            json!({"metadata": {"annotations": {"muster.dev/ignore-groups": "true"}},
            "spec": {"schedulingGroup": {"podGroupName": "pg"}}}),
        );
        assert_eq!(resolve_membership(&opted_out), GroupMembership::None);
    }
}
