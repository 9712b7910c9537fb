//! The gang's bookkeeping beside its extension points: the pods waiting at
//! Permit and their verdicts, the released gangs whose members are still
//! binding (the quorum-to-all-bound measurement), the groups whose gate
//! messages need rewriting, and the capped timeouts already reported.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::framework::lifecycle::{Verdict, WaitingPod, WaitingPods};
use crate::model::{GroupDef, GroupKey, PodKey};

use super::GangScheduling;

/// A gang whose quorum was released, until every released member is bound.
#[derive(Debug)]
pub(super) struct ReleasedGang {
    at: Instant,
    outstanding: HashSet<PodKey>,
}

impl GangScheduling {
    /// The pods parked at the barrier.
    pub fn waiting(&self) -> &WaitingPods {
        &self.waiting
    }

    /// Verdicts on waiting pods since the last call, in the order made.
    pub fn take_decided(&mut self) -> Vec<(WaitingPod, Verdict)> {
        self.waiting.take_decided()
    }

    /// Starts the quorum-to-all-bound clock for the members a release allowed.
    pub fn track_release(&mut self, group: GroupKey, allowed: Vec<PodKey>, now: Instant) {
        let outstanding: HashSet<PodKey> = allowed.into_iter().collect();
        if !outstanding.is_empty() {
            self.released.insert(
                group,
                ReleasedGang {
                    at: now,
                    outstanding,
                },
            );
        }
    }

    /// A released member of `group` was confirmed bound; when it was the
    /// last one, how long the gang took from its release.
    pub fn confirm_bound(
        &mut self,
        group: &GroupKey,
        key: &PodKey,
        now: Instant,
    ) -> Option<Duration> {
        let r = self.released.get_mut(group)?;
        r.outstanding.remove(key);
        if !r.outstanding.is_empty() {
            return None;
        }
        let at = r.at;
        self.released.remove(group);
        Some(now.saturating_duration_since(at))
    }

    /// A released member will not bind after all (deleted, bind failed):
    /// its gang no longer waits for it.
    pub fn forget_released(&mut self, key: &PodKey) {
        self.released.retain(|_, r| {
            r.outstanding.remove(key);
            !r.outstanding.is_empty()
        });
    }

    /// The group's gate messages may have changed.
    pub fn mark_dirty(&mut self, group: &GroupKey) {
        self.dirty.insert(group.clone());
    }

    /// The groups marked since the last call.
    pub fn take_dirty(&mut self) -> Vec<GroupKey> {
        self.dirty.drain().collect()
    }

    /// Whether `def`'s capped timeout is news (not reported for this value
    /// yet); a definition without a cap forgets the one reported.
    pub fn newly_capped(&mut self, def: &GroupDef) -> bool {
        let Some(capped) = def.timeout_capped.as_deref() else {
            self.capped.remove(&def.key);
            return false;
        };
        if self.capped.get(&def.key) == Some(&capped.requested) {
            return false;
        }
        self.capped
            .insert(def.key.clone(), capped.requested.clone());
        true
    }
}
