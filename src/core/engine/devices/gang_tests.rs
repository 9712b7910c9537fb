//! Devices for whole gangs: claims a PodGroup shares with its members
//! (KEP-5729), and the joint device search across members.

use std::sync::Arc;
use std::time::Instant;

use super::super::{Action, ClusterEvent, Engine, PodLocation};
use crate::driver::dra_fixtures::{
    claim_upserted, gpu_claim, gpu_class, group_claims, node_slice, pcie_claim, pcie_slice,
    with_claims, with_template_claim,
};
use crate::driver::fixtures::{arc, gang_def, group_key, member, node};
use crate::model::pod_claims::{ClaimSource, GroupClaims, PodClaim};
use crate::model::{GroupDef, PodInfo};

use super::tests::engine;

/// (pod, node, devices, the consumer the claims are reserved for).
fn bound(actions: &[Action]) -> Vec<(String, String, Vec<String>, Vec<String>)> {
    let mut out: Vec<_> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Bind {
                pod, node, claims, ..
            } => Some((
                pod.name.to_string(),
                node.to_string(),
                claims
                    .iter()
                    .flat_map(|c| c.allocation.iter().flat_map(|a| &a.results))
                    .map(|r| r.device.to_string())
                    .collect(),
                claims
                    .iter()
                    .map(|c| match &c.group {
                        Some(g) => format!("{}/{}/{}", g.resource, g.name, g.uid),
                        None => "pod".to_string(),
                    })
                    .collect(),
            )),
            _ => None,
        })
        .collect();
    out.sort();
    out
}

/// The GPU class and node `n0` with `slice`.
fn one_node(slice: crate::cache::DraChange) -> (Engine, Instant) {
    let mut e = engine();
    let t0 = Instant::now();
    e.on_event(ClusterEvent::Dra(gpu_class()), t0);
    e.on_event(ClusterEvent::NodeUpserted(arc(node("n0", 64000, 256))), t0);
    e.on_event(ClusterEvent::Dra(slice), t0);
    (e, t0)
}

fn gang_member(name: &str, created_ms: i64, claims: &[(&str, &str)]) -> PodInfo {
    let mut p = with_claims(member(name, &group_key("pg"), 100, 1), claims);
    p.created_ms = created_ms;
    p
}

fn with_group_claims(mut def: GroupDef, claims: Arc<GroupClaims>) -> GroupDef {
    def.extras.resource_claims = Some(claims);
    def
}

#[test]
fn a_member_greedy_allocation_strands_is_placed_by_the_joint_search() {
    // One node, GPUs under two PCIe roots: {gpu-0, gpu-1} and {gpu-2}.
    // Member a (first in queue order) wants any one GPU, member b two
    // under one root. Greedy gives a gpu-0 and strands b; jointly, a
    // gets gpu-2.
    let (mut e, t0) = one_node(pcie_slice("n0", &["r0", "r0", "r1"]));
    for c in [
        pcie_claim("default", "a-gpu", 1, false),
        pcie_claim("default", "b-gpus", 2, true),
    ] {
        e.on_event(ClusterEvent::Dra(claim_upserted(c)), t0);
    }
    e.on_event(ClusterEvent::GroupDefUpserted(gang_def("pg", 2, 1)), t0);
    for p in [
        gang_member("a", 1, &[("gpu", "a-gpu")]),
        gang_member("b", 2, &[("gpus", "b-gpus")]),
    ] {
        e.on_event(ClusterEvent::PodUpserted(arc(p)), t0);
    }
    e.run_until_idle(t0);
    let actions = e.drain_actions();
    let dev = |d: &str| format!("gpu.example.com/n0/{d}");
    assert_eq!(
        bound(&actions),
        [
            (
                "a".into(),
                "n0".into(),
                vec![dev("gpu-2")],
                vec!["pod".into()]
            ),
            (
                "b".into(),
                "n0".into(),
                vec![dev("gpu-0"), dev("gpu-1")],
                vec!["pod".into()]
            ),
        ],
        "{actions:?}"
    );
    let stats = e.stats(t0);
    assert_eq!(
        (stats.devices.joint_searches, stats.devices.joint_placements),
        (1, 1)
    );
    assert!(e.cache().facts().dra.double_allocations().is_empty());
    assert!(e.cache().facts().dra.plan_index_problems().is_empty());
}

#[test]
fn a_joint_search_that_fails_puts_every_lifted_plan_back() {
    // Two GPUs under one root: a takes one, b wants two: no joint
    // allocation holds both, and a keeps the device it was planned.
    let (mut e, t0) = one_node(pcie_slice("n0", &["r0", "r0"]));
    for c in [
        pcie_claim("default", "a-gpu", 1, false),
        pcie_claim("default", "b-gpus", 2, true),
    ] {
        e.on_event(ClusterEvent::Dra(claim_upserted(c)), t0);
    }
    e.on_event(ClusterEvent::GroupDefUpserted(gang_def("pg", 1, 1)), t0);
    for p in [
        gang_member("a", 1, &[("gpu", "a-gpu")]),
        gang_member("b", 2, &[("gpus", "b-gpus")]),
    ] {
        e.on_event(ClusterEvent::PodUpserted(arc(p)), t0);
    }
    e.run_until_idle(t0);
    let actions = e.drain_actions();
    let placed = bound(&actions);
    assert_eq!(placed.len(), 1, "{actions:?}");
    assert_eq!(placed[0].0, "a");
    let stats = e.stats(t0);
    assert_eq!(
        (stats.devices.joint_searches, stats.devices.joint_placements),
        (1, 0)
    );
    assert!(e.cache().facts().dra.double_allocations().is_empty());
    assert!(e.cache().facts().dra.plan_index_problems().is_empty());
}

#[test]
fn members_share_their_pod_groups_claim_reserved_for_the_group() {
    // The group's claim wants one GPU: allocated once, on the node whose
    // GPU it got, and every member lands there.
    let mut e = engine();
    let t0 = Instant::now();
    e.on_event(ClusterEvent::Dra(gpu_class()), t0);
    for n in ["n0", "n1"] {
        e.on_event(ClusterEvent::NodeUpserted(arc(node(n, 64000, 256))), t0);
        e.on_event(ClusterEvent::Dra(node_slice(n, 1, "c0")), t0);
    }
    e.on_event(
        ClusterEvent::Dra(claim_upserted(gpu_claim("default", "shared", 1))),
        t0,
    );
    let def = with_group_claims(
        gang_def("pg", 2, 1),
        group_claims("pg", &[("gpu", "shared")]),
    );
    e.on_event(ClusterEvent::GroupDefUpserted(def), t0);
    for (i, name) in ["a", "b"].into_iter().enumerate() {
        let p = gang_member(name, i as i64, &[("gpu", "shared")]);
        e.on_event(ClusterEvent::PodUpserted(arc(p)), t0);
    }
    e.run_until_idle(t0);
    let actions = e.drain_actions();
    let placed = bound(&actions);
    assert_eq!(placed.len(), 2, "{actions:?}");
    assert_eq!(placed[0].1, placed[1].1, "members on one node: {placed:?}");
    for (_, _, _, consumers) in &placed {
        assert_eq!(consumers, &["podgroups/pg/uid-pg".to_string()]);
    }
    assert!(e.cache().facts().dra.double_allocations().is_empty());
}

#[test]
fn a_member_waits_for_its_groups_template_claim_and_refuses_another_groups() {
    let (mut e, t0) = one_node(node_slice("n0", 2, "c0"));
    let template = |generated: Option<&str>| {
        let mut entry =
            with_template_claim(crate::driver::fixtures::pod("x", 1, 1), "gpus", generated)
                .constraints
                .resource_claims[0]
                .clone();
        if let ClaimSource::Template { template, .. } = &mut entry.source {
            *template = Arc::from("gpus-template");
        }
        Arc::new(GroupClaims {
            group: Arc::from("pg"),
            uid: Arc::from("uid-pg"),
            entries: vec![entry],
        })
    };
    e.on_event(
        ClusterEvent::GroupDefUpserted(with_group_claims(gang_def("pg", 1, 1), template(None))),
        t0,
    );
    // The member's own entry names the same template: the group's claim.
    let mut a = member("a", &group_key("pg"), 100, 1);
    Arc::make_mut(&mut a.constraints)
        .resource_claims
        .push(PodClaim {
            name: Arc::from("gpus"),
            source: ClaimSource::Template {
                template: Arc::from("gpus-template"),
                generated: crate::model::pod_claims::Generated::Pending,
            },
        });
    e.on_event(ClusterEvent::PodUpserted(arc(a.clone())), t0);
    e.run_until_idle(t0);
    assert_eq!(e.location(&a.key), Some(PodLocation::Gated));
    let gated: Vec<String> = e
        .drain_actions()
        .into_iter()
        .filter_map(|a| match a {
            Action::PodUnschedulable { message, .. } => Some(message),
            _ => None,
        })
        .collect();
    assert!(
        gated.iter().any(|m| m.contains(
            "waiting for the ResourceClaim of PodGroup pg claim \"gpus\" to be created from its template"
        )),
        "{gated:?}"
    );
    // A claim by the recorded name that another group owns is refused.
    let mut foreign = gpu_claim("default", "pg-gpus-x1", 1);
    foreign.owner_group = Some(Arc::from("uid-other"));
    e.on_event(ClusterEvent::Dra(claim_upserted(foreign)), t0);
    e.on_event(
        ClusterEvent::GroupDefUpserted(with_group_claims(
            gang_def("pg", 1, 1),
            template(Some("pg-gpus-x1")),
        )),
        t0,
    );
    e.run_until_idle(t0);
    assert_eq!(e.location(&a.key), Some(PodLocation::Gated));
    // The group's own claim lets it through, and it is reserved for the group.
    let mut own = gpu_claim("default", "pg-gpus-x1", 1);
    own.owner_group = Some(Arc::from("uid-pg"));
    e.on_event(ClusterEvent::Dra(claim_upserted(own)), t0);
    e.run_until_idle(t0);
    let placed = bound(&e.drain_actions());
    assert_eq!(placed.len(), 1, "{placed:?}");
    assert_eq!(placed[0].3, ["podgroups/pg/uid-pg".to_string()]);
}

/// Racks `r0..` with the given nodes' GPU counts, labelled, each with its
/// rack unit; the GPU and rack classes.
fn racks(racks: &[&[usize]]) -> (Engine, Instant) {
    use crate::driver::dra_fixtures::{RACK_LABEL, rack_class, rack_unit_slice};
    let mut e = engine();
    let t0 = Instant::now();
    e.on_event(ClusterEvent::Dra(gpu_class()), t0);
    e.on_event(ClusterEvent::Dra(rack_class()), t0);
    let mut i = 0;
    for (r, nodes) in racks.iter().enumerate() {
        let rack = format!("r{r}");
        for gpus in *nodes {
            let name = format!("n{i}");
            i += 1;
            let mut n = node(&name, 64000, 256);
            n.labels.insert(RACK_LABEL.into(), rack.clone());
            e.on_event(ClusterEvent::NodeUpserted(arc(n)), t0);
            e.on_event(ClusterEvent::Dra(node_slice(&name, *gpus, "c0")), t0);
        }
        e.on_event(ClusterEvent::Dra(rack_unit_slice(&rack)), t0);
    }
    (e, t0)
}

/// A gang `pg` of `members`, each wanting two GPUs of its own and the
/// rack unit its PodGroup shares.
fn rack_gang(e: &mut Engine, t0: Instant, members: u32) -> Vec<PodInfo> {
    use crate::driver::dra_fixtures::rack_claim;
    e.on_event(
        ClusterEvent::Dra(claim_upserted(rack_claim("default", "pg-rack"))),
        t0,
    );
    let def = with_group_claims(
        gang_def("pg", members, 1),
        group_claims("pg", &[("rack", "pg-rack")]),
    );
    e.on_event(ClusterEvent::GroupDefUpserted(def), t0);
    (0..members)
        .map(|i| {
            let own = format!("m{i}-gpus");
            e.on_event(
                ClusterEvent::Dra(claim_upserted(gpu_claim("default", &own, 2))),
                t0,
            );
            let p = gang_member(
                &format!("m{i}"),
                i64::from(i),
                &[("rack", "pg-rack"), ("gpus", &own)],
            );
            e.on_event(ClusterEvent::PodUpserted(arc(p.clone())), t0);
            p
        })
        .collect()
}

#[test]
fn a_shared_rack_unit_confines_the_gang_to_a_rack_with_room_for_every_member() {
    // Rack r0 has one node of two GPUs (room for one member), rack r1 two
    // such nodes: the gang of two goes to r1, its rack unit allocated
    // once and reserved for the group.
    let (mut e, t0) = racks(&[&[2], &[2, 2]]);
    // r1's nodes are busy: a member placed greedily goes to r0 first.
    for n in ["n1", "n2"] {
        let mut busy = crate::driver::fixtures::pod(&format!("busy-{n}"), 48_000, 192);
        busy.node_name = Some(Arc::from(n));
        e.on_event(ClusterEvent::PodUpserted(arc(busy)), t0);
    }
    rack_gang(&mut e, t0, 2);
    e.run_until_idle(t0);
    let actions = e.drain_actions();
    let placed = bound(&actions);
    assert_eq!(placed.len(), 2, "{actions:?}");
    let mut nodes: Vec<&str> = placed.iter().map(|p| p.1.as_str()).collect();
    nodes.sort_unstable();
    assert_eq!(nodes, ["n1", "n2"], "{placed:?}");
    for p in &placed {
        assert!(
            p.2.contains(&"rack.example.com/r1/unit".to_string()),
            "{placed:?}"
        );
        assert!(
            p.3.contains(&"podgroups/pg/uid-pg".to_string()),
            "{placed:?}"
        );
    }
    assert!(e.cache().facts().dra.double_allocations().is_empty());
}

#[test]
fn a_gang_whose_rack_unit_is_taken_waits_whole_and_says_why() {
    // One rack, its unit taken by another claim: nothing of the gang is
    // placed, and the message names the shared claim.
    let (mut e, t0) = racks(&[&[2, 2]]);
    let mut other = crate::driver::dra_fixtures::rack_claim("default", "other");
    other.allocation = Some(crate::dra::Allocation {
        results: vec![crate::dra::model::Allocated {
            request: Arc::from("rack"),
            device: crate::dra::DeviceId {
                driver: Arc::from("rack.example.com"),
                pool: Arc::from("r0"),
                device: Arc::from("unit"),
            },
            admin_access: false,
            share: None,
        }],
        reach: vec![crate::dra::Reach::All],
    });
    e.on_event(ClusterEvent::Dra(claim_upserted(other)), t0);
    let members = rack_gang(&mut e, t0, 2);
    e.run_until_idle(t0);
    let actions = e.drain_actions();
    assert!(bound(&actions).is_empty(), "{actions:?}");
    let msgs: Vec<&String> = actions
        .iter()
        .filter_map(|a| match a {
            Action::PodUnschedulable { message, .. } => Some(message),
            _ => None,
        })
        .collect();
    assert!(
        msgs.iter().any(|m| m.contains("shared by PodGroup pg")
            && m.contains("cannot allocate claim default/pg-rack")),
        "{msgs:?}"
    );
    // The unit frees: the gang binds whole.
    e.on_event(
        ClusterEvent::Dra(crate::driver::dra_fixtures::claim_deleted(
            "default", "other",
        )),
        t0,
    );
    e.run_until_idle(t0 + std::time::Duration::from_secs(11));
    let placed = bound(&e.drain_actions());
    assert_eq!(placed.len(), members.len(), "{placed:?}");
}

/// `claim` for `count` GPUs of node `n0`, allocated and reserved for `pod`.
fn held_by(claim: &str, count: usize, pod: &PodInfo) -> crate::dra::Claim {
    let mut c = gpu_claim("default", claim, u32::try_from(count).unwrap_or(1));
    c.allocation = Some(crate::dra::Allocation {
        results: (0..count)
            .map(|i| crate::dra::model::Allocated {
                request: Arc::from("gpu"),
                device: crate::dra::DeviceId {
                    driver: Arc::from("gpu.example.com"),
                    pool: Arc::from("n0"),
                    device: Arc::from(format!("gpu-{i}")),
                },
                admin_access: false,
                share: None,
            })
            .collect(),
        reach: vec![crate::dra::Reach::Node(Arc::from("n0"))],
    });
    c.reserved_for = vec![crate::dra::Consumer {
        api_group: Arc::from(""),
        resource: Arc::from("pods"),
        name: pod.key.name.clone(),
        uid: pod.uid.clone(),
    }];
    c
}

#[test]
fn a_pod_preempts_the_lower_priority_pod_holding_its_devices_and_binds_once_they_are_freed() {
    let (mut e, t0) = one_node(node_slice("n0", 2, "c0"));
    let mut low = with_claims(
        crate::driver::fixtures::pod("low", 100, 1),
        &[("gpus", "low-gpus")],
    );
    low.node_name = Some(Arc::from("n0"));
    e.on_event(ClusterEvent::PodUpserted(arc(low.clone())), t0);
    e.on_event(
        ClusterEvent::Dra(claim_upserted(held_by("low-gpus", 2, &low))),
        t0,
    );
    let mut high = with_claims(
        crate::driver::fixtures::pod("high", 100, 1),
        &[("gpus", "high-gpus")],
    );
    high.priority = 100;
    e.on_event(
        ClusterEvent::Dra(claim_upserted(gpu_claim("default", "high-gpus", 2))),
        t0,
    );
    e.on_event(ClusterEvent::PodUpserted(arc(high.clone())), t0);
    e.run_until_idle(t0);
    let actions = e.drain_actions();
    let preempted: Vec<&str> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Preempt { victim, .. } => Some(&*victim.name),
            _ => None,
        })
        .collect();
    assert_eq!(preempted, ["low"], "{actions:?}");
    assert!(bound(&actions).is_empty());
    // The simulation gave the devices back.
    assert_eq!(e.cache().facts().dra.devices_in_use(), 2);
    // The victim goes, and its claim is deallocated: the pod binds there.
    e.on_event(ClusterEvent::PodDeleted(low.key.clone()), t0);
    e.on_event(
        ClusterEvent::Dra(claim_upserted(gpu_claim("default", "low-gpus", 2))),
        t0,
    );
    e.run_until_idle(t0 + std::time::Duration::from_secs(11));
    let placed = bound(&e.drain_actions());
    assert_eq!(placed.len(), 1, "{placed:?}");
    assert_eq!(placed[0].0, "high");
}

#[test]
fn no_pod_is_preempted_while_its_devices_would_not_be_freed() {
    // The low pod's claim is shared with a pod of equal priority: evicting
    // the low pod alone frees nothing, so nothing is preempted.
    let (mut e, t0) = one_node(node_slice("n0", 2, "c0"));
    let mut low = with_claims(
        crate::driver::fixtures::pod("low", 100, 1),
        &[("gpus", "shared")],
    );
    low.node_name = Some(Arc::from("n0"));
    let mut peer = with_claims(
        crate::driver::fixtures::pod("peer", 100, 1),
        &[("gpus", "shared")],
    );
    peer.node_name = Some(Arc::from("n0"));
    peer.priority = 100;
    e.on_event(ClusterEvent::PodUpserted(arc(low.clone())), t0);
    e.on_event(ClusterEvent::PodUpserted(arc(peer.clone())), t0);
    let mut c = held_by("shared", 2, &low);
    c.reserved_for.push(crate::dra::Consumer {
        api_group: Arc::from(""),
        resource: Arc::from("pods"),
        name: peer.key.name.clone(),
        uid: peer.uid.clone(),
    });
    e.on_event(ClusterEvent::Dra(claim_upserted(c)), t0);
    let mut high = with_claims(
        crate::driver::fixtures::pod("high", 100, 1),
        &[("gpus", "high-gpus")],
    );
    high.priority = 100;
    e.on_event(
        ClusterEvent::Dra(claim_upserted(gpu_claim("default", "high-gpus", 1))),
        t0,
    );
    e.on_event(ClusterEvent::PodUpserted(arc(high)), t0);
    e.run_until_idle(t0);
    let actions = e.drain_actions();
    assert!(
        !actions.iter().any(|a| matches!(a, Action::Preempt { .. })),
        "{actions:?}"
    );
    assert_eq!(e.cache().facts().dra.devices_in_use(), 2);
}

#[test]
fn a_gang_preempts_the_pods_holding_its_members_devices() {
    let (mut e, t0) = one_node(node_slice("n0", 2, "c0"));
    let mut low = with_claims(
        crate::driver::fixtures::pod("low", 100, 1),
        &[("gpus", "low-gpus")],
    );
    low.node_name = Some(Arc::from("n0"));
    e.on_event(ClusterEvent::PodUpserted(arc(low.clone())), t0);
    e.on_event(
        ClusterEvent::Dra(claim_upserted(held_by("low-gpus", 2, &low))),
        t0,
    );
    let mut def = gang_def("pg", 2, 1);
    def.priority = Some(100);
    e.on_event(ClusterEvent::GroupDefUpserted(def), t0);
    for (i, name) in ["a", "b"].into_iter().enumerate() {
        let claim = format!("{name}-gpu");
        e.on_event(
            ClusterEvent::Dra(claim_upserted(gpu_claim("default", &claim, 1))),
            t0,
        );
        let p = gang_member(name, i as i64, &[("gpu", &claim)]);
        e.on_event(ClusterEvent::PodUpserted(arc(p)), t0);
    }
    e.run_until_idle(t0);
    let actions = e.drain_actions();
    let preempted: Vec<&str> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Preempt { victim, .. } => Some(&*victim.name),
            _ => None,
        })
        .collect();
    assert_eq!(preempted, ["low"], "{actions:?}");
    assert_eq!(e.cache().facts().dra.devices_in_use(), 2);
    e.on_event(ClusterEvent::PodDeleted(low.key.clone()), t0);
    e.on_event(
        ClusterEvent::Dra(claim_upserted(gpu_claim("default", "low-gpus", 2))),
        t0,
    );
    e.run_until_idle(t0 + std::time::Duration::from_secs(11));
    assert_eq!(bound(&e.drain_actions()).len(), 2);
}
