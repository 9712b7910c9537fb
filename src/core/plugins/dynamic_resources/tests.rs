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
    // Evicting the pods of the claims holding devices may free them.
    assert!(!r.unresolvable);
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

mod extended {
    use super::*;
    use crate::driver::dra_fixtures::{gpu_class_serving, with_extended};
    use crate::plugins::dynamic_resources::extended::devices_on;
    use crate::plugins::node_resources_fit::NodeResourcesFit;

    const GPU: &str = "example.com/gpu";

    fn facts_serving(gpus: &[usize]) -> ClusterFacts {
        let mut f = ClusterFacts::default();
        f.dra.apply(gpu_class_serving(GPU));
        for (i, n) in gpus.iter().enumerate() {
            f.dra.apply(node_slice(&format!("n{i}"), *n, "c0"));
        }
        f.dra.refresh();
        f
    }

    /// `n` nodes; node `advertising` (if any) offers 4 GPUs through its
    /// allocatable, as a device plugin would.
    fn nodes_with(n: usize, advertising: Option<usize>) -> Vec<NodeState> {
        (0..n)
            .map(|i| {
                let mut info = node(&format!("n{i}"), 4000, 8);
                if advertising == Some(i) {
                    info.allocatable.scalar.insert(Arc::from(GPU), 4);
                }
                NodeState::new(Arc::new(info))
            })
            .collect()
    }

    #[test]
    fn fit_leaves_a_served_resource_to_dra_only_where_the_node_lacks_it() {
        let f = facts_serving(&[2, 0]);
        let ns = nodes_with(2, Some(1));
        let p = with_extended(pod("a", 100, 1), GPU, 2);
        let fit = NodeResourcesFit::default();
        // Without DynamicResources' PreFilter: counted as any extended resource.
        let bare = CycleState::new();
        assert_eq!(
            fit.filter(&bare, &p, &ns[0]).unwrap_err().reason,
            "Insufficient example.com/gpu"
        );
        let mut s = CycleState::new();
        let snap = Snapshot::new(&ns, &f);
        assert_eq!(
            DynamicResources.pre_filter(&mut s, &p, &snap),
            PreFilterResult::AllNodes
        );
        // n0 does not advertise it: DynamicResources' to allocate.
        assert!(fit.filter(&s, &p, &ns[0]).is_ok());
        assert!(fit.passes(&s, &p, &ns[0]));
        assert!(DynamicResources.filter(&s, &p, &ns[0]).is_ok());
        // n1 advertises 4: normal fit, and DRA is not used (it has no devices).
        assert!(fit.filter(&s, &p, &ns[1]).is_ok());
        assert!(DynamicResources.filter(&s, &p, &ns[1]).is_ok());
        let big = with_extended(pod("b", 100, 1), GPU, 5);
        let mut s = CycleState::new();
        DynamicResources.pre_filter(&mut s, &big, &snap);
        assert_eq!(
            fit.filter(&s, &big, &ns[1]).unwrap_err().reason,
            "Insufficient example.com/gpu"
        );
    }

    #[test]
    fn filter_allocates_the_extended_claim_and_names_the_resource() {
        let f = facts_serving(&[1, 2]);
        let ns = nodes_with(2, None);
        let p = with_extended(pod("a", 100, 1), GPU, 2);
        let mut s = CycleState::new();
        DynamicResources.pre_filter(&mut s, &p, &Snapshot::new(&ns, &f));
        let r = DynamicResources.filter(&s, &p, &ns[0]).unwrap_err();
        assert!(!r.unresolvable);
        assert_eq!(
            r.reason,
            "cannot allocate extended resource example.com/gpu: 2 device(s) of class gpu.example.com wanted, 1 free"
        );
        assert!(DynamicResources.filter(&s, &p, &ns[1]).is_ok());
    }

    #[test]
    fn the_extended_claim_and_the_pods_claims_are_allocated_together() {
        let mut f = facts_serving(&[3]);
        f.dra.apply(claim_upserted(gpu_claim("default", "c", 2)));
        let ns = nodes_with(1, None);
        let p = with_extended(with_claims(pod("a", 100, 1), &[("gpus", "c")]), GPU, 2);
        let mut s = CycleState::new();
        DynamicResources.pre_filter(&mut s, &p, &Snapshot::new(&ns, &f));
        // 2 + 2 devices wanted, 3 on the node.
        assert!(DynamicResources.filter(&s, &p, &ns[0]).is_err());
        let q = with_extended(with_claims(pod("b", 100, 1), &[("gpus", "c")]), GPU, 1);
        let mut s = CycleState::new();
        DynamicResources.pre_filter(&mut s, &q, &Snapshot::new(&ns, &f));
        assert!(DynamicResources.filter(&s, &q, &ns[0]).is_ok());
    }

    #[test]
    fn resources_no_class_serves_are_left_to_fit_and_implicit_names_need_their_class() {
        let f = facts(&[2]);
        let ns = nodes_with(1, None);
        let p = with_extended(pod("a", 100, 1), GPU, 1);
        let mut s = CycleState::new();
        assert_eq!(
            DynamicResources.pre_filter(&mut s, &p, &Snapshot::new(&ns, &f)),
            PreFilterResult::AllNodes
        );
        assert!(NodeResourcesFit::default().filter(&s, &p, &ns[0]).is_err());
        let implicit = with_extended(
            pod("b", 100, 1),
            "deviceclass.resource.kubernetes.io/other.example.com",
            1,
        );
        match DynamicResources.pre_filter(&mut s, &implicit, &Snapshot::new(&ns, &f)) {
            PreFilterResult::Reject(r) => assert_eq!(
                r.reason,
                "extended resource deviceclass.resource.kubernetes.io/other.example.com: DeviceClass other.example.com: not found"
            ),
            other => panic!("{other:?}"),
        }
        // The class's implicit name is served by it.
        let by_class = with_extended(
            pod("c", 100, 1),
            "deviceclass.resource.kubernetes.io/gpu.example.com",
            2,
        );
        let mut s = CycleState::new();
        DynamicResources.pre_filter(&mut s, &by_class, &Snapshot::new(&ns, &f));
        assert!(DynamicResources.filter(&s, &by_class, &ns[0]).is_ok());
    }

    #[test]
    fn reserve_plans_the_extended_claim_and_holds_its_devices() {
        let mut f = facts_serving(&[2]);
        let n = node("n0", 4000, 8);
        let a = with_extended(pod("a", 100, 1), GPU, 2);
        f.dra.reserve(&a, &n).unwrap();
        let key = crate::cache::DraFacts::extended_plan_key(&a);
        let plan = f.dra.assumed(&key).expect("planned");
        assert_eq!(plan.allocation.results.len(), 2);
        let x = plan.extended.as_ref().expect("extended");
        assert_eq!(&*x.requests[0].name, "container-0-request-0");
        assert_eq!(f.dra.devices_in_use(), 2);
        // The next pod finds no device free.
        let b = with_extended(pod("b", 100, 1), GPU, 1);
        assert!(f.dra.reserve(&b, &n).is_err());
        // Unreserve gives them back.
        assert!(f.dra.unreserve(&a.key));
        assert_eq!(f.dra.devices_in_use(), 0);
        f.dra.reserve(&b, &n).unwrap();
    }

    /// A scoring strategy naming a resource DRA serves scores it by the
    /// class's devices on each node that does not advertise it: all of
    /// them as allocatable, those allocated (whole or in shares) and the
    /// pod's request as requested.
    #[test]
    fn fit_scores_a_served_resource_by_the_class_devices_on_the_node() {
        use crate::framework::ScorePlugin;
        use crate::plugins::node_resources_fit::{
            NodeResourcesFitArgs, ResourceSpec, ScoringStrategyType,
        };
        use crate::plugins::resource_allocation::{
            Requests, ResourceKey, allocatable_and_requested,
        };
        let mut f = facts_serving(&[4, 4, 0]);
        let ns = nodes_with(4, Some(3));
        // Two of n0's four devices are held for another pod's claim.
        let holder = with_extended(pod("h", 100, 1), GPU, 2);
        f.dra.reserve(&holder, &ns[0].info).unwrap();
        let p = with_extended(pod("a", 100, 1), GPU, 1);
        let mut s = CycleState::new();
        DynamicResources.pre_filter(&mut s, &p, &Snapshot::new(&ns, &f));
        assert_eq!(devices_on(&s, GPU, &ns[0]), Some((4, 2)));
        assert_eq!(devices_on(&s, GPU, &ns[1]), Some((4, 0)));
        assert_eq!(devices_on(&s, GPU, &ns[2]), Some((0, 0)));
        // n3 advertises the resource: a device plugin's, counted as usual.
        assert_eq!(devices_on(&s, GPU, &ns[3]), None);
        let key = ResourceKey::parse(GPU);
        let at = |i: usize| allocatable_and_requested(&s, &key, &ns[i], 1, Requests::NonZero);
        assert_eq!(at(0), Some((4, 3)));
        assert_eq!(at(1), Some((4, 1)));
        assert_eq!(at(2), None, "no device: no part in the score");
        assert_eq!(at(3), Some((4, 1)));
        // Without DynamicResources' PreFilter a node lacking it offers none.
        assert_eq!(
            allocatable_and_requested(&CycleState::new(), &key, &ns[0], 1, Requests::NonZero),
            None
        );
        let fit = |kind| {
            let mut args = NodeResourcesFitArgs::default();
            args.scoring_strategy.kind = kind;
            args.scoring_strategy.resources = vec![ResourceSpec::new(GPU, 1)];
            NodeResourcesFit::new(&args)
        };
        let most = fit(ScoringStrategyType::MostAllocated);
        assert_eq!(most.score(&s, &p, &ns[0]), 75);
        assert_eq!(most.score(&s, &p, &ns[1]), 25);
        let least = fit(ScoringStrategyType::LeastAllocated);
        assert_eq!(least.score(&s, &p, &ns[0]), 25);
        assert_eq!(least.score(&s, &p, &ns[1]), 75);
    }

    /// A device shared out counts once as in use, however many shares.
    #[test]
    fn a_shared_device_counts_once_as_in_use() {
        use crate::driver::dra_fixtures::{nic_claim, nic_class, nic_slice};
        let mut f = ClusterFacts::default();
        f.dra.apply(nic_class());
        f.dra.apply(crate::cache::DraChange::ClassUpserted {
            name: Arc::from("nic"),
            class: Ok(Arc::new(
                crate::dra::DeviceClass::from_api(&serde_json::from_value(serde_json::json!({
                    "metadata": {"name": "nic"},
                    "spec": {
                        "selectors": [{"cel": {"expression": "device.driver == 'nic.example.com'"}}],
                        "extendedResourceName": "example.com/nic",
                    },
                })).unwrap())
                .unwrap(),
            )),
        });
        f.dra.apply(nic_slice("n0"));
        f.dra.refresh();
        let ns = nodes_with(1, None);
        for (i, name) in ["a-nic", "b-nic"].iter().enumerate() {
            f.dra.apply(claim_upserted(nic_claim("default", name, 10)));
            let holder = with_claims(pod(&format!("h{i}"), 100, 1), &[("nic", name)]);
            f.dra.reserve(&holder, &ns[0].info).unwrap();
        }
        let p = with_extended(pod("a", 100, 1), "example.com/nic", 1);
        let mut s = CycleState::new();
        DynamicResources.pre_filter(&mut s, &p, &Snapshot::new(&ns, &f));
        assert_eq!(devices_on(&s, "example.com/nic", &ns[0]), Some((1, 1)));
    }
}
