//! The chaos suite, bounded for `make test`: `muster run` as separate
//! processes against `muster cluster` whose faults change step by step, with
//! kill -9 mid-binding and a leader frozen (SIGSTOP) while a standby takes
//! over, then thawed (SIGCONT). The cluster publishes devices (two GPUs and
//! a NIC many claims share per node, the kwok DRA driver's ResourceSlices,
//! a DeviceClass for each), and every batch but the stall step's contends
//! for them: the first gang's members and up to three plain pods ask for a
//! GPU each through a ResourceClaimTemplate, two pods share one named
//! ResourceClaim, and two take 30G of a NIC's bandwidth each. The
//! cluster is audited from the outside, through the API, as an operator
//! would:
//!
//! - I2 on every pod event: no node's bound, non-terminal pods request more
//!   cpu than it has;
//! - I9 on every ResourceClaim event, and read again from the API when a
//!   step settles: no device (driver, pool, device) is in two claims'
//!   allocations whole (admin access excepted), each share of a shared
//!   device is one claim's, and (read from the API) the shares of a device
//!   consume no more than its capacity; every bound pod with claims has
//!   each claim allocated, reserved for it, and reaching its node;
//! - I1 when a step settles: every gang has none or at least `minCount`
//!   members bound;
//! - I4: every pod is bound once capacity exists (each step's batch fits,
//!   devices included);
//! - the scheduler is alive (it binds the next batch), and a thawed former
//!   leader stands down instead of writing.
//!
//! Steps, the fault steps in an order drawn from the seed (`CHAOS_SEED`,
//! the pinned 42 when unset, `random` for a new one; printed), which also
//! draws each batch's size. First the weather, shuffled: calm; 20% and 50%
//! of the scheduler's writes failing (with latency); watches closed every
//! second; every watch resume of the scheduler told `410 Gone` (a
//! compaction), so it relists; 50% of the scheduler's ResourceClaim status
//! writes failing, then healed. Then, shuffled: the scheduler's pod watch
//! stalled (`CHAOS_STALL_SECONDS`, default 5) while its bindings complete
//! and pods that do not fit wait; a node deleted under reserved gang
//! members, then restored; a waiting gang's minCount lowered, and another
//! waiting gang's PodGroup deleted then recreated; claims deleted under
//! gang members waiting at Permit (neither may bind without its claim; the
//! named claim is made again, the template's pod recreated) and under a pod
//! whose binding is in flight (the claim's delete-protection finalizer
//! keeps it allocated and reserved); a node's ResourceSlice withdrawn under
//! allocated devices, then republished (the allocations outlive it: a
//! waiting pod gets only the device freed). Then another scheduler's pods
//! taking capacity at the same time; kill -9 while bindings are in flight, a
//! new replica finishing; the leader frozen past its lease while a standby
//! takes over, then thawed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::e2e::*;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{
    DeviceClass, DeviceRequestAllocationResult, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use muster::apiserver::fault::FaultRule;
use muster::kwok::devices::DeviceTemplate;
use serde_json::json;

use std::sync::atomic::{AtomicUsize, Ordering};

const NS: &str = "default";

/// What this run did, printed at the end for `make chaos`'s report.
static AUDITS_I2: AtomicUsize = AtomicUsize::new(0);
static AUDITS_I1: AtomicUsize = AtomicUsize::new(0);
static AUDITS_I9: AtomicUsize = AtomicUsize::new(0);
static DRA_PODS: AtomicUsize = AtomicUsize::new(0);
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

/// On a failing run, prints the end of each scheduler's log before the
/// temporary directory holding them goes.
struct TailLogsOnPanic(PathBuf);

impl Drop for TailLogsOnPanic {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let Ok(entries) = std::fs::read_dir(&self.0) else {
            return;
        };
        let mut logs: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .collect();
        logs.sort();
        for log in logs {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(40)..];
            eprintln!(
                "chaos: the last lines of {}:\n{}",
                log.display(),
                tail.join("\n")
            );
        }
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

/// `gangs` gangs of three 1-cpu members and `plain` 1-cpu pods, tagged,
/// with devices: the first gang's members and up to three plain pods ask
/// for a GPU each (their own claims, from a template), and two pods share
/// one named claim of a GPU (created first, so they are placed early; they
/// request no cpu, so each step's cpu arithmetic is that of its 1-cpu pods).
async fn batch(env: &Env, tag: &str, gangs: usize, plain: usize) -> usize {
    batch_of(env, tag, gangs, plain, Gpus::All).await
}

/// Which pods of a batch claim GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gpus {
    None,
    /// Only the two pods sharing one named claim, and the two taking a
    /// share of a NIC (they request no cpu, so they fit wherever a GPU or
    /// bandwidth is free: a batch that fills the last free cpus never
    /// depends on free cpus and free GPUs being on one node).
    Shared,
    /// Those, the first gang's members and three plain pods.
    All,
}

/// [`batch`], with the GPUs `gpus` says.
async fn batch_of(env: &Env, tag: &str, gangs: usize, plain: usize, gpus: Gpus) -> usize {
    let devices = gpus == Gpus::All;
    let mut pods = Vec::new();
    if gpus != Gpus::None {
        let shared = format!("shared-{tag}");
        create_named_claim(env, &shared).await;
        for i in 0..2 {
            let p = pod(&format!("plain-{tag}-s{i}"), "0", "muster", None);
            pods.push(with_gpu(p, Gpu::Named(&shared)));
        }
        // Two shares of NICs (each node's NIC holds three such).
        for i in 0..2 {
            let claim = format!("net-{tag}-{i}");
            create_net_claim(env, &claim).await;
            let p = pod(&format!("plain-{tag}-n{i}"), "0", "muster", None);
            pods.push(with_net(p, &claim));
        }
    }
    for g in 0..gangs {
        let group = format!("gang-{tag}-{g}");
        create_podgroup(env, NS, &group, GANG_SIZE as u32, None).await;
        for m in 0..GANG_SIZE {
            let p = pod(&format!("{group}-m{m}"), "1", "muster", Some(&group));
            pods.push(if devices && g == 0 {
                with_gpu(p, Gpu::Own)
            } else {
                p
            });
        }
    }
    for i in 0..plain {
        let p = pod(&format!("plain-{tag}-{i}"), "1", "muster", None);
        pods.push(if devices && i < 3 {
            with_gpu(p, Gpu::Own)
        } else {
            p
        });
    }
    let n = pods.len();
    PODS.fetch_add(n, Ordering::Relaxed);
    GANGS.fetch_add(gangs, Ordering::Relaxed);
    create_pods(env, NS, pods).await;
    n
}

/// Waits until every pod of `tag` is bound, auditing I2 on every event (and
/// I9 on every claim event), then I1 and I9 read from the API.
async fn settle(env: &Env, tag: &str, count: usize, cpu: &BTreeMap<String, i64>) {
    eprintln!("chaos: step {tag}: waiting for {count} pods");
    let pods = wait_audited(env, |pods| {
        audit_no_overcommit(pods, cpu);
        pods.iter()
            .filter(|(n, p)| n.contains(&format!("-{tag}-")) && bound(p))
            .count()
            >= count
    })
    .await;
    audit_no_overcommit(&pods, cpu);
    audit_no_partial_gang(&pods);
    audit_i9(env).await;
}

/// Deletes every pod, then every claim (the next step starts on an empty
/// cluster, its devices all free).
async fn clear(env: &Env) {
    let api: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    api.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .expect("delete pods");
    wait_audited(env, BTreeMap::is_empty).await;
    let claims: Api<ResourceClaim> = Api::namespaced(env.client.clone(), NS);
    claims
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .expect("delete claims");
    wait_world(env, |w| w.claims.is_empty()).await;
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
    let n = batch_of(env, "stall", 4, total as usize - 12 + overflow, Gpus::None).await;
    // Wait until the scheduler has seen every pod: the overflow is refused
    // because the rest hold (assumed) capacity.
    let seen = wait_audited(env, |pods| {
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
        wait_audited(env, |pods| {
            audit_no_overcommit(pods, cpu);
            false
        })
        .await
    };
    let _ = tokio::time::timeout(stall_for(), stalled).await;
    env.cluster.set_faults(Vec::new());
    let pods = wait_audited(env, |pods| {
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
    let pods = wait_audited(env, |pods| {
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

/// A pod sent back from Permit whose claims are gone: it waits for them
/// (`WaitingForResourceClaims` at the gate), or, refused before the gate
/// saw the deletion, for room (`Unschedulable`).
fn waiting_for_claims(p: &Pod) -> bool {
    matches!(
        condition_reason(p),
        Some("WaitingForResourceClaims") | Some("Unschedulable")
    )
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
    wait_audited(env, |pods| {
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
    let saved = nodes.get(&node).await.expect("the node");
    nodes
        .delete(&node, &DeleteParams::default())
        .await
        .expect("delete node");
    let mut without = cpu.clone();
    without.remove(&node);
    // The scheduler has seen the node go (the reserved members leave
    // Permit) before the third member is released: were it released first,
    // the quorum would bind the members to a node the scheduler still
    // believes in, as any scheduler would.
    wait_audited(env, |pods| {
        audit_nodes_exist(pods, &without);
        early.iter().all(|n| {
            pods.get(n)
                .is_some_and(|p| condition_reason(p) != Some("WaitingAtPermit"))
        })
    })
    .await;
    ungate(env, NS, &last).await;
    // Until the node returns, no member may bind (to it, or partially): the
    // reserved members were requeued and find no node.
    wait_audited(env, |pods| {
        audit_nodes_exist(pods, &without);
        assert!(
            names_bound(pods, group).is_empty(),
            "no member of {group} binds while its node {node} is gone: {:?}",
            names_bound(pods, group)
                .iter()
                .map(|n| (n, pods[*n].spec.as_ref().and_then(|s| s.node_name.clone())))
                .collect::<Vec<_>>()
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
    restore_node(env, saved).await;
    PODS.fetch_add(GANG_SIZE, Ordering::Relaxed);
    GANGS.fetch_add(1, Ordering::Relaxed);
    settle(env, "nodedel", GANG_SIZE, cpu).await;
}

/// Creates a deleted node again as it was (labels, devices annotation, so
/// its DRA driver republishes its slice).
async fn restore_node(env: &Env, mut saved: Node) {
    let meta = &mut saved.metadata;
    meta.resource_version = None;
    meta.uid = None;
    meta.creation_timestamp = None;
    meta.managed_fields = None;
    meta.deletion_timestamp = None;
    Api::<Node>::all(env.client.clone())
        .create(&PostParams::default(), &saved)
        .await
        .expect("create node");
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
    let pods = wait_audited(env, |pods| {
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
    let mut template = nodes(6, "4");
    let mut devices = DeviceTemplate::with_count(DEVICES_PER_NODE);
    devices.shared = Some(muster::kwok::devices::Shared::nic("100G", "10G", "10G"));
    template.devices = Some(devices);
    let env = cluster(vec![template]).await;
    publish_device_class(&env).await;
    let tmp = tempfile::tempdir().expect("tempdir");
    let keep = std::env::var_os("CHAOS_KEEP_LOGS").is_some();
    eprintln!("chaos: scheduler logs in {}", tmp.path().display());
    let dir = write_rules(tmp.path(), &env);
    let _tails = TailLogsOnPanic(dir.clone());
    let _kept = keep.then(|| tmp.path().to_path_buf());
    if keep {
        std::mem::forget(tmp);
    }
    let cpu = allocatable(&env).await;
    let a = spawn_scheduler(&dir, "a");

    // The weather steps, in an order drawn from the seed: calm, 20% and 50%
    // failing writes with latency, watch closes, 410 on every resume, 50%
    // of the scheduler's claim status writes failing.
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
        ("claimerr", claim_write_errors()),
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

    // The faults under waiting and binding pods, in an order drawn from the
    // seed: the scheduler's pod watch stalled while its bindings complete; a
    // node deleted under reservations; groups changed under waiting gangs;
    // claims deleted under waiting and binding pods; a slice withdrawn under
    // allocated devices.
    let mut faults = ["stall", "nodedel", "groupchg", "claimdel", "slice"];
    rng.shuffle(&mut faults);
    for fault in faults {
        eprintln!("chaos: step {fault}");
        match fault {
            "stall" => stalled_pod_watch(&env, &cpu).await,
            "nodedel" => node_deleted_under_reservations(&env, &cpu).await,
            "groupchg" => group_changes_while_waiting(&env, &cpu).await,
            "claimdel" => claims_deleted_under_pods(&env, &cpu).await,
            _ => slice_withdrawn_under_allocations(&env, &cpu).await,
        }
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
    wait_audited(&env, |pods| {
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
    // The frozen step's pods stay (the thawed leader's stale view lacks
    // them), using 18 of the 24 cpus and 7 of the 12 GPUs: this batch takes
    // the last 6 cpus with cpu-only gangs, and a GPU through the shared
    // claim. Gang members with GPUs of their own would need a free cpu and
    // a free GPU on one node, which the frozen step's placement may not
    // leave.
    let n = batch_of(&env, "thawed", 2, 0, Gpus::Shared).await;
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
        "chaos: summary pods={} gangs={} dra_pods={} fault_steps=13 kills=1 freezes=1 i2_audits={} i1_audits={} i9_audits={} violations=0",
        PODS.load(Ordering::Relaxed),
        GANGS.load(Ordering::Relaxed),
        DRA_PODS.load(Ordering::Relaxed),
        AUDITS_I2.load(Ordering::Relaxed),
        AUDITS_I1.load(Ordering::Relaxed),
        AUDITS_I9.load(Ordering::Relaxed),
    );
}

// ---- Devices (DRA): the class, the claims, and the I9 audit ----

/// The kwok DRA driver's devices: `DEVICES_PER_NODE` GPUs and a shared NIC
/// (100G of bandwidth, in steps of 10G) on each node, in a pool named after
/// the node, published in one ResourceSlice per node.
const DRIVER: &str = muster::kwok::devices::DEFAULT_DRIVER;
const DEVICES_PER_NODE: usize = 2;
/// The class of the shared NICs.
const NIC_CLASS: &str = "nic.kwok.muster.dev";
/// A template of one GPU (each pod's own claim).
const ONE_GPU: &str = "one-gpu";

/// The DeviceClasses of the driver's GPUs and NICs, and a template of one
/// GPU.
async fn publish_device_class(env: &Env) {
    for (name, shared) in [(DRIVER, "!"), (NIC_CLASS, "")] {
        let class: DeviceClass = serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": format!(
                "device.driver == \"{DRIVER}\" && {shared}device.allowMultipleAllocations")}}]}
        }))
        .expect("class json");
        Api::<DeviceClass>::all(env.client.clone())
            .create(&PostParams::default(), &class)
            .await
            .expect("create device class");
    }
    let template: ResourceClaimTemplate = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": ONE_GPU, "namespace": NS},
        "spec": {"spec": one_gpu_spec()}
    }))
    .expect("template json");
    Api::<ResourceClaimTemplate>::namespaced(env.client.clone(), NS)
        .create(&PostParams::default(), &template)
        .await
        .expect("create claim template");
}

fn one_gpu_spec() -> serde_json::Value {
    json!({"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": DRIVER, "allocationMode": "ExactCount", "count": 1
    }}]}})
}

/// Creates a named claim of one GPU (several pods may share it).
async fn create_named_claim(env: &Env, name: &str) {
    let claim: ResourceClaim = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": one_gpu_spec()
    }))
    .expect("claim json");
    Api::<ResourceClaim>::namespaced(env.client.clone(), NS)
        .create(&PostParams::default(), &claim)
        .await
        .expect("create claim");
}

/// A claim of its own for 30G of a shared NIC's bandwidth.
async fn create_net_claim(env: &Env, name: &str) {
    let claim: ResourceClaim = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"devices": {"requests": [{"name": "net", "exactly": {
            "deviceClassName": NIC_CLASS,
            "capacity": {"requests": {"bandwidth": "30G"}},
        }}]}}
    }))
    .expect("claim json");
    Api::<ResourceClaim>::namespaced(env.client.clone(), NS)
        .create(&PostParams::default(), &claim)
        .await
        .expect("create claim");
}

/// `p` taking its share of a NIC through the claim `claim`.
fn with_net(p: Pod, claim: &str) -> Pod {
    let mut v = serde_json::to_value(p).expect("pod json");
    v["spec"]["resourceClaims"] = json!([{"name": "net", "resourceClaimName": claim}]);
    v["spec"]["containers"][0]["resources"]["claims"] = json!([{"name": "net"}]);
    DRA_PODS.fetch_add(1, Ordering::Relaxed);
    serde_json::from_value(v).expect("pod json")
}

/// Where a pod's claim `gpu` comes from.
enum Gpu<'a> {
    /// Its own claim, made from [`ONE_GPU`] by the resourceclaim controller.
    Own,
    /// A named claim, possibly shared.
    Named(&'a str),
}

/// `p` asking for one GPU through its claim `gpu`.
fn with_gpu(p: Pod, gpu: Gpu<'_>) -> Pod {
    let mut v = serde_json::to_value(p).expect("pod json");
    let source = match gpu {
        Gpu::Own => json!({"name": "gpu", "resourceClaimTemplateName": ONE_GPU}),
        Gpu::Named(n) => json!({"name": "gpu", "resourceClaimName": n}),
    };
    v["spec"]["resourceClaims"] = json!([source]);
    v["spec"]["containers"][0]["resources"]["claims"] = json!([{"name": "gpu"}]);
    DRA_PODS.fetch_add(1, Ordering::Relaxed);
    serde_json::from_value(v).expect("pod json")
}

/// `p` required on `node` (by name).
fn on_node(mut p: Pod, node: &str) -> Pod {
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

/// The pods and the claims of the namespace, as two watches see them.
#[derive(Default)]
struct World {
    pods: BTreeMap<String, Pod>,
    claims: BTreeMap<String, ResourceClaim>,
}

/// One kind's objects as a watch sees them: a relist replaces them whole.
struct Mirror<K> {
    items: BTreeMap<String, K>,
    listing: Option<BTreeMap<String, K>>,
    synced: bool,
}

impl<K: kube::Resource> Mirror<K> {
    fn new() -> Self {
        Mirror {
            items: BTreeMap::new(),
            listing: None,
            synced: false,
        }
    }

    fn apply(&mut self, ev: watcher::Event<K>) {
        let name = |o: &K| o.meta().name.clone().unwrap_or_default();
        match ev {
            watcher::Event::Init => self.listing = Some(BTreeMap::new()),
            watcher::Event::InitApply(o) => {
                if let Some(l) = self.listing.as_mut() {
                    l.insert(name(&o), o);
                }
            }
            watcher::Event::InitDone => {
                self.items = self.listing.take().unwrap_or_default();
                self.synced = true;
            }
            watcher::Event::Apply(o) => {
                self.items.insert(name(&o), o);
            }
            watcher::Event::Delete(o) => {
                self.items.remove(&name(&o));
            }
        }
    }

    fn ready(&self) -> bool {
        self.synced && self.listing.is_none()
    }
}

/// Watches the namespace's pods and claims until `done` holds, auditing I9
/// on every claim event (and every pod event: a bound pod's claims); the
/// state it ended on.
async fn wait_world<F>(env: &Env, mut done: F) -> World
where
    F: FnMut(&World) -> bool,
{
    use futures::StreamExt;
    enum Ev {
        Pod(Box<watcher::Event<Pod>>),
        Claim(Box<watcher::Event<ResourceClaim>>),
    }
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let claims: Api<ResourceClaim> = Api::namespaced(env.client.clone(), NS);
    let pods =
        watcher::watcher(pods, watcher::Config::default()).map(|e| e.map(|e| Ev::Pod(Box::new(e))));
    let claims = watcher::watcher(claims, watcher::Config::default())
        .map(|e| e.map(|e| Ev::Claim(Box::new(e))));
    let mut stream = futures::stream::select(Box::pin(pods), Box::pin(claims));
    let (mut p, mut c) = (Mirror::<Pod>::new(), Mirror::<ResourceClaim>::new());
    let wait = async {
        while let Some(ev) = stream.next().await {
            let claim_event = match ev.expect("watch") {
                Ev::Pod(e) => {
                    p.apply(*e);
                    false
                }
                Ev::Claim(e) => {
                    c.apply(*e);
                    true
                }
            };
            if !(p.ready() && c.ready()) {
                continue;
            }
            let world = World {
                pods: std::mem::take(&mut p.items),
                claims: std::mem::take(&mut c.items),
            };
            if claim_event {
                AUDITS_I9.fetch_add(1, Ordering::Relaxed);
                if let Err(why) = devices_audited(&world.claims, &[]) {
                    panic!("I9: {why}");
                }
            }
            // The two watches are not ordered with each other: a binding may
            // be seen before its claim's reservation. A doubt is settled by
            // reading the API again.
            if pods_hold_their_claims(&world, None).is_err() {
                audit_i9(env).await;
            }
            let finished = done(&world);
            p.items = world.pods;
            c.items = world.claims;
            if finished {
                return World {
                    pods: p.items,
                    claims: c.items,
                };
            }
        }
        panic!("watch ended");
    };
    tokio::time::timeout(HANG_GUARD, wait)
        .await
        .expect("condition reached before the hang guard")
}

/// [`wait_world`] for a condition on pods.
async fn wait_audited<F>(env: &Env, mut done: F) -> BTreeMap<String, Pod>
where
    F: FnMut(&BTreeMap<String, Pod>) -> bool,
{
    wait_world(env, |w| done(&w.pods)).await.pods
}

fn results(c: &ResourceClaim) -> Vec<DeviceRequestAllocationResult> {
    c.status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.clone())
        .unwrap_or_default()
}

/// I9 over the cluster's claims, by the audit the scheduler's own checks
/// use (`muster::dra::audit`): no device is in two claims' allocations
/// whole (admin access excepted), nor whole in one and shared by another,
/// each share of a shared device is one claim's, and, where `slices`
/// publish the device, its shares consume no more than its capacities.
fn devices_audited(
    claims: &BTreeMap<String, ResourceClaim>,
    slices: &[muster::dra::Slice],
) -> Result<(), String> {
    let parsed = claims
        .iter()
        .map(|(name, c)| {
            muster::dra::Claim::from_api(c)
                .map(|c| (name.clone(), c))
                .map_err(|e| format!("claim {name}: {e}"))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let held = parsed.iter().flat_map(|(name, c)| {
        c.allocation
            .iter()
            .flat_map(|a| &a.results)
            .map(move |r| (name.clone(), r))
    });
    let found =
        muster::dra::audit::violations(held, |id| muster::dra::audit::published(slices, id));
    found.into_iter().next().map_or(Ok(()), Err)
}

/// The name of the ResourceClaim a pod's claim entry resolves to (a
/// template's: as recorded in the pod's status).
fn claim_names(p: &Pod) -> Vec<(String, Option<String>)> {
    let spec = p.spec.as_ref();
    let recorded = p
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.clone())
        .unwrap_or_default();
    spec.and_then(|s| s.resource_claims.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|e| {
            let name = e.resource_claim_name.clone().or_else(|| {
                recorded
                    .iter()
                    .find(|r| r.name == e.name)
                    .and_then(|r| r.resource_claim_name.clone())
            });
            (e.name, name)
        })
        .collect()
}

/// Does the allocation reach `node`: its node selector selects the node,
/// or (none) every device is in the node's own pool?
fn reaches(
    c: &ResourceClaim,
    node: &str,
    labels: Option<&BTreeMap<String, BTreeMap<String, String>>>,
) -> bool {
    let Some(a) = c.status.as_ref().and_then(|s| s.allocation.as_ref()) else {
        return false;
    };
    let Some(selector) = &a.node_selector else {
        return results(c).iter().all(|r| r.pool == node);
    };
    let empty = BTreeMap::new();
    let labels = labels.and_then(|l| l.get(node)).unwrap_or(&empty);
    selector.node_selector_terms.iter().any(|t| {
        let fields = t.match_fields.iter().flatten().all(|f| {
            f.key == "metadata.name"
                && match f.operator.as_str() {
                    "In" => f.values.iter().flatten().any(|v| v == node),
                    "NotIn" => !f.values.iter().flatten().any(|v| v == node),
                    _ => false,
                }
        });
        let exprs = t.match_expressions.iter().flatten().all(|e| {
            let have = labels.get(&e.key);
            let values = e.values.clone().unwrap_or_default();
            match e.operator.as_str() {
                "In" => have.is_some_and(|v| values.contains(v)),
                "NotIn" => have.is_none_or(|v| !values.contains(v)),
                "Exists" => have.is_some(),
                "DoesNotExist" => have.is_none(),
                _ => false,
            }
        });
        fields && exprs
    })
}

/// I9, pods: every bound, live pod with claims has each claim allocated,
/// reserved for it, and reaching its node.
fn pods_hold_their_claims(
    w: &World,
    labels: Option<&BTreeMap<String, BTreeMap<String, String>>>,
) -> Result<(), String> {
    for (name, p) in &w.pods {
        if terminal(p) || p.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) else {
            continue;
        };
        let uid = p.metadata.uid.as_deref().unwrap_or_default();
        for (entry, claim) in claim_names(p) {
            let Some(claim) = claim else {
                return Err(format!("pod {name} bound with claim {entry} never made"));
            };
            let Some(c) = w.claims.get(&claim) else {
                return Err(format!(
                    "pod {name} bound on {node} without its claim {claim}"
                ));
            };
            let status = c.status.as_ref();
            if status.and_then(|s| s.allocation.as_ref()).is_none() {
                return Err(format!("pod {name} bound with claim {claim} unallocated"));
            }
            let reserved = status
                .and_then(|s| s.reserved_for.as_ref())
                .is_some_and(|r| r.iter().any(|r| r.uid == uid));
            if !reserved {
                return Err(format!(
                    "pod {name} bound, claim {claim} not reserved for it"
                ));
            }
            if !reaches(c, node, labels) {
                return Err(format!(
                    "pod {name} bound on {node}, claim {claim} allocated elsewhere: {:?}",
                    c.status.as_ref().and_then(|s| s.allocation.as_ref())
                ));
            }
        }
    }
    Ok(())
}

/// I9 read from the API: pods, then claims, then pods again; a pod bound
/// in both pod reads (the same pod, alive) had its claims allocated and
/// reserved for it when they were read. Panics on a violation.
async fn audit_i9(env: &Env) {
    AUDITS_I9.fetch_add(1, Ordering::Relaxed);
    let pod_api: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let claim_api: Api<ResourceClaim> = Api::namespaced(env.client.clone(), NS);
    let by_name = |items: Vec<Pod>| -> BTreeMap<String, Pod> {
        items
            .into_iter()
            .map(|p| (p.metadata.name.clone().unwrap_or_default(), p))
            .collect()
    };
    let lp = ListParams::default();
    let before = by_name(pod_api.list(&lp).await.expect("pods").items);
    let claims: BTreeMap<String, ResourceClaim> = claim_api
        .list(&lp)
        .await
        .expect("claims")
        .items
        .into_iter()
        .map(|c| (c.metadata.name.clone().unwrap_or_default(), c))
        .collect();
    let after = by_name(pod_api.list(&lp).await.expect("pods").items);
    let labels: BTreeMap<String, BTreeMap<String, String>> = Api::<Node>::all(env.client.clone())
        .list(&lp)
        .await
        .expect("nodes")
        .items
        .into_iter()
        .map(|n| {
            (
                n.metadata.name.clone().unwrap_or_default(),
                n.metadata.labels.clone().unwrap_or_default(),
            )
        })
        .collect();
    let node_of = |p: &Pod| p.spec.as_ref().and_then(|s| s.node_name.clone());
    let pods = after
        .into_iter()
        .filter(|(n, p)| {
            before.get(n).is_some_and(|b| {
                b.metadata.uid == p.metadata.uid && node_of(b).is_some() && node_of(b) == node_of(p)
            })
        })
        .collect();
    let slices: Vec<muster::dra::Slice> = Api::<ResourceSlice>::all(env.client.clone())
        .list(&lp)
        .await
        .expect("slices")
        .items
        .iter()
        .map(|s| muster::dra::Slice::from_api(s).expect("a published slice reads"))
        .collect();
    if let Err(why) = devices_audited(&claims, &slices) {
        panic!("I9: {why}");
    }
    let world = World { pods, claims };
    if let Err(why) = pods_hold_their_claims(&world, Some(&labels)) {
        panic!("I9: {why}");
    }
}

/// The ResourceClaim a pod's claim `gpu` resolves to, if it is known.
fn gpu_claim<'a>(w: &'a World, pod: &str) -> Option<&'a ResourceClaim> {
    let p = w.pods.get(pod)?;
    let (_, name) = claim_names(p).into_iter().next()?;
    w.claims.get(&name?)
}

/// The device allocated to a pod's claim `gpu`.
fn gpu_of(w: &World, pod: &str) -> Option<String> {
    results(gpu_claim(w, pod)?)
        .first()
        .map(|r| r.device.clone())
}

/// Is the pod's claim `gpu` reserved for it?
fn gpu_reserved(w: &World, pod: &str) -> bool {
    let uid = w.pods.get(pod).and_then(|p| p.metadata.uid.clone());
    gpu_claim(w, pod)
        .and_then(|c| c.status.as_ref()?.reserved_for.clone())
        .is_some_and(|r| r.iter().any(|r| Some(&r.uid) == uid.as_ref()))
}

/// The scheduler's claim status writes (allocation and reservation) fail
/// at 50%.
fn claim_write_errors() -> Vec<FaultRule> {
    vec![scheduler_only(
        "verb=update,resource=resourceclaims/status,rate=0.5,code=500",
    )]
}

async fn delete_claim(env: &Env, name: &str) {
    Api::<ResourceClaim>::namespaced(env.client.clone(), NS)
        .delete(name, &DeleteParams::default())
        .await
        .expect("delete claim");
}

/// Deletes a pod and creates it again once it is gone (as its Job would):
/// a claim made from a template is made anew for the new pod.
async fn recreate_pod(env: &Env, p: Pod) {
    let name = p.metadata.name.clone().unwrap_or_default();
    delete_pods(env, std::slice::from_ref(&name)).await;
    wait_audited(env, |pods| !pods.contains_key(&name)).await;
    create_pods(env, NS, vec![p]).await;
}

/// Claims deleted under pods that rely on them. (1) At Permit: two members
/// of a gang wait reserved (their devices planned, not yet written), the
/// third held by a gate; one member's own claim and the other's named claim
/// are deleted, the third released. Neither may bind without its claim; the
/// named claim is made again and the member with its own claim recreated
/// (its claim is made anew), and the gang binds whole. (2) In flight: a
/// pod's claim is deleted after the scheduler wrote its allocation and
/// reservation, while the binding is delayed: the claim's delete-protection
/// finalizer holds it (allocated, reserved) until the pod is gone.
async fn claims_deleted_under_pods(env: &Env, cpu: &BTreeMap<String, i64>) {
    let group = "gang-claimdel-0";
    let named = "claimdel-named";
    create_podgroup(env, NS, group, GANG_SIZE as u32, None).await;
    create_named_claim(env, named).await;
    let [m0, m1, m2] = [0, 1, 2].map(|m| format!("{group}-m{m}"));
    let own = || with_gpu(pod(&m0, "1", PER_POD, Some(group)), Gpu::Own);
    create_pods(
        env,
        NS,
        vec![
            own(),
            with_gpu(pod(&m1, "1", PER_POD, Some(group)), Gpu::Named(named)),
            held(&m2, group),
        ],
    )
    .await;
    let early = [m0.clone(), m1.clone()];
    wait_at_permit(env, &early, cpu).await;
    let world = wait_world(env, |w| gpu_claim(w, &m0).is_some()).await;
    let own_claim = gpu_claim(&world, &m0)
        .and_then(|c| c.metadata.name.clone())
        .expect("m0's claim");
    delete_claim(env, &own_claim).await;
    delete_claim(env, named).await;
    ungate(env, NS, &m2).await;
    wait_audited(env, |pods| {
        audit_no_overcommit(pods, cpu);
        early.iter().all(|n| {
            pods.get(n)
                .is_some_and(|p| !bound(p) && waiting_for_claims(p))
        })
    })
    .await;
    create_named_claim(env, named).await;
    recreate_pod(env, own()).await;
    PODS.fetch_add(GANG_SIZE, Ordering::Relaxed);
    GANGS.fetch_add(1, Ordering::Relaxed);
    settle(env, "claimdel", GANG_SIZE, cpu).await;

    // (2) The binding delayed; the claim deleted once written.
    env.cluster.set_faults(vec![scheduler_only(
        "resource=pods/binding,latency-ms=1500",
    )]);
    let name = "plain-claimbind-0";
    create_pods(
        env,
        NS,
        vec![with_gpu(pod(name, "1", "muster", None), Gpu::Own)],
    )
    .await;
    let world = wait_world(env, |w| {
        w.pods.get(name).is_some_and(|p| !bound(p)) && gpu_reserved(w, name)
    })
    .await;
    let claim = gpu_claim(&world, name)
        .and_then(|c| c.metadata.name.clone())
        .expect("the claim");
    delete_claim(env, &claim).await;
    PODS.fetch_add(1, Ordering::Relaxed);
    settle(env, "claimbind", 1, cpu).await;
    env.cluster.set_faults(Vec::new());
    let world = wait_world(env, |_| true).await;
    let held = world
        .claims
        .get(&claim)
        .expect("a reserved claim is not removed");
    assert!(
        held.metadata.deletion_timestamp.is_some() && gpu_reserved(&world, name),
        "{claim}: marked deleted, still reserved for {name}"
    );
}

/// Waits until the ResourceSlice `name` exists (`present`) or not.
async fn wait_slice(env: &Env, name: &str, present: bool) {
    use futures::StreamExt;
    let api: Api<ResourceSlice> = Api::all(env.client.clone());
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut stream = Box::pin(watcher::watcher(api, config));
    let mut m = Mirror::<ResourceSlice>::new();
    let wait = async {
        while let Some(ev) = stream.next().await {
            m.apply(ev.expect("slice watch"));
            if m.ready() && m.items.contains_key(name) == present {
                return;
            }
        }
        panic!("slice watch ended");
    };
    tokio::time::timeout(HANG_GUARD, wait)
        .await
        .expect("slice change before the hang guard");
}

/// A node's ResourceSlice withdrawn under its allocated devices, then
/// republished: both its devices are allocated to pods bound there when the
/// slice is deleted; a pod for the node's devices waits while they are
/// withdrawn and, once republished, while they are still held (an
/// allocation must outlive its slice's absence); the pod holding `gpu-1`
/// is deleted, and the waiting pod binds with `gpu-1`, never `gpu-0`.
async fn slice_withdrawn_under_allocations(env: &Env, cpu: &BTreeMap<String, i64>) {
    let node = cpu.keys().nth(1).expect("a node").clone();
    let holders = ["plain-slice-h0".to_string(), "plain-slice-h1".to_string()];
    let on = |name: &str| on_node(with_gpu(pod(name, "1", "muster", None), Gpu::Own), &node);
    create_pods(env, NS, holders.iter().map(|h| on(h)).collect()).await;
    let world = wait_world(env, |w| {
        holders
            .iter()
            .all(|h| w.pods.get(h).is_some_and(bound) && gpu_reserved(w, h))
    })
    .await;
    let keep = holders
        .iter()
        .find(|h| gpu_of(&world, h).as_deref() == Some("gpu-0"))
        .expect("a holder of gpu-0")
        .clone();
    let free = holders
        .iter()
        .find(|h| **h != keep)
        .expect("the other")
        .clone();
    let freed = gpu_of(&world, &free).expect("its device");
    let slice = muster::kwok::devices::node_slice_name(&node, DRIVER);
    Api::<ResourceSlice>::all(env.client.clone())
        .delete(&slice, &DeleteParams::default())
        .await
        .expect("delete slice");
    wait_slice(env, &slice, false).await;
    let probe = "plain-slice-probe";
    create_pods(env, NS, vec![on(probe)]).await;
    wait_audited(env, |pods| {
        audit_no_overcommit(pods, cpu);
        pods.get(probe)
            .is_some_and(|p| !bound(p) && condition_reason(p) == Some("Unschedulable"))
    })
    .await;
    // The driver republishes the node's slice when the node changes.
    let patch =
        Patch::Merge(json!({"metadata": {"labels": {"chaos.muster.dev/republished": "true"}}}));
    Api::<Node>::all(env.client.clone())
        .patch(&node, &PatchParams::default(), &patch)
        .await
        .expect("label node");
    wait_slice(env, &slice, true).await;
    delete_pods(env, std::slice::from_ref(&free)).await;
    let world = wait_world(env, |w| {
        audit_no_overcommit(&w.pods, cpu);
        w.pods.get(probe).is_some_and(bound) && gpu_reserved(w, probe)
    })
    .await;
    assert_eq!(
        gpu_of(&world, probe).as_deref(),
        Some(freed.as_str()),
        "the waiting pod gets the freed device, not {keep}'s"
    );
    PODS.fetch_add(3, Ordering::Relaxed);
    audit_i9(env).await;
}
