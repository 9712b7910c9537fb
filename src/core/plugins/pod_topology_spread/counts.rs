//! What PodTopologySpread counts, and the memo that keeps counting cheap.
//!
//! Spreading needs, every cycle, the number of matching pods on every node of
//! the cluster and every node's topology domain. Recounting 50,000 pods per
//! cycle costs milliseconds (each pod is a cache miss), so both are memoised
//! across cycles per node, keyed on the node's `generation` stamp: stamps are
//! unique per node state (a new or changed node gets a fresh one), so an equal
//! stamp means the same node with the same pods and labels and the memoised
//! value is exact. Only nodes that changed since the last cycle are recounted.

use std::collections::HashMap;
use std::sync::Arc;

use crate::cache::{LabelIds, NodeState};
use crate::model::{LabelSelector, PodInfo};

/// A node that lacks the topology key.
pub(super) const MISSING: u32 = u32::MAX;

/// Memos kept, per kind, before they are dropped and rebuilt: bounds memory
/// (each holds a few bytes per node) against a stream of distinct selectors.
const MAX_MEMOS: usize = 64;

/// Matching pods on one node's pod list, as upstream's
/// `countPodsMatchSelector`: pods being deleted, finished pods and pods of
/// other namespaces never count, nor does anything for an empty selector.
pub(super) fn count_matching(pods: &[Arc<PodInfo>], selector: &LabelSelector, ns: &str) -> u32 {
    if selector.is_empty() {
        return 0;
    }
    let n = pods
        .iter()
        .filter(|p| {
            !p.deleting
                && !p.phase.is_terminal()
                && *p.key.namespace == *ns
                && selector.matches(&p.labels)
        })
        .count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Interned values of one topology key: value → dense id.
pub(super) type DomainIds = Arc<HashMap<Box<str>, u32>>;

#[derive(Default)]
struct DomainIndex {
    ids: DomainIds,
    /// Per node position: (stamp, label-id stamp, domain id or `MISSING`).
    per_node: Vec<(u64, u64, u32)>,
    /// Per domain id: its value's id in the `LabelIds` table this index is
    /// kept for (`MISSING` until a node that table numbered shows it).
    value_ids: Arc<Vec<u32>>,
}

/// Every node's domain for one topology key.
pub(super) struct NodeDomains {
    /// Per node position: domain id, or `MISSING` when it lacks the key.
    pub of_node: Vec<u32>,
    /// Domain ids by topology value.
    pub ids: DomainIds,
    /// Per domain id: the value's id in the snapshot's `LabelIds` table.
    pub value_ids: Arc<Vec<u32>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct MatchKey {
    namespace: Arc<str>,
    selector: LabelSelector,
}

/// The per-node memos of one plugin instance (used only from PreFilter and
/// PreScore, which run on the scheduling thread).
#[derive(Default)]
pub(super) struct Memo {
    matches: HashMap<MatchKey, Vec<(u64, u32)>>,
    /// By topology key and the stamp of the `LabelIds` table in use.
    domains: HashMap<(String, u64), DomainIndex>,
}

impl Memo {
    /// Matching pods per node position, for pods of `namespace`.
    pub fn counts(
        &mut self,
        nodes: &[NodeState],
        namespace: &Arc<str>,
        selector: &LabelSelector,
    ) -> Vec<u32> {
        if selector.is_empty() {
            return vec![0; nodes.len()];
        }
        let key = MatchKey {
            namespace: namespace.clone(),
            selector: selector.clone(),
        };
        if self.matches.len() >= MAX_MEMOS && !self.matches.contains_key(&key) {
            self.matches.clear();
        }
        let memo = self.matches.entry(key).or_default();
        memo.resize(nodes.len(), (0, 0));
        nodes
            .iter()
            .zip(memo.iter_mut())
            .map(|(node, slot)| {
                if slot.0 != node.generation {
                    *slot = (
                        node.generation,
                        count_matching(&node.pods, selector, namespace),
                    );
                }
                slot.1
            })
            .collect()
    }

    /// Each node's domain id for `key` (`MISSING` when it lacks the label),
    /// the ids by value, and each domain's value id in `table` (which
    /// Filter reads on the nodes `table` numbered).
    pub fn domains(&mut self, nodes: &[NodeState], key: &str, table: &LabelIds) -> NodeDomains {
        let memo_key = (key.to_string(), table.stamp());
        if self.domains.len() >= MAX_MEMOS && !self.domains.contains_key(&memo_key) {
            self.domains.clear();
        }
        let index = self.domains.entry(memo_key).or_default();
        // Values of nodes long gone accumulate; start afresh when they dominate.
        if index.ids.len() > nodes.len().saturating_mul(2).saturating_add(64) {
            *index = DomainIndex::default();
        }
        index.per_node.resize(nodes.len(), (0, 0, MISSING));
        let key_id = table.key(key);
        let DomainIndex {
            ids,
            per_node,
            value_ids,
        } = index;
        let of_node = nodes
            .iter()
            .zip(per_node.iter_mut())
            .map(|(node, slot)| {
                let label_stamp = node.label_ids.stamp();
                if slot.0 != node.generation || slot.1 != label_stamp {
                    let id = match node.info.labels.get(key) {
                        None => MISSING,
                        Some(value) => intern(ids, value),
                    };
                    if id != MISSING && table.numbered(&node.label_ids) {
                        let value = key_id.and_then(|k| node.label_ids.value(k));
                        record_value_id(value_ids, id, value);
                    }
                    *slot = (node.generation, label_stamp, id);
                }
                slot.2
            })
            .collect();
        NodeDomains {
            of_node,
            ids: index.ids.clone(),
            value_ids: index.value_ids.clone(),
        }
    }
}

/// Notes that domain `id` is value `value` of the table (a domain's value,
/// and so its value id, never changes within one index).
fn record_value_id(value_ids: &mut Arc<Vec<u32>>, id: u32, value: Option<u32>) {
    let (Some(value), Ok(at)) = (value, usize::try_from(id)) else {
        return;
    };
    let v = Arc::make_mut(value_ids);
    if v.len() <= at {
        v.resize(at.saturating_add(1), MISSING);
    }
    if let Some(slot) = v.get_mut(at) {
        *slot = value;
    }
}

fn intern(ids: &mut DomainIds, value: &str) -> u32 {
    if let Some(&id) = ids.get(value) {
        return id;
    }
    // Ids stay below MISSING: the map is bounded by twice the node count.
    let id = u32::try_from(ids.len()).unwrap_or(MISSING - 1);
    Arc::make_mut(ids).insert(Box::from(value), id);
    id
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::test_util::{node, pod_named};
    use serde_json::json;

    fn labelled(name: &str, labels: serde_json::Value) -> PodInfo {
        let mut p = pod_named(name, json!({}));
        p.labels = std::sync::Arc::new(serde_json::from_value(labels).unwrap());
        p
    }

    #[test]
    fn counts_skip_deleting_finished_and_foreign_pods() {
        let sel = LabelSelector::from_map(&[("app".to_string(), "a".to_string())].into());
        let mut deleting = labelled("d", json!({"app": "a"}));
        deleting.deleting = true;
        let mut done = labelled("f", json!({"app": "a"}));
        done.phase = crate::model::PodPhase::Succeeded;
        let mut foreign = labelled("o", json!({"app": "a"}));
        foreign.key.namespace = Arc::from("other");
        let pods: Vec<Arc<PodInfo>> = [
            labelled("x", json!({"app": "a"})),
            labelled("y", json!({"app": "b"})),
            deleting,
            done,
            foreign,
        ]
        .into_iter()
        .map(Arc::new)
        .collect();
        assert_eq!(count_matching(&pods, &sel, "ns"), 1);
        assert_eq!(count_matching(&pods, &LabelSelector::default(), "ns"), 0);
        assert_eq!(count_matching(&pods, &LabelSelector::nothing(), "ns"), 0);
    }

    #[test]
    fn memo_recounts_only_changed_nodes() {
        let sel = LabelSelector::from_map(&[("app".to_string(), "a".to_string())].into());
        let ns: Arc<str> = Arc::from("ns");
        let mut nodes = vec![
            node("n0", &[])
                .label("zone", "z1")
                .with_pod(labelled("a", json!({"app": "a"})))
                .build(),
            node("n1", &[]).build(),
        ];
        let mut memo = Memo::default();
        assert_eq!(memo.counts(&nodes, &ns, &sel), [1, 0]);
        nodes[1].add_pod(&Arc::new(labelled("b", json!({"app": "a"}))));
        assert_eq!(memo.counts(&nodes, &ns, &sel), [1, 1]);
        // A node replaced at the same position is recounted, not reused.
        nodes[0] = node("n2", &[]).label("zone", "z2").build();
        assert_eq!(memo.counts(&nodes, &ns, &sel), [0, 1]);
        let d = memo.domains(&nodes, "zone", &LabelIds::default());
        assert_eq!(d.of_node[1], MISSING);
        assert_eq!(d.ids.get("z2"), Some(&d.of_node[0]));
        assert!(d.value_ids.is_empty(), "no table numbered the nodes");
        let table = LabelIds::of_nodes(&mut nodes);
        let d = memo.domains(&nodes, "zone", &table);
        let zone = table.key("zone").unwrap();
        assert_eq!(
            d.value_ids.get(d.of_node[0] as usize).copied(),
            table.value(zone, "z2")
        );
    }
}
