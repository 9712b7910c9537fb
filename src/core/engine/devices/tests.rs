use std::sync::Arc;
use std::time::{Duration, Instant};

use super::super::{Action, ClusterEvent, Engine, EngineConfig, PodLocation, ProfileConfig};
use crate::driver::dra_fixtures::{
    claim_deleted, claim_upserted, generated_claim, gpu_claim, gpu_class, node_slice, with_claims,
    with_template_claim,
};
use crate::driver::fixtures::{SCHEDULER, arc, node, pod};
use crate::framework::Framework;
use crate::model::PodInfo;

pub(super) fn engine() -> Engine {
    Engine::new(EngineConfig::new(vec![ProfileConfig::new(
        SCHEDULER,
        Framework::default(),
    )]))
}

/// Nodes `n0..` with the given GPU counts, the class, and no claims.
fn cluster(gpus: &[usize]) -> (Engine, Instant) {
    let mut e = engine();
    let t0 = Instant::now();
    e.on_event(ClusterEvent::Dra(gpu_class()), t0);
    for (i, n) in gpus.iter().enumerate() {
        let name = format!("n{i}");
        e.on_event(ClusterEvent::NodeUpserted(arc(node(&name, 64000, 256))), t0);
        e.on_event(ClusterEvent::Dra(node_slice(&name, *n, "c0")), t0);
    }
    (e, t0)
}

fn bound(actions: &[Action]) -> Vec<(String, String, Vec<String>)> {
    actions
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
            )),
            _ => None,
        })
        .collect()
}

fn unschedulable(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::PodUnschedulable { message, .. } => Some(message.clone()),
            _ => None,
        })
        .collect()
}

/// Past any backoff.
fn later(t0: Instant) -> Instant {
    t0 + Duration::from_secs(11)
}

fn claiming(name: &str, claim: &str) -> PodInfo {
    with_claims(pod(name, 100, 1), &[("gpus", claim)])
}

#[test]
fn a_claim_is_allocated_where_its_devices_are_and_written_before_the_binding() {
    let (mut e, t0) = cluster(&[1, 4]);
    e.on_event(
        ClusterEvent::Dra(claim_upserted(gpu_claim("default", "c", 2))),
        t0,
    );
    let p = claiming("train", "c");
    e.on_event(ClusterEvent::PodUpserted(arc(p.clone())), t0);
    e.run_until_idle(t0);
    let actions = e.drain_actions();
    assert_eq!(
        bound(&actions),
        [(
            "train".into(),
            "n1".into(),
            vec![
                "gpu.example.com/n1/gpu-0".into(),
                "gpu.example.com/n1/gpu-1".into()
            ]
        )]
    );
    let Some(Action::Bind { claims, .. }) =
        actions.iter().find(|a| matches!(a, Action::Bind { .. }))
    else {
        unreachable!()
    };
    assert_eq!(claims[0].claim_uid.as_ref(), "uid-claim-c");
    assert!(e.cache().facts().dra.double_allocations().is_empty());
}

#[test]
fn devices_held_by_one_pod_are_not_given_to_the_next_and_the_message_says_what_is_free() {
    let (mut e, t0) = cluster(&[4]);
    for c in ["c1", "c2"] {
        e.on_event(
            ClusterEvent::Dra(claim_upserted(gpu_claim("default", c, 3))),
            t0,
        );
    }
    e.on_event(ClusterEvent::PodUpserted(arc(claiming("a", "c1"))), t0);
    e.on_event(ClusterEvent::PodUpserted(arc(claiming("b", "c2"))), t0);
    e.run_until_idle(t0);
    let actions = e.drain_actions();
    assert_eq!(bound(&actions).len(), 1, "{actions:?}");
    let msgs = unschedulable(&actions);
    assert_eq!(msgs.len(), 1, "{actions:?}");
    assert!(
        msgs[0].contains(
            "1 cannot allocate claim default/c2: request gpu: 3 device(s) of class gpu.example.com wanted, 1 free"
        ),
        "{}",
        msgs[0]
    );
}

#[test]
fn a_missing_claim_holds_the_pod_at_the_gate_until_it_is_created() {
    let (mut e, t0) = cluster(&[2]);
    let p = claiming("a", "later");
    e.on_event(ClusterEvent::PodUpserted(arc(p.clone())), t0);
    e.run_until_idle(t0);
    let msgs = unschedulable(&e.drain_actions());
    assert!(
        msgs[0].contains("resourceclaim \"later\" not found"),
        "{msgs:?}"
    );
    // PreEnqueue: gated, never tried (no attempt, no backoff).
    assert_eq!(e.location(&p.key), Some(PodLocation::Gated));
    assert_eq!(e.queue().attempts(&p.key), 0);
    e.on_event(
        ClusterEvent::Dra(claim_upserted(gpu_claim("default", "later", 1))),
        t0,
    );
    assert_eq!(e.location(&p.key), Some(PodLocation::Active));
    e.run_until_idle(t0);
    assert_eq!(bound(&e.drain_actions()).len(), 1);
}

#[test]
fn a_template_claim_waits_for_the_controller_and_must_be_the_pods_own() {
    let (mut e, t0) = cluster(&[2]);
    let waiting = with_template_claim(pod("a", 100, 1), "gpus", None);
    e.on_event(ClusterEvent::PodUpserted(arc(waiting.clone())), t0);
    e.run_until_idle(t0);
    let msgs = unschedulable(&e.drain_actions());
    assert!(
        msgs[0].contains("to be created from its template"),
        "{msgs:?}"
    );
    // Generated for another pod: refused.
    let other = pod("other", 100, 1);
    e.on_event(
        ClusterEvent::Dra(claim_upserted(generated_claim(&other, "a-gpus", 1))),
        t0,
    );
    let generated = with_template_claim(pod("a", 100, 1), "gpus", Some("a-gpus"));
    e.on_event(ClusterEvent::PodUpserted(arc(generated.clone())), t0);
    e.run_until_idle(later(t0));
    let msgs = unschedulable(&e.drain_actions());
    assert!(
        msgs[0].contains("was not created for pod default/a"),
        "{msgs:?}"
    );
    e.on_event(
        ClusterEvent::Dra(claim_upserted(generated_claim(&generated, "a-gpus", 1))),
        t0,
    );
    e.run_until_idle(later(later(t0)));
    assert_eq!(bound(&e.drain_actions()).len(), 1);
}

#[test]
fn a_failed_binding_gives_the_devices_back_and_unreserves_its_claims() {
    let (mut e, t0) = cluster(&[2]);
    e.on_event(
        ClusterEvent::Dra(claim_upserted(gpu_claim("default", "c1", 2))),
        t0,
    );
    e.on_event(
        ClusterEvent::Dra(claim_upserted(gpu_claim("default", "c2", 2))),
        t0,
    );
    let a = claiming("a", "c1");
    let b = claiming("b", "c2");
    e.on_event(ClusterEvent::PodUpserted(arc(a.clone())), t0);
    e.run_until_idle(t0);
    assert_eq!(bound(&e.drain_actions()).len(), 1);
    e.on_event(ClusterEvent::PodUpserted(arc(b.clone())), t0);
    e.run_until_idle(t0);
    assert!(unschedulable(&e.drain_actions())[0].contains("2 device(s)"));
    e.on_event(
        ClusterEvent::BindFinished {
            pod: a.key.clone(),
            uid: a.uid.clone(),
            node: Arc::from("n0"),
            result: Err("conflict".into()),
        },
        t0,
    );
    let actions = e.drain_actions();
    assert!(
        actions
            .iter()
            .any(|x| matches!(x, Action::UnreserveClaims { pod, claims, .. }
            if *pod == a.key && claims[0].name.as_ref() == "c1")),
        "{actions:?}"
    );
    // The devices are free again: b, woken by the reservation given back,
    // competes for them with a, and one of the two gets them.
    assert_eq!(e.location(&b.key), Some(PodLocation::Backoff));
    e.run_until_idle(later(t0));
    assert_eq!(bound(&e.drain_actions()).len(), 1);
    assert!(e.cache().facts().dra.double_allocations().is_empty());
}

#[test]
fn an_allocated_claim_restricts_the_pod_to_where_its_devices_are() {
    let (mut e, t0) = cluster(&[2, 2]);
    let mut c = gpu_claim("default", "shared", 1);
    c.allocation = Some(crate::dra::Allocation {
        results: vec![crate::dra::model::Allocated {
            request: Arc::from("gpu"),
            device: crate::dra::DeviceId {
                driver: Arc::from("gpu.example.com"),
                pool: Arc::from("n1"),
                device: Arc::from("gpu-0"),
            },
            admin_access: false,
            share: None,
        }],
        reach: vec![crate::dra::Reach::Node(Arc::from("n1"))],
    });
    e.on_event(ClusterEvent::Dra(claim_upserted(c)), t0);
    e.on_event(ClusterEvent::PodUpserted(arc(claiming("a", "shared"))), t0);
    e.run_until_idle(t0);
    let b = bound(&e.drain_actions());
    // Bound to n1, with the reservation only (the allocation is recorded).
    assert_eq!(b, [("a".into(), "n1".into(), vec![])]);
    // Deleting the node the devices are on leaves the next pod nowhere.
    e.on_event(ClusterEvent::NodeDeleted(Arc::from("n1")), t0);
    e.on_event(ClusterEvent::PodUpserted(arc(claiming("b", "shared"))), t0);
    e.run_until_idle(t0);
    let msgs = unschedulable(&e.drain_actions());
    assert!(
        msgs[0].contains("resourceclaim not available on the node"),
        "{msgs:?}"
    );
}

#[test]
fn a_claim_deleted_under_a_binding_is_held_until_the_outcome() {
    let (mut e, t0) = cluster(&[2]);
    e.on_event(
        ClusterEvent::Dra(claim_upserted(gpu_claim("default", "c", 1))),
        t0,
    );
    let p = claiming("a", "c");
    e.on_event(ClusterEvent::PodUpserted(arc(p.clone())), t0);
    // Deleted while the binding that writes it is in flight: its devices
    // stay held until the binding's outcome (the write may yet land), then
    // are given back with the failure.
    e.schedule_one(t0);
    assert_eq!(bound(&e.drain_actions()).len(), 1);
    e.on_event(ClusterEvent::Dra(claim_deleted("default", "c")), t0);
    assert_eq!(e.cache().facts().dra.assumed_all().count(), 1);
    e.on_event(
        ClusterEvent::BindFinished {
            pod: p.key.clone(),
            uid: p.uid.clone(),
            node: Arc::from("n0"),
            result: Err("resourceclaims \"c\" not found".into()),
        },
        t0,
    );
    assert!(e.cache().facts().dra.assumed_all().next().is_none());
}

/// `c` (one GPU on n0) allocated, reserved for `users`, being deleted.
fn deleting_claim(name: &str, users: &[&PodInfo]) -> crate::dra::Claim {
    let mut c = gpu_claim("default", name, 1);
    c.allocation = Some(crate::dra::Allocation {
        results: vec![crate::dra::model::Allocated {
            request: Arc::from("gpu"),
            device: crate::dra::DeviceId {
                driver: Arc::from("gpu.example.com"),
                pool: Arc::from("n0"),
                device: Arc::from("gpu-0"),
            },
            admin_access: false,
            share: None,
        }],
        reach: vec![crate::dra::Reach::Node(Arc::from("n0"))],
    });
    c.reserved_for = users
        .iter()
        .map(|p| crate::dra::Consumer {
            api_group: Arc::from(""),
            resource: Arc::from("pods"),
            name: p.key.name.clone(),
            uid: p.uid.clone(),
        })
        .collect();
    c.deleting = true;
    c
}

fn unreserved(actions: &[Action]) -> Vec<(String, Vec<String>)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::UnreserveClaims { pod, claims, .. } => Some((
                pod.name.to_string(),
                claims.iter().map(|c| c.name.to_string()).collect(),
            )),
            _ => None,
        })
        .collect()
}

/// A claim being deleted while still reserved for a pending pod (its
/// binding failed after the claim writes, and the write taking the pod
/// out failed too, or the scheduler stopped in between): the pod is taken
/// out of `reservedFor`, so the resourceclaim controller can deallocate
/// the claim, remove its finalizer and let it go; the pod is not bound
/// with it. A bound pod's reservation, and one whose binding is in
/// flight, are left alone: the finalizer keeps the claim for them.
#[test]
fn a_pending_pod_is_taken_out_of_a_claim_being_deleted() {
    let (mut e, t0) = cluster(&[2]);
    // The claim seen after the pod.
    let a = claiming("a", "c");
    let mut done = claiming("done", "c");
    done.node_name = Some(Arc::from("n0"));
    e.on_event(ClusterEvent::PodUpserted(arc(a.clone())), t0);
    e.on_event(ClusterEvent::PodUpserted(arc(done.clone())), t0);
    e.drain_actions();
    e.on_event(
        ClusterEvent::Dra(claim_upserted(deleting_claim("c", &[&a, &done]))),
        t0,
    );
    let actions = e.drain_actions();
    assert_eq!(
        unreserved(&actions),
        [("a".into(), vec!["c".into()])],
        "{actions:?}"
    );
    e.run_until_idle(later(t0));
    let actions = e.drain_actions();
    assert!(bound(&actions).is_empty(), "{actions:?}");
    assert_eq!(e.location(&a.key), Some(PodLocation::Gated));

    // The claim seen before the pod (a scheduler starting).
    let b = claiming("b", "d");
    e.on_event(
        ClusterEvent::Dra(claim_upserted(deleting_claim("d", &[&b]))),
        t0,
    );
    assert!(unreserved(&e.drain_actions()).is_empty());
    e.on_event(ClusterEvent::PodUpserted(arc(b.clone())), t0);
    assert_eq!(
        unreserved(&e.drain_actions()),
        [("b".into(), vec!["d".into()])]
    );

    // A pod of another scheduler is not ours to take out.
    let mut other = claiming("other", "f");
    other.scheduler_name = Arc::from("someone-else");
    e.on_event(ClusterEvent::PodUpserted(arc(other.clone())), t0);
    e.on_event(
        ClusterEvent::Dra(claim_upserted(deleting_claim("f", &[&other]))),
        t0,
    );
    assert!(unreserved(&e.drain_actions()).is_empty());
}

#[test]
fn a_claim_deleted_under_a_binding_in_flight_keeps_its_reservation() {
    let (mut e, t0) = cluster(&[2]);
    e.on_event(
        ClusterEvent::Dra(claim_upserted(gpu_claim("default", "c", 1))),
        t0,
    );
    let p = claiming("a", "c");
    e.on_event(ClusterEvent::PodUpserted(arc(p.clone())), t0);
    e.schedule_one(t0);
    assert_eq!(bound(&e.drain_actions()).len(), 1);
    // The binding's claim write is observed, then the claim is deleted:
    // the binding may still succeed, so the reservation stays.
    e.on_event(
        ClusterEvent::Dra(claim_upserted(deleting_claim("c", &[&p]))),
        t0,
    );
    assert!(unreserved(&e.drain_actions()).is_empty());
}

#[test]
fn a_pod_whose_template_claim_is_generated_passes_the_gate() {
    let (mut e, t0) = cluster(&[2]);
    let waiting = with_template_claim(pod("a", 100, 1), "gpus", None);
    e.on_event(ClusterEvent::PodUpserted(arc(waiting.clone())), t0);
    // The controller creates the claim before the pod's status names it:
    // the retry this wakes still finds nothing to use.
    e.on_event(
        ClusterEvent::Dra(claim_upserted(generated_claim(&waiting, "a-gpus", 1))),
        t0,
    );
    e.run_until_idle(later(t0));
    assert_eq!(e.location(&waiting.key), Some(PodLocation::Gated));
    // The status update is what lets it through the gate.
    let generated = with_template_claim(pod("a", 100, 1), "gpus", Some("a-gpus"));
    e.on_event(ClusterEvent::PodUpserted(arc(generated)), later(t0));
    assert_ne!(e.location(&waiting.key), Some(PodLocation::Unschedulable));
    e.run_until_idle(later(later(t0)));
    assert_eq!(bound(&e.drain_actions()).len(), 1);
}

/// A pod asking for an extended resource a class serves: its binding
/// carries the extended-resource claim to create, with the devices
/// planned at Reserve and the request mappings; the next pod finds them
/// held; a failed binding gives them back.
#[test]
fn an_extended_resource_is_bound_with_its_claim_and_its_devices_are_held() {
    use crate::driver::dra_fixtures::{gpu_class_serving, with_extended};
    let (mut e, t0) = cluster(&[2]);
    e.on_event(ClusterEvent::Dra(gpu_class_serving("example.com/gpu")), t0);
    let a = with_extended(pod("a", 100, 1), "example.com/gpu", 2);
    e.on_event(ClusterEvent::PodUpserted(arc(a.clone())), t0);
    e.run_until_idle(t0);
    let actions = e.drain_actions();
    assert_eq!(
        bound(&actions),
        [(
            "a".into(),
            "n0".into(),
            vec![
                "gpu.example.com/n0/gpu-0".into(),
                "gpu.example.com/n0/gpu-1".into()
            ]
        )]
    );
    let Some(Action::Bind { claims, .. }) =
        actions.iter().find(|x| matches!(x, Action::Bind { .. }))
    else {
        unreachable!()
    };
    let x = claims[0].extended.as_ref().expect("the claim to create");
    assert_eq!(&*x.pod_name, "a");
    assert_eq!(&*x.requests[0].name, "container-0-request-0");
    assert_eq!(x.requests[0].count, 2);
    assert_eq!(&*x.mappings[0].resource, "example.com/gpu");
    // The next pod finds the devices held.
    let b = with_extended(pod("b", 100, 1), "example.com/gpu", 1);
    e.on_event(ClusterEvent::PodUpserted(arc(b.clone())), t0);
    e.run_until_idle(t0);
    let msgs = unschedulable(&e.drain_actions());
    assert!(
        msgs[0].contains(
            "1 cannot allocate extended resource example.com/gpu: 1 device(s) of class gpu.example.com wanted, 0 free"
        ),
        "{msgs:?}"
    );
    // a's binding fails: its devices are free again and b gets one.
    e.on_event(
        ClusterEvent::BindFinished {
            pod: a.key.clone(),
            uid: a.uid.clone(),
            node: Arc::from("n0"),
            result: Err("conflict".into()),
        },
        t0,
    );
    e.drain_actions();
    assert_eq!(e.cache().facts().dra.devices_in_use(), 0);
    e.run_until_idle(later(t0));
    assert!(!bound(&e.drain_actions()).is_empty());
    assert!(e.cache().facts().dra.double_allocations().is_empty());
}

#[test]
fn a_node_that_can_give_the_first_subrequest_is_preferred() {
    use crate::driver::dra_fixtures::claim_from;
    // n0 has four GPUs, n1 two: both can give the second subrequest, only
    // n0 the first.
    let (mut e, t0) = cluster(&[4, 2]);
    let c = claim_from(serde_json::json!({
        "metadata": {"name": "c", "namespace": "default", "uid": "uid-claim-c"},
        "spec": {"devices": {"requests": [{"name": "gpus", "firstAvailable": [
            {"name": "four", "deviceClassName": "gpu.example.com", "count": 4},
            {"name": "two", "deviceClassName": "gpu.example.com", "count": 2},
        ]}]}},
    }));
    e.on_event(ClusterEvent::Dra(claim_upserted(c)), t0);
    e.on_event(ClusterEvent::PodUpserted(arc(claiming("train", "c"))), t0);
    e.run_until_idle(t0);
    let binds = bound(&e.drain_actions());
    assert_eq!(binds.len(), 1, "{binds:?}");
    assert_eq!(binds[0].1, "n0");
    assert_eq!(binds[0].2.len(), 4);
}
