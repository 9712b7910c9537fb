//! Table tests in the manner of upstream's `filtering_test.go` and
//! `scoring_test.go` (cases and expected scores re-derived here).

use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::cache::{LabelIds, NodeState, SelectingKind};
use crate::framework::ScorePlugin;
use crate::model::{LabelSelector, PodInfo, TaintEffect};
use crate::plugins::test_util::{NodeBuilder, node};

const HOST: &str = "kubernetes.io/hostname";

fn pod_in(ns: &str, name: &str, labels: Value, spec: Value) -> PodInfo {
    let v = json!({"metadata": {"name": name, "namespace": ns, "uid": name, "labels": labels},
        "spec": spec});
    PodInfo::from_json(&serde_json::to_vec(&v).unwrap()).unwrap()
}

/// An existing pod labelled `foo` (or with `labels`).
fn existing(name: &str, labels: Value) -> PodInfo {
    pod_in("ns", name, labels, json!({}))
}

fn foo() -> Value {
    json!({"foo": ""})
}

/// `{maxSkew, topologyKey, whenUnsatisfiable, labelSelector: foo Exists}` plus `extra`.
fn tsc(max_skew: i64, key: &str, when: &str, selector_key: &str, extra: Value) -> Value {
    let mut c = json!({"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when,
        "labelSelector": {"matchExpressions": [{"key": selector_key, "operator": "Exists"}]}});
    if let Some(extra) = extra.as_object() {
        for (k, v) in extra {
            c[k] = v.clone();
        }
    }
    c
}

fn incoming(labels: Value, constraints: Vec<Value>, spec: Value) -> PodInfo {
    let mut spec = spec;
    spec["topologySpreadConstraints"] = json!(constraints);
    pod_in("ns", "p", labels, spec)
}

/// A node `name` with `zone` (when given), its hostname label, and `pods`
/// (by label) bound to it.
fn zn(name: &str, zone: Option<&str>, pods: &[(&str, Value)]) -> NodeBuilder {
    let mut b = node(name, &[]).label(HOST, name);
    if let Some(z) = zone {
        b = b.label("zone", z);
    }
    for (p, labels) in pods {
        b = b.with_pod(existing(p, labels.clone()));
    }
    b
}

fn foos(prefix: &str, n: usize) -> Vec<(String, Value)> {
    (0..n).map(|i| (format!("{prefix}{i}"), foo())).collect()
}

fn with_foos(b: NodeBuilder, prefix: &str, n: usize) -> NodeBuilder {
    foos(prefix, n)
        .into_iter()
        .fold(b, |b, (name, labels)| b.with_pod(existing(&name, labels)))
}

/// Filter verdicts for every node: `None` passes, else the reason and
/// whether it is unresolvable — the same whether Filter reads the nodes'
/// labels as strings or as the ids of a `LabelIds` table.
fn filter_all(
    plugin: &PodTopologySpread,
    pod: &PodInfo,
    nodes: &[NodeState],
) -> Vec<Option<(String, bool)>> {
    let by_strings = filter_with(plugin, pod, nodes, ClusterFacts::empty());
    let mut numbered = nodes.to_vec();
    let mut facts = ClusterFacts::default();
    facts.label_ids = LabelIds::of_nodes(&mut numbered);
    assert_eq!(
        filter_with(plugin, pod, &numbered, &facts),
        by_strings,
        "Filter by label ids disagrees with the strings"
    );
    by_strings
}

fn filter_with(
    plugin: &PodTopologySpread,
    pod: &PodInfo,
    nodes: &[NodeState],
    facts: &ClusterFacts,
) -> Vec<Option<(String, bool)>> {
    let mut state = CycleState::new();
    assert_eq!(
        plugin.pre_filter(&mut state, pod, &Snapshot::new(nodes, facts)),
        PreFilterResult::AllNodes
    );
    let read = state.read::<PreFilterState>(PRE_FILTER_KEY);
    for c in read.iter().flat_map(|s| &s.constraints) {
        let numbered = facts.label_ids.stamp() != 0;
        assert_eq!(c.label_ids.is_some(), numbered, "ids iff a table");
    }
    nodes
        .iter()
        .map(|n| {
            plugin
                .filter(&state, pod, n)
                .err()
                .map(|r| (r.reason.to_string(), r.unresolvable))
        })
        .collect()
}

fn fails() -> Option<(String, bool)> {
    Some((REASON_CONSTRAINTS_NOT_MATCH.into(), false))
}

fn missing() -> Option<(String, bool)> {
    Some((REASON_NODE_LABEL_NOT_MATCH.into(), true))
}

struct FilterCase {
    name: &'static str,
    pod: PodInfo,
    nodes: Vec<NodeState>,
    want: Vec<Option<(String, bool)>>,
}

#[test]
fn filter_cases() {
    let dns = "DoNotSchedule";
    let zone1 = |name: &str, n| with_foos(zn(name, Some("zone1"), &[]), name, n).build();
    let zone2 = |name: &str, n| with_foos(zn(name, Some("zone2"), &[]), name, n).build();
    let cases = vec![
        FilterCase {
            name: "no existing pods: every node fits",
            pod: incoming(
                foo(),
                vec![tsc(1, "zone", dns, "foo", json!({}))],
                json!({}),
            ),
            nodes: vec![zone1("a", 0), zone1("b", 0), zone2("x", 0), zone2("y", 0)],
            want: vec![None, None, None, None],
        },
        FilterCase {
            name: "no existing pods, incoming pod does not match itself",
            pod: incoming(
                json!({}),
                vec![tsc(1, "zone", dns, "foo", json!({}))],
                json!({}),
            ),
            nodes: vec![zone1("a", 0), zone2("x", 0)],
            want: vec![None, None],
        },
        FilterCase {
            // 3/0 pods by zone: the full zone exceeds maxSkew 1.
            name: "existing pods in one zone",
            pod: incoming(
                foo(),
                vec![tsc(1, "zone", dns, "foo", json!({}))],
                json!({}),
            ),
            nodes: vec![zone1("a", 2), zone1("b", 1), zone2("x", 0), zone2("y", 0)],
            want: vec![fails(), fails(), None, None],
        },
        FilterCase {
            // hostname spread 2/1/0/3 with maxSkew 1: only the empty node fits.
            name: "pods spread across nodes as 2/1/0/3",
            pod: incoming(foo(), vec![tsc(1, HOST, dns, "foo", json!({}))], json!({})),
            nodes: vec![zone1("a", 2), zone1("b", 1), zone2("x", 0), zone2("y", 3)],
            want: vec![fails(), fails(), None, fails()],
        },
        FilterCase {
            name: "pods spread across nodes as 2/1/0/3, maxSkew 2",
            pod: incoming(foo(), vec![tsc(2, HOST, dns, "foo", json!({}))], json!({})),
            nodes: vec![zone1("a", 2), zone1("b", 1), zone2("x", 0), zone2("y", 3)],
            want: vec![fails(), None, None, fails()],
        },
        FilterCase {
            name: "a node without the key is unresolvable, and does not count",
            pod: incoming(
                foo(),
                vec![tsc(1, "zone", dns, "foo", json!({}))],
                json!({}),
            ),
            nodes: vec![
                zone1("a", 1),
                with_foos(zn("nozone", None, &[]), "n", 5).build(),
                zone2("x", 0),
            ],
            want: vec![fails(), missing(), None],
        },
        FilterCase {
            // Pods in another namespace, being deleted or finished never count.
            name: "only live pods of the same namespace count",
            pod: incoming(
                foo(),
                vec![tsc(1, "zone", dns, "foo", json!({}))],
                json!({}),
            ),
            nodes: vec![
                zn("a", Some("zone1"), &[])
                    .with_pod(pod_in("other", "o", foo(), json!({})))
                    .with_pod({
                        let mut p = existing("d", foo());
                        p.deleting = true;
                        p
                    })
                    .with_pod({
                        let mut p = existing("f", foo());
                        p.phase = crate::model::PodPhase::Failed;
                        p
                    })
                    .build(),
                zone2("x", 1),
            ],
            want: vec![None, fails()],
        },
        FilterCase {
            // zone: 3/1 by zone (maxSkew 1: zone1 is full); hostname: 2/1/1/0.
            name: "two constraints: zone and hostname must both hold",
            pod: incoming(
                foo(),
                vec![
                    tsc(1, "zone", dns, "foo", json!({})),
                    tsc(1, HOST, dns, "foo", json!({})),
                ],
                json!({}),
            ),
            nodes: vec![zone1("a", 2), zone1("b", 1), zone2("x", 1), zone2("y", 0)],
            want: vec![fails(), fails(), fails(), None],
        },
        FilterCase {
            // 1/1 across the two zones that exist; minDomains 3 makes the
            // global minimum 0, so no zone may get a second pod.
            name: "minDomains above the domain count makes the minimum 0",
            pod: incoming(
                foo(),
                vec![tsc(1, "zone", dns, "foo", json!({"minDomains": 3}))],
                json!({}),
            ),
            nodes: vec![zone1("a", 1), zone2("x", 1)],
            want: vec![fails(), fails()],
        },
        FilterCase {
            name: "minDomains met: the real minimum applies",
            pod: incoming(
                foo(),
                vec![tsc(1, "zone", dns, "foo", json!({"minDomains": 2}))],
                json!({}),
            ),
            nodes: vec![zone1("a", 1), zone2("x", 1)],
            want: vec![None, None],
        },
        FilterCase {
            // The node outside the pod's nodeSelector is not a domain under
            // Honor (so zone3 with 0 pods is not the minimum)...
            name: "nodeAffinityPolicy Honor leaves unselectable nodes out",
            pod: incoming(
                foo(),
                vec![tsc(1, "zone", dns, "foo", json!({}))],
                json!({"nodeSelector": {"pool": "a"}}),
            ),
            nodes: vec![
                with_foos(zn("a", Some("zone1"), &[]).label("pool", "a"), "a", 1).build(),
                with_foos(zn("x", Some("zone2"), &[]).label("pool", "a"), "x", 1).build(),
                zn("z", Some("zone3"), &[]).build(),
            ],
            want: vec![None, None, None],
        },
        FilterCase {
            // ...but is under Ignore: zone3 is the minimum, 0.
            name: "nodeAffinityPolicy Ignore counts every node",
            pod: incoming(
                foo(),
                vec![tsc(
                    1,
                    "zone",
                    dns,
                    "foo",
                    json!({"nodeAffinityPolicy": "Ignore"}),
                )],
                json!({"nodeSelector": {"pool": "a"}}),
            ),
            nodes: vec![
                with_foos(zn("a", Some("zone1"), &[]).label("pool", "a"), "a", 1).build(),
                with_foos(zn("x", Some("zone2"), &[]).label("pool", "a"), "x", 1).build(),
                zn("z", Some("zone3"), &[]).build(),
            ],
            want: vec![fails(), fails(), None],
        },
        FilterCase {
            name: "nodeTaintsPolicy Honor leaves untolerated nodes out",
            pod: incoming(
                foo(),
                vec![tsc(
                    1,
                    "zone",
                    dns,
                    "foo",
                    json!({"nodeTaintsPolicy": "Honor"}),
                )],
                json!({}),
            ),
            nodes: vec![
                zone1("a", 1),
                zone2("x", 1),
                zn("t", Some("zone3"), &[])
                    .taint("dedicated", "x", TaintEffect::NoSchedule)
                    .build(),
            ],
            want: vec![None, None, None],
        },
        FilterCase {
            name: "nodeTaintsPolicy Ignore (default) counts tainted nodes",
            pod: incoming(
                foo(),
                vec![tsc(1, "zone", dns, "foo", json!({}))],
                json!({}),
            ),
            nodes: vec![
                zone1("a", 1),
                zone2("x", 1),
                zn("t", Some("zone3"), &[])
                    .taint("dedicated", "x", TaintEffect::NoSchedule)
                    .build(),
            ],
            want: vec![fails(), fails(), None],
        },
        FilterCase {
            name: "matchLabelKeys narrow the selector to the pod's own value",
            pod: incoming(
                json!({"foo": "", "rev": "2"}),
                vec![tsc(
                    1,
                    "zone",
                    dns,
                    "foo",
                    json!({"matchLabelKeys": ["rev"]}),
                )],
                json!({}),
            ),
            nodes: vec![
                zn(
                    "a",
                    Some("zone1"),
                    &[
                        ("r1a", json!({"foo": "", "rev": "1"})),
                        ("r1b", json!({"foo": "", "rev": "1"})),
                    ],
                )
                .build(),
                zn(
                    "x",
                    Some("zone2"),
                    &[("r2", json!({"foo": "", "rev": "2"}))],
                )
                .build(),
            ],
            want: vec![None, fails()],
        },
        FilterCase {
            name: "ScheduleAnyway constraints do not filter",
            pod: incoming(
                foo(),
                vec![tsc(1, "zone", "ScheduleAnyway", "foo", json!({}))],
                json!({}),
            ),
            nodes: vec![zone1("a", 5), zn("nozone", None, &[]).build()],
            want: vec![None, None],
        },
    ];
    for c in cases {
        let got = filter_all(&PodTopologySpread::default(), &c.pod, &c.nodes);
        assert_eq!(got, c.want, "{}", c.name);
    }
}

#[test]
fn reserved_pods_on_a_node_count() {
    // Reserved (assumed) gang members sit in `NodeState::pods` like bound ones.
    let mut a = zn("a", Some("zone1"), &[]).build();
    a.add_pod(&Arc::new(existing("reserved", foo())));
    let nodes = [a, zn("x", Some("zone2"), &[]).build()];
    let pod = incoming(
        foo(),
        vec![tsc(1, "zone", "DoNotSchedule", "foo", json!({}))],
        json!({}),
    );
    assert_eq!(
        filter_all(&PodTopologySpread::default(), &pod, &nodes),
        [fails(), None]
    );
}

/// Normalised scores of the `candidates` (indices into `nodes`).
fn scores(
    plugin: &PodTopologySpread,
    pod: &PodInfo,
    nodes: &[NodeState],
    facts: &ClusterFacts,
    candidates: &[usize],
) -> Option<Vec<i64>> {
    let mut state = CycleState::new();
    let snapshot = Snapshot::new(nodes, facts);
    if !plugin.pre_score(&mut state, pod, &snapshot, candidates) {
        return None;
    }
    let mut s: Vec<i64> = candidates
        .iter()
        .map(|&i| plugin.score(&state, pod, &nodes[i]))
        .collect();
    plugin.normalize(&state, pod, &mut s);
    Some(s)
}

struct ScoreCase {
    name: &'static str,
    pod: PodInfo,
    nodes: Vec<NodeState>,
    candidates: Vec<usize>,
    want: Vec<i64>,
}

#[test]
fn score_cases() {
    let sa = "ScheduleAnyway";
    let host = |n: &str, pods| with_foos(zn(n, None, &[]), n, pods).build();
    let zoned = |n: &str, zone: &str, pods| with_foos(zn(n, Some(zone), &[]), n, pods).build();
    let one_host = |skew| {
        incoming(
            foo(),
            vec![tsc(skew, HOST, sa, "foo", json!({}))],
            json!({}),
        )
    };
    let cases = vec![
        ScoreCase {
            name: "no existing pods",
            pod: one_host(1),
            nodes: vec![host("a", 0), host("b", 0)],
            candidates: vec![0, 1],
            want: vec![100, 100],
        },
        ScoreCase {
            name: "hostname spread 2/1/0/3",
            pod: one_host(1),
            nodes: vec![host("a", 2), host("b", 1), host("c", 0), host("d", 3)],
            candidates: vec![0, 1, 2, 3],
            want: vec![20, 60, 100, 0],
        },
        ScoreCase {
            name: "hostname spread 2/1/0/3, maxSkew 2 waters differences down",
            pod: one_host(2),
            nodes: vec![host("a", 2), host("b", 1), host("c", 0), host("d", 3)],
            candidates: vec![0, 1, 2, 3],
            want: vec![33, 66, 100, 16],
        },
        ScoreCase {
            name: "hostname spread 4/3/2/1, maxSkew 3",
            pod: one_host(3),
            nodes: vec![host("a", 4), host("b", 3), host("c", 2), host("d", 1)],
            candidates: vec![0, 1, 2, 3],
            want: vec![44, 66, 77, 100],
        },
        ScoreCase {
            name: "4/2/1/~3~: the infeasible node is not scored",
            pod: one_host(1),
            nodes: vec![host("a", 4), host("b", 2), host("x", 1), host("y", 3)],
            candidates: vec![0, 1, 2],
            want: vec![33, 83, 100],
        },
        ScoreCase {
            name: "4/?2?/1/~3~: a node without the key scores 0",
            pod: one_host(1),
            nodes: vec![
                host("a", 4),
                with_foos(node("b", &[]).label("n", "b"), "b", 2).build(),
                host("x", 1),
                host("y", 3),
            ],
            candidates: vec![0, 1, 2],
            want: vec![16, 0, 100],
        },
        ScoreCase {
            name: "zone: 4/2/1/~3~ counts the infeasible node's pods in its zone",
            pod: incoming(foo(), vec![tsc(1, "zone", sa, "foo", json!({}))], json!({})),
            nodes: vec![
                zoned("a", "zone1", 4),
                zoned("b", "zone1", 2),
                zoned("x", "zone2", 1),
                zoned("y", "zone2", 3),
            ],
            candidates: vec![0, 1, 2],
            want: vec![75, 75, 100],
        },
        ScoreCase {
            name: "zone and hostname, 2/~1~/2/~4~",
            pod: incoming(
                foo(),
                vec![
                    tsc(1, "zone", sa, "foo", json!({})),
                    tsc(1, HOST, sa, "foo", json!({})),
                ],
                json!({}),
            ),
            nodes: vec![
                zoned("a", "zone1", 2),
                zoned("b", "zone1", 1),
                zoned("x", "zone2", 2),
                zoned("y", "zone2", 4),
            ],
            candidates: vec![0, 2],
            want: vec![100, 63],
        },
        ScoreCase {
            name: "pods of another namespace do not count",
            pod: one_host(1),
            nodes: vec![
                zn("a", None, &[("a2", foo())])
                    .with_pod(pod_in("ns1", "a1", foo(), json!({})))
                    .build(),
                host("b", 2),
            ],
            candidates: vec![0, 1],
            want: vec![100, 33],
        },
        ScoreCase {
            name: "terminating pods do not count",
            pod: one_host(1),
            nodes: vec![
                zn("a", None, &[])
                    .with_pod({
                        let mut p = existing("t", foo());
                        p.deleting = true;
                        p
                    })
                    .build(),
                host("b", 1),
            ],
            candidates: vec![0, 1],
            want: vec![100, 0],
        },
    ];
    for c in cases {
        let got = scores(
            &PodTopologySpread::default(),
            &c.pod,
            &c.nodes,
            ClusterFacts::empty(),
            &c.candidates,
        );
        assert_eq!(got, Some(c.want), "{}", c.name);
    }
}

#[test]
fn score_skips_pods_without_soft_constraints() {
    let plugin = PodTopologySpread::default();
    let nodes = [zn("a", Some("z"), &[]).build()];
    let hard = incoming(
        foo(),
        vec![tsc(1, "zone", "DoNotSchedule", "foo", json!({}))],
        json!({}),
    );
    assert_eq!(
        scores(&plugin, &hard, &nodes, ClusterFacts::empty(), &[0]),
        None
    );
    // No constraints and nothing selecting the pod: defaults do not apply.
    let plain = pod_in("ns", "p", foo(), json!({}));
    assert_eq!(
        scores(&plugin, &plain, &nodes, ClusterFacts::empty(), &[0]),
        None
    );
}

fn facts_with_service(selector: &[(&str, &str)]) -> ClusterFacts {
    let mut facts = ClusterFacts::default();
    let map = selector
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    facts.workloads.upsert(
        SelectingKind::Service,
        "ns",
        "svc",
        Some(LabelSelector::from_map(&map)),
    );
    facts
}

#[test]
fn system_defaults_use_the_service_selector() {
    // Nodes without a zone: system defaulting still scores on hostname
    // (maxSkew 3), the same as one hostname constraint: 4/3/2/1.
    let facts = facts_with_service(&[("foo", "")]);
    let nodes: Vec<NodeState> = [("a", 4), ("b", 3), ("c", 2), ("d", 1)]
        .iter()
        .map(|(n, k)| with_foos(zn(n, None, &[]), n, *k).build())
        .collect();
    let pod = pod_in("ns", "p", foo(), json!({}));
    let got = scores(
        &PodTopologySpread::default(),
        &pod,
        &nodes,
        &facts,
        &[0, 1, 2, 3],
    );
    assert_eq!(got, Some(vec![44, 66, 77, 100]));
    // A pod the service does not select gets no defaults.
    let other = pod_in("ns", "q", json!({"bar": ""}), json!({}));
    assert_eq!(
        scores(
            &PodTopologySpread::default(),
            &other,
            &nodes,
            &facts,
            &[0, 1]
        ),
        None
    );
}

#[test]
fn list_defaults_can_filter() {
    let args = decode_args(
        "a",
        json!({"defaultingType": "List", "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}),
    )
    .unwrap();
    let plugin = PodTopologySpread::new(&args);
    let facts = facts_with_service(&[("foo", "")]);
    let nodes = [
        with_foos(zn("a", Some("zone1"), &[]), "a", 1).build(),
        zn("x", Some("zone2"), &[]).build(),
    ];
    let pod = pod_in("ns", "p", foo(), json!({}));
    let mut state = CycleState::new();
    plugin.pre_filter(&mut state, &pod, &Snapshot::new(&nodes, &facts));
    assert!(plugin.filter(&state, &pod, &nodes[0]).is_err());
    assert!(plugin.filter(&state, &pod, &nodes[1]).is_ok());
    // Its own constraints replace the defaults entirely.
    let own = incoming(
        foo(),
        vec![tsc(5, "zone", "DoNotSchedule", "foo", json!({}))],
        json!({}),
    );
    let mut state = CycleState::new();
    plugin.pre_filter(&mut state, &own, &Snapshot::new(&nodes, &facts));
    assert!(plugin.filter(&state, &own, &nodes[0]).is_ok());
}

#[test]
fn memo_follows_cluster_changes() {
    // The same plugin instance across cycles sees pods added in between.
    let plugin = PodTopologySpread::default();
    let pod = incoming(
        foo(),
        vec![tsc(1, "zone", "DoNotSchedule", "foo", json!({}))],
        json!({}),
    );
    let mut nodes = vec![
        zn("a", Some("zone1"), &[]).build(),
        zn("x", Some("zone2"), &[]).build(),
    ];
    assert_eq!(filter_all(&plugin, &pod, &nodes), [None, None]);
    nodes[0].add_pod(&Arc::new(existing("p1", foo())));
    assert_eq!(filter_all(&plugin, &pod, &nodes), [fails(), None]);
    let removed = existing("p1", foo());
    nodes[0].remove_pod(&removed);
    nodes[1].add_pod(&Arc::new(existing("p2", foo())));
    assert_eq!(filter_all(&plugin, &pod, &nodes), [None, fails()]);
    // A relabelled node moves to its new domain.
    let mut info = (*nodes[1].info).clone();
    info.labels.insert("zone".into(), "zone1".into());
    nodes[1].set_info(Arc::new(info));
    nodes.push(zn("y", Some("zone2"), &[]).build());
    assert_eq!(filter_all(&plugin, &pod, &nodes), [fails(), fails(), None]);
}

mod label_ids_agree_with_the_strings {
    //! Cycle after cycle on a cluster the cache keeps (nodes arriving,
    //! relabelled into other zones or out of any, removed; pods bound), one
    //! plugin instance filters the same reading the cache's label ids as
    //! another reading strings — the per-node memos follow both.

    use super::*;
    use crate::cache::Cache;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        /// Node `n{n}` arrives or moves to zone `z{zone}` (3: no zone label).
        Node(u8, u8),
        RemoveNode(u8),
        /// A pod labelled `foo` bound to `n{n}`.
        Pod(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0..6u8, 0..4u8).prop_map(|(n, z)| Op::Node(n, z)),
            1 => (0..6u8).prop_map(Op::RemoveNode),
            3 => (0..6u8).prop_map(Op::Pod),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]
        #[test]
        fn filter_verdicts(
            ops in proptest::collection::vec(op(), 1..30),
            key in prop_oneof![Just("zone"), Just(HOST)],
            max_skew in 1..3i64,
            min_domains in proptest::option::of(1..4i64),
        ) {
            let mut c = Cache::new([Arc::from("muster")]);
            c.facts_mut().label_ids = LabelIds::maintained_with_slack(0);
            let extra = min_domains.map_or(json!({}), |m| json!({"minDomains": m}));
            let pod = incoming(foo(), vec![tsc(max_skew, key, "DoNotSchedule", "foo", extra)], json!({}));
            let (by_ids, by_strings) = (PodTopologySpread::default(), PodTopologySpread::default());
            for (i, op) in ops.into_iter().enumerate() {
                match op {
                    Op::Node(n, zone) => {
                        let name = format!("n{n}");
                        let z = format!("z{zone}");
                        c.upsert_node(zn(&name, (zone < 3).then_some(z.as_str()), &[]).build().info);
                    }
                    Op::RemoveNode(n) => {
                        c.remove_node(&format!("n{n}"));
                    }
                    Op::Pod(n) => {
                        let spec = json!({"nodeName": format!("n{n}")});
                        c.upsert_pod(Arc::new(pod_in("ns", &format!("e{i}"), foo(), spec)));
                    }
                }
                let strings = ClusterFacts::default();
                prop_assert_eq!(
                    filter_with(&by_ids, &pod, c.nodes(), c.facts()),
                    filter_with(&by_strings, &pod, c.nodes(), &strings)
                );
            }
        }
    }
}
