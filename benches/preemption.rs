//! Preemption on 5,000 nodes, each full of low-priority pods (4 × 900m of
//! 4 cores, scheduler-perf's PreemptionAsync layout), with kube-scheduler's
//! default plugins:
//!
//! - `pod_preempts`: one high-priority pod (3 cores) arrives, finds its
//!   candidates (`minCandidateNodesAbsolute` 100), chooses three victims,
//!   is nominated; its victims are deleted and it binds: the engine's whole
//!   share of one PreemptionAsync preemptor, from arrival to `Bind`.
//! - `gang_preempts`: a 4-member gang of 3-core members arrives and evicts
//!   what four nodes hold, then binds.
//!
//! Every iteration takes nodes for good, so each timed batch runs on a
//! fresh cluster (built outside the timing).

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use muster::driver::Harness;
use muster::driver::fixtures::{gang_def, group_key, member, node, pod};
use muster::model::LevelRef;

const NODES: usize = 5_000;
const RACK: &str = "topology.kubernetes.io/rack";
/// Nodes per rack in the rack-constrained shape (50 racks).
const RACK_SIZE: usize = 100;
/// Preemptions per fresh cluster: a pod takes one node for good, a gang
/// four.
const PODS_PER_CLUSTER: u64 = 1_000;
const GANGS_PER_CLUSTER: u64 = 250;
/// Rack-constrained gangs per fresh cluster (`perf-gang-preemption-5k`
/// runs 50).
const RACK_GANGS_PER_CLUSTER: u64 = 50;

fn full_cluster() -> Harness {
    let mut h = Harness::new();
    for i in 0..NODES {
        h.add_node(node(&format!("node-{i:05}"), 4_000, 32));
    }
    for i in 0..NODES {
        for j in 0..4 {
            let mut p = pod(&format!("low-{i:05}-{j}"), 900, 1);
            p.priority = 1;
            p.started_ms = (i * 4 + j) as i64;
            p.node_name = Some(format!("node-{i:05}").into());
            h.put_pod(p);
        }
    }
    h.settle();
    h
}

/// 5,000 nodes in racks of 100, full of 5,000 low gangs of 4 x 1
/// core, a gang's members on nodes a quarter of the cluster apart (so in
/// different racks).
fn racks_full_of_gangs() -> Harness {
    let mut h = Harness::new();
    for i in 0..NODES {
        let mut n = node(&format!("node-{i:05}"), 4_000, 32);
        n.labels
            .insert(RACK.into(), format!("rack-{:02}", i / RACK_SIZE));
        h.add_node(n);
    }
    for g in 0..NODES {
        let name = format!("low-{g:05}");
        let key = group_key(&name);
        h.put_def(gang_def(&name, 4, 0));
        for j in 0..4 {
            let mut p = member(&format!("{name}-{j}"), &key, 1_000, 1);
            p.priority = 100;
            p.started_ms = (g * 4 + j) as i64;
            p.node_name = Some(format!("node-{:05}", (g + j * NODES / 4) % NODES).into());
            h.put_pod(p);
        }
    }
    h.settle();
    h
}

fn timed(iters: u64, per_cluster: u64, one: impl FnMut(&mut Harness, u64)) -> Duration {
    timed_on(full_cluster, iters, per_cluster, one)
}

fn timed_on(
    cluster: fn() -> Harness,
    iters: u64,
    per_cluster: u64,
    mut one: impl FnMut(&mut Harness, u64),
) -> Duration {
    let mut total = Duration::ZERO;
    let mut done = 0;
    while done < iters {
        let mut h = cluster();
        let batch = (iters - done).min(per_cluster);
        let start = Instant::now();
        for k in 0..batch {
            one(&mut h, done + k);
        }
        total += start.elapsed();
        // What was timed was preemption: victims went, preemptors bound.
        assert!(!h.preempted.is_empty() && h.binds.len() as u64 >= batch);
        done += batch;
    }
    total
}

fn preemption(c: &mut Criterion) {
    let mut group = c.benchmark_group("preemption");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.bench_function("pod_preempts_on_5000_full_nodes", |b| {
        b.iter_custom(|iters| {
            timed(iters, PODS_PER_CLUSTER, |h, k| {
                let mut p = pod(&format!("high-{k}"), 3_000, 1);
                p.priority = 100;
                h.put_pod(p);
                // Past the preemptor's backoff (a fake clock: no real wait).
                h.advance(Duration::from_secs(2));
            })
        })
    });
    group.bench_function("gang_of_4_preempts_on_5000_full_nodes", |b| {
        b.iter_custom(|iters| {
            timed(iters, GANGS_PER_CLUSTER, |h, k| {
                let name = format!("train-{k}");
                let g = group_key(&name);
                h.put_def(gang_def(&name, 4, 0));
                for i in 0..4 {
                    let mut p = member(&format!("{name}-{i}"), &g, 3_000, 1);
                    p.priority = 100;
                    h.put_pod(p);
                }
                h.advance(Duration::from_secs(2));
            })
        })
    });
    group.bench_function(
        "rack_constrained_gang_of_4_preempts_whole_gangs_on_5000_nodes",
        |b| {
            b.iter_custom(|iters| {
                timed_on(
                    racks_full_of_gangs,
                    iters,
                    RACK_GANGS_PER_CLUSTER,
                    |h, k| {
                        let name = format!("high-{k}");
                        let g = group_key(&name);
                        let mut def = gang_def(&name, 4, 0);
                        def.topology.required = Some(LevelRef::Label(RACK.into()));
                        h.put_def(def);
                        for i in 0..4 {
                            let mut p = member(&format!("{name}-{i}"), &g, 4_000, 1);
                            p.priority = 10_000;
                            h.put_pod(p);
                        }
                        h.advance(Duration::from_secs(2));
                        assert_eq!(h.bound_members(&g), 4, "{name} bound");
                    },
                )
            })
        },
    );
    group.finish();
}

criterion_group!(benches, preemption);
criterion_main!(benches);
