//! Reservations and backfill in the engine: a gang that keeps failing gets
//! room held after `reserveAfterSeconds`, pods of its priority cannot take
//! that room, a pod whose declared end comes first may (backfill), a more
//! important pod is never held back, and the gang binds once the room is
//! free.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::driver::fixtures::{arc, gang_def, group_key, member, node, pod};
use crate::engine::tests::{binds, engine};
use crate::engine::{Action, ClusterEvent, Engine};
use crate::model::{PodInfo, PodKey};

/// Wall clock at the start of every test (Unix ms).
const WALL: i64 = 1_700_000_000_000;

fn events(actions: &[Action], reason: &str) -> usize {
    actions
        .iter()
        .filter(|a| matches!(a, Action::Event { reason: r, .. } if *r == reason))
        .count()
}

/// Four 4-core nodes, each full with four 1-core pods (declaring
/// `deadline` seconds from `WALL` when given); a gang of two 4-core pods
/// (half the cluster, what `maxReservedFraction` allows) that cannot fit,
/// tried once at `t0`.
fn starving(deadline: Option<u32>) -> (Engine, Instant) {
    let mut e = engine();
    let t0 = Instant::now();
    e.set_wall_clock(t0, WALL);
    for n in ["n0", "n1", "n2", "n3"] {
        e.on_event(ClusterEvent::NodeUpserted(arc(node(n, 4000, 16))), t0);
        for i in 0..4 {
            let mut p = pod(&format!("{n}-small-{i}"), 1000, 1);
            p.node_name = Some(Arc::from(n));
            p.started_ms = WALL;
            p.active_deadline_seconds = deadline;
            e.on_event(ClusterEvent::PodUpserted(arc(p)), t0);
        }
    }
    let g = group_key("big");
    e.on_event(ClusterEvent::GroupDefUpserted(gang_def("big", 2, 1)), t0);
    for i in 0..2 {
        e.on_event(
            ClusterEvent::PodUpserted(arc(member(&format!("big-{i}"), &g, 4000, 1))),
            t0,
        );
    }
    e.run_until_idle(t0);
    assert!(binds(&e.drain_actions()).is_empty());
    (e, t0)
}

/// Frees one core on `node` (a small pod ends) at `t` and runs the engine.
fn one_ends(e: &mut Engine, node: &str, i: usize, t: Instant) -> Vec<Action> {
    e.set_wall_clock(t, WALL + (t.duration_since(t_base(e)).as_millis() as i64));
    e.on_event(
        ClusterEvent::PodDeleted(PodKey::new("default", &format!("{node}-small-{i}"))),
        t,
    );
    e.run_until_idle(t);
    e.drain_actions()
}

/// The instant the wall clock was first read at (the tests' `t0`).
fn t_base(e: &Engine) -> Instant {
    e.reservations
        .wall
        .map(|(at, _)| at)
        .unwrap_or_else(Instant::now)
}

fn newcomer(name: &str, priority: i32, deadline: Option<u32>) -> PodInfo {
    let mut p = pod(name, 1000, 1);
    p.priority = priority;
    p.active_deadline_seconds = deadline;
    p
}

#[test]
fn a_starving_gang_gets_its_room_held_and_binds_when_it_frees() {
    let (mut e, t0) = starving(None);
    // Before reserveAfterSeconds (60 s): a freed core goes to anyone.
    let t1 = t0 + Duration::from_secs(30);
    let actions = one_ends(&mut e, "n0", 0, t1);
    assert_eq!(events(&actions, "Reserved"), 0);
    e.on_event(
        ClusterEvent::PodUpserted(arc(newcomer("early", 0, None))),
        t1,
    );
    e.run_until_idle(t1);
    assert_eq!(binds(&e.drain_actions()), [("early".into(), "n0".into())]);

    // After it: the gang's next failure reserves both nodes.
    let t2 = t0 + Duration::from_secs(61);
    let actions = one_ends(&mut e, "n1", 0, t2);
    assert_eq!(events(&actions, "Reserved"), 1, "{actions:?}");
    assert!(
        actions
            .iter()
            .any(|a| matches!(a, Action::GroupReservation { reserved: true, .. }))
    );
    assert_eq!(e.stats(t2).reservations.active, 1);
    assert_eq!(e.stats(t2).reservations.reserved_nodes, 2);
    // `kubectl muster explain` says so.
    let target = super::super::ExplainTarget::parse("default", "podgroup/big").expect("target");
    let answer = &e.explain(&target, t2)[0];
    assert_eq!(answer.phase, crate::explain::Phase::Reserved, "{answer:?}");
    let held = answer.reservation.as_ref().expect("the reservation");
    assert_eq!(
        held.nodes,
        ["n1", "n0"],
        "the node with fewer pods to wait for first"
    );
    assert_eq!(
        held.expected_start_seconds, None,
        "the pods it waits for declare no end"
    );
    assert!(
        e.debug_text(t2)
            .contains("reservations: 1 holding 2 node(s)")
    );

    // A pod of the same priority no longer takes the freed core.
    e.on_event(
        ClusterEvent::PodUpserted(arc(newcomer("late", 0, None))),
        t2,
    );
    e.run_until_idle(t2);
    assert!(
        binds(&e.drain_actions()).is_empty(),
        "reserved room is not taken"
    );
    // Nor does one declaring an end: no end is known for the room.
    e.on_event(
        ClusterEvent::PodUpserted(arc(newcomer("short", 0, Some(2)))),
        t2,
    );
    e.run_until_idle(t2);
    assert!(binds(&e.drain_actions()).is_empty());
    // A more important pod is never held back.
    e.on_event(
        ClusterEvent::PodUpserted(arc(newcomer("vip", 10, None))),
        t2,
    );
    e.run_until_idle(t2);
    assert_eq!(binds(&e.drain_actions()), [("vip".into(), "n1".into())]);
    e.on_event(ClusterEvent::PodDeleted(PodKey::new("default", "vip")), t2);

    // The room frees: the gang binds, its reservation ends.
    let mut last = Vec::new();
    for (n, from) in [("n0", 1), ("n1", 1)] {
        for i in from..4 {
            last = one_ends(&mut e, n, i, t2);
        }
    }
    // `early` still holds a core on n0.
    e.on_event(
        ClusterEvent::PodDeleted(PodKey::new("default", "early")),
        t2,
    );
    e.run_until_idle(t2);
    last.extend(e.drain_actions());
    // Past the gang's backoff, it is tried again and fits.
    let t3 = t2 + Duration::from_secs(30);
    e.run_until_idle(t3);
    last.extend(e.drain_actions());
    let mut placed = binds(&last);
    placed.sort();
    assert_eq!(placed.len(), 2, "{last:?}");
    assert!(
        placed.iter().all(|(p, _)| p.starts_with("big-")),
        "{placed:?}"
    );
    assert_eq!(events(&last, "ReservationEnded"), 1);
    assert_eq!(e.stats(t3).reservations.active, 0);
}

#[test]
fn a_pod_ending_before_the_expected_start_backfills_reserved_room() {
    // Every small pod declares it ends 600 s after it started.
    let (mut e, t0) = starving(Some(600));
    let t1 = t0 + Duration::from_secs(61);
    let actions = one_ends(&mut e, "n0", 0, t1);
    assert_eq!(events(&actions, "Reserved"), 1, "{actions:?}");
    // Ending in 2 s, long before the room is expected free: backfilled.
    e.on_event(
        ClusterEvent::PodUpserted(arc(newcomer("quick", 0, Some(2)))),
        t1,
    );
    e.run_until_idle(t1);
    assert_eq!(binds(&e.drain_actions()), [("quick".into(), "n0".into())]);
    assert_eq!(e.stats(t1).reservations.backfilled, 1);
    // One without a declared end never does; one ending after the
    // expected start does not either.
    e.on_event(
        ClusterEvent::PodDeleted(PodKey::new("default", "quick")),
        t1,
    );
    e.on_event(
        ClusterEvent::PodUpserted(arc(newcomer("forever", 0, None))),
        t1,
    );
    e.on_event(
        ClusterEvent::PodUpserted(arc(newcomer("slow", 0, Some(3600)))),
        t1,
    );
    e.run_until_idle(t1);
    assert!(binds(&e.drain_actions()).is_empty());
}

#[test]
fn reservations_are_off_at_zero_and_for_a_group_that_says_so() {
    let (mut e, t0) = starving(None);
    let mut def = gang_def("big", 2, 1);
    def.extras.reserve_after = Some(Duration::ZERO);
    e.on_event(ClusterEvent::GroupDefUpserted(def), t0);
    let t1 = t0 + Duration::from_secs(3600);
    let actions = one_ends(&mut e, "n0", 0, t1);
    assert_eq!(events(&actions, "Reserved"), 0);
    e.on_event(
        ClusterEvent::PodUpserted(arc(newcomer("anyone", 0, None))),
        t1,
    );
    e.run_until_idle(t1);
    assert_eq!(binds(&e.drain_actions()), [("anyone".into(), "n0".into())]);
}

#[test]
fn a_reservation_not_started_in_time_ends() {
    let (mut e, t0) = starving(None);
    let t1 = t0 + Duration::from_secs(61);
    let actions = one_ends(&mut e, "n0", 0, t1);
    assert_eq!(events(&actions, "Reserved"), 1);
    let t2 = t1 + Duration::from_secs(601);
    assert!(e.next_deadline().is_some_and(|d| d <= t2));
    e.tick(t2);
    let actions = e.drain_actions();
    assert_eq!(events(&actions, "ReservationEnded"), 1, "{actions:?}");
    assert_eq!(e.stats(t2).reservations.active, 0);
}

#[test]
fn the_oldest_failing_gang_is_reserved_for_first() {
    let (mut e, t0) = starving(None);
    // A younger gang of the same priority starts failing later.
    let t1 = t0 + Duration::from_secs(10);
    let y = group_key("young");
    e.on_event(ClusterEvent::GroupDefUpserted(gang_def("young", 2, 2)), t1);
    for i in 0..2 {
        e.on_event(
            ClusterEvent::PodUpserted(arc(member(&format!("young-{i}"), &y, 4000, 1))),
            t1,
        );
    }
    e.run_until_idle(t1);
    e.drain_actions();
    let t2 = t0 + Duration::from_secs(75);
    one_ends(&mut e, "n0", 0, t2);
    let reserved: Vec<String> = e.reservations.iter().map(|(g, _)| g.to_string()).collect();
    assert_eq!(reserved, ["PodGroup default/big"]);
}

#[test]
fn a_reservation_ends_when_its_pods_are_gone() {
    let (mut e, t0) = starving(None);
    let t1 = t0 + Duration::from_secs(61);
    assert_eq!(events(&one_ends(&mut e, "n0", 0, t1), "Reserved"), 1);
    for i in 0..2 {
        e.on_event(
            ClusterEvent::PodDeleted(PodKey::new("default", &format!("big-{i}"))),
            t1,
        );
    }
    let actions = e.drain_actions();
    assert_eq!(events(&actions, "ReservationEnded"), 1, "{actions:?}");
    // Its room is anyone's again.
    e.on_event(
        ClusterEvent::PodUpserted(arc(newcomer("anyone", 0, None))),
        t1,
    );
    e.run_until_idle(t1);
    assert_eq!(binds(&e.drain_actions()), [("anyone".into(), "n0".into())]);
}

#[test]
fn a_reservation_on_a_deleted_node_ends() {
    let (mut e, t0) = starving(None);
    let t1 = t0 + Duration::from_secs(61);
    assert_eq!(events(&one_ends(&mut e, "n0", 0, t1), "Reserved"), 1);
    e.on_event(ClusterEvent::NodeDeleted(Arc::from("n0")), t1);
    let actions = e.drain_actions();
    assert_eq!(events(&actions, "ReservationEnded"), 1, "{actions:?}");
}
