//! scheduler-plugins Coscheduling: `scheduling.x-k8s.io/v1alpha1` `PodGroup`.
//! Members carry the label `scheduling.x-k8s.io/pod-group: <name>`. Read:
//! `spec.minMember` (0 or omitted: no gang), `spec.scheduleTimeoutSeconds`
//! (wins over Muster's timeout annotation), `spec.minResources`. Written:
//! `status.phase` in upstream's vocabulary (`Pending`, `Scheduling`,
//! `Running`; the removed `PreScheduling`, `Scheduled` and `status.scheduled`
//! are never written) and `status.scheduleStartTime`.

use serde_json::{Value, json};

use super::common::{GangStatus, min_member_definition, named_member};
use crate::model::wire::PodWire;
use crate::model::{GroupDef, GroupMembership, GroupPhase, GroupSource};

/// The label naming a pod's Coscheduling `PodGroup`.
pub const POD_GROUP_LABEL: &str = "scheduling.x-k8s.io/pod-group";

/// The label → the pod's membership, if it carries the label.
pub fn membership(pod: &PodWire, namespace: &str) -> Option<GroupMembership> {
    let label = pod.metadata.labels.get(POD_GROUP_LABEL);
    named_member(
        label,
        &format!("label {POD_GROUP_LABEL}"),
        namespace,
        GroupSource::Coscheduling,
    )
}

/// Translates a Coscheduling `PodGroup`; a malformed spec becomes `policy: Err`.
pub fn definition(obj: &Value) -> Result<GroupDef, String> {
    min_member_definition(
        obj,
        GroupSource::Coscheduling,
        Some("scheduleTimeoutSeconds"),
    )
}

/// The `status` merge patch for a gang report, in the phases upstream's
/// PodGroup controller uses: `Pending` while fewer than `minMember` members
/// exist, `Scheduling` once they do (and again after a rejection: the gang
/// is retried), `Running` once the quorum is released to binding (upstream
/// waits for the pods to run; Muster reports the moment it commits them).
/// The counts (`running`, `succeeded`, `failed`) are the pod controller's
/// and are not written.
pub fn status(s: &GangStatus<'_>) -> Value {
    let phase = match s.phase {
        GroupPhase::WaitingForMembers => "Pending",
        GroupPhase::MembersObserved | GroupPhase::Unschedulable => "Scheduling",
        GroupPhase::Scheduled => "Running",
    };
    let mut status = json!({ "phase": phase });
    if s.first {
        status["scheduleStartTime"] = s.now.into();
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CPU, GroupPolicy};
    use std::time::Duration;

    fn def(spec: Value) -> GroupDef {
        definition(&json!({
            "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "nginx", "namespace": "default",
                "annotations": {"muster.dev/schedule-timeout-seconds": "99"}},
            "spec": spec
        }))
        .unwrap()
    }

    #[test]
    fn reads_min_member_timeout_and_resources() {
        let d = def(
            json!({"minMember": 3, "scheduleTimeoutSeconds": 10, "minResources": {"cpu": "3"}}),
        );
        assert_eq!(
            d.key.to_string(),
            "PodGroup.scheduling.x-k8s.io default/nginx"
        );
        assert_eq!(
            d.policy,
            Ok(GroupPolicy::Gang {
                min_count: 3,
                schedule_timeout: Some(Duration::from_secs(10))
            }),
            "the dialect's own timeout wins over the annotation"
        );
        assert_eq!(d.min_resources.map(|r| r.get(CPU)), Some(3000));
        let d = def(json!({"minMember": 2}));
        assert_eq!(
            d.policy,
            Ok(GroupPolicy::Gang {
                min_count: 2,
                schedule_timeout: Some(Duration::from_secs(99))
            })
        );
        assert_eq!(d.min_resources, None);
    }

    /// A timeout past what fits is capped, in the dialect's own field too.
    #[test]
    fn a_huge_schedule_timeout_seconds_is_capped() {
        let d = def(json!({"minMember": 2, "scheduleTimeoutSeconds": 4294967295u32}));
        assert_eq!(
            d.policy,
            Ok(GroupPolicy::Gang {
                min_count: 2,
                schedule_timeout: Some(Duration::from_secs(24 * 3600))
            })
        );
        let capped = d.timeout_capped.unwrap();
        assert_eq!(
            (capped.field.as_str(), capped.requested.as_str()),
            ("spec.scheduleTimeoutSeconds", "4294967295")
        );
        let err = def(json!({"minMember": 100_001})).policy.unwrap_err();
        assert!(
            err.ends_with("spec.minMember must be at most 100000, got 100001"),
            "{err}"
        );
    }

    #[test]
    fn malformed_specs() {
        for (spec, needle) in [
            (
                json!({"minMember": -3}),
                "spec.minMember must not be negative, got -3",
            ),
            (
                json!({"minMember": "3"}),
                "spec.minMember must be an integer, got \"3\"",
            ),
            (
                json!({"minMember": 2, "scheduleTimeoutSeconds": 0}),
                "spec.scheduleTimeoutSeconds must be positive, got 0",
            ),
            (
                json!({"minMember": 2, "minResources": {"cpu": "lots"}}),
                "spec.minResources",
            ),
        ] {
            let err = def(spec.clone()).policy.unwrap_err();
            assert!(
                err.starts_with("PodGroup.scheduling.x-k8s.io default/nginx: ")
                    && err.contains(needle),
                "{spec}: {err}"
            );
        }
    }

    /// Upstream's CRD lets `minMember` be omitted or 0: no gang then.
    #[test]
    fn min_member_omitted_or_zero_is_a_basic_group() {
        assert_eq!(def(json!({})).policy, Ok(GroupPolicy::Basic));
        assert_eq!(def(json!({"minMember": 0})).policy, Ok(GroupPolicy::Basic));
    }

    #[test]
    fn label_membership() {
        let pod: PodWire = serde_json::from_value(
            json!({"metadata": {"labels": {"scheduling.x-k8s.io/pod-group": ""}}}),
        )
        .unwrap();
        assert!(matches!(
            membership(&pod, "default"),
            Some(GroupMembership::Invalid(m)) if m == "label scheduling.x-k8s.io/pod-group is empty"
        ));
    }

    #[test]
    fn status_patch() {
        let mut s = GangStatus {
            phase: GroupPhase::Unschedulable,
            reason: "Unschedulable",
            message: "m",
            scheduled_count: 0,
            now: "2026-01-01T00:00:00Z",
            first: true,
        };
        assert_eq!(
            status(&s),
            json!({"phase": "Scheduling", "scheduleStartTime": "2026-01-01T00:00:00Z"})
        );
        s.phase = GroupPhase::Scheduled;
        s.scheduled_count = 3;
        s.first = false;
        assert_eq!(status(&s), json!({"phase": "Running"}));
        s.phase = GroupPhase::WaitingForMembers;
        assert_eq!(status(&s)["phase"], "Pending");
        s.phase = GroupPhase::MembersObserved;
        assert_eq!(status(&s)["phase"], "Scheduling");
        // Only upstream's phases, never the removed ones nor `scheduled`.
        for phase in [
            GroupPhase::WaitingForMembers,
            GroupPhase::MembersObserved,
            GroupPhase::Unschedulable,
            GroupPhase::Scheduled,
        ] {
            s.phase = phase;
            let v = status(&s);
            assert!(
                [
                    "Pending",
                    "Scheduling",
                    "Running",
                    "Unknown",
                    "Finished",
                    "Failed"
                ]
                .contains(&v["phase"].as_str().unwrap()),
                "{v}"
            );
            assert!(v.get("scheduled").is_none(), "{v}");
        }
    }
}
