//! DynamicResources around the cycle: claim, slice and class events
//! (`ClusterEvent::Dra`), the claim writes a pod's binding makes first
//! (PreBind: the allocation planned at Reserve and the pod's reservation),
//! and Unreserve's writes when a binding fails after them.
//!
//! Reserve itself is the cache's (`Cache::assume` allocates and holds the
//! devices), so every path that assumes a pod — a cycle, a gang's plan, a
//! plan tried again — reserves its devices with it, and every path that
//! forgets one gives them back.

use std::sync::Arc;
use std::time::Instant;

use super::Engine;
use crate::cache::DraChange;
use crate::dra::{ClaimReservation, ClassConfig, Consumer};
use crate::framework::QueueingEvent;
use crate::model::pod_claims::{Resolved, claim_keys};
use crate::model::{GroupKey, PodInfo, PodKey};

impl Engine {
    /// A claim, slice or class changed: update the facts; pods parked for
    /// devices may fit now, and pods gated on a claim may pass the gate.
    pub(super) fn on_dra_change(&mut self, change: DraChange, now: Instant) {
        let event = match change.is_claim() {
            true => QueueingEvent::ResourceClaim,
            false => QueueingEvent::Devices,
        };
        let claim = match &change {
            DraChange::ClaimUpserted { key, .. } | DraChange::ClaimDeleted(key) => {
                Some(key.clone())
            }
            _ => None,
        };
        // A claim being deleted that still names pods: pending ones of ours
        // are taken out of it below.
        let releasing = matches!(&change, DraChange::ClaimUpserted { claim: Ok(c), .. }
            if c.deleting && !c.reserved_for.is_empty());
        if !self.cache.update_dra(|dra| dra.apply(change)) {
            return;
        }
        if let Some(claim) = claim {
            let (gang, cache) = (&self.gang, &self.cache);
            self.queue
                .reevaluate_gated_pods(cache.claim_users(&claim), |p| gang.pre_enqueue(p, cache));
            // The members of the PodGroups sharing it (KEP-5729).
            let sharing: Vec<GroupKey> = cache
                .facts()
                .dra
                .groups_sharing(&claim)
                .iter()
                .flat_map(|d| cache.groups_of(d).cloned())
                .collect();
            for group in &sharing {
                self.queue
                    .regate_group(group, |p| gang.pre_enqueue(p, cache));
            }
            if releasing {
                let users: Vec<PodKey> = self.cache.claim_users(&claim).cloned().collect();
                for pod in users {
                    self.release_deleting_claims(&pod);
                }
            }
        }
        self.flush_unschedulable(event, now);
    }

    /// Brings the device inventory up to date before a cycle (a gang's
    /// members other than the one popped may read it).
    pub(super) fn refresh_devices(&mut self) {
        if !self.cache.facts().dra.is_fresh() {
            self.cache.update_dra(|dra| dra.refresh());
        }
    }

    /// What the pod's binding writes to its claims first: for each claim
    /// not yet reserved for it, the allocation planned at Reserve (when
    /// none is recorded) and the reservation. An error when a claim is no
    /// longer usable (deleted, replaced, deallocated since Reserve).
    pub(super) fn claim_reservations(
        &self,
        pod: &PodInfo,
    ) -> Result<Vec<ClaimReservation>, String> {
        let dra = &self.cache.facts().dra;
        let mut out = Vec::new();
        for claim in dra.pod_claims(pod)? {
            let key = PodKey::new(&claim.namespace, &claim.name);
            let allocation = match (&claim.allocation, dra.assumed(&key)) {
                (Some(_), _) => None,
                (None, Some(a)) => Some(a.allocation.clone()),
                (None, None) => {
                    return Err(format!(
                        "resourceclaim {:?} was deallocated after its devices were reserved",
                        &*claim.name
                    ));
                }
            };
            if allocation.is_none() && claim.reserved(pod) {
                continue;
            }
            let class_config = allocation
                .as_ref()
                .map(|a| class_config(dra, claim.claim, a))
                .unwrap_or_default();
            out.push(ClaimReservation {
                claim: key,
                claim_uid: claim.uid.clone(),
                allocation,
                class_config,
                extended: None,
                group: claim.group.map(Consumer::pod_group),
            });
        }
        // The pod's extended-resource claim, planned at Reserve: created
        // by the binding.
        let key = crate::cache::DraFacts::extended_plan_key(pod);
        if let Some(plan) = dra.assumed(&key)
            && let Some(x) = &plan.extended
        {
            let claim = x.claim(&pod.key.namespace);
            out.push(ClaimReservation {
                claim: key,
                claim_uid: Arc::from(""),
                allocation: Some(plan.allocation.clone()),
                class_config: class_config(dra, &claim, &plan.allocation),
                extended: Some(x.clone()),
                group: None,
            });
        }
        Ok(out)
    }

    /// Emits the pod's binding with its claim writes, or fails its PreBind
    /// when a claim can no longer be written.
    pub(super) fn bind_with_claims(&mut self, pod: &PodInfo, node: Arc<str>) -> Result<(), String> {
        let claims = match pod.constraints.resource_claims.is_empty()
            && pod.constraints.extended.is_empty()
        {
            true => Vec::new(),
            false => self.claim_reservations(pod)?,
        };
        if !claims.is_empty() {
            self.cache.update_dra(|dra| dra.writing(&pod.key));
        }
        self.outbox
            .bind(pod.key.clone(), pod.uid.clone(), node, claims);
        Ok(())
    }

    /// A pod about to be scheduled still has the extended-resource claim
    /// an earlier attempt created (its binding failed and the deletion
    /// did not happen): the daemon is asked to delete it, and
    /// DynamicResources refuses the pod until the claim is gone.
    pub(super) fn clear_stale_extended_claim(&mut self, pod: &PodInfo) {
        if pod.constraints.extended.is_empty() || pod.node_name.is_some() {
            return;
        }
        if let Some(c) = self.cache.facts().dra.extended_claim_of(&pod.uid) {
            let claim = PodKey::new(&c.namespace, &c.name);
            self.outbox
                .unreserve_claims(pod.key.clone(), pod.uid.clone(), vec![claim]);
        }
    }

    /// A pending pod this scheduler serves (not bound, no binding in
    /// flight) is taken out of the `reservedFor` of each of its claims
    /// being deleted (Unreserve's write). The pod cannot be bound with such
    /// a claim (the gate holds it), and while it is reserved the claim
    /// cannot finish being deleted: the resourceclaim controller keeps a
    /// live pod's reservation, so it never deallocates the claim nor
    /// removes its delete-protection finalizer. The reservation is left
    /// by a binding that failed after its claim writes when Unreserve's
    /// write failed too, or by a scheduler that stopped in between.
    pub(super) fn release_deleting_claims(&mut self, pod: &PodKey) {
        let Some(cached) = self.cache.pod(pod) else {
            return;
        };
        if !cached.served || !matches!(cached.state, crate::cache::PodState::Pending) {
            return;
        }
        let info = cached.info.clone();
        let dra = &self.cache.facts().dra;
        let claims: Vec<PodKey> =
            claim_keys(&info.constraints.resource_claims, &info.key.namespace)
                .filter(|k| {
                    matches!(dra.claim(&k.namespace, &k.name),
                    Some(Ok(c)) if c.deleting && c.reserved_for_uid(&info.uid))
                })
                .collect();
        if !claims.is_empty() {
            self.outbox
                .unreserve_claims(info.key.clone(), info.uid.clone(), claims);
        }
    }

    /// A binding failed: the claims it may have reserved for the pod are
    /// given back (Unreserve), so a claim pinned to a node the pod will
    /// not run on is freed. A claim the pod's PodGroup shares is given
    /// back by the group only when no other member is bound or binding:
    /// the members placed rely on it.
    pub(super) fn unreserve_claims(&mut self, pod: &PodInfo) {
        let dra = &self.cache.facts().dra;
        let group = dra.group_claims_of(pod);
        let (mut claims, mut shared) = (Vec::new(), Vec::new());
        for pc in &pod.constraints.resource_claims {
            let (entry, of_group) = pc.in_group(group);
            let Resolved::Claim(name) = entry.resolve() else {
                continue;
            };
            let key = PodKey::new(&pod.key.namespace, name);
            match of_group {
                Some(_) => shared.push(key),
                None => claims.push(key),
            }
        }
        // The claim made for its extended resources, if the binding
        // created one: the daemon deletes it (a claim owned by the pod and
        // marked as an extended-resource claim).
        if let Some(c) = dra.extended_claim_of(&pod.uid) {
            claims.push(PodKey::new(&c.namespace, &c.name));
        }
        let group_uid = group.map(|g| g.uid.clone());
        let others_placed = pod
            .group
            .key()
            .and_then(|g| self.cache.group(g))
            .is_some_and(|m| m.assumed_or_bound() > 0);
        if !claims.is_empty() {
            self.outbox
                .unreserve_claims(pod.key.clone(), pod.uid.clone(), claims);
        }
        if let Some(uid) = group_uid
            && !shared.is_empty()
            && !others_placed
        {
            self.outbox.unreserve_claims(pod.key.clone(), uid, shared);
        }
    }
}

/// The configuration of the classes `a`'s results were allocated from,
/// each entry with the requests it applies to, classes in name order.
fn class_config(
    dra: &crate::cache::DraFacts,
    claim: &crate::dra::Claim,
    a: &crate::dra::Allocation,
) -> Vec<ClassConfig> {
    let mut by_class: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
    for r in &a.results {
        let alternative = claim
            .requests
            .iter()
            .flat_map(|q| &q.alternatives)
            .find(|alt| alt.name == r.request);
        if let Some(alt) = alternative {
            let requests = by_class.entry(&alt.class).or_default();
            if !requests.iter().any(|q| **q == *r.request) {
                requests.push(r.request.to_string());
            }
        }
    }
    by_class
        .into_iter()
        .filter_map(|(class, requests)| Some((dra.class(class)?, requests)))
        .flat_map(|(class, requests)| {
            class.config.iter().map(move |opaque| ClassConfig {
                requests: requests.clone(),
                opaque: opaque.clone(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod gang_tests;
