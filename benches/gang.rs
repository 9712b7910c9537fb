//! A 1,000-member gang placed on 5,000 nodes through the permit barrier, with
//! kube-scheduler's default plugins (adaptive sampling: 10% of 5,000 nodes).
//!
//! Measured: the scheduler's time from "all members in the active queue" to
//! "1,000 `Bind` actions drained" — 1,000 cycles (filter, score, reserve,
//! permit), the release of 999 waiting members, and the actions.
//!
//! `1000_members_with_claims_on_5000_nodes_x8_gpus`: the same gang, each
//! member with a claim of its own for one GPU generated from one template,
//! on nodes of 8 GPUs each: the device allocation of every member (Filter's
//! search per node, memoised across like members, and Reserve's) included;
//! the inventory built and the class's selector evaluated on every device
//! before the timing, as in a running cluster.
//!
//! `100_gangs_of_8_sharing_a_rack_unit_on_5000_nodes_x8_gpus`: 625 racks of
//! 8 nodes, each rack with one interconnect unit its nodes share (a
//! multi-node device); 100 gangs of 8 members, each member with a claim of
//! its own for a node's 8 GPUs and the rack unit its PodGroup shares
//! (KEP-5729): each gang's device domains found, one rack chosen, every
//! member placed in it. Measured: all 800 members from queued to bound,
//! the inventory built, selectors evaluated and racks' nodes found before
//! the timing.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use muster::driver::dra_fixtures::{
    RACK_LABEL, claim_upserted, generated_claim, gpu_claim, gpu_class, group_claims, node_slice,
    rack_claim, rack_class, rack_unit_slice, with_claims, with_template_claim,
};
use muster::driver::fixtures::{SCHEDULER, arc, gang_def, group_key, member, node, pod};
use muster::engine::{Action, ClusterEvent, Engine, EngineConfig, ProfileConfig};
use muster::framework::placement::Framework;

const NODES: usize = 5_000;
const MEMBERS: usize = 1_000;

/// `loaded_engine`, with 8 GPUs a node and a claim of one GPU a member.
fn loaded_with_devices(now: Instant, framework: &Framework) -> Engine {
    let mut engine = Engine::new(EngineConfig::new(vec![ProfileConfig::new(
        SCHEDULER,
        framework.clone(),
    )]));
    engine.on_event(ClusterEvent::Dra(gpu_class()), now);
    for i in 0..NODES {
        let name = format!("node-{i:05}");
        engine.on_event(
            ClusterEvent::NodeUpserted(arc(node(&name, 32_000, 128))),
            now,
        );
        engine.on_event(ClusterEvent::Dra(node_slice(&name, 8, "c0")), now);
    }
    // Outside the timing, a pod whose claim (9 GPUs) fits no node is tried
    // on every node and deleted: the inventory is built and the class's
    // selector evaluated on every device once, as a running cluster has
    // them before a gang arrives.
    let warm = with_template_claim(pod("warm", 1_000, 1), "gpu", Some("warm-gpu"));
    engine.on_event(
        ClusterEvent::Dra(claim_upserted(generated_claim(&warm, "warm-gpu", 9))),
        now,
    );
    let key = warm.key.clone();
    engine.on_event(ClusterEvent::PodUpserted(arc(warm)), now);
    engine.run_until_idle(now);
    engine.on_event(ClusterEvent::PodDeleted(key), now);
    let g = group_key("big");
    engine.on_event(
        ClusterEvent::GroupDefUpserted(gang_def("big", MEMBERS as u32, 1)),
        now,
    );
    for i in 0..MEMBERS {
        let name = format!("big-{i:04}");
        let claim = format!("{name}-gpu");
        let p = with_template_claim(member(&name, &g, 4_000, 16), "gpu", Some(&claim));
        engine.on_event(
            ClusterEvent::Dra(claim_upserted(generated_claim(&p, &claim, 1))),
            now,
        );
        engine.on_event(ClusterEvent::PodUpserted(arc(p)), now);
    }
    engine.drain_actions();
    engine
}

const RACK_NODES: usize = 8;
const RACK_GANGS: usize = 100;

/// 5,000 nodes in racks of 8 with a rack unit each, and `RACK_GANGS` gangs
/// of 8 sharing a rack unit, each member with 8 GPUs of its own.
fn loaded_with_racks(now: Instant) -> Engine {
    let mut engine = Engine::new(EngineConfig::new(vec![ProfileConfig::new(
        SCHEDULER,
        Framework::default(),
    )]));
    engine.on_event(ClusterEvent::Dra(gpu_class()), now);
    engine.on_event(ClusterEvent::Dra(rack_class()), now);
    for i in 0..NODES {
        let name = format!("node-{i:05}");
        let mut n = node(&name, 32_000, 128);
        n.labels
            .insert(RACK_LABEL.into(), format!("r{}", i / RACK_NODES));
        engine.on_event(ClusterEvent::NodeUpserted(arc(n)), now);
        engine.on_event(ClusterEvent::Dra(node_slice(&name, 8, "c0")), now);
    }
    for r in 0..NODES / RACK_NODES {
        engine.on_event(ClusterEvent::Dra(rack_unit_slice(&format!("r{r}"))), now);
    }
    // Outside the timing: a pod whose claim (9 GPUs) fits no node is tried
    // on every node and deleted, and one gang is placed (in the first
    // rack): the inventory built, the classes' selectors evaluated on every
    // device and the racks' nodes found, as a running cluster has them.
    let warm = with_claims(pod("warm", 1_000, 1), &[("gpus", "warm-gpus")]);
    engine.on_event(
        ClusterEvent::Dra(claim_upserted(gpu_claim("default", "warm-gpus", 9))),
        now,
    );
    let key = warm.key.clone();
    engine.on_event(ClusterEvent::PodUpserted(arc(warm)), now);
    engine.run_until_idle(now);
    engine.on_event(ClusterEvent::PodDeleted(key), now);
    add_rack_gang(&mut engine, now, "warm");
    engine.run_until_idle(now);
    for g in 0..RACK_GANGS {
        add_rack_gang(&mut engine, now, &format!("g{g:03}"));
    }
    engine.drain_actions();
    engine
}

/// A gang of 8 sharing a rack unit, each member with 8 GPUs of its own.
fn add_rack_gang(engine: &mut Engine, now: Instant, group: &str) {
    let shared = format!("{group}-rack");
    engine.on_event(
        ClusterEvent::Dra(claim_upserted(rack_claim("default", &shared))),
        now,
    );
    let mut def = gang_def(group, RACK_NODES as u32, 1);
    def.extras.resource_claims = Some(group_claims(group, &[("rack", &shared)]));
    engine.on_event(ClusterEvent::GroupDefUpserted(def), now);
    for m in 0..RACK_NODES {
        let name = format!("{group}-{m}");
        let own = format!("{name}-gpus");
        engine.on_event(
            ClusterEvent::Dra(claim_upserted(gpu_claim("default", &own, 8))),
            now,
        );
        let p = with_claims(
            member(&name, &group_key(group), 1_000, 4),
            &[("rack", &shared), ("gpus", &own)],
        );
        engine.on_event(ClusterEvent::PodUpserted(arc(p)), now);
    }
}

fn rack_gangs(c: &mut Criterion) {
    let now = Instant::now();
    let mut group = c.benchmark_group("gang");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    bench_one(
        &mut group,
        "100_gangs_of_8_sharing_a_rack_unit_on_5000_nodes_x8_gpus",
        &loaded_with_racks,
        RACK_GANGS * RACK_NODES,
        now,
    );
    group.finish();
}

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
        bench_one(
            &mut group,
            name,
            &|now| loaded_engine(now, &framework),
            MEMBERS,
            now,
        );
    }
    let framework = Framework::default();
    bench_one(
        &mut group,
        "1000_members_with_claims_on_5000_nodes_x8_gpus",
        &|now| loaded_with_devices(now, &framework),
        MEMBERS,
        now,
    );
    group.finish();
}

fn bench_one(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    load: &dyn Fn(Instant) -> Engine,
    binds: usize,
    now: Instant,
) {
    group.bench_function(name, |b| {
        b.iter_batched(
            || load(now),
            |mut engine| {
                engine.run_until_idle(now);
                let bound = engine
                    .drain_actions()
                    .into_iter()
                    .filter(|a| matches!(a, Action::Bind { .. }))
                    .count();
                assert_eq!(bound, binds);
                black_box(engine)
            },
            BatchSize::LargeInput,
        )
    });
}

criterion_group!(benches, gang_through_barrier, rack_gangs);
criterion_main!(benches);
