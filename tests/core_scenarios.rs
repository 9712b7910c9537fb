//! Scenario tests for the scheduling core, run on the deterministic driver with
//! a fake clock (gang-semantics.md: pipeline §5–9, invariants I1–I5).

use std::sync::Arc;
use std::time::Duration;

use muster::cache::NodeState;
use muster::driver::Harness;
use muster::driver::fixtures::{SCHEDULER, gang_def, group_key, member, node, pod};
use muster::engine::{Action, EngineConfig, PodLocation, ProfileConfig};
use muster::framework::placement::Framework;
use muster::framework::{CycleState, Plugin, ScorePlugin};
use muster::model::{GroupKey, GroupPhase, PodInfo, PodKey, PodPhase};

fn key(name: &str) -> PodKey {
    PodKey::new("default", name)
}

fn checked(h: &Harness) {
    if let Err(e) = h.check_invariants() {
        panic!("invariant violated at {:?}: {e}", h.elapsed());
    }
}

/// Adds the definition and `n` members named `<name>-<i>`, each requesting `cpu`.
fn add_gang(
    h: &mut Harness,
    name: &str,
    min: u32,
    n: usize,
    cpu: i64,
    created_ms: i64,
) -> GroupKey {
    let g = group_key(name);
    h.put_def(gang_def(name, min, created_ms));
    for i in 0..n {
        let mut p = member(&format!("{name}-{i}"), &g, cpu, 1);
        p.created_ms = created_ms + i as i64;
        h.put_pod(p);
    }
    g
}

/// A harness whose profile places gang members one per cycle
/// (`planWholeGangs: false`): members reserve as they go and wait at the
/// permit barrier, whose semantics these tests pin down.
fn per_pod_harness() -> Harness {
    let mut profile = ProfileConfig::new(SCHEDULER, Framework::default());
    profile.gang.as_mut().expect("gang args").plan_whole_gangs = false;
    Harness::with_config(EngineConfig::new(vec![profile]))
}

fn nodes(h: &mut Harness, n: usize, cpu: i64) {
    for i in 0..n {
        h.add_node(node(&format!("n{i}"), cpu, 64));
    }
}

/// No node has any CPU accounted (nothing bound, nothing reserved).
fn assert_nothing_held(h: &Harness) {
    let held: Vec<_> = h
        .engine
        .cache()
        .nodes()
        .iter()
        .filter(|n| n.requested.milli_cpu != 0)
        .map(|n| n.name().to_string())
        .collect();
    assert!(held.is_empty(), "resources held on {held:?}");
}

/// The phases of every group status written, in order.
fn phases(h: &Harness) -> Vec<GroupPhase> {
    h.actions
        .iter()
        .filter_map(|(_, a)| match a {
            Action::GroupStatus { phase, .. } => Some(*phase),
            _ => None,
        })
        .collect()
}

/// Bound member counts per group must be 0 or at least `min` at all times.
fn all_or_nothing(h: &Harness, g: &GroupKey, min: usize) {
    let b = h.bound_members(g);
    assert!(b == 0 || b >= min, "{g}: {b} members bound, quorum {min}");
}

#[test]
fn gang_that_fits_is_released_together() {
    let mut h = per_pod_harness();
    nodes(&mut h, 4, 4000);
    let g = add_gang(&mut h, "train", 4, 4, 3000, 100);
    h.settle();
    checked(&h);
    assert_eq!(h.bound_members(&g), 4);
    // Released at once: every bind happened at the same instant, on distinct nodes.
    assert!(h.binds.iter().all(|b| b.at == h.binds[0].at));
    let mut used: Vec<_> = h.binds.iter().map(|b| b.node.clone()).collect();
    used.sort();
    used.dedup();
    assert_eq!(used.len(), 4);
    // Members arrived one by one (drained each time): short of quorum, all
    // observed, then scheduled — one write each.
    assert_eq!(
        phases(&h),
        [
            GroupPhase::WaitingForMembers,
            GroupPhase::MembersObserved,
            GroupPhase::Scheduled
        ]
    );
    let stats = h.engine.stats(h.now());
    assert_eq!(stats.quorum_to_all_bound.count, 1);
    assert_eq!(stats.permit_wait.count, 3);
}

#[test]
fn gang_that_does_not_fit_binds_nobody_and_holds_nothing() {
    let mut h = Harness::new();
    nodes(&mut h, 2, 4000);
    let g = add_gang(&mut h, "big", 3, 3, 3000, 100);
    for _ in 0..20 {
        h.advance(Duration::from_secs(3));
        checked(&h);
        assert_eq!(h.bound_members(&g), 0);
    }
    assert!(h.binds.is_empty());
    assert!(h.engine.stats(h.now()).gang_early_releases > 0);
    // Between attempts nothing stays reserved.
    h.advance(Duration::from_millis(10));
    assert!(
        h.engine
            .cache()
            .nodes()
            .iter()
            .all(|n| n.requested.milli_cpu == 0 || !h.engine.gang().waiting().is_empty())
    );
    // Capacity arrives: the gang completes.
    h.add_node(node("n-extra", 4000, 64));
    h.advance(Duration::from_secs(15));
    checked(&h);
    assert_eq!(h.bound_members(&g), 3);
}

#[test]
fn barrier_times_out_and_releases_every_reservation() {
    let mut h = per_pod_harness();
    nodes(&mut h, 4, 4000);
    let g = group_key("slow");
    h.put_def(gang_def("slow", 3, 100));
    h.put_pod(member("slow-0", &g, 1000, 1));
    h.put_pod(member("slow-1", &g, 1000, 1));
    // The third member exists (so the gate opens) but is held by a scheduling gate.
    let mut held = member("slow-2", &g, 1000, 1);
    held.scheduling_gates = std::sync::Arc::from([std::sync::Arc::from("example.com/hold")]);
    h.put_pod(held.clone());
    h.settle();
    checked(&h);
    assert_eq!(h.engine.gang().waiting().len(), 2);
    assert_eq!(h.engine.location(&key("slow-2")), Some(PodLocation::Gated));
    h.advance(Duration::from_secs(59));
    assert_eq!(h.engine.gang().waiting().len(), 2);
    h.advance(Duration::from_secs(1));
    checked(&h);
    assert_eq!(
        h.events_with("FailedScheduling", "timed out waiting at permit"),
        2,
        "one Warning per waiting pod"
    );
    assert_eq!(h.engine.stats(h.now()).gang_timeouts, 1);
    assert!(h.binds.is_empty());
    // Right after the timeout the reservations are gone (members are backing off).
    assert!(h.engine.gang().waiting().is_empty());
    assert_eq!(
        h.engine.location(&key("slow-0")),
        Some(PodLocation::Backoff)
    );
    assert_nothing_held(&h);
    let rejected = phases(&h)
        .into_iter()
        .filter(|p| *p == GroupPhase::Unschedulable)
        .count();
    assert_eq!(rejected, 1);
    // The gate is lifted: the gang completes.
    held.scheduling_gates = std::sync::Arc::from([]);
    h.put_pod(held);
    h.advance(Duration::from_secs(11));
    checked(&h);
    assert_eq!(h.bound_members(&g), 3);
}

#[test]
fn unschedulable_member_releases_all_waiting_members_at_once() {
    let mut h = per_pod_harness();
    nodes(&mut h, 4, 4000);
    let g = group_key("sel");
    h.put_def(gang_def("sel", 4, 100));
    for i in 0..3 {
        let mut p = member(&format!("sel-{i}"), &g, 1000, 1);
        p.created_ms = i;
        h.put_pod(p);
    }
    let mut picky = member("sel-3", &g, 1000, 1);
    picky.created_ms = 3;
    Arc::make_mut(&mut picky.constraints)
        .node_selector
        .insert("gpu".into(), "h100".into());
    h.put_pod(picky);
    h.settle();
    checked(&h);
    assert_eq!(h.events_with("FailedScheduling", "released early"), 3);
    assert_eq!(h.engine.stats(h.now()).gang_early_releases, 1);
    assert!(h.engine.gang().waiting().is_empty());
    assert_nothing_held(&h);
    // The whole gang backs off for the group backoff (5 s): nobody is retried before.
    let attempts = h.engine.stats(h.now()).attempts_scheduled;
    h.advance(Duration::from_millis(4900));
    assert_eq!(h.engine.stats(h.now()).attempts_scheduled, attempts);
    // A matching node appears: the gang completes.
    let mut gpu = node("gpu-0", 4000, 64);
    gpu.labels.insert("gpu".into(), "h100".into());
    h.add_node(gpu);
    h.advance(Duration::from_secs(30));
    checked(&h);
    assert_eq!(h.bound_members(&g), 4);
    assert_eq!(h.node_of(&key("sel-3")).as_deref(), Some("gpu-0"));
}

#[test]
fn two_gangs_needing_sixty_percent_each_do_not_deadlock() {
    let mut h = Harness::new();
    nodes(&mut h, 10, 1000);
    // The younger gang's pods arrive first; the older gang is ordered first.
    let young = add_gang(&mut h, "young", 6, 6, 1000, 200);
    let old = add_gang(&mut h, "old", 6, 6, 1000, 100);
    for _ in 0..10 {
        h.advance(Duration::from_secs(2));
        checked(&h);
        all_or_nothing(&h, &old, 6);
        all_or_nothing(&h, &young, 6);
    }
    let (bo, by) = (h.bound_members(&old), h.bound_members(&young));
    assert!(
        bo == 6 && by == 0 || bo == 0 && by == 6,
        "old {bo} young {by}"
    );
    // The running gang finishes: the other one gets the cluster.
    let running = if bo == 6 { "old" } else { "young" };
    for i in 0..6 {
        h.finish_pod(&key(&format!("{running}-{i}")), PodPhase::Succeeded);
    }
    for _ in 0..10 {
        h.advance(Duration::from_secs(2));
        checked(&h);
        all_or_nothing(&h, &old, 6);
        all_or_nothing(&h, &young, 6);
    }
    assert_eq!(h.bound_members(&old) + h.bound_members(&young), 6);
    assert_eq!(h.binds.len(), 12);
}

#[test]
fn two_gangs_arriving_together_older_wins() {
    let mut h = Harness::new();
    nodes(&mut h, 10, 1000);
    let g_young = group_key("young");
    let g_old = group_key("old");
    h.put_def(gang_def("young", 6, 200));
    h.put_def(gang_def("old", 6, 100));
    // Interleave arrivals.
    for i in 0..6 {
        h.put_pod(member(&format!("young-{i}"), &g_young, 1000, 1));
        h.put_pod(member(&format!("old-{i}"), &g_old, 1000, 1));
    }
    h.settle();
    checked(&h);
    assert_eq!(h.bound_members(&g_old), 6);
    assert_eq!(h.bound_members(&g_young), 0);
}

/// Scores nodes by free CPU with the node's rank as a tie-breaker, so that
/// placement never depends on the tie-breaking RNG or the sampling rotation
/// (both of which gang pods legitimately advance).
struct MostFreeCpu;

impl Plugin for MostFreeCpu {
    fn name(&self) -> &'static str {
        "MostFreeCpu"
    }
}

impl ScorePlugin for MostFreeCpu {
    fn score(&self, _: &CycleState, _: &PodInfo, node: &NodeState) -> i64 {
        let rank: i64 = node
            .info
            .labels
            .get("rank")
            .and_then(|r| r.parse().ok())
            .unwrap_or(0);
        node.free().milli_cpu * 100 + rank
    }

    /// Scores must end in 0..=100: replace each raw score by its rank.
    fn normalize(&self, _: &CycleState, _: &PodInfo, scores: &mut [i64]) {
        let mut sorted = scores.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        for s in scores.iter_mut() {
            *s = sorted.binary_search(s).unwrap_or(0) as i64;
        }
    }
}

fn tie_free_harness() -> Harness {
    let framework = Framework {
        scorers: vec![(Arc::new(MostFreeCpu) as Arc<dyn ScorePlugin>, 1)],
        ..Framework::default()
    };
    Harness::with_config(EngineConfig::new(vec![ProfileConfig::new(
        SCHEDULER, framework,
    )]))
}

/// Plain pods are placed exactly as without any gang (I5): same node, same
/// time, while gangs come and go beside them.
#[test]
fn plain_pods_are_unaffected_by_gangs() {
    fn run(with_gangs: bool) -> Vec<(String, String, Duration)> {
        let mut h = tie_free_harness();
        for i in 0..6 {
            let mut n = node(&format!("plain-{i}"), 2000 + 700 * i, 16 + 8 * i);
            n.labels.insert("pool".into(), "plain".into());
            n.labels.insert("rank".into(), i.to_string());
            h.add_node(n);
            let mut n = node(&format!("gang-{i}"), 4000, 64);
            n.labels.insert("pool".into(), "gang".into());
            h.add_node(n);
        }
        for step in 0..12 {
            let mut p = pod(&format!("web-{step}"), 300 + 50 * step, 1);
            Arc::make_mut(&mut p.constraints)
                .node_selector
                .insert("pool".into(), "plain".into());
            p.created_ms = step;
            h.put_pod(p);
            if with_gangs {
                let name = format!("g{step}");
                let g = group_key(&name);
                h.put_def(gang_def(&name, 2, 1000 + step));
                for m in 0..2 {
                    let mut p = member(&format!("{name}-{m}"), &g, 1000, 1);
                    Arc::make_mut(&mut p.constraints)
                        .node_selector
                        .insert("pool".into(), "gang".into());
                    h.put_pod(p);
                }
            }
            h.advance(Duration::from_millis(500));
            checked(&h);
        }
        assert_eq!(h.binds.len(), if with_gangs { 36 } else { 12 });
        h.binds
            .iter()
            .filter(|b| b.pod.name.starts_with("web-"))
            .map(|b| (b.pod.name.to_string(), b.node.to_string(), b.at))
            .collect()
    }
    let alone = run(false);
    assert_eq!(alone.len(), 12);
    assert_eq!(run(true), alone);
}

#[test]
fn late_members_pass_straight_through_after_quorum() {
    let mut h = per_pod_harness();
    nodes(&mut h, 4, 4000);
    let g = add_gang(&mut h, "elastic", 2, 2, 1000, 100);
    h.settle();
    assert_eq!(h.bound_members(&g), 2);
    h.put_pod(member("elastic-late", &g, 1000, 1));
    h.settle();
    checked(&h);
    assert_eq!(h.bound_members(&g), 3);
    assert_eq!(h.events("GangWaiting"), 1, "only the first member waited");
}

#[test]
fn bind_failure_releases_and_retries() {
    let mut h = Harness::new();
    nodes(&mut h, 2, 4000);
    h.fail_next_binds(1);
    h.put_pod(pod("solo", 1000, 1));
    h.settle();
    checked(&h);
    assert!(h.binds.is_empty());
    assert_eq!(h.engine.location(&key("solo")), Some(PodLocation::Backoff));
    h.advance(Duration::from_secs(1));
    checked(&h);
    assert_eq!(h.binds.len(), 1);
}

#[test]
fn bind_latency_keeps_pods_binding_until_confirmed() {
    let mut h = Harness::new();
    nodes(&mut h, 2, 4000);
    h.bind_latency = Duration::from_millis(200);
    let g = add_gang(&mut h, "lat", 2, 2, 1000, 1);
    h.settle();
    checked(&h);
    assert_eq!(h.engine.location(&key("lat-0")), Some(PodLocation::Binding));
    h.advance(Duration::from_millis(200));
    checked(&h);
    assert_eq!(h.bound_members(&g), 2);
    let s = h.engine.stats(h.now());
    assert_eq!(s.quorum_to_all_bound.max, Duration::from_millis(200));
}

/// A pod watch stalled past the old 30 s
/// assumed-pod expiry must not free the capacity a bound pod uses. A
/// reservation whose binding succeeded is kept until the informer shows the
/// pod (here: a relist), however long that takes.
#[test]
fn a_bound_pod_keeps_its_reservation_until_the_informer_confirms_it() {
    let mut h = Harness::new();
    nodes(&mut h, 1, 4000);
    h.confirm_binds = false;
    h.put_pod(pod("bound-0", 3000, 1));
    h.settle();
    assert_eq!(h.node_of(&key("bound-0")).as_deref(), Some("n0"));
    h.advance(Duration::from_secs(34));
    h.put_pod(pod("later", 3000, 1));
    h.advance(Duration::from_secs(600));
    checked(&h);
    assert_eq!(h.engine.cache().nodes()[0].requested.milli_cpu, 3000);
    assert_eq!(h.node_of(&key("later")), None, "no room while bound-0 runs");
    // The watch resumes with a relist that shows the pod bound.
    h.confirm_binds = true;
    h.relist();
    h.settle();
    checked(&h);
    assert_eq!(h.engine.cache().nodes()[0].requested.milli_cpu, 3000);
    assert_eq!(h.node_of(&key("later")), None);
    // Gone: now the capacity is free.
    h.delete_pod(&key("bound-0"));
    h.advance(Duration::from_secs(11));
    checked(&h);
    assert_eq!(h.node_of(&key("later")).as_deref(), Some("n0"));
}

#[test]
fn plain_pod_blocked_by_a_waiting_gang_runs_when_the_gang_times_out() {
    let mut h = per_pod_harness();
    nodes(&mut h, 1, 4000);
    let g = group_key("hold");
    h.put_def(gang_def("hold", 2, 1));
    h.put_pod(member("hold-0", &g, 3000, 1));
    let mut held = member("hold-1", &g, 1000, 1);
    held.scheduling_gates = std::sync::Arc::from([std::sync::Arc::from("example.com/hold")]);
    h.put_pod(held);
    h.settle();
    assert_eq!(h.engine.gang().waiting().len(), 1);
    h.put_pod(pod("web", 2000, 1));
    h.settle();
    assert_eq!(
        h.engine.location(&key("web")),
        Some(PodLocation::Unschedulable)
    );
    h.advance(Duration::from_secs(60));
    checked(&h);
    // Freed by the timeout, not by the 5-minute periodic flush.
    assert_eq!(h.node_of(&key("web")).as_deref(), Some("n0"));
    assert_eq!(h.binds[0].at, Duration::from_secs(60));
}

// ---- required topology -------------------------------------------------------

const RACK: &str = "topology.kubernetes.io/rack";

/// Adds `n` nodes of `cpu` millicores in rack `rack`, named `<rack>-<i>`.
fn rack(h: &mut Harness, rack: &str, n: usize, cpu: i64) {
    for i in 0..n {
        let mut nd = node(&format!("{rack}-{i}"), cpu, 64);
        nd.labels.insert(RACK.into(), rack.into());
        h.add_node(nd);
    }
}

/// A gang like `add_gang` whose definition requires one rack.
fn add_rack_gang(h: &mut Harness, name: &str, min: u32, n: usize, cpu: i64) -> GroupKey {
    let g = add_gang(h, name, min, n, cpu, 100);
    let mut def = gang_def(name, min, 100);
    def.topology.required = Some(muster::model::LevelRef::Label(RACK.into()));
    h.put_def(def);
    g
}

/// The racks the group's bound members are on.
fn racks_of(h: &Harness, g: &GroupKey) -> Vec<String> {
    let mut racks: Vec<String> = h
        .pods()
        .filter(|p| p.group.key() == Some(g))
        .filter_map(|p| h.node_of(&p.key))
        .map(|n| n.split('-').next().unwrap_or_default().to_string())
        .collect();
    racks.sort();
    racks.dedup();
    racks
}

/// Invariants hold and all `n` members of `g` are bound, in `rack` alone.
fn all_bound_in_rack(h: &Harness, g: &GroupKey, n: usize, rack: &str) {
    checked(h);
    assert_eq!(h.bound_members(g), n);
    assert_eq!(racks_of(h, g), vec![rack]);
}

#[test]
fn required_topology_keeps_the_gang_in_one_rack() {
    let mut h = Harness::new();
    // Four members fit across the racks in many ways; only rack b holds all of them.
    rack(&mut h, "a", 3, 4000);
    rack(&mut h, "b", 5, 4000);
    rack(&mut h, "c", 8, 4000);
    h.add_node(node("unlabelled", 64_000, 64));
    let g = add_rack_gang(&mut h, "train", 4, 4, 3000);
    h.settle();
    // b is the tightest rack that holds the gang (c would too, with room to spare).
    all_bound_in_rack(&h, &g, 4, "b");
}

#[test]
fn required_topology_with_no_rack_big_enough_binds_nothing() {
    let mut h = Harness::new();
    rack(&mut h, "a", 2, 4000);
    rack(&mut h, "b", 3, 4000);
    h.add_node(node("unlabelled", 64_000, 64));
    let g = add_rack_gang(&mut h, "train", 4, 4, 3000);
    h.advance(Duration::from_secs(120));
    checked(&h);
    assert_eq!(h.bound_members(&g), 0);
    assert_nothing_held(&h);
    let msg = "PodGroup default/train requires all members within one domain of \
               topology.kubernetes.io/rack, and none holds them (the closest, \
               topology.kubernetes.io/rack b, has room for 3 of the 4 members: 1 more need 3 cpu, 1Gi memory each)";
    assert!(h.events_with("FailedScheduling", msg) > 0);
    let statuses = h.actions_where(|a| {
        matches!(a, Action::GroupStatus { initially_scheduled: false, message, .. } if message.contains(msg))
    });
    assert!(!statuses.is_empty(), "the group status says why");
}

/// The gang cycle tries the next rack in the same cycle when a plan fails
/// in the first: nothing is reserved in between, nothing released early.
#[test]
fn a_rack_whose_plan_fails_gives_way_to_the_next_in_the_same_cycle() {
    use muster::model::{Taint, TaintEffect};
    let mut h = Harness::new();
    rack(&mut h, "a", 4, 4000);
    rack(&mut h, "b", 5, 4000);
    let mut tainted = node("a-3", 4000, 64);
    tainted.labels.insert(RACK.into(), "a".into());
    tainted.taints.push(Taint {
        key: "maintenance".into(),
        value: String::new(),
        effect: TaintEffect::NoSchedule,
    });
    h.add_node(tainted);
    let g = add_rack_gang(&mut h, "train", 4, 4, 3000);
    h.settle();
    all_bound_in_rack(&h, &g, 4, "b");
    let stats = h.engine.stats(h.now());
    assert_eq!(stats.gang_early_releases, 0);
    assert_eq!(stats.attempts_scheduled, 4);
    let (tried, chosen) = h
        .engine
        .gang()
        .considered_domains()
        .get(&g)
        .cloned()
        .expect("the domains considered are kept");
    assert_eq!(
        tried,
        [
            "topology.kubernetes.io/rack a",
            "topology.kubernetes.io/rack b"
        ]
    );
    assert_eq!(chosen.as_deref(), Some("topology.kubernetes.io/rack b"));
    let debug = h.engine.debug_text(h.now());
    assert!(
        debug.contains("PodGroup default/train: tried [topology.kubernetes.io/rack a, topology.kubernetes.io/rack b]; placed in topology.kubernetes.io/rack b"),
        "{debug}"
    );
}

/// The debug page lists the first 50 groups by name, picked rather than
/// all sorted, and counts the rest.
#[test]
fn the_debug_page_shows_the_first_groups_and_counts_the_rest() {
    let mut h = Harness::new();
    rack(&mut h, "a", 8, 64_000);
    for i in 0..53 {
        add_rack_gang(&mut h, &format!("g{i:02}"), 1, 1, 100);
    }
    h.settle();
    let debug = h.engine.debug_text(h.now());
    let listed: Vec<&str> = debug
        .lines()
        .filter_map(|l| l.trim().strip_prefix("PodGroup default/"))
        .map(|l| l.split(':').next().unwrap_or_default())
        .collect();
    let first: Vec<String> = (0..50).map(|i| format!("g{i:02}")).collect();
    assert_eq!(listed, first, "{debug}");
    assert!(debug.contains("  ... and 3 more"), "{debug}");
}

/// Placement scoring (kube-scheduler 1.37's for PodGroups): rack a comes
/// first in BestFit order (both racks have room for exactly four members,
/// a sorts first) and its plan meets the quorum, but rack b's plan packs
/// the members tighter (cpu 12 of 14 cores against 12 of 16), so b wins.
#[test]
fn the_best_scored_rack_wins_over_the_first_that_fits() {
    let mut h = Harness::new();
    rack(&mut h, "a", 4, 4000);
    rack(&mut h, "b", 2, 7000);
    let g = add_rack_gang(&mut h, "train", 4, 4, 3000);
    h.settle();
    all_bound_in_rack(&h, &g, 4, "b");
    let stats = h.engine.stats(h.now());
    assert_eq!(stats.gang_early_releases, 0);
    assert_eq!(stats.attempts_scheduled, 4, "one attempt per member");
    let (tried, chosen) = h
        .engine
        .gang()
        .considered_domains()
        .get(&g)
        .cloned()
        .expect("the domains considered are kept");
    assert_eq!(
        tried,
        [
            "topology.kubernetes.io/rack a",
            "topology.kubernetes.io/rack b"
        ]
    );
    assert_eq!(chosen.as_deref(), Some("topology.kubernetes.io/rack b"));
}

/// Two racks that score the same: the try order (BestFit, then the name)
/// decides, so the first rack keeps the gang.
#[test]
fn equally_scored_racks_keep_the_try_order() {
    let mut h = Harness::new();
    rack(&mut h, "a", 4, 4000);
    rack(&mut h, "b", 4, 4000);
    let g = add_rack_gang(&mut h, "train", 4, 4, 3000);
    h.settle();
    all_bound_in_rack(&h, &g, 4, "a");
}

#[test]
fn a_rack_that_fails_late_is_released_and_another_is_tried() {
    use muster::model::{Taint, TaintEffect};
    let mut h = per_pod_harness();
    // Rack a counts room for 4 but one of its nodes is tainted: the fourth
    // member does not fit there. Rack b (5 nodes) holds the gang.
    rack(&mut h, "a", 4, 4000);
    rack(&mut h, "b", 5, 4000);
    let mut tainted = node("a-3", 4000, 64);
    tainted.labels.insert(RACK.into(), "a".into());
    tainted.taints.push(Taint {
        key: "maintenance".into(),
        value: String::new(),
        effect: TaintEffect::NoSchedule,
    });
    h.add_node(tainted);
    let g = add_rack_gang(&mut h, "train", 4, 4, 3000);
    h.settle();
    checked(&h);
    assert_eq!(h.bound_members(&g), 0, "no partial gang in rack a");
    assert_eq!(h.engine.stats(h.now()).gang_early_releases, 1);
    assert!(
        h.events_with(
            "FailedScheduling",
            "node(s) outside topology.kubernetes.io/rack=a"
        ) > 0
    );
    h.advance(Duration::from_secs(30));
    all_bound_in_rack(&h, &g, 4, "b");
}

#[test]
fn definition_priority_class_orders_gangs_whose_members_carry_none() {
    let mut h = Harness::new();
    nodes(&mut h, 2, 4000);
    // Older gang first by age, but the younger one's definition names a
    // higher priority class: with room for only one gang, the younger wins.
    let old = add_gang(&mut h, "old", 2, 2, 3000, 100);
    let mut def = gang_def("young", 2, 200);
    def.priority_class_name = Some("high".into());
    h.put_def(def);
    // The class arrives after the definition naming it: the engine
    // re-resolves the definition.
    h.put_priority_class("high", 1000, false);
    let young = group_key("young");
    for i in 0..2 {
        let mut p = member(&format!("young-{i}"), &young, 3000, 1);
        p.created_ms = 200;
        h.put_pod(p);
    }
    h.settle();
    checked(&h);
    assert_eq!(h.bound_members(&young), 2);
    assert_eq!(h.bound_members(&old), 0);
}

// ---- decisions the engine makes from informer facts ---------------------------

fn scheduled_events(h: &Harness) -> Vec<(Duration, String)> {
    h.actions
        .iter()
        .filter_map(|(at, a)| match a {
            Action::Scheduled { pod, .. } => Some((*at, pod.name.to_string())),
            _ => None,
        })
        .collect()
}

#[test]
fn the_scheduled_event_follows_a_successful_binding_only() {
    let mut h = Harness::new();
    nodes(&mut h, 1, 4000);
    h.bind_latency = Duration::from_millis(300);
    h.fail_next_binds(1);
    h.put_pod(pod("web", 1000, 1));
    h.settle();
    assert!(scheduled_events(&h).is_empty(), "not at bind time");
    h.advance(Duration::from_millis(300));
    assert!(h.binds.is_empty());
    assert!(
        scheduled_events(&h).is_empty(),
        "never for a failed binding"
    );
    h.advance(Duration::from_secs(2));
    checked(&h);
    assert_eq!(h.binds.len(), 1);
    let events = scheduled_events(&h);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0], (h.binds[0].at, "web".to_string()));
}

#[test]
fn pod_priority_comes_from_its_class_or_the_global_default() {
    let mut h = Harness::new();
    nodes(&mut h, 1, 1000);
    h.put_priority_class("high", 1000, false);
    h.put_priority_class("base", 10, true);
    // Room for one: the younger pod naming the higher class goes first.
    let mut low = pod("low", 1000, 1);
    low.priority_class_name = Some(Arc::from("missing"));
    h.put_pod(low);
    let mut high = pod("high", 1000, 1);
    high.priority_class_name = Some(Arc::from("high"));
    high.created_ms = 100;
    h.put_pod(high);
    let mut explicit = pod("explicit", 1000, 1);
    explicit.priority = 5;
    explicit.priority_class_name = Some(Arc::from("high"));
    h.put_pod(explicit);
    h.put_pod(pod("defaulted", 1000, 1));
    h.settle();
    checked(&h);
    assert_eq!(h.node_of(&key("high")).as_deref(), Some("n0"));
    let priority =
        |h: &Harness, name: &str| h.engine.cache().pod(&key(name)).map(|p| p.info.priority);
    assert_eq!(
        priority(&h, "low"),
        Some(0),
        "a class not observed resolves to nothing"
    );
    assert_eq!(
        priority(&h, "explicit"),
        Some(5),
        "an explicit priority wins"
    );
    assert_eq!(priority(&h, "defaulted"), Some(10), "the global default");
    h.delete_priority_class("base");
    h.put_pod(pod("late", 1000, 1));
    assert_eq!(priority(&h, "late"), Some(0), "no default any more");
}

#[test]
fn kueue_groups_are_synthesized_from_their_members() {
    use muster::driver::fixtures::{kueue_group_key, kueue_member};
    let mut h = Harness::new();
    nodes(&mut h, 2, 4000);
    let g = kueue_group_key("train");
    h.put_pod(kueue_member("train-0", "train", 3, 1000));
    h.put_pod(kueue_member("train-1", "train", 3, 1000));
    h.settle();
    checked(&h);
    assert_eq!(h.bound_members(&g), 0, "gated until the third member");
    assert_eq!(h.engine.location(&key("train-0")), Some(PodLocation::Gated));
    assert!(h.engine.gang().def(&g.definition).is_some());
    h.put_pod(kueue_member("train-2", "train", 3, 1000));
    h.settle();
    checked(&h);
    assert_eq!(h.bound_members(&g), 3);
    for i in 0..3 {
        h.delete_pod(&key(&format!("train-{i}")));
    }
    assert!(
        h.engine.gang().def(&g.definition).is_none(),
        "the definition leaves with its last member"
    );
}

#[test]
fn kueue_members_disagreeing_on_the_total_are_told_and_not_scheduled() {
    use muster::driver::fixtures::{kueue_group_key, kueue_member};
    let mut h = Harness::new();
    nodes(&mut h, 2, 4000);
    h.put_pod(kueue_member("k-0", "k", 2, 1000));
    h.put_pod(kueue_member("k-1", "k", 3, 1000));
    h.advance(Duration::from_secs(5));
    checked(&h);
    assert_eq!(h.bound_members(&kueue_group_key("k")), 0);
    let told = h.actions_where(
        |a| matches!(a, Action::PodUnschedulable { message, .. } if message.contains("disagree")),
    );
    assert!(!told.is_empty(), "{:?}", h.actions);
}

#[test]
fn a_profile_without_gang_scheduling_schedules_members_as_plain_pods() {
    let mut solo = ProfileConfig::new("solo", Framework::default());
    solo.gang = None;
    let mut h = Harness::with_config(EngineConfig::new(vec![
        ProfileConfig::new(SCHEDULER, Framework::default()),
        solo,
    ]));
    nodes(&mut h, 1, 4000);
    let g = group_key("big");
    h.put_def(gang_def("big", 5, 1));
    // Members of a gang of 5 that can never fill: the gang profile's member
    // waits; the solo profile's members are scheduled one by one.
    h.put_pod(member("big-gang", &g, 1000, 1));
    for i in 0..2 {
        let mut p = member(&format!("big-solo-{i}"), &g, 1000, 1);
        p.scheduler_name = Arc::from("solo");
        h.put_pod(p);
    }
    h.settle();
    checked(&h);
    assert!(h.node_of(&key("big-solo-0")).is_some());
    assert!(h.node_of(&key("big-solo-1")).is_some());
    assert_eq!(h.node_of(&key("big-gang")), None);
    assert_eq!(
        h.engine.location(&key("big-gang")),
        Some(PodLocation::Gated)
    );
}

#[test]
fn an_unreadable_pod_of_ours_is_told_once_per_error_and_scheduled_once_readable() {
    let mut h = Harness::new();
    nodes(&mut h, 1, 4000);
    let invalid = |h: &Harness| {
        h.actions_where(|a| matches!(a, Action::PodInvalid { .. }))
            .len()
    };
    h.put_invalid_pod(&key("bad"), Some(SCHEDULER), "spec.containers: invalid");
    h.put_invalid_pod(&key("bad"), Some(SCHEDULER), "spec.containers: invalid");
    assert_eq!(invalid(&h), 1, "once per error");
    h.put_invalid_pod(&key("bad"), Some(SCHEDULER), "spec.priority: invalid");
    assert_eq!(invalid(&h), 2, "a new error is told");
    h.put_invalid_pod(&key("theirs"), Some("default-scheduler"), "x");
    h.put_invalid_pod(&key("nameless"), None, "x");
    assert_eq!(invalid(&h), 2, "only pods of ours");
    h.put_pod(pod("bad", 1000, 1));
    h.settle();
    checked(&h);
    assert!(h.node_of(&key("bad")).is_some());
    // Readable again in between: the same error is told again.
    h.put_invalid_pod(&key("bad"), Some(SCHEDULER), "spec.priority: invalid");
    assert_eq!(invalid(&h), 3);
}

/// A gang whose members name two schedulers
/// that this engine both serves. Every member is told of the conflict,
/// whichever profile serves it, and nobody is bound.
#[test]
fn a_scheduler_name_conflict_is_reported_on_every_member() {
    let mut h = Harness::with_config(EngineConfig::new(vec![
        ProfileConfig::new(SCHEDULER, Framework::default()),
        ProfileConfig::new("muster-b", Framework::default()),
    ]));
    nodes(&mut h, 4, 4000);
    let g = group_key("split");
    h.put_def(gang_def("split", 3, 1));
    h.put_pod(member("split-0", &g, 1000, 1));
    h.put_pod(member("split-1", &g, 1000, 1));
    let mut b = member("split-b", &g, 1000, 1);
    b.scheduler_name = Arc::from("muster-b");
    h.put_pod(b);
    h.advance(Duration::from_secs(20));
    checked(&h);
    assert!(h.binds.is_empty());
    for name in ["split-0", "split-1", "split-b"] {
        let told = h.actions_where(|a| {
            matches!(a, Action::PodUnschedulable { pod, message, .. }
                if *pod == key(name) && message.contains("different schedulerNames"))
        });
        assert!(
            !told.is_empty(),
            "{name} has no condition naming the conflict"
        );
        let warned = h.actions_where(|a| {
            matches!(a, Action::Event { object: muster::engine::ObjectRef::Pod { key: p, .. }, reason: "FailedScheduling", message, .. }
                if *p == key(name) && message.contains("different schedulerNames"))
        });
        assert!(
            !warned.is_empty(),
            "{name} has no warning naming the conflict: {:?}",
            h.actions
        );
    }
}

/// A member reserved at Permit no longer shows
/// the gate's stale "waiting for N/M pods" condition; its condition says it
/// is reserved and waiting for the rest of its gang.
#[test]
fn a_member_reserved_at_permit_says_so() {
    let mut h = per_pod_harness();
    nodes(&mut h, 2, 2000);
    let g = group_key("grow");
    h.put_def(gang_def("grow", 3, 1));
    for i in 0..2 {
        h.put_pod(member(&format!("grow-{i}"), &g, 1000, 1));
    }
    h.settle();
    // Gated: 2 of 3 observed.
    let gated = h.actions_where(|a| {
        matches!(a, Action::PodUnschedulable { pod, message, .. }
            if *pod == key("grow-0") && message.contains("2/3"))
    });
    assert!(!gated.is_empty(), "{:?}", h.actions);
    // The third is observed but held by a scheduling gate: the other two
    // reserve and wait at Permit for it.
    let mut held = member("grow-2", &g, 1000, 1);
    held.scheduling_gates = std::sync::Arc::from([std::sync::Arc::from("example.com/hold")]);
    h.put_pod(held);
    h.settle();
    checked(&h);
    let waiting: Vec<PodKey> = h
        .engine
        .gang()
        .waiting()
        .iter()
        .map(|w| w.pod.key.clone())
        .collect();
    assert_eq!(waiting.len(), 2, "both wait at Permit");
    for w in &waiting {
        let last = h
            .actions
            .iter()
            .rev()
            .find_map(|(_, a)| match a {
                Action::PodUnschedulable { pod, message, .. } if pod == w => Some(message.clone()),
                _ => None,
            })
            .unwrap_or_default();
        assert!(
            last.contains("reserved") && last.contains("until 3 members") && !last.contains("2/3"),
            "{w}: last condition {last:?}"
        );
    }
}

/// A capped gang timeout is reported on the definition once per value asked
/// for, not again on every resync.
#[test]
fn a_capped_timeout_is_reported_once_per_value() {
    use muster::model::CappedTimeout;
    let mut h = Harness::new();
    nodes(&mut h, 1, 4000);
    let capped = |requested: &str| {
        let mut d = gang_def("long", 2, 1);
        d.timeout_capped = Some(Box::new(CappedTimeout {
            field: "annotation muster.dev/schedule-timeout-seconds".into(),
            requested: requested.into(),
        }));
        d
    };
    h.put_def(capped("9223372036854775807"));
    h.put_def(capped("9223372036854775807"));
    h.settle();
    assert_eq!(h.events("TimeoutCapped"), 1);
    h.put_def(capped("99999999"));
    h.settle();
    assert_eq!(h.events("TimeoutCapped"), 2);
    assert_eq!(h.events_with("TimeoutCapped", "capped at 86400s"), 2);
}

// ---- the gang cycle (planWholeGangs, the default) ----------------------------

/// A gang whose quorum is present is planned in one cycle and released in
/// one go: no member ever waits at Permit, one attempt per member.
#[test]
fn a_gang_is_planned_whole_and_released_in_one_cycle() {
    let mut h = Harness::new();
    nodes(&mut h, 4, 4000);
    let g = add_gang(&mut h, "train", 4, 4, 3000, 100);
    h.settle();
    checked(&h);
    assert_eq!(h.bound_members(&g), 4);
    assert!(h.binds.iter().all(|b| b.at == h.binds[0].at));
    let mut used: Vec<_> = h.binds.iter().map(|b| b.node.clone()).collect();
    used.sort();
    used.dedup();
    assert_eq!(used.len(), 4, "members see each other's planned placements");
    assert_eq!(h.events("GangWaiting"), 0);
    let stats = h.engine.stats(h.now());
    assert_eq!(stats.attempts_scheduled, 4);
    assert_eq!(stats.attempts_unschedulable, 0);
    assert_eq!(stats.permit_wait.count, 0);
    assert_eq!(stats.quorum_to_all_bound.count, 1);
    assert_eq!(
        phases(&h).last(),
        Some(&GroupPhase::Scheduled),
        "{:?}",
        phases(&h)
    );
}

/// A gang that does not fit never holds a node, at any step: a failed plan
/// is undone inside its cycle, and the message says how far it got.
#[test]
fn a_gang_that_does_not_fit_never_holds_a_node() {
    let mut h = Harness::new();
    nodes(&mut h, 2, 4000);
    let g = add_gang(&mut h, "big", 3, 3, 3000, 100);
    for _ in 0..40 {
        h.advance(Duration::from_millis(700));
        checked(&h);
        assert!(h.engine.gang().waiting().is_empty());
        assert_nothing_held(&h);
    }
    assert!(h.binds.is_empty());
    assert!(
        h.events_with(
            "FailedScheduling",
            "PodGroup default/big cannot be placed as a whole: 2 of the 3 members needed could be placed; member default/big-2 fits no node: 0/2 nodes are available"
        ) > 0
    );
    h.add_node(node("n-extra", 4000, 64));
    h.advance(Duration::from_secs(15));
    checked(&h);
    assert_eq!(h.bound_members(&g), 3);
}

/// Two gangs that each need 60% of the cluster: the first planned binds with
/// one attempt per member; the second reserves nothing, so the first is
/// never released early because of it (no churn).
#[test]
fn two_gangs_needing_sixty_percent_each_do_not_churn() {
    let mut h = Harness::new();
    nodes(&mut h, 10, 4000);
    let a = add_gang(&mut h, "a", 6, 6, 4000, 100);
    let b = add_gang(&mut h, "b", 6, 6, 4000, 101);
    h.settle();
    checked(&h);
    assert_eq!(h.bound_members(&a), 6);
    assert_eq!(h.bound_members(&b), 0);
    let stats = h.engine.stats(h.now());
    assert_eq!(stats.attempts_scheduled, 6, "one attempt per bound member");
    assert_eq!(stats.gang_timeouts, 0);
    assert_nothing_held_but_bound(&h);
    for _ in 0..10 {
        h.advance(Duration::from_secs(3));
        checked(&h);
        assert_eq!(h.engine.stats(h.now()).attempts_scheduled, 6);
    }
    // The first gang finishes: the second is placed whole.
    for i in 0..6 {
        h.finish_pod(&key(&format!("a-{i}")), PodPhase::Succeeded);
    }
    h.advance(Duration::from_secs(15));
    checked(&h);
    assert_eq!(h.bound_members(&b), 6);
}

/// Members beyond the quorum that fit nowhere are refused on their own; the
/// quorum binds.
#[test]
fn members_beyond_the_quorum_that_do_not_fit_are_refused_alone() {
    let mut h = Harness::new();
    nodes(&mut h, 2, 4000);
    let g = add_gang(&mut h, "elastic", 2, 3, 3000, 100);
    h.settle();
    checked(&h);
    assert_eq!(h.bound_members(&g), 2);
    let left = (0..3)
        .map(|i| key(&format!("elastic-{i}")))
        .find(|k| h.node_of(k).is_none())
        .expect("one member left");
    assert_eq!(h.engine.location(&left), Some(PodLocation::Unschedulable));
    assert_eq!(h.engine.stats(h.now()).gang_early_releases, 0);
}

/// Nothing but bound pods holds resources.
fn assert_nothing_held_but_bound(h: &Harness) {
    let assumed = h
        .engine
        .cache()
        .pods()
        .filter(|p| matches!(p.state, muster::cache::PodState::Assumed { .. }))
        .count();
    assert_eq!(assumed, 0);
}

// ---- topology over a hierarchy ------------------------------------------------

mod hierarchy {
    use super::*;
    use muster::model::topology::{
        HyperNodeDef, HyperNodeMember, HyperNodeMemberKind, MemberSelector, TopologyChange,
        TopologyDef,
    };
    use muster::model::{LevelRef, SliceRequest, TopologyRequest};

    const BLOCK: &str = "cloud.provider.com/topology-block";
    const RACK: &str = "cloud.provider.com/topology-rack";

    fn label(key: &str) -> LevelRef {
        LevelRef::Label(key.into())
    }

    /// `blocks` × `racks` × `per_rack` nodes of `cpu`, named `b0-r1-n2`, with
    /// a Kueue Topology declaring block → rack → hostname.
    fn tree(h: &mut Harness, blocks: usize, racks: usize, per_rack: usize, cpu: i64) {
        h.put_topology(TopologyChange::TopologyUpserted(TopologyDef {
            name: "default".into(),
            levels: vec![BLOCK.into(), RACK.into(), "kubernetes.io/hostname".into()],
        }));
        for b in 0..blocks {
            for r in 0..racks {
                for n in 0..per_rack {
                    let name = format!("b{b}-r{r}-n{n}");
                    let mut nd = node(&name, cpu, 64);
                    nd.labels.insert(BLOCK.into(), format!("b{b}"));
                    // Rack names repeat across blocks: domains are per block.
                    nd.labels.insert(RACK.into(), format!("r{r}"));
                    nd.labels
                        .insert("kubernetes.io/hostname".into(), name.clone());
                    h.add_node(nd);
                }
            }
        }
    }

    fn gang_with(h: &mut Harness, name: &str, n: usize, cpu: i64, t: TopologyRequest) -> GroupKey {
        let g = add_gang(h, name, n as u32, n, cpu, 100);
        let mut def = gang_def(name, n as u32, 100);
        *def.topology = t;
        h.put_def(def);
        g
    }

    /// The distinct `prefix` parts (`b0`, `b0-r1`) of the members' nodes.
    fn spread(h: &Harness, g: &GroupKey, parts: usize) -> Vec<String> {
        let mut out: Vec<String> = h
            .pods()
            .filter(|p| p.group.key() == Some(g))
            .filter_map(|p| h.node_of(&p.key))
            .map(|n| n.split('-').take(parts).collect::<Vec<_>>().join("-"))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    #[test]
    fn a_preferred_rack_falls_back_to_one_block() {
        let mut h = Harness::new();
        tree(&mut h, 2, 2, 2, 4000);
        let g = gang_with(
            &mut h,
            "g",
            3,
            3000,
            TopologyRequest::preferred(label(RACK)),
        );
        h.settle();
        checked(&h);
        assert_eq!(h.bound_members(&g), 3);
        assert_eq!(spread(&h, &g, 1).len(), 1, "one block");
        assert_eq!(spread(&h, &g, 2).len(), 2, "no rack holds three");
    }

    #[test]
    fn a_preferred_rack_that_fits_stays_in_one_rack() {
        let mut h = Harness::new();
        tree(&mut h, 2, 2, 2, 4000);
        let g = gang_with(
            &mut h,
            "g",
            2,
            3000,
            TopologyRequest::preferred(label(RACK)),
        );
        h.settle();
        checked(&h);
        assert_eq!(spread(&h, &g, 2).len(), 1);
    }

    #[test]
    fn a_preferred_rack_falls_back_to_the_whole_cluster() {
        let mut h = Harness::new();
        tree(&mut h, 2, 2, 2, 4000);
        let g = gang_with(
            &mut h,
            "g",
            6,
            3000,
            TopologyRequest::preferred(label(RACK)),
        );
        h.settle();
        checked(&h);
        assert_eq!(h.bound_members(&g), 6);
        assert_eq!(spread(&h, &g, 1).len(), 2);
    }

    #[test]
    fn a_required_block_with_a_preferred_rack_never_leaves_the_block() {
        let mut h = Harness::new();
        tree(&mut h, 2, 2, 2, 4000);
        let t = TopologyRequest {
            required: Some(label(BLOCK)),
            preferred: Some(label(RACK)),
            ..TopologyRequest::default()
        };
        let g = gang_with(&mut h, "fits", 4, 3000, t.clone());
        h.settle();
        checked(&h);
        assert_eq!(spread(&h, &g, 1).len(), 1);
        // Five members fit in no block: refused, although the cluster holds them.
        let big = gang_with(&mut h, "big", 5, 3000, t);
        h.advance(Duration::from_secs(10));
        checked(&h);
        assert_eq!(h.bound_members(&big), 0);
        assert!(h.events_with("FailedScheduling", &format!("within one domain of {BLOCK}")) > 0);
    }

    #[test]
    fn slices_are_whole_racks_within_one_block() {
        let mut h = Harness::new();
        tree(&mut h, 2, 3, 2, 4000);
        let t = TopologyRequest {
            required: Some(label(BLOCK)),
            slice: Some(SliceRequest {
                level: label(RACK),
                size: 2,
            }),
            ..TopologyRequest::default()
        };
        let g = gang_with(&mut h, "g", 6, 3000, t);
        h.settle();
        checked(&h);
        assert_eq!(h.bound_members(&g), 6);
        assert_eq!(spread(&h, &g, 1).len(), 1);
        // Each pair of members (queue order) shares a rack.
        for pair in 0..3 {
            let racks: std::collections::BTreeSet<String> = (0..2)
                .filter_map(|i| h.node_of(&key(&format!("g-{}", pair * 2 + i))))
                .map(|n| n.split('-').take(2).collect::<Vec<_>>().join("-"))
                .collect();
            assert_eq!(racks.len(), 1, "slice {pair}: {racks:?}");
        }
    }

    /// Volcano: tier-1 HyperNodes hold nodes by name, a tier-2 one holds
    /// them by pattern; a hard network topology up to tier 2.
    #[test]
    fn volcano_hyper_node_tiers_confine_a_gang() {
        let mut h = Harness::new();
        for i in 0..6 {
            h.add_node(node(&format!("n{i}"), 4000, 64));
        }
        let member = |kind, selector| HyperNodeMember { kind, selector };
        for (name, nodes) in [("s0", ["n0", "n1"]), ("s1", ["n2", "n3"])] {
            h.put_topology(TopologyChange::HyperNodeUpserted(HyperNodeDef {
                name: name.into(),
                tier: 1,
                tier_name: None,
                members: nodes
                    .iter()
                    .map(|n| {
                        member(
                            HyperNodeMemberKind::Node,
                            MemberSelector::Exact((*n).into()),
                        )
                    })
                    .collect(),
            }));
        }
        h.put_topology(TopologyChange::HyperNodeUpserted(HyperNodeDef {
            name: "top".into(),
            tier: 2,
            tier_name: Some("spine".into()),
            members: vec![member(
                HyperNodeMemberKind::HyperNode,
                MemberSelector::Regex("^s[0-9]+$".into()),
            )],
        }));
        let t = TopologyRequest {
            preferred: Some(LevelRef::Tier(1)),
            // `highestTierName: spine`: the tier of HyperNode top.
            required: Some(LevelRef::TierName("spine".into())),
            ..TopologyRequest::default()
        };
        let g = gang_with(&mut h, "g", 3, 3000, t);
        h.settle();
        checked(&h);
        assert_eq!(h.bound_members(&g), 3);
        let nodes: Vec<Arc<str>> = (0..3)
            .filter_map(|i| h.node_of(&key(&format!("g-{i}"))))
            .collect();
        assert!(
            nodes
                .iter()
                .all(|n| ["n0", "n1", "n2", "n3"].contains(&&**n)),
            "inside HyperNode top: {nodes:?}"
        );
    }

    /// A CompositePodGroup requiring one block over two PodGroups each
    /// requiring one rack: both children land in racks of the same block.
    /// Rack r0 of block b0 is taken by another scheduler, so block b0 holds
    /// one child only and the composite must go to b1.
    #[test]
    fn a_composite_confines_its_children_to_one_block_each_in_a_rack() {
        use muster::model::{DefinitionKey, GroupDef, GroupPolicy, GroupSource};
        let mut h = Harness::new();
        tree(&mut h, 2, 2, 2, 4000);
        for n in 0..2 {
            let mut filler = pod(&format!("other-{n}"), 4000, 1);
            filler.node_name = Some(Arc::from(format!("b0-r0-n{n}").as_str()));
            h.put_pod(filler);
        }
        let key = DefinitionKey::new("default", GroupSource::CompositePodGroup, "job");
        let mut job = GroupDef::new(
            key,
            Ok(GroupPolicy::Gang {
                min_count: 2,
                schedule_timeout: None,
            }),
            1,
        );
        *job.topology = TopologyRequest::required(label(BLOCK));
        h.put_def(job);
        let mut groups = Vec::new();
        for child in ["a", "b"] {
            let mut def = gang_def(child, 2, 1);
            def.extras.parent_composite = Some("job".into());
            *def.topology = TopologyRequest::required(label(RACK));
            h.put_def(def);
            let g = group_key(child);
            for i in 0..2 {
                h.put_pod(member(&format!("{child}-{i}"), &g, 3000, 1));
            }
            groups.push(g);
        }
        h.settle();
        checked(&h);
        let mut blocks = Vec::new();
        for g in &groups {
            assert_eq!(h.bound_members(g), 2, "{g}");
            assert_eq!(spread(&h, g, 2).len(), 1, "{g} in one rack");
            blocks.extend(spread(&h, g, 1));
        }
        blocks.dedup();
        assert_eq!(blocks, ["b1"], "both children in block b1");
    }
}

// ---- overload: a gang's timeout measures its own wait -----------

mod overload {
    use super::*;
    use muster::model::GroupPolicy;

    /// Each cycle costs this much clock time, so a backlog becomes waiting.
    const CYCLE: Duration = Duration::from_millis(100);
    /// The gang's own timeout, far shorter than the backlog ahead of it.
    const GANG_TIMEOUT: Duration = Duration::from_secs(5);

    fn short_timeout_gang(h: &mut Harness, name: &str, n: usize, created_ms: i64) -> GroupKey {
        let mut def = gang_def(name, n as u32, created_ms);
        def.policy = Ok(GroupPolicy::Gang {
            min_count: n as u32,
            schedule_timeout: Some(GANG_TIMEOUT),
        });
        h.put_def(def);
        let g = group_key(name);
        for i in 0..n {
            let mut p = member(&format!("{name}-{i}"), &g, 100, 1);
            p.created_ms = created_ms + i as i64;
            h.put_pod(p);
        }
        g
    }

    /// `backlog` plain pods created before `created_ms`, `priority` each.
    fn backlog(h: &mut Harness, prefix: &str, n: usize, priority: i32) {
        for i in 0..n {
            let mut p = pod(&format!("{prefix}-{i}"), 10, 0);
            p.created_ms = i as i64;
            p.priority = priority;
            h.put_pod(p);
        }
    }

    /// 400 pods (40 s of cycles) are queued ahead of a gang whose timeout
    /// is 5 s: the gang waits its turn and then binds with one attempt per
    /// member and no timeout, in both gang modes.
    fn a_gang_behind_a_backlog_binds_without_timing_out(mut h: Harness) {
        nodes(&mut h, 8, 64_000);
        backlog(&mut h, "old", 400, 0);
        let g = short_timeout_gang(&mut h, "late", 4, 10_000);
        h.run_busy(CYCLE, Duration::from_secs(60));
        checked(&h);
        assert_eq!(h.bound_members(&g), 4);
        let stats = h.engine.stats(h.now());
        assert_eq!(
            stats.gang_timeouts, 0,
            "released for a backlog it did not cause"
        );
        assert_eq!(h.events_with("FailedScheduling", "timed out"), 0);
        // One attempt per pod: nothing was retried.
        assert_eq!(stats.attempts_scheduled, 404);
        assert_eq!(stats.attempts_unschedulable, 0);
        // The gang really waited longer than its timeout before its turn.
        let first_gang_bind = h
            .binds
            .iter()
            .find(|b| b.pod.name.starts_with("late-"))
            .map(|b| b.at)
            .unwrap();
        assert!(first_gang_bind > GANG_TIMEOUT * 4, "{first_gang_bind:?}");
    }

    #[test]
    fn whole_gang_mode() {
        a_gang_behind_a_backlog_binds_without_timing_out(Harness::new());
    }

    #[test]
    fn per_pod_mode() {
        a_gang_behind_a_backlog_binds_without_timing_out(per_pod_harness());
    }

    /// Per-pod mode, the hard case: half the gang has reached Permit when a
    /// burst of higher-priority pods arrives. The members still queued go
    /// before the burst (the gang already holds nodes), so the gang binds
    /// without timing out instead of being released for the burst.
    #[test]
    fn per_pod_mode_a_burst_arriving_mid_gang_does_not_time_it_out() {
        let mut h = per_pod_harness();
        nodes(&mut h, 8, 64_000);
        let g = short_timeout_gang(&mut h, "mid", 4, 10_000);
        // Two cycles: two members reserve and wait at Permit.
        h.run_busy(CYCLE, CYCLE * 2 - Duration::from_millis(1));
        assert_eq!(h.engine.gang().waiting().len(), 2);
        backlog(&mut h, "urgent", 400, 1000);
        h.run_busy(CYCLE, Duration::from_secs(60));
        checked(&h);
        assert_eq!(h.bound_members(&g), 4);
        assert_eq!(h.engine.stats(h.now()).gang_timeouts, 0);
        assert_eq!(h.events_with("FailedScheduling", "timed out"), 0);
        assert_eq!(h.binds.len(), 404);
    }
}
