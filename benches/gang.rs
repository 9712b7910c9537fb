//! A 1,000-member gang placed on 5,000 nodes through the permit barrier, with
//! kube-scheduler's default plugins (adaptive sampling: 10% of 5,000 nodes).
//!
//! Measured: the scheduler's time from "all members in the active queue" to
//! "1,000 `Bind` actions drained" — 1,000 cycles (filter, score, reserve,
//! permit), the release of 999 waiting members, and the actions.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use muster::driver::fixtures::{SCHEDULER, arc, gang_def, group_key, member, node};
use muster::engine::{Action, ClusterEvent, Engine, EngineConfig, ProfileConfig};
use muster::framework::placement::Framework;

const NODES: usize = 5_000;
const MEMBERS: usize = 1_000;

fn loaded_engine(now: Instant, framework: &Framework) -> Engine {
    let mut engine = Engine::new(EngineConfig::new(vec![ProfileConfig::new(
        SCHEDULER,
        framework.clone(),
    )]));
    for i in 0..NODES {
        let n = node(&format!("node-{i:05}"), 32_000, 128);
        engine.on_event(ClusterEvent::NodeUpserted(arc(n)), now);
    }
    let g = group_key("big");
    engine.on_event(
        ClusterEvent::GroupDefUpserted(gang_def("big", MEMBERS as u32, 1)),
        now,
    );
    for i in 0..MEMBERS {
        let p = member(&format!("big-{i:04}"), &g, 4_000, 16);
        engine.on_event(ClusterEvent::PodUpserted(arc(p)), now);
    }
    engine.drain_actions();
    engine
}

fn gang_through_barrier(c: &mut Criterion) {
    let now = Instant::now();
    let mut group = c.benchmark_group("gang");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    for (name, framework) in [
        ("1000_members_on_5000_nodes", Framework::default()),
        // The same with no plugins: what the engine itself costs.
        ("1000_members_on_5000_nodes_no_plugins", Framework::empty()),
    ] {
        bench_one(&mut group, name, &framework, now);
    }
    group.finish();
}

fn bench_one(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    framework: &Framework,
    now: Instant,
) {
    group.bench_function(name, |b| {
        b.iter_batched(
            || loaded_engine(now, framework),
            |mut engine| {
                engine.run_until_idle(now);
                let binds = engine
                    .drain_actions()
                    .into_iter()
                    .filter(|a| matches!(a, Action::Bind { .. }))
                    .count();
                assert_eq!(binds, MEMBERS);
                black_box(engine)
            },
            BatchSize::LargeInput,
        )
    });
}

criterion_group!(benches, gang_through_barrier);
criterion_main!(benches);
