//! The scheduling loop: one task that owns the engine and is the only place
//! scheduling state changes. Informer events, binding outcomes, timers,
//! leadership and shutdown arrive as messages; API writes leave through the
//! writer without being awaited.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

use super::deferred::{Class, Deferred};
use super::translate::Directory;
use crate::dialects::{KueueGroups, Synthesized};
use crate::engine::{ClusterEvent, Engine, Sample, Stats};
use crate::kube::informers::{Observed, informer_names};
use crate::kube::writer::{BindOutcome, EventTarget, Write, Writer};
use crate::metrics::Metrics;
use crate::model::PodKey;
use crate::server::Health;

/// Cycles run before the loop looks at its inbox again, so a long backlog of
/// pods never delays informer events (and thus deletions) for long.
const CYCLES_PER_TURN: usize = 256;
/// Informer events applied per turn before scheduling resumes.
const EVENTS_PER_TURN: usize = 4096;
/// How often gauges and the debug page are refreshed.
const PUBLISH_EVERY: Duration = Duration::from_secs(1);

pub struct SchedulerLoop {
    pub engine: Engine,
    pub writer: Writer,
    pub metrics: Arc<Metrics>,
    pub health: Arc<Health>,
    pub debug: Arc<RwLock<Arc<String>>>,
    pub observed: mpsc::Receiver<Observed>,
    pub bind_outcomes: mpsc::UnboundedReceiver<BindOutcome>,
    pub leading: watch::Receiver<bool>,
    pub shutdown: watch::Receiver<bool>,
    /// Scheduler names served (for reporting unreadable pods that are ours).
    pub served: HashSet<String>,
    /// Profiles whose GangScheduling plugin is disabled: their pods are ordinary pods.
    pub gang_disabled: HashSet<String>,
    /// Transient pod status writes waiting out their grace.
    pub deferred: Deferred,
}

/// Per-loop bookkeeping that is not scheduling state.
#[derive(Default)]
struct LoopState {
    directory: Directory,
    /// Kueue group definitions, synthesized from their member pods.
    kueue: KueueGroups,
    pending_sync: HashSet<&'static str>,
    /// When each pending pod of ours was first seen (for the SLI histogram).
    first_seen: HashMap<PodKey, Instant>,
    /// Unreadable pods already reported, with the error reported.
    reported_invalid: HashMap<PodKey, String>,
    last_stats: Stats,
    was_leading: bool,
}

impl SchedulerLoop {
    /// Runs until shutdown (Ok) or until leadership is lost or the informers
    /// stop (Err: the process should exit and be restarted, as kube-scheduler does).
    pub async fn run(mut self) -> Result<()> {
        let mut st = LoopState {
            pending_sync: informer_names().into_iter().collect(),
            ..LoopState::default()
        };
        let mut publish = tokio::time::interval(PUBLISH_EVERY);
        publish.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            self.health.beat();
            let deadline = self
                .engine
                .next_deadline()
                .into_iter()
                .chain(self.deferred.next_due())
                .min()
                .map(tokio::time::Instant::from_std);
            let sleep = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                _ = self.shutdown.changed() => {
                    info!("scheduling loop stopping");
                    return Ok(());
                }
                _ = self.leading.changed() => {}
                obs = self.observed.recv() => match obs {
                    Some(o) => {
                        self.observe(&mut st, o);
                        for _ in 0..EVENTS_PER_TURN {
                            match self.observed.try_recv() {
                                Ok(o) => self.observe(&mut st, o),
                                Err(_) => break,
                            }
                        }
                    }
                    None => bail!("informers stopped"),
                },
                Some(outcome) = self.bind_outcomes.recv() => {
                    let result = outcome.result.clone();
                    match &result {
                        Err(e) => warn!(pod = %outcome.pod, node = %outcome.node, error = %e, "binding failed; the pod will be retried"),
                        Ok(()) => self.submit(Directory::scheduled_event(&outcome)),
                    }
                    self.engine.on_event(ClusterEvent::BindFinished { pod: outcome.pod, uid: Arc::from(outcome.uid.as_str()), result }, Instant::now());
                }
                _ = sleep => {}
                _ = publish.tick() => self.publish(&mut st),
            }

            let leading = *self.leading.borrow();
            if st.was_leading && !leading {
                bail!("leader election lost: stopping so that a single replica schedules");
            }
            if leading && !st.was_leading {
                info!("leading: scheduling starts once caches are synced");
            }
            st.was_leading = leading;

            let now = Instant::now();
            if self.engine.next_deadline().is_some_and(|d| d <= now) {
                self.engine.tick(now);
            }
            if leading && st.pending_sync.is_empty() {
                self.schedule_some(now);
            }
            self.flush_actions(&mut st, leading);
        }
    }

    /// Definitions naming a PriorityClass that changed get its new value.
    fn redefine_by_classes(&mut self, st: &mut LoopState, now: Instant) {
        for def in st.directory.redefined_by_classes() {
            self.engine
                .on_event(ClusterEvent::GroupDefUpserted(def), now);
        }
    }

    fn observe(&mut self, st: &mut LoopState, o: Observed) {
        let now = Instant::now();
        // Definitions synthesized from pods (Kueue) are applied before the pod
        // event, so a member never waits for a definition it brings itself.
        let mut synthesized = Vec::new();
        let event = match o {
            Observed::NodeUpserted(n) => ClusterEvent::NodeUpserted(n),
            Observed::NodeDeleted(name) => ClusterEvent::NodeDeleted(Arc::from(name.as_str())),
            Observed::PodUpserted(p) => {
                st.reported_invalid.remove(&p.key);
                let mut p = st.directory.resolve_priority(p);
                if p.group.key().is_some() && self.gang_disabled.contains(&*p.scheduler_name) {
                    let mut plain = (*p).clone();
                    plain.group = crate::model::GroupMembership::None;
                    p = Arc::new(plain);
                }
                if p.node_name.is_none() && self.served.contains(&*p.scheduler_name) {
                    st.first_seen.entry(p.key.clone()).or_insert(now);
                } else {
                    st.first_seen.remove(&p.key);
                }
                synthesized = st.kueue.observe(&p);
                ClusterEvent::PodUpserted(p)
            }
            Observed::PodDeleted(key) => {
                synthesized = st.kueue.forget(&key);
                st.first_seen.remove(&key);
                st.reported_invalid.remove(&key);
                ClusterEvent::PodDeleted(key)
            }
            Observed::PodInvalid {
                key,
                uid,
                scheduler_name,
                error,
            } => {
                synthesized = st.kueue.forget(&key);
                self.report_invalid_pod(st, key.clone(), uid, scheduler_name, error);
                // Whatever it was before, it can no longer be scheduled as it stands.
                ClusterEvent::PodDeleted(key)
            }
            Observed::GroupDefUpserted(def) => {
                ClusterEvent::GroupDefUpserted(st.directory.resolve_def_priority(def))
            }
            Observed::GroupDefDeleted(key) => {
                st.directory.forget_group_status(&key);
                ClusterEvent::GroupDefDeleted(key)
            }
            Observed::GroupDefInvalid { object, error } => {
                warn!(%object, %error, "ignoring unreadable group definition");
                return;
            }
            Observed::PriorityClassUpserted {
                name,
                value,
                global_default,
            } => {
                st.directory.set_priority_class(name, value, global_default);
                self.redefine_by_classes(st, now);
                return;
            }
            Observed::PriorityClassDeleted(name) => {
                st.directory.remove_priority_class(&name);
                self.redefine_by_classes(st, now);
                return;
            }
            Observed::DefinitionServed { informer, version } => {
                match version {
                    Some(v) => st.directory.served_versions.insert(informer, v),
                    None => st.directory.served_versions.remove(informer),
                };
                return;
            }
            Observed::Synced(name) => {
                if st.pending_sync.remove(name) && st.pending_sync.is_empty() {
                    info!("informer caches synced");
                    self.health.synced.store(true, Ordering::Relaxed);
                }
                return;
            }
        };
        for change in synthesized {
            let def_event = match change {
                Synthesized::Upserted(def) => ClusterEvent::GroupDefUpserted(*def),
                Synthesized::Deleted(key) => ClusterEvent::GroupDefDeleted(key),
            };
            self.engine.on_event(def_event, now);
        }
        self.engine.on_event(event, now);
    }

    /// A pod of ours whose spec cannot be read: say so on the pod, once per error.
    fn report_invalid_pod(
        &mut self,
        st: &mut LoopState,
        key: PodKey,
        uid: String,
        scheduler: Option<String>,
        error: String,
    ) {
        let ours = scheduler
            .as_deref()
            .is_some_and(|s| self.served.contains(s));
        if !ours || st.reported_invalid.get(&key) == Some(&error) || !*self.leading.borrow() {
            return;
        }
        warn!(pod = %key, %error, "pod cannot be scheduled: invalid spec");
        st.reported_invalid.insert(key.clone(), error.clone());
        let message = format!("invalid pod spec: {error}");
        self.writer.submit(Write::PodCondition {
            pod: key.clone(),
            status: false,
            reason: "SchedulerError".into(),
            message: message.clone(),
        });
        self.writer.submit(Write::Event {
            target: EventTarget {
                api_version: "v1".into(),
                kind: "Pod".into(),
                namespace: key.namespace.to_string(),
                name: key.name.to_string(),
                uid: (!uid.is_empty()).then_some(uid),
            },
            warning: true,
            reason: "FailedScheduling".into(),
            message,
        });
    }

    fn schedule_some(&mut self, now: Instant) {
        for _ in 0..CYCLES_PER_TURN {
            let before = self.engine.attempt_counts();
            let started = Instant::now();
            if !self.engine.schedule_one(now) {
                break;
            }
            let after = self.engine.attempt_counts();
            let result = if after.scheduled > before.scheduled {
                "scheduled"
            } else if after.unschedulable > before.unschedulable {
                "unschedulable"
            } else {
                "error"
            };
            let elapsed = started.elapsed().as_secs_f64();
            self.metrics
                .schedule_attempts
                .with_label_values(&[result, "all"])
                .inc();
            self.metrics
                .attempt_duration
                .with_label_values(&[result, "all"])
                .observe(elapsed);
        }
    }

    fn flush_actions(&mut self, st: &mut LoopState, leading: bool) {
        let actions = self.engine.drain_actions();
        for sample in self.engine.drain_samples() {
            match sample {
                Sample::PermitWait(d) => self.metrics.gang_permit_wait.observe(d.as_secs_f64()),
                Sample::GangReleased => self.metrics.gang_scheduled.inc(),
                Sample::QuorumToAllBound(d) => {
                    self.metrics.gang_quorum_to_bound.observe(d.as_secs_f64())
                }
            }
        }
        if !leading {
            // A standby computes the same messages as the leader; only the leader writes.
            return;
        }
        let now = Instant::now();
        for action in actions {
            if let crate::engine::Action::Bind { pod, .. } = &action {
                // Attempts are counted per pop, so this includes the successful one.
                let attempts = self.engine.queue().attempts(pod).max(1);
                self.metrics
                    .pod_scheduling_attempts
                    .observe(f64::from(attempts));
                if let Some(first) = st.first_seen.remove(pod) {
                    let label = if attempts >= 16 {
                        "16+".to_string()
                    } else {
                        attempts.to_string()
                    };
                    self.metrics
                        .pod_scheduling_sli_duration
                        .with_label_values(&[label.as_str()])
                        .observe((now - first).as_secs_f64());
                }
            }
            let class = Class::of(&action);
            let cache = self.engine.cache();
            let pod_uid = |key: &PodKey| cache.pod(key).map(|p| p.info.uid.clone());
            match st.directory.to_write(action, &pod_uid) {
                Some(w) => {
                    if let Some(w) = self.deferred.offer(class, w, now) {
                        self.submit(w);
                    }
                }
                None => debug!("action has no API form for this dialect"),
            }
        }
        // After this turn's actions: a binding above drops its pod's held writes.
        for w in self.deferred.take_due(now) {
            self.submit(w);
        }
    }

    fn submit(&self, w: Write) {
        if !self.writer.submit(w) {
            warn!("API writer has stopped; dropping write");
        }
    }

    fn publish(&mut self, st: &mut LoopState) {
        let now = Instant::now();
        let s = self.engine.stats(now);
        let m = &self.metrics;
        for (queue, n) in [
            ("gated", s.pending.gated),
            ("active", s.pending.active),
            ("backoff", s.pending.backoff),
            ("unschedulable", s.pending.unschedulable),
            ("waiting_at_permit", s.pending.waiting_at_permit),
            ("binding", s.pending.binding),
        ] {
            m.pending_pods.with_label_values(&[queue]).set(n as i64);
        }
        m.gang_groups
            .with_label_values(&["waiting"])
            .set(s.groups.waiting as i64);
        m.gang_groups
            .with_label_values(&["backing_off"])
            .set(s.groups.denied as i64);
        m.gang_groups
            .with_label_values(&["scheduled"])
            .set(s.groups.scheduled as i64);
        let cache = self.engine.cache();
        m.cache_size
            .with_label_values(&["nodes"])
            .set(cache.nodes().len() as i64);
        m.cache_size
            .with_label_values(&["pods"])
            .set(cache.pods().count() as i64);
        m.gang_timeouts
            .inc_by(s.gang_timeouts.saturating_sub(st.last_stats.gang_timeouts));
        m.gang_early_releases.inc_by(
            s.gang_early_releases
                .saturating_sub(st.last_stats.gang_early_releases),
        );
        *self.debug.write().unwrap_or_else(|p| p.into_inner()) =
            Arc::new(self.engine.debug_text(now));
        st.last_stats = s;
    }
}
