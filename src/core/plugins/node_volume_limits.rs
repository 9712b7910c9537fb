//! `NodeVolumeLimits`: a node's CSINode says how many volumes of each CSI
//! driver it can attach (`spec.drivers[].allocatable.count`); the CSI volumes
//! of the pods on the node plus the new ones of the incoming pod must fit, as
//! kube-scheduler's plugin of that name decides.
//!
//! A volume is identified by (driver, handle): a claim bound to a CSI volume
//! counts as that volume's driver and handle, an unbound claim as its class's
//! provisioner with the claim as handle, an inline CSI volume as its driver
//! with the pod and volume as handle. A volume already attached to the node
//! (used by a pod there) is not counted twice. A node without a CSINode, or a
//! driver without a count, has no limit. In-tree volumes migrated to CSI are
//! not translated (see docs/plugins.md).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::cache::{NodeState, VolumeFacts};
use crate::framework::{
    CycleState, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult, Rejection, Snapshot,
};
use crate::model::PodInfo;
use crate::model::volumes::PodVolume;

pub const NAME: &str = "NodeVolumeLimits";
pub const REASON: &str = "node(s) exceed max volume count";

#[derive(Debug, Default, Clone, Copy)]
pub struct NodeVolumeLimits;

impl Plugin for NodeVolumeLimits {
    fn name(&self) -> &'static str {
        NAME
    }
}

/// One CSI volume: (driver, handle).
type CsiVolume = (Arc<str>, Arc<str>);

/// The incoming pod's CSI volumes and the facts to resolve other pods'
/// (shared with the cache, not copied).
struct State {
    wanted: HashSet<CsiVolume>,
    facts: Arc<VolumeFacts>,
}

/// The CSI volumes `pod` mounts, as far as `facts` resolve them (a missing
/// claim is VolumeBinding's and VolumeRestrictions' to refuse).
fn csi_volumes(pod: &PodInfo, facts: &VolumeFacts, out: &mut HashSet<CsiVolume>) {
    for v in &pod.constraints.volumes {
        match v {
            PodVolume::InlineCsi { driver, volume } => {
                let handle = Arc::from(format!("{}/{}", pod.uid, volume));
                out.insert((driver.clone(), handle));
            }
            PodVolume::Claim {
                claim: name,
                template_class,
                ..
            } => {
                let claim = facts.claim(&pod.key.namespace, name);
                let bound = claim
                    .and_then(|c| c.volume_name.as_deref())
                    .and_then(|pv| facts.volume(pv));
                if let Some(pv) = bound {
                    if let Some(csi) = &pv.csi {
                        out.insert(csi.clone());
                    }
                    continue;
                }
                let class = claim
                    .and_then(|c| c.storage_class.clone())
                    .or_else(|| template_class.clone());
                let provisioner = class
                    .as_deref()
                    .and_then(|c| facts.class(c))
                    .filter(|c| c.provisions())
                    .map(|c| c.provisioner.clone());
                if let Some(driver) = provisioner {
                    let handle = Arc::from(format!("{}/{}", pod.key.namespace, name));
                    out.insert((driver, handle));
                }
            }
            PodVolume::Disk(_) => {}
        }
    }
}

impl PreFilterPlugin for NodeVolumeLimits {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot<'_>,
    ) -> PreFilterResult {
        if pod
            .constraints
            .volumes
            .iter()
            .all(|v| matches!(v, PodVolume::Disk(_)))
        {
            return PreFilterResult::AllNodes;
        }
        let facts = &snapshot.facts.volumes;
        let mut wanted = HashSet::new();
        csi_volumes(pod, facts, &mut wanted);
        if !wanted.is_empty() {
            state.write(
                NAME,
                State {
                    wanted,
                    facts: Arc::clone(facts),
                },
            );
        }
        PreFilterResult::AllNodes
    }
}

impl FilterPlugin for NodeVolumeLimits {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeState) -> Result<(), Rejection> {
        let Some(st) = state.read::<State>(NAME) else {
            return Ok(());
        };
        let Some(csi_node) = st.facts.csi_node(&node.info.name) else {
            return Ok(());
        };
        let limited = |driver: &str| csi_node.limits.contains_key(driver);
        if !st.wanted.iter().any(|(d, _)| limited(d)) {
            return Ok(());
        }
        let mut attached = HashSet::new();
        for other in node
            .pods
            .iter()
            .filter(|o| o.key != pod.key && !o.constraints.volumes.is_empty())
        {
            csi_volumes(other, &st.facts, &mut attached);
        }
        // Only drivers the pod adds volumes of can be exceeded by it.
        let mut added: HashMap<&str, u64> = HashMap::new();
        for (driver, _) in st.wanted.difference(&attached).filter(|(d, _)| limited(d)) {
            let n = added.entry(driver).or_default();
            *n = n.saturating_add(1);
        }
        let exceeded = added.iter().any(|(driver, new)| {
            let already = attached.iter().filter(|(d, _)| &**d == *driver).count() as u64;
            csi_node
                .limits
                .get(*driver)
                .is_some_and(|max| already.saturating_add(*new) > u64::from(*max))
        });
        if exceeded {
            return Err(Rejection::new(REASON));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::VolumeChange;
    use crate::model::volumes::{CsiNode, CsiNodeWire};
    use crate::plugins::test_util::{node, pod_named};
    use crate::plugins::volume_binding::tests::{claim, class, facts, volume};
    use serde_json::json;

    fn csi_node(name: &str, count: i64) -> VolumeChange {
        let w: CsiNodeWire = serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"drivers": [{"name": "ebs", "allocatable": {"count": count}}]}}))
        .unwrap();
        VolumeChange::CsiNodeUpserted(Arc::new(CsiNode::from_wire(&w).unwrap()))
    }

    fn csi_pv(name: &str, handle: &str) -> VolumeChange {
        volume(
            name,
            json!({"csi": {"driver": "ebs", "volumeHandle": handle}}),
            json!({}),
        )
    }

    fn user(name: &str, claims: &[&str]) -> PodInfo {
        let vols: Vec<_> = claims
            .iter()
            .map(|c| json!({"name": c, "persistentVolumeClaim": {"claimName": c}}))
            .collect();
        pod_named(name, json!({"volumes": vols}))
    }

    fn check(p: &PodInfo, f: &crate::cache::ClusterFacts, n: &NodeState) -> Result<(), Rejection> {
        let mut s = CycleState::new();
        NodeVolumeLimits.pre_filter(&mut s, p, &Snapshot::new(std::slice::from_ref(n), f));
        NodeVolumeLimits.filter(&s, p, n)
    }

    fn cluster(limit: i64) -> crate::cache::ClusterFacts {
        facts(vec![
            csi_node("n", limit),
            class("dyn", "ebs", true, json!([])),
            csi_pv("pv1", "h1"),
            csi_pv("pv2", "h2"),
            claim("c1", json!({"volumeName": "pv1"}), "Bound"),
            claim("c2", json!({"volumeName": "pv2"}), "Bound"),
            claim("c3", json!({"storageClassName": "dyn"}), "Pending"),
        ])
    }

    #[test]
    fn volumes_beyond_the_drivers_count_are_refused() {
        let n = node("n", &[]).with_pod(user("old", &["c1"])).build();
        let incoming = user("p", &["c2", "c3"]);
        assert_eq!(
            check(&incoming, &cluster(2), &n),
            Err(Rejection::new(REASON))
        );
        assert_eq!(check(&incoming, &cluster(3), &n), Ok(()));
    }

    #[test]
    fn a_volume_already_attached_is_not_counted_twice() {
        let n = node("n", &[]).with_pod(user("old", &["c1"])).build();
        assert_eq!(check(&user("p", &["c1"]), &cluster(1), &n), Ok(()));
        assert_eq!(
            check(&user("p", &["c2"]), &cluster(1), &n),
            Err(Rejection::new(REASON))
        );
    }

    #[test]
    fn no_csinode_no_limit_and_pods_without_volumes_pass() {
        let n = node("other", &[]).with_pod(user("old", &["c1"])).build();
        assert_eq!(check(&user("p", &["c2", "c3"]), &cluster(0), &n), Ok(()));
        let n = node("n", &[]).build();
        assert_eq!(check(&pod_named("p", json!({})), &cluster(0), &n), Ok(()));
        let inline = pod_named(
            "p",
            json!({"volumes": [{"name": "v", "csi": {"driver": "ebs"}}]}),
        );
        assert_eq!(check(&inline, &cluster(0), &n), Err(Rejection::new(REASON)));
    }
}
