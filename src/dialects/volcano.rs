//! Volcano: `scheduling.volcano.sh/v1beta1` `PodGroup`. Members carry the
//! annotation `scheduling.k8s.io/group-name: <name>`. Read: `spec.minMember`,
//! `spec.minResources` (and Muster's timeout annotation), `spec.minTaskMember`
//! (per-task quorum; a member's task is its `volcano.sh/task-spec`
//! annotation), `spec.priorityClassName` (the members' priority when they
//! carry none) and `spec.queue` (recorded, informational). Written:
//! `status.phase`, `status.running` (members bound or binding) and one
//! condition.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::common::{
    GangStatus, bounded_count, min_member_definition, named_member, priority_class_name,
};
use crate::model::wire::PodWire;
use crate::model::{GroupDef, GroupMembership, GroupPhase, GroupSource};

/// The annotation naming a pod's Volcano `PodGroup`.
pub const GROUP_NAME_ANNOTATION: &str = "scheduling.k8s.io/group-name";

/// The annotation → the pod's membership, if it carries the annotation.
pub fn membership(pod: &PodWire, namespace: &str) -> Option<GroupMembership> {
    let annotation = pod.metadata.annotations.get(GROUP_NAME_ANNOTATION);
    named_member(
        annotation,
        &format!("annotation {GROUP_NAME_ANNOTATION}"),
        namespace,
        GroupSource::Volcano,
    )
}

/// Translates a Volcano `PodGroup`; a malformed spec becomes `policy: Err`.
pub fn definition(obj: &Value) -> Result<GroupDef, String> {
    let mut def = min_member_definition(obj, GroupSource::Volcano, None)?;
    let spec = &obj["spec"];
    match min_task_members(&spec["minTaskMember"]) {
        Ok(tasks) => def.min_task_members = tasks,
        Err(e) if def.policy.is_ok() => def.policy = Err(format!("{}: {e}", def.key)),
        Err(_) => {}
    }
    def.priority_class_name = priority_class_name(spec);
    def.queue = spec["queue"]
        .as_str()
        .filter(|q| !q.is_empty())
        .map(str::to_string);
    Ok(def)
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

/// The `status` merge patch for a gang report: phase `Pending` with an
/// `Unschedulable` condition while members are missing or after a rejection,
/// `Inqueue` once every member is observed (conditions left as they are),
/// `Running` with a `Scheduled` condition once the quorum is released.
pub fn status(s: &GangStatus<'_>) -> Value {
    let (phase, type_) = match s.phase {
        GroupPhase::WaitingForMembers | GroupPhase::Unschedulable => {
            ("Pending", Some("Unschedulable"))
        }
        GroupPhase::MembersObserved => ("Inqueue", None),
        GroupPhase::Scheduled => ("Running", Some("Scheduled")),
    };
    let mut status = json!({"phase": phase, "running": s.scheduled_count});
    if let Some(type_) = type_ {
        status["conditions"] = json!([{
            "type": type_,
            "status": "True",
            "reason": s.reason,
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
            (json!({}), "spec.minMember is missing"),
            (
                json!({"minMember": 0}),
                "spec.minMember must be positive, got 0",
            ),
            (
                json!({"minMember": -1}),
                "spec.minMember must be positive, got -1",
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
        s.phase = GroupPhase::WaitingForMembers;
        s.reason = "WaitingForMembers";
        let v = status(&s);
        assert_eq!(v["phase"], "Pending");
        assert_eq!(v["conditions"][0]["reason"], "WaitingForMembers");
        s.phase = GroupPhase::MembersObserved;
        let v = status(&s);
        assert_eq!(v["phase"], "Inqueue");
        assert!(v.get("conditions").is_none());
    }
}
