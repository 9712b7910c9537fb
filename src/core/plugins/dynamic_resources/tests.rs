use std::sync::Arc;

use super::*;
use crate::cache::{ClusterFacts, NodeState};
use crate::driver::dra_fixtures::{claim_upserted, gpu_claim, gpu_class, node_slice, with_claims};
use crate::driver::fixtures::{node, pod};

fn facts(gpus: &[usize]) -> ClusterFacts {
    let mut f = ClusterFacts::default();
    f.dra.apply(gpu_class());
    for (i, n) in gpus.iter().enumerate() {
        f.dra.apply(node_slice(&format!("n{i}"), *n, "c0"));
    }
    f.dra.refresh();
    f
}

fn nodes(n: usize) -> Vec<NodeState> {
    (0..n)
        .map(|i| NodeState::new(Arc::new(node(&format!("n{i}"), 4000, 8))))
        .collect()
}

#[test]
fn pods_without_claims_are_not_looked_at() {
    let f = facts(&[]);
    let ns = nodes(1);
    let mut s = CycleState::new();
    let p = pod("a", 100, 1);
    let snap = Snapshot::new(&ns, &f);
    assert_eq!(
        DynamicResources.pre_filter(&mut s, &p, &snap),
        PreFilterResult::AllNodes
    );
    assert!(DynamicResources.filter(&s, &p, &ns[0]).is_ok());
}

#[test]
fn filter_allocates_per_node_and_names_the_shortfall() {
    let mut f = facts(&[1, 4]);
    f.dra.apply(claim_upserted(gpu_claim("default", "c", 2)));
    let ns = nodes(2);
    let p = with_claims(pod("a", 100, 1), &[("gpus", "c")]);
    let mut s = CycleState::new();
    let snap = Snapshot::new(&ns, &f);
    assert_eq!(
        DynamicResources.pre_filter(&mut s, &p, &snap),
        PreFilterResult::AllNodes
    );
    let r = DynamicResources.filter(&s, &p, &ns[0]).unwrap_err();
    assert!(r.unresolvable);
    assert_eq!(
        r.reason,
        "cannot allocate claim default/c: request gpu: 2 device(s) of class gpu.example.com wanted, 1 free"
    );
    assert!(DynamicResources.filter(&s, &p, &ns[1]).is_ok());
}

#[test]
fn a_missing_or_unusable_claim_refuses_the_pod_at_prefilter() {
    let mut f = facts(&[1]);
    let ns = nodes(1);
    let p = with_claims(pod("a", 100, 1), &[("gpus", "c")]);
    let mut s = CycleState::new();
    match DynamicResources.pre_filter(&mut s, &p, &Snapshot::new(&ns, &f)) {
        PreFilterResult::Reject(r) => {
            assert!(r.unresolvable);
            assert_eq!(r.reason, "resourceclaim \"c\" not found");
        }
        other => panic!("{other:?}"),
    }
    let mut deleting = gpu_claim("default", "c", 1);
    deleting.deleting = true;
    f.dra.apply(claim_upserted(deleting));
    match DynamicResources.pre_filter(&mut s, &p, &Snapshot::new(&ns, &f)) {
        PreFilterResult::Reject(r) => assert!(r.reason.contains("being deleted"), "{r:?}"),
        other => panic!("{other:?}"),
    }
    f.dra.apply(crate::cache::DraChange::ClaimUpserted {
        key: crate::cache::ResourceClaimKey::new("default", "c"),
        claim: Err(Arc::from(
            "request gpu: capacity requests are not supported",
        )),
    });
    match DynamicResources.pre_filter(&mut s, &p, &Snapshot::new(&ns, &f)) {
        PreFilterResult::Reject(r) => {
            assert!(
                r.reason.contains("capacity requests are not supported"),
                "{r:?}"
            )
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_device_taint_rule_keeps_allocations_off_the_devices_it_picks() {
    let mut f = facts(&[2]);
    f.dra.apply(claim_upserted(gpu_claim("default", "c", 2)));
    let rule: k8s_openapi::api::resource::v1::DeviceTaintRule =
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "maintenance"},
            "spec": {
                "deviceSelector": {"driver": "gpu.example.com", "pool": "n0", "device": "gpu-1"},
                "taint": {"key": "maintenance", "effect": "NoSchedule"},
            }
        }))
        .unwrap();
    f.dra.apply(crate::cache::DraChange::TaintRuleUpserted {
        name: Arc::from("maintenance"),
        rule: Ok(Arc::new(crate::dra::TaintRule::from_api(&rule).unwrap())),
    });
    f.dra.refresh();
    let ns = nodes(1);
    let p = with_claims(pod("a", 100, 1), &[("gpus", "c")]);
    let mut s = CycleState::new();
    DynamicResources.pre_filter(&mut s, &p, &Snapshot::new(&ns, &f));
    let r = DynamicResources.filter(&s, &p, &ns[0]).unwrap_err();
    assert!(
        r.reason
            .contains("1 free: 1 matching device(s) allocated or tainted"),
        "{r:?}"
    );
    // The rule gone, the device is usable again.
    f.dra
        .apply(crate::cache::DraChange::TaintRuleDeleted(Arc::from(
            "maintenance",
        )));
    f.dra.refresh();
    let mut s = CycleState::new();
    DynamicResources.pre_filter(&mut s, &p, &Snapshot::new(&ns, &f));
    assert!(DynamicResources.filter(&s, &p, &ns[0]).is_ok());
}
