//! Top-owner grouping in the engine: pods whose own owner names a workload
//! of the table are resolved to their top owner's gang when admitted (per
//! profile and namespace), and resolved again when an owner on their walk
//! appears, changes or goes away. Owner objects also define their gangs.

use std::sync::Arc;
use std::time::Instant;

use super::Engine;
use crate::dialects::owners::{OwnerChange, Resolution};
use crate::model::{GroupKey, GroupMembership, GroupSource, PodInfo, PodKey};

impl Engine {
    /// The pod with its owner reference resolved to its top owner's gang,
    /// or made an ordinary pod when grouping by owner does not apply to it.
    /// Other pods are returned as they are.
    pub(super) fn group_by_owner(&mut self, pod: Arc<PodInfo>) -> Arc<PodInfo> {
        let direct = match pod.group.key() {
            Some(k) if matches!(k.definition.source, GroupSource::Owner(_)) => k.clone(),
            _ => {
                self.owners.forget(&pod.key);
                return pod;
            }
        };
        self.owners.track(&pod.key, &direct);
        let group = self.owner_membership(&pod, &direct);
        if group == pod.group {
            return pod;
        }
        let mut resolved = (*pod).clone();
        resolved.group = group;
        Arc::new(resolved)
    }

    fn owner_membership(&self, pod: &PodInfo, direct: &GroupKey) -> GroupMembership {
        let grouping = self
            .owner_grouping
            .get(&pod.scheduler_name)
            .copied()
            .unwrap_or_default();
        let labels = self.cache.facts().namespace_labels(&pod.key.namespace);
        if !grouping.enabled_in(labels) {
            return GroupMembership::None;
        }
        match self.owners.resolve(direct, grouping.kinds) {
            Resolution::Plain => GroupMembership::None,
            Resolution::Member(group) => GroupMembership::Member(group),
            Resolution::Waiting(owner) => GroupMembership::Member(GroupKey::new(owner)),
        }
    }

    /// An owner object observed or deleted: its gang definition follows it,
    /// and the pods whose walk passes through it are resolved again.
    pub(super) fn on_owner_changed(&mut self, change: OwnerChange, now: Instant) {
        let pods = match change {
            OwnerChange::Upserted(owner) => {
                let def = owner.def.clone();
                let pods = self.owners.upsert(owner);
                self.on_def_observed(def, now);
                pods
            }
            OwnerChange::Deleted(key) => {
                let pods = self.owners.remove(&key);
                self.capped_timeouts.remove(&key);
                self.on_def_deleted(&key, now);
                pods
            }
        };
        self.regroup(pods, now);
    }

    /// Namespace labels changed: its pods grouped by owner are resolved again.
    pub(super) fn regroup_namespace(&mut self, namespace: &str, now: Instant) {
        let pods: Vec<PodKey> = self
            .owners
            .tracked()
            .filter(|k| &*k.namespace == namespace)
            .cloned()
            .collect();
        self.regroup(pods, now);
    }

    /// Re-admits the pods whose resolved group changed.
    fn regroup(&mut self, pods: Vec<PodKey>, now: Instant) {
        for key in pods {
            let (Some(cached), Some(direct)) = (self.cache.pod(&key), self.owners.direct(&key))
            else {
                continue;
            };
            if self.gang_disabled.contains(&cached.info.scheduler_name) {
                continue;
            }
            let group = self.owner_membership(&cached.info, direct);
            if group == cached.info.group {
                continue;
            }
            let mut pod = (*cached.info).clone();
            pod.group = GroupMembership::Member(direct.clone());
            let old = cached.info.group.key().cloned();
            self.on_pod_upserted(Arc::new(pod), now);
            if let Some(old) = old {
                self.group_changed(&old);
            }
        }
    }
}
