//! Preemption on the deterministic driver: kube-scheduler's DefaultPreemption
//! for plain pods (victim choice, candidate order, `preemptionPolicy`,
//! nominations), and whole-gang, topology-aware preemption for gangs.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use muster::driver::Harness;
use muster::driver::fixtures::{gang_def, group_key, member, node, pod};
use muster::engine::Action;
use muster::model::disruption::DisruptionBudget;
use muster::model::{
    DisruptionMode, GroupKey, LabelSelector, LevelRef, PodInfo, PodKey, PreemptionPolicy,
};

fn key(name: &str) -> PodKey {
    PodKey::new("default", name)
}

fn checked(h: &Harness) {
    if let Err(e) = h.check_invariants() {
        panic!("invariant violated at {:?}: {e}", h.elapsed());
    }
}

/// A pod already running on `node` (bound by whoever), `cpu` millicores.
fn running(h: &mut Harness, name: &str, on: &str, cpu: i64, priority: i32, started_ms: i64) {
    let mut p = pod(name, cpu, 1);
    p.node_name = Some(Arc::from(on));
    p.priority = priority;
    p.started_ms = started_ms;
    std::sync::Arc::make_mut(&mut p.labels)
        .insert("app".into(), name.trim_end_matches(char::is_numeric).into());
    h.put_pod(p);
}

fn pending(name: &str, cpu: i64, priority: i32) -> PodInfo {
    let mut p = pod(name, cpu, 1);
    p.priority = priority;
    p
}

fn preempted(h: &Harness) -> Vec<String> {
    let mut v: Vec<String> = h.preempted.iter().map(|k| k.name.to_string()).collect();
    v.sort();
    v
}

fn unschedulable_message(h: &Harness, name: &str) -> String {
    h.actions
        .iter()
        .rev()
        .find_map(|(_, a)| match a {
            Action::PodUnschedulable { pod, message, .. } if pod.name.as_ref() == name => {
                Some(message.clone())
            }
            _ => None,
        })
        .unwrap_or_default()
}

// ---- plain pods ---------------------------------------------------------------

#[test]
fn a_pod_preempts_the_fewest_least_important_pods_and_binds_on_their_node() {
    let mut h = Harness::new();
    h.add_node(node("n0", 4000, 64));
    for (i, prio) in [4, 1, 3, 2].into_iter().enumerate() {
        running(&mut h, &format!("low{i}"), "n0", 1000, prio, 0);
    }
    h.put_pod(pending("high", 2000, 100));
    h.advance(Duration::from_secs(10));
    // All four removed make room; the two most important are reprieved.
    assert_eq!(preempted(&h), ["low1", "low3"]);
    assert_eq!(h.node_of(&key("high")).as_deref(), Some("n0"));
    assert!(h.events_with("Preempted", "Preempted by pod default/high") >= 2);
    assert_eq!(
        h.engine.nominated_node(&key("high")),
        None,
        "bound: nomination over"
    );
    checked(&h);
}

#[test]
fn preemption_policy_never_and_equal_priority_preempt_nothing() {
    let mut h = Harness::new();
    h.add_node(node("n0", 1000, 64));
    running(&mut h, "low", "n0", 1000, 1, 0);
    let mut never = pending("never", 1000, 100);
    never.preemption_policy = PreemptionPolicy::Never;
    h.put_pod(never);
    h.put_pod(pending("peer", 1000, 1));
    h.settle();
    assert!(h.preempted.is_empty());
    assert!(
        unschedulable_message(&h, "never")
            .contains("preemption: not eligible due to preemptionPolicy=Never."),
        "{}",
        unschedulable_message(&h, "never")
    );
    assert!(
        unschedulable_message(&h, "peer").contains("No preemption victims found"),
        "{}",
        unschedulable_message(&h, "peer")
    );
}

#[test]
fn the_node_with_fewer_budget_violations_is_chosen() {
    let mut h = Harness::new();
    h.add_node(node("n0", 1000, 64));
    h.add_node(node("n1", 1000, 64));
    running(&mut h, "web1", "n0", 1000, 1, 0);
    running(&mut h, "db1", "n1", 1000, 1, 0);
    h.put_budget(DisruptionBudget {
        namespace: Arc::from("default"),
        name: Arc::from("web"),
        selector: Some(LabelSelector::from_map(&BTreeMap::from([(
            "app".to_string(),
            "web".to_string(),
        )]))),
        disruptions_allowed: 0,
        disrupted_pods: HashSet::new(),
    });
    h.put_pod(pending("high", 1000, 100));
    h.advance(Duration::from_secs(10));
    assert_eq!(preempted(&h), ["db1"]);
    assert_eq!(h.node_of(&key("high")).as_deref(), Some("n1"));
}

#[test]
fn then_the_node_whose_most_important_victim_is_least_important() {
    let mut h = Harness::new();
    h.add_node(node("n0", 2000, 64));
    h.add_node(node("n1", 2000, 64));
    running(&mut h, "a", "n0", 2000, 5, 0);
    running(&mut h, "b", "n1", 1000, 1, 0);
    running(&mut h, "c", "n1", 1000, 2, 0);
    h.put_pod(pending("high", 2000, 100));
    h.advance(Duration::from_secs(10));
    assert_eq!(preempted(&h), ["b", "c"]);
    assert_eq!(h.node_of(&key("high")).as_deref(), Some("n1"));
}

#[test]
fn then_fewer_victims_then_the_youngest() {
    let mut h = Harness::new();
    for n in ["n0", "n1", "n2"] {
        h.add_node(node(n, 2000, 64));
    }
    // Same top priority everywhere; n0 needs two victims, n1 and n2 one,
    // and n2's started last.
    running(&mut h, "a", "n0", 1000, 1, 0);
    running(&mut h, "b", "n0", 1000, 1, 0);
    running(&mut h, "c", "n1", 2000, 1, 10);
    running(&mut h, "d", "n2", 2000, 1, 20);
    h.put_pod(pending("high", 2000, 100));
    h.settle();
    assert_eq!(preempted(&h), ["d"]);
}

#[test]
fn a_pod_that_needs_no_eviction_or_cannot_be_helped_preempts_nothing() {
    let mut h = Harness::new();
    h.add_node(node("n0", 1000, 64));
    running(&mut h, "low", "n0", 1000, 1, 0);
    // Larger than any node: no eviction helps.
    h.put_pod(pending("huge", 8000, 100));
    h.settle();
    assert!(h.preempted.is_empty());
    assert!(unschedulable_message(&h, "huge").contains("No preemption victims found"));
}

#[test]
fn the_nomination_holds_the_room_against_less_important_pods_while_victims_terminate() {
    let mut h = Harness::new();
    h.termination_grace = Duration::from_secs(30);
    h.add_node(node("n0", 2000, 64));
    running(&mut h, "low", "n0", 2000, 1, 0);
    h.put_pod(pending("high", 2000, 100));
    h.settle();
    assert_eq!(preempted(&h), ["low"]);
    assert_eq!(h.engine.nominated_node(&key("high")).as_deref(), Some("n0"));
    // A pod of middle priority arrives while the victim terminates; it may
    // not take the room, nor preempt the terminating victim's room again.
    h.put_pod(pending("mid", 2000, 50));
    h.advance(Duration::from_secs(31));
    assert_eq!(h.node_of(&key("high")).as_deref(), Some("n0"));
    assert_eq!(h.node_of(&key("mid")), None);
    // `mid` cannot preempt `high` (higher priority).
    assert_eq!(preempted(&h), ["low"]);
    checked(&h);
}

#[test]
fn a_higher_priority_pod_ignores_a_lower_nomination_and_takes_it_over() {
    let mut h = Harness::new();
    h.termination_grace = Duration::from_secs(30);
    h.add_node(node("n0", 2000, 64));
    running(&mut h, "low", "n0", 2000, 1, 0);
    h.put_pod(pending("mid", 2000, 50));
    h.settle();
    assert_eq!(h.engine.nominated_node(&key("mid")).as_deref(), Some("n0"));
    h.put_pod(pending("top", 2000, 100));
    h.advance(Duration::from_secs(31));
    // `top` does not count `mid`'s nomination, and binds first; `mid`
    // finds no lower-priority victim left and gives its nomination up.
    assert_eq!(h.node_of(&key("top")).as_deref(), Some("n0"));
    assert_eq!(h.node_of(&key("mid")), None);
    assert_eq!(h.engine.nominated_node(&key("mid")), None);
    assert_eq!(preempted(&h), ["low"]);
}

/// A pod labelled `app: spread`, spreading such pods over racks (maxSkew 1,
/// every rack counted whatever the pod's node selector).
fn spread_pod(name: &str, cpu: i64, priority: i32) -> PodInfo {
    let wire: muster::model::wire::PodWire = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "spread"}},
        "spec": {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": RACK,
            "whenUnsatisfiable": "DoNotSchedule", "nodeAffinityPolicy": "Ignore",
            "labelSelector": {"matchLabels": {"app": "spread"}}}]}
    }))
    .unwrap();
    let mut p = pending(name, cpu, priority);
    p.labels = wire.metadata.labels.clone().into();
    Arc::make_mut(&mut p.constraints).spread = muster::model::PodSpread::from_wire(&wire).unwrap();
    p
}

/// kube-scheduler's second Filter pass: a node that passes only with a
/// nominated pod counted (here it evens the spread) is not taken while the
/// nomination is only a promise.
#[test]
fn a_node_passing_only_with_a_nominated_pod_counted_waits_for_it() {
    let mut h = Harness::new();
    h.termination_grace = Duration::from_secs(30);
    for (name, rack) in [("a0", "rack-a"), ("b0", "rack-b")] {
        let mut n = node(name, 1000, 64);
        n.labels.insert(RACK.into(), rack.into());
        h.add_node(n);
    }
    let mut s1 = spread_pod("s1", 500, 5);
    s1.node_name = Some(Arc::from("a0"));
    h.put_pod(s1);
    running(&mut h, "low", "b0", 1000, 1, 0);
    // `high` (counted by the spread selector) preempts `low` on b0.
    let mut high = pending("high", 1000, 100);
    std::sync::Arc::make_mut(&mut high.labels).insert("app".into(), "spread".into());
    h.put_pod(high);
    h.settle();
    assert_eq!(preempted(&h), ["low"]);
    assert_eq!(h.engine.nominated_node(&key("high")).as_deref(), Some("b0"));
    // `s2` may only go to rack a. Counting `high` on b0, rack a would hold
    // 2 against rack b's 1 (skew 1); without it, 2 against 0 (skew 2).
    let mut s2 = spread_pod("s2", 500, 0);
    Arc::make_mut(&mut s2.constraints)
        .node_selector
        .insert(RACK.into(), "rack-a".into());
    h.put_pod(s2);
    h.settle();
    assert_eq!(h.node_of(&key("s2")), None);
    assert!(
        unschedulable_message(&h, "s2").contains("passes only with the pods nominated"),
        "{}",
        unschedulable_message(&h, "s2")
    );
    // Once `high` is bound on b0, the spread holds without any promise.
    h.advance(Duration::from_secs(31));
    assert_eq!(h.node_of(&key("high")).as_deref(), Some("b0"));
    assert_eq!(h.node_of(&key("s2")).as_deref(), Some("a0"));
    checked(&h);
}

// ---- gangs ----------------------------------------------------------------------

/// A gang of `n` members of `cpu` each and priority `priority`, placed.
fn gang(h: &mut Harness, name: &str, min: u32, n: usize, cpu: i64, priority: i32) -> GroupKey {
    gang_with(h, name, min, n, cpu, priority, |_| {})
}

fn gang_with(
    h: &mut Harness,
    name: &str,
    min: u32,
    n: usize,
    cpu: i64,
    priority: i32,
    edit: impl Fn(&mut muster::model::GroupDef),
) -> GroupKey {
    let g = group_key(name);
    let mut def = gang_def(name, min, 0);
    edit(&mut def);
    h.put_def(def);
    for i in 0..n {
        let mut p = member(&format!("{name}-{i}"), &g, cpu, 1);
        p.priority = priority;
        h.put_pod(p);
    }
    h.advance(Duration::from_secs(10));
    g
}

/// No gang has some but fewer than `minCount` members placed.
fn no_partial_gang(h: &Harness, gangs: &[(GroupKey, usize)]) {
    for (g, min) in gangs {
        let bound = h.bound_members(g);
        assert!(bound == 0 || bound >= *min, "{g}: {bound} of {min} left");
    }
}

#[test]
fn a_high_priority_gang_evicts_whole_low_priority_gangs_and_binds() {
    let mut h = Harness::new();
    for i in 0..4 {
        h.add_node(node(&format!("n{i}"), 2000, 64));
    }
    // Two low gangs of 4 x 1 cpu fill the cluster.
    let a = gang(&mut h, "low-a", 4, 4, 1000, 1);
    let b = gang(&mut h, "low-b", 4, 4, 1000, 2);
    assert_eq!(h.bound_members(&a) + h.bound_members(&b), 8);
    // A high gang of 2 x 2 cpu: evicting one whole gang frees 4 cpu, but
    // spread over the nodes; two whole nodes are needed.
    let high = gang(&mut h, "high", 2, 2, 2000, 100);
    checked(&h);
    assert_eq!(h.bound_members(&high), 2);
    no_partial_gang(&h, &[(a.clone(), 4), (b.clone(), 4)]);
    // The cheapest choice is evicting low-a (lower priority) if it frees two
    // nodes, else both: never a part of a gang.
    assert!(h.events("Preempted") > 0);
}

#[test]
fn a_gang_that_would_not_fit_even_after_evictions_evicts_nothing() {
    let mut h = Harness::new();
    for i in 0..2 {
        h.add_node(node(&format!("n{i}"), 2000, 64));
    }
    let low = gang(&mut h, "low", 2, 2, 2000, 1);
    let big = gang(&mut h, "big", 3, 3, 2000, 100);
    assert!(h.preempted.is_empty());
    assert_eq!(h.bound_members(&low), 2);
    assert_eq!(h.bound_members(&big), 0);
    let msg = unschedulable_message(&h, "big-0");
    assert!(msg.contains("cannot be placed as a whole"), "{msg}");
    assert!(
        msg.contains("preemption: no placement of the gang fits"),
        "{msg}"
    );
}

#[test]
fn a_single_mode_gang_with_spare_members_loses_only_what_is_in_the_way() {
    let mut h = Harness::new();
    for i in 0..4 {
        h.add_node(node(&format!("n{i}"), 1000, 64));
    }
    // 4 running, minCount 2, single: one member may go alone.
    let low = gang(&mut h, "low", 2, 4, 1000, 1);
    assert_eq!(h.bound_members(&low), 4);
    h.put_pod(pending("high", 1000, 100));
    h.advance(Duration::from_secs(10));
    assert_eq!(h.preempted.len(), 1);
    assert_eq!(h.bound_members(&low), 3);
    assert!(h.node_of(&key("high")).is_some());
}

#[test]
fn disruption_mode_all_evicts_the_whole_gang_for_one_member_in_the_way() {
    let mut h = Harness::new();
    for i in 0..4 {
        h.add_node(node(&format!("n{i}"), 1000, 64));
    }
    let low = gang_with(&mut h, "low", 2, 4, 1000, 1, |d| {
        d.extras.disruption_mode = Some(DisruptionMode::All);
    });
    assert_eq!(h.bound_members(&low), 4);
    h.put_pod(pending("high", 1000, 100));
    h.advance(Duration::from_secs(10));
    assert_eq!(h.preempted.len(), 4);
    assert!(h.node_of(&key("high")).is_some());
    assert!(h.events_with("Preempted", "a gang is disrupted whole") >= 1);
}

#[test]
fn a_gang_below_min_count_after_one_eviction_goes_whole_even_for_a_plain_pod() {
    let mut h = Harness::new();
    for i in 0..4 {
        h.add_node(node(&format!("n{i}"), 1000, 64));
    }
    let low = gang(&mut h, "low", 4, 4, 1000, 1);
    // Another node's plain pod of higher priority than the gang but lower
    // than the preemptor would be cheaper by pods, but the budget of
    // priority comes first: the gang (priority 1) goes, whole.
    h.put_pod(pending("high", 1000, 100));
    h.advance(Duration::from_secs(10));
    assert_eq!(h.preempted.len(), 4);
    no_partial_gang(&h, &[(low.clone(), 4)]);
    assert!(h.node_of(&key("high")).is_some());
}

// ---- topology -------------------------------------------------------------------

const RACK: &str = "topology.kubernetes.io/rack";

#[test]
fn a_rack_constrained_gang_frees_exactly_the_cheapest_rack() {
    let mut h = Harness::new();
    for r in ["a", "b"] {
        for i in 0..2 {
            let mut nd = node(&format!("{r}-{i}"), 2000, 64);
            nd.labels.insert(RACK.into(), r.into());
            h.add_node(nd);
        }
    }
    // Rack a runs priority-5 pods, rack b priority-1 pods.
    for (i, n) in ["a-0", "a-1"].into_iter().enumerate() {
        running(&mut h, &format!("ra{i}"), n, 2000, 5, 0);
    }
    for (i, n) in ["b-0", "b-1"].into_iter().enumerate() {
        running(&mut h, &format!("rb{i}"), n, 2000, 1, 0);
    }
    let g = gang_with(&mut h, "train", 2, 2, 2000, 100, |d| {
        d.topology.required = Some(LevelRef::Label(RACK.into()));
    });
    checked(&h);
    assert_eq!(preempted(&h), ["rb0", "rb1"]);
    assert_eq!(h.bound_members(&g), 2);
    for i in 0..2 {
        let on = h.node_of(&key(&format!("train-{i}"))).unwrap_or_default();
        assert!(on.starts_with("b-"), "train-{i} on {on}");
    }
}

// ---- the reprieve, in place ------------------------------------------------------

/// Gang preemption candidates evaluated by how their victims were reprieved.
fn reprieves(h: &Harness, how: &str) -> u64 {
    let stats = h.engine.stats(h.now());
    stats.gang_reprieves.get(how).copied().unwrap_or(0)
}

#[test]
fn a_gang_takes_the_cheapest_units_that_make_room_and_touches_nothing_else() {
    let mut h = Harness::new();
    for i in 0..4 {
        h.add_node(node(&format!("n{i}"), 4000, 64));
    }
    // Four 1-cpu pods on each node: priority 1 on n0 and n2, 5 on n1, 9
    // on n3.
    for (n, priority) in [("n0", 1), ("n1", 5), ("n2", 1), ("n3", 9)] {
        for j in 0..4 {
            running(
                &mut h,
                &format!("p{priority}-{n}-{j}"),
                n,
                1000,
                priority,
                0,
            );
        }
    }
    // Two members of 2 cpu: two priority-1 pods under each would do; the
    // priority-5 and -9 pods are never touched.
    let g = gang(&mut h, "train", 2, 2, 2000, 100);
    checked(&h);
    assert_eq!(h.bound_members(&g), 2);
    let gone = preempted(&h);
    assert_eq!(gone.len(), 4, "{gone:?}");
    assert!(gone.iter().all(|v| v.starts_with("p1-")), "{gone:?}");
    // The cheapest units that make room were the four on one node: each
    // was tried back and is needed.
    assert_eq!(reprieves(&h, "evicted"), 4);
    assert_eq!(reprieves(&h, "replanned"), 0);
}

#[test]
fn members_that_must_not_share_a_node_are_re_checked_together() {
    let mut h = Harness::new();
    for i in 0..3 {
        let mut n = node(&format!("n{i}"), 2000, 64);
        n.labels
            .insert("kubernetes.io/hostname".into(), format!("n{i}"));
        h.add_node(n);
    }
    for i in 0..3 {
        for j in 0..2 {
            running(&mut h, &format!("low{i}{j}"), &format!("n{i}"), 1000, 1, 0);
        }
    }
    // Two members of 1 cpu, each refusing the other's node: one node
    // cleared of one pod would hold both, but they need two nodes, one
    // victim on each.
    let g = group_key("train");
    h.put_def(gang_def("train", 2, 0));
    for i in 0..2 {
        let mut p = member(&format!("train-{i}"), &g, 1000, 1);
        p.priority = 100;
        std::sync::Arc::make_mut(&mut p.labels).insert("app".into(), "train".into());
        Arc::make_mut(&mut p.constraints)
            .pod_affinity
            .required_anti_affinity
            .push(muster::model::PodAffinityTerm {
                label_selector: LabelSelector::from_map(
                    &[("app".to_string(), "train".to_string())].into(),
                ),
                namespaces: vec![p.key.namespace.clone()],
                namespace_selector: LabelSelector::nothing(),
                topology_key: "kubernetes.io/hostname".into(),
                match_label_keys: Vec::new(),
                mismatch_label_keys: Vec::new(),
            });
        h.put_pod(p);
    }
    h.advance(Duration::from_secs(10));
    checked(&h);
    assert_eq!(h.bound_members(&g), 2);
    assert_eq!(preempted(&h).len(), 2, "{:?}", preempted(&h));
    let nodes: HashSet<_> = (0..2)
        .filter_map(|i| h.node_of(&key(&format!("train-{i}"))))
        .collect();
    assert_eq!(nodes.len(), 2, "{nodes:?}");
}

#[test]
fn a_gang_is_retried_when_its_last_victim_is_gone_not_after_its_backoff() {
    let mut h = Harness::new();
    for i in 0..2 {
        h.add_node(node(&format!("n{i}"), 2000, 64));
    }
    for i in 0..2 {
        running(&mut h, &format!("low{i}"), &format!("n{i}"), 2000, 1, 0);
    }
    let g = group_key("train");
    h.put_def(gang_def("train", 2, 0));
    for i in 0..2 {
        let mut p = member(&format!("train-{i}"), &g, 2000, 1);
        p.priority = 100;
        h.put_pod(p);
    }
    // The victims are deleted at once; the gang's first attempt set a
    // backoff of a second, which its retry does not wait out.
    h.advance(Duration::from_millis(300));
    checked(&h);
    assert_eq!(preempted(&h), ["low0", "low1"]);
    assert_eq!(h.bound_members(&g), 2);
    let at = h.binds.iter().map(|b| b.at).max().unwrap_or_default();
    assert!(at < Duration::from_millis(300), "bound at {at:?}");
}
