//! Runs one scenario against any cluster with a scheduler: starts the
//! watchers, creates the scenario's objects, feeds what the watchers see into
//! the tracker, prints progress, and stops once every workload has settled
//! (or the scenario's own timeout passes). Returns the summary.
//!
//! `muster simulate` and `muster load` both run scenarios through this one
//! runner, against the embedded cluster or any other.
//!
//! - `apply`, `observe`: create the objects, watch what becomes of them.
//! - [`tracker`]: outcomes and timings from observations (pure).
//! - [`summary`]: the progress line, the summary table, the verdict.

mod apply;
mod observe;
pub mod summary;
pub mod tracker;

pub use apply::Pace;
pub use tracker::{Counts, GangReport, GroupCondition, PodTimes, PodsReport, Summary};

use std::io::Write;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, MissedTickBehavior};

use self::apply::apply;
use self::observe::Watched;
use self::summary::progress_line;
use self::tracker::Tracker;
use crate::scenario::{Kind, Scenario, WorkloadPlan};

/// How long the watchers may take to list before the run gives up.
const SYNC_TIMEOUT: Duration = Duration::from_secs(30);
/// How often progress is reported.
const TICK: Duration = Duration::from_millis(250);
/// At most one progress line this often.
const LINE_INTERVAL: Duration = Duration::from_secs(1);
/// A quiet run repeats its progress line this often anyway.
const HEARTBEAT: Duration = Duration::from_secs(5);

/// How a run creates objects, reports progress and judges time.
pub struct RunOptions<'a> {
    /// The scheduler's gang arguments: the timeout of gangs whose scenario
    /// entry sets none (per dialect, see `GangArgs::default_timeout`).
    pub gang: muster_core::gang::GangArgs,
    /// Object creations in flight at once.
    pub concurrency: usize,
    /// Told the counts every tick and once at the end.
    pub progress: &'a mut (dyn Progress + Send),
}

/// Where a run reports how far it is.
pub trait Progress {
    /// `done` is true once, for the final counts.
    fn update(&mut self, at: Duration, counts: &Counts, done: bool);
}

/// What a run reached: the summary, and each pod's timings (for load
/// statistics).
#[derive(Debug, Clone)]
pub struct Finished {
    pub summary: Summary,
    pub pods: Vec<PodTimes>,
    /// The pods throughput and latency are computed on: the measured
    /// workloads' (`measured: true`), or all of them when none is.
    pub measured_pods: Vec<PodTimes>,
}

/// Applies `scenario` through `client` and tracks it to the end.
pub async fn run(
    client: &kube::Client,
    scenario: &Scenario,
    opts: RunOptions<'_>,
) -> Result<Finished> {
    let plan = scenario.plan();
    let mut tracker = Tracker::new(&scenario.name, &plan, &opts.gang);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let watchers = observe::spawn(client, &scenario.name, &group_kinds(&plan.workloads), tx);
    wait_synced(&mut rx, watchers.count()).await?;

    let start = Instant::now();
    let deadline = start + Duration::from_secs(scenario.timeout_seconds);
    let pace = Pace {
        rate: scenario.creation_rate,
        concurrency: opts.concurrency,
    };
    // Phase gates: the first plan workload not yet settled.
    let (settled_tx, settled_rx) = watch::channel(0usize);
    let mut applying = std::pin::pin!(apply(client, &plan, pace, settled_rx));
    let mut applied = false;
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    // Whether the run is over is judged on ticks, timeouts and the end of
    // creation, not per watch event: judging walks every gang, and a 50,000-pod
    // run delivers hundreds of thousands of events.
    let mut next_timeout = deadline;
    loop {
        let mut judge = false;
        tokio::select! {
            result = &mut applying, if !applied => {
                result.context("applying the scenario")?;
                applied = true;
                judge = true;
            }
            message = rx.recv() => match message {
                Some(message) => {
                    let at = start.elapsed();
                    receive(&mut tracker, message, at);
                    while let Ok(message) = rx.try_recv() {
                        receive(&mut tracker, message, at);
                    }
                    report_settled(&tracker, &settled_tx, at);
                }
                None => anyhow::bail!("the scenario watches ended unexpectedly"),
            },
            _ = tick.tick() => {
                let at = start.elapsed();
                // Gang timeouts settle gangs without any event.
                report_settled(&tracker, &settled_tx, at);
                opts.progress.update(at, &tracker.counts(at), false);
                judge = true;
            }
            _ = tokio::time::sleep_until(next_timeout) => judge = true,
        }
        if !judge {
            continue;
        }
        let now = start.elapsed();
        if (applied && tracker.settled(now)) || Instant::now() >= deadline {
            opts.progress.update(now, &tracker.counts(now), true);
            return Ok(Finished {
                summary: tracker.summary(now),
                pods: tracker.pod_times(),
                measured_pods: tracker.measured_pod_times(),
            });
        }
        next_timeout = tracker
            .next_timeout(now)
            .map_or(deadline, |t| (start + t).min(deadline));
    }
}

/// Moves the phase gates' cursor past the workloads that have settled.
fn report_settled(tracker: &Tracker, settled: &watch::Sender<usize>, at: Duration) {
    settled.send_if_modified(|first_unsettled| {
        let next = tracker.first_unsettled(*first_unsettled, at);
        let moved = next != *first_unsettled;
        *first_unsettled = next;
        moved
    });
}

fn receive(tracker: &mut Tracker, message: Watched, at: Duration) {
    if let Watched::Change(o) = message {
        tracker.observe(o, at);
    }
}

/// The group kinds a plan creates, each once.
fn group_kinds(workloads: &[WorkloadPlan]) -> Vec<Kind> {
    let mut kinds = Vec::new();
    for w in workloads {
        if let WorkloadPlan::Gang(g) = w
            && let Some(m) = &g.group
            && !kinds.contains(&m.kind)
        {
            kinds.push(m.kind);
        }
    }
    kinds
}

/// Waits until every watcher has listed once.
async fn wait_synced(rx: &mut mpsc::UnboundedReceiver<Watched>, watchers: usize) -> Result<()> {
    let mut synced = 0;
    let wait = async {
        while synced < watchers {
            match rx.recv().await {
                Some(Watched::Synced) => synced += 1,
                Some(Watched::Change(_)) => {}
                None => anyhow::bail!("the scenario watches ended before listing"),
            }
        }
        Ok(())
    };
    tokio::time::timeout(SYNC_TIMEOUT, wait)
        .await
        .context("the scenario watches did not list within 30s")?
}

/// Progress as lines of text (`progress_line`): printed when the counts
/// changed since the last line (at most one a second), every fifth quiet
/// second as a heartbeat, and once at the end.
pub struct Lines<'a> {
    out: &'a mut (dyn Write + Send),
    last: Option<(Duration, Counts)>,
}

impl<'a> Lines<'a> {
    pub fn new(out: &'a mut (dyn Write + Send)) -> Self {
        Lines { out, last: None }
    }
}

impl Progress for Lines<'_> {
    /// Best effort: a closed stderr must not stop the run.
    fn update(&mut self, at: Duration, counts: &Counts, done: bool) {
        let print = match self.last {
            None => true,
            Some((printed, before)) => {
                let quiet = at.saturating_sub(printed);
                done || (before != *counts && quiet >= LINE_INTERVAL) || quiet >= HEARTBEAT
            }
        };
        if print {
            let _ = writeln!(self.out, "{}", progress_line(at, counts));
            self.last = Some((at, *counts));
        }
    }
}
