//! Waiting messages held back for a short grace. A gang that waits only
//! briefly — members gated until the last sibling is created, reserved at
//! permit until quorum — is usually bound before the grace ends, and its
//! waiting messages are then dropped unwritten. Subjects that keep waiting
//! get their latest messages one grace late, folded by the rules of `merge`
//! (a newer condition replaces a held one, so a 1,000-member gang filling up
//! does not rewrite every member's "N of M" condition once per arrival). A
//! burst of fast gangs thus costs the API server a binding and a `Scheduled`
//! event per pod and one status write per gang, as with kube-scheduler,
//! instead of several more writes per gang for states that lasted
//! milliseconds (each also a watch event for every watcher).
//!
//! Held: calls whose intent is `Waiting`, until their subject settles.
//! Everything else passes at once.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use super::call::{Dispatch, Intent, Subject};
use super::merge;

#[derive(Debug)]
pub struct Holds {
    grace: Duration,
    held: HashMap<Subject, VecDeque<Dispatch>>,
    /// When each subject's calls are due, oldest first (the grace is
    /// constant, so pushing at the back keeps the queue sorted).
    due: VecDeque<(Instant, Subject)>,
    superseded: u64,
}

impl Holds {
    /// A zero grace holds nothing.
    pub fn new(grace: Duration) -> Self {
        Holds {
            grace,
            held: HashMap::new(),
            due: VecDeque::new(),
            superseded: 0,
        }
    }

    /// Holds `d`, or returns what is to be queued now: `d` itself, or for a
    /// settling call, `d` with the subject's held calls folded in or dropped.
    pub fn offer(&mut self, d: Dispatch, now: Instant) -> Option<Dispatch> {
        match &d.intent {
            Intent::Waiting(subject) if !self.grace.is_zero() => {
                let subject = subject.clone();
                let held = self.held.entry(subject.clone()).or_default();
                if held.is_empty() {
                    // An unrepresentable deadline (never in practice) sends at once.
                    let at = now.checked_add(self.grace).unwrap_or(now);
                    self.due.push_back((at, subject));
                }
                self.superseded += merge::enqueue(held, d) as u64;
                None
            }
            Intent::Settles(subject) => {
                let mut held = self.held.remove(subject).unwrap_or_default();
                self.superseded += merge::enqueue(&mut held, d) as u64;
                // Everything held was the subject's waiting: only `d` is left.
                held.pop_back()
            }
            Intent::Waiting(_) | Intent::Immediate => Some(d),
        }
    }

    /// Held calls whose grace has passed, in the order they were offered per
    /// subject.
    pub fn take_due(&mut self, now: Instant) -> Vec<Dispatch> {
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

    /// When the next held call is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.due.front().map(|(at, _)| *at)
    }

    /// Calls dropped or folded into a newer one so far.
    pub fn superseded(&self) -> u64 {
        self.superseded
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::ApiCall;
    use crate::dispatch::merge::tests::{bind, condition, event, group, message, pod, status};

    #[test]
    fn a_subject_settled_within_the_grace_never_gets_its_waiting_messages() {
        let t0 = Instant::now();
        let mut h = Holds::new(Duration::from_secs(1));
        assert!(h.offer(condition("a", "1/2"), t0).is_none());
        assert!(
            h.offer(
                event("a", "GangWaiting", "w", Intent::Waiting(pod("a"))),
                t0
            )
            .is_none()
        );
        assert!(
            h.offer(event("a", "Scheduled", "s", Intent::Immediate), t0)
                .is_some()
        );
        let sent = h.offer(bind("a"), t0);
        assert!(matches!(
            sent,
            Some(Dispatch {
                call: ApiCall::Bind { .. },
                ..
            })
        ));
        assert!(h.held.is_empty());
        assert!(h.take_due(t0 + Duration::from_secs(2)).is_empty());
        assert!(
            h.offer(status(serde_json::json!({"phase": "Pending"}), false), t0)
                .is_none()
        );
        assert!(
            h.offer(status(serde_json::json!({"phase": "Scheduled"}), true), t0)
                .is_some()
        );
        assert!(h.held.is_empty());
        let _ = group();
    }

    #[test]
    fn a_subject_that_keeps_waiting_gets_its_latest_message_one_grace_late() {
        let t0 = Instant::now();
        let grace = Duration::from_secs(1);
        let mut h = Holds::new(grace);
        h.offer(condition("a", "a 1/3"), t0);
        h.offer(condition("b", "b 1/3"), t0 + Duration::from_millis(100));
        h.offer(condition("a", "a 2/3"), t0 + Duration::from_millis(500));
        assert_eq!(h.next_due(), Some(t0 + grace));
        assert!(h.take_due(t0 + Duration::from_millis(999)).is_empty());
        let due = h.take_due(t0 + grace);
        assert_eq!(due.iter().map(message).collect::<Vec<_>>(), ["a 2/3"]);
        assert_eq!(h.held.len(), 1);
        assert_eq!(h.take_due(t0 + Duration::from_millis(1100)).len(), 1);
        assert!(h.next_due().is_none());
        assert_eq!(h.superseded(), 1);
    }

    #[test]
    fn newer_waiting_messages_replace_held_ones() {
        let t0 = Instant::now();
        let mut h = Holds::new(Duration::from_secs(1));
        for n in 1..=500 {
            h.offer(condition("a", &format!("{n}/1000")), t0);
        }
        let waiting = || Intent::Waiting(pod("a"));
        h.offer(event("a", "GangWaiting", "1/1000 reserved", waiting()), t0);
        h.offer(event("a", "GangWaiting", "7/1000 reserved", waiting()), t0);
        let due = h.take_due(t0 + Duration::from_secs(1));
        assert_eq!(
            due.iter().map(message).collect::<Vec<_>>(),
            ["500/1000", "7/1000 reserved"]
        );
    }

    #[test]
    fn zero_grace_holds_nothing() {
        let mut h = Holds::new(Duration::ZERO);
        assert!(h.offer(condition("a", "x"), Instant::now()).is_some());
    }
}
