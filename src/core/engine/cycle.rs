//! One scheduling cycle, and applying the verdicts the gang plugin reaches
//! about pods waiting at Permit.
//!
//! Cycle: pop → cache-aware PreFilter (group denial, conflicts, minResources)
//! → placement (`Framework::schedule`: PreFilter/Filter/Score) → Reserve
//! (assume) → Permit (allow → bind, wait → park, reject → unreserve). A refusal
//! anywhere runs PostFilter (gang early release) and parks the pod.

use std::sync::Arc;
use std::time::Instant;

use super::{AttemptCounts, Engine, EventType, Sample};
use crate::framework::QueueingEvent;
use crate::framework::lifecycle::{PermitVerdict, PreFilterVerdict, Refusal, Verdict};
use crate::framework::{FitError, Framework, PendingReason, Placement, Snapshot};
use crate::gang::GangNotice;
use crate::model::{GroupKey, PodInfo, PodKey};
use crate::plugins::registry;
use crate::queue::Requeue;

/// `PodScheduled=False` reason of a member reserved at Permit: it holds a
/// node and waits for its gang (not `Unschedulable`, which would tell a
/// cluster autoscaler it needs room).
pub const WAITING_AT_PERMIT: PendingReason = PendingReason::WaitingAtPermit;

/// PreFilter, Filter and Score of `pod` on the node at `index` alone.
pub(super) fn schedule_on(
    framework: &mut Framework,
    pod: &Arc<PodInfo>,
    snapshot: &Snapshot<'_>,
    index: usize,
) -> Result<Placement, FitError> {
    let only = crate::framework::NodeRestriction {
        nodes: vec![index],
        reason: String::new(),
    };
    let mut start = 0;
    framework.schedule_within(pod, snapshot, &mut start, Some(&only))
}

impl Engine {
    /// Pops one pod and runs a full cycle for it (for a gang, the gang's).
    /// Returns the attempts the cycle made by result, or `None` when no pod
    /// is ready (the active queue is empty).
    pub fn schedule_one(&mut self, now: Instant) -> Option<AttemptCounts> {
        let pod = self.queue.pop()?;
        self.refresh_devices();
        self.clear_stale_extended_claim(&pod);
        if !pod.constraints.resource_claims.is_empty() {
            self.stats.devices.cycles += 1;
        }
        let before = self.attempt_counts();
        self.in_cycle = Some(pod.key.clone());
        let whole = match self.intake.places_members_alone(&pod.scheduler_name) {
            true => None,
            false => self.gang.gang_cycle_group(&pod, &self.cache),
        };
        // Room nominated to pods at least as important is not this cycle's.
        self.preemptions.hold(
            &mut self.cache,
            pod.priority,
            &pod.key,
            whole.as_ref().map(|(g, _)| g),
        );
        // Room reserved for gangs at least as important, likewise.
        let own_group = pod.group.key().cloned();
        self.hold_reservations(&pod, own_group.as_ref(), now);
        let key = pod.key.clone();
        match whole {
            Some((group, min_count)) => self.run_gang_cycle(pod, group, min_count, now),
            None => self.run_cycle(pod, now),
        }
        self.take_off_nominated();
        self.release_reservations(&key);
        self.in_cycle = None;
        self.apply_gang_outcomes(now);
        Some(self.attempt_counts().since(before))
    }

    pub(super) fn run_cycle(&mut self, pod: Arc<PodInfo>, now: Instant) {
        let restriction = match self.gang.pre_filter(&pod, &self.cache, now) {
            PreFilterVerdict::Proceed => None,
            PreFilterVerdict::Restrict(r) => Some(r),
            PreFilterVerdict::HoldUntil(until) => {
                let order = self.gang.order_key(&pod);
                self.queue.requeue(pod, order, Requeue::Hold(until), now);
                return;
            }
            PreFilterVerdict::Refuse(refusal) => return self.refuse(pod, refusal, now),
        };
        let Some(profile) = self.profiles.get_mut(&pod.scheduler_name) else {
            // Only pods of served profiles are queued; anything else is a bug
            // upstream and is reported rather than dropped silently.
            self.stats.attempts_error += 1;
            let msg = format!("no profile serves schedulerName {}", pod.scheduler_name);
            return self.refuse(pod, Refusal::new("FailedScheduling", msg), now);
        };
        // A nominated pod tries its nominated node first (upstream's
        // `evaluateNominatedNode`): the room preempted for it is there.
        let snapshot = Snapshot::of_cache(&self.cache);
        let on_nominated = match self.preemptions.nomination(&pod.key) {
            Some(n) if restriction.is_none() => snapshot
                .nodes
                .iter()
                .position(|s| s.info.name == n.node)
                .and_then(|i| schedule_on(&mut profile.framework, &pod, &snapshot, i).ok()),
            _ => None,
        };
        let placed = match on_nominated {
            Some(p) => Ok(p),
            None => {
                let memo = self.pod_memos.for_profile(
                    &pod.scheduler_name,
                    &profile.framework,
                    self.cache.cross_node_generation(),
                );
                profile.framework.schedule_batched(
                    &pod,
                    &snapshot,
                    &mut profile.next_start,
                    restriction.as_ref(),
                    memo,
                )
            }
        };
        let placement = match placed {
            Ok(p) => p,
            Err(fit) => {
                let mut message = fit.to_string();
                if let Some(more) = self.preempt_for_pod(&pod, &fit) {
                    message.push(' ');
                    message.push_str(&more);
                }
                let condition = self.room_reason(&pod, restriction.as_ref(), now);
                let refusal = Refusal::new("FailedScheduling", message)
                    .waking_on(registry::requeue_on(&fit.rejected_by))
                    .because(condition);
                return self.refuse(pod, refusal, now);
            }
        };
        if let Err(fit) = self.passes_without_nominated(&pod, &placement) {
            // No preemption: the node has room once nominations are counted.
            let message = format!(
                "{fit} (node {} passes only with the pods nominated to nodes counted)",
                placement.node_name
            );
            return self.refuse(pod, Refusal::new("FailedScheduling", message), now);
        }
        if let Err(msg) = self.cache.assume(&pod.key, placement.node_index) {
            self.stats.attempts_error += 1;
            let order = self.gang.order_key(&pod);
            self.queue
                .requeue(pod.clone(), order, Requeue::Backoff, now);
            self.outbox.event(
                self.pod_ref(&pod.key),
                EventType::Warning,
                "SchedulerError",
                msg,
            );
            return;
        }
        self.permit_assumed(pod, placement.node_name, now);
    }

    /// The reason of a pod no node took: `WaitingForReservation` when it
    /// fits with the room held for gangs ahead of it taken off, else
    /// `Unschedulable` (capacity is missing).
    fn room_reason(
        &mut self,
        pod: &Arc<PodInfo>,
        restriction: Option<&crate::framework::NodeRestriction>,
        now: Instant,
    ) -> PendingReason {
        let fits = self.without_reservations(pod, now, |e| {
            let Some(profile) = e.profiles.get_mut(&pod.scheduler_name) else {
                return false;
            };
            let snapshot = Snapshot::of_cache(&e.cache);
            let mut start = 0;
            profile
                .framework
                .schedule_within(pod, &snapshot, &mut start, restriction)
                .is_ok()
        });
        match fits {
            Some(true) => PendingReason::WaitingForReservation,
            _ => PendingReason::Unschedulable,
        }
    }

    /// kube-scheduler's second Filter pass (`RunFilterPluginsWithNominatedPods`):
    /// a node chosen with the nominated pods counted must also pass without
    /// them, since they may never come (a nominated pod's presence can help
    /// a pod: a spread domain's count, an affinity term). The overlay is
    /// taken off for the rest of the cycle; assuming happens on the real
    /// table either way.
    fn passes_without_nominated(
        &mut self,
        pod: &Arc<PodInfo>,
        placement: &Placement,
    ) -> Result<(), FitError> {
        if !self.preemptions.holding() {
            return Ok(());
        }
        self.take_off_nominated();
        let Some(profile) = self.profiles.get_mut(&pod.scheduler_name) else {
            return Ok(());
        };
        let snapshot = Snapshot::of_cache(&self.cache);
        schedule_on(&mut profile.framework, pod, &snapshot, placement.node_index).map(|_| ())
    }

    /// Takes the nominated pods counted for this cycle off their nodes.
    fn take_off_nominated(&mut self) {
        self.preemptions.release(&mut self.cache);
    }

    /// Reserve and Permit for a pod already assumed on `node`: bind it,
    /// park it at the barrier, or give its node back.
    pub(super) fn permit_assumed(&mut self, pod: Arc<PodInfo>, node: Arc<str>, now: Instant) {
        self.stats.attempts_scheduled += 1;
        let verdict = self.gang.permit(&pod, &node, &self.cache, now);
        match verdict {
            PermitVerdict::Allow => self.bind_or_pre_bind(&pod, node, now),
            PermitVerdict::Wait => {
                self.gang_waiting_event(&pod, &node);
            }
            PermitVerdict::Reject(refusal) => {
                self.cache.forget(&pod.key);
                self.gang.unreserve(&pod);
                self.report_refusal(&pod.key, &refusal, true);
                let order = self.gang.order_key(&pod);
                self.queue.requeue(pod, order, Requeue::Backoff, now);
            }
        }
    }

    /// The pod cannot be placed this cycle: PostFilter (early release for a
    /// gang), then park it — in backoff until its group's denial ends if the
    /// gang backs off as a whole, in the unschedulable pool otherwise.
    pub(super) fn refuse(&mut self, pod: Arc<PodInfo>, refusal: Refusal, now: Instant) {
        self.stats.attempts_unschedulable += 1;
        self.gang.post_filter(&pod, &refusal, &self.cache, now);
        self.report_refusal(&pod.key, &refusal, false);
        if refusal.group_wide
            && let Some(group) = pod.group.key()
        {
            // Members held in backoff or served by another profile would
            // otherwise never hear why their gang does not move.
            let others: Vec<PodKey> = self
                .cache
                .group(group)
                .map(|m| {
                    m.pending()
                        .iter()
                        .filter(|k| **k != pod.key)
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            for other in others {
                self.report_refusal(&other, &refusal, false);
            }
        }
        let how = match self.gang.denied_until(&pod, now) {
            Some(until) => Requeue::NotBefore(until),
            None => Requeue::Unschedulable(refusal.wake_on),
        };
        let order = self.gang.order_key(&pod);
        self.queue.requeue(pod, order, how, now);
    }

    fn gang_waiting_event(&mut self, pod: &PodInfo, node: &str) {
        let Some(group) = pod.group.key() else {
            return;
        };
        let have = self.cache.group(group).map_or(0, |m| m.assumed_or_bound());
        let min = self.gang.min_count(group).unwrap_or(0);
        // The condition moves on with the pod: the gate's "waiting for N/M
        // pods" no longer describes a member that holds a node. It names no
        // count, so it stays true while siblings arrive (rewriting every
        // waiting member's condition per arrival would cost a gang of n
        // members n² writes); the event records the count at the time.
        self.outbox.pod_condition(
            &pod.key,
            WAITING_AT_PERMIT,
            &format!("reserved on {node}; waiting at permit until {min} members of {group} are assumed or bound"),
        );
        self.outbox.event(
            self.pod_ref(&pod.key),
            EventType::Normal,
            "GangWaiting",
            format!("reserved on {node}; waiting at permit for {group}: {have}/{min} members assumed or bound"),
        );
    }

    /// Condition once per change; the Warning event with it (or always, for
    /// one-off outcomes such as a timeout).
    pub(super) fn report_refusal(&mut self, key: &PodKey, refusal: &Refusal, always_event: bool) {
        let changed = self
            .outbox
            .pod_condition(key, refusal.condition, &refusal.message);
        if changed || always_event {
            self.outbox.event(
                self.pod_ref(key),
                EventType::Warning,
                refusal.reason,
                refusal.message.clone(),
            );
        }
    }

    /// Applies the gang plugin's verdicts on waiting pods and reports its
    /// notices. Runs after every entry point, so no verdict outlives a call.
    pub(super) fn apply_gang_outcomes(&mut self, now: Instant) {
        let mut released_capacity = false;
        loop {
            let decided = self.gang.take_decided();
            if decided.is_empty() {
                break;
            }
            for (w, verdict) in decided {
                match verdict {
                    Verdict::Allowed => {
                        let waited = now.saturating_duration_since(w.since);
                        self.stats.permit_wait.observe(waited);
                        self.sample(Sample::PermitWait(waited));
                        self.bind_or_pre_bind(&w.pod, w.node, now);
                    }
                    Verdict::Rejected(refusal) => {
                        released_capacity |= self.cache.forget(&w.pod.key);
                        self.gang.unreserve(&w.pod);
                        self.report_refusal(&w.pod.key, &refusal, true);
                        let how = match self.gang.denied_until(&w.pod, now) {
                            Some(until) => Requeue::NotBefore(until),
                            None => Requeue::Backoff,
                        };
                        self.requeue_from_cache(&w.pod.key, how, now);
                    }
                }
            }
        }
        if released_capacity {
            // Reservations were given back: pods parked as unschedulable may fit
            // now (kube-scheduler moves them on an assumed pod's removal too).
            self.flush_unschedulable(QueueingEvent::PodRemoved, now);
        }
        for notice in self.gang.take_notices() {
            self.report_notice(notice, now);
        }
    }

    fn report_notice(&mut self, notice: GangNotice, now: Instant) {
        match notice {
            GangNotice::Released {
                group,
                allowed,
                quorum,
            } => {
                let message = format!(
                    "quorum of {quorum} reached; {} members released to bind",
                    allowed.len()
                );
                let scheduled = self.scheduled_members(&group);
                self.gang_started(&group, now);
                self.provisioning_done(&group);
                // A composite's report has no members of its own to track.
                if self.outbox.group_scheduled(&group, message, scheduled) && !allowed.is_empty() {
                    self.sample(Sample::GangReleased);
                    self.gang.track_release(group, allowed, now);
                }
            }
            GangNotice::TimedOut { group, message, .. } => {
                self.stats.gang_timeouts += 1;
                self.releases.record(&group, now, "TimedOut", &message);
                let scheduled = self.scheduled_members(&group);
                self.outbox.group_unschedulable(&group, message, scheduled);
            }
            GangNotice::EarlyReleased { group, message, .. } => {
                self.stats.gang_early_releases += 1;
                self.releases.record(&group, now, "EarlyReleased", &message);
                let scheduled = self.scheduled_members(&group);
                self.outbox.group_unschedulable(&group, message, scheduled);
            }
        }
    }

    /// Members of a group assumed or bound (for the dialects' status counts).
    fn scheduled_members(&self, group: &GroupKey) -> u32 {
        self.cache.group(group).map_or(0, |m| {
            u32::try_from(m.assumed_or_bound()).unwrap_or(u32::MAX)
        })
    }

    /// A released member was confirmed bound.
    pub(super) fn confirm_released(&mut self, key: &PodKey, now: Instant) {
        let Some(group) = self
            .cache
            .pod(key)
            .and_then(|p| p.info.group.key().cloned())
        else {
            return;
        };
        if let Some(took) = self.gang.confirm_bound(&group, key, now) {
            self.stats.quorum_to_all_bound.observe(took);
            self.sample(Sample::QuorumToAllBound(took));
        }
    }
}
