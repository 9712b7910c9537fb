//! Helpers shared by the simulated-cluster integration tests.
#![allow(dead_code)]

pub mod kubectl;
pub mod tools;

use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use kube::api::{Api, DynamicObject, ListParams, WatchEvent, WatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use muster::apiserver::{SimCluster, SimConfig};

/// A cluster with fast bookmarks and immediate pod starts, and a client for it.
pub async fn start(config: SimConfig) -> (SimCluster, kube::Client) {
    let cluster = SimCluster::start(config).await.expect("cluster starts");
    let client = cluster.client().expect("client builds");
    (cluster, client)
}

pub fn fast() -> SimConfig {
    SimConfig::default()
        .pod_start_delay(Duration::ZERO)
        .bookmark_interval(Duration::from_millis(200))
}

pub fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

pub fn dynamic(client: &kube::Client, ar: &ApiResource, ns: Option<&str>) -> Api<DynamicObject> {
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    }
}

/// The API error code of a failed call.
pub fn code<T: std::fmt::Debug>(r: kube::Result<T>) -> (u16, String) {
    match r {
        Err(kube::Error::Api(s)) => (s.code, s.reason.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// The next item of a stream, failing the test after 10 s (a hang guard,
/// not a synchronization).
pub async fn next<S: Stream + Unpin>(s: &mut S) -> S::Item {
    tokio::time::timeout(Duration::from_secs(10), s.next())
        .await
        .expect("stream produced an item in time")
        .expect("stream did not end")
}

/// Items of a stream until `pred` holds for one; returns that one.
pub async fn until<S, F>(s: &mut S, mut pred: F) -> S::Item
where
    S: Stream + Unpin,
    F: FnMut(&S::Item) -> bool,
{
    loop {
        let item = next(s).await;
        if pred(&item) {
            return item;
        }
    }
}

/// A watch of `api` that sees every change made after this call: it starts
/// at the resourceVersion of a list taken first.
pub async fn watch_from_now<K>(
    api: &Api<K>,
    params: &WatchParams,
) -> BoxStream<'static, kube::Result<WatchEvent<K>>>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let rv = api
        .list(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("a list has a resourceVersion");
    api.watch(params, &rv).await.expect("watch").boxed()
}

/// POSTs a Binding of `pod` to `node`, as a scheduler does.
pub async fn bind(
    pods: &Api<k8s_openapi::api::core::v1::Pod>,
    pod: &str,
    node: &str,
) -> kube::Result<serde_json::Value> {
    let b = k8s_openapi::api::core::v1::Binding {
        metadata: kube::api::ObjectMeta {
            name: Some(pod.into()),
            ..Default::default()
        },
        target: k8s_openapi::api::core::v1::ObjectReference {
            kind: Some("Node".into()),
            name: Some(node.into()),
            ..Default::default()
        },
    };
    pods.create_subresource("binding", pod, &kube::api::PostParams::default(), &b)
        .await
}
