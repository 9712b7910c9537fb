//! API writes with bounded concurrency, per-object ordering and retries.
//!
//! The scheduling loop hands over `Write`s and never waits for them. Writes to
//! the same object run in submission order (a late "Unschedulable" condition
//! must never land after the pod's binding); different objects run in parallel
//! up to `max_in_flight` per lane. Bindings have a lane of their own, so a
//! burst of events and status writes never delays the writes that place
//! pods. Transient failures (5xx, 429, transport errors) are
//! retried with exponential backoff; the outcome of every binding is reported
//! back to the loop, which releases the reservation on failure.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Binding, Event, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use kube::api::{Api, ApiResource, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{debug, warn};

use crate::metrics::Metrics;
use crate::model::PodKey;

/// The component name on events and in managed fields.
pub const COMPONENT: &str = "muster";

/// An object an event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventTarget {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: Option<String>,
}

/// One API write the loop asks for.
#[derive(Debug, Clone)]
pub enum Write {
    /// POST pods/binding.
    Bind {
        pod: PodKey,
        uid: String,
        node: String,
    },
    /// Set the pod's `PodScheduled` condition (`False` with a reason while pending).
    PodCondition {
        pod: PodKey,
        status: bool,
        reason: String,
        message: String,
    },
    /// Record a core/v1 Event; repeats of the same (object, reason, message) bump its count.
    Event {
        target: EventTarget,
        warning: bool,
        reason: String,
        message: String,
    },
    /// Set a condition in a group definition's status (e.g. `PodGroupInitiallyScheduled`).
    GroupCondition {
        resource: ApiResource,
        namespace: String,
        name: String,
        type_: String,
        status: bool,
        reason: String,
        message: String,
    },
    /// Merge-patch a group definition's `status` (dialects with a status of
    /// their own: Coscheduling, Volcano).
    GroupStatus {
        resource: ApiResource,
        namespace: String,
        name: String,
        status: serde_json::Value,
    },
}

impl Write {
    /// Writes with the same key run in order.
    fn key(&self) -> String {
        match self {
            Write::Bind { pod, .. } | Write::PodCondition { pod, .. } => format!("pod/{pod}"),
            Write::Event { target, .. } => {
                format!("event/{}/{}/{}", target.kind, target.namespace, target.name)
            }
            Write::GroupCondition {
                resource,
                namespace,
                name,
                ..
            }
            | Write::GroupStatus {
                resource,
                namespace,
                name,
                ..
            } => format!(
                "{}/{}/{namespace}/{name}",
                resource.api_version, resource.plural
            ),
        }
    }

    fn operation(&self) -> &'static str {
        match self {
            Write::Bind { .. } => "bind",
            Write::PodCondition { .. } => "pod_status",
            Write::Event { .. } => "event",
            Write::GroupCondition { .. } | Write::GroupStatus { .. } => "group_status",
        }
    }
}

/// What happened to a binding.
#[derive(Debug, Clone)]
pub struct BindOutcome {
    pub pod: PodKey,
    pub uid: String,
    pub node: String,
    pub result: Result<(), String>,
}

#[derive(Debug, Clone)]
pub struct WriterConfig {
    pub max_in_flight: usize,
    pub max_attempts: u32,
    pub initial_retry: Duration,
    /// Client-side rate limit (queries per second, burst); `None` is unlimited.
    pub qps: Option<(f64, u32)>,
}

impl Default for WriterConfig {
    fn default() -> Self {
        WriterConfig {
            max_in_flight: 64,
            max_attempts: 5,
            initial_retry: Duration::from_millis(100),
            qps: None,
        }
    }
}

/// Handle for submitting writes; cloneable.
#[derive(Clone)]
pub struct Writer {
    tx: mpsc::UnboundedSender<Write>,
}

impl Writer {
    /// Starts the dispatcher. Binding outcomes arrive on `outcomes`. The
    /// dispatcher ends when every `Writer` is dropped and in-flight writes finish.
    pub fn start(
        client: kube::Client,
        config: WriterConfig,
        metrics: Arc<Metrics>,
        outcomes: mpsc::UnboundedSender<BindOutcome>,
    ) -> (Writer, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let dispatcher = Dispatcher {
            ctx: Arc::new(Ctx {
                client,
                config,
                metrics,
                outcomes,
                limiter: tokio::sync::Mutex::new(None),
            }),
            queues: HashMap::new(),
            lanes: Default::default(),
        };
        (Writer { tx }, tokio::spawn(dispatcher.run(rx)))
    }

    /// Queues a write. Returns false when the writer has shut down.
    pub fn submit(&self, w: Write) -> bool {
        self.tx.send(w).is_ok()
    }
}

struct Ctx {
    client: kube::Client,
    config: WriterConfig,
    metrics: Arc<Metrics>,
    outcomes: mpsc::UnboundedSender<BindOutcome>,
    limiter: tokio::sync::Mutex<Option<TokenBucket>>,
}

struct Dispatcher {
    ctx: Arc<Ctx>,
    /// Per-key pending writes; a key present here has one write in flight
    /// or waiting in its lane's `ready` queue.
    queues: HashMap<String, VecDeque<Write>>,
    lanes: [LaneState; 2],
}

impl Dispatcher {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Write>) {
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<(String, Lane)>();
        let mut open = true;
        while open || !self.queues.is_empty() {
            tokio::select! {
                w = rx.recv(), if open => match w {
                    Some(w) => {
                        let key = w.key();
                        match self.queues.get_mut(&key) {
                            Some(q) => q.push_back(w),
                            None => {
                                self.queues.insert(key.clone(), VecDeque::new());
                                self.start(key, w, &done_tx);
                            }
                        }
                    }
                    None => open = false,
                },
                Some((key, lane)) = done_rx.recv() => {
                    self.lanes[lane as usize].in_flight -= 1;
                    let next = self.queues.get_mut(&key).and_then(VecDeque::pop_front);
                    match next {
                        Some(w) => self.start(key, w, &done_tx),
                        None => { self.queues.remove(&key); }
                    }
                    self.fill(lane, &done_tx);
                }
            }
        }
    }

    /// Runs `w` now if its lane has room, else queues it for the lane. A
    /// write waiting for room is a `Write` in a queue, not a spawned task: a
    /// backlog of 50,000 writes must cost kilobytes, not a task each.
    fn start(&mut self, key: String, w: Write, done: &mpsc::UnboundedSender<(String, Lane)>) {
        let lane = Lane::of(&w);
        let width = self.ctx.config.max_in_flight.max(1);
        let state = &mut self.lanes[lane as usize];
        if state.in_flight < width {
            state.in_flight += 1;
            self.spawn(key, w, lane, done.clone());
        } else {
            state.ready.push_back((key, w));
        }
    }

    /// Starts queued writes of `lane` while it has room.
    fn fill(&mut self, lane: Lane, done: &mpsc::UnboundedSender<(String, Lane)>) {
        let width = self.ctx.config.max_in_flight.max(1);
        while self.lanes[lane as usize].in_flight < width {
            let Some((key, w)) = self.lanes[lane as usize].ready.pop_front() else {
                break;
            };
            self.lanes[lane as usize].in_flight += 1;
            self.spawn(key, w, lane, done.clone());
        }
    }

    fn spawn(
        &self,
        key: String,
        w: Write,
        lane: Lane,
        done: mpsc::UnboundedSender<(String, Lane)>,
    ) {
        let ctx = self.ctx.clone();
        tokio::spawn(async move {
            ctx.perform(w).await;
            let _ = done.send((key, lane));
        });
    }
}

/// In-flight limits are per lane: bindings, and every other write (events,
/// conditions, group status), so a burst of reports never delays the writes
/// that place pods. A key has one write in flight at a time, whatever its lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lane {
    Bindings = 0,
    Reports = 1,
}

impl Lane {
    fn of(w: &Write) -> Lane {
        match w {
            Write::Bind { .. } => Lane::Bindings,
            _ => Lane::Reports,
        }
    }
}

/// A lane's writes in flight, and those whose key is free waiting for room.
#[derive(Default)]
struct LaneState {
    in_flight: usize,
    ready: VecDeque<(String, Write)>,
}

/// Why a write failed, and whether trying again could help.
struct Failure {
    message: String,
    transient: bool,
    conflict: bool,
}

fn classify(e: &kube::Error) -> Failure {
    match e {
        kube::Error::Api(s) => Failure {
            message: format!("{} ({} {})", s.message, s.code, s.reason),
            transient: s.code >= 500 || s.code == 429,
            conflict: s.code == 409,
        },
        other => Failure {
            message: other.to_string(),
            transient: true,
            conflict: false,
        },
    }
}

impl Ctx {
    async fn perform(&self, w: Write) {
        let op = w.operation();
        let started = Instant::now();
        let mut delay = self.config.initial_retry;
        let mut attempt = 1;
        let result = loop {
            self.rate_limit().await;
            match self.attempt(&w).await {
                Ok(()) => break Ok(()),
                Err(e) => {
                    let f = classify(&e);
                    if !f.transient || attempt >= self.config.max_attempts {
                        break Err(f);
                    }
                    debug!(operation = op, attempt, error = %f.message, "retrying API write");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(5));
                    attempt += 1;
                }
            }
        };
        let label = match &result {
            Ok(()) => "success",
            Err(f) if f.conflict => "conflict",
            Err(_) => "error",
        };
        self.metrics
            .api_writes
            .with_label_values(&[op, label])
            .inc();
        if let Err(f) = &result {
            warn!(operation = op, key = %w.key(), error = %f.message, "API write failed");
        }
        if let Write::Bind { pod, uid, node } = w {
            self.metrics
                .binding_duration
                .observe(started.elapsed().as_secs_f64());
            let _ = self.outcomes.send(BindOutcome {
                pod,
                uid,
                node,
                result: result.map_err(|f| f.message),
            });
        }
    }

    async fn attempt(&self, w: &Write) -> Result<(), kube::Error> {
        match w {
            Write::Bind { pod, uid, node } => {
                let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
                let binding = Binding {
                    metadata: ObjectMeta {
                        name: Some(pod.name.to_string()),
                        namespace: Some(pod.namespace.to_string()),
                        uid: (!uid.is_empty()).then(|| uid.clone()),
                        ..ObjectMeta::default()
                    },
                    target: ObjectReference {
                        kind: Some("Node".into()),
                        name: Some(node.clone()),
                        ..ObjectReference::default()
                    },
                };
                api.create_subresource::<_, serde_json::Value>(
                    "binding",
                    &pod.name,
                    &PostParams::default(),
                    &binding,
                )
                .await
                .map(|_| ())
            }
            Write::PodCondition {
                pod,
                status,
                reason,
                message,
            } => {
                let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
                let patch = condition_patch("PodScheduled", *status, reason, message);
                api.patch_status(&pod.name, &PatchParams::default(), &Patch::Strategic(patch))
                    .await
                    .map(|_| ())
            }
            Write::Event {
                target,
                warning,
                reason,
                message,
            } => self.record_event(target, *warning, reason, message).await,
            Write::GroupCondition {
                resource,
                namespace,
                name,
                type_,
                status,
                reason,
                message,
            } => {
                let api: Api<DynamicObject> =
                    Api::namespaced_with(self.client.clone(), namespace, resource);
                let patch = condition_patch(type_, *status, reason, message);
                // Custom resources do not support strategic merge; conditions are
                // replaced as a whole list, which is what we own anyway.
                api.patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .map(|_| ())
            }
            Write::GroupStatus {
                resource,
                namespace,
                name,
                status,
            } => {
                let api: Api<DynamicObject> =
                    Api::namespaced_with(self.client.clone(), namespace, resource);
                let patch = json!({ "status": status });
                api.patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .map(|_| ())
            }
        }
    }

    /// Creates the event, or bumps the count of an identical earlier one: the
    /// event name is derived from (object, reason, message), so repeats collide.
    async fn record_event(
        &self,
        target: &EventTarget,
        warning: bool,
        reason: &str,
        message: &str,
    ) -> Result<(), kube::Error> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), &target.namespace);
        let name = format!(
            "{}.{:016x}",
            target.name,
            fingerprint(&[&target.kind, &target.name, reason, message])
        );
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(target.namespace.clone()),
                ..ObjectMeta::default()
            },
            involved_object: ObjectReference {
                api_version: Some(target.api_version.clone()),
                kind: Some(target.kind.clone()),
                name: Some(target.name.clone()),
                namespace: Some(target.namespace.clone()),
                uid: target.uid.clone(),
                ..ObjectReference::default()
            },
            reason: Some(reason.to_string()),
            message: Some(message.to_string()),
            type_: Some(if warning { "Warning" } else { "Normal" }.into()),
            count: Some(1),
            first_timestamp: Some(now.clone()),
            last_timestamp: Some(now.clone()),
            event_time: Some(MicroTime(now.0)),
            reporting_component: Some(COMPONENT.into()),
            reporting_instance: Some(COMPONENT.into()),
            action: Some(if warning { "Scheduling" } else { "Binding" }.into()),
            source: Some(k8s_openapi::api::core::v1::EventSource {
                component: Some(COMPONENT.into()),
                host: None,
            }),
            ..Event::default()
        };
        // Sent as bytes and the answer not decoded: one event per pod placed
        // makes this the writer's most frequent call.
        let body = serde_json::to_vec(&event).map_err(kube::Error::SerdeError)?;
        let request =
            kube::core::Request::new(format!("/api/v1/namespaces/{}/events", target.namespace))
                .create(&PostParams::default(), body)
                .map_err(kube::Error::BuildRequest)?;
        match self.client.request_text(request).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => {
                let existing = api.get(&name).await?;
                let patch = json!({"count": existing.count.unwrap_or(1) + 1, "lastTimestamp": now});
                api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .map(|_| ())
            }
            Err(e) => Err(e),
        }
    }

    async fn rate_limit(&self) {
        let Some((qps, burst)) = self.config.qps else {
            return;
        };
        let wait = {
            let mut guard = self.limiter.lock().await;
            guard
                .get_or_insert_with(|| TokenBucket::new(qps, burst))
                .take(Instant::now())
        };
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

/// A `status.conditions` patch setting one condition.
fn condition_patch(type_: &str, status: bool, reason: &str, message: &str) -> serde_json::Value {
    json!({"status": {"conditions": [{
        "type": type_,
        "status": if status { "True" } else { "False" },
        "reason": reason,
        "message": message,
        "lastTransitionTime": Time(k8s_openapi::jiff::Timestamp::now()),
    }]}})
}

/// A classic token bucket: `burst` tokens, refilled at `qps` per second.
struct TokenBucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            qps,
            burst,
            tokens: burst,
            last: Instant::now(),
        }
    }

    /// Takes one token; returns how long to wait before using it.
    fn take(&mut self, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst) - 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.qps)
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_bucket_spaces_requests_after_burst() {
        let start = Instant::now();
        let mut b = TokenBucket {
            qps: 10.0,
            burst: 2.0,
            tokens: 2.0,
            last: start,
        };
        assert_eq!(b.take(start), Duration::ZERO);
        assert_eq!(b.take(start), Duration::ZERO);
        let wait = b.take(start);
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-9, "{wait:?}");
    }

    #[test]
    fn fingerprint_is_stable_and_separates_parts() {
        assert_eq!(fingerprint(&["a", "b"]), fingerprint(&["a", "b"]));
        assert_ne!(fingerprint(&["ab", ""]), fingerprint(&["a", "b"]));
    }
}
