//! Batched and unbatched runs of pods make the same placements: a property
//! over random clusters, pod runs, sampling and restrictions.

use std::sync::Arc;

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::framework::NodeRestriction;
use crate::model::TaintEffect;
use crate::plugins::test_util::{node, pod_named};

/// A random node: size, zone, taints, and some load already on it.
fn arb_node() -> impl Strategy<Value = (u8, u8, u8, u8, u8)> {
    (0u8..3, 0u8..3, 0u8..4, 0u8..4, 0u8..3)
}

fn build_node(i: usize, (size, zone, taint, load, image): (u8, u8, u8, u8, u8)) -> NodeState {
    let cpu = ["2", "4", "8"][usize::from(size)];
    let mem = ["4Gi", "8Gi", "16Gi"][usize::from(size)];
    let mut b = node(
        &format!("n{i:03}"),
        &[("cpu", cpu), ("memory", mem), ("pods", "20")],
    )
    .label("zone", ["a", "b", "c"][usize::from(zone)]);
    b = match taint {
        0 => b.taint("dedicated", "x", TaintEffect::NoSchedule),
        1 => b.taint("soft", "y", TaintEffect::PreferNoSchedule),
        _ => b,
    };
    for k in 0..load {
        b = b.with_pod(pod_named(
            &format!("load-{i}-{k}"),
            json!({"containers": [{"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]}),
        ));
    }
    let mut n = b.build();
    if image > 0 {
        let mut info = (*n.info).clone();
        info.images = vec![(Arc::from("docker.io/library/app:v1"), 300 << 20)];
        n.set_info(Arc::new(info));
    }
    n
}

/// One of a few pod shapes: runs of the same shape batch, the last is not
/// eligible (anti-affinity), and the others differ in what plugins read.
fn build_pod(i: usize, shape: u8) -> PodInfo {
    let spec = match shape {
        0 => json!({"containers": [{"image": "app:v1",
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}),
        1 => json!({"containers": [{"resources": {"requests": {"cpu": "700m", "memory": "3Gi"}}}],
            "tolerations": [{"key": "dedicated", "operator": "Exists"}],
            "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": {"matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["b"]}]}}]}}}),
        2 => json!({"containers": [{"resources": {"requests": {"cpu": "2"}}}],
            "nodeSelector": {"zone": "a"}}),
        _ => json!({"containers": [{"resources": {"requests": {"cpu": "1"}}}],
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "gang"}},
                 "topologyKey": "kubernetes.io/hostname"}]}}}),
    };
    let mut p = pod_named(&format!("m{i:03}"), spec);
    std::sync::Arc::make_mut(&mut p.labels).insert("app".into(), "gang".into());
    p
}

/// Places `pods` one after another, each assumed where it lands; the
/// outcome of each and the final rotation index.
fn run(
    framework: &Framework,
    mut nodes: Vec<NodeState>,
    pods: &[PodInfo],
    restriction: Option<&NodeRestriction>,
    mut batch: Option<Batch>,
) -> (Vec<Result<usize, String>>, usize) {
    let mut next_start = 0;
    let mut out = Vec::new();
    for p in pods {
        let snapshot = Snapshot::of_nodes(&nodes);
        let r = match batch.as_mut() {
            Some(b) => framework.schedule_batched(p, &snapshot, &mut next_start, restriction, b),
            None => framework.schedule_within(p, &snapshot, &mut next_start, restriction),
        };
        match r {
            Ok(placement) => {
                nodes[placement.node_index].add_pod(&Arc::new(p.clone()));
                out.push(Ok(placement.node_index));
            }
            Err(e) => out.push(Err(e.to_string())),
        }
    }
    (out, next_start)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn batched_runs_place_exactly_like_full_passes(
        node_specs in prop::collection::vec(arb_node(), 1..180),
        shapes in prop::collection::vec((0u8..4, 1usize..12), 1..6),
        percentage in prop::option::of(prop::sample::select(vec![1u32, 30, 100])),
        parallel in any::<bool>(),
        restrict in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let nodes: Vec<NodeState> = node_specs
            .into_iter()
            .enumerate()
            .map(|(i, s)| build_node(i, s))
            .collect();
        // Runs of like pods, the shape changing between runs.
        let mut pods = Vec::new();
        for (shape, len) in shapes {
            for _ in 0..len {
                pods.push(build_pod(pods.len(), shape));
            }
        }
        let mut framework = Framework::default().with_seed(seed);
        framework.percentage_of_nodes_to_score = percentage;
        if parallel {
            framework.parallel_min_nodes = 8;
        }
        let restriction = restrict.then(|| NodeRestriction {
            nodes: (0..nodes.len()).filter(|i| i % 3 != 1).collect(),
            reason: "node(s) outside the test's domain".into(),
        });
        let full = run(&framework.clone(), nodes.clone(), &pods, restriction.as_ref(), None);
        let batched = run(
            &framework.clone(),
            nodes,
            &pods,
            restriction.as_ref(),
            Some(Batch::new(&framework)),
        );
        prop_assert_eq!(full, batched);
    }
}
