//! Memory per node and per pod: the engine's state — cache,
//! queue, gang and topology bookkeeping — for a scenario's nodes and pods,
//! decoded from the scenario's own manifests as the informers decode them,
//! counted by a wrapping global allocator.
//!
//! The figures are bytes live in the engine, not RSS: allocator overhead,
//! fragmentation, the informers' and the writer's buffers and the runtime
//! come on top (the load report's peak RSS is the whole process).
//!
//! Three states: the nodes alone; every pod pending (created, queued);
//! every pod bound (each `Bind` fed back as the informer reports it).
//!
//! Run: `cargo bench --bench memory` (`MEMORY_SCENARIO=<path>`, default
//! `config/scenarios/perf-gangs-15k.yaml`). `MEMORY_EXIT_BOUND=1` exits
//! with every pod bound and the state alive, for a heap profiler
//! (`heaptrack`): what it reports leaked is that state, by allocation site.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{Context, Result, anyhow};
use muster::dialects::DEFINITION_SOURCES;
use muster::engine::{Action, ClusterEvent, Engine, EngineConfig, ProfileConfig};
use muster::framework::Framework;
use muster::model::shared::PodPools;
use muster::model::{NodeInfo, PodInfo, PodPhase};
use muster::scenario::{Kind, Manifest, Scenario};

/// Bytes currently allocated through the global allocator.
static LIVE: AtomicUsize = AtomicUsize::new(0);

struct Counting;

// SAFETY: every call is forwarded to the system allocator unchanged; the
// counter only observes sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(new_size, Ordering::Relaxed);
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// Decoded from its JSON bytes, as the informers receive it.
fn node(m: &Manifest) -> Result<NodeInfo> {
    NodeInfo::from_json(&serde_json::to_vec(&m.object)?)
        .map_err(|e| anyhow!("node {}: {e:?}", m.name))
}

/// Decoded for `scheduler`, what it repeats shared through `pools` as the
/// pod informer does.
fn pod(m: &Manifest, scheduler: &str, pools: &mut PodPools) -> Result<PodInfo> {
    let mut p = PodInfo::from_json(&serde_json::to_vec(&m.object)?)
        .map_err(|e| anyhow!("pod {}: {e:?}", m.name))?;
    p.scheduler_name = Arc::from(scheduler);
    p.share_with(pools);
    Ok(p)
}

/// The group definitions a manifest declares, decoded by its dialect.
fn definitions(m: &Manifest) -> Result<Vec<muster::model::GroupDef>> {
    let (group, _, kind, _) = m.kind.gvk();
    let source = DEFINITION_SOURCES
        .iter()
        .find(|s| s.kind == kind && s.group == group)
        .with_context(|| format!("no dialect reads {group}/{kind}"))?;
    (source.translate)(&m.object).map_err(|e| anyhow!("{}: {e}", m.name))
}

fn per(bytes: usize, count: usize) -> String {
    match count {
        0 => "-".into(),
        n => format!("{:.0}", bytes as f64 / n as f64),
    }
}

fn main() -> Result<()> {
    let path = std::env::var("MEMORY_SCENARIO")
        .unwrap_or_else(|_| "config/scenarios/perf-gangs-15k.yaml".into());
    let scenario = Scenario::load(path.as_ref()).with_context(|| path.clone())?;
    let plan = scenario.plan();
    let now = Instant::now();
    let scheduler = "muster";
    let mut engine = Engine::new(EngineConfig::new(vec![ProfileConfig::new(
        scheduler,
        Framework::default(),
    )]));

    // The decoded pods alone (their `PodInfo`s, kept in an `Arc` each):
    // how much of a pod's share is the pod itself.
    let sample: Vec<&Manifest> = plan
        .workloads
        .iter()
        .flat_map(|w| w.pods())
        .take(1000)
        .collect();
    let before = live();
    let mut sample_pools = PodPools::default();
    let decoded: Vec<Arc<PodInfo>> = sample
        .iter()
        .map(|m| pod(m, scheduler, &mut sample_pools).map(Arc::new))
        .collect::<Result<_>>()?;
    let pod_info = live().saturating_sub(before);
    let decoded_count = decoded.len();
    drop(decoded);
    drop(sample_pools);

    let start = live();
    let mut nodes = 0usize;
    for m in plan.setup.iter().filter(|m| m.kind == Kind::Node) {
        engine.on_event(ClusterEvent::NodeUpserted(Arc::new(node(m)?)), now);
        nodes += 1;
    }
    let with_nodes = live();

    let mut pods = 0usize;
    let mut pools = PodPools::default();
    for w in &plan.workloads {
        if let muster::scenario::WorkloadPlan::Gang(g) = w
            && let Some(group) = &g.group
        {
            for def in definitions(group)? {
                engine.on_event(ClusterEvent::GroupDefUpserted(def), now);
            }
        }
        for m in w.pods() {
            let p = pod(m, scheduler, &mut pools)?;
            engine.on_event(ClusterEvent::PodUpserted(Arc::new(p)), now);
            pods += 1;
        }
    }
    drop(engine.drain_actions());
    let pending = live();

    // Schedule everything; report each binding back as the informer would.
    let mut bound = 0usize;
    loop {
        let mut progressed = false;
        while engine.schedule_one(now).is_some() {
            progressed = true;
        }
        for action in engine.drain_actions() {
            if let Action::Bind { pod, node, .. } = action
                && let Some(cached) = engine.cache().pod(&pod)
            {
                let mut p = (*cached.info).clone();
                p.node_name = Some(node);
                p.phase = PodPhase::Running;
                engine.on_event(ClusterEvent::PodUpserted(Arc::new(p)), now);
                bound += 1;
                progressed = true;
            }
        }
        drop(engine.drain_actions());
        if !progressed {
            break;
        }
    }
    let all_bound = live();
    if std::env::var_os("MEMORY_EXIT_BOUND").is_some() {
        // For a heap profiler: exit with the bound state alive, so what it
        // reports as leaked is exactly that state.
        std::process::exit(0);
    }

    println!("scenario {path}: {nodes} nodes, {pods} pods ({bound} bound)");
    println!("| state | engine bytes | per node | per pod |");
    println!("| --- | --- | --- | --- |");
    let node_bytes = with_nodes.saturating_sub(start);
    println!(
        "| nodes only | {node_bytes} | {} | - |",
        per(node_bytes, nodes)
    );
    let pending_bytes = pending.saturating_sub(with_nodes);
    println!(
        "| + every pod pending | {pending_bytes} | - | {} |",
        per(pending_bytes, pods)
    );
    let bound_bytes = all_bound.saturating_sub(with_nodes);
    println!(
        "| + every pod bound (pods' share) | {bound_bytes} | - | {} |",
        per(bound_bytes, pods)
    );
    println!(
        "| total, all bound | {} MiB | | |",
        all_bound.saturating_sub(start) / (1 << 20)
    );
    println!(
        "| a decoded pod alone (`Arc<PodInfo>`, {decoded_count} sampled) | {pod_info} | - | {} |",
        per(pod_info, decoded_count)
    );
    Ok(())
}
