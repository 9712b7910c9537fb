//! API calls, the object each one writes, its lane, and what it means for
//! the waiting messages of its subject.

use std::sync::Arc;

use crate::engine::{Action, ObjectRef};
use crate::model::volumes::ClaimWrite;
use crate::model::{GroupKey, PodKey};

/// An API resource (group, version, kind and plural), free of any client
/// library's types.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResourceRef {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
}

impl ResourceRef {
    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// An object an event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventTarget {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: Option<String>,
}

/// One API write.
#[derive(Debug, Clone, PartialEq)]
pub enum ApiCall {
    /// Reserve the pod's claims (recording their planned allocations),
    /// then POST pods/binding.
    Bind {
        pod: PodKey,
        uid: Arc<str>,
        node: Arc<str>,
        claims: Vec<crate::dra::ClaimReservation>,
    },
    /// VolumeBinding's PreBind writes for a pod placed on `node`: annotate
    /// claims with the selected node, bind static volumes to claims.
    PreBindVolumes {
        pod: PodKey,
        uid: Arc<str>,
        node: Arc<str>,
        writes: Vec<ClaimWrite>,
    },
    /// Take the pod (`uid`) out of each claim's `status.reservedFor`.
    UnreserveClaims {
        pod: PodKey,
        uid: Arc<str>,
        claims: Vec<PodKey>,
    },
    /// Set the pod's `PodScheduled` condition (`False` with a reason while pending).
    PodCondition {
        pod: PodKey,
        status: bool,
        reason: String,
        message: String,
    },
    /// Record a core/v1 Event; repeats of the same (object, reason, message) bump its count.
    Event {
        target: EventTarget,
        warning: bool,
        reason: String,
        message: String,
    },
    /// Set a condition in a group definition's status (e.g. `PodGroupInitiallyScheduled`).
    GroupCondition {
        resource: ResourceRef,
        namespace: String,
        name: String,
        type_: String,
        status: bool,
        reason: String,
        message: String,
    },
    /// Merge-patch a group definition's `status` (dialects with a status of
    /// their own: Coscheduling, Volcano).
    GroupStatus {
        resource: ResourceRef,
        namespace: String,
        name: String,
        status: serde_json::Value,
    },
    /// Preempt a victim, as kube-scheduler does in two writes and in this
    /// order: a `DisruptionTarget` condition (True, `PreemptionByScheduler`,
    /// `message`) on its status, then a DELETE with `uid` as precondition.
    /// A victim already gone (404) or replaced (409) ends the call.
    Preempt {
        victim: PodKey,
        uid: Arc<str>,
        message: String,
    },
    /// Set (`Some`) or clear (`None`) the pod's `status.nominatedNodeName`.
    Nominate { pod: PodKey, node: Option<Arc<str>> },
    /// Create a ProvisioningRequest with one PodTemplate per pod set (the
    /// scheduling-relevant fields of the member named, read from the API).
    CreateProvisioningRequest {
        namespace: Arc<str>,
        name: Arc<str>,
        class: Arc<str>,
        /// The group's name, as a label on what is created.
        group: Arc<str>,
        pod_sets: Vec<(PodKey, u32)>,
    },
    /// Delete a ProvisioningRequest and its PodTemplates (gone is done).
    DeleteProvisioningRequest { namespace: Arc<str>, name: Arc<str> },
}

/// The object a call writes (for an event: the object it is about). Calls
/// for one object run one at a time, in order: a late "Unschedulable"
/// condition must never land after the pod's binding.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ObjectId {
    Pod(PodKey),
    Other {
        kind: String,
        namespace: String,
        name: String,
    },
}

/// In-flight limits are per lane, so a burst of reports never delays the
/// writes that place pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lane {
    Bindings = 0,
    Reports = 1,
}

/// While bindings wait for room, the reports lane keeps this fraction of
/// its width: under overload the API server's write capacity goes to the
/// writes that place pods, and reports queue (events beyond
/// [`super::EVENT_BACKLOG`] are dropped, as client-go's broadcaster drops
/// them). kube-scheduler likewise records events from one goroutine while
/// its bindings run in parallel.
pub const REPORTS_SHARE_UNDER_BINDING_BACKLOG: usize = 8;

impl Lane {
    pub const ALL: [Lane; 2] = [Lane::Bindings, Lane::Reports];

    pub fn index(self) -> usize {
        self as usize
    }

    /// Calls of this lane allowed in flight, for lanes `width` wide, when
    /// `bindings_backlogged` (the bindings lane is full and calls wait
    /// behind it).
    pub fn room(self, width: usize, bindings_backlogged: bool) -> usize {
        match (self, bindings_backlogged) {
            (Lane::Reports, true) => (width / REPORTS_SHARE_UNDER_BINDING_BACKLOG).max(1),
            _ => width,
        }
    }
}

impl ApiCall {
    pub fn object(&self) -> ObjectId {
        match self {
            ApiCall::Bind { pod, .. }
            | ApiCall::PreBindVolumes { pod, .. }
            | ApiCall::UnreserveClaims { pod, .. }
            | ApiCall::PodCondition { pod, .. }
            | ApiCall::Nominate { pod, .. }
            | ApiCall::Preempt { victim: pod, .. } => ObjectId::Pod(pod.clone()),
            ApiCall::Event { target, .. } if target.kind == "Pod" && target.api_version == "v1" => {
                ObjectId::Pod(PodKey::new(&target.namespace, &target.name))
            }
            ApiCall::Event { target, .. } => ObjectId::Other {
                kind: target.kind.clone(),
                namespace: target.namespace.clone(),
                name: target.name.clone(),
            },
            ApiCall::GroupCondition {
                resource,
                namespace,
                name,
                ..
            }
            | ApiCall::GroupStatus {
                resource,
                namespace,
                name,
                ..
            } => ObjectId::Other {
                kind: resource.kind.clone(),
                namespace: namespace.clone(),
                name: name.clone(),
            },
            ApiCall::CreateProvisioningRequest {
                namespace, name, ..
            }
            | ApiCall::DeleteProvisioningRequest { namespace, name } => ObjectId::Other {
                kind: "ProvisioningRequest".into(),
                namespace: namespace.to_string(),
                name: name.to_string(),
            },
        }
    }

    /// Preemption's writes go with the bindings: they make room for a
    /// waiting preemptor, and a burst of reports must not delay them.
    pub fn lane(&self) -> Lane {
        match self {
            ApiCall::Bind { .. }
            | ApiCall::PreBindVolumes { .. }
            | ApiCall::UnreserveClaims { .. }
            | ApiCall::Preempt { .. }
            | ApiCall::Nominate { .. } => Lane::Bindings,
            _ => Lane::Reports,
        }
    }

    /// The `operation` label of `muster_api_writes_total`.
    pub fn operation(&self) -> &'static str {
        match self {
            ApiCall::Bind { .. } => "bind",
            ApiCall::PreBindVolumes { .. } => "prebind_volumes",
            ApiCall::UnreserveClaims { .. } => "unreserve_claims",
            ApiCall::PodCondition { .. } => "pod_status",
            ApiCall::Event { .. } => "event",
            ApiCall::GroupCondition { .. } | ApiCall::GroupStatus { .. } => "group_status",
            ApiCall::Preempt { .. } => "preempt",
            ApiCall::Nominate { .. } => "nominate",
            ApiCall::CreateProvisioningRequest { .. }
            | ApiCall::DeleteProvisioningRequest { .. } => "provisioning_request",
        }
    }
}

/// Whose waiting a call reports.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Subject {
    Pod(PodKey),
    Group(GroupKey),
}

/// What a call means for the subject's waiting messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Intent {
    /// A passing state of the subject (gated, unschedulable, waiting at
    /// permit): held for the grace, dropped if the subject settles first.
    Waiting(Subject),
    /// The subject's waiting is over (a binding; a group's terminal
    /// `Scheduled` status): what is held or queued of its waiting is dropped.
    Settles(Subject),
    /// Sent at once and never dropped.
    Immediate,
}

impl Intent {
    /// The intent of an engine action, by its kind.
    pub fn of(action: &Action) -> Intent {
        match action {
            Action::Bind { pod, .. } => Intent::Settles(Subject::Pod(pod.clone())),
            Action::PodUnschedulable { pod, .. }
            | Action::Event {
                object: ObjectRef::Pod { key: pod, .. },
                ..
            } => Intent::Waiting(Subject::Pod(pod.clone())),
            Action::GroupStatus {
                group,
                initially_scheduled,
                ..
            } => {
                let subject = Subject::Group(group.clone());
                if *initially_scheduled {
                    Intent::Settles(subject)
                } else {
                    Intent::Waiting(subject)
                }
            }
            // An unreadable pod is never bound: nothing would settle it.
            Action::Scheduled { .. }
            | Action::PodInvalid { .. }
            | Action::Event { .. }
            | Action::PreBindVolumes { .. }
            | Action::UnreserveClaims { .. }
            | Action::Preempt { .. }
            | Action::Nominate { .. }
            | Action::GroupHealth { .. }
            | Action::GroupReservation { .. }
            | Action::CreateProvisioningRequest { .. }
            | Action::DeleteProvisioningRequest { .. } => Intent::Immediate,
        }
    }
}

/// A call and its intent, as the dispatcher receives it.
#[derive(Debug, Clone, PartialEq)]
pub struct Dispatch {
    pub call: ApiCall,
    pub intent: Intent,
}

impl Dispatch {
    pub fn immediate(call: ApiCall) -> Self {
        Dispatch {
            call,
            intent: Intent::Immediate,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EventType;

    #[test]
    fn intents_follow_the_action_kinds() {
        let key = PodKey::new("ns", "a");
        let pod = Subject::Pod(key.clone());
        let bind = Action::Bind {
            pod: key.clone(),
            uid: "u".into(),
            node: "n".into(),
            claims: Vec::new(),
        };
        assert_eq!(Intent::of(&bind), Intent::Settles(pod.clone()));
        let event = Action::Event {
            object: ObjectRef::Pod {
                key: key.clone(),
                uid: None,
            },
            type_: EventType::Normal,
            reason: "GangWaiting",
            message: String::new(),
        };
        assert_eq!(Intent::of(&event), Intent::Waiting(pod));
        let scheduled = Action::Scheduled {
            pod: key,
            uid: "u".into(),
            node: "n".into(),
        };
        assert_eq!(Intent::of(&scheduled), Intent::Immediate);
    }

    #[test]
    fn a_pods_events_are_ordered_with_its_binding() {
        let key = PodKey::new("ns", "a");
        let event = ApiCall::Event {
            target: EventTarget {
                api_version: "v1".into(),
                kind: "Pod".into(),
                namespace: "ns".into(),
                name: "a".into(),
                uid: None,
            },
            warning: true,
            reason: "FailedScheduling".into(),
            message: "m".into(),
        };
        let bind = ApiCall::Bind {
            pod: key,
            uid: "u".into(),
            node: "n".into(),
            claims: Vec::new(),
        };
        assert_eq!(event.object(), bind.object());
        assert_eq!((event.lane(), bind.lane()), (Lane::Reports, Lane::Bindings));
    }

    #[test]
    fn reports_narrow_only_while_bindings_wait() {
        assert_eq!(Lane::Reports.room(64, false), 64);
        assert_eq!(Lane::Reports.room(64, true), 8);
        assert_eq!(
            Lane::Bindings.room(64, true),
            64,
            "bindings keep their width"
        );
        assert_eq!(Lane::Reports.room(4, true), 1, "never closed");
    }
}
