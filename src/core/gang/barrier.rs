//! The permit barrier: wait until `min_count` members are assumed or bound,
//! then allow every waiting member at once; time out per group; release early
//! when a member is unschedulable; re-evaluate when the group changes.

use std::time::Instant;

use crate::cache::Cache;
use crate::framework::lifecycle::{
    PermitPlugin, PermitVerdict, PostFilterPlugin, Refusal, ReservePlugin, WaitingPods,
};
use crate::model::{GroupKey, GroupPolicy, PodInfo, deadline};

use super::{GangNotice, GangScheduling, gate, tasks};

impl PermitPlugin for GangScheduling {
    fn permit(
        &mut self,
        pod: &PodInfo,
        _node: &str,
        cache: &Cache,
        waiting: &mut WaitingPods,
        now: Instant,
    ) -> PermitVerdict {
        let Some(group) = pod.group.key() else {
            return PermitVerdict::Allow;
        };
        if let Some(msg) = self.hierarchy_refusal(group) {
            return PermitVerdict::Reject(Refusal::new("FailedScheduling", msg));
        }
        if let Some(scope) = self.barrier_scope(group) {
            return self.permit_in_scope(pod, group, &scope, cache, waiting, now);
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
                    let mut allowed = self.allow_all(group, waiting);
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

impl PostFilterPlugin for GangScheduling {
    /// Early release: a member that cannot be placed frees every waiting member
    /// now instead of at the timeout, and the gang backs off as a whole.
    fn post_filter(
        &mut self,
        pod: &PodInfo,
        refusal: &Refusal,
        cache: &Cache,
        waiting: &mut WaitingPods,
        now: Instant,
    ) {
        let Some(group) = pod.group.key() else {
            return;
        };
        if let Some(scope) = self.barrier_scope(group) {
            self.early_release_scope(pod, group, &scope, refusal, cache, waiting, now);
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
        let rejected = self.reject_all(group, waiting, "FailedScheduling", &message);
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

impl ReservePlugin for GangScheduling {
    fn reserve(&mut self, _pod: &PodInfo, _node: &str, _now: Instant) {}

    fn unreserve(&mut self, pod: &PodInfo, waiting: &WaitingPods, _now: Instant) {
        if let Some(group) = pod.group.key() {
            self.clear_timer_if_idle(group, waiting);
        }
    }
}

impl GangScheduling {
    /// Rejects every waiting member of groups whose barrier timed out.
    pub fn expire(&mut self, now: Instant, cache: &Cache, waiting: &mut WaitingPods) {
        self.denied.retain(|_, t| *t > now);
        while let Some((t, group)) = self.timers.first().cloned() {
            if t > now {
                break;
            }
            self.timers.remove(&(t, group.clone()));
            self.deadlines.remove(&group);
            if let Some(scope) = self.barrier_scope(&group) {
                self.expire_scope(&group, &scope, cache, waiting);
                continue;
            }
            if waiting.group_len(&group) == 0 {
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
            let rejected = self.reject_all(&group, waiting, "FailedScheduling", &message);
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
    pub fn reevaluate(&mut self, group: &GroupKey, cache: &Cache, waiting: &mut WaitingPods) {
        if let Some(scope) = self.barrier_scope(group) {
            self.reevaluate_scope(group, &scope, cache, waiting);
            return;
        }
        if waiting.group_len(group) == 0 {
            self.clear_timer_if_idle(group, waiting);
            return;
        }
        if let Some(msg) = gate::scheduler_conflict(group, cache) {
            self.reject_all(group, waiting, "FailedScheduling", &msg);
            return;
        }
        let refusal = self.hierarchy_refusal(group).map(Err);
        match refusal.unwrap_or_else(|| self.policy(group)) {
            Err(msg) => {
                let msg = format!("rejected while waiting at permit: {msg}");
                self.reject_all(group, waiting, "FailedScheduling", &msg);
            }
            Ok(GroupPolicy::Basic) => {
                self.allow_all(group, waiting);
            }
            Ok(GroupPolicy::Gang { min_count, .. }) => {
                if self.quorum_met(cache, group, min_count) {
                    self.domain_succeeded(group);
                    let allowed = self.allow_all(group, waiting);
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

    pub(super) fn allow_all(
        &mut self,
        group: &GroupKey,
        waiting: &mut WaitingPods,
    ) -> Vec<crate::model::PodKey> {
        let members = waiting.group_members(group);
        for key in &members {
            waiting.allow(key);
        }
        self.clear_timer_if_idle(group, waiting);
        members
    }

    pub(super) fn reject_all(
        &mut self,
        group: &GroupKey,
        waiting: &mut WaitingPods,
        reason: &'static str,
        message: &str,
    ) -> usize {
        let members = waiting.group_members(group);
        for key in &members {
            waiting.reject(key, Refusal::new(reason, message));
        }
        self.clear_timer_if_idle(group, waiting);
        members.len()
    }

    pub(super) fn clear_timer_if_idle(&mut self, group: &GroupKey, waiting: &WaitingPods) {
        if waiting.group_len(group) == 0
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
    pub fn gang_cycle_group(
        &self,
        pod: &PodInfo,
        cache: &Cache,
        waiting: &WaitingPods,
    ) -> Option<(GroupKey, u32)> {
        let group = pod.group.key()?;
        let min_count = self.min_count(group)?;
        if waiting.group_len(group) > 0 || self.quorum_met(cache, group, min_count) {
            return None;
        }
        Some((group.clone(), min_count))
    }

    /// Whether a planned gang, whose members are all assumed now, meets its
    /// quorum (counting each task's minimum).
    pub fn plan_meets_quorum(&self, cache: &Cache, group: &GroupKey, min_count: u32) -> bool {
        self.quorum_met(cache, group, min_count)
    }

    /// Permit for a whole planned gang at once: when the group has its own
    /// barrier (not a composite's) and the plan meets its quorum, every
    /// planned member is allowed in one release. `false` leaves Permit to
    /// each member (a composite child waits for its siblings there).
    pub fn release_planned(
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
