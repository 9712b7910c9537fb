//! What the engine tells its operator: attempt counts, duration samples for
//! histograms, and a plain-text view of queue and gang state for `/debug`.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use super::Engine;
use crate::gang::smallest;
use crate::model::GroupKey;

/// Entries of each list the debug page shows.
const SHOWN: usize = 50;

/// Scheduling attempts by result: since the engine started
/// (`Engine::attempt_counts`), or those of one cycle (`Engine::schedule_one`;
/// a gang cycle attempts every member it plans).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AttemptCounts {
    pub scheduled: u64,
    pub unschedulable: u64,
    pub error: u64,
}

impl AttemptCounts {
    /// The attempts made between `before` and `self`.
    pub fn since(self, before: AttemptCounts) -> AttemptCounts {
        AttemptCounts {
            scheduled: self.scheduled.saturating_sub(before.scheduled),
            unschedulable: self.unschedulable.saturating_sub(before.unschedulable),
            error: self.error.saturating_sub(before.error),
        }
    }

    /// Each result with its count, in kube-scheduler's label values.
    pub fn by_result(self) -> [(&'static str, u64); 3] {
        [
            ("scheduled", self.scheduled),
            ("unschedulable", self.unschedulable),
            ("error", self.error),
        ]
    }

    /// A cycle's result as kube-scheduler labels one: the first result it
    /// counted, `error` when it counted none.
    pub fn result(self) -> &'static str {
        self.by_result()
            .iter()
            .find(|(_, n)| *n > 0)
            .map_or("error", |(r, _)| *r)
    }
}

/// One observed duration, for metrics that need every sample (histograms).
/// Recorded only when `EngineConfig::record_samples` is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sample {
    /// A gang member's wait at Permit before it was allowed.
    PermitWait(Duration),
    /// A gang's quorum was released to binding.
    GangReleased,
    /// From a gang's quorum release until every released member was bound.
    QuorumToAllBound(Duration),
    /// A preemption chose its victims: how many pods it evicts.
    PreemptionVictims(usize),
    /// A reserved gang started: how long after its reservation was made.
    ReservationStarted(Duration),
}

/// Samples kept at most between two drains; older ones are dropped so a
/// caller that never drains cannot grow memory without bound.
pub(super) const MAX_PENDING_SAMPLES: usize = 100_000;

impl Engine {
    pub fn attempt_counts(&self) -> AttemptCounts {
        AttemptCounts {
            scheduled: self.stats.attempts_scheduled,
            unschedulable: self.stats.attempts_unschedulable,
            error: self.stats.attempts_error,
        }
    }

    /// Samples recorded since the last call.
    pub fn drain_samples(&mut self) -> Vec<Sample> {
        self.samples
            .as_mut()
            .map(|s| s.drain(..).collect())
            .unwrap_or_default()
    }

    pub(super) fn sample(&mut self, s: Sample) {
        if let Some(samples) = self.samples.as_mut() {
            if samples.len() >= MAX_PENDING_SAMPLES {
                samples.pop_front();
            }
            samples.push_back(s);
        }
    }

    /// DynamicResources: what is observed, and the allocations planned at
    /// Reserve and not yet recorded, with the pods relying on each.
    fn devices_text(&self, out: &mut String) {
        let dra = &self.cache.facts().dra;
        let (slices, classes, claims) = dra.counts();
        if slices + classes + claims == 0 {
            return;
        }
        let planned: Vec<_> = dra.assumed_all().collect();
        let _ = writeln!(
            out,
            "devices: {slices} slices, {classes} classes, {claims} claims; {} devices held; {} allocations in flight",
            dra.devices_in_use(),
            planned.len()
        );
        for problem in dra.inventory().problems().iter().take(SHOWN) {
            let _ = writeln!(out, "  unusable: {problem}");
        }
        let total = planned.len();
        for (claim, a) in smallest(planned, SHOWN, |a, b| a.0.cmp(b.0)) {
            let devices: Vec<String> = a
                .allocation
                .results
                .iter()
                .map(|r| r.device.to_string())
                .collect();
            let users: Vec<String> = a
                .users
                .iter()
                .map(|(p, writing)| match writing {
                    true => format!("{p} (binding)"),
                    false => p.to_string(),
                })
                .collect();
            let _ = writeln!(
                out,
                "  in flight: {claim} -> [{}] for {}",
                devices.join(", "),
                users.join(", ")
            );
        }
        if total > SHOWN {
            let _ = writeln!(out, "  ... and {} more", total - SHOWN);
        }
    }

    /// Each reservation: its gang, nodes, age and expected start.
    fn reservations_text(&self, now: Instant, out: &mut String) {
        let total = self.reservations.len();
        if total == 0 {
            return;
        }
        let _ = writeln!(
            out,
            "reservations: {total} holding {} node(s); {} pod(s) backfilled",
            self.reservations.reserved_nodes(),
            self.reservations.backfilled
        );
        for (g, r) in self.reservations.iter().take(SHOWN) {
            let nodes: Vec<&str> = r.members.iter().map(|(_, n)| &**n).collect();
            let start = match self.reservations.expected_start_in(r, now) {
                Some(s) => format!("expected start in {s:.0}s"),
                None => "start unknown".to_string(),
            };
            let _ = writeln!(
                out,
                "  {g} (priority {}): [{}] for {:.0}s; {start}",
                r.priority,
                nodes.join(", "),
                now.saturating_duration_since(r.made).as_secs_f64()
            );
        }
        if total > SHOWN {
            let _ = writeln!(out, "  ... and {} more", total - SHOWN);
        }
    }

    /// A short human-readable state dump for `/debug/queue`.
    pub fn debug_text(&self, now: Instant) -> String {
        let q = self.queue.counts();
        let mut out = String::new();
        let _ = writeln!(
            out,
            "nodes: {}\npods cached: {}\nqueue: active={} backoff={} unschedulable={} gated={}",
            self.cache.nodes().len(),
            self.cache.pod_count(),
            q.active,
            q.backoff,
            q.unschedulable,
            q.gated
        );
        let _ = writeln!(
            out,
            "nominated pods: {}; preempted pods terminating: {}",
            self.preemptions.nominated_count(),
            self.preemptions.going_count()
        );
        let _ = writeln!(
            out,
            "waiting at permit: {} pods in {} groups; groups backing off: {}",
            self.gang.waiting().len(),
            self.gang.waiting().groups().count(),
            self.gang.denied_groups(now)
        );
        // The first groups by name, picked rather than all sorted: the
        // page is rebuilt every second and a 50,000-gang cluster has as
        // many entries.
        let waiting: Vec<&GroupKey> = self.gang.waiting().groups().collect();
        let total = waiting.len();
        for g in smallest(waiting, SHOWN, |a, b| a.cmp(b)) {
            let _ = writeln!(out, "  waiting: {g}");
        }
        if total > SHOWN {
            let _ = writeln!(out, "  ... and {} more", total - SHOWN);
        }
        // The domains each topology-constrained gang's last cycle tried.
        let placed: Vec<_> = self.gang.considered_domains().iter().collect();
        let total = placed.len();
        if total > 0 {
            let _ = writeln!(out, "topology (last gang cycle per group):");
        }
        for (g, (tried, chosen)) in smallest(placed, SHOWN, |a, b| a.0.cmp(b.0)) {
            let chosen = chosen.as_deref().unwrap_or("none held it");
            let _ = writeln!(
                out,
                "  {g}: tried [{}]; placed in {chosen}",
                tried.join(", ")
            );
        }
        if total > SHOWN {
            let _ = writeln!(out, "  ... and {} more", total - SHOWN);
        }
        self.devices_text(&mut out);
        self.reservations_text(now, &mut out);
        let a = self.attempt_counts();
        let _ = writeln!(
            out,
            "attempts: scheduled={} unschedulable={} error={}; gang timeouts={} early releases={}",
            a.scheduled,
            a.unschedulable,
            a.error,
            self.stats.gang_timeouts,
            self.stats.gang_early_releases
        );
        out
    }
}
