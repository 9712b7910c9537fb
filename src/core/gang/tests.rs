use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::driver::fixtures::{SCHEDULER, arc, gang_def, group_key, member, node, pod};
use crate::framework::lifecycle::{PermitVerdict, Verdict};
use crate::model::{GroupMembership, PodInfo};

struct Fixture {
    gang: GangScheduling,
    cache: Cache,
    t0: Instant,
}

fn fixture() -> Fixture {
    let mut cache = Cache::new([Arc::from(SCHEDULER)]);
    for i in 0..4 {
        cache.upsert_node(arc(node(&format!("n{i}"), 4000, 16)));
    }
    Fixture {
        gang: GangScheduling::new(
            GangArgs {
                dialect_timeouts: DialectTimeouts::UNIFORM,
                ..GangArgs::default()
            },
            HashMap::new(),
        ),
        cache,
        t0: Instant::now(),
    }
}

impl Fixture {
    /// Adds a member to the cache, assumes it on node `i` and runs Permit.
    fn arrive(&mut self, p: PodInfo, node_index: usize, now: Instant) -> PermitVerdict {
        let p = arc(p);
        self.cache.upsert_pod(p.clone());
        self.cache.assume(&p.key, node_index).unwrap();
        self.gang.permit(&p, &Arc::from("n"), &self.cache, now)
    }
}

#[test]
fn gate_messages() {
    let mut f = fixture();
    let g = group_key("pg");
    let m = member("m0", &g, 100, 1);
    let gate = |f: &Fixture, p: &PodInfo| f.gang.pre_enqueue(p, &f.cache).map_err(|g| g.message);
    assert_eq!(gate(&f, &pod("plain", 1, 1)), Ok(()));
    assert_eq!(
        gate(&f, &m),
        Err("waiting for PodGroup default/pg to be created".into())
    );
    f.gang.upsert_def(gang_def("pg", 2, 5));
    f.cache.upsert_pod(arc(m.clone()));
    assert_eq!(
        gate(&f, &m),
        Err("waiting for 1/2 pods of PodGroup default/pg".into())
    );
    f.cache.upsert_pod(arc(member("m1", &g, 100, 1)));
    assert_eq!(gate(&f, &m), Ok(()));
    let mut gated = m.clone();
    gated.scheduling_gates = std::sync::Arc::from([std::sync::Arc::from("example.com/hold")]);
    assert!(gate(&f, &gated).is_err());
    let mut invalid = pod("bad", 1, 1);
    invalid.group = GroupMembership::Invalid("x".into());
    assert_eq!(gate(&f, &invalid), Err("invalid group reference: x".into()));
}

#[test]
fn queue_order_uses_the_group_creation_time() {
    let mut f = fixture();
    let g = group_key("pg");
    f.gang.upsert_def(gang_def("pg", 2, 42));
    let mut m = member("m0", &g, 100, 1);
    m.created_ms = 1000;
    assert_eq!(f.gang.order_key(&m).group_created_ms, 42);
    assert_eq!(
        f.gang.order_key(&pod("p", 1, 1)).group,
        crate::queue::QueueGroup::Pod(crate::model::PodKey::new("default", "p"))
    );
}

#[test]
fn barrier_waits_then_releases_everyone_at_quorum() {
    let mut f = fixture();
    let g = group_key("pg");
    f.gang.upsert_def(gang_def("pg", 3, 1));
    let t0 = f.t0;
    assert_eq!(
        f.arrive(member("a", &g, 100, 1), 0, t0),
        PermitVerdict::Wait
    );
    assert_eq!(f.gang.deadline(&g), Some(t0 + Duration::from_secs(60)));
    assert_eq!(
        f.arrive(member("b", &g, 100, 1), 1, t0),
        PermitVerdict::Wait
    );
    assert_eq!(
        f.arrive(member("c", &g, 100, 1), 2, t0),
        PermitVerdict::Allow
    );
    let decided = f.gang.take_decided();
    assert_eq!(decided.len(), 2);
    assert!(decided.iter().all(|(_, v)| *v == Verdict::Allowed));
    assert_eq!(f.gang.deadline(&g), None, "timer cleared once nobody waits");
    assert!(matches!(
        f.gang.take_notices().as_slice(),
        [GangNotice::Released { allowed, quorum: 3, .. }] if allowed.len() == 3
    ));
    // A later member passes straight through.
    assert_eq!(
        f.arrive(member("d", &g, 100, 1), 3, t0),
        PermitVerdict::Allow
    );
}

#[test]
fn timeout_rejects_every_waiting_member() {
    let mut f = fixture();
    let g = group_key("pg");
    let mut def = gang_def("pg", 3, 1);
    def.policy = Ok(GroupPolicy::Gang {
        min_count: 3,
        schedule_timeout: Some(Duration::from_secs(10)),
    });
    f.gang.upsert_def(def);
    let t0 = f.t0;
    f.arrive(member("a", &g, 100, 1), 0, t0);
    f.arrive(member("b", &g, 100, 1), 1, t0 + Duration::from_secs(5));
    assert_eq!(f.gang.next_deadline(), Some(t0 + Duration::from_secs(10)));
    f.gang.expire(t0 + Duration::from_secs(9), &f.cache);
    assert_eq!(f.gang.waiting().len(), 2);
    f.gang.expire(t0 + Duration::from_secs(10), &f.cache);
    let decided = f.gang.take_decided();
    assert_eq!(decided.len(), 2);
    assert!(
        decided
            .iter()
            .all(|(_, v)| matches!(v, Verdict::Rejected(r) if r.reason == "FailedScheduling" && r.message.contains("timed out")))
    );
    assert_eq!(f.gang.next_deadline(), None);
}

#[test]
fn early_release_rejects_waiting_and_denies_the_group() {
    let mut f = fixture();
    let g = group_key("pg");
    f.gang.upsert_def(gang_def("pg", 3, 1));
    let t0 = f.t0;
    f.arrive(member("a", &g, 100, 1), 0, t0);
    let failing = member("c", &g, 100, 1);
    f.gang.post_filter(
        &failing,
        &Refusal::new("FailedScheduling", "0/4 nodes are available."),
        &f.cache,
        t0,
    );
    assert_eq!(f.gang.take_decided().len(), 1);
    assert_eq!(
        f.gang.denied_until(&failing, t0),
        Some(t0 + Duration::from_secs(5))
    );
    assert_eq!(
        f.gang.pre_filter(&failing, &f.cache, t0),
        PreFilterVerdict::HoldUntil(t0 + Duration::from_secs(5))
    );
    assert_eq!(
        f.gang
            .pre_filter(&failing, &f.cache, t0 + Duration::from_secs(5)),
        PreFilterVerdict::Proceed
    );
}

#[test]
fn post_filter_after_quorum_leaves_the_gang_alone() {
    let mut f = fixture();
    let g = group_key("pg");
    f.gang.upsert_def(gang_def("pg", 1, 1));
    let t0 = f.t0;
    assert_eq!(
        f.arrive(member("a", &g, 100, 1), 0, t0),
        PermitVerdict::Allow
    );
    let extra = member("b", &g, 100, 1);
    f.gang
        .post_filter(&extra, &Refusal::new("FailedScheduling", "x"), &f.cache, t0);
    assert_eq!(f.gang.denied_until(&extra, t0), None);
}

#[test]
fn reevaluate_releases_on_lower_min_and_rejects_on_deleted_definition() {
    let mut f = fixture();
    let (g, h) = (group_key("pg"), group_key("other"));
    f.gang.upsert_def(gang_def("pg", 3, 1));
    f.gang.upsert_def(gang_def("other", 3, 1));
    let t0 = f.t0;
    f.arrive(member("a", &g, 100, 1), 0, t0);
    f.arrive(member("b", &h, 100, 1), 1, t0);
    assert_eq!(f.gang.upsert_def(gang_def("pg", 1, 1)), DefChange::Changed);
    f.gang.reevaluate(&g, &f.cache);
    assert!(matches!(
        f.gang.take_decided().as_slice(),
        [(_, Verdict::Allowed)]
    ));
    f.gang.remove_def(&h.definition);
    f.gang.reevaluate(&h, &f.cache);
    assert!(matches!(
        f.gang.take_decided().as_slice(),
        [(_, Verdict::Rejected(_))]
    ));
}

#[test]
fn absent_workload_entry_names_the_workload_once_it_is_observed() {
    use crate::model::{DefinitionKey, GroupDef, GroupSource};
    let mut gang = GangScheduling::new(GangArgs::default(), HashMap::new());
    let workers = DefinitionKey::new("ml", GroupSource::Workload, "training/workers");
    let driver = DefinitionKey::new("ml", GroupSource::Workload, "training/driver");
    assert_eq!(
        gang.absent_message(&workers),
        "waiting for Workload ml/training podGroup \"workers\" to be created"
    );
    gang.upsert_def(GroupDef::gang(driver.clone(), 1, 0));
    assert_eq!(
        gang.absent_message(&workers),
        "Workload ml/training has no podGroup \"workers\""
    );
    assert!(gang.remove_def(&driver));
    assert_eq!(
        gang.absent_message(&workers),
        "waiting for Workload ml/training podGroup \"workers\" to be created",
        "the Workload is gone with its last entry"
    );
    let plain = DefinitionKey::new("default", GroupSource::Volcano, "job");
    assert_eq!(
        gang.absent_message(&plain),
        "waiting for PodGroup.scheduling.volcano.sh default/job to be created"
    );
}

fn task_member(name: &str, g: &crate::model::GroupKey, task: &str) -> PodInfo {
    let mut p = member(name, g, 100, 1);
    p.annotations
        .insert(crate::model::TASK_ANNOTATION.into(), task.into());
    p
}

#[test]
fn min_task_members_hold_the_gate_and_the_barrier() {
    let mut f = fixture();
    let g = group_key("job");
    let mut def = gang_def("job", 2, 1);
    def.policy = Ok(GroupPolicy::Gang {
        min_count: 2,
        schedule_timeout: Some(Duration::from_secs(10)),
    });
    def.min_task_members = [("ps".to_string(), 1), ("worker".to_string(), 2)].into();
    f.gang.upsert_def(def);
    let gate = |f: &Fixture, p: &PodInfo| f.gang.pre_enqueue(p, &f.cache).map_err(|g| g.message);
    let w0 = task_member("w0", &g, "worker");
    f.cache.upsert_pod(arc(w0.clone()));
    f.cache.upsert_pod(arc(task_member("w1", &g, "worker")));
    // Two members observed (minMember), but no "ps" yet.
    assert_eq!(
        gate(&f, &w0),
        Err(
            "waiting for pods of PodGroup default/job: task \"ps\": 0/1 observed (spec.minTaskMember)"
                .into()
        )
    );
    f.cache.upsert_pod(arc(task_member("ps0", &g, "ps")));
    assert_eq!(gate(&f, &w0), Ok(()));

    // Two workers assumed: minMember is met, the "ps" task is not.
    let t0 = f.t0;
    assert_eq!(f.arrive(w0, 0, t0), PermitVerdict::Wait);
    assert_eq!(
        f.arrive(task_member("w1", &g, "worker"), 1, t0),
        PermitVerdict::Wait
    );
    f.gang.expire(t0 + Duration::from_secs(10), &f.cache);
    assert!(matches!(
        f.gang.take_notices().as_slice(),
        [GangNotice::TimedOut { message, .. }]
            if message.ends_with("2/2 members assumed or bound (task \"ps\": 0/1 per spec.minTaskMember)")
    ));
}

#[test]
fn the_last_task_member_releases_the_gang() {
    let mut f = fixture();
    let g = group_key("job");
    let mut def = gang_def("job", 2, 1);
    def.min_task_members = [("ps".to_string(), 1)].into();
    f.gang.upsert_def(def);
    let t0 = f.t0;
    assert_eq!(
        f.arrive(task_member("w0", &g, "worker"), 0, t0),
        PermitVerdict::Wait
    );
    assert_eq!(
        f.arrive(task_member("w1", &g, "worker"), 1, t0),
        PermitVerdict::Wait
    );
    assert_eq!(
        f.arrive(task_member("ps0", &g, "ps"), 2, t0),
        PermitVerdict::Allow
    );
    assert_eq!(f.gang.take_decided().len(), 2);
}

#[test]
fn definition_priority_orders_members_without_their_own() {
    let mut f = fixture();
    let g = group_key("job");
    let mut def = gang_def("job", 2, 1);
    def.priority = Some(500);
    f.gang.upsert_def(def);
    assert_eq!(f.gang.order_key(&member("m", &g, 100, 1)).priority, 500);
    // A Workload API PodGroup's priority is authoritative (KEP-5710).
    let mut own = member("own", &g, 100, 1);
    own.priority = 7;
    assert_eq!(f.gang.order_key(&own).priority, 500);
    let mut classed = member("classed", &g, 100, 1);
    classed.priority_class_name = Some(Arc::from("low"));
    assert_eq!(f.gang.order_key(&classed).priority, 500);

    // Other dialects: the definition only stands in for a member without one.
    let vk = DefinitionKey::new("default", crate::model::GroupSource::Volcano, "vc");
    let mut vdef = GroupDef::gang(vk.clone(), 2, 1);
    vdef.priority = Some(300);
    f.gang.upsert_def(vdef);
    let vg = GroupKey::new(vk);
    assert_eq!(f.gang.order_key(&member("v", &vg, 100, 1)).priority, 300);
    let mut vown = member("vown", &vg, 100, 1);
    vown.priority = 7;
    assert_eq!(f.gang.order_key(&vown).priority, 7);
    let mut vclassed = member("vclassed", &vg, 100, 1);
    vclassed.priority_class_name = Some(Arc::from("low"));
    assert_eq!(
        f.gang.order_key(&vclassed).priority,
        0,
        "a member naming its own class keeps its priority"
    );
}

/// A definition asking for `i64::MAX` seconds (or more) must
/// not panic the barrier ("overflow when adding duration to instant"), nor
/// may the configured backoff; the deadline saturates instead.
#[test]
fn a_huge_timeout_or_backoff_never_overflows_an_instant() {
    for timeout in [Duration::from_secs(i64::MAX as u64), Duration::MAX] {
        let mut f = fixture();
        let args = GangArgs {
            permit_waiting_time: Duration::MAX,
            group_backoff: Duration::MAX,
            dialect_timeouts: DialectTimeouts::UNIFORM,
            ..GangArgs::default()
        };
        f.gang = GangScheduling::new(args, HashMap::new());
        let g = group_key("pg");
        let mut def = gang_def("pg", 3, 1);
        def.policy = Ok(GroupPolicy::Gang {
            min_count: 3,
            schedule_timeout: Some(timeout),
        });
        f.gang.upsert_def(def);
        let t0 = f.t0;
        assert_eq!(
            f.arrive(member("a", &g, 100, 1), 0, t0),
            PermitVerdict::Wait
        );
        let deadline = f.gang.next_deadline().unwrap();
        assert!(deadline > t0 + Duration::from_secs(365 * 24 * 3600));
        f.gang.expire(t0, &f.cache);
        assert_eq!(f.gang.waiting().len(), 1, "not expired");
        // An unschedulable member: the backoff is added to `now` as well.
        let b = arc(member("b", &g, 100, 1));
        f.cache.upsert_pod(b.clone());
        let refusal = crate::framework::lifecycle::Refusal::new("Unschedulable", "no fit");
        f.gang.post_filter(&b, &refusal, &f.cache, t0);
        assert!(f.gang.take_decided().len() == 1);
    }
}

#[test]
fn a_basic_group_is_reported_scheduled_with_its_first_member() {
    let mut f = fixture();
    let g = group_key("pg");
    let key =
        crate::model::DefinitionKey::new("default", crate::model::GroupSource::PodGroup, "pg");
    f.gang
        .upsert_def(GroupDef::new(key, Ok(GroupPolicy::Basic), 1));
    let t0 = f.t0;
    assert_eq!(
        f.arrive(member("a", &g, 100, 1), 0, t0),
        PermitVerdict::Allow
    );
    assert!(matches!(
        &f.gang.take_notices()[..],
        [GangNotice::Released { group, quorum: 1, .. }] if *group == g
    ));
}

#[test]
fn a_gang_without_a_timeout_waits_its_dialects_default() {
    let mut f = fixture();
    f.gang = GangScheduling::new(GangArgs::default(), HashMap::new());
    let g = group_key("pg");
    f.gang.upsert_def(gang_def("pg", 2, 1));
    let t0 = f.t0;
    assert_eq!(
        f.arrive(member("a", &g, 100, 1), 0, t0),
        PermitVerdict::Wait
    );
    assert_eq!(
        f.gang.deadline(&g),
        Some(t0 + Duration::from_secs(300)),
        "the Workload API's 5 minutes"
    );
}

/// Kueue's preferred topology: the gang is confined to the best domain when
/// one has room; with none big enough it goes anywhere instead of being
/// refused (a required topology is refused).
#[test]
fn a_preferred_topology_confines_when_it_can_and_spills_when_it_cannot() {
    use crate::framework::lifecycle::PreFilterVerdict;
    const RACK: &str = "topology.kubernetes.io/rack";
    let mut cache = Cache::new([Arc::from(SCHEDULER)]);
    for (name, rack) in [("a0", "r1"), ("a1", "r1"), ("b0", "r2")] {
        let mut n = node(name, 4000, 16);
        n.labels.insert(RACK.into(), rack.into());
        cache.upsert_node(arc(n));
    }
    let verdict = |min_count: u32, preferred: bool| {
        let mut gang = GangScheduling::new(GangArgs::default(), HashMap::new());
        let mut def = gang_def("pg", min_count, 1);
        if preferred {
            def.topology.preferred = Some(crate::model::LevelRef::Label(RACK.into()));
        } else {
            def.topology.required = Some(crate::model::LevelRef::Label(RACK.into()));
        }
        gang.upsert_def(def);
        let m = member("m0", &group_key("pg"), 4000, 1);
        gang.pre_filter(&m, &cache, Instant::now())
    };
    // Two members of a whole node fit rack r1 only: confined there.
    assert!(matches!(verdict(2, true), PreFilterVerdict::Restrict(_)));
    assert!(matches!(verdict(2, false), PreFilterVerdict::Restrict(_)));
    // Three fit no rack: a preferred topology spills, a required one refuses.
    assert!(matches!(verdict(3, true), PreFilterVerdict::Proceed));
    assert!(matches!(verdict(3, false), PreFilterVerdict::Refuse(_)));
}

#[path = "composite_tests.rs"]
mod composite_tests;
