//! Per-group membership as the cache sees it: which members are pending,
//! assumed or bound, and which scheduler names the group's pods carry.
//!
//! Only pods this scheduler serves count as members (gang-semantics "Words");
//! scheduler names are recorded for every pod referencing the group so that a
//! group split across schedulers can be detected and reported.

use std::collections::HashSet;
use std::sync::Arc;

use crate::model::{GroupKey, PodKey, PodSet};

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
            Err(i) => {
                // Nearly every group has one name: room for exactly that,
                // not the four a first push reserves.
                self.scheduler_names.reserve_exact(1);
                self.scheduler_names.insert(i, (name.clone(), 1));
            }
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

/// The groups observed for one definition: nearly always one (a definition
/// without replicas), held without a table of its own. A hash set of one
/// allocates room for four keys, ~240 bytes per group at 25,000 groups.
#[derive(Debug, Clone)]
pub(super) enum DefGroups {
    One(GroupKey),
    Many(HashSet<GroupKey>),
}

impl DefGroups {
    pub(super) fn insert(&mut self, group: &GroupKey) {
        match self {
            DefGroups::One(g) if g == group => {}
            DefGroups::One(g) => {
                let set = HashSet::from([g.clone(), group.clone()]);
                *self = DefGroups::Many(set);
            }
            DefGroups::Many(set) => {
                if !set.contains(group) {
                    set.insert(group.clone());
                }
            }
        }
    }

    /// Removes `group`; returns true when none is left.
    pub(super) fn remove(&mut self, group: &GroupKey) -> bool {
        match self {
            DefGroups::One(g) => g == group,
            DefGroups::Many(set) => {
                set.remove(group);
                if set.len() == 1
                    && let Some(last) = set.iter().next().cloned()
                {
                    *self = DefGroups::One(last);
                    return false;
                }
                set.is_empty()
            }
        }
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &GroupKey> {
        let (one, many) = match self {
            DefGroups::One(g) => (Some(g), None),
            DefGroups::Many(set) => (None, Some(set)),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::driver::fixtures::group_key;

    fn replica(name: &str) -> GroupKey {
        let mut g = group_key("lws");
        g.replica = Some(Arc::from(name));
        g
    }

    #[test]
    fn a_definitions_groups_grow_from_one_and_shrink_back() {
        let (a, b, c) = (replica("0"), replica("1"), replica("2"));
        let mut groups = DefGroups::One(a.clone());
        groups.insert(&a);
        assert!(matches!(groups, DefGroups::One(_)), "the same group again");
        groups.insert(&b);
        groups.insert(&c);
        let mut seen: Vec<_> = groups.iter().cloned().collect();
        seen.sort();
        assert_eq!(seen, vec![a.clone(), b.clone(), c.clone()]);
        assert!(!groups.remove(&b));
        assert!(!groups.remove(&a));
        assert!(matches!(&groups, DefGroups::One(g) if *g == c));
        assert!(!groups.remove(&a), "not a member: nothing changes");
        assert!(groups.remove(&c), "the last one leaves");
    }
}
