//! One copy of values that repeat across objects: the pods stamped from one
//! template (a gang's members, a Deployment's replicas) carry equal label
//! maps, and a scheduler holding 100,000 pods keeps each distinct map once
//! (memory per object). Strings repeat the same way: namespaces,
//! scheduler names, images, group names, the node a pod is bound to. The
//! decoder hands each new value to a [`Pool`] and keeps what comes back.

use std::collections::{BTreeMap, HashSet};
use std::hash::Hash;
use std::sync::Arc;

use foldhash::fast::RandomState;

/// Entries below which the pool is never swept.
const MIN_SWEEP: usize = 1024;

/// Equal values shared through one `Arc`. The pool holds a reference to
/// each value it has handed out; a value only the pool still holds is
/// dropped by the next sweep, which runs when the pool has doubled since
/// the last one — so it holds at most about twice the values in use, and a
/// sweep costs O(1) per insertion amortized.
#[derive(Debug)]
pub struct Pool<T: ?Sized> {
    values: HashSet<Arc<T>, RandomState>,
    sweep_at: usize,
}

impl<T: ?Sized> Default for Pool<T> {
    fn default() -> Self {
        Pool {
            values: HashSet::default(),
            sweep_at: MIN_SWEEP,
        }
    }
}

impl<T: Eq + Hash + ?Sized> Pool<T> {
    /// The pool's copy of `value` if it holds an equal one, else `value`,
    /// now also held by the pool.
    pub fn share(&mut self, value: Arc<T>) -> Arc<T> {
        if let Some(held) = self.values.get(&*value) {
            return held.clone();
        }
        self.values.insert(value.clone());
        if self.values.len() >= self.sweep_at {
            self.values.retain(|v| Arc::strong_count(v) > 1);
            self.sweep_at = self.values.len().saturating_mul(2).max(MIN_SWEEP);
        }
        value
    }

    /// The pool's copy of a value equal to `value`, if it holds one.
    pub fn get(&self, value: &T) -> Option<Arc<T>> {
        self.values.get(value).cloned()
    }

    /// `share` for a slot in place (strings inside a decoded object).
    pub fn share_in(&mut self, slot: &mut Arc<T>) {
        *slot = self.share(Arc::clone(slot));
    }

    /// Distinct values held.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

/// What a pod decoder shares pods' repeated values through
/// (`PodInfo::share_with`): label maps, strings, image lists and constraint sets.
#[derive(Debug, Default)]
pub struct PodPools {
    pub labels: Pool<BTreeMap<String, String>>,
    pub strings: Pool<str>,
    pub images: Pool<[Arc<str>]>,
    pub constraints: Pool<super::Constraints>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn strings_are_shared_too() {
        let mut pool: Pool<str> = Pool::default();
        let a = pool.share(Arc::from("default"));
        let mut b: Arc<str> = Arc::from("default");
        pool.share_in(&mut b);
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(pool.len(), 1);
    }

    #[test]
    fn equal_values_come_back_as_one() {
        let mut pool = Pool::default();
        let a = pool.share(Arc::new(vec![1, 2]));
        let b = pool.share(Arc::new(vec![1, 2]));
        let c = pool.share(Arc::new(vec![3]));
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(pool.len(), 2);
    }

    proptest! {
        /// Whatever the order of sharing and dropping: every value comes
        /// back equal to what went in, equal live values are one copy, and
        /// the pool never holds more than twice the most values ever live
        /// at once (or the sweep floor).
        #[test]
        fn shares_equal_values_and_stays_bounded(
            ops in prop::collection::vec((0u16..3000, any::<bool>()), 1..6000)
        ) {
            let mut pool = Pool::default();
            let mut live: Vec<Arc<u16>> = Vec::new();
            let mut peak = 0;
            for (v, keep) in ops {
                let got = pool.share(Arc::new(v));
                prop_assert_eq!(*got, v);
                if let Some(same) = live.iter().find(|l| ***l == v) {
                    prop_assert!(Arc::ptr_eq(same, &got));
                }
                if keep {
                    live.push(got);
                } else if !live.is_empty() {
                    live.swap_remove(usize::from(v) % live.len());
                }
                let distinct: HashSet<u16> = live.iter().map(|l| **l).collect();
                peak = peak.max(distinct.len() + 1);
                prop_assert!(pool.len() <= (2 * peak).max(MIN_SWEEP));
            }
        }
    }
}
