//! What-if edits of the node table: take pods off their nodes, or put pods
//! on nodes, for the length of one simulation, then put everything back.
//!
//! Preemption asks "would the preemptor fit if these pods were gone?", and
//! every cycle asks its questions with the pods nominated by earlier
//! preemptions counted where they were nominated. Both are answered on the
//! real node table (so every plugin, including the ones that count pods
//! across nodes, sees the edit), and both are undone before the engine's
//! entry point returns. Only node accounting changes: pod states, group
//! membership and the assumed set are never touched, so no gang or queue
//! logic can observe a simulation — and devices: a claim whose recorded
//! allocation is reserved only for pods taken off stops holding its
//! devices while they are off, as if the resourceclaim controller had
//! deallocated it once they were gone. The nodes edited and restored are
//! logged as changed (`NodeChanges`): their generations moved, and memos
//! that follow the log must forget them.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::Cache;
use crate::model::{PodInfo, PodKey};

/// The edits made, in order, for `Cache::revert`.
#[derive(Debug, Default)]
#[must_use = "what-if edits must be reverted"]
pub struct WhatIf {
    /// Pods taken off a node (index), to put back.
    removed: Vec<(Arc<PodInfo>, usize)>,
    /// Where each pod of `removed` is in it: a gang's preemption takes
    /// every lower-priority pod of the cluster off (20,000 at 5,000 full
    /// nodes), so membership must not be a scan.
    removed_at: HashMap<PodKey, usize>,
    /// Pods put on a node (index), to take off.
    added: Vec<(Arc<PodInfo>, usize)>,
    added_keys: HashSet<PodKey>,
    /// The uids of the pods in `removed`, and the claims whose recorded
    /// allocation no longer holds its devices because every pod it is
    /// reserved for is in `removed` (`DraFacts::what_if_release`).
    removed_uids: HashSet<Arc<str>>,
    freed: Vec<crate::cache::ResourceClaimKey>,
}

impl WhatIf {
    pub fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.added.is_empty()
    }

    /// Claims whose devices these edits released (their pods taken off).
    pub fn freed_claims(&self) -> &[crate::cache::ResourceClaimKey] {
        &self.freed
    }

    /// Pods currently taken off their nodes by these edits.
    pub fn removed(&self) -> impl Iterator<Item = &Arc<PodInfo>> {
        self.removed.iter().map(|(p, _)| p)
    }
}

impl Cache {
    /// Takes a pod accounted on a node (bound or assumed) off that node.
    /// Returns false, changing nothing, when it is on none (or already
    /// taken off by `edits`).
    pub fn what_if_remove(&mut self, key: &PodKey, edits: &mut WhatIf) -> bool {
        if edits.removed_at.contains_key(key) {
            return false;
        }
        let Some(pod) = self.pods.get(key) else {
            return false;
        };
        let Some(i) = pod
            .state
            .node()
            .and_then(|n| self.node_index.get(n))
            .copied()
        else {
            return false;
        };
        let info = pod.info.clone();
        self.pod_with_terms_moved(&info);
        self.nodes[i].remove_pod(&info);
        self.node_changes.record(i);
        self.facts.pods.remove(&info.key);
        self.total_requested.sub(&info.requests);
        edits
            .removed_at
            .insert(info.key.clone(), edits.removed.len());
        edits.removed_uids.insert(info.uid.clone());
        self.release_devices(&info, edits);
        edits.removed.push((info, i));
        true
    }

    /// Releases the devices of `pod`'s claims reserved only for pods
    /// `edits` took off.
    fn release_devices(&mut self, pod: &PodInfo, edits: &mut WhatIf) {
        if pod.constraints.resource_claims.is_empty() && pod.constraints.extended.is_empty() {
            return;
        }
        let gone = |uid: &str| edits.removed_uids.contains(uid);
        let freed = self.facts.dra.claims_freed_by(pod, &gone);
        for key in freed {
            if self.update_dra(|dra| dra.what_if_release(&key)) {
                edits.freed.push(key);
            }
        }
    }

    /// Holds again the devices of the freed claims `pod` is a consumer of.
    fn hold_devices(&mut self, pod: &PodInfo, edits: &mut WhatIf) {
        if edits.freed.is_empty() {
            return;
        }
        let dra = &self.facts.dra;
        let mine: Vec<crate::cache::ResourceClaimKey> = edits
            .freed
            .iter()
            .filter(|k| {
                matches!(dra.claim(&k.namespace, &k.name), Some(Ok(c)) if c.reserved_for_uid(&pod.uid))
            })
            .cloned()
            .collect();
        edits.freed.retain(|k| !mine.contains(k));
        for key in mine {
            self.update_dra(|dra| dra.what_if_hold(&key));
        }
    }

    /// Puts back one pod `edits` took off (a reprieve), keeping the rest.
    pub fn what_if_restore(&mut self, key: &PodKey, edits: &mut WhatIf) -> bool {
        let Some(pos) = edits.removed_at.remove(key) else {
            return false;
        };
        let (info, i) = edits.removed.swap_remove(pos);
        // The last entry moved into `pos`.
        if let Some((moved, _)) = edits.removed.get(pos) {
            edits.removed_at.insert(moved.key.clone(), pos);
        }
        edits.removed_uids.remove(&info.uid);
        self.hold_devices(&info, edits);
        self.put_back(&info, i);
        true
    }

    /// Accounts a pod that holds no node on `node_index` (a nominated
    /// pod). Returns false when the index is out of range or the pod is
    /// already accounted somewhere.
    pub fn what_if_add(
        &mut self,
        pod: &Arc<PodInfo>,
        node_index: usize,
        edits: &mut WhatIf,
    ) -> bool {
        if node_index >= self.nodes.len()
            || self
                .pods
                .get(&pod.key)
                .is_some_and(|p| p.state.node().is_some())
            || edits.added_keys.contains(&pod.key)
        {
            return false;
        }
        self.put_back(pod, node_index);
        edits.added_keys.insert(pod.key.clone());
        edits.added.push((pod.clone(), node_index));
        true
    }

    /// Undoes every edit, latest first.
    pub fn revert(&mut self, edits: WhatIf) {
        for (info, i) in edits.added.into_iter().rev() {
            self.pod_with_terms_moved(&info);
            if let Some(node) = self.nodes.get_mut(i) {
                node.remove_pod(&info);
                self.node_changes.record(i);
                self.facts.pods.remove(&info.key);
                self.total_requested.sub(&info.requests);
            }
        }
        for (info, i) in edits.removed.into_iter().rev() {
            self.put_back(&info, i);
        }
        for key in edits.freed {
            self.update_dra(|dra| dra.what_if_hold(&key));
        }
    }

    fn put_back(&mut self, info: &Arc<PodInfo>, i: usize) {
        self.pod_with_terms_moved(info);
        if let Some(node) = self.nodes.get_mut(i) {
            node.add_pod(info);
            self.node_changes.record(i);
            self.facts.pods.add(info, &node.info);
            self.total_requested.add(&info.requests);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::fixtures::{node, pod};

    /// The key index follows `swap_remove`: restoring the first of three
    /// removals moves the last into its place, and each is still found.
    #[test]
    fn restores_in_any_order_find_their_pods() {
        let mut cache = Cache::new([Arc::from(crate::driver::fixtures::SCHEDULER)]);
        cache.upsert_node(Arc::new(node("n1", 4000, 8)));
        for name in ["a", "b", "c"] {
            let mut p = pod(name, 1000, 1);
            p.node_name = Some(Arc::from("n1"));
            cache.upsert_pod(Arc::new(p));
        }
        let before = cache.nodes()[0].requested.clone();
        let key = |n: &str| PodKey::new("default", n);
        let mut edits = WhatIf::default();
        for name in ["a", "b", "c"] {
            assert!(cache.what_if_remove(&key(name), &mut edits));
        }
        assert!(cache.what_if_restore(&key("a"), &mut edits));
        assert!(!cache.what_if_restore(&key("a"), &mut edits));
        assert!(cache.what_if_restore(&key("c"), &mut edits));
        assert!(cache.what_if_remove(&key("a"), &mut edits));
        assert_eq!(edits.removed().count(), 2);
        cache.revert(edits);
        assert_eq!(cache.nodes()[0].requested, before);
    }

    #[test]
    fn removals_and_additions_are_undone_exactly() {
        let mut cache = Cache::new([Arc::from(crate::driver::fixtures::SCHEDULER)]);
        cache.upsert_node(Arc::new(node("n1", 4000, 8)));
        let mut bound = pod("a", 1000, 1);
        bound.node_name = Some(Arc::from("n1"));
        cache.upsert_pod(Arc::new(bound));
        let nominated = Arc::new(pod("b", 2000, 1));
        cache.upsert_pod(nominated.clone());
        let before = cache.nodes()[0].requested.clone();

        let mut edits = WhatIf::default();
        assert!(cache.what_if_remove(&PodKey::new("default", "a"), &mut edits));
        assert!(!cache.what_if_remove(&PodKey::new("default", "a"), &mut edits));
        assert!(!cache.what_if_remove(&PodKey::new("default", "b"), &mut edits));
        assert_eq!(cache.nodes()[0].requested.milli_cpu, 0);
        assert!(cache.what_if_add(&nominated, 0, &mut edits));
        assert_eq!(cache.nodes()[0].requested.milli_cpu, 2000);
        assert_eq!(cache.facts().pods.len(), 1);
        // Pod states are untouched.
        assert!(matches!(
            cache.pod(&PodKey::new("default", "b")).map(|p| &p.state),
            Some(super::super::PodState::Pending)
        ));
        cache.revert(edits);
        assert_eq!(cache.nodes()[0].requested, before);
        assert_eq!(cache.nodes()[0].pods.len(), 1);
        assert_eq!(cache.facts().pods.len(), 1);
    }

    /// An edit and its undo move the node's generation, so both are
    /// logged: a memo following the log (`placement::Batch`) must not
    /// keep answers computed while the edit was in place.
    #[test]
    fn edits_and_their_undo_are_logged_as_node_changes() {
        let mut cache = Cache::new([Arc::from(crate::driver::fixtures::SCHEDULER)]);
        cache.upsert_node(Arc::new(node("n1", 4000, 8)));
        cache.upsert_node(Arc::new(node("n2", 4000, 8)));
        let mut bound = pod("a", 1000, 1);
        bound.node_name = Some(Arc::from("n2"));
        cache.upsert_pod(Arc::new(bound));
        let nominated = Arc::new(pod("b", 1000, 1));
        let changed_since =
            |cache: &Cache, seq| cache.node_changes().since(seq).map(<[usize]>::to_vec);

        let seq = cache.node_changes().seq();
        let mut edits = WhatIf::default();
        assert!(cache.what_if_remove(&PodKey::new("default", "a"), &mut edits));
        assert!(cache.what_if_add(&nominated, 0, &mut edits));
        assert_eq!(changed_since(&cache, seq), Some(vec![1, 0]));
        let seq = cache.node_changes().seq();
        cache.revert(edits);
        assert_eq!(changed_since(&cache, seq), Some(vec![0, 1]));
    }

    #[test]
    fn a_reprieve_puts_one_pod_back() {
        let mut cache = Cache::new([Arc::from(crate::driver::fixtures::SCHEDULER)]);
        cache.upsert_node(Arc::new(node("n1", 4000, 8)));
        for name in ["a", "b"] {
            let mut p = pod(name, 1000, 1);
            p.node_name = Some(Arc::from("n1"));
            cache.upsert_pod(Arc::new(p));
        }
        let mut edits = WhatIf::default();
        let (a, b) = (PodKey::new("default", "a"), PodKey::new("default", "b"));
        assert!(cache.what_if_remove(&a, &mut edits));
        assert!(cache.what_if_remove(&b, &mut edits));
        assert!(cache.what_if_restore(&a, &mut edits));
        assert_eq!(cache.nodes()[0].requested.milli_cpu, 1000);
        assert_eq!(edits.removed().count(), 1);
        cache.revert(edits);
        assert_eq!(cache.nodes()[0].requested.milli_cpu, 2000);
    }
}
