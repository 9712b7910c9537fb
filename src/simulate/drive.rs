//! Runs one scenario against any cluster with a scheduler: starts the
//! watchers, creates the scenario's objects, feeds what the watchers see into
//! the tracker, prints progress, and stops once every workload has settled
//! (or the scenario's own timeout passes). Returns the summary.

use std::io::Write;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior};

use super::apply::apply;
use super::observe::{self, Watched};
use super::report::progress_line;
use super::tracker::{Summary, Tracker};
use crate::scenario::Scenario;

/// How long the watchers may take to list before the run gives up.
const SYNC_TIMEOUT: Duration = Duration::from_secs(30);
/// Quiet seconds after which the progress line is repeated anyway.
const HEARTBEAT_TICKS: u32 = 5;

/// How a run reports and judges time.
pub struct DriveOptions<'a> {
    /// Gang timeout for gangs whose scenario entry sets none (the
    /// scheduler's `permitWaitingTimeSeconds`).
    pub default_gang_timeout: Duration,
    /// Where progress lines go (stderr for the CLI, a sink in tests).
    pub progress: &'a mut (dyn Write + Send),
}

/// Applies `scenario` through `client` and tracks it to the end.
pub async fn drive(
    client: &kube::Client,
    scenario: &Scenario,
    opts: DriveOptions<'_>,
) -> Result<Summary> {
    let plan = scenario.plan();
    let mut tracker = Tracker::new(&scenario.name, &plan, opts.default_gang_timeout);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let watchers = observe::spawn(client, &scenario.name, tx);
    wait_synced(&mut rx, watchers.count()).await?;

    let start = Instant::now();
    let deadline = start + Duration::from_secs(scenario.timeout_seconds);
    let mut applying = std::pin::pin!(apply(client, &plan, scenario.creation_rate));
    let mut applied = false;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut printer = Printer::default();
    loop {
        let next_timeout = tracker
            .next_timeout(start.elapsed())
            .map_or(deadline, |t| (start + t).min(deadline));
        tokio::select! {
            result = &mut applying, if !applied => {
                result.context("applying the scenario")?;
                applied = true;
            }
            message = rx.recv() => match message {
                Some(Watched::Change(o)) => printer.changed |= tracker.observe(o, start.elapsed()),
                Some(Watched::Synced) => {}
                None => anyhow::bail!("the scenario watches ended unexpectedly"),
            },
            _ = tick.tick() => printer.maybe_print(opts.progress, &tracker, start.elapsed()),
            _ = tokio::time::sleep_until(next_timeout) => {}
        }
        let now = start.elapsed();
        if (applied && tracker.settled(now)) || Instant::now() >= deadline {
            printer.changed = true;
            printer.maybe_print(opts.progress, &tracker, now);
            return Ok(tracker.summary(now));
        }
    }
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

/// The progress line: printed on a tick when something changed since the
/// last one, on every fifth quiet tick as a heartbeat, and once at the end.
struct Printer {
    changed: bool,
    /// Ticks since the last line.
    quiet: u32,
}

impl Default for Printer {
    fn default() -> Self {
        // The first tick prints the starting line.
        Printer {
            changed: false,
            quiet: HEARTBEAT_TICKS,
        }
    }
}

impl Printer {
    /// Best effort: a closed stderr must not stop the run.
    fn maybe_print(&mut self, out: &mut (dyn Write + Send), tracker: &Tracker, at: Duration) {
        self.quiet += 1;
        if !self.changed && self.quiet < HEARTBEAT_TICKS {
            return;
        }
        let _ = writeln!(out, "{}", progress_line(at, &tracker.counts(at)));
        self.changed = false;
        self.quiet = 0;
    }
}
