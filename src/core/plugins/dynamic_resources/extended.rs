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
use std::sync::Arc;

use super::{DraState, REASON_NOT_REACHABLE};
use crate::cache::{DraFacts, NodeState};
use crate::dra::allocate::{Budget, NodeView, allocate};
use crate::dra::{Claim, Reach, limits};
use crate::framework::Rejection;
use crate::model::PodInfo;
use crate::model::extended::DEVICE_CLASS_PREFIX;

pub const STATE_KEY: &str = "DynamicResources/extended";

/// The pod's extended resources a DeviceClass serves, each with its class.
#[derive(Debug, Clone)]
pub struct ExtendedState {
    pub served: BTreeMap<Arc<str>, Arc<str>>,
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
    Ok(Some(ExtendedState { served }))
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
    let Some(ext) =
        crate::dra::extended::build(&pod.constraints.extended, &on_dra, &pod.key.name, &pod.uid)
    else {
        return d.check(node);
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
        return Err(Rejection::unresolvable(format!(
            "cannot allocate extended resource {resource}: {} device(s) wanted by one container, at most {} are supported",
            r.count,
            limits::MAX_DEVICES_PER_CLAIM
        )));
    }
    let (name, labels) = (&*node.info.name, &node.info.labels);
    for (_claim, reach) in &d.allocated {
        if !reach.iter().all(|r: &Reach| r.reaches(name, labels)) {
            return Err(Rejection::unresolvable(REASON_NOT_REACHABLE));
        }
    }
    let synthetic = ext.claim(&pod.key.namespace);
    let mut claims: Vec<&Claim> = d.unallocated.iter().map(|c| &**c).collect();
    claims.push(&synthetic);
    d.searches
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    allocate(
        &claims,
        NodeView { name, labels },
        &d.inventory,
        &d.in_use,
        &d.eval,
        Budget::default(),
    )
    .map(|_| ())
    .map_err(|unfit| Rejection::unresolvable(ext.explain(&pod.key.namespace, &unfit.node_reason())))
}
