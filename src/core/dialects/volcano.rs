//! Volcano: `scheduling.volcano.sh/v1beta1` `PodGroup`. Members carry the
//! annotation `scheduling.k8s.io/group-name: <name>`, or the key
//! `scheduling.volcano.sh/group-name` as an annotation or (Kubeflow Trainer)
//! a label. Read: `spec.minMember` (0 or omitted: no gang),
//! `spec.minResources` (and Muster's timeout annotation), `spec.minTaskMember`
//! (per-task quorum; a member's task is its `volcano.sh/task-spec`
//! annotation), `spec.priorityClassName` (the members' priority when they
//! carry none), `spec.queue` (recorded, informational) and
//! `spec.networkTopology` (a topology over HyperNode tiers,
//! [`network_topology`]). Written, with
//! the object since the CRD has no `/status` subresource: `status.phase`,
//! `status.running` (members bound or binding) and one condition in
//! Volcano's vocabulary.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::common::{
    GangStatus, Meta, bounded_count, min_member_definition, named_member, priority_class_name,
};
use crate::model::topology::MAX_HYPERNODE_TIER;
use crate::model::wire::PodWire;
use crate::model::{
    GroupDef, GroupMembership, GroupPhase, GroupPolicy, GroupSource, LevelRef, MAX_GROUP_COUNT,
    TopologyRequest,
};

/// The annotation naming a pod's Volcano `PodGroup` (Volcano's
/// `KubeGroupNameAnnotationKey`).
pub const GROUP_NAME_ANNOTATION: &str = "scheduling.k8s.io/group-name";
/// Volcano's own key for the same (`VolcanoGroupNameAnnotationKey`); Kubeflow
/// Trainer sets it as a pod label.
pub const VOLCANO_GROUP_NAME_KEY: &str = "scheduling.volcano.sh/group-name";

/// The pod's membership, if it names a Volcano group: the
/// `scheduling.k8s.io/group-name` annotation first (Volcano's primary key),
/// then `scheduling.volcano.sh/group-name` as an annotation, then as a label.
pub fn membership(pod: &PodWire, namespace: &str) -> Option<GroupMembership> {
    let keys = [
        (
            pod.metadata.annotations.get(GROUP_NAME_ANNOTATION),
            "annotation",
            GROUP_NAME_ANNOTATION,
        ),
        (
            pod.metadata.annotations.get(VOLCANO_GROUP_NAME_KEY),
            "annotation",
            VOLCANO_GROUP_NAME_KEY,
        ),
        (
            pod.metadata.labels.get(VOLCANO_GROUP_NAME_KEY),
            "label",
            VOLCANO_GROUP_NAME_KEY,
        ),
    ];
    let (name, what, key) = keys.into_iter().find(|(name, _, _)| name.is_some())?;
    named_member(
        name,
        &format!("{what} {key}"),
        namespace,
        GroupSource::Volcano,
    )
}

/// Translates a Volcano `PodGroup`; a malformed spec becomes `policy: Err`.
pub fn definition(obj: &Value) -> Result<GroupDef, String> {
    let mut def = min_member_definition(obj, GroupSource::Volcano, None)?;
    let spec = &obj["spec"];
    match min_task_members(&spec["minTaskMember"]) {
        Ok(tasks) => {
            // minMember 0 with per-task minimums: the tasks make the gang.
            if def.policy == Ok(GroupPolicy::Basic) && !tasks.is_empty() {
                let total = tasks.values().fold(0u32, |a, n| a.saturating_add(*n));
                def.policy = if total <= MAX_GROUP_COUNT {
                    Ok(GroupPolicy::Gang {
                        min_count: total,
                        schedule_timeout: gang_timeout(obj)?,
                    })
                } else {
                    Err(format!(
                        "{}: spec.minTaskMember adds up to {total}, more than {MAX_GROUP_COUNT}",
                        def.key
                    ))
                };
            }
            def.min_task_members = tasks;
        }
        Err(e) if def.policy.is_ok() => def.policy = Err(format!("{}: {e}", def.key)),
        Err(_) => {}
    }
    def.priority_class_name = priority_class_name(spec);
    def.queue = spec["queue"]
        .as_str()
        .filter(|q| !q.is_empty())
        .map(str::to_string);
    match network_topology(&spec["networkTopology"]) {
        Ok(topology) => *def.topology = topology,
        Err(e) if def.policy.is_ok() => def.policy = Err(format!("{}: {e}", def.key)),
        Err(_) => {}
    }
    def.unsupported = subgroup_topology(spec).map(|at| {
        format!(
            "{}: {at} (a network topology per subgroup) is not supported by this scheduler",
            def.key
        )
    });
    Ok(def)
}

/// `spec.networkTopology` → what the gang asks of the HyperNode tiers.
///
/// - `mode: hard` (the default) with `highestTierAllowed: N` (or
///   `highestTierName`): every member within one HyperNode of tier N or
///   lower, tier 1 tried first: `preferred: Tier(1)`, `required: Tier(N)`
///   (`TierName(name)` for a name; for N = 0, both `Tier(0)`). Hard mode
///   without either bound is refused (Volcano: "no tier boundary").
/// - `mode: soft`: the lowest tier that holds the gang, else anywhere:
///   `preferred: Tier(1)`, no `required`. A bound given in soft mode only
///   ranks placements within it first in Volcano, which trying tiers
///   narrowest first already does.
///
/// Absent: nothing asked.
pub fn network_topology(nt: &Value) -> Result<TopologyRequest, String> {
    let field = "spec.networkTopology";
    if nt.is_null() {
        return Ok(TopologyRequest::default());
    }
    if !nt.is_object() {
        return Err(format!("{field} must be an object, got {nt}"));
    }
    let hard = match &nt["mode"] {
        Value::Null => true,
        Value::String(m) if m == "hard" => true,
        Value::String(m) if m == "soft" => false,
        other => {
            return Err(format!(
                "{field}.mode: Unsupported value: {other}: supported values: \"hard\", \"soft\""
            ));
        }
    };
    let tier = match &nt["highestTierAllowed"] {
        Value::Null => None,
        v => Some(
            v.as_u64()
                .filter(|t| *t <= u64::from(MAX_HYPERNODE_TIER))
                .and_then(|t| u32::try_from(t).ok())
                .ok_or_else(|| {
                    format!(
                        "{field}.highestTierAllowed must be an integer between 0 and {MAX_HYPERNODE_TIER}, got {v}"
                    )
                })?,
        ),
    };
    let tier_name = match &nt["highestTierName"] {
        Value::Null => None,
        Value::String(s) if s.is_empty() => None,
        Value::String(s) if s.len() <= 253 => Some(s.as_str()),
        Value::String(_) => {
            return Err(format!(
                "{field}.highestTierName must be no more than 253 characters"
            ));
        }
        other => {
            return Err(format!(
                "{field}.highestTierName must be a string, got {other}"
            ));
        }
    };
    let bound = match (tier, tier_name) {
        (Some(_), Some(_)) => {
            return Err(format!(
                "{field}: highestTierAllowed and highestTierName cannot be set simultaneously"
            ));
        }
        (Some(t), None) => Some(LevelRef::Tier(t)),
        (None, Some(name)) => Some(LevelRef::TierName(name.into())),
        (None, None) => None,
    };
    if !hard {
        return Ok(TopologyRequest::preferred(LevelRef::Tier(1)));
    }
    let Some(required) = bound else {
        return Err(format!(
            "{field}: mode hard needs highestTierAllowed or highestTierName (network topology constraint has no tier boundary)"
        ));
    };
    let preferred = match required {
        LevelRef::Tier(0) => LevelRef::Tier(0),
        _ => LevelRef::Tier(1),
    };
    Ok(TopologyRequest {
        required: Some(required),
        preferred: Some(preferred),
        ..TopologyRequest::default()
    })
}

/// The first `spec.subGroupPolicy[i].networkTopology` set, by field path:
/// a topology per subgroup, which Muster does not place by.
fn subgroup_topology(spec: &Value) -> Option<String> {
    spec["subGroupPolicy"]
        .as_array()?
        .iter()
        .position(|p| !p["networkTopology"].is_null())
        .map(|i| format!("spec.subGroupPolicy[{i}].networkTopology"))
}

/// The timeout Muster's annotation sets, for a gang made of tasks alone.
fn gang_timeout(obj: &Value) -> Result<Option<std::time::Duration>, String> {
    let meta = Meta::read(obj)?;
    Ok(meta.timeout_annotation().ok().flatten().map(|t| t.value))
}

/// `spec.minTaskMember`: task name → minimum members of that task. Entries of
/// 0 require nothing and are dropped.
fn min_task_members(value: &Value) -> Result<BTreeMap<String, u32>, String> {
    let map = match value {
        Value::Null => return Ok(BTreeMap::new()),
        Value::Object(map) => map,
        other => {
            return Err(format!(
                "spec.minTaskMember must be a map of task name to count, got {other}"
            ));
        }
    };
    let mut tasks = BTreeMap::new();
    for (task, v) in map {
        if task.is_empty() {
            return Err("spec.minTaskMember has an empty task name".into());
        }
        let field = format!("spec.minTaskMember.{task}");
        match v.as_i64().filter(|n| *n >= 0) {
            Some(0) => {}
            Some(n) => {
                tasks.insert(task.clone(), bounded_count(n, &field)?);
            }
            None => {
                return Err(format!("{field} must be a non-negative integer, got {v}"));
            }
        }
    }
    Ok(tasks)
}

/// Volcano's condition reason for a gang short of members (`NotEnoughPodsReason`).
pub const NOT_ENOUGH_TASKS: &str = "NotEnoughTasks";
/// Volcano's condition reason for a gang that does not fit (`NotEnoughResourcesReason`).
pub const NOT_ENOUGH_RESOURCES: &str = "NotEnoughResources";
/// The reason Volcano's gang plugin gives its `Scheduled` condition.
pub const GANG_READY: &str = "tasks in gang are ready to be scheduled";

/// The `status` merge patch for a gang report, in Volcano's vocabulary:
/// `Pending` with an `Unschedulable`/`NotEnoughTasks` condition while
/// members are missing; `Inqueue` once they all exist (conditions left as
/// they are) and, after a rejection, with an
/// `Unschedulable`/`NotEnoughResources` condition carrying the message;
/// `Running` with a `Scheduled` condition once the quorum is released.
/// Each condition carries a `transitionID`: Volcano's is its scheduling
/// session's UID; Muster has no sessions, so it is the report's time.
pub fn status(s: &GangStatus<'_>) -> Value {
    let (phase, condition) = match s.phase {
        GroupPhase::WaitingForMembers => ("Pending", Some(("Unschedulable", NOT_ENOUGH_TASKS))),
        GroupPhase::MembersObserved => ("Inqueue", None),
        GroupPhase::Unschedulable => ("Inqueue", Some(("Unschedulable", NOT_ENOUGH_RESOURCES))),
        GroupPhase::Scheduled => ("Running", Some(("Scheduled", GANG_READY))),
    };
    let mut status = json!({"phase": phase, "running": s.scheduled_count});
    if let Some((type_, reason)) = condition {
        status["conditions"] = json!([{
            "type": type_,
            "status": "True",
            "transitionID": format!("muster-{}", s.now),
            "reason": reason,
            "message": s.message,
            "lastTransitionTime": s.now,
        }]);
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CPU, GroupPolicy};

    fn def(spec: Value) -> GroupDef {
        definition(&json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "job", "namespace": "batch"},
            "spec": spec
        }))
        .unwrap()
    }

    #[test]
    fn reads_min_member_and_resources() {
        let d = def(
            json!({"minMember": 2, "minTaskMember": {"w": 2}, "queue": "default",
                           "minResources": {"cpu": 4, "memory": "1Gi"}}),
        );
        assert_eq!(
            d.key.to_string(),
            "PodGroup.scheduling.volcano.sh batch/job"
        );
        assert_eq!(
            d.policy,
            Ok(GroupPolicy::Gang {
                min_count: 2,
                schedule_timeout: None
            })
        );
        assert_eq!(d.min_resources.map(|r| r.get(CPU)), Some(4000));
        assert_eq!(d.min_task_members, [("w".to_string(), 2)].into());
        assert_eq!(d.queue.as_deref(), Some("default"));
        assert_eq!(d.priority_class_name, None);
    }

    #[test]
    fn reads_tasks_priority_class_and_queue() {
        let d = def(
            json!({"minMember": 3, "minTaskMember": {"ps": 1, "worker": 2, "idle": 0},
                           "priorityClassName": "high", "queue": "research"}),
        );
        assert_eq!(
            d.min_task_members,
            [("ps".to_string(), 1), ("worker".to_string(), 2)].into()
        );
        assert_eq!(d.priority_class_name.as_deref(), Some("high"));
        assert_eq!(d.queue.as_deref(), Some("research"));
    }

    #[test]
    fn malformed_specs() {
        for (spec, needle) in [
            (
                json!({"minMember": -1}),
                "spec.minMember must not be negative, got -1",
            ),
            (
                json!({"minMember": "two"}),
                "spec.minMember must be an integer",
            ),
            (
                json!({"minMember": 1, "minResources": "x"}),
                "spec.minResources must be a map",
            ),
            (
                json!({"minMember": 1, "minTaskMember": ["ps"]}),
                "spec.minTaskMember must be a map of task name to count, got [\"ps\"]",
            ),
            (
                json!({"minMember": 1, "minTaskMember": {"ps": -1}}),
                "spec.minTaskMember.ps must be a non-negative integer, got -1",
            ),
            (
                json!({"minMember": 1, "minTaskMember": {"ps": "one"}}),
                "spec.minTaskMember.ps must be a non-negative integer, got \"one\"",
            ),
        ] {
            let err = def(spec.clone()).policy.unwrap_err();
            assert!(
                err.starts_with("PodGroup.scheduling.volcano.sh batch/job: ")
                    && err.contains(needle),
                "{spec}: {err}"
            );
        }
    }

    #[test]
    fn network_topology_maps_to_tiers() {
        let tier = LevelRef::Tier;
        for (nt, required, preferred) in [
            (json!(null), None, None),
            (
                json!({"mode": "hard", "highestTierAllowed": 2}),
                Some(tier(2)),
                Some(tier(1)),
            ),
            (
                json!({"highestTierAllowed": 1}),
                Some(tier(1)),
                Some(tier(1)),
            ),
            (
                json!({"highestTierAllowed": 0}),
                Some(tier(0)),
                Some(tier(0)),
            ),
            (
                json!({"mode": "hard", "highestTierName": "spine"}),
                Some(LevelRef::TierName("spine".into())),
                Some(tier(1)),
            ),
            (json!({"mode": "soft"}), None, Some(tier(1))),
            (
                json!({"mode": "soft", "highestTierAllowed": 3}),
                None,
                Some(tier(1)),
            ),
            (
                json!({"mode": "hard", "highestTierAllowed": 2, "highestTierName": ""}),
                Some(tier(2)),
                Some(tier(1)),
            ),
        ] {
            let d = def(json!({"minMember": 2, "networkTopology": nt}));
            assert!(d.policy.is_ok(), "{nt}: {:?}", d.policy);
            assert_eq!(d.topology.required, required, "{nt}");
            assert_eq!(d.topology.preferred, preferred, "{nt}");
            assert!(d.topology.slice.is_none() && !d.topology.unconstrained);
        }
    }

    #[test]
    fn malformed_network_topology() {
        for (nt, message) in [
            (
                json!("hard"),
                "spec.networkTopology must be an object, got \"hard\"",
            ),
            (
                json!({"mode": "strict", "highestTierAllowed": 1}),
                "spec.networkTopology.mode: Unsupported value: \"strict\": supported values: \"hard\", \"soft\"",
            ),
            (
                json!({"highestTierAllowed": -1}),
                "spec.networkTopology.highestTierAllowed must be an integer between 0 and 16, got -1",
            ),
            (
                json!({"highestTierAllowed": 17}),
                "spec.networkTopology.highestTierAllowed must be an integer between 0 and 16, got 17",
            ),
            (
                json!({"highestTierAllowed": 1.5}),
                "spec.networkTopology.highestTierAllowed must be an integer between 0 and 16, got 1.5",
            ),
            (
                json!({"highestTierName": 3}),
                "spec.networkTopology.highestTierName must be a string, got 3",
            ),
            (
                json!({"highestTierAllowed": 1, "highestTierName": "rack"}),
                "spec.networkTopology: highestTierAllowed and highestTierName cannot be set simultaneously",
            ),
            (
                json!({"mode": "hard"}),
                "spec.networkTopology: mode hard needs highestTierAllowed or highestTierName (network topology constraint has no tier boundary)",
            ),
            (
                json!({}),
                "spec.networkTopology: mode hard needs highestTierAllowed or highestTierName",
            ),
        ] {
            let err = def(json!({"minMember": 2, "networkTopology": nt}))
                .policy
                .unwrap_err();
            let want = format!("PodGroup.scheduling.volcano.sh batch/job: {message}");
            assert!(err.starts_with(&want), "{nt}: {err}");
        }
    }

    #[test]
    fn subgroup_topology_is_refused() {
        let d = def(json!({"minMember": 2, "subGroupPolicy": [
            {"name": "a"},
            {"name": "b", "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}]}));
        assert!(d.policy.is_ok());
        assert_eq!(
            d.unsupported.as_deref(),
            Some(
                "PodGroup.scheduling.volcano.sh batch/job: spec.subGroupPolicy[1].networkTopology (a network topology per subgroup) is not supported by this scheduler"
            )
        );
        assert_eq!(def(json!({"minMember": 2})).unsupported, None);
    }

    #[test]
    fn status_patch() {
        let mut s = GangStatus {
            phase: GroupPhase::Scheduled,
            reason: "Scheduled",
            message: "quorum of 2 reached",
            scheduled_count: 2,
            now: "2026-01-01T00:00:00Z",
            first: true,
        };
        let v = status(&s);
        assert_eq!(v["phase"], "Running");
        assert_eq!(v["running"], 2);
        assert_eq!(v["conditions"][0]["type"], "Scheduled");
        assert_eq!(v["conditions"][0]["reason"], GANG_READY);
        assert_eq!(
            v["conditions"][0]["transitionID"],
            "muster-2026-01-01T00:00:00Z"
        );
        s.phase = GroupPhase::WaitingForMembers;
        let v = status(&s);
        assert_eq!(v["phase"], "Pending");
        assert_eq!(v["conditions"][0]["type"], "Unschedulable");
        assert_eq!(v["conditions"][0]["reason"], "NotEnoughTasks");
        s.phase = GroupPhase::MembersObserved;
        let v = status(&s);
        assert_eq!(v["phase"], "Inqueue");
        assert!(v.get("conditions").is_none());
        s.phase = GroupPhase::Unschedulable;
        let v = status(&s);
        assert_eq!(v["phase"], "Inqueue");
        assert_eq!(v["conditions"][0]["reason"], "NotEnoughResources");
    }

    #[test]
    fn min_member_zero_or_omitted() {
        assert_eq!(def(json!({})).policy, Ok(GroupPolicy::Basic));
        assert_eq!(def(json!({"minMember": 0})).policy, Ok(GroupPolicy::Basic));
        assert_eq!(
            def(json!({"minMember": 0, "minTaskMember": {"ps": 1, "worker": 2}})).policy,
            Ok(GroupPolicy::Gang {
                min_count: 3,
                schedule_timeout: None
            }),
            "the tasks make the gang"
        );
    }

    #[test]
    fn group_name_keys_and_their_precedence() {
        let wire = |labels: Value, annotations: Value| -> PodWire {
            serde_json::from_value(
                json!({"metadata": {"labels": labels, "annotations": annotations}}),
            )
            .unwrap()
        };
        let name = |p: &PodWire| {
            membership(p, "ns").and_then(|m| m.key().map(|k| k.definition.name.to_string()))
        };
        // Kubeflow Trainer: the Volcano key as a label.
        assert_eq!(
            name(&wire(json!({VOLCANO_GROUP_NAME_KEY: "train"}), json!({}))),
            Some("train".into())
        );
        assert_eq!(
            name(&wire(json!({}), json!({VOLCANO_GROUP_NAME_KEY: "a"}))),
            Some("a".into())
        );
        assert_eq!(
            name(&wire(
                json!({VOLCANO_GROUP_NAME_KEY: "label"}),
                json!({GROUP_NAME_ANNOTATION: "kube", VOLCANO_GROUP_NAME_KEY: "annotation"})
            )),
            Some("kube".into())
        );
        assert_eq!(
            name(&wire(
                json!({VOLCANO_GROUP_NAME_KEY: "label"}),
                json!({VOLCANO_GROUP_NAME_KEY: "annotation"})
            )),
            Some("annotation".into())
        );
        assert_eq!(
            membership(&wire(json!({VOLCANO_GROUP_NAME_KEY: ""}), json!({})), "ns"),
            Some(GroupMembership::Invalid(
                "label scheduling.volcano.sh/group-name is empty".into()
            ))
        );
        assert_eq!(membership(&wire(json!({}), json!({})), "ns"), None);
    }
}
