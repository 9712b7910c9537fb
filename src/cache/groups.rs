//! Per-group membership as the cache sees it: which members are pending,
//! assumed or bound, and which scheduler names the group's pods carry.
//!
//! Only pods this scheduler serves count as members (gang-semantics "Words");
//! scheduler names are recorded for every pod referencing the group so that a
//! group split across schedulers can be detected and reported.

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
    /// Scheduler name → number of live pods referencing the group with it,
    /// sorted by name (almost always one entry: a vector, not a tree node
    /// per group).
    scheduler_names: Vec<(Arc<str>, usize)>,
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

    pub fn scheduler_names(&self) -> &[(Arc<str>, usize)] {
        &self.scheduler_names
    }

    pub fn is_empty(&self) -> bool {
        self.observed() == 0 && self.scheduler_names.is_empty()
    }

    pub(super) fn insert(&mut self, key: &PodKey, state: MemberState) {
        self.set_for(state).insert(key.clone());
    }

    pub(super) fn remove(&mut self, key: &PodKey, state: MemberState) {
        let set = self.set_for(state);
        set.remove(key);
        // A set keeps its table when emptied; every gang empties its
        // pending and assumed sets on the way to bound, and 100,000 pods'
        // worth of empty tables is memory held for nothing.
        if set.is_empty() {
            *set = PodSet::default();
        }
    }

    /// Where `name` is (`Ok`) or would go (`Err`) in the sorted names.
    fn scheduler_slot(&self, name: &str) -> Result<usize, usize> {
        self.scheduler_names
            .binary_search_by(|(n, _)| (**n).cmp(name))
    }

    pub(super) fn add_scheduler(&mut self, name: &Arc<str>) {
        match self.scheduler_slot(name) {
            Ok(i) => {
                let n = &mut self.scheduler_names[i].1;
                *n = n.saturating_add(1);
            }
            Err(i) => self.scheduler_names.insert(i, (name.clone(), 1)),
        }
    }

    pub(super) fn remove_scheduler(&mut self, name: &Arc<str>) {
        if let Ok(i) = self.scheduler_slot(name) {
            let n = &mut self.scheduler_names[i].1;
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.scheduler_names.remove(i);
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
