//! ProvisioningRequests (`autoscaling.x-k8s.io/v1`) on the API: the writes
//! the engine asks for (a request with one PodTemplate per pod set; its
//! deletion) and the informer that reports the requests Muster made back to
//! the engine (`ClusterEvent::Provisioning`). Members are not annotated
//! with `autoscaling.x-k8s.io/consume-provisioning-request`: Muster never
//! patches pods (least privilege); their `WaitingForProvisioning` reason
//! already keeps cluster-autoscaler's ordinary loop off them.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::watcher::Event;
use serde_json::{Value, json};

use muster_core::engine::ClusterEvent;
use muster_core::engine::provisioning::{ProvisioningChange, RequestState};
use muster_core::model::PodKey;

use super::informers::Observed;

/// The label on every request and PodTemplate Muster makes: the request's
/// name (its templates), so both are found and cleaned up by it.
pub const REQUEST_LABEL: &str = "muster.dev/provisioning-request";
/// The label naming the gang a request is for.
pub const GROUP_LABEL: &str = "muster.dev/pod-group";

pub fn requests_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("autoscaling.x-k8s.io", "v1", "ProvisioningRequest"),
        "provisioningrequests",
    )
}

fn templates_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("", "v1", "PodTemplate"),
        "podtemplates",
    )
}

/// The pod spec fields that decide where a pod may run (and what it
/// needs), copied into a request's PodTemplate; names, volumes' contents,
/// commands and the like are left out.
const SCHEDULING_FIELDS: &[&str] = &[
    "nodeSelector",
    "affinity",
    "tolerations",
    "topologySpreadConstraints",
    "priorityClassName",
    "priority",
    "runtimeClassName",
    "overhead",
    "resourceClaims",
    "schedulingGroup",
];

/// A pod's spec reduced to what scheduling reads: its containers' names,
/// images and resources, and [`SCHEDULING_FIELDS`].
fn template_spec(pod: &Pod) -> Value {
    let spec = serde_json::to_value(pod.spec.clone().unwrap_or_default()).unwrap_or(Value::Null);
    let containers = |field: &str| -> Value {
        let list = spec
            .get(field)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        Value::Array(
            list.iter()
                .map(|c| {
                    json!({
                        "name": c.get("name").cloned().unwrap_or(json!("main")),
                        "image": c.get("image").cloned().unwrap_or(json!("placeholder")),
                        "resources": c.get("resources").cloned().unwrap_or(json!({})),
                        "ports": c.get("ports").cloned().unwrap_or(json!([])),
                    })
                })
                .collect(),
        )
    };
    let mut out = json!({ "containers": containers("containers") });
    let init = containers("initContainers");
    if init.as_array().is_some_and(|a| !a.is_empty()) {
        out["initContainers"] = init;
    }
    for f in SCHEDULING_FIELDS {
        if let Some(v) = spec.get(*f).filter(|v| !v.is_null()) {
            out[*f] = v.clone();
        }
    }
    out
}

/// Creates the request's PodTemplates, then the request. A request or template already there (a retry) is kept.
pub(super) async fn create(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    class: &str,
    group: &str,
    pod_sets: &[(PodKey, u32)],
) -> Result<(), kube::Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let templates: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &templates_resource());
    let labels = json!({ REQUEST_LABEL: name, GROUP_LABEL: group });
    let mut sets = Vec::with_capacity(pod_sets.len());
    for (i, (pod, count)) in pod_sets.iter().enumerate() {
        let p = pods.get(&pod.name).await?;
        let template_name = format!("{name}-{i}");
        let t: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "PodTemplate",
            "metadata": {"name": template_name, "labels": labels},
            "template": {"metadata": {"labels": labels}, "spec": template_spec(&p)}
        }))
        .map_err(kube::Error::SerdeError)?;
        exists_is_done(
            templates
                .create(&PostParams::default(), &t)
                .await
                .map(|_| ()),
        )?;
        sets.push(json!({"podTemplateRef": {"name": template_name}, "count": count}));
    }
    let requests: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &requests_resource());
    let pr: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
        "metadata": {"name": name, "labels": labels},
        "spec": {"provisioningClassName": class, "podSets": sets}
    }))
    .map_err(kube::Error::SerdeError)?;
    exists_is_done(
        requests
            .create(&PostParams::default(), &pr)
            .await
            .map(|_| ()),
    )?;
    Ok(())
}

/// Deletes the request and its PodTemplates.
pub(super) async fn delete(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<(), kube::Error> {
    let requests: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &requests_resource());
    gone_is_done(
        requests
            .delete(name, &DeleteParams::default())
            .await
            .map(|_| ()),
    )?;
    let templates: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &templates_resource());
    let mine = templates
        .list(&ListParams::default().labels(&format!("{REQUEST_LABEL}={name}")))
        .await?;
    for t in mine.items {
        if let Some(n) = t.metadata.name.as_deref() {
            gone_is_done(
                templates
                    .delete(n, &DeleteParams::default())
                    .await
                    .map(|_| ()),
            )?;
        }
    }
    Ok(())
}

fn gone_is_done(result: Result<(), kube::Error>) -> Result<(), kube::Error> {
    match result {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        other => other,
    }
}

fn exists_is_done(result: Result<(), kube::Error>) -> Result<(), kube::Error> {
    match result {
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        other => other,
    }
}

/// A request's state from its conditions: an ending condition first, then
/// `Provisioned=True`, else pending. Also the message of the deciding one.
pub fn state_of(o: &DynamicObject) -> (RequestState, String) {
    let conditions: Vec<Value> = o
        .data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let is_true = |t: &str| {
        conditions
            .iter()
            .find(|c| c["type"] == t && c["status"] == "True")
            .map(|c| c["message"].as_str().unwrap_or_default().to_string())
    };
    for (t, state) in [
        ("Failed", RequestState::Failed),
        ("CapacityRevoked", RequestState::CapacityRevoked),
        ("BookingExpired", RequestState::BookingExpired),
        ("Provisioned", RequestState::Provisioned),
    ] {
        if let Some(m) = is_true(t) {
            return (state, m);
        }
    }
    (RequestState::Pending, "no outcome yet".into())
}

/// The informer's event mapping: the requests Muster made (labelled),
/// their states; the API served while it runs.
#[derive(Default)]
pub(super) struct Requests {
    announced: bool,
}

impl Requests {
    pub(super) fn on_event(&mut self, ev: Event<DynamicObject>) -> Vec<Observed> {
        let mut out = Vec::new();
        if !self.announced {
            self.announced = true;
            out.push(Observed::Event(ClusterEvent::Provisioning(
                ProvisioningChange::Served(true),
            )));
        }
        let key = |o: &DynamicObject| -> Option<(Arc<str>, Arc<str>)> {
            o.metadata.labels.as_ref()?.get(REQUEST_LABEL)?;
            Some((
                Arc::from(o.metadata.namespace.as_deref()?),
                Arc::from(o.metadata.name.as_deref()?),
            ))
        };
        match ev {
            Event::InitApply(o) | Event::Apply(o) => {
                if let Some((namespace, name)) = key(&o) {
                    let (state, message) = state_of(&o);
                    out.push(Observed::Event(ClusterEvent::Provisioning(
                        ProvisioningChange::Status {
                            namespace,
                            name,
                            state,
                            message,
                        },
                    )));
                }
            }
            Event::Delete(o) => {
                if let Some((namespace, name)) = key(&o) {
                    out.push(Observed::Event(ClusterEvent::Provisioning(
                        ProvisioningChange::Deleted { namespace, name },
                    )));
                }
            }
            Event::Init | Event::InitDone => {}
        }
        out
    }

    pub(super) fn retract_all(self) -> Vec<Observed> {
        vec![Observed::Event(ClusterEvent::Provisioning(
            ProvisioningChange::Served(false),
        ))]
    }
}
