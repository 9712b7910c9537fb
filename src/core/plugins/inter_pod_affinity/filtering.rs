//! PreFilter's topology counts and Filter's three checks.
//!
//! PreFilter counts, per topology pair, (1) the existing pods whose required
//! anti-affinity terms select the incoming pod and, when the incoming pod
//! has required terms, (2) the existing pods matching all of its affinity
//! terms and (3) those matching each anti-affinity term. The cache's
//! `PodIndex` offers the candidates for each (the terms filed under the
//! incoming pod's labels; the pods carrying a term's required label), so the
//! cost follows the matches, not the cluster; a snapshot without a
//! maintained index is scanned as kube-scheduler does (nodes'
//! `pods_with_required_anti_affinity`, then every pod). The counts are then
//! renumbered by the cache's `LabelIds` and the terms' topology keys
//! resolved to key ids, so Filter looks up the node's value ids of those
//! keys: O(terms) integer lookups per node (strings on unnumbered nodes).

use std::collections::BTreeMap;

use rayon::prelude::*;

use super::counts::{Counts, TopologyCounts};
use crate::cache::{NodeState, TermKind};
use crate::framework::Snapshot;
use crate::model::{PodAffinityTerm, PodInfo};

/// Below this many nodes PreFilter's scans stay on the calling thread (the
/// same trade-off as the placement runner's `DEFAULT_PARALLEL_MIN_NODES`).
const PARALLEL_MIN_NODES: usize = 1024;

/// What PreFilter computed for one pod.
#[derive(Debug, Default)]
pub(super) struct FilterState {
    /// Existing pods' required anti-affinity terms that select the incoming pod.
    pub existing_anti_affinity: Counts,
    /// Existing pods matching every required affinity term of the incoming pod.
    pub affinity: Counts,
    /// Existing pods matching a required anti-affinity term of the incoming pod.
    pub anti_affinity: Counts,
    /// The incoming pod matches all of its own required affinity terms.
    pub matches_own_affinity: bool,
    /// The key id of each required affinity / anti-affinity term's topology
    /// key in the cache's `LabelIds` (`None`: no numbered node has it).
    pub affinity_keys: Vec<Option<u32>>,
    pub anti_affinity_keys: Vec<Option<u32>>,
}

impl FilterState {
    /// The counts for `pod`; `None` when nothing can reject a node (neither
    /// the pod nor any existing pod has a required term that applies).
    pub(super) fn compute(pod: &PodInfo, snapshot: &Snapshot<'_>) -> Option<Self> {
        let terms = &pod.constraints.pod_affinity;
        let has_required =
            !terms.required_affinity.is_empty() || !terms.required_anti_affinity.is_empty();
        let index = &snapshot.facts.pods;
        let own_ns_labels = snapshot.facts.namespace_labels(&pod.key.namespace);
        let existing_anti_affinity = if index.is_maintained() {
            // The common case, no required anti-affinity anywhere: nothing
            // to look up.
            if !has_required && index.term_count(TermKind::RequiredAntiAffinity) == 0 {
                return None;
            }
            let mut counts = TopologyCounts::default();
            index.for_each_term_selecting(&pod.labels, |t| {
                if t.kind == TermKind::RequiredAntiAffinity
                    && t.term
                        .matches(&pod.key.namespace, &pod.labels, || own_ns_labels)
                {
                    counts.add_on(&t.term.topology_key, &t.node.labels, 1);
                }
            });
            counts
        } else {
            if !has_required
                && snapshot
                    .nodes
                    .iter()
                    .all(|n| n.pods_with_required_anti_affinity.is_empty())
            {
                return None;
            }
            scan_existing_anti_affinity(pod, snapshot, own_ns_labels)
        };
        if !has_required && existing_anti_affinity.is_empty() {
            return None;
        }
        let (affinity, anti_affinity) = match (has_required, index.is_maintained()) {
            (false, _) => Default::default(),
            (true, true) => indexed_incoming_counts(pod, snapshot),
            (true, false) => scan_incoming_counts(pod, snapshot),
        };
        let matches_own_affinity = !terms.required_affinity.is_empty()
            && matches_all(&terms.required_affinity, pod, own_ns_labels);
        let table = &snapshot.facts.label_ids;
        let key_ids = |list: &[PodAffinityTerm]| -> Vec<Option<u32>> {
            list.iter().map(|t| table.key(&t.topology_key)).collect()
        };
        Some(FilterState {
            existing_anti_affinity: Counts::new(existing_anti_affinity, table),
            affinity: Counts::new(affinity, table),
            anti_affinity: Counts::new(anti_affinity, table),
            matches_own_affinity,
            affinity_keys: key_ids(&terms.required_affinity),
            anti_affinity_keys: key_ids(&terms.required_anti_affinity),
        })
    }

    /// The incoming pod's required affinity on `node`: it has every term's
    /// topology key and each pair holds a matching pod — or no pod in the
    /// cluster matches yet and the pod matches its own terms (the first pod
    /// of a self-affine group may go anywhere).
    pub(super) fn satisfies_affinity(&self, pod: &PodInfo, node: &NodeState) -> bool {
        let mut pods_exist = true;
        for (i, t) in pod
            .constraints
            .pod_affinity
            .required_affinity
            .iter()
            .enumerate()
        {
            let key_id = self.affinity_keys.get(i).copied().flatten();
            let Some(n) = self.affinity.on_node(&t.topology_key, key_id, node) else {
                return false;
            };
            if n <= 0 {
                pods_exist = false;
            }
        }
        pods_exist || (self.affinity.is_empty() && self.matches_own_affinity)
    }

    /// The incoming pod's required anti-affinity: no matching pod in any pair
    /// of the node (a node without the key is in no pair, so it passes).
    pub(super) fn satisfies_anti_affinity(&self, pod: &PodInfo, node: &NodeState) -> bool {
        self.anti_affinity.is_empty()
            || pod
                .constraints
                .pod_affinity
                .required_anti_affinity
                .iter()
                .enumerate()
                .all(|(i, t)| {
                    let key_id = self.anti_affinity_keys.get(i).copied().flatten();
                    self.anti_affinity
                        .on_node(&t.topology_key, key_id, node)
                        .is_none_or(|n| n <= 0)
                })
    }

    /// Existing pods' required anti-affinity: no pair of the node holds a
    /// pod whose term selects the incoming pod.
    pub(super) fn satisfies_existing_anti_affinity(&self, node: &NodeState) -> bool {
        !self.existing_anti_affinity.any_positive_on(node)
    }
}

/// Count (1) by reading every node's pods with required anti-affinity
/// (snapshots without a maintained index).
fn scan_existing_anti_affinity(
    pod: &PodInfo,
    snapshot: &Snapshot<'_>,
    own_ns_labels: Option<&BTreeMap<String, String>>,
) -> TopologyCounts {
    fold_nodes(snapshot.nodes, |counts, node| {
        for existing in &node.pods_with_required_anti_affinity {
            for t in &existing.constraints.pod_affinity.required_anti_affinity {
                if t.matches(&pod.key.namespace, &pod.labels, || own_ns_labels) {
                    counts.add_on(&t.topology_key, &node.info.labels, 1);
                }
            }
        }
    })
}

/// Counts (2) and (3) from the pods the index offers for each term's selector.
fn indexed_incoming_counts(
    pod: &PodInfo,
    snapshot: &Snapshot<'_>,
) -> (TopologyCounts, TopologyCounts) {
    let terms = &pod.constraints.pod_affinity;
    let facts = snapshot.facts;
    let index = &facts.pods;
    let mut affinity = TopologyCounts::default();
    // A pod counts for affinity only when it matches every term, so the
    // first term's candidates are all the candidates there are.
    if let Some(first) = terms.required_affinity.first() {
        index.for_each_candidate(&first.label_selector, |existing, node| {
            let ns_labels = || facts.namespace_labels(&existing.key.namespace);
            if terms
                .required_affinity
                .iter()
                .all(|t| t.matches(&existing.key.namespace, &existing.labels, ns_labels))
            {
                for t in &terms.required_affinity {
                    affinity.add_on(&t.topology_key, &node.labels, 1);
                }
            }
        });
    }
    let mut anti = TopologyCounts::default();
    for t in &terms.required_anti_affinity {
        index.for_each_candidate(&t.label_selector, |existing, node| {
            let ns_labels = || facts.namespace_labels(&existing.key.namespace);
            if t.matches(&existing.key.namespace, &existing.labels, ns_labels) {
                anti.add_on(&t.topology_key, &node.labels, 1);
            }
        });
    }
    (affinity, anti)
}

/// Counts (2) and (3) over every pod of every node (snapshots without a
/// maintained index).
fn scan_incoming_counts(
    pod: &PodInfo,
    snapshot: &Snapshot<'_>,
) -> (TopologyCounts, TopologyCounts) {
    let terms = &pod.constraints.pod_affinity;
    let facts = snapshot.facts;
    let scan = |(mut affinity, mut anti): (TopologyCounts, TopologyCounts), node: &NodeState| {
        let labels = &node.info.labels;
        for existing in &node.pods {
            let ns_labels = || facts.namespace_labels(&existing.key.namespace);
            if !terms.required_affinity.is_empty()
                && terms
                    .required_affinity
                    .iter()
                    .all(|t| t.matches(&existing.key.namespace, &existing.labels, ns_labels))
            {
                for t in &terms.required_affinity {
                    affinity.add_on(&t.topology_key, labels, 1);
                }
            }
            for t in &terms.required_anti_affinity {
                if t.matches(&existing.key.namespace, &existing.labels, ns_labels) {
                    anti.add_on(&t.topology_key, labels, 1);
                }
            }
        }
        (affinity, anti)
    };
    let nodes = snapshot.nodes;
    if nodes.len() < PARALLEL_MIN_NODES || rayon::current_num_threads() < 2 {
        return nodes.iter().fold(Default::default(), scan);
    }
    nodes
        .par_iter()
        .with_min_len(256)
        .fold(Default::default, scan)
        .reduce(Default::default, |(mut a1, mut n1), (a2, n2)| {
            a1.merge(a2);
            n1.merge(n2);
            (a1, n1)
        })
}

/// Folds `visit` over the nodes into one `TopologyCounts`, in parallel for
/// large clusters (PreFilter's and PreScore's scans).
pub(super) fn fold_nodes(
    nodes: &[NodeState],
    visit: impl Fn(&mut TopologyCounts, &NodeState) + Sync,
) -> TopologyCounts {
    let step = |mut counts: TopologyCounts, node: &NodeState| {
        visit(&mut counts, node);
        counts
    };
    if nodes.len() < PARALLEL_MIN_NODES || rayon::current_num_threads() < 2 {
        return nodes.iter().fold(TopologyCounts::default(), step);
    }
    nodes
        .par_iter()
        .with_min_len(256)
        .fold(TopologyCounts::default, step)
        .reduce(TopologyCounts::default, |mut a, b| {
            a.merge(b);
            a
        })
}

/// Whether `pod` matches every term (no terms: false, as upstream).
fn matches_all(
    terms: &[PodAffinityTerm],
    pod: &PodInfo,
    own_ns_labels: Option<&BTreeMap<String, String>>,
) -> bool {
    !terms.is_empty()
        && terms
            .iter()
            .all(|t| t.matches(&pod.key.namespace, &pod.labels, || own_ns_labels))
}
