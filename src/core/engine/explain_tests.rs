//! `Engine::explain` and the `PodGroupSatisfied` health flips.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Target;
use crate::driver::fixtures::{arc, gang_def, group_key, member, node, pod};
use crate::engine::tests::engine;
use crate::engine::{Action, ClusterEvent, Engine};
use crate::explain::Phase;
use crate::model::{GroupSource, PodInfo, PodKey};

fn pod_group(name: &str) -> Target {
    Target::parse("default", &format!("podgroup/{name}")).expect("a target")
}

/// Confirms every binding drained (as the binder and the informer would);
/// returns the pods bound and every action drained.
fn bind_all(e: &mut Engine, t: Instant) -> (Vec<PodInfo>, Vec<Action>) {
    let mut bound = Vec::new();
    let actions = e.drain_actions();
    for a in actions.clone() {
        if let Action::Bind { pod, uid, node, .. } = a {
            e.on_event(
                ClusterEvent::BindFinished {
                    pod: pod.clone(),
                    uid: uid.clone(),
                    node: node.clone(),
                    result: Ok(()),
                },
                t,
            );
            let mut p = e.cache().pod(&pod).expect("cached").info.as_ref().clone();
            p.node_name = Some(node);
            e.on_event(ClusterEvent::PodUpserted(arc(p.clone())), t);
            bound.push(p);
        }
    }
    (bound, actions)
}

/// An engine with `nodes` (cores each) and PodGroup `pg` (minCount 2) of
/// two one-core members, placed and bound; the actions drained.
fn bound_gang(nodes: &[(&str, i64)]) -> (Engine, Vec<PodInfo>, Instant) {
    let mut e = engine();
    let t0 = Instant::now();
    for (n, cores) in nodes {
        e.on_event(
            ClusterEvent::NodeUpserted(arc(node(n, cores * 1000, 16))),
            t0,
        );
    }
    let g = group_key("pg");
    e.on_event(ClusterEvent::GroupDefUpserted(gang_def("pg", 2, 1)), t0);
    for i in 0..2 {
        e.on_event(
            ClusterEvent::PodUpserted(arc(member(&format!("m{i}"), &g, 1000, 1))),
            t0,
        );
    }
    e.run_until_idle(t0);
    let (bound, _) = bind_all(&mut e, t0);
    assert_eq!(bound.len(), 2);
    (e, bound, t0)
}

#[test]
fn targets_read_as_kubectl_names_them() {
    assert_eq!(
        Target::parse("ns", "po/a"),
        Ok(Target::Pod(PodKey::new("ns", "a")))
    );
    let Ok(Target::Group { source, .. }) = Target::parse("ns", "PodGroups/a") else {
        panic!("a group");
    };
    assert_eq!(source, GroupSource::PodGroup);
    assert!(matches!(
        Target::parse("ns", "lws/a"),
        Ok(Target::Group {
            source: GroupSource::Owner(_),
            ..
        })
    ));
    assert!(Target::parse("ns", "deployment/a").is_err());
    assert!(Target::parse("ns", "pod").is_err());
    assert!(Target::parse("ns", "pod/a/b").is_err());
}

#[test]
fn a_gang_short_of_quorum_names_its_gated_member_and_gate() {
    let mut e = engine();
    let t0 = Instant::now();
    e.on_event(ClusterEvent::NodeUpserted(arc(node("n0", 8000, 16))), t0);
    let g = group_key("pg");
    e.on_event(ClusterEvent::GroupDefUpserted(gang_def("pg", 3, 1)), t0);
    let mut held = member("muster-0", &g, 1000, 1);
    held.scheduling_gates = Arc::from([Arc::from("example.com/hold")]);
    for p in [
        held,
        member("muster-1", &g, 1000, 1),
        member("muster-2", &g, 1000, 1),
    ] {
        e.on_event(ClusterEvent::PodUpserted(arc(p)), t0);
    }
    e.run_until_idle(t0);
    e.drain_actions();
    let answers = e.explain(&pod_group("pg"), t0);
    assert_eq!(answers.len(), 1);
    let a = &answers[0];
    assert_eq!(a.phase, Phase::WaitingForQuorum);
    assert_eq!(a.summary, "2/3 present, muster-0 gated by example.com/hold");
    let gang = a.gang.as_ref().expect("gang facts");
    assert_eq!((gang.present, gang.gated, gang.min_count), (2, 1, Some(3)));
    assert_eq!(a.members[0].state, "schedulingGated");
    assert_eq!(a.members[0].scheduling_gates, ["example.com/hold"]);
    // Asked about a member, the answer is the same gang's.
    let by_pod = e.explain(&Target::Pod(PodKey::new("default", "muster-1")), t0);
    assert_eq!(by_pod[0].summary, a.summary);
    assert!(by_pod[0].target.starts_with("pod/"));
}

#[test]
fn a_gang_that_fits_nowhere_says_why_and_where_it_is_queued() {
    let mut e = engine();
    let t0 = Instant::now();
    e.on_event(ClusterEvent::NodeUpserted(arc(node("n0", 2000, 16))), t0);
    let g = group_key("big");
    e.on_event(ClusterEvent::GroupDefUpserted(gang_def("big", 2, 1)), t0);
    for i in 0..2 {
        e.on_event(
            ClusterEvent::PodUpserted(arc(member(&format!("b{i}"), &g, 1500, 1))),
            t0,
        );
    }
    e.run_until_idle(t0);
    e.drain_actions();
    let a = &e.explain(&pod_group("big"), t0)[0];
    assert!(
        matches!(a.phase, Phase::BackingOff | Phase::Unschedulable),
        "{a:?}"
    );
    let last = a.last_attempt.as_ref().expect("the last attempt");
    assert!(
        !last.pods.is_empty() || last.group_message.is_some(),
        "{last:?}"
    );
    assert!(a.summary.contains("0/1 nodes"), "{}", a.summary);
    let q = a.queue.as_ref().expect("queue facts");
    assert!(q.attempts >= 1);
}

#[test]
fn the_queue_answer_ranks_the_gang_and_lists_what_is_ahead() {
    let mut e = engine();
    let t0 = Instant::now();
    // No node: nothing leaves the active queue before it is asked about.
    let g = group_key("late");
    e.on_event(ClusterEvent::GroupDefUpserted(gang_def("late", 2, 10)), t0);
    let mut urgent = pod("urgent", 100, 1);
    urgent.priority = 100;
    e.on_event(ClusterEvent::PodUpserted(arc(urgent)), t0);
    let mut early = pod("early", 100, 1);
    early.created_ms = 1;
    e.on_event(ClusterEvent::PodUpserted(arc(early)), t0);
    for i in 0..2 {
        let mut m = member(&format!("l{i}"), &g, 100, 1);
        m.created_ms = 20;
        e.on_event(ClusterEvent::PodUpserted(arc(m)), t0);
    }
    let a = &e.explain(&pod_group("late"), t0)[0];
    assert_eq!(a.phase, Phase::Queued);
    let q = a.queue.as_ref().expect("queue facts");
    assert_eq!(q.active_pods, 4);
    assert_eq!(q.position, Some(3));
    assert_eq!(q.ahead_total, 2);
    assert_eq!(q.ahead[0].unit, "pod default/urgent");
    assert_eq!(q.ahead[0].priority, 100);
    assert_eq!(q.ahead[1].unit, "pod default/early");
}

#[test]
fn unknown_targets_are_said_to_be_unknown() {
    let e = engine();
    let t0 = Instant::now();
    let a = &e.explain(&Target::Pod(PodKey::new("default", "ghost")), t0)[0];
    assert_eq!(a.phase, Phase::NotServed);
    let a = &e.explain(&pod_group("ghost"), t0)[0];
    assert_eq!(a.phase, Phase::NotServed);
}

#[test]
fn a_bound_gang_below_min_count_flips_its_health_and_back() {
    let (mut e, bound, t0) = bound_gang(&[("n0", 8)]);
    let g = group_key("pg");
    let health = |actions: &[Action]| -> Vec<bool> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::GroupHealth { satisfied, .. } => Some(*satisfied),
                _ => None,
            })
            .collect()
    };
    assert!(
        health(&e.drain_actions()).is_empty(),
        "a healthy gang writes nothing"
    );
    assert_eq!(e.explain(&pod_group("pg"), t0)[0].phase, Phase::Bound);

    // A member is deleted: below minCount.
    let t1 = t0 + Duration::from_secs(1);
    e.on_event(ClusterEvent::PodDeleted(bound[0].key.clone()), t1);
    let actions = e.drain_actions();
    assert_eq!(health(&actions), [false]);
    assert!(actions.iter().any(|a| matches!(a,
        Action::Event { reason: "GangUnsatisfied", message, .. } if message == "only 1 of minCount 2 members running")));
    assert_eq!(e.stats(t1).groups.unsatisfied, 1);
    let a = &e.explain(&pod_group("pg"), t1)[0];
    assert_eq!(a.gang.as_ref().and_then(|g| g.satisfied), Some(false));

    // Its replacement is placed and bound: satisfied again, said once.
    let mut again = member("m0", &g, 1000, 1);
    again.uid = Arc::from("uid-m0-2");
    e.on_event(ClusterEvent::PodUpserted(arc(again)), t1);
    e.run_until_idle(t1);
    let (_, actions) = bind_all(&mut e, t1);
    let mut flips = health(&actions);
    flips.extend(health(&e.drain_actions()));
    assert_eq!(flips, [true]);
    assert_eq!(e.stats(t1).groups.unsatisfied, 0);
}

#[test]
fn a_gang_whose_node_is_deleted_is_unsatisfied() {
    let (mut e, bound, t0) = bound_gang(&[("n0", 1), ("n1", 1)]);
    e.drain_actions();
    let gone = bound[0].node_name.clone().expect("bound");
    e.on_event(ClusterEvent::NodeDeleted(gone), t0);
    assert!(e.drain_actions().iter().any(|a| matches!(
        a,
        Action::GroupHealth {
            satisfied: false,
            ..
        }
    )));
}

#[test]
fn a_finished_gang_is_not_reported_unsatisfied() {
    let (mut e, bound, t0) = bound_gang(&[("n0", 8)]);
    e.drain_actions();
    // Both finish at once (terminal pods arrive as deletions).
    for p in &bound {
        e.on_event(ClusterEvent::PodDeleted(p.key.clone()), t0);
    }
    assert!(
        !e.drain_actions()
            .iter()
            .any(|a| matches!(a, Action::GroupHealth { .. }))
    );
}
