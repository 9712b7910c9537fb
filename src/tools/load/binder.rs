//! The null scheduler of `muster load --bind-directly`: watches the run's
//! unbound pods and binds each to the next node round-robin, with no
//! filtering, scoring or gang logic. What it reaches is the ceiling of the
//! harness (API server, watches, load generator) on this machine: no
//! scheduler can bind faster through the same API.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, PostParams};
use kube::core::Request;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::UnboundedReceiverStream;

use crate::scenario::manifests::SCENARIO_LABEL;
use muster_scheduler::kube::objects::PodPlacement;

/// `spec.schedulerName` of the pods the null scheduler binds; no real
/// scheduler serves it, so nothing races the binder.
pub const NULL_SCHEDULER: &str = "muster-load-null";
/// Tries per binding before it is counted as failed.
const ATTEMPTS: u32 = 3;

/// A running null scheduler; stops when dropped.
pub struct NullBinder {
    tasks: Vec<JoinHandle<()>>,
    failed: Arc<AtomicU64>,
}

impl NullBinder {
    /// Bindings that failed after every retry.
    pub fn failures(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }
}

impl Drop for NullBinder {
    fn drop(&mut self) {
        self.tasks.iter().for_each(JoinHandle::abort);
    }
}

/// Starts binding the pods of scenario `name` to `nodes` (or, when empty,
/// to every node the cluster has now), `concurrency` bindings in flight.
pub async fn start(
    client: &kube::Client,
    name: &str,
    mut nodes: Vec<String>,
    concurrency: usize,
) -> Result<NullBinder> {
    if nodes.is_empty() {
        let listed = Api::<Node>::all(client.clone())
            .list(&ListParams::default())
            .await
            .context("listing nodes for the null scheduler")?;
        nodes = listed
            .items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .collect();
        nodes.sort();
    }
    if nodes.is_empty() {
        bail!("--bind-directly: the cluster has no nodes and the scenario creates none");
    }
    let (tx, rx) = mpsc::unbounded_channel();
    let config = watcher::Config::default().labels(&format!("{SCENARIO_LABEL}={name}"));
    let stream =
        watcher::watcher(Api::<PodPlacement>::all(client.clone()), config).default_backoff();
    let failed = Arc::new(AtomicU64::new(0));
    let watch = tokio::spawn(forward_unbound(stream, tx));
    let bind = tokio::spawn(bind_all(
        client.clone(),
        rx,
        nodes,
        concurrency.max(1),
        failed.clone(),
    ));
    Ok(NullBinder {
        tasks: vec![watch, bind],
        failed,
    })
}

/// Sends each unbound pod once.
async fn forward_unbound<S>(stream: S, tx: mpsc::UnboundedSender<(String, String)>)
where
    S: futures::Stream<Item = Result<watcher::Event<PodPlacement>, watcher::Error>>,
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
        let bound = pod.is_bound();
        let key = (
            pod.metadata.namespace.unwrap_or_default(),
            pod.metadata.name.unwrap_or_default(),
        );
        if !bound && sent.insert(key.clone()) && tx.send(key).is_err() {
            return;
        }
    }
}

async fn bind_all(
    client: kube::Client,
    rx: mpsc::UnboundedReceiver<(String, String)>,
    nodes: Vec<String>,
    concurrency: usize,
    failed: Arc<AtomicU64>,
) {
    let mut next = 0usize;
    UnboundedReceiverStream::new(rx)
        .map(|(namespace, name)| {
            let node = nodes[next % nodes.len()].clone();
            next += 1;
            let client = client.clone();
            async move { (bind(&client, &namespace, &name, &node).await, namespace, name) }
        })
        .buffer_unordered(concurrency)
        .for_each(|(result, namespace, name)| {
            if let Err(e) = result {
                tracing::warn!(pod = %format!("{namespace}/{name}"), error = %e, "null scheduler could not bind");
                failed.fetch_add(1, Ordering::Relaxed);
            }
            async {}
        })
        .await;
}

/// Binds with a few retries; a 409 means it is bound already. The answer
/// is not decoded (see `runner::apply`).
async fn bind(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    node: &str,
) -> Result<(), kube::Error> {
    let body = serde_json::json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": name, "namespace": namespace},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    });
    let mut attempt = 1;
    loop {
        let request = Request::new(format!("/api/v1/namespaces/{namespace}/pods"))
            .create_subresource(
                "binding",
                name,
                &PostParams::default(),
                body.to_string().into_bytes(),
            )
            .map_err(kube::Error::BuildRequest)?;
        match client.request_text(request).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => return Ok(()),
            Err(e) if attempt >= ATTEMPTS => return Err(e),
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50 * u64::from(attempt))).await;
                attempt += 1;
            }
        }
    }
}
