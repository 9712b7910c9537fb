//! When a newer call makes a waiting one pointless, and how the two become
//! one. Applied both to a subject's held calls and to an object's queued
//! calls (never to a call in flight).
//!
//! * A waiting call behind a queued call that settles its subject is skipped.
//! * A call that settles a subject drops the waiting calls of that subject
//!   (a binding drops the pod's queued conditions and waiting events); group
//!   status merge patches dropped so are merged under the settling one, so it
//!   still carries what only they set (Coscheduling's `scheduleStartTime`).
//! * A newer pod condition replaces a waiting one; a newer group condition
//!   replaces one of the same type; a newer group status patch is merged
//!   over a waiting one; a newer waiting event replaces a waiting event of
//!   the same reason and type; a newer nomination replaces a queued one. A
//!   gang filling up member by member thus costs one condition write per
//!   pod, not one per member that arrived.

use std::collections::VecDeque;

use super::call::{ApiCall, Dispatch, Intent};

/// Adds `new` behind `queued`, dropping or folding in the queued calls it
/// supersedes. Returns how many calls were dropped or folded.
pub(super) fn enqueue(queued: &mut VecDeque<Dispatch>, mut new: Dispatch) -> usize {
    if let Intent::Waiting(subject) = &new.intent {
        let settles = Intent::Settles(subject.clone());
        if queued.iter().any(|old| old.intent == settles) {
            // Already settled (kube-scheduler skips a less relevant call the
            // same way): the message would be stale when it landed.
            return 1;
        }
    }
    if let Intent::Settles(subject) = &new.intent {
        let waiting = Intent::Waiting(subject.clone());
        let before = queued.len();
        let mut folded = serde_json::json!({});
        let mut any_status = false;
        queued.retain(|old| {
            if old.intent != waiting {
                return true;
            }
            if let ApiCall::GroupStatus { status, .. } = &old.call {
                json_patch::merge(&mut folded, status);
                any_status = true;
            }
            false
        });
        let dropped = before - queued.len();
        if any_status && let ApiCall::GroupStatus { status, .. } = &mut new.call {
            json_patch::merge(&mut folded, status);
            *status = folded;
        }
        queued.push_back(new);
        return dropped;
    }
    match queued.iter_mut().find(|old| supersedes(&new, old)) {
        Some(old) => {
            fold(old, new);
            1
        }
        None => {
            queued.push_back(new);
            0
        }
    }
}

/// Whether `newer` makes `older` pointless to send.
fn supersedes(newer: &Dispatch, older: &Dispatch) -> bool {
    if newer.call.object() != older.call.object() {
        return false;
    }
    match (&newer.call, &older.call) {
        (ApiCall::PodCondition { .. }, ApiCall::PodCondition { .. })
        | (ApiCall::GroupStatus { .. }, ApiCall::GroupStatus { .. })
        // Only the latest nomination matters (a clear after a set, or a
        // move to another node).
        | (ApiCall::Nominate { .. }, ApiCall::Nominate { .. }) => true,
        (ApiCall::GroupCondition { type_: a, .. }, ApiCall::GroupCondition { type_: b, .. }) => {
            a == b
        }
        // Events are a record: only a waiting message replaces another.
        (
            ApiCall::Event {
                reason: a,
                warning: wa,
                ..
            },
            ApiCall::Event {
                reason: b,
                warning: wb,
                ..
            },
        ) => {
            a == b
                && wa == wb
                && matches!(newer.intent, Intent::Waiting(_))
                && newer.intent == older.intent
        }
        _ => false,
    }
}

/// `newer` takes `older`'s place in the queue (a status patch merged over it).
fn fold(older: &mut Dispatch, newer: Dispatch) {
    match (&mut older.call, newer.call) {
        (ApiCall::GroupStatus { status: old, .. }, ApiCall::GroupStatus { status, .. }) => {
            json_patch::merge(old, &status);
            older.intent = newer.intent;
        }
        (_, call) => {
            *older = Dispatch {
                call,
                intent: newer.intent,
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::dispatch::{EventTarget, ResourceRef, Subject};
    use crate::model::{DefinitionKey, GroupKey, GroupSource, PodKey};

    pub fn pod(name: &str) -> Subject {
        Subject::Pod(PodKey::new("ns", name))
    }

    pub fn condition(name: &str, message: &str) -> Dispatch {
        Dispatch {
            call: ApiCall::PodCondition {
                pod: PodKey::new("ns", name),
                status: false,
                reason: "SchedulingGated".into(),
                message: message.into(),
            },
            intent: Intent::Waiting(pod(name)),
        }
    }

    pub fn event(name: &str, reason: &str, message: &str, intent: Intent) -> Dispatch {
        Dispatch {
            call: ApiCall::Event {
                target: EventTarget {
                    api_version: "v1".into(),
                    kind: "Pod".into(),
                    namespace: "ns".into(),
                    name: name.into(),
                    uid: None,
                },
                warning: false,
                reason: reason.into(),
                message: message.into(),
            },
            intent,
        }
    }

    pub fn bind(name: &str) -> Dispatch {
        Dispatch {
            call: ApiCall::Bind {
                pod: PodKey::new("ns", name),
                uid: "u".into(),
                node: "n".into(),
                claims: Vec::new(),
            },
            intent: Intent::Settles(pod(name)),
        }
    }

    pub fn group() -> Subject {
        Subject::Group(GroupKey::new(DefinitionKey::new(
            "ns",
            GroupSource::Coscheduling,
            "g",
        )))
    }

    pub fn status(v: serde_json::Value, settles: bool) -> Dispatch {
        Dispatch {
            call: ApiCall::GroupStatus {
                resource: ResourceRef {
                    group: "scheduling.x-k8s.io".into(),
                    version: "v1alpha1".into(),
                    kind: "PodGroup".into(),
                    plural: "podgroups".into(),
                },
                namespace: "ns".into(),
                name: "g".into(),
                status: v,
            },
            intent: if settles {
                Intent::Settles(group())
            } else {
                Intent::Waiting(group())
            },
        }
    }

    pub fn message(d: &Dispatch) -> &str {
        match &d.call {
            ApiCall::PodCondition { message, .. } | ApiCall::Event { message, .. } => message,
            _ => "",
        }
    }

    fn nominate(name: &str, node: Option<&str>) -> Dispatch {
        Dispatch::immediate(ApiCall::Nominate {
            pod: PodKey::new("ns", name),
            node: node.map(Into::into),
        })
    }

    #[test]
    fn a_newer_nomination_replaces_a_queued_one_of_the_same_pod() {
        let mut q = VecDeque::new();
        assert_eq!(enqueue(&mut q, nominate("a", Some("n1"))), 0);
        assert_eq!(enqueue(&mut q, nominate("b", Some("n1"))), 0);
        assert_eq!(enqueue(&mut q, nominate("a", None)), 1);
        assert_eq!(
            q.into_iter().collect::<Vec<_>>(),
            [nominate("a", None), nominate("b", Some("n1"))]
        );
    }

    #[test]
    fn a_newer_condition_replaces_a_queued_one_in_place() {
        let mut q = VecDeque::new();
        assert_eq!(enqueue(&mut q, condition("a", "1/3")), 0);
        assert_eq!(
            enqueue(
                &mut q,
                event("a", "GangWaiting", "x", Intent::Waiting(pod("a")))
            ),
            0
        );
        assert_eq!(enqueue(&mut q, condition("a", "2/3")), 1);
        assert_eq!(q.iter().map(message).collect::<Vec<_>>(), ["2/3", "x"]);
    }

    #[test]
    fn a_binding_drops_the_waiting_messages_of_its_pod_only() {
        let mut q = VecDeque::new();
        enqueue(&mut q, condition("a", "1/3"));
        enqueue(
            &mut q,
            event("a", "GangWaiting", "x", Intent::Waiting(pod("a"))),
        );
        enqueue(&mut q, event("a", "Other", "kept", Intent::Immediate));
        enqueue(&mut q, condition("b", "b"));
        assert_eq!(enqueue(&mut q, bind("a")), 2);
        assert_eq!(q.len(), 3);
        assert_eq!(message(&q[0]), "kept");
        assert_eq!(message(&q[1]), "b");
        assert!(matches!(q[2].call, ApiCall::Bind { .. }));
    }

    #[test]
    fn a_waiting_message_behind_a_queued_binding_is_skipped() {
        let mut q = VecDeque::new();
        enqueue(&mut q, bind("a"));
        assert_eq!(enqueue(&mut q, condition("a", "late")), 1);
        assert_eq!(enqueue(&mut q, condition("b", "other pod")), 0);
        assert_eq!(q.len(), 2);
    }

    #[test]
    fn events_are_replaced_only_as_waiting_messages() {
        let mut q = VecDeque::new();
        enqueue(&mut q, event("a", "Scheduled", "1", Intent::Immediate));
        assert_eq!(
            enqueue(&mut q, event("a", "Scheduled", "2", Intent::Immediate)),
            0
        );
        enqueue(
            &mut q,
            event("a", "GangWaiting", "1", Intent::Waiting(pod("a"))),
        );
        assert_eq!(
            enqueue(
                &mut q,
                event("a", "GangWaiting", "7", Intent::Waiting(pod("a")))
            ),
            1
        );
        assert_eq!(q.iter().map(message).collect::<Vec<_>>(), ["1", "2", "7"]);
    }

    #[test]
    fn a_settling_group_status_keeps_fields_only_the_dropped_ones_set() {
        let mut q = VecDeque::new();
        let first =
            serde_json::json!({"phase": "Pending", "scheduled": 0, "scheduleStartTime": "t0"});
        enqueue(&mut q, status(first, false));
        enqueue(
            &mut q,
            status(serde_json::json!({"phase": "Scheduling"}), false),
        );
        assert_eq!(q.len(), 1, "waiting patches merge");
        enqueue(
            &mut q,
            status(
                serde_json::json!({"phase": "Scheduled", "scheduled": 3}),
                true,
            ),
        );
        assert_eq!(q.len(), 1);
        let ApiCall::GroupStatus { status, .. } = &q[0].call else {
            panic!("{q:?}")
        };
        assert_eq!(
            *status,
            serde_json::json!({"phase": "Scheduled", "scheduled": 3, "scheduleStartTime": "t0"})
        );
    }
}
