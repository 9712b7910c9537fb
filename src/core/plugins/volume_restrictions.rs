//! `VolumeRestrictions`: a `ReadWriteOncePod` claim serves one pod in the
//! whole cluster, and in-tree disks (GCE PD, AWS EBS, iSCSI, RBD) cannot be
//! mounted by two pods of a node unless both mount them read-only, as
//! kube-scheduler's plugin of that name decides.
//!
//! PreFilter refuses the pod when a claim is missing or another pod (bound, or
//! reserved by this scheduler) already uses one of its `ReadWriteOncePod`
//! claims — plain Unschedulable, since evicting that pod would help. Filter
//! checks disk conflicts on one node.

use crate::cache::NodeState;
use crate::framework::{
    CycleState, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult, Rejection, Snapshot,
};
use crate::model::PodInfo;
use crate::model::volumes::{AccessModes, PodVolume};

use super::volume_binding::claim_not_found;

pub const NAME: &str = "VolumeRestrictions";
pub const REASON_DISK_CONFLICT: &str = "node(s) had no available disk";
pub const REASON_RWOP_CONFLICT: &str =
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode";

#[derive(Debug, Default, Clone, Copy)]
pub struct VolumeRestrictions;

impl Plugin for VolumeRestrictions {
    fn name(&self) -> &'static str {
        NAME
    }
}

/// Whether `other` (another pod) mounts the claim `name` of `namespace`.
fn uses_claim(other: &PodInfo, namespace: &str, name: &str) -> bool {
    &*other.key.namespace == namespace
        && other
            .constraints
            .volumes
            .iter()
            .any(|v| matches!(v, PodVolume::Claim { claim, .. } if &**claim == name))
}

impl PreFilterPlugin for VolumeRestrictions {
    fn pre_filter(
        &self,
        _state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot<'_>,
    ) -> PreFilterResult {
        let facts = &snapshot.facts.volumes;
        let mut rwop: Vec<&str> = Vec::new();
        for v in &pod.constraints.volumes {
            let PodVolume::Claim { claim: name, .. } = v else {
                continue;
            };
            let Some(claim) = facts.claim(&pod.key.namespace, name) else {
                return PreFilterResult::Reject(Rejection::unresolvable(claim_not_found(name)));
            };
            if claim.access_modes.contains(AccessModes::RWOP) {
                rwop.push(name);
            }
        }
        if rwop.is_empty() {
            return PreFilterResult::AllNodes;
        }
        let in_use = snapshot
            .nodes
            .iter()
            .flat_map(|n| n.pods.iter())
            .filter(|other| other.key != pod.key && !other.constraints.volumes.is_empty())
            .any(|other| {
                rwop.iter()
                    .any(|c| uses_claim(other, &pod.key.namespace, c))
            });
        if in_use {
            return PreFilterResult::Reject(Rejection::new(REASON_RWOP_CONFLICT));
        }
        PreFilterResult::AllNodes
    }
}

impl FilterPlugin for VolumeRestrictions {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeState) -> Result<(), Rejection> {
        let mut disks = pod.constraints.volumes.iter().filter_map(|v| match v {
            PodVolume::Disk(d) => Some(d),
            _ => None,
        });
        let conflict = disks.any(|want| {
            node.pods.iter().any(|other| {
                other.key != pod.key
                    && other
                        .constraints
                        .volumes
                        .iter()
                        .any(|v| matches!(v, PodVolume::Disk(d) if d.conflicts(want)))
            })
        });
        if conflict {
            return Err(Rejection::new(REASON_DISK_CONFLICT));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::test_util::{node, pod, pod_named};
    use crate::plugins::volume_binding::tests::{claim, facts, with_claims};
    use serde_json::json;

    fn pre_filter(
        p: &PodInfo,
        f: &crate::cache::ClusterFacts,
        nodes: &[NodeState],
    ) -> PreFilterResult {
        VolumeRestrictions.pre_filter(&mut CycleState::new(), p, &Snapshot::new(nodes, f))
    }

    #[test]
    fn read_write_once_pod_claims_serve_one_pod() {
        let f = facts(vec![
            claim(
                "solo",
                json!({"accessModes": ["ReadWriteOncePod"]}),
                "Bound",
            ),
            claim("shared", json!({"accessModes": ["ReadWriteOnce"]}), "Bound"),
        ]);
        let holder = pod_named(
            "holder",
            json!({"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "solo"}}]}),
        );
        let nodes = vec![
            node("n1", &[]).with_pod(holder).build(),
            node("n2", &[]).build(),
        ];
        assert_eq!(
            pre_filter(&with_claims(&["solo"]), &f, &nodes),
            PreFilterResult::Reject(Rejection::new(REASON_RWOP_CONFLICT))
        );
        assert_eq!(
            pre_filter(&with_claims(&["shared"]), &f, &nodes),
            PreFilterResult::AllNodes
        );
        // Nobody else uses it.
        let empty = vec![node("n1", &[]).build()];
        assert_eq!(
            pre_filter(&with_claims(&["solo"]), &f, &empty),
            PreFilterResult::AllNodes
        );
        assert_eq!(
            pre_filter(&with_claims(&["gone"]), &f, &empty),
            PreFilterResult::Reject(Rejection::unresolvable(
                "persistentvolumeclaim \"gone\" not found"
            ))
        );
    }

    #[test]
    fn disks_conflict_unless_both_are_read_only() {
        let s = CycleState::new();
        let pd = |name: &str, ro: bool| {
            pod_named(
                name,
                json!({"volumes": [{"name": "d", "gcePersistentDisk": {"pdName": "disk", "readOnly": ro}}]}),
            )
        };
        let n = node("n", &[]).with_pod(pd("holder", true)).build();
        assert_eq!(
            VolumeRestrictions.filter(&s, &pd("p", false), &n),
            Err(Rejection::new(REASON_DISK_CONFLICT))
        );
        assert_eq!(VolumeRestrictions.filter(&s, &pd("p", true), &n), Ok(()));
        assert_eq!(VolumeRestrictions.filter(&s, &pod(json!({})), &n), Ok(()));
    }
}
