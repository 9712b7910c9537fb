//! `TopologyCounts`: a number per topology pair (`topologyKey`, value), the
//! currency of inter-pod affinity — how many matching pods a zone holds for
//! Filter, how much a zone is preferred for Score.

use std::collections::{BTreeMap, HashMap};

use foldhash::fast::RandomState;

/// Counts keyed by topology key, then by the key's value. Nested so that a
/// node is checked with one lookup per distinct key, not per label. Hashed
/// with foldhash: Filter and Score look up every candidate node, and
/// SipHash was most of their cost.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct TopologyCounts(HashMap<String, HashMap<String, i64, RandomState>, RandomState>);

impl TopologyCounts {
    /// Adds `delta` to the pair of `key` on a node with `labels`; a node
    /// without the key counts nowhere (kube-scheduler too).
    pub(super) fn add_on(&mut self, key: &str, labels: &BTreeMap<String, String>, delta: i64) {
        if let Some(value) = labels.get(key) {
            self.add(key, value, delta);
        }
    }

    pub(super) fn add(&mut self, key: &str, value: &str, delta: i64) {
        // Look up before inserting so the common repeat costs no allocation.
        let values = match self.0.get_mut(key) {
            Some(values) => values,
            None => self.0.entry(key.to_owned()).or_default(),
        };
        match values.get_mut(value) {
            Some(n) => *n = n.saturating_add(delta),
            None => {
                values.insert(value.to_owned(), delta);
            }
        }
    }

    pub(super) fn get(&self, key: &str, value: &str) -> i64 {
        self.0
            .get(key)
            .and_then(|values| values.get(value))
            .copied()
            .unwrap_or(0)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds every count of `other` into `self` (merging parallel partials).
    pub(super) fn merge(&mut self, other: TopologyCounts) {
        if self.is_empty() {
            *self = other;
            return;
        }
        for (key, values) in other.0 {
            for (value, n) in values {
                self.add(&key, &value, n);
            }
        }
    }

    /// Whether any pair a node with `labels` belongs to has a positive count.
    pub(super) fn any_positive_on(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().any(|(key, values)| {
            labels
                .get(key)
                .and_then(|v| values.get(v))
                .is_some_and(|n| *n > 0)
        })
    }

    /// The sum of the counts of every pair a node with `labels` belongs to.
    pub(super) fn sum_on(&self, labels: &BTreeMap<String, String>) -> i64 {
        self.0
            .iter()
            .filter_map(|(key, values)| labels.get(key).and_then(|v| values.get(v)))
            .fold(0i64, |sum, n| sum.saturating_add(*n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn counts_per_pair_and_sums_per_node() {
        let mut c = TopologyCounts::default();
        let a = labels(&[("zone", "a"), ("host", "n1")]);
        c.add_on("zone", &a, 2);
        c.add_on("host", &a, -5);
        c.add_on("rack", &a, 7);
        assert_eq!(c.get("zone", "a"), 2);
        assert_eq!(c.get("rack", "x"), 0);
        assert_eq!(c.sum_on(&a), -3);
        assert!(c.any_positive_on(&a));
        assert!(!c.any_positive_on(&labels(&[("host", "n1")])));
        let mut other = TopologyCounts::default();
        other.add("zone", "a", 1);
        other.add("zone", "b", 1);
        c.merge(other);
        assert_eq!((c.get("zone", "a"), c.get("zone", "b")), (3, 1));
        c.add("zone", "a", i64::MAX);
        assert_eq!(c.get("zone", "a"), i64::MAX, "saturates");
    }
}
