//! What the engine asks the daemon to write to the API, and the bookkeeping
//! that keeps those writes to one per change rather than one per retry.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::dra::ClaimReservation;
use crate::framework::PendingReason;
use crate::model::volumes::ClaimWrite;
use crate::model::{GroupKey, GroupPhase, PodKey};

/// An object an event is recorded on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObjectRef {
    /// A pod, with its UID when the engine knows it (events name the UID,
    /// which `kubectl describe` selects them by).
    Pod {
        key: PodKey,
        uid: Option<Arc<str>>,
    },
    Group(GroupKey),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

/// An API write for the daemon to perform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// POST a binding; report the outcome with `ClusterEvent::BindFinished`
    /// (with the same `pod`, `uid` and `node`).
    Bind {
        pod: PodKey,
        uid: Arc<str>,
        node: Arc<str>,
        /// DynamicResources' PreBind, written before the binding: each
        /// claim's planned allocation and the pod's reservation. A failed
        /// write fails the binding.
        claims: Vec<ClaimReservation>,
    },
    /// VolumeBinding's PreBind: make the claim writes (select the node, bind
    /// a static volume); report the outcome with
    /// `ClusterEvent::VolumesPreBound`. The pod's `Bind` follows once its
    /// claims are observed Bound.
    PreBindVolumes {
        pod: PodKey,
        uid: Arc<str>,
        node: Arc<str>,
        writes: Vec<ClaimWrite>,
    },
    /// DynamicResources' Unreserve after a binding failed: take the pod
    /// (`uid`) out of each claim's `status.reservedFor` (a claim no longer
    /// reserved for anyone is deallocated by the resourceclaim
    /// controller). Claims gone or not reserved for it need nothing.
    UnreserveClaims {
        pod: PodKey,
        uid: Arc<str>,
        claims: Vec<PodKey>,
    },
    /// Create a ProvisioningRequest `name` in the group's namespace: one
    /// PodTemplate per pod set (the scheduling-relevant fields of
    /// `template_of`, not its name), `count` each, of `class`.
    CreateProvisioningRequest {
        group: GroupKey,
        name: Arc<str>,
        class: Arc<str>,
        pod_sets: Vec<super::provisioning::PodSet>,
    },
    /// Delete the ProvisioningRequest (and its PodTemplates).
    DeleteProvisioningRequest { namespace: Arc<str>, name: Arc<str> },
    /// Set the pod's `PodScheduled=False` condition. Emitted once per change of
    /// message, never per retry.
    PodUnschedulable {
        pod: PodKey,
        reason: PendingReason,
        message: String,
    },
    /// Record the `Scheduled` event: the binding of the pod to `node`
    /// succeeded (emitted on `ClusterEvent::BindFinished`, never for a
    /// binding that failed).
    Scheduled {
        pod: PodKey,
        uid: Arc<str>,
        node: Arc<str>,
    },
    /// The pod's spec cannot be read: set its `PodScheduled=False`
    /// condition (reason `SchedulerError`) and record a `FailedScheduling`
    /// warning naming `uid`. Once per distinct error.
    PodInvalid {
        pod: PodKey,
        uid: Arc<str>,
        message: String,
    },
    /// Record a Kubernetes event.
    Event {
        object: ObjectRef,
        type_: EventType,
        reason: &'static str,
        message: String,
    },
    /// Preempt a victim as kube-scheduler does: set its `DisruptionTarget`
    /// condition (status True, reason `PreemptionByScheduler`, `message`),
    /// then delete it with its `uid` as precondition (an API server that
    /// says it is already gone, or is another pod now, ends the call). The
    /// engine records the `Preempted` event itself. Performed
    /// asynchronously: the engine learns the outcome from the informer.
    Preempt {
        victim: PodKey,
        uid: Arc<str>,
        /// Who it makes room for (a pod, or a gang's group).
        preemptor: String,
        message: String,
    },
    /// Set (`Some`) or clear (`None`) the pod's `status.nominatedNodeName`.
    Nominate {
        pod: PodKey,
        uid: Arc<str>,
        node: Option<Arc<str>>,
    },
    /// Set the group's status condition (`PodGroupInitiallyScheduled` where the
    /// dialect has one). `initially_scheduled: true` (phase `Scheduled`) is
    /// terminal: no later action for the group flips it back.
    GroupStatus {
        group: GroupKey,
        phase: GroupPhase,
        reason: &'static str,
        message: String,
        initially_scheduled: bool,
        /// Members assumed or bound when the status was decided.
        scheduled: u32,
    },
    /// Set the group's `PodGroupSatisfied` condition (KEP-6413): a gang
    /// once scheduled whose running members fell below `minCount`
    /// (`satisfied: false`), or recovered (`true`). Written on each flip,
    /// with an event on the group (its top owner for owner-defined gangs).
    GroupHealth {
        group: GroupKey,
        satisfied: bool,
        reason: &'static str,
        message: String,
    },
    /// Set the group's `Reserved` condition: room is held for it
    /// (`reserved: true`, the nodes and expected start in `message`), or
    /// no longer (why).
    GroupReservation {
        group: GroupKey,
        reserved: bool,
        message: String,
    },
}

/// The condition a reservation sets on its group (Muster's own type:
/// upstream has no reservations).
pub const RESERVED_CONDITION: &str = "Reserved";
/// The `Reserved` condition's reasons (`Action::GroupReservation`).
pub const RESERVED: &str = "Reserved";
pub const RESERVATION_ENDED: &str = "ReservationEnded";

/// `PodGroupSatisfied` reasons: the running members reach `minCount`, or not.
pub const MIN_COUNT_MET: &str = "MinCountMet";
pub const BELOW_MIN_COUNT: &str = "BelowMinCount";

/// Reason of the event that records a placement (`Action::Scheduled`).
pub const SCHEDULED_REASON: &str = "Scheduled";

/// kube-scheduler's message for a placement.
pub fn scheduled_message(pod: &PodKey, node: &str) -> String {
    format!("Successfully assigned {pod} to {node}")
}

/// The outbox with write de-duplication.
#[derive(Debug, Default)]
pub(super) struct Outbox {
    actions: Vec<Action>,
    /// Pod → the unschedulable condition last written.
    pod_conditions: HashMap<PodKey, (PendingReason, String)>,
    /// Group → the False condition last written.
    group_conditions: HashMap<GroupKey, String>,
    /// Groups whose status went True (terminal).
    scheduled_groups: HashSet<GroupKey>,
    /// Group → whether its members were short of quorum when last looked at
    /// (the gating status is written only when this flips).
    short_of_members: HashMap<GroupKey, bool>,
    /// Scheduled groups whose running members are below `minCount` now
    /// (`PodGroupSatisfied=False` written; True again when they recover).
    unsatisfied: HashSet<GroupKey>,
}

impl Outbox {
    pub fn take(&mut self) -> Vec<Action> {
        std::mem::take(&mut self.actions)
    }

    /// An action written as is.
    pub fn push(&mut self, action: Action) {
        self.actions.push(action);
    }

    pub fn bind(
        &mut self,
        pod: PodKey,
        uid: Arc<str>,
        node: Arc<str>,
        claims: Vec<ClaimReservation>,
    ) {
        self.pod_conditions.remove(&pod);
        self.actions.push(Action::Bind {
            pod,
            uid,
            node,
            claims,
        });
    }

    pub fn pre_bind_volumes(
        &mut self,
        pod: PodKey,
        uid: Arc<str>,
        node: Arc<str>,
        writes: Vec<ClaimWrite>,
    ) {
        self.actions.push(Action::PreBindVolumes {
            pod,
            uid,
            node,
            writes,
        });
    }

    pub fn unreserve_claims(&mut self, pod: PodKey, uid: Arc<str>, claims: Vec<PodKey>) {
        self.actions
            .push(Action::UnreserveClaims { pod, uid, claims });
    }

    pub fn preempt(&mut self, victim: PodKey, uid: Arc<str>, preemptor: String, message: String) {
        self.pod_conditions.remove(&victim);
        self.actions.push(Action::Preempt {
            victim,
            uid,
            preemptor,
            message,
        });
    }

    pub fn nominate(&mut self, pod: PodKey, uid: Arc<str>, node: Option<Arc<str>>) {
        self.actions.push(Action::Nominate { pod, uid, node });
    }

    pub fn invalid_pod(&mut self, pod: PodKey, uid: Arc<str>, message: String) {
        self.actions.push(Action::PodInvalid { pod, uid, message });
    }

    /// The binding succeeded: its `Scheduled` event.
    pub fn scheduled(&mut self, pod: PodKey, uid: Arc<str>, node: Arc<str>) {
        self.actions.push(Action::Scheduled { pod, uid, node });
    }

    pub fn event(
        &mut self,
        object: ObjectRef,
        type_: EventType,
        reason: &'static str,
        message: String,
    ) {
        self.actions.push(Action::Event {
            object,
            type_,
            reason,
            message,
        });
    }

    /// Writes the pod's condition if it changed; returns whether it did.
    pub fn pod_condition(&mut self, pod: &PodKey, reason: PendingReason, message: &str) -> bool {
        if let Some((r, m)) = self.pod_conditions.get(pod)
            && *r == reason
            && m == message
        {
            return false;
        }
        self.pod_conditions
            .insert(pod.clone(), (reason, message.to_string()));
        self.actions.push(Action::PodUnschedulable {
            pod: pod.clone(),
            reason,
            message: message.to_string(),
        });
        true
    }

    /// The pod left scheduling (bound or deleted): forget what was written.
    pub fn forget_pod(&mut self, pod: &PodKey) {
        self.pod_conditions.remove(pod);
    }

    pub fn group_scheduled(&mut self, group: &GroupKey, message: String, scheduled: u32) -> bool {
        if !self.scheduled_groups.insert(group.clone()) {
            return false;
        }
        self.group_conditions.remove(group);
        self.short_of_members.insert(group.clone(), false);
        self.actions.push(Action::GroupStatus {
            group: group.clone(),
            phase: GroupPhase::Scheduled,
            reason: GroupPhase::Scheduled.reason(),
            message,
            initially_scheduled: true,
            scheduled,
        });
        true
    }

    /// A running gang was preempted whole: its status leaves `Scheduled`
    /// (it will have to be placed again) with a condition saying by whom.
    pub fn group_preempted(&mut self, group: &GroupKey, message: String) {
        self.scheduled_groups.remove(group);
        self.unsatisfied.remove(group);
        self.group_conditions.insert(group.clone(), message.clone());
        self.short_of_members.insert(group.clone(), false);
        self.actions.push(Action::GroupStatus {
            group: group.clone(),
            phase: GroupPhase::Unschedulable,
            reason: "Preempted",
            message,
            initially_scheduled: false,
            scheduled: 0,
        });
    }

    pub fn group_unschedulable(&mut self, group: &GroupKey, message: String, scheduled: u32) {
        if self.scheduled_groups.contains(group)
            || self.group_conditions.get(group) == Some(&message)
        {
            return;
        }
        self.group_conditions.insert(group.clone(), message.clone());
        // Rejected at the barrier: its quorum was observed.
        self.short_of_members.insert(group.clone(), false);
        self.actions.push(Action::GroupStatus {
            group: group.clone(),
            phase: GroupPhase::Unschedulable,
            reason: GroupPhase::Unschedulable.reason(),
            message,
            initially_scheduled: false,
            scheduled,
        });
    }

    /// The gating status of a gang not yet scheduled: written when it is
    /// first seen short of quorum, and whenever it flips between short and
    /// observed after that — not per member, so a gang arriving pod by pod
    /// costs two writes. A gang first seen with its quorum writes nothing.
    pub fn group_gating(
        &mut self,
        group: &GroupKey,
        observed: usize,
        min_count: u32,
        scheduled: u32,
    ) {
        let short = observed < min_count as usize;
        let message = format!("{observed} of {min_count} members observed");
        self.gating(group, short, message, scheduled);
    }

    /// A gang CompositePodGroup's gating status: how many of its children
    /// have their quorum observed against `minGroupCount`.
    pub fn composite_gating(&mut self, group: &GroupKey, ready: u64, min_group_count: u32) {
        let short = ready < u64::from(min_group_count);
        let message =
            format!("{ready} of {min_group_count} child groups have their quorum observed");
        self.gating(group, short, message, 0);
    }

    fn gating(&mut self, group: &GroupKey, short: bool, message: String, scheduled: u32) {
        if self.scheduled_groups.contains(group) {
            return;
        }
        let was_short = self.short_of_members.insert(group.clone(), short);
        if was_short == Some(short) || (was_short.is_none() && !short) {
            return;
        }
        let phase = if short {
            GroupPhase::WaitingForMembers
        } else {
            GroupPhase::MembersObserved
        };
        self.group_conditions.remove(group);
        self.actions.push(Action::GroupStatus {
            group: group.clone(),
            phase,
            reason: phase.reason(),
            message,
            initially_scheduled: false,
            scheduled,
        });
    }

    /// The pod's unschedulable condition as last written: reason, message.
    pub fn pod_condition_of(&self, pod: &PodKey) -> Option<(PendingReason, &str)> {
        self.pod_conditions.get(pod).map(|(r, m)| (*r, m.as_str()))
    }

    /// The group's False condition as last written.
    pub fn group_condition_of(&self, group: &GroupKey) -> Option<&str> {
        self.group_conditions.get(group).map(String::as_str)
    }

    /// Whether the group's quorum was released (its status went True).
    pub fn is_scheduled(&self, group: &GroupKey) -> bool {
        self.scheduled_groups.contains(group)
    }

    /// Whether a scheduled group has its `minCount` running (as last
    /// written; true until a shortfall is).
    pub fn is_satisfied(&self, group: &GroupKey) -> bool {
        !self.unsatisfied.contains(group)
    }

    pub fn unsatisfied_count(&self) -> usize {
        self.unsatisfied.len()
    }

    pub fn unsatisfied_groups(&self) -> impl Iterator<Item = &GroupKey> {
        self.unsatisfied.iter()
    }

    /// A scheduled gang's running members, against `min_count`: writes
    /// `PodGroupSatisfied` and its event when that flips. Returns the new
    /// state when it flipped.
    pub fn group_health(
        &mut self,
        group: &GroupKey,
        running: usize,
        min_count: u32,
        object: ObjectRef,
    ) -> Option<bool> {
        if !self.scheduled_groups.contains(group) {
            return None;
        }
        let satisfied = running >= min_count as usize;
        let flipped = match satisfied {
            true => self.unsatisfied.remove(group),
            false => self.unsatisfied.insert(group.clone()),
        };
        if !flipped {
            return None;
        }
        let (reason, type_, message) = match satisfied {
            true => (
                MIN_COUNT_MET,
                EventType::Normal,
                format!("{running} of minCount {min_count} members running again"),
            ),
            false => (
                BELOW_MIN_COUNT,
                EventType::Warning,
                format!("only {running} of minCount {min_count} members running"),
            ),
        };
        self.actions.push(Action::GroupHealth {
            group: group.clone(),
            satisfied,
            reason,
            message: message.clone(),
        });
        let event_reason = match satisfied {
            true => "GangSatisfied",
            false => "GangUnsatisfied",
        };
        self.event(object, type_, event_reason, message);
        Some(satisfied)
    }

    /// A reservation made (`true`) or ended for `group`.
    pub fn group_reservation(&mut self, group: &GroupKey, reserved: bool, message: String) {
        self.actions.push(Action::GroupReservation {
            group: group.clone(),
            reserved,
            message,
        });
    }

    pub fn scheduled_group_count(&self) -> usize {
        self.scheduled_groups.len()
    }

    /// Groups whose quorum was released at least once.
    pub fn scheduled_groups(&self) -> impl Iterator<Item = &GroupKey> {
        self.scheduled_groups.iter()
    }

    /// The definition is gone: a new one with the same name starts afresh.
    pub fn forget_group(&mut self, group: &GroupKey) {
        self.unsatisfied.remove(group);
        self.scheduled_groups.remove(group);
        self.group_conditions.remove(group);
        self.short_of_members.remove(group);
    }
}
