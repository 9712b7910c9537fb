//! `Cache`: the node table, every pod in the cluster, assume/forget with the
//! assumed-pod TTL, and group membership.
//!
//! Accounting rule: a pod with a node (assumed by us, or bound by anyone) is
//! listed under that node name in `by_node`; it is added to the node's
//! `NodeState` exactly when the node exists. A node that arrives late picks up
//! the pods already bound to it; a node that disappears takes its accounting
//! with it, and its assumed pods are forgotten (the caller requeues them).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::facts::ClusterFacts;
use super::groups::{DefGroups, GroupMembers, MemberState};
use super::node_state::NodeState;
use crate::model::{
    DefinitionKey, GroupKey, Ignoring, NodeInfo, PodInfo, PodKey, PodMap, PodSet, Resources,
};

/// What the cache knows about one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodState {
    /// Not on a node yet.
    Pending,
    /// Reserved by this scheduler on `node`: waiting at Permit, binding, or
    /// bound by the API and not yet confirmed by the informer. It holds its
    /// node's capacity until its binding fails, the pod is deleted, or the
    /// informer shows it (bound, elsewhere or terminal) — never on a timer:
    /// a pod whose binding succeeded uses that capacity however long the
    /// informer takes to say so (gang-semantics I7).
    Assumed { node: Arc<str> },
    /// `spec.nodeName` is set and the pod is not terminal.
    Bound { node: Arc<str> },
    /// Terminal, or pending while being deleted: holds nothing, never scheduled.
    Done,
}

impl PodState {
    fn of(info: &PodInfo) -> Self {
        if info.phase.is_terminal() {
            PodState::Done
        } else if let Some(node) = &info.node_name {
            PodState::Bound { node: node.clone() }
        } else if info.deleting {
            PodState::Done
        } else {
            PodState::Pending
        }
    }

    /// The node this pod is accounted on (when that node exists).
    pub fn node(&self) -> Option<&Arc<str>> {
        match self {
            PodState::Assumed { node, .. } | PodState::Bound { node } => Some(node),
            PodState::Pending | PodState::Done => None,
        }
    }

    fn member_state(&self) -> Option<MemberState> {
        match self {
            PodState::Pending => Some(MemberState::Pending),
            PodState::Assumed { .. } => Some(MemberState::Assumed),
            PodState::Bound { .. } => Some(MemberState::Bound),
            PodState::Done => None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct CachedPod {
    pub info: Arc<PodInfo>,
    pub state: PodState,
    /// Whether this scheduler serves the pod's `schedulerName`.
    pub served: bool,
}

/// What an upsert did, so the caller can react (requeue, flush, release).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodChange {
    pub previous: Option<PodState>,
    pub current: PodState,
    /// The same pod seen again with only its status moved on (the kubelet's
    /// `Running`, our binding confirmed): it stays where it was accounted,
    /// so nothing any node, group or plugin reads has changed, except the
    /// member's state when an assumed pod is confirmed bound.
    pub in_place: bool,
}

impl PodChange {
    /// The update confirmed a pod this scheduler had assumed.
    pub fn confirmed_assumed(&self) -> bool {
        matches!(self.previous, Some(PodState::Assumed { .. }))
            && matches!(self.current, PodState::Bound { .. })
    }

    /// Nothing a node, a group or a plugin counts has moved: the same pod
    /// in the same state, replaced in place (the kubelet's `Running`).
    pub fn unchanged(&self) -> bool {
        self.in_place && self.previous.as_ref() == Some(&self.current)
    }

    /// A reservation this scheduler held is gone (pod recreated, finished).
    pub fn lost_reservation(&self) -> bool {
        matches!(self.previous, Some(PodState::Assumed { .. }))
            && !matches!(
                self.current,
                PodState::Assumed { .. } | PodState::Bound { .. }
            )
    }

    /// Resources were given back somewhere (a node may now fit more).
    pub fn released_resources(&self) -> bool {
        let had = self.previous.as_ref().and_then(PodState::node);
        had.is_some() && had != self.current.node()
    }
}

pub struct Cache {
    nodes: Vec<NodeState>,
    node_index: HashMap<Arc<str>, usize>,
    pods: PodMap<CachedPod>,
    /// Node name → pods assumed or bound there, whether or not the node exists.
    by_node: HashMap<Arc<str>, PodSet>,
    groups: HashMap<GroupKey, GroupMembers>,
    groups_by_def: HashMap<DefinitionKey, DefGroups>,
    /// Assumed pods whose binding finished, by expiry.
    total_allocatable: Resources,
    total_requested: Resources,
    served: HashSet<Arc<str>>,
    /// Bumped when a node is added or removed or its labels change: what
    /// indexes of nodes by label (required topology) are keyed on.
    labels_generation: u64,
    /// Bumped when anything outside a node that a pod's verdict or score on
    /// that node may read changes (see `cross_node_generation`).
    cross_node_generation: u64,
    /// Which nodes changed in place (see `node_changes.rs`).
    node_changes: super::NodeChanges,
    facts: ClusterFacts,
    /// ResourceClaim → the pods whose `spec.resourceClaims` name it (a
    /// template's claim once generated): whose gate a claim event opens.
    claim_users: HashMap<super::ResourceClaimKey, PodSet>,
}

impl Cache {
    /// `served`: the scheduler names whose pods are members (and schedulable) here.
    pub fn new(served: impl IntoIterator<Item = Arc<str>>) -> Self {
        Cache {
            nodes: Vec::new(),
            node_index: HashMap::new(),
            pods: PodMap::default(),
            by_node: HashMap::new(),
            groups: HashMap::new(),
            groups_by_def: HashMap::new(),
            total_allocatable: Resources::default(),
            total_requested: Resources::default(),
            served: served.into_iter().collect(),
            labels_generation: 0,
            cross_node_generation: 0,
            node_changes: super::NodeChanges::default(),
            facts: ClusterFacts::maintained(),
            claim_users: HashMap::new(),
        }
    }

    /// The pods that name the claim (see `claim_users`).
    pub fn claim_users(&self, claim: &super::ResourceClaimKey) -> impl Iterator<Item = &PodKey> {
        self.claim_users.get(claim).into_iter().flatten()
    }

    /// Adds (or removes) the pod under each claim it names.
    fn index_claims(&mut self, info: &PodInfo, add: bool) {
        let claims = &info.constraints.resource_claims;
        for claim in crate::model::pod_claims::claim_keys(claims, &info.key.namespace) {
            if add {
                self.claim_users
                    .entry(claim)
                    .or_default()
                    .insert(info.key.clone());
            } else if let Some(users) = self.claim_users.get_mut(&claim) {
                users.remove(&info.key);
                if users.is_empty() {
                    self.claim_users.remove(&claim);
                }
            }
        }
    }

    // ---- reads -------------------------------------------------------------

    /// The node table: the snapshot a scheduling cycle places pods on.
    pub fn nodes(&self) -> &[NodeState] {
        &self.nodes
    }

    /// Cluster-scoped facts (namespaces, ...), updated by informer events.
    pub fn facts(&self) -> &ClusterFacts {
        &self.facts
    }

    /// The facts to change: counted as a cross-node change (namespace
    /// labels, storage objects, workload selectors are read by plugins for
    /// every node).
    pub fn facts_mut(&mut self) -> &mut ClusterFacts {
        self.cross_node_changed();
        &mut self.facts
    }

    /// Changes the device facts. Not a cross-node change: only pods with
    /// resource claims read them, and their memos follow the facts' own
    /// epoch (`DraFacts::epoch`); the nodes whose devices' use changed are
    /// marked changed, as a pod placed there would mark them.
    pub fn update_dra<R>(&mut self, f: impl FnOnce(&mut super::dra::DraFacts) -> R) -> R {
        let r = f(&mut self.facts.dra);
        self.devices_touched();
        r
    }

    /// Marks the nodes `DraFacts::take_touched` names as changed.
    fn devices_touched(&mut self) {
        for name in self.facts.dra.take_touched() {
            if let Some(&i) = self.node_index.get(&name)
                && let Some(n) = self.nodes.get_mut(i)
            {
                n.devices_changed();
                self.node_changes.record(i);
            }
        }
    }

    /// Changes whenever something a pod's Filter verdict or raw Score on one
    /// node may read from outside that node changes: a node added, removed,
    /// relabelled (topology domains) or with other images (image spread);
    /// the cluster facts touched; a pod with inter-pod affinity terms
    /// accounted or unaccounted anywhere (its terms reach the other nodes of
    /// its domain). What changes on a node itself moves that node's
    /// `NodeState::generation` instead. Together they key memos of per-node
    /// answers kept across cycles (`framework::placement::Batch`).
    pub fn cross_node_generation(&self) -> u64 {
        self.cross_node_generation
    }

    /// A pod's accounting on a node moved: a cross-node change when the pod
    /// carries inter-pod affinity terms.
    pub(super) fn pod_with_terms_moved(&mut self, info: &PodInfo) {
        if !info.constraints.pod_affinity.is_empty() {
            self.cross_node_changed();
        }
    }

    fn cross_node_changed(&mut self) {
        // 2^64 changes never come; starting over would still be a change.
        self.cross_node_generation = self.cross_node_generation.checked_add(1).unwrap_or(1);
    }

    /// Changes whenever a node is added or removed (indices move) or a
    /// node's labels change; capacity and status updates leave it alone.
    pub fn labels_generation(&self) -> u64 {
        self.labels_generation
    }

    /// Which nodes changed in place since a reader last looked.
    pub fn node_changes(&self) -> &super::NodeChanges {
        &self.node_changes
    }

    pub fn node(&self, name: &str) -> Option<&NodeState> {
        self.node_index.get(name).map(|&i| &self.nodes[i])
    }

    /// The node's position in the node table.
    pub fn node_index(&self, name: &str) -> Option<usize> {
        self.node_index.get(name).copied()
    }

    pub fn pod(&self, key: &PodKey) -> Option<&CachedPod> {
        self.pods.get(key)
    }

    pub fn pods(&self) -> impl Iterator<Item = &CachedPod> {
        self.pods.values()
    }

    /// How many pods are cached (without walking them).
    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    pub fn is_assumed(&self, key: &PodKey) -> bool {
        matches!(
            self.pods.get(key).map(|p| &p.state),
            Some(PodState::Assumed { .. })
        )
    }

    pub fn group(&self, key: &GroupKey) -> Option<&GroupMembers> {
        self.groups.get(key)
    }

    /// Groups (replicas included) observed for one definition.
    pub fn groups_of(&self, def: &DefinitionKey) -> impl Iterator<Item = &GroupKey> {
        self.groups_by_def
            .get(def)
            .into_iter()
            .flat_map(DefGroups::iter)
    }

    /// Every definition some observed pod refers to.
    pub fn referenced_definitions(&self) -> impl Iterator<Item = &DefinitionKey> {
        self.groups_by_def.keys()
    }

    pub fn is_served(&self, scheduler_name: &str) -> bool {
        self.served.contains(scheduler_name)
    }

    /// Allocatable minus requested summed over all nodes (per-node negatives
    /// included: a node overcommitted by another scheduler offers nothing more).
    pub fn total_free(&self) -> Resources {
        let mut free = self.total_allocatable.clone();
        free.sub(&self.total_requested);
        free
    }

    // ---- nodes -------------------------------------------------------------

    /// Adds or updates a node; returns true when it is new. A new node picks up
    /// the pods already bound to it.
    pub fn upsert_node(&mut self, info: Arc<NodeInfo>) -> bool {
        if let Some(&i) = self.node_index.get(&info.name) {
            self.total_allocatable.sub(&self.nodes[i].info.allocatable);
            self.total_allocatable.add(&info.allocatable);
            if self.nodes[i].info.images != info.images {
                self.cross_node_changed();
                self.facts.images.remove_node(&self.nodes[i].info);
                self.facts.images.add_node(&info);
            }
            let relabelled = self.nodes[i].info.labels != info.labels;
            if relabelled {
                self.cross_node_changed();
                self.labels_generation += 1;
                self.facts.label_ids.release(&self.nodes[i]);
            }
            self.nodes[i].set_info(info);
            self.node_changes.record(i);
            if relabelled {
                self.facts.label_ids.assign(&mut self.nodes[i]);
                self.facts.label_ids.compact_if_sparse(&mut self.nodes);
                self.facts.pods.set_node(&self.nodes[i]);
            }
            return false;
        }
        self.labels_generation += 1;
        self.cross_node_changed();
        self.node_changes.restructured();
        let mut state = NodeState::new(info.clone());
        self.facts.label_ids.assign(&mut state);
        for key in self.by_node.get(&info.name).into_iter().flatten() {
            if let Some(p) = self.pods.get(key) {
                state.add_pod(&p.info);
                self.facts.pods.add(&p.info, &info);
                self.total_requested.add(&p.info.requests);
            }
        }
        self.total_allocatable.add(&info.allocatable);
        self.facts.images.add_node(&info);
        self.node_index.insert(info.name.clone(), self.nodes.len());
        self.nodes.push(state);
        true
    }

    /// Removes a node. Pods bound there stay known (and are accounted again if
    /// the node comes back); pods assumed there are forgotten and returned.
    pub fn remove_node(&mut self, name: &str) -> Vec<PodKey> {
        let Some(i) = self.node_index.remove(name) else {
            return Vec::new();
        };
        self.labels_generation += 1;
        self.cross_node_changed();
        self.node_changes.restructured();
        let removed = self.nodes.swap_remove(i);
        if let Some(moved) = self.nodes.get(i) {
            self.node_index.insert(moved.info.name.clone(), i);
        }
        self.facts.label_ids.release(&removed);
        self.facts.label_ids.compact_if_sparse(&mut self.nodes);
        self.total_allocatable.sub(&removed.info.allocatable);
        self.facts.images.remove_node(&removed.info);
        for pod in &removed.pods {
            self.facts.pods.remove(&pod.key);
        }
        self.total_requested.sub(&removed.requested);
        let mut assumed: Vec<PodKey> = self
            .by_node
            .get(name)
            .into_iter()
            .flatten()
            .filter(|k| self.is_assumed(k))
            .cloned()
            .collect();
        assumed.sort();
        for key in &assumed {
            self.forget(key);
        }
        assumed
    }

    // ---- pods --------------------------------------------------------------

    /// Records a pod as the informer reports it, whoever schedules it.
    ///
    /// An update without `nodeName` for a pod this scheduler has assumed keeps
    /// the reservation (the informer has not caught up with our bind yet); an
    /// update with `nodeName` confirms it. A pod recreated under the same name
    /// (new uid) replaces the old one and its reservation.
    pub fn upsert_pod(&mut self, info: Arc<PodInfo>) -> PodChange {
        let current = PodState::of(&info);
        let old = self.pods.get(&info.key);
        let previous = old.map(|p| p.state.clone());
        let same_pod = old.is_some_and(|p| p.info.uid == info.uid);
        if same_pod
            && matches!(previous, Some(PodState::Assumed { .. }))
            && current == PodState::Pending
        {
            // Not stored at all (the reservation stands for the newer
            // state), so not an in-place update either.
            return PodChange {
                current: previous.clone().unwrap_or(PodState::Pending),
                previous,
                in_place: false,
            };
        }
        let in_place = old.is_some_and(|old| {
            old.state.node() == current.node()
                && old.state.member_state().is_some() == current.member_state().is_some()
                && old.info.same_except(&info, Ignoring::Status)
        });
        if in_place {
            self.replace_in_place(info, current.clone());
        } else {
            self.detach(&info.key);
            let served = self.served.contains(&info.scheduler_name);
            self.attach(CachedPod {
                info,
                state: current.clone(),
                served,
            });
        }
        PodChange {
            previous,
            current,
            in_place,
        }
    }

    /// Forgets a deleted pod, releasing whatever it held.
    pub fn remove_pod(&mut self, key: &PodKey) -> Option<CachedPod> {
        self.detach(key)
    }

    /// Reserves `nodes()[node_index]` for a pending pod (Reserve).
    pub fn assume(&mut self, key: &PodKey, node_index: usize) -> Result<(), String> {
        self.assume_jointly(key, node_index, super::dra::Lifted::default())
    }

    /// [`Cache::assume`], allocating the pod's claims together with the
    /// lifted plans of other pods on the node (`lift_device_plans`): a
    /// joint search across them. On failure the lifted plans are put back.
    pub fn assume_jointly(
        &mut self,
        key: &PodKey,
        node_index: usize,
        lifted: super::dra::Lifted,
    ) -> Result<(), String> {
        let node = match self.nodes.get(node_index) {
            Some(n) => n.info.name.clone(),
            None => {
                self.put_back_device_plans(lifted);
                return Err(format!("node index {node_index} out of range"));
            }
        };
        let why = match self.pods.get(key).map(|p| &p.state) {
            Some(PodState::Pending) => None,
            Some(other) => Some(format!("pod {key} cannot be assumed: it is {other:?}")),
            None => Some(format!("pod {key} is not in the cache")),
        };
        if let Some(why) = why {
            self.put_back_device_plans(lifted);
            return Err(why);
        }
        // DynamicResources' Reserve: the devices of the pod's claims.
        if let (Some(pod), Some(n)) = (self.pods.get(key), self.nodes.get(node_index)) {
            let reserved = self.facts.dra.reserve_jointly(&pod.info, &n.info, lifted);
            self.devices_touched();
            reserved?;
        }
        self.set_state(key, PodState::Assumed { node });
        Ok(())
    }

    /// Takes the device plans only `pods` rely on out of the devices held,
    /// for a joint search (`DraFacts::lift_plans`); hand them to
    /// `assume_jointly` or `put_back_device_plans`.
    pub fn lift_device_plans(&mut self, pods: &[PodKey]) -> super::dra::Lifted {
        self.update_dra(|dra| dra.lift_plans(pods))
    }

    /// Puts lifted device plans back as they were.
    pub fn put_back_device_plans(&mut self, lifted: super::dra::Lifted) {
        if !lifted.is_empty() {
            self.update_dra(|dra| dra.put_back(lifted));
        }
    }

    /// Drops a reservation (Unreserve, bind failure, expiry). Returns false when
    /// the pod was not assumed.
    pub fn forget(&mut self, key: &PodKey) -> bool {
        if !self.is_assumed(key) {
            return false;
        }
        self.facts.dra.unreserve(key);
        self.devices_touched();
        self.set_state(key, PodState::Pending);
        true
    }

    // ---- internals -----------------------------------------------------------

    /// Moves a pod between pending and assumed (Reserve, Unreserve): its
    /// node accounting and member state follow, its entry stays put.
    fn set_state(&mut self, key: &PodKey, state: PodState) {
        let Some(pod) = self.pods.get(key) else {
            return;
        };
        let (info, old, served) = (pod.info.clone(), pod.state.clone(), pod.served);
        if let Some(node) = old.node() {
            self.unaccount(&info, node);
        }
        if let Some(node) = state.node() {
            self.account(&info, node);
        }
        if served {
            self.move_member(&info, old.member_state(), state.member_state());
        }
        if let Some(pod) = self.pods.get_mut(key) {
            pod.state = state;
        }
    }

    /// `upsert_pod`'s path for a pod seen again on the node it is accounted
    /// on, equal but for its status: the new object replaces the old one
    /// wherever it is held, and no node counts as changed (its generation
    /// stays, so memos of what the node offers stay valid).
    fn replace_in_place(&mut self, info: Arc<PodInfo>, state: PodState) {
        let Some(pod) = self.pods.get_mut(&info.key) else {
            return;
        };
        let (old, served) = (pod.state.member_state(), pod.served);
        let previous = std::mem::replace(&mut pod.info, info.clone());
        if previous.constraints.resource_claims != info.constraints.resource_claims {
            self.index_claims(&previous, false);
            self.index_claims(&info, true);
        }
        let Some(pod) = self.pods.get_mut(&info.key) else {
            return;
        };
        pod.state = state.clone();
        if let Some(&i) = state.node().and_then(|n| self.node_index.get(n)) {
            self.nodes[i].replace_pod(&info);
            self.facts.pods.replace(&info);
        }
        if served {
            self.move_member(&info, old, state.member_state());
        }
    }

    /// Accounts a pod on `node`: listed under its name, and on the node
    /// (totals, pod index) when the node exists.
    fn account(&mut self, info: &Arc<PodInfo>, node: &Arc<str>) {
        self.by_node
            .entry(node.clone())
            .or_default()
            .insert(info.key.clone());
        if let Some(&i) = self.node_index.get(node) {
            self.pod_with_terms_moved(info);
            self.nodes[i].add_pod(info);
            self.node_changes.record(i);
            self.facts.pods.add(info, &self.nodes[i].info);
            self.total_requested.add(&info.requests);
        }
    }

    /// Undoes `account`.
    fn unaccount(&mut self, info: &PodInfo, node: &Arc<str>) {
        if let Some(set) = self.by_node.get_mut(node) {
            set.remove(&info.key);
            if set.is_empty() {
                self.by_node.remove(node);
            }
        }
        if let Some(&i) = self.node_index.get(node) {
            self.pod_with_terms_moved(info);
            self.nodes[i].remove_pod(info);
            self.node_changes.record(i);
            self.facts.pods.remove(&info.key);
            self.total_requested.sub(&info.requests);
        }
    }

    /// A served member's state moved (or it joined or left as a member).
    fn move_member(&mut self, info: &PodInfo, from: Option<MemberState>, to: Option<MemberState>) {
        if from == to {
            return;
        }
        let Some(members) = info.group.key().and_then(|g| self.groups.get_mut(g)) else {
            return;
        };
        if let Some(ms) = from {
            members.remove(&info.key, ms);
        }
        if let Some(ms) = to {
            members.insert(&info.key, ms);
        }
    }

    /// Inserts a pod and accounts it everywhere (node, totals, group).
    fn attach(&mut self, pod: CachedPod) {
        if let Some(node) = pod.state.node() {
            self.account(&pod.info, node);
        }
        if let (Some(group), Some(ms)) = (pod.info.group.key(), pod.state.member_state()) {
            let members = self.groups.entry(group.clone()).or_default();
            members.add_scheduler(&pod.info.scheduler_name);
            if pod.served {
                members.insert(&pod.info.key, ms);
            }
            match self.groups_by_def.get_mut(&group.definition) {
                Some(groups) => groups.insert(group),
                None => {
                    let one = DefGroups::One(group.clone());
                    self.groups_by_def.insert(group.definition.clone(), one);
                }
            }
        }
        self.index_claims(&pod.info.clone(), true);
        self.pods.insert(pod.info.key.clone(), pod);
    }

    /// Removes a pod and undoes everything `attach` did.
    fn detach(&mut self, key: &PodKey) -> Option<CachedPod> {
        let pod = self.pods.remove(key)?;
        self.index_claims(&pod.info, false);
        self.facts.dra.unreserve(key);
        self.devices_touched();
        if let Some(node) = pod.state.node() {
            self.unaccount(&pod.info, node);
        }
        if let (Some(group), Some(ms)) = (pod.info.group.key(), pod.state.member_state())
            && let Some(members) = self.groups.get_mut(group)
        {
            members.remove_scheduler(&pod.info.scheduler_name);
            members.remove(key, ms);
            if members.is_empty() {
                self.groups.remove(group);
                if let Some(groups) = self.groups_by_def.get_mut(&group.definition)
                    && groups.remove(group)
                {
                    self.groups_by_def.remove(&group.definition);
                }
            }
        }
        Some(pod)
    }
}

mod what_if;
pub use what_if::WhatIf;

#[cfg(test)]
mod tests;
