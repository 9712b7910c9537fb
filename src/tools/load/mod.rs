//! `muster load`: the load generator. Runs a scenario (`src/tools/scenario/`)
//! against any API server — a kind+kwok cluster or `muster cluster` — at
//! the scenario's rate with many creations in flight, follows it with a
//! progress bar, measures the scheduler (or, with `--bind-directly`, the
//! null scheduler that gives the harness ceiling), and writes
//! `report.json`, `report.md` and SVG plots. Guide: `docs/load-testing.md`.
//!
//! - [`stats`]: throughput windows, percentiles, series (pure).
//! - [`probe`]: peak RSS and CPU of a process, from /proc or /metrics.
//! - [`binder`]: the null scheduler; [`devices`]: its trivial device
//!   allocation for pods with DRA claims.
//! - [`report`], [`plots`], [`progress`]: what the run shows and writes.

pub mod binder;
pub mod devices;
pub mod plots;
pub mod probe;
pub mod progress;
pub mod report;
pub mod stats;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::sync::watch;

use self::probe::{Reading, Source};
use self::report::{Ceiling, LoadReport};
use crate::runner::{self, Finished, RunOptions};
use crate::scenario::{Scenario, Workload};
use muster_cluster::kwok::templates;
use muster_core::gang::GangArgs;

/// Generate load from a scenario against a cluster and report what the
/// scheduler achieved.
#[derive(Debug, Clone, clap::Args)]
pub struct LoadArgs {
    /// Kubeconfig of the cluster (default: $KUBECONFIG, ~/.kube/config, or
    /// in-cluster).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Scenario file (config/scenarios/*.yaml).
    #[arg(long)]
    pub scenario: PathBuf,
    /// Where report.json, report.md and the plots go (created if missing).
    #[arg(long, default_value = "load-report")]
    pub report_dir: PathBuf,
    /// Null scheduler: bind every pod round-robin with no scheduling logic,
    /// to measure the harness ceiling. Pods get schedulerName
    /// muster-load-null and names prefixed `null-`, so this can run beside
    /// a scheduler run on the same cluster.
    #[arg(long)]
    pub bind_directly: bool,
    /// `spec.schedulerName` of the scenario's pods, instead of the
    /// scenario's `schedulerName` (e.g. `default-scheduler` to load
    /// kube-scheduler with a scenario written for Muster). Not with
    /// --bind-directly, whose pods name the null scheduler.
    #[arg(long, conflicts_with = "bind_directly")]
    pub scheduler_name: Option<String>,
    /// report.json of a --bind-directly run of the same shape on the same
    /// machine: throughput is also given as a ratio to it.
    #[arg(long)]
    pub ceiling: Option<PathBuf>,
    /// PID of the scheduler process on this machine: peak RSS and CPU from
    /// /proc/<pid>.
    #[arg(long)]
    pub scheduler_pid: Option<u32>,
    /// The scheduler's metrics URL, e.g. https://127.0.0.1:10259/metrics
    /// (http:// for one run with --insecure-serving):
    /// scheduling attempts, and RSS/CPU when no --scheduler-pid is given.
    #[arg(long)]
    pub scheduler_metrics: Option<String>,
    /// For an https --scheduler-metrics (a scheduler serving securely): a
    /// file holding a bearer token RBAC allows `get` on /metrics.
    #[arg(long)]
    pub scheduler_token_file: Option<PathBuf>,
    /// For an https --scheduler-metrics: PEM CA certificate(s) to verify the
    /// scheduler with; without it any certificate is accepted (its
    /// self-signed one).
    #[arg(long)]
    pub scheduler_ca_file: Option<PathBuf>,
    /// Object creations (and null-scheduler bindings) in flight at once.
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// The scheduler's permitWaitingTimeSeconds, for Coscheduling and
    /// Volcano gangs whose scenario entry sets no timeout (decides when such
    /// a gang counts as timed out; Workload API and Kueue gangs: 5 minutes).
    #[arg(long)]
    pub gang_timeout_seconds: Option<u64>,
}

/// How often /metrics is scraped for the RSS peak.
const SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// Resolution of the pods-over-time series.
const SERIES_STEP: Duration = Duration::from_millis(100);

/// `muster load`.
pub async fn run(args: LoadArgs) -> Result<()> {
    let mut scenario = Scenario::load(&args.scenario)?;
    if args.bind_directly {
        scenario = null_variant(scenario);
    }
    if let Some(name) = &args.scheduler_name {
        scenario = for_scheduler(scenario, name)?;
    }
    let ceiling = match &args.ceiling {
        Some(path) => Some(read_ceiling(path)?),
        None => None,
    };
    let probes = Probes::new(&args)?;
    let client = muster_scheduler::kube::client::connect(
        args.kubeconfig.as_deref(),
        muster_scheduler::kube::client::LOAD_USER_AGENT,
    )
    .await?;
    client
        .apiserver_version()
        .await
        .context("the API server does not answer (check --kubeconfig)")?;
    std::fs::create_dir_all(&args.report_dir)
        .with_context(|| format!("creating {}", args.report_dir.display()))?;

    let started_at = chrono::Utc::now();
    let baseline = probes.read().await?;
    let (stop_sampling, sampler) = probes.sample_until_stopped();
    let binder = if args.bind_directly {
        let nodes = templates::expand(&scenario.nodes);
        Some(
            binder::start(
                &client,
                &scenario.name,
                &nodes,
                &scenario.resource_claim_templates,
                scenario.group_claim_templates(),
                args.concurrency,
            )
            .await?,
        )
    } else {
        None
    };
    let mut stderr = std::io::stderr();
    let mut progress = progress::for_stderr(scenario.pod_count() as usize, &mut stderr);
    let opts = RunOptions {
        gang: GangArgs {
            permit_waiting_time: args
                .gang_timeout_seconds
                .map_or(GangArgs::default().permit_waiting_time, Duration::from_secs),
            ..GangArgs::default()
        },
        concurrency: args.concurrency,
        progress: progress.as_mut(),
    };
    let finished = runner::run(&client, &scenario, opts).await?;
    drop(progress);
    let _ = stop_sampling.send(true);
    let samples = sampler.await.unwrap_or_default();
    let last = probes.read().await?;

    let mut report = build_report(&scenario, &args, &finished, started_at);
    probes.fill(&mut report, baseline, &samples, last);
    report.null_bind_failures = binder.as_ref().map(binder::NullBinder::failures);
    report.ceiling_ratio = match (&ceiling, &report.throughput_pods_per_sec) {
        (Some(c), Some(t)) if c.average > 0.0 => Some(t.average / c.average),
        _ => None,
    };
    report.ceiling = ceiling;
    write_report(
        &args.report_dir,
        &report,
        &stats::latencies(&finished.measured_pods),
    )?;
    print!("{}", report::headline(&report));
    println!("report: {}", args.report_dir.join("report.md").display());
    if !report.failures.is_empty() {
        bail!(
            "scenario {}: {} failure(s): {}",
            report.scenario,
            report.failures.len(),
            report.failures.join("; ")
        );
    }
    Ok(())
}

/// The scenario as the null scheduler runs it: its own scheduler name (so
/// no scheduler races the binder), its own object names, and no
/// expectations (the null scheduler binds every pod, fitting or not).
pub fn null_variant(mut scenario: Scenario) -> Scenario {
    scenario.name = format!("{}-null", scenario.name);
    scenario.scheduler_name = binder::NULL_SCHEDULER.into();
    for w in &mut scenario.workloads {
        let (prefix, expect) = match w {
            Workload::Gang(g) => (&mut g.name_prefix, &mut g.expect),
            Workload::Pods(p) => (&mut p.name_prefix, &mut p.expect),
        };
        *prefix = format!("null-{prefix}");
        *expect = None;
    }
    scenario
}

/// The scenario with its pods made for scheduler `name`.
pub fn for_scheduler(mut scenario: Scenario, name: &str) -> Result<Scenario> {
    if name.trim().is_empty() {
        bail!("--scheduler-name must not be empty");
    }
    scenario.scheduler_name = name.into();
    Ok(scenario)
}

fn read_ceiling(path: &Path) -> Result<Ceiling> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the ceiling report {}", path.display()))?;
    Ceiling::from_report(&text, &path.display().to_string()).map_err(anyhow::Error::msg)
}

/// The figures of a finished run (without process usage and ceiling).
pub fn build_report(
    scenario: &Scenario,
    args: &LoadArgs,
    finished: &Finished,
    started_at: chrono::DateTime<chrono::Utc>,
) -> LoadReport {
    let summary = &finished.summary;
    // Throughput and latency over the measured workloads' pods; the series
    // (the plots) shows every pod.
    let pods = &finished.measured_pods;
    let latencies = stats::latencies(pods);
    let gang_seconds = |f: fn(&crate::runner::GangReport) -> Option<Duration>| {
        let v: Vec<f64> = summary
            .gangs
            .iter()
            .filter_map(|g| f(g).map(|d| d.as_secs_f64()))
            .collect();
        stats::percentiles(&v)
    };
    let (gangs, pod_batches) = report::outcomes(summary);
    LoadReport {
        scenario: scenario.name.clone(),
        mode: if args.bind_directly {
            "bind-directly"
        } else {
            "scheduler"
        },
        started_at: started_at.to_rfc3339(),
        nodes: scenario.node_count(),
        pods_planned: summary.totals.pods_planned,
        pods_created: summary.totals.pods_created,
        pods_bound: summary.totals.pods_bound,
        pods_preempted: summary.totals.pods_preempted,
        pods_measured: pods.len(),
        measured_seconds: stats::measured_span(pods).map_or(0.0, |(a, b)| (b - a).as_secs_f64()),
        elapsed_seconds: summary.elapsed.as_secs_f64(),
        throughput_pods_per_sec: stats::throughput(pods),
        latency_seconds: stats::percentiles(&latencies),
        gang_quorum_to_bound_seconds: gang_seconds(|g| g.quorum_to_bound),
        gang_created_to_bound_seconds: gang_seconds(|g| g.created_to_bound),
        gangs_bound: summary.totals.gangs_bound,
        gangs_timed_out: summary.totals.gangs_timed_out,
        gangs_waiting: summary.totals.gangs_waiting,
        gangs,
        pod_batches,
        attempts_per_pod: None,
        informer_relists: None,
        scheduler_cpu_ms_per_pod: None,
        scheduler: None,
        load_generator: None,
        ceiling: None,
        ceiling_ratio: None,
        null_bind_failures: None,
        // The null scheduler ignores gangs: a partial gang is no violation.
        failures: if args.bind_directly {
            Vec::new()
        } else {
            crate::runner::summary::failures(summary)
        },
        series: stats::over_time(&finished.pods, SERIES_STEP),
    }
}

/// Writes report.json, report.md and the two plots into `dir`;
/// `latencies` are the per-pod creation→bound seconds for the CDF.
pub fn write_report(dir: &Path, report: &LoadReport, latencies: &[f64]) -> Result<()> {
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    };
    write("report.json", &serde_json::to_string_pretty(report)?)?;
    write("report.md", &report::markdown(report))?;
    let title = format!("{} ({}): pods over time", report.scenario, report.mode);
    write(
        "pods-over-time.svg",
        &plots::pods_over_time(&report.series, &title)?,
    )?;
    let gang_times: Vec<f64> = report
        .gangs
        .iter()
        .filter_map(|g| g.quorum_to_bound_seconds)
        .collect();
    write(
        "latency-cdf.svg",
        &plots::cdf(
            &format!("{}: latency CDF", report.scenario),
            "seconds",
            &[
                ("pod creation→bound", latencies),
                ("gang quorum→all bound", &gang_times),
            ],
        )?,
    )
}

/// The scheduler's and the load generator's resource readings.
struct Probes {
    /// RSS and CPU: /proc when a PID is given, else /metrics.
    usage: Option<Source>,
    /// Attempts: the scheduler's /metrics.
    metrics: Option<Source>,
    own: Source,
}

impl Probes {
    fn new(args: &LoadArgs) -> Result<Probes> {
        let access = probe::Access {
            token_file: args.scheduler_token_file.clone(),
            ca_file: args.scheduler_ca_file.clone(),
        };
        let metrics = args
            .scheduler_metrics
            .as_deref()
            .map(|url| Source::metrics_with(url, &access))
            .transpose()?;
        let usage = match args.scheduler_pid {
            Some(pid) => Some(Source::Proc(pid)),
            None => metrics.clone(),
        };
        Ok(Probes {
            usage,
            metrics,
            own: Source::Proc(std::process::id()),
        })
    }

    /// Scheduler usage, its /metrics counters, own usage.
    async fn read(&self) -> Result<Snapshot> {
        let scheduler = match &self.usage {
            Some(s) => Some(s.read().await.context("reading the scheduler's usage")?),
            None => None,
        };
        // When usage already came from /metrics, its scrape has the counters.
        let scraped = match (&self.usage, &self.metrics) {
            (Some(Source::Metrics(..)), _) => scheduler,
            (_, Some(s)) => Some(s.read().await.context("reading the scheduler's metrics")?),
            (_, None) => None,
        };
        Ok(Snapshot {
            scheduler,
            scraped,
            own: self.own.read().await.ok(),
        })
    }

    /// Samples the scheduler's /metrics RSS every second until told to
    /// stop (/proc needs no sampling: VmHWM is the peak).
    fn sample_until_stopped(&self) -> (watch::Sender<bool>, tokio::task::JoinHandle<Vec<Reading>>) {
        let (tx, mut rx) = watch::channel(false);
        let source = self
            .usage
            .clone()
            .filter(|s| matches!(s, Source::Metrics(..)));
        let task = tokio::spawn(async move {
            let mut samples = Vec::new();
            let Some(source) = source else {
                return samples;
            };
            let mut tick = tokio::time::interval(SAMPLE_EVERY);
            loop {
                tokio::select! {
                    _ = tick.tick() => match source.read().await {
                        Ok(r) => samples.push(r),
                        Err(e) => tracing::warn!(error = %format!("{e:#}"), "scraping the scheduler failed"),
                    },
                    _ = rx.changed() => return samples,
                }
            }
        });
        (tx, task)
    }

    fn fill(&self, report: &mut LoadReport, first: Snapshot, samples: &[Reading], last: Snapshot) {
        if let (Some(source), Some(a), Some(b)) = (&self.usage, first.scheduler, last.scheduler) {
            let mut all = samples.to_vec();
            all.push(b);
            let usage = probe::usage(source, a, &all);
            report.scheduler_cpu_ms_per_pod = cpu_ms_per_pod(usage.cpu_seconds, report.pods_bound);
            report.scheduler = Some(usage);
        }
        if let (Some(a), Some(b)) = (first.own, last.own) {
            report.load_generator = Some(probe::usage(&self.own, a, &[b]));
        }
        let counter = |read: fn(&Reading) -> Option<f64>| {
            let (a, b) = (first.scraped.as_ref()?, last.scraped.as_ref()?);
            Some(read(b)? - read(a)?)
        };
        if let Some(attempts) = counter(|r| r.attempts)
            && report.pods_bound > 0
        {
            report.attempts_per_pod = Some(attempts / report.pods_bound as f64);
        }
        report.informer_relists = counter(|r| r.relists);
    }
}

/// CPU milliseconds per pod bound; none when nothing was bound.
fn cpu_ms_per_pod(cpu_seconds: f64, pods_bound: usize) -> Option<f64> {
    (pods_bound > 0).then(|| cpu_seconds * 1000.0 / pods_bound as f64)
}

/// One reading of everything probed.
#[derive(Debug, Clone, Copy)]
struct Snapshot {
    scheduler: Option<Reading>,
    /// The scheduler's /metrics (attempts, re-lists), when it is scraped.
    scraped: Option<Reading>,
    own: Option<Reading>,
}

#[cfg(test)]
mod tests {
    use super::{cpu_ms_per_pod, for_scheduler};
    use crate::scenario::Scenario;

    #[test]
    fn scheduler_name_replaces_the_scenarios_in_every_pod() {
        let scenario = Scenario::parse(
            "name: s\nnodes: [{namePrefix: n, count: 1, capacity: {cpu: 1, memory: 1Gi, pods: 10}}]\n\
             workloads: [{pods: {namePrefix: p, count: 2, requests: {cpu: 100m}}}]\n",
            "s.yaml",
        )
        .expect("scenario");
        let scenario = for_scheduler(scenario, "default-scheduler").expect("renamed");
        let plan = scenario.plan();
        let pods = plan.workloads[0].pods();
        assert_eq!(pods.len(), 2);
        for pod in pods {
            assert_eq!(pod.object["spec"]["schedulerName"], "default-scheduler");
        }
        assert!(for_scheduler(scenario, " ").is_err());
    }

    #[test]
    fn cpu_per_pod_is_milliseconds_per_pod_bound_and_absent_without_pods() {
        assert_eq!(cpu_ms_per_pod(3.0, 20_000), Some(0.15));
        assert_eq!(cpu_ms_per_pod(3.0, 0), None);
    }
}
