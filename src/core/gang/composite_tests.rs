//! CompositePodGroup hierarchies: gate, barrier, timeout, early release and
//! malformed hierarchies.

use super::*;
use crate::model::{GroupSource, MAX_HIERARCHY_DEPTH};

fn composite(name: &str, min_group_count: Option<u32>, parent: Option<&str>) -> GroupDef {
    let key = DefinitionKey::new("default", GroupSource::CompositePodGroup, name);
    let policy = match min_group_count {
        Some(n) => Ok(GroupPolicy::Gang {
            min_count: n,
            schedule_timeout: Some(Duration::from_secs(10)),
        }),
        None => Ok(GroupPolicy::Basic),
    };
    let mut def = GroupDef::new(key, policy, 1);
    def.extras.parent_composite = parent.map(str::to_string);
    def
}

fn child(name: &str, min_count: u32, parent: &str) -> GroupDef {
    let mut def = gang_def(name, min_count, 1);
    def.extras.parent_composite = Some(parent.to_string());
    def
}

/// A gang composite `job` (minGroupCount 2) over PodGroups `a` and `b`
/// of two members each.
fn two_children() -> Fixture {
    let mut f = fixture();
    f.gang.upsert_def(composite("job", Some(2), None));
    f.gang.upsert_def(child("a", 2, "job"));
    f.gang.upsert_def(child("b", 2, "job"));
    f
}

fn gate(f: &Fixture, p: &PodInfo) -> Result<(), String> {
    f.gang.pre_enqueue(p, &f.cache).map_err(|g| g.message)
}

#[test]
fn the_gate_waits_for_min_group_count_children_at_quorum() {
    let mut f = two_children();
    let (a, b) = (group_key("a"), group_key("b"));
    let a0 = member("a0", &a, 100, 1);
    f.cache.upsert_pod(arc(a0.clone()));
    assert_eq!(
        gate(&f, &a0),
        Err("waiting for 1/2 pods of PodGroup default/a".into())
    );
    f.cache.upsert_pod(arc(member("a1", &a, 100, 1)));
    assert_eq!(
        gate(&f, &a0),
        Err("waiting for CompositePodGroup default/job: 1/2 child groups have their quorum of pods observed (minGroupCount)".into())
    );
    f.cache.upsert_pod(arc(member("b0", &b, 100, 1)));
    f.cache.upsert_pod(arc(member("b1", &b, 100, 1)));
    assert_eq!(gate(&f, &a0), Ok(()));
    assert_eq!(f.gang.barrier_scope(&a), Some(vec![a.clone(), b.clone()]));
}

#[test]
fn one_child_short_releases_nothing_both_release_all() {
    let mut f = two_children();
    let (a, b) = (group_key("a"), group_key("b"));
    let t0 = f.t0;
    assert_eq!(
        f.arrive(member("a0", &a, 100, 1), 0, t0),
        PermitVerdict::Wait
    );
    // Child a reaches its own quorum: still held for the composite.
    assert_eq!(
        f.arrive(member("a1", &a, 100, 1), 1, t0),
        PermitVerdict::Wait
    );
    assert_eq!(
        f.arrive(member("b0", &b, 100, 1), 2, t0),
        PermitVerdict::Wait
    );
    assert!(f.gang.take_decided().is_empty());
    assert_eq!(f.gang.take_notices(), vec![]);
    // The last member of b completes the composite: everyone goes.
    assert_eq!(
        f.arrive(member("b1", &b, 100, 1), 3, t0),
        PermitVerdict::Allow
    );
    let decided = f.gang.take_decided();
    assert_eq!(decided.len(), 3);
    assert!(decided.iter().all(|(_, v)| *v == Verdict::Allowed));
    assert_eq!(f.gang.next_deadline(), None);
    let released: Vec<String> = f
        .gang
        .take_notices()
        .iter()
        .filter_map(|n| match n {
            GangNotice::Released { group, .. } => Some(group.to_string()),
            _ => None,
        })
        .collect();
    assert!(
        released.contains(&"PodGroup default/a".to_string()),
        "{released:?}"
    );
    assert!(
        released.contains(&"PodGroup default/b".to_string()),
        "{released:?}"
    );
    assert!(
        released.contains(&"CompositePodGroup default/job".to_string()),
        "{released:?}"
    );
}

#[test]
fn a_timeout_releases_every_child_back() {
    let mut f = two_children();
    let (a, b) = (group_key("a"), group_key("b"));
    let t0 = f.t0;
    f.arrive(member("a0", &a, 100, 1), 0, t0);
    f.arrive(member("a1", &a, 100, 1), 1, t0);
    f.arrive(member("b0", &b, 100, 1), 2, t0 + Duration::from_secs(5));
    // The composite's timeout (10 s) applies to children without their own.
    assert_eq!(f.gang.next_deadline(), Some(t0 + Duration::from_secs(10)));
    f.gang.expire(t0 + Duration::from_secs(10), &f.cache);
    let decided = f.gang.take_decided();
    assert_eq!(decided.len(), 3, "both children's members are sent back");
    assert!(decided.iter().all(|(_, v)| matches!(v, Verdict::Rejected(r)
        if r.message == "PodGroup default/a timed out waiting at permit: CompositePodGroup default/job: 1/2 child groups have their quorum assumed or bound (minGroupCount)")));
    assert_eq!(f.gang.next_deadline(), None);
    assert!(f.gang.take_notices().iter().any(|n| matches!(n,
        GangNotice::TimedOut { group, .. } if group.definition.source == GroupSource::CompositePodGroup)));
}

#[test]
fn an_unschedulable_member_releases_every_child_early() {
    let mut f = two_children();
    let (a, b) = (group_key("a"), group_key("b"));
    let t0 = f.t0;
    f.arrive(member("a0", &a, 100, 1), 0, t0);
    f.arrive(member("a1", &a, 100, 1), 1, t0);
    let failing = member("b0", &b, 100, 1);
    f.gang.post_filter(
        &failing,
        &Refusal::new("FailedScheduling", "0/4 nodes are available."),
        &f.cache,
        t0,
    );
    let decided = f.gang.take_decided();
    assert_eq!(decided.len(), 2);
    assert!(decided.iter().all(|(_, v)| matches!(v, Verdict::Rejected(r)
        if r.message.starts_with("CompositePodGroup default/job released early: member default/b0 of PodGroup default/b"))));
    assert!(f.gang.denied_until(&member("a0", &a, 100, 1), t0).is_some());
}

#[test]
fn a_basic_composite_imposes_nothing() {
    let mut f = fixture();
    f.gang.upsert_def(composite("job", None, None));
    f.gang.upsert_def(child("a", 1, "job"));
    let a = group_key("a");
    assert_eq!(f.gang.barrier_scope(&a), None);
    let a0 = member("a0", &a, 100, 1);
    f.cache.upsert_pod(arc(a0.clone()));
    assert_eq!(gate(&f, &a0), Ok(()));
    assert_eq!(f.arrive(a0, 0, f.t0), PermitVerdict::Allow);
}

#[test]
fn nested_gang_composites_span_the_topmost() {
    let mut f = fixture();
    f.gang.upsert_def(composite("root", Some(2), None));
    f.gang.upsert_def(composite("x", Some(1), Some("root")));
    f.gang.upsert_def(child("a", 1, "x"));
    f.gang.upsert_def(child("b", 1, "root"));
    let (a, b) = (group_key("a"), group_key("b"));
    assert_eq!(f.gang.barrier_scope(&a), Some(vec![b.clone(), a.clone()]));
    let t0 = f.t0;
    assert_eq!(
        f.arrive(member("a0", &a, 100, 1), 0, t0),
        PermitVerdict::Wait
    );
    assert_eq!(
        f.arrive(member("b0", &b, 100, 1), 1, t0),
        PermitVerdict::Allow
    );
    assert_eq!(f.gang.take_decided().len(), 1);
    assert_eq!(
        f.gang.hierarchy_affected(&DefinitionKey::new(
            "default",
            GroupSource::CompositePodGroup,
            "x"
        )),
        vec![
            crate::driver::fixtures::def_key("a"),
            crate::driver::fixtures::def_key("b")
        ]
    );
}

#[test]
fn malformed_hierarchies_are_refused_precisely() {
    let mut f = fixture();
    let a = group_key("a");
    let a0 = member("a0", &a, 100, 1);
    f.cache.upsert_pod(arc(a0.clone()));
    f.gang.upsert_def(child("a", 1, "job"));
    assert_eq!(
        gate(&f, &a0),
        Err("waiting for CompositePodGroup default/job (the parent of PodGroup default/a) to be created; parent names are namespace-local, so it must be in namespace default".into())
    );
    // A parent of that name in another namespace is not the parent.
    let mut elsewhere = composite("job", Some(1), None);
    elsewhere.key = DefinitionKey::new("other", GroupSource::CompositePodGroup, "job");
    f.gang.upsert_def(elsewhere);
    assert!(
        gate(&f, &a0)
            .unwrap_err()
            .starts_with("waiting for CompositePodGroup default/job")
    );
    // A cycle.
    f.gang.upsert_def(composite("job", Some(1), Some("loop")));
    f.gang.upsert_def(composite("loop", Some(1), Some("job")));
    assert_eq!(
        gate(&f, &a0),
        Err("the CompositePodGroup hierarchy of PodGroup default/a has a cycle: PodGroup default/a -> CompositePodGroup default/job -> CompositePodGroup default/loop -> CompositePodGroup default/job".into())
    );
    assert!(matches!(
        f.arrive(a0.clone(), 0, f.t0),
        PermitVerdict::Reject(_)
    ));
    // Too deep: a PodGroup under four composites.
    let mut f = fixture();
    f.gang.upsert_def(child("a", 1, "c1"));
    for i in 1..=MAX_HIERARCHY_DEPTH {
        let parent = format!("c{}", i + 1);
        let parent = (i < MAX_HIERARCHY_DEPTH).then_some(parent.as_str());
        f.gang
            .upsert_def(composite(&format!("c{i}"), Some(1), parent));
    }
    f.cache.upsert_pod(arc(a0.clone()));
    assert_eq!(
        gate(&f, &a0),
        Err("the CompositePodGroup hierarchy of PodGroup default/a is deeper than 4 levels: PodGroup default/a -> CompositePodGroup default/c1 -> CompositePodGroup default/c2 -> CompositePodGroup default/c3 -> CompositePodGroup default/c4".into())
    );
    // Three composites above are allowed.
    f.gang.upsert_def(composite("c3", Some(1), None));
    assert_eq!(gate(&f, &a0), Ok(()));
}

#[test]
fn children_are_queued_by_their_composites_creation_time() {
    let mut f = fixture();
    let mut job = composite("job", Some(2), None);
    job.created_ms = 7;
    f.gang.upsert_def(job);
    let mut a = child("a", 1, "job");
    a.created_ms = 99;
    f.gang.upsert_def(a);
    let key = f.gang.order_key(&member("a0", &group_key("a"), 100, 1));
    assert_eq!(key.group_created_ms, 7);
}
