//! `ClusterFacts`: cluster-scoped objects, other than nodes and pods, that
//! placement reads (namespace labels for inter-pod affinity's
//! `namespaceSelector`; storage objects for the volume plugins; Service and
//! controller selectors for topology spreading's defaults) kept up to date
//! by informer events, and the index of accounted pods the cache keeps.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use super::selectors::WorkloadSelectors;

/// Labels of one namespace.
pub type Labels = BTreeMap<String, String>;

use super::images::ImageSpread;

#[derive(Debug, Default, Clone)]
pub struct ClusterFacts {
    namespaces: HashMap<Arc<str>, Arc<Labels>>,
    /// On how many nodes each image is present (kept by the cache's node
    /// upserts and removals).
    pub images: ImageSpread,
    /// Claims, volumes, classes and CSI objects (the volume plugins').
    /// Shared (copy on write, `Arc::make_mut`), so a cycle's plugin state can
    /// hold the facts it resolves other pods' volumes with without copying
    /// every claim and volume per cycle.
    pub volumes: Arc<super::volumes::VolumeFacts>,
    /// Selectors of Services and controllers (PodTopologySpread's defaults).
    pub workloads: WorkloadSelectors,
    /// Accounted pods by label and their affinity terms by what they select
    /// (kept by the cache beside `NodeState::pods`; unmaintained in facts
    /// built by hand, where plugins scan the nodes instead).
    pub pods: super::pod_index::PodIndex,
    /// Node label keys and values as integers (kept by the cache, which
    /// numbers every node state's labels; unmaintained in facts built by
    /// hand, where plugins read the labels as strings).
    pub label_ids: super::label_ids::LabelIds,
    /// PodDisruptionBudgets (what preemption spares when it can).
    pub budgets: crate::model::disruption::Budgets,
    /// ResourceSlices, DeviceClasses, ResourceClaims and the devices held
    /// (DynamicResources').
    pub dra: super::dra::DraFacts,
}

impl ClusterFacts {
    /// Facts of a cluster with nothing in it (shared, never mutated).
    pub fn empty() -> &'static ClusterFacts {
        static EMPTY: OnceLock<ClusterFacts> = OnceLock::new();
        EMPTY.get_or_init(ClusterFacts::default)
    }

    /// Facts a cache keeps up to date (its pod index answers queries).
    pub fn maintained() -> Self {
        ClusterFacts {
            pods: super::pod_index::PodIndex::maintained(),
            label_ids: super::label_ids::LabelIds::maintained(),
            ..ClusterFacts::default()
        }
    }

    /// Records a namespace and its labels; returns whether they changed.
    pub fn upsert_namespace(&mut self, name: &str, labels: Labels) -> bool {
        if self.namespaces.get(name).is_some_and(|l| **l == labels) {
            return false;
        }
        self.namespaces.insert(Arc::from(name), Arc::new(labels));
        true
    }

    pub fn remove_namespace(&mut self, name: &str) -> bool {
        self.namespaces.remove(name).is_some()
    }

    /// The labels of `namespace`, when it has been observed.
    pub fn namespace_labels(&self, namespace: &str) -> Option<&Labels> {
        self.namespaces.get(namespace).map(|l| &**l)
    }

    /// Every observed namespace with its labels.
    pub fn namespaces(&self) -> impl Iterator<Item = (&str, &Labels)> {
        self.namespaces.iter().map(|(n, l)| (&**n, &**l))
    }
}
