//! What-if against what the engine then does: on random small clusters,
//! the answer is checked by running the same cluster and the same pods to
//! the end (bindings confirmed, victims deleted, time moved past every
//! backoff): it fits where it said, evicts whom it said (and then binds
//! every member), or never binds.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::{Asked, Changes, Verdict, answer, apply_changes};
use muster_core::config::SchedulerConfig;
use muster_core::driver::fixtures::{gang_def, group_key, member, node, pod};
use muster_core::engine::{Action, ClusterEvent, Engine};
use muster_core::model::{PodInfo, PodKey};

/// The cluster: nodes of `cpus` cores, each with a low-priority pod of
/// `running` cores already bound when it fits.
fn cluster(cpus: &[i64], running: &[i64]) -> Vec<ClusterEvent> {
    let mut events = Vec::new();
    for (i, c) in cpus.iter().enumerate() {
        events.push(ClusterEvent::NodeUpserted(Arc::new(node(
            &format!("n{i}"),
            c * 1000,
            64,
        ))));
    }
    for (i, (c, r)) in cpus.iter().zip(running).enumerate() {
        if *r == 0 || r > c {
            continue;
        }
        let mut p = pod(&format!("low-{i}"), r * 1000, 1);
        p.priority = 10;
        p.node_name = Some(Arc::from(format!("n{i}")));
        events.push(ClusterEvent::PodUpserted(Arc::new(p)));
    }
    events
}

/// A gang of `n` pods of `cpu` cores at `priority`.
fn asked(n: usize, cpu: i64, priority: i32) -> Asked {
    let g = group_key("asked");
    let mut def = gang_def("asked", n as u32, 1);
    def.priority = Some(priority);
    let pods = (0..n)
        .map(|i| {
            let mut p = member(&format!("asked-{i}"), &g, cpu * 1000, 1);
            p.priority = priority;
            p
        })
        .collect();
    Asked {
        pods,
        defs: vec![def],
    }
}

/// Runs the cluster and the asked pods to the end; returns where the
/// asked pods were bound and which pods were deleted as victims.
fn run_to_the_end(
    events: Vec<ClusterEvent>,
    asked: &Asked,
) -> (BTreeSet<(String, String)>, BTreeSet<String>) {
    let config = SchedulerConfig::default();
    let mut engine = Engine::new(muster_scheduler::daemon::engine_config(&config));
    let mut now = Instant::now();
    for e in events {
        engine.on_event(e, now);
    }
    for d in &asked.defs {
        engine.on_event(ClusterEvent::GroupDefUpserted(d.clone()), now);
    }
    for p in &asked.pods {
        engine.on_event(ClusterEvent::PodUpserted(Arc::new(p.clone())), now);
    }
    let ours: BTreeSet<PodKey> = asked.pods.iter().map(|p| p.key.clone()).collect();
    let mut bound = BTreeSet::new();
    let mut evicted = BTreeSet::new();
    for _ in 0..30 {
        engine.run_until_idle(now);
        for a in engine.drain_actions() {
            match a {
                Action::Bind { pod, uid, node, .. } => {
                    engine.on_event(
                        ClusterEvent::BindFinished {
                            pod: pod.clone(),
                            uid,
                            node: node.clone(),
                            result: Ok(()),
                        },
                        now,
                    );
                    let mut p: PodInfo = engine
                        .cache()
                        .pod(&pod)
                        .expect("cached")
                        .info
                        .as_ref()
                        .clone();
                    p.node_name = Some(node.clone());
                    engine.on_event(ClusterEvent::PodUpserted(Arc::new(p)), now);
                    if ours.contains(&pod) {
                        bound.insert((pod.to_string(), node.to_string()));
                    }
                }
                Action::Preempt { victim, .. } => {
                    evicted.insert(victim.to_string());
                    engine.on_event(ClusterEvent::PodDeleted(victim), now);
                }
                _ => {}
            }
        }
        now += Duration::from_secs(11);
    }
    (bound, evicted)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn what_if_says_what_the_engine_then_does(
        cpus in prop::collection::vec(2i64..=6, 1..=4),
        running in prop::collection::vec(0i64..=4, 4),
        n in 1usize..=3,
        cpu in 1i64..=3,
        high in any::<bool>(),
    ) {
        let priority = if high { 1000 } else { 10 };
        let events = cluster(&cpus, &running);
        let question = asked(n, cpu, priority);
        let events = apply_changes(events, &Changes::default()).expect("no changes");
        let said = answer(&SchedulerConfig::default(), events.clone(), &question, Instant::now());
        let (bound, evicted) = run_to_the_end(events, &question);
        let placed: BTreeSet<(String, String)> = said
            .placements
            .iter()
            .map(|p| (p.pod.clone(), p.node.clone()))
            .collect();
        let said_victims: BTreeSet<String> = said.victims.iter().map(|v| v.pod.clone()).collect();
        let nodes = |s: &BTreeSet<(String, String)>| {
            let mut v: Vec<String> = s.iter().map(|(_, n)| n.clone()).collect();
            v.sort();
            v
        };
        match said.verdict {
            Verdict::Fits => {
                prop_assert_eq!(&bound, &placed);
                prop_assert!(evicted.is_empty());
            }
            Verdict::FitsByPreemption => {
                // Whom it evicts is what it said; once they are gone the
                // gang is planned again (as kube-scheduler plans a
                // nominated pod again), so where it lands may differ from
                // the nominated nodes, but every member lands.
                prop_assert_eq!(&evicted, &said_victims);
                prop_assert_eq!(bound.len(), nodes(&placed).len());
            }
            Verdict::DoesNotFit => {
                prop_assert!(bound.is_empty(), "bound {:?} though it said no", bound);
                prop_assert!(evicted.is_empty(), "evicted {:?} though it said no", evicted);
                prop_assert!(!said.reasons.is_empty());
            }
        }
    }
}

#[test]
fn file_objects_are_read_or_refused_by_kind() {
    let yaml = "apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: g}
spec: {schedulingPolicy: {gang: {minCount: 1}}}
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  schedulerName: muster
  schedulingGroup: {podGroupName: g}
  containers: [{name: c, image: x}]
";
    let a = Asked::read(yaml, "team", "2026-01-01T00:00:00Z").expect("read");
    assert_eq!(a.pods.len(), 1);
    assert_eq!(&*a.pods[0].key.namespace, "team");
    assert_eq!(a.defs.len(), 1);
    let err = Asked::read(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n",
        "x",
        "t",
    )
    .expect_err("refused");
    assert!(err.to_string().contains("Deployment"), "{err}");
    assert!(Asked::read("", "x", "t").is_err(), "no pod: nothing to ask");
}

#[test]
fn capacity_changes_copy_and_drain_nodes() {
    let events = cluster(&[4, 4], &[1, 0]);
    let changes = Changes {
        add_nodes: vec![("n1".into(), 2)],
        drain: vec!["n0".into()],
    };
    let out = apply_changes(events.clone(), &changes).expect("applied");
    let nodes: Vec<(String, bool)> = out
        .iter()
        .filter_map(|e| match e {
            ClusterEvent::NodeUpserted(n) => Some((n.name.to_string(), n.unschedulable)),
            _ => None,
        })
        .collect();
    assert_eq!(
        nodes,
        [
            ("n0".into(), true),
            ("n1".into(), false),
            ("n1-what-if-0".into(), false),
            ("n1-what-if-1".into(), false)
        ]
    );
    assert!(
        !out.iter()
            .any(|e| matches!(e, ClusterEvent::PodUpserted(_))),
        "n0 drained"
    );
    let bad = Changes {
        add_nodes: vec![("nope".into(), 1)],
        drain: vec![],
    };
    assert!(apply_changes(events.clone(), &bad).is_err());
    let huge = Changes {
        add_nodes: vec![("n1".into(), usize::MAX)],
        drain: vec![],
    };
    assert!(apply_changes(events, &huge).is_err());
}
