//! The kwok-style fake kubelet: nodes report `Ready` with addresses, a bound
//! pod becomes `Running` and `Ready` with a pod IP after a configurable delay,
//! and a pod annotated `muster.dev/sim-run-seconds: "<s>"` then `Succeeded`
//! after that long. Starting a pod records a `Started` event (core/v1) so
//! `kubectl describe` has something to show. A pod deleted gracefully
//! (`termination`) is removed once its grace period has passed, as a kubelet
//! does once its containers have stopped.
//!
//! A pod with resource claims (`spec.resourceClaims`) starts only once each
//! of them is allocated and reserved for it (`dra::consumer`); until then it
//! stays `Pending` with its containers `ContainerCreating`, and is looked at
//! again when the claim it waits for changes. A started pod's containers report the
//! devices of the claims they use in `allocatedResourcesStatus`.
//!
//! One task owns a timer heap; handlers notify it when a pod gets a node.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::dra::consumer;
use super::objects::{as_map, child_mut, condition, meta_mut, new_uid, now, set_condition, str_at};
use super::store::{CommitError, Store};

pub use crate::kwok::RUN_SECONDS_ANNOTATION;

const PODS: &str = "/v1/pods";
const NODES: &str = "/v1/nodes";
const EVENTS: &str = "/v1/events";

/// Fills in what a kwok-managed kubelet reports for a node being created:
/// conditions, addresses, node info, and allocatable defaulting to capacity.
pub fn fill_node_status(node: &mut Value, ip: &str) {
    let name = str_at(node, "/metadata/name")
        .unwrap_or_default()
        .to_string();
    let status = child_mut(as_map(node), "status");
    let capacity = status
        .entry("capacity")
        .or_insert_with(|| json!({"cpu": "32", "memory": "256Gi", "pods": "110"}))
        .clone();
    let allocatable = as_map(status.entry("allocatable").or_insert_with(|| json!({})));
    if let Value::Object(cap) = capacity {
        for (k, v) in cap {
            allocatable.entry(k).or_insert(v);
        }
    }
    if !status.contains_key("conditions") {
        let healthy = |kind: &str, reason: &str| {
            json!({"type": kind, "status": "False", "reason": reason,
                   "lastHeartbeatTime": now(), "lastTransitionTime": now()})
        };
        status.insert(
            "conditions".into(),
            json!([
                healthy("MemoryPressure", "KubeletHasSufficientMemory"),
                healthy("DiskPressure", "KubeletHasNoDiskPressure"),
                healthy("PIDPressure", "KubeletHasSufficientPID"),
                {"type": "Ready", "status": "True", "reason": "KubeletReady",
                 "message": "kwok-style simulated kubelet is ready",
                 "lastHeartbeatTime": now(), "lastTransitionTime": now()},
            ]),
        );
    }
    status.entry("addresses").or_insert_with(
        || json!([{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}]),
    );
    status.entry("nodeInfo").or_insert_with(|| {
        json!({"architecture": "amd64", "operatingSystem": "linux", "kubeletVersion": "v1.37.0",
               "kubeProxyVersion": "", "containerRuntimeVersion": "kwok://sim", "osImage": "",
               "kernelVersion": "", "machineID": "", "systemUUID": "", "bootID": ""})
    });
    status
        .entry("daemonEndpoints")
        .or_insert_with(|| json!({"kubeletEndpoint": {"Port": 10250}}));
    status.insert("phase".into(), json!("Running"));
}

/// How the fake kubelet behaves.
#[derive(Debug, Clone)]
pub struct LifecycleConfig {
    /// From binding to Running.
    pub start_delay: Duration,
    /// Record a `Started` event per pod.
    pub events: bool,
}

/// Address allocation for nodes and pods.
#[derive(Debug, Default)]
pub struct Addresses {
    nodes: AtomicU32,
    pods: AtomicU32,
}

impl Addresses {
    pub fn next_node_ip(&self) -> String {
        let i = self.nodes.fetch_add(1, Ordering::Relaxed) + 1;
        format!("172.{}.{}.{}", 16 + (i >> 16) % 16, (i >> 8) & 255, i & 255)
    }

    fn next_pod_ip(&self) -> String {
        let i = self.pods.fetch_add(1, Ordering::Relaxed) + 1;
        format!(
            "10.{}.{}.{}",
            128 + (i >> 16) % 128,
            (i >> 8) & 255,
            i & 255
        )
    }
}

/// A pod that just got a node.
#[derive(Debug)]
pub struct Bound {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// A pod deleted gracefully: removed after `grace`.
#[derive(Debug)]
pub struct Terminating {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub grace: Duration,
}

/// What the handlers tell the lifecycle task.
#[derive(Debug)]
enum Notice {
    Bound(Bound),
    Terminating(Terminating),
    /// A ResourceClaim changed: pods waiting for it are looked at again.
    ClaimChanged(consumer::ClaimChange),
    /// Claim changes were missed: every waiting pod is looked at again.
    ClaimsResynced,
}

/// Handle to notify the lifecycle task.
#[derive(Clone, Debug)]
pub struct Lifecycle {
    tx: mpsc::UnboundedSender<Notice>,
    pub addresses: Arc<Addresses>,
}

impl Lifecycle {
    pub fn spawn(store: Arc<Store>, config: LifecycleConfig, shutdown: CancellationToken) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let addresses = Arc::new(Addresses::default());
        let kubelet = Kubelet {
            store,
            config,
            addresses: addresses.clone(),
        };
        tokio::spawn(kubelet.run(rx, shutdown));
        Lifecycle { tx, addresses }
    }

    pub fn pod_bound(&self, pod: Bound) {
        // The task only stops at shutdown, when nothing needs starting.
        let _ = self.tx.send(Notice::Bound(pod));
    }

    pub fn pod_terminating(&self, pod: Terminating) {
        let _ = self.tx.send(Notice::Terminating(pod));
    }

    pub fn claim_changed(&self, change: consumer::ClaimChange) {
        let _ = self.tx.send(Notice::ClaimChanged(change));
    }

    pub fn claims_resynced(&self) {
        let _ = self.tx.send(Notice::ClaimsResynced);
    }
}

#[derive(Debug)]
enum Action {
    Start(Bound),
    Complete(Bound),
    Remove(Bound),
}

/// What follows an action.
enum Next {
    Done,
    At(Instant, Action),
    /// The pod waits for its resource claims.
    Wait(Bound, consumer::Blocker),
}

/// Why a pod did not start.
enum NotStarted {
    /// Gone, already started, or raced: nothing to do.
    Skipped,
    /// Its claims are not all allocated and reserved for it yet.
    WaitingForClaims(consumer::Blocker),
}

struct Kubelet {
    store: Arc<Store>,
    config: LifecycleConfig,
    addresses: Arc<Addresses>,
}

impl Kubelet {
    async fn run(self, mut rx: mpsc::UnboundedReceiver<Notice>, shutdown: CancellationToken) {
        let mut timers: BinaryHeap<Reverse<(Instant, u64)>> = BinaryHeap::new();
        let mut actions: HashMap<u64, Action> = HashMap::new();
        let mut waiting: consumer::Waiting<Bound> = consumer::Waiting::default();
        let mut seq = 0u64;
        let mut schedule = |timers: &mut BinaryHeap<_>, actions: &mut HashMap<_, _>, at, action| {
            seq += 1;
            timers.push(Reverse((at, seq)));
            actions.insert(seq, action);
        };
        loop {
            let next = timers.peek().map(|Reverse((at, _))| *at);
            tokio::select! {
                _ = shutdown.cancelled() => return,
                msg = rx.recv() => match msg {
                    Some(Notice::Bound(pod)) => {
                        let at = Instant::now() + self.config.start_delay;
                        schedule(&mut timers, &mut actions, at, Action::Start(pod));
                    }
                    Some(Notice::Terminating(t)) => {
                        waiting.remove(&(t.namespace.clone(), t.name.clone()));
                        let at = Instant::now() + t.grace;
                        let pod = Bound { namespace: t.namespace, name: t.name, uid: t.uid };
                        schedule(&mut timers, &mut actions, at, Action::Remove(pod));
                    }
                    Some(notice @ (Notice::ClaimChanged(_) | Notice::ClaimsResynced)) => {
                        let pods = match &notice {
                            Notice::ClaimChanged(change) => waiting.take(change),
                            _ => waiting.take_all(),
                        };
                        for pod in pods {
                            match self.act(Action::Start(pod)) {
                                Next::Done => {}
                                Next::At(at, follow_up) => schedule(&mut timers, &mut actions, at, follow_up),
                                Next::Wait(pod, blocker) => {
                                    waiting.add((pod.namespace.clone(), pod.name.clone()), blocker, pod);
                                }
                            }
                        }
                    }
                    None => return,
                },
                _ = sleep_until(next), if next.is_some() => {
                    while let Some(Reverse((at, id))) = timers.peek().copied() {
                        if at > Instant::now() {
                            break;
                        }
                        timers.pop();
                        let Some(action) = actions.remove(&id) else { continue };
                        match self.act(action) {
                            Next::Done => {}
                            Next::At(at, follow_up) => schedule(&mut timers, &mut actions, at, follow_up),
                            Next::Wait(pod, blocker) => {
                                waiting.add((pod.namespace.clone(), pod.name.clone()), blocker, pod);
                            }
                        }
                    }
                }
            }
        }
    }

    /// Performs one transition; returns what follows: the pod's completion
    /// if it has a run time, a wait for its claims.
    fn act(&self, action: Action) -> Next {
        match action {
            Action::Start(pod) => match self.start(&pod) {
                Ok(Some(run_for)) => Next::At(Instant::now() + run_for, Action::Complete(pod)),
                Ok(None) | Err(NotStarted::Skipped) => Next::Done,
                Err(NotStarted::WaitingForClaims(blocker)) => Next::Wait(pod, blocker),
            },
            Action::Complete(pod) => {
                self.complete(&pod);
                Next::Done
            }
            // Raced by writers ten times in a row: try again shortly.
            Action::Remove(pod) if !self.remove(&pod) => Next::At(
                Instant::now() + Duration::from_millis(50),
                Action::Remove(pod),
            ),
            Action::Remove(_) => Next::Done,
        }
    }

    /// The grace of a terminating pod has passed: it goes (the delete with
    /// grace 0 a kubelet sends), or, while finalizers remain, waits for
    /// them with a grace of 0. A pod whose grace was shortened meanwhile is
    /// already gone; a pod recreated under the name is left alone.
    /// Returns false when concurrent writes kept it from finishing.
    fn remove(&self, pod: &Bound) -> bool {
        let res: Arc<str> = Arc::from(PODS);
        for _ in 0..10 {
            let Some(current) = self.store.get(PODS, &pod.namespace, &pod.name) else {
                return true;
            };
            let obj = current.value();
            if current.uid != pod.uid || obj.pointer("/metadata/deletionTimestamp").is_none() {
                return true;
            }
            let finalizers = obj
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| !f.is_empty());
            let result = if finalizers {
                if obj.pointer("/metadata/deletionGracePeriodSeconds") == Some(&json!(0)) {
                    return true;
                }
                let mut obj = obj;
                meta_mut(&mut obj).insert("deletionGracePeriodSeconds".into(), json!(0));
                self.store.replace(&res, Some(current.rv), obj)
            } else {
                self.store
                    .remove(&res, &pod.namespace, &pod.name, Some(current.rv))
            };
            match result {
                Ok(_) => return true,
                Err(CommitError::Conflict) => continue,
                Err(e) => {
                    tracing::warn!(pod = %pod.name, error = ?e, "removal after the grace failed");
                    return true;
                }
            }
        }
        false
    }

    /// Pending → Running once its claims are ready; returns the run time
    /// if the pod has one.
    fn start(&self, pod: &Bound) -> Result<Option<Duration>, NotStarted> {
        let pod_ip = self.addresses.next_pod_ip();
        let mut started_on = None;
        let mut run_for = None;
        let mut waits = None;
        let started = self.update_pod(pod, |obj| {
            waits = None;
            let node = str_at(obj, "/spec/nodeName")?.to_string();
            if str_at(obj, "/status/phase").is_some_and(|p| p != "Pending") {
                return None;
            }
            let claims = match consumer::ready(&self.store, obj) {
                Ok(claims) => claims,
                Err(not_ready) => {
                    let written = mark_waiting(obj, &not_ready.why);
                    waits = Some(not_ready.blocker);
                    return written;
                }
            };
            run_for = str_at(
                obj,
                &format!(
                    "/metadata/annotations/{}",
                    RUN_SECONDS_ANNOTATION.replace('/', "~1")
                ),
            )
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(Duration::from_secs_f64);
            let host_ip = self.node_ip(&node);
            let containers = container_names(obj);
            let status = child_mut(as_map(obj), "status");
            status.insert("phase".into(), json!("Running"));
            status.insert("hostIP".into(), json!(host_ip));
            status.insert("hostIPs".into(), json!([{ "ip": host_ip }]));
            status.insert("podIP".into(), json!(pod_ip));
            status.insert("podIPs".into(), json!([{ "ip": pod_ip }]));
            status.insert("startTime".into(), json!(now()));
            for kind in [
                "PodReadyToStartContainers",
                "Initialized",
                "ContainersReady",
                "Ready",
            ] {
                set_condition(status, condition(kind, true, None));
            }
            set_container_statuses(
                status,
                &containers,
                json!({"running": {"startedAt": now()}}),
                true,
            );
            if !claims.is_empty() {
                report_devices(obj, &claims);
            }
            started_on = Some(node);
            Some(())
        });
        if let Some(blocker) = waits {
            return Err(NotStarted::WaitingForClaims(blocker));
        }
        started.ok_or(NotStarted::Skipped)?;
        if let Some(node) = started_on
            && self.config.events
        {
            self.record_event(pod, &node);
        }
        Ok(run_for)
    }

    /// Running → Succeeded.
    fn complete(&self, pod: &Bound) {
        self.update_pod(pod, |obj| {
            if str_at(obj, "/status/phase") != Some("Running") {
                return None;
            }
            let containers = container_names(obj);
            let status = child_mut(as_map(obj), "status");
            status.insert("phase".into(), json!("Succeeded"));
            for kind in ["ContainersReady", "Ready"] {
                set_condition(status, condition(kind, false, Some("PodCompleted")));
            }
            let terminated = json!({"terminated": {"exitCode": 0, "reason": "Completed",
                "startedAt": now(), "finishedAt": now()}});
            set_container_statuses(status, &containers, terminated, false);
            Some(())
        });
    }

    /// Applies `change` to the live pod (same uid, not being deleted),
    /// retrying on concurrent writes. `change` returns None to skip.
    fn update_pod(
        &self,
        pod: &Bound,
        mut change: impl FnMut(&mut Value) -> Option<()>,
    ) -> Option<()> {
        let res: Arc<str> = Arc::from(PODS);
        for _ in 0..10 {
            let current = self.store.get(PODS, &pod.namespace, &pod.name)?;
            if current.uid != pod.uid {
                return None;
            }
            let mut obj = current.value();
            if obj.pointer("/metadata/deletionTimestamp").is_some() {
                return None;
            }
            change(&mut obj)?;
            match self.store.replace(&res, Some(current.rv), obj) {
                Ok(_) => return Some(()),
                Err(CommitError::Conflict) => continue,
                Err(_) => return None,
            }
        }
        tracing::warn!(pod = %pod.name, "pod kept changing; lifecycle step skipped");
        None
    }

    fn node_ip(&self, node: &str) -> String {
        self.store
            .get(NODES, "", node)
            .map(|n| n.value())
            .and_then(|n| {
                n.pointer("/status/addresses")?
                    .as_array()?
                    .iter()
                    .find(|a| a["type"] == "InternalIP")?
                    .get("address")?
                    .as_str()
                    .map(str::to_string)
            })
            .unwrap_or_else(|| "172.16.0.1".into())
    }

    fn record_event(&self, pod: &Bound, node: &str) {
        let event = json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": format!("{}.{}", pod.name, &new_uid()[..8]),
                "namespace": pod.namespace,
                "uid": new_uid(),
                "creationTimestamp": now(),
            },
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": pod.namespace,
                               "name": pod.name, "uid": pod.uid},
            "reason": "Started",
            "message": format!("Started containers on simulated node {node}"),
            "source": {"component": "kubelet", "host": node},
            "reportingComponent": "kubelet",
            "reportingInstance": node,
            "firstTimestamp": now(),
            "lastTimestamp": now(),
            "count": 1,
            "type": "Normal",
        });
        let _ = self.store.create(&Arc::from(EVENTS), event);
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn container_names(pod: &Value) -> Vec<(String, String)> {
    pod.pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
                    (s("name"), s("image"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A pod waiting for its claims: its containers are `ContainerCreating`
/// (written once; None when already so, to leave the pod unchanged).
fn mark_waiting(obj: &mut Value, why: &str) -> Option<()> {
    let containers = container_names(obj);
    let status = child_mut(as_map(obj), "status");
    let waiting = json!({"waiting": {"reason": "ContainerCreating"}});
    let already = status
        .get("containerStatuses")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().all(|c| c["state"] == waiting));
    if already {
        return None;
    }
    tracing::debug!(reason = why, "pod waits for its resource claims");
    set_container_statuses(status, &containers, waiting, false);
    Some(())
}

/// Each container's devices from the claims it uses.
fn report_devices(obj: &mut Value, claims: &consumer::Resolved) {
    let specs: Vec<Value> = obj
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let Some(statuses) = obj
        .pointer_mut("/status/containerStatuses")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for (spec, status) in specs.iter().zip(statuses.iter_mut()) {
        if let Some(devices) = consumer::container_devices(spec, claims) {
            as_map(status).insert("allocatedResourcesStatus".into(), devices);
        }
    }
}

fn set_container_statuses(
    status: &mut Map<String, Value>,
    containers: &[(String, String)],
    state: Value,
    ready: bool,
) {
    let statuses: Vec<Value> = containers
        .iter()
        .map(|(name, image)| {
            json!({"name": name, "image": image, "imageID": "", "containerID": format!("kwok://{name}"),
                   "ready": ready, "started": ready, "restartCount": 0, "state": state})
        })
        .collect();
    status.insert("containerStatuses".into(), json!(statuses));
}
