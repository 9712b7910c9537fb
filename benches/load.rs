//! End-to-end load benchmark (not a timed test): for each scenario, the
//! harness ceiling and then Muster, each on a fresh `muster cluster`
//! child process:
//!
//! 1. `muster load --bind-directly` against a cluster with no scheduler
//!    (the null scheduler: the most this machine's harness can bind);
//! 2. `muster run` as a separate process against a second cluster, and
//!    `muster load --ceiling <1> --scheduler-pid --scheduler-metrics`;
//!
//! then prints a table of the headline figures. Reports (JSON, Markdown,
//! SVG) land in `target/load-reports/<scenario>/` (the ceiling in
//! `.../ceiling/`).
//!
//! `make bench` (after the criterion benches) or `cargo bench --bench load`.
//! Env: LOAD_SCENARIOS (comma-separated names from config/scenarios/,
//! default perf-gangs-5k,perf-plain-5k,perf-large-gang-5k,perf-tas-rack-5k,
//! perf-tas-preferred-5k), LOAD_CONFIG
//! (scheduler configuration, default config/muster.yaml with leader
//! election off), LOAD_NO_CEILING=1 (skip step 1).

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::Value;

const MUSTER: &str = env!("CARGO_BIN_EXE_muster");
const DEFAULT_SCENARIOS: &str =
    "perf-gangs-5k,perf-plain-5k,perf-large-gang-5k,perf-tas-rack-5k,perf-tas-preferred-5k";

/// A child process killed (SIGTERM, then waited for) when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

/// `muster cluster` with no nodes (scenarios create theirs), its kubeconfig
/// written into `dir`.
fn cluster(dir: &Path, name: &str) -> Result<(Proc, PathBuf)> {
    let kubeconfig = dir.join(format!("{name}.kubeconfig"));
    let mut child = Command::new(MUSTER)
        .args(["cluster", "--listen", "127.0.0.1:0", "--kubeconfig-out"])
        .arg(&kubeconfig)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .context("starting muster cluster")?;
    let stdout = child.stdout.take().context("cluster stdout")?;
    let mut url = String::new();
    BufReader::new(stdout)
        .read_line(&mut url)
        .context("reading the cluster URL")?;
    if url.trim().is_empty() {
        bail!("muster cluster exited before printing its URL");
    }
    Ok((Proc(child), kubeconfig))
}

/// `muster run` as a separate process; returns it and its metrics URL once
/// /readyz answers 200.
fn scheduler(kubeconfig: &Path, config: &Path) -> Result<(Proc, String)> {
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let addr = format!("127.0.0.1:{port}");
    let child = Command::new(MUSTER)
        .args(["run", "--kubeconfig"])
        .arg(kubeconfig)
        .arg("--config")
        .arg(config)
        .args(["--http-addr", &addr])
        // A loopback port on this machine: plain HTTP that the scraper and
        // the readiness check below read without a token.
        .arg("--insecure-serving")
        .env("RUST_LOG", "warn")
        .spawn()
        .context("starting muster run")?;
    let proc = Proc(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready(&addr) {
        if Instant::now() > deadline {
            bail!("muster run was not ready within 30s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok((proc, format!("http://{addr}/metrics")))
}

/// One GET /readyz over a plain socket.
fn ready(addr: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return false;
    };
    let request = format!("GET /readyz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let mut response = String::new();
    s.write_all(request.as_bytes()).is_ok()
        && s.read_to_string(&mut response).is_ok()
        && response.starts_with("HTTP/1.1 200")
}

fn load(args: &[&str]) -> Result<()> {
    let status = Command::new(MUSTER)
        .arg("load")
        .args(args)
        .status()
        .context("running muster load")?;
    if !status.success() {
        bail!("muster load {args:?} failed ({status})");
    }
    Ok(())
}

/// The scheduler configuration: `LOAD_CONFIG`, or config/muster.yaml with
/// leader election off (one replica; nothing to elect).
fn scheduler_config(dir: &Path) -> Result<PathBuf> {
    if let Ok(path) = std::env::var("LOAD_CONFIG") {
        return Ok(PathBuf::from(path));
    }
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/muster.yaml");
    let text = std::fs::read_to_string(&shipped)?;
    let text = text.replace("leaderElect: true", "leaderElect: false");
    let path = dir.join("muster.yaml");
    std::fs::write(&path, text)?;
    Ok(path)
}

fn run_scenario(name: &str, work: &Path, out: &Path, config: &Path) -> Result<Value> {
    let scenario =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("config/scenarios/{name}.yaml"));
    let scenario = scenario.display().to_string();
    let report_dir = out.join(name);
    let ceiling_dir = report_dir.join("ceiling");
    let ceiling_report = ceiling_dir.join("report.json");
    if std::env::var("LOAD_NO_CEILING").is_err() {
        println!("\n== {name}: ceiling (null scheduler, no scheduler running)");
        let (_cluster, kubeconfig) = cluster(work, &format!("{name}-ceiling"))?;
        load(&[
            "--kubeconfig",
            &kubeconfig.display().to_string(),
            "--scenario",
            &scenario,
            "--report-dir",
            &ceiling_dir.display().to_string(),
            "--bind-directly",
        ])?;
    }
    println!("\n== {name}: muster run as a separate process");
    let (_cluster, kubeconfig) = cluster(work, name)?;
    let (sched, metrics) = scheduler(&kubeconfig, config)?;
    let pid = sched.0.id().to_string();
    let mut args = vec![
        "--kubeconfig".to_string(),
        kubeconfig.display().to_string(),
        "--scenario".into(),
        scenario,
        "--report-dir".into(),
        report_dir.display().to_string(),
        "--scheduler-pid".into(),
        pid,
        "--scheduler-metrics".into(),
        metrics,
    ];
    if ceiling_report.exists() {
        args.extend(["--ceiling".into(), ceiling_report.display().to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = load(&args);
    drop(sched);
    result?;
    let text = std::fs::read_to_string(report_dir.join("report.json"))?;
    Ok(serde_json::from_str(&text)?)
}

fn main() -> Result<()> {
    // `cargo bench` passes --bench; nothing else to parse.
    let scenarios = std::env::var("LOAD_SCENARIOS").unwrap_or_else(|_| DEFAULT_SCENARIOS.into());
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/load-reports");
    let work = tempfile::tempdir()?;
    let config = scheduler_config(work.path())?;
    let mut rows = Vec::new();
    for name in scenarios
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let report = run_scenario(name, work.path(), &out, &config)
            .with_context(|| format!("scenario {name}"))?;
        rows.push((name.to_string(), report));
    }
    println!("\n== headline figures (reports in {})", out.display());
    println!(
        "{:<22} {:>9} {:>9} {:>9} {:>8} {:>10} {:>12} {:>10} {:>8} {:>8} {:>9} {:>9} {:>8}",
        "scenario",
        "pods/s",
        "p50",
        "p99",
        "ceiling",
        "p99 lat s",
        "gang last→all",
        "sched MiB",
        "CPU s",
        "CPU ms/pod",
        "att/pod",
        "timed out",
        "re-lists"
    );
    for (name, r) in rows {
        let t = &r["throughput_pods_per_sec"];
        let f = |v: &Value| v.as_f64().map_or("-".into(), |x| format!("{x:.0}"));
        println!(
            "{:<22} {:>9} {:>9} {:>9} {:>8} {:>10} {:>12} {:>10} {:>8} {:>8} {:>9} {:>9} {:>8}",
            name,
            f(&t["average"]),
            f(&t["p50"]),
            f(&t["p99"]),
            r["ceiling_ratio"]
                .as_f64()
                .map_or("-".into(), |x| format!("{:.0}%", x * 100.0)),
            r["latency_seconds"]["p99"]
                .as_f64()
                .map_or("-".into(), |x| format!("{x:.3}")),
            r["gang_created_to_bound_seconds"]["max"]
                .as_f64()
                .map_or("-".into(), |x| format!("{x:.3}")),
            r["scheduler"]["peak_rss_bytes"]
                .as_f64()
                .map_or("-".into(), |x| format!("{:.0}", x / 1048576.0)),
            r["scheduler"]["cpu_seconds"]
                .as_f64()
                .map_or("-".into(), |x| format!("{x:.1}")),
            r["scheduler_cpu_ms_per_pod"]
                .as_f64()
                .map_or("-".into(), |x| format!("{x:.3}")),
            r["attempts_per_pod"]
                .as_f64()
                .map_or("-".into(), |x| format!("{x:.2}")),
            r["gangs_timed_out"]
                .as_u64()
                .map_or("-".into(), |x| x.to_string()),
            f(&r["informer_relists"]),
        );
    }
    Ok(())
}
