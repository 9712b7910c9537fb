//! `NodeState`: one node's static facts plus what is accounted on it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::label_ids::NodeLabelIds;
use crate::model::{HostPort, NodeInfo, PodInfo, Resources};

/// A node as the filter and score plugins see it: its spec plus the sum of the
/// requests of every pod accounted on it (bound by any scheduler, or assumed).
#[derive(Debug, Clone)]
pub struct NodeState {
    pub info: Arc<NodeInfo>,
    /// Sum of effective requests of accounted pods (`pods` counts them).
    pub requested: Resources,
    /// Sum of non-zero CPU/memory requests, used by the scoring plugins.
    pub non_zero_milli_cpu: i64,
    pub non_zero_memory: i64,
    /// Host ports in use, one entry per pod port (duplicates kept for removal).
    pub used_ports: Vec<HostPort>,
    /// Every pod accounted on the node (bound, or assumed by this scheduler),
    /// for plugins that match other pods (inter-pod affinity, spread).
    pub pods: Vec<Arc<PodInfo>>,
    /// The subset of `pods` with any inter-pod affinity or anti-affinity
    /// term, and with required anti-affinity terms: inter-pod affinity's
    /// PreFilter and PreScore scan these instead of every pod (as
    /// kube-scheduler's `PodsWithAffinity` / `PodsWithRequiredAntiAffinity`).
    pub pods_with_affinity: Vec<Arc<PodInfo>>,
    pub pods_with_required_anti_affinity: Vec<Arc<PodInfo>>,
    /// A fresh, process-wide unique stamp on creation and on every change:
    /// equal stamps mean the same node with the same pods, so memos keyed on
    /// it (gang room, spread counts) never mistake a re-created node for
    /// the one they saw.
    pub generation: u64,
    /// The node's labels as interned ids, set by the cache's `LabelIds`
    /// (empty, stamp 0, on nodes built by hand and after a relabel until
    /// the cache renumbers them: then plugins read `info.labels`).
    pub label_ids: NodeLabelIds,
}

impl NodeState {
    pub fn new(info: Arc<NodeInfo>) -> Self {
        NodeState {
            info,
            requested: Resources::default(),
            non_zero_milli_cpu: 0,
            non_zero_memory: 0,
            used_ports: Vec::new(),
            pods: Vec::new(),
            pods_with_affinity: Vec::new(),
            pods_with_required_anti_affinity: Vec::new(),
            generation: next_generation(),
            label_ids: NodeLabelIds::default(),
        }
    }

    pub fn name(&self) -> &str {
        &self.info.name
    }

    pub fn add_pod(&mut self, pod: &Arc<PodInfo>) {
        self.pods.push(pod.clone());
        if !pod.constraints.pod_affinity.is_empty() {
            self.pods_with_affinity.push(pod.clone());
        }
        if !pod
            .constraints
            .pod_affinity
            .required_anti_affinity
            .is_empty()
        {
            self.pods_with_required_anti_affinity.push(pod.clone());
        }
        self.requested.add(&pod.requests);
        // Saturating, like `Resources::add`: a pod's own sums fit, the
        // node's total of many may not.
        self.non_zero_milli_cpu = self
            .non_zero_milli_cpu
            .saturating_add(pod.non_zero_milli_cpu);
        self.non_zero_memory = self.non_zero_memory.saturating_add(pod.non_zero_memory);
        self.used_ports
            .extend(pod.constraints.host_ports.iter().cloned());
        self.generation = next_generation();
    }

    pub fn remove_pod(&mut self, pod: &PodInfo) {
        for list in [
            &mut self.pods,
            &mut self.pods_with_affinity,
            &mut self.pods_with_required_anti_affinity,
        ] {
            if let Some(i) = list.iter().position(|p| p.key == pod.key) {
                list.swap_remove(i);
            }
        }
        self.requested.sub(&pod.requests);
        self.non_zero_milli_cpu = self
            .non_zero_milli_cpu
            .saturating_sub(pod.non_zero_milli_cpu);
        self.non_zero_memory = self.non_zero_memory.saturating_sub(pod.non_zero_memory);
        for port in &pod.constraints.host_ports {
            if let Some(i) = self.used_ports.iter().position(|p| p == port) {
                self.used_ports.swap_remove(i);
            }
        }
        self.generation = next_generation();
    }

    /// Puts `pod` in place of the accounted pod of the same key, which it
    /// equals in everything the node's accounting and the plugins read (the
    /// cache checks: `PodInfo::same_except` ignoring status). The node's
    /// generation stays: what it offers has not changed.
    pub fn replace_pod(&mut self, pod: &Arc<PodInfo>) {
        for list in [
            &mut self.pods,
            &mut self.pods_with_affinity,
            &mut self.pods_with_required_anti_affinity,
        ] {
            if let Some(slot) = list.iter_mut().find(|p| p.key == pod.key) {
                *slot = pod.clone();
            }
        }
    }

    /// Replaces the node's spec (labels, taints, allocatable) keeping its accounting.
    /// New labels void the interned ids (the cache renumbers them).
    pub fn set_info(&mut self, info: Arc<NodeInfo>) {
        if info.labels != self.info.labels {
            self.label_ids = NodeLabelIds::default();
        }
        self.info = info;
        self.generation = next_generation();
    }

    /// The use of the node's devices changed (`DraFacts`): a new stamp,
    /// so answers remembered for it are not trusted.
    pub fn devices_changed(&mut self) {
        self.generation = next_generation();
    }

    /// What is still free: allocatable minus requested (may be negative when a
    /// node shrank under running pods).
    pub fn free(&self) -> Resources {
        let mut free = self.info.allocatable.clone();
        free.sub(&self.requested);
        free
    }
}

/// The next node-state stamp (never 0, so 0 can mean "not seen").
fn next_generation() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, spec: serde_json::Value) -> Arc<PodInfo> {
        let v = serde_json::json!({"metadata": {"name": name, "namespace": "ns"}, "spec": spec});
        Arc::new(PodInfo::from_json(&serde_json::to_vec(&v).unwrap()).unwrap())
    }

    #[test]
    fn keeps_the_affinity_lists_beside_pods() {
        let term = serde_json::json!({"labelSelector": {}, "topologyKey": "zone"});
        let plain = pod("plain", serde_json::json!({}));
        let preferred = pod(
            "preferred",
            serde_json::json!({"affinity": {"podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "podAffinityTerm": term}]}}}),
        );
        let anti = pod(
            "anti",
            serde_json::json!({"affinity": {"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [term]}}}),
        );
        let mut n = NodeState::new(Arc::new(NodeInfo::new("n", Resources::default())));
        for p in [&plain, &preferred, &anti] {
            n.add_pod(p);
        }
        let names = |l: &[Arc<PodInfo>]| {
            let mut v: Vec<String> = l.iter().map(|p| p.key.name.to_string()).collect();
            v.sort();
            v
        };
        assert_eq!(names(&n.pods), ["anti", "plain", "preferred"]);
        assert_eq!(names(&n.pods_with_affinity), ["anti", "preferred"]);
        assert_eq!(names(&n.pods_with_required_anti_affinity), ["anti"]);
        n.remove_pod(&anti);
        assert_eq!(names(&n.pods_with_affinity), ["preferred"]);
        assert!(n.pods_with_required_anti_affinity.is_empty());
        n.remove_pod(&preferred);
        assert!(n.pods_with_affinity.is_empty());
        assert_eq!(names(&n.pods), ["plain"]);
    }
}
