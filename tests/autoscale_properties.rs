//! ProvisioningRequests under random churn, on the deterministic driver:
//! gangs arrive and go, nodes appear and vanish, requests are provisioned,
//! fail or expire. After every step: no gang has two live requests, no
//! live request outlives its gang (each is deleted once its gang started
//! or went), and I1–I9 hold (`Harness::check_invariants`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use muster::driver::Harness;
use muster::driver::fixtures::{SCHEDULER, def_key, gang_def, group_key, member, node};
use muster::engine::provisioning::{ProvisioningChange, RequestState};
use muster::engine::{Action, ClusterEvent, EngineConfig, ProfileConfig};
use muster::framework::placement::Framework;
use muster::gang::{DialectTimeouts, GangArgs};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Gang { size: usize },
    DeleteGang(usize),
    AddNode,
    RemoveNode(usize),
    Outcome(usize, u8),
    Wait,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1usize..=4).prop_map(|size| Op::Gang { size }),
        (0usize..8).prop_map(Op::DeleteGang),
        Just(Op::AddNode),
        (0usize..8).prop_map(Op::RemoveNode),
        ((0usize..8), (0u8..4)).prop_map(|(i, s)| Op::Outcome(i, s)),
        Just(Op::Wait),
    ]
}

fn harness() -> Harness {
    let mut profile = ProfileConfig::new(SCHEDULER, Framework::default());
    profile.gang = Some(GangArgs {
        dialect_timeouts: DialectTimeouts::UNIFORM,
        ..GangArgs::default()
    });
    let mut h = Harness::with_config(EngineConfig::new(vec![profile]));
    h.add_node(node("n0", 4000, 64));
    let now = h.now();
    h.engine.on_event(
        ClusterEvent::Provisioning(ProvisioningChange::Served(true)),
        now,
    );
    h
}

/// Requests created and not deleted, by name, with their gang's name.
fn live_requests(h: &Harness) -> BTreeMap<Arc<str>, Arc<str>> {
    let mut live = BTreeMap::new();
    for a in h.actions_where(|a| {
        matches!(
            a,
            Action::CreateProvisioningRequest { .. } | Action::DeleteProvisioningRequest { .. }
        )
    }) {
        match a {
            Action::CreateProvisioningRequest { group, name, .. } => {
                live.insert(name.clone(), group.definition.name.clone());
            }
            Action::DeleteProvisioningRequest { name, .. } => {
                live.remove(name);
            }
            _ => {}
        }
    }
    live
}

fn persistence() -> Option<Box<dyn proptest::test_runner::FailurePersistence>> {
    Some(Box::new(
        proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"),
    ))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: persistence(), ..ProptestConfig::default() })]

    #[test]
    fn one_live_request_per_gang_none_outliving_it_and_i1_holds(
        ops in prop::collection::vec(op(), 1..60),
    ) {
        let mut h = harness();
        let mut gangs: Vec<String> = Vec::new();
        let mut present: BTreeSet<String> = BTreeSet::new();
        let mut nodes: Vec<String> = vec!["n0".into()];
        let mut next_node = 1;
        for (step, op) in ops.into_iter().enumerate() {
            match op {
                Op::Gang { size } => {
                    let name = format!("g{}", gangs.len());
                    let g = group_key(&name);
                    h.put_def(gang_def(&name, size as u32, 1));
                    for i in 0..size {
                        h.put_pod(member(&format!("{name}-{i}"), &g, 4000, 1));
                    }
                    present.insert(name.clone());
                    gangs.push(name);
                }
                Op::DeleteGang(i) => {
                    if let Some(name) = gangs.get(i % gangs.len().max(1)).cloned()
                        && present.remove(&name)
                    {
                        let keys: Vec<_> = h
                            .pods()
                            .filter(|p| p.key.name.starts_with(&format!("{name}-")))
                            .map(|p| p.key.clone())
                            .collect();
                        for k in keys {
                            h.delete_pod(&k);
                        }
                        h.delete_def(&def_key(&name));
                    }
                }
                Op::AddNode => {
                    let n = format!("burst-{next_node}");
                    next_node += 1;
                    h.add_node(node(&n, 4000, 64));
                    nodes.push(n);
                }
                Op::RemoveNode(i) => {
                    if nodes.len() > 1 {
                        let n = nodes.remove(i % nodes.len());
                        h.delete_node(&n);
                    }
                }
                Op::Outcome(i, s) => {
                    let live: Vec<Arc<str>> = live_requests(&h).into_keys().collect();
                    if let Some(name) = live.get(i % live.len().max(1)).cloned() {
                        let state = match s {
                            0 => RequestState::Provisioned,
                            1 => RequestState::Failed,
                            2 => RequestState::BookingExpired,
                            _ => RequestState::CapacityRevoked,
                        };
                        let now = h.now();
                        h.engine.on_event(
                            ClusterEvent::Provisioning(ProvisioningChange::Status {
                                namespace: Arc::from("default"),
                                name,
                                state,
                                message: "random".into(),
                            }),
                            now,
                        );
                    }
                }
                Op::Wait => {}
            }
            h.advance(Duration::from_millis(500));
            let live = live_requests(&h);
            let mut per_gang: BTreeMap<&Arc<str>, usize> = BTreeMap::new();
            for g in live.values() {
                *per_gang.entry(g).or_default() += 1;
            }
            for (g, n) in &per_gang {
                prop_assert!(*n <= 1, "step {step}: gang {g} has {n} live requests");
                prop_assert!(present.contains(&***g), "step {step}: the request of {g} outlived it");
                prop_assert!(
                    h.bound_members(&group_key(g)) == 0,
                    "step {step}: {g} started with its request live"
                );
            }
            prop_assert_eq!(
                live.len(),
                h.engine.provisioning_requests().len(),
                "step {}: the engine's live requests and the writes disagree", step
            );
            if let Err(e) = h.check_invariants() {
                return Err(TestCaseError::fail(format!("step {step}: {e}")));
            }
        }
    }
}
