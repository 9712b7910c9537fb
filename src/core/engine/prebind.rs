//! PreBind: VolumeBinding's stage between Permit and Bind.
//!
//! A pod allowed at Permit whose claims are not all Bound gets its claim
//! writes (`Action::PreBindVolumes`: select the node for the provisioner, or
//! bind a static volume) and waits here — holding its reservation — until the
//! informers show every claim Bound; then its binding is emitted. A failed
//! write, a claim that disappears, or `bindTimeoutSeconds` passing gives the
//! reservation back and requeues the pod with kube-scheduler's message. The
//! loop never blocks: the daemon performs the writes and reports with
//! `ClusterEvent::VolumesPreBound`, and the claims' progress arrives as
//! `ClusterEvent::Volume` events.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use super::{Engine, EventType};
use crate::cache::VolumeChange;
use crate::framework::QueueingEvent;
use crate::model::volumes::ClaimKey;
use crate::model::{PodInfo, PodKey};
use crate::plugins::volume_binding::{PreBindPlan, plan_pre_bind};
use crate::queue::Requeue;

/// `PodScheduled=False` reason of a pod whose PreBind failed (kube-scheduler
/// reports PreBind failures as scheduler errors).
pub const PRE_BIND_FAILED: crate::framework::PendingReason =
    crate::framework::PendingReason::SchedulerError;

/// A pod waiting for its claims to be bound.
#[derive(Debug, Clone)]
pub(super) struct PreBinding {
    uid: Arc<str>,
    node: Arc<str>,
    wait_for: Vec<ClaimKey>,
    /// Static volumes chosen for its claims (not offered to other pods
    /// until the binding is observed).
    volumes: Vec<Arc<str>>,
    deadline: Instant,
}

/// Every pod in PreBind.
#[derive(Debug, Default)]
pub(super) struct PreBindings(HashMap<PodKey, PreBinding>);

impl PreBindings {
    pub fn contains(&self, key: &PodKey) -> bool {
        self.0.contains_key(key)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        self.0.values().map(|p| p.deadline).min()
    }

    fn taken_volumes(&self) -> HashSet<Arc<str>> {
        self.0
            .values()
            .flat_map(|p| p.volumes.iter().cloned())
            .collect()
    }

    pub fn remove(&mut self, key: &PodKey) -> bool {
        self.0.remove(key).is_some()
    }
}

/// `running PreBind plugin "VolumeBinding": ...`, kube-scheduler's wording.
fn failure(detail: &str) -> String {
    format!("running PreBind plugin \"VolumeBinding\": binding volumes: {detail}")
}

impl Engine {
    /// The pod passed Permit: bind it, or start its PreBind when its
    /// profile binds volumes and some claim is not yet Bound.
    pub(super) fn bind_or_pre_bind(&mut self, pod: &PodInfo, node: Arc<str>, now: Instant) {
        let timeout = self
            .profiles
            .get(&pod.scheduler_name)
            .and_then(|p| p.framework.volume_bind_timeout);
        let Some(timeout) = timeout.filter(|_| !pod.constraints.volumes.is_empty()) else {
            return self.bind_now(pod, node, now);
        };
        let Some(state) = self.cache.node(&node) else {
            // The node went away; `on_node_deleted` requeues its pods.
            return;
        };
        let taken = self.pre_binding.taken_volumes();
        match plan_pre_bind(pod, state, &self.cache.facts().volumes, &taken) {
            Ok(None) => self.bind_now(pod, node, now),
            Ok(Some(PreBindPlan { writes, wait_for })) => {
                if writes.is_empty() && wait_for.is_empty() {
                    return self.bind_now(pod, node, now);
                }
                let volumes = writes
                    .iter()
                    .filter_map(|w| match w {
                        crate::model::volumes::ClaimWrite::BindVolume { volume, .. } => {
                            Some(volume.clone())
                        }
                        _ => None,
                    })
                    .collect();
                self.pre_binding.0.insert(
                    pod.key.clone(),
                    PreBinding {
                        uid: pod.uid.clone(),
                        node: node.clone(),
                        wait_for,
                        volumes,
                        // bindTimeoutSeconds is at most a day: the sum fits.
                        deadline: now.checked_add(timeout).unwrap_or(now),
                    },
                );
                if !writes.is_empty() {
                    self.outbox
                        .pre_bind_volumes(pod.key.clone(), pod.uid.clone(), node, writes);
                }
                // Claims may be Bound already (a static volume pre-bound by name).
                self.check_pre_bindings(now);
            }
            Err(reason) => self.fail_pre_bind(&pod.key, &failure(&reason), now),
        }
    }

    /// A storage object changed: update the facts; pods parked as
    /// unschedulable may fit now, and pods in PreBind may be done.
    pub(super) fn on_volume_change(&mut self, change: VolumeChange, now: Instant) {
        if !Arc::make_mut(&mut self.cache.facts_mut().volumes).apply(change) {
            return;
        }
        self.flush_unschedulable(QueueingEvent::Storage, now);
        self.check_pre_bindings(now);
    }

    /// The daemon's report on an `Action::PreBindVolumes`.
    pub(super) fn on_volumes_pre_bound(
        &mut self,
        key: &PodKey,
        uid: &Arc<str>,
        result: Result<(), String>,
        now: Instant,
    ) {
        let ours = self.pre_binding.0.get(key).is_some_and(|p| p.uid == *uid);
        if !ours {
            return;
        }
        match result {
            Ok(()) => self.check_pre_bindings(now),
            Err(msg) => self.fail_pre_bind(key, &failure(&msg), now),
        }
    }

    /// Binds the pods whose claims are all Bound; fails those whose claim
    /// vanished.
    fn check_pre_bindings(&mut self, now: Instant) {
        let volumes = &self.cache.facts().volumes;
        let mut done = Vec::new();
        let mut failed = Vec::new();
        for (key, p) in &self.pre_binding.0 {
            let mut all_bound = true;
            for c in &p.wait_for {
                match volumes.claim(&c.namespace, &c.name) {
                    None => {
                        failed.push((
                            key.clone(),
                            format!("persistentvolumeclaim {:?} not found", &*c.name),
                        ));
                        all_bound = false;
                        break;
                    }
                    Some(claim) if !claim.bound => all_bound = false,
                    Some(claim) => {
                        // Bound, possibly to a volume provisioned for an
                        // earlier attempt on another node: it must serve this one.
                        let pv = claim.volume_name.as_deref().and_then(|v| volumes.volume(v));
                        let node = self.cache.node(&p.node);
                        if let (Some(pv), Some(node)) = (pv, node)
                            && !pv.reachable_from(&node.info.name, &node.info.labels)
                        {
                            let why = format!(
                                "pv {:?} node affinity doesn't match node {:?}",
                                &*pv.name, &*p.node
                            );
                            failed.push((key.clone(), why));
                            all_bound = false;
                            break;
                        }
                    }
                }
            }
            if all_bound {
                done.push((key.clone(), p.uid.clone(), p.node.clone()));
            }
        }
        for (key, msg) in failed {
            self.fail_pre_bind(&key, &failure(&msg), now);
        }
        for (key, uid, node) in done {
            self.pre_binding.remove(&key);
            match self.cache.pod(&key).map(|p| p.info.clone()) {
                Some(pod) if pod.uid == uid => self.bind_now(&pod, node, now),
                _ => {}
            }
        }
    }

    /// Binds the pod, DynamicResources' claim writes first; a claim that
    /// can no longer be written fails the PreBind.
    fn bind_now(&mut self, pod: &PodInfo, node: Arc<str>, now: Instant) {
        if let Err(msg) = self.bind_with_claims(pod, node) {
            let message = format!("running PreBind plugin \"DynamicResources\": {msg}");
            self.fail_pre_bind(&pod.key, &message, now);
        }
    }

    /// Pods whose PreBind outlived `bindTimeoutSeconds`.
    pub(super) fn expire_pre_bindings(&mut self, now: Instant) {
        let expired: Vec<PodKey> = self
            .pre_binding
            .0
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for key in expired {
            self.fail_pre_bind(&key, &failure("context deadline exceeded"), now);
        }
    }

    /// Gives the reservation back and requeues the pod, telling it why.
    fn fail_pre_bind(&mut self, key: &PodKey, message: &str, now: Instant) {
        self.pre_binding.remove(key);
        if self.cache.is_assumed(key) {
            self.cache.forget(key);
            if let Some(pod) = self.cache.pod(key).map(|p| p.info.clone()) {
                self.gang.unreserve(&pod);
            }
        }
        self.gang.forget_released(key);
        self.outbox.pod_condition(key, PRE_BIND_FAILED, message);
        self.outbox.event(
            self.pod_ref(key),
            EventType::Warning,
            "FailedScheduling",
            message.to_string(),
        );
        self.requeue_from_cache(key, Requeue::Backoff, now);
        self.flush_unschedulable(QueueingEvent::PodRemoved, now);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::super::{Action, ClusterEvent, Engine, EngineConfig, PodLocation, ProfileConfig};
    use super::*;
    use crate::driver::fixtures::{SCHEDULER, arc, node, pod};
    use crate::framework::Framework;
    use crate::model::volumes::{
        Claim, ClaimWire, ClaimWrite, PersistentVolume, PodVolume, PvWire, StorageClass,
        StorageClassWire,
    };

    fn engine() -> Engine {
        Engine::new(EngineConfig::new(vec![ProfileConfig::new(
            SCHEDULER,
            Framework::default(),
        )]))
    }

    fn claim(name: &str, spec: serde_json::Value, phase: &str) -> ClusterEvent {
        let w: ClaimWire = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
            "spec": spec, "status": {"phase": phase}}))
        .unwrap();
        ClusterEvent::Volume(VolumeChange::ClaimUpserted(Arc::new(
            Claim::from_wire(&w).unwrap(),
        )))
    }

    fn class_wffc() -> ClusterEvent {
        let w: StorageClassWire = serde_json::from_value(json!({"metadata": {"name": "local"},
            "provisioner": "csi.example.com", "volumeBindingMode": "WaitForFirstConsumer"}))
        .unwrap();
        ClusterEvent::Volume(VolumeChange::ClassUpserted(Arc::new(
            StorageClass::from_wire(&w).unwrap(),
        )))
    }

    fn volume_on(name: &str, host: &str) -> ClusterEvent {
        let w: PvWire = serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"storageClassName": "local", "capacity": {"storage": "1Gi"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [host]}]}]}}},
            "status": {"phase": "Bound"}}))
        .unwrap();
        ClusterEvent::Volume(VolumeChange::VolumeUpserted(Arc::new(
            PersistentVolume::from_wire(&w).unwrap(),
        )))
    }

    fn with_claim(name: &str, claim: &str) -> crate::model::PodInfo {
        let mut p = pod(name, 100, 1);
        Arc::make_mut(&mut p.constraints).volumes = vec![PodVolume::Claim {
            claim: Arc::from(claim),
            ephemeral: false,
            template_class: None,
        }];
        p
    }

    /// A pod with a WaitForFirstConsumer claim, scheduled: its PreBind
    /// writes are out and it waits in Binding.
    fn scheduled(e: &mut Engine, t0: Instant) -> crate::model::PodInfo {
        e.on_event(ClusterEvent::NodeUpserted(arc(node("n0", 4000, 8))), t0);
        e.on_event(class_wffc(), t0);
        e.on_event(
            claim("data", json!({"storageClassName": "local"}), "Pending"),
            t0,
        );
        let p = with_claim("web-0", "data");
        e.on_event(ClusterEvent::PodUpserted(arc(p.clone())), t0);
        e.run_until_idle(t0);
        let actions = e.drain_actions();
        assert!(
            !actions.iter().any(|a| matches!(a, Action::Bind { .. })),
            "{actions:?}"
        );
        let writes: Vec<&Vec<ClaimWrite>> = actions
            .iter()
            .filter_map(|a| match a {
                Action::PreBindVolumes { writes, node, .. } if &**node == "n0" => Some(writes),
                _ => None,
            })
            .collect();
        assert_eq!(
            writes,
            [&vec![ClaimWrite::SelectNode {
                claim: PodKey::new("default", "data")
            }]]
        );
        assert_eq!(e.location(&p.key), Some(PodLocation::Binding));
        assert!(e.is_pre_binding(&p.key));
        assert_eq!(e.next_deadline(), Some(t0 + Duration::from_secs(600)));
        p
    }

    #[test]
    fn the_pod_binds_once_its_claim_is_bound() {
        let mut e = engine();
        let t0 = Instant::now();
        let p = scheduled(&mut e, t0);
        let done = ClusterEvent::VolumesPreBound {
            pod: p.key.clone(),
            uid: p.uid.clone(),
            node: Arc::from("n0"),
            result: Ok(()),
        };
        e.on_event(done, t0);
        assert!(e.drain_actions().is_empty(), "still waiting for the claim");
        e.on_event(volume_on("pvc-1", "n0"), t0);
        let bound = claim(
            "data",
            json!({"storageClassName": "local", "volumeName": "pvc-1"}),
            "Bound",
        );
        e.on_event(bound, t0);
        let actions = e.drain_actions();
        assert!(
            actions
                .iter()
                .any(|a| matches!(a, Action::Bind { node, .. } if &**node == "n0")),
            "{actions:?}"
        );
        assert!(!e.is_pre_binding(&p.key));
        assert_eq!(e.next_deadline(), None);
    }

    #[test]
    fn a_claim_bound_to_a_volume_of_another_node_fails_the_pre_bind() {
        let mut e = engine();
        let t0 = Instant::now();
        let p = scheduled(&mut e, t0);
        e.on_event(volume_on("stale", "n9"), t0);
        let bound = claim(
            "data",
            json!({"storageClassName": "local", "volumeName": "stale"}),
            "Bound",
        );
        e.on_event(bound, t0);
        assert_eq!(e.location(&p.key), Some(PodLocation::Backoff));
        let actions = e.drain_actions();
        assert!(!actions.iter().any(|a| matches!(a, Action::Bind { .. })));
        assert!(
            actions
                .iter()
                .any(|a| matches!(a, Action::Event { message, .. }
                if message.ends_with("pv \"stale\" node affinity doesn't match node \"n0\""))),
            "{actions:?}"
        );
    }

    #[test]
    fn a_timeout_or_a_failed_write_requeues_the_pod_with_the_reason() {
        for fail in ["timeout", "write"] {
            let mut e = engine();
            let t0 = Instant::now();
            let p = scheduled(&mut e, t0);
            let t1 = t0 + Duration::from_secs(601);
            if fail == "timeout" {
                e.tick(t1);
            } else {
                let failed = ClusterEvent::VolumesPreBound {
                    pod: p.key.clone(),
                    uid: p.uid.clone(),
                    node: Arc::from("n0"),
                    result: Err("forbidden".into()),
                };
                e.on_event(failed, t1);
            }
            assert_eq!(e.location(&p.key), Some(PodLocation::Backoff), "{fail}");
            assert_eq!(e.cache().nodes()[0].requested.milli_cpu, 0, "{fail}");
            let expected = if fail == "timeout" {
                "context deadline exceeded"
            } else {
                "forbidden"
            };
            let actions = e.drain_actions();
            assert!(
                actions.iter().any(|a| matches!(a, Action::PodUnschedulable { reason: PRE_BIND_FAILED, message, .. }
                    if message.starts_with("running PreBind plugin \"VolumeBinding\"") && message.ends_with(expected))),
                "{fail}: {actions:?}"
            );
        }
    }

    #[test]
    fn a_missing_claim_keeps_the_pod_pending_until_it_appears() {
        let mut e = engine();
        let t0 = Instant::now();
        e.on_event(ClusterEvent::NodeUpserted(arc(node("n0", 4000, 8))), t0);
        let p = with_claim("web-0", "data");
        e.on_event(ClusterEvent::PodUpserted(arc(p.clone())), t0);
        e.run_until_idle(t0);
        assert_eq!(e.location(&p.key), Some(PodLocation::Unschedulable));
        let actions = e.drain_actions();
        assert!(
            actions
                .iter()
                .any(|a| matches!(a, Action::PodUnschedulable { message, .. }
            if message.contains("persistentvolumeclaim \"data\" not found"))),
            "{actions:?}"
        );
        // A bound claim appears: the pod is retried and binds at once.
        e.on_event(volume_on("pv0", "n0"), t0);
        e.on_event(claim("data", json!({"volumeName": "pv0"}), "Bound"), t0);
        // Out of the unschedulable pool (into backoff: it just failed).
        assert_eq!(e.location(&p.key), Some(PodLocation::Backoff));
        e.run_until_idle(t0 + Duration::from_secs(2));
        assert!(
            e.drain_actions()
                .iter()
                .any(|a| matches!(a, Action::Bind { .. }))
        );
    }
}
