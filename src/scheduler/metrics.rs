//! Prometheus metrics: kube-scheduler's names where the meaning is the same,
//! `muster_*` for gang facts and Muster's own API writes. Every metric here is
//! documented in docs/metrics.md; the scheduling loop is the only writer.

use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder, exponential_buckets,
};

/// Every metric Muster exports, registered in one registry.
pub struct Metrics {
    registry: Registry,
    /// `result` = scheduled | unschedulable | error.
    pub schedule_attempts: IntCounterVec,
    pub attempt_duration: HistogramVec,
    /// `queue` = active | backoff | unschedulable | gated.
    pub pending_pods: IntGaugeVec,
    /// From a pod first entering the queue to the start of its binding.
    pub pod_scheduling_sli_duration: HistogramVec,
    pub pod_scheduling_attempts: Histogram,
    /// `type` = nodes | pods | assumed_pods.
    pub cache_size: IntGaugeVec,
    /// `state` = gated | waiting | scheduled | backing_off.
    pub gang_groups: IntGaugeVec,
    /// `state` as above, `kind` = the kind defining the group (`PodGroup`,
    /// `Job`, `LeaderWorkerSet`, ...).
    pub gang_groups_by_kind: IntGaugeVec,
    pub gang_permit_wait: Histogram,
    /// Reservations held now, and the nodes they hold room on.
    pub reservations: IntGauge,
    pub reserved_nodes: IntGauge,
    /// Pods placed on reserved room by backfill.
    pub backfilled_pods: IntCounter,
    /// From a reservation being made to its gang starting.
    pub reservation_to_start: Histogram,
    pub gang_timeouts: IntCounter,
    pub gang_early_releases: IntCounter,
    pub gang_scheduled: IntCounter,
    pub gang_quorum_to_bound: Histogram,
    pub binding_duration: Histogram,
    /// `operation` = bind | pod_status | event | group_status; `result` = success | error | conflict.
    pub api_writes: IntCounterVec,
    /// Calls dropped or merged into a newer call before being sent.
    pub api_writes_superseded: IntCounter,
    /// Calls queued in the write path, not in flight.
    pub api_writes_queued: IntGauge,
    /// Events dropped because the write backlog was full.
    pub events_dropped: IntCounter,
    /// 1 while this replica holds the lease (client-go's metric name).
    pub leader: IntGaugeVec,
    /// kube-scheduler's `scheduler_preemption_attempts_total`.
    pub preemption_attempts: IntCounter,
    /// kube-scheduler's `scheduler_preemption_victims`: victims per preemption.
    pub preemption_victims: Histogram,
    /// `preemptor`, `victim` = pod | gang: victim units evicted.
    pub gang_preemptions: IntCounterVec,
    /// `how` = in_place | replanned | devices: gang preemption candidates
    /// by how their victims were reprieved.
    pub gang_preemption_reprieves: IntCounterVec,
    /// `informer`: watch errors, each retried with backoff.
    pub informer_watch_errors: IntCounterVec,
    /// `informer`: full re-lists after the first sync (the resume version
    /// had left the server's window).
    pub informer_relists: IntCounterVec,
    /// Observed changes waiting for the scheduling loop.
    pub informer_backlog: IntGauge,
    /// `result` = reserved | failed: claims allocated at Reserve, and
    /// Reserves whose allocation failed on the chosen node.
    pub dra_allocations: IntCounterVec,
    /// Allocation searches: one per node a pod with unallocated claims is
    /// filtered on, one per Reserve.
    pub dra_allocator_searches: IntCounter,
    /// `result` = placed | failed: joint device searches of a gang member
    /// with members placed on a node (`engine::joint_devices`).
    pub dra_joint_searches: IntCounterVec,
    /// `result`: scheduling attempts of pods with resource claims.
    pub dra_attempt_duration: HistogramVec,
    /// Allocations planned at Reserve, not yet recorded in their claims.
    pub dra_allocations_in_flight: IntGauge,
    /// Devices held by recorded and planned allocations.
    pub dra_devices_in_use: IntGauge,
    /// `kind` = resourceslices | deviceclasses | resourceclaims.
    pub dra_objects: IntGaugeVec,
}

fn duration_buckets() -> Vec<f64> {
    // 1 ms .. ~65 s, like kube-scheduler's attempt-duration buckets.
    exponential_buckets(0.001, 2.0, 17).unwrap_or_default()
}

impl Metrics {
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new();
        let m = Metrics {
            schedule_attempts: IntCounterVec::new(
                Opts::new("scheduler_schedule_attempts_total", "Scheduling attempts by result and profile."),
                &["result", "profile"],
            )?,
            attempt_duration: HistogramVec::new(
                HistogramOpts::new(
                    "scheduler_scheduling_attempt_duration_seconds",
                    "Scheduling attempt latency (filter, score, reserve, permit) by result and profile.",
                )
                .buckets(duration_buckets()),
                &["result", "profile"],
            )?,
            pending_pods: IntGaugeVec::new(
                Opts::new("scheduler_pending_pods", "Pending pods by queue (active, backoff, unschedulable, gated)."),
                &["queue"],
            )?,
            pod_scheduling_sli_duration: HistogramVec::new(
                HistogramOpts::new(
                    "scheduler_pod_scheduling_sli_duration_seconds",
                    "Time from a pod entering the scheduling queue until its binding starts, by attempts.",
                )
                .buckets(duration_buckets()),
                &["attempts"],
            )?,
            pod_scheduling_attempts: Histogram::with_opts(
                HistogramOpts::new("scheduler_pod_scheduling_attempts", "Attempts needed to schedule a pod.")
                    .buckets(exponential_buckets(1.0, 2.0, 6).unwrap_or_default()),
            )?,
            cache_size: IntGaugeVec::new(
                Opts::new("scheduler_cache_size", "Objects in the scheduler cache by type."),
                &["type"],
            )?,
            gang_groups: IntGaugeVec::new(
                Opts::new(
                    "muster_gang_groups",
                    "Gangs by state: waiting, backing_off, scheduled, and unsatisfied (scheduled gangs now below minCount).",
                ),
                &["state"],
            )?,
            gang_groups_by_kind: IntGaugeVec::new(
                Opts::new(
                    "muster_gang_groups_by_kind",
                    "Gangs with pending members by state and by the kind that defines them.",
                ),
                &["state", "kind"],
            )?,
            gang_permit_wait: Histogram::with_opts(
                HistogramOpts::new("muster_gang_permit_wait_seconds", "Time a gang member waited at the permit barrier.")
                    .buckets(duration_buckets()),
            )?,
            reservations: IntGauge::new(
                "muster_reservations",
                "Reservations held now: gangs that waited reserveAfterSeconds with room held for them.",
            )?,
            reserved_nodes: IntGauge::new(
                "muster_reserved_nodes",
                "Nodes on which reservations hold room now.",
            )?,
            backfilled_pods: IntCounter::new(
                "muster_backfilled_pods_total",
                "Pods placed on reserved room because their declared end falls before the reservation's expected start.",
            )?,
            reservation_to_start: Histogram::with_opts(
                HistogramOpts::new(
                    "muster_reservation_to_start_seconds",
                    "Time from a reservation being made to its gang starting.",
                )
                .buckets(exponential_buckets(0.1, 2.0, 16).unwrap_or_default()),
            )?,
            gang_timeouts: IntCounter::new(
                "muster_gang_timeouts_total",
                "Gangs whose permit barrier timed out (every waiting member rejected).",
            )?,
            gang_early_releases: IntCounter::new(
                "muster_gang_early_releases_total",
                "Gangs released early because a member was unschedulable.",
            )?,
            gang_scheduled: IntCounter::new("muster_gang_scheduled_total", "Gangs that reached quorum and were released to binding.")?,
            gang_quorum_to_bound: Histogram::with_opts(
                HistogramOpts::new(
                    "muster_gang_quorum_to_bound_seconds",
                    "Time from a gang reaching quorum until all released members are bound.",
                )
                .buckets(duration_buckets()),
            )?,
            binding_duration: Histogram::with_opts(
                HistogramOpts::new("muster_binding_duration_seconds", "Latency of the pods/binding API call.")
                    .buckets(duration_buckets()),
            )?,
            api_writes: IntCounterVec::new(
                Opts::new("muster_api_writes_total", "API writes by operation and result."),
                &["operation", "result"],
            )?,
            api_writes_superseded: IntCounter::new(
                "muster_api_writes_superseded_total",
                "API writes never sent: waiting messages dropped because their pod or group settled first, or queued writes replaced or merged by a newer one.",
            )?,
            api_writes_queued: IntGauge::new(
                "muster_api_writes_queued",
                "API writes queued behind the in-flight limits, not yet started.",
            )?,
            events_dropped: IntCounter::new(
                "muster_events_dropped_total",
                "Events not written because the write backlog was full (as client-go's event broadcaster drops events when its queue is full).",
            )?,
            leader: IntGaugeVec::new(
                Opts::new("leader_election_master_status", "1 while this replica is the leader."),
                &["name"],
            )?,
            preemption_attempts: IntCounter::new(
                "scheduler_preemption_attempts_total",
                "Preemption attempts: a pod or a gang that fitted nowhere looked for victims.",
            )?,
            preemption_victims: Histogram::with_opts(
                HistogramOpts::new("scheduler_preemption_victims", "Number of selected preemption victims.")
                    .buckets(exponential_buckets(1.0, 2.0, 7).unwrap_or_default()),
            )?,
            gang_preemptions: IntCounterVec::new(
                Opts::new(
                    "muster_gang_preemptions_total",
                    "Victim units evicted by preemption, by preemptor kind (pod, gang) and victim kind (pod, or gang evicted whole).",
                ),
                &["preemptor", "victim"],
            )?,
            gang_preemption_reprieves: IntCounterVec::new(
                Opts::new(
                    "muster_gang_preemption_reprieves_total",
                    "Victim units of gang preemption candidates, by how their reprieve was decided: in_place (put back against the plan held), replanned (put back after planning the gang again), evicted (could not be put back); exact (candidates chosen by the exact search), elsewhere (victims another placement does without).",
                ),
                &["how"],
            )?,
            informer_watch_errors: IntCounterVec::new(
                Opts::new(
                    "muster_informer_watch_errors_total",
                    "Watch errors by informer; each is retried with backoff.",
                ),
                &["informer"],
            )?,
            informer_relists: IntCounterVec::new(
                Opts::new(
                    "muster_informer_relists_total",
                    "Full re-lists by informer after its first sync: its watch could not resume (410 Gone), so every object was read again.",
                ),
                &["informer"],
            )?,
            informer_backlog: IntGauge::new(
                "muster_informer_backlog",
                "Observed changes decoded by the informers and waiting for the scheduling loop (the channel holds at most 16,384).",
            )?,
            dra_allocations: IntCounterVec::new(
                Opts::new(
                    "muster_dra_allocations_total",
                    "Claims allocated at Reserve (result=reserved), and Reserves whose allocation failed on the chosen node (result=failed).",
                ),
                &["result"],
            )?,
            dra_allocator_searches: IntCounter::new(
                "muster_dra_allocator_searches_total",
                "Device allocation searches: one per node a pod with unallocated claims is filtered on, one per Reserve.",
            )?,
            dra_joint_searches: IntCounterVec::new(
                Opts::new(
                    "muster_dra_joint_searches_total",
                    "Joint device searches of a gang member with the members placed on one node: result=placed when every one of them got devices together, failed otherwise.",
                ),
                &["result"],
            )?,
            dra_attempt_duration: HistogramVec::new(
                HistogramOpts::new(
                    "muster_dra_scheduling_attempt_duration_seconds",
                    "Scheduling attempt latency of pods with resource claims (device allocation included), by result.",
                )
                .buckets(duration_buckets()),
                &["result"],
            )?,
            dra_allocations_in_flight: IntGauge::new(
                "muster_dra_allocations_in_flight",
                "Allocations planned at Reserve and not yet recorded in their ResourceClaims.",
            )?,
            dra_devices_in_use: IntGauge::new(
                "muster_dra_devices_in_use",
                "Devices held by recorded and planned allocations.",
            )?,
            dra_objects: IntGaugeVec::new(
                Opts::new(
                    "muster_dra_objects",
                    "resource.k8s.io objects observed, by kind.",
                ),
                &["kind"],
            )?,
            registry,
        };
        m.register()?;
        Ok(m)
    }

    fn register(&self) -> Result<(), prometheus::Error> {
        let r = &self.registry;
        r.register(Box::new(self.schedule_attempts.clone()))?;
        r.register(Box::new(self.attempt_duration.clone()))?;
        r.register(Box::new(self.pending_pods.clone()))?;
        r.register(Box::new(self.pod_scheduling_sli_duration.clone()))?;
        r.register(Box::new(self.pod_scheduling_attempts.clone()))?;
        r.register(Box::new(self.cache_size.clone()))?;
        r.register(Box::new(self.gang_groups.clone()))?;
        r.register(Box::new(self.gang_groups_by_kind.clone()))?;
        r.register(Box::new(self.gang_permit_wait.clone()))?;
        r.register(Box::new(self.gang_timeouts.clone()))?;
        r.register(Box::new(self.reservations.clone()))?;
        r.register(Box::new(self.reserved_nodes.clone()))?;
        r.register(Box::new(self.backfilled_pods.clone()))?;
        r.register(Box::new(self.reservation_to_start.clone()))?;
        r.register(Box::new(self.preemption_attempts.clone()))?;
        r.register(Box::new(self.preemption_victims.clone()))?;
        r.register(Box::new(self.gang_preemptions.clone()))?;
        r.register(Box::new(self.gang_preemption_reprieves.clone()))?;
        r.register(Box::new(self.gang_early_releases.clone()))?;
        r.register(Box::new(self.gang_scheduled.clone()))?;
        r.register(Box::new(self.gang_quorum_to_bound.clone()))?;
        r.register(Box::new(self.binding_duration.clone()))?;
        r.register(Box::new(self.api_writes.clone()))?;
        r.register(Box::new(self.api_writes_superseded.clone()))?;
        r.register(Box::new(self.api_writes_queued.clone()))?;
        r.register(Box::new(self.events_dropped.clone()))?;
        r.register(Box::new(self.leader.clone()))?;
        r.register(Box::new(self.informer_watch_errors.clone()))?;
        r.register(Box::new(self.informer_relists.clone()))?;
        r.register(Box::new(self.informer_backlog.clone()))?;
        r.register(Box::new(self.dra_allocations.clone()))?;
        r.register(Box::new(self.dra_allocator_searches.clone()))?;
        r.register(Box::new(self.dra_joint_searches.clone()))?;
        r.register(Box::new(self.dra_attempt_duration.clone()))?;
        r.register(Box::new(self.dra_allocations_in_flight.clone()))?;
        r.register(Box::new(self.dra_devices_in_use.clone()))?;
        r.register(Box::new(self.dra_objects.clone()))?;
        // Process metrics (RSS, CPU seconds) where the platform provides them.
        #[cfg(target_os = "linux")]
        r.register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ))?;
        Ok(())
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        TextEncoder::new()
            .encode_to_string(&self.registry.gather())
            .unwrap_or_else(|e| format!("# encoding error: {e}\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_family() {
        let m = Metrics::new().unwrap();
        m.schedule_attempts
            .with_label_values(&["scheduled", "muster"])
            .inc();
        m.pending_pods.with_label_values(&["active"]).set(3);
        m.gang_timeouts.inc();
        m.leader.with_label_values(&["muster"]).set(1);
        let text = m.render();
        for name in [
            "scheduler_schedule_attempts_total{profile=\"muster\",result=\"scheduled\"} 1",
            "scheduler_pending_pods{queue=\"active\"} 3",
            "muster_gang_timeouts_total 1",
            "leader_election_master_status{name=\"muster\"} 1",
            "muster_gang_early_releases_total 0",
        ] {
            assert!(text.contains(name), "missing {name} in:\n{text}");
        }
    }
}
