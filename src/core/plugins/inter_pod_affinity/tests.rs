//! Table-driven cases after kube-scheduler's `filtering_test.go` and
//! `scoring_test.go` (written anew): required terms of both sides, topology
//! keys missing on nodes, the first pod of a self-affine group, namespaces
//! and namespace selectors, preferred weights, symmetry and normalisation.

use serde_json::{Value, json};

use super::*;
use crate::cache::{ClusterFacts, LabelIds, NodeState, PodIndex};
use crate::plugins::test_util::node;

/// A pod `ns/name` with `labels` and `spec`.
fn mk(ns: &str, name: &str, labels: &[(&str, &str)], spec: Value) -> PodInfo {
    let labels: serde_json::Map<String, Value> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
        .collect();
    let v = json!({"metadata": {"name": name, "namespace": ns, "uid": name, "labels": labels},
        "spec": spec});
    PodInfo::from_json(&serde_json::to_vec(&v).unwrap()).unwrap()
}

fn sel_in(key: &str, values: &[&str]) -> Value {
    json!({"matchExpressions": [{"key": key, "operator": "In", "values": values}]})
}

fn term(selector: Value, topology_key: &str) -> Value {
    json!({"labelSelector": selector, "topologyKey": topology_key})
}

/// `spec.affinity` with the given required lists.
fn required(affinity: &[Value], anti: &[Value]) -> Value {
    json!({"affinity": {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": affinity},
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": anti}}})
}

/// `spec.affinity` with the given preferred lists of `(weight, term)`.
fn preferred(affinity: &[(i64, Value)], anti: &[(i64, Value)]) -> Value {
    let list = |terms: &[(i64, Value)]| -> Vec<Value> {
        terms
            .iter()
            .map(|(w, t)| json!({"weight": w, "podAffinityTerm": t}))
            .collect()
    };
    json!({"affinity": {
        "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": list(affinity)},
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": list(anti)}}})
}

/// `prefix-N`, a fresh N each call.
fn unique(prefix: &str) -> String {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{prefix}-{n}")
}

fn plain(ns: &str, name: &str, labels: &[(&str, &str)]) -> PodInfo {
    mk(ns, name, labels, json!({}))
}

/// A node with `labels` (hostname, zone, region, ...) and `pods`.
fn node_with(name: &str, labels: &[(&str, &str)], pods: Vec<PodInfo>) -> NodeState {
    let mut b = node(name, &[]);
    for (k, v) in labels {
        b = b.label(k, v);
    }
    for p in pods {
        b = b.with_pod(p);
    }
    b.build()
}

fn facts(namespaces: &[(&str, &[(&str, &str)])]) -> ClusterFacts {
    let mut f = ClusterFacts::default();
    for (name, labels) in namespaces {
        f.upsert_namespace(
            name,
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
    }
    f
}

/// `facts` with a maintained pod index of `nodes` (the cache's view).
fn indexed(facts: &ClusterFacts, nodes: &[NodeState]) -> ClusterFacts {
    let mut f = facts.clone();
    f.pods = PodIndex::of_nodes(nodes);
    f
}

/// `indexed`, with `nodes` (copied) numbered by the facts' `LabelIds` as the
/// cache numbers them: Filter and Score then read label ids, not strings.
fn numbered(facts: &ClusterFacts, nodes: &[NodeState]) -> (ClusterFacts, Vec<NodeState>) {
    let mut nodes = nodes.to_vec();
    let mut f = indexed(facts, &nodes);
    f.label_ids = LabelIds::of_nodes(&mut nodes);
    assert!(nodes.iter().all(|n| f.label_ids.numbered(&n.label_ids)));
    (f, nodes)
}

/// Filter's verdict on each node, as the reason (`None`: passes) and
/// whether it is unresolvable — the same whether PreFilter scans the nodes
/// or reads the cache's pod index, and whether Filter reads label strings or
/// ids.
fn filter_all(
    pod: &PodInfo,
    nodes: &[NodeState],
    facts: &ClusterFacts,
) -> Vec<Option<(&'static str, bool)>> {
    let scanned = filter_with(pod, nodes, facts);
    assert_eq!(
        filter_with(pod, nodes, &indexed(facts, nodes)),
        scanned,
        "indexed PreFilter disagrees with the scan"
    );
    let (with_ids, nodes) = numbered(facts, nodes);
    assert_eq!(
        filter_with(pod, &nodes, &with_ids),
        scanned,
        "Filter by label ids disagrees with the strings"
    );
    scanned
}

fn filter_with(
    pod: &PodInfo,
    nodes: &[NodeState],
    facts: &ClusterFacts,
) -> Vec<Option<(&'static str, bool)>> {
    let plugin = InterPodAffinity::default();
    let mut state = CycleState::new();
    let snapshot = Snapshot::new(nodes, facts);
    assert_eq!(
        plugin.pre_filter(&mut state, pod, &snapshot),
        PreFilterResult::AllNodes
    );
    nodes
        .iter()
        .map(|n| match plugin.filter(&state, pod, n) {
            Ok(()) => None,
            Err(r) => Some((
                match r.reason.as_ref() {
                    REASON_AFFINITY => REASON_AFFINITY,
                    REASON_ANTI_AFFINITY => REASON_ANTI_AFFINITY,
                    REASON_EXISTING_ANTI_AFFINITY => REASON_EXISTING_ANTI_AFFINITY,
                    other => panic!("unexpected reason {other}"),
                },
                r.unresolvable,
            )),
        })
        .collect()
}

const AFF: Option<(&str, bool)> = Some((REASON_AFFINITY, true));
const ANTI: Option<(&str, bool)> = Some((REASON_ANTI_AFFINITY, false));
const EXISTING: Option<(&str, bool)> = Some((REASON_EXISTING_ANTI_AFFINITY, false));

struct FilterCase {
    name: &'static str,
    pod: PodInfo,
    nodes: Vec<NodeState>,
    facts: ClusterFacts,
    want: Vec<Option<(&'static str, bool)>>,
}

const N1: &[(&str, &str)] = &[("region", "r1"), ("zone", "z11"), ("hostname", "h1")];
const N2: &[(&str, &str)] = &[("region", "r1"), ("zone", "z12"), ("hostname", "h2")];
const N3: &[(&str, &str)] = &[("region", "r2"), ("zone", "z21"), ("hostname", "h3")];

fn filter_cases() -> Vec<FilterCase> {
    // Each existing pod its own name, as in a cluster (the index keys by it).
    let scan = |labels: &[(&str, &str)]| plain("ns", &unique("existing"), labels);
    let securityscan = || scan(&[("service", "securityscan")]);
    let three = |pods1: Vec<PodInfo>, pods3: Vec<PodInfo>| {
        vec![
            node_with("n1", N1, pods1),
            node_with("n2", N2, vec![]),
            node_with("n3", N3, pods3),
        ]
    };
    let none = || facts(&[]);
    vec![
        FilterCase {
            name: "a pod without terms passes everywhere",
            pod: plain("ns", "p", &[]),
            nodes: three(vec![securityscan()], vec![]),
            facts: none(),
            want: vec![None, None, None],
        },
        FilterCase {
            name: "affinity to a matching pod: the nodes sharing its region",
            pod: mk(
                "ns",
                "p",
                &[],
                required(
                    &[term(
                        sel_in("service", &["securityscan", "value2"]),
                        "region",
                    )],
                    &[],
                ),
            ),
            nodes: three(vec![securityscan()], vec![]),
            facts: none(),
            want: vec![None, None, AFF],
        },
        FilterCase {
            name: "affinity with NotIn: the existing pod matches",
            pod: mk(
                "ns",
                "p",
                &[],
                required(
                    &[term(
                        json!({"matchExpressions": [{"key": "service", "operator": "NotIn", "values": ["other"]}]}),
                        "zone",
                    )],
                    &[],
                ),
            ),
            nodes: three(vec![securityscan()], vec![]),
            facts: none(),
            want: vec![None, AFF, AFF],
        },
        FilterCase {
            name: "affinity matching nothing, pod not matching itself: unresolvable everywhere",
            pod: mk(
                "ns",
                "p",
                &[],
                required(&[term(sel_in("service", &["antivirus"]), "region")], &[]),
            ),
            nodes: three(vec![securityscan()], vec![]),
            facts: none(),
            want: vec![AFF, AFF, AFF],
        },
        FilterCase {
            name: "affinity does not see pods of other namespaces by default",
            pod: mk(
                "ns",
                "p",
                &[],
                required(&[term(sel_in("service", &["securityscan"]), "region")], &[]),
            ),
            nodes: three(
                vec![plain("other", "e", &[("service", "securityscan")])],
                vec![],
            ),
            facts: none(),
            want: vec![AFF, AFF, AFF],
        },
        FilterCase {
            name: "affinity terms are ANDed: one pod must match all",
            pod: mk(
                "ns",
                "p",
                &[],
                required(
                    &[
                        term(sel_in("service", &["securityscan"]), "region"),
                        term(
                            json!({"matchExpressions": [{"key": "wrongkey", "operator": "DoesNotExist"}]}),
                            "region",
                        ),
                    ],
                    &[],
                ),
            ),
            nodes: three(
                vec![securityscan()],
                vec![scan(&[("service", "securityscan"), ("wrongkey", "x")])],
            ),
            facts: none(),
            want: vec![None, None, AFF],
        },
        FilterCase {
            name: "affinity needs every topology key on the node",
            pod: mk(
                "ns",
                "p",
                &[],
                required(&[term(sel_in("service", &["securityscan"]), "rack")], &[]),
            ),
            nodes: three(vec![securityscan()], vec![]),
            facts: none(),
            want: vec![AFF, AFF, AFF],
        },
        FilterCase {
            name: "first pod of a self-affine group: anywhere with the key",
            pod: mk(
                "ns",
                "p",
                &[("app", "db")],
                required(&[term(sel_in("app", &["db"]), "zone")], &[]),
            ),
            nodes: vec![
                node_with("n1", N1, vec![scan(&[("app", "web")])]),
                node_with("n2", N2, vec![]),
                node_with("n4", &[("hostname", "h4")], vec![]),
            ],
            facts: none(),
            want: vec![None, None, AFF],
        },
        FilterCase {
            name: "a self-affine pod follows the group once one member runs",
            pod: mk(
                "ns",
                "p",
                &[("app", "db")],
                required(&[term(sel_in("app", &["db"]), "zone")], &[]),
            ),
            nodes: three(vec![], vec![scan(&[("app", "db")])]),
            facts: none(),
            want: vec![AFF, AFF, None],
        },
        FilterCase {
            name: "the self-affine exception needs the pod to match its own terms",
            pod: mk(
                "ns",
                "p",
                &[("app", "web")],
                required(&[term(sel_in("app", &["db"]), "zone")], &[]),
            ),
            nodes: three(vec![], vec![]),
            facts: none(),
            want: vec![AFF, AFF, AFF],
        },
        FilterCase {
            name: "anti-affinity by zone keeps the pod off the matching pod's zone",
            pod: mk(
                "ns",
                "p",
                &[],
                required(&[], &[term(sel_in("service", &["securityscan"]), "zone")]),
            ),
            nodes: vec![
                node_with("n1", N1, vec![securityscan()]),
                node_with("n1b", &[("zone", "z11"), ("hostname", "h1b")], vec![]),
                node_with("n3", N3, vec![]),
            ],
            facts: none(),
            want: vec![ANTI, ANTI, None],
        },
        FilterCase {
            name: "anti-affinity ignores nodes without the topology key",
            pod: mk(
                "ns",
                "p",
                &[],
                required(&[], &[term(sel_in("service", &["securityscan"]), "rack")]),
            ),
            nodes: three(vec![securityscan()], vec![]),
            facts: none(),
            want: vec![None, None, None],
        },
        FilterCase {
            name: "an existing pod's anti-affinity selecting the incoming pod (symmetry)",
            pod: plain("ns", "p", &[("app", "web")]),
            nodes: three(
                vec![mk(
                    "ns",
                    "e",
                    &[],
                    required(&[], &[term(sel_in("app", &["web"]), "region")]),
                )],
                vec![],
            ),
            facts: none(),
            want: vec![EXISTING, EXISTING, None],
        },
        FilterCase {
            name: "an existing pod's anti-affinity only covers its own namespace by default",
            pod: plain("ns", "p", &[("app", "web")]),
            nodes: three(
                vec![mk(
                    "other",
                    "e",
                    &[],
                    required(&[], &[term(sel_in("app", &["web"]), "region")]),
                )],
                vec![],
            ),
            facts: none(),
            want: vec![None, None, None],
        },
        FilterCase {
            name: "an existing pod's anti-affinity by namespaceSelector",
            pod: plain("ns", "p", &[("app", "web")]),
            nodes: three(
                vec![mk(
                    "other",
                    "e",
                    &[],
                    required(
                        &[],
                        &[json!({
                "labelSelector": sel_in("app", &["web"]), "topologyKey": "hostname",
                "namespaceSelector": {"matchLabels": {"team": "x"}}})],
                    ),
                )],
                vec![],
            ),
            facts: facts(&[("ns", &[("team", "x")]), ("other", &[])]),
            want: vec![EXISTING, None, None],
        },
        FilterCase {
            name: "an existing pod's anti-affinity on a key the node lacks",
            pod: plain("ns", "p", &[("app", "web")]),
            nodes: three(
                vec![mk(
                    "ns",
                    "e",
                    &[],
                    required(&[], &[term(sel_in("app", &["web"]), "rack")]),
                )],
                vec![],
            ),
            facts: none(),
            want: vec![None, None, None],
        },
        FilterCase {
            name: "affinity with an empty namespaceSelector sees every known namespace",
            pod: mk(
                "ns",
                "p",
                &[],
                required(
                    &[
                        json!({"labelSelector": sel_in("service", &["securityscan"]),
                "namespaceSelector": {}, "topologyKey": "region"}),
                    ],
                    &[],
                ),
            ),
            nodes: three(
                vec![],
                vec![plain("other", "e", &[("service", "securityscan")])],
            ),
            facts: facts(&[("ns", &[]), ("other", &[])]),
            want: vec![AFF, AFF, None],
        },
        FilterCase {
            name: "affinity by namespaceSelector picks the labelled namespace only",
            pod: mk(
                "ns",
                "p",
                &[],
                required(
                    &[
                        json!({"labelSelector": sel_in("service", &["securityscan"]),
                "namespaceSelector": {"matchLabels": {"team": "sec"}}, "topologyKey": "region"}),
                    ],
                    &[],
                ),
            ),
            nodes: three(
                vec![plain("plain", "e1", &[("service", "securityscan")])],
                vec![plain("sec", "e2", &[("service", "securityscan")])],
            ),
            facts: facts(&[("plain", &[]), ("sec", &[("team", "sec")])]),
            want: vec![AFF, AFF, None],
        },
        FilterCase {
            name: "affinity, anti-affinity and existing anti-affinity together",
            pod: mk(
                "ns",
                "p",
                &[("app", "web")],
                required(
                    &[term(sel_in("service", &["cache"]), "region")],
                    &[term(sel_in("service", &["batch"]), "hostname")],
                ),
            ),
            nodes: vec![
                node_with("n1", N1, vec![plain("ns", "c", &[("service", "cache")])]),
                node_with("n2", N2, vec![plain("ns", "b", &[("service", "batch")])]),
                node_with(
                    "n2b",
                    &[("region", "r1"), ("zone", "z12"), ("hostname", "h2b")],
                    vec![mk(
                        "ns",
                        "e",
                        &[],
                        required(&[], &[term(sel_in("app", &["web"]), "hostname")]),
                    )],
                ),
                node_with("n3", N3, vec![]),
            ],
            facts: none(),
            want: vec![None, ANTI, EXISTING, AFF],
        },
        FilterCase {
            name: "matchLabelKeys: anti-affinity only against the same revision",
            pod: mk(
                "ns",
                "p",
                &[("app", "web"), ("rev", "2")],
                required(
                    &[],
                    &[json!({
                "labelSelector": sel_in("app", &["web"]), "matchLabelKeys": ["rev"], "topologyKey": "hostname"})],
                ),
            ),
            nodes: vec![
                node_with(
                    "n1",
                    N1,
                    vec![plain("ns", "old", &[("app", "web"), ("rev", "1")])],
                ),
                node_with(
                    "n2",
                    N2,
                    vec![plain("ns", "new", &[("app", "web"), ("rev", "2")])],
                ),
            ],
            facts: none(),
            want: vec![None, ANTI],
        },
    ]
}

#[test]
fn filter_cases_match_kube_scheduler() {
    for c in filter_cases() {
        assert_eq!(filter_all(&c.pod, &c.nodes, &c.facts), c.want, "{}", c.name);
    }
}

#[test]
fn nothing_to_check_writes_no_state() {
    let nodes = [node_with(
        "n1",
        N1,
        vec![plain("ns", "e", &[("app", "web")])],
    )];
    let mut state = CycleState::new();
    let pod = plain("ns", "p", &[("app", "web")]);
    InterPodAffinity::default().pre_filter(&mut state, &pod, &Snapshot::of_nodes(&nodes));
    assert!(state.read::<FilterState>(PRE_FILTER_KEY).is_none());
}

/// Normalised scores per node, or `None` when PreScore skipped — the same
/// whether PreScore scans the nodes or reads the cache's pod index.
fn scores(
    args: &InterPodAffinityArgs,
    pod: &PodInfo,
    nodes: &[NodeState],
    facts: &ClusterFacts,
) -> Option<Vec<i64>> {
    let scanned = scores_with(args, pod, nodes, facts);
    assert_eq!(
        scores_with(args, pod, nodes, &indexed(facts, nodes)),
        scanned,
        "indexed PreScore disagrees with the scan"
    );
    let (with_ids, nodes) = numbered(facts, nodes);
    assert_eq!(
        scores_with(args, pod, &nodes, &with_ids),
        scanned,
        "Score by label ids disagrees with the strings"
    );
    scanned
}

fn scores_with(
    args: &InterPodAffinityArgs,
    pod: &PodInfo,
    nodes: &[NodeState],
    facts: &ClusterFacts,
) -> Option<Vec<i64>> {
    let plugin = InterPodAffinity::new(args);
    let mut state = CycleState::new();
    let all: Vec<usize> = (0..nodes.len()).collect();
    if !plugin.pre_score(&mut state, pod, &Snapshot::new(nodes, facts), &all) {
        return None;
    }
    let mut s: Vec<i64> = nodes.iter().map(|n| plugin.score(&state, pod, n)).collect();
    plugin.normalize(&state, pod, &mut s);
    Some(s)
}

struct ScoreCase {
    name: &'static str,
    args: InterPodAffinityArgs,
    pod: PodInfo,
    nodes: Vec<NodeState>,
    want: Option<Vec<i64>>,
}

const CHINA1: &[(&str, &str)] = &[("region", "China"), ("hostname", "m1")];
const CHINA2: &[(&str, &str)] = &[("region", "China"), ("hostname", "m2")];
const INDIA: &[(&str, &str)] = &[("region", "India"), ("hostname", "m3")];

fn score_cases() -> Vec<ScoreCase> {
    let default = InterPodAffinityArgs::default;
    let s1 = || plain("ns", "s1", &[("security", "S1")]);
    let s2 = || plain("ns", "s2", &[("security", "S2")]);
    let prefers_s1 = |w: i64| preferred(&[(w, term(sel_in("security", &["S1"]), "region"))], &[]);
    let avoids_s1 = |w: i64| preferred(&[], &[(w, term(sel_in("security", &["S1"]), "region"))]);
    vec![
        ScoreCase {
            name: "no terms anywhere: skipped",
            args: default(),
            pod: plain("ns", "p", &[("security", "S1")]),
            nodes: vec![
                node_with("m1", CHINA1, vec![s1()]),
                node_with("m3", INDIA, vec![]),
            ],
            want: None,
        },
        ScoreCase {
            name: "preferred affinity: the matching pod's whole region",
            args: default(),
            pod: mk("ns", "p", &[], prefers_s1(5)),
            nodes: vec![
                node_with("m1", CHINA1, vec![s1()]),
                node_with("m2", CHINA2, vec![]),
                node_with("m3", INDIA, vec![s2()]),
            ],
            want: Some(vec![100, 100, 0]),
        },
        ScoreCase {
            name: "preferred anti-affinity: away from the matching pod's region",
            args: default(),
            pod: mk("ns", "p", &[], avoids_s1(5)),
            nodes: vec![
                node_with("m1", CHINA1, vec![s1()]),
                node_with("m2", CHINA2, vec![]),
                node_with("m3", INDIA, vec![s2()]),
            ],
            want: Some(vec![0, 0, 100]),
        },
        ScoreCase {
            name: "weights add up per pair and normalise min-max",
            args: default(),
            pod: mk(
                "ns",
                "p",
                &[],
                preferred(
                    &[
                        (8, term(sel_in("security", &["S1"]), "region")),
                        (2, term(sel_in("security", &["S2"]), "hostname")),
                    ],
                    &[(5, term(sel_in("security", &["S2"]), "region"))],
                ),
            ),
            nodes: vec![
                // China: +8 (S1) -5 (S2 in region); m2 +2 (S2 on host)
                node_with("m1", CHINA1, vec![s1()]),
                node_with("m2", CHINA2, vec![s2()]),
                node_with("m3", INDIA, vec![]),
            ],
            // raw m1 3, m2 5, m3 0 → (x - 0) / 5
            want: Some(vec![60, 100, 0]),
        },
        ScoreCase {
            name: "a node without the topology key gets nothing",
            args: default(),
            pod: mk("ns", "p", &[], prefers_s1(5)),
            nodes: vec![
                node_with("m1", CHINA1, vec![s1()]),
                node_with("m4", &[("hostname", "m4")], vec![]),
            ],
            want: Some(vec![100, 0]),
        },
        ScoreCase {
            name: "symmetry: an existing pod's preferred affinity to the incoming pod",
            args: default(),
            pod: plain("ns", "p", &[("security", "S1")]),
            nodes: vec![
                node_with("m1", CHINA1, vec![]),
                node_with("m3", INDIA, vec![mk("ns", "e", &[], prefers_s1(5))]),
            ],
            want: Some(vec![0, 100]),
        },
        ScoreCase {
            name: "symmetry: an existing pod's preferred anti-affinity",
            args: default(),
            pod: plain("ns", "p", &[("security", "S1")]),
            nodes: vec![
                node_with("m1", CHINA1, vec![]),
                node_with("m3", INDIA, vec![mk("ns", "e", &[], avoids_s1(5))]),
            ],
            want: Some(vec![100, 0]),
        },
        ScoreCase {
            name: "ignorePreferredTermsOfExistingPods: existing pods' preferences skipped",
            args: InterPodAffinityArgs {
                ignore_preferred_terms_of_existing_pods: true,
                ..default()
            },
            pod: plain("ns", "p", &[("security", "S1")]),
            nodes: vec![
                node_with("m1", CHINA1, vec![]),
                node_with("m3", INDIA, vec![mk("ns", "e", &[], prefers_s1(5))]),
            ],
            want: None,
        },
        ScoreCase {
            name: "ignorePreferredTermsOfExistingPods keeps the incoming pod's own",
            args: InterPodAffinityArgs {
                ignore_preferred_terms_of_existing_pods: true,
                ..default()
            },
            pod: mk("ns", "p", &[("security", "S1")], prefers_s1(5)),
            nodes: vec![
                node_with("m1", CHINA1, vec![s1()]),
                node_with(
                    "m3",
                    INDIA,
                    vec![mk("ns", "e", &[("security", "S1")], avoids_s1(50))],
                ),
            ],
            // India's own S1 pod counts +5, its avoidance (existing) is ignored.
            want: Some(vec![0, 0]),
        },
        ScoreCase {
            name: "hardPodAffinityWeight: an existing pod's required affinity to the incoming pod",
            args: default(),
            pod: plain("ns", "p", &[("security", "S1")]),
            nodes: vec![
                node_with("m1", CHINA1, vec![]),
                node_with(
                    "m3",
                    INDIA,
                    vec![mk(
                        "ns",
                        "e",
                        &[],
                        required(&[term(sel_in("security", &["S1"]), "region")], &[]),
                    )],
                ),
            ],
            want: Some(vec![0, 100]),
        },
        ScoreCase {
            name: "hardPodAffinityWeight 0 ignores required affinity of existing pods",
            args: InterPodAffinityArgs {
                hard_pod_affinity_weight: 0,
                ..default()
            },
            pod: plain("ns", "p", &[("security", "S1")]),
            nodes: vec![
                node_with("m1", CHINA1, vec![]),
                node_with(
                    "m3",
                    INDIA,
                    vec![mk(
                        "ns",
                        "e",
                        &[],
                        required(&[term(sel_in("security", &["S1"]), "region")], &[]),
                    )],
                ),
            ],
            // Nothing entered a pair: skipped, as if every node scored 0.
            want: None,
        },
    ]
}

#[test]
fn score_cases_match_kube_scheduler() {
    let none = facts(&[]);
    for c in score_cases() {
        assert_eq!(
            scores(&c.args, &c.pod, &c.nodes, &none),
            c.want,
            "{}",
            c.name
        );
    }
}

#[test]
fn normalize_is_min_max() {
    let mut s = [-5, 0, 10];
    scoring::normalize(&mut s);
    assert_eq!(s, [0, 33, 100]);
    let mut s = [7, 7];
    scoring::normalize(&mut s);
    assert_eq!(s, [0, 0]);
    let mut s = [i64::MIN, i64::MAX];
    scoring::normalize(&mut s);
    assert_eq!(s, [0, 100]);
    scoring::normalize(&mut []);
}

#[test]
fn args_are_decoded_and_bounded() {
    assert_eq!(
        decode_args("a", Value::Null).unwrap(),
        InterPodAffinityArgs::default()
    );
    let a = decode_args(
        "a",
        json!({"hardPodAffinityWeight": 0, "ignorePreferredTermsOfExistingPods": true}),
    )
    .unwrap();
    assert_eq!(
        a,
        InterPodAffinityArgs {
            hard_pod_affinity_weight: 0,
            ignore_preferred_terms_of_existing_pods: true
        }
    );
    for bad in [-1i64, 101, 1 << 40] {
        let e = decode_args("a", json!({"hardPodAffinityWeight": bad})).unwrap_err();
        assert_eq!(e.path, "a.hardPodAffinityWeight");
        assert!(e.message.contains("not in valid range [0, 100]"), "{e}");
    }
    let e = decode_args("a", json!({"hardPodAffinity": 1})).unwrap_err();
    assert!(e.message.contains("unknown field"), "{e}");
}

mod index_agrees_with_the_scan {
    //! On random clusters, PreFilter and PreScore reach the same verdicts
    //! and scores from the cache's pod index as from scanning every node.

    use super::*;
    use proptest::prelude::*;

    /// One term: (kind 0..4, selector 0..3, topology key 0..2, weight).
    type T = (u8, u8, u8, i64);

    fn selector(s: u8, app: u8) -> Value {
        match s {
            0 => json!({"matchLabels": {"app": format!("a{app}")}}),
            1 => sel_in("app", &["a0", "a1"]),
            _ => json!({"matchExpressions": [{"key": "app", "operator": "Exists"}]}),
        }
    }

    pub(super) fn spec(terms: &[T], app: u8) -> Value {
        let mut lists: [Vec<Value>; 4] = Default::default();
        for (kind, s, key, weight) in terms {
            let t = term(
                selector(*s, app),
                ["zone", "hostname"][usize::from(key % 2)],
            );
            let kind = usize::from(kind % 4);
            lists[kind].push(if kind < 2 {
                t
            } else {
                json!({"weight": weight, "podAffinityTerm": t})
            });
        }
        let [ra, rn, pa, pn] = lists;
        json!({"affinity": {
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ra,
                "preferredDuringSchedulingIgnoredDuringExecution": pa},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": rn,
                "preferredDuringSchedulingIgnoredDuringExecution": pn}}})
    }

    pub(super) fn terms() -> impl Strategy<Value = Vec<T>> {
        proptest::collection::vec((0..4u8, 0..3u8, 0..2u8, 1..100i64), 0..3)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]
        #[test]
        fn verdicts_and_scores(
            zones in proptest::collection::vec(0..3u8, 1..6),
            pods in proptest::collection::vec((0..6usize, 0..3u8, terms()), 0..20),
            incoming in (0..3u8, terms()),
            hard in 0..3i32,
            ignore in any::<bool>(),
        ) {
            let mut nodes: Vec<NodeState> = zones
                .iter()
                .enumerate()
                .map(|(i, z)| {
                    let zone = format!("z{z}");
                    let host = format!("h{i}");
                    node_with(&host, &[("zone", zone.as_str()), ("hostname", host.as_str())], vec![])
                })
                .collect();
            for (at, app, t) in &pods {
                let n = at % nodes.len();
                let p = mk("ns", &unique("e"), &[("app", &format!("a{app}"))], spec(t, *app));
                nodes[n].add_pod(&std::sync::Arc::new(p));
            }
            let (app, t) = incoming;
            let pod = mk("ns", "incoming", &[("app", &format!("a{app}"))], spec(&t, app));
            let facts = facts(&[("ns", &[])]);
            let with_index = indexed(&facts, &nodes);
            let (with_ids, numbered_nodes) = numbered(&facts, &nodes);
            let by_scan = filter_with(&pod, &nodes, &facts);
            prop_assert_eq!(filter_with(&pod, &nodes, &with_index), by_scan.clone());
            prop_assert_eq!(filter_with(&pod, &numbered_nodes, &with_ids), by_scan);
            let args = InterPodAffinityArgs {
                hard_pod_affinity_weight: hard,
                ignore_preferred_terms_of_existing_pods: ignore,
            };
            let by_scan = scores_with(&args, &pod, &nodes, &facts);
            prop_assert_eq!(scores_with(&args, &pod, &nodes, &with_index), by_scan.clone());
            prop_assert_eq!(scores_with(&args, &pod, &numbered_nodes, &with_ids), by_scan);
        }
    }
}

mod label_ids_agree_with_the_strings {
    //! On clusters built through the cache (nodes arriving, relabelled and
    //! removed among pods with terms), Filter and Score reach the same
    //! verdicts and scores reading the cache's label ids as reading strings.

    use super::index_agrees_with_the_scan::{spec, terms};
    use super::*;
    use crate::cache::Cache;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        /// Node `h{n}` arrives or is relabelled into zone `z{zone}`.
        Node(u8, u8),
        RemoveNode(u8),
        /// A pod of app `a{app}` bound to `h{n}`.
        Pod(u8, u8, Vec<(u8, u8, u8, i64)>),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0..5u8, 0..4u8).prop_map(|(n, z)| Op::Node(n, z)),
            1 => (0..5u8).prop_map(Op::RemoveNode),
            4 => (0..5u8, 0..3u8, terms()).prop_map(|(n, app, t)| Op::Pod(n, app, t)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]
        #[test]
        fn verdicts_and_scores(
            ops in proptest::collection::vec(op(), 1..40),
            incoming in (0..3u8, terms()),
            slack in 0..2usize,
        ) {
            let mut c = Cache::new([std::sync::Arc::from("muster")]);
            c.facts_mut().label_ids = LabelIds::maintained_with_slack(slack);
            c.facts_mut().upsert_namespace("ns", Default::default());
            for op in ops {
                match op {
                    Op::Node(n, zone) => {
                        let host = format!("h{n}");
                        let mut b = node(&host, &[]).label("hostname", &host);
                        // Zone 3: no zone label at all.
                        if zone < 3 {
                            b = b.label("zone", &format!("z{zone}"));
                        }
                        c.upsert_node(b.build().info);
                    }
                    Op::RemoveNode(n) => {
                        c.remove_node(&format!("h{n}"));
                    }
                    Op::Pod(n, app, t) => {
                        let mut spec = spec(&t, app);
                        spec["nodeName"] = json!(format!("h{n}"));
                        let p = mk("ns", &unique("e"), &[("app", &format!("a{app}"))], spec);
                        c.upsert_pod(std::sync::Arc::new(p));
                    }
                }
            }
            let (app, t) = incoming;
            let pod = mk("ns", "incoming", &[("app", &format!("a{app}"))], spec(&t, app));
            let nodes = c.nodes();
            prop_assert!(nodes.iter().all(|n| c.facts().label_ids.numbered(&n.label_ids)));
            let mut strings = c.facts().clone();
            strings.label_ids = LabelIds::default();
            prop_assert_eq!(
                filter_with(&pod, nodes, c.facts()),
                filter_with(&pod, nodes, &strings)
            );
            let args = InterPodAffinityArgs::default();
            prop_assert_eq!(
                scores_with(&args, &pod, nodes, c.facts()),
                scores_with(&args, &pod, nodes, &strings)
            );
        }
    }
}
