//! The scheduling loop: one task that owns the engine and is the only place
//! scheduling state changes. Informer events and binding outcomes go into
//! the engine as they are; timers, leadership and shutdown arrive as
//! messages; the engine's actions leave, translated, through the write
//! dispatcher without being awaited. No scheduling decision is made here.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

use super::bind_window::BindWindow;
use super::supervisor::TaskEnded;
use super::translate::Directory;
use crate::kube::fence::Fence;
use crate::kube::informers::{Observed, Signal};
use crate::kube::writer::{BindOutcome, BindStage, Writer};
use crate::metrics::Metrics;
use crate::server::Health;
use crate::server::explain::ExplainRequest;
use muster_core::dialects::owners::OwnerChange;
use muster_core::dispatch::ApiCall;
use muster_core::engine::{Action, AttemptCounts, ClusterEvent, Engine, Sample, Stats};
use muster_core::model::{PodKey, PodMap};

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
    /// `/explain` questions: answered between cycles, never behind a turn.
    pub explain: mpsc::Receiver<ExplainRequest>,
    pub observed: mpsc::Receiver<Observed>,
    /// Every informer started: scheduling waits until each has listed.
    pub informers: Vec<&'static str>,
    /// A critical task (the writer, an informer) that stopped (`supervisor`).
    pub task_ended: mpsc::UnboundedReceiver<TaskEnded>,
    pub bind_outcomes: mpsc::UnboundedReceiver<BindOutcome>,
    pub leading: watch::Receiver<bool>,
    /// Leader fencing: a leader whose renewal is too old stands down.
    pub fence: Arc<Fence>,
    pub shutdown: watch::Receiver<bool>,
    /// Scheduler names served (for the SLI: when a pending pod of ours was first seen).
    pub served: HashSet<String>,
    /// Bindings allowed to wait on the writer (`bind_window`).
    pub binds: BindWindow,
}

/// Per-loop bookkeeping that is not scheduling state.
#[derive(Default)]
struct LoopState {
    directory: Directory,
    pending_sync: HashSet<&'static str>,
    /// When each pending pod of ours was first seen (for the SLI histogram).
    first_seen: PodMap<Instant>,
    last_stats: Stats,
    was_leading: bool,
}

impl SchedulerLoop {
    /// Runs until shutdown (Ok) or until leadership is lost, the informers
    /// stop or a critical task stops (Err: the process should exit and be
    /// restarted, as kube-scheduler does). A stopped task fails readiness and
    /// liveness first.
    pub async fn run(mut self) -> Result<()> {
        let result = self.run_until_stopped().await;
        if let Err(e) = &result {
            self.health.fail(format!("{e:#}"));
        }
        result
    }

    async fn run_until_stopped(&mut self) -> Result<()> {
        let mut st = LoopState {
            pending_sync: self.informers.iter().copied().collect(),
            ..LoopState::default()
        };
        let mut publish = tokio::time::interval(PUBLISH_EVERY);
        publish.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Whether the last turn stopped at its cycle cap with pods left.
        let mut more = false;
        loop {
            self.health.beat();
            let deadline = self
                .engine
                .next_deadline()
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
                Some(req) = self.explain.recv() => self.answer(req),
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
                Some(ended) = self.task_ended.recv() => {
                    bail!("{ended}: the scheduler cannot go on without it");
                }
                Some(outcome) = self.bind_outcomes.recv() => {
                    self.bind_finished(outcome);
                    for _ in 0..EVENTS_PER_TURN {
                        match self.bind_outcomes.try_recv() {
                            Ok(o) => self.bind_finished(o),
                            Err(_) => break,
                        }
                    }
                }
                _ = sleep => {}
                _ = publish.tick() => self.publish(&mut st),
                // The last turn stopped at its cycle cap with pods left:
                // go on once nothing above is ready.
                _ = std::future::ready(()), if more => {}
            }

            let leading = *self.leading.borrow();
            if leading && !self.fence.allows(Instant::now()) {
                // Woken from a freeze (or cut off) past renewDeadline: the
                // dispatcher already drops our writes; stop so the replica
                // that holds the lease now is the only one scheduling.
                bail!("this replica's lease was not renewed within renewDeadline: standing down");
            }
            if st.was_leading && !leading {
                bail!("leader election lost: stopping so that a single replica schedules");
            }
            if leading && !st.was_leading {
                info!("leading: scheduling starts once caches are synced");
            }
            st.was_leading = leading;

            let now = Instant::now();
            // Pods' declared ends are wall-clock times (reservations).
            self.engine.set_wall_clock(now, unix_ms());
            if self.engine.next_deadline().is_some_and(|d| d <= now) {
                self.engine.tick(now);
            }
            more = leading && st.pending_sync.is_empty() && self.schedule_some(now);
            self.flush_actions(&mut st, leading)?;
        }
    }

    /// Answers one `/explain` question from the engine as it stands.
    fn answer(&self, req: ExplainRequest) {
        let answers = self.engine.explain(&req.target, Instant::now());
        // The asker may have given up; nothing to do then.
        let _ = req.reply.send(answers);
    }

    fn bind_finished(&mut self, outcome: BindOutcome) {
        if outcome.stage == BindStage::Bind {
            self.binds.finished();
        }
        let BindOutcome {
            stage,
            pod,
            uid,
            node,
            result,
            written,
        } = outcome;
        for change in written {
            self.engine
                .on_event(ClusterEvent::Dra(change), Instant::now());
        }
        if stage == BindStage::PreBindVolumes {
            if let Err(e) = &result {
                warn!(pod = %pod, node = %node, error = %e, "volume PreBind failed; the pod will be retried");
            }
            let event = ClusterEvent::VolumesPreBound {
                pod,
                uid,
                node,
                result,
            };
            return self.engine.on_event(event, Instant::now());
        }
        if let Err(e) = &result {
            warn!(pod = %pod, node = %node, error = %e, "binding failed; the pod will be retried");
        }
        let event = ClusterEvent::BindFinished {
            pod,
            uid,
            node,
            result,
        };
        self.engine.on_event(event, Instant::now());
    }

    fn observe(&mut self, st: &mut LoopState, o: Observed) {
        match o {
            Observed::Event(event) => {
                self.note(st, &event);
                self.engine.on_event(event, Instant::now());
            }
            Observed::Signal(signal) => self.signal(st, signal),
        }
    }

    /// The loop's own bookkeeping of a cluster event, before the engine
    /// applies it: the SLI's first-seen times, the status writer's directory.
    fn note(&self, st: &mut LoopState, event: &ClusterEvent) {
        match event {
            ClusterEvent::PodUpserted(p) => {
                if p.node_name.is_none() && self.served.contains(&*p.scheduler_name) {
                    st.first_seen
                        .entry(p.key.clone())
                        .or_insert_with(Instant::now);
                } else {
                    st.first_seen.remove(&p.key);
                }
            }
            ClusterEvent::PodDeleted(key) | ClusterEvent::PodInvalid { pod: key, .. } => {
                st.first_seen.remove(key);
            }
            ClusterEvent::GroupDefDeleted(key) => st.directory.forget_group_status(key),
            ClusterEvent::Owner(change) => {
                let uids = &mut st.directory.owner_uids;
                match change {
                    OwnerChange::Upserted(o) => match &o.uid {
                        Some(uid) => {
                            uids.insert(o.def.key.clone(), uid.clone());
                        }
                        None => {
                            uids.remove(&o.def.key);
                        }
                    },
                    OwnerChange::Deleted(key) => {
                        st.directory.forget_group_status(key);
                        st.directory.owner_uids.remove(key);
                    }
                }
            }
            _ => {}
        }
    }

    fn signal(&self, st: &mut LoopState, signal: Signal) {
        match signal {
            Signal::GroupDefInvalid { object, error } => {
                warn!(%object, %error, "ignoring unreadable group definition");
            }
            Signal::DefinitionServed { informer, version } => {
                match version {
                    Some(v) => st.directory.served_versions.insert(informer, v),
                    None => st.directory.served_versions.remove(informer),
                };
            }
            Signal::WatchFailed(name) => {
                self.metrics
                    .informer_watch_errors
                    .with_label_values(&[name])
                    .inc();
            }
            Signal::Relisting(name) => {
                self.metrics
                    .informer_relists
                    .with_label_values(&[name])
                    .inc();
            }
            Signal::Synced(name) => {
                if st.pending_sync.remove(name) && st.pending_sync.is_empty() {
                    info!("informer caches synced");
                    self.health.synced.store(true, Ordering::Relaxed);
                }
            }
        }
    }

    /// Runs up to `CYCLES_PER_TURN` cycles while the bind window has room
    /// (checked between cycles, never inside a gang: see `bind_window`).
    /// Returns true when it stopped at the cycle cap, so pods may be left.
    fn schedule_some(&mut self, now: Instant) -> bool {
        let mut placed_this_turn: u64 = 0;
        for _ in 0..CYCLES_PER_TURN {
            let placed = usize::try_from(placed_this_turn).unwrap_or(usize::MAX);
            if placed >= self.binds.room() && !self.engine.queue().gang_in_progress() {
                return false;
            }
            let started = Instant::now();
            let claimed_before = self.engine.cycles_with_claims();
            let Some(cycle) = self.engine.schedule_one(now) else {
                return false;
            };
            // A question waits one cycle at most, not a whole turn.
            while let Ok(req) = self.explain.try_recv() {
                self.answer(req);
            }
            placed_this_turn = placed_this_turn.saturating_add(cycle.scheduled);
            // A gang cycle attempts every member of its gang in one call:
            // each attempt is counted under its own result.
            for (r, n) in cycle.by_result() {
                if n > 0 {
                    self.metrics
                        .schedule_attempts
                        .with_label_values(&[r, "all"])
                        .inc_by(n);
                }
            }
            let result = cycle.result();
            if cycle == AttemptCounts::default() {
                self.metrics
                    .schedule_attempts
                    .with_label_values(&["error", "all"])
                    .inc();
            }
            let elapsed = started.elapsed().as_secs_f64();
            self.metrics
                .attempt_duration
                .with_label_values(&[result, "all"])
                .observe(elapsed);
            if self.engine.cycles_with_claims() != claimed_before {
                self.metrics
                    .dra_attempt_duration
                    .with_label_values(&[result])
                    .observe(elapsed);
            }
        }
        true
    }

    /// Hands the engine's actions to the writer; Err when the writer has
    /// stopped (nothing this loop assumes could ever be bound).
    fn flush_actions(&mut self, st: &mut LoopState, leading: bool) -> Result<()> {
        let actions = self.engine.drain_actions();
        for sample in self.engine.drain_samples() {
            match sample {
                Sample::PermitWait(d) => self.metrics.gang_permit_wait.observe(d.as_secs_f64()),
                Sample::GangReleased => self.metrics.gang_scheduled.inc(),
                Sample::PreemptionVictims(n) => self.metrics.preemption_victims.observe(n as f64),
                Sample::QuorumToAllBound(d) => {
                    self.metrics.gang_quorum_to_bound.observe(d.as_secs_f64())
                }
                Sample::ReservationStarted(d) => {
                    self.metrics.reservation_to_start.observe(d.as_secs_f64())
                }
            }
        }
        if !leading {
            // A standby computes the same messages as the leader; only the leader writes.
            return Ok(());
        }
        let now = Instant::now();
        let mut batch = Vec::with_capacity(actions.len());
        for action in actions {
            match &action {
                Action::Bind { pod, .. } => self.observe_sli(st, pod, now),
                Action::PodInvalid { pod, message, .. } => {
                    warn!(pod = %pod, %message, "pod cannot be scheduled");
                }
                _ => {}
            }
            let before = batch.len();
            st.directory.translate(action, &mut batch);
            if batch.len() == before {
                debug!("action has no API form for this dialect");
            }
        }
        let binds = batch
            .iter()
            .filter(|d| matches!(d.call, ApiCall::Bind { .. }))
            .count();
        if !self.writer.submit(batch) {
            bail!("critical task api-writer ended: the scheduler cannot go on without it");
        }
        self.binds.submitted(binds);
        Ok(())
    }

    /// Scheduling attempts and the SLI duration of a pod being bound.
    fn observe_sli(&self, st: &mut LoopState, pod: &PodKey, now: Instant) {
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
                .observe(now.saturating_duration_since(first).as_secs_f64());
        }
    }

    fn publish(&mut self, st: &mut LoopState) {
        let now = Instant::now();
        let s = self.engine.stats(now);
        let m = &self.metrics;
        m.informer_backlog
            .set(i64::try_from(self.observed.len()).unwrap_or(i64::MAX));
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
        m.gang_groups
            .with_label_values(&["unsatisfied"])
            .set(s.groups.unsatisfied as i64);
        // Reset first: a kind with no groups left must not keep its last value.
        m.gang_groups_by_kind.reset();
        for ((state, kind), n) in &s.groups.by_kind {
            m.gang_groups_by_kind
                .with_label_values(&[*state, *kind])
                .set(i64::try_from(*n).unwrap_or(i64::MAX));
        }
        let cache = self.engine.cache();
        m.cache_size
            .with_label_values(&["nodes"])
            .set(cache.nodes().len() as i64);
        m.cache_size
            .with_label_values(&["pods"])
            .set(i64::try_from(cache.pod_count()).unwrap_or(i64::MAX));
        m.gang_timeouts
            .inc_by(s.gang_timeouts.saturating_sub(st.last_stats.gang_timeouts));
        m.reservations
            .set(i64::try_from(s.reservations.active).unwrap_or(i64::MAX));
        m.reserved_nodes
            .set(i64::try_from(s.reservations.reserved_nodes).unwrap_or(i64::MAX));
        m.backfilled_pods.inc_by(
            s.reservations
                .backfilled
                .saturating_sub(st.last_stats.reservations.backfilled),
        );
        m.gang_early_releases.inc_by(
            s.gang_early_releases
                .saturating_sub(st.last_stats.gang_early_releases),
        );
        m.preemption_attempts.inc_by(
            s.preemption_attempts
                .saturating_sub(st.last_stats.preemption_attempts),
        );
        for (&(preemptor, victim), &n) in &s.preemptions_by_kind {
            let before = st
                .last_stats
                .preemptions_by_kind
                .get(&(preemptor, victim))
                .copied()
                .unwrap_or(0);
            m.gang_preemptions
                .with_label_values(&[preemptor, victim])
                .inc_by(n.saturating_sub(before));
        }
        for (&how, &n) in &s.gang_reprieves {
            let before = st.last_stats.gang_reprieves.get(how).copied().unwrap_or(0);
            m.gang_preemption_reprieves
                .with_label_values(&[how])
                .inc_by(n.saturating_sub(before));
        }
        let (d, was) = (&s.devices, &st.last_stats.devices);
        m.dra_allocations
            .with_label_values(&["reserved"])
            .inc_by(d.allocated.saturating_sub(was.allocated));
        m.dra_allocations
            .with_label_values(&["failed"])
            .inc_by(d.reserve_failures.saturating_sub(was.reserve_failures));
        m.dra_allocator_searches
            .inc_by(d.searches.saturating_sub(was.searches));
        let placed = d.joint_placements.saturating_sub(was.joint_placements);
        m.dra_joint_searches
            .with_label_values(&["placed"])
            .inc_by(placed);
        m.dra_joint_searches.with_label_values(&["failed"]).inc_by(
            d.joint_searches
                .saturating_sub(was.joint_searches)
                .saturating_sub(placed),
        );
        let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        m.dra_allocations_in_flight.set(gauge(d.planned));
        m.dra_devices_in_use.set(gauge(d.in_use));
        for (kind, n) in [
            ("resourceslices", d.slices),
            ("deviceclasses", d.classes),
            ("resourceclaims", d.claims),
        ] {
            m.dra_objects.with_label_values(&[kind]).set(gauge(n));
        }
        *self.debug.write().unwrap_or_else(|p| p.into_inner()) =
            Arc::new(self.engine.debug_text(now));
        st.last_stats = s;
    }
}

/// Unix milliseconds now.
fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
