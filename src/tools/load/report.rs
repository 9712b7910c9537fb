//! The load report: one serde structure written as `report.json`
//! (machine-readable; field reference in `docs/load-testing.md`) and
//! rendered as the `report.md` table and the headline lines printed at the
//! end of a run.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::probe::Usage;
use super::stats::{Percentiles, Throughput};
use crate::runner::Summary;

/// Everything `muster load` measured in one run.
#[derive(Debug, Clone, Serialize)]
pub struct LoadReport {
    pub scenario: String,
    /// `scheduler` (pods bound by the cluster's scheduler) or
    /// `bind-directly` (the null scheduler: the harness ceiling).
    pub mode: &'static str,
    /// RFC 3339 time the run started.
    pub started_at: String,
    pub nodes: usize,
    pub pods_planned: usize,
    pub pods_created: usize,
    pub pods_bound: usize,
    /// Pods deleted after they were bound (counted in `pods_bound`).
    pub pods_preempted: usize,
    /// Pods throughput and latency are computed on: those of the workloads
    /// marked `measured`, or every pod when none is.
    pub pods_measured: usize,
    /// From the first measured pod created to the last bound.
    pub measured_seconds: f64,
    /// Whole run, including creating nodes and waiting for gang timeouts.
    pub elapsed_seconds: f64,
    pub throughput_pods_per_sec: Option<Throughput>,
    /// Per pod, creation (first seen through the API) to bound.
    pub latency_seconds: Option<Percentiles>,
    /// Per gang, quorum observed to the last member bound.
    pub gang_quorum_to_bound_seconds: Option<Percentiles>,
    /// Per gang, last member created to the last member bound.
    pub gang_created_to_bound_seconds: Option<Percentiles>,
    pub gangs_bound: usize,
    pub gangs_timed_out: usize,
    pub gangs_waiting: usize,
    pub gangs: Vec<GangOutcome>,
    pub pod_batches: Vec<BatchOutcome>,
    /// The scheduler's attempts divided by pods bound (needs its /metrics).
    pub attempts_per_pod: Option<f64>,
    /// The scheduler's informers' full re-lists during the run
    /// (`muster_informer_relists_total`; needs its /metrics).
    #[serde(default)]
    pub informer_relists: Option<f64>,
    /// The scheduler's CPU time over the run divided by pods bound, in
    /// milliseconds (the per-pod cost, independent of how busy the
    /// shared machine was).
    pub scheduler_cpu_ms_per_pod: Option<f64>,
    pub scheduler: Option<Usage>,
    pub load_generator: Option<Usage>,
    /// The null-scheduler throughput this run is compared with.
    pub ceiling: Option<Ceiling>,
    /// `throughput_pods_per_sec.average / ceiling.average`.
    pub ceiling_ratio: Option<f64>,
    /// Bindings the null scheduler gave up on (bind-directly mode).
    pub null_bind_failures: Option<u64>,
    /// Partially bound gangs and unmet scenario expectations; empty = pass.
    pub failures: Vec<String>,
    /// `(seconds, created, bound)` every 100 ms, for the plots.
    pub series: Vec<(f64, usize, usize)>,
}

/// One gang's end.
#[derive(Debug, Clone, Serialize)]
pub struct GangOutcome {
    pub namespace: String,
    pub name: String,
    pub members: usize,
    pub bound: usize,
    pub min_count: u32,
    pub preempted: usize,
    /// `bound`, `timedOut`, `waiting` or `preempted`.
    pub outcome: String,
    pub quorum_to_bound_seconds: Option<f64>,
    pub created_to_bound_seconds: Option<f64>,
}

/// One workload of plain pods at the end.
#[derive(Debug, Clone, Serialize)]
pub struct BatchOutcome {
    pub namespace: String,
    pub name_prefix: String,
    pub count: usize,
    pub bound: usize,
    pub preempted: usize,
    pub outcome: String,
}

/// The ceiling a run is compared with, from a `--bind-directly` report.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Ceiling {
    /// The report it was read from.
    pub source: String,
    pub average: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
}

/// The part of a `report.json` a later run reads its ceiling from.
#[derive(Deserialize)]
struct CeilingSource {
    mode: String,
    throughput_pods_per_sec: Option<ThroughputFigures>,
}

#[derive(Deserialize)]
struct ThroughputFigures {
    average: f64,
    p50: f64,
    p90: f64,
    p99: f64,
}

impl Ceiling {
    /// Reads the throughput of a `--bind-directly` run's `report.json`.
    pub fn from_report(text: &str, source: &str) -> Result<Ceiling, String> {
        let r: CeilingSource =
            serde_json::from_str(text).map_err(|e| format!("{source}: not a load report: {e}"))?;
        if r.mode != "bind-directly" {
            return Err(format!(
                "{source}: a ceiling comes from a --bind-directly run, this report's mode is {:?}",
                r.mode
            ));
        }
        let t = r
            .throughput_pods_per_sec
            .ok_or_else(|| format!("{source}: the ceiling run bound no pods"))?;
        Ok(Ceiling {
            source: source.to_string(),
            average: t.average,
            p50: t.p50,
            p90: t.p90,
            p99: t.p99,
        })
    }
}

/// The per-gang and per-batch outcomes of a summary.
pub fn outcomes(s: &Summary) -> (Vec<GangOutcome>, Vec<BatchOutcome>) {
    let gangs = s
        .gangs
        .iter()
        .map(|g| GangOutcome {
            namespace: g.namespace.clone(),
            name: g.name.clone(),
            members: g.members,
            bound: g.bound,
            min_count: g.min_count,
            preempted: g.preempted,
            outcome: outcome_name(g.outcome),
            quorum_to_bound_seconds: g.quorum_to_bound.map(|d| d.as_secs_f64()),
            created_to_bound_seconds: g.created_to_bound.map(|d| d.as_secs_f64()),
        })
        .collect();
    let batches = s
        .pods
        .iter()
        .map(|p| BatchOutcome {
            namespace: p.namespace.clone(),
            name_prefix: p.name_prefix.clone(),
            count: p.count,
            bound: p.bound,
            preempted: p.preempted,
            outcome: outcome_name(p.outcome),
        })
        .collect();
    (gangs, batches)
}

fn outcome_name(o: crate::scenario::Outcome) -> String {
    match o {
        crate::scenario::Outcome::Bound => "bound",
        crate::scenario::Outcome::TimedOut => "timedOut",
        crate::scenario::Outcome::Waiting => "waiting",
        crate::scenario::Outcome::Preempted => "preempted",
        crate::scenario::Outcome::BoundOrPreempted => "boundOrPreempted",
    }
    .into()
}

/// The headline: a few lines for the terminal.
pub fn headline(r: &LoadReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} ({}): {}/{} pods bound on {} nodes in {:.2}s",
        r.scenario, r.mode, r.pods_bound, r.pods_planned, r.nodes, r.measured_seconds
    );
    let _ = write!(out, "{}", measured_and_preempted(r));
    if let Some(t) = &r.throughput_pods_per_sec {
        let _ = writeln!(
            out,
            "  throughput pods/s: average {:.0}, p50 {:.0}, p90 {:.0}, p99 {:.0}{}",
            t.average,
            t.p50,
            t.p90,
            t.p99,
            r.ceiling_ratio
                .map(|x| format!(" ({:.0}% of the ceiling)", x * 100.0))
                .unwrap_or_default()
        );
    }
    if let Some(l) = &r.latency_seconds {
        let _ = writeln!(
            out,
            "  creation→bound s: p50 {:.3}, p90 {:.3}, p99 {:.3}",
            l.p50, l.p90, l.p99
        );
    }
    if let Some(g) = &r.gang_created_to_bound_seconds {
        let _ = writeln!(
            out,
            "  gangs: {} bound, {} timed out, {} waiting; last member created→all bound s: p50 {:.3}, p99 {:.3}, max {:.3}",
            r.gangs_bound, r.gangs_timed_out, r.gangs_waiting, g.p50, g.p99, g.max
        );
    }
    if let Some(s) = &r.scheduler {
        let _ = writeln!(
            out,
            "  scheduler: peak RSS {:.0} MiB, {:.1} CPU s ({}){}{}{}",
            s.peak_rss_bytes as f64 / (1 << 20) as f64,
            s.cpu_seconds,
            s.source,
            r.scheduler_cpu_ms_per_pod
                .map(|c| format!(", {c:.3} CPU ms/pod"))
                .unwrap_or_default(),
            r.attempts_per_pod
                .map(|a| format!(", {a:.2} attempts/pod"))
                .unwrap_or_default(),
            r.informer_relists
                .map(|n| format!(", {n:.0} informer re-lists"))
                .unwrap_or_default()
        );
    }
    for f in &r.failures {
        let _ = writeln!(out, "  FAILED: {f}");
    }
    out
}

/// What the figures are over, and how many pods were preempted: a line each,
/// only when the scenario measures part of its pods or preemption happened.
fn measured_and_preempted(r: &LoadReport) -> String {
    let mut out = String::new();
    if r.pods_measured < r.pods_planned {
        let _ = writeln!(
            out,
            "  throughput and latency over the {} pods of the measured workloads",
            r.pods_measured
        );
    }
    if r.pods_preempted > 0 {
        let _ = writeln!(
            out,
            "  {} pods preempted after binding (counted as bound)",
            r.pods_preempted
        );
    }
    out
}

/// `report.md`.
pub fn markdown(r: &LoadReport) -> String {
    let mut out = format!("# Load report: {} ({})\n\n", r.scenario, r.mode);
    let _ = writeln!(
        out,
        "Started {}; {} nodes; {} of {} pods created, {} bound; measured over {:.2} s (first pod created to last bound), run {:.2} s.\n",
        r.started_at,
        r.nodes,
        r.pods_created,
        r.pods_planned,
        r.pods_bound,
        r.measured_seconds,
        r.elapsed_seconds
    );
    let notes = measured_and_preempted(r);
    for line in notes.lines() {
        let _ = writeln!(out, "{}.\n", line.trim());
    }
    out.push_str("| figure | average | p50 | p90 | p99 | max |\n|---|---|---|---|---|---|\n");
    if let Some(t) = &r.throughput_pods_per_sec {
        let _ = writeln!(
            out,
            "| throughput, pods/s (1 s windows) | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
            t.average, t.p50, t.p90, t.p99, t.max
        );
        if let Some(c) = &r.ceiling {
            let _ = writeln!(
                out,
                "| … as a share of the ceiling | {} | {} | {} | {} | |",
                share(t.average, c.average),
                share(t.p50, c.p50),
                share(t.p90, c.p90),
                share(t.p99, c.p99)
            );
        }
    }
    let rows = [
        ("pod creation→bound, s", &r.latency_seconds),
        ("gang quorum→all bound, s", &r.gang_quorum_to_bound_seconds),
        (
            "gang last created→all bound, s",
            &r.gang_created_to_bound_seconds,
        ),
    ];
    for (name, p) in rows {
        if let Some(p) = p {
            let _ = writeln!(
                out,
                "| {name} | | {:.3} | {:.3} | {:.3} | {:.3} |",
                p.p50, p.p90, p.p99, p.max
            );
        }
    }
    out.push('\n');
    if let Some(c) = &r.ceiling {
        let _ = writeln!(
            out,
            "Ceiling: {:.0} pods/s average from `{}` (null scheduler, same machine).\n",
            c.average, c.source
        );
    }
    let _ = writeln!(
        out,
        "Gangs: {} bound, {} timed out, {} waiting.{}\n",
        r.gangs_bound,
        r.gangs_timed_out,
        r.gangs_waiting,
        r.attempts_per_pod
            .map(|a| format!(" Scheduling attempts per pod bound: {a:.2}."))
            .unwrap_or_default()
    );
    if let Some(c) = r.scheduler_cpu_ms_per_pod {
        let _ = writeln!(out, "Scheduler CPU per pod bound: {c:.3} ms.\n");
    }
    if let Some(n) = r.informer_relists {
        let _ = writeln!(
            out,
            "Informer re-lists during the run: {n:.0} (`muster_informer_relists_total`).\n"
        );
    }
    out.push_str("| process | peak RSS, MiB | CPU s | source |\n|---|---|---|---|\n");
    for (name, usage) in [
        ("scheduler", &r.scheduler),
        ("load generator", &r.load_generator),
    ] {
        if let Some(u) = usage {
            let _ = writeln!(
                out,
                "| {name} | {:.0} | {:.1} | {} |",
                u.peak_rss_bytes as f64 / (1 << 20) as f64,
                u.cpu_seconds,
                u.source
            );
        }
    }
    out.push_str("\n![pods over time](pods-over-time.svg)\n\n![latency CDF](latency-cdf.svg)\n\n");
    let unfinished: Vec<&GangOutcome> = r
        .gangs
        .iter()
        .filter(|g| g.outcome != "bound" && g.outcome != "preempted")
        .collect();
    if !unfinished.is_empty() {
        out.push_str("Gangs not bound:\n\n| gang | members | bound | min | outcome |\n|---|---|---|---|---|\n");
        for g in unfinished.iter().take(50) {
            let _ = writeln!(
                out,
                "| {}/{} | {} | {} | {} | {} |",
                g.namespace, g.name, g.members, g.bound, g.min_count, g.outcome
            );
        }
        if unfinished.len() > 50 {
            let _ = writeln!(
                out,
                "\n… and {} more (report.json has all).",
                unfinished.len() - 50
            );
        }
        out.push('\n');
    }
    if r.failures.is_empty() {
        out.push_str("Result: every expectation held.\n");
    } else {
        out.push_str("Result: FAILED\n\n");
        for f in &r.failures {
            let _ = writeln!(out, "- {f}");
        }
    }
    out
}

fn share(value: f64, ceiling: f64) -> String {
    if ceiling > 0.0 {
        format!("{:.0}%", value / ceiling * 100.0)
    } else {
        "-".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ceiling_comes_only_from_a_bind_directly_report() {
        let ok = r#"{"mode":"bind-directly","throughput_pods_per_sec":{"average":4000.0,"p50":4100.0,"p90":4500.0,"p99":4600.0,"max":4700.0,"windows":[]}}"#;
        let c = Ceiling::from_report(ok, "c.json").unwrap();
        assert_eq!((c.average, c.p99), (4000.0, 4600.0));
        let e =
            Ceiling::from_report(&ok.replace("bind-directly", "scheduler"), "c.json").unwrap_err();
        assert!(e.contains("mode is \"scheduler\""), "{e}");
        let e = Ceiling::from_report(
            r#"{"mode":"bind-directly","throughput_pods_per_sec":null}"#,
            "c.json",
        )
        .unwrap_err();
        assert!(e.contains("bound no pods"), "{e}");
        assert!(
            Ceiling::from_report("{", "c.json")
                .unwrap_err()
                .starts_with("c.json: not a load report")
        );
    }
}
