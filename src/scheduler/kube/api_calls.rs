//! Performing one `ApiCall` against the API server: the binding POST, the
//! status patches, preemption's condition and delete, nominations, and
//! events (repeats of an identical event bump its count).

use k8s_openapi::api::core::v1::{Event, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams,
    PostParams, Preconditions,
};
use serde_json::json;

use super::bodies::{BindingBody, EventBody, Involved, Meta, Source};
use muster_core::dispatch::{ApiCall, EventTarget, ResourceRef};
use muster_core::model::volumes::{ClaimWrite, SELECTED_NODE_ANNOTATION};

/// The component name on events and in managed fields.
pub const COMPONENT: &str = "muster";

/// One try at the call.
#[cfg(test)]
pub(super) async fn attempt(client: &kube::Client, call: &ApiCall) -> Result<(), kube::Error> {
    attempt_with(client, call, &mut Vec::new()).await
}

/// One try at the call; the ResourceClaims it writes are added to
/// `written`, as the API server answered.
pub(super) async fn attempt_with(
    client: &kube::Client,
    call: &ApiCall,
    written: &mut Vec<ResourceClaim>,
) -> Result<(), kube::Error> {
    match call {
        ApiCall::Bind {
            pod,
            uid,
            node,
            claims,
        } => {
            // DynamicResources' PreBind: the claims first, so a pod never
            // runs without its devices reserved. An extended-resource claim
            // created by an attempt that then fails is deleted again, so
            // a retry or the next cycle starts afresh.
            let mut created = Vec::new();
            let outcome = async {
                if !claims.is_empty() {
                    super::claim_writes::reserve(
                        client,
                        pod,
                        uid,
                        node,
                        claims,
                        written,
                        &mut created,
                    )
                    .await?;
                }
                // Sent as bytes and the answer not decoded: the writer's most
                // frequent call (`bodies.rs`).
                let body = BindingBody::new(&pod.namespace, &pod.name, uid, node);
                let body = serde_json::to_vec(&body).map_err(kube::Error::SerdeError)?;
                let request =
                    kube::core::Request::new(format!("/api/v1/namespaces/{}/pods", pod.namespace))
                        .create_subresource("binding", &pod.name, &PostParams::default(), body)
                        .map_err(kube::Error::BuildRequest)?;
                client.request_text(request).await.map(|_| ())
            }
            .await;
            if outcome.is_err() && !created.is_empty() {
                super::claim_writes::delete_created(client, &created, written).await;
            }
            outcome
        }
        ApiCall::PreBindVolumes { node, writes, .. } => {
            for w in writes {
                pre_bind_write(client, node, w).await?;
            }
            Ok(())
        }
        ApiCall::UnreserveClaims { uid, claims, .. } => {
            super::claim_writes::unreserve(client, uid, claims).await
        }
        ApiCall::PodCondition {
            pod,
            status,
            reason,
            message,
        } => {
            let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
            let patch = condition_patch("PodScheduled", *status, reason, message);
            api.patch_status(&pod.name, &PatchParams::default(), &Patch::Strategic(patch))
                .await
                .map(|_| ())
        }
        ApiCall::Event {
            target,
            warning,
            reason,
            message,
        } => record_event(client, target, *warning, reason, message).await,
        ApiCall::Preempt {
            victim,
            uid,
            message,
        } => preempt(client, victim, uid, message).await,
        ApiCall::CreateProvisioningRequest {
            namespace,
            name,
            class,
            group,
            pod_sets,
        } => super::provisioning::create(client, namespace, name, class, group, pod_sets).await,
        ApiCall::DeleteProvisioningRequest { namespace, name } => {
            super::provisioning::delete(client, namespace, name).await
        }
        ApiCall::Nominate { pod, node } => {
            let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
            let patch = nomination_patch(node.as_deref());
            let sent = api
                .patch_status(&pod.name, &PatchParams::default(), &Patch::Merge(patch))
                .await;
            // A pod deleted meanwhile needs no nomination.
            gone_is_done(sent.map(|_| ()))
        }
        ApiCall::GroupCondition {
            resource,
            namespace,
            name,
            type_,
            status,
            reason,
            message,
        } => {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), namespace, &api_resource(resource));
            set_condition(&api, name, type_, *status, reason, message).await
        }
        ApiCall::GroupStatus {
            resource,
            namespace,
            name,
            status,
        } => {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), namespace, &api_resource(resource));
            let patch = Patch::Merge(json!({ "status": status }));
            // Volcano's PodGroup has no /status: status goes with the object.
            if muster_core::dialects::status_subresource(&resource.group) {
                api.patch_status(name, &PatchParams::default(), &patch)
                    .await
            } else {
                api.patch(name, &PatchParams::default(), &patch).await
            }
            .map(|_| ())
        }
    }
}

/// Reason of the `DisruptionTarget` condition preemption sets on a victim
/// (kube-scheduler's `v1.PodReasonPreemptionByScheduler`).
pub const PREEMPTION_REASON: &str = "PreemptionByScheduler";

/// Preemption's two writes on one victim, in kube-scheduler's order: the
/// `DisruptionTarget` condition first (so whoever watches the pod learns why
/// it goes), then the delete, guarded by the victim's UID so a pod recreated
/// under the same name is never deleted by mistake. A victim already gone
/// (404) or replaced (409, the UID precondition) is what the call wanted.
async fn preempt(
    client: &kube::Client,
    victim: &muster_core::model::PodKey,
    uid: &str,
    message: &str,
) -> Result<(), kube::Error> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &victim.namespace);
    let patch = condition_patch("DisruptionTarget", true, PREEMPTION_REASON, message);
    let marked = api
        .patch_status(
            &victim.name,
            &PatchParams::default(),
            &Patch::Strategic(patch),
        )
        .await;
    match marked {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
        Err(e) => return Err(e),
    }
    let params = DeleteParams {
        preconditions: (!uid.is_empty()).then(|| Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let deleted = api.delete(&victim.name, &params).await;
    match deleted {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// A status merge patch setting `nominatedNodeName`, or removing it (null).
fn nomination_patch(node: Option<&str>) -> serde_json::Value {
    json!({"status": {"nominatedNodeName": node}})
}

/// A write whose object is gone (404) has nothing left to do.
fn gone_is_done(result: Result<(), kube::Error>) -> Result<(), kube::Error> {
    match result {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        other => other,
    }
}

/// One claim write of VolumeBinding's PreBind. Binding a static volume is
/// conditional on the volume's resourceVersion, read just before, and on its
/// `claimRef` being free or this claim's: a volume taken by another claim
/// meanwhile fails the PreBind (409) instead of being stolen.
async fn pre_bind_write(
    client: &kube::Client,
    node: &str,
    write: &ClaimWrite,
) -> Result<(), kube::Error> {
    match write {
        ClaimWrite::SelectNode { claim } => {
            let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &claim.namespace);
            let patch = json!({"metadata": {"annotations": {SELECTED_NODE_ANNOTATION: node}}});
            api.patch(&claim.name, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .map(|_| ())
        }
        ClaimWrite::BindVolume {
            claim,
            claim_uid,
            volume,
        } => {
            let api: Api<PersistentVolume> = Api::all(client.clone());
            let pv = api.get(volume).await?;
            let taken = pv
                .spec
                .as_ref()
                .and_then(|s| s.claim_ref.as_ref())
                .is_some_and(|r| {
                    r.name.as_deref() != Some(&*claim.name)
                        || r.namespace.as_deref() != Some(&*claim.namespace)
                });
            if taken {
                let message = format!("persistentvolume {volume:?} is bound to another claim");
                let status = kube::core::Status::failure(&message, "Conflict").with_code(409);
                return Err(kube::Error::Api(status.boxed()));
            }
            let patch = json!({
                "metadata": {
                    "resourceVersion": pv.metadata.resource_version,
                    "annotations": {"pv.kubernetes.io/bound-by-controller": "yes"},
                },
                "spec": {"claimRef": {
                    "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                    "namespace": &*claim.namespace, "name": &*claim.name,
                    "uid": (!claim_uid.is_empty()).then(|| claim_uid.to_string()),
                }},
            });
            api.patch(volume, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .map(|_| ())
        }
    }
}

/// Creates the event, or bumps the count of an identical earlier one: the
/// event name is derived from (object, reason, message), so repeats collide.
async fn record_event(
    client: &kube::Client,
    target: &EventTarget,
    warning: bool,
    reason: &str,
    message: &str,
) -> Result<(), kube::Error> {
    let api: Api<Event> = Api::namespaced(client.clone(), &target.namespace);
    let name = format!(
        "{}.{:016x}",
        target.name,
        fingerprint(&[&target.kind, &target.name, reason, message])
    );
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let event = EventBody {
        api_version: "v1",
        kind: "Event",
        metadata: Meta {
            name: &name,
            namespace: &target.namespace,
            uid: None,
        },
        involved_object: Involved {
            api_version: &target.api_version,
            kind: &target.kind,
            name: &target.name,
            namespace: &target.namespace,
            uid: target.uid.as_deref(),
        },
        reason,
        message,
        type_: if warning { "Warning" } else { "Normal" },
        count: 1,
        first_timestamp: &now,
        last_timestamp: &now,
        event_time: MicroTime(now.0),
        reporting_component: COMPONENT,
        reporting_instance: COMPONENT,
        action: if warning { "Scheduling" } else { "Binding" },
        source: Source {
            component: COMPONENT,
        },
    };
    // Sent as bytes and the answer not decoded: one event per pod placed
    // makes this, after bindings, the writer's most frequent call.
    let body = serde_json::to_vec(&event).map_err(kube::Error::SerdeError)?;
    let request =
        kube::core::Request::new(format!("/api/v1/namespaces/{}/events", target.namespace))
            .create(&PostParams::default(), body)
            .map_err(kube::Error::BuildRequest)?;
    match client.request_text(request).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let existing = api.get(&name).await?;
            let patch = json!({"count": existing.count.unwrap_or(1).saturating_add(1), "lastTimestamp": now});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .map(|_| ())
        }
        Err(e) => Err(e),
    }
}

/// A `status.conditions` patch setting one condition.
/// A pod condition as a strategic merge patch (pods merge `conditions` by
/// type).
fn condition_patch(type_: &str, status: bool, reason: &str, message: &str) -> serde_json::Value {
    json!({"status": {"conditions": [{
        "type": type_,
        "status": if status { "True" } else { "False" },
        "reason": reason,
        "message": message,
        "lastTransitionTime": Time(k8s_openapi::jiff::Timestamp::now()),
    }]}})
}

/// Read-modify-write conflicts retried before the call fails (and the
/// dispatcher retries it later).
const CONDITION_CONFLICT_RETRIES: usize = 3;

/// Sets one condition in the object's `status.conditions`, leaving the
/// others (its other types, other writers') as they are: the list is read,
/// the condition of `type_` replaced (its `lastTransitionTime` kept when
/// the status did not change), and the status written back under the read
/// `resourceVersion`; a conflict is read again. Custom resources have no
/// strategic merge, and a merge patch would replace the whole list.
async fn set_condition(
    api: &Api<DynamicObject>,
    name: &str,
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
) -> Result<(), kube::Error> {
    let mut tries = 0;
    loop {
        let mut obj = api.get_status(name).await?;
        let conditions = with_condition(&obj.data, type_, status, reason, message);
        if obj.data.get("status").is_none_or(|s| !s.is_object()) {
            obj.data["status"] = json!({});
        }
        obj.data["status"]["conditions"] = conditions;
        match api.replace_status(name, &PostParams::default(), &obj).await {
            Err(kube::Error::Api(e)) if e.code == 409 && tries < CONDITION_CONFLICT_RETRIES => {
                tries += 1;
            }
            r => return r.map(|_| ()),
        }
    }
}

/// The object's conditions with the one of `type_` set.
fn with_condition(
    data: &serde_json::Value,
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
) -> serde_json::Value {
    let status_word = if status { "True" } else { "False" };
    let mut list: Vec<serde_json::Value> = data["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let old = list.iter().position(|c| c["type"] == type_);
    let since = match old.map(|i| &list[i]) {
        Some(c) if c["status"] == status_word => c["lastTransitionTime"].clone(),
        _ => json!(Time(k8s_openapi::jiff::Timestamp::now())),
    };
    let condition = json!({
        "type": type_,
        "status": status_word,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
    });
    match old {
        Some(i) => list[i] = condition,
        None => list.push(condition),
    }
    serde_json::Value::Array(list)
}

/// FNV-1a over the parts: stable across runs and replicas, so a restarted
/// scheduler bumps the same event instead of creating a new one.
fn fingerprint(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain([0u8]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

fn api_resource(r: &ResourceRef) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&r.group, &r.version, &r.kind),
        &r.plural,
    )
}

/// Why a call failed, and whether trying again could help.
pub(super) struct Failure {
    pub message: String,
    pub transient: bool,
    pub conflict: bool,
    /// Never sent: the leader fence was closed (`fence.rs`).
    pub fenced: bool,
}

impl Failure {
    /// A call dropped at the leader fence.
    pub fn fenced() -> Self {
        Failure {
            message: "dropped: this replica's lease was not renewed within renewDeadline".into(),
            transient: false,
            conflict: false,
            fenced: true,
        }
    }
}

pub(super) fn classify(e: &kube::Error) -> Failure {
    match e {
        kube::Error::Api(s) => Failure {
            message: format!("{} ({} {})", s.message, s.code, s.reason),
            transient: s.code >= 500 || s.code == 429,
            conflict: s.code == 409,
            fenced: false,
        },
        other => Failure {
            message: other.to_string(),
            transient: true,
            conflict: false,
            fenced: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_is_stable_and_separates_parts() {
        assert_eq!(fingerprint(&["a", "b"]), fingerprint(&["a", "b"]));
        assert_ne!(fingerprint(&["ab", ""]), fingerprint(&["a", "b"]));
    }

    #[test]
    fn nomination_patches_set_and_clear() {
        assert_eq!(
            nomination_patch(Some("n1")),
            json!({"status": {"nominatedNodeName": "n1"}})
        );
        // A merge patch's null removes the field.
        assert_eq!(
            nomination_patch(None),
            json!({"status": {"nominatedNodeName": null}})
        );
    }

    /// Preemption's writes against the simulated API server: the condition
    /// then the graceful delete; a retry, a victim replaced (409) or gone
    /// (404) are all done; nominations set and clear.
    #[tokio::test]
    async fn preemption_and_nomination_writes_against_the_simulator() {
        use muster_cluster::apiserver::{SimCluster, SimConfig};
        use muster_core::model::PodKey;
        use std::time::Duration;
        let cluster = SimCluster::start(
            SimConfig::default()
                .with_nodes(1)
                .pod_start_delay(Duration::ZERO),
        )
        .await
        .unwrap();
        let client = cluster.client().unwrap();
        let pods: Api<Pod> = Api::default_namespaced(client.clone());
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
        let node = nodes.list(&Default::default()).await.unwrap().items[0]
            .metadata
            .name
            .clone()
            .unwrap();
        let victim: Pod = serde_json::from_value(json!({"metadata": {"name": "low"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]}}))
        .unwrap();
        let uid = pods
            .create(&PostParams::default(), &victim)
            .await
            .unwrap()
            .metadata
            .uid
            .unwrap();
        let preempt = ApiCall::Preempt {
            victim: PodKey::new("default", "low"),
            uid: uid.as_str().into(),
            message: "Preempted by pod default/high on node n".into(),
        };
        attempt(&client, &preempt).await.unwrap();
        let marked = pods.get("low").await.unwrap();
        // Deleted gracefully (30 s by default): terminating, with the condition.
        assert!(marked.metadata.deletion_timestamp.is_some());
        let conditions = marked.status.unwrap().conditions.unwrap();
        let c = conditions
            .iter()
            .find(|c| c.type_ == "DisruptionTarget")
            .expect("DisruptionTarget condition");
        assert_eq!(
            (c.status.as_str(), c.reason.as_deref(), c.message.as_deref()),
            (
                "True",
                Some(PREEMPTION_REASON),
                Some("Preempted by pod default/high on node n")
            )
        );
        // A retry of the same call is harmless.
        attempt(&client, &preempt).await.unwrap();
        // Another pod under the name now: the UID precondition spares it (409).
        pods.delete("low", &DeleteParams::default().grace_period(0))
            .await
            .unwrap();
        pods.create(&PostParams::default(), &victim).await.unwrap();
        attempt(&client, &preempt).await.unwrap();
        assert!(
            pods.get("low")
                .await
                .unwrap()
                .metadata
                .deletion_timestamp
                .is_none()
        );
        // Gone: done.
        let ghost = ApiCall::Preempt {
            victim: PodKey::new("default", "ghost"),
            uid: "x".into(),
            message: String::new(),
        };
        attempt(&client, &ghost).await.unwrap();

        let nominate = |node: Option<&str>| ApiCall::Nominate {
            pod: PodKey::new("default", "low"),
            node: node.map(Into::into),
        };
        let nominated = |p: Pod| p.status.and_then(|s| s.nominated_node_name);
        attempt(&client, &nominate(Some("n2"))).await.unwrap();
        assert_eq!(
            nominated(pods.get("low").await.unwrap()).as_deref(),
            Some("n2")
        );
        attempt(&client, &nominate(None)).await.unwrap();
        assert_eq!(nominated(pods.get("low").await.unwrap()), None);
        let gone = ApiCall::Nominate {
            pod: PodKey::new("default", "ghost"),
            node: None,
        };
        attempt(&client, &gone).await.unwrap();
    }

    #[test]
    fn resources_keep_their_version() {
        let r = ResourceRef {
            group: "scheduling.k8s.io".into(),
            version: "v1beta1".into(),
            kind: "PodGroup".into(),
            plural: "podgroups".into(),
        };
        let ar = api_resource(&r);
        assert_eq!(ar.api_version, r.api_version());
        assert_eq!(ar.plural, "podgroups");
    }
}
