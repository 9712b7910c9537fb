//! The null scheduler of `muster load --bind-directly`: watches the run's
//! unbound pods and binds each to the next node round-robin, with no
//! filtering, scoring or gang logic. What it reaches is the ceiling of the
//! harness (API server, watches, load generator) on this machine: no
//! scheduler can bind faster through the same API.
//!
//! A pod with DRA claims waits until the resourceclaim controller has made
//! its claims (`status.resourceClaimStatuses`); then it goes to the next
//! node with free devices, each claim is allocated those devices and
//! reserved for the pod in one status write ([`super::devices`]), and the
//! pod is bound: the writes every scheduler makes for such a pod, without
//! which the simulated kubelet would never start it.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::core::Request;
use kube::runtime::{WatchStreamExt, watcher};
use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::UnboundedReceiverStream;

use super::devices::{ClaimAllocation, NullDevices, PodClaim};
use crate::scenario::dra::ClaimTemplateEntry;
use crate::scenario::manifests::SCENARIO_LABEL;

/// `spec.schedulerName` of the pods the null scheduler binds; no real
/// scheduler serves it, so nothing races the binder.
pub const NULL_SCHEDULER: &str = "muster-load-null";
/// Tries per write before the binding is counted as failed.
const ATTEMPTS: u32 = 3;

/// A running null scheduler; stops when dropped.
pub struct NullBinder {
    tasks: Vec<JoinHandle<()>>,
    failed: Arc<AtomicU64>,
}

impl NullBinder {
    /// Bindings that failed after every retry, and pods with claims no
    /// node had devices for.
    pub fn failures(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }
}

impl Drop for NullBinder {
    fn drop(&mut self) {
        self.tasks.iter().for_each(JoinHandle::abort);
    }
}

/// Starts binding the pods of scenario `name` to `nodes` (node objects, as
/// the scenario creates them; when empty, every node the cluster has now,
/// without devices), allocating the devices of the claims they make from
/// `templates`, `concurrency` pods in flight.
pub async fn start(
    client: &kube::Client,
    name: &str,
    nodes: &[Value],
    templates: &[ClaimTemplateEntry],
    group_templates: HashSet<String>,
    concurrency: usize,
) -> Result<NullBinder> {
    let mut names: Vec<String> = nodes
        .iter()
        .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    let devices = NullDevices::new(nodes, templates, group_templates);
    if names.is_empty() {
        let listed = Api::<Node>::all(client.clone())
            .list(&ListParams::default())
            .await
            .context("listing nodes for the null scheduler")?;
        names = listed
            .items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .collect();
        names.sort();
    }
    if names.is_empty() {
        bail!("--bind-directly: the cluster has no nodes and the scenario creates none");
    }
    let (tx, rx) = mpsc::unbounded_channel();
    let config = watcher::Config::default().labels(&format!("{SCENARIO_LABEL}={name}"));
    let stream =
        watcher::watcher(Api::<ClaimingPod>::all(client.clone()), config).default_backoff();
    let failed = Arc::new(AtomicU64::new(0));
    let watch = tokio::spawn(forward_unbound(stream, tx));
    let bind = tokio::spawn(bind_all(
        client.clone(),
        rx,
        Targets {
            nodes: names,
            devices,
        },
        concurrency.max(1),
        failed.clone(),
    ));
    Ok(NullBinder {
        tasks: vec![watch, bind],
        failed,
    })
}

/// An unbound pod, ready for the null scheduler.
#[derive(Debug)]
struct Unbound {
    namespace: String,
    name: String,
    uid: String,
    /// Its claims, or why the null scheduler cannot allocate them.
    claims: Result<Vec<PodClaim>, String>,
}

/// Sends each unbound pod once, once its claims exist.
async fn forward_unbound<S>(stream: S, tx: mpsc::UnboundedSender<Unbound>)
where
    S: futures::Stream<Item = Result<watcher::Event<ClaimingPod>, watcher::Error>>,
{
    let mut stream = std::pin::pin!(stream);
    let mut sent = HashSet::new();
    while let Some(event) = stream.next().await {
        let pod = match event {
            Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => p,
            Ok(_) => continue,
            Err(e) => {
                tracing::debug!(error = %e, "null scheduler watch failed; retrying");
                continue;
            }
        };
        if pod.spec.node_name.as_deref().is_some_and(|n| !n.is_empty()) {
            continue;
        }
        // A claim still to be made from its template: a later event has it.
        let Some(claims) = pod.claims() else {
            continue;
        };
        let meta = pod.metadata;
        let key = (
            meta.namespace.unwrap_or_default(),
            meta.name.unwrap_or_default(),
        );
        if !sent.insert(key.clone()) {
            continue;
        }
        let unbound = Unbound {
            namespace: key.0,
            name: key.1,
            uid: meta.uid.unwrap_or_default(),
            claims,
        };
        if tx.send(unbound).is_err() {
            return;
        }
    }
}

/// Where pods go: the nodes round-robin, and their devices.
struct Targets {
    nodes: Vec<String>,
    devices: NullDevices,
}

async fn bind_all(
    client: kube::Client,
    rx: mpsc::UnboundedReceiver<Unbound>,
    mut targets: Targets,
    concurrency: usize,
    failed: Arc<AtomicU64>,
) {
    let mut next = 0usize;
    UnboundedReceiverStream::new(rx)
        .map(|pod| {
            let n = targets.nodes.len();
            let placed = match &pod.claims {
                Ok(claims) if claims.is_empty() => Ok((next % n, Vec::new())),
                Ok(claims) => targets.devices.place(next % n, claims),
                Err(e) => Err(e.clone()),
            };
            let placed = placed.map(|(i, allocations)| {
                next = i + 1;
                (targets.nodes[i].clone(), allocations)
            });
            let client = client.clone();
            async move {
                let result = match placed {
                    Ok((node, allocations)) => place(&client, &pod, &node, &allocations)
                        .await
                        .map_err(|e| e.to_string()),
                    Err(e) => Err(e),
                };
                (result, pod)
            }
        })
        .buffer_unordered(concurrency)
        .for_each(|(result, pod)| {
            if let Err(e) = result {
                tracing::warn!(pod = %format!("{}/{}", pod.namespace, pod.name), error = %e, "null scheduler could not bind");
                failed.fetch_add(1, Ordering::Relaxed);
            }
            async {}
        })
        .await;
}

/// Allocates and reserves each claim for the pod, then binds it.
async fn place(
    client: &kube::Client,
    pod: &Unbound,
    node: &str,
    allocations: &[ClaimAllocation],
) -> Result<(), kube::Error> {
    for a in allocations {
        allocate(client, pod, a).await?;
    }
    bind(client, &pod.namespace, &pod.name, node).await
}

/// One status write: the claim's allocation, reserved for the pod, or for
/// the PodGroup that controls it (read from the claim: one read per group).
async fn allocate(
    client: &kube::Client,
    pod: &Unbound,
    a: &ClaimAllocation,
) -> Result<(), kube::Error> {
    let consumer = match a.for_group {
        false => json!({"resource": "pods", "name": pod.name, "uid": pod.uid}),
        true => {
            let claim = Api::<ResourceClaim>::namespaced(client.clone(), &pod.namespace)
                .get(&a.claim)
                .await?;
            let owner = claim
                .metadata
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.controller == Some(true) && o.kind == "PodGroup")
                .ok_or_else(|| {
                    kube::Error::Service(
                        format!("claim {} is controlled by no PodGroup", a.claim).into(),
                    )
                })?;
            json!({"apiGroup": "scheduling.k8s.io", "resource": "podgroups",
                   "name": owner.name, "uid": owner.uid})
        }
    };
    let body = json!({"status": {
        "allocation": a.allocation,
        "reservedFor": [consumer],
    }});
    let url = format!(
        "/apis/resource.k8s.io/v1/namespaces/{}/resourceclaims",
        pod.namespace
    );
    with_retries(client, || {
        Request::new(&url).patch_subresource(
            "status",
            &a.claim,
            &PatchParams::default(),
            &Patch::Merge(&body),
        )
    })
    .await
}

/// Binds; a 409 means it is bound already.
async fn bind(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    node: &str,
) -> Result<(), kube::Error> {
    let body = json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": name, "namespace": namespace},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    })
    .to_string();
    let url = format!("/api/v1/namespaces/{namespace}/pods");
    match with_retries(client, || {
        Request::new(&url).create_subresource(
            "binding",
            name,
            &PostParams::default(),
            body.clone().into_bytes(),
        )
    })
    .await
    {
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        other => other,
    }
}

/// Sends the request `build` makes, with a few retries; a 409 is returned
/// at once. The answer is not decoded (see `runner::apply`).
async fn with_retries(
    client: &kube::Client,
    build: impl Fn() -> Result<hyper::Request<Vec<u8>>, kube::core::request::Error>,
) -> Result<(), kube::Error> {
    let mut attempt = 1;
    loop {
        let request = build().map_err(kube::Error::BuildRequest)?;
        match client.request_text(request).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => return Err(kube::Error::Api(s)),
            Err(e) if attempt >= ATTEMPTS => return Err(e),
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50 * u64::from(attempt))).await;
                attempt += 1;
            }
        }
    }
}

/// A pod as the null scheduler reads it: its name, namespace and uid,
/// `spec.nodeName`, its claims and the claims made for it; nothing else
/// decoded.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct ClaimingPod {
    #[serde(deserialize_with = "lean_meta")]
    metadata: ObjectMeta,
    spec: ClaimingSpec,
    status: ClaimingStatus,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct ClaimingSpec {
    node_name: Option<String>,
    resource_claims: Vec<PodClaimRef>,
}

/// `spec.resourceClaims[]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct PodClaimRef {
    name: String,
    resource_claim_template_name: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct ClaimingStatus {
    resource_claim_statuses: Vec<ClaimStatusRef>,
}

/// `status.resourceClaimStatuses[]`: the claim made for a pod's claim.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct ClaimStatusRef {
    name: String,
    resource_claim_name: Option<String>,
}

impl ClaimingPod {
    /// The claims made for the pod from templates; `None` while one is
    /// still to be made; an error for a claim not made from a template
    /// (its requests are not the scenario's to know).
    fn claims(&self) -> Option<Result<Vec<PodClaim>, String>> {
        let mut out = Vec::with_capacity(self.spec.resource_claims.len());
        for entry in &self.spec.resource_claims {
            let Some(template) = &entry.resource_claim_template_name else {
                return Some(Err(format!(
                    "claim {:?} names no template; the null scheduler allocates template claims only",
                    entry.name
                )));
            };
            let made = self
                .status
                .resource_claim_statuses
                .iter()
                .find(|s| s.name == entry.name)?;
            // A template may make no claim for the pod: nothing to allocate.
            if let Some(claim) = &made.resource_claim_name {
                out.push(PodClaim {
                    claim: claim.clone(),
                    template: template.clone(),
                });
            }
        }
        Some(Ok(out))
    }
}

/// Metadata decoded down to what the null scheduler reads.
fn lean_meta<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    #[derive(Default, Deserialize)]
    #[serde(default)]
    struct Lean {
        name: Option<String>,
        namespace: Option<String>,
        uid: Option<String>,
    }
    let lean = Lean::deserialize(d)?;
    Ok(ObjectMeta {
        name: lean.name,
        namespace: lean.namespace,
        uid: lean.uid,
        ..ObjectMeta::default()
    })
}

impl kube::Resource for ClaimingPod {
    type DynamicType = ();
    type Scope = kube::core::NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("Pod")
    }
    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("")
    }
    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("v1")
    }
    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("pods")
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(value: Value) -> ClaimingPod {
        serde_json::from_value(value).unwrap()
    }

    /// A pod's template claims are ready once the controller has recorded
    /// the claim it made for each; a claim by name cannot be allocated here.
    #[test]
    fn claims_wait_for_the_controller() {
        let spec = json!({"nodeName": null, "containers": [{"name": "c"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one"}]});
        let waiting = pod(json!({"metadata": {"name": "p", "uid": "u",
            "labels": {"a": "b"}, "managedFields": [{}]}, "spec": spec}));
        assert_eq!(waiting.metadata.uid.as_deref(), Some("u"));
        assert!(waiting.claims().is_none());
        let made = pod(json!({"metadata": {"name": "p"}, "spec": spec, "status": {
            "phase": "Pending",
            "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x1z2q"}]}}));
        let claims = made.claims().unwrap().unwrap();
        assert_eq!(
            claims,
            [PodClaim {
                claim: "p-gpu-x1z2q".into(),
                template: "one".into()
            }]
        );
        let plain = pod(json!({"metadata": {"name": "p"}, "spec": {"containers": []}}));
        assert_eq!(plain.claims(), Some(Ok(Vec::new())));
        let direct = pod(json!({"metadata": {"name": "p"}, "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "shared"}]}}));
        assert!(direct.claims().unwrap().is_err());
    }
}
