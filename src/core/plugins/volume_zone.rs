//! `VolumeZone`: the zone and region labels of a pod's bound volumes must
//! match the node's, as kube-scheduler's plugin of that name decides.
//!
//! PreFilter collects the topology labels of the volumes the pod's claims are
//! bound to (unbound `WaitForFirstConsumer` claims are VolumeBinding's
//! business and skipped); Filter compares them with one node's labels. A node
//! with none of the topology labels passes, as upstream. A volume's label may
//! list several zones separated by `__`.

use crate::cache::NodeState;
use crate::framework::{
    CycleState, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult, Rejection, Snapshot,
};
use crate::model::PodInfo;
use crate::model::volumes::PodVolume;

use super::volume_binding::claim_not_found;

pub const NAME: &str = "VolumeZone";
pub const REASON_CONFLICT: &str = "node(s) had no available volume zone";

/// The topology labels compared, stable and legacy.
pub const TOPOLOGY_LABELS: [&str; 4] = [
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
];

#[derive(Debug, Default, Clone, Copy)]
pub struct VolumeZone;

impl Plugin for VolumeZone {
    fn name(&self) -> &'static str {
        NAME
    }
}

/// (label key, the values the volume allows) of the pod's bound volumes.
#[derive(Debug, Default)]
struct Topology(Vec<(&'static str, Vec<String>)>);

impl PreFilterPlugin for VolumeZone {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot<'_>,
    ) -> PreFilterResult {
        let facts = &snapshot.facts.volumes;
        let mut topology = Topology::default();
        for v in &pod.constraints.volumes {
            let PodVolume::Claim { claim: name, .. } = v else {
                continue;
            };
            let Some(claim) = facts.claim(&pod.key.namespace, name) else {
                return PreFilterResult::Reject(Rejection::unresolvable(claim_not_found(name)));
            };
            let Some(volume) = &claim.volume_name else {
                let wffc = claim
                    .storage_class
                    .as_deref()
                    .and_then(|c| facts.class(c))
                    .is_some_and(|c| c.wait_for_first_consumer);
                if wffc {
                    continue;
                }
                return PreFilterResult::Reject(Rejection::unresolvable(
                    "PersistentVolume had no name",
                ));
            };
            let Some(pv) = facts.volume(volume) else {
                return PreFilterResult::Reject(Rejection::unresolvable(format!(
                    "persistentvolume {volume:?} not found"
                )));
            };
            for key in TOPOLOGY_LABELS {
                if let Some(value) = pv.labels.get(key) {
                    let values = value.split("__").map(str::to_string).collect();
                    topology.0.push((key, values));
                }
            }
        }
        if !topology.0.is_empty() {
            state.write(NAME, topology);
        }
        PreFilterResult::AllNodes
    }
}

impl FilterPlugin for VolumeZone {
    fn filter(&self, state: &CycleState, _: &PodInfo, node: &NodeState) -> Result<(), Rejection> {
        let Some(topology) = state.read::<Topology>(NAME) else {
            return Ok(());
        };
        let labels = &node.info.labels;
        if !TOPOLOGY_LABELS.iter().any(|k| labels.contains_key(*k)) {
            return Ok(());
        }
        let fits = topology.0.iter().all(|(key, values)| {
            labels
                .get(*key)
                .is_some_and(|v| values.iter().any(|allowed| allowed == v))
        });
        if fits {
            Ok(())
        } else {
            Err(Rejection::unresolvable(REASON_CONFLICT))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::test_util::node;
    use crate::plugins::volume_binding::tests::{claim, class, facts, volume, with_claims};
    use serde_json::json;

    const ZONE: &str = "topology.kubernetes.io/zone";

    fn outcomes(labels: serde_json::Value) -> Vec<Result<(), Rejection>> {
        let f = facts(vec![
            volume("pv1", json!({}), labels),
            claim("data", json!({"volumeName": "pv1"}), "Bound"),
        ]);
        let nodes = vec![
            node("a", &[]).label(ZONE, "zone-a").build(),
            node("b", &[]).label(ZONE, "zone-b").build(),
            node("bare", &[]).build(),
        ];
        let p = with_claims(&["data"]);
        let mut state = CycleState::new();
        assert_eq!(
            VolumeZone.pre_filter(&mut state, &p, &Snapshot::new(&nodes, &f)),
            PreFilterResult::AllNodes
        );
        nodes
            .iter()
            .map(|n| VolumeZone.filter(&state, &p, n))
            .collect()
    }

    #[test]
    fn bound_volume_zones_must_match() {
        let out = outcomes(json!({ZONE: "zone-a"}));
        assert_eq!(out[0], Ok(()));
        assert_eq!(out[1], Err(Rejection::unresolvable(REASON_CONFLICT)));
        assert_eq!(out[2], Ok(()), "a node without topology labels passes");
        let multi = outcomes(json!({ZONE: "zone-a__zone-b"}));
        assert!(multi.iter().all(Result::is_ok));
        let unlabelled = outcomes(json!({}));
        assert!(unlabelled.iter().all(Result::is_ok));
    }

    #[test]
    fn unbound_claims_are_skipped_or_refused() {
        let nodes = vec![node("a", &[]).build()];
        let p = with_claims(&["data"]);
        let run = |f: &crate::cache::ClusterFacts| {
            VolumeZone.pre_filter(&mut CycleState::new(), &p, &Snapshot::new(&nodes, f))
        };
        let wffc = facts(vec![
            class("local", "p", true, json!([])),
            claim("data", json!({"storageClassName": "local"}), "Pending"),
        ]);
        assert_eq!(run(&wffc), PreFilterResult::AllNodes);
        let immediate = facts(vec![claim("data", json!({}), "Pending")]);
        assert!(matches!(run(&immediate), PreFilterResult::Reject(r) if r.unresolvable));
        assert!(
            matches!(run(&facts(vec![])), PreFilterResult::Reject(r) if r.reason.contains("not found"))
        );
    }
}
