//! `kubectl muster explain` end to end: the real kubectl v1.37 finds the
//! plugin (`kubectl-muster`, the `muster` binary) on PATH and asks the
//! daemon through the Service's endpoint, against `muster cluster`:
//! a gang short of quorum (one member gated), a gang too big for any rack,
//! a preempting gang with its victims still terminating — in text and
//! `-o json` — and the answer from the API objects when the scheduler
//! cannot be reached. Then `PodGroupSatisfied`: a bound gang losing a
//! member, and getting it back.

use std::process::Output;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};
use muster::apiserver::{SimCluster, SimConfig};
use muster::kwok::templates::NodeTemplate;
use serde_json::Value;
use tokio::process::Command;

use crate::common::kubectl::Kubectl;
use crate::e2e::{self, Env, test_config};

const RACK: &str = "topology.kubernetes.io/rack";

/// Priority classes `low` (10) and `high` (1000).
pub const CLASSES: &str = "apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 10
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
";

/// A directory holding the plugin under kubectl's name for it.
pub fn plugin_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_muster"),
        dir.path().join("kubectl-muster"),
    )
    .expect("plugin link");
    dir
}

/// Runs `kubectl muster ARGS` with the plugin first on PATH.
pub async fn plugin(k: &Kubectl, dir: &tempfile::TempDir, args: &[&str]) -> Output {
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new(&k.bin)
        .arg("muster")
        .args(args)
        .env("KUBECONFIG", &k.kubeconfig)
        .env("PATH", path)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("MUSTER_SCHEDULER")
        .kill_on_drop(true)
        .output()
        .await
        .expect("kubectl runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Racks r1 and r2, two 2-core nodes each; victims may take up to a
/// minute to terminate (a preemption stays in progress while asked about).
async fn cluster() -> Env {
    let rack = |r: &str| {
        let mut t: NodeTemplate = e2e::nodes(2, "2");
        t.name_prefix = r.to_string();
        t.labels.insert(RACK.into(), r.into());
        t
    };
    let config = SimConfig::default()
        .pod_start_delay(Duration::from_millis(10))
        .bookmark_interval(Duration::from_millis(500))
        .max_termination_grace(Duration::from_secs(60))
        .with_templates(vec![rack("r1"), rack("r2")]);
    let cluster = SimCluster::start(config).await.expect("cluster starts");
    let client = cluster.client().expect("client");
    Env { cluster, client }
}

/// The scheduler's Service, its endpoint annotation naming the daemon.
fn service(addr: std::net::SocketAddr) -> String {
    format!(
        "apiVersion: v1
kind: Namespace
metadata: {{name: muster-system}}
---
apiVersion: v1
kind: Service
metadata:
  name: muster
  namespace: muster-system
  annotations: {{muster.dev/endpoint: \"http://{addr}\"}}
spec:
  selector: {{app.kubernetes.io/name: muster}}
  ports: [{{name: metrics, port: 10259, targetPort: 10259}}]
"
    )
}

/// A v1beta1 PodGroup manifest (`extra` goes under `spec`).
pub fn podgroup(name: &str, min: usize, class: &str, extra: &str) -> String {
    format!(
        "apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {{name: {name}, namespace: default}}
spec:
  priorityClassName: {class}
  schedulingPolicy:
    gang: {{minCount: {min}}}
{extra}---
"
    )
}

/// A pod manifest for `muster` (`extra` goes under `spec`).
pub fn pod(name: &str, cpu: &str, class: &str, group: Option<&str>, extra: &str) -> String {
    let group = group.map_or(String::new(), |g| {
        format!("\n  schedulingGroup: {{podGroupName: {g}}}")
    });
    format!(
        "apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  schedulerName: muster
  priorityClassName: {class}{group}{extra}
  containers:
  - name: main
    image: busybox
    resources: {{requests: {{cpu: \"{cpu}\", memory: 100Mi}}}}
---
"
    )
}

async fn explain_json(k: &Kubectl, dir: &tempfile::TempDir, target: &str, extra: &[&str]) -> Value {
    let mut args = vec!["explain", target, "-o", "json"];
    args.extend_from_slice(extra);
    let out = plugin(k, dir, &args).await;
    assert_eq!(
        out.status.code(),
        Some(4),
        "not bound, so exit 4: {}{}",
        stdout(&out),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("explain -o json is JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_answers_for_quorum_racks_and_preemption_through_kubectl() {
    let env = cluster().await;
    let k = Kubectl::for_cluster(&env.cluster);
    k.apply(CLASSES).await;
    let d = e2e::daemon(&env, test_config("")).await;
    e2e::wait_ready(&d).await;
    k.apply(&service(d.http_addr)).await;
    let dir = plugin_dir();

    // Short of quorum: one member held by a scheduling gate.
    let gate = "\n  schedulingGates: [{name: example.com/hold}]";
    k.apply(&format!(
        "{}{}{}{}",
        podgroup("q", 3, "low", ""),
        pod("muster-0", "100m", "low", Some("q"), gate),
        pod("muster-1", "100m", "low", Some("q"), ""),
        pod("muster-2", "100m", "low", Some("q"), ""),
    ))
    .await;
    e2e::wait_pod_message(&env, "default", "muster-1", "waiting for").await;
    let out = plugin(&k, &dir, &["explain", "podgroup/q"]).await;
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(4), "{text}");
    assert!(
        text.contains("2/3 present, muster-0 gated by example.com/hold"),
        "{text}"
    );
    let json = explain_json(&k, &dir, "podgroup/q", &[]).await;
    assert_eq!(json["kind"], "Explanation");
    assert_eq!(json["source"], "scheduler");
    assert_eq!(json["phase"], "waitingForQuorum");
    assert_eq!(
        json["summary"],
        "2/3 present, muster-0 gated by example.com/hold"
    );
    assert_eq!(json["gang"]["present"], 2);
    assert_eq!(json["gang"]["minCount"], 3);
    assert_eq!(json["members"][0]["name"], "muster-0");
    assert_eq!(json["members"][0]["state"], "schedulingGated");
    assert_eq!(json["members"][0]["schedulingGates"][0], "example.com/hold");
    // Asked about a member (a bare name is a pod), the gang answers.
    let by_pod = explain_json(&k, &dir, "muster-1", &[]).await;
    assert_eq!(by_pod["summary"], json["summary"]);

    // Too big for any rack (4 cores each): the closest rack and its shortfall.
    let rack = "  schedulingConstraints:\n    topology: [{key: topology.kubernetes.io/rack}]\n";
    let mut big = podgroup("big", 5, "low", rack);
    for i in 0..5 {
        big.push_str(&pod(&format!("big-{i}"), "1", "low", Some("big"), ""));
    }
    k.apply(&big).await;
    e2e::wait_pod_message(&env, "default", "big-0", "none holds them").await;
    let out = plugin(&k, &dir, &["explain", "podgroup/big"]).await;
    let text = stdout(&out);
    assert!(
        text.contains("requires all members within one domain of topology.kubernetes.io/rack")
            && text.contains("has room for 4 of the 5 members: 1 more need 1 cpu"),
        "the closest rack and its shortfall: {text}"
    );
    let json = explain_json(&k, &dir, "podgroup/big", &[]).await;
    let said = json["lastAttempt"].to_string();
    assert!(said.contains("has room for 4 of the 5 members"), "{said}");
    k.ok(&["delete", "podgroup", "big"]).await;
    k.ok(&["delete", "pod", "big-0", "big-1", "big-2", "big-3", "big-4"])
        .await;

    // Preempting: low pods fill every node and take a minute to go; a high
    // gang evicts two of them and is asked about while they terminate.
    let grace = "\n  terminationGracePeriodSeconds: 60";
    let lows: String = (0..4)
        .map(|i| pod(&format!("low-{i}"), "1500m", "low", None, grace))
        .collect();
    k.apply(&lows).await;
    e2e::wait_pods(&env, "default", |pods| {
        (0..4).all(|i| pods.get(&format!("low-{i}")).is_some_and(e2e::bound))
    })
    .await;
    let mut hi = podgroup("hi", 2, "high", "");
    for i in 0..2 {
        hi.push_str(&pod(&format!("hi-{i}"), "1500m", "high", Some("hi"), ""));
    }
    k.apply(&hi).await;
    e2e::wait_pods(&env, "default", |pods| {
        pods.values()
            .filter(|p| p.metadata.deletion_timestamp.is_some())
            .count()
            == 2
    })
    .await;
    let json = explain_json(&k, &dir, "podgroup/hi", &[]).await;
    assert_eq!(json["phase"], "preempting", "{json}");
    let victims: Vec<&str> = json["preemption"]["victimsTerminating"]
        .as_array()
        .expect("victims listed")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(victims.len(), 2, "{json}");
    assert!(
        victims.iter().all(|v| v.starts_with("default/low-")),
        "{victims:?}"
    );
    let why = json["preemption"]["whyVictims"].to_string();
    assert!(why.contains("leaves no room for default/hi-"), "{json}");
    // kubectl's `TYPE NAME` form answers as `TYPE/NAME` does.
    let text = stdout(&plugin(&k, &dir, &["explain", "podgroup", "hi"]).await);
    assert!(
        text.contains("victims still terminating: default/low-"),
        "{text}"
    );
    assert!(text.contains("leaves no room for default/hi-"), "{text}");

    // The scheduler cannot be reached: the API objects answer, saying so.
    let json = explain_json(
        &k,
        &dir,
        "podgroup/q",
        &["--scheduler", "http://127.0.0.1:1"],
    )
    .await;
    assert_eq!(json["source"], "apiObjects");
    assert!(
        json["note"]
            .as_str()
            .unwrap_or("")
            .contains("could not be asked"),
        "{json}"
    );
    assert_eq!(
        json["summary"],
        "2/3 present, muster-0 gated by example.com/hold"
    );
    d.shutdown().await.expect("clean shutdown");
}

/// `PodGroupSatisfied`: deleting a member of a bound gang flips the
/// condition, the event and the metric; recreating it flips them back,
/// and `PodGroupInitiallyScheduled` stays as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_gang_that_loses_a_member_is_unsatisfied_until_it_is_back() {
    let env = e2e::cluster(vec![e2e::nodes(2, "4")]).await;
    let k = Kubectl::for_cluster(&env.cluster);
    let d = e2e::daemon(&env, test_config("")).await;
    e2e::wait_ready(&d).await;
    let mut manifest = podgroup("h", 2, "", "").replace("  priorityClassName: \n", "");
    let members = format!(
        "{}{}",
        pod("h-0", "1", "", Some("h"), ""),
        pod("h-1", "1", "", Some("h"), "")
    )
    .replace("  priorityClassName: \n", "");
    manifest.push_str(&members);
    k.apply(&manifest).await;
    e2e::wait_pods(&env, "default", |pods| {
        ["h-0", "h-1"]
            .iter()
            .all(|n| pods.get(*n).is_some_and(e2e::bound))
    })
    .await;
    e2e::wait_podgroup_condition(&env, "default", "h", |c| c["status"] == "True").await;

    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    pods.delete("h-0", &DeleteParams::default().grace_period(0))
        .await
        .expect("delete a member");
    let c = e2e::wait_podgroup_condition_of(&env, "default", "h", "PodGroupSatisfied", |c| {
        c["status"] == "False"
    })
    .await;
    assert_eq!(c["reason"], "BelowMinCount");
    assert_eq!(c["message"], "only 1 of minCount 2 members running");
    e2e::wait_event(&env, "default", |e| {
        e.reason.as_deref() == Some("GangUnsatisfied")
    })
    .await;
    wait_metric(&d, "muster_gang_groups{state=\"unsatisfied\"}", 1.0).await;

    // The member comes back (its controller would recreate it).
    k.apply(&pod("h-0", "1", "", Some("h"), "").replace("  priorityClassName: \n", ""))
        .await;
    let c = e2e::wait_podgroup_condition_of(&env, "default", "h", "PodGroupSatisfied", |c| {
        c["status"] == "True"
    })
    .await;
    assert_eq!(c["reason"], "MinCountMet");
    wait_metric(&d, "muster_gang_groups{state=\"unsatisfied\"}", 0.0).await;
    // The other condition was left as it was.
    e2e::wait_podgroup_condition(&env, "default", "h", |c| c["status"] == "True").await;
    d.shutdown().await.expect("clean shutdown");
}

/// Waits until `/metrics` shows `series` at `value` (the gauges are
/// published every second; this polls the endpoint, bounded by the hang
/// guard).
async fn wait_metric(d: &muster::daemon::RunningDaemon, series: &str, value: f64) {
    let deadline = tokio::time::Instant::now() + e2e::HANG_GUARD;
    loop {
        let (_, text) = e2e::http_get(d.http_addr, "/metrics").await;
        if e2e::metric(&text, series) == Some(value) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{series} never reached {value}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Over secure serving, the plugin asks with the user's own token: a user
/// bound to the shipped `muster-explain` ClusterRole gets the scheduler's
/// answer; one without it is refused by the scheduler and, unable to read
/// the objects either, told both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_asks_with_the_users_credentials() {
    use muster::apiserver::TokenUser;
    use muster::daemon::{DaemonOptions, ServingOptions};
    let config = SimConfig::default()
        .with_templates(vec![e2e::nodes(1, "4")])
        .with_token_user(TokenUser::new("alice", "alice-token", &[]))
        .with_token_user(TokenUser::new("eve", "eve-token", &[]));
    let cluster = SimCluster::start(config).await.expect("cluster starts");
    let env = Env {
        client: cluster.client().expect("client"),
        cluster,
    };
    let k = Kubectl::for_cluster(&env.cluster);
    let rbac = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/manifests/rbac.yaml"
    ))
    .expect("rbac.yaml");
    let role = rbac
        .split("\n---")
        .find(|doc| doc.contains("name: muster-explain\n"))
        .expect("the kustomize base has a muster-explain ClusterRole");
    k.apply(role).await;
    k.apply(
        "apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: alice-explain}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: muster-explain}
subjects: [{kind: User, name: alice, apiGroup: rbac.authorization.k8s.io}]
",
    )
    .await;
    let mut opts = DaemonOptions::new(test_config(""));
    opts.serving = ServingOptions::secure();
    let d = muster::daemon::start(env.client.clone(), opts)
        .await
        .expect("daemon starts");
    e2e::wait_ready_https(&d).await;
    k.apply(&format!(
        "{}{}",
        podgroup("w", 2, "", "").replace("  priorityClassName: \n", ""),
        pod("w-0", "1", "", Some("w"), "").replace("  priorityClassName: \n", "")
    ))
    .await;
    e2e::wait_pod_message(&env, "default", "w-0", "waiting for").await;
    let url = format!("https://{}", d.http_addr);
    let dir = plugin_dir();
    let ask = |context: &'static str| {
        let (k, dir, url) = (&k, &dir, url.clone());
        async move {
            plugin(
                k,
                dir,
                &[
                    "explain",
                    "podgroup/w",
                    "-o",
                    "json",
                    "--context",
                    context,
                    "--scheduler",
                    &url,
                    "--scheduler-insecure-skip-tls-verify",
                ],
            )
            .await
        }
    };
    let out = ask("alice").await;
    let json: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(json["source"], "scheduler", "{json}");
    assert_eq!(json["summary"], "1/2 present; 1 member(s) not created yet");

    let out = ask("eve").await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stderr}{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        stderr.contains("cannot get path") && stderr.contains("nor the API objects read"),
        "{stderr}"
    );
    d.shutdown().await.expect("clean shutdown");
}
