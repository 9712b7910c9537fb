//! The permit barrier of a gang CompositePodGroup: it spans every PodGroup
//! under the topmost gang composite (the scope). A member is allowed only
//! when its own group is at quorum and every gang composite above it has
//! `minGroupCount` children at theirs (assumed or bound); then every group
//! of the scope in that state is released at once. A timeout or an
//! unschedulable member rejects the waiting members of the whole scope, so
//! no child keeps a partial reservation (I1 for the composite).

use std::time::Instant;

use crate::cache::Cache;
use crate::framework::lifecycle::{PermitVerdict, Refusal};
use crate::model::{GroupDef, GroupKey, GroupPolicy, GroupSource, PodInfo, PodKey, deadline};

use super::hierarchy::{ChainError, Count};
use super::{GangNotice, GangScheduling, gate};

impl GangScheduling {
    /// A PodGroup naming a parent whose hierarchy is unusable (parent not
    /// observed, cycle, too deep, invalid composite): why its members may
    /// not pass Permit. Never placed as if it had no parent.
    pub(super) fn hierarchy_refusal(&self, group: &GroupKey) -> Option<String> {
        self.def(&group.definition).and_then(GroupDef::parent_key)?;
        match self.ancestors(&group.definition) {
            Ok(_) => None,
            Err(ChainError::Missing(m) | ChainError::Invalid(m)) => Some(m),
        }
    }

    /// Whether the group's members may bind now: own quorum and every gang
    /// composite above it satisfied, counting assumed or bound members.
    fn releasable(&self, group: &GroupKey, cache: &Cache) -> bool {
        self.own_quorum_met(group, cache, Count::Placed)
            && self.chain_satisfied(group, cache, Count::Placed).is_ok()
    }

    pub(super) fn permit_in_scope(
        &mut self,
        pod: &PodInfo,
        group: &GroupKey,
        scope: &[GroupKey],
        cache: &Cache,
        now: Instant,
    ) -> PermitVerdict {
        let own_timeout = match self.policy(group) {
            Err(msg) => return PermitVerdict::Reject(Refusal::new("FailedScheduling", msg)),
            Ok(GroupPolicy::Gang {
                schedule_timeout, ..
            }) => schedule_timeout,
            Ok(GroupPolicy::Basic) => None,
        };
        if self.releasable(group, cache) {
            self.release_scope(group, Some(&pod.key), scope, cache);
            return PermitVerdict::Allow;
        }
        let timeout = own_timeout.or_else(|| self.composite_timeout(group));
        self.start_timer(pod, group, timeout, now);
        PermitVerdict::Wait
    }

    /// The timeout of the nearest gang composite above that sets one.
    fn composite_timeout(&self, group: &GroupKey) -> Option<std::time::Duration> {
        let chain = self.ancestors(&group.definition).ok()?;
        chain
            .iter()
            .find_map(|c| match self.def(c).map(|d| &d.policy) {
                Some(Ok(GroupPolicy::Gang {
                    schedule_timeout, ..
                })) => *schedule_timeout,
                _ => None,
            })
    }

    /// Allows the waiting members of every releasable group of the scope;
    /// reports each group released and the composites above `trigger`.
    fn release_scope(
        &mut self,
        trigger: &GroupKey,
        arriving: Option<&PodKey>,
        scope: &[GroupKey],
        cache: &Cache,
    ) {
        for g in scope {
            let is_trigger = g == trigger;
            if !is_trigger && (self.waiting.group_len(g) == 0 || !self.releasable(g, cache)) {
                continue;
            }
            self.domain_succeeded(g);
            let mut allowed = self.allow_all(g);
            if is_trigger && let Some(key) = arriving {
                allowed.push(key.clone());
            }
            let quorum = self.min_count(g).unwrap_or(1);
            self.notices.push(GangNotice::Released {
                group: g.clone(),
                allowed,
                quorum,
            });
        }
        for composite in self.ancestors(&trigger.definition).unwrap_or_default() {
            let quorum = self
                .min_count(&GroupKey::new(composite.clone()))
                .unwrap_or(1);
            self.notices.push(GangNotice::Released {
                group: GroupKey::new(composite),
                allowed: Vec::new(),
                quorum,
            });
        }
    }

    fn reject_scope(&mut self, scope: &[GroupKey], message: &str) -> usize {
        scope
            .iter()
            .map(|g| self.reject_all(g, "FailedScheduling", message))
            .sum()
    }

    /// The composite above `group` that a scope-wide rejection is reported on.
    fn top_composite(&self, scope_member: &GroupKey) -> Option<GroupKey> {
        let chain = self.ancestors(&scope_member.definition).ok()?;
        chain
            .into_iter()
            .rev()
            .find(|c| c.source == GroupSource::CompositePodGroup)
            .map(GroupKey::new)
    }

    /// An unschedulable member rejects the whole scope at once (unless its
    /// group was already released) and denies every group of it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn early_release_scope(
        &mut self,
        pod: &PodInfo,
        group: &GroupKey,
        scope: &[GroupKey],
        refusal: &Refusal,
        cache: &Cache,
        now: Instant,
    ) {
        if self.releasable(group, cache) {
            return;
        }
        let top = self.top_composite(group);
        let label = top.as_ref().unwrap_or(group);
        let message = format!(
            "{label} released early: member {} of {group} is unschedulable: {}",
            pod.key, refusal.message
        );
        let rejected = self.reject_scope(scope, &message);
        let denied_until = deadline::after(now, self.args_for(pod).group_backoff);
        for g in scope {
            self.avoid_current_domain(g);
            self.denied.insert(g.clone(), denied_until);
        }
        for g in std::iter::once(group.clone()).chain(top) {
            self.notices.push(GangNotice::EarlyReleased {
                group: g,
                trigger: pod.key.clone(),
                rejected,
                denied_until,
                message: message.clone(),
            });
        }
    }

    /// A member group's timer fired: the whole scope is rejected.
    pub(super) fn expire_scope(&mut self, group: &GroupKey, scope: &[GroupKey], cache: &Cache) {
        if scope.iter().all(|g| self.waiting.group_len(g) == 0) {
            return;
        }
        let why = match self.chain_satisfied(group, cache, Count::Placed) {
            Err(short) => short,
            Ok(()) => {
                let have = cache.group(group).map_or(0, |m| m.assumed_or_bound());
                let min = self.min_count(group).unwrap_or(1);
                format!("{have}/{min} members assumed or bound")
            }
        };
        let message = format!("{group} timed out waiting at permit: {why}");
        let rejected = self.reject_scope(scope, &message);
        for g in scope {
            self.avoid_current_domain(g);
        }
        let top = self.top_composite(group);
        for g in std::iter::once(group.clone()).chain(top) {
            self.notices.push(GangNotice::TimedOut {
                group: g,
                rejected,
                message: message.clone(),
            });
        }
    }

    /// Something about a group of the scope changed: reject on conflicts
    /// or a malformed definition, else release whatever is releasable.
    pub(super) fn reevaluate_scope(&mut self, group: &GroupKey, scope: &[GroupKey], cache: &Cache) {
        if scope.iter().all(|g| self.waiting.group_len(g) == 0) {
            for g in scope {
                self.clear_timer_if_idle(g);
            }
            self.clear_timer_if_idle(group);
            return;
        }
        if let Some(msg) = gate::scheduler_conflict(group, cache) {
            self.reject_scope(scope, &msg);
            return;
        }
        if let Err(msg) = self.policy(group) {
            let msg = format!("rejected while waiting at permit: {msg}");
            self.reject_scope(scope, &msg);
            return;
        }
        if let Some(trigger) = scope
            .iter()
            .find(|g| self.waiting.group_len(g) > 0 && self.releasable(g, cache))
        {
            let trigger = trigger.clone();
            self.release_scope(&trigger, None, scope, cache);
        }
    }
}
