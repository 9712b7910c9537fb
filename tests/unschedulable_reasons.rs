//! Honest `Unschedulable` on the deterministic driver: a pod is
//! `Unschedulable` only when capacity is missing. A pod that would fit but
//! for the room a reservation holds for a gang ahead of it says
//! `WaitingForReservation`; a gang short of ready members says
//! `WaitingForMembers`; an invalid group says `InvalidGroup`.

use std::time::Duration;

use muster::driver::Harness;
use muster::driver::fixtures::{SCHEDULER, gang_def, group_key, member, node, pod};
use muster::engine::{Action, EngineConfig, ProfileConfig};
use muster::framework::PendingReason;
use muster::framework::placement::Framework;
use muster::gang::{DialectTimeouts, GangArgs};
use muster::model::{PodKey, PodPhase};

fn harness(nodes: usize, reserve_after: Duration) -> Harness {
    let mut profile = ProfileConfig::new(SCHEDULER, Framework::default());
    let mut args = GangArgs {
        dialect_timeouts: DialectTimeouts::UNIFORM,
        ..GangArgs::default()
    };
    args.reservations.reserve_after = reserve_after;
    profile.gang = Some(args);
    let mut h = Harness::with_config(EngineConfig::new(vec![profile]));
    for i in 0..nodes {
        h.add_node(node(&format!("n{i}"), 4000, 64));
    }
    h
}

/// The reason of the last `PodScheduled=False` condition written for `name`.
fn last_reason(h: &Harness, name: &str) -> Option<PendingReason> {
    let key = PodKey::new("default", name);
    h.actions_where(|a| matches!(a, Action::PodUnschedulable { pod, .. } if *pod == key))
        .last()
        .and_then(|a| match a {
            Action::PodUnschedulable { reason, .. } => Some(*reason),
            _ => None,
        })
}

#[test]
fn a_pod_kept_off_reserved_room_waits_for_the_reservation_not_for_capacity() {
    let mut h = harness(4, Duration::from_secs(1));
    // Every node full; a gang of two whole nodes waits and gets a reservation.
    for i in 0..4 {
        h.put_pod(pod(&format!("f{i}"), 4000, 1));
    }
    h.settle();
    let g = group_key("big");
    h.put_def(gang_def("big", 2, 1));
    h.put_pod(member("big-0", &g, 4000, 1));
    h.put_pod(member("big-1", &g, 4000, 1));
    h.settle();
    // It fails for longer than reserveAfterSeconds; then f0 ends, which
    // wakes it: it fails again (the others still run) and room is reserved for it,
    // f0's node among it.
    h.advance(Duration::from_millis(1500));
    h.finish_pod(&PodKey::new("default", "f0"), PodPhase::Succeeded);
    for _ in 0..20 {
        if h.events("Reserved") > 0 {
            break;
        }
        h.advance(Duration::from_millis(250));
    }
    assert!(h.events("Reserved") > 0, "the gang got no reservation");
    // The gang waits for capacity (the other fillers still run).
    assert_eq!(last_reason(&h, "big-0"), Some(PendingReason::Unschedulable));
    h.put_pod(pod("late", 1000, 1));
    h.settle();
    assert!(h.node_of(&PodKey::new("default", "late")).is_none());
    assert_eq!(
        last_reason(&h, "late"),
        Some(PendingReason::WaitingForReservation),
        "a pod that fits but for a reservation is not demand for nodes"
    );
    // A pod no node could take even without the reservation is Unschedulable.
    h.put_pod(pod("huge", 8000, 1));
    h.settle();
    assert_eq!(last_reason(&h, "huge"), Some(PendingReason::Unschedulable));
    h.check_invariants().expect("invariants hold");
}

#[test]
fn a_gang_too_big_for_the_cluster_is_unschedulable_and_only_it() {
    let mut h = harness(2, Duration::from_secs(600));
    let g = group_key("big");
    h.put_def(gang_def("big", 3, 1));
    for i in 0..3 {
        h.put_pod(member(&format!("big-{i}"), &g, 4000, 1));
    }
    // A gang whose quorum is not observed: waiting for members.
    let s = group_key("short");
    h.put_def(gang_def("short", 3, 1));
    h.put_pod(member("short-0", &s, 1000, 1));
    // Members naming a group with no definition: waiting for it.
    h.put_pod(member("orphan-0", &group_key("absent"), 1000, 1));
    h.settle();
    for i in 0..3 {
        assert_eq!(
            last_reason(&h, &format!("big-{i}")),
            Some(PendingReason::Unschedulable)
        );
    }
    assert_eq!(
        last_reason(&h, "short-0"),
        Some(PendingReason::WaitingForMembers)
    );
    assert_eq!(
        last_reason(&h, "orphan-0"),
        Some(PendingReason::WaitingForDefinition)
    );
    let unschedulable = h.actions_where(|a| {
        matches!(
            a,
            Action::PodUnschedulable {
                reason: PendingReason::Unschedulable,
                ..
            }
        )
    });
    assert_eq!(unschedulable.len(), 3, "{unschedulable:?}");
}

/// docs/operations.md says how each autoscaler reacts to every reason.
#[test]
fn every_reason_is_documented_for_the_autoscalers() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/operations.md"),
    )
    .expect("docs/operations.md");
    for r in PendingReason::ALL {
        assert!(
            doc.contains(&format!("| `{}` |", r.as_str())),
            "docs/operations.md has no row for {r}"
        );
    }
    assert!(
        PendingReason::ALL
            .iter()
            .filter(|r| r.is_capacity_demand())
            .eq([&PendingReason::Unschedulable])
    );
}
