//! PodTopologySpread benchmark: one pod through PreFilter, Filter, PreScore
//! and Score with the default framework (`Framework::default()`, adaptive
//! sampling) on 5,000 nodes holding 50,000 pods, a fifth of which carry
//! spread constraints themselves (1,000 pods per `app`, spread at random).
//!
//! - `no_constraints`: a pod without constraints (the plugin skips): the
//!   baseline of the other plugins on this cluster.
//! - `host_hard_zone_soft`: the incoming pod of `app-7` spreads over hostnames
//!   (`DoNotSchedule`, maxSkew 1) and zones (`ScheduleAnyway`); nothing
//!   changes between cycles (the per-node count memo is warm).
//! - `host_hard_zone_soft_one_node_changed`: the same, with a pod added to or
//!   removed from one node before each cycle, as a binding does.
//! - `zone_hard_host_soft`: zones `DoNotSchedule` (maxSkew 1) and hostnames
//!   `ScheduleAnyway`. The random spread leaves one zone the minimum, so two
//!   thirds of the nodes fail the filter and the search runs over ~3x the
//!   nodes to find its 500 feasible ones: the other filters' cost grows.
//!
//! - `host_hard_zone_soft_strings`: `host_hard_zone_soft` without label ids
//!   (the other cases run with the nodes' labels numbered by a `LabelIds`
//!   table, as the cache keeps them; this one reads the label strings).
//!
//! Run: `cargo bench --bench topology_spread`. Figures: docs/performance.md.

#[allow(dead_code)]
mod common;

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use muster::cache::{ClusterFacts, LabelIds, NodeState};
use muster::framework::{Framework, Snapshot};
use muster::model::PodInfo;

const PODS_PER_NODE: usize = 10;
/// Distinct `app` values: 1,000 pods each.
const APPS: usize = 50;

fn pod(json: serde_json::Value) -> PodInfo {
    PodInfo::from_json(&serde_json::to_vec(&json).expect("json")).expect("pod")
}

fn spread_constraints(app: &str) -> serde_json::Value {
    constraints(app, "DoNotSchedule", "ScheduleAnyway")
}

fn constraints(app: &str, zone: &str, host: &str) -> serde_json::Value {
    serde_json::json!([
        {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": zone,
         "labelSelector": {"matchLabels": {"app": app}}},
        {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": host,
         "labelSelector": {"matchLabels": {"app": app}}}
    ])
}

/// A small pod of `app`, every fifth with spread constraints.
fn app_pod(i: usize, app: &str) -> PodInfo {
    let mut spec = serde_json::json!({"nodeName": "x", "containers": [{"name": "c",
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]});
    if i.is_multiple_of(5) {
        spec["topologySpreadConstraints"] = spread_constraints(app);
    }
    pod(serde_json::json!({
        "metadata": {"name": format!("p-{i}"), "namespace": "bench",
            "labels": {"app": app, "tier": "web"}},
        "spec": spec
    }))
}

/// The placement benchmark's cluster, with hostname labels and topped up to
/// `PODS_PER_NODE` pods per node (50,000 in all).
fn cluster() -> Vec<NodeState> {
    let mut nodes = common::cluster();
    let mut i = 0usize;
    for node in &mut nodes {
        let mut info = (*node.info).clone();
        info.labels
            .insert("kubernetes.io/hostname".into(), info.name.to_string());
        node.set_info(Arc::new(info));
        while node.pods.len() < PODS_PER_NODE {
            // A multiplicative hash spreads each app over every zone.
            let app = format!("app-{}", (i.wrapping_mul(2_654_435_761)) % APPS);
            node.add_pod(&Arc::new(app_pod(i, &app)));
            i += 1;
        }
    }
    nodes
}

fn incoming(constraints: Option<serde_json::Value>) -> PodInfo {
    let mut spec = serde_json::json!({
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}]
    });
    if let Some(c) = constraints {
        spec["topologySpreadConstraints"] = c;
    }
    pod(serde_json::json!({
        "metadata": {"name": "web", "namespace": "bench", "labels": {"app": "app-7", "tier": "web"}},
        "spec": spec
    }))
}

fn bench(c: &mut Criterion) {
    let mut nodes = cluster();
    let total: usize = nodes.iter().map(|n| n.pods.len()).sum();
    assert_eq!(total, common::NODES * PODS_PER_NODE);
    let framework = Framework::default();
    let host_hard = incoming(Some(constraints(
        "app-7",
        "ScheduleAnyway",
        "DoNotSchedule",
    )));
    let zone_hard = incoming(Some(constraints(
        "app-7",
        "DoNotSchedule",
        "ScheduleAnyway",
    )));
    let plain = incoming(None);
    for p in [&host_hard, &zone_hard, &plain] {
        assert!(framework.schedule(p, &nodes, &mut 0).is_ok());
    }
    let mut facts = ClusterFacts::default();
    facts.label_ids = LabelIds::of_nodes(&mut nodes);
    let strings = ClusterFacts::default();
    let mut group = c.benchmark_group("topology_spread_5000_nodes_50000_pods");
    let mut start = 0;
    for (label, pod, facts) in [
        ("no_constraints", &plain, &facts),
        ("host_hard_zone_soft", &host_hard, &facts),
        ("host_hard_zone_soft_strings", &host_hard, &strings),
        ("zone_hard_host_soft", &zone_hard, &facts),
    ] {
        let snapshot = Snapshot::new(&nodes, facts);
        group.bench_function(label, |b| {
            b.iter(|| {
                black_box(framework.schedule_within(black_box(pod), &snapshot, &mut start, None))
            })
        });
    }
    let churn = Arc::new(app_pod(usize::MAX, "app-7"));
    let mut k = 0usize;
    group.bench_function("host_hard_zone_soft_one_node_changed", |b| {
        b.iter(|| {
            let node = &mut nodes[(k / 2) % common::NODES];
            if k.is_multiple_of(2) {
                node.add_pod(&churn);
            } else {
                node.remove_pod(&churn);
            }
            k += 1;
            let snapshot = Snapshot::new(&nodes, &facts);
            black_box(framework.schedule_within(black_box(&host_hard), &snapshot, &mut start, None))
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(60);
    targets = bench
}
criterion_main!(benches);
