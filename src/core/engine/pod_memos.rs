//! The batch memo for pods placed one cycle each (kube-scheduler's
//! opportunistic batching, KEP-5598, made exact as for gang members).
//!
//! A run of like plain pods (a Deployment's or a Job's replicas) searches a
//! rotating window of nodes per pod: at 50,000 nodes each pod filters and
//! scores 2,500 of them, and twenty pods later the rotation is back where it
//! started, on nodes of which only the few that took a pod have changed.
//! A `Batch` per profile remembers each node's verdict and raw scores for
//! the pods' signature, stamped with the node's generation; the memos are
//! forgotten whenever the cache's cross-node generation moves (a node added,
//! removed, relabelled or with new images, the cluster facts touched, a pod
//! with inter-pod affinity terms placed or gone), since those change
//! answers on nodes whose own generation has not moved. The placements are
//! exactly those of an unmemoized pass (`Batch`'s eligibility rules).

use std::sync::Arc;

use super::gang_cycle::Batches;
use crate::framework::placement::{Batch, Framework};

/// One memo per profile (the gang cycle's kind of table), valid for one
/// cross-node generation.
#[derive(Default)]
pub(super) struct PodMemos {
    /// The cross-node generation the memos were filled under.
    generation: Option<u64>,
    by_profile: Batches,
}

impl PodMemos {
    /// The memo for `scheduler`'s pods while the cache's cross-node
    /// generation is `generation`; every memo is forgotten when it moved.
    pub(super) fn for_profile(
        &mut self,
        scheduler: &Arc<str>,
        framework: &Framework,
        generation: u64,
    ) -> &mut Batch {
        if self.generation != Some(generation) {
            self.by_profile.forget_all();
            self.generation = Some(generation);
        }
        self.by_profile.for_profile(scheduler, framework)
    }
}

#[cfg(any(test, feature = "testkit"))]
impl PodMemos {
    pub(super) fn forget_each_cycle(&mut self) {
        self.by_profile.forget_each_use();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::time::Instant;

    use proptest::prelude::*;

    use crate::driver::fixtures::{SCHEDULER, arc, node, pod};
    use crate::engine::{Action, ClusterEvent, Engine, EngineConfig, ProfileConfig};
    use crate::framework::placement::Framework;
    use crate::model::{LabelSelector, PodAffinityTerm, PodInfo, WeightedPodAffinityTerm};

    const ZONE: &str = "topology.kubernetes.io/zone";
    const HOST: &str = "kubernetes.io/hostname";

    #[derive(Debug, Clone)]
    enum Op {
        AddNode {
            zone: u8,
            image: Option<u8>,
        },
        Relabel {
            node: usize,
            zone: u8,
        },
        SetImage {
            node: usize,
            image: Option<u8>,
        },
        RemoveNode(usize),
        /// `count` like pods (one signature): what the memo serves.
        AddLike {
            count: u8,
            cpu: i64,
            image: u8,
        },
        /// A pod that keeps `app=web` pods out of its zone (or host).
        AddRepeller {
            by_zone: bool,
        },
        /// A pod that draws `app=web` pods to its zone (preferred): those
        /// of namespaces labelled `team=a` strongly, or those of its own
        /// namespace weakly.
        AddAttractor {
            team_only: bool,
        },
        /// Labels the pods' namespace `team=a`, or not.
        SetTeam(bool),
        DeletePod(usize),
        Settle,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0..3u8, prop::option::of(0..2u8)).prop_map(|(zone, image)| Op::AddNode { zone, image }),
            1 => (any::<usize>(), 0..3u8).prop_map(|(node, zone)| Op::Relabel { node, zone }),
            1 => (any::<usize>(), prop::option::of(0..2u8)).prop_map(|(node, image)| Op::SetImage { node, image }),
            1 => any::<usize>().prop_map(Op::RemoveNode),
            // Mostly one signature, so memos outlive the changes between runs.
            4 => (1..6u8, 0..2u8).prop_map(|(count, image)| Op::AddLike { count, cpu: 500, image }),
            1 => (1..3u8, 2..4i64, 0..2u8).prop_map(|(count, c, image)| Op::AddLike { count, cpu: c * 500, image }),
            1 => any::<bool>().prop_map(|by_zone| Op::AddRepeller { by_zone }),
            1 => any::<bool>().prop_map(|team_only| Op::AddAttractor { team_only }),
            1 => any::<bool>().prop_map(Op::SetTeam),
            2 => any::<usize>().prop_map(Op::DeletePod),
            3 => Just(Op::Settle),
        ]
    }

    /// A node's images: `img-<i>` of 300 MB, or none.
    fn images_of(image: Option<u8>) -> Vec<(Arc<str>, i64)> {
        image
            .map(|i| (Arc::from(format!("img-{i}:latest")), 300_000_000))
            .into_iter()
            .collect()
    }

    fn web_term(topology_key: &str) -> PodAffinityTerm {
        PodAffinityTerm {
            label_selector: LabelSelector::from_map(
                &[("app".to_string(), "web".to_string())].into(),
            ),
            namespaces: vec![Arc::from("default")],
            namespace_selector: LabelSelector::nothing(),
            topology_key: topology_key.into(),
            match_label_keys: Vec::new(),
            mismatch_label_keys: Vec::new(),
        }
    }

    /// One cluster fed to two engines, one memoizing across cycles and one
    /// forgetting every cycle, with what it needs to confirm their binds.
    struct Twin {
        engines: [Engine; 2],
        nodes: Vec<crate::model::NodeInfo>,
        pods: BTreeMap<String, PodInfo>,
        next: u32,
        now: Instant,
    }

    impl Twin {
        fn new() -> Self {
            let engine = || {
                Engine::new(EngineConfig::new(vec![ProfileConfig::new(
                    SCHEDULER,
                    Framework::default().with_seed(7),
                )]))
            };
            let mut unmemoized = engine();
            unmemoized.pod_memos.forget_each_cycle();
            Twin {
                engines: [engine(), unmemoized],
                nodes: Vec::new(),
                pods: BTreeMap::new(),
                next: 0,
                now: Instant::now(),
            }
        }

        fn send(&mut self, event: ClusterEvent) {
            for e in &mut self.engines {
                e.on_event(event.clone(), self.now);
            }
        }

        fn put_node(&mut self, n: crate::model::NodeInfo) {
            self.send(ClusterEvent::NodeUpserted(arc(n)));
        }

        fn put_pod(&mut self, p: PodInfo) {
            self.pods.insert(p.key.name.to_string(), p.clone());
            self.send(ClusterEvent::PodUpserted(arc(p)));
        }

        fn name(&mut self, prefix: &str) -> String {
            self.next += 1;
            format!("{prefix}{}", self.next)
        }

        fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
            match op {
                Op::AddNode { zone, image } => {
                    let name = self.name("n");
                    let mut n = node(&name, 4000, 16);
                    n.labels.insert(ZONE.into(), format!("z{zone}"));
                    n.labels.insert(HOST.into(), name.clone());
                    n.images = images_of(*image);
                    self.nodes.push(n.clone());
                    self.put_node(n);
                }
                Op::Relabel { node, zone } => {
                    if !self.nodes.is_empty() {
                        let i = node % self.nodes.len();
                        self.nodes[i].labels.insert(ZONE.into(), format!("z{zone}"));
                        let n = self.nodes[i].clone();
                        self.put_node(n);
                    }
                }
                Op::SetImage { node, image } => {
                    if !self.nodes.is_empty() {
                        let i = node % self.nodes.len();
                        self.nodes[i].images = images_of(*image);
                        let n = self.nodes[i].clone();
                        self.put_node(n);
                    }
                }
                Op::RemoveNode(i) => {
                    if !self.nodes.is_empty() {
                        let n = self.nodes.swap_remove(i % self.nodes.len());
                        self.send(ClusterEvent::NodeDeleted(n.name.clone()));
                    }
                }
                Op::AddLike { count, cpu, image } => {
                    for _ in 0..*count {
                        let name = self.name("web-");
                        let mut p = pod(&name, *cpu, 1);
                        p.labels = Arc::new([("app".to_string(), "web".to_string())].into());
                        p.images = Arc::from([Arc::from(format!("img-{image}:latest"))]);
                        self.put_pod(p);
                    }
                }
                Op::AddRepeller { by_zone } => {
                    let name = self.name("db-");
                    let mut p = pod(&name, 500, 1);
                    p.labels = Arc::new([("app".to_string(), "db".to_string())].into());
                    Arc::make_mut(&mut p.constraints)
                        .pod_affinity
                        .required_anti_affinity
                        .push(web_term(if *by_zone { ZONE } else { HOST }));
                    self.put_pod(p);
                }
                Op::AddAttractor { team_only } => {
                    let name = self.name("cache-");
                    let mut p = pod(&name, 500, 1);
                    let mut term = web_term(ZONE);
                    let weight = match team_only {
                        true => {
                            term.namespaces = Vec::new();
                            term.namespace_selector = LabelSelector::from_map(
                                &[("team".to_string(), "a".to_string())].into(),
                            );
                            100
                        }
                        false => 10,
                    };
                    Arc::make_mut(&mut p.constraints)
                        .pod_affinity
                        .preferred_affinity
                        .push(WeightedPodAffinityTerm { weight, term });
                    self.put_pod(p);
                }
                Op::SetTeam(a) => {
                    let labels: BTreeMap<String, String> = match a {
                        true => [("team".to_string(), "a".to_string())].into(),
                        false => BTreeMap::new(),
                    };
                    self.send(ClusterEvent::NamespaceUpserted {
                        name: Arc::from("default"),
                        labels,
                    });
                }
                Op::DeletePod(i) => {
                    if !self.pods.is_empty() {
                        let name = self.pods.keys().nth(i % self.pods.len()).cloned();
                        if let Some(p) = name.and_then(|n| self.pods.remove(&n)) {
                            self.send(ClusterEvent::PodDeleted(p.key.clone()));
                        }
                    }
                }
                Op::Settle => self.settle()?,
            }
            Ok(())
        }

        /// Schedules until idle in both engines, confirming every binding,
        /// and requires the same bindings of both.
        fn settle(&mut self) -> Result<(), TestCaseError> {
            loop {
                let mut made: Vec<Vec<(String, Arc<str>)>> = Vec::new();
                for e in &mut self.engines {
                    e.run_until_idle(self.now);
                    made.push(
                        e.drain_actions()
                            .into_iter()
                            .filter_map(|a| match a {
                                Action::Bind { pod, node, .. } => {
                                    Some((pod.name.to_string(), node))
                                }
                                _ => None,
                            })
                            .collect(),
                    );
                }
                prop_assert_eq!(
                    &made[0],
                    &made[1],
                    "memoized and unmemoized passes bind alike"
                );
                if made[0].is_empty() {
                    return Ok(());
                }
                for (name, node) in &made[0] {
                    let Some(p) = self.pods.get(name).cloned() else {
                        continue;
                    };
                    self.send(ClusterEvent::BindFinished {
                        pod: p.key.clone(),
                        uid: p.uid.clone(),
                        node: node.clone(),
                        result: Ok(()),
                    });
                    let mut bound = p;
                    bound.node_name = Some(node.clone());
                    self.put_pod(bound);
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Memos kept across cycles change no placement, whatever changes
        /// between the cycles (I2: placement is kube-scheduler's).
        #[test]
        fn memos_across_cycles_place_exactly_like_fresh_passes(
            ops in prop::collection::vec(op(), 1..50),
        ) {
            let mut twin = Twin::new();
            for op in &ops {
                twin.apply(op)?;
            }
            twin.settle()?;
        }
    }

    #[test]
    fn the_memo_is_forgotten_when_the_cluster_outside_a_node_changes() {
        let mut twin = Twin::new();
        for op in [
            Op::AddNode {
                zone: 0,
                image: None,
            },
            Op::AddNode {
                zone: 1,
                image: None,
            },
            Op::AddLike {
                count: 2,
                cpu: 500,
                image: 0,
            },
            Op::Settle,
        ] {
            twin.apply(&op).unwrap();
        }
        let e = &twin.engines[0];
        let before = e.cache.cross_node_generation();
        // A pod without terms moves only its node's generation.
        twin.apply(&Op::AddLike {
            count: 1,
            cpu: 500,
            image: 0,
        })
        .unwrap();
        twin.apply(&Op::Settle).unwrap();
        assert_eq!(twin.engines[0].cache.cross_node_generation(), before);
        // One with terms reaches every node of its domain (its own node
        // here: the only one without a web pod).
        twin.apply(&Op::AddNode {
            zone: 2,
            image: None,
        })
        .unwrap();
        let before = twin.engines[0].cache.cross_node_generation();
        twin.apply(&Op::AddRepeller { by_zone: false }).unwrap();
        twin.apply(&Op::Settle).unwrap();
        let after_repeller = twin.engines[0].cache.cross_node_generation();
        assert!(after_repeller > before);
        assert_eq!(
            twin.engines[0].cache.nodes()[2].pods.len(),
            1,
            "the repeller is placed"
        );
        for op in [
            Op::SetImage {
                node: 0,
                image: Some(1),
            },
            Op::SetTeam(true),
            Op::Relabel { node: 0, zone: 2 },
            Op::AddNode {
                zone: 0,
                image: None,
            },
            Op::RemoveNode(0),
        ] {
            let was = twin.engines[0].cache.cross_node_generation();
            twin.apply(&op).unwrap();
            assert!(
                twin.engines[0].cache.cross_node_generation() > was,
                "{op:?}"
            );
        }
    }

    /// Runs `ops` on a twin (both engines must bind alike at every settle)
    /// and returns the memoizing engine's bindings by pod.
    fn run(ops: &[Op]) -> BTreeMap<String, String> {
        let mut twin = Twin::new();
        for op in ops {
            twin.apply(op).unwrap();
        }
        twin.settle().unwrap();
        twin.engines[0]
            .cache
            .nodes()
            .iter()
            .flat_map(|n| {
                n.pods
                    .iter()
                    .map(move |p| (p.key.name.to_string(), n.info.name.to_string()))
            })
            .collect()
    }

    /// A node in zone `zone`, without images.
    fn node_in(zone: u8) -> Op {
        Op::AddNode { zone, image: None }
    }

    /// One web pod of the common signature.
    fn one_web() -> Op {
        Op::AddLike {
            count: 1,
            cpu: 500,
            image: 0,
        }
    }

    /// A repeller's node moved into the zone of a node the memo passed: the
    /// next like pod may not go there.
    #[test]
    fn a_relabelled_node_moves_its_pods_terms_to_other_nodes() {
        let placed = run(&[
            node_in(0),
            Op::AddRepeller { by_zone: true },
            Op::Settle,
            node_in(1),
            node_in(1),
            one_web(),
            Op::Settle,
            // The repeller's node (the first) joins zone 1.
            Op::Relabel { node: 0, zone: 1 },
            one_web(),
        ]);
        assert_eq!(
            placed.len(),
            2,
            "the second web pod stays pending: {placed:?}"
        );
    }

    /// A namespace labelled to match an existing pod's preferred term
    /// changes the scores of every node in its zone.
    #[test]
    fn namespace_labels_move_the_scores_of_every_node() {
        // Zone 1 draws web pods weakly, zone 0 (n1) not at all until the
        // namespace is labelled, then strongly: scoring reads other pods'
        // terms throughout, so the memo's scorer set stays the same.
        let placed = run(&[
            node_in(0),
            Op::AddAttractor { team_only: true },
            Op::Settle,
            node_in(1),
            node_in(1),
            Op::AddAttractor { team_only: false },
            Op::Settle,
            one_web(),
            Op::Settle,
            Op::SetTeam(true),
            one_web(),
        ]);
        assert_ne!(
            placed.get("web-6").map(String::as_str),
            Some("n1"),
            "{placed:?}"
        );
        assert_eq!(
            placed.get("web-7").map(String::as_str),
            Some("n1"),
            "{placed:?}"
        );
    }
}
