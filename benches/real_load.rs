//! Head to head with kube-scheduler on a real API server (a benchmark, not
//! a timed test). For each scenario (`config/scenarios/real-*.yaml`), three
//! runs, each on a fresh control plane of the pinned upstream components
//! (tests/real_cluster: etcd, kube-apiserver 1.37, kube-controller-manager
//! and kwok on loopback; the scenario's nodes are kwok fake nodes):
//!
//! 1. `ceiling`: `muster load --bind-directly`, no scheduler running (the
//!    null scheduler: what this harness binds through the real API server
//!    with scheduling cost zero);
//! 2. `kube-scheduler`: upstream kube-scheduler 1.37 with the Workload API
//!    gates on (gang scheduling of `scheduling.k8s.io/v1beta1` PodGroups,
//!    topology-aware workload scheduling, DRA), the scenario's pods made for
//!    `default-scheduler` (`muster load --scheduler-name`), measured through
//!    /proc and its secure /metrics (the admin's token);
//! 3. `muster`: `muster run` as a separate process.
//!
//! After a kube-scheduler run of a gang shape the bench checks that
//! kube-scheduler did gang scheduling: its PodGroup scheduling cycles
//! (`scheduler_podgroup_schedule_attempts_total`) and the PodGroups it
//! marked `PodGroupInitiallyScheduled`. For scenarios whose nodes declare
//! devices it publishes each node's ResourceSlice first (a DRA driver's job;
//! on `muster cluster` the simulated driver does it). It prints a table at
//! the end and writes it as `summary.md` beside the reports, in
//! `target/load-reports/real/<scenario>/<scheduler>/`.
//!
//! `make bench-real` or `cargo bench --bench real_load`. Env:
//! REAL_LOAD_SCENARIOS (comma-separated names from config/scenarios/,
//! default every real-* shape), REAL_LOAD_SCHEDULERS (a subset of
//! `ceiling,kube-scheduler,muster`), LOAD_CONFIG (Muster's configuration,
//! default config/muster.yaml with leader election off),
//! REAL_LOAD_PERF=1 (`perf record` of `muster run` into the report
//! directory), REAL_LOAD_PPROF=SECONDS (a CPU profile of kube-scheduler from
//! its /debug/pprof/profile, started with the run).

#[allow(unused_imports)]
#[path = "../tests/common/mod.rs"]
mod common;
#[allow(unused_imports)]
#[path = "../tests/e2e/mod.rs"]
mod e2e;
#[allow(unused_imports)]
#[path = "../tests/real_cluster/mod.rs"]
mod real_cluster;

use std::fmt::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};

use real_cluster::{Options, RealCluster};

const MUSTER: &str = env!("CARGO_BIN_EXE_muster");
const DEFAULT_SCENARIOS: &str =
    "real-plain-1k,real-gangs-1k,real-large-gang-1k,real-dra-1k,real-tas-rack-1k";
const SCHEDULERS: [&str; 3] = ["ceiling", "kube-scheduler", "muster"];

/// The client rate limit of kube-scheduler and kube-controller-manager.
/// kube-scheduler's default (qps 50, burst 100) would cap it at about 50
/// bindings a second; scheduler-perf runs it at 5,000, and Muster's client
/// has no limit unless configured.
const KUBE_CLIENT_QPS: u32 = 5000;

/// A child process stopped (SIGTERM, then waited for) when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        signal(self.0.id(), "TERM");
        let _ = self.0.wait();
    }
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status();
}

/// User plus system CPU seconds of a process so far (/proc/<pid>/stat).
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// One GET over plain HTTP on loopback; true on status 200.
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

/// `muster run` against the cluster, serving plain HTTP on loopback; returns
/// it and its metrics URL once /readyz answers 200.
fn muster_run(kubeconfig: &Path, config: &Path) -> Result<(Proc, String)> {
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let addr = format!("127.0.0.1:{port}");
    let child = Command::new(MUSTER)
        .args(["run", "--kubeconfig"])
        .arg(kubeconfig)
        .arg("--config")
        .arg(config)
        .args(["--http-addr", &addr, "--insecure-serving"])
        .env("RUST_LOG", "warn")
        .spawn()
        .context("starting muster run")?;
    let proc = Proc(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready(&addr) {
        if Instant::now() > deadline {
            bail!("muster run was not ready within 60s");
        }
        // Readiness has no event stream; poll a few times a second.
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok((proc, format!("http://{addr}/metrics")))
}

/// Muster's configuration: `LOAD_CONFIG`, or config/muster.yaml with
/// leader election off (one replica).
fn muster_config(dir: &Path) -> Result<PathBuf> {
    if let Ok(path) = std::env::var("LOAD_CONFIG") {
        return Ok(PathBuf::from(path));
    }
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/muster.yaml");
    let text = std::fs::read_to_string(&shipped)?;
    let path = dir.join("muster.yaml");
    std::fs::write(
        &path,
        text.replace("leaderElect: true", "leaderElect: false"),
    )?;
    Ok(path)
}

/// `muster load` with `args`; its exit status (a partially bound gang or an
/// unmet expectation exits 1 after writing the report, which the table shows).
fn load(args: &[String]) -> Result<bool> {
    println!("$ muster load {}", args.join(" "));
    let status = Command::new(MUSTER)
        .arg("load")
        .args(args)
        .status()
        .context("running muster load")?;
    Ok(status.success())
}

/// Publishes the ResourceSlice of every node of the scenario that declares
/// devices, as a DRA driver would (the nodes themselves are made by
/// `muster load`; a slice names its node and needs no Node object first).
async fn publish_slices(client: &kube::Client, scenario: &Path) -> Result<usize> {
    use muster::kwok::devices;
    let scenario = muster::scenario::Scenario::load(scenario)?;
    let api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &real_cluster::resource("resource.k8s.io", "v1", "ResourceSlice", "resourceslices"),
    );
    let mut made = 0;
    for node in muster::kwok::templates::expand(&scenario.nodes) {
        let Some(t) = devices::of_node(&node) else {
            continue;
        };
        if t.multi_node.is_some() {
            bail!("multi-node devices are not published by this bench");
        }
        let name = node["metadata"]["name"].as_str().unwrap_or_default();
        let (slice, spec) = devices::node_slice(name, &node, &t);
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": slice}, "spec": spec,
        }))?;
        api.create(&PostParams::default(), &obj)
            .await
            .with_context(|| format!("creating ResourceSlice {slice}"))?;
        made += 1;
    }
    Ok(made)
}

/// The sum of every sample of metric `name` in Prometheus text.
fn metric_sum(text: &str, name: &str) -> Option<f64> {
    let mut found = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let series = line.split([' ', '{']).next().unwrap_or_default();
        if series == name
            && let Some(v) = line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok())
        {
            *found.get_or_insert(0.0) += v;
        }
    }
    found
}

/// A scheduler's /metrics (curl: kube-scheduler's is a chunked HTTPS
/// answer, read whole), with the token in `token_file` when given.
fn scrape(url: &str, token_file: Option<&Path>) -> Result<String> {
    let mut curl = Command::new("curl");
    curl.args(["-sSk", "--max-time", "20"]);
    if let Some(file) = token_file {
        let token = std::fs::read_to_string(file)?;
        curl.arg("-H")
            .arg(format!("Authorization: Bearer {}", token.trim()));
    }
    let out = curl
        .arg(url)
        .output()
        .context("running curl (install curl)")?;
    if !out.status.success() {
        bail!("curl {url}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// PodGroups of the scenario, and how many carry
/// `PodGroupInitiallyScheduled=True`.
async fn podgroups_scheduled(client: &kube::Client, scenario: &str) -> Result<(usize, usize)> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &e2e::podgroup_resource());
    let list = api
        .list(&ListParams::default().labels(&format!("muster.dev/scenario={scenario}")))
        .await?;
    let scheduled = list
        .items
        .iter()
        .filter(|g| {
            g.data["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "PodGroupInitiallyScheduled" && c["status"] == "True")
            })
        })
        .count();
    Ok((list.items.len(), scheduled))
}

/// What one run of one scheduler measured.
struct Row {
    scenario: String,
    scheduler: &'static str,
    report: Value,
    /// kube-scheduler's PodGroup scheduling cycles during the run.
    podgroup_cycles: Option<f64>,
    /// PodGroups of the scenario, and those marked scheduled.
    podgroups: Option<(usize, usize)>,
    apiserver_cpu_seconds: Option<f64>,
    passed: bool,
}

struct Bench {
    rt: tokio::runtime::Runtime,
    out: PathBuf,
    work: tempfile::TempDir,
    muster_config: PathBuf,
}

impl Bench {
    fn run(&self, name: &str, scheduler: &'static str) -> Result<Row> {
        let scenario_path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("config/scenarios/{name}.yaml"));
        let scenario_name = muster::scenario::Scenario::load(&scenario_path)?.name;
        let report_dir = self.out.join(name).join(scheduler);
        let ceiling = self.out.join(name).join("ceiling/report.json");
        std::fs::create_dir_all(&report_dir)?;
        println!("\n== {name}: {scheduler} (fresh control plane)");
        let options = Options {
            kube_scheduler: scheduler == "kube-scheduler",
            kube_scheduler_config: Some(json!({
                "clientConnection": {"qps": KUBE_CLIENT_QPS, "burst": KUBE_CLIENT_QPS},
            })),
            // Its default 20 requests a second paces the resourceclaim
            // controller (a claim per DRA pod) below any scheduler's rate.
            controller_manager_args: vec![
                format!("--kube-api-qps={KUBE_CLIENT_QPS}"),
                format!("--kube-api-burst={KUBE_CLIENT_QPS}"),
            ],
            ..Default::default()
        };
        let cluster = self.rt.block_on(RealCluster::start_with(options));
        println!("control plane: {}", cluster.timings_text());
        let client = self.rt.block_on(cluster.client());
        let slices = self.rt.block_on(publish_slices(&client, &scenario_path))?;
        if slices > 0 {
            println!("published {slices} ResourceSlices");
        }
        let mut args: Vec<String> = vec![
            "--kubeconfig".into(),
            cluster.kubeconfig.display().to_string(),
            "--scenario".into(),
            scenario_path.display().to_string(),
            "--report-dir".into(),
            report_dir.display().to_string(),
        ];
        if scheduler != "ceiling" && ceiling.exists() {
            args.extend(["--ceiling".into(), ceiling.display().to_string()]);
        }
        let token_file = cluster.admin_token_file();
        let mut muster = None;
        let mut perf = None;
        let mut pprof = None;
        let mut metrics_url = None;
        let mut muster_metrics = None;
        match scheduler {
            "ceiling" => args.push("--bind-directly".into()),
            "kube-scheduler" => {
                let pid = cluster
                    .pid("kube-scheduler")
                    .context("kube-scheduler is not running")?;
                let addr = cluster
                    .kube_scheduler_addr
                    .context("kube-scheduler's address")?;
                let url = format!("https://{addr}/metrics");
                args.extend([
                    "--scheduler-name".into(),
                    "default-scheduler".into(),
                    "--scheduler-pid".into(),
                    pid.to_string(),
                    "--scheduler-metrics".into(),
                    url.clone(),
                    "--scheduler-token-file".into(),
                    token_file.display().to_string(),
                ]);
                metrics_url = Some(url);
                if let Ok(seconds) = std::env::var("REAL_LOAD_PPROF") {
                    let file = report_dir.join("kube-scheduler.pprof");
                    let child = Command::new("curl")
                        .args(["-sSk", "-o"])
                        .arg(&file)
                        .arg("-H")
                        .arg(format!(
                            "Authorization: Bearer {}",
                            real_cluster::ADMIN_TOKEN
                        ))
                        .arg(format!(
                            "https://{addr}/debug/pprof/profile?seconds={seconds}"
                        ))
                        .spawn()
                        .context("running curl for kube-scheduler's profile")?;
                    pprof = Some(child);
                }
            }
            _ => {
                let (proc, url) = muster_run(&cluster.kubeconfig, &self.muster_config)?;
                let pid = proc.0.id();
                args.extend([
                    "--scheduler-pid".into(),
                    pid.to_string(),
                    "--scheduler-metrics".into(),
                    url.clone(),
                ]);
                muster_metrics = Some(url);
                if std::env::var_os("REAL_LOAD_PERF").is_some() {
                    let child = Command::new("perf")
                        .args(["record", "-F", "499", "-g", "--call-graph", "dwarf,16384"])
                        .arg("-o")
                        .arg(report_dir.join("perf.data"))
                        .args(["-p", &pid.to_string()])
                        .stdout(Stdio::null())
                        .spawn()
                        .context("running perf record")?;
                    perf = Some(child);
                }
                muster = Some(proc);
            }
        }
        let first_podgroup_cycles = match &metrics_url {
            Some(url) => metric_sum(
                &scrape(url, Some(&token_file))?,
                "scheduler_podgroup_schedule_attempts_total",
            ),
            None => None,
        };
        let apiserver = cluster.pid("kube-apiserver");
        let apiserver_cpu = apiserver.and_then(cpu_seconds);
        let passed = load(&args)?;
        let apiserver_cpu_seconds = match (apiserver.and_then(cpu_seconds), apiserver_cpu) {
            (Some(b), Some(a)) => Some(b - a),
            _ => None,
        };
        if let Some(mut p) = perf {
            signal(p.id(), "INT");
            let _ = p.wait();
        }
        if let Some(mut p) = pprof {
            let _ = p.wait();
        }
        let podgroup_cycles = match &metrics_url {
            Some(url) => {
                let text = scrape(url, Some(&token_file))?;
                std::fs::write(report_dir.join("kube-scheduler-metrics.txt"), &text)?;
                metric_sum(&text, "scheduler_podgroup_schedule_attempts_total")
                    .map(|b| b - first_podgroup_cycles.unwrap_or(0.0))
            }
            None => None,
        };
        let podgroups = match scheduler {
            "ceiling" => None,
            _ => Some(
                self.rt
                    .block_on(podgroups_scheduled(&client, &scenario_name))?,
            ),
        };
        if let Some(url) = &muster_metrics {
            let text = scrape(url, None)?;
            std::fs::write(report_dir.join("muster-metrics.txt"), text)?;
        }
        drop(muster);
        if scheduler == "kube-scheduler" {
            let log = cluster.dir().join("logs/kube-scheduler.log");
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            std::fs::write(report_dir.join("kube-scheduler.log"), &text)?;
        }
        let text = std::fs::read_to_string(report_dir.join("report.json"))
            .with_context(|| format!("no report from the {scheduler} run of {name}"))?;
        Ok(Row {
            scenario: name.into(),
            scheduler,
            report: serde_json::from_str(&text)?,
            podgroup_cycles,
            podgroups,
            apiserver_cpu_seconds,
            passed,
        })
    }
}

/// Gangs that the run's end found bound below their quorum (the report's
/// violations), or `-` for shapes without gangs.
fn partial_gangs(r: &Value) -> String {
    if r["gangs"].as_array().is_none_or(Vec::is_empty) {
        return "-".into();
    }
    r["failures"]
        .as_array()
        .map_or(0, |f| {
            f.iter()
                .filter(|m| m.as_str().is_some_and(|m| m.contains("partially")))
                .count()
        })
        .to_string()
}

fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| scenario | scheduler | pods bound | s | pods/s | share of ceiling | CPU ms/pod | attempts/pod | peak RSS MiB | gangs partial | PodGroups scheduled | kube-scheduler PodGroup cycles | API server CPU s |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let num = |v: &Value, digits: usize| {
        v.as_f64()
            .map_or("-".to_string(), |x| format!("{x:.digits$}"))
    };
    for row in rows {
        let r = &row.report;
        let _ = writeln!(
            out,
            "| {} | {}{} | {}/{} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            row.scenario,
            row.scheduler,
            if row.passed { "" } else { " (failed)" },
            r["pods_bound"],
            r["pods_planned"],
            num(&r["measured_seconds"], 1),
            num(&r["throughput_pods_per_sec"]["average"], 0),
            r["ceiling_ratio"]
                .as_f64()
                .map_or("-".into(), |x| format!("{:.0}%", x * 100.0)),
            num(&r["scheduler_cpu_ms_per_pod"], 2),
            num(&r["attempts_per_pod"], 2),
            r["scheduler"]["peak_rss_bytes"]
                .as_f64()
                .map_or("-".into(), |x| format!("{:.0}", x / 1_048_576.0)),
            partial_gangs(r),
            row.podgroups
                .filter(|(all, _)| *all > 0)
                .map_or("-".into(), |(all, done)| format!("{done}/{all}")),
            row.podgroup_cycles
                .map_or("-".into(), |x| format!("{x:.0}")),
            row.apiserver_cpu_seconds
                .map_or("-".into(), |x| format!("{x:.1}")),
        );
    }
    out
}

fn main() -> Result<()> {
    // `cargo bench` passes --bench; nothing else to parse.
    let scenarios =
        std::env::var("REAL_LOAD_SCENARIOS").unwrap_or_else(|_| DEFAULT_SCENARIOS.into());
    let chosen = std::env::var("REAL_LOAD_SCHEDULERS").unwrap_or_else(|_| SCHEDULERS.join(","));
    let schedulers: Vec<&'static str> = SCHEDULERS
        .into_iter()
        .filter(|s| chosen.split(',').any(|c| c.trim() == *s))
        .collect();
    let work = tempfile::tempdir()?;
    let bench = Bench {
        rt: tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?,
        out: Path::new(env!("CARGO_MANIFEST_DIR")).join("target/load-reports/real"),
        muster_config: muster_config(work.path())?,
        work,
    };
    let mut rows = Vec::new();
    for name in scenarios
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        for &scheduler in &schedulers {
            let row = bench
                .run(name, scheduler)
                .with_context(|| format!("scenario {name}, {scheduler}"))?;
            if scheduler == "kube-scheduler"
                && !row.report["gangs"].as_array().is_none_or(Vec::is_empty)
            {
                let cycles = row.podgroup_cycles.unwrap_or(0.0);
                let (all, done) = row.podgroups.unwrap_or((0, 0));
                println!(
                    "kube-scheduler gang scheduling: {cycles:.0} PodGroup scheduling cycles, {done}/{all} PodGroups PodGroupInitiallyScheduled"
                );
                if cycles == 0.0 {
                    bail!(
                        "{name}: kube-scheduler ran no PodGroup scheduling cycle: gang scheduling is off"
                    );
                }
            }
            print!("{}", table(std::slice::from_ref(&row)));
            rows.push(row);
        }
    }
    let summary = table(&rows);
    std::fs::create_dir_all(&bench.out)?;
    std::fs::write(bench.out.join("summary.md"), &summary)?;
    let _ = bench.work.path();
    println!(
        "\n== head to head on a real API server (reports in {})",
        bench.out.display()
    );
    print!("{summary}");
    Ok(())
}
