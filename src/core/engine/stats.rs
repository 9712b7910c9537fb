//! Counters and gauges the daemon exports as metrics: a plain snapshot, no
//! metrics library here.

use std::collections::BTreeMap;
use std::time::Duration;

/// Count, sum and maximum of observed durations (enough for a summary; the
/// daemon keeps histograms from `Stats` deltas if it wants buckets).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DurationSummary {
    pub count: u64,
    pub sum: Duration,
    pub max: Duration,
}

impl DurationSummary {
    pub fn observe(&mut self, d: Duration) {
        self.count += 1;
        self.sum += d;
        self.max = self.max.max(d);
    }
}

/// Pending pods by where they are (kube-scheduler's `scheduler_pending_pods`
/// queues plus the gang places).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PendingPods {
    pub gated: usize,
    pub active: usize,
    pub backoff: usize,
    pub unschedulable: usize,
    pub waiting_at_permit: usize,
    pub binding: usize,
}

/// Groups by state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupCounts {
    /// Groups with members waiting at Permit.
    pub waiting: usize,
    /// Groups backing off after an early release.
    pub denied: usize,
    /// Groups whose quorum was released at least once.
    pub scheduled: usize,
    /// Scheduled groups whose running members are below `minCount` now
    /// (`PodGroupSatisfied=False`).
    pub unsatisfied: usize,
    /// The same three counts by (state, the kind that defines the group:
    /// `PodGroup`, `Job`, `LeaderWorkerSet`, ...), for
    /// `muster_gang_groups_by_kind`.
    pub by_kind: BTreeMap<(&'static str, &'static str), usize>,
}

/// Reservations (`engine::reservations`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReservationStats {
    /// Reservations held now.
    pub active: usize,
    /// Nodes they hold room on.
    pub reserved_nodes: usize,
    /// Pods placed on reserved room by backfill, since the engine started.
    pub backfilled: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    pub reservations: ReservationStats,
    /// `scheduler_schedule_attempts_total{result="scheduled"}` (reached Permit and was allowed or parked).
    pub attempts_scheduled: u64,
    /// `...{result="unschedulable"}`.
    pub attempts_unschedulable: u64,
    /// `...{result="error"}`.
    pub attempts_error: u64,
    pub pending: PendingPods,
    pub groups: GroupCounts,
    /// Time members spent at Permit before being allowed.
    pub permit_wait: DurationSummary,
    pub gang_timeouts: u64,
    pub gang_early_releases: u64,
    /// Time from a gang's quorum release until every released member was
    /// confirmed bound.
    pub quorum_to_all_bound: DurationSummary,
    pub binds_succeeded: u64,
    pub binds_failed: u64,
    /// `scheduler_preemption_attempts_total`: preemptions run (a pod or a
    /// gang looked for victims).
    pub preemption_attempts: u64,
    /// `muster_gang_preemptions_total`: victim units evicted, by
    /// (preemptor, victim) kind, each `pod` or `gang`.
    pub preemptions_by_kind: BTreeMap<(&'static str, &'static str), u64>,
    /// `muster_gang_preemption_reprieves_total`: victim units of gang
    /// preemption candidates by how their reprieve was decided
    /// (`engine::reprieve::Decision`'s labels).
    pub gang_reprieves: BTreeMap<&'static str, u64>,
    /// Nominations given up because the preemptor could not use the room.
    pub nominations_released: u64,
    pub devices: DeviceStats,
}

/// DynamicResources' counters and gauges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceStats {
    /// Claims allocated at Reserve.
    pub allocated: u64,
    /// Reserves whose allocation failed on the chosen node.
    pub reserve_failures: u64,
    /// Allocation searches (per node filtered, and per Reserve).
    pub searches: u64,
    /// Allocations planned and not yet observed recorded.
    pub planned: usize,
    /// Devices held by recorded and planned allocations.
    pub in_use: usize,
    /// ResourceSlices, DeviceClasses, ResourceClaims observed.
    pub slices: usize,
    pub classes: usize,
    pub claims: usize,
    /// Scheduling cycles of pods with claims.
    pub cycles: u64,
    /// Joint device searches of gang members (`engine::joint_devices`),
    /// and those that placed the member.
    pub joint_searches: u64,
    pub joint_placements: u64,
}
