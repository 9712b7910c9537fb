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
        let group = if self.cache.is_served(&pod.scheduler_name) {
            self.owners.track(&pod.key, &direct);
            self.owner_membership(&pod, &direct)
        } else {
            // Only accounted: nothing to regroup later.
            self.owners.forget(&pod.key);
            GroupMembership::None
        };
        if group == pod.group {
            return pod;
        }
        let mut resolved = (*pod).clone();
        resolved.group = group;
        Arc::new(resolved)
    }

    /// What a pod this scheduler serves is, by its owner. (Another
    /// scheduler's pods are never grouped by owner: their Job would look
    /// like a gang split across schedulers.)
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
                let pods = self.owners.upsert(*owner);
                self.on_def_observed(def, now);
                pods
            }
            OwnerChange::Deleted(key) => {
                let pods = self.owners.remove(&key);
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

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use serde_json::json;

    use super::*;
    use crate::dialects::owners::{TopOwnerGrouping, owner_source, read_owner};
    use crate::driver::fixtures::{SCHEDULER, arc, member, node};
    use crate::engine::{Action, ClusterEvent, EngineConfig, PodLocation, ProfileConfig};
    use crate::framework::placement::Framework;
    use crate::model::{DefinitionKey, OwnerKind};

    fn engine(enabled: bool) -> Engine {
        let mut profile = ProfileConfig::new(SCHEDULER, Framework::default());
        if let Some(gang) = profile.gang.as_mut() {
            gang.top_owner = TopOwnerGrouping {
                enabled,
                ..TopOwnerGrouping::default()
            };
        }
        Engine::new(EngineConfig::new(vec![profile]))
    }

    fn job_key() -> GroupKey {
        GroupKey::new(DefinitionKey::new(
            "default",
            GroupSource::Owner(OwnerKind::Job),
            "train",
        ))
    }

    fn job(parallelism: u32) -> ClusterEvent {
        let obj = json!({"metadata": {"name": "train", "namespace": "default"},
            "spec": {"parallelism": parallelism}});
        let owner = read_owner(owner_source(OwnerKind::Job).unwrap(), &obj).unwrap();
        ClusterEvent::Owner(OwnerChange::Upserted(Box::new(owner)))
    }

    fn binds(actions: &[Action]) -> usize {
        actions
            .iter()
            .filter(|a| matches!(a, Action::Bind { .. }))
            .count()
    }

    fn add_pods(e: &mut Engine, n: usize, now: Instant) -> Vec<PodKey> {
        (0..n)
            .map(|i| {
                let p = member(&format!("train-{i}"), &job_key(), 1000, 1);
                let key = p.key.clone();
                e.on_event(ClusterEvent::PodUpserted(arc(p)), now);
                key
            })
            .collect()
    }

    #[test]
    fn a_job_is_one_gang_once_observed() {
        let mut e = engine(true);
        let t0 = Instant::now();
        e.on_event(ClusterEvent::NodeUpserted(arc(node("n0", 3000, 8))), t0);
        let pods = add_pods(&mut e, 4, t0);
        // The Job is not observed yet: its pods wait for it.
        assert_eq!(e.location(&pods[0]), Some(PodLocation::Gated));
        e.on_event(job(4), t0);
        e.run_until_idle(t0);
        assert_eq!(
            binds(&e.drain_actions()),
            0,
            "room for 3 of 4: nothing binds"
        );
        e.on_event(ClusterEvent::NodeUpserted(arc(node("n1", 3000, 8))), t0);
        let later = t0 + std::time::Duration::from_secs(30);
        e.tick(later);
        e.run_until_idle(later);
        assert_eq!(
            binds(&e.drain_actions()),
            4,
            "room for 4: all bind together"
        );
    }

    #[test]
    fn scaling_the_job_down_releases_the_gang() {
        let mut e = engine(true);
        let t0 = Instant::now();
        e.on_event(ClusterEvent::NodeUpserted(arc(node("n0", 8000, 8))), t0);
        e.on_event(job(4), t0);
        let pods = add_pods(&mut e, 2, t0);
        e.run_until_idle(t0);
        assert_eq!(binds(&e.drain_actions()), 0);
        assert_eq!(e.location(&pods[0]), Some(PodLocation::Gated));
        e.on_event(job(2), t0);
        e.run_until_idle(t0);
        assert_eq!(binds(&e.drain_actions()), 2, "minCount follows the Job");
    }

    #[test]
    fn without_opt_in_owner_pods_are_plain() {
        let mut e = engine(false);
        let t0 = Instant::now();
        e.on_event(ClusterEvent::NodeUpserted(arc(node("n0", 3000, 8))), t0);
        add_pods(&mut e, 2, t0);
        e.run_until_idle(t0);
        assert_eq!(binds(&e.drain_actions()), 2);
        // A namespace label turns it on for later pods.
        let labels = crate::cache::Labels::from([(
            crate::dialects::owners::NAMESPACE_LABEL.to_string(),
            "true".to_string(),
        )]);
        e.on_event(
            ClusterEvent::NamespaceUpserted {
                name: "default".into(),
                labels,
            },
            t0,
        );
        let p = member("train-9", &job_key(), 100, 1);
        let key = p.key.clone();
        e.on_event(ClusterEvent::PodUpserted(arc(p)), t0);
        assert_eq!(e.location(&key), Some(PodLocation::Gated));
    }
}
