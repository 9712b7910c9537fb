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
//! Steps, the fault steps in an order drawn from the seed (`CHAOS_SEED`,
//! the pinned 42 when unset, `random` for a new one; printed), which also
//! draws each batch's size:
//! calm; 20% and 50% of the scheduler's writes failing (with latency);
//! watches closed every second; every watch resume of the scheduler told
//! `410 Gone` (a compaction), so it relists; the scheduler's pod watch
//! stalled (`CHAOS_STALL_SECONDS`, default 5) while its bindings complete
//! and pods that do not fit wait; a node deleted under reserved gang
//! members, then restored; a waiting gang's minCount lowered, and another
//! waiting gang's PodGroup deleted then recreated; another scheduler's pods
//! taking capacity at the same time; kill -9 while bindings are in flight,
//! a new replica finishing; the leader frozen past its lease while a
//! standby takes over, then thawed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::e2e::*;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use muster::apiserver::fault::FaultRule;
use serde_json::json;

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
- schedulerName: muster-per-pod
  pluginConfig:
  - name: GangScheduling
    args: {permitWaitingTimeSeconds: 10, podGroupBackoffSeconds: 1, planWholeGangs: false}
"#;

/// The profile that places gang members one per cycle, so they reserve as
/// they go and wait at Permit: the faults that hit reservations (a node
/// deleted under them, the group changing while they wait) are driven
/// through it; every other step uses the default gang cycle.
const PER_POD: &str = "muster-per-pod";

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

/// No pod is bound to a node that does not exist (a deleted node's
/// reservations must not be bound).
fn audit_nodes_exist(pods: &BTreeMap<String, Pod>, nodes: &BTreeMap<String, i64>) {
    for (name, p) in pods.iter().filter(|(_, p)| !terminal(p)) {
        if let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            assert!(
                nodes.contains_key(node),
                "pod {name} bound to missing node {node}"
            );
        }
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

/// The seed `make test` runs: a fixed one, so CI is reproducible; `make
/// chaos` draws new ones.
const PINNED_SEED: u64 = 42;

/// The run's seed: `CHAOS_SEED` (`random` draws one), else [`PINNED_SEED`];
/// printed so a failure can be replayed (`CHAOS_SEED=<n> cargo test --test
/// muster chaos::`).
fn seed() -> u64 {
    let seed = match std::env::var("CHAOS_SEED").ok().as_deref() {
        None | Some("") => PINNED_SEED,
        Some("random") => fastrand::u64(..),
        Some(s) => s
            .parse()
            .unwrap_or_else(|_| panic!("CHAOS_SEED={s}: a number or `random`")),
    };
    eprintln!("chaos: seed={seed}");
    seed
}

/// How long the scheduler's pod watch stays stalled (`CHAOS_STALL_SECONDS`).
fn stall_for() -> std::time::Duration {
    let secs = std::env::var("CHAOS_STALL_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    std::time::Duration::from_secs(secs)
}

/// The scheduler's requests only (it sends `muster/<version>`): the test's
/// own client, which audits, is not affected.
fn scheduler_only(spec: &str) -> FaultRule {
    format!("{spec},user-agent=muster/")
        .parse()
        .expect("fault rule")
}

/// A batch that fits the cluster (6 nodes of 4 cpu): 2–4 gangs of three and
/// 2–8 plain pods.
fn sizes(rng: &mut fastrand::Rng) -> (usize, usize) {
    (rng.usize(2..=4), rng.usize(2..=8))
}

/// The pod watch of the scheduler stalls while its bindings complete: the
/// confirmations are held back, pods that did not fit keep retrying. The
/// reservations of bound pods must hold however long the stall lasts
/// (no expiry); once the stall ends and capacity is freed, the rest bind.
async fn stalled_pod_watch(env: &Env, cpu: &BTreeMap<String, i64>) {
    let total: i64 = cpu.values().sum::<i64>() / 1000;
    let overflow = 2;
    env.cluster.set_faults(vec![scheduler_only(
        "resource=pods/binding,latency-ms=1000",
    )]);
    let n = batch(env, "stall", 4, total as usize - 12 + overflow).await;
    // Wait until the scheduler has seen every pod: the overflow is refused
    // because the rest hold (assumed) capacity.
    let seen = wait_pods(env, NS, |pods| {
        audit_no_overcommit(pods, cpu);
        unschedulable(pods).len() >= overflow
    })
    .await;
    let refused = unschedulable(&seen);
    env.cluster.set_faults(vec![
        scheduler_only("resource=pods/binding,latency-ms=1000"),
        scheduler_only("verb=watch,resource=pods,watch-stall=true"),
    ]);
    eprintln!(
        "chaos: step stall: scheduler pod watch stalled for {:?}",
        stall_for()
    );
    let stalled = async {
        wait_pods(env, NS, |pods| {
            audit_no_overcommit(pods, cpu);
            false
        })
        .await
    };
    let _ = tokio::time::timeout(stall_for(), stalled).await;
    env.cluster.set_faults(Vec::new());
    let pods = wait_pods(env, NS, |pods| {
        audit_no_overcommit(pods, cpu);
        pods.values().filter(|p| bound(p)).count() >= n - overflow
    })
    .await;
    // Free room for the refused pods: delete as many bound plain pods.
    let api: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let freed: Vec<&String> = pods
        .iter()
        .filter(|(name, p)| name.starts_with("plain-") && bound(p))
        .map(|(name, _)| name)
        .take(refused.len())
        .collect();
    for name in freed {
        api.delete(name, &DeleteParams::default())
            .await
            .expect("delete pod");
    }
    let pods = wait_pods(env, NS, |pods| {
        audit_no_overcommit(pods, cpu);
        refused.iter().all(|n| pods.get(n).is_some_and(bound))
    })
    .await;
    audit_no_partial_gang(&pods);
}

/// Pods whose `PodScheduled` condition says `Unschedulable`.
fn unschedulable(pods: &BTreeMap<String, Pod>) -> Vec<String> {
    pods.iter()
        .filter(|(_, p)| !bound(p) && condition_reason(p) == Some("Unschedulable"))
        .map(|(n, _)| n.clone())
        .collect()
}

/// The reason of a pod's `PodScheduled` condition, if any.
fn condition_reason(p: &Pod) -> Option<&str> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled")
        .and_then(|c| c.reason.as_deref())
}

/// Waits until the named pods all wait at Permit (reserved).
async fn wait_at_permit(env: &Env, names: &[String], cpu: &BTreeMap<String, i64>) {
    wait_pods(env, NS, |pods| {
        audit_no_overcommit(pods, cpu);
        names.iter().all(|n| {
            pods.get(n)
                .is_some_and(|p| condition_reason(p) == Some("WaitingAtPermit"))
        })
    })
    .await;
}

/// A gang's member pinned to one node (by name, as a DaemonSet pins).
fn pinned(name: &str, group: &str, node: &str) -> Pod {
    let mut p = pod(name, "1", PER_POD, Some(group));
    if let Some(spec) = p.spec.as_mut() {
        spec.affinity = Some(
            serde_json::from_value(
                json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": [node]}
                    ]}]
                }}}),
            )
            .expect("affinity json"),
        );
    }
    p
}

/// A member held by a scheduling gate: it counts toward its gang's quorum,
/// so its siblings reach Permit and wait there, reserved, for it.
fn held(name: &str, group: &str) -> Pod {
    gated(pod(name, "1", PER_POD, Some(group)))
}

/// Deletes pods by name.
async fn delete_pods(env: &Env, names: &[String]) {
    let api: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    for name in names {
        api.delete(name, &DeleteParams::default())
            .await
            .expect("delete pod");
    }
}

/// Two members of a three-member gang reserved on a node that is then
/// deleted, the third held by a gate: nothing may be bound to the deleted
/// node. The third is released, the node returns, and the gang binds whole.
async fn node_deleted_under_reservations(env: &Env, cpu: &BTreeMap<String, i64>) {
    let node = cpu.keys().next().expect("a node").clone();
    let group = "gang-nodedel-0";
    create_podgroup(env, NS, group, GANG_SIZE as u32, None).await;
    let early: Vec<String> = (0..2).map(|m| format!("{group}-m{m}")).collect();
    let mut members: Vec<Pod> = early.iter().map(|n| pinned(n, group, &node)).collect();
    let last = format!("{group}-m2");
    members.push(held(&last, group));
    create_pods(env, NS, members).await;
    wait_at_permit(env, &early, cpu).await;
    let nodes: Api<Node> = Api::all(env.client.clone());
    nodes
        .delete(&node, &DeleteParams::default())
        .await
        .expect("delete node");
    let mut without = cpu.clone();
    without.remove(&node);
    ungate(env, NS, &last).await;
    // Until the node returns, no member may bind (to it, or partially): the
    // reserved members were requeued and find no node.
    wait_pods(env, NS, |pods| {
        audit_nodes_exist(pods, &without);
        assert!(
            names_bound(pods, group).is_empty(),
            "no member of {group} binds while its node is gone"
        );
        pods.iter()
            .filter(|(n, _)| n.starts_with(group))
            .filter(|(_, p)| condition_reason(p) == Some("Unschedulable"))
            .count()
            >= 1
            && early.iter().all(|n| {
                pods.get(n)
                    .is_some_and(|p| condition_reason(p) != Some("WaitingAtPermit"))
            })
    })
    .await;
    add_node(env, &node, "4").await;
    PODS.fetch_add(GANG_SIZE, Ordering::Relaxed);
    GANGS.fetch_add(1, Ordering::Relaxed);
    settle(env, "nodedel", GANG_SIZE, cpu).await;
}

/// Patches a PodGroup's `minCount`.
async fn set_min_count(env: &Env, group: &str, min_count: u32) {
    let api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), NS, &podgroup_resource());
    let patch =
        Patch::Merge(json!({"spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}}));
    api.patch(group, &PatchParams::default(), &patch)
        .await
        .expect("patch minCount");
}

/// Two gangs of minCount four whose fourth member is held by a gate, three
/// members waiting at Permit: one's minCount is lowered to three (its three
/// bind), the other's PodGroup is deleted (its members are rejected and wait
/// for a definition, none bound) and recreated with minCount three (they
/// bind).
async fn group_changes_while_waiting(env: &Env, cpu: &BTreeMap<String, i64>) {
    let lowered = "gang-groupchg-0";
    let deleted = "gang-groupchg-1";
    let mut waiting = Vec::new();
    let mut held_back = Vec::new();
    for group in [lowered, deleted] {
        create_podgroup(env, NS, group, GANG_SIZE as u32 + 1, None).await;
        let names: Vec<String> = (0..GANG_SIZE).map(|m| format!("{group}-m{m}")).collect();
        let mut members: Vec<Pod> = names
            .iter()
            .map(|n| pod(n, "1", PER_POD, Some(group)))
            .collect();
        members.push(held(&format!("{group}-held"), group));
        held_back.push(format!("{group}-held"));
        create_pods(env, NS, members).await;
        waiting.extend(names);
    }
    wait_at_permit(env, &waiting, cpu).await;
    set_min_count(env, lowered, GANG_SIZE as u32).await;
    let api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), NS, &podgroup_resource());
    api.delete(deleted, &DeleteParams::default())
        .await
        .expect("delete podgroup");
    // I1 is judged once this settles: a released gang's bindings arrive one
    // event at a time.
    let pods = wait_pods(env, NS, |pods| {
        audit_no_overcommit(pods, cpu);
        assert!(
            names_bound(pods, deleted).is_empty(),
            "no member of {deleted} binds without its PodGroup"
        );
        let lowered_bound = names_bound(pods, lowered).len() == GANG_SIZE;
        let deleted_unbound = names_bound(pods, deleted).is_empty()
            && pods
                .iter()
                .filter(|(n, _)| n.starts_with(deleted))
                .all(|(_, p)| condition_reason(p) != Some("WaitingAtPermit"));
        lowered_bound && deleted_unbound
    })
    .await;
    audit_no_partial_gang(&pods);
    create_podgroup(env, NS, deleted, GANG_SIZE as u32, None).await;
    PODS.fetch_add(2 * (GANG_SIZE + 1), Ordering::Relaxed);
    GANGS.fetch_add(2, Ordering::Relaxed);
    settle(env, "groupchg", 2 * GANG_SIZE, cpu).await;
    delete_pods(env, &held_back).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_no_partial_gang_no_overcommit_no_lost_pod() {
    let mut rng = fastrand::Rng::with_seed(seed());
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

    // The weather steps, in an order drawn from the seed: calm, 20% and 50%
    // failing writes with latency, watch closes, 410 on every resume.
    let mut steps: Vec<(&str, Vec<FaultRule>)> = vec![
        ("calm", Vec::new()),
        ("err20", write_errors(0.2, 0)),
        ("err50", write_errors(0.5, 50)),
        (
            "watchclose",
            vec!["watch-close-every=1s".parse().expect("fault rule")],
        ),
        (
            "gone",
            vec![
                "watch-close-every=1s".parse().expect("fault rule"),
                scheduler_only("resume-gone=1"),
            ],
        ),
    ];
    rng.shuffle(&mut steps);
    for (tag, rules) in steps {
        env.cluster.set_faults(rules);
        let (gangs, plain) = sizes(&mut rng);
        let n = batch(&env, tag, gangs, plain).await;
        settle(&env, tag, n, &cpu).await;
        env.cluster.set_faults(Vec::new());
        clear(&env).await;
    }

    // The scheduler's pod watch stalled while its bindings complete.
    stalled_pod_watch(&env, &cpu).await;
    clear(&env).await;
    // A node deleted under reservations; groups changed under waiting gangs.
    node_deleted_under_reservations(&env, &cpu).await;
    clear(&env).await;
    group_changes_while_waiting(&env, &cpu).await;
    clear(&env).await;

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
        "chaos: summary pods={} gangs={} fault_steps=10 kills=1 freezes=1 i2_audits={} i1_audits={} violations=0",
        PODS.load(Ordering::Relaxed),
        GANGS.load(Ordering::Relaxed),
        AUDITS_I2.load(Ordering::Relaxed),
        AUDITS_I1.load(Ordering::Relaxed),
    );
}
