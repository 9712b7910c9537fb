//! Helpers for the end-to-end tests: a simulated cluster and a Muster daemon
//! talking to it over HTTP, and waits driven by watch events.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::watcher;
use muster::apiserver::{SimCluster, SimConfig};
use muster::config::SchedulerConfig;
use muster::daemon::{DaemonOptions, RunningDaemon};
use muster::kwok::templates::NodeTemplate;
use serde_json::{Value, json};

/// How long a wait may take before the test fails (a hang guard, not a
/// synchronisation: every wait returns as soon as its event arrives).
pub const HANG_GUARD: Duration = Duration::from_secs(60);

pub struct Env {
    pub cluster: SimCluster,
    pub client: kube::Client,
}

/// `n` nodes with `cpu` cores each (and plenty of memory and pod slots).
pub fn nodes(n: usize, cpu: &str) -> NodeTemplate {
    NodeTemplate {
        count: n,
        capacity: [("cpu", cpu), ("memory", "64Gi"), ("pods", "110")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        ..NodeTemplate::default()
    }
}

pub async fn cluster(templates: Vec<NodeTemplate>) -> Env {
    // Deleted pods terminate gracefully, but for at most a second: tests
    // that free capacity by deleting pods need not wait out 30 s.
    let config = SimConfig::default()
        .pod_start_delay(Duration::from_millis(10))
        .bookmark_interval(Duration::from_millis(500))
        .max_termination_grace(Duration::from_secs(1))
        .with_templates(templates);
    let cluster = SimCluster::start(config)
        .await
        .expect("simulated cluster starts");
    let client = cluster.client().expect("client");
    Env { cluster, client }
}

/// A configuration for tests: no leader election unless asked, short gang
/// timeouts and backoffs.
pub fn test_config(yaml_extra: &str) -> SchedulerConfig {
    let yaml = format!(
        "leaderElection: {{leaderElect: false}}\npodInitialBackoffSeconds: 1\npodMaxBackoffSeconds: 2\n{yaml_extra}"
    );
    SchedulerConfig::from_yaml(&yaml).expect("test configuration is valid")
}

/// A daemon serving plain HTTP (`--insecure-serving`), which the helpers
/// here read with [`http_get`].
pub async fn daemon(env: &Env, config: SchedulerConfig) -> RunningDaemon {
    let mut opts = DaemonOptions::new(config);
    opts.serving = muster::daemon::ServingOptions::Insecure;
    muster::daemon::start(env.client.clone(), opts)
        .await
        .expect("daemon starts")
}

pub fn podgroup_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("scheduling.k8s.io", "v1beta1", "PodGroup"),
        "podgroups",
    )
}

/// Creates a v1beta1 PodGroup with a gang policy.
pub async fn create_podgroup(
    env: &Env,
    ns: &str,
    name: &str,
    min_count: u32,
    timeout_seconds: Option<u32>,
) {
    let mut annotations = serde_json::Map::new();
    if let Some(t) = timeout_seconds {
        annotations.insert(
            "muster.dev/schedule-timeout-seconds".into(),
            t.to_string().into(),
        );
    }
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    }))
    .expect("podgroup json");
    let api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), ns, &podgroup_resource());
    api.create(&PostParams::default(), &obj)
        .await
        .expect("create podgroup");
}

/// A pod for `scheduler`, requesting `cpu`, optionally in a PodGroup.
pub fn pod(name: &str, cpu: &str, scheduler: &str, group: Option<&str>) -> Pod {
    let mut spec = json!({
        "schedulerName": scheduler,
        "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}]
    });
    if let Some(g) = group {
        spec["schedulingGroup"] = json!({"podGroupName": g});
    }
    serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}),
    )
    .expect("pod json")
}

pub async fn create_pods(env: &Env, ns: &str, pods: Vec<Pod>) {
    let api: Api<Pod> = Api::namespaced(env.client.clone(), ns);
    for p in pods {
        api.create(&PostParams::default(), &p)
            .await
            .expect("create pod");
    }
}

pub async fn add_node(env: &Env, name: &str, cpu: &str) {
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
        "status": {"capacity": {"cpu": cpu, "memory": "64Gi", "pods": "110"},
                   "allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}
    }))
    .expect("node json");
    Api::<Node>::all(env.client.clone())
        .create(&PostParams::default(), &node)
        .await
        .expect("create node");
}

/// Watches pods in `ns` until `done` holds for the current set; returns it.
pub async fn wait_pods<F>(env: &Env, ns: &str, done: F) -> BTreeMap<String, Pod>
where
    F: FnMut(&BTreeMap<String, Pod>) -> bool,
{
    let api: Api<Pod> = Api::namespaced(env.client.clone(), ns);
    wait_objects(api, watcher::Config::default(), done).await
}

/// Watches pods in `ns` until pod `name`'s `PodScheduled=False` message
/// contains `needle`; returns that message.
pub async fn wait_pod_message(env: &Env, ns: &str, name: &str, needle: &str) -> String {
    let pods = wait_pods(env, ns, |p| {
        p.get(name)
            .and_then(pod_condition_message)
            .is_some_and(|m| m.contains(needle))
    })
    .await;
    pods.get(name)
        .and_then(pod_condition_message)
        .unwrap_or_default()
}

/// Watches the objects `api` and `config` select until `done` holds for
/// the current set (by name); returns it.
pub async fn wait_objects<K, F>(
    api: Api<K>,
    config: watcher::Config,
    mut done: F,
) -> BTreeMap<String, K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    F: FnMut(&BTreeMap<String, K>) -> bool,
{
    let name = |o: &K| o.meta().name.clone().unwrap_or_default();
    let mut stream = Box::pin(watcher::watcher(api, config));
    let mut objects: BTreeMap<String, K> = BTreeMap::new();
    let mut listing: Option<BTreeMap<String, K>> = None;
    let wait = async {
        while let Some(ev) = stream.next().await {
            match ev.expect("watch") {
                watcher::Event::Init => listing = Some(BTreeMap::new()),
                watcher::Event::InitApply(o) => {
                    if let Some(l) = listing.as_mut() {
                        l.insert(name(&o), o);
                    }
                }
                watcher::Event::InitDone => objects = listing.take().unwrap_or_default(),
                watcher::Event::Apply(o) => {
                    objects.insert(name(&o), o);
                }
                watcher::Event::Delete(o) => {
                    objects.remove(&name(&o));
                }
            }
            if listing.is_none() && done(&objects) {
                return objects.clone();
            }
        }
        panic!("watch ended");
    };
    tokio::time::timeout(HANG_GUARD, wait)
        .await
        .expect("condition reached before the hang guard")
}

pub fn bound(p: &Pod) -> bool {
    p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some()
}

pub fn names_bound<'a>(pods: &'a BTreeMap<String, Pod>, prefix: &str) -> Vec<&'a str> {
    pods.iter()
        .filter(|(n, p)| n.starts_with(prefix) && bound(p))
        .map(|(n, _)| n.as_str())
        .collect()
}

/// Watches events in `ns` until one matches.
pub async fn wait_event<F>(env: &Env, ns: &str, matches: F) -> k8s_openapi::api::core::v1::Event
where
    F: FnMut(&k8s_openapi::api::core::v1::Event) -> bool,
{
    tokio::time::timeout(HANG_GUARD, next_event(&env.client, ns, matches))
        .await
        .expect("event arrived before the hang guard")
}

/// The first event in `ns` (listed or arriving) that `matches`, with no
/// hang guard: the simulated and the real cluster's waits add their own.
pub async fn next_event<F>(
    client: &kube::Client,
    ns: &str,
    mut matches: F,
) -> k8s_openapi::api::core::v1::Event
where
    F: FnMut(&k8s_openapi::api::core::v1::Event) -> bool,
{
    let api: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), ns);
    let mut stream = Box::pin(watcher::watcher(api, watcher::Config::default()));
    while let Some(ev) = stream.next().await {
        if let watcher::Event::Apply(e) | watcher::Event::InitApply(e) = ev.expect("event watch")
            && matches(&e)
        {
            return e;
        }
    }
    panic!("event watch ended");
}

/// Watches a PodGroup until its `PodGroupInitiallyScheduled` condition satisfies `pred`.
pub async fn wait_podgroup_condition<F>(env: &Env, ns: &str, name: &str, pred: F) -> Value
where
    F: FnMut(&Value) -> bool,
{
    wait_podgroup_condition_of(env, ns, name, "PodGroupInitiallyScheduled", pred).await
}

/// Watches a PodGroup until its condition of `type_` satisfies `pred`.
pub async fn wait_podgroup_condition_of<F>(
    env: &Env,
    ns: &str,
    name: &str,
    type_: &str,
    pred: F,
) -> Value
where
    F: FnMut(&Value) -> bool,
{
    tokio::time::timeout(
        HANG_GUARD,
        podgroup_condition(&env.client, ns, name, type_, pred),
    )
    .await
    .expect("condition reached before the hang guard")
}

/// A v1beta1 PodGroup's condition of `type_` once it satisfies `pred`
/// (watched), with no hang guard: the simulated and the real cluster's
/// waits add their own.
pub async fn podgroup_condition<F>(
    client: &kube::Client,
    ns: &str,
    name: &str,
    type_: &str,
    mut pred: F,
) -> Value
where
    F: FnMut(&Value) -> bool,
{
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &podgroup_resource());
    let cfg = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut stream = Box::pin(watcher::watcher(api, cfg));
    while let Some(ev) = stream.next().await {
        if let watcher::Event::Apply(o) | watcher::Event::InitApply(o) = ev.expect("podgroup watch")
        {
            let cond = o.data["status"]["conditions"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
                .cloned();
            if let Some(c) = cond
                && pred(&c)
            {
                return c;
            }
        }
    }
    panic!("podgroup watch ended");
}

/// GET a path on the daemon's HTTP endpoint; returns (status, body).
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect to daemon");
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: muster\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .expect("send request");
    let mut out = String::new();
    s.read_to_string(&mut out).await.expect("read response");
    parse_response(&out)
}

/// (status, body) of an HTTP/1.1 response read to the end.
fn parse_response(out: &str) -> (u16, String) {
    let code = out
        .get(9..12)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {out:?}"));
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

/// GET a path on the daemon's HTTPS endpoint (any certificate accepted),
/// with `Authorization: Bearer <token>` when a token is given.
pub async fn https_get(
    addr: std::net::SocketAddr,
    path: &str,
    token: Option<&str>,
) -> (u16, String) {
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // Any certificate: the daemon's is self-signed.
    let config = muster::server::tls::client_config(None).expect("TLS client");
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect to daemon");
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("server name");
    let mut s = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .expect("TLS handshake");
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: muster\r\n{auth}Connection: close\r\n\r\n")
            .as_bytes(),
    )
    .await
    .expect("send request");
    let mut out = Vec::new();
    // A peer that closes without close_notify still sent a whole response.
    if let Err(e) = s.read_to_end(&mut out).await {
        assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof, "{e}");
    }
    parse_response(&String::from_utf8_lossy(&out))
}

/// Waits until a daemon serving HTTPS reports ready (`/readyz` needs no token).
pub async fn wait_ready_https(d: &RunningDaemon) {
    let addr = d.http_addr;
    let wait = async {
        loop {
            if https_get(addr, "/readyz", None).await.0 == 200 {
                return;
            }
            // As wait_ready: readiness has no event stream; poll (bounded).
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(HANG_GUARD, wait)
        .await
        .expect("daemon became ready");
}

/// The value of one sample line (`name{labels} value`) in Prometheus text.
pub fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)
            .and_then(|rest| rest.trim().parse().ok())
    })
}

/// Waits until the daemon reports ready (caches synced, leading).
pub async fn wait_ready(d: &RunningDaemon) {
    let addr = d.http_addr;
    let wait = async {
        loop {
            if http_get(addr, "/readyz").await.0 == 200 {
                return;
            }
            // Readiness has no event stream of its own; poll the endpoint a
            // few times a second (bounded by the hang guard).
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(HANG_GUARD, wait)
        .await
        .expect("daemon became ready");
}

/// Pods of `ns` by name, once.
pub async fn list_pods(env: &Env, ns: &str) -> BTreeMap<String, Pod> {
    let api: Api<Pod> = Api::namespaced(env.client.clone(), ns);
    by_name(api, &Default::default()).await
}

/// Pods of every namespace matching a label selector, by name, once.
pub async fn list_labelled_pods(env: &Env, selector: &str) -> BTreeMap<String, Pod> {
    let api: Api<Pod> = Api::all(env.client.clone());
    by_name(api, &kube::api::ListParams::default().labels(selector)).await
}

async fn by_name(api: Api<Pod>, lp: &kube::api::ListParams) -> BTreeMap<String, Pod> {
    api.list(lp)
        .await
        .expect("list pods")
        .items
        .into_iter()
        .map(|p| (p.metadata.name.clone().unwrap_or_default(), p))
        .collect()
}

pub fn pod_condition_message(p: &Pod) -> Option<String> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")
        .and_then(|c| c.message.clone())
}

/// Adds a scheduling gate: the pod exists (and counts for a gang's quorum
/// gate) but is not scheduled until the gate is removed.
pub fn gated(mut p: Pod) -> Pod {
    if let Some(spec) = p.spec.as_mut() {
        spec.scheduling_gates = Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
            name: "example.com/hold".into(),
        }]);
    }
    p
}

/// Removes a pod's scheduling gates (the one spec change the API allows).
pub async fn ungate(env: &Env, ns: &str, name: &str) {
    let api: Api<Pod> = Api::namespaced(env.client.clone(), ns);
    let patch = kube::api::Patch::Merge(json!({"spec": {"schedulingGates": null}}));
    api.patch(name, &kube::api::PatchParams::default(), &patch)
        .await
        .expect("remove scheduling gates");
}

/// Registers a CRD for every custom workload kind top-owner grouping reads
/// (JobSet, LeaderWorkerSet, the Kubeflow jobs, RayCluster, vcjob): what
/// their operators would install. `batch/v1` Jobs are built in.
pub async fn install_owner_crds(env: &Env) {
    let crds: Api<DynamicObject> = Api::all_with(
        env.client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    for s in muster::dialects::owners::OWNER_SOURCES {
        if s.group == "batch" {
            continue;
        }
        let versions: Vec<Value> = s
            .versions
            .iter()
            .enumerate()
            .map(|(i, v)| {
                json!({"name": v, "served": true, "storage": i == 0,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
            })
            .collect();
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{}.{}", s.plural, s.group)},
            "spec": {"group": s.group, "scope": "Namespaced",
                "names": {"plural": s.plural, "singular": s.kind.to_lowercase(), "kind": s.kind},
                "versions": versions}
        });
        let obj: DynamicObject = serde_json::from_value(crd).expect("crd json");
        crds.create(&PostParams::default(), &obj)
            .await
            .expect("create CRD");
    }
}

/// The ResourceClaims of namespace `default`, by name.
pub async fn claims(env: &Env) -> BTreeMap<String, k8s_openapi::api::resource::v1::ResourceClaim> {
    let api: Api<k8s_openapi::api::resource::v1::ResourceClaim> =
        Api::namespaced(env.client.clone(), "default");
    api.list(&kube::api::ListParams::default())
        .await
        .expect("claims")
        .items
        .into_iter()
        .map(|c| (c.metadata.name.clone().unwrap_or_default(), c))
        .collect()
}
