//! The walk from a pod's own owner reference up to its top owner, over the
//! owner objects observed so far: a pure index the engine keeps next to its
//! cache. It also remembers which pods were grouped through which owner, so
//! that when an owner appears, changes its parent or opts out, exactly the
//! pods whose walk passes through it are resolved again.

use std::collections::{HashMap, HashSet};

use super::OwnerKindSet;
use super::object::OwnerObject;
use crate::model::{DefinitionKey, GroupKey, GroupSource, PodKey};

/// Owner chains longer than this are cut (the last owner reached is taken
/// as the top): real chains have at most three steps (Pod → Job → JobSet →
/// TrainJob), and a tenant could write a cycle.
const MAX_DEPTH: usize = 8;

/// Where a pod grouped by its owner stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// An ordinary pod: its top owner opted out, or its kind is not grouped
    /// by this profile.
    Plain,
    /// A member of its top owner's gang.
    Member(GroupKey),
    /// An owner on the way up is not observed yet: the pod waits for it as
    /// pods wait for a group definition not created yet.
    Waiting(DefinitionKey),
}

/// Observed owners, their children, and the pods grouped through them.
#[derive(Debug, Default)]
pub struct OwnerIndex {
    owners: HashMap<DefinitionKey, OwnerObject>,
    /// Owner → observed owners whose controller it is.
    children: HashMap<DefinitionKey, HashSet<DefinitionKey>>,
    /// Pod → the group its own reference names (before the walk).
    pods: HashMap<PodKey, GroupKey>,
    /// The pods that name each owner directly.
    by_direct: HashMap<DefinitionKey, HashSet<PodKey>>,
}

impl OwnerIndex {
    /// The top owner of `direct` (what the pod's own reference names) and
    /// what the pod is, for a profile grouping `kinds`.
    pub fn resolve(&self, direct: &GroupKey, kinds: OwnerKindSet) -> Resolution {
        let mut key = &direct.definition;
        let mut top = None;
        for _ in 0..MAX_DEPTH {
            let Some(owner) = self.owners.get(key) else {
                return Resolution::Waiting(key.clone());
            };
            top = Some(owner);
            let Some(parent) = &owner.parent else {
                break;
            };
            match self.owners.get(parent) {
                // It runs its children one by one: this child is the top.
                Some(p) if p.sequential => break,
                _ => key = parent,
            }
        }
        let Some(top) = top else {
            return Resolution::Waiting(key.clone());
        };
        let kind_grouped = match top.def.key.source {
            GroupSource::Owner(kind) => kinds.contains(kind),
            _ => false,
        };
        if top.opted_out || !kind_grouped {
            return Resolution::Plain;
        }
        // A LeaderWorkerSet's group index names one of its gangs; a key
        // reached through parents has no such index.
        let replica = (top.def.key == direct.definition)
            .then(|| direct.replica.clone())
            .flatten();
        Resolution::Member(GroupKey {
            definition: top.def.key.clone(),
            replica,
        })
    }

    /// Records that `pod` names `direct` through its own owner reference.
    pub fn track(&mut self, pod: &PodKey, direct: &GroupKey) {
        if self.pods.get(pod) == Some(direct) {
            return;
        }
        self.forget(pod);
        self.pods.insert(pod.clone(), direct.clone());
        self.by_direct
            .entry(direct.definition.clone())
            .or_default()
            .insert(pod.clone());
    }

    /// The pod is gone or no longer grouped by owner.
    pub fn forget(&mut self, pod: &PodKey) {
        let Some(direct) = self.pods.remove(pod) else {
            return;
        };
        if let Some(set) = self.by_direct.get_mut(&direct.definition) {
            set.remove(pod);
            if set.is_empty() {
                self.by_direct.remove(&direct.definition);
            }
        }
    }

    /// The pods grouped by owner.
    pub fn tracked(&self) -> impl Iterator<Item = &PodKey> {
        self.pods.keys()
    }

    /// What the pod's own reference names, if it is grouped by owner.
    pub fn direct(&self, pod: &PodKey) -> Option<&GroupKey> {
        self.pods.get(pod)
    }

    /// An owner observed (new or changed): the pods to resolve again.
    pub fn upsert(&mut self, owner: OwnerObject) -> Vec<PodKey> {
        let key = owner.def.key.clone();
        let old_parent = self.owners.get(&key).and_then(|o| o.parent.clone());
        if old_parent != owner.parent {
            if let Some(p) = old_parent {
                self.unlink(&p, &key);
            }
            if let Some(p) = &owner.parent {
                self.children
                    .entry(p.clone())
                    .or_default()
                    .insert(key.clone());
            }
        }
        self.owners.insert(key.clone(), owner);
        self.pods_below(&key)
    }

    /// An owner deleted: the pods to resolve again (they wait for it).
    pub fn remove(&mut self, key: &DefinitionKey) -> Vec<PodKey> {
        if let Some(p) = self.owners.remove(key).and_then(|o| o.parent) {
            self.unlink(&p, key);
        }
        self.pods_below(key)
    }

    pub fn owner(&self, key: &DefinitionKey) -> Option<&OwnerObject> {
        self.owners.get(key)
    }

    fn unlink(&mut self, parent: &DefinitionKey, child: &DefinitionKey) {
        if let Some(set) = self.children.get_mut(parent) {
            set.remove(child);
            if set.is_empty() {
                self.children.remove(parent);
            }
        }
    }

    /// Pods naming `key` or an owner below it (bounded by [`MAX_DEPTH`]).
    fn pods_below(&self, key: &DefinitionKey) -> Vec<PodKey> {
        let mut seen: HashSet<&DefinitionKey> = HashSet::new();
        let mut level = vec![key];
        let mut pods = Vec::new();
        for _ in 0..=MAX_DEPTH {
            let mut next = Vec::new();
            for k in level {
                if !seen.insert(k) {
                    continue;
                }
                pods.extend(self.by_direct.get(k).into_iter().flatten().cloned());
                next.extend(self.children.get(k).into_iter().flatten());
            }
            if next.is_empty() {
                break;
            }
            level = next;
        }
        pods
    }
}
