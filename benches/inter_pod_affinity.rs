//! InterPodAffinity benchmark: one pod through the default framework
//! (PreFilter, Filter, PreScore, Score) on 5,000 nodes holding 50,000 pods, a
//! fifth of which carry pod affinity or anti-affinity terms (required and
//! preferred, by hostname and by zone, over 500 app labels).
//!
//! Cases: a plain pod whose labels some existing anti-affinity terms select,
//! a pod with its own required anti-affinity and preferred affinity, and the
//! default framework without InterPodAffinity as the baseline. Each runs on
//! the cache's view (a maintained `PodIndex`: candidates from the index; the
//! nodes' labels numbered by a `LabelIds` table: Filter and Score compare
//! ids) and, suffixed `_scan`, on bare node states (every node's pods read,
//! labels as strings, as kube-scheduler does). `pod_with_terms_strings` is
//! the cache's view without label ids (the per-node passes read strings).
//!
//! Run: `cargo bench --bench inter_pod_affinity`. Figures: docs/performance.md.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use muster::cache::{ClusterFacts, LabelIds, NodeState, PodIndex};
use muster::framework::{Framework, Snapshot};
use muster::model::{NodeInfo, PodInfo, Resources};
use serde_json::{Value, json};

const NODES: usize = 5_000;
const PODS_PER_NODE: usize = 10;
const APPS: usize = 500;
const ZONE: &str = "topology.kubernetes.io/zone";
const HOSTNAME: &str = "kubernetes.io/hostname";

fn pod(name: &str, app: &str, spec: Value) -> PodInfo {
    let mut spec = spec;
    spec["containers"] =
        json!([{"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}}}]);
    let v = json!({"metadata": {"name": name, "namespace": "bench", "labels": {"app": app}},
        "spec": spec});
    PodInfo::from_json(&serde_json::to_vec(&v).expect("json")).expect("pod")
}

fn term(app: &str, key: &str) -> Value {
    json!({"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key})
}

/// The terms of the `i`-th pod carrying any: four kinds in turn.
fn terms(i: usize, app: &str) -> Value {
    match i % 4 {
        0 => json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            [term(app, HOSTNAME)]}}),
        1 => json!({"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution":
            [{"weight": 10, "podAffinityTerm": term(app, ZONE)}]}}),
        2 => json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            [term(app, ZONE)]}}),
        _ => json!({"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution":
            [{"weight": 20, "podAffinityTerm": term(app, HOSTNAME)}]}}),
    }
}

fn cluster() -> Vec<NodeState> {
    let mut with_terms = 0;
    (0..NODES)
        .map(|n| {
            let alloc = Resources {
                milli_cpu: 32_000,
                memory: 128 << 30,
                ephemeral_storage: 100 << 30,
                pods: 110,
                ..Default::default()
            };
            let name = format!("node-{n:05}");
            let mut info = NodeInfo::new(&name, alloc);
            info.labels.insert(HOSTNAME.into(), name.clone());
            info.labels.insert(ZONE.into(), format!("zone-{}", n % 3));
            info.labels
                .insert("kubernetes.io/os".into(), "linux".into());
            let mut node = NodeState::new(Arc::new(info));
            for k in 0..PODS_PER_NODE {
                let i = n * PODS_PER_NODE + k;
                let app = format!("app-{}", i % APPS);
                let spec = if i.is_multiple_of(5) {
                    with_terms += 1;
                    json!({"nodeName": name, "affinity": terms(with_terms, &app)})
                } else {
                    json!({"nodeName": name})
                };
                node.add_pod(&Arc::new(pod(&format!("p-{i}"), &app, spec)));
            }
            node
        })
        .collect()
}

fn incoming(affinity: Value) -> PodInfo {
    let mut p = pod("incoming", "app-7", json!({"affinity": affinity}));
    p.requests.milli_cpu = 1000;
    p
}

fn bench(c: &mut Criterion) {
    let mut nodes = cluster();
    let plain = incoming(json!({}));
    let affine = incoming(json!({
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("app-7", HOSTNAME)]},
        "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution":
            [{"weight": 50, "podAffinityTerm": term("app-9", ZONE)}]}
    }));
    let full = Framework::default();
    let mut baseline = Framework::default();
    baseline.filters.retain(|p| p.name() != "InterPodAffinity");
    baseline
        .pre_filters
        .retain(|p| p.name() != "InterPodAffinity");
    baseline
        .scorers
        .retain(|(p, _)| p.name() != "InterPodAffinity");

    let mut indexed_strings = ClusterFacts::default();
    indexed_strings.pods = PodIndex::of_nodes(&nodes);
    let mut indexed = ClusterFacts::default();
    indexed.pods = PodIndex::of_nodes(&nodes);
    indexed.label_ids = LabelIds::of_nodes(&mut nodes);
    let scanned = ClusterFacts::default();
    let nodes = nodes;

    let mut group = c.benchmark_group("inter_pod_affinity_5000_nodes_50000_pods");
    for (label, framework, pod, facts) in [
        ("baseline_without_plugin", &baseline, &plain, &indexed),
        ("plain_pod", &full, &plain, &indexed),
        ("pod_with_terms", &full, &affine, &indexed),
        ("pod_with_terms_strings", &full, &affine, &indexed_strings),
        ("plain_pod_scan", &full, &plain, &scanned),
        ("pod_with_terms_scan", &full, &affine, &scanned),
    ] {
        let mut start = 0;
        let snapshot = Snapshot::new(&nodes, facts);
        group.bench_function(label, |b| {
            b.iter(|| {
                let placed = framework.schedule_within(black_box(pod), &snapshot, &mut start, None);
                black_box(placed.expect("a node fits"))
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30);
    targets = bench
}
criterion_main!(benches);
