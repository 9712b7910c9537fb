//! The vocabulary of the extension points around placement (PreEnqueue,
//! QueueSort, a cache-aware PreFilter, PostFilter, Unreserve, Permit), which
//! the gang plugin implements and the engine drives: refusals, verdicts, and
//! the pods waiting at Permit.
//!
//! Shaped for a single-threaded owner rather than copied from kube-scheduler:
//! the plugin owns its `WaitingPods` and allows or rejects pods parked there;
//! it never touches the queue or the cache's accounting, and the engine
//! applies the verdicts it records.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use crate::framework::NodeRestriction;
use crate::model::{GroupKey, PodInfo, PodKey, PodMap};

/// Why a pod was refused during a cycle or at Permit. Becomes the pod's
/// `PodScheduled=False` condition and a Warning event with `reason`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Event reason: `FailedScheduling` for every refusal, as kube-scheduler
    /// records it; the message says what happened (timeout, early release, ...).
    pub reason: &'static str,
    pub message: String,
    /// About the pod's group as a whole (its members name different
    /// schedulers): every pending member is told, not only the one tried.
    pub group_wide: bool,
    /// The cluster events that can lift it (the rejecting plugins' queueing
    /// events); every event unless narrowed with `waking_on`.
    pub wake_on: crate::framework::EventSet,
    /// The reason of the pod's `PodScheduled=False` condition:
    /// `Unschedulable` (capacity missing) unless set with `because`.
    pub condition: crate::framework::PendingReason,
}

impl Refusal {
    pub fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Refusal {
            reason,
            message: message.into(),
            group_wide: false,
            wake_on: crate::framework::EventSet::ALL,
            condition: crate::framework::PendingReason::Unschedulable,
        }
    }

    /// The refusal is not about capacity: the pod's condition names `why`.
    pub fn because(mut self, why: crate::framework::PendingReason) -> Self {
        self.condition = why;
        self
    }

    /// A refusal every pending member of the group shares.
    pub fn group_wide(reason: &'static str, message: impl Into<String>) -> Self {
        Refusal {
            group_wide: true,
            ..Refusal::new(reason, message)
        }
    }

    /// The refusal lifted only by these events.
    pub fn waking_on(mut self, events: crate::framework::EventSet) -> Self {
        self.wake_on = events;
        self
    }
}

/// What a cache-aware PreFilter decided before placement runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreFilterVerdict {
    Proceed,
    /// Place the pod on these nodes only (a gang's required topology domain).
    Restrict(NodeRestriction),
    /// Do not try this pod before the instant (not counted as an attempt).
    HoldUntil(Instant),
    /// The pod is unschedulable this cycle.
    Refuse(Refusal),
}

/// Permit's verdict for the pod in the cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermitVerdict {
    Allow,
    /// Park at Permit until a plugin allows or rejects it through `WaitingPods`.
    Wait,
    Reject(Refusal),
}

/// A pod parked at Permit, its reservation held.
#[derive(Debug, Clone)]
pub struct WaitingPod {
    pub pod: Arc<PodInfo>,
    pub node: Arc<str>,
    pub since: Instant,
}

/// What a plugin decided for a waiting pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    Rejected(Refusal),
}

/// The pods waiting at Permit. A verdict moves a pod out at once into the
/// decided list, which the engine drains and applies (bind, or unreserve and
/// requeue) before it does anything else.
#[derive(Debug, Default)]
pub struct WaitingPods {
    pods: PodMap<WaitingPod>,
    by_group: HashMap<GroupKey, BTreeSet<PodKey>>,
    decided: Vec<(WaitingPod, Verdict)>,
}

impl WaitingPods {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn insert(&mut self, w: WaitingPod) {
        if let Some(group) = w.pod.group.key() {
            self.by_group
                .entry(group.clone())
                .or_default()
                .insert(w.pod.key.clone());
        }
        self.pods.insert(w.pod.key.clone(), w);
    }

    pub fn contains(&self, key: &PodKey) -> bool {
        self.pods.contains_key(key)
    }

    pub fn get(&self, key: &PodKey) -> Option<&WaitingPod> {
        self.pods.get(key)
    }

    pub fn len(&self) -> usize {
        self.pods.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &WaitingPod> {
        self.pods.values()
    }

    /// Waiting members of `group`, in key order.
    pub fn group_members(&self, group: &GroupKey) -> Vec<PodKey> {
        self.by_group
            .get(group)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    pub fn group_len(&self, group: &GroupKey) -> usize {
        self.by_group.get(group).map_or(0, BTreeSet::len)
    }

    /// Groups with at least one waiting member.
    pub fn groups(&self) -> impl Iterator<Item = &GroupKey> {
        self.by_group.keys()
    }

    pub fn allow(&mut self, key: &PodKey) -> bool {
        self.decide(key, Verdict::Allowed)
    }

    pub fn reject(&mut self, key: &PodKey, refusal: Refusal) -> bool {
        self.decide(key, Verdict::Rejected(refusal))
    }

    /// Takes a pod out without a verdict (it was deleted, bound elsewhere, or
    /// its node disappeared); the caller deals with its reservation.
    pub fn remove(&mut self, key: &PodKey) -> Option<WaitingPod> {
        let w = self.pods.remove(key)?;
        if let Some(group) = w.pod.group.key()
            && let Some(set) = self.by_group.get_mut(group)
        {
            set.remove(key);
            if set.is_empty() {
                self.by_group.remove(group);
            }
        }
        Some(w)
    }

    /// Verdicts recorded since the last call, in the order they were made.
    pub fn take_decided(&mut self) -> Vec<(WaitingPod, Verdict)> {
        std::mem::take(&mut self.decided)
    }

    fn decide(&mut self, key: &PodKey, verdict: Verdict) -> bool {
        match self.remove(key) {
            Some(w) => {
                self.decided.push((w, verdict));
                true
            }
            None => false,
        }
    }
}
