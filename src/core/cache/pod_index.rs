//! `PodIndex`: every accounted pod by label, and every inter-pod affinity
//! term of an accounted pod by what it selects — so PreFilter and PreScore
//! find the pods a selector matches, and the terms that select a pod, without
//! reading every pod of the cluster each cycle.
//!
//! kube-scheduler rescans its snapshot's pods (or its `PodsWithAffinity`
//! lists) every cycle; at 50,000 pods that is milliseconds. The index is kept
//! by the cache beside `NodeState::pods` (the same pods, added and removed at
//! the same four places), so a query costs in proportion to its candidates.
//!
//! Queries return *candidates*, a superset of the answer: the caller applies
//! the full match (namespaces, every requirement). Candidates are chosen by
//! one equality requirement (`key In [values]`, which is what `matchLabels`
//! becomes); a selector without one falls back to every pod.
//!
//! An index that is not maintained (the empty facts of tests and benches that
//! build nodes by hand) says so, and callers scan the nodes instead; the
//! property test below holds the two answers equal.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use foldhash::fast::RandomState;

use crate::model::{LabelSelector, NodeInfo, Operator, PodAffinityTerm, PodInfo, PodKey};

/// Which list of `PodAffinity` a term comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TermKind {
    RequiredAffinity,
    RequiredAntiAffinity,
    PreferredAffinity,
    PreferredAntiAffinity,
}

impl TermKind {
    const ALL: [TermKind; 4] = [
        TermKind::RequiredAffinity,
        TermKind::RequiredAntiAffinity,
        TermKind::PreferredAffinity,
        TermKind::PreferredAntiAffinity,
    ];
}

/// One term of an accounted pod, as a query yields it.
#[derive(Debug, Clone, Copy)]
pub struct IndexedTerm<'a> {
    pub pod: &'a PodInfo,
    pub node: &'a NodeInfo,
    pub kind: TermKind,
    pub term: &'a PodAffinityTerm,
    /// The preferred term's weight (0 for required terms).
    pub weight: i32,
}

#[derive(Debug, Clone)]
struct Entry {
    pod: Arc<PodInfo>,
    node: Arc<NodeInfo>,
}

/// A pod's position in `PodIndex::slots`: sets hold these, so a query
/// reaches each candidate's entry by array index, not by hashing and
/// comparing its `PodKey` (most of PreFilter's and PreScore's cost at
/// 50,000 pods when they were keys).
type Slot = u32;
type TermRef = (Slot, TermKind, u16);
type Map<K, V> = HashMap<K, V, RandomState>;
type Set<T> = HashSet<T, RandomState>;
type PodSets = Map<String, Map<String, Set<Slot>>>;
type TermSets = Map<String, Map<String, Set<TermRef>>>;

#[derive(Debug, Default, Clone)]
pub struct PodIndex {
    maintained: bool,
    /// Each accounted pod's slot.
    pods: Map<PodKey, Slot>,
    /// Entries by slot (`None`: free, listed in `free` for reuse).
    slots: Vec<Option<Entry>>,
    free: Vec<Slot>,
    /// label key → value → pods carrying it.
    by_label: PodSets,
    /// Terms of accounted pods, filed under the first single-valued `In`
    /// requirement of their selector (a pod must carry that pair to be
    /// selected) ...
    terms_by_pair: TermSets,
    /// ... or here when they have none.
    general_terms: Set<TermRef>,
    /// Terms of each kind, by `TermKind as usize`.
    term_counts: [usize; 4],
}

impl PodIndex {
    /// An index the cache keeps up to date.
    pub fn maintained() -> Self {
        PodIndex {
            maintained: true,
            ..Default::default()
        }
    }

    /// Whether queries answer for the whole cluster. An index nobody
    /// maintains (hand-built snapshots) does not: callers scan nodes.
    pub fn is_maintained(&self) -> bool {
        self.maintained
    }

    /// A maintained index of the pods on `nodes` (tests and benches that
    /// build node states by hand).
    pub fn of_nodes(nodes: &[super::NodeState]) -> Self {
        let mut index = PodIndex::maintained();
        for node in nodes {
            for pod in &node.pods {
                index.add(pod, &node.info);
            }
        }
        index
    }

    pub fn len(&self) -> usize {
        self.pods.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }

    /// Records a pod accounted on `node` (replacing an earlier record).
    pub fn add(&mut self, pod: &Arc<PodInfo>, node: &Arc<NodeInfo>) {
        if !self.maintained {
            return;
        }
        self.remove(&pod.key);
        let Some(slot) = self.free_slot() else {
            // More than `u32::MAX` pods: beyond any cluster; not indexed.
            return;
        };
        for (k, v) in pod.labels.iter() {
            insert(&mut self.by_label, k, v, slot);
        }
        for (kind, i, term) in terms_of(pod) {
            let entry = (slot, kind, i);
            match pair_of(&term.label_selector) {
                Some((k, v)) => insert(&mut self.terms_by_pair, k, v, entry),
                None => {
                    self.general_terms.insert(entry);
                }
            }
            let n = &mut self.term_counts[kind as usize];
            *n = n.saturating_add(1);
        }
        if let Some(s) = self.slots.get_mut(slot as usize) {
            *s = Some(Entry {
                pod: pod.clone(),
                node: node.clone(),
            });
        }
        self.pods.insert(pod.key.clone(), slot);
    }

    /// A free slot (reused first), or `None` past `u32`.
    fn free_slot(&mut self) -> Option<Slot> {
        if let Some(slot) = self.free.pop() {
            return Some(slot);
        }
        let slot = Slot::try_from(self.slots.len()).ok()?;
        self.slots.push(None);
        Some(slot)
    }

    fn entry(&self, slot: Slot) -> Option<&Entry> {
        self.slots.get(usize::try_from(slot).ok()?)?.as_ref()
    }

    /// Forgets a pod no longer accounted on any node.
    pub fn remove(&mut self, key: &PodKey) {
        let Some(slot) = self.pods.remove(key) else {
            return;
        };
        let Some(entry) = self.slots.get_mut(slot as usize).and_then(Option::take) else {
            return;
        };
        self.free.push(slot);
        for (k, v) in entry.pod.labels.iter() {
            delete(&mut self.by_label, k, v, &slot);
        }
        for (kind, i, term) in terms_of(&entry.pod) {
            let entry = (slot, kind, i);
            match pair_of(&term.label_selector) {
                Some((k, v)) => delete(&mut self.terms_by_pair, k, v, &entry),
                None => {
                    self.general_terms.remove(&entry);
                }
            }
            let n = &mut self.term_counts[kind as usize];
            *n = n.saturating_sub(1);
        }
    }

    /// Puts `pod` in place of the record of the same key, which it equals
    /// in labels and terms (the cache's in-place update): the sets stay.
    pub fn replace(&mut self, pod: &Arc<PodInfo>) {
        let Some(&slot) = self.pods.get(&pod.key) else {
            return;
        };
        if let Some(Some(entry)) = self.slots.get_mut(slot as usize) {
            entry.pod = pod.clone();
        }
    }

    /// Points the pods of `node` at its new spec (its labels changed).
    pub fn set_node(&mut self, node: &super::NodeState) {
        for pod in &node.pods {
            let slot = self.pods.get(&pod.key).copied();
            if let Some(Some(entry)) = slot.and_then(|s| self.slots.get_mut(s as usize)) {
                entry.node = node.info.clone();
            }
        }
    }

    /// Calls `f` with every accounted pod `selector` may match and its node:
    /// a superset of the matches (the caller checks), usually far smaller
    /// than the cluster.
    pub fn for_each_candidate<'a>(
        &'a self,
        selector: &LabelSelector,
        mut f: impl FnMut(&'a PodInfo, &'a NodeInfo),
    ) {
        if selector.matches_nothing() {
            return;
        }
        match self.narrowest(selector) {
            Some(sets) => {
                for slot in sets.into_iter().flatten() {
                    if let Some(e) = self.entry(*slot) {
                        f(&e.pod, &e.node);
                    }
                }
            }
            None => self.slots.iter().flatten().for_each(|e| f(&e.pod, &e.node)),
        }
    }

    /// Calls `f` with every term of an accounted pod that may select a pod
    /// labelled `labels`: a superset (the caller checks the term).
    pub fn for_each_term_selecting<'a>(
        &'a self,
        labels: &BTreeMap<String, String>,
        mut f: impl FnMut(IndexedTerm<'a>),
    ) {
        let filed = labels
            .iter()
            .filter_map(|(k, v)| self.terms_by_pair.get(k)?.get(v));
        for set in filed.chain(std::iter::once(&self.general_terms)) {
            for (slot, kind, i) in set {
                if let Some(t) = self.term(*slot, *kind, *i) {
                    f(t);
                }
            }
        }
    }

    /// How many terms of `kind` accounted pods carry.
    pub fn term_count(&self, kind: TermKind) -> usize {
        self.term_counts[kind as usize]
    }

    fn term(&self, slot: Slot, kind: TermKind, i: u16) -> Option<IndexedTerm<'_>> {
        let e = self.entry(slot)?;
        let a = &e.pod.constraints.pod_affinity;
        let (term, weight) = match kind {
            TermKind::RequiredAffinity => (a.required_affinity.get(usize::from(i))?, 0),
            TermKind::RequiredAntiAffinity => (a.required_anti_affinity.get(usize::from(i))?, 0),
            TermKind::PreferredAffinity => {
                let w = a.preferred_affinity.get(usize::from(i))?;
                (&w.term, w.weight)
            }
            TermKind::PreferredAntiAffinity => {
                let w = a.preferred_anti_affinity.get(usize::from(i))?;
                (&w.term, w.weight)
            }
        };
        Some(IndexedTerm {
            pod: &e.pod,
            node: &e.node,
            kind,
            term,
            weight,
        })
    }

    /// The pod sets of the selector's most selective `In` requirement (one
    /// set per listed value), or `None` when it has no `In` requirement.
    fn narrowest(&self, selector: &LabelSelector) -> Option<Vec<&Set<Slot>>> {
        static EMPTY: std::sync::OnceLock<Set<Slot>> = std::sync::OnceLock::new();
        let empty = EMPTY.get_or_init(Set::default);
        selector
            .requirements()
            .iter()
            .filter(|r| r.op == Operator::In)
            .map(|r| {
                let values = self.by_label.get(&r.key);
                r.values
                    .iter()
                    .map(|v| values.and_then(|m| m.get(v)).unwrap_or(empty))
                    .collect::<Vec<_>>()
            })
            .min_by_key(|sets| sets.iter().map(|s| s.len()).sum::<usize>())
    }
}

/// A pod's affinity terms with their kind and position (positions beyond
/// `u16` cannot occur: terms are bounded by `pod_affinity::MAX_TERMS`).
fn terms_of(pod: &PodInfo) -> impl Iterator<Item = (TermKind, u16, &PodAffinityTerm)> {
    let a = &pod.constraints.pod_affinity;
    TermKind::ALL.into_iter().flat_map(move |kind| {
        let list: Vec<&PodAffinityTerm> = match kind {
            TermKind::RequiredAffinity => a.required_affinity.iter().collect(),
            TermKind::RequiredAntiAffinity => a.required_anti_affinity.iter().collect(),
            TermKind::PreferredAffinity => a.preferred_affinity.iter().map(|w| &w.term).collect(),
            TermKind::PreferredAntiAffinity => {
                a.preferred_anti_affinity.iter().map(|w| &w.term).collect()
            }
        };
        // A term that selects nothing (no `labelSelector`) is never filed.
        list.into_iter()
            .enumerate()
            .filter(|(_, t)| !t.label_selector.matches_nothing())
            .filter_map(move |(i, t)| u16::try_from(i).ok().map(|i| (kind, i, t)))
    })
}

/// The pair a term is filed under: its selector's first single-valued `In`
/// requirement (a pod must carry that pair to be selected).
fn pair_of(selector: &LabelSelector) -> Option<(&str, &str)> {
    let r = selector
        .requirements()
        .iter()
        .find(|r| r.op == Operator::In && r.values.len() == 1)?;
    Some((r.key.as_str(), r.values.first()?.as_str()))
}

fn insert<T: Eq + std::hash::Hash>(
    sets: &mut Map<String, Map<String, Set<T>>>,
    k: &str,
    v: &str,
    item: T,
) {
    let values = match sets.get_mut(k) {
        Some(values) => values,
        None => sets.entry(k.to_owned()).or_default(),
    };
    match values.get_mut(v) {
        Some(set) => {
            set.insert(item);
        }
        None => {
            let mut set = Set::default();
            set.insert(item);
            values.insert(v.to_owned(), set);
        }
    }
}

fn delete<T: Eq + std::hash::Hash>(
    sets: &mut Map<String, Map<String, Set<T>>>,
    k: &str,
    v: &str,
    item: &T,
) {
    let Some(values) = sets.get_mut(k) else {
        return;
    };
    if let Some(set) = values.get_mut(v) {
        set.remove(item);
        if set.is_empty() {
            values.remove(v);
        }
    }
    if values.is_empty() {
        sets.remove(k);
    }
}

#[cfg(test)]
impl PodIndex {
    /// Everything the index holds, as sorted lines: equal for equal indexes.
    pub(crate) fn fingerprint(&self) -> Vec<String> {
        // Slots differ between equal indexes: print the pods' keys.
        let key = |slot: &Slot| {
            self.entry(*slot)
                .map_or("<free slot>".to_string(), |e| e.pod.key.to_string())
        };
        let mut out: Vec<String> = self
            .pods
            .iter()
            .map(|(k, slot)| match self.entry(*slot) {
                Some(e) if e.pod.key == *k => {
                    format!("pod {k} on {} {:?}", e.node.name, e.node.labels)
                }
                _ => format!("pod {k}: bad slot {slot}"),
            })
            .collect();
        let live = self.slots.iter().flatten().count();
        out.push(format!("slots in use {live}"));
        for (k, values) in &self.by_label {
            for (v, set) in values {
                let mut keys: Vec<String> = set.iter().map(key).collect();
                keys.sort();
                out.push(format!("label {k}={v}: {keys:?}"));
            }
        }
        let term = |(p, kind, i): &TermRef| format!("{}/{kind:?}/{i}", key(p));
        for (k, values) in &self.terms_by_pair {
            for (v, set) in values {
                let mut terms: Vec<String> = set.iter().map(term).collect();
                terms.sort();
                out.push(format!("terms {k}={v}: {terms:?}"));
            }
        }
        let mut general: Vec<String> = self.general_terms.iter().map(term).collect();
        general.sort();
        out.push(format!("general {general:?} counts {:?}", self.term_counts));
        out.sort();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::NodeState;
    use crate::plugins::test_util::node;
    use serde_json::{Value, json};

    fn pod(name: &str, labels: Value, affinity: Value) -> Arc<PodInfo> {
        let v = json!({"metadata": {"name": name, "namespace": "ns", "uid": name, "labels": labels},
            "spec": {"affinity": affinity}});
        Arc::new(PodInfo::from_json(&serde_json::to_vec(&v).unwrap()).unwrap())
    }

    fn anti(selector: Value) -> Value {
        json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            [{"labelSelector": selector, "topologyKey": "zone"}]}})
    }

    fn names<'a>(index: &'a PodIndex, selector: &LabelSelector) -> Vec<&'a str> {
        let mut out = Vec::new();
        index.for_each_candidate(selector, |p, _| out.push(&*p.key.name));
        out.sort();
        out
    }

    fn selector(v: Value) -> LabelSelector {
        LabelSelector::from_wire(Some(&serde_json::from_value(v).unwrap())).unwrap()
    }

    #[test]
    fn candidates_come_from_the_narrowest_equality_requirement() {
        let n = Arc::new(node("n1", &[]).build().info.as_ref().clone());
        let mut index = PodIndex::maintained();
        for (name, app, tier) in [("a", "web", "1"), ("b", "web", "2"), ("c", "db", "1")] {
            index.add(&pod(name, json!({"app": app, "tier": tier}), json!({})), &n);
        }
        // app=db holds one pod, tier=1 two: the narrower is read.
        let s = selector(json!({"matchLabels": {"app": "db", "tier": "1"}}));
        assert_eq!(names(&index, &s), ["c"]);
        // `In` with several values: the union of their pods.
        let s = selector(json!({"matchExpressions": [
            {"key": "app", "operator": "In", "values": ["db", "web"]}]}));
        assert_eq!(names(&index, &s), ["a", "b", "c"]);
        // No equality requirement: every pod is a candidate.
        let s = selector(json!({"matchExpressions": [{"key": "app", "operator": "Exists"}]}));
        assert_eq!(names(&index, &s), ["a", "b", "c"]);
        assert!(names(&index, &LabelSelector::nothing()).is_empty());
        index.remove(&PodKey::new("ns", "c"));
        let s = selector(json!({"matchLabels": {"app": "db"}}));
        assert!(names(&index, &s).is_empty());
        assert_eq!(index.len(), 2);
    }

    #[test]
    fn terms_are_found_by_the_labels_they_require() {
        let n = Arc::new(node("n1", &[]).build().info.as_ref().clone());
        let mut index = PodIndex::maintained();
        index.add(
            &pod(
                "eq",
                json!({}),
                anti(json!({"matchLabels": {"app": "web"}})),
            ),
            &n,
        );
        let general = anti(json!({"matchExpressions": [{"key": "app", "operator": "Exists"}]}));
        index.add(&pod("gen", json!({}), general), &n);
        index.add(
            &pod(
                "none",
                json!({}),
                json!({"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]}}),
            ),
            &n,
        );
        assert_eq!(
            index.term_count(TermKind::RequiredAntiAffinity),
            2,
            "no selector: not filed"
        );
        let found = |index: &PodIndex, labels: &[(&str, &str)]| {
            let labels = labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let mut out = Vec::new();
            index.for_each_term_selecting(&labels, |t| out.push(t.pod.key.name.to_string()));
            out.sort();
            out
        };
        assert_eq!(found(&index, &[("app", "web")]), ["eq", "gen"]);
        assert_eq!(found(&index, &[("app", "db")]), ["gen"]);
        index.remove(&PodKey::new("ns", "eq"));
        assert_eq!(found(&index, &[("app", "web")]), ["gen"]);
        assert_eq!(index.term_count(TermKind::RequiredAntiAffinity), 1);
    }

    #[test]
    fn removal_leaves_nothing_behind_and_relabelling_follows_the_node() {
        let mut n = NodeState::new(Arc::new(node("n1", &[]).build().info.as_ref().clone()));
        let p = pod(
            "p",
            json!({"app": "web"}),
            anti(json!({"matchLabels": {"app": "web"}})),
        );
        n.add_pod(&p);
        let mut index = PodIndex::of_nodes(std::slice::from_ref(&n));
        let mut info = n.info.as_ref().clone();
        info.labels.insert("zone".into(), "z1".into());
        n.set_info(Arc::new(info));
        index.set_node(&n);
        assert_eq!(
            index.fingerprint(),
            PodIndex::of_nodes(std::slice::from_ref(&n)).fingerprint()
        );
        index.remove(&p.key);
        assert_eq!(index.fingerprint(), PodIndex::maintained().fingerprint());
    }

    #[test]
    fn an_unmaintained_index_records_nothing() {
        let n = Arc::new(node("n1", &[]).build().info.as_ref().clone());
        let mut index = PodIndex::default();
        index.add(&pod("a", json!({"app": "web"}), json!({})), &n);
        assert!(!index.is_maintained() && index.is_empty());
    }
}
