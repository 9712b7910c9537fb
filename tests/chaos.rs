//! The chaos suite, bounded for `make test`: `muster run` as separate
//! processes against `muster cluster` whose faults change step by step, with
//! kill -9 mid-binding and a leader frozen (SIGSTOP) while a standby takes
//! over, then thawed (SIGCONT). The cluster is audited from the outside,
//! through the API, as an operator would:
//!
//! - I2 on every pod event: no node's bound, non-terminal pods request more
//!   cpu than it has;
//! - I1 when a step settles: every gang has none or at least `minCount`
//!   members bound;
//! - I4: every pod is bound once capacity exists (each step's batch fits);
//! - the scheduler is alive (it binds the next batch), and a thawed former
//!   leader stands down instead of writing.
//!
//! Steps: calm; 20% and 50% of the scheduler's writes failing (with
//! latency); watches closed every second; another scheduler's pods taking
//! capacity at the same time; kill -9 while bindings are in flight, a new
//! replica finishing; the leader frozen past its lease while a standby takes
//! over, then thawed.

mod e2e;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use e2e::*;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams};
use muster::apiserver::fault::FaultRule;

use std::sync::atomic::{AtomicUsize, Ordering};

const NS: &str = "default";

/// What this run did, printed at the end for `make chaos`'s report.
static AUDITS_I2: AtomicUsize = AtomicUsize::new(0);
static AUDITS_I1: AtomicUsize = AtomicUsize::new(0);
static PODS: AtomicUsize = AtomicUsize::new(0);
static GANGS: AtomicUsize = AtomicUsize::new(0);
const GANG_SIZE: usize = 3;
const LEASE: &str = "muster-chaos";

/// A `muster run` process; killed when dropped.
struct Scheduler {
    child: Child,
    identity: String,
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.child.id().to_string()])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn_scheduler(dir: &Path, identity: &str) -> Scheduler {
    let log = std::fs::File::create(dir.join(format!("{identity}.log"))).expect("log file");
    let child = Command::new(env!("CARGO_BIN_EXE_muster"))
        .args(["run", "--insecure-serving", "--http-addr", "127.0.0.1:0"])
        .arg("--kubeconfig")
        .arg(dir.join("kubeconfig"))
        .arg("--config")
        .arg(dir.join("muster.yaml"))
        .args(["--identity", identity])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("muster run starts");
    Scheduler {
        child,
        identity: identity.to_string(),
    }
}

fn signal(s: &Scheduler, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &s.child.id().to_string()])
        .status()
        .expect("kill runs")
        .success();
    assert!(ok, "kill {sig} {}", s.identity);
}

/// Leader election with short durations, so a standby takes over within
/// seconds (lease 4 s, renew deadline 3 s).
const CONFIG: &str = r#"
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 2
leaderElection:
  leaderElect: true
  leaseDuration: 4s
  renewDeadline: 3s
  retryPeriod: 500ms
  resourceName: muster-chaos
  resourceNamespace: default
profiles:
- schedulerName: muster
  pluginConfig:
  - name: GangScheduling
    args: {permitWaitingTimeSeconds: 10, podGroupBackoffSeconds: 1}
"#;

fn milli_cpu(q: &str) -> i64 {
    match q.strip_suffix('m') {
        Some(m) => m.parse().unwrap_or(0),
        None => q.parse::<i64>().map(|c| c * 1000).unwrap_or(0),
    }
}

fn cpu_request(p: &Pod) -> i64 {
    p.spec
        .as_ref()
        .map(|s| {
            s.containers
                .iter()
                .filter_map(|c| c.resources.as_ref()?.requests.as_ref()?.get("cpu"))
                .map(|q| milli_cpu(&q.0))
                .sum()
        })
        .unwrap_or(0)
}

fn terminal(p: &Pod) -> bool {
    matches!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// I2: no node's bound, non-terminal pods request more cpu than it has.
fn audit_no_overcommit(pods: &BTreeMap<String, Pod>, allocatable: &BTreeMap<String, i64>) {
    AUDITS_I2.fetch_add(1, Ordering::Relaxed);
    let mut used: BTreeMap<&str, i64> = BTreeMap::new();
    for p in pods.values().filter(|p| !terminal(p)) {
        if let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            *used.entry(node).or_default() += cpu_request(p);
        }
    }
    for (node, used) in used {
        let have = allocatable.get(node).copied().unwrap_or(0);
        assert!(used <= have, "I2: node {node} has {used}m bound of {have}m");
    }
}

/// I1 once settled: every gang has none or at least `GANG_SIZE` bound.
fn audit_no_partial_gang(pods: &BTreeMap<String, Pod>) {
    AUDITS_I1.fetch_add(1, Ordering::Relaxed);
    let mut bound_by_gang: BTreeMap<&str, usize> = BTreeMap::new();
    for (name, p) in pods {
        if let Some((gang, _)) = name.rsplit_once("-m")
            && name.starts_with("gang-")
        {
            *bound_by_gang.entry(gang).or_default() += usize::from(bound(p));
        }
    }
    for (gang, n) in bound_by_gang {
        assert!(
            n == 0 || n >= GANG_SIZE,
            "I1: gang {gang} has {n} of {GANG_SIZE} bound"
        );
    }
}

async fn allocatable(env: &Env) -> BTreeMap<String, i64> {
    let nodes: Api<Node> = Api::all(env.client.clone());
    nodes
        .list(&ListParams::default())
        .await
        .expect("nodes")
        .items
        .into_iter()
        .map(|n| {
            let cpu = n
                .status
                .and_then(|s| s.allocatable)
                .and_then(|a| a.get("cpu").map(|q| milli_cpu(&q.0)))
                .unwrap_or(0);
            (n.metadata.name.unwrap_or_default(), cpu)
        })
        .collect()
}

/// `gangs` gangs of three 1-cpu members and `plain` 1-cpu pods, tagged.
async fn batch(env: &Env, tag: &str, gangs: usize, plain: usize) -> usize {
    let mut pods = Vec::new();
    for g in 0..gangs {
        let group = format!("gang-{tag}-{g}");
        create_podgroup(env, NS, &group, GANG_SIZE as u32, None).await;
        for m in 0..GANG_SIZE {
            pods.push(pod(&format!("{group}-m{m}"), "1", "muster", Some(&group)));
        }
    }
    for i in 0..plain {
        pods.push(pod(&format!("plain-{tag}-{i}"), "1", "muster", None));
    }
    let n = pods.len();
    PODS.fetch_add(n, Ordering::Relaxed);
    GANGS.fetch_add(gangs, Ordering::Relaxed);
    create_pods(env, NS, pods).await;
    n
}

/// Waits until every pod of `tag` is bound, auditing I2 on every event,
/// then I1.
async fn settle(env: &Env, tag: &str, count: usize, cpu: &BTreeMap<String, i64>) {
    eprintln!("chaos: step {tag}: waiting for {count} pods");
    let pods = wait_pods(env, NS, |pods| {
        audit_no_overcommit(pods, cpu);
        pods.iter()
            .filter(|(n, p)| n.contains(&format!("-{tag}-")) && bound(p))
            .count()
            >= count
    })
    .await;
    audit_no_overcommit(&pods, cpu);
    audit_no_partial_gang(&pods);
}

/// Deletes every pod (the next step starts on an empty cluster).
async fn clear(env: &Env) {
    let api: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    api.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .expect("delete pods");
    wait_pods(env, NS, BTreeMap::is_empty).await;
}

fn write_rules(dir: &Path, env: &Env) -> PathBuf {
    env.cluster
        .write_kubeconfig(&dir.join("kubeconfig"))
        .expect("kubeconfig");
    std::fs::write(dir.join("muster.yaml"), CONFIG).expect("config");
    dir.to_path_buf()
}

/// The scheduler's own writes fail at `rate` (bindings, pod status, events).
fn write_errors(rate: f64, latency_ms: u64) -> Vec<FaultRule> {
    ["pods/binding", "bindings", "pods/status", "events"]
        .iter()
        .map(|r| {
            let spec = format!("resource={r},rate={rate},code=500,latency-ms={latency_ms}");
            spec.parse().expect("fault rule")
        })
        .collect()
}

/// Waits until the Lease's holder satisfies `wanted`.
async fn lease_holder(env: &Env, wanted: impl Fn(&str) -> bool) -> String {
    use futures::StreamExt;
    use kube::runtime::watcher;
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), NS);
    let config = watcher::Config::default().fields(&format!("metadata.name={LEASE}"));
    let mut stream = Box::pin(watcher::watcher(leases, config));
    let wait = async {
        while let Some(event) = stream.next().await {
            if let Ok(watcher::Event::Apply(l) | watcher::Event::InitApply(l)) = event
                && let Some(h) = l.spec.and_then(|s| s.holder_identity)
                && wanted(&h)
            {
                return h;
            }
        }
        panic!("lease watch ended");
    };
    tokio::time::timeout(HANG_GUARD, wait)
        .await
        .expect("a leader before the hang guard")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_no_partial_gang_no_overcommit_no_lost_pod() {
    let env = cluster(vec![nodes(6, "4")]).await;
    let tmp = tempfile::tempdir().expect("tempdir");
    let keep = std::env::var_os("CHAOS_KEEP_LOGS").is_some();
    eprintln!("chaos: scheduler logs in {}", tmp.path().display());
    let dir = write_rules(tmp.path(), &env);
    let _kept = keep.then(|| tmp.path().to_path_buf());
    if keep {
        std::mem::forget(tmp);
    }
    let cpu = allocatable(&env).await;
    let a = spawn_scheduler(&dir, "a");

    // Calm, then 20% and 50% failing writes with latency, then watch closes.
    let steps: [(&str, Vec<FaultRule>); 4] = [
        ("calm", Vec::new()),
        ("err20", write_errors(0.2, 0)),
        ("err50", write_errors(0.5, 50)),
        (
            "watchclose",
            vec!["watch-close-every=1s".parse().expect("fault rule")],
        ),
    ];
    for (tag, rules) in steps {
        env.cluster.set_faults(rules);
        let n = batch(&env, tag, 4, 6).await;
        settle(&env, tag, n, &cpu).await;
        env.cluster.set_faults(Vec::new());
        clear(&env).await;
    }

    // Another scheduler's pods hold capacity (bound at creation, one per
    // node, just before ours arrive): Muster must count them.
    let others: Vec<Pod> = cpu
        .keys()
        .take(4)
        .enumerate()
        .map(|(i, node)| {
            let mut p = pod(&format!("other-{i}"), "1", "default-scheduler", None);
            if let Some(spec) = p.spec.as_mut() {
                spec.node_name = Some(node.clone());
            }
            p
        })
        .collect();
    create_pods(&env, NS, others).await;
    let n = batch(&env, "others", 4, 6).await;
    settle(&env, "others", n, &cpu).await;
    clear(&env).await;

    // kill -9 mid-binding: the next scheduler finishes the job.
    env.cluster.set_faults(write_errors(0.0, 30));
    let n = batch(&env, "kill", 4, 6).await;
    wait_pods(&env, NS, |pods| {
        audit_no_overcommit(pods, &cpu);
        pods.values().filter(|p| bound(p)).count() >= 2
    })
    .await;
    drop(a);
    env.cluster.set_faults(Vec::new());
    let b = spawn_scheduler(&dir, "b");
    settle(&env, "kill", n, &cpu).await;
    clear(&env).await;

    // A frozen leader: the standby takes over and schedules; the old leader,
    // thawed, must not write from its stale view, and stands down. Two fresh
    // replicas; whichever leads is frozen.
    drop(b);
    let mut pair = vec![spawn_scheduler(&dir, "c"), spawn_scheduler(&dir, "d")];
    let leader = lease_holder(&env, |h| h == "c" || h == "d").await;
    let frozen = pair
        .iter()
        .position(|s| s.identity == leader)
        .expect("the leader is one of the pair");
    let standby = pair[1 - frozen].identity.clone();
    signal(&pair[frozen], "-STOP");
    assert_eq!(lease_holder(&env, |h| h == standby).await, standby);
    let n = batch(&env, "frozen", 4, 6).await;
    settle(&env, "frozen", n, &cpu).await;
    signal(&pair[frozen], "-CONT");
    let n = batch(&env, "thawed", 2, 0).await;
    settle(&env, "thawed", n, &cpu).await;
    let mut thawed = pair.remove(frozen);
    // Waits for the process to exit (its own event), bounded by the hang guard.
    let exited = tokio::time::timeout(
        HANG_GUARD,
        tokio::task::spawn_blocking(move || {
            let status = thawed.child.wait().ok();
            drop(thawed);
            status
        }),
    )
    .await
    .ok()
    .and_then(Result::ok)
    .flatten();
    assert!(
        exited.is_some_and(|s| !s.success()),
        "the thawed former leader stands down"
    );
    // The standby leads on: one more batch.
    clear(&env).await;
    let n = batch(&env, "after", 2, 2).await;
    settle(&env, "after", n, &cpu).await;
    eprintln!(
        "chaos: summary pods={} gangs={} fault_steps=5 kills=1 freezes=1 i2_audits={} i1_audits={} violations=0",
        PODS.load(Ordering::Relaxed),
        GANGS.load(Ordering::Relaxed),
        AUDITS_I2.load(Ordering::Relaxed),
        AUDITS_I1.load(Ordering::Relaxed),
    );
}
