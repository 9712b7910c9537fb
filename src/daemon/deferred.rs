//! Waiting messages held back for a short grace. A gang that waits only
//! briefly — members gated until the last sibling is created, reserved at
//! permit until quorum — is usually bound before the grace ends, and its
//! waiting messages are then dropped unwritten. Pods and gangs that keep
//! waiting get their latest message, one grace late, and at most one write
//! of each kind per grace after that (a newer condition replaces a held one,
//! so a 1,000-member gang filling up does not rewrite every member's
//! "N of M" condition once per arrival). A burst of fast gangs thus
//! costs the API server a binding and a `Scheduled` event per pod and one
//! status write per gang, as with kube-scheduler, instead of several more
//! writes per gang for states that lasted milliseconds (each also a watch
//! event for every watcher).
//!
//! Held: a pod's `PodScheduled=False` condition and its events other than
//! `Scheduled`, until the pod's binding; a group's status while it is not
//! yet scheduled, until its `Scheduled` status. Everything else goes at once.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use crate::engine::{Action, ObjectRef};
use crate::kube::writer::Write;
use crate::model::{GroupKey, PodKey};

/// Whose waiting a held write reports.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Subject {
    Pod(PodKey),
    Group(GroupKey),
}

/// What an action means for the held writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Class {
    /// A passing state of the subject: hold it.
    Waiting(Subject),
    /// The subject's waiting is over: drop what is held, send this.
    Settles(Subject),
    /// Send at once.
    Other,
}

impl Class {
    pub fn of(action: &Action) -> Class {
        match action {
            Action::Bind { pod, .. } => Class::Settles(Subject::Pod(pod.clone())),
            Action::PodUnschedulable { pod, .. } => Class::Waiting(Subject::Pod(pod.clone())),
            Action::Event {
                object: ObjectRef::Pod(pod),
                reason,
                ..
            } if *reason != "Scheduled" => Class::Waiting(Subject::Pod(pod.clone())),
            Action::GroupStatus {
                group,
                initially_scheduled,
                ..
            } => {
                let subject = Subject::Group(group.clone());
                if *initially_scheduled {
                    Class::Settles(subject)
                } else {
                    Class::Waiting(subject)
                }
            }
            Action::Event { .. } => Class::Other,
        }
    }
}

/// Writes waiting for their grace to pass.
#[derive(Debug)]
pub struct Deferred {
    grace: Duration,
    held: HashMap<Subject, Vec<Write>>,
    /// When each subject's writes are due, oldest first (the grace is
    /// constant, so pushing at the back keeps the queue sorted).
    due: VecDeque<(Instant, Subject)>,
}

impl Deferred {
    /// A zero grace holds nothing.
    pub fn new(grace: Duration) -> Self {
        Deferred {
            grace,
            held: HashMap::new(),
            due: VecDeque::new(),
        }
    }

    /// Holds `write` (`None`) or hands it back to be sent now (`Some`).
    pub fn offer(&mut self, class: Class, write: Write, now: Instant) -> Option<Write> {
        match class {
            Class::Waiting(subject) if !self.grace.is_zero() => {
                let entry = self.held.entry(subject.clone()).or_default();
                if entry.is_empty() {
                    self.due.push_back((now + self.grace, subject));
                }
                hold(entry, write);
                None
            }
            Class::Settles(subject) => {
                let held = self.held.remove(&subject).unwrap_or_default();
                Some(coalesce(held, write))
            }
            Class::Waiting(_) | Class::Other => Some(write),
        }
    }

    /// Writes whose grace has passed, in the order they were offered per
    /// subject.
    pub fn take_due(&mut self, now: Instant) -> Vec<Write> {
        let mut out = Vec::new();
        while let Some((at, _)) = self.due.front()
            && *at <= now
        {
            let Some((_, subject)) = self.due.pop_front() else {
                break;
            };
            out.extend(self.held.remove(&subject).unwrap_or_default());
        }
        out
    }

    /// When the next held write is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.due.front().map(|(at, _)| *at)
    }
}

/// Adds `write` to a subject's held writes, folding it into an earlier one
/// that it supersedes: a newer condition replaces the held one, a newer
/// status merge patch is merged over it, and a newer event of the same
/// reason replaces the older one. A gang filling up member by member thus
/// holds one condition per pod, not one per member that arrived.
fn hold(held: &mut Vec<Write>, write: Write) {
    let earlier = held.iter_mut().find(|h| supersedes(&write, h));
    match (earlier, write) {
        (
            Some(Write::GroupStatus { status: old, .. }),
            Write::GroupStatus { status: newer, .. },
        ) => json_patch::merge(old, &newer),
        (Some(slot), write) => *slot = write,
        (None, write) => held.push(write),
    }
}

/// Whether `newer` makes `older` pointless to send (same object, same kind
/// of write).
fn supersedes(newer: &Write, older: &Write) -> bool {
    match (newer, older) {
        (Write::PodCondition { .. }, Write::PodCondition { .. })
        | (Write::GroupStatus { .. }, Write::GroupStatus { .. }) => true,
        (Write::GroupCondition { type_: a, .. }, Write::GroupCondition { type_: b, .. }) => a == b,
        (
            Write::Event {
                reason: a,
                warning: wa,
                ..
            },
            Write::Event {
                reason: b,
                warning: wb,
                ..
            },
        ) => a == b && wa == wb,
        _ => false,
    }
}

/// The settling write, carrying what the dropped ones would have set and it
/// does not: a group status merge patch is applied over the held patches
/// (Coscheduling's `scheduleStartTime` is only in the first one). Other
/// writes replace what they settle as they are.
fn coalesce(held: Vec<Write>, settling: Write) -> Write {
    match settling {
        Write::GroupStatus {
            resource,
            namespace,
            name,
            status,
        } => {
            let mut merged = serde_json::json!({});
            for w in held {
                if let Write::GroupStatus { status, .. } = w {
                    json_patch::merge(&mut merged, &status);
                }
            }
            json_patch::merge(&mut merged, &status);
            Write::GroupStatus {
                resource,
                namespace,
                name,
                status: merged,
            }
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DefinitionKey, GroupSource};

    fn pod(name: &str) -> Subject {
        Subject::Pod(PodKey::new("ns", name))
    }

    fn write(message: &str) -> Write {
        Write::PodCondition {
            pod: PodKey::new("ns", "x"),
            status: false,
            reason: "SchedulingGated".into(),
            message: message.into(),
        }
    }

    fn message(w: &Write) -> &str {
        match w {
            Write::PodCondition { message, .. } => message,
            _ => "",
        }
    }

    #[test]
    fn classes_follow_the_actions() {
        let key = PodKey::new("ns", "a");
        let bind = Action::Bind {
            pod: key.clone(),
            uid: "u".into(),
            node: "n".into(),
        };
        assert_eq!(Class::of(&bind), Class::Settles(pod("a")));
        let event = |reason| Action::Event {
            object: ObjectRef::Pod(key.clone()),
            type_: crate::engine::EventType::Normal,
            reason,
            message: String::new(),
        };
        assert_eq!(Class::of(&event("GangWaiting")), Class::Waiting(pod("a")));
        assert_eq!(Class::of(&event("Scheduled")), Class::Other);
    }

    #[test]
    fn a_subject_settled_within_the_grace_never_gets_its_waiting_messages() {
        let t0 = Instant::now();
        let mut d = Deferred::new(Duration::from_secs(1));
        assert!(
            d.offer(Class::Waiting(pod("a")), write("1/2"), t0)
                .is_none()
        );
        assert!(
            d.offer(Class::Waiting(pod("a")), write("GangWaiting"), t0)
                .is_none()
        );
        assert!(d.offer(Class::Other, write("Scheduled"), t0).is_some());
        assert!(
            d.offer(Class::Settles(pod("a")), write("bind"), t0)
                .is_some()
        );
        assert!(d.held.is_empty());
        assert!(d.take_due(t0 + Duration::from_secs(2)).is_empty());
        let group = Subject::Group(GroupKey::new(DefinitionKey::new(
            "ns",
            GroupSource::PodGroup,
            "g",
        )));
        assert!(
            d.offer(Class::Waiting(group.clone()), write("waiting"), t0)
                .is_none()
        );
        assert!(
            d.offer(Class::Settles(group), write("scheduled"), t0)
                .is_some()
        );
        assert!(d.held.is_empty());
    }

    #[test]
    fn a_subject_that_keeps_waiting_gets_its_latest_message_one_grace_late() {
        let t0 = Instant::now();
        let grace = Duration::from_secs(1);
        let mut d = Deferred::new(grace);
        d.offer(Class::Waiting(pod("a")), write("a 1/3"), t0);
        d.offer(
            Class::Waiting(pod("b")),
            write("b 1/3"),
            t0 + Duration::from_millis(100),
        );
        d.offer(
            Class::Waiting(pod("a")),
            write("a 2/3"),
            t0 + Duration::from_millis(500),
        );
        assert_eq!(d.next_due(), Some(t0 + grace));
        assert!(d.take_due(t0 + Duration::from_millis(999)).is_empty());
        let due = d.take_due(t0 + grace);
        assert_eq!(due.iter().map(message).collect::<Vec<_>>(), ["a 2/3"]);
        assert_eq!(d.held.len(), 1);
        assert_eq!(d.take_due(t0 + Duration::from_millis(1100)).len(), 1);
        assert!(d.next_due().is_none());
    }

    #[test]
    fn a_settling_group_status_keeps_fields_only_the_held_ones_set() {
        let group = Subject::Group(GroupKey::new(DefinitionKey::new(
            "ns",
            GroupSource::Coscheduling,
            "g",
        )));
        let status = |v: serde_json::Value| Write::GroupStatus {
            resource: kube::core::ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&()),
            namespace: "ns".into(),
            name: "g".into(),
            status: v,
        };
        let t0 = Instant::now();
        let mut d = Deferred::new(Duration::from_secs(1));
        let first =
            serde_json::json!({"phase": "Pending", "scheduled": 0, "scheduleStartTime": "t0"});
        assert!(
            d.offer(Class::Waiting(group.clone()), status(first), t0)
                .is_none()
        );
        let sent = d.offer(
            Class::Settles(group),
            status(serde_json::json!({"phase": "Scheduled", "scheduled": 3})),
            t0,
        );
        let Some(Write::GroupStatus { status, .. }) = sent else {
            panic!("the settling write is sent")
        };
        assert_eq!(
            status,
            serde_json::json!({"phase": "Scheduled", "scheduled": 3, "scheduleStartTime": "t0"})
        );
    }

    #[test]
    fn newer_waiting_messages_replace_held_ones() {
        let t0 = Instant::now();
        let mut d = Deferred::new(Duration::from_secs(1));
        for n in 1..=500 {
            d.offer(Class::Waiting(pod("a")), write(&format!("{n}/1000")), t0);
        }
        let event = |message: &str| Write::Event {
            target: crate::kube::writer::EventTarget {
                api_version: "v1".into(),
                kind: "Pod".into(),
                namespace: "ns".into(),
                name: "a".into(),
                uid: None,
            },
            warning: false,
            reason: "GangWaiting".into(),
            message: message.into(),
        };
        d.offer(Class::Waiting(pod("a")), event("1/1000 reserved"), t0);
        d.offer(Class::Waiting(pod("a")), event("7/1000 reserved"), t0);
        let due = d.take_due(t0 + Duration::from_secs(1));
        assert_eq!(due.len(), 2, "{due:?}");
        assert_eq!(message(&due[0]), "500/1000");
        assert!(matches!(&due[1], Write::Event { message, .. } if message == "7/1000 reserved"));
    }

    #[test]
    fn zero_grace_holds_nothing() {
        let mut d = Deferred::new(Duration::ZERO);
        assert!(
            d.offer(Class::Waiting(pod("a")), write("x"), Instant::now())
                .is_some()
        );
    }
}
