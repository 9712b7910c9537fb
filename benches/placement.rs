//! Placement benchmark: one pod through PreFilter, Filter and Score over 5,000
//! heterogeneous nodes, with kube-scheduler's adaptive sampling (10% at this
//! size) and with every node scored (`percentageOfNodesToScore: 100`).
//!
//! Run: `cargo bench --bench placement`. Figures: docs/performance.md.

mod common;

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use muster::framework::Framework;

use common::{cluster, incoming};

fn bench(c: &mut Criterion) {
    let nodes = cluster();
    let pod = incoming();
    let mut group = c.benchmark_group("placement_5000_nodes");
    let parallel = Framework::default().parallel_min_nodes;
    for (label, pct, parallel_min_nodes) in [
        ("default_sampling", None, parallel),
        ("default_sampling_sequential", None, usize::MAX),
        ("score_all_nodes", Some(100), parallel),
        ("score_all_nodes_sequential", Some(100), usize::MAX),
    ] {
        let framework = Framework {
            percentage_of_nodes_to_score: pct,
            parallel_min_nodes,
            ..Framework::default()
        };
        let mut start = 0;
        group.bench_function(label, |b| {
            b.iter(|| black_box(framework.schedule(black_box(&pod), &nodes, &mut start)))
        });
    }
    // The four volume plugins' cost for a pod without volumes: the default
    // profile against the same profile without them.
    let volume_plugins = [
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
    ];
    let mut without = Framework::default();
    without
        .pre_filters
        .retain(|p| !volume_plugins.contains(&p.name()));
    without
        .filters
        .retain(|p| !volume_plugins.contains(&p.name()));
    let mut start = 0;
    group.bench_function("default_sampling_without_volume_plugins", |b| {
        b.iter(|| black_box(without.schedule(black_box(&pod), &nodes, &mut start)))
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(60);
    targets = bench
}
criterion_main!(benches);
