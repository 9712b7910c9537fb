//! End-to-end: the `muster load` binary against the simulated cluster with
//! a Muster daemon, over HTTP. The report's counts and per-gang outcomes
//! are checked against what the cluster holds afterwards; the null
//! scheduler's report serves as the ceiling of a second run; bad input
//! fails with a precise message.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

use crate::e2e::{Env, HANG_GUARD, bound, cluster, daemon, list_labelled_pods, test_config};
use k8s_openapi::api::core::v1::Pod;
use muster::scenario::manifests::SCENARIO_LABEL;
use serde_json::Value;

/// Two dialects, a gang that cannot fit, plain pods; nodes come from the
/// scenario (kwok-style, created by the load generator).
const SCENARIO: &str = r#"
name: load-small
timeoutSeconds: 60
nodes:
  - {namePrefix: n, count: 6, capacity: {cpu: 8, memory: 32Gi, pods: 110}}
namespaces: [ml]
workloads:
  - gang: {namePrefix: g, namespace: ml, count: 6, size: 4, requests: {cpu: 1}, expect: {outcome: bound}}
  - gang: {namePrefix: c, dialect: coscheduling, count: 2, size: 3, requests: {cpu: 1}, expect: {outcome: bound}}
  - gang: {namePrefix: huge, namespace: ml, size: 2, requests: {cpu: 64}, timeoutSeconds: 2, expect: {outcome: timedOut}}
  - pods: {namePrefix: p, count: 20, requests: {cpu: 100m}, expect: {outcome: bound}}
"#;

async fn muster_load(args: &[&str]) -> Output {
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_muster"))
        .arg("load")
        .args(args)
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(HANG_GUARD, run)
        .await
        .expect("muster load finishes")
        .expect("muster load runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn read_report(dir: &Path) -> Value {
    let path = dir.join("report.json");
    let text = std::fs::read_to_string(&path).expect("report.json is written");
    serde_json::from_str(&text).expect("report.json is JSON")
}

/// The scenario's pods as the cluster holds them, by name.
async fn scenario_pods(env: &Env, scenario: &str) -> BTreeMap<String, Pod> {
    list_labelled_pods(env, &format!("{SCENARIO_LABEL}={scenario}")).await
}

/// Every count in the report equals what the cluster holds.
fn check_against_cluster(report: &Value, pods: &BTreeMap<String, Pod>) {
    let on_nodes = pods.values().filter(|p| bound(p)).count();
    assert_eq!(report["pods_created"], pods.len(), "created");
    assert_eq!(report["pods_bound"], on_nodes, "bound");
    for gang in report["gangs"].as_array().expect("gangs") {
        let name = gang["name"].as_str().expect("gang name");
        let members: Vec<&Pod> = pods
            .iter()
            .filter(|(n, _)| n.rsplit_once('-').is_some_and(|(g, _)| g == name))
            .map(|(_, p)| p)
            .collect();
        let on_nodes = members.iter().filter(|p| bound(p)).count();
        assert_eq!(gang["members"], members.len(), "{name} members");
        assert_eq!(gang["bound"], on_nodes, "{name} bound");
        let all = on_nodes == members.len();
        assert_eq!(gang["outcome"] == "bound", all, "{name}: {gang}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_matches_the_cluster_and_compares_with_the_ceiling() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = dir.path().join("scenario.yaml");
    std::fs::write(&scenario, SCENARIO).expect("scenario");
    let path = |p: &Path| p.display().to_string();

    // The ceiling, on a cluster of its own with no scheduler: the null
    // scheduler binds every pod, even the unfit gang's.
    let bare = cluster(Vec::new()).await;
    let bare_kubeconfig = dir.path().join("bare.kubeconfig");
    bare.cluster
        .write_kubeconfig(&bare_kubeconfig)
        .expect("kubeconfig");
    let ceiling_dir = dir.path().join("ceiling");
    let out = muster_load(&[
        "--kubeconfig",
        &path(&bare_kubeconfig),
        "--scenario",
        &path(&scenario),
        "--report-dir",
        &path(&ceiling_dir),
        "--bind-directly",
    ])
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let ceiling = read_report(&ceiling_dir);
    assert_eq!(ceiling["mode"], "bind-directly");
    assert_eq!(ceiling["pods_bound"], 52);
    assert_eq!(ceiling["null_bind_failures"], 0);
    let null_pods = scenario_pods(&bare, "load-small-null").await;
    check_against_cluster(&ceiling, &null_pods);
    assert!(null_pods.values().all(|p| {
        p.spec.as_ref().and_then(|s| s.scheduler_name.as_deref()) == Some("muster-load-null")
    }));

    // The scheduler run on a fresh cluster, compared with that ceiling.
    let env = cluster(Vec::new()).await;
    let d = daemon(&env, test_config("")).await;
    let kubeconfig = dir.path().join("kubeconfig");
    env.cluster
        .write_kubeconfig(&kubeconfig)
        .expect("kubeconfig");
    let metrics = format!("http://{}/metrics", d.http_addr);
    let pid = std::process::id().to_string();
    let report_dir = dir.path().join("report");
    let out = muster_load(&[
        "--kubeconfig",
        &path(&kubeconfig),
        "--scenario",
        &path(&scenario),
        "--report-dir",
        &path(&report_dir),
        "--ceiling",
        &path(&ceiling_dir.join("report.json")),
        "--scheduler-metrics",
        &metrics,
        "--scheduler-pid",
        &pid,
        "--concurrency",
        "8",
    ])
    .await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(
        stdout.contains("load-small (scheduler): 50/52 pods bound"),
        "{stdout}"
    );
    let report = read_report(&report_dir);
    check_against_cluster(&report, &scenario_pods(&env, "load-small").await);
    assert_eq!(report["pods_planned"], 52);
    assert_eq!(report["gangs_bound"], 8);
    assert_eq!(report["gangs_timed_out"], 1);
    assert_eq!(report["failures"], Value::Array(Vec::new()));
    let huge = report["gangs"]
        .as_array()
        .and_then(|g| g.iter().find(|g| g["name"] == "huge-0"))
        .expect("the unfit gang is reported");
    assert_eq!(
        (huge["bound"].as_u64(), huge["outcome"].as_str()),
        (Some(0), Some("timedOut"))
    );
    // Per-second windows: on a busy machine the last binds can trail into a
    // later window, leaving the windows between empty, so the median window
    // may be 0; the average and the best window cannot be.
    let t = &report["throughput_pods_per_sec"];
    for key in ["average", "p99"] {
        assert!(t[key].as_f64() > Some(0.0), "{key}: {t}");
    }
    assert!(
        t["p50"].as_f64() >= Some(0.0)
            && t["p50"].as_f64() <= t["p90"].as_f64()
            && t["p90"].as_f64() <= t["p99"].as_f64(),
        "{t}"
    );
    for key in ["p50", "p90", "p99"] {
        assert!(
            report["latency_seconds"][key].as_f64() >= Some(0.0),
            "{key}"
        );
    }
    assert!(report["ceiling_ratio"].as_f64() > Some(0.0));
    assert_eq!(
        report["ceiling"]["average"],
        ceiling["throughput_pods_per_sec"]["average"]
    );
    assert!(
        report["attempts_per_pod"].as_f64() >= Some(1.0),
        "{}",
        report["attempts_per_pod"]
    );
    assert_eq!(report["scheduler"]["source"], "proc");
    assert!(report["scheduler"]["peak_rss_bytes"].as_u64() > Some(0));
    let md = std::fs::read_to_string(report_dir.join("report.md")).expect("report.md");
    assert!(md.contains("| throughput, pods/s (1 s windows) |"), "{md}");
    assert!(md.contains("… as a share of the ceiling"), "{md}");
    assert!(md.contains("| ml/huge-0 | 2 | 0 | 2 | timedOut |"), "{md}");
    for svg in ["pods-over-time.svg", "latency-cdf.svg"] {
        let s = std::fs::read_to_string(report_dir.join(svg)).expect("plot written");
        assert!(s.starts_with("<svg"), "{svg}");
    }
    d.shutdown().await.expect("daemon stops");
}

#[tokio::test]
async fn bad_input_fails_with_a_precise_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = dir.path().join("bad.yaml");
    std::fs::write(
        &scenario,
        "name: bad\nworkloads:\n  - gang: {namePrefix: g, size: 2, minCuont: 1}\n",
    )
    .expect("scenario");
    let out = muster_load(&["--scenario", &scenario.display().to_string()]).await;
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("workloads[0].gang.minCuont: unknown field `minCuont`"),
        "{err}"
    );

    // A server that is not there: named, not a hang or a panic.
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\n\
         users: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n",
    )
    .expect("kubeconfig");
    let good = dir.path().join("good.yaml");
    std::fs::write(&good, "name: good\nworkloads:\n  - pods: {namePrefix: p}\n").expect("scenario");
    let out = muster_load(&[
        "--kubeconfig",
        &kubeconfig.display().to_string(),
        "--scenario",
        &good.display().to_string(),
        "--report-dir",
        &dir.path().join("r").display().to_string(),
    ])
    .await;
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("the API server does not answer"), "{err}");

    let out = muster_load(&[
        "--scenario",
        &good.display().to_string(),
        "--ceiling",
        &scenario.display().to_string(),
    ])
    .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("not a load report"),
        "{}",
        text(&out.stderr)
    );
}
