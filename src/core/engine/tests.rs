use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::driver::fixtures::{SCHEDULER, arc, gang_def, group_key, member, node, pod};

pub(super) fn engine() -> Engine {
    Engine::new(EngineConfig::new(vec![ProfileConfig::new(
        SCHEDULER,
        Framework::default(),
    )]))
}

pub(super) fn binds(actions: &[Action]) -> Vec<(String, String)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Bind { pod, node, .. } => Some((pod.name.to_string(), node.to_string())),
            _ => None,
        })
        .collect()
}

#[test]
fn plain_pod_is_bound_and_leaves_the_engine_when_confirmed() {
    let mut e = engine();
    let t0 = Instant::now();
    e.on_event(ClusterEvent::NodeUpserted(arc(node("n0", 4000, 8))), t0);
    let p = pod("web", 1000, 1);
    e.on_event(ClusterEvent::PodUpserted(arc(p.clone())), t0);
    assert_eq!(e.location(&p.key), Some(PodLocation::Active));
    // The cycle says what it did.
    let did = e.schedule_one(t0).expect("a pod was ready");
    assert_eq!((did.scheduled, did.unschedulable, did.error), (1, 0, 0));
    assert_eq!(did.result(), "scheduled");
    assert!(e.schedule_one(t0).is_none());
    assert_eq!(e.location(&p.key), Some(PodLocation::Binding));
    let actions = e.drain_actions();
    assert_eq!(binds(&actions), [("web".into(), "n0".into())]);
    e.on_event(
        ClusterEvent::BindFinished {
            pod: p.key.clone(),
            uid: p.uid.clone(),
            node: Arc::from("n0"),
            result: Ok(()),
        },
        t0,
    );
    // No timer: the reservation waits for the informer, however long (I7).
    assert_eq!(e.next_deadline(), None);
    assert_eq!(e.cache().nodes()[0].requested.milli_cpu, 1000);
    let mut bound = p.clone();
    bound.node_name = Some(Arc::from("n0"));
    e.on_event(ClusterEvent::PodUpserted(arc(bound)), t0);
    assert_eq!(e.location(&p.key), None);
    assert_eq!(e.next_deadline(), None);
    assert_eq!(e.cache().nodes()[0].requested.milli_cpu, 1000);
    assert_eq!(e.stats(t0).binds_succeeded, 1);
}

#[test]
fn other_schedulers_pods_are_only_accounted() {
    let mut e = engine();
    let t0 = Instant::now();
    e.on_event(ClusterEvent::NodeUpserted(arc(node("n0", 4000, 8))), t0);
    let mut p = pod("theirs", 1000, 1);
    p.scheduler_name = Arc::from("default-scheduler");
    e.on_event(ClusterEvent::PodUpserted(arc(p.clone())), t0);
    assert_eq!(e.location(&p.key), None);
    assert!(e.schedule_one(t0).is_none());
    p.node_name = Some(Arc::from("n0"));
    e.on_event(ClusterEvent::PodUpserted(arc(p)), t0);
    assert_eq!(e.cache().nodes()[0].requested.milli_cpu, 1000);
}

#[test]
fn bind_failure_forgets_and_backs_off() {
    let mut e = engine();
    let t0 = Instant::now();
    e.on_event(ClusterEvent::NodeUpserted(arc(node("n0", 4000, 8))), t0);
    let p = pod("web", 1000, 1);
    e.on_event(ClusterEvent::PodUpserted(arc(p.clone())), t0);
    e.run_until_idle(t0);
    e.on_event(
        ClusterEvent::BindFinished {
            pod: p.key.clone(),
            uid: p.uid.clone(),
            node: Arc::from("n0"),
            result: Err("conflict".into()),
        },
        t0,
    );
    assert_eq!(e.location(&p.key), Some(PodLocation::Backoff));
    assert_eq!(e.cache().nodes()[0].requested.milli_cpu, 0);
    assert_eq!(e.next_deadline(), Some(t0 + Duration::from_secs(1)));
    let actions = e.drain_actions();
    assert!(actions.iter().any(|a| matches!(a,
        Action::Event { reason: "FailedScheduling", message, .. } if message == "Binding rejected: conflict")));
    e.run_until_idle(t0 + Duration::from_secs(1));
    assert_eq!(binds(&e.drain_actions()).len(), 1);
}

#[test]
fn unschedulable_pod_parks_and_is_retried_on_node_added() {
    let mut e = engine();
    let t0 = Instant::now();
    e.on_event(ClusterEvent::NodeUpserted(arc(node("n0", 1000, 8))), t0);
    let p = pod("big", 2000, 1);
    e.on_event(ClusterEvent::PodUpserted(arc(p.clone())), t0);
    e.run_until_idle(t0);
    assert_eq!(e.location(&p.key), Some(PodLocation::Unschedulable));
    let actions = e.drain_actions();
    assert!(actions.iter().any(|a| matches!(a,
        Action::PodUnschedulable { message, .. } if message.starts_with("0/1 nodes are available"))));
    let t1 = t0 + Duration::from_secs(2);
    e.on_event(ClusterEvent::NodeUpserted(arc(node("n1", 4000, 8))), t1);
    assert_eq!(e.location(&p.key), Some(PodLocation::Active));
    e.run_until_idle(t1);
    assert_eq!(binds(&e.drain_actions()), [("big".into(), "n1".into())]);
}

#[test]
fn gang_members_wait_at_permit_then_bind_together() {
    let mut e = engine();
    let t0 = Instant::now();
    for i in 0..3 {
        e.on_event(
            ClusterEvent::NodeUpserted(arc(node(&format!("n{i}"), 4000, 8))),
            t0,
        );
    }
    let g = group_key("pg");
    e.on_event(ClusterEvent::GroupDefUpserted(gang_def("pg", 3, 1)), t0);
    for i in 0..3 {
        e.on_event(
            ClusterEvent::PodUpserted(arc(member(&format!("m{i}"), &g, 3000, 1))),
            t0,
        );
    }
    // One gang cycle plans all three members and releases them together.
    assert!(e.schedule_one(t0).is_some());
    assert!(e.schedule_one(t0).is_none());
    let actions = e.drain_actions();
    assert_eq!(binds(&actions).len(), 3);
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::PodUnschedulable { .. })),
        "a planned gang writes no waiting conditions"
    );
    assert!(actions.iter().any(|a| matches!(
        a,
        Action::GroupStatus {
            initially_scheduled: true,
            ..
        }
    )));
    let s = e.stats(t0);
    assert_eq!(s.attempts_scheduled, 3);
    assert_eq!(s.pending.binding, 3);
    assert_eq!(s.groups.scheduled, 1);
    assert_eq!(
        s.groups.by_kind.into_iter().collect::<Vec<_>>(),
        [(("scheduled", "PodGroup"), 1)]
    );
}

/// A gang one of whose members is behind a scheduling gate cannot be
/// planned whole: nothing is reserved, and the gang backs off as one.
#[test]
fn a_gang_with_a_gated_member_reserves_nothing() {
    let mut e = engine();
    let t0 = Instant::now();
    e.on_event(ClusterEvent::NodeUpserted(arc(node("n0", 4000, 8))), t0);
    let g = group_key("pg");
    e.on_event(ClusterEvent::GroupDefUpserted(gang_def("pg", 2, 1)), t0);
    let a = member("a", &g, 1000, 1);
    let mut b = member("b", &g, 1000, 1);
    b.scheduling_gates = std::sync::Arc::from([std::sync::Arc::from("example.com/hold")]);
    e.on_event(ClusterEvent::PodUpserted(arc(a.clone())), t0);
    e.on_event(ClusterEvent::PodUpserted(arc(b.clone())), t0);
    e.run_until_idle(t0);
    assert_eq!(e.location(&a.key), Some(PodLocation::Unschedulable));
    assert!(e.gang().waiting().is_empty());
    assert_eq!(e.cache().nodes()[0].requested.milli_cpu, 0);
    let actions = e.drain_actions();
    assert!(actions.iter().any(|x| matches!(x,
        Action::PodUnschedulable { message, .. }
            if message.starts_with("waiting for 1/2 members of PodGroup default/pg"))));
    // The gate lifts: the freed member pulls the other in, both placed at once.
    b.scheduling_gates = std::sync::Arc::from([]);
    let t1 = t0 + Duration::from_millis(1);
    e.on_event(ClusterEvent::PodUpserted(arc(b)), t1);
    e.run_until_idle(t1);
    assert_eq!(binds(&e.drain_actions()).len(), 2);
}

#[test]
fn engine_can_move_into_the_daemons_task() {
    fn assert_send<T: Send + 'static>() {}
    assert_send::<Engine>();
}

/// A pod refused for what other pods are where is retried when a placed
/// pod's labels change (kube-scheduler's InterPodAffinity and
/// PodTopologySpread queueing hints), not only when pods come and go.
#[test]
fn a_placed_pods_label_change_retries_pods_refused_for_it() {
    let mut e = engine();
    let t0 = Instant::now();
    let mut n0 = node("n0", 4000, 8);
    n0.labels
        .insert("kubernetes.io/hostname".into(), "n0".into());
    e.on_event(ClusterEvent::NodeUpserted(arc(n0)), t0);
    let mut existing = pod("db", 100, 1);
    std::sync::Arc::make_mut(&mut existing.labels).insert("app".into(), "db".into());
    existing.node_name = Some(Arc::from("n0"));
    existing.phase = crate::model::PodPhase::Running;
    e.on_event(ClusterEvent::PodUpserted(arc(existing.clone())), t0);

    let mut shy = pod("shy", 100, 1);
    let terms: crate::model::PodAffinityWire = serde_json::from_value(serde_json::json!({
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"app": "db"}},
            "topologyKey": "kubernetes.io/hostname"}]}))
    .unwrap();
    Arc::make_mut(&mut shy.constraints).pod_affinity =
        crate::model::PodAffinity::from_wire(None, Some(&terms), "default", &shy.labels).unwrap();
    e.on_event(ClusterEvent::PodUpserted(arc(shy.clone())), t0);
    assert!(e.schedule_one(t0).is_some());
    assert_eq!(e.location(&shy.key), Some(PodLocation::Unschedulable));

    // A status-only update of the placed pod retries nothing ...
    e.on_event(ClusterEvent::PodUpserted(arc(existing.clone())), t0);
    assert_eq!(e.location(&shy.key), Some(PodLocation::Unschedulable));
    // ... a label change that lifts the conflict does.
    std::sync::Arc::make_mut(&mut existing.labels).insert("app".into(), "web".into());
    e.on_event(ClusterEvent::PodUpserted(arc(existing)), t0);
    assert_ne!(e.location(&shy.key), Some(PodLocation::Unschedulable));
    let later = t0 + Duration::from_secs(60);
    e.tick(later);
    assert!(e.schedule_one(later).is_some());
    assert_eq!(binds(&e.drain_actions()), [("shy".into(), "n0".into())]);
}

/// A CompositePodGroup observed after its children and their pods opens
/// the gate of both children; the subtree binds together; deleting the
/// composite re-gates members that are still pending.
#[test]
fn a_composite_observed_last_opens_its_childrens_gates() {
    use crate::model::{DefinitionKey, GroupDef, GroupPolicy, GroupSource, PodKey};
    let mut e = engine();
    let t0 = Instant::now();
    for i in 0..4 {
        e.on_event(
            ClusterEvent::NodeUpserted(arc(node(&format!("n{i}"), 4000, 8))),
            t0,
        );
    }
    let job = DefinitionKey::new("default", GroupSource::CompositePodGroup, "job");
    for child in ["a", "b"] {
        let mut def = gang_def(child, 2, 1);
        def.extras.parent_composite = Some("job".into());
        e.on_event(ClusterEvent::GroupDefUpserted(def), t0);
        let g = group_key(child);
        for i in 0..2 {
            e.on_event(
                ClusterEvent::PodUpserted(arc(member(&format!("{child}{i}"), &g, 3000, 1))),
                t0,
            );
        }
    }
    let a0 = PodKey::new("default", "a0");
    assert_eq!(e.location(&a0), Some(PodLocation::Gated));
    let composite = GroupDef::new(
        job.clone(),
        Ok(GroupPolicy::Gang {
            min_count: 2,
            schedule_timeout: None,
        }),
        1,
    );
    e.on_event(ClusterEvent::GroupDefUpserted(composite), t0);
    assert_eq!(e.location(&a0), Some(PodLocation::Active));
    e.run_until_idle(t0);
    let actions = e.drain_actions();
    assert_eq!(binds(&actions).len(), 4);
    assert!(actions.iter().any(|a| matches!(
        a,
        Action::GroupStatus { group, initially_scheduled: true, .. }
            if group.definition == job
    )));

    // A late member of a child whose composite is deleted waits for it again.
    e.on_event(ClusterEvent::GroupDefDeleted(job), t0);
    let late = member("a9", &group_key("a"), 100, 1);
    e.on_event(ClusterEvent::PodUpserted(arc(late)), t0);
    assert_eq!(
        e.location(&PodKey::new("default", "a9")),
        Some(PodLocation::Gated)
    );
}

/// While a gang composite has fewer than `minGroupCount` children with
/// their quorum observed, its condition says how many it has.
#[test]
fn a_composite_short_of_children_reports_it() {
    use crate::model::{DefinitionKey, GroupDef, GroupPolicy, GroupSource};
    let mut e = engine();
    let t0 = Instant::now();
    e.on_event(ClusterEvent::NodeUpserted(arc(node("n0", 4000, 8))), t0);
    let job = DefinitionKey::new("default", GroupSource::CompositePodGroup, "job");
    let policy = Ok(GroupPolicy::Gang {
        min_count: 2,
        schedule_timeout: None,
    });
    e.on_event(
        ClusterEvent::GroupDefUpserted(GroupDef::new(job.clone(), policy, 1)),
        t0,
    );
    let mut a = gang_def("a", 1, 1);
    a.extras.parent_composite = Some("job".into());
    e.on_event(ClusterEvent::GroupDefUpserted(a), t0);
    e.on_event(
        ClusterEvent::PodUpserted(arc(member("a0", &group_key("a"), 100, 1))),
        t0,
    );
    e.run_until_idle(t0);
    let actions = e.drain_actions();
    assert!(binds(&actions).is_empty());
    assert!(
        actions.iter().any(|a| matches!(
            a,
            Action::GroupStatus { group, initially_scheduled: false, message, .. }
                if group.definition == job && message == "1 of 2 child groups have their quorum observed"
        )),
        "{actions:?}"
    );
}
