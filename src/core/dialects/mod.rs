//! Group dialects: how a pod names its group, translated into `GroupMembership`.
//!
//! Precedence when a pod carries several references (workload-api.md §5):
//! `spec.schedulingGroup` → `spec.workloadRef` → Coscheduling label → Volcano
//! annotation → Kueue labels → top owner (`owners`). `muster.dev/ignore-groups:
//! "true"` opts a pod out; `muster.dev/ignore-workload-api: "true"` skips the
//! first two. Each dialect is a pure function of the pod; definitions are
//! matched later by `DefinitionKey`.

mod common;
pub mod composite;
pub mod coscheduling;
pub mod kueue;
pub mod owners;
mod pod_group_fields;
pub mod topology;
pub mod volcano;
pub mod workload_api;
pub mod workload_v1alpha1;

use common::with_reserve_after;
pub use common::{GangStatus, RESERVE_AFTER_ANNOTATION, SCHEDULE_TIMEOUT_ANNOTATION};
pub use kueue::{KueueGroups, Synthesized};
pub use workload_api::pod_group_definition;
pub use workload_v1alpha1::workload_definitions;

use crate::model::wire::PodWire;
use crate::model::{GroupDef, GroupMembership, GroupSource, ModelError, PodInfo};

/// A kind of object that defines groups, and how to translate one.
pub struct DefinitionSource {
    /// The informer's name (`<plural>.<group>`), unique among sources.
    pub name: &'static str,
    /// The dialect whose definitions this kind declares.
    pub source: GroupSource,
    pub group: &'static str,
    /// Served versions in order of preference: the informer watches the first
    /// one the cluster serves (one object served in two versions is one group).
    pub versions: &'static [&'static str],
    pub kind: &'static str,
    pub plural: &'static str,
    /// Whether the kind has a `/status` subresource. Volcano's PodGroup CRD
    /// has none: its status is written with the object, as Volcano's own
    /// scheduler does (a patch of `/status` would be a 404).
    pub status_subresource: bool,
    /// Object JSON → the group definitions it declares (a v1alpha1 Workload
    /// declares several). `Err` means the object itself is unreadable.
    pub translate: fn(&serde_json::Value) -> Result<Vec<GroupDef>, String>,
}

/// Every group-definition kind Muster watches. (Kueue groups have no
/// definition object: see [`KueueGroups`].)
pub const DEFINITION_SOURCES: &[DefinitionSource] = &[
    DefinitionSource {
        name: "podgroups.scheduling.k8s.io",
        source: GroupSource::PodGroup,
        group: "scheduling.k8s.io",
        // Newest first, as the API server's version priority orders them:
        // beta before alpha, then the higher alpha (v1alpha3, 1.37).
        versions: &["v1beta1", "v1alpha3", "v1alpha2"],
        kind: "PodGroup",
        plural: "podgroups",
        status_subresource: true,
        translate: |obj| pod_group_definition(obj).map(|d| with_reserve_after(obj, vec![d])),
    },
    DefinitionSource {
        name: "compositepodgroups.scheduling.k8s.io",
        source: GroupSource::CompositePodGroup,
        group: "scheduling.k8s.io",
        versions: &["v1alpha3"],
        kind: "CompositePodGroup",
        plural: "compositepodgroups",
        status_subresource: true,
        translate: |obj| composite::definition(obj).map(|d| with_reserve_after(obj, vec![d])),
    },
    DefinitionSource {
        name: "workloads.scheduling.k8s.io",
        source: GroupSource::Workload,
        group: "scheduling.k8s.io",
        // Only the 1.35 Workload declares groups; later ones are templates.
        versions: &["v1alpha1"],
        kind: "Workload",
        plural: "workloads",
        status_subresource: true,
        translate: |obj| workload_definitions(obj).map(|d| with_reserve_after(obj, d)),
    },
    DefinitionSource {
        name: "podgroups.scheduling.x-k8s.io",
        source: GroupSource::Coscheduling,
        group: "scheduling.x-k8s.io",
        versions: &["v1alpha1"],
        kind: "PodGroup",
        plural: "podgroups",
        status_subresource: true,
        translate: |obj| coscheduling::definition(obj).map(|d| with_reserve_after(obj, vec![d])),
    },
    DefinitionSource {
        name: "podgroups.scheduling.volcano.sh",
        source: GroupSource::Volcano,
        group: "scheduling.volcano.sh",
        versions: &["v1beta1"],
        kind: "PodGroup",
        plural: "podgroups",
        status_subresource: false,
        translate: |obj| volcano::definition(obj).map(|d| with_reserve_after(obj, vec![d])),
    },
];

/// The definition kind of a dialect, if it has one.
pub fn definition_source(source: GroupSource) -> Option<&'static DefinitionSource> {
    DEFINITION_SOURCES.iter().find(|d| d.source == source)
}

/// Whether status is written through the `/status` subresource for a
/// definition kind of this API group (every kind Muster writes but Volcano's).
pub fn status_subresource(group: &str) -> bool {
    DEFINITION_SOURCES
        .iter()
        .find(|d| d.group == group)
        .is_none_or(|d| d.status_subresource)
}

/// The `status` merge patch a dialect writes for a gang report, or `None` when
/// the dialect has no such status (`PodGroup` uses a condition, written by the
/// daemon; Workload v1alpha1 and Kueue get events only).
pub fn status_patch(source: GroupSource, status: &GangStatus<'_>) -> Option<serde_json::Value> {
    match source {
        GroupSource::Coscheduling => Some(coscheduling::status(status)),
        GroupSource::Volcano => Some(volcano::status(status)),
        GroupSource::PodGroup
        | GroupSource::CompositePodGroup
        | GroupSource::Workload
        | GroupSource::Kueue
        | GroupSource::Owner(_) => None,
    }
}

/// Annotation that makes a pod an ordinary pod whatever groups it references.
pub const IGNORE_GROUPS_ANNOTATION: &str = "muster.dev/ignore-groups";

/// Resolves which group (if any) a pod belongs to: the first dialect, in
/// precedence order, that the pod references decides.
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
    let namespace = crate::model::namespace_or_default(pod.metadata.namespace.as_deref());
    let dialects: [fn(&PodWire, &str) -> Option<GroupMembership>; 6] = [
        workload_api::membership,
        workload_v1alpha1::membership,
        coscheduling::membership,
        volcano::membership,
        kueue::membership,
        owners::membership,
    ];
    // The Workload API dialects come first: ignoring them skips two.
    let ignore_workload_api = pod
        .metadata
        .annotations
        .get(owners::IGNORE_WORKLOAD_API_ANNOTATION)
        .is_some_and(|v| v == "true");
    let skip = if ignore_workload_api { 2 } else { 0 };
    dialects
        .iter()
        .skip(skip)
        .find_map(|membership| membership(pod, namespace))
        .unwrap_or_default()
}

/// Decoding a whole pod needs its group, which only the dialects can tell:
/// these constructors resolve it and hand it to the model.
impl PodInfo {
    /// From the pod's JSON, its group resolved.
    pub fn from_json(json: &[u8]) -> Result<Self, ModelError> {
        let wire: PodWire = serde_json::from_slice(json)
            .map_err(|e| ModelError::invalid(format!("pod JSON: {e}")))?;
        Self::from_wire_resolved(&wire)
    }

    /// From the wire form, its group resolved.
    pub fn from_wire_resolved(wire: &PodWire) -> Result<Self, ModelError> {
        PodInfo::from_wire(wire, resolve_membership(wire))
    }
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

    #[test]
    fn precedence_across_dialects() {
        let all = json!({"metadata": {"name": "p", "namespace": "ns",
            "labels": {"scheduling.x-k8s.io/pod-group": "cos", "kueue.x-k8s.io/pod-group-name": "kq"},
            "annotations": {"scheduling.k8s.io/group-name": "vol", "kueue.x-k8s.io/pod-group-total-count": "2"}},
            "spec": {"schedulingGroup": {"podGroupName": "pg"},
                     "workloadRef": {"name": "w", "podGroup": "workers"}}});
        let expected = [
            "PodGroup ns/pg",
            "Workload ns/w podGroup \"workers\"",
            "PodGroup.scheduling.x-k8s.io ns/cos",
            "PodGroup.scheduling.volcano.sh ns/vol",
            "Kueue pod group ns/kq",
        ];
        let mut pod = all;
        let removals: [(&str, &str); 4] = [
            ("spec", "schedulingGroup"),
            ("spec", "workloadRef"),
            ("labels", "scheduling.x-k8s.io/pod-group"),
            ("annotations", "scheduling.k8s.io/group-name"),
        ];
        for (i, want) in expected.iter().enumerate() {
            let key = resolve_membership(&wire(pod.clone()))
                .key()
                .cloned()
                .unwrap();
            assert_eq!(&key.to_string(), want, "step {i}");
            if let Some((section, field)) = removals.get(i) {
                let obj = match *section {
                    "spec" => &mut pod["spec"],
                    other => &mut pod["metadata"][other],
                };
                obj.as_object_mut().unwrap().remove(*field);
            }
        }
    }

    #[test]
    fn a_malformed_higher_dialect_wins() {
        let p = wire(
            json!({"metadata": {"labels": {"scheduling.x-k8s.io/pod-group": ""},
            "annotations": {"scheduling.k8s.io/group-name": "vol"}}}),
        );
        assert_eq!(
            resolve_membership(&p),
            GroupMembership::Invalid("label scheduling.x-k8s.io/pod-group is empty".into())
        );
    }

    #[test]
    fn every_dialect_with_a_definition_is_watched() {
        for source in [
            GroupSource::PodGroup,
            GroupSource::CompositePodGroup,
            GroupSource::Workload,
            GroupSource::Coscheduling,
            GroupSource::Volcano,
        ] {
            assert!(definition_source(source).is_some(), "{source:?}");
        }
        assert!(!status_subresource("scheduling.volcano.sh"));
        assert!(status_subresource("scheduling.k8s.io"));
        assert!(status_subresource("scheduling.x-k8s.io"));
        let mut names: Vec<_> = DEFINITION_SOURCES.iter().map(|d| d.name).collect();
        names.dedup();
        assert_eq!(names.len(), DEFINITION_SOURCES.len());
    }
}
