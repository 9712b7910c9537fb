use std::sync::Arc;

use super::*;
use crate::driver::fixtures::{SCHEDULER, arc, group_key, member, node, pod};
use crate::model::PodPhase;

fn cache() -> Cache {
    Cache::new([Arc::from(SCHEDULER)])
}

fn bound(mut p: PodInfo, node: &str) -> PodInfo {
    p.node_name = Some(Arc::from(node));
    p.phase = PodPhase::Running;
    p
}

#[test]
fn accounts_pods_bound_by_anyone_including_before_their_node_arrives() {
    let mut c = cache();
    let mut foreign = bound(pod("f", 500, 1), "n1");
    foreign.scheduler_name = Arc::from("default-scheduler");
    c.upsert_pod(arc(foreign));
    assert_eq!(c.total_free().milli_cpu, 0);
    assert!(c.upsert_node(arc(node("n1", 2000, 4))));
    assert_eq!(c.node("n1").map(|n| n.requested.milli_cpu), Some(500));
    assert_eq!(c.total_free().milli_cpu, 1500);
}

#[test]
fn terminal_and_deleted_pods_release() {
    let mut c = cache();
    c.upsert_node(arc(node("n1", 2000, 4)));
    c.upsert_pod(arc(bound(pod("a", 500, 1), "n1")));
    c.upsert_pod(arc(bound(pod("b", 500, 1), "n1")));
    let mut done = bound(pod("a", 500, 1), "n1");
    done.phase = PodPhase::Succeeded;
    let change = c.upsert_pod(arc(done));
    assert!(change.released_resources());
    assert_eq!(c.node("n1").map(|n| n.requested.milli_cpu), Some(500));
    c.remove_pod(&PodKey::new("default", "b"));
    assert_eq!(c.node("n1").map(|n| n.requested.milli_cpu), Some(0));
}

#[test]
fn assume_forget_and_confirm() {
    let mut c = cache();
    c.upsert_node(arc(node("n1", 2000, 4)));
    let p = pod("a", 500, 1);
    let key = p.key.clone();
    c.upsert_pod(arc(p.clone()));
    c.assume(&key, 0).unwrap();
    assert_eq!(c.nodes()[0].requested.milli_cpu, 500);
    assert!(c.assume(&key, 0).is_err(), "double assume is refused");
    // An informer update without nodeName keeps the reservation.
    c.upsert_pod(arc(p.clone()));
    assert!(c.is_assumed(&key));
    assert!(c.forget(&key));
    assert_eq!(c.nodes()[0].requested.milli_cpu, 0);
    c.assume(&key, 0).unwrap();
    let change = c.upsert_pod(arc(bound(p, "n1")));
    assert!(change.confirmed_assumed());
    assert_eq!(c.nodes()[0].requested.milli_cpu, 500);
}

/// A reservation is released by what the informer shows (bound, elsewhere,
/// terminal, gone) and never by a timer (gang-semantics I7).
#[test]
fn a_reservation_ends_with_what_the_informer_shows() {
    let mut c = cache();
    c.upsert_node(arc(node("n1", 2000, 4)));
    c.upsert_node(arc(node("n2", 2000, 4)));
    for name in ["a", "b", "c"] {
        c.upsert_pod(arc(pod(name, 500, 1)));
        c.assume(&PodKey::new("default", name), 0).unwrap();
    }
    assert_eq!(c.nodes()[0].requested.milli_cpu, 1500);
    // Confirmed where it was assumed.
    c.upsert_pod(arc(bound(pod("a", 500, 1), "n1")));
    // Shown bound elsewhere: it moves.
    c.upsert_pod(arc(bound(pod("b", 500, 1), "n2")));
    assert_eq!(c.nodes()[0].requested.milli_cpu, 1000);
    assert_eq!(c.nodes()[1].requested.milli_cpu, 500);
    // Shown gone: released.
    c.remove_pod(&PodKey::new("default", "c"));
    assert_eq!(c.nodes()[0].requested.milli_cpu, 500);
}

#[test]
fn node_deletion_forgets_assumed_and_keeps_bound_for_later() {
    let mut c = cache();
    c.upsert_node(arc(node("n1", 2000, 4)));
    c.upsert_node(arc(node("n2", 2000, 4)));
    c.upsert_pod(arc(pod("a", 500, 1)));
    c.assume(&PodKey::new("default", "a"), 0).unwrap();
    c.upsert_pod(arc(bound(pod("b", 700, 1), "n1")));
    let dropped = c.remove_node("n1");
    assert_eq!(dropped, vec![PodKey::new("default", "a")]);
    assert_eq!(c.nodes().len(), 1);
    assert_eq!(
        c.node("n2").map(|n| n.name().to_string()),
        Some("n2".into())
    );
    assert_eq!(c.total_free().milli_cpu, 2000);
    c.upsert_node(arc(node("n1", 2000, 4)));
    assert_eq!(c.node("n1").map(|n| n.requested.milli_cpu), Some(700));
}

#[test]
fn group_membership_by_state_and_scheduler_names() {
    let mut c = cache();
    let g = group_key("pg");
    c.upsert_node(arc(node("n1", 4000, 8)));
    c.upsert_pod(arc(member("a", &g, 100, 1)));
    c.upsert_pod(arc(member("b", &g, 100, 1)));
    c.upsert_pod(arc(bound(member("c", &g, 100, 1), "n1")));
    let mut other = member("d", &g, 100, 1);
    other.scheduler_name = Arc::from("default-scheduler");
    c.upsert_pod(arc(other));
    c.assume(&PodKey::new("default", "a"), 0).unwrap();
    let m = c.group(&g).unwrap();
    assert_eq!(m.pending().len(), 1);
    assert_eq!(m.assumed().len(), 1);
    assert_eq!(m.bound().len(), 1);
    assert_eq!(m.assumed_or_bound(), 2);
    assert_eq!(m.observed(), 3, "the foreign pod is not a member");
    let names: Vec<(&str, usize)> = m
        .scheduler_names()
        .iter()
        .map(|(n, count)| (&**n, *count))
        .collect();
    assert_eq!(names, [("default-scheduler", 1), (SCHEDULER, 3)]);
    assert_eq!(c.groups_of(&g.definition).count(), 1);
    for name in ["a", "b", "c", "d"] {
        c.remove_pod(&PodKey::new("default", name));
    }
    assert!(c.group(&g).is_none());
    assert_eq!(c.groups_of(&g.definition).count(), 0);
}

#[test]
fn recreated_pod_replaces_an_assumed_one() {
    let mut c = cache();
    c.upsert_node(arc(node("n1", 2000, 4)));
    let p = pod("a", 500, 1);
    c.upsert_pod(arc(p.clone()));
    c.assume(&p.key, 0).unwrap();
    let mut again = p.clone();
    again.uid = Arc::from("uid-new");
    let change = c.upsert_pod(arc(again));
    assert!(change.lost_reservation());
    assert_eq!(change.current, PodState::Pending);
    assert_eq!(c.nodes()[0].requested.milli_cpu, 0);
}

/// A pod seen again with only its status moved on (the kubelet's
/// `Running`, our binding confirmed) is replaced where it stands: the node's
/// generation and change log stay, so memos of what the node offers stay
/// valid; anything else it carries is a full move.
#[test]
fn a_status_update_replaces_the_pod_in_place() {
    let mut c = cache();
    c.upsert_node(arc(node("n1", 2000, 4)));
    let group = group_key("g");
    let mut p = member("a", &group, 500, 1);
    let key = p.key.clone();
    c.upsert_pod(arc(p.clone()));
    c.assume(&key, 0).unwrap();
    let members = |c: &Cache| {
        let m = c.group(&group).unwrap();
        (m.pending().len(), m.assumed().len(), m.bound().len())
    };
    assert_eq!(members(&c), (0, 1, 0));
    let generation = c.nodes()[0].generation;
    let seq = c.node_changes().seq();

    // Our binding confirmed: in place, and the member counts as bound.
    p.node_name = Some(Arc::from("n1"));
    let change = c.upsert_pod(arc(p.clone()));
    assert!(change.in_place && change.confirmed_assumed());
    assert_eq!(members(&c), (0, 0, 1));
    // The kubelet's Running: in place, the newest object everywhere.
    p.phase = PodPhase::Running;
    p.started_ms = 7;
    let running = arc(p.clone());
    let change = c.upsert_pod(running.clone());
    assert!(change.in_place && change.previous.as_ref() == Some(&change.current));
    assert_eq!(c.nodes()[0].generation, generation);
    assert_eq!(c.node_changes().since(seq), Some(&[][..]));
    assert!(Arc::ptr_eq(&c.nodes()[0].pods[0], &running));
    assert_eq!(c.nodes()[0].requested.milli_cpu, 500);

    // New labels are not status: the node changes.
    Arc::make_mut(&mut p.labels).insert("app".into(), "b".into());
    let change = c.upsert_pod(arc(p));
    assert!(!change.in_place);
    assert_ne!(c.nodes()[0].generation, generation);
    assert_eq!(c.nodes()[0].requested.milli_cpu, 500);
    assert_eq!(members(&c), (0, 0, 1));
}

#[test]
fn the_labels_generation_moves_only_with_node_membership_and_labels() {
    let mut c = cache();
    let g0 = c.labels_generation();
    c.upsert_node(arc(node("n1", 2000, 4)));
    let g1 = c.labels_generation();
    assert_ne!(g0, g1, "a new node");
    c.upsert_node(arc(node("n1", 4000, 8)));
    assert_eq!(c.labels_generation(), g1, "capacity is not a label");
    let mut relabelled = node("n1", 4000, 8);
    relabelled.labels.insert("rack".into(), "r1".into());
    c.upsert_node(arc(relabelled));
    let g2 = c.labels_generation();
    assert_ne!(g1, g2, "a label changed");
    c.remove_node("n1");
    assert_ne!(c.labels_generation(), g2, "indices move on removal");
}

mod pod_index_follows_the_nodes {
    //! The cache's pod index holds exactly the pods its node states hold,
    //! on the nodes they are on, through any sequence of changes.

    use super::*;
    use crate::cache::PodIndex;
    use crate::model::PodAffinity;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Node {
            n: u8,
            zone: u8,
        },
        RemoveNode {
            n: u8,
        },
        Pod {
            p: u8,
            app: u8,
            on: Option<u8>,
            anti: bool,
        },
        RemovePod {
            p: u8,
        },
        Assume {
            p: u8,
            n: u8,
        },
        Forget {
            p: u8,
        },
        /// The pod seen again with only its status moved on.
        Status {
            p: u8,
        },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0..4u8, 0..3u8).prop_map(|(n, zone)| Op::Node { n, zone }),
            (0..4u8).prop_map(|n| Op::RemoveNode { n }),
            (0..8u8, 0..3u8, proptest::option::of(0..5u8), any::<bool>())
                .prop_map(|(p, app, on, anti)| Op::Pod { p, app, on, anti }),
            (0..8u8).prop_map(|p| Op::RemovePod { p }),
            (0..8u8, 0..4u8).prop_map(|(p, n)| Op::Assume { p, n }),
            (0..8u8).prop_map(|p| Op::Forget { p }),
            (0..8u8).prop_map(|p| Op::Status { p }),
        ]
    }

    fn labelled(p: u8, app: u8, on: Option<u8>, anti: bool) -> PodInfo {
        let mut info = pod(&format!("p{p}"), 100, 1);
        std::sync::Arc::make_mut(&mut info.labels).insert("app".into(), format!("a{app}"));
        info.node_name = on.map(|n| Arc::from(format!("n{n}")));
        if anti {
            let terms: crate::model::PodAffinityWire = serde_json::from_value(serde_json::json!({
                "requiredDuringSchedulingIgnoredDuringExecution": [{
                    "labelSelector": {"matchLabels": {"app": format!("a{app}")}},
                    "topologyKey": "zone"}]}))
            .unwrap();
            Arc::make_mut(&mut info.constraints).pod_affinity =
                PodAffinity::from_wire(None, Some(&terms), "default", &info.labels).unwrap();
        }
        info
    }

    proptest! {
        #[test]
        fn index_equals_one_rebuilt_from_the_nodes(ops in proptest::collection::vec(op(), 1..60)) {
            let mut c = cache();
            for op in ops {
                match op {
                    Op::Node { n, zone } => {
                        let mut info = node(&format!("n{n}"), 4000, 8);
                        info.labels.insert("zone".into(), format!("z{zone}"));
                        c.upsert_node(arc(info));
                    }
                    Op::RemoveNode { n } => {
                        c.remove_node(&format!("n{n}"));
                    }
                    Op::Pod { p, app, on, anti } => {
                        c.upsert_pod(arc(labelled(p, app, on, anti)));
                    }
                    Op::RemovePod { p } => {
                        c.remove_pod(&PodKey::new("default", &format!("p{p}")));
                    }
                    Op::Assume { p, n } => {
                        let key = PodKey::new("default", &format!("p{p}"));
                        if let Some(i) = c.nodes().iter().position(|s| s.name() == format!("n{n}")) {
                            let _ = c.assume(&key, i);
                        }
                    }
                    Op::Forget { p } => {
                        c.forget(&PodKey::new("default", &format!("p{p}")));
                    }
                    Op::Status { p } => {
                        let key = PodKey::new("default", &format!("p{p}"));
                        if let Some(old) = c.pod(&key) {
                            let mut info = (*old.info).clone();
                            info.phase = PodPhase::Running;
                            info.started_ms = info.started_ms.saturating_add(1);
                            c.upsert_pod(arc(info));
                        }
                    }
                }
                prop_assert_eq!(
                    c.facts().pods.fingerprint(),
                    PodIndex::of_nodes(c.nodes()).fingerprint()
                );
                // Every node holds exactly its pods, in their latest form,
                // and their requests.
                for n in c.nodes() {
                    let mut want: Vec<&Arc<PodInfo>> = c
                        .pods()
                        .filter(|p| p.state.node().is_some_and(|at| **at == *n.name()))
                        .map(|p| &p.info)
                        .collect();
                    want.sort_by(|a, b| a.key.cmp(&b.key));
                    let mut held: Vec<&Arc<PodInfo>> = n.pods.iter().collect();
                    held.sort_by(|a, b| a.key.cmp(&b.key));
                    prop_assert_eq!(want.len(), held.len());
                    for (w, h) in want.iter().zip(&held) {
                        prop_assert!(Arc::ptr_eq(w, h), "{} is held in an older form", w.key);
                    }
                    let cpu: i64 = want.iter().map(|p| p.requests.milli_cpu).sum();
                    prop_assert_eq!(n.requested.milli_cpu, cpu);
                }
            }
        }
    }
}
