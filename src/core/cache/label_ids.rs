//! `LabelIds`: node label keys and values as small integers, so the per-node
//! passes of the topology plugins (inter-pod affinity, topology spread)
//! compare integers in the node state instead of walking each node's label
//! map (a chain of cold heap strings per node, most of their cost at 5,000
//! nodes).
//!
//! The cache keeps one `LabelIds` in its `ClusterFacts` and gives every node
//! state its labels as a sorted `(key id, value id)` list ([`NodeLabelIds`])
//! when the node arrives or is relabelled. Keys and, per key, values are
//! numbered densely in order of first sight and never renumbered while the
//! table lives, so ids a plugin resolved at PreFilter stay valid all cycle.
//!
//! Every table carries a process-wide unique `stamp`, and so does every node's
//! list (the stamp of the table that made it): a plugin uses a node's ids only
//! when the stamps agree, and otherwise reads the node's labels as strings.
//! That keeps hand-built snapshots (tests, benches: an unmaintained table,
//! stamp 0), clones and rebuilt tables exact; the string path is the oracle.
//!
//! Bound: the table grows with the distinct label values seen. Values of
//! nodes gone or relabelled stay until the table holds more than twice the
//! pairs the live nodes carry plus [`SLACK`]; then it is rebuilt from the
//! live nodes under a fresh stamp (every node re-numbered, O(nodes × labels),
//! amortised over at least as many removals).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

use foldhash::fast::RandomState;

use super::NodeState;

/// Interned values tolerated beyond twice the live nodes' pairs before the
/// table is rebuilt.
pub const SLACK: usize = 4096;

type Ids = HashMap<Box<str>, u32, RandomState>;

/// The interning table (see the module doc).
#[derive(Debug, Default)]
pub struct LabelIds {
    /// 0: not maintained (no node carries ids from it).
    stamp: u64,
    keys: Ids,
    /// Per key id: value → value id.
    values: Vec<Ids>,
    /// Distinct values over all keys.
    interned: usize,
    /// Pairs held by node states carrying this table's stamp.
    live: usize,
    /// Values tolerated beyond twice `live` before a rebuild ([`SLACK`]).
    slack: usize,
}

/// A clone is a separate table: it gets its own stamp, so nodes numbered by
/// the original fall back to strings with it rather than trust ids the two
/// may come to assign differently.
impl Clone for LabelIds {
    fn clone(&self) -> Self {
        LabelIds {
            stamp: if self.stamp == 0 { 0 } else { next_stamp() },
            keys: self.keys.clone(),
            values: self.values.clone(),
            interned: self.interned,
            live: 0,
            slack: self.slack,
        }
    }
}

/// One node's labels as `(key id, value id)`, sorted by key id, with the
/// stamp of the table that numbered them (0: none; read the strings).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeLabelIds {
    stamp: u64,
    pairs: Box<[(u32, u32)]>,
}

impl NodeLabelIds {
    /// The table stamp these ids are valid for (0: no ids).
    pub fn stamp(&self) -> u64 {
        self.stamp
    }

    /// The value id of `key` on the node, when it has the label.
    pub fn value(&self, key: u32) -> Option<u32> {
        self.pairs
            .binary_search_by_key(&key, |(k, _)| *k)
            .ok()
            .and_then(|i| self.pairs.get(i))
            .map(|(_, v)| *v)
    }

    pub fn pairs(&self) -> &[(u32, u32)] {
        &self.pairs
    }
}

/// A `(key id, value id)` pair as one integer (hash-map keys).
pub fn pack(key: u32, value: u32) -> u64 {
    (u64::from(key) << 32) | u64::from(value)
}

impl LabelIds {
    /// A table the cache keeps (its nodes carry ids).
    pub fn maintained() -> Self {
        Self::maintained_with_slack(SLACK)
    }

    /// A maintained table rebuilt past `slack` dead values (tests use 0 to
    /// rebuild often).
    pub fn maintained_with_slack(slack: usize) -> Self {
        LabelIds {
            stamp: next_stamp(),
            slack,
            ..LabelIds::default()
        }
    }

    /// A maintained table numbering `nodes` (tests and benches that build
    /// node states by hand).
    pub fn of_nodes(nodes: &mut [NodeState]) -> Self {
        Self::numbering(nodes, SLACK)
    }

    fn numbering(nodes: &mut [NodeState], slack: usize) -> Self {
        let mut table = LabelIds::maintained_with_slack(slack);
        for node in nodes {
            table.assign(node);
        }
        table
    }

    /// This table's stamp; 0 when not maintained.
    pub fn stamp(&self) -> u64 {
        self.stamp
    }

    /// Whether `node` carries ids from this table.
    pub fn numbered(&self, node: &NodeLabelIds) -> bool {
        self.stamp != 0 && node.stamp == self.stamp
    }

    pub fn key(&self, key: &str) -> Option<u32> {
        self.keys.get(key).copied()
    }

    pub fn value(&self, key: u32, value: &str) -> Option<u32> {
        self.values
            .get(usize::try_from(key).ok()?)?
            .get(value)
            .copied()
    }

    /// Distinct values interned for `key` (value ids are below it).
    pub fn value_count(&self, key: u32) -> usize {
        usize::try_from(key)
            .ok()
            .and_then(|k| self.values.get(k))
            .map_or(0, HashMap::len)
    }

    /// Distinct values interned over all keys.
    pub fn len(&self) -> usize {
        self.interned
    }

    /// Pairs the nodes numbered by this table hold (with repeats).
    pub fn live_pairs(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.interned == 0
    }

    /// Numbers `node`'s labels (a new node, or one whose labels changed
    /// after [`LabelIds::release`]). An unmaintained table leaves the node
    /// without ids; so does a label the table cannot number (more than
    /// `u32::MAX` keys or values: the node is then read as strings).
    pub fn assign(&mut self, node: &mut NodeState) {
        node.label_ids = NodeLabelIds::default();
        if self.stamp == 0 {
            return;
        }
        let Some(mut pairs) = self.intern_all(&node.info.labels) else {
            return;
        };
        pairs.sort_unstable();
        self.live = self.live.saturating_add(pairs.len());
        node.label_ids = NodeLabelIds {
            stamp: self.stamp,
            pairs: pairs.into_boxed_slice(),
        };
    }

    /// Stops counting `node`'s pairs as live (it is removed or about to be
    /// relabelled).
    pub fn release(&mut self, node: &NodeState) {
        if self.numbered(&node.label_ids) {
            self.live = self.live.saturating_sub(node.label_ids.pairs.len());
        }
    }

    /// Rebuilds the table from `nodes` under a fresh stamp when values no
    /// live node carries dominate it (see the module doc's bound).
    pub fn compact_if_sparse(&mut self, nodes: &mut [NodeState]) {
        if self.stamp == 0
            || self.interned <= self.live.saturating_mul(2).saturating_add(self.slack)
        {
            return;
        }
        *self = LabelIds::numbering(nodes, self.slack);
    }

    fn intern_all(&mut self, labels: &BTreeMap<String, String>) -> Option<Vec<(u32, u32)>> {
        labels
            .iter()
            .map(|(k, v)| {
                let key = intern(&mut self.keys, k)?;
                if self.values.len() <= usize::try_from(key).ok()? {
                    self.values.push(Ids::default());
                }
                let values = self.values.get_mut(usize::try_from(key).ok()?)?;
                let before = values.len();
                let value = intern(values, v)?;
                if values.len() > before {
                    self.interned = self.interned.saturating_add(1);
                }
                Some((key, value))
            })
            .collect()
    }

    /// The labels `node`'s ids stand for (tests: the ids decode back).
    #[cfg(test)]
    pub fn decode(&self, node: &NodeLabelIds) -> Option<BTreeMap<String, String>> {
        let name = |ids: &Ids, id: u32| {
            ids.iter()
                .find(|(_, i)| **i == id)
                .map(|(s, _)| s.to_string())
        };
        node.pairs
            .iter()
            .map(|(k, v)| {
                let values = self.values.get(*k as usize)?;
                Some((name(&self.keys, *k)?, name(values, *v)?))
            })
            .collect()
    }
}

/// The id of `s` in `ids`, numbering it next when new; `None` past `u32`.
fn intern(ids: &mut Ids, s: &str) -> Option<u32> {
    if let Some(&id) = ids.get(s) {
        return Some(id);
    }
    let id = u32::try_from(ids.len()).ok()?;
    ids.insert(Box::from(s), id);
    Some(id)
}

/// A fresh table stamp (never 0).
fn next_stamp() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests;
