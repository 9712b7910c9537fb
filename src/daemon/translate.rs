//! Turns the engine's `Action`s into API `Write`s, and fills in pod facts the
//! API server normally supplies (priority from the PriorityClass).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use kube::api::{ApiResource, GroupVersionKind};

use crate::dialects::{GangStatus, definition_source, status_patch};
use crate::engine::{Action, EventType, ObjectRef, SCHEDULED_REASON, scheduled_message};
use crate::kube::writer::{BindOutcome, EventTarget, Write};
use crate::model::{DefinitionKey, GroupDef, GroupKey, GroupSource, PodInfo, PodKey};

/// The condition the Workload API reserves for the scheduler.
pub const POD_GROUP_CONDITION: &str = "PodGroupInitiallyScheduled";

/// What the loop knows that actions do not carry: pod UIDs (events must name
/// them for `kubectl describe` to find them) and which version of each
/// definition kind the cluster serves.
#[derive(Default)]
pub struct Directory {
    /// Definition informer name (`DefinitionSource::name`) → served version.
    pub served_versions: HashMap<&'static str, &'static str>,
    /// Groups whose dialect status has been written since Muster started.
    status_written: HashSet<GroupKey>,
    priority_classes: HashMap<String, i32>,
    global_default_priority: Option<(String, i32)>,
    /// Definitions naming a priority class, as last handed to the engine.
    class_defs: HashMap<DefinitionKey, GroupDef>,
}

impl Directory {
    pub fn set_priority_class(&mut self, name: String, value: i32, global_default: bool) {
        if global_default {
            self.global_default_priority = Some((name.clone(), value));
        } else if self
            .global_default_priority
            .as_ref()
            .is_some_and(|(n, _)| *n == name)
        {
            self.global_default_priority = None;
        }
        self.priority_classes.insert(name, value);
    }

    pub fn remove_priority_class(&mut self, name: &str) {
        self.priority_classes.remove(name);
        if self
            .global_default_priority
            .as_ref()
            .is_some_and(|(n, _)| n == name)
        {
            self.global_default_priority = None;
        }
    }

    /// A real API server's Priority admission sets `spec.priority` from the
    /// PriorityClass; pods that reach us without it (created before the class,
    /// or by a minimal API server) get it here. An explicit priority wins.
    pub fn resolve_priority(&self, pod: Arc<PodInfo>) -> Arc<PodInfo> {
        if pod.priority != 0 {
            return pod;
        }
        let value = match &pod.priority_class_name {
            Some(class) => self.priority_classes.get(&**class).copied(),
            None => self.global_default_priority.as_ref().map(|(_, v)| *v),
        };
        match value {
            Some(v) if v != 0 => {
                let mut p = (*pod).clone();
                p.priority = v;
                Arc::new(p)
            }
            _ => pod,
        }
    }

    /// A group definition was deleted: a new one of the same name gets its
    /// `scheduleStartTime` afresh, and its priority class is no longer tracked.
    pub fn forget_group_status(&mut self, key: &DefinitionKey) {
        self.status_written.retain(|g| g.definition != *key);
        self.class_defs.remove(key);
    }

    /// Fills in the value of the definition's `priorityClassName` (none while
    /// the class is not observed) and remembers the definition, so that a
    /// class created or changed later reaches it (see
    /// [`Directory::redefined_by_classes`]).
    pub fn resolve_def_priority(&mut self, mut def: GroupDef) -> GroupDef {
        def.priority = self.class_value(&def);
        if def.priority_class_name.is_some() {
            self.class_defs.insert(def.key.clone(), def.clone());
        } else {
            self.class_defs.remove(&def.key);
        }
        def
    }

    /// Definitions whose class value changed since they were last resolved
    /// (after a PriorityClass event), already updated.
    pub fn redefined_by_classes(&mut self) -> Vec<GroupDef> {
        let values: Vec<(DefinitionKey, Option<i32>)> = self
            .class_defs
            .values()
            .map(|d| (d.key.clone(), self.class_value(d)))
            .collect();
        let mut changed = Vec::new();
        for (key, value) in values {
            if let Some(def) = self.class_defs.get_mut(&key)
                && def.priority != value
            {
                def.priority = value;
                changed.push(def.clone());
            }
        }
        changed.sort_by(|a, b| a.key.cmp(&b.key));
        changed
    }

    fn class_value(&self, def: &GroupDef) -> Option<i32> {
        let class = def.priority_class_name.as_deref()?;
        self.priority_classes.get(class).copied()
    }

    /// The Write for one engine action, or `None` when it has no API form here
    /// (e.g. status for a dialect without a status we write).
    /// `pod_uid` looks a pod's UID up (the engine's cache holds it): events
    /// must name it for `kubectl describe` to find them.
    pub fn to_write(
        &mut self,
        action: Action,
        pod_uid: &dyn Fn(&PodKey) -> Option<Arc<str>>,
    ) -> Option<Write> {
        match action {
            Action::Bind { pod, uid, node } => Some(Write::Bind {
                pod,
                uid: uid.to_string(),
                node: node.to_string(),
            }),
            Action::PodUnschedulable {
                pod,
                reason,
                message,
            } => Some(Write::PodCondition {
                pod,
                status: false,
                reason: reason.to_string(),
                message,
            }),
            // The placement's event is written once the binding succeeded
            // (`scheduled_event`), as kube-scheduler does: never for a
            // binding that fails, and never queued beside one.
            Action::Event {
                object: ObjectRef::Pod(_),
                reason: SCHEDULED_REASON,
                ..
            } => None,
            Action::Event {
                object,
                type_,
                reason,
                message,
            } => Some(Write::Event {
                target: self.event_target(&object, pod_uid)?,
                warning: type_ == EventType::Warning,
                reason: reason.to_string(),
                message,
            }),
            Action::GroupStatus {
                group,
                phase,
                reason,
                message,
                initially_scheduled,
                scheduled,
            } => {
                let resource = self.definition_resource(&group)?;
                if group.definition.source != GroupSource::PodGroup {
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
                    return Some(Write::GroupStatus {
                        resource,
                        namespace: group.namespace().to_string(),
                        name: group.definition.name.to_string(),
                        status,
                    });
                }
                Some(Write::GroupCondition {
                    resource,
                    namespace: group.namespace().to_string(),
                    name: group.definition.name.to_string(),
                    type_: POD_GROUP_CONDITION.into(),
                    status: initially_scheduled,
                    reason: reason.to_string(),
                    message,
                })
            }
        }
    }

    fn event_target(
        &self,
        object: &ObjectRef,
        pod_uid: &dyn Fn(&PodKey) -> Option<Arc<str>>,
    ) -> Option<EventTarget> {
        match object {
            ObjectRef::Pod(key) => Some(EventTarget {
                api_version: "v1".into(),
                kind: "Pod".into(),
                namespace: key.namespace.to_string(),
                name: key.name.to_string(),
                uid: pod_uid(key)
                    .map(|u| u.to_string())
                    .filter(|u| !u.is_empty()),
            }),
            ObjectRef::Group(group) => {
                let ar = self.definition_resource(group)?;
                Some(EventTarget {
                    api_version: ar.api_version,
                    kind: ar.kind,
                    namespace: group.namespace().to_string(),
                    name: group.definition.name.to_string(),
                    uid: None,
                })
            }
        }
    }

    /// The `Scheduled` event for a binding that succeeded.
    pub fn scheduled_event(outcome: &BindOutcome) -> Write {
        Write::Event {
            target: EventTarget {
                api_version: "v1".into(),
                kind: "Pod".into(),
                namespace: outcome.pod.namespace.to_string(),
                name: outcome.pod.name.to_string(),
                uid: Some(outcome.uid.clone()).filter(|u| !u.is_empty()),
            },
            warning: false,
            reason: SCHEDULED_REASON.into(),
            message: scheduled_message(&outcome.pod, &outcome.node),
        }
    }

    /// The API resource of a group's definition, in the version the cluster serves.
    /// `None` for dialects without a definition object (Kueue) and for the
    /// v1alpha1 Workload, whose entries are not objects of their own.
    fn definition_resource(&self, group: &GroupKey) -> Option<ApiResource> {
        if group.definition.container().is_some() {
            return None;
        }
        let source = definition_source(group.definition.source)?;
        let version = self.served_versions.get(source.name)?;
        Some(ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(source.group, version, source.kind),
            source.plural,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DefinitionKey, GroupPhase, PodInfo};

    fn pod(priority: i32, class: Option<&str>) -> Arc<PodInfo> {
        let mut spec = serde_json::json!({"containers": [], "priority": priority});
        if let Some(c) = class {
            spec["priorityClassName"] = c.into();
        }
        let v = serde_json::json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec});
        Arc::new(PodInfo::from_json(&serde_json::to_vec(&v).unwrap()).unwrap())
    }

    #[test]
    fn the_scheduled_event_waits_for_the_binding() {
        let key = PodKey::new("ml", "w-0");
        let mut d = Directory::default();
        let uid = |_: &PodKey| Some(Arc::from("u1"));
        let event = Action::Event {
            object: ObjectRef::Pod(key.clone()),
            type_: EventType::Normal,
            reason: SCHEDULED_REASON,
            message: scheduled_message(&key, "n1"),
        };
        assert!(
            d.to_write(event, &uid).is_none(),
            "not queued beside the binding"
        );
        let outcome = BindOutcome {
            pod: key,
            uid: "u1".into(),
            node: "n1".into(),
            result: Ok(()),
        };
        match Directory::scheduled_event(&outcome) {
            Write::Event {
                target,
                warning,
                reason,
                message,
            } => {
                assert_eq!(
                    (target.name.as_str(), target.uid.as_deref()),
                    ("w-0", Some("u1"))
                );
                assert!(!warning);
                assert_eq!(reason, "Scheduled");
                assert_eq!(message, "Successfully assigned ml/w-0 to n1");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn definition_priority_follows_its_class() {
        let mut d = Directory::default();
        let mut def = GroupDef::gang(
            DefinitionKey::new("default", GroupSource::Volcano, "job"),
            2,
            1,
        );
        def.priority_class_name = Some("high".into());
        assert_eq!(d.resolve_def_priority(def.clone()).priority, None);
        d.set_priority_class("high".into(), 1000, false);
        let changed = d.redefined_by_classes();
        assert_eq!(changed.len(), 1);
        assert_eq!(changed[0].priority, Some(1000));
        assert!(d.redefined_by_classes().is_empty(), "only on change");
        d.remove_priority_class("high");
        assert_eq!(d.redefined_by_classes()[0].priority, None);
        d.forget_group_status(&def.key);
        d.set_priority_class("high".into(), 5, false);
        assert!(
            d.redefined_by_classes().is_empty(),
            "deleted definitions are forgotten"
        );
    }

    #[test]
    fn priority_from_class_and_global_default() {
        let mut d = Directory::default();
        d.set_priority_class("high".into(), 1000, false);
        d.set_priority_class("base".into(), 10, true);
        assert_eq!(d.resolve_priority(pod(0, Some("high"))).priority, 1000);
        assert_eq!(d.resolve_priority(pod(0, None)).priority, 10);
        assert_eq!(
            d.resolve_priority(pod(5, Some("high"))).priority,
            5,
            "explicit priority wins"
        );
        d.remove_priority_class("base");
        assert_eq!(d.resolve_priority(pod(0, None)).priority, 0);
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
        assert!(d.to_write(action.clone(), &|_| None).is_none());
        d.served_versions
            .insert("podgroups.scheduling.k8s.io", "v1beta1");
        match d.to_write(action, &|_| None) {
            Some(Write::GroupCondition {
                resource,
                status,
                type_,
                ..
            }) => {
                assert_eq!(resource.api_version, "scheduling.k8s.io/v1beta1");
                assert!(status);
                assert_eq!(type_, POD_GROUP_CONDITION);
            }
            other => panic!("unexpected {other:?}"),
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
        match d.to_write(action(false), &|_| None) {
            Some(Write::GroupStatus {
                resource, status, ..
            }) => {
                assert_eq!(resource.api_version, "scheduling.x-k8s.io/v1alpha1");
                assert_eq!(status["phase"], "Scheduling");
                assert!(status["scheduleStartTime"].is_string());
            }
            other => panic!("unexpected {other:?}"),
        }
        match d.to_write(action(true), &|_| None) {
            Some(Write::GroupStatus { status, .. }) => {
                assert_eq!(status["phase"], "Scheduled");
                assert_eq!(status["scheduled"], 3);
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
            assert!(
                d.to_write(action, &|_| None).is_none(),
                "{source:?} has no status"
            );
        }
    }
}
