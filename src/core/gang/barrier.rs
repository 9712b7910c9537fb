//! The permit barrier: wait until `min_count` members are assumed or bound,
//! then allow every waiting member at once; time out per group; release early
//! when a member is unschedulable; re-evaluate when the group changes.

use std::time::Instant;

use crate::cache::Cache;
use std::sync::Arc;

use crate::framework::lifecycle::{PermitVerdict, Refusal, WaitingPod};
use crate::model::{GroupKey, GroupPolicy, PodInfo, deadline};

use super::{GangNotice, GangScheduling, gate, tasks};

impl GangScheduling {
    /// Permit, for a pod assumed on `node`: allow it (with every waiting
    /// member, when it completes the quorum), park it at the barrier (the
    /// plugin holds it among its waiting pods until a verdict), or reject it.
    pub fn permit(
        &mut self,
        pod: &Arc<PodInfo>,
        node: &Arc<str>,
        cache: &Cache,
        now: Instant,
    ) -> PermitVerdict {
        let verdict = self.permit_verdict(pod, cache, now);
        if verdict == PermitVerdict::Wait {
            self.waiting.insert(WaitingPod {
                pod: pod.clone(),
                node: node.clone(),
                since: now,
            });
        }
        verdict
    }

    fn permit_verdict(&mut self, pod: &PodInfo, cache: &Cache, now: Instant) -> PermitVerdict {
        let Some(group) = pod.group.key() else {
            return PermitVerdict::Allow;
        };
        if let Some(msg) = self.hierarchy_refusal(group) {
            return PermitVerdict::Reject(Refusal::new("FailedScheduling", msg));
        }
        if let Some(scope) = self.barrier_scope(group) {
            return self.permit_in_scope(pod, group, &scope, cache, now);
        }
        match self.policy(group) {
            Err(msg) => PermitVerdict::Reject(Refusal::new("FailedScheduling", msg)),
            Ok(GroupPolicy::Basic) => {
                // No barrier, but the group is reported scheduled with its
                // first placed member, as upstream sets the condition on
                // basic-policy PodGroups too (the engine reports it once).
                self.notices.push(GangNotice::Released {
                    group: group.clone(),
                    allowed: vec![pod.key.clone()],
                    quorum: 1,
                });
                PermitVerdict::Allow
            }
            Ok(GroupPolicy::Gang {
                min_count,
                schedule_timeout,
            }) => {
                // The arriving pod is already assumed, so it is counted here.
                if self.quorum_met(cache, group, min_count) {
                    self.domain_succeeded(group);
                    let mut allowed = self.allow_all(group);
                    allowed.push(pod.key.clone());
                    self.notices.push(GangNotice::Released {
                        group: group.clone(),
                        allowed,
                        quorum: min_count,
                    });
                    return PermitVerdict::Allow;
                }
                self.start_timer(pod, group, schedule_timeout, now);
                PermitVerdict::Wait
            }
        }
    }
}

impl GangScheduling {
    /// PostFilter, early release: a member that cannot be placed frees every
    /// waiting member now instead of at the timeout, and the gang backs off
    /// as a whole.
    pub fn post_filter(&mut self, pod: &PodInfo, refusal: &Refusal, cache: &Cache, now: Instant) {
        let Some(group) = pod.group.key() else {
            return;
        };
        if let Some(scope) = self.barrier_scope(group) {
            self.early_release_scope(pod, group, &scope, refusal, cache, now);
            return;
        }
        let Some(min_count) = self.min_count(group) else {
            return;
        };
        if self.quorum_met(cache, group, min_count) {
            // Quorum already released: this member fails on its own.
            return;
        }
        let message = format!(
            "{group} released early: member {} is unschedulable: {}",
            pod.key, refusal.message
        );
        let rejected = self.reject_all(group, "FailedScheduling", &message);
        self.avoid_current_domain(group);
        let denied_until = deadline::after(now, self.args_for(pod).group_backoff);
        self.denied.insert(group.clone(), denied_until);
        self.notices.push(GangNotice::EarlyReleased {
            group: group.clone(),
            trigger: pod.key.clone(),
            rejected,
            denied_until,
            message,
        });
    }
}

impl GangScheduling {
    /// Unreserve: the pod no longer holds a node (rejected, deleted, its
    /// bind failed); a barrier left with no waiting member stops its timer.
    pub fn unreserve(&mut self, pod: &PodInfo) {
        if let Some(group) = pod.group.key() {
            self.clear_timer_if_idle(group);
        }
    }

    /// Takes a waiting pod out of the barrier without a verdict (deleted,
    /// bound elsewhere, its node gone), as Unreserve; the caller gives its
    /// node back.
    pub fn withdraw(&mut self, key: &crate::model::PodKey) -> Option<WaitingPod> {
        let w = self.waiting.remove(key)?;
        self.unreserve(&w.pod);
        Some(w)
    }
}

impl GangScheduling {
    /// Rejects every waiting member of groups whose barrier timed out.
    pub fn expire(&mut self, now: Instant, cache: &Cache) {
        self.denied.retain(|_, t| *t > now);
        while let Some((t, group)) = self.timers.first().cloned() {
            if t > now {
                break;
            }
            self.timers.remove(&(t, group.clone()));
            self.deadlines.remove(&group);
            if let Some(scope) = self.barrier_scope(&group) {
                self.expire_scope(&group, &scope, cache);
                continue;
            }
            if self.waiting.group_len(&group) == 0 {
                continue;
            }
            let have = cache.group(&group).map_or(0, |m| m.assumed_or_bound());
            let min = self.min_count(&group).unwrap_or(0);
            let tasks = self
                .placed_task_shortfall(&group, cache)
                .map(|t| format!(" ({t} per spec.minTaskMember)"))
                .unwrap_or_default();
            let message = format!(
                "{group} timed out waiting at permit: {have}/{min} members assumed or bound{tasks}"
            );
            let rejected = self.reject_all(&group, "FailedScheduling", &message);
            self.avoid_current_domain(&group);
            self.notices.push(GangNotice::TimedOut {
                group,
                rejected,
                message,
            });
        }
    }

    /// Something about the group changed (definition, members): waiting members
    /// are released if quorum is now met, or rejected if the group became
    /// unusable (definition gone or malformed, scheduler names in conflict).
    pub fn reevaluate(&mut self, group: &GroupKey, cache: &Cache) {
        if let Some(scope) = self.barrier_scope(group) {
            self.reevaluate_scope(group, &scope, cache);
            return;
        }
        if self.waiting.group_len(group) == 0 {
            self.clear_timer_if_idle(group);
            return;
        }
        if let Some(msg) = gate::scheduler_conflict(group, cache) {
            self.reject_all(group, "FailedScheduling", &msg);
            return;
        }
        let refusal = self.hierarchy_refusal(group).map(Err);
        match refusal.unwrap_or_else(|| self.policy(group)) {
            Err(msg) => {
                let msg = format!("rejected while waiting at permit: {msg}");
                self.reject_all(group, "FailedScheduling", &msg);
            }
            Ok(GroupPolicy::Basic) => {
                self.allow_all(group);
            }
            Ok(GroupPolicy::Gang { min_count, .. }) => {
                if self.quorum_met(cache, group, min_count) {
                    self.domain_succeeded(group);
                    let allowed = self.allow_all(group);
                    self.notices.push(GangNotice::Released {
                        group: group.clone(),
                        allowed,
                        quorum: min_count,
                    });
                }
            }
        }
    }

    /// Starts the group's barrier timer with its first waiting member.
    pub(super) fn start_timer(
        &mut self,
        pod: &PodInfo,
        group: &GroupKey,
        schedule_timeout: Option<std::time::Duration>,
        now: Instant,
    ) {
        if self.deadlines.contains_key(group) {
            return;
        }
        let timeout = schedule_timeout
            .unwrap_or_else(|| self.args_for(pod).default_timeout(group.definition.source));
        // Saturating: a definition's timeout is capped when read, but the
        // barrier must not trust that it was.
        let deadline = deadline::after(now, timeout);
        self.deadlines.insert(group.clone(), deadline);
        self.timers.insert((deadline, group.clone()));
    }

    pub(super) fn allow_all(&mut self, group: &GroupKey) -> Vec<crate::model::PodKey> {
        let members = self.waiting.group_members(group);
        for key in &members {
            self.waiting.allow(key);
        }
        self.clear_timer_if_idle(group);
        members
    }

    pub(super) fn reject_all(
        &mut self,
        group: &GroupKey,
        reason: &'static str,
        message: &str,
    ) -> usize {
        let members = self.waiting.group_members(group);
        for key in &members {
            self.waiting.reject(key, Refusal::new(reason, message));
        }
        self.clear_timer_if_idle(group);
        members.len()
    }

    pub(super) fn clear_timer_if_idle(&mut self, group: &GroupKey) {
        if self.waiting.group_len(group) == 0
            && let Some(t) = self.deadlines.remove(group)
        {
            self.timers.remove(&(t, group.clone()));
        }
    }
}

impl GangScheduling {
    /// The group `pod` opens a gang cycle for, with its `min_count`: a gang
    /// (not basic policy) whose quorum is not met yet and none of whose
    /// members holds a node at Permit. Late members of a released gang, and
    /// members of a gang partly reserved already, take the per-pod cycle.
    pub fn gang_cycle_group(&self, pod: &PodInfo, cache: &Cache) -> Option<(GroupKey, u32)> {
        let group = pod.group.key()?;
        let min_count = self.min_count(group)?;
        if self.waiting.group_len(group) > 0 || self.quorum_met(cache, group, min_count) {
            return None;
        }
        Some((group.clone(), min_count))
    }

    /// PlacementFeasible: whether a planned gang, whose members are all
    /// assumed now, meets its quorum (counting each task's minimum).
    pub fn placement_feasible(&self, cache: &Cache, group: &GroupKey, min_count: u32) -> bool {
        self.quorum_met(cache, group, min_count)
    }

    /// Permit for a whole planned gang at once (the pod-group cycle's Permit): when the group has its own
    /// barrier (not a composite's) and the plan meets its quorum, every
    /// planned member is allowed in one release. `false` leaves Permit to
    /// each member (a composite child waits for its siblings there).
    pub fn permit_pod_group(
        &mut self,
        group: &GroupKey,
        planned: Vec<crate::model::PodKey>,
        cache: &Cache,
    ) -> bool {
        if self.barrier_scope(group).is_some() || self.hierarchy_refusal(group).is_some() {
            return false;
        }
        let Some(min_count) = self.min_count(group) else {
            return false;
        };
        if !self.quorum_met(cache, group, min_count) {
            return false;
        }
        self.domain_succeeded(group);
        self.notices.push(GangNotice::Released {
            group: group.clone(),
            allowed: planned,
            quorum: min_count,
        });
        true
    }

    /// The first Volcano task short of its minimum among the members
    /// assumed or bound, for messages.
    /// `planned`: members of a plan already undone, counted as assumed.
    pub fn task_shortfall_with<'a>(
        &self,
        group: &GroupKey,
        cache: &Cache,
        planned: impl Iterator<Item = &'a crate::model::PodKey>,
    ) -> Option<String> {
        let def = self.def(&group.definition)?;
        let members = cache.group(group)?;
        let planned: crate::model::PodSet = planned.cloned().collect();
        tasks::shortfall(def, cache, [members.assumed(), members.bound(), &planned])
    }

    /// `min_count` members assumed or bound, and each task of a definition
    /// with `min_task_members` at its own minimum among them.
    pub(super) fn quorum_met(&self, cache: &Cache, group: &GroupKey, min_count: u32) -> bool {
        let Some(members) = cache.group(group) else {
            return false;
        };
        members.assumed_or_bound() >= usize::try_from(min_count).unwrap_or(usize::MAX)
            && self.placed_task_shortfall(group, cache).is_none()
    }

    /// The first task short of its minimum among the assumed or bound members.
    fn placed_task_shortfall(&self, group: &GroupKey, cache: &Cache) -> Option<String> {
        let def = self.def(&group.definition)?;
        let members = cache.group(group)?;
        tasks::shortfall(def, cache, [members.assumed(), members.bound()])
    }
}
