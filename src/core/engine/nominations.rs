//! Nominations: where a preemption made room for a pod, and the room held
//! for it while its victims terminate.
//!
//! As kube-scheduler's nominator: a pod nominated to a node has its
//! requests counted there in the cycles of pods of lower or equal priority
//! (`overlay`), so the freed capacity is not taken by less important work
//! before the preemptor is retried; pods of a higher priority ignore it. A
//! nomination ends when the pod is bound, deleted, or gives it up (its
//! retry found neither room nor anything more to preempt).

use std::collections::HashMap;
use std::sync::Arc;

use crate::cache::{Cache, WhatIf};
use crate::model::{GroupKey, PodInfo, PodKey};

/// One nominated pod.
#[derive(Debug, Clone)]
pub(super) struct Nomination {
    pub pod: Arc<PodInfo>,
    pub node: Arc<str>,
}

#[derive(Debug, Default)]
pub(super) struct Nominations {
    by_pod: HashMap<PodKey, Nomination>,
}

impl Nominations {
    pub fn set(&mut self, pod: Arc<PodInfo>, node: Arc<str>) {
        self.by_pod
            .insert(pod.key.clone(), Nomination { pod, node });
    }

    /// Ends a pod's nomination; returns it when there was one.
    pub fn clear(&mut self, key: &PodKey) -> Option<Nomination> {
        self.by_pod.remove(key)
    }

    pub fn get(&self, key: &PodKey) -> Option<&Nomination> {
        self.by_pod.get(key)
    }

    pub fn len(&self) -> usize {
        self.by_pod.len()
    }

    /// Nominated pods on `node` of a priority below `priority`: a new
    /// preemption there takes their room (upstream clears them).
    pub fn lower_on(&self, node: &str, priority: i32) -> Vec<PodKey> {
        let mut keys: Vec<PodKey> = self
            .by_pod
            .values()
            .filter(|n| *n.node == *node && n.pod.priority < priority)
            .map(|n| n.pod.key.clone())
            .collect();
        keys.sort();
        keys
    }

    /// Keeps a nominated pod's latest spec (its requests may change while
    /// it waits).
    pub fn refresh(&mut self, pod: &Arc<PodInfo>) {
        if let Some(n) = self.by_pod.get_mut(&pod.key) {
            n.pod = pod.clone();
        }
    }

    /// Counts, on their nodes, the nominated pods that a cycle at
    /// `priority` must leave room for: those of at least that priority,
    /// other than the pods being placed (`own` pod and `own_group`).
    /// The caller reverts the returned edits when the cycle ends.
    pub fn overlay(
        &self,
        cache: &mut Cache,
        priority: i32,
        own: &PodKey,
        own_group: Option<&GroupKey>,
    ) -> WhatIf {
        let mut edits = WhatIf::default();
        if self.by_pod.is_empty() {
            return edits;
        }
        let mut held: Vec<&Nomination> = self
            .by_pod
            .values()
            .filter(|n| n.pod.priority >= priority && n.pod.key != *own)
            .filter(|n| own_group.is_none() || n.pod.group.key() != own_group)
            .collect();
        held.sort_by(|a, b| a.pod.key.cmp(&b.pod.key));
        for n in held {
            if let Some(i) = cache.node_index(&n.node) {
                // A pod already on a node (assumed, bound) holds its room
                // there; `what_if_add` leaves it alone.
                let _ = cache.what_if_add(&n.pod, i, &mut edits);
            }
        }
        edits
    }
}
