//! I10 under random load: a stream of 1-core pods of random runtimes (some
//! declaring their end, some not), all of one priority, keeps 4 nodes of 4
//! cores busy; a gang of whole-node members of the same priority arrives;
//! more important pods arrive now and then. Once the gang holds a
//! reservation it binds within the longest runtime of the pods on its room;
//! a more important pod arriving while a node has room for it is bound at
//! once, reservation or not; I1–I9 hold after every step.

use std::collections::BTreeMap;
use std::time::Duration;

use muster::driver::fixtures::{SCHEDULER, gang_def, group_key, member, node, pod};
use muster::driver::{Harness, WALL_START_MS};
use muster::engine::{EngineConfig, ProfileConfig};
use muster::framework::placement::Framework;
use muster::gang::{DialectTimeouts, GangArgs};
use muster::model::{PodKey, PodPhase};
use proptest::prelude::*;

/// Nodes, cores each, and the reservation's wait (seconds).
const NODES: usize = 4;
const CORES: i64 = 4;
const RESERVE_AFTER: Duration = Duration::from_secs(5);
const STEP: Duration = Duration::from_millis(250);

fn harness() -> Harness {
    let mut profile = ProfileConfig::new(SCHEDULER, Framework::default());
    let mut args = GangArgs {
        dialect_timeouts: DialectTimeouts::UNIFORM,
        ..GangArgs::default()
    };
    args.reservations.reserve_after = RESERVE_AFTER;
    profile.gang = Some(args);
    let mut h = Harness::with_config(EngineConfig::new(vec![profile]));
    for i in 0..NODES {
        h.add_node(node(&format!("n{i}"), CORES * 1000, 64));
    }
    h
}

/// Free cores on each node as the harness's cluster has them.
fn free_cores(h: &Harness) -> Vec<i64> {
    let mut used: BTreeMap<String, i64> = BTreeMap::new();
    for p in h.pods() {
        if let Some(n) = h.node_of(&p.key) {
            *used.entry(n.to_string()).or_default() += p.requests.milli_cpu;
        }
    }
    (0..NODES)
        .map(|i| CORES * 1000 - used.get(&format!("n{i}")).copied().unwrap_or(0))
        .collect()
}

/// Failing cases are kept beside this file
/// (`tests/reservation_properties.proptest-regressions`).
fn persistence() -> Option<Box<dyn proptest::test_runner::FailurePersistence>> {
    Some(Box::new(
        proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"),
    ))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: persistence(), ..ProptestConfig::default() })]

    #[test]
    fn a_reserved_gang_binds_and_nothing_more_important_waits(
        // (runtime in steps, declares its end)
        stream in prop::collection::vec((4u32..=24, any::<bool>()), 60..120),
        gang_size in 2usize..=3,
        vips in prop::collection::vec(0usize..120, 0..4),
    ) {
        let mut h = harness();
        let g = group_key("big");
        let mut ends: BTreeMap<PodKey, Duration> = BTreeMap::new();
        let mut runtime: BTreeMap<PodKey, Duration> = BTreeMap::new();
        let mut reserved_at: Option<Duration> = None;
        let longest = stream.iter().map(|(r, _)| STEP * *r).max().unwrap_or_default();
        for step in 0..stream.len() + 200 {
            // Arrivals: a stream pod each step; the gang at step 4; a VIP now and then.
            if let Some((steps, declares)) = stream.get(step) {
                let mut p = pod(&format!("s{step}"), 1000, 1);
                // It starts about when it arrives (the queue is short).
                p.started_ms = WALL_START_MS + h.elapsed().as_millis() as i64;
                if *declares {
                    p.active_deadline_seconds = Some((STEP * *steps).as_secs() as u32 + 1);
                }
                runtime.insert(p.key.clone(), STEP * *steps);
                h.put_pod(p);
            }
            if step == 4 {
                h.put_def(gang_def("big", gang_size as u32, 1));
                for m in 0..gang_size {
                    h.put_pod(member(&format!("big-{m}"), &g, CORES * 1000, 1));
                }
            }
            if vips.contains(&step) {
                let room = free_cores(&h).iter().any(|f| *f >= 1000);
                let mut p = pod(&format!("vip{step}"), 1000, 1);
                p.priority = 100;
                let key = p.key.clone();
                runtime.insert(key.clone(), STEP * 4);
                h.put_pod(p);
                h.settle();
                if room {
                    prop_assert!(h.node_of(&key).is_some(), "{key} waited with room free (step {step})");
                }
            }
            h.advance(STEP);
            // Pods end when their runtime is up (as the kubelet reports).
            let now = h.elapsed();
            for p in h.pods().map(|p| p.key.clone()).collect::<Vec<_>>() {
                if h.node_of(&p).is_some() && !p.name.starts_with("big-") {
                    let end = *ends.entry(p.clone()).or_insert(now + runtime.get(&p).copied().unwrap_or(STEP));
                    if end <= now {
                        h.finish_pod(&p, PodPhase::Succeeded);
                    }
                }
            }
            if let Err(e) = h.check_invariants() {
                return Err(TestCaseError::fail(format!("step {step}: {e}")));
            }
            if reserved_at.is_none() && h.events("Reserved") > 0 {
                reserved_at = Some(now);
            }
            if let Some(at) = reserved_at
                && h.bound_members(&g) < gang_size
            {
                prop_assert!(
                    now <= at + longest + Duration::from_secs(2),
                    "reserved at {at:?}, still not bound at {now:?} (longest runtime {longest:?})"
                );
            }
            if h.bound_members(&g) == gang_size && step >= stream.len() {
                break;
            }
        }
    }
}
