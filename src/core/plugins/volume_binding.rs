//! `VolumeBinding`: a pod's PersistentVolumeClaims must exist and be bound, or
//! bindable from the node (`WaitForFirstConsumer`), as kube-scheduler's plugin
//! of that name decides.
//!
//! PreFilter resolves the pod's claims once: missing or deleted claims, and
//! unbound claims of `Immediate` classes, refuse the pod; bound claims
//! contribute their volume's node affinity; unbound `WaitForFirstConsumer`
//! claims their candidate static volumes (smallest first) and class. Filter
//! checks one node against that. The PreBind plan (`plan_pre_bind`), which
//! the engine runs after Permit, picks for each unbound claim the static
//! volume to bind or asks the provisioner for one on the chosen node; the
//! engine then waits, up to `bindTimeoutSeconds`, for the claims to be Bound.
//!
//! Score (kube-scheduler's `StorageCapacityScoring`, behind a feature gate)
//! is not implemented; a `shape` argument is refused rather than ignored.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use crate::cache::{NodeState, VolumeFacts};
use crate::framework::{
    ConfigError, CycleState, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult, Rejection,
    Snapshot, args,
};
use crate::model::PodInfo;
use crate::model::volumes::{Claim, ClaimWrite, PersistentVolume, PodVolume, StorageClass};

pub const NAME: &str = "VolumeBinding";

pub const REASON_NODE_CONFLICT: &str = "node(s) had volume node affinity conflict";
pub const REASON_BIND_CONFLICT: &str = "node(s) didn't find available persistent volumes to bind";
pub const REASON_PV_NOT_EXIST: &str =
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";
pub const REASON_UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";

/// kube-scheduler's `DefaultBindTimeoutSeconds`.
pub const DEFAULT_BIND_TIMEOUT: Duration = Duration::from_secs(600);

/// `persistentvolumeclaim "x" not found`, the API server's wording.
pub fn claim_not_found(name: &str) -> String {
    format!("persistentvolumeclaim {name:?} not found")
}

/// `VolumeBindingArgs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeBindingArgs {
    /// `bindTimeoutSeconds`: how long PreBind waits for the claims to bind.
    pub bind_timeout: Duration,
}

impl Default for VolumeBindingArgs {
    fn default() -> Self {
        VolumeBindingArgs {
            bind_timeout: DEFAULT_BIND_TIMEOUT,
        }
    }
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WireArgs {
    bind_timeout_seconds: Option<i64>,
    shape: Option<serde_json::Value>,
}

/// Decodes and validates `VolumeBindingArgs` at `path`.
pub fn decode_args(path: &str, value: serde_json::Value) -> Result<VolumeBindingArgs, ConfigError> {
    let raw: WireArgs = args::decode(path, value)?;
    if raw.shape.as_ref().is_some_and(|s| !s.is_null()) {
        return Err(ConfigError::at(
            format!("{path}.shape"),
            "storage capacity scoring (VolumeBinding Score) is not implemented by Muster",
        ));
    }
    let seconds = raw
        .bind_timeout_seconds
        .unwrap_or(DEFAULT_BIND_TIMEOUT.as_secs() as i64);
    if seconds < 0 {
        return Err(ConfigError::at(
            format!("{path}.bindTimeoutSeconds"),
            "invalid BindTimeoutSeconds, should not be a negative value",
        ));
    }
    // A day bounds the timer (the API server's own request timeouts are far shorter).
    if seconds > 86_400 {
        return Err(ConfigError::at(
            format!("{path}.bindTimeoutSeconds"),
            "must be at most 86400",
        ));
    }
    Ok(VolumeBindingArgs {
        bind_timeout: Duration::from_secs(seconds.unsigned_abs()),
    })
}

#[derive(Debug, Default, Clone, Copy)]
pub struct VolumeBinding;

impl Plugin for VolumeBinding {
    fn name(&self) -> &'static str {
        NAME
    }
}

/// An unbound `WaitForFirstConsumer` claim of the pod.
#[derive(Debug)]
struct Unbound {
    claim: Arc<Claim>,
    class: Arc<StorageClass>,
    /// Static volumes that could be bound to it, smallest first.
    candidates: Vec<Arc<PersistentVolume>>,
}

/// What PreFilter resolved of the pod's claims.
#[derive(Debug, Default)]
struct PodClaims {
    bound: Vec<Arc<PersistentVolume>>,
    /// A bound claim names a volume that does not exist.
    missing_volume: bool,
    unbound: Vec<Unbound>,
}

/// Resolves the pod's claims against `facts`; a refusal is the pod's.
fn resolve(pod: &PodInfo, facts: &VolumeFacts) -> Result<PodClaims, Rejection> {
    let mut out = PodClaims::default();
    let mut immediate = false;
    for v in &pod.constraints.volumes {
        let PodVolume::Claim { claim: name, .. } = v else {
            continue;
        };
        let Some(claim) = facts.claim(&pod.key.namespace, name) else {
            return Err(Rejection::unresolvable(claim_not_found(name)));
        };
        if claim.deleting {
            return Err(Rejection::unresolvable(format!(
                "persistentvolumeclaim {name:?} is being deleted"
            )));
        }
        if let Some(volume) = &claim.volume_name {
            // Only a fully bound claim (volumeName and phase Bound) counts as
            // bound; one the PV controller is still binding waits, as an
            // unbound immediate claim does upstream.
            if !claim.bound {
                immediate = true;
                continue;
            }
            match facts.volume(volume) {
                Some(pv) => out.bound.push(pv.clone()),
                None => out.missing_volume = true,
            }
            continue;
        }
        let class = claim
            .storage_class
            .as_deref()
            .filter(|c| !c.is_empty())
            .and_then(|c| facts.class(c));
        let Some(class) = class.filter(|c| c.wait_for_first_consumer) else {
            if let Some(c) = claim.storage_class.as_deref().filter(|c| !c.is_empty())
                && facts.class(c).is_none()
            {
                return Err(Rejection::unresolvable(format!(
                    "storageclass.storage.k8s.io {c:?} not found"
                )));
            }
            immediate = true;
            continue;
        };
        let mut candidates: Vec<Arc<PersistentVolume>> = facts
            .volumes()
            .filter(|pv| pv.can_bind(claim))
            .cloned()
            .collect();
        candidates.sort_by(|a, b| {
            a.capacity_bytes
                .cmp(&b.capacity_bytes)
                .then_with(|| a.name.cmp(&b.name))
        });
        out.unbound.push(Unbound {
            claim: claim.clone(),
            class: class.clone(),
            candidates,
        });
    }
    if immediate {
        return Err(Rejection::unresolvable(REASON_UNBOUND_IMMEDIATE));
    }
    Ok(out)
}

/// Each unbound claim with the static volume it gets (`None`: provisioned).
type Choice<'a> = Vec<(&'a Unbound, Option<Arc<str>>)>;

/// For each unbound claim: the static volume it would get on this node
/// (`Some`), or dynamic provisioning (`None`); `Err` when neither works.
/// Volumes in `taken` (chosen for other pods, not yet observed bound) are
/// skipped, and so are those picked for an earlier claim of this pod.
fn choose<'a>(
    unbound: &'a [Unbound],
    node: &str,
    labels: &BTreeMap<String, String>,
    taken: &HashSet<Arc<str>>,
) -> Result<Choice<'a>, ()> {
    let mut picked: Choice<'a> = Vec::with_capacity(unbound.len());
    for u in unbound {
        let static_pv = u.candidates.iter().find(|pv| {
            pv.reachable_from(node, labels)
                && !taken.contains(&pv.name)
                && !picked.iter().any(|(_, p)| p.as_deref() == Some(&*pv.name))
        });
        if let Some(pv) = static_pv {
            picked.push((u, Some(pv.name.clone())));
        } else if u.class.provisions() && u.class.allows(node, labels) {
            picked.push((u, None));
        } else {
            return Err(());
        }
    }
    Ok(picked)
}

impl PreFilterPlugin for VolumeBinding {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot<'_>,
    ) -> PreFilterResult {
        if !pod
            .constraints
            .volumes
            .iter()
            .any(|v| matches!(v, PodVolume::Claim { .. }))
        {
            return PreFilterResult::AllNodes;
        }
        match resolve(pod, &snapshot.facts.volumes) {
            Ok(claims) => {
                state.write(NAME, claims);
                PreFilterResult::AllNodes
            }
            Err(r) => PreFilterResult::Reject(r),
        }
    }
}

impl FilterPlugin for VolumeBinding {
    fn filter(&self, state: &CycleState, _: &PodInfo, node: &NodeState) -> Result<(), Rejection> {
        let Some(claims) = state.read::<PodClaims>(NAME) else {
            return Ok(());
        };
        if claims.missing_volume {
            return Err(Rejection::unresolvable(REASON_PV_NOT_EXIST));
        }
        let (name, labels) = (&*node.info.name, &node.info.labels);
        let mut reasons: Vec<Cow<'static, str>> = Vec::new();
        if claims
            .bound
            .iter()
            .any(|pv| !pv.reachable_from(name, labels))
        {
            reasons.push(REASON_NODE_CONFLICT.into());
        }
        if !claims.unbound.is_empty()
            && choose(&claims.unbound, name, labels, &HashSet::new()).is_err()
        {
            reasons.push(REASON_BIND_CONFLICT.into());
        }
        let mut reasons = reasons.into_iter();
        match reasons.next() {
            None => Ok(()),
            Some(first) => Err(reasons.fold(Rejection::unresolvable(first), Rejection::and)),
        }
    }
}

/// What PreBind does for a pod placed on a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreBindPlan {
    /// The writes to make (empty when every claim is bound already).
    pub writes: Vec<ClaimWrite>,
    /// The pod's claims not yet Bound: the pod binds once they all are.
    pub wait_for: Vec<crate::model::volumes::ClaimKey>,
}

/// The PreBind plan for `pod` on `node`: `Ok(None)` when the pod has no
/// claims; `Err` with kube-scheduler's reason when the cluster changed since
/// Filter so the node no longer works. `taken` are volumes chosen for other
/// pods whose binding is not yet observed.
pub fn plan_pre_bind(
    pod: &PodInfo,
    node: &NodeState,
    facts: &VolumeFacts,
    taken: &HashSet<Arc<str>>,
) -> Result<Option<PreBindPlan>, String> {
    if !pod
        .constraints
        .volumes
        .iter()
        .any(|v| matches!(v, PodVolume::Claim { .. }))
    {
        return Ok(None);
    }
    let claims = resolve(pod, facts).map_err(|r| r.reason.into_owned())?;
    let (name, labels) = (&*node.info.name, &node.info.labels);
    if claims.missing_volume {
        return Err(REASON_PV_NOT_EXIST.into());
    }
    if claims
        .bound
        .iter()
        .any(|pv| !pv.reachable_from(name, labels))
    {
        return Err(REASON_NODE_CONFLICT.into());
    }
    let chosen = choose(&claims.unbound, name, labels, taken)
        .map_err(|()| REASON_BIND_CONFLICT.to_string())?;
    let writes = chosen
        .into_iter()
        .map(|(u, pv)| match pv {
            Some(volume) => ClaimWrite::BindVolume {
                claim: u.claim.key.clone(),
                claim_uid: u.claim.uid.clone(),
                volume,
            },
            None => ClaimWrite::SelectNode {
                claim: u.claim.key.clone(),
            },
        })
        .collect();
    let wait_for = pod
        .constraints
        .volumes
        .iter()
        .filter_map(|v| match v {
            PodVolume::Claim { claim, .. } => facts.claim(&pod.key.namespace, claim),
            _ => None,
        })
        .filter(|c| !c.bound)
        .map(|c| c.key.clone())
        .collect();
    Ok(Some(PreBindPlan { writes, wait_for }))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cache::{ClusterFacts, VolumeChange};
    use crate::model::volumes::{ClaimWire, PvWire, StorageClassWire};
    use crate::plugins::test_util::{node, pod};
    use serde_json::json;

    pub fn claim(name: &str, spec: serde_json::Value, phase: &str) -> VolumeChange {
        let w: ClaimWire = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
            "spec": spec, "status": {"phase": phase}}))
        .unwrap();
        VolumeChange::ClaimUpserted(Arc::new(Claim::from_wire(&w).unwrap()))
    }

    pub fn volume(name: &str, spec: serde_json::Value, labels: serde_json::Value) -> VolumeChange {
        let w: PvWire = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "spec": spec, "status": {"phase": "Available"}}))
        .unwrap();
        VolumeChange::VolumeUpserted(Arc::new(PersistentVolume::from_wire(&w).unwrap()))
    }

    pub fn class(
        name: &str,
        provisioner: &str,
        wffc: bool,
        topo: serde_json::Value,
    ) -> VolumeChange {
        let mode = if wffc {
            "WaitForFirstConsumer"
        } else {
            "Immediate"
        };
        let w: StorageClassWire = serde_json::from_value(json!({
            "metadata": {"name": name}, "provisioner": provisioner,
            "volumeBindingMode": mode, "allowedTopologies": topo}))
        .unwrap();
        VolumeChange::ClassUpserted(Arc::new(StorageClass::from_wire(&w).unwrap()))
    }

    pub fn facts(changes: Vec<VolumeChange>) -> ClusterFacts {
        let mut f = ClusterFacts::default();
        for c in changes {
            Arc::make_mut(&mut f.volumes).apply(c);
        }
        f
    }

    pub fn with_claims(names: &[&str]) -> PodInfo {
        let vols: Vec<_> = names
            .iter()
            .map(|n| json!({"name": n, "persistentVolumeClaim": {"claimName": n}}))
            .collect();
        pod(json!({"containers": [], "volumes": vols}))
    }

    fn affinity(host: &str) -> serde_json::Value {
        json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}]}]}})
    }

    fn run(pod: &PodInfo, facts: &ClusterFacts, nodes: &[NodeState]) -> Vec<Result<(), Rejection>> {
        let mut state = CycleState::new();
        match VolumeBinding.pre_filter(&mut state, pod, &Snapshot::new(nodes, facts)) {
            PreFilterResult::Reject(r) => vec![Err(r)],
            _ => nodes
                .iter()
                .map(|n| VolumeBinding.filter(&state, pod, n))
                .collect(),
        }
    }

    fn nodes() -> Vec<NodeState> {
        ["n1", "n2"]
            .iter()
            .map(|n| node(n, &[]).label("kubernetes.io/hostname", n).build())
            .collect()
    }

    fn wffc_claim(name: &str) -> VolumeChange {
        claim(
            name,
            json!({"accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                "resources": {"requests": {"storage": "1Gi"}}}),
            "Pending",
        )
    }

    fn pv_on(name: &str, host: &str, class: &str) -> VolumeChange {
        volume(
            name,
            json!({"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                "capacity": {"storage": "2Gi"}, "nodeAffinity": affinity(host)}),
            json!({}),
        )
    }

    #[test]
    fn a_pod_without_claims_is_skipped() {
        let p = pod(json!({"containers": []}));
        assert!(run(&p, &facts(vec![]), &nodes()).iter().all(Result::is_ok));
    }

    #[test]
    fn missing_deleted_and_immediate_unbound_claims_refuse_the_pod() {
        let p = with_claims(&["data"]);
        let err = run(&p, &facts(vec![]), &nodes()).remove(0).unwrap_err();
        assert_eq!(
            err,
            Rejection::unresolvable("persistentvolumeclaim \"data\" not found")
        );

        let immediate = facts(vec![
            class("fast", "csi.example.com", false, json!([])),
            claim("data", json!({"storageClassName": "fast"}), "Pending"),
        ]);
        let err = run(&p, &immediate, &nodes()).remove(0).unwrap_err();
        assert_eq!(err, Rejection::unresolvable(REASON_UNBOUND_IMMEDIATE));

        let no_class = facts(vec![claim(
            "data",
            json!({"storageClassName": "gone"}),
            "Pending",
        )]);
        let err = run(&p, &no_class, &nodes()).remove(0).unwrap_err();
        assert!(
            err.reason
                .contains("storageclass.storage.k8s.io \"gone\" not found")
        );
    }

    #[test]
    fn a_claim_still_being_bound_waits() {
        let p = with_claims(&["data"]);
        let f = facts(vec![
            pv_on("pv1", "n2", "local"),
            claim("data", json!({"volumeName": "pv1"}), "Pending"),
        ]);
        let err = run(&p, &f, &nodes()).remove(0).unwrap_err();
        assert_eq!(err, Rejection::unresolvable(REASON_UNBOUND_IMMEDIATE));
    }

    #[test]
    fn bound_volumes_pin_the_pod_to_their_nodes() {
        let p = with_claims(&["data"]);
        let f = facts(vec![
            pv_on("pv1", "n2", "local"),
            claim(
                "data",
                json!({"volumeName": "pv1", "storageClassName": "local"}),
                "Bound",
            ),
        ]);
        let out = run(&p, &f, &nodes());
        assert_eq!(out[0], Err(Rejection::unresolvable(REASON_NODE_CONFLICT)));
        assert_eq!(out[1], Ok(()));

        let dangling = facts(vec![claim("data", json!({"volumeName": "nope"}), "Bound")]);
        let out = run(&p, &dangling, &nodes());
        assert_eq!(out[0], Err(Rejection::unresolvable(REASON_PV_NOT_EXIST)));
    }

    #[test]
    fn wait_for_first_consumer_claims_need_a_volume_or_a_provisioner() {
        let p = with_claims(&["data"]);
        // A static class: only the node with a matching volume works.
        let f = facts(vec![
            class("local", "kubernetes.io/no-provisioner", true, json!([])),
            wffc_claim("data"),
            pv_on("pv1", "n1", "local"),
        ]);
        let out = run(&p, &f, &nodes());
        assert_eq!(out[0], Ok(()));
        assert_eq!(out[1], Err(Rejection::unresolvable(REASON_BIND_CONFLICT)));

        // A provisioner restricted by allowedTopologies.
        let f = facts(vec![
            class(
                "local",
                "csi.example.com",
                true,
                json!([{"matchLabelExpressions": [{"key": "kubernetes.io/hostname", "values": ["n2"]}]}]),
            ),
            wffc_claim("data"),
        ]);
        let out = run(&p, &f, &nodes());
        assert_eq!(out[0], Err(Rejection::unresolvable(REASON_BIND_CONFLICT)));
        assert_eq!(out[1], Ok(()));
    }

    #[test]
    fn two_claims_cannot_share_one_static_volume() {
        let p = with_claims(&["a", "b"]);
        let mut changes = vec![
            class("local", "kubernetes.io/no-provisioner", true, json!([])),
            wffc_claim("a"),
            wffc_claim("b"),
            pv_on("pv1", "n1", "local"),
        ];
        let out = run(&p, &facts(changes.clone()), &nodes());
        assert_eq!(out[0], Err(Rejection::unresolvable(REASON_BIND_CONFLICT)));
        changes.push(pv_on("pv2", "n1", "local"));
        let out = run(&p, &facts(changes), &nodes());
        assert_eq!(out[0], Ok(()));
    }

    #[test]
    fn conflicts_of_both_kinds_are_both_reported() {
        let p = with_claims(&["bound", "data"]);
        let f = facts(vec![
            class("local", "kubernetes.io/no-provisioner", true, json!([])),
            pv_on("pv1", "n2", "local"),
            claim("bound", json!({"volumeName": "pv1"}), "Bound"),
            wffc_claim("data"),
        ]);
        let err = run(&p, &f, &nodes()).remove(0).unwrap_err();
        let reasons: Vec<_> = err.reasons().map(|r| r.to_string()).collect();
        assert_eq!(reasons, [REASON_NODE_CONFLICT, REASON_BIND_CONFLICT]);
    }

    #[test]
    fn the_plan_binds_static_volumes_or_selects_the_node() {
        let p = with_claims(&["a", "b"]);
        let f = facts(vec![
            class("local", "kubernetes.io/no-provisioner", true, json!([])),
            class("dyn", "csi.example.com", true, json!([])),
            wffc_claim("a"),
            claim("b", json!({"storageClassName": "dyn"}), "Pending"),
            pv_on("pv1", "n1", "local"),
        ]);
        let n = &nodes()[0];
        let plan = plan_pre_bind(&p, n, &f.volumes, &HashSet::new())
            .unwrap()
            .unwrap();
        assert_eq!(
            plan.writes,
            [
                ClaimWrite::BindVolume {
                    claim: "ns/a".parse_key(),
                    claim_uid: Arc::from("uid-a"),
                    volume: Arc::from("pv1"),
                },
                ClaimWrite::SelectNode {
                    claim: "ns/b".parse_key()
                },
            ]
        );
        assert_eq!(plan.wait_for.len(), 2);
        // The volume went to another pod meanwhile.
        let taken = HashSet::from([Arc::from("pv1")]);
        assert_eq!(
            plan_pre_bind(&p, n, &f.volumes, &taken),
            Err(REASON_BIND_CONFLICT.to_string())
        );
        let none = pod(json!({"containers": []}));
        assert_eq!(
            plan_pre_bind(&none, n, &f.volumes, &HashSet::new()),
            Ok(None)
        );
    }

    trait ParseKey {
        fn parse_key(&self) -> crate::model::PodKey;
    }
    impl ParseKey for str {
        fn parse_key(&self) -> crate::model::PodKey {
            let (ns, name) = self.split_once('/').unwrap();
            crate::model::PodKey::new(ns, name)
        }
    }

    #[test]
    fn args_default_validate_and_refuse_scoring() {
        assert_eq!(
            decode_args("a", json!(null)).unwrap().bind_timeout,
            DEFAULT_BIND_TIMEOUT
        );
        assert_eq!(
            decode_args("a", json!({"bindTimeoutSeconds": 5}))
                .unwrap()
                .bind_timeout,
            Duration::from_secs(5)
        );
        let e = decode_args("a", json!({"bindTimeoutSeconds": -1})).unwrap_err();
        assert_eq!(e.path, "a.bindTimeoutSeconds");
        let e = decode_args("a", json!({"shape": [{"utilization": 0, "score": 0}]})).unwrap_err();
        assert_eq!(e.path, "a.shape");
        assert!(decode_args("a", json!({"bogus": 1})).is_err());
    }
}
