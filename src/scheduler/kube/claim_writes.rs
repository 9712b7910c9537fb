//! DynamicResources' writes to ResourceClaims: before a binding, each
//! claim's planned allocation (with the configuration of its classes and
//! of the claim copied in, as kube-scheduler records it) and the pod in
//! `status.reservedFor`; after a failed binding, the pod out of it again.
//!
//! Each write reads the claim and replaces its status under the
//! resourceVersion it read, so a claim changed meanwhile (allocated by
//! someone else, deallocated, replaced under its name) fails the write
//! with 409 instead of being overwritten.
//!
//! A claim about to be allocated first gets the
//! `resource.kubernetes.io/delete-protection` finalizer (in a normal update:
//! a status write cannot change it), as kube-scheduler does: a claim deleted
//! while allocated, or while its pod's binding is in flight, stays until the
//! resourceclaim controller deallocates it (no pod reserves it any more), so
//! its devices are never given to another claim under a pod still using
//! them. The pod's extended-resource claim is created with the finalizer,
//! so it is protected from the start; when the scheduler deletes such a
//! claim again (its binding failed), it removes the finalizer first, as
//! kube-scheduler does: the claim, still allocated and reserved for a pod
//! that was not bound, goes at once instead of waiting for a
//! deallocation that would never come while that pod lives.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceAllocationConfiguration, ResourceClaim, ResourceClaimConsumerReference,
    ResourceClaimStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use muster_core::cache::DraChange;
use muster_core::dra::extended::{CLAIM_ANNOTATION, ExtendedClaim};
use muster_core::dra::write::{allocation_json, same_results};
use muster_core::dra::{ClaimReservation, ClassConfig};
use muster_core::model::PodKey;

/// Keeps an allocated claim from being removed until it is deallocated.
pub const DELETE_PROTECTION_FINALIZER: &str = "resource.kubernetes.io/delete-protection";

fn conflict(message: String) -> kube::Error {
    let status = kube::core::Status::failure(&message, "Conflict").with_code(409);
    kube::Error::Api(status.boxed())
}

fn decode<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Result<T, kube::Error> {
    serde_json::from_value(v).map_err(kube::Error::SerdeError)
}

/// Reserves each claim for the pod, recording the planned allocation
/// where the claim has none; the pod's extended-resource claim is created
/// first (its name added to `created`, so a failure after it deletes it).
pub(super) async fn reserve(
    client: &kube::Client,
    pod: &PodKey,
    uid: &str,
    node: &str,
    claims: &[ClaimReservation],
    written: &mut Vec<ResourceClaim>,
    created: &mut Vec<PodKey>,
) -> Result<(), kube::Error> {
    for r in claims {
        if let Some(x) = &r.extended {
            let answer = create_extended(client, pod, uid, node, r, x, created).await?;
            written.push(answer);
            continue;
        }
        let api: Api<ResourceClaim> = Api::namespaced(client.clone(), &r.claim.namespace);
        let answer = reserve_claim(&api, pod, uid, node, r).await?;
        written.retain(|c| c.metadata.name != answer.metadata.name);
        written.push(answer);
    }
    Ok(())
}

/// Writes attempted for one claim when the API server refuses them because
/// the claim changed since it was read.
const CONFLICT_ATTEMPTS: usize = 5;

/// Why one claim's write did not happen.
enum Refused {
    /// The claim is no longer usable as planned: final.
    Final(kube::Error),
    /// The API server's answer (409: the claim changed since it was read,
    /// e.g. another member of the pod's group wrote it first).
    Api(kube::Error),
}

impl From<kube::Error> for Refused {
    fn from(e: kube::Error) -> Self {
        Refused::Api(e)
    }
}

/// Reserves one claim, read again and written again when the API server
/// answers 409 (the claim changed since it was read): several members of
/// a PodGroup, or several pods sharing a claim, bound together write the
/// same claim, and each adds to what the others wrote, as kube-scheduler
/// retries such a write on conflict. What the claim now holds is checked
/// again each time (replaced, deleted, allocated other devices).
async fn reserve_claim(
    api: &Api<ResourceClaim>,
    pod: &PodKey,
    uid: &str,
    node: &str,
    r: &ClaimReservation,
) -> Result<ResourceClaim, kube::Error> {
    let mut attempt = 1;
    loop {
        match try_reserve_claim(api, pod, uid, node, r).await {
            Ok(answer) => return Ok(answer),
            Err(Refused::Final(e)) => return Err(e),
            Err(Refused::Api(kube::Error::Api(s)))
                if s.code == 409 && attempt < CONFLICT_ATTEMPTS =>
            {
                attempt += 1;
            }
            Err(Refused::Api(e)) => return Err(e),
        }
    }
}

/// One read and write of a claim's reservation (see `reserve_claim`).
async fn try_reserve_claim(
    api: &Api<ResourceClaim>,
    pod: &PodKey,
    uid: &str,
    node: &str,
    r: &ClaimReservation,
) -> Result<ResourceClaim, Refused> {
    let mut claim = api.get(&r.claim.name).await?;
    if claim.metadata.uid.as_deref() != Some(&*r.claim_uid) {
        return Err(Refused::Final(conflict(format!(
            "resourceclaim {:?} was replaced since it was allocated",
            &*r.claim.name
        ))));
    }
    if claim.metadata.deletion_timestamp.is_some() {
        return Err(Refused::Final(conflict(format!(
            "resourceclaim {:?} is being deleted",
            &*r.claim.name
        ))));
    }
    let status = claim
        .status
        .get_or_insert_with(ResourceClaimStatus::default);
    let mut changed = false;
    match (&r.allocation, &status.allocation) {
        (Some(planned), None) => {
            changed = true;
            let protected = claim
                .metadata
                .finalizers
                .as_deref()
                .unwrap_or_default()
                .iter()
                .any(|f| f == DELETE_PROTECTION_FINALIZER);
            if !protected {
                claim
                    .metadata
                    .finalizers
                    .get_or_insert_with(Vec::new)
                    .push(DELETE_PROTECTION_FINALIZER.into());
                claim = api
                    .replace(&r.claim.name, &PostParams::default(), &claim)
                    .await?;
            }
            let allocation = to_record(&claim, r, planned, node)?;
            let status = claim
                .status
                .get_or_insert_with(ResourceClaimStatus::default);
            status.allocation = Some(allocation);
        }
        (Some(planned), Some(recorded)) => {
            let recorded = serde_json::to_value(recorded).map_err(kube::Error::SerdeError)?;
            if !same_results(&recorded, planned) {
                return Err(Refused::Final(conflict(format!(
                    "resourceclaim {:?} was allocated other devices meanwhile",
                    &*r.claim.name
                ))));
            }
        }
        (None, None) => {
            return Err(Refused::Final(conflict(format!(
                "resourceclaim {:?} was deallocated meanwhile",
                &*r.claim.name
            ))));
        }
        (None, Some(_)) => {}
    }
    let status = claim
        .status
        .get_or_insert_with(ResourceClaimStatus::default);
    let reserved = status.reserved_for.get_or_insert_with(Vec::new);
    // A claim the pod's PodGroup shares is reserved for the group
    // (KEP-5729), once for every member.
    let consumer = match &r.group {
        Some(g) => ResourceClaimConsumerReference {
            api_group: Some(g.api_group.to_string()),
            resource: g.resource.to_string(),
            name: g.name.to_string(),
            uid: g.uid.to_string(),
        },
        None => ResourceClaimConsumerReference {
            api_group: None,
            resource: "pods".into(),
            name: pod.name.to_string(),
            uid: uid.to_string(),
        },
    };
    if !reserved.iter().any(|c| c.uid == consumer.uid) {
        reserved.push(consumer);
        changed = true;
    }
    if !changed {
        // Another member of the group wrote it all already.
        return Ok(claim);
    }
    Ok(api
        .replace_status(&r.claim.name, &PostParams::default(), &claim)
        .await?)
}

/// The pod's extended-resource claim (KEP-5004): created owned by the pod
/// and marked as such, then its allocation and the pod's reservation
/// written, then the pod's `status.extendedResourceClaimStatus` set.
async fn create_extended(
    client: &kube::Client,
    pod: &PodKey,
    uid: &str,
    node: &str,
    r: &ClaimReservation,
    x: &ExtendedClaim,
    created: &mut Vec<PodKey>,
) -> Result<ResourceClaim, kube::Error> {
    let api: Api<ResourceClaim> = Api::namespaced(client.clone(), &pod.namespace);
    let requests: Vec<serde_json::Value> = x
        .requests
        .iter()
        .map(|q| {
            serde_json::json!({"name": &*q.name, "exactly": {
                "deviceClassName": &*q.class, "allocationMode": "ExactCount", "count": q.count}})
        })
        .collect();
    let claim: ResourceClaim = decode(serde_json::json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "generateName": format!("{}-extended-resources-", pod.name),
            "namespace": &*pod.namespace,
            "annotations": {CLAIM_ANNOTATION: "true"},
            "finalizers": [DELETE_PROTECTION_FINALIZER],
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": &*pod.name,
                                 "uid": uid, "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": {"devices": {"requests": requests}},
    }))?;
    let mut claim = api.create(&PostParams::default(), &claim).await?;
    let name = claim.metadata.name.clone().unwrap_or_default();
    created.push(PodKey::new(&pod.namespace, &name));
    let Some(planned) = &r.allocation else {
        return Err(conflict(format!(
            "the extended-resource claim of pod {pod} has no planned allocation"
        )));
    };
    let allocation = to_record(&claim, r, planned, node)?;
    claim.status = Some(ResourceClaimStatus {
        allocation: Some(allocation),
        reserved_for: Some(vec![ResourceClaimConsumerReference {
            api_group: None,
            resource: "pods".into(),
            name: pod.name.to_string(),
            uid: uid.to_string(),
        }]),
        ..ResourceClaimStatus::default()
    });
    let answer = api
        .replace_status(&name, &PostParams::default(), &claim)
        .await?;
    let mappings: Vec<serde_json::Value> = x
        .mappings
        .iter()
        .map(|m| {
            serde_json::json!({"containerName": &*m.container, "resourceName": &*m.resource,
                               "requestName": &*m.request})
        })
        .collect();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
    let patch = serde_json::json!({
        "status": {"extendedResourceClaimStatus": {
            "resourceClaimName": name, "requestMappings": mappings}},
    });
    pods.patch_status(&pod.name, &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    Ok(answer)
}

/// Deletes the extended-resource claims a failed binding created, so
/// their devices are not held for a pod that is not bound; a claim gone
/// already needs nothing. Errors are left to the resourceclaim controller
/// (the claim goes with its pod) and to the next attempt, which asks again.
pub(super) async fn delete_created(
    client: &kube::Client,
    created: &[PodKey],
    written: &mut Vec<ResourceClaim>,
) {
    for key in created {
        written.retain(|c| c.metadata.name.as_deref() != Some(&*key.name));
        let api: Api<ResourceClaim> = Api::namespaced(client.clone(), &key.namespace);
        if let Err(e) = delete_extended(&api, &key.name, None).await {
            tracing::warn!(claim = %key, error = %e, "deleting an extended-resource claim failed");
        }
    }
}

/// Deletes an extended-resource claim the scheduler made, as
/// kube-scheduler does: its delete-protection finalizer removed first (an
/// update under the resourceVersion read, read again on conflict), then
/// the claim deleted. It may still be allocated and reserved for its pod;
/// that pod was not bound, so nothing uses the devices, and the finalizer
/// would otherwise keep the claim until the pod is gone. `read` is the
/// claim as just read, if it was; a claim gone needs nothing.
async fn delete_extended(
    api: &Api<ResourceClaim>,
    name: &str,
    mut read: Option<ResourceClaim>,
) -> Result<(), kube::Error> {
    let gone = |e: &kube::Error| matches!(e, kube::Error::Api(s) if s.code == 404);
    let mut attempts = 0;
    loop {
        let mut claim = match read.take() {
            Some(c) => c,
            None => match api.get_opt(name).await? {
                Some(c) => c,
                None => return Ok(()),
            },
        };
        let Some(finalizers) = claim.metadata.finalizers.as_mut() else {
            break;
        };
        let before = finalizers.len();
        finalizers.retain(|f| f != DELETE_PROTECTION_FINALIZER);
        if finalizers.len() == before {
            break;
        }
        match api.replace(name, &PostParams::default(), &claim).await {
            Ok(_) => break,
            Err(e) if gone(&e) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 && attempts + 1 < FINALIZER_ATTEMPTS => {
                attempts += 1;
            }
            Err(e) => return Err(e),
        }
    }
    match api.delete(name, &DeleteParams::default()).await {
        Err(e) if !gone(&e) => Err(e),
        _ => Ok(()),
    }
}

/// Tries at removing the finalizer before a deletion when the claim keeps
/// changing meanwhile (as many as kube-scheduler's).
const FINALIZER_ATTEMPTS: usize = 5;

/// A written claim as the scheduler observes it.
pub(super) fn observed(c: ResourceClaim) -> DraChange {
    let key = PodKey::of_meta(c.metadata.namespace.as_deref(), c.metadata.name.as_deref());
    let claim = muster_core::dra::Claim::from_api(&c)
        .map(std::sync::Arc::new)
        .map_err(|e| std::sync::Arc::from(e.0.as_str()));
    DraChange::ClaimUpserted { key, claim }
}

/// The allocation to record for `claim`: the planned devices on `node`,
/// stamped now, with the configuration of its classes and of the claim.
fn to_record(
    claim: &ResourceClaim,
    r: &ClaimReservation,
    planned: &muster_core::dra::Allocation,
    node: &str,
) -> Result<AllocationResult, kube::Error> {
    let mut allocation: AllocationResult = decode(allocation_json(planned, node))?;
    allocation.allocation_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
    let config = configuration(claim, &r.class_config)?;
    if let Some(devices) = allocation.devices.as_mut()
        && !config.is_empty()
    {
        devices.config = Some(config);
    }
    Ok(allocation)
}

/// The configuration an allocation carries: its classes' (`FromClass`,
/// from the scheduler's view of them) and the claim's own (`FromClaim`).
fn configuration(
    claim: &ResourceClaim,
    classes: &[ClassConfig],
) -> Result<Vec<DeviceAllocationConfiguration>, kube::Error> {
    let mut out = Vec::new();
    for c in classes {
        out.push(DeviceAllocationConfiguration {
            source: "FromClass".into(),
            requests: Some(c.requests.clone()),
            opaque: Some(decode(c.opaque.clone())?),
        });
    }
    let devices = claim.spec.as_ref().and_then(|s| s.devices.as_ref());
    for cfg in devices.and_then(|d| d.config.clone()).unwrap_or_default() {
        out.push(DeviceAllocationConfiguration {
            source: "FromClaim".into(),
            requests: cfg.requests,
            opaque: cfg.opaque,
        });
    }
    Ok(out)
}

/// Takes the pod out of each claim's `status.reservedFor`; a claim gone,
/// replaced, or not reserved for it needs nothing. The pod's
/// extended-resource claim (marked as such and controlled by the pod) is
/// deleted instead, its delete-protection finalizer removed first: it was
/// made for this binding alone.
pub(super) async fn unreserve(
    client: &kube::Client,
    uid: &str,
    claims: &[PodKey],
) -> Result<(), kube::Error> {
    for key in claims {
        let api: Api<ResourceClaim> = Api::namespaced(client.clone(), &key.namespace);
        let Some(mut claim) = api.get_opt(&key.name).await? else {
            continue;
        };
        if is_extended_claim_of(&claim, uid) {
            delete_extended(&api, &key.name, Some(claim)).await?;
            continue;
        }
        let Some(reserved) = claim.status.as_mut().and_then(|s| s.reserved_for.as_mut()) else {
            continue;
        };
        let before = reserved.len();
        reserved.retain(|c| c.uid != uid);
        if reserved.len() == before {
            continue;
        }
        api.replace_status(&key.name, &PostParams::default(), &claim)
            .await?;
    }
    Ok(())
}

/// Whether `claim` is the extended-resource claim made for the pod `uid`.
fn is_extended_claim_of(claim: &ResourceClaim, uid: &str) -> bool {
    let marked = claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CLAIM_ANNOTATION))
        .is_some_and(|v| v == "true");
    let owned = claim
        .metadata
        .owner_references
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|o| o.kind == "Pod" && o.uid == uid && o.controller == Some(true));
    marked && owned
}
