//! Preemption end to end, with the real kubectl against `muster cluster`
//! and the daemon: PriorityClasses, PodGroups, a PodDisruptionBudget and
//! pods applied with kubectl; victims deleted by the daemon (their
//! `DisruptionTarget` condition first) and terminated by the simulated
//! kubelet; the preemptor bound once they are gone.
//!
//! - Low-priority gangs and plain pods fill the cluster; a high-priority
//!   gang arrives: whole low gangs are evicted (none left partial), the
//!   PDB-protected pod is spared since another choice exists, and the high
//!   gang binds.
//! - A rack-constrained gang frees exactly the one rack cheapest to free.
//!
//! The low pods are created already bound (`spec.nodeName`), as another
//! scheduler would have placed them, so the layout is known.
//!
//! kubectl comes from $MUSTER_KUBECTL or `.tools/kubectl`, fetched with
//! `tests/support/fetch-tools.sh` when missing.

use crate::e2e;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use muster::kwok::templates::NodeTemplate;

use crate::common::kubectl::Kubectl;
use crate::e2e::{Env, bound, test_config, wait_event, wait_pods};

const RACK: &str = "topology.kubernetes.io/rack";

const CLASSES: &str = "apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 10
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: mid}
value: 100
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
";

/// Nodes `<prefix>-0..n` of 2 cores, labelled with `rack` when given.
fn rack_nodes(prefix: &str, n: usize, rack: Option<&str>) -> NodeTemplate {
    let mut t = e2e::nodes(n, "2");
    t.name_prefix = prefix.to_string();
    if let Some(r) = rack {
        t.labels.insert(RACK.to_string(), r.to_string());
    }
    t
}

async fn start(templates: Vec<NodeTemplate>) -> (Env, Kubectl, muster::daemon::RunningDaemon) {
    let env = e2e::cluster(templates).await;
    let k = Kubectl::for_cluster(&env.cluster);
    k.apply(CLASSES).await;
    let d = e2e::daemon(&env, test_config("")).await;
    e2e::wait_ready(&d).await;
    (env, k, d)
}

/// A pod manifest: `cpu` cores, priority class `class`, in PodGroup
/// `group` when given, already on `node` when given, labelled `app`.
fn pod(name: &str, cpu: &str, class: &str, group: Option<&str>, node: Option<&str>) -> String {
    let app = name.split('-').next().unwrap_or(name);
    let group = group.map_or(String::new(), |g| {
        format!("\n  schedulingGroup: {{podGroupName: {g}}}")
    });
    let node = node.map_or(String::new(), |n| format!("\n  nodeName: {n}"));
    format!(
        "apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default, labels: {{app: {app}}}}}
spec:
  schedulerName: muster
  priorityClassName: {class}
  terminationGracePeriodSeconds: 1{group}{node}
  containers:
  - name: main
    image: busybox
    resources: {{requests: {{cpu: \"{cpu}\", memory: 100Mi}}}}
---
"
    )
}

fn podgroup(name: &str, min_count: usize, class: &str, extra: &str) -> String {
    format!(
        "apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {{name: {name}, namespace: default}}
spec:
  priorityClassName: {class}
  schedulingPolicy:
    gang: {{minCount: {min_count}}}
{extra}---
"
    )
}

fn nodes_of(pods: &BTreeMap<String, Pod>, prefix: &str) -> Vec<String> {
    pods.iter()
        .filter(|(n, p)| n.starts_with(prefix) && bound(p))
        .filter_map(|(_, p)| p.spec.as_ref()?.node_name.clone())
        .collect()
}

fn count(pods: &BTreeMap<String, Pod>, prefix: &str) -> usize {
    pods.keys().filter(|n| n.starts_with(prefix)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_high_priority_gang_evicts_whole_low_gangs_and_spares_the_protected_pod() {
    let (env, k, d) = start(vec![rack_nodes("n", 4, None)]).await;
    // n-0: gang lowa (2 x 1 core); n-1: gang lowb; n-2: web-0, protected
    // by a budget allowing no disruption; n-3: batch-0.
    let mut low = podgroup("lowa", 2, "low", "") + &podgroup("lowb", 2, "low", "");
    for (g, n) in [("lowa", "n-0"), ("lowb", "n-1")] {
        for i in 0..2 {
            low += &pod(&format!("{g}-{i}"), "1", "low", Some(g), Some(n));
        }
    }
    low += &pod("web-0", "2", "low", None, Some("n-2"));
    low += &pod("batch-0", "2", "low", None, Some("n-3"));
    low += "apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: default}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: web}}
";
    k.apply(&low).await;
    wait_pods(&env, "default", |p| {
        p.values().filter(|p| bound(p)).count() == 6
    })
    .await;
    // The budget's status says no disruption is allowed before the gang
    // comes (kubectl waits on a watch of the budget).
    k.ok(&[
        "-n",
        "default",
        "wait",
        "--for=jsonpath={.status.currentHealthy}=1",
        "pdb/web",
        "--timeout=60s",
    ])
    .await;
    let v = k
        .json(&["-n", "default", "get", "pdb", "web", "-o", "json"])
        .await;
    assert_eq!(v["status"]["disruptionsAllowed"].as_i64(), Some(0), "{v}");

    let mut high = podgroup("train", 2, "high", "");
    for i in 0..2 {
        high += &pod(&format!("train-{i}"), "2", "high", Some("train"), None);
    }
    k.apply(&high).await;
    let pods = wait_pods(&env, "default", |p| nodes_of(p, "train-").len() == 2).await;

    // The protected pod was spared; batch-0 and exactly one low gang went,
    // whole; the other gang still runs whole.
    assert_eq!(nodes_of(&pods, "web-0"), ["n-2"]);
    let layout: Vec<(String, Option<String>)> = pods
        .iter()
        .map(|(n, p)| (n.clone(), p.spec.as_ref().and_then(|s| s.node_name.clone())))
        .collect();
    assert_eq!(count(&pods, "batch-0"), 0, "batch-0 preempted: {layout:?}");
    let (a, b) = (
        nodes_of(&pods, "lowa-").len(),
        nodes_of(&pods, "lowb-").len(),
    );
    let remaining = (count(&pods, "lowa-"), count(&pods, "lowb-"));
    assert!(
        matches!((a, b), (2, 0) | (0, 2)) && matches!(remaining, (2, 0) | (0, 2)),
        "one low gang evicted whole: bound {a}/{b}, present {remaining:?}"
    );
    // Events name each other.
    let e = wait_event(&env, "default", |e| {
        e.reason.as_deref() == Some("Preempted")
    })
    .await;
    assert!(
        e.message
            .as_deref()
            .unwrap_or_default()
            .contains("Preempted by PodGroup default/train"),
        "{e:?}"
    );
    let metrics = e2e::http_get(d.http_addr, "/metrics").await.1;
    assert!(
        e2e::metric(&metrics, "scheduler_preemption_attempts_total").unwrap_or(0.0) >= 1.0,
        "{metrics}"
    );
    assert!(
        e2e::metric(
            &metrics,
            "muster_gang_preemptions_total{preemptor=\"gang\",victim=\"gang\"}"
        )
        .unwrap_or(0.0)
            >= 1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rack_constrained_gang_frees_exactly_one_rack() {
    let (env, k, _d) = start(vec![
        rack_nodes("a", 2, Some("a")),
        rack_nodes("b", 2, Some("b")),
    ])
    .await;
    // Rack a runs pods of priority 100, rack b of priority 10.
    let mut low = String::new();
    for i in 0..2 {
        low += &pod(
            &format!("ra-{i}"),
            "2",
            "mid",
            None,
            Some(&format!("a-{i}")),
        );
        low += &pod(
            &format!("rb-{i}"),
            "2",
            "low",
            None,
            Some(&format!("b-{i}")),
        );
    }
    k.apply(&low).await;
    wait_pods(&env, "default", |p| {
        p.values().filter(|p| bound(p)).count() == 4
    })
    .await;
    let mut high = podgroup(
        "train",
        2,
        "high",
        "  schedulingConstraints:\n    topology: [{key: topology.kubernetes.io/rack}]\n",
    );
    for i in 0..2 {
        high += &pod(&format!("train-{i}"), "2", "high", Some("train"), None);
    }
    k.apply(&high).await;
    let pods = wait_pods(&env, "default", |p| nodes_of(p, "train-").len() == 2).await;
    let mut train = nodes_of(&pods, "train-");
    train.sort();
    assert_eq!(train, ["b-0", "b-1"]);
    assert_eq!(nodes_of(&pods, "ra-").len(), 2, "rack a untouched");
    assert_eq!(count(&pods, "rb-"), 0, "rack b freed");
}

/// The interleaved layout: four nodes of 4 cores; low gangs `lo-a` and
/// `lo-b` (disruptionMode all, four members of 2 cores) with one member of
/// each on every node; a high gang of four 2-core members. Evicting one low
/// gang frees 2 cores on every node, which is enough: the other gang stays
/// whole, and the Preempting event says why the victims could not be
/// spared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interleaved_low_gangs_lose_one_gang_not_both() {
    let mut t = e2e::nodes(4, "4");
    t.name_prefix = "pr".to_string();
    let (env, k, _d) = start(vec![t]).await;
    let mode = "  disruptionMode: {all: {}}\n";
    let mut low = podgroup("lo-a", 4, "low", mode) + &podgroup("lo-b", 4, "low", mode);
    for g in ["lo-a", "lo-b"] {
        for i in 0..4 {
            low += &pod(
                &format!("{g}-{i}"),
                "2",
                "low",
                Some(g),
                Some(&format!("pr-{i}")),
            );
        }
    }
    k.apply(&low).await;
    wait_pods(&env, "default", |p| {
        p.values().filter(|p| bound(p)).count() == 8
    })
    .await;
    let mut high = podgroup("hi", 4, "high", "");
    for i in 0..4 {
        high += &pod(&format!("hi-{i}"), "2", "high", Some("hi"), None);
    }
    k.apply(&high).await;
    let e = wait_event(&env, "default", |e| {
        e.reason.as_deref() == Some("Preempting")
    })
    .await;
    let message = e.message.unwrap_or_default();
    assert!(
        message.starts_with("preempting 4 pod(s) (1 gang(s) whole)"),
        "{message}"
    );
    assert!(
        message.contains("leaves no room for default/hi-"),
        "{message}"
    );
    let pods = wait_pods(&env, "default", |p| nodes_of(p, "hi-").len() == 4).await;
    let (a, b) = (
        nodes_of(&pods, "lo-a-").len(),
        nodes_of(&pods, "lo-b-").len(),
    );
    assert!(
        matches!((a, b), (4, 0) | (0, 4)),
        "exactly one low gang evicted, whole: lo-a {a}, lo-b {b} bound"
    );
    let mut hi = nodes_of(&pods, "hi-");
    hi.sort();
    assert_eq!(hi, ["pr-0", "pr-1", "pr-2", "pr-3"], "one member a node");
}
