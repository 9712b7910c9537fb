//! The dispatcher's executor: one task that owns the write path's pure
//! state (`muster_core::dispatch`: the held waiting messages and the per-object
//! call queue) and starts calls as their lane has room; one short task per
//! call in flight, which retries transient failures (5xx, 429, transport
//! errors) with backoff under the client-side rate limit
//! (`clientConnection.qps`/`burst`), then finishes its object in the shared
//! queue itself. The scheduling loop hands over batches of calls and never
//! waits for them; the outcome of every binding comes back to it, and the
//! engine turns a success into the pod's `Scheduled` event.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::api_calls::{Failure, attempt_with, classify};
use super::fence::Fence;
use crate::metrics::Metrics;
use muster_core::dispatch::{Added, ApiCall, Backoff, CallQueue, Dispatch, Holds, Lane};
use muster_core::model::PodKey;

pub use super::api_calls::COMPONENT;

/// Which write of a pod's placement an outcome is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindStage {
    /// VolumeBinding's PreBind claim writes.
    PreBindVolumes,
    /// The binding itself.
    Bind,
}

/// What happened to a binding (or to the PreBind writes before it).
#[derive(Debug, Clone)]
pub struct BindOutcome {
    pub stage: BindStage,
    pub pod: PodKey,
    pub uid: Arc<str>,
    pub node: Arc<str>,
    pub result: Result<(), String>,
    /// The ResourceClaims the binding wrote, as the API server answered
    /// (DynamicResources' PreBind): applied before the outcome, so the
    /// scheduler holds their devices whatever the binding's fate.
    pub written: Vec<muster_core::cache::DraChange>,
}

#[derive(Debug, Clone)]
pub struct WriterConfig {
    /// Calls in flight per lane (bindings; everything else).
    pub max_in_flight: usize,
    pub max_attempts: u32,
    pub initial_retry: Duration,
    /// Client-side rate limit (queries per second, burst); `None` is unlimited.
    pub qps: Option<(f64, u32)>,
    /// How long a subject's waiting messages are held in case it settles
    /// meanwhile (`muster_core::dispatch::Holds`; zero sends them at once).
    pub hold_waiting: Duration,
}

impl Default for WriterConfig {
    fn default() -> Self {
        let retry = Backoff::default();
        WriterConfig {
            max_in_flight: 64,
            max_attempts: retry.max_attempts,
            initial_retry: retry.initial,
            qps: None,
            hold_waiting: Duration::from_secs(1),
        }
    }
}

/// Handle for submitting calls; cloneable.
#[derive(Clone)]
pub struct Writer {
    tx: mpsc::UnboundedSender<Vec<Dispatch>>,
}

impl Writer {
    /// The dispatcher, to be spawned by the caller (the daemon watches it
    /// as a critical task). Binding outcomes arrive on `outcomes`. The
    /// dispatcher ends when every `Writer` is dropped and the calls queued
    /// or in flight have finished; held waiting messages are dropped then.
    /// Every attempt first passes `fence` (leader fencing, `fence.rs`).
    pub fn new(
        client: kube::Client,
        config: WriterConfig,
        metrics: Arc<Metrics>,
        outcomes: mpsc::UnboundedSender<BindOutcome>,
        fence: Arc<Fence>,
    ) -> (Writer, impl Future<Output = ()> + Send + 'static) {
        let (tx, rx) = mpsc::unbounded_channel();
        let limiter = config.qps.and_then(|(qps, burst)| quota(qps, burst));
        let dispatcher = Dispatcher {
            holds: Holds::new(config.hold_waiting),
            held_superseded: 0,
            width: config.max_in_flight.max(1),
            in_flight: [0; 2],
            ctx: Arc::new(Ctx {
                client,
                retry: Backoff {
                    max_attempts: config.max_attempts.max(1),
                    initial: config.initial_retry,
                    ..Backoff::default()
                },
                metrics,
                outcomes,
                limiter: limiter.map(RateLimiter::direct),
                queue: CallQueue::default(),
                fence,
            }),
        };
        (Writer { tx }, dispatcher.run(rx))
    }

    /// Hands over one turn's calls, in order (a binding among them drops
    /// the waiting messages of its pod held so far). Returns false when the
    /// writer has shut down.
    pub fn submit(&self, batch: Vec<Dispatch>) -> bool {
        batch.is_empty() || self.tx.send(batch).is_ok()
    }
}

/// A token bucket of `burst` tokens refilled at `qps` per second; `None` for
/// a rate that cannot be represented (zero, negative, not a number).
fn quota(qps: f64, burst: u32) -> Option<Quota> {
    let period = Duration::try_from_secs_f64(1.0 / qps).ok()?;
    let burst = NonZeroU32::new(burst.max(1))?;
    Some(Quota::with_period(period)?.allow_burst(burst))
}

/// What the write tasks share with the dispatcher.
struct Ctx {
    client: kube::Client,
    retry: Backoff,
    metrics: Arc<Metrics>,
    outcomes: mpsc::UnboundedSender<BindOutcome>,
    limiter: Option<DefaultDirectRateLimiter>,
    queue: CallQueue,
    fence: Arc<Fence>,
}

struct Dispatcher {
    holds: Holds,
    /// `holds.superseded()` when last reported.
    held_superseded: u64,
    /// Calls in flight allowed per lane.
    width: usize,
    in_flight: [usize; 2],
    ctx: Arc<Ctx>,
}

impl Dispatcher {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Vec<Dispatch>>) {
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<Lane>();
        let mut open = true;
        while open || !self.ctx.queue.is_empty() {
            let due = self
                .holds
                .next_due()
                .filter(|_| open)
                .map(Instant::from_std);
            let held = async {
                match due {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                batch = rx.recv(), if open => match batch {
                    Some(batch) => {
                        let now = std::time::Instant::now();
                        for d in batch {
                            if let Some(d) = self.holds.offer(d, now) {
                                self.enqueue(d);
                            }
                        }
                        // After the batch: a binding in it drops its pod's held messages.
                        self.release_due(now);
                    }
                    None => open = false,
                },
                Some(lane) = done_rx.recv() => {
                    let n = &mut self.in_flight[lane.index()];
                    *n = n.saturating_sub(1);
                }
                _ = held => self.release_due(std::time::Instant::now()),
            }
            for lane in Lane::ALL {
                self.fill(lane, &done_tx);
            }
            let queued = i64::try_from(self.ctx.queue.len()).unwrap_or(i64::MAX);
            self.ctx.metrics.api_writes_queued.set(queued);
        }
    }

    fn release_due(&mut self, now: std::time::Instant) {
        for d in self.holds.take_due(now) {
            self.enqueue(d);
        }
        let held = self.holds.superseded();
        self.ctx
            .metrics
            .api_writes_superseded
            .inc_by(held.saturating_sub(self.held_superseded));
        self.held_superseded = held;
    }

    fn enqueue(&self, d: Dispatch) {
        let metrics = &self.ctx.metrics;
        match self.ctx.queue.add(d) {
            Added::Queued { superseded: 0 } => {}
            Added::Queued { superseded } => {
                metrics.api_writes_superseded.inc_by(superseded as u64);
            }
            Added::EventDropped => metrics.events_dropped.inc(),
        }
    }

    /// Starts calls of `lane` while it has room (`Lane::room`: reports
    /// narrow while bindings wait).
    fn fill(&mut self, lane: Lane, done: &mpsc::UnboundedSender<Lane>) {
        let bindings_backlogged = self.in_flight[Lane::Bindings.index()] >= self.width
            && self.ctx.queue.waiting(Lane::Bindings);
        let room = lane.room(self.width, bindings_backlogged);
        while self.in_flight[lane.index()] < room {
            let Some(call) = self.ctx.queue.pop(lane) else {
                break;
            };
            self.in_flight[lane.index()] += 1;
            let ctx = self.ctx.clone();
            let done = done.clone();
            tokio::spawn(async move {
                let object = call.object();
                ctx.perform(call).await;
                // The object's next call becomes ready before its lane is
                // told of the room, so the dispatcher sees both at once.
                ctx.queue.finish(&object);
                let _ = done.send(lane);
            });
        }
    }
}

impl Ctx {
    async fn perform(&self, call: ApiCall) {
        let op = call.operation();
        let started = Instant::now();
        let mut tries = 1;
        // Claims the call wrote (a retry writes them again: the last answer
        // for each stands).
        let mut written = Vec::new();
        let result = loop {
            if let Some(limiter) = &self.limiter {
                limiter.until_ready().await;
            }
            // Checked immediately before the write, after any wait: a
            // replica frozen past renewDeadline must not write on waking.
            if !self.fence.allows(std::time::Instant::now()) {
                break Err(Failure::fenced());
            }
            match attempt_with(&self.client, &call, &mut written).await {
                Ok(()) => break Ok(()),
                Err(e) => {
                    let f = classify(&e);
                    let delay = self.retry.delay_after(tries).filter(|_| f.transient);
                    let Some(delay) = delay else {
                        break Err(f);
                    };
                    debug!(operation = op, attempt = tries, error = %f.message, "retrying API write");
                    tokio::time::sleep(delay).await;
                    tries += 1;
                }
            }
        };
        let label = match &result {
            Ok(()) => "success",
            Err(f) if f.fenced => "fenced",
            Err(f) if f.conflict => "conflict",
            Err(_) => "error",
        };
        self.metrics
            .api_writes
            .with_label_values(&[op, label])
            .inc();
        if let Err(f) = &result {
            warn!(operation = op, object = ?call.object(), error = %f.message, "API write failed");
        }
        if let ApiCall::PreBindVolumes { pod, uid, node, .. } = call {
            let _ = self.outcomes.send(BindOutcome {
                stage: BindStage::PreBindVolumes,
                pod,
                uid,
                node,
                result: result.map_err(|f| f.message),
                written: Vec::new(),
            });
        } else if let ApiCall::Bind { pod, uid, node, .. } = call {
            self.metrics
                .binding_duration
                .observe(started.elapsed().as_secs_f64());
            let _ = self.outcomes.send(BindOutcome {
                stage: BindStage::Bind,
                pod,
                uid,
                node,
                result: result.map_err(|f| f.message),
                written: written
                    .into_iter()
                    .map(super::claim_writes::observed)
                    .collect(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_limit_allows_the_burst_then_spaces_calls() {
        let Some(q) = quota(10.0, 2) else {
            panic!("10 qps is a quota")
        };
        let limiter = RateLimiter::direct(q);
        assert!(limiter.check().is_ok());
        assert!(limiter.check().is_ok());
        assert!(limiter.check().is_err(), "the third call waits for a token");
        assert_eq!(q.replenish_interval(), Duration::from_millis(100));
    }

    #[test]
    fn unrepresentable_rates_mean_no_limit() {
        assert!(quota(0.0, 5).is_none());
        assert!(quota(f64::NAN, 5).is_none());
        assert!(quota(-1.0, 5).is_none());
        assert!(quota(0.5, 0).is_some(), "a zero burst is one");
    }
}
