//! Gangs that ask for capacity, on the deterministic driver: a gang short of
//! capacity gets one ProvisioningRequest (never two), waits for it
//! (`WaitingForProvisioning`, not `Unschedulable`), is tried at once when
//! it is provisioned and binds on the new nodes; a failed request is
//! deleted, said, and asked again only after a backoff; a request never
//! outlives its gang. Where the API is not served nothing is asked.

use std::sync::Arc;
use std::time::Duration;

use muster::driver::Harness;
use muster::driver::fixtures::{SCHEDULER, gang_def, group_key, member, node};
use muster::engine::provisioning::{ProvisioningChange, RequestState};
use muster::engine::{Action, ClusterEvent, EngineConfig, ProfileConfig};
use muster::framework::PendingReason;
use muster::framework::placement::Framework;
use muster::gang::{DialectTimeouts, GangArgs};
use muster::model::PodKey;

fn harness(served: bool) -> Harness {
    let mut profile = ProfileConfig::new(SCHEDULER, Framework::default());
    profile.gang = Some(GangArgs {
        dialect_timeouts: DialectTimeouts::UNIFORM,
        ..GangArgs::default()
    });
    let mut h = Harness::with_config(EngineConfig::new(vec![profile]));
    h.add_node(node("n0", 4000, 64));
    if served {
        h.engine.on_event(
            ClusterEvent::Provisioning(ProvisioningChange::Served(true)),
            h.now(),
        );
    }
    h
}

fn created(h: &Harness) -> Vec<(Arc<str>, u32)> {
    h.actions_where(|a| matches!(a, Action::CreateProvisioningRequest { .. }))
        .into_iter()
        .filter_map(|a| match a {
            Action::CreateProvisioningRequest { name, pod_sets, .. } => {
                Some((name.clone(), pod_sets.iter().map(|s| s.count).sum()))
            }
            _ => None,
        })
        .collect()
}

fn deleted(h: &Harness) -> Vec<Arc<str>> {
    h.actions_where(|a| matches!(a, Action::DeleteProvisioningRequest { .. }))
        .into_iter()
        .filter_map(|a| match a {
            Action::DeleteProvisioningRequest { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect()
}

fn last_reason(h: &Harness, name: &str) -> Option<PendingReason> {
    let key = PodKey::new("default", name);
    h.actions_where(|a| matches!(a, Action::PodUnschedulable { pod, .. } if *pod == key))
        .last()
        .and_then(|a| match a {
            Action::PodUnschedulable { reason, .. } => Some(*reason),
            _ => None,
        })
}

fn status(h: &mut Harness, name: &str, state: RequestState) {
    let now = h.now();
    h.engine.on_event(
        ClusterEvent::Provisioning(ProvisioningChange::Status {
            namespace: Arc::from("default"),
            name: Arc::from(name),
            state,
            message: "simulated".into(),
        }),
        now,
    );
    h.settle();
}

fn gang(h: &mut Harness, name: &str, size: usize) {
    let g = group_key(name);
    h.put_def(gang_def(name, size as u32, 1));
    for i in 0..size {
        h.put_pod(member(&format!("{name}-{i}"), &g, 4000, 1));
    }
    h.settle();
}

#[test]
fn a_gang_short_of_capacity_asks_once_and_binds_when_provisioned() {
    let mut h = harness(true);
    gang(&mut h, "big", 3);
    let made = created(&h);
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(made[0].1, 3, "one pod per member needed");
    assert_eq!(
        last_reason(&h, "big-0"),
        Some(PendingReason::WaitingForProvisioning)
    );
    // Retries while it is pending ask nothing more.
    for _ in 0..20 {
        h.advance(Duration::from_secs(1));
    }
    assert_eq!(created(&h).len(), 1, "never two requests for one gang");
    // The nodes appear and the request is provisioned: the gang binds.
    h.add_node(node("burst-0", 4000, 64));
    h.add_node(node("burst-1", 4000, 64));
    let name = made[0].0.clone();
    status(&mut h, &name, RequestState::Provisioned);
    h.advance(Duration::from_millis(100));
    assert_eq!(h.bound_members(&group_key("big")), 3);
    assert_eq!(deleted(&h), vec![name], "deleted once the gang started");
    assert!(h.engine.provisioning_requests().is_empty());
    h.check_invariants().expect("invariants");
}

#[test]
fn a_failed_request_is_deleted_said_and_asked_again_after_a_backoff() {
    let mut h = harness(true);
    gang(&mut h, "big", 3);
    let name = created(&h)[0].0.clone();
    status(&mut h, &name, RequestState::Failed);
    assert_eq!(deleted(&h), vec![name.clone()]);
    assert_eq!(h.events("ProvisioningFailed"), 1);
    assert_eq!(last_reason(&h, "big-0"), Some(PendingReason::Unschedulable));
    for _ in 0..10 {
        h.advance(Duration::from_secs(1));
    }
    assert_eq!(created(&h).len(), 1, "not before the backoff");
    for _ in 0..40 {
        h.advance(Duration::from_secs(1));
    }
    assert_eq!(created(&h).len(), 2, "asked again after the backoff");
    // The gang goes: its request goes with it.
    h.delete_def(&muster::driver::fixtures::def_key("big"));
    h.settle();
    assert!(h.engine.provisioning_requests().is_empty());
    assert_eq!(deleted(&h).len(), 2);
}

#[test]
fn nothing_is_asked_where_the_api_is_not_served_or_for_a_gang_that_fits() {
    let mut h = harness(false);
    gang(&mut h, "big", 3);
    assert!(created(&h).is_empty());
    assert_eq!(last_reason(&h, "big-0"), Some(PendingReason::Unschedulable));
    let mut h = harness(true);
    gang(&mut h, "small", 1);
    assert_eq!(h.bound_members(&group_key("small")), 1);
    assert!(created(&h).is_empty());
}

#[test]
fn a_gang_with_a_preemption_delay_evicts_nobody_while_its_request_is_pending() {
    let mut profile = ProfileConfig::new(SCHEDULER, Framework::default());
    let mut args = GangArgs {
        dialect_timeouts: DialectTimeouts::UNIFORM,
        ..GangArgs::default()
    };
    args.provisioning.preemption_delay = Duration::from_secs(5);
    profile.gang = Some(args);
    let mut h = Harness::with_config(EngineConfig::new(vec![profile]));
    h.add_node(node("n0", 4000, 64));
    let now = h.now();
    h.engine.on_event(
        ClusterEvent::Provisioning(ProvisioningChange::Served(true)),
        now,
    );
    h.put_pod(muster::driver::fixtures::pod("low", 4000, 1));
    h.settle();
    assert!(h.node_of(&PodKey::new("default", "low")).is_some());
    let g = group_key("vip");
    h.put_def(gang_def("vip", 2, 1));
    for i in 0..2 {
        let mut m = member(&format!("vip-{i}"), &g, 2000, 1);
        m.priority = 100;
        h.put_pod(m);
    }
    h.settle();
    let preempted = |h: &Harness| {
        h.actions_where(|a| matches!(a, Action::Preempt { .. }))
            .len()
    };
    assert_eq!(preempted(&h), 0, "nobody evicted within the delay");
    let made = created(&h);
    assert_eq!(made.len(), 1, "the delay gives the autoscaler its chance");
    // Past the delay, the request still pending: still nobody.
    for _ in 0..10 {
        h.advance(Duration::from_secs(1));
        h.put_pod(muster::driver::fixtures::pod("noise", 100_000, 1));
        h.delete_pod(&PodKey::new("default", "noise"));
    }
    assert_eq!(
        preempted(&h),
        0,
        "nobody evicted while the request is pending"
    );
    // The request fails: the gang preempts.
    status(&mut h, &made[0].0, RequestState::Failed);
    h.advance(Duration::from_secs(1));
    assert_eq!(
        preempted(&h),
        1,
        "the low pod is evicted once the request failed"
    );
    h.check_invariants().expect("invariants");
}
