//! `Engine::explain` at 50,000 nodes and 200,000 pods (the `/explain`
//! endpoint's work inside the scheduling loop): 184,000 pods bound, 2,000
//! gangs of 8 queued behind each other, and the questions asked about the
//! last gang queued (it walks every active pod of its profile to rank it),
//! a gang short of quorum, and one of its members.
//!
//! `cargo bench --bench explain` (part of `make bench-explain`).

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use muster::driver::fixtures::{SCHEDULER, gang_def, group_key, member, node, pod};
use muster::engine::{ClusterEvent, Engine, EngineConfig, ExplainTarget, ProfileConfig};
use muster::framework::placement::Framework;
use muster::model::PodKey;

const NODES: usize = 50_000;
const PODS: usize = 200_000;
const GANGS: usize = 2_000;
const GANG_SIZE: usize = 8;

fn engine() -> Engine {
    let mut e = Engine::new(EngineConfig::new(vec![ProfileConfig::new(
        SCHEDULER,
        Framework::default(),
    )]));
    let t = Instant::now();
    for i in 0..NODES {
        e.on_event(
            ClusterEvent::NodeUpserted(Arc::new(node(&format!("n{i}"), 64_000, 256))),
            t,
        );
    }
    let queued = GANGS * GANG_SIZE;
    for i in 0..PODS - queued {
        let mut p = pod(&format!("running-{i}"), 1000, 1);
        p.node_name = Some(Arc::from(format!("n{}", i % NODES)));
        e.on_event(ClusterEvent::PodUpserted(Arc::new(p)), t);
    }
    for g in 0..GANGS {
        let name = format!("gang-{g:04}");
        let key = group_key(&name);
        e.on_event(
            ClusterEvent::GroupDefUpserted(gang_def(&name, GANG_SIZE as u32, g as i64)),
            t,
        );
        for m in 0..GANG_SIZE {
            let mut p = member(&format!("{name}-{m}"), &key, 1000, 1);
            p.created_ms = g as i64;
            e.on_event(ClusterEvent::PodUpserted(Arc::new(p)), t);
        }
    }
    // Short of quorum: 3 of 8.
    e.on_event(ClusterEvent::GroupDefUpserted(gang_def("short", 8, 0)), t);
    let short = group_key("short");
    for m in 0..3 {
        e.on_event(
            ClusterEvent::PodUpserted(Arc::new(member(&format!("short-{m}"), &short, 1000, 1))),
            t,
        );
    }
    e.drain_actions();
    e
}

fn explain(c: &mut Criterion) {
    let e = engine();
    let now = Instant::now();
    let last = ExplainTarget::parse("default", &format!("podgroup/gang-{:04}", GANGS - 1))
        .expect("target");
    let answer = e.explain(&last, now);
    let q = answer[0].queue.as_ref().expect("queued");
    assert_eq!(q.position, Some(((GANGS - 1) * GANG_SIZE + 1) as u64));
    let short = ExplainTarget::parse("default", "podgroup/short").expect("target");
    let member = ExplainTarget::Pod(PodKey::new("default", "gang-1000-3"));
    let mut group = c.benchmark_group("explain");
    group.sample_size(20);
    group.bench_function("last_of_2000_queued_gangs_50k_nodes_200k_pods", |b| {
        b.iter(|| black_box(e.explain(&last, now)))
    });
    group.bench_function("gang_short_of_quorum_50k_nodes_200k_pods", |b| {
        b.iter(|| black_box(e.explain(&short, now)))
    });
    group.bench_function("member_of_a_queued_gang_50k_nodes_200k_pods", |b| {
        b.iter(|| black_box(e.explain(&member, now)))
    });
    group.finish();
}

criterion_group!(benches, explain);
criterion_main!(benches);
