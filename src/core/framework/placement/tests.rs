//! Runner tests: sampling, rotation, failure messages, scoring, tie-breaking and
//! parallel/sequential equivalence, with the real plugins.

use serde_json::json;

use super::*;
use crate::framework::NodeRestriction;
use crate::model::TaintEffect;
use crate::plugins::test_util::{node, pod, pod_requesting};

fn schedule(f: &Framework, p: &PodInfo, nodes: &[NodeState]) -> Result<Placement, FitError> {
    f.schedule(p, nodes, &mut 0)
}

#[test]
fn fit_error_counts_reasons_like_kube_scheduler() {
    let mut nodes: Vec<NodeState> = (0..3)
        .map(|i| node(&format!("small-{i}"), &[("cpu", "1"), ("memory", "8Gi")]).build())
        .collect();
    for i in 0..2 {
        nodes.push(
            node(&format!("tainted-{i}"), &[("cpu", "8"), ("memory", "8Gi")])
                .taint("key", "value", TaintEffect::NoSchedule)
                .build(),
        );
    }
    let err = schedule(
        &Framework::default(),
        &pod_requesting(&[("cpu", "2")]),
        &nodes,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "0/5 nodes are available: 2 node(s) had untolerated taint {key: value}, 3 Insufficient cpu."
    );
    assert!(
        !err.unresolvable,
        "Insufficient cpu is resolvable by preemption"
    );
}

#[test]
fn one_node_counts_once_per_reason_of_its_failing_plugin() {
    let nodes = [
        node("a", &[("cpu", "1"), ("memory", "1Gi")]).build(),
        node("b", &[("cpu", "8"), ("memory", "1Gi")]).build(),
    ];
    let p = pod_requesting(&[("cpu", "2"), ("memory", "2Gi")]);
    let err = schedule(&Framework::default(), &p, &nodes).unwrap_err();
    assert_eq!(
        err.to_string(),
        "0/2 nodes are available: 1 Insufficient cpu, 2 Insufficient memory."
    );
}

#[test]
fn first_failing_filter_wins() {
    // Unschedulable and too small: only NodeUnschedulable (first in order) counts.
    let nodes = [node("a", &[("cpu", "1")]).unschedulable().build()];
    let err = schedule(
        &Framework::default(),
        &pod_requesting(&[("cpu", "2")]),
        &nodes,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "0/1 nodes are available: 1 node(s) were unschedulable."
    );
    assert!(err.unresolvable);
}

#[test]
fn pre_filter_narrowing_reports_absent_nodes() {
    let nodes: Vec<NodeState> = (0..5)
        .map(|i| node(&format!("n{i}"), &[("cpu", "1")]).build())
        .collect();
    let pinned = pod(json!({
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["n3"]}]}]}}}
    }));
    let err = schedule(&Framework::default(), &pinned, &nodes).unwrap_err();
    assert_eq!(
        err.to_string(),
        "0/5 nodes are available: 1 Insufficient cpu, 4 node(s) didn't satisfy plugin(s) [NodeAffinity]."
    );

    let fits = pod(
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n3"]}]}]}}}}),
    );
    let placed = schedule(&Framework::default(), &fits, &nodes).unwrap();
    assert_eq!(
        (&*placed.node_name, placed.evaluated, placed.feasible),
        ("n3", 1, 1)
    );
}

#[test]
fn restriction_confines_placement_and_counts_the_rest() {
    let mut nodes: Vec<NodeState> = (0..4)
        .map(|i| node(&format!("n{i}"), &[("cpu", "1")]).build())
        .collect();
    nodes.push(node("big", &[("cpu", "8")]).build());
    let restriction = NodeRestriction {
        nodes: vec![1, 2],
        reason: "node(s) outside rack=r1".to_string(),
    };
    let big = pod_requesting(&[("cpu", "2")]);
    let f = Framework::default();
    let err = f
        .schedule_within(
            &big,
            &Snapshot::of_nodes(&nodes),
            &mut 0,
            Some(&restriction),
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "0/5 nodes are available: 2 Insufficient cpu, 3 node(s) outside rack=r1."
    );
    let small = pod_requesting(&[("cpu", "500m")]);
    for start in 0..5 {
        let placed = f
            .schedule_within(
                &small,
                &Snapshot::of_nodes(&nodes),
                &mut start.clone(),
                Some(&restriction),
            )
            .unwrap();
        assert!(["n1", "n2"].contains(&&*placed.node_name), "{placed:?}");
    }
    // A plugin's narrowing outside the restriction leaves nothing.
    let pinned = pod(json!({
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["big"]}]}]}}}
    }));
    let err = f
        .schedule_within(
            &pinned,
            &Snapshot::of_nodes(&nodes),
            &mut 0,
            Some(&restriction),
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "0/5 nodes are available: 2 node(s) didn't satisfy plugin(s) [NodeAffinity], 3 node(s) outside rack=r1."
    );
}

#[test]
fn pre_filter_reject_uses_its_message() {
    let nodes = [node("a", &[]).build(), node("b", &[]).build()];
    let conflict = pod(
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["a"]},
            {"key": "metadata.name", "operator": "In", "values": ["b"]}]}]}}}}),
    );
    let mut start = 1;
    let err = Framework::default()
        .schedule(&conflict, &nodes, &mut start)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "0/2 nodes are available: pod affinity terms conflict."
    );
    assert_eq!(start, 1, "nothing was evaluated");
}

#[test]
fn no_nodes() {
    let err = schedule(&Framework::default(), &pod(json!({})), &[]).unwrap_err();
    assert_eq!(err.to_string(), "no nodes available to schedule pods");
}

fn uniform_nodes(n: usize) -> Vec<NodeState> {
    (0..n)
        .map(|i| node(&format!("n{i}"), &[("cpu", "4"), ("memory", "8Gi")]).build())
        .collect()
}

#[test]
fn samples_and_rotates_like_kube_scheduler() {
    let nodes = uniform_nodes(1000);
    let f = Framework::default();
    let p = pod_requesting(&[("cpu", "1")]);
    let mut start = 0;
    let placed = f.schedule(&p, &nodes, &mut start).unwrap();
    // 50 - 1000/125 = 42% of 1000.
    assert_eq!((placed.evaluated, placed.feasible), (420, 420));
    assert!(placed.node_index < 420);
    assert_eq!(start, 420);
    let placed = f.schedule(&p, &nodes, &mut start).unwrap();
    assert!((420..840).contains(&placed.node_index));
    assert_eq!(start, 840);
    // Wraps: 840..1000 then 0..260.
    let placed = f.schedule(&p, &nodes, &mut start).unwrap();
    assert!(
        placed.node_index >= 840 || placed.node_index < 260,
        "{placed:?}"
    );
    assert_eq!(start, 260);
}

#[test]
fn rejected_nodes_count_as_processed() {
    // Half the nodes are too small: the search walks 2 nodes per feasible one.
    let nodes: Vec<NodeState> = (0..1000)
        .map(|i| {
            let cpu = if i % 2 == 0 { "1" } else { "4" };
            node(&format!("n{i}"), &[("cpu", cpu)]).build()
        })
        .collect();
    let f = Framework::default();
    let mut start = 0;
    let placed = f
        .schedule(&pod_requesting(&[("cpu", "2")]), &nodes, &mut start)
        .unwrap();
    assert_eq!(placed.feasible, 420);
    assert_eq!(placed.evaluated, 840);
    assert_eq!(start, 840);
}

#[test]
fn full_percentage_evaluates_every_node() {
    let nodes = uniform_nodes(1000);
    let f = Framework {
        percentage_of_nodes_to_score: Some(100),
        ..Framework::default()
    };
    let mut start = 500;
    let placed = f
        .schedule(&pod_requesting(&[]), &nodes, &mut start)
        .unwrap();
    assert_eq!((placed.evaluated, placed.feasible), (1000, 1000));
    assert_eq!(start, 500);
}

#[test]
fn highest_score_wins() {
    let busy = pod_requesting(&[("cpu", "3"), ("memory", "6Gi")]);
    let nodes = [
        node("busy", &[("cpu", "4"), ("memory", "8Gi")])
            .with_pod(busy.clone())
            .build(),
        node("idle", &[("cpu", "4"), ("memory", "8Gi")]).build(),
        node("busy2", &[("cpu", "4"), ("memory", "8Gi")])
            .with_pod(busy)
            .build(),
    ];
    let placed = schedule(
        &Framework::default(),
        &pod_requesting(&[("cpu", "500m")]),
        &nodes,
    )
    .unwrap();
    assert_eq!(&*placed.node_name, "idle");
    assert_eq!(placed.feasible, 3);
}

#[test]
fn preferred_affinity_and_soft_taints_steer_placement() {
    let nodes = [
        node("plain", &[("cpu", "4")]).build(),
        node("ssd", &[("cpu", "4")]).label("disk", "ssd").build(),
        node("ssd-soft-taint", &[("cpu", "4")])
            .label("disk", "ssd")
            .taint("spot", "", TaintEffect::PreferNoSchedule)
            .build(),
    ];
    let p = pod(
        json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 10, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}}
        ]}}}),
    );
    let placed = schedule(&Framework::default(), &p, &nodes).unwrap();
    assert_eq!(&*placed.node_name, "ssd");
}

#[test]
fn ties_are_broken_reproducibly_and_spread() {
    let nodes = uniform_nodes(8);
    let p = pod_requesting(&[("cpu", "1")]);
    let run = |seed| {
        let f = Framework::default().with_seed(seed);
        (0..64)
            .map(|_| schedule(&f, &p, &nodes).unwrap().node_index)
            .collect::<Vec<_>>()
    };
    let a = run(3);
    assert_eq!(a, run(3), "same seed, same choices");
    assert_ne!(a, run(4));
    let distinct: std::collections::BTreeSet<_> = a.iter().collect();
    assert!(
        distinct.len() >= 6,
        "ties spread over the nodes: {distinct:?}"
    );
}

#[test]
fn empty_framework_takes_the_sampled_nodes() {
    let nodes = uniform_nodes(300);
    let mut start = 10;
    let placed = Framework::empty()
        .schedule(&pod(json!({})), &nodes, &mut start)
        .unwrap();
    // 50 - 300/125 = 48% of 300.
    assert_eq!((placed.evaluated, placed.feasible), (144, 144));
    assert_eq!(start, 154);
}

/// A deterministic heterogeneous cluster: varied sizes, some full, some tainted,
/// some cordoned, labels for affinity.
fn mixed_cluster(n: usize) -> Vec<NodeState> {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..n)
        .map(|i| {
            let cpu = [2, 4, 8, 16][(next() % 4) as usize];
            let mut b = node(
                &format!("n{i}"),
                &[("cpu", &cpu.to_string()), ("memory", "32Gi")],
            )
            .label("zone", ["a", "b", "c"][(next() % 3) as usize]);
            match next() % 10 {
                0 => b = b.taint("dedicated", "infra", TaintEffect::NoSchedule),
                1 => b = b.taint("spot", "", TaintEffect::PreferNoSchedule),
                2 => b = b.unschedulable(),
                _ => {}
            }
            let used = (next() % (cpu as u64 + 1)) as i64;
            if used > 0 {
                b = b.with_pod(pod_requesting(&[
                    ("cpu", &used.to_string()),
                    ("memory", "4Gi"),
                ]));
            }
            b.build()
        })
        .collect()
}

#[test]
fn parallel_filtering_chooses_what_sequential_would() {
    let nodes = mixed_cluster(3000);
    let pods = [
        pod_requesting(&[("cpu", "3")]),
        pod_requesting(&[("cpu", "12")]),
        pod_requesting(&[("cpu", "100")]),
        pod(json!({"nodeSelector": {"zone": "b"},
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]})),
    ];
    for pct in [None, Some(100), Some(20)] {
        let mut seq = Framework::default().with_seed(9);
        seq.percentage_of_nodes_to_score = pct;
        seq.parallel_min_nodes = usize::MAX;
        let mut par = seq.clone();
        par.parallel_min_nodes = 2;
        let (mut s1, mut s2) = (17, 17);
        for round in 0..6 {
            for p in &pods {
                let a = seq.schedule(p, &nodes, &mut s1);
                let b = par.schedule(p, &nodes, &mut s2);
                assert_eq!(a, b, "pct {pct:?} round {round}");
                assert_eq!(s1, s2);
            }
        }
    }
}

#[test]
fn passes_agrees_with_filter_for_every_plugin() {
    let nodes = mixed_cluster(400);
    let f = Framework::default();
    let state = CycleState::new();
    let pods = [
        pod_requesting(&[("cpu", "3"), ("nvidia.com/gpu", "1")]),
        pod_requesting(&[("cpu", "100m")]),
        pod(
            json!({"tolerations": [{"key": "dedicated", "operator": "Exists"}],
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "9"}}}]}),
        ),
    ];
    for p in &pods {
        for n in &nodes {
            for plugin in &f.filters {
                assert_eq!(
                    plugin.passes(&state, p, n),
                    plugin.filter(&state, p, n).is_ok(),
                    "{} on {}",
                    plugin.name(),
                    n.name()
                );
            }
        }
    }
}
