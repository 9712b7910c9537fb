//! `TopologyCounts`: a number per topology pair (`topologyKey`, value), the
//! currency of inter-pod affinity — how many matching pods a zone holds for
//! Filter, how much a zone is preferred for Score. PreFilter and PreScore
//! count by string; `PairCounts` is the same numbers renumbered by the
//! cache's `LabelIds`, which the per-node Filter and Score read for the nodes
//! that table numbered (integer compares instead of label-map walks).

use std::collections::{BTreeMap, HashMap};

use foldhash::fast::RandomState;

use crate::cache::{LabelIds, NodeLabelIds, NodeState, pack_label_pair};

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

/// `TopologyCounts` by `(key id, value id)` of one `LabelIds` table.
#[derive(Debug, Default)]
pub(super) struct PairCounts {
    /// The table's stamp: these ids mean nothing for other nodes.
    stamp: u64,
    counts: HashMap<u64, i64, RandomState>,
    /// Key ids with any count, for the passes over every pair of a node.
    keys: Vec<u32>,
}

impl PairCounts {
    /// `counts` renumbered by `table`; `None` when the table is not
    /// maintained. A pair the table lacks is dropped: no node it numbered
    /// carries it (nodes it did not number read `counts` itself).
    pub(super) fn of(counts: &TopologyCounts, table: &LabelIds) -> Option<Self> {
        if table.stamp() == 0 {
            return None;
        }
        let mut out = PairCounts {
            stamp: table.stamp(),
            ..PairCounts::default()
        };
        for (key, values) in &counts.0 {
            let Some(k) = table.key(key) else { continue };
            out.keys.push(k);
            for (value, n) in values {
                if let Some(v) = table.value(k, value) {
                    out.counts.insert(pack_label_pair(k, v), *n);
                }
            }
        }
        Some(out)
    }

    /// Whether `node`'s ids come from this table.
    pub(super) fn numbers(&self, node: &NodeLabelIds) -> bool {
        node.stamp() == self.stamp
    }

    fn get(&self, key: u32, value: u32) -> i64 {
        self.counts
            .get(&pack_label_pair(key, value))
            .copied()
            .unwrap_or(0)
    }

    /// Whether any pair of a node it numbers has a positive count.
    pub(super) fn any_positive_on(&self, node: &NodeLabelIds) -> bool {
        self.keys
            .iter()
            .any(|k| node.value(*k).is_some_and(|v| self.get(*k, v) > 0))
    }

    /// The sum of the counts of every pair of a node it numbers.
    pub(super) fn sum_on(&self, node: &NodeLabelIds) -> i64 {
        self.keys
            .iter()
            .filter_map(|k| node.value(*k).map(|v| self.get(*k, v)))
            .fold(0i64, |sum, n| sum.saturating_add(n))
    }
}

/// One count structure in both forms: `ids` for the nodes its table
/// numbered, `strings` for any other node (hand-built snapshots).
#[derive(Debug, Default)]
pub(super) struct Counts {
    pub strings: TopologyCounts,
    pub ids: Option<PairCounts>,
}

impl Counts {
    pub(super) fn new(strings: TopologyCounts, table: &LabelIds) -> Self {
        let ids = PairCounts::of(&strings, table);
        Counts { strings, ids }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.strings.is_empty()
    }

    /// The count of `node`'s pair for the topology key `key` (with its id
    /// `key_id` in the table, `None` when the table has never seen it);
    /// `None` when the node lacks the key.
    pub(super) fn on_node(&self, key: &str, key_id: Option<u32>, node: &NodeState) -> Option<i64> {
        match &self.ids {
            Some(ids) if ids.numbers(&node.label_ids) => {
                let k = key_id?;
                node.label_ids.value(k).map(|v| ids.get(k, v))
            }
            _ => node.info.labels.get(key).map(|v| self.strings.get(key, v)),
        }
    }

    pub(super) fn any_positive_on(&self, node: &NodeState) -> bool {
        match &self.ids {
            Some(ids) if ids.numbers(&node.label_ids) => ids.any_positive_on(&node.label_ids),
            _ => self.strings.any_positive_on(&node.info.labels),
        }
    }

    pub(super) fn sum_on(&self, node: &NodeState) -> i64 {
        match &self.ids {
            Some(ids) if ids.numbers(&node.label_ids) => ids.sum_on(&node.label_ids),
            _ => self.strings.sum_on(&node.info.labels),
        }
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
