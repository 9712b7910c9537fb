//! The harness's ResourceClaims, as the API server and the resourceclaim
//! controller keep them: a binding's claim writes (allocation, reservation)
//! applied the way the API server accepts or refuses them, reservations of
//! pods that are gone or finished removed, and a claim no longer reserved
//! for anyone deallocated. Invariant I9 is checked against them: a device is
//! allocated whole to one claim at most (admin access excepted), a shared
//! device's shares fit its capacity (`dra::audit`), and a pod is
//! bound only where each of its claims is allocated, reserved for it, and
//! reachable from its node.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::Harness;
use crate::cache::DraChange;
use crate::dra::{Claim, ClaimReservation, Consumer};
use crate::engine::ClusterEvent;
use crate::model::PodKey;
use crate::model::pod_claims::Resolved;

#[derive(Debug, Default)]
pub(super) struct DraCluster {
    claims: BTreeMap<PodKey, Claim>,
    /// The slices published, for the capacity of shared devices.
    slices: BTreeMap<Arc<str>, Arc<crate::dra::Slice>>,
    /// The next this many claim writes fail (before anything is written).
    pub(super) fail_writes: usize,
    /// Extended-resource claims made by bindings so far (for their names).
    extended_made: usize,
    pub(super) i9_violations: Vec<String>,
}

impl Harness {
    /// A slice, class or claim observed (a claim is also kept as the
    /// cluster's, for the binding's writes).
    pub fn put_dra(&mut self, change: DraChange) {
        match &change {
            DraChange::ClaimUpserted { key, claim: Ok(c) } => {
                self.dra.claims.insert(key.clone(), (**c).clone());
            }
            DraChange::ClaimUpserted { key, .. } | DraChange::ClaimDeleted(key) => {
                self.dra.claims.remove(key);
            }
            DraChange::SliceUpserted { name, slice: Ok(s) } => {
                self.dra.slices.insert(name.clone(), s.clone());
            }
            DraChange::SliceUpserted { name, .. } | DraChange::SliceDeleted(name) => {
                self.dra.slices.remove(name);
            }
            _ => {}
        }
        self.send(ClusterEvent::Dra(change));
    }

    /// The next `n` claim writes of bindings fail.
    pub fn fail_next_claim_writes(&mut self, n: usize) {
        self.dra.fail_writes += n;
    }

    pub fn claim(&self, key: &PodKey) -> Option<&Claim> {
        self.dra.claims.get(key)
    }

    /// I9, as seen at each binding and each claim write, and in the
    /// engine's own record of the devices it holds.
    pub fn check_devices(&self) -> Result<(), String> {
        if let Some(v) = self.dra.i9_violations.first() {
            return Err(format!("I9: {v}"));
        }
        let dra = &self.engine.cache().facts().dra;
        if let Some(v) = dra.double_allocations().first() {
            return Err(format!("I9 (the scheduler's view): {v}"));
        }
        match dra.plan_index_problems().first() {
            Some(v) => Err(format!("the scheduler's index of plans by pod: {v}")),
            None => Ok(()),
        }
    }

    fn observe_claim(&mut self, key: &PodKey) {
        if let Some(c) = self.dra.claims.get(key) {
            let change = DraChange::ClaimUpserted {
                key: key.clone(),
                claim: Ok(Arc::new(c.clone())),
            };
            self.send(ClusterEvent::Dra(change));
        }
    }

    /// A binding's claim writes, in order, as the API server takes them:
    /// a claim gone or replaced, or allocated other devices meanwhile,
    /// fails the write (and the binding).
    pub(super) fn write_claims(
        &mut self,
        pod: &PodKey,
        uid: &Arc<str>,
        writes: &[ClaimReservation],
    ) -> Result<(), String> {
        if writes.is_empty() {
            return Ok(());
        }
        if self.dra.fail_writes > 0 {
            self.dra.fail_writes -= 1;
            return Err("injected claim write failure".into());
        }
        for w in writes {
            if let Some(x) = &w.extended {
                self.create_extended_claim(pod, uid, x, w)?;
                continue;
            }
            let Some(c) = self.dra.claims.get_mut(&w.claim) else {
                return Err(format!("resourceclaims {:?} not found", &*w.claim.name));
            };
            if c.uid != w.claim_uid {
                return Err(format!("resourceclaim {:?} was replaced", &*w.claim.name));
            }
            match (&w.allocation, &c.allocation) {
                (Some(planned), None) => c.allocation = Some(planned.clone()),
                (Some(planned), Some(recorded)) if planned.results != recorded.results => {
                    return Err(format!(
                        "resourceclaim {:?} was allocated other devices",
                        &*w.claim.name
                    ));
                }
                (None, None) => {
                    return Err(format!(
                        "resourceclaim {:?} is not allocated",
                        &*w.claim.name
                    ));
                }
                _ => {}
            }
            // A claim the pod's PodGroup shares is reserved for the group.
            let consumer = w.group.clone().unwrap_or_else(|| Consumer {
                api_group: Arc::from(""),
                resource: Arc::from("pods"),
                name: pod.name.clone(),
                uid: uid.clone(),
            });
            if !c.reserved_for_uid(&consumer.uid) {
                c.reserved_for.push(consumer);
            }
            self.check_single_holders();
            self.observe_claim(&w.claim);
        }
        Ok(())
    }

    /// The binding's extended-resource claim, created as the daemon
    /// creates it (`generateName: <pod>-extended-resources-`, owned by the
    /// pod) with its allocation and the pod's reservation.
    fn create_extended_claim(
        &mut self,
        pod: &PodKey,
        uid: &Arc<str>,
        x: &crate::dra::extended::ExtendedClaim,
        w: &ClaimReservation,
    ) -> Result<(), String> {
        let Some(allocation) = w.allocation.clone() else {
            return Err("an extended-resource claim to create has no allocation".into());
        };
        self.dra.extended_made += 1;
        let mut c = x.claim(&pod.namespace);
        c.name = Arc::from(format!(
            "{}-extended-resources-{}",
            pod.name, self.dra.extended_made
        ));
        c.uid = Arc::from(format!("uid-{}", c.name));
        c.allocation = Some(allocation);
        c.reserved_for.push(Consumer {
            api_group: Arc::from(""),
            resource: Arc::from("pods"),
            name: pod.name.clone(),
            uid: uid.clone(),
        });
        let key = PodKey::new(&c.namespace, &c.name);
        self.dra.claims.insert(key.clone(), c);
        self.check_single_holders();
        self.observe_claim(&key);
        Ok(())
    }

    /// Deletes the extended-resource claims made for the pod `uid` (a
    /// binding that failed after making one; the pod gone or finished:
    /// its owner reference), as the daemon and the garbage collector do.
    pub(super) fn delete_extended_claims(&mut self, uid: &str) {
        let keys: Vec<PodKey> = self
            .dra
            .claims
            .iter()
            .filter(|(_, c)| c.extended && c.owner_pod.as_deref() == Some(uid))
            .map(|(k, _)| k.clone())
            .collect();
        self.delete_claims(keys);
    }

    /// Deletes the claims `keys`, and tells the scheduler.
    fn delete_claims(&mut self, keys: Vec<PodKey>) {
        for k in keys {
            self.dra.claims.remove(&k);
            self.send(ClusterEvent::Dra(DraChange::ClaimDeleted(k)));
        }
    }

    /// Takes `uid` out of each claim's reservations; a claim reserved for
    /// no one is deallocated (the resourceclaim controller's part). An
    /// extended-resource claim named for Unreserve is deleted instead (the
    /// daemon's `deleteClaim`).
    pub(super) fn release_claims(&mut self, uid: &str, only: Option<&[PodKey]>) {
        if let Some(named) = only {
            let extended: Vec<PodKey> = named
                .iter()
                .filter(|k| self.dra.claims.get(*k).is_some_and(|c| c.extended))
                .cloned()
                .collect();
            self.delete_claims(extended);
        }
        let keys: Vec<PodKey> = self
            .dra
            .claims
            .iter()
            .filter(|(k, c)| c.reserved_for_uid(uid) && only.is_none_or(|o| o.contains(k)))
            .map(|(k, _)| k.clone())
            .collect();
        for k in keys {
            if let Some(c) = self.dra.claims.get_mut(&k) {
                c.reserved_for.retain(|r| *r.uid != *uid);
                if c.reserved_for.is_empty() {
                    c.allocation = None;
                }
            }
            self.observe_claim(&k);
        }
    }

    /// I9's second half, at a binding that succeeded: each of the pod's
    /// claims is allocated, reserved for it, and reaches its node.
    pub(super) fn check_claims_at_bind(&mut self, pod: &PodKey, node: &str) {
        let (Some(p), Some(n)) = (self.pods.get(pod), self.nodes.get(node)) else {
            return;
        };
        let mut found = Vec::new();
        // Extended resources the node does not advertise come from a
        // claim the binding made for the pod.
        let on_dra = p
            .constraints
            .extended
            .iter()
            .flat_map(|c| &c.requests)
            .any(|r| n.allocatable.scalar.get(&r.resource).copied().unwrap_or(0) <= 0);
        let served = on_dra && self.engine.cache().facts().dra.serves_extended(p);
        let extended = self
            .dra
            .claims
            .iter()
            .find(|(_, c)| c.extended && c.owner_pod.as_deref() == Some(&*p.uid))
            .map(|(k, c)| (k.clone(), c));
        match extended {
            None if served => found.push(format!(
                "{pod} bound to {node} without a claim for its extended resources"
            )),
            None => {}
            Some((key, c)) => {
                let reaches = c
                    .allocation
                    .as_ref()
                    .is_some_and(|a| a.reach.iter().all(|r| r.reaches(node, &n.labels)));
                if !reaches || !c.reserved_for_uid(&p.uid) {
                    found.push(format!(
                        "{pod} bound to {node} with its extended-resource claim {key} unallocated, not reserved for it, or out of reach"
                    ));
                }
            }
        }
        let group = self.engine.cache().facts().dra.group_claims_of(p);
        for pc in &p.constraints.resource_claims {
            // An entry matching its PodGroup's is the group's claim,
            // reserved for the group.
            let (entry, shared) = pc.in_group(group);
            let Resolved::Claim(name) = entry.resolve() else {
                continue;
            };
            let consumer = shared.map_or(&p.uid, |g| &g.uid);
            let key = PodKey::new(&pod.namespace, name);
            let Some(c) = self.dra.claims.get(&key) else {
                found.push(format!("{pod} bound to {node} without its claim {key}"));
                continue;
            };
            let Some(a) = &c.allocation else {
                found.push(format!(
                    "{pod} bound to {node} with claim {key} unallocated"
                ));
                continue;
            };
            if !c.reserved_for_uid(consumer) {
                found.push(format!(
                    "{pod} bound to {node} with claim {key} not reserved for it"
                ));
            }
            if !a.reach.iter().all(|r| r.reaches(node, &n.labels)) {
                found.push(format!(
                    "{pod} bound to {node}, which claim {key}'s devices do not reach"
                ));
            }
        }
        self.dra.i9_violations.extend(found);
    }

    /// I9's first half: no device allocated whole to two claims, and a
    /// shared device's shares within its capacity.
    fn check_single_holders(&mut self) {
        let held = self.dra.claims.iter().flat_map(|(key, c)| {
            c.allocation
                .iter()
                .flat_map(|a| &a.results)
                .map(move |r| (key.to_string(), r))
        });
        let slices = &self.dra.slices;
        let found = crate::dra::audit::violations(held, |id| {
            crate::dra::audit::published(slices.values().map(|s| &**s), id)
        });
        self.dra.i9_violations.extend(found);
    }
}
