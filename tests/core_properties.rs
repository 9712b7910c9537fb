//! Property tests over random event sequences (invariants I1–I5 after every
//! step) and the edge-case table of gang-semantics.md as explicit tests.

use std::sync::Arc;
use std::time::Duration;

use muster::driver::Harness;
use muster::driver::fixtures::{
    SCHEDULER, def_key, gang_def, group_key, kueue_group_key, kueue_member, member, node, pod,
};
use muster::engine::{Action, EngineConfig, EventType, PodLocation, ProfileConfig};
use muster::framework::placement::Framework;
use muster::model::{GroupDef, GroupMembership, GroupPolicy, PodInfo, PodKey, PodPhase, Resources};
use proptest::prelude::*;
use proptest::sample::Index;

fn key(name: &str) -> PodKey {
    PodKey::new("default", name)
}

fn checked(h: &Harness) {
    if let Err(e) = h.check_invariants() {
        panic!("invariant violated at {:?}: {e}", h.elapsed());
    }
}

fn cluster(n: usize, cpu: i64) -> Harness {
    let mut h = Harness::new();
    for i in 0..n {
        h.add_node(node(&format!("n{i}"), cpu, 64));
    }
    h
}

/// A cluster whose profile places gang members one per cycle
/// (`planWholeGangs: false`), so members wait at the permit barrier: the
/// barrier's own edge cases are tested there.
fn cluster_per_pod(n: usize, cpu: i64) -> Harness {
    let mut profile = ProfileConfig::new(SCHEDULER, Framework::default());
    profile.gang.as_mut().expect("gang args").plan_whole_gangs = false;
    let mut h = Harness::with_config(EngineConfig::new(vec![profile]));
    for i in 0..n {
        h.add_node(node(&format!("n{i}"), cpu, 64));
    }
    h
}

/// Conditions written for a pod, in order.
fn conditions(h: &Harness, pod: &PodKey) -> Vec<String> {
    h.actions
        .iter()
        .filter_map(|(_, a)| match a {
            Action::PodUnschedulable {
                pod: p, message, ..
            } if p == pod => Some(message.clone()),
            _ => None,
        })
        .collect()
}

fn warnings_for(h: &Harness, pod: &PodKey) -> Vec<String> {
    h.actions
        .iter()
        .filter_map(|(_, a)| match a {
            Action::Event {
                object: muster::engine::ObjectRef::Pod { key: p, .. },
                type_: EventType::Warning,
                message,
                ..
            } if p == pod => Some(message.clone()),
            _ => None,
        })
        .collect()
}

/// Two members of `name` placed and waiting at Permit; a third exists but is
/// held by a scheduling gate, so the barrier (min 3) cannot be met.
fn two_waiting(h: &mut Harness, name: &str) {
    let g = group_key(name);
    h.put_def(gang_def(name, 3, 100));
    h.put_pod(member(&format!("{name}-0"), &g, 1000, 1));
    h.put_pod(member(&format!("{name}-1"), &g, 1000, 1));
    let mut held = member(&format!("{name}-2"), &g, 1000, 1);
    held.scheduling_gates = std::sync::Arc::from([std::sync::Arc::from("example.com/hold")]);
    h.put_pod(held);
    h.settle();
    assert_eq!(h.engine.gang().waiting().len(), 2);
}

// ---- the edge-case table ----------------------------------------------------

#[test]
fn edge_members_with_different_scheduler_names_are_all_rejected() {
    let mut h = cluster(4, 4000);
    let g = group_key("mixed");
    h.put_def(gang_def("mixed", 2, 1));
    h.put_pod(member("mixed-0", &g, 1000, 1));
    h.put_pod(member("mixed-1", &g, 1000, 1));
    let mut other = member("mixed-2", &g, 1000, 1);
    other.scheduler_name = Arc::from("default-scheduler");
    h.put_pod(other);
    h.advance(Duration::from_secs(20));
    checked(&h);
    assert!(h.binds.is_empty());
    for name in ["mixed-0", "mixed-1"] {
        let w = warnings_for(&h, &key(name));
        assert!(
            w.iter()
                .any(|m| m.contains("default-scheduler (1)") && m.contains("muster (2)")),
            "{name}: {w:?}"
        );
    }
}

#[test]
fn edge_conflicting_member_rejects_waiting_members() {
    let mut h = cluster_per_pod(4, 4000);
    two_waiting(&mut h, "w");
    let mut other = member("w-x", &group_key("w"), 1000, 1);
    other.scheduler_name = Arc::from("default-scheduler");
    h.put_pod(other);
    checked(&h);
    assert!(h.engine.gang().waiting().is_empty());
    assert!(
        warnings_for(&h, &key("w-0"))
            .iter()
            .any(|m| m.contains("different schedulerNames"))
    );
}

#[test]
fn edge_min_count_above_members_stays_gated_with_count() {
    let mut h = cluster(4, 4000);
    let g = group_key("big");
    h.put_def(gang_def("big", 5, 1));
    h.put_pod(member("big-0", &g, 1000, 1));
    h.put_pod(member("big-1", &g, 1000, 1));
    h.advance(Duration::from_secs(400));
    checked(&h);
    assert_eq!(h.engine.location(&key("big-0")), Some(PodLocation::Gated));
    let c = conditions(&h, &key("big-0"));
    assert_eq!(
        c.last().map(String::as_str),
        Some("waiting for 2/5 pods of PodGroup default/big")
    );
    // Written once per change (1/5 then 2/5), never per retry.
    assert_eq!(c.len(), 2, "{c:?}");
    assert_eq!(h.engine.stats(h.now()).pending.gated, 2);
}

#[test]
fn edge_min_count_lowered_while_waiting_releases() {
    let mut h = cluster_per_pod(4, 4000);
    two_waiting(&mut h, "lower");
    h.put_def(gang_def("lower", 2, 100));
    h.settle();
    checked(&h);
    assert_eq!(h.bound_members(&group_key("lower")), 2);
}

#[test]
fn edge_min_count_raised_applies_from_next_evaluation() {
    let mut h = cluster(4, 4000);
    let g = group_key("raise");
    h.put_def(gang_def("raise", 2, 1));
    h.put_pod(member("raise-0", &g, 1000, 1));
    h.put_def(gang_def("raise", 3, 1));
    h.put_pod(member("raise-1", &g, 1000, 1));
    h.settle();
    assert_eq!(h.engine.location(&key("raise-1")), Some(PodLocation::Gated));
    h.put_pod(member("raise-2", &g, 1000, 1));
    h.settle();
    checked(&h);
    assert_eq!(h.bound_members(&g), 3);
}

#[test]
fn edge_waiting_member_deleted_leaves_the_barrier() {
    let mut h = cluster_per_pod(4, 4000);
    two_waiting(&mut h, "del");
    h.delete_pod(&key("del-0"));
    checked(&h);
    assert_eq!(h.engine.gang().waiting().len(), 1);
    let used: i64 = h
        .engine
        .cache()
        .nodes()
        .iter()
        .map(|n| n.requested.milli_cpu)
        .sum();
    assert_eq!(used, 1000, "the deleted member's reservation is gone");
    h.advance(Duration::from_secs(60));
    checked(&h);
    assert!(h.engine.gang().waiting().is_empty());
    assert_eq!(
        h.events_with("FailedScheduling", "timed out waiting at permit"),
        1
    );
}

#[test]
fn edge_node_deleted_under_reserved_members_requeues_them() {
    let mut h = cluster_per_pod(4, 4000);
    two_waiting(&mut h, "nd");
    let node0 = h
        .engine
        .gang()
        .waiting()
        .get(&key("nd-0"))
        .map(|w| w.node.clone())
        .unwrap();
    h.delete_node(&node0);
    checked(&h);
    assert_eq!(h.engine.location(&key("nd-0")), Some(PodLocation::Backoff));
    assert_eq!(h.engine.gang().waiting().len(), 1);
    h.advance(Duration::from_secs(2));
    checked(&h);
    assert_eq!(
        h.engine.gang().waiting().len(),
        2,
        "re-placed on another node"
    );
    assert_ne!(
        h.engine
            .gang()
            .waiting()
            .get(&key("nd-0"))
            .map(|w| w.node.clone()),
        Some(node0)
    );
}

#[test]
fn edge_definition_deleted_while_waiting_regates() {
    let mut h = cluster_per_pod(4, 4000);
    two_waiting(&mut h, "gone");
    h.delete_def(&def_key("gone"));
    checked(&h);
    assert!(h.engine.gang().waiting().is_empty());
    for i in 0..3 {
        assert_eq!(
            h.engine.location(&key(&format!("gone-{i}"))),
            Some(PodLocation::Gated)
        );
    }
    assert_eq!(
        conditions(&h, &key("gone-0")).last().map(String::as_str),
        Some("waiting for PodGroup default/gone to be created")
    );
    assert!(
        h.engine
            .cache()
            .nodes()
            .iter()
            .all(|n| n.requested.milli_cpu == 0)
    );
    // Re-created: the gang runs again from the gate.
    h.put_def(gang_def("gone", 2, 100));
    h.settle();
    checked(&h);
    assert_eq!(h.bound_members(&group_key("gone")), 2);
}

#[test]
fn edge_basic_policy_has_no_barrier() {
    let mut h = cluster(2, 4000);
    let g = group_key("basic");
    let mut def = gang_def("basic", 3, 1);
    def.policy = Ok(GroupPolicy::Basic);
    h.put_def(def);
    h.put_pod(member("basic-0", &g, 3000, 1));
    h.put_pod(member("basic-1", &g, 3000, 1));
    h.put_pod(member("basic-2", &g, 3000, 1));
    h.settle();
    checked(&h);
    assert_eq!(h.bound_members(&g), 2, "members are ordinary pods");
    assert_eq!(h.events("GangWaiting"), 0);
}

#[test]
fn edge_malformed_reference_and_definitions_are_reported_not_scheduled() {
    let mut h = cluster(2, 4000);
    let mut bad_ref = pod("bad-ref", 100, 1);
    bad_ref.group = GroupMembership::Invalid("spec.schedulingGroup.podGroupName is empty".into());
    h.put_pod(bad_ref);
    let zero = group_key("zero");
    h.put_def(gang_def("zero", 0, 1));
    h.put_pod(member("zero-0", &zero, 100, 1));
    let broken = group_key("broken");
    let mut def = gang_def("broken", 1, 1);
    def.policy = Err("unknown policy \"strict\"".into());
    h.put_def(def);
    h.put_pod(member("broken-0", &broken, 100, 1));
    h.advance(Duration::from_secs(30));
    checked(&h);
    assert!(h.binds.is_empty());
    let expect = [
        (
            "bad-ref",
            "invalid group reference: spec.schedulingGroup.podGroupName is empty",
        ),
        (
            "zero-0",
            "PodGroup default/zero is invalid: minCount must be positive, got 0",
        ),
        (
            "broken-0",
            "PodGroup default/broken is invalid: unknown policy \"strict\"",
        ),
    ];
    for (name, msg) in expect {
        assert_eq!(conditions(&h, &key(name)), vec![msg.to_string()], "{name}");
        assert_eq!(
            warnings_for(&h, &key(name)),
            vec![msg.to_string()],
            "{name}"
        );
        assert_eq!(h.engine.location(&key(name)), Some(PodLocation::Gated));
    }
    // Fixing the definition schedules the member.
    h.put_def(gang_def("broken", 1, 1));
    h.settle();
    assert_eq!(h.bound_members(&broken), 1);
}

#[test]
fn min_resources_beyond_free_capacity_is_refused_precisely() {
    let mut h = cluster(2, 4000);
    let g = group_key("hungry");
    let mut def = gang_def("hungry", 1, 1);
    def.min_resources = Some(Resources {
        milli_cpu: 16000,
        ..Resources::default()
    });
    h.put_def(def);
    h.put_pod(member("hungry-0", &g, 100, 1));
    h.settle();
    checked(&h);
    assert!(h.binds.is_empty());
    let c = conditions(&h, &key("hungry-0"));
    assert_eq!(
        c.last().map(String::as_str),
        Some(
            "PodGroup default/hungry requires minResources the cluster cannot provide: insufficient cpu (needs 16000, 8000 free)"
        )
    );
    for i in 2..4 {
        h.add_node(node(&format!("n{i}"), 4000, 64));
    }
    h.advance(Duration::from_secs(6));
    assert_eq!(h.bound_members(&g), 1);
}

#[test]
fn timeout_resolution_definition_then_profile_default() {
    let mut cfg = EngineConfig::new(vec![ProfileConfig::new(SCHEDULER, Framework::default())]);
    cfg.profiles[0]
        .gang
        .as_mut()
        .expect("gang args")
        .permit_waiting_time = Duration::from_secs(20);
    cfg.profiles[0]
        .gang
        .as_mut()
        .expect("gang args")
        .plan_whole_gangs = false;
    let mut h = Harness::with_config(cfg);
    for i in 0..4 {
        h.add_node(node(&format!("n{i}"), 4000, 64));
    }
    two_waiting(&mut h, "prof");
    let t0 = h.now();
    assert_eq!(
        h.engine.gang().deadline(&group_key("prof")),
        Some(t0 + Duration::from_secs(20))
    );
    let g = group_key("own");
    let mut def = gang_def("own", 3, 1);
    def.policy = Ok(GroupPolicy::Gang {
        min_count: 3,
        schedule_timeout: Some(Duration::from_secs(7)),
    });
    h.put_def(def);
    h.put_pod(member("own-0", &g, 100, 1));
    h.put_pod(member("own-1", &g, 100, 1));
    let mut held = member("own-2", &g, 100, 1);
    held.scheduling_gates = std::sync::Arc::from([std::sync::Arc::from("example.com/hold")]);
    h.put_pod(held);
    h.settle();
    assert_eq!(
        h.engine.gang().deadline(&g),
        Some(t0 + Duration::from_secs(7))
    );
}

#[test]
fn unschedulable_condition_is_written_once_per_message() {
    let mut h = cluster(1, 1000);
    h.put_pod(pod("huge", 8000, 1));
    for i in 0..5 {
        // Allocatable grows (still too small): an event that can make room,
        // so the pod is retried each time.
        h.add_node(node("n0", 1001 + i, 64));
        h.advance(Duration::from_secs(11));
    }
    assert!(h.engine.stats(h.now()).attempts_unschedulable >= 5);
    assert_eq!(conditions(&h, &key("huge")).len(), 1);
}

#[test]
fn group_status_true_is_terminal() {
    let mut h = cluster(2, 4000);
    let g = group_key("t");
    h.put_def(gang_def("t", 2, 1));
    h.put_pod(member("t-0", &g, 1000, 1));
    h.put_pod(member("t-1", &g, 1000, 1));
    h.settle();
    // A later member that cannot fit does not flip the group back.
    h.put_pod(member("t-2", &g, 8000, 1));
    h.advance(Duration::from_secs(20));
    let statuses = h.actions_where(|a| matches!(a, Action::GroupStatus { .. }));
    // Waiting for members (t-0 alone), members observed, scheduled: nothing after.
    assert_eq!(statuses.len(), 3);
    assert!(matches!(
        statuses.last(),
        Some(Action::GroupStatus {
            initially_scheduled: true,
            ..
        })
    ));
}

#[test]
fn gating_status_is_written_on_change_not_per_member() {
    use muster::model::GroupPhase;
    let mut h = cluster(2, 4000);
    let g = group_key("big");
    h.put_def(gang_def("big", 300, 1));
    for i in 0..299 {
        h.put_pod(member(&format!("big-{i}"), &g, 1, 1));
    }
    let phases = |h: &Harness| -> Vec<(GroupPhase, String)> {
        h.actions_where(|a| matches!(a, Action::GroupStatus { .. }))
            .into_iter()
            .filter_map(|a| match a {
                Action::GroupStatus { phase, message, .. } => Some((*phase, message.clone())),
                _ => None,
            })
            .collect()
    };
    // 299 members arriving one by one: one write, on the first.
    assert_eq!(
        phases(&h),
        vec![(
            GroupPhase::WaitingForMembers,
            "1 of 300 members observed".into()
        )]
    );
    // Quorum lost again after it was reached: written again, once each way.
    h.put_pod(member("big-299", &g, 1, 1));
    h.delete_pod(&key("big-0"));
    assert_eq!(
        phases(&h)[1..],
        [
            (
                GroupPhase::MembersObserved,
                "300 of 300 members observed".into()
            ),
            (
                GroupPhase::WaitingForMembers,
                "299 of 300 members observed".into()
            ),
        ]
    );
}

// ---- inter-pod anti-affinity (I5) -------------------------------------------------

/// I5 is a real check: without the InterPodAffinity filter two anti-affine
/// pods share a node and the invariant says so; with it they do not.
#[test]
fn i5_catches_anti_affine_pods_sharing_a_node() {
    let run = |framework: Framework| {
        let mut h = Harness::with_config(EngineConfig::new(vec![ProfileConfig::new(
            SCHEDULER, framework,
        )]));
        let mut n = node("n0", 8000, 64);
        n.labels.insert(HOSTNAME.into(), "n0".into());
        h.add_node(n);
        for name in ["a", "b"] {
            let mut p = pod(name, 500, 1);
            anti_affine(&mut p, "spread", HOSTNAME);
            h.put_pod(p);
        }
        h.settle();
        h
    };
    let mut without = Framework::default();
    without.filters.retain(|p| p.name() != "InterPodAffinity");
    without
        .pre_filters
        .retain(|p| p.name() != "InterPodAffinity");
    let e = run(without).check_invariants().unwrap_err();
    assert!(e.starts_with("I5:"), "{e}");
    let h = run(Framework::default());
    checked(&h);
    assert_eq!(h.binds.len(), 1, "one of the two runs");
}

/// A gang of three mutually anti-affine members (one per node) on two
/// nodes: no member is bound, and the refusal names the anti-affinity.
#[test]
fn anti_affine_gang_larger_than_the_cluster_stays_whole_pending() {
    let mut h = Harness::new();
    for i in 0..2 {
        let mut n = node(&format!("n{i}"), 8000, 64);
        n.labels.insert(HOSTNAME.into(), format!("n{i}"));
        h.add_node(n);
    }
    let g = group_key("spread");
    h.put_def(gang_def("spread", 3, 0));
    for m in 0..3 {
        let mut p = member(&format!("spread-{m}"), &g, 500, 1);
        anti_affine(&mut p, "spread", HOSTNAME);
        h.put_pod(p);
    }
    h.settle();
    h.advance(Duration::from_secs(30));
    checked(&h);
    assert_eq!(h.binds.len(), 0);
    assert!(
        h.events_with("FailedScheduling", "didn't match pod anti-affinity rules") > 0,
        "{:?}",
        h.actions
    );
    // A third node lets the whole gang run, one member per node.
    let mut n = node("n2", 8000, 64);
    n.labels.insert(HOSTNAME.into(), "n2".into());
    h.add_node(n);
    h.advance(Duration::from_secs(30));
    checked(&h);
    let mut nodes: Vec<_> = (0..3)
        .filter_map(|m| h.node_of(&key(&format!("spread-{m}"))))
        .collect();
    nodes.sort();
    nodes.dedup();
    assert_eq!(nodes.len(), 3, "{nodes:?}");
}

/// A pod refused for lack of the pod its required affinity needs is retried
/// as soon as such a pod is placed, not at the periodic flush.
#[test]
fn affinity_waiter_is_retried_when_its_target_is_placed() {
    use muster::model::{LabelSelector, PodAffinityTerm};
    let mut h = Harness::new();
    for i in 0..2 {
        let mut n = node(&format!("n{i}"), 8000, 64);
        n.labels.insert("zone".into(), "z".into());
        h.add_node(n);
    }
    let mut web = pod("web", 500, 1);
    Arc::make_mut(&mut web.constraints)
        .pod_affinity
        .required_affinity
        .push(PodAffinityTerm {
            label_selector: LabelSelector::from_map(
                &[("app".to_string(), "db".to_string())].into(),
            ),
            namespaces: vec![web.key.namespace.clone()],
            namespace_selector: LabelSelector::nothing(),
            topology_key: "zone".into(),
            match_label_keys: Vec::new(),
            mismatch_label_keys: Vec::new(),
        });
    h.put_pod(web);
    h.settle();
    assert!(h.events_with("FailedScheduling", "didn't match pod affinity rules") > 0);
    let mut db = pod("db", 500, 1);
    std::sync::Arc::make_mut(&mut db.labels).insert("app".into(), "db".into());
    h.put_pod(db);
    h.settle();
    assert!(h.node_of(&key("db")).is_some());
    h.advance(Duration::from_secs(3));
    checked(&h);
    assert!(
        h.node_of(&key("web")).is_some(),
        "retried after db was placed"
    );
}

// ---- topology spread (I5) ------------------------------------------------------

#[test]
fn spread_pods_fill_racks_evenly_and_the_checker_sees_violations() {
    let racked = |h: &mut Harness| {
        for (i, rack) in ["rack-0", "rack-0", "rack-1", "rack-1"].iter().enumerate() {
            let mut n = node(&format!("n{i}"), 4000, 64);
            n.labels.insert(RACK.into(), (*rack).into());
            h.add_node(n);
        }
    };
    // With the default profile: 2 + 2, then a fifth pod still fits (skew 1).
    let mut h = Harness::new();
    racked(&mut h);
    for i in 0..5 {
        h.put_pod(spread_pod(&format!("s{i}"), 100, 1, None));
        h.settle();
    }
    checked(&h);
    assert_eq!(h.binds.len(), 5);
    // minDomains 3 with two racks: the global minimum counts as 0, and both
    // racks (3 and 2 matching pods) are beyond 0 + maxSkew 1.
    h.put_pod(spread_pod("strict", 100, 1, Some(3)));
    h.settle();
    checked(&h);
    assert_eq!(h.binds.len(), 5, "the minDomains pod stays pending");

    // Without the plugin the same pods pile up, and I5 says so.
    let mut h = Harness::with_config(EngineConfig::new(vec![ProfileConfig::new(
        SCHEDULER,
        Framework::empty(),
    )]));
    racked(&mut h);
    for i in 0..6 {
        h.put_pod(spread_pod(&format!("s{i}"), 100, 1, None));
        h.settle();
    }
    let e = h.check_invariants().unwrap_err();
    assert!(e.starts_with("I5: "), "{e}");
}

// ---- properties ---------------------------------------------------------------

#[derive(Debug, Clone)]
enum Op {
    AddNode {
        cpu: i64,
        /// `rack-0`, `rack-1`, or no rack label (2).
        rack: u8,
    },
    DeleteNode(Index),
    AddPlain {
        cpu: i64,
        /// Names PriorityClass `c<n>`.
        class: Option<u8>,
    },
    AddGang {
        min: u32,
        members: usize,
        cpu: i64,
        def_first: bool,
        timeout_s: Option<u64>,
        /// Requires all members within one rack.
        one_rack: bool,
        /// The definition names PriorityClass `c<n>`.
        class: Option<u8>,
        /// Members are mutually anti-affine, one per node (I5).
        spread: bool,
    },
    /// A plain pod labelled `app: spread` with required anti-affinity to
    /// `app: spread` by rack (`by_rack`) or by node (I5).
    AddAntiAffine {
        cpu: i64,
        by_rack: bool,
    },
    /// A Kueue pod group (no definition object) of `members` pods announcing `total`.
    AddKueueGang {
        total: u32,
        members: usize,
        cpu: i64,
    },
    /// A member of an existing group in the profile without gang scheduling.
    AddSoloMember {
        group: Index,
        cpu: i64,
    },
    PutClass {
        class: u8,
        value: i32,
        global_default: bool,
    },
    DeleteClass(u8),
    /// The pod's spec can no longer be read.
    MakeInvalid(Index),
    AddMember {
        group: Index,
        cpu: i64,
    },
    AddConflictingMember(Index),
    AddForeignBound {
        node: Index,
        cpu: i64,
    },
    /// A plain pod labelled `app: spread` that spreads over racks
    /// (`DoNotSchedule`) with the given maxSkew and minDomains.
    AddSpread {
        cpu: i64,
        max_skew: i64,
        min_domains: Option<i64>,
    },
    DeletePod(Index),
    /// Deleted and created again under the same name, the delete unseen.
    RecreatePod(Index),
    FinishPod(Index),
    SetMin {
        group: Index,
        min: u32,
    },
    MakeBasic(Index),
    DeleteDef(Index),
    RestoreDef(Index),
    FailNextBind,
    SetBindLatency(u64),
    Settle,
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (1..=4i64, 0..=2u8).prop_map(|(c, rack)| Op::AddNode { cpu: c * 1000, rack }),
        1 => any::<Index>().prop_map(Op::DeleteNode),
        2 => (1..=6i64, prop::option::weighted(0.3, 0..3u8)).prop_map(|(c, class)| Op::AddPlain { cpu: c * 250, class }),
        3 => (1..=4u32, 0..=5usize, 1..=6i64, any::<bool>(), prop::option::of(1..=30u64), prop::bool::weighted(0.3), prop::option::weighted(0.3, 0..3u8), prop::bool::weighted(0.3))
            .prop_map(|(min, members, c, def_first, timeout_s, one_rack, class, spread)| Op::AddGang {
                min, members, cpu: c * 250, def_first, timeout_s, one_rack, class, spread }),
        2 => (1..=4i64, any::<bool>()).prop_map(|(c, by_rack)| Op::AddAntiAffine { cpu: c * 250, by_rack }),
        1 => (1..=4u32, 0..=5usize, 1..=6i64).prop_map(|(total, members, c)| Op::AddKueueGang { total, members, cpu: c * 250 }),
        1 => (any::<Index>(), 1..=6i64).prop_map(|(group, c)| Op::AddSoloMember { group, cpu: c * 250 }),
        1 => (0..3u8, -5..=5i32, prop::bool::weighted(0.3)).prop_map(|(class, v, global_default)| Op::PutClass { class, value: v * 100, global_default }),
        1 => (0..3u8).prop_map(Op::DeleteClass),
        1 => any::<Index>().prop_map(Op::MakeInvalid),
        2 => (any::<Index>(), 1..=6i64).prop_map(|(group, c)| Op::AddMember { group, cpu: c * 250 }),
        1 => any::<Index>().prop_map(Op::AddConflictingMember),
        1 => (any::<Index>(), 1..=4i64).prop_map(|(node, c)| Op::AddForeignBound { node, cpu: c * 250 }),
        2 => (1..=6i64, 1..=2i64, prop::option::weighted(0.3, 2..=3i64))
            .prop_map(|(c, max_skew, min_domains)| Op::AddSpread { cpu: c * 250, max_skew, min_domains }),
        2 => any::<Index>().prop_map(Op::DeletePod),
        1 => any::<Index>().prop_map(Op::RecreatePod),
        2 => any::<Index>().prop_map(Op::FinishPod),
        1 => (any::<Index>(), 0..=5u32).prop_map(|(group, min)| Op::SetMin { group, min }),
        1 => any::<Index>().prop_map(Op::MakeBasic),
        1 => any::<Index>().prop_map(Op::DeleteDef),
        1 => any::<Index>().prop_map(Op::RestoreDef),
        1 => Just(Op::FailNextBind),
        1 => (0..=800u64).prop_map(Op::SetBindLatency),
        3 => Just(Op::Settle),
        4 => (0..=20_000u64).prop_map(Op::Advance),
    ]
}

const RACK: &str = "topology.kubernetes.io/rack";
const HOSTNAME: &str = "kubernetes.io/hostname";

/// Labels `p` with `app` and gives it required anti-affinity to pods with
/// the same `app` in its namespace, by `topology_key`.
fn anti_affine(p: &mut muster::model::PodInfo, app: &str, topology_key: &str) {
    use muster::model::{LabelSelector, PodAffinityTerm};
    std::sync::Arc::make_mut(&mut p.labels).insert("app".into(), app.into());
    Arc::make_mut(&mut p.constraints)
        .pod_affinity
        .required_anti_affinity
        .push(PodAffinityTerm {
            label_selector: LabelSelector::from_map(&[("app".to_string(), app.to_string())].into()),
            namespaces: vec![p.key.namespace.clone()],
            namespace_selector: LabelSelector::nothing(),
            topology_key: topology_key.into(),
            match_label_keys: Vec::new(),
            mismatch_label_keys: Vec::new(),
        });
}

/// A plain pod labelled `app: spread`, spreading such pods over racks.
fn spread_pod(name: &str, cpu: i64, max_skew: i64, min_domains: Option<i64>) -> PodInfo {
    let mut constraint = serde_json::json!({"maxSkew": max_skew, "topologyKey": RACK,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "spread"}}});
    if let Some(m) = min_domains {
        constraint["minDomains"] = serde_json::json!(m);
    }
    let wire: muster::model::wire::PodWire = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "spread"}},
        "spec": {"topologySpreadConstraints": [constraint]}
    }))
    .unwrap();
    let mut p = pod(name, cpu, 1);
    p.labels = wire.metadata.labels.clone().into();
    Arc::make_mut(&mut p.constraints).spread = muster::model::PodSpread::from_wire(&wire).unwrap();
    p
}

/// The running members of each group that requires one rack, on nodes that
/// still exist, are all in one rack (members of the profile without gang
/// scheduling are plain pods and may run anywhere).
fn one_rack_each(h: &Harness, w: &World) -> Result<(), String> {
    for def in w.groups.iter().filter(|d| d.topology.required.is_some()) {
        let g = muster::model::GroupKey::new(def.key.clone());
        let mut racks: Vec<&str> = h
            .pods()
            .filter(|p| p.group.key() == Some(&g) && !p.phase.is_terminal())
            .filter(|p| &*p.scheduler_name != SOLO)
            .filter_map(|p| h.node_of(&p.key))
            .filter_map(|n| h.engine.cache().node(&n))
            .map(|n| n.info.labels.get(RACK).map_or("(none)", String::as_str))
            .collect();
        racks.sort_unstable();
        racks.dedup();
        if racks.len() > 1 {
            return Err(format!("{g} requires one rack but runs in {racks:?}"));
        }
    }
    Ok(())
}

/// Every definition naming a PriorityClass carries the class's current
/// value (none while the class is not observed).
fn defs_follow_classes(h: &Harness, w: &World) -> Result<(), String> {
    for def in &w.groups {
        let (Some(class), Some(seen)) = (&def.priority_class_name, h.engine.gang().def(&def.key))
        else {
            continue;
        };
        let want = w.classes.get(&**class).copied();
        if seen.priority != want {
            return Err(format!(
                "{} names class {class} ({want:?}) but has priority {:?}",
                def.key, seen.priority
            ));
        }
    }
    Ok(())
}

/// A Kueue group has a (synthesized) definition exactly while it has members
/// in a profile that gang-schedules.
fn kueue_defs_follow_members(h: &Harness, w: &World) -> Result<(), String> {
    for name in &w.kueue {
        let g = kueue_group_key(name);
        let members = h
            .pods()
            .any(|p| p.group.key() == Some(&g) && &*p.scheduler_name == SCHEDULER);
        let defined = h.engine.gang().def(&g.definition).is_some();
        if members != defined {
            return Err(format!("{g}: members {members}, definition {defined}"));
        }
    }
    Ok(())
}

fn check_all(h: &Harness, w: &World) -> Result<(), String> {
    h.check_invariants()?;
    one_rack_each(h, w)?;
    defs_follow_classes(h, w)?;
    kueue_defs_follow_members(h, w)
}

/// The profile without gang scheduling the property tests add.
const SOLO: &str = "solo";

/// The gang-scheduling profile, planning gangs whole or per pod, and `SOLO`,
/// both with preemption (the default), so every step also checks I1 for
/// victims.
fn two_profiles_in(plan_whole_gangs: bool) -> Harness {
    let mut solo = ProfileConfig::new(SOLO, Framework::default());
    solo.gang = None;
    let mut gang = ProfileConfig::new(SCHEDULER, Framework::default());
    gang.gang.as_mut().expect("gang args").plan_whole_gangs = plan_whole_gangs;
    Harness::with_config(EngineConfig::new(vec![gang, solo]))
}

/// What the test generated so far, to pick targets from.
#[derive(Default)]
struct World {
    nodes: Vec<String>,
    pods: Vec<PodKey>,
    groups: Vec<GroupDef>,
    /// Kueue group names.
    kueue: Vec<String>,
    /// PriorityClasses as the cluster has them.
    classes: std::collections::BTreeMap<String, i32>,
    next: usize,
}

impl World {
    fn name(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}{}", self.next)
    }
}

fn apply(h: &mut Harness, w: &mut World, op: &Op) {
    match op {
        Op::AddNode { cpu, rack } => {
            let name = w.name("node-");
            let mut n = node(&name, *cpu, 64);
            n.labels.insert(HOSTNAME.into(), name.clone());
            if *rack < 2 {
                n.labels.insert(RACK.into(), format!("rack-{rack}"));
            }
            h.add_node(n);
            w.nodes.push(name);
        }
        Op::DeleteNode(i) => {
            if !w.nodes.is_empty() {
                let name = w.nodes.swap_remove(i.index(w.nodes.len()));
                h.delete_node(&name);
            }
        }
        Op::AddPlain { cpu, class } => {
            let name = w.name("plain-");
            let mut p = pod(&name, *cpu, 1);
            p.created_ms = w.next as i64;
            p.priority_class_name = class.map(|c| Arc::from(format!("c{c}")));
            w.pods.push(p.key.clone());
            h.put_pod(p);
        }
        Op::AddSpread {
            cpu,
            max_skew,
            min_domains,
        } => {
            let name = w.name("spread-");
            let p = spread_pod(&name, *cpu, *max_skew, *min_domains);
            w.pods.push(p.key.clone());
            h.put_pod(p);
        }
        Op::AddGang {
            min,
            members,
            cpu,
            def_first,
            timeout_s,
            one_rack,
            class,
            spread,
        } => {
            let name = w.name("gang-");
            let mut def = gang_def(&name, *min, w.next as i64);
            def.topology.required = one_rack.then(|| muster::model::LevelRef::Label(RACK.into()));
            def.priority_class_name = class.map(|c| format!("c{c}"));
            def.policy = Ok(GroupPolicy::Gang {
                min_count: *min,
                schedule_timeout: timeout_s.map(Duration::from_secs),
            });
            if *def_first {
                h.put_def(def.clone());
            }
            let g = group_key(&name);
            for m in 0..*members {
                let mut p = member(&format!("{name}-{m}"), &g, *cpu, 1);
                p.created_ms = w.next as i64;
                if *spread {
                    anti_affine(&mut p, &name, HOSTNAME);
                }
                w.pods.push(p.key.clone());
                h.put_pod(p);
            }
            if !*def_first {
                h.put_def(def.clone());
            }
            w.groups.push(def);
        }
        Op::AddAntiAffine { cpu, by_rack } => {
            let name = w.name("spread-");
            let mut p = pod(&name, *cpu, 1);
            p.created_ms = w.next as i64;
            anti_affine(&mut p, "spread", if *by_rack { RACK } else { HOSTNAME });
            w.pods.push(p.key.clone());
            h.put_pod(p);
        }
        Op::AddMember { group, cpu } => {
            if !w.groups.is_empty() {
                let def = &w.groups[group.index(w.groups.len())];
                let g = muster::model::GroupKey::new(def.key.clone());
                let name = w.name(&format!("{}-x", def.key.name));
                let p = member(&name, &g, *cpu, 1);
                w.pods.push(p.key.clone());
                h.put_pod(p);
            }
        }
        Op::AddKueueGang {
            total,
            members,
            cpu,
        } => {
            let name = w.name("kueue-");
            for m in 0..*members {
                let mut p = kueue_member(&format!("{name}-{m}"), &name, *total, *cpu);
                p.created_ms = w.next as i64;
                w.pods.push(p.key.clone());
                h.put_pod(p);
            }
            w.kueue.push(name);
        }
        Op::AddSoloMember { group, cpu } => {
            if !w.groups.is_empty() {
                let def = &w.groups[group.index(w.groups.len())];
                let g = muster::model::GroupKey::new(def.key.clone());
                let name = w.name("solo-");
                let mut p = member(&name, &g, *cpu, 1);
                p.scheduler_name = Arc::from(SOLO);
                w.pods.push(p.key.clone());
                h.put_pod(p);
            }
        }
        Op::PutClass {
            class,
            value,
            global_default,
        } => {
            let name = format!("c{class}");
            w.classes.insert(name.clone(), *value);
            h.put_priority_class(&name, *value, *global_default);
        }
        Op::DeleteClass(class) => {
            let name = format!("c{class}");
            w.classes.remove(&name);
            h.delete_priority_class(&name);
        }
        Op::MakeInvalid(i) => {
            if !w.pods.is_empty() {
                let k = w.pods[i.index(w.pods.len())].clone();
                let scheduler = h.pod(&k).map(|p| p.scheduler_name.to_string());
                h.put_invalid_pod(&k, scheduler.as_deref(), "unreadable");
            }
        }
        Op::AddConflictingMember(group) => {
            if !w.groups.is_empty() {
                let def = &w.groups[group.index(w.groups.len())];
                let g = muster::model::GroupKey::new(def.key.clone());
                let name = w.name("other-");
                let mut p = member(&name, &g, 250, 1);
                p.scheduler_name = Arc::from("default-scheduler");
                w.pods.push(p.key.clone());
                h.put_pod(p);
            }
        }
        Op::AddForeignBound { node: n, cpu } => {
            if w.nodes.is_empty() {
                return;
            }
            let node_name = w.nodes[n.index(w.nodes.len())].clone();
            // Another scheduler only binds what fits (keeps I2 about us).
            let fits = h.engine.cache().node(&node_name).is_some_and(|s| {
                let free = s.free();
                free.milli_cpu >= *cpu && free.memory >= 1 << 30 && free.pods >= 1
            });
            if fits {
                let name = w.name("foreign-");
                let mut p = pod(&name, *cpu, 1);
                p.scheduler_name = Arc::from("default-scheduler");
                p.node_name = Some(Arc::from(node_name.as_str()));
                p.phase = PodPhase::Running;
                w.pods.push(p.key.clone());
                h.put_pod(p);
            }
        }
        Op::DeletePod(i) => {
            if !w.pods.is_empty() {
                let k = w.pods.swap_remove(i.index(w.pods.len()));
                h.delete_pod(&k);
            }
        }
        Op::RecreatePod(i) => {
            if !w.pods.is_empty() {
                let k = w.pods[i.index(w.pods.len())].clone();
                if let Some(p) = h.pod(&k) {
                    let mut p = (**p).clone();
                    p.uid = Arc::from(format!("{}-{}", p.uid, w.next));
                    w.next += 1;
                    p.node_name = None;
                    p.phase = PodPhase::Pending;
                    h.put_pod(p);
                }
            }
        }
        Op::FinishPod(i) => {
            if !w.pods.is_empty() {
                let k = w.pods[i.index(w.pods.len())].clone();
                if h.node_of(&k).is_some() {
                    h.finish_pod(&k, PodPhase::Succeeded);
                }
            }
        }
        Op::SetMin { group, min } => {
            if !w.groups.is_empty() {
                let i = group.index(w.groups.len());
                let def = &mut w.groups[i];
                def.policy = Ok(GroupPolicy::Gang {
                    min_count: *min,
                    schedule_timeout: None,
                });
                h.put_def(def.clone());
            }
        }
        Op::MakeBasic(group) => {
            if !w.groups.is_empty() {
                let i = group.index(w.groups.len());
                let def = &mut w.groups[i];
                def.policy = Ok(GroupPolicy::Basic);
                h.put_def(def.clone());
            }
        }
        Op::DeleteDef(group) => {
            if !w.groups.is_empty() {
                let def = &w.groups[group.index(w.groups.len())];
                h.delete_def(&def.key);
            }
        }
        Op::RestoreDef(group) => {
            if !w.groups.is_empty() {
                let def = &w.groups[group.index(w.groups.len())];
                h.put_def(def.clone());
            }
        }
        Op::FailNextBind => h.fail_next_binds(1),
        Op::SetBindLatency(ms) => h.bind_latency = Duration::from_millis(*ms),
        Op::Settle => h.settle(),
        Op::Advance(ms) => h.advance(Duration::from_millis(*ms)),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    /// I1–I5 hold after every step of any event sequence.
    #[test]
    fn invariants_hold_under_random_events(
        start_nodes in 0..=6usize,
        ops in prop::collection::vec(op(), 1..60),
        whole in prop::bool::weighted(0.7),
    ) {
        let mut h = two_profiles_in(whole);
        let mut w = World::default();
        for i in 0..start_nodes {
            apply(&mut h, &mut w, &Op::AddNode { cpu: 2000, rack: (i % 3) as u8 });
        }
        for (step, op) in ops.iter().enumerate() {
            apply(&mut h, &mut w, op);
            if let Err(e) = check_all(&h, &w) {
                return Err(TestCaseError::fail(format!("after step {step} {op:?}: {e}")));
            }
        }
        // Let every timer run out: still consistent, nothing waits for ever.
        h.bind_latency = Duration::ZERO;
        h.advance(Duration::from_secs(400));
        if let Err(e) = check_all(&h, &w) {
            return Err(TestCaseError::fail(format!("after draining: {e}")));
        }
        prop_assert!(h.engine.gang().waiting().is_empty() || h.engine.gang().next_deadline().is_some());
        // One `Scheduled` event per successful binding, none for a failed one.
        let scheduled = h.actions_where(|a| matches!(a, Action::Scheduled { .. })).len();
        prop_assert_eq!(scheduled, h.binds.len());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// No deadlock, no lost work: gangs (each at most the cluster's size, with
    /// random creation times and arrival times) and plain pods contend for a
    /// cluster too small for all of them at once; every pod runs 5 s once bound.
    /// All of them eventually run, and no gang is ever partially bound.
    #[test]
    fn contending_gangs_all_complete(
        node_count in 2..=4usize,
        gangs in prop::collection::vec((1..=16usize, 0..1000i64, 0..40u64), 1..7),
        plain in prop::collection::vec(0..40u64, 0..8),
    ) {
        let slots = node_count * 4; // nodes of 4 CPU, pods of 1 CPU
        let mut h = cluster(node_count, 4000);
        // (arrival in quarter seconds, what arrives)
        let mut arrivals: Vec<(u64, Result<GroupDef, muster::model::PodInfo>)> = Vec::new();
        let mut pods = Vec::new();
        for (i, (size, created, at)) in gangs.iter().enumerate() {
            let size = (*size).min(slots);
            let name = format!("g{i}");
            let g = group_key(&name);
            arrivals.push((*at, Ok(gang_def(&name, size as u32, *created))));
            for m in 0..size {
                let p = member(&format!("{name}-{m}"), &g, 1000, 1);
                pods.push(p.key.clone());
                arrivals.push((*at + m as u64, Err(p)));
            }
        }
        for (i, at) in plain.iter().enumerate() {
            let mut p = pod(&format!("plain-{i}"), 1000, 1);
            p.created_ms = i as i64 * 100;
            pods.push(p.key.clone());
            arrivals.push((*at, Err(p)));
        }
        arrivals.sort_by_key(|(at, _)| *at);
        let mut arrivals = arrivals.into_iter().peekable();
        let mut finished = std::collections::HashSet::new();
        for tick in 0..4800u64 {
            while let Some((_, what)) = arrivals.next_if(|(at, _)| *at <= tick) {
                match what {
                    Ok(def) => h.put_def(def),
                    Err(p) => h.put_pod(p),
                }
            }
            h.advance(Duration::from_millis(250));
            if let Err(e) = h.check_invariants() {
                return Err(TestCaseError::fail(format!("at {:?}: {e}", h.elapsed())));
            }
            let now = h.elapsed();
            let done: Vec<PodKey> = h
                .binds
                .iter()
                .filter(|b| now >= b.at + Duration::from_secs(5) && !finished.contains(&b.pod))
                .map(|b| b.pod.clone())
                .collect();
            for k in done {
                h.finish_pod(&k, PodPhase::Succeeded);
                finished.insert(k);
            }
            if finished.len() == pods.len() {
                break;
            }
        }
        prop_assert_eq!(finished.len(), pods.len(), "not all ran within 20 minutes at {:?}", h.elapsed());
    }
}

// ---- topology: the preferred level against a brute-force oracle -------------

const ORACLE_BLOCK: &str = "block";
const ORACLE_RACK: &str = "rack";

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// A gang with a preferred rack on a random block → rack → node tree (random
    /// node sizes, some nodes already partly used) lands in one domain of the
    /// narrowest level that can hold it — rack, else block, else the whole
    /// cluster — as a brute force over every domain says, and never partly.
    #[test]
    fn preferred_level_matches_the_oracle(
        blocks in 1..=3usize,
        racks in 1..=3usize,
        per_rack in 1..=3usize,
        sizes in prop::collection::vec(1..=4i64, 27),
        used in prop::collection::vec(0..=2i64, 27),
        members in 1..=8usize,
        cpu in 1..=3i64,
    ) {
        use muster::model::topology::{TopologyChange, TopologyDef};
        use muster::model::{LevelRef, TopologyRequest};
        let mut h = Harness::new();
        h.put_topology(TopologyChange::TopologyUpserted(TopologyDef {
            name: "t".into(),
            levels: vec![ORACLE_BLOCK.into(), ORACLE_RACK.into()],
        }));
        // Free whole-member slots per node, as the oracle counts them.
        let mut slots: Vec<(usize, usize, usize)> = Vec::new(); // (block, rack, slots)
        let mut i = 0;
        for b in 0..blocks {
            for r in 0..racks {
                for n in 0..per_rack {
                    let name = format!("b{b}-r{r}-n{n}");
                    let capacity = sizes[i] * 1000;
                    let taken = (used[i] * 1000).min(capacity);
                    let mut nd = node(&name, capacity, 64);
                    nd.labels.insert(ORACLE_BLOCK.into(), format!("b{b}"));
                    nd.labels.insert(ORACLE_RACK.into(), format!("r{r}"));
                    h.add_node(nd);
                    if taken > 0 {
                        let mut filler = pod(&format!("fill-{name}"), taken, 1);
                        filler.node_name = Some(Arc::from(name.as_str()));
                        h.put_pod(filler);
                    }
                    slots.push((b, r, usize::try_from((capacity - taken) / (cpu * 1000)).unwrap_or(0)));
                    i += 1;
                }
            }
        }
        h.settle();
        let g = group_key("g");
        let mut def = gang_def("g", members as u32, 1);
        *def.topology = TopologyRequest::preferred(LevelRef::Label(ORACLE_RACK.into()));
        h.put_def(def);
        for m in 0..members {
            h.put_pod(member(&format!("g-{m}"), &g, cpu * 1000, 1));
        }
        h.settle();
        checked(&h);
        // The oracle: every rack, then every block, then everything.
        let room = |f: &dyn Fn(usize, usize) -> bool| -> usize {
            slots.iter().filter(|(b, r, _)| f(*b, *r)).map(|(_, _, s)| *s).sum()
        };
        let rack_fits = (0..blocks).any(|b| (0..racks).any(|r| room(&|x, y| x == b && y == r) >= members));
        let block_fits = (0..blocks).any(|b| room(&|x, _| x == b) >= members);
        let all_fits = room(&|_, _| true) >= members;
        let bound = h.bound_members(&g);
        prop_assert!(bound == 0 || bound == members, "partly bound: {bound}/{members}");
        prop_assert_eq!(bound == members, all_fits, "fits the cluster: {}", all_fits);
        if bound == members {
            let placed: Vec<(String, String)> = (0..members)
                .filter_map(|m| h.node_of(&key(&format!("g-{m}"))))
                .map(|n| {
                    let parts: Vec<&str> = n.split('-').collect();
                    (parts[0].to_string(), parts[1].to_string())
                })
                .collect();
            let one_block = placed.iter().all(|(b, _)| *b == placed[0].0);
            let one_rack = one_block && placed.iter().all(|(_, r)| *r == placed[0].1);
            if rack_fits {
                prop_assert!(one_rack, "a rack holds {members}: {placed:?}");
            } else if block_fits {
                prop_assert!(one_block, "a block holds {members}: {placed:?}");
            }
        }
    }
}

/// Found by `invariants_hold_under_random_events`: a pod recreated under the
/// same name while its old bind is in flight holds no node (the bind fails
/// on its uid), so a pod its old self repelled may take that node. The
/// checker's record of in-flight binds must not count it (it did).
#[test]
fn a_recreated_pods_bind_in_flight_holds_no_node() {
    let mut h = two_profiles_in(false);
    let mut w = World::default();
    for i in 0..2 {
        apply(
            &mut h,
            &mut w,
            &Op::AddNode {
                cpu: 2000,
                rack: (i % 3) as u8,
            },
        );
    }
    for op in [
        Op::AddSpread {
            cpu: 250,
            max_skew: 1,
            min_domains: None,
        },
        Op::SetBindLatency(1),
        Op::AddAntiAffine {
            cpu: 250,
            by_rack: false,
        },
        Op::Settle,
        Op::AddSpread {
            cpu: 250,
            max_skew: 1,
            min_domains: None,
        },
    ] {
        apply(&mut h, &mut w, &op);
    }
    // The anti-affine pod, recreated with its bind still in flight.
    let k = key("spread-4");
    let mut p = (**h.pod(&k).expect("spread-4")).clone();
    p.uid = Arc::from("uid-spread-4-again");
    p.node_name = None;
    p.phase = PodPhase::Pending;
    h.put_pod(p);
    h.bind_latency = Duration::ZERO;
    h.advance(Duration::from_secs(400));
    check_all(&h, &w).unwrap();
}

/// Found by `invariants_hold_under_random_events`, as above but for I5: the
/// recreated pod is not counted where its old self's bind is in flight, so a
/// spread pod that fits only without it may be bound there.
#[test]
fn a_recreated_pods_bind_in_flight_counts_for_no_spread() {
    let mut h = two_profiles_in(false);
    let mut w = World::default();
    apply(&mut h, &mut w, &Op::AddNode { cpu: 2000, rack: 0 });
    for op in [
        Op::SetBindLatency(1),
        Op::AddSpread {
            cpu: 250,
            max_skew: 1,
            min_domains: None,
        },
        Op::Settle,
    ] {
        apply(&mut h, &mut w, &op);
    }
    let k = w.pods[0].clone();
    let mut p = (**h.pod(&k).expect("the first spread pod")).clone();
    p.uid = Arc::from("uid-spread-again");
    p.node_name = None;
    p.phase = PodPhase::Pending;
    p.requests.milli_cpu = 4000; // more than the node: it stays pending
    h.put_pod(p);
    // One rack of the two minDomains asks for: the global minimum is 0, so
    // this pod fits only where no other matching pod is placed.
    apply(
        &mut h,
        &mut w,
        &Op::AddSpread {
            cpu: 250,
            max_skew: 1,
            min_domains: Some(2),
        },
    );
    h.settle();
    check_all(&h, &w).unwrap();
    let second = w.pods[1].clone();
    assert_eq!(
        h.actions_where(|a| matches!(a, Action::Bind { pod, .. } if *pod == second))
            .len(),
        1,
        "the second spread pod is bound while the recreated first waits"
    );
    h.bind_latency = Duration::ZERO;
    h.advance(Duration::from_secs(400));
    check_all(&h, &w).unwrap();
}
