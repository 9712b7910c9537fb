//! The engine's preemption state, one part: nominations (where a
//! preemption made room for a pod, and the room held for it while its
//! victims terminate), the victims whose deletion was asked for, the
//! rotating start of the candidate search, and the nominated pods counted
//! for the pod in its cycle.
//!
//! As kube-scheduler's nominator: a pod nominated to a node has its
//! requests counted there in the cycles of pods of lower or equal priority
//! (`overlay`), so the freed capacity is not taken by less important work
//! before the preemptor is retried; pods of a higher priority ignore it. A
//! nomination ends when the pod is bound, deleted, or gives it up (its
//! retry found neither room nor anything more to preempt).

use std::collections::HashMap;
use std::sync::Arc;

use crate::cache::{Cache, PodChange, PodState, WhatIf};
use crate::model::{GroupKey, PodInfo, PodKey};
use crate::queue::QueueGroup;

/// A victim on its way out.
#[derive(Debug)]
struct Going {
    uid: Arc<str>,
    /// Whom it makes room for: the preemptor pod, or its gang.
    by: QueueGroup,
    /// Why the preemptor could not spare it
    /// (`VictimUnit::why_evicted`).
    why: Arc<str>,
}

/// What the engine knows of preemptions in progress.
#[derive(Debug, Default)]
pub(super) struct Preemptions {
    nominations: Nominations,
    /// Victims whose deletion was asked for, until the informer reports
    /// them gone: never chosen twice, their room counted as free.
    going: HashMap<PodKey, Going>,
    /// Rotating start of the candidate search (as upstream's random offset,
    /// but reproducible).
    offset: usize,
    /// The nominated pods counted on their nodes for the pod in its cycle;
    /// taken off when the cycle ends, or earlier by the cycle itself to
    /// check its node without them.
    held: WhatIf,
}

impl Preemptions {
    pub fn nomination(&self, key: &PodKey) -> Option<&Nomination> {
        self.nominations.get(key)
    }

    pub fn nominated_count(&self) -> usize {
        self.nominations.len()
    }

    /// Nominates `pod` to `node`, taking the nominations of lower-priority
    /// pods there (their room is now the preemptor's); returns those, and
    /// whether the pod was nominated to another node (or none) before.
    pub fn nominate(&mut self, pod: &Arc<PodInfo>, node: Arc<str>) -> (Vec<Nomination>, bool) {
        let taken = self
            .nominations
            .lower_on(&node, pod.priority)
            .iter()
            .filter_map(|other| self.nominations.clear(other))
            .collect();
        let moved = self
            .nominations
            .get(&pod.key)
            .is_none_or(|n| n.node != node);
        self.nominations.set(pod.clone(), node);
        (taken, moved)
    }

    /// Ends a pod's nomination; returns it when there was one.
    pub fn give_up(&mut self, key: &PodKey) -> Option<Nomination> {
        self.nominations.clear(key)
    }

    /// The pods nominated to `node`, whatever their priority.
    pub fn nominated_on(&self, node: &str) -> Vec<Arc<PodInfo>> {
        let mut pods: Vec<Arc<PodInfo>> = self
            .nominations
            .by_pod
            .values()
            .filter(|n| *n.node == *node)
            .map(|n| n.pod.clone())
            .collect();
        pods.sort_by(|a, b| a.key.cmp(&b.key));
        pods
    }

    /// The nodes `pod`, or the members of its group, are nominated to.
    pub fn nominated_nodes_of(&self, pod: &PodInfo) -> Vec<Arc<str>> {
        let group = pod.group.key();
        let mut nodes: Vec<Arc<str>> = self
            .nominations
            .by_pod
            .values()
            .filter(|n| n.pod.key == pod.key || (group.is_some() && n.pod.group.key() == group))
            .map(|n| n.node.clone())
            .collect();
        nodes.sort();
        nodes.dedup();
        nodes
    }

    /// A victim's deletion was asked for, for `preemptor`, and why it
    /// could not be spared.
    pub fn evicting(&mut self, victim: &PodInfo, preemptor: QueueGroup, why: Arc<str>) {
        self.going.insert(
            victim.key.clone(),
            Going {
                uid: victim.uid.clone(),
                by: preemptor,
                why,
            },
        );
    }

    /// Whether the pod's deletion was asked for.
    pub fn is_going(&self, key: &PodKey) -> bool {
        self.going.contains_key(key)
    }

    /// The victims evicted for `preemptor` and not gone yet, by key, each
    /// with why it could not be spared.
    pub fn victims_of(&self, preemptor: &QueueGroup) -> Vec<(PodKey, Arc<str>)> {
        let mut victims: Vec<(PodKey, Arc<str>)> = self
            .going
            .iter()
            .filter(|(_, g)| g.by == *preemptor)
            .map(|(k, g)| (k.clone(), g.why.clone()))
            .collect();
        victims.sort();
        victims
    }

    pub fn going_count(&self) -> usize {
        self.going.len()
    }

    /// The pod is gone: it neither holds a nomination nor is on its way out.
    pub fn forget(&mut self, key: &PodKey) {
        self.nominations.clear(key);
        self.going.remove(key);
    }

    /// Keeps nominations and the victims in flight in step with a pod
    /// update: a nominated pod that is placed (or finished) no longer holds
    /// room; a pod seen first with `status.nominatedNodeName` (nominated
    /// before this scheduler started) is held room for; a victim recreated
    /// under its name is a new pod.
    pub fn observe(&mut self, pod: &Arc<PodInfo>, change: &PodChange, served: bool) {
        if self.going.get(&pod.key).is_some_and(|g| g.uid != pod.uid) {
            self.going.remove(&pod.key);
        }
        match change.current {
            PodState::Pending if served => match &pod.nominated_node {
                Some(node) if change.previous.is_none() => {
                    self.nominations.set(pod.clone(), node.clone());
                }
                _ => self.nominations.refresh(pod),
            },
            _ => {
                self.nominations.clear(&pod.key);
            }
        }
    }

    /// Where the candidate search over `n` nodes starts.
    pub fn search_start(&self, n: usize) -> usize {
        self.offset % n.max(1)
    }

    /// The next search starts past the `visited` nodes of this one.
    pub fn searched(&mut self, start: usize, visited: usize, n: usize) {
        self.offset = start.saturating_add(visited) % n.max(1);
    }

    /// Counts on their nodes the nominated pods a cycle at `priority` must
    /// leave room for (`Nominations::overlay`), until `release`.
    pub fn hold(
        &mut self,
        cache: &mut Cache,
        priority: i32,
        own: &PodKey,
        own_group: Option<&GroupKey>,
    ) {
        self.release(cache);
        self.held = self.nominations.overlay(cache, priority, own, own_group);
    }

    /// Whether nominated pods are counted for the cycle.
    pub fn holding(&self) -> bool {
        !self.held.is_empty()
    }

    /// Takes the nominated pods counted for the cycle off their nodes.
    pub fn release(&mut self, cache: &mut Cache) {
        cache.revert(std::mem::take(&mut self.held));
    }
}

/// One nominated pod.
#[derive(Debug, Clone)]
pub(super) struct Nomination {
    pub pod: Arc<PodInfo>,
    pub node: Arc<str>,
}

#[derive(Debug, Default)]
struct Nominations {
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
