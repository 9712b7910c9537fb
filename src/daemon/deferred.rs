//! Pod status writes held back for a short grace. A pod that waits only
//! briefly — a gang member gated until its last sibling is created, or
//! reserved at permit until quorum — is usually bound before the grace
//! ends, and its waiting messages are then dropped unwritten. Pods that keep
//! waiting get every message, one grace late. A burst of fast gangs thus
//! costs the API server a binding and a `Scheduled` event per pod, as with
//! kube-scheduler, instead of two or three more writes per pod for states
//! that lasted milliseconds (each also a watch event for every watcher).
//!
//! Held: `PodScheduled=False` conditions and pod events other than
//! `Scheduled`. Never held: bindings, the `Scheduled` event, group status.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use crate::kube::writer::Write;
use crate::model::PodKey;

/// Writes waiting for their grace to pass.
#[derive(Debug)]
pub struct Deferred {
    grace: Duration,
    held: HashMap<PodKey, Vec<Write>>,
    /// When each pod's writes are due, oldest first (the grace is constant,
    /// so pushing at the back keeps the queue sorted).
    due: VecDeque<(Instant, PodKey)>,
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

    /// Holds a transient pod write (`None`) or hands it back to be sent now
    /// (`Some`); a binding also drops what is held for its pod (its waiting
    /// is over).
    pub fn offer(&mut self, write: Write, now: Instant) -> Option<Write> {
        if let Write::Bind { pod, .. } = &write {
            self.held.remove(pod);
            return Some(write);
        }
        let Some(pod) = transient_pod(&write).filter(|_| !self.grace.is_zero()) else {
            return Some(write);
        };
        let entry = self.held.entry(pod.clone()).or_default();
        if entry.is_empty() {
            self.due.push_back((now + self.grace, pod));
        }
        entry.push(write);
        None
    }

    /// Writes whose grace has passed, in the order they were offered per pod.
    pub fn take_due(&mut self, now: Instant) -> Vec<Write> {
        let mut out = Vec::new();
        while let Some((at, _)) = self.due.front()
            && *at <= now
        {
            let Some((_, pod)) = self.due.pop_front() else {
                break;
            };
            out.extend(self.held.remove(&pod).unwrap_or_default());
        }
        out
    }

    /// When the next held write is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.due.front().map(|(at, _)| *at)
    }
}

/// The pod a write reports a passing state of, if it is such a write.
fn transient_pod(write: &Write) -> Option<PodKey> {
    match write {
        Write::PodCondition {
            pod, status: false, ..
        } => Some(pod.clone()),
        Write::Event { target, reason, .. } if target.kind == "Pod" && reason != "Scheduled" => {
            Some(PodKey::new(&target.namespace, &target.name))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::writer::EventTarget;

    fn condition(pod: &str, message: &str) -> Write {
        Write::PodCondition {
            pod: PodKey::new("ns", pod),
            status: false,
            reason: "SchedulingGated".into(),
            message: message.into(),
        }
    }

    fn event(pod: &str, reason: &str) -> Write {
        Write::Event {
            target: EventTarget {
                api_version: "v1".into(),
                kind: "Pod".into(),
                namespace: "ns".into(),
                name: pod.into(),
                uid: None,
            },
            warning: false,
            reason: reason.into(),
            message: String::new(),
        }
    }

    fn bind(pod: &str) -> Write {
        Write::Bind {
            pod: PodKey::new("ns", pod),
            uid: "u".into(),
            node: "n".into(),
        }
    }

    fn sent(o: Option<Write>) -> bool {
        o.is_some()
    }

    #[test]
    fn a_pod_bound_within_the_grace_never_gets_its_waiting_messages() {
        let t0 = Instant::now();
        let mut d = Deferred::new(Duration::from_secs(1));
        assert!(!sent(d.offer(condition("a", "waiting for 1/2"), t0)));
        assert!(!sent(d.offer(event("a", "GangWaiting"), t0)));
        assert!(sent(d.offer(event("a", "Scheduled"), t0)));
        assert!(sent(d.offer(bind("a"), t0)));
        assert!(d.held.is_empty());
        assert!(d.take_due(t0 + Duration::from_secs(2)).is_empty());
    }

    #[test]
    fn a_pod_that_keeps_waiting_gets_them_in_order_one_grace_late() {
        let t0 = Instant::now();
        let grace = Duration::from_secs(1);
        let mut d = Deferred::new(grace);
        d.offer(condition("a", "1/3"), t0);
        d.offer(condition("b", "1/3"), t0 + Duration::from_millis(100));
        d.offer(condition("a", "2/3"), t0 + Duration::from_millis(500));
        assert_eq!(d.next_due(), Some(t0 + grace));
        assert!(d.take_due(t0 + Duration::from_millis(999)).is_empty());
        let due = d.take_due(t0 + grace);
        let messages: Vec<&str> = due
            .iter()
            .map(|w| match w {
                Write::PodCondition { message, .. } => message.as_str(),
                _ => "",
            })
            .collect();
        assert_eq!(messages, ["1/3", "2/3"]);
        assert_eq!(d.held.len(), 1);
        assert_eq!(d.take_due(t0 + Duration::from_millis(1100)).len(), 1);
        assert!(d.next_due().is_none());
    }

    #[test]
    fn zero_grace_holds_nothing() {
        let mut d = Deferred::new(Duration::ZERO);
        assert!(sent(d.offer(condition("a", "x"), Instant::now())));
    }
}
