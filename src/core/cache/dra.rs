//! `DraFacts`: the `resource.k8s.io` objects the DynamicResources plugin
//! reads (ResourceSlices, DeviceClasses, ResourceClaims), the inventory
//! built from them, and the devices held — by claims' recorded allocations
//! and by the allocations planned at Reserve for pods not yet bound
//! (`assumed`), so two pods never get one device.
//!
//! The inventory is rebuilt only when a slice or class changed and a cycle
//! needs it (`refresh`), so a driver publishing thousands of slices at
//! start-up costs one build, not one per slice.

use std::collections::HashMap;
use std::sync::Arc;

use crate::dra::allocate::{Budget, NodeView, allocate};
use crate::dra::cel::Evaluator;
use crate::dra::extended::{ExtendedClaim, placeholder_name};
use crate::dra::{Allocation, Claim, DeviceClass, InUse, Inventory, Slice, TaintRule};
use crate::model::pod_claims::{GroupClaims, Resolved};
use crate::model::{DefinitionKey, NodeInfo, PodInfo, PodKey};

/// A ResourceClaim's namespace and name.
pub type ResourceClaimKey = PodKey;

/// The keys of the claims a pod's own entries name (its group's claims
/// left out: they are reserved for the group, not the pod).
fn claim_keys_of(pod: &PodInfo, group: Option<&GroupClaims>) -> Vec<ResourceClaimKey> {
    pod.constraints
        .resource_claims
        .iter()
        .filter(|pc| pc.in_group(group).1.is_none())
        .filter_map(|pc| match pc.resolve() {
            Resolved::Claim(n) => Some(ResourceClaimKey::new(&pod.key.namespace, n)),
            _ => None,
        })
        .collect()
}

/// Plans taken out of the devices held for a joint search
/// (`DraFacts::lift_plans`): each claim's key, the claim, and its plan.
/// Handed back to `reserve_jointly` or `put_back`; never dropped.
#[derive(Debug, Default)]
#[must_use]
pub struct Lifted {
    plans: Vec<(ResourceClaimKey, Arc<Claim>, Assumed)>,
}

impl Lifted {
    pub fn is_empty(&self) -> bool {
        self.plans.is_empty()
    }
}

/// A claim a pod uses, and whom it is reserved for: the pod, or — for a
/// claim its PodGroup shares with every member (KEP-5729) — the group.
#[derive(Debug, Clone, Copy)]
pub struct UsedClaim<'a> {
    pub claim: &'a Arc<Claim>,
    /// The pod's group, when the claim is the group's.
    pub group: Option<&'a GroupClaims>,
}

impl UsedClaim<'_> {
    /// The UID the claim is reserved under for `pod`: the group's for a
    /// group's claim.
    pub fn consumer_uid<'b>(&'b self, pod: &'b PodInfo) -> &'b str {
        self.group.map_or(&*pod.uid, |g| &*g.uid)
    }

    /// Whether the claim is reserved for `pod` (or its group).
    pub fn reserved(&self, pod: &PodInfo) -> bool {
        self.claim.reserved_for_uid(self.consumer_uid(pod))
    }
}

impl std::ops::Deref for UsedClaim<'_> {
    type Target = Arc<Claim>;
    fn deref(&self) -> &Arc<Claim> {
        self.claim
    }
}

/// Why a pod's claims cannot be used yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimProblem {
    pub message: String,
    /// Expected to pass (a claim not created yet, or being replaced), not
    /// a mistake to fix.
    pub waiting: bool,
}

impl ClaimProblem {
    fn waiting(message: String) -> Self {
        ClaimProblem {
            message,
            waiting: true,
        }
    }

    fn invalid(message: String) -> Self {
        ClaimProblem {
            message,
            waiting: false,
        }
    }
}

impl From<ClaimProblem> for String {
    fn from(p: ClaimProblem) -> String {
        p.message
    }
}

/// An object as its informer read it: usable, or why not.
pub type Read<T> = Result<Arc<T>, Arc<str>>;

/// One `resource.k8s.io` object observed, changed or deleted.
#[derive(Debug, Clone)]
pub enum DraChange {
    SliceUpserted {
        name: Arc<str>,
        slice: Read<Slice>,
    },
    SliceDeleted(Arc<str>),
    ClassUpserted {
        name: Arc<str>,
        class: Read<DeviceClass>,
    },
    ClassDeleted(Arc<str>),
    ClaimUpserted {
        key: ResourceClaimKey,
        claim: Read<Claim>,
    },
    ClaimDeleted(ResourceClaimKey),
    TaintRuleUpserted {
        name: Arc<str>,
        rule: Read<TaintRule>,
    },
    TaintRuleDeleted(Arc<str>),
}

impl DraChange {
    /// Whether it is a claim's (`QueueingEvent::ResourceClaim`) rather than
    /// a device's or class's (`QueueingEvent::Devices`).
    pub fn is_claim(&self) -> bool {
        matches!(
            self,
            DraChange::ClaimUpserted { .. } | DraChange::ClaimDeleted(_)
        )
    }
}

/// An allocation planned at Reserve, held until the claim is observed
/// allocated, or until no pod relies on it any more.
#[derive(Debug, Clone)]
pub struct Assumed {
    pub allocation: Allocation,
    /// The pods relying on it — the one it was planned for, and those
    /// sharing the claim since — each with whether its binding, which
    /// writes the allocation, is in flight. A pod whose binding is in
    /// flight keeps relying on it even after giving its node back (deleted
    /// while binding), since its write may still land.
    pub users: std::collections::BTreeMap<PodKey, bool>,
    /// For a pod's extended-resource claim (planned under its placeholder
    /// name): what the binding creates.
    pub extended: Option<Arc<ExtendedClaim>>,
}

impl Assumed {
    /// Whether `pod` relies on it.
    pub fn used_by(&self, pod: &PodKey) -> bool {
        self.users.contains_key(pod)
    }
}

/// Nodes `DraFacts::touched` lists before it gives way to a new epoch.
const MAX_TOUCHED: usize = 4096;

#[derive(Clone)]
pub struct DraFacts {
    slices: HashMap<Arc<str>, Read<Slice>>,
    classes: HashMap<Arc<str>, Read<DeviceClass>>,
    claims: HashMap<ResourceClaimKey, Read<Claim>>,
    /// DeviceTaintRules: their taints are put on the devices they pick
    /// when the inventory is built.
    taint_rules: HashMap<Arc<str>, Read<TaintRule>>,
    inventory: Arc<Inventory>,
    /// A slice or class changed since `inventory` was built.
    stale: bool,
    /// What recorded and assumed allocations hold (shared with a cycle's
    /// state; copied on write only while a cycle holds it).
    in_use: Arc<InUse>,
    assumed: HashMap<ResourceClaimKey, Assumed>,
    /// Pod → the plans in `assumed` it is a user of (the same facts as
    /// `Assumed::users`, by pod): a binding's start and end, and a pod
    /// leaving, touch its own plans instead of scanning every plan.
    plans_of: HashMap<PodKey, Vec<ResourceClaimKey>>,
    /// Extended-resource claims by the uid of the pod they were made for.
    extended_claims: HashMap<Arc<str>, ResourceClaimKey>,
    /// The claims each PodGroup shares with its members (KEP-5729), as
    /// its definition reads them (`set_group_claims`), and the groups
    /// sharing each claim known by name (a claim's event re-runs the gate
    /// of their members).
    group_claims: HashMap<DefinitionKey, Arc<GroupClaims>>,
    claim_groups: HashMap<ResourceClaimKey, Vec<DefinitionKey>>,
    /// Recorded allocations a what-if simulation released
    /// (`what_if_release`), to hold again when it is undone.
    released: std::collections::HashSet<ResourceClaimKey>,
    eval: Arc<Evaluator>,
    /// Allocations planned at Reserve, and how many failed there.
    pub reserved: u64,
    pub reserve_failures: u64,
    /// Allocation searches (one per node a pod with unallocated claims is
    /// filtered on, and one per Reserve), counted from Filter's threads.
    searches: Arc<std::sync::atomic::AtomicU64>,
    /// Moves whenever what devices every node offers may have changed:
    /// a new inventory, or the use of a device that reaches more than one
    /// node (`Inventory::confined_to`). Memos of per-node allocations are
    /// valid for one epoch (`framework::placement::Batch`).
    epoch: u64,
    /// Nodes whose devices' use changed since the cache last took them
    /// (`take_touched`): it marks them changed, which forgets what memos
    /// knew of them.
    touched: Vec<Arc<str>>,
}

impl Default for DraFacts {
    fn default() -> Self {
        DraFacts {
            slices: HashMap::new(),
            classes: HashMap::new(),
            claims: HashMap::new(),
            taint_rules: HashMap::new(),
            inventory: Arc::new(Inventory::default()),
            stale: false,
            in_use: Arc::new(InUse::default()),
            assumed: HashMap::new(),
            plans_of: HashMap::new(),
            extended_claims: HashMap::new(),
            group_claims: HashMap::new(),
            claim_groups: HashMap::new(),
            released: Default::default(),
            eval: Arc::new(Evaluator::new()),
            reserved: 0,
            reserve_failures: 0,
            searches: Arc::default(),
            epoch: 1,
            touched: Vec::new(),
        }
    }
}

impl std::fmt::Debug for DraFacts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DraFacts")
            .field("slices", &self.slices.len())
            .field("classes", &self.classes.len())
            .field("claims", &self.claims.len())
            .field("assumed", &self.assumed.len())
            .field("stale", &self.stale)
            .finish()
    }
}

/// The slice with the taints of the rules that pick its devices.
fn taint<'a>(s: &'a Slice, rules: &[&TaintRule]) -> std::borrow::Cow<'a, Slice> {
    let picking: Vec<&&TaintRule> = rules
        .iter()
        .filter(|r| r.picks_pool(&s.driver, &s.pool) && r.taint.effect.as_ref() != "None")
        .collect();
    if picking.is_empty() {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut s = s.clone();
    for d in &mut s.devices {
        for r in &picking {
            if r.picks_device(&d.name) && !d.taints.contains(&r.taint) {
                d.taints.push(r.taint.clone());
            }
        }
    }
    std::borrow::Cow::Owned(s)
}

/// Inserts unless equal; returns whether the map changed.
fn upsert<T: PartialEq>(map: &mut HashMap<Arc<str>, Read<T>>, key: Arc<str>, v: Read<T>) -> bool {
    let same = match (map.get(&key), &v) {
        (Some(Ok(a)), Ok(b)) => Arc::ptr_eq(a, b) || **a == **b,
        (Some(Err(a)), Err(b)) => a == b,
        _ => false,
    };
    if !same {
        map.insert(key, v);
    }
    !same
}

impl DraFacts {
    /// Applies one change; returns whether anything placement reads changed.
    pub fn apply(&mut self, change: DraChange) -> bool {
        match change {
            DraChange::SliceUpserted { name, slice } => {
                let changed = upsert(&mut self.slices, name, slice);
                self.stale |= changed;
                changed
            }
            DraChange::SliceDeleted(name) => {
                let changed = self.slices.remove(&name).is_some();
                self.stale |= changed;
                changed
            }
            DraChange::ClassUpserted { name, class } => {
                let changed = upsert(&mut self.classes, name, class);
                self.stale |= changed;
                changed
            }
            DraChange::ClassDeleted(name) => {
                let changed = self.classes.remove(&name).is_some();
                self.stale |= changed;
                changed
            }
            DraChange::ClaimUpserted { key, claim } => self.set_claim(key, Some(claim)),
            DraChange::ClaimDeleted(key) => self.set_claim(key, None),
            DraChange::TaintRuleUpserted { name, rule } => {
                let changed = upsert(&mut self.taint_rules, name, rule);
                self.stale |= changed;
                changed
            }
            DraChange::TaintRuleDeleted(name) => {
                let changed = self.taint_rules.remove(&name).is_some();
                self.stale |= changed;
                changed
            }
        }
    }

    /// Replaces a claim: what its old allocation held is given back, what
    /// its new one holds is taken, and a planned allocation ends once the
    /// claim shows one (or is gone).
    fn set_claim(&mut self, key: ResourceClaimKey, claim: Option<Read<Claim>>) -> bool {
        // The informer's news older than what a write answered: the write's
        // state stands (a watch delivers the write's own event later).
        if let (Some(Ok(new)), Some(Ok(have))) = (&claim, self.claims.get(&key))
            && new.uid == have.uid
            && matches!((new.resource_version, have.resource_version), (Some(n), Some(h)) if n < h)
        {
            return false;
        }
        let old = match &claim {
            Some(c) => self.claims.insert(key.clone(), c.clone()),
            None => self.claims.remove(&key),
        };
        self.index_extended(&key, old.as_ref(), claim.as_ref());
        let unchanged = match (&old, &claim) {
            (Some(Ok(a)), Some(Ok(b))) => {
                a.allocation == b.allocation
                    && a.reserved_for == b.reserved_for
                    && a.deleting == b.deleting
                    && a.uid == b.uid
                    && a.owner_pod == b.owner_pod
                    && a.owner_group == b.owner_group
            }
            (None, None) => true,
            _ => false,
        };
        let allocated = |c: &Option<Read<Claim>>| {
            c.as_ref()
                .and_then(|c| c.as_ref().ok())
                .and_then(|c| c.allocation.clone())
        };
        let (was, now) = (allocated(&old), allocated(&claim));
        if !self.stale && was != now {
            if let Some(a) = &was {
                self.set_held(a, false);
            }
            if let Some(a) = &now {
                self.set_held(a, true);
            }
        }
        self.settle_plan(&key);
        !unchanged
    }

    /// Ends the plan for `key` once it is no longer needed: no pod relies
    /// on it, or the claim is recorded allocated (or gone) and no binding
    /// that writes the plan is in flight — a write in flight may record it
    /// again after a deallocation, so its devices stay held until then.
    fn settle_plan(&mut self, key: &ResourceClaimKey) {
        let Some(a) = self.assumed.get(key) else {
            return;
        };
        let writing = a.users.values().any(|w| *w);
        let recorded = match self.claims.get(key) {
            Some(Ok(c)) => c.allocation.is_some(),
            Some(Err(_)) => false,
            None => true,
        };
        if !(a.users.is_empty() || (recorded && !writing)) {
            return;
        }
        let Some(a) = self.assumed.remove(key) else {
            return;
        };
        for user in a.users.keys() {
            self.forget_plan_of(user, key);
        }
        if !self.stale {
            self.set_held(&a.allocation, false);
        }
    }

    /// Takes (or gives back) what an allocation holds, and records where
    /// that changes what other pods can be allocated: the nodes its
    /// devices are confined to, or everywhere (a new epoch).
    fn set_held(&mut self, a: &Allocation, take: bool) {
        let in_use = Arc::make_mut(&mut self.in_use);
        match take {
            true => in_use.hold(a, &self.inventory),
            false => in_use.unhold(a, &self.inventory),
        }
        for r in a.results.iter().filter(|r| !r.admin_access) {
            match self.inventory.confined_to(&r.device) {
                // Left untaken for long (facts changed outside a cache),
                // the list gives way to a new epoch, which says as much.
                Some(_) if self.touched.len() >= MAX_TOUCHED => {
                    self.touched.clear();
                    self.new_epoch();
                }
                Some(node) => {
                    if self.touched.last() != Some(node) {
                        self.touched.push(node.clone());
                    }
                }
                None => self.new_epoch(),
            }
        }
    }

    fn new_epoch(&mut self) {
        // 2^64 changes never come; starting over would still be a change.
        self.epoch = self.epoch.checked_add(1).unwrap_or(1);
    }

    /// See `epoch`: equal epochs, with no node named by `take_touched` in
    /// between, mean equal answers from the allocator on every node.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The nodes whose devices' use changed since the last call.
    pub fn take_touched(&mut self) -> Vec<Arc<str>> {
        std::mem::take(&mut self.touched)
    }

    /// Keeps `extended_claims` in step with a claim replaced.
    fn index_extended(
        &mut self,
        key: &ResourceClaimKey,
        old: Option<&Read<Claim>>,
        new: Option<&Read<Claim>>,
    ) {
        let owner = |c: Option<&Read<Claim>>| {
            c.and_then(|c| c.as_ref().ok())
                .filter(|c| c.extended)
                .and_then(|c| c.owner_pod.clone())
        };
        if let Some(uid) = owner(old)
            && self.extended_claims.get(&uid) == Some(key)
        {
            self.extended_claims.remove(&uid);
        }
        if let Some(uid) = owner(new) {
            self.extended_claims.insert(uid, key.clone());
        }
    }

    /// The extended-resource claim made for the pod with this uid, if one
    /// exists.
    pub fn extended_claim_of(&self, pod_uid: &str) -> Option<&Arc<Claim>> {
        let key = self.extended_claims.get(pod_uid)?;
        self.claims.get(key)?.as_ref().ok()
    }

    /// The key the plan of a pod's extended-resource claim is kept under.
    pub fn extended_plan_key(pod: &PodInfo) -> ResourceClaimKey {
        ResourceClaimKey::new(&pod.key.namespace, &placeholder_name(&pod.uid))
    }

    /// The readable classes.
    pub fn classes(&self) -> impl Iterator<Item = &DeviceClass> {
        self.classes.values().filter_map(|c| c.as_deref().ok())
    }

    /// The class serving an extended resource (`dra::extended::class_for`).
    pub fn extended_class(&self, resource: &str) -> Option<&DeviceClass> {
        crate::dra::extended::class_for(resource, self.classes())
    }

    /// Whether a class serves any of the pod's extended resources.
    pub fn serves_extended(&self, pod: &PodInfo) -> bool {
        pod.constraints
            .extended
            .iter()
            .flat_map(|c| &c.requests)
            .any(|r| self.extended_class(&r.resource).is_some())
    }

    /// The claim the pod's extended resources make on a node with this
    /// allocatable: those a class serves and the node does not advertise.
    /// `None` when there are none.
    pub fn extended_claim_for(
        &self,
        pod: &PodInfo,
        allocatable: &crate::model::Resources,
    ) -> Option<ExtendedClaim> {
        if pod.constraints.extended.is_empty() {
            return None;
        }
        let mut on_dra = std::collections::BTreeMap::new();
        for r in pod.constraints.extended.iter().flat_map(|c| &c.requests) {
            if allocatable.scalar.get(&r.resource).copied().unwrap_or(0) > 0 {
                continue;
            }
            if let Some(class) = self.extended_class(&r.resource) {
                on_dra.insert(r.resource.clone(), class.name.clone());
            }
        }
        if on_dra.is_empty() {
            return None;
        }
        crate::dra::extended::build(&pod.constraints.extended, &on_dra, &pod.key.name, &pod.uid)
    }

    /// Rebuilds the inventory (and what is held in it) if a slice or class
    /// changed since it was built.
    pub fn refresh(&mut self) {
        if !self.stale {
            return;
        }
        self.stale = false;
        let rules: Vec<&TaintRule> = self
            .taint_rules
            .values()
            .filter_map(|r| r.as_deref().ok())
            .collect();
        // Slices with the rules' taints on the devices they pick (copied
        // only when some rule picks their pool).
        let tainted: Vec<std::borrow::Cow<'_, Slice>> = self
            .slices
            .values()
            .filter_map(|s| s.as_deref().ok())
            .map(|s| taint(s, &rules))
            .collect();
        let slices: Vec<&Slice> = tainted.iter().map(|s| &**s).collect();
        let classes = self
            .classes
            .values()
            .filter_map(|c| c.as_deref().ok())
            .cloned();
        let mut inv = Inventory::new(slices, classes);
        let mut unreadable: Vec<String> = self
            .slices
            .iter()
            .filter_map(|(name, s)| {
                s.as_ref()
                    .err()
                    .map(|e| format!("ResourceSlice {name}: {e}"))
            })
            .collect();
        unreadable.extend(self.taint_rules.iter().filter_map(|(name, r)| {
            r.as_ref().err().map(|e| {
                format!("DeviceTaintRule {name} cannot be read, so the devices it taints are unknown: {e}")
            })
        }));
        unreadable.sort();
        for p in unreadable {
            inv.note_problem(p);
        }
        let mut in_use = InUse::of(self.claims.values().filter_map(|c| c.as_deref().ok()), &inv);
        for a in self.assumed.values() {
            in_use.hold(&a.allocation, &inv);
        }
        self.inventory = Arc::new(inv);
        self.in_use = Arc::new(in_use);
        self.touched.clear();
        self.new_epoch();
    }

    /// Whether the inventory is current (`refresh` has nothing to do).
    pub fn is_fresh(&self) -> bool {
        !self.stale
    }

    pub fn inventory(&self) -> &Arc<Inventory> {
        &self.inventory
    }

    pub fn in_use(&self) -> &Arc<InUse> {
        &self.in_use
    }

    pub fn evaluator(&self) -> &Arc<Evaluator> {
        &self.eval
    }

    pub fn claim(&self, namespace: &str, name: &str) -> Option<&Read<Claim>> {
        self.claims.get(&ResourceClaimKey::new(namespace, name))
    }

    /// A class, when it was observed and can be read.
    pub fn class(&self, name: &str) -> Option<&DeviceClass> {
        self.classes.get(name).and_then(|c| c.as_deref().ok())
    }

    /// Why a class cannot be used, when it was observed unreadable.
    pub fn class_problem(&self, name: &str) -> Option<&str> {
        self.classes
            .get(name)
            .and_then(|c| c.as_ref().err())
            .map(|e| &**e)
    }

    /// The allocation planned for the claim at Reserve, not yet observed.
    pub fn assumed(&self, key: &ResourceClaimKey) -> Option<&Assumed> {
        self.assumed.get(key)
    }

    /// Every planned allocation (for `/debug`).
    pub fn assumed_all(&self) -> impl Iterator<Item = (&ResourceClaimKey, &Assumed)> {
        self.assumed.iter()
    }

    /// The claim's allocation: recorded, or planned at Reserve.
    pub fn effective_allocation<'a>(&'a self, claim: &'a Claim) -> Option<&'a Allocation> {
        claim.allocation.as_ref().or_else(|| {
            self.assumed
                .get(&ResourceClaimKey::new(&claim.namespace, &claim.name))
                .map(|a| &a.allocation)
        })
    }

    /// The counter of allocation searches (Filter counts into it).
    pub fn searches(&self) -> &Arc<std::sync::atomic::AtomicU64> {
        &self.searches
    }

    /// Devices held by recorded and planned allocations.
    pub fn devices_in_use(&self) -> usize {
        self.in_use.len()
    }

    /// Counts of what is observed (for `/debug` and metrics).
    pub fn counts(&self) -> (usize, usize, usize) {
        (self.slices.len(), self.classes.len(), self.claims.len())
    }

    /// Records the claims a PodGroup's definition lists (`None`: none, or
    /// the group is gone); whether that changed anything.
    pub fn set_group_claims(
        &mut self,
        group: &DefinitionKey,
        claims: Option<Arc<GroupClaims>>,
    ) -> bool {
        if self.group_claims.get(group) == claims.as_ref() {
            return false;
        }
        let old = match claims {
            Some(c) => self.group_claims.insert(group.clone(), c),
            None => self.group_claims.remove(group),
        };
        let names = |g: &GroupClaims| -> Vec<ResourceClaimKey> {
            g.entries
                .iter()
                .filter_map(|e| match e.resolve() {
                    Resolved::Claim(n) => Some(ResourceClaimKey::new(&group.namespace, n)),
                    _ => None,
                })
                .collect()
        };
        for key in old.as_deref().map(names).unwrap_or_default() {
            if let Some(groups) = self.claim_groups.get_mut(&key) {
                groups.retain(|g| g != group);
                if groups.is_empty() {
                    self.claim_groups.remove(&key);
                }
            }
        }
        let new = self
            .group_claims
            .get(group)
            .map(|g| names(g))
            .unwrap_or_default();
        for key in new {
            self.claim_groups
                .entry(key)
                .or_default()
                .push(group.clone());
        }
        true
    }

    /// Preemption's what-if: the claims of `pod` (its own and its
    /// extended-resource claim) whose recorded allocation is reserved only
    /// for pods in `gone` (uids), and not released already.
    pub fn claims_freed_by(
        &self,
        pod: &PodInfo,
        gone: &dyn Fn(&str) -> bool,
    ) -> Vec<ResourceClaimKey> {
        let mut out = Vec::new();
        let own = claim_keys_of(pod, self.group_claims_of(pod));
        let extended = self
            .extended_claim_of(&pod.uid)
            .map(|c| ResourceClaimKey::new(&c.namespace, &c.name));
        for key in own.into_iter().chain(extended) {
            let Some(Ok(c)) = self.claims.get(&key) else {
                continue;
            };
            if c.allocation.is_some()
                && !c.reserved_for.is_empty()
                && c.reserved_for.iter().all(|r| gone(&r.uid))
                && !self.released.contains(&key)
                && !out.contains(&key)
            {
                out.push(key);
            }
        }
        out
    }

    /// Preemption's what-if: the claim's recorded allocation stops holding
    /// its devices, as if its pods were gone and it was deallocated, until
    /// `what_if_hold` (the simulation undone). Whether it was released.
    pub fn what_if_release(&mut self, key: &ResourceClaimKey) -> bool {
        let Some(Ok(c)) = self.claims.get(key) else {
            return false;
        };
        let Some(a) = c.allocation.clone() else {
            return false;
        };
        if self.stale || !self.released.insert(key.clone()) {
            return false;
        }
        self.set_held(&a, false);
        true
    }

    /// Undoes `what_if_release`.
    pub fn what_if_hold(&mut self, key: &ResourceClaimKey) {
        if !self.released.remove(key) {
            return;
        }
        if let Some(Ok(c)) = self.claims.get(key)
            && let Some(a) = c.allocation.clone()
        {
            self.set_held(&a, true);
        }
    }

    /// The PodGroups that share the claim with their members.
    pub fn groups_sharing(&self, claim: &ResourceClaimKey) -> &[DefinitionKey] {
        self.claim_groups.get(claim).map_or(&[], Vec::as_slice)
    }

    /// The claims the pod's group shares, if it is a member of a group
    /// that lists any.
    pub fn group_claims_of(&self, pod: &PodInfo) -> Option<&GroupClaims> {
        let group = pod.group.key()?;
        self.group_claims.get(&group.definition).map(|g| &**g)
    }

    /// The ResourceClaims the pod uses (entries a template needs none for
    /// left out), or why it cannot use them: a claim not generated yet,
    /// missing, unreadable, being deleted, or generated for another pod
    /// (or, for its group's, for another group).
    pub fn pod_claims<'a>(&'a self, pod: &PodInfo) -> Result<Vec<UsedClaim<'a>>, ClaimProblem> {
        let mut out = Vec::with_capacity(pod.constraints.resource_claims.len());
        let group = self.group_claims_of(pod);
        for pc in &pod.constraints.resource_claims {
            let (entry, shared) = pc.in_group(group);
            let name = match entry.resolve() {
                Resolved::NotNeeded => continue,
                Resolved::Pending => {
                    return Err(ClaimProblem::waiting(match shared {
                        Some(g) => format!(
                            "waiting for the ResourceClaim of PodGroup {} claim {:?} to be created from its template",
                            g.group, &*pc.name
                        ),
                        None => format!(
                            "waiting for the ResourceClaim of pod claim {:?} to be created from its template",
                            &*pc.name
                        ),
                    }));
                }
                Resolved::Claim(n) => n,
            };
            let claim = match self.claim(&pod.key.namespace, name) {
                None => {
                    return Err(ClaimProblem::waiting(format!(
                        "resourceclaim {name:?} not found"
                    )));
                }
                Some(Err(e)) => {
                    return Err(ClaimProblem::invalid(format!(
                        "resourceclaim {name:?}: {e}"
                    )));
                }
                Some(Ok(c)) => c,
            };
            if claim.deleting {
                return Err(ClaimProblem::waiting(format!(
                    "resourceclaim {name:?} is being deleted"
                )));
            }
            match shared {
                Some(g)
                    if entry.from_template() && claim.owner_group.as_deref() != Some(&*g.uid) =>
                {
                    return Err(ClaimProblem::invalid(format!(
                        "resourceclaim {name:?} was not created for PodGroup {}/{}",
                        pod.key.namespace, g.group
                    )));
                }
                None if pc.from_template() && claim.owner_pod.as_deref() != Some(&*pod.uid) => {
                    return Err(ClaimProblem::invalid(format!(
                        "resourceclaim {name:?} was not created for pod {}",
                        pod.key
                    )));
                }
                _ => {}
            }
            out.push(UsedClaim {
                claim,
                group: shared,
            });
        }
        Ok(out)
    }

    /// Reserve: allocates the pod's unallocated claims on `node` and holds
    /// the devices until the claims are observed allocated or no pod relies
    /// on them (`unreserve`); a claim whose allocation another pod planned
    /// is relied on by this one too. A refusal names the claim.
    pub fn reserve(&mut self, pod: &PodInfo, node: &NodeInfo) -> Result<(), String> {
        self.reserve_with(pod, node, Lifted::default())
            .map_err(|(why, _)| why)
    }

    /// Takes the plans of `pods` that only they rely on (none of them
    /// binding; not an extended-resource claim's) out of the devices held,
    /// for a joint search to plan them again together with another pod's
    /// claims (`reserve_jointly`), or to be put back (`put_back`).
    pub fn lift_plans(&mut self, pods: &[PodKey]) -> Lifted {
        let mut keys: Vec<ResourceClaimKey> = pods.iter().flat_map(|p| self.plans_of(p)).collect();
        keys.sort();
        keys.dedup();
        let mut lifted = Lifted::default();
        for key in keys {
            let liftable = self.assumed.get(&key).is_some_and(|a| {
                a.extended.is_none()
                    && a.users
                        .iter()
                        .all(|(u, writing)| !*writing && pods.contains(u))
            });
            let claim = match self.claims.get(&key) {
                Some(Ok(c)) if liftable && c.allocation.is_none() => c.clone(),
                _ => continue,
            };
            let Some(plan) = self.assumed.remove(&key) else {
                continue;
            };
            for user in plan.users.keys() {
                self.forget_plan_of(user, &key);
            }
            self.set_held(&plan.allocation, false);
            lifted.plans.push((key, claim, plan));
        }
        lifted
    }

    /// Puts lifted plans back as they were.
    pub fn put_back(&mut self, lifted: Lifted) {
        for (key, _, plan) in lifted.plans {
            self.set_held(&plan.allocation, true);
            self.insert_plan(key, plan);
        }
    }

    fn insert_plan(&mut self, key: ResourceClaimKey, plan: Assumed) {
        for user in plan.users.keys() {
            let plans = self.plans_of.entry(user.clone()).or_default();
            if !plans.contains(&key) {
                plans.push(key.clone());
            }
        }
        self.assumed.insert(key, plan);
    }

    /// Reserve with a joint search: the lifted plans' claims and the pod's
    /// are allocated together on `node` (the allocator backtracks across
    /// all of them), so a device an earlier pod was given may move to
    /// another for this pod to fit. On success the lifted plans hold their
    /// new devices; on failure they are put back as they were.
    pub fn reserve_jointly(
        &mut self,
        pod: &PodInfo,
        node: &NodeInfo,
        lifted: Lifted,
    ) -> Result<(), String> {
        self.reserve_with(pod, node, lifted)
            .map_err(|(why, lifted)| {
                self.put_back(lifted);
                why
            })
    }

    /// Reserve, allocating `lifted`'s claims again with the pod's; on
    /// failure the lifted plans are handed back untouched.
    fn reserve_with(
        &mut self,
        pod: &PodInfo,
        node: &NodeInfo,
        lifted: Lifted,
    ) -> Result<(), (String, Lifted)> {
        if pod.constraints.resource_claims.is_empty() && pod.constraints.extended.is_empty() {
            self.put_back(lifted);
            return Ok(());
        }
        self.refresh();
        let extended = self.extended_claim_for(pod, &node.allocatable);
        if extended.is_some()
            && let Some(stale) = self.extended_claim_of(&pod.uid)
        {
            let why = format!(
                "DynamicResources: resourceclaim {:?} made for the pod's extended resources by an earlier attempt is not deleted yet",
                &*stale.name
            );
            return Err((why, lifted));
        }
        // One resolution: every claim's key (the pod relies on each plan),
        // and those with no allocation yet.
        let mut keys = Vec::new();
        let mut claims: Vec<Arc<Claim>> = lifted.plans.iter().map(|(_, c, _)| c.clone()).collect();
        let used = match self.pod_claims(pod) {
            Ok(used) => used,
            Err(problem) => return Err((problem.into(), lifted)),
        };
        for c in used {
            let key = ResourceClaimKey::new(&c.namespace, &c.name);
            // A lifted plan of a claim the pod shares is allocated once.
            if self.effective_allocation(c.claim).is_none()
                && !lifted.plans.iter().any(|(k, _, _)| *k == key)
            {
                claims.push(c.claim.clone());
            }
            keys.push(key);
        }
        if let Some(x) = &extended {
            let key = Self::extended_plan_key(pod);
            // Each binding creates a claim of its own: the devices planned
            // for an earlier binding still in flight (the pod gave its
            // node back when the node went away) are that binding's, and
            // may not even reach this node.
            if self
                .assumed
                .get(&key)
                .is_some_and(|a| a.users.values().any(|writing| *writing))
            {
                let why = "DynamicResources: an earlier binding of the pod, which creates its extended-resource claim, is still in flight";
                return Err((why.into(), lifted));
            }
            if !self.assumed.contains_key(&key) {
                claims.push(Arc::new(x.claim(&pod.key.namespace)));
            }
            keys.push(key);
        }
        let extended = extended.map(Arc::new);
        if claims.is_empty() {
            self.put_back(lifted);
        } else {
            let refs: Vec<&Claim> = claims.iter().map(|c| &**c).collect();
            let view = NodeView {
                name: &node.name,
                labels: &node.labels,
            };
            self.searches
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let allocations = match allocate(
                &refs,
                view,
                &self.inventory,
                &self.in_use,
                &self.eval,
                Budget::default(),
            ) {
                Ok(a) => a,
                Err(e) => {
                    // A joint search failing is not a Reserve failing.
                    if lifted.is_empty() {
                        self.reserve_failures += 1;
                    }
                    return Err((format!("DynamicResources: {e}"), lifted));
                }
            };
            // The lifted plans' claims come first in `claims`, with their
            // new devices; then the pod's own.
            let lifted_count = lifted.plans.len();
            let mut allocations = allocations.into_iter();
            for ((key, _, mut plan), allocation) in lifted.plans.into_iter().zip(&mut allocations) {
                plan.allocation = allocation;
                self.set_held(&plan.allocation, true);
                self.insert_plan(key, plan);
            }
            let own = claims.get(lifted_count..).unwrap_or_default();
            for (claim, allocation) in own.iter().zip(allocations) {
                self.set_held(&allocation, true);
                self.reserved += 1;
                let placeholder = claim.extended && claim.uid.is_empty();
                self.assumed.insert(
                    ResourceClaimKey::new(&claim.namespace, &claim.name),
                    Assumed {
                        allocation,
                        users: Default::default(),
                        extended: extended.clone().filter(|_| placeholder),
                    },
                );
            }
        }
        for k in keys {
            if let Some(a) = self.assumed.get_mut(&k) {
                a.users.entry(pod.key.clone()).or_insert(false);
                let plans = self.plans_of.entry(pod.key.clone()).or_default();
                if !plans.contains(&k) {
                    plans.push(k);
                }
            }
        }
        Ok(())
    }

    /// `pod` is no longer a user of the plan `key`.
    fn forget_plan_of(&mut self, pod: &PodKey, key: &ResourceClaimKey) {
        if let Some(plans) = self.plans_of.get_mut(pod) {
            plans.retain(|k| k != key);
            if plans.is_empty() {
                self.plans_of.remove(pod);
            }
        }
    }

    /// The plans `pod` is a user of.
    fn plans_of(&self, pod: &PodKey) -> Vec<ResourceClaimKey> {
        self.plans_of.get(pod).cloned().unwrap_or_default()
    }

    /// Unreserve: the pod no longer relies on the allocations planned for
    /// its claims, but those its binding in flight may still write; a plan
    /// no pod relies on is given back. Returns whether any was.
    pub fn unreserve(&mut self, pod: &PodKey) -> bool {
        self.drop_user(pod)
    }

    /// The pod's binding, which writes the planned allocations, was sent.
    pub fn writing(&mut self, pod: &PodKey) {
        for k in self.plans_of(pod) {
            if let Some(w) = self.assumed.get_mut(&k).and_then(|a| a.users.get_mut(pod)) {
                *w = true;
            }
        }
    }

    /// The pod's binding finished. The claims it wrote were observed with
    /// their answers already; if it failed, the pod relies on no plan
    /// still here (it gives its node back). Plans no longer needed end.
    pub fn writes_done(&mut self, pod: &PodKey, succeeded: bool) {
        for k in &self.plans_of(pod) {
            if let Some(a) = self.assumed.get_mut(k) {
                match succeeded {
                    true => {
                        a.users.insert(pod.clone(), false);
                    }
                    false => {
                        a.users.remove(pod);
                        self.forget_plan_of(pod, k);
                    }
                }
            }
            self.settle_plan(k);
        }
    }

    /// Takes `pod` off the plans it relies on but does not write; ends the
    /// plans no longer needed.
    fn drop_user(&mut self, pod: &PodKey) -> bool {
        let mine: Vec<ResourceClaimKey> = self
            .plans_of(pod)
            .into_iter()
            .filter(|k| self.assumed.get(k).and_then(|a| a.users.get(pod)) == Some(&false))
            .collect();
        let before = self.assumed.len();
        for k in &mine {
            if let Some(a) = self.assumed.get_mut(k) {
                a.users.remove(pod);
            }
            self.forget_plan_of(pod, k);
            self.settle_plan(k);
        }
        self.assumed.len() < before
    }

    /// Where `plans_of` and the plans' users disagree (none, when the
    /// index is kept right): checked by the driver after every step.
    pub fn plan_index_problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (k, a) in &self.assumed {
            for u in a.users.keys() {
                if !self.plans_of.get(u).is_some_and(|ks| ks.contains(k)) {
                    out.push(format!("pod {u} uses plan {k} but is not indexed under it"));
                }
            }
        }
        for (u, ks) in &self.plans_of {
            for k in ks {
                if !self.assumed.get(k).is_some_and(|a| a.users.contains_key(u)) {
                    out.push(format!("pod {u} is indexed under plan {k} it does not use"));
                }
            }
        }
        out
    }

    /// Whether every device allocated (recorded or planned) is held whole
    /// by one claim at most, admin access excepted, and a shared device's
    /// shares fit its capacity (invariant I9's first half).
    pub fn double_allocations(&self) -> Vec<String> {
        let recorded = self
            .claims
            .iter()
            .filter_map(|(k, c)| Some((k, c.as_ref().ok()?.allocation.as_ref()?)));
        let planned = self.assumed.iter().map(|(k, a)| (k, &a.allocation));
        // A pod's extended-resource claim is one holder, planned under its
        // placeholder or recorded under its real name.
        let holder = |key: &ResourceClaimKey| match self.claims.get(key) {
            Some(Ok(c)) if c.extended => match &c.owner_pod {
                Some(uid) => format!("{}/{}", key.namespace, placeholder_name(uid)),
                None => key.to_string(),
            },
            _ => key.to_string(),
        };
        let held = recorded
            .chain(planned)
            .flat_map(|(key, a)| a.results.iter().map(move |r| (holder(key), r)));
        let mut out =
            crate::dra::audit::violations(held, |id| self.inventory.device(id).map(|d| &d.device));
        out.sort();
        out
    }
}
