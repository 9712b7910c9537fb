//! `ImageLocality` (Score): favours nodes that already have the pod's
//! container images, so the pod starts without pulling them. Each image the
//! node has counts its size scaled by the share of nodes that have it (an
//! image everywhere gives no node an edge, and one node that pulled a big
//! image first does not draw every pod), summed over init containers and
//! containers, then mapped linearly from [23 MiB, 1000 MiB × containers]
//! onto 0–100, as kube-scheduler does.

use crate::cache::NodeState;
use crate::framework::{CycleState, MAX_NODE_SCORE, Plugin, ScorePlugin, Snapshot};
use crate::model::PodInfo;

pub const NAME: &str = "ImageLocality";

const MIB: i64 = 1024 * 1024;
/// Below this, image locality is not worth a score.
const MIN_THRESHOLD: i64 = 23 * MIB;
/// Per container: a larger image scores no higher.
const MAX_CONTAINER_THRESHOLD: i64 = 1000 * MIB;

/// What PreScore records: how many nodes have each of the pod's images (in
/// `pod.images` order), and the node count that is a share of.
struct Prepared {
    nodes_with: Vec<u32>,
    total_nodes: usize,
}

#[derive(Debug, Default, Clone, Copy)]
pub struct ImageLocality;

impl Plugin for ImageLocality {
    fn name(&self) -> &'static str {
        NAME
    }
}

impl ScorePlugin for ImageLocality {
    /// Nothing to score when the pod names no image or no node reports one
    /// (every node would score 0).
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot<'_>,
        _: &[usize],
    ) -> bool {
        if pod.images.is_empty() || snapshot.facts.images.is_empty() {
            return false;
        }
        let nodes_with = pod
            .images
            .iter()
            .map(|i| snapshot.facts.images.nodes_with(i))
            .collect();
        state.write(
            NAME,
            Prepared {
                nodes_with,
                total_nodes: snapshot.nodes.len(),
            },
        );
        true
    }

    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeState) -> i64 {
        let Some(prepared) = state.read::<Prepared>(NAME) else {
            return 0;
        };
        let sum = pod
            .images
            .iter()
            .zip(&prepared.nodes_with)
            .filter_map(|(image, nodes_with)| {
                let size = node.info.image_size(image)?;
                Some(scaled(size, *nodes_with, prepared.total_nodes))
            })
            .fold(0i64, i64::saturating_add);
        priority(sum, pod.images.len())
    }
}

/// An image's size scaled by the share of nodes that have it.
fn scaled(size: i64, nodes_with: u32, total_nodes: usize) -> i64 {
    let total = i128::try_from(total_nodes.max(1)).unwrap_or(i128::MAX);
    let scaled = i128::from(size.max(0)) * i128::from(nodes_with) / total;
    i64::try_from(scaled).unwrap_or(i64::MAX)
}

/// The summed image score mapped onto 0–100 between the thresholds.
fn priority(sum: i64, containers: usize) -> i64 {
    let containers = i64::try_from(containers.max(1)).unwrap_or(i64::MAX);
    let max = MAX_CONTAINER_THRESHOLD.saturating_mul(containers);
    let clamped = sum.clamp(MIN_THRESHOLD, max);
    let span = i128::from(max - MIN_THRESHOLD).max(1);
    let score = i128::from(MAX_NODE_SCORE) * i128::from(clamped - MIN_THRESHOLD) / span;
    i64::try_from(score).unwrap_or(MAX_NODE_SCORE)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::cache::ClusterFacts;
    use crate::plugins::test_util::{node, pod};
    use serde_json::json;

    fn with_images(name: &str, images: &[(&str, i64)]) -> NodeState {
        let mut n = node(name, &[("cpu", "4")]).build();
        let mut info = (*n.info).clone();
        info.images = images.iter().map(|(i, s)| (Arc::from(*i), *s)).collect();
        info.images.sort();
        n.set_info(Arc::new(info));
        n
    }

    fn scores(p: &PodInfo, nodes: &[NodeState]) -> Option<Vec<i64>> {
        let mut facts = ClusterFacts::default();
        for n in nodes {
            facts.images.add_node(&n.info);
        }
        let snapshot = Snapshot::new(nodes, &facts);
        let mut state = CycleState::new();
        if !ImageLocality.pre_score(&mut state, p, &snapshot, &[]) {
            return None;
        }
        Some(
            nodes
                .iter()
                .map(|n| ImageLocality.score(&state, p, n))
                .collect(),
        )
    }

    #[test]
    fn bigger_and_more_local_images_score_higher() {
        let p = pod(json!({"containers": [
            {"name": "a", "image": "gcr.io/40"},
            {"name": "b", "image": "gcr.io/300"}
        ]}));
        let nodes = [
            with_images(
                "n1",
                &[
                    ("gcr.io/40:latest", 40 * MIB),
                    ("gcr.io/300:latest", 300 * MIB),
                ],
            ),
            with_images("n2", &[("gcr.io/40:latest", 40 * MIB)]),
            with_images("n3", &[("gcr.io/other:latest", 2000 * MIB)]),
        ];
        let s = scores(&p, &nodes).expect("scored");
        // n1: 40·2/3 + 300·1/3 = 126.67 MiB of 2000 MiB (two containers):
        // 100 × (126.67 − 23) / (2000 − 23) = 5.
        assert_eq!(s, vec![5, 0, 0]);
    }

    #[test]
    fn one_large_image_on_every_node_scores_the_same_everywhere() {
        let p = pod(json!({"containers": [{"name": "a", "image": "big:v1"}]}));
        let nodes = [
            with_images("n1", &[("big:v1", 2000 * MIB)]),
            with_images("n2", &[("big:v1", 2000 * MIB)]),
        ];
        assert_eq!(scores(&p, &nodes), Some(vec![100, 100]));
    }

    #[test]
    fn skipped_without_images() {
        let p = pod(json!({"containers": [{"name": "a"}]}));
        let nodes = [with_images("n1", &[("x:latest", MIB)])];
        assert_eq!(scores(&p, &nodes), None);
        let p = pod(json!({"containers": [{"name": "a", "image": "x"}]}));
        assert_eq!(scores(&p, &[node("n", &[]).build()]), None);
    }

    #[test]
    fn arithmetic_is_bounded() {
        assert_eq!(priority(i64::MAX, usize::MAX), MAX_NODE_SCORE);
        assert_eq!(priority(0, 0), 0);
        assert_eq!(priority(i64::MAX, 1), MAX_NODE_SCORE);
        assert_eq!(scaled(i64::MAX, u32::MAX, 1), i64::MAX);
        assert_eq!(scaled(-5, 3, 0), 0);
    }
}
