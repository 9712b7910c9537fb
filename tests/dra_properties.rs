//! Invariant I9 under random events: pods (alone and in gangs) claiming
//! devices by named and template-generated claims, some claims shared,
//! pods taking part of a shared NIC's bandwidth (consumable capacity),
//! nodes and their slices published, withdrawn and deleted, claims deleted
//! under their reservations, bindings and claim writes failing. After every
//! step: no device allocated whole to two claims, nor a shared one's
//! shares past its capacity (in the cluster, and in what the scheduler
//! holds), no pod bound where a claim of its is unallocated, not
//! reserved for it or out of reach, and I1–I5 as everywhere.
//!
//! Gangs include PodGroups sharing a claim with their members (KEP-5729),
//! reserved for the group.
//!
//! And under the same events, the per-node memos kept across cycles for
//! like pods with claims (`framework::placement::Batch`) place every pod
//! exactly where a fresh pass would; and the joint device search across a
//! gang's members places a gang whenever greedy allocation does.

use std::time::Duration;

use muster::driver::Harness;
use muster::driver::dra_fixtures::{
    claim_deleted, claim_upserted, generated_claim, gpu_claim, gpu_class, gpu_class_serving,
    group_claims, nic_claim, nic_class, nic_slice, nic_slice_name, node_slice, pcie_claim,
    pcie_slice, slice_deleted, with_claims, with_extended, with_template_claim,
};

/// The extended resource the GPU class serves in the random runs.
const GPU_RESOURCE: &str = "example.com/gpu";
use muster::driver::fixtures::{SCHEDULER, gang_def, group_key, member, node, pod};
use muster::engine::{Action, EngineConfig, ProfileConfig};
use muster::framework::placement::Framework;
use muster::model::{PodInfo, PodKey, PodPhase};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    AddNode {
        gpus: usize,
    },
    WithdrawSlice(usize),
    Republish(usize),
    DeleteNode(usize),
    /// A pod with a claim of its own (named, or generated from a template).
    Pod {
        gpus: u32,
        template: bool,
    },
    /// `count` replicas, each with its claim of `gpus` generated from one
    /// template: what the memo across cycles serves.
    Replicas {
        count: u32,
        gpus: u32,
    },
    /// A pod sharing the claim of an earlier pod.
    SharingPod(usize),
    /// A pod asking for `gpus` of the extended resource the GPU class
    /// serves, with no claim of its own (KEP-5004).
    ExtendedPod {
        gpus: i64,
    },
    /// A pod with a claim for some of a shared NIC's bandwidth.
    NicPod {
        gbps: u32,
    },
    /// A gang of `size` members, each with a claim of `gpus` (named, or
    /// generated from one template).
    Gang {
        size: u32,
        gpus: u32,
        template: bool,
    },
    /// A gang whose PodGroup shares a claim of `shared` GPUs with its
    /// members (KEP-5729), each member with a claim of `gpus` of its own.
    SharedGang {
        size: u32,
        gpus: u32,
        shared: u32,
    },
    DeleteClaim(usize),
    DeletePod(usize),
    FinishPod(usize),
    FailBinds(usize),
    FailClaimWrites(usize),
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..=4usize).prop_map(|gpus| Op::AddNode { gpus }),
        1 => (0..8usize).prop_map(Op::WithdrawSlice),
        1 => (0..8usize).prop_map(Op::Republish),
        1 => (0..8usize).prop_map(Op::DeleteNode),
        5 => (1..=3u32, any::<bool>()).prop_map(|(gpus, template)| Op::Pod { gpus, template }),
        2 => (2..=5u32, 1..=2u32).prop_map(|(count, gpus)| Op::Replicas { count, gpus }),
        2 => (0..16usize).prop_map(Op::SharingPod),
        2 => (1..=60u32).prop_map(|gbps| Op::NicPod { gbps }),
        2 => (1..=3i64).prop_map(|gpus| Op::ExtendedPod { gpus }),
        2 => (2..=3u32, 1..=2u32, any::<bool>())
            .prop_map(|(size, gpus, template)| Op::Gang { size, gpus, template }),
        2 => (2..=3u32, 0..=2u32, 1..=2u32)
            .prop_map(|(size, gpus, shared)| Op::SharedGang { size, gpus, shared }),
        1 => (0..16usize).prop_map(Op::DeleteClaim),
        2 => (0..16usize).prop_map(Op::DeletePod),
        1 => (0..16usize).prop_map(Op::FinishPod),
        1 => (1..=2usize).prop_map(Op::FailBinds),
        1 => (1..=2usize).prop_map(Op::FailClaimWrites),
        3 => (1..=20u64).prop_map(Op::Advance),
    ]
}

/// Failing cases are kept beside this file
/// (`tests/dra_properties.proptest-regressions`).
fn persistence() -> Option<Box<dyn proptest::test_runner::FailurePersistence>> {
    Some(Box::new(
        proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"),
    ))
}

#[derive(Default)]
struct World {
    nodes: Vec<(String, usize)>,
    /// Pods created, with the claim each uses (none: `""`).
    pods: Vec<(PodKey, String)>,
    next: usize,
}

impl World {
    fn name(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}{}", self.next)
    }
}

/// Adds `p` with a claim of `gpus` of its own (`<pod>-gpus`): generated
/// from a template, or named.
fn add_claiming(h: &mut Harness, w: &mut World, p: PodInfo, gpus: u32, template: bool) {
    let claim = format!("{}-gpus", p.key.name);
    let p = match template {
        true => {
            let p = with_template_claim(p, "gpus", Some(&claim));
            h.put_dra(claim_upserted(generated_claim(&p, &claim, gpus)));
            p
        }
        false => {
            h.put_dra(claim_upserted(gpu_claim("default", &claim, gpus)));
            with_claims(p, &[("gpus", &claim)])
        }
    };
    w.pods.push((p.key.clone(), claim));
    h.put_pod(p);
}

fn apply(h: &mut Harness, w: &mut World, op: &Op) {
    match op {
        Op::AddNode { gpus } => {
            let name = w.name("n");
            h.add_node(node(&name, 64000, 256));
            if *gpus > 0 {
                h.put_dra(node_slice(&name, *gpus, "c0"));
            }
            h.put_dra(nic_slice(&name));
            w.nodes.push((name, *gpus));
        }
        Op::WithdrawSlice(i) => {
            if let Some((n, _)) = w.nodes.get(i % w.nodes.len().max(1)) {
                h.put_dra(slice_deleted(n));
            }
        }
        Op::Republish(i) => {
            if let Some((n, gpus)) = w.nodes.get(i % w.nodes.len().max(1))
                && *gpus > 0
            {
                h.put_dra(node_slice(n, *gpus, "c0"));
            }
        }
        Op::DeleteNode(i) => {
            if !w.nodes.is_empty() {
                let (n, _) = w.nodes.remove(i % w.nodes.len());
                h.delete_node(&n);
                h.put_dra(slice_deleted(&n));
                h.put_dra(muster::cache::DraChange::SliceDeleted(
                    nic_slice_name(&n).into(),
                ));
            }
        }
        Op::Pod { gpus, template } => {
            let name = w.name("p");
            let p = pod(&name, 100, 1);
            add_claiming(h, w, p, *gpus, *template);
        }
        Op::Replicas { count, gpus } => {
            for _ in 0..*count {
                let name = w.name("r");
                add_claiming(h, w, pod(&name, 100, 1), *gpus, true);
            }
        }
        Op::ExtendedPod { gpus } => {
            let name = w.name("x");
            let p = with_extended(pod(&name, 100, 1), GPU_RESOURCE, *gpus);
            w.pods.push((p.key.clone(), String::new()));
            h.put_pod(p);
        }
        Op::NicPod { gbps } => {
            let name = w.name("q");
            let claim = format!("{name}-nic");
            h.put_dra(claim_upserted(nic_claim("default", &claim, *gbps)));
            let p = with_claims(pod(&name, 100, 1), &[("nic", &claim)]);
            w.pods.push((p.key.clone(), claim));
            h.put_pod(p);
        }
        Op::SharingPod(i) => {
            let Some((_, claim)) = w.pods.get(i % w.pods.len().max(1)).cloned() else {
                return;
            };
            if claim.is_empty() {
                return; // an extended-resource pod's: not one to share
            }
            let name = w.name("s");
            let p = with_claims(pod(&name, 100, 1), &[("gpus", &claim)]);
            w.pods.push((p.key.clone(), claim));
            h.put_pod(p);
        }
        Op::Gang {
            size,
            gpus,
            template,
        } => {
            let g = w.name("g");
            h.put_def(gang_def(&g, *size, 0));
            for m in 0..*size {
                let p = member(&format!("{g}-{m}"), &group_key(&g), 100, 1);
                add_claiming(h, w, p, *gpus, *template);
            }
        }
        Op::SharedGang { size, gpus, shared } => {
            let g = w.name("sg");
            let claim = format!("{g}-shared");
            h.put_dra(claim_upserted(gpu_claim("default", &claim, *shared)));
            let mut def = gang_def(&g, *size, 0);
            def.extras.resource_claims = Some(group_claims(&g, &[("shared", &claim)]));
            h.put_def(def);
            for m in 0..*size {
                let p = with_claims(
                    member(&format!("{g}-{m}"), &group_key(&g), 100, 1),
                    &[("shared", &claim)],
                );
                match *gpus {
                    0 => {
                        w.pods.push((p.key.clone(), claim.clone()));
                        h.put_pod(p);
                    }
                    gpus => add_claiming(h, w, p, gpus, true),
                }
            }
        }
        Op::DeleteClaim(i) => {
            if let Some((_, claim)) = w.pods.get(i % w.pods.len().max(1))
                && !claim.is_empty()
            {
                h.put_dra(claim_deleted("default", claim));
            }
        }
        Op::DeletePod(i) => {
            if let Some((key, _)) = w.pods.get(i % w.pods.len().max(1)).cloned() {
                h.delete_pod(&key);
            }
        }
        Op::FinishPod(i) => {
            if let Some((key, _)) = w.pods.get(i % w.pods.len().max(1)).cloned()
                && h.node_of(&key).is_some()
            {
                h.finish_pod(&key, PodPhase::Succeeded);
            }
        }
        Op::FailBinds(n) => h.fail_next_binds(*n),
        Op::FailClaimWrites(n) => h.fail_next_claim_writes(*n),
        Op::Advance(s) => h.advance(Duration::from_secs(*s)),
    }
}

/// Allocations the scheduler planned belong to pods it holds a node for.
fn no_leaked_reservations(h: &Harness) -> Result<(), String> {
    let cache = h.engine.cache();
    for (claim, a) in cache.facts().dra.assumed_all() {
        if !a
            .users
            .iter()
            .any(|(pod, writing)| *writing || cache.is_assumed(pod))
        {
            return Err(format!(
                "devices planned for claim {claim} held for {:?}, which hold no node",
                a.users
            ));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: persistence(), ..ProptestConfig::default() })]

    #[test]
    fn devices_are_never_given_twice_nor_pods_bound_without_them(
        ops in prop::collection::vec(op(), 1..50),
        latency in 0..3u64,
    ) {
        let mut h = Harness::new();
        h.bind_latency = Duration::from_millis(latency * 500);
        h.put_dra(gpu_class_serving(GPU_RESOURCE));
        h.put_dra(nic_class());
        let mut w = World::default();
        for (step, op) in ops.iter().enumerate() {
            apply(&mut h, &mut w, op);
            h.settle();
            if let Err(e) = h.check_invariants() {
                return Err(TestCaseError::fail(format!("after step {step} {op:?}: {e}")));
            }
        }
        h.advance(Duration::from_secs(400));
        if let Err(e) = h.check_invariants().and_then(|()| no_leaked_reservations(&h)) {
            return Err(TestCaseError::fail(format!("after draining: {e}")));
        }
    }
}

/// Applies `ops`, letting the scheduler settle after each.
fn apply_settled(h: &mut Harness, w: &mut World, ops: &[Op]) {
    for op in ops {
        apply(h, w, op);
        h.settle();
    }
}

/// A harness whose tie-breaks are drawn from a fixed seed, so that two
/// of them fed the same events decide alike.
fn seeded() -> Harness {
    Harness::with_config(EngineConfig::new(vec![ProfileConfig::new(
        SCHEDULER,
        Framework::default().with_seed(7),
    )]))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: persistence(), ..ProptestConfig::default() })]

    /// I2 with devices: memos kept across cycles for like pods with claims
    /// (forgotten as devices, slices and claims change) bind every pod
    /// where the unmemoized pass does, at the same moment.
    #[test]
    fn memos_place_pods_with_claims_exactly_like_fresh_passes(
        ops in prop::collection::vec(op(), 1..50),
        latency in 0..3u64,
    ) {
        let mut twins = [seeded(), seeded()];
        twins[1].engine.forget_memos_each_cycle();
        let mut worlds = [World::default(), World::default()];
        for h in &mut twins {
            h.bind_latency = Duration::from_millis(latency * 500);
            h.put_dra(gpu_class_serving(GPU_RESOURCE));
            h.put_dra(nic_class());
        }
        let binds = |h: &Harness| -> Vec<(String, String)> {
            h.binds.iter().map(|b| (b.pod.to_string(), b.node.to_string())).collect()
        };
        for (step, op) in ops.iter().enumerate() {
            for (h, w) in twins.iter_mut().zip(&mut worlds) {
                apply(h, w, op);
                h.settle();
            }
            prop_assert_eq!(
                binds(&twins[0]),
                binds(&twins[1]),
                "after step {} {:?}",
                step,
                op
            );
        }
        prop_assert!(twins[0].check_invariants().is_ok());
    }
}

/// Claims deleted under bound replicas free a device on each node without
/// any pod moving: only the device facts tell the memo that the nodes
/// changed, and the waiting replica goes where a fresh pass puts it (the
/// emptier node), not to the first node found free.
#[test]
fn memos_forget_nodes_whose_devices_are_freed_without_a_pod_moving() {
    let mut placed = Vec::new();
    for memo in [true, false] {
        let mut h = seeded();
        if !memo {
            h.engine.forget_memos_each_cycle();
        }
        let mut w = World::default();
        h.put_dra(gpu_class());
        apply_settled(
            &mut h,
            &mut w,
            &[
                Op::AddNode { gpus: 8 },
                Op::AddNode { gpus: 2 },
                Op::Replicas { count: 11, gpus: 1 },
            ],
        );
        assert_eq!(h.binds.len(), 10, "ten devices, ten replicas");
        for node in ["n1", "n2"] {
            let on = h
                .binds
                .iter()
                .find(|b| &*b.node == node)
                .unwrap()
                .pod
                .clone();
            let (_, claim) = w.pods.iter().find(|(p, _)| *p == on).cloned().unwrap();
            h.put_dra(claim_deleted("default", &claim));
        }
        h.advance(Duration::from_secs(30));
        assert_eq!(h.binds.len(), 11, "the last replica takes a freed device");
        placed.push(h.binds[10].node.to_string());
    }
    assert_eq!(placed[1], "n2", "the emptier node scores higher");
    assert_eq!(placed[0], placed[1]);
}

/// Like replicas that fit nowhere are each told of their own claim: the
/// memo keeps no reason naming another replica's.
#[test]
fn memoised_replicas_that_fit_nowhere_name_their_own_claims() {
    let mut h = seeded();
    let mut w = World::default();
    h.put_dra(gpu_class());
    apply_settled(
        &mut h,
        &mut w,
        &[
            Op::AddNode { gpus: 1 },
            Op::AddNode { gpus: 1 },
            Op::Replicas { count: 2, gpus: 2 },
        ],
    );
    assert!(h.binds.is_empty());
    for (pod, claim) in &w.pods {
        let told = h.actions_where(|a| {
            matches!(a, Action::PodUnschedulable { pod: p, message, .. }
                if p == pod && message.contains(&format!("default/{claim}")))
        });
        assert!(
            !told.is_empty(),
            "{pod} is not told of {claim}: {:?}",
            h.actions
        );
        let others = w.pods.iter().filter(|(p, _)| p != pod);
        for (_, other) in others {
            let wrong = h.actions_where(|a| {
                matches!(a, Action::PodUnschedulable { pod: p, message, .. }
                    if p == pod && message.contains(&format!("default/{other} ")))
            });
            assert!(wrong.is_empty(), "{pod} is told of {other}'s claim");
        }
    }
}

/// A pod asking for an extended resource whose node goes away while its
/// binding (which creates its extended-resource claim) is in flight gets
/// a claim of its own on the next node, not the devices planned for the
/// first.
#[test]
fn an_extended_resource_pod_whose_node_goes_away_mid_binding_gets_new_devices() {
    let mut h = seeded();
    h.bind_latency = Duration::from_secs(1);
    let mut w = World::default();
    h.put_dra(gpu_class_serving(GPU_RESOURCE));
    for op in [Op::AddNode { gpus: 1 }, Op::AddNode { gpus: 1 }] {
        apply(&mut h, &mut w, &op);
    }
    apply(&mut h, &mut w, &Op::ExtendedPod { gpus: 1 });
    h.settle();
    let pod_key = w.pods[0].0.clone();
    let binding = h.actions_where(|a| matches!(a, Action::Bind { pod, .. } if *pod == pod_key));
    let node = match binding.first() {
        Some(Action::Bind { node, .. }) => node.to_string(),
        other => panic!("the pod's binding is in flight: {other:?}"),
    };
    assert!(h.node_of(&pod_key).is_none(), "not bound yet");
    h.delete_node(&node);
    h.put_dra(slice_deleted(&node));
    h.advance(Duration::from_secs(30));
    h.check_invariants().unwrap();
    let bound = h.node_of(&pod_key).expect("bound");
    assert_ne!(*bound, *node);
}

/// A pod whose devices exist binds once a slice publishes them, and a
/// claim written by a binding that failed is given back for the next pod.
#[test]
fn a_failed_claim_write_or_binding_leaves_the_devices_to_the_next_pod() {
    let mut h = Harness::new();
    h.put_dra(gpu_class());
    h.add_node(node("n0", 64000, 256));
    h.put_dra(claim_upserted(gpu_claim("default", "a-gpus", 2)));
    let a = with_claims(pod("a", 100, 1), &[("gpus", "a-gpus")]);
    h.put_pod(a.clone());
    h.settle();
    assert!(h.node_of(&a.key).is_none(), "no devices yet");
    h.fail_next_claim_writes(1);
    h.put_dra(node_slice("n0", 2, "c0"));
    h.settle();
    assert!(h.node_of(&a.key).is_none(), "the claim write failed");
    h.fail_next_binds(1);
    // The retry after the first backoff (1 s) writes the claim, then its
    // binding fails; the next retry is 2 s later.
    h.advance(Duration::from_millis(1500));
    assert!(h.node_of(&a.key).is_none(), "the binding failed");
    let claim = PodKey::new("default", "a-gpus");
    assert!(
        h.claim(&claim).is_some_and(|c| c.allocation.is_none()),
        "unreserved and deallocated after the failed binding"
    );
    h.advance(Duration::from_secs(11));
    assert_eq!(h.node_of(&a.key).as_deref(), Some("n0"));
    let c = h.claim(&claim).expect("claim");
    assert!(c.allocation.is_some() && c.reserved_for_uid(&a.uid));
    h.check_invariants().unwrap();
    // Deleting the pod frees the devices: the next pod gets them.
    h.delete_pod(&a.key);
    h.put_dra(claim_upserted(gpu_claim("default", "b-gpus", 2)));
    let b = with_claims(pod("b", 100, 1), &[("gpus", "b-gpus")]);
    h.put_pod(b.clone());
    h.advance(Duration::from_secs(11));
    assert_eq!(h.node_of(&b.key).as_deref(), Some("n0"));
    h.check_invariants().unwrap();
}

/// Pods share a NIC while its bandwidth lasts: a third 40G claim waits
/// until one of the first two pods is gone, then takes its share.
#[test]
fn pods_share_a_device_until_its_capacity_is_consumed() {
    let mut h = Harness::new();
    h.put_dra(nic_class());
    h.add_node(node("n0", 64000, 256));
    h.put_dra(nic_slice("n0"));
    let mut pods = Vec::new();
    for name in ["a", "b", "c"] {
        let claim = format!("{name}-nic");
        h.put_dra(claim_upserted(nic_claim("default", &claim, 40)));
        let p = with_claims(pod(name, 100, 1), &[("nic", &claim)]);
        h.put_pod(p.clone());
        h.settle();
        pods.push(p);
    }
    let bound: Vec<bool> = pods.iter().map(|p| h.node_of(&p.key).is_some()).collect();
    assert_eq!(bound, [true, true, false], "100G hold two 40G shares");
    let shares: Vec<_> = ["a-nic", "b-nic"]
        .iter()
        .map(|c| {
            let c = h.claim(&PodKey::new("default", c)).expect("claim");
            let r = &c.allocation.as_ref().expect("allocated").results[0];
            (
                r.device.device.to_string(),
                r.share.clone().expect("a share"),
            )
        })
        .collect();
    assert_eq!(shares[0].0, "nic-0");
    assert_eq!(shares[1].0, "nic-0");
    assert_ne!(shares[0].1.id, shares[1].1.id);
    h.check_invariants().unwrap();
    h.delete_pod(&pods[0].key);
    h.advance(Duration::from_secs(30));
    assert_eq!(h.node_of(&pods[2].key).as_deref(), Some("n0"));
    h.check_invariants().unwrap();
}

/// One node's GPUs, each under the PCIe root its entry names.
fn roots() -> impl Strategy<Value = Vec<&'static str>> {
    prop::collection::vec(prop_oneof![Just("r0"), Just("r1"), Just("r2")], 1..=6)
}

/// A member's claim: how many GPUs, and whether under one root.
fn member_claim() -> impl Strategy<Value = (u32, bool)> {
    (1..=3u32, any::<bool>())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: persistence(), ..ProptestConfig::default() })]

    /// The joint device search never does worse than greedy allocation:
    /// on the same nodes, a gang greedy planning binds whole is bound whole
    /// with the search too (and it may bind gangs greedy strands), and no
    /// device is given twice either way.
    #[test]
    fn the_joint_search_places_a_gang_whenever_greedy_does(
        nodes in prop::collection::vec(roots(), 1..=2),
        claims in prop::collection::vec(member_claim(), 2..=4),
    ) {
        let mut twins = [seeded(), seeded()];
        twins[0].engine.greedy_devices();
        for h in &mut twins {
            h.put_dra(gpu_class());
            for (i, r) in nodes.iter().enumerate() {
                let name = format!("n{i}");
                h.add_node(node(&name, 64000, 256));
                h.put_dra(pcie_slice(&name, r));
            }
            let size = u32::try_from(claims.len()).unwrap_or(u32::MAX);
            h.put_def(gang_def("g", size, 0));
            for (m, (gpus, same_root)) in claims.iter().enumerate() {
                let claim = format!("g-{m}-gpus");
                h.put_dra(claim_upserted(pcie_claim("default", &claim, *gpus, *same_root)));
                let mut p = with_claims(member(&format!("g-{m}"), &group_key("g"), 100, 1), &[("gpus", &claim)]);
                p.created_ms = i64::try_from(m).unwrap_or(0);
                h.put_pod(p);
            }
            h.settle();
            prop_assert!(h.check_invariants().is_ok(), "{:?}", h.check_invariants());
        }
        let (greedy, joint) = (twins[0].binds.len(), twins[1].binds.len());
        prop_assert!(greedy == 0 || greedy == claims.len(), "greedy bound part of a gang: {greedy}");
        prop_assert!(joint == 0 || joint == claims.len(), "joint bound part of a gang: {joint}");
        prop_assert!(joint >= greedy, "greedy bound {greedy}, the joint search {joint}");
    }
}
