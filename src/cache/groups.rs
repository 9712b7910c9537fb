//! Per-group membership as the cache sees it: which members are pending,
//! assumed or bound, and which scheduler names the group's pods carry.
//!
//! Only pods this scheduler serves count as members (gang-semantics "Words");
//! scheduler names are recorded for every pod referencing the group so that a
//! group split across schedulers can be detected and reported.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::model::{PodKey, PodSet};

/// Where a member stands from the cache's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    Pending,
    Assumed,
    Bound,
}

/// The members of one group, by state.
#[derive(Debug, Clone, Default)]
pub struct GroupMembers {
    pending: PodSet,
    assumed: PodSet,
    bound: PodSet,
    /// Scheduler name → number of live pods referencing the group with it.
    scheduler_names: BTreeMap<Arc<str>, usize>,
}

impl GroupMembers {
    pub fn pending(&self) -> &PodSet {
        &self.pending
    }

    pub fn assumed(&self) -> &PodSet {
        &self.assumed
    }

    pub fn bound(&self) -> &PodSet {
        &self.bound
    }

    /// Members that hold (or are about to hold) a node: what the barrier counts.
    pub fn assumed_or_bound(&self) -> usize {
        self.assumed.len() + self.bound.len()
    }

    /// Members observed at all (what the gate counts: pending or bound, the
    /// assumed ones being pending pods with a reservation).
    pub fn observed(&self) -> usize {
        self.pending.len() + self.assumed.len() + self.bound.len()
    }

    pub fn scheduler_names(&self) -> &BTreeMap<Arc<str>, usize> {
        &self.scheduler_names
    }

    pub fn is_empty(&self) -> bool {
        self.observed() == 0 && self.scheduler_names.is_empty()
    }

    pub(super) fn insert(&mut self, key: &PodKey, state: MemberState) {
        self.set_for(state).insert(key.clone());
    }

    pub(super) fn remove(&mut self, key: &PodKey, state: MemberState) {
        self.set_for(state).remove(key);
    }

    pub(super) fn add_scheduler(&mut self, name: &Arc<str>) {
        *self.scheduler_names.entry(name.clone()).or_insert(0) += 1;
    }

    pub(super) fn remove_scheduler(&mut self, name: &Arc<str>) {
        if let Some(n) = self.scheduler_names.get_mut(name) {
            *n -= 1;
            if *n == 0 {
                self.scheduler_names.remove(name);
            }
        }
    }

    fn set_for(&mut self, state: MemberState) -> &mut PodSet {
        match state {
            MemberState::Pending => &mut self.pending,
            MemberState::Assumed => &mut self.assumed,
            MemberState::Bound => &mut self.bound,
        }
    }
}
