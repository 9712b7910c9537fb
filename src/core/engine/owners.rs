//! Top-owner grouping in the engine: pods whose own owner names a workload
//! of the table are resolved to their top owner's gang when admitted (per
//! profile and namespace, by the intake part), and resolved again when an
//! owner on their walk appears, changes or goes away. Owner objects also
//! define their gangs.

use std::time::Instant;

use super::Engine;
use crate::dialects::owners::OwnerChange;
use crate::model::PodKey;

impl Engine {
    /// An owner object observed or deleted: its gang definition follows it,
    /// and the pods whose walk passes through it are resolved again.
    pub(super) fn on_owner_changed(&mut self, change: OwnerChange, now: Instant) {
        let pods = match change {
            OwnerChange::Upserted(owner) => {
                let def = owner.def.clone();
                let pods = self.intake.owner_upserted(*owner);
                self.on_def_observed(def, now);
                pods
            }
            OwnerChange::Deleted(key) => {
                let pods = self.intake.owner_removed(&key);
                self.on_def_deleted(&key, now);
                pods
            }
        };
        self.regroup(pods, now);
    }

    /// Namespace labels changed: its pods grouped by owner are resolved again.
    pub(super) fn regroup_namespace(&mut self, namespace: &str, now: Instant) {
        let pods = self.intake.owner_grouped_in(namespace);
        self.regroup(pods, now);
    }

    /// Re-admits the pods whose resolved group changed.
    fn regroup(&mut self, pods: Vec<PodKey>, now: Instant) {
        for key in pods {
            let Some(pod) = self.intake.regrouped(&key, &self.cache) else {
                continue;
            };
            let old = self
                .cache
                .pod(&key)
                .and_then(|c| c.info.group.key().cloned());
            self.on_pod_upserted(pod, now);
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
    use crate::model::{DefinitionKey, GroupKey, GroupSource, OwnerKind};

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
