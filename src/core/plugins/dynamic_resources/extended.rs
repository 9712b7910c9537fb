//! Extended resources backed by DRA (KEP-5004, kube-scheduler's
//! `DRAExtendedResource`): a pod asking for `example.com/gpu: 2` where a
//! DeviceClass's `spec.extendedResourceName` is `example.com/gpu` (or for
//! `deviceclass.resource.kubernetes.io/<class>`) gets devices of that class
//! on nodes that do not advertise the resource in their allocatable; on
//! nodes that do (a device plugin's), `NodeResourcesFit` counts it as
//! usual and DRA is not used for it.
//!
//! PreFilter finds the resources a class serves (`ExtendedState`, which
//! `NodeResourcesFit` reads to leave them alone where DRA serves them);
//! Filter builds the pod's extended-resource claim for the node
//! (`dra::extended::build`) and allocates it together with the pod's own
//! claims; Reserve (the cache's `assume`) plans it under a placeholder
//! name; the binding creates it, with its allocation and the pod's
//! reservation, and records it in the pod's
//! `status.extendedResourceClaimStatus` (`engine::devices`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::DraState;
use crate::cache::{DraFacts, NodeState};
use crate::dra::allocate::{Budget, NodeView, Plan};
use crate::dra::cel::Selector;
use crate::dra::extended::ExtendedClaim;
use crate::dra::inventory::Verdicts;
use crate::dra::{Claim, limits};
use crate::framework::{CycleState, Rejection};
use crate::model::PodInfo;
use crate::model::extended::DEVICE_CLASS_PREFIX;

pub const STATE_KEY: &str = "DynamicResources/extended";

/// The pod's extended resources a DeviceClass serves, each with its class.
#[derive(Debug)]
pub struct ExtendedState {
    pub served: BTreeMap<Arc<str>, Arc<str>>,
    /// Each served resource's class selectors, with their verdicts: which
    /// devices count for it when it is scored (`devices_on`).
    selectors: BTreeMap<Arc<str>, Vec<(Selector, Verdicts)>>,
    /// The claim built and prepared for each set of resources DRA serves
    /// on a node (nodes differ only in which of the pod's resources they
    /// advertise), so Filter builds and prepares it once per set, not
    /// once per node.
    prepared: Mutex<Vec<(OnDra, Arc<Prepared>)>>,
}

/// The pod's extended resources DRA serves on a node, each with its class.
type OnDra = BTreeMap<Arc<str>, Arc<str>>;

/// The pod's extended-resource claim for one set of resources on DRA.
#[derive(Debug)]
enum Prepared {
    /// Nothing to ask of DRA after all.
    Nothing,
    /// Refused on every node with this set.
    Refused(Rejection),
    /// The claim, and the pod's own claims with it, ready for each node.
    Ready { ext: ExtendedClaim, plan: Plan },
}

impl ExtendedState {
    /// Whether `NodeResourcesFit` leaves `resource` to DynamicResources on
    /// `node`: a class serves it and the node does not advertise it.
    pub fn delegates(&self, resource: &str, node: &NodeState) -> bool {
        self.served.contains_key(resource)
            && node
                .info
                .allocatable
                .scalar
                .get(resource)
                .copied()
                .unwrap_or(0)
                <= 0
    }

    /// The resources DRA serves on `node`.
    fn on_dra(&self, node: &NodeState) -> BTreeMap<Arc<str>, Arc<str>> {
        self.served
            .iter()
            .filter(|(r, _)| self.delegates(r, node))
            .map(|(r, c)| (r.clone(), c.clone()))
            .collect()
    }
}

/// PreFilter: the pod's extended resources a class serves, or why the pod
/// cannot be placed at all (a class named by `deviceclass.resource.
/// kubernetes.io/<class>` missing or unreadable; the claim an earlier
/// attempt made still there).
pub(super) fn pre_filter(
    pod: &PodInfo,
    dra: &DraFacts,
) -> Result<Option<ExtendedState>, Rejection> {
    if pod.constraints.extended.is_empty() {
        return Ok(None);
    }
    let mut served = BTreeMap::new();
    for r in pod.constraints.extended.iter().flat_map(|c| &c.requests) {
        if let Some(class) = dra.extended_class(&r.resource) {
            served.insert(r.resource.clone(), class.name.clone());
            continue;
        }
        if let Some(class) = r.resource.strip_prefix(DEVICE_CLASS_PREFIX) {
            let why = dra.class_problem(class).unwrap_or("not found");
            return Err(Rejection::unresolvable(format!(
                "extended resource {}: DeviceClass {class}: {why}",
                r.resource
            )));
        }
    }
    if served.is_empty() {
        return Ok(None);
    }
    if let Some(stale) = dra.extended_claim_of(&pod.uid) {
        return Err(Rejection::unresolvable(format!(
            "resourceclaim {:?} made for the pod's extended resources by an earlier attempt is being deleted",
            &*stale.name
        )));
    }
    let inventory = dra.inventory();
    let selectors = served
        .iter()
        .filter_map(|(resource, class)| {
            let class = inventory.class(class)?;
            let with_verdicts = class
                .selectors
                .iter()
                .map(|s| (s.clone(), inventory.verdicts(s)))
                .collect();
            Some((resource.clone(), with_verdicts))
        })
        .collect();
    Ok(Some(ExtendedState {
        served,
        selectors,
        prepared: Mutex::default(),
    }))
}

/// What `NodeResourcesFit` and `NodeResourcesBalancedAllocation` score an
/// extended resource by where DRA serves it (the node does not advertise
/// it), as kube-scheduler scores such a resource named in a scoring
/// strategy: `(allocatable, requested + in use)`, where allocatable counts
/// the devices of its class that reach the node and in use those of them
/// allocated, whole or in shares. `None` where DRA does not serve it.
pub fn devices_on(state: &CycleState, resource: &str, node: &NodeState) -> Option<(i64, i64)> {
    let x = state.read::<ExtendedState>(STATE_KEY)?;
    if !x.delegates(resource, node) {
        return None;
    }
    let selectors = x.selectors.get(resource)?;
    let d = state.read::<DraState>(super::STATE_KEY)?;
    let inv = &*d.inventory;
    let (mut devices, mut in_use) = (0i64, 0i64);
    for index in inv.reachable_indexes(&node.info.name, &node.info.labels) {
        // A selector that fails to evaluate selects nothing, as for a claim.
        let selected = selectors
            .iter()
            .all(|(s, v)| inv.passes_at(&d.eval, s, v, index).unwrap_or(false));
        if !selected {
            continue;
        }
        devices = devices.saturating_add(1);
        if d.in_use.holds(index, inv) || d.in_use.shared_out_at(index, inv) {
            in_use = in_use.saturating_add(1);
        }
    }
    Some((devices, in_use))
}

/// Filter: the pod's claims and, where DRA serves some of its extended
/// resources on the node, its extended-resource claim, allocated together.
pub(super) fn check(
    x: &ExtendedState,
    d: &DraState,
    pod: &PodInfo,
    node: &NodeState,
) -> Result<(), Rejection> {
    let on_dra = x.on_dra(node);
    if on_dra.is_empty() {
        return d.check(node);
    }
    let prepared = x.prepare(on_dra, d, pod);
    let (ext, plan) = match &*prepared {
        Prepared::Nothing => return d.check(node),
        Prepared::Refused(r) => return Err(r.clone()),
        Prepared::Ready { ext, plan } => (ext, plan),
    };
    d.reaches(node)?;
    d.searches
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let view = NodeView {
        name: &node.info.name,
        labels: &node.info.labels,
    };
    plan.fits(view, &d.inventory, &d.in_use, &d.eval, Budget::default())
        .map_err(|reason| Rejection::new(ext.explain(&pod.key.namespace, &reason)))
}

impl ExtendedState {
    /// The claim for `on_dra`, built and prepared on first use.
    fn prepare(&self, on_dra: OnDra, d: &DraState, pod: &PodInfo) -> Arc<Prepared> {
        let lock = || self.prepared.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, p)) = lock().iter().find(|(k, _)| *k == on_dra) {
            return p.clone();
        }
        let p = Arc::new(prepare(&on_dra, d, pod));
        lock().push((on_dra, p.clone()));
        p
    }
}

fn prepare(on_dra: &OnDra, d: &DraState, pod: &PodInfo) -> Prepared {
    let Some(ext) =
        crate::dra::extended::build(&pod.constraints.extended, on_dra, &pod.key.name, &pod.uid)
    else {
        return Prepared::Nothing;
    };
    if let Some(r) = ext
        .requests
        .iter()
        .find(|r| r.count > limits::MAX_DEVICES_PER_CLAIM)
    {
        let resource = ext
            .mappings
            .iter()
            .find(|m| m.request == r.name)
            .map_or("?", |m| &*m.resource);
        return Prepared::Refused(Rejection::unresolvable(format!(
            "cannot allocate extended resource {resource}: {} device(s) wanted by one container, at most {} are supported",
            r.count,
            limits::MAX_DEVICES_PER_CLAIM
        )));
    }
    let synthetic = ext.claim(&pod.key.namespace);
    let mut claims: Vec<&Claim> = d.unallocated.iter().map(|c| &**c).collect();
    claims.push(&synthetic);
    match Plan::new(&claims, &d.inventory) {
        Ok(plan) => Prepared::Ready { ext, plan },
        Err(unfit) => Prepared::Refused(Rejection::unresolvable(
            ext.explain(&pod.key.namespace, &unfit.node_reason()),
        )),
    }
}
