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

use super::{Engine, EventType, ObjectRef};
use crate::cache::VolumeChange;
use crate::framework::lifecycle::ReservePlugin;
use crate::model::volumes::ClaimKey;
use crate::model::{PodInfo, PodKey};
use crate::plugins::volume_binding::{PreBindPlan, plan_pre_bind};
use crate::queue::Requeue;

/// `PodScheduled=False` reason of a pod whose PreBind failed (kube-scheduler
/// reports PreBind failures as scheduler errors).
pub const PRE_BIND_FAILED: &str = "SchedulerError";

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
        let Some(timeout) = timeout.filter(|_| !pod.volumes.is_empty()) else {
            return self.outbox.bind(pod.key.clone(), pod.uid.clone(), node);
        };
        let Some(state) = self.cache.node(&node) else {
            // The node went away; `on_node_deleted` requeues its pods.
            return;
        };
        let taken = self.pre_binding.taken_volumes();
        match plan_pre_bind(pod, state, &self.cache.facts().volumes, &taken) {
            Ok(None) => self.outbox.bind(pod.key.clone(), pod.uid.clone(), node),
            Ok(Some(PreBindPlan { writes, wait_for })) => {
                if writes.is_empty() && wait_for.is_empty() {
                    return self.outbox.bind(pod.key.clone(), pod.uid.clone(), node);
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
                        deadline: now + timeout,
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
        if !self.cache.facts_mut().volumes.apply(change) {
            return;
        }
        self.flush_unschedulable(now);
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
                        failed.push((key.clone(), format!("persistentvolumeclaim {:?} not found", &*c.name)));
                        all_bound = false;
                        break;
                    }
                    Some(claim) if !claim.bound => all_bound = false,
                    Some(_) => {}
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
            self.outbox.bind(key, uid, node);
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
                self.gang.unreserve(&pod, &self.waiting, now);
            }
        }
        self.forget_released(key);
        self.outbox.pod_condition(key, PRE_BIND_FAILED, message);
        self.outbox.event(
            ObjectRef::Pod(key.clone()),
            EventType::Warning,
            "FailedScheduling",
            message.to_string(),
        );
        self.requeue_from_cache(key, Requeue::Backoff, now);
        self.flush_unschedulable(now);
    }
}
