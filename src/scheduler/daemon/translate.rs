//! The translation step of the write path: turns each engine `Action` into
//! the API call that performs it, with the intent the dispatcher holds,
//! merges and orders it by (`muster_core::dispatch`). Everything here is a pure
//! function of the action and of what the informers told the daemon about
//! the cluster; no decision about scheduling is made here.

use std::collections::{HashMap, HashSet};

use muster_core::dialects::owners::{owner_source, status_event as owner_status};
use muster_core::dialects::{GangStatus, definition_source, status_patch, workload_api};
use muster_core::dispatch::{ApiCall, Dispatch, EventTarget, Intent, ResourceRef};
use muster_core::engine::{Action, EventType, ObjectRef, SCHEDULED_REASON, scheduled_message};
use muster_core::model::{DefinitionKey, GroupKey, GroupSource, PodKey};

pub use muster_core::dialects::workload_api::POD_GROUP_CONDITION;

/// What the translation knows that actions do not carry: which version of
/// each definition kind the cluster serves, and which groups' dialect status
/// was already written (the first write sets `scheduleStartTime`).
#[derive(Default)]
pub struct Directory {
    /// Definition informer name (`DefinitionSource::name`) → served version.
    pub served_versions: HashMap<&'static str, &'static str>,
    /// Groups whose dialect status has been written since Muster started.
    status_written: HashSet<GroupKey>,
    /// Top owners' UIDs (top-owner grouping), for the events written on them.
    pub owner_uids: HashMap<DefinitionKey, String>,
}

impl Directory {
    /// A group definition was deleted: a new one of the same name gets its
    /// `scheduleStartTime` afresh.
    pub fn forget_group_status(&mut self, key: &DefinitionKey) {
        self.status_written.retain(|g| g.definition != *key);
    }

    /// Appends the calls for one engine action, with its intent, to `out`:
    /// none when the action has no API form here (e.g. status for a dialect
    /// without a status we write). Every action carries what its calls
    /// need (a pod's UID included), so nothing here reads the engine.
    pub fn translate(&mut self, action: Action, out: &mut Vec<Dispatch>) {
        let intent = Intent::of(&action);
        if let Action::PodInvalid { pod, uid, message } = action {
            // Two calls: the condition and the event.
            let condition = ApiCall::PodCondition {
                pod: pod.clone(),
                status: false,
                reason: "SchedulerError".into(),
                message: message.clone(),
            };
            let event = ApiCall::Event {
                target: pod_target(&pod, Some(&uid)),
                warning: true,
                reason: "FailedScheduling".into(),
                message,
            };
            for call in [condition, event] {
                out.push(Dispatch {
                    call,
                    intent: intent.clone(),
                });
            }
            return;
        }
        if let Some(call) = self.call_for(action) {
            out.push(Dispatch { call, intent });
        }
    }

    fn call_for(&mut self, action: Action) -> Option<ApiCall> {
        match action {
            Action::Bind {
                pod,
                uid,
                node,
                claims,
            } => Some(ApiCall::Bind {
                pod,
                uid,
                node,
                claims,
            }),
            Action::PreBindVolumes {
                pod,
                uid,
                node,
                writes,
            } => Some(ApiCall::PreBindVolumes {
                pod,
                uid,
                node,
                writes,
            }),
            Action::UnreserveClaims { pod, uid, claims } => {
                Some(ApiCall::UnreserveClaims { pod, uid, claims })
            }
            // Two calls: see `translate`.
            Action::PodInvalid { .. } => None,
            // The `Preempted` event naming the preemptor is the engine's own
            // `Action::Event`; the call is the victim's two writes.
            Action::Preempt {
                victim,
                uid,
                preemptor: _,
                message,
            } => Some(ApiCall::Preempt {
                victim,
                uid,
                message,
            }),
            Action::Nominate { pod, uid: _, node } => Some(ApiCall::Nominate { pod, node }),
            Action::PodUnschedulable {
                pod,
                reason,
                message,
            } => Some(ApiCall::PodCondition {
                pod,
                status: false,
                reason: reason.as_str().to_string(),
                message,
            }),
            Action::Scheduled { pod, uid, node } => Some(ApiCall::Event {
                target: pod_target(&pod, Some(&uid)),
                warning: false,
                reason: SCHEDULED_REASON.into(),
                message: scheduled_message(&pod, &node),
            }),
            Action::Event {
                object,
                type_,
                reason,
                message,
            } => Some(ApiCall::Event {
                target: self.event_target(&object)?,
                warning: type_ == EventType::Warning,
                reason: reason.to_string(),
                message,
            }),
            Action::GroupHealth {
                group,
                satisfied,
                reason,
                message,
            } => self.condition(
                &group,
                workload_api::POD_GROUP_SATISFIED,
                satisfied,
                reason,
                message,
            ),
            Action::CreateProvisioningRequest {
                group,
                name,
                class,
                pod_sets,
            } => Some(ApiCall::CreateProvisioningRequest {
                namespace: group.definition.namespace.clone(),
                name,
                class,
                group: group.definition.name.clone(),
                pod_sets: pod_sets
                    .into_iter()
                    .map(|s| (s.template_of, s.count))
                    .collect(),
            }),
            Action::DeleteProvisioningRequest { namespace, name } => {
                Some(ApiCall::DeleteProvisioningRequest { namespace, name })
            }
            Action::GroupReservation {
                group,
                reserved,
                message,
            } => {
                let reason = match reserved {
                    true => muster_core::engine::RESERVED,
                    false => muster_core::engine::RESERVATION_ENDED,
                };
                let type_ = muster_core::engine::RESERVED_CONDITION;
                self.condition(&group, type_, reserved, reason, message)
            }
            Action::GroupStatus {
                group,
                phase,
                reason,
                message,
                initially_scheduled,
                scheduled,
            } => {
                let resource = self.definition_resource(&group)?;
                if let GroupSource::Owner(_) = group.definition.source {
                    let uid = self.owner_uids.get(&group.definition).cloned();
                    return Some(owner_status_event(&group, resource, uid, phase, &message));
                }
                let condition = match group.definition.source {
                    GroupSource::PodGroup => workload_api::condition_type(&resource.version),
                    GroupSource::CompositePodGroup => muster_core::dialects::composite::CONDITION,
                    _ => "",
                };
                if condition.is_empty() {
                    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
                    let status = status_patch(
                        group.definition.source,
                        &GangStatus {
                            phase,
                            reason,
                            message: &message,
                            scheduled_count: scheduled,
                            now: &now,
                            first: !self.status_written.contains(&group),
                        },
                    )?;
                    self.status_written.insert(group.clone());
                    return Some(ApiCall::GroupStatus {
                        resource,
                        namespace: group.namespace().to_string(),
                        name: group.definition.name.to_string(),
                        status,
                    });
                }
                // Named and worded as the version Muster read the object in.
                Some(ApiCall::GroupCondition {
                    type_: condition.into(),
                    // A gang preempted whole says so; every other False
                    // is upstream's `Unschedulable`.
                    reason: match reason {
                        "Preempted" => reason.into(),
                        _ => workload_api::condition_reason(phase).into(),
                    },
                    resource,
                    namespace: group.namespace().to_string(),
                    name: group.definition.name.to_string(),
                    status: initially_scheduled,
                    message,
                })
            }
        }
    }

    /// A condition of Muster's own on the group (`PodGroupSatisfied`,
    /// `Reserved`): only the Workload API's kinds have conditions; the other
    /// dialects (and top owners) get the engine's event alone.
    fn condition(
        &self,
        group: &GroupKey,
        type_: &str,
        status: bool,
        reason: &str,
        message: String,
    ) -> Option<ApiCall> {
        if !matches!(
            group.definition.source,
            GroupSource::PodGroup | GroupSource::CompositePodGroup
        ) {
            return None;
        }
        Some(ApiCall::GroupCondition {
            resource: self.definition_resource(group)?,
            namespace: group.namespace().to_string(),
            name: group.definition.name.to_string(),
            type_: type_.into(),
            status,
            reason: reason.into(),
            message,
        })
    }

    fn event_target(&self, object: &ObjectRef) -> Option<EventTarget> {
        match object {
            ObjectRef::Pod { key, uid } => Some(pod_target(key, uid.as_deref())),
            ObjectRef::Group(group) => {
                let resource = self.definition_resource(group)?;
                Some(EventTarget {
                    api_version: resource.api_version(),
                    kind: resource.kind,
                    namespace: group.namespace().to_string(),
                    name: group.definition.name.to_string(),
                    uid: None,
                })
            }
        }
    }

    /// The API resource of a group's definition, in the version the cluster serves.
    /// `None` for dialects without a definition object (Kueue) and for the
    /// v1alpha1 Workload, whose entries are not objects of their own.
    fn definition_resource(&self, group: &GroupKey) -> Option<ResourceRef> {
        if group.definition.container().is_some() {
            return None;
        }
        if let GroupSource::Owner(kind) = group.definition.source {
            let source = owner_source(kind)?;
            let version = self.served_versions.get(source.name)?;
            return Some(ResourceRef {
                group: source.group.to_string(),
                version: version.to_string(),
                kind: source.kind.to_string(),
                plural: source.plural.to_string(),
            });
        }
        let source = definition_source(group.definition.source)?;
        let version = self.served_versions.get(source.name)?;
        Some(ResourceRef {
            group: source.group.to_string(),
            version: version.to_string(),
            kind: source.kind.to_string(),
            plural: source.plural.to_string(),
        })
    }
}

/// A gang grouped by its top owner has no status object: its status is an
/// event on the owner (`GangWaiting`, `GangScheduled`, `GangTimedOut`).
fn owner_status_event(
    group: &GroupKey,
    resource: ResourceRef,
    uid: Option<String>,
    phase: muster_core::model::GroupPhase,
    message: &str,
) -> ApiCall {
    let (reason, warning) = owner_status(phase, message);
    ApiCall::Event {
        target: EventTarget {
            api_version: resource.api_version(),
            kind: resource.kind,
            namespace: group.namespace().to_string(),
            name: group.definition.name.to_string(),
            uid,
        },
        warning,
        reason: reason.to_string(),
        message: format!("{group}: {message}"),
    }
}

/// A pod as the object of an event.
pub fn pod_target(key: &PodKey, uid: Option<&str>) -> EventTarget {
    EventTarget {
        api_version: "v1".into(),
        kind: "Pod".into(),
        namespace: key.namespace.to_string(),
        name: key.name.to_string(),
        uid: uid.filter(|u| !u.is_empty()).map(str::to_string),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use muster_core::model::{DefinitionKey, GroupPhase};

    #[test]
    fn the_scheduled_event_names_the_bound_pod() {
        let key = PodKey::new("ml", "w-0");
        let mut d = Directory::default();
        let action = Action::Scheduled {
            pod: key,
            uid: "u1".into(),
            node: "n1".into(),
        };
        let mut out = Vec::new();
        d.translate(action, &mut out);
        let [Dispatch { call, intent }] = &out[..] else {
            panic!("the Scheduled event has one API form: {out:?}")
        };
        assert_eq!(*intent, Intent::Immediate);
        match call {
            ApiCall::Event {
                target,
                warning,
                reason,
                message,
            } => {
                assert_eq!(
                    (target.name.as_str(), target.uid.as_deref()),
                    ("w-0", Some("u1"))
                );
                assert!(!*warning);
                assert_eq!(reason, "Scheduled");
                assert_eq!(message, "Successfully assigned ml/w-0 to n1");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_invalid_pod_gets_a_condition_and_a_warning_naming_its_uid() {
        let mut d = Directory::default();
        let action = Action::PodInvalid {
            pod: PodKey::new("ml", "bad"),
            uid: "u9".into(),
            message: "invalid pod spec: x".into(),
        };
        let mut out = Vec::new();
        d.translate(action, &mut out);
        assert_eq!(out.len(), 2);
        assert!(out.iter().all(|d| d.intent == Intent::Immediate));
        assert!(
            matches!(&out[0].call, ApiCall::PodCondition { reason, .. } if reason == "SchedulerError")
        );
        match &out[1].call {
            ApiCall::Event {
                target, warning, ..
            } => {
                assert!(*warning);
                assert_eq!(target.uid.as_deref(), Some("u9"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_preemption_is_one_call_for_the_victim_sent_at_once() {
        let mut d = Directory::default();
        let action = Action::Preempt {
            victim: PodKey::new("ml", "low-0"),
            uid: "v1".into(),
            preemptor: "ml/high".into(),
            message: "Preempted by pod ml/high on node n1".into(),
        };
        let mut out = Vec::new();
        d.translate(action, &mut out);
        assert_eq!(
            out,
            [Dispatch::immediate(ApiCall::Preempt {
                victim: PodKey::new("ml", "low-0"),
                uid: "v1".into(),
                message: "Preempted by pod ml/high on node n1".into(),
            })]
        );
        assert_eq!(out[0].call.operation(), "preempt");
    }

    #[test]
    fn nominations_set_and_clear() {
        let mut d = Directory::default();
        for node in [Some(Arc::<str>::from("n2")), None] {
            let action = Action::Nominate {
                pod: PodKey::new("ml", "high"),
                uid: "u".into(),
                node: node.clone(),
            };
            let mut out = Vec::new();
            d.translate(action, &mut out);
            assert_eq!(
                out,
                [Dispatch::immediate(ApiCall::Nominate {
                    pod: PodKey::new("ml", "high"),
                    node,
                })]
            );
        }
    }

    #[test]
    fn group_status_needs_a_served_version() {
        let mut d = Directory::default();
        let group = GroupKey::new(DefinitionKey::new("ml", GroupSource::PodGroup, "train"));
        let action = Action::GroupStatus {
            group,
            phase: GroupPhase::Scheduled,
            reason: "Scheduled",
            message: "ok".into(),
            initially_scheduled: true,
            scheduled: 2,
        };
        assert!(d.call_for(action.clone()).is_none());
        d.served_versions
            .insert("podgroups.scheduling.k8s.io", "v1beta1");
        match d.call_for(action) {
            Some(ApiCall::GroupCondition {
                resource,
                status,
                type_,
                ..
            }) => {
                assert_eq!(resource.api_version(), "scheduling.k8s.io/v1beta1");
                assert!(status);
                assert_eq!(type_, POD_GROUP_CONDITION);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn the_condition_is_named_as_the_served_version_names_it() {
        let mut d = Directory::default();
        d.served_versions
            .insert("podgroups.scheduling.k8s.io", "v1alpha2");
        let group = GroupKey::new(DefinitionKey::new("ml", GroupSource::PodGroup, "train"));
        let action = Action::GroupStatus {
            group,
            phase: GroupPhase::WaitingForMembers,
            reason: "WaitingForMembers",
            message: "1 of 4 members observed".into(),
            initially_scheduled: false,
            scheduled: 0,
        };
        match d.call_for(action) {
            Some(ApiCall::GroupCondition {
                type_,
                reason,
                status,
                ..
            }) => {
                assert_eq!(type_, "PodGroupScheduled");
                assert_eq!(reason, "Unschedulable");
                assert!(!status);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn an_owner_gang_reports_with_events_on_its_owner() {
        let mut d = Directory::default();
        let group = GroupKey::new(DefinitionKey::new(
            "ml",
            GroupSource::Owner(muster_core::model::OwnerKind::Job),
            "train",
        ));
        let action = |phase, message: &str| Action::GroupStatus {
            group: group.clone(),
            phase,
            reason: "x",
            message: message.into(),
            initially_scheduled: false,
            scheduled: 0,
        };
        assert!(
            d.call_for(action(GroupPhase::Scheduled, "m")).is_none(),
            "not before the kind is served"
        );
        d.served_versions.insert("jobs.batch", "v1");
        d.owner_uids
            .insert(group.definition.clone(), "u-train".into());
        let cases = [
            (
                GroupPhase::WaitingForMembers,
                "3 of 4 members observed",
                "GangWaiting",
                false,
            ),
            (GroupPhase::Scheduled, "4 members", "GangScheduled", false),
            (
                GroupPhase::Unschedulable,
                "timed out waiting at permit",
                "GangTimedOut",
                true,
            ),
        ];
        for (phase, message, want, want_warning) in cases {
            match d.call_for(action(phase, message)) {
                Some(ApiCall::Event {
                    target,
                    warning,
                    reason,
                    message: m,
                }) => {
                    assert_eq!(
                        (
                            target.api_version.as_str(),
                            target.kind.as_str(),
                            target.name.as_str()
                        ),
                        ("batch/v1", "Job", "train")
                    );
                    assert_eq!(target.uid.as_deref(), Some("u-train"));
                    assert_eq!((reason.as_str(), warning), (want, want_warning));
                    assert_eq!(m, format!("Job ml/train: {message}"));
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    }

    #[test]
    fn dialect_status_patches() {
        let mut d = Directory::default();
        d.served_versions
            .insert("podgroups.scheduling.x-k8s.io", "v1alpha1");
        let group = GroupKey::new(DefinitionKey::new(
            "default",
            GroupSource::Coscheduling,
            "nginx",
        ));
        let action = |scheduled: bool| Action::GroupStatus {
            group: group.clone(),
            phase: if scheduled {
                GroupPhase::Scheduled
            } else {
                GroupPhase::Unschedulable
            },
            reason: if scheduled {
                "Scheduled"
            } else {
                "Unschedulable"
            },
            message: "m".into(),
            initially_scheduled: scheduled,
            scheduled: if scheduled { 3 } else { 0 },
        };
        match d.call_for(action(false)) {
            Some(ApiCall::GroupStatus {
                resource, status, ..
            }) => {
                assert_eq!(resource.api_version(), "scheduling.x-k8s.io/v1alpha1");
                assert_eq!(status["phase"], "Scheduling");
                assert!(status["scheduleStartTime"].is_string());
            }
            other => panic!("unexpected {other:?}"),
        }
        match d.call_for(action(true)) {
            Some(ApiCall::GroupStatus { status, .. }) => {
                assert_eq!(status["phase"], "Running");
                assert!(status.get("scheduled").is_none(), "removed upstream");
                assert!(status.get("scheduleStartTime").is_none(), "set once");
            }
            other => panic!("unexpected {other:?}"),
        }
        for source in [GroupSource::Kueue, GroupSource::Workload] {
            let group = GroupKey::new(DefinitionKey::new("ml", source, "w/workers"));
            let action = Action::GroupStatus {
                group,
                phase: GroupPhase::Scheduled,
                reason: "Scheduled",
                message: "m".into(),
                initially_scheduled: true,
                scheduled: 1,
            };
            assert!(d.call_for(action).is_none(), "{source:?} has no status");
        }
    }
}
