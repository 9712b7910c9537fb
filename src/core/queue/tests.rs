use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::driver::fixtures::{group_key, member, pod};

fn q() -> SchedulingQueue {
    SchedulingQueue::new(QueueConfig::default())
}

fn plain(name: &str, created_ms: i64) -> (Arc<PodInfo>, OrderKey) {
    let mut p = pod(name, 100, 1);
    p.created_ms = created_ms;
    let order = OrderKey::plain(&p);
    (Arc::new(p), order)
}

fn waiting(msg: &str) -> Gated {
    Gated::waiting(crate::framework::PendingReason::WaitingForMembers, msg)
}

#[test]
fn pops_in_order_and_counts_attempts() {
    let mut q = q();
    for (name, t) in [("b", 2), ("a", 1), ("c", 3)] {
        let (p, o) = plain(name, t);
        q.upsert(p, o, Ok(()));
    }
    let names: Vec<String> = std::iter::from_fn(|| q.pop())
        .map(|p| p.key.name.to_string())
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert_eq!(q.attempts(&PodKey::new("default", "a")), 1);
    assert!(q.is_empty());
}

#[test]
fn backoff_doubles_up_to_the_maximum() {
    let q = q();
    let secs: Vec<u64> = (0..7).map(|a| q.backoff_for(a).as_secs()).collect();
    assert_eq!(secs, [0, 1, 2, 4, 8, 10, 10]);
}

#[test]
fn requeue_with_backoff_then_flush() {
    let mut q = q();
    let t0 = Instant::now();
    let (p, o) = plain("a", 1);
    q.upsert(p, o.clone(), Ok(()));
    let p = q.pop().unwrap();
    q.pop();
    let p2 = p.clone();
    q.requeue(p, o.clone(), Requeue::Backoff, t0);
    assert_eq!(q.location(&p2.key), Some(QueueLocation::Backoff));
    assert_eq!(q.next_deadline(), Some(t0 + Duration::from_secs(1)));
    q.flush_backoff(t0 + Duration::from_millis(999), |_| Ok(()));
    assert_eq!(q.location(&p2.key), Some(QueueLocation::Backoff));
    q.flush_backoff(t0 + Duration::from_secs(1), |_| Ok(()));
    assert_eq!(q.location(&p2.key), Some(QueueLocation::Active));
    // Second attempt backs off 2 s.
    let p = q.pop().unwrap();
    q.requeue(p, o, Requeue::Backoff, t0);
    assert_eq!(q.next_deadline(), Some(t0 + Duration::from_secs(2)));
}

#[test]
fn unschedulable_pool_flushes_on_event_respecting_backoff_and_periodically() {
    let mut q = q();
    let t0 = Instant::now();
    let (a, oa) = plain("a", 1);
    let (b, ob) = plain("b", 2);
    q.upsert(a, oa.clone(), Ok(()));
    q.upsert(b, ob.clone(), Ok(()));
    let a = q.pop().unwrap();
    let b = q.pop().unwrap();
    q.requeue(a.clone(), oa, Requeue::Unschedulable(EventSet::ALL), t0);
    q.requeue(
        b.clone(),
        ob,
        Requeue::Unschedulable(EventSet::ALL),
        t0 + Duration::from_secs(5),
    );
    assert_eq!(q.counts().unschedulable, 2);
    assert_eq!(q.next_deadline(), Some(t0 + Duration::from_secs(300)));
    q.flush_stale_unschedulable(t0 + Duration::from_secs(300), |_| Ok(()));
    assert_eq!(q.location(&a.key), Some(QueueLocation::Active));
    assert_eq!(q.location(&b.key), Some(QueueLocation::Unschedulable));
    // An event retries b, but it entered the pool 0.5 s ago: backoff first.
    q.flush_unschedulable(
        QueueingEvent::NodeAdded,
        t0 + Duration::from_millis(5500),
        |_| Ok(()),
    );
    assert_eq!(q.location(&b.key), Some(QueueLocation::Backoff));
}

/// A parked pod is retried by the events it waits for, and only by them.
#[test]
fn an_event_retries_only_the_pods_waiting_for_it() {
    let mut q = q();
    let t0 = Instant::now();
    let (fit, of) = plain("fit", 1);
    let (spread, os) = plain("spread", 2);
    q.upsert(fit, of.clone(), Ok(()));
    q.upsert(spread, os.clone(), Ok(()));
    let fit = q.pop().unwrap();
    let spread = q.pop().unwrap();
    let resources = EventSet::of(&[QueueingEvent::NodeAllocatable, QueueingEvent::PodRemoved]);
    let pods = EventSet::of(&[QueueingEvent::PodPlaced]);
    q.requeue(fit.clone(), of, Requeue::Unschedulable(resources), t0);
    q.requeue(spread.clone(), os, Requeue::Unschedulable(pods), t0);
    let later = t0 + Duration::from_secs(60);
    for quiet in [
        QueueingEvent::Namespace,
        QueueingEvent::Storage,
        QueueingEvent::Gang,
    ] {
        q.flush_unschedulable(quiet, later, |_| Ok(()));
        assert_eq!(q.counts().unschedulable, 2, "{quiet:?} retried a pod");
    }
    q.flush_unschedulable(QueueingEvent::PodPlaced, later, |_| Ok(()));
    assert_eq!(q.location(&spread.key), Some(QueueLocation::Active));
    assert_eq!(q.location(&fit.key), Some(QueueLocation::Unschedulable));
    q.flush_unschedulable(QueueingEvent::PodRemoved, later, |_| Ok(()));
    assert_eq!(q.location(&fit.key), Some(QueueLocation::Active));
}

/// One change that is several events (a node relabelled and tainted)
/// retries every pod waiting for any of them, in one pass.
#[test]
fn a_set_of_events_retries_the_pods_waiting_for_any() {
    let mut q = q();
    let t0 = Instant::now();
    let (a, oa) = plain("a", 1);
    let (b, ob) = plain("b", 2);
    q.upsert(a, oa.clone(), Ok(()));
    q.upsert(b, ob.clone(), Ok(()));
    let (a, b) = (q.pop().unwrap(), q.pop().unwrap());
    let taints = EventSet::of(&[QueueingEvent::NodeTaints]);
    let storage = EventSet::of(&[QueueingEvent::Storage]);
    q.requeue(a.clone(), oa, Requeue::Unschedulable(taints), t0);
    q.requeue(b.clone(), ob, Requeue::Unschedulable(storage), t0);
    let node = EventSet::of(&[QueueingEvent::NodeLabels, QueueingEvent::NodeTaints]);
    q.flush_unschedulable(node, t0 + Duration::from_secs(60), |_| Ok(()));
    assert_eq!(q.location(&a.key), Some(QueueLocation::Active));
    assert_eq!(q.location(&b.key), Some(QueueLocation::Unschedulable));
}

#[test]
fn gate_holds_and_releases_by_group() {
    let mut q = q();
    let g = group_key("pg");
    let pods: Vec<Arc<PodInfo>> = (0..3)
        .map(|i| Arc::new(member(&format!("m{i}"), &g, 100, 1)))
        .collect();
    for p in &pods {
        q.upsert(
            p.clone(),
            OrderKey::member(p, &g, 0),
            Err(waiting("waiting for 1/3 pods")),
        );
    }
    assert_eq!(q.counts().gated, 3);
    assert_eq!(q.take_gate_changes().len(), 3);
    // Same verdict again: no change to report.
    q.reevaluate_gated(&g, |_| Err(waiting("waiting for 1/3 pods")));
    assert!(q.take_gate_changes().is_empty());
    q.reevaluate_gated(&g, |_| Ok(()));
    assert_eq!(q.counts().active, 3);
    // Definition deleted: everyone goes back behind the gate.
    q.regate_group(&g, |_| Err(waiting("gone")));
    assert_eq!(q.counts().gated, 3);
    assert_eq!(q.members_of(&g).len(), 3);
    q.remove(&pods[0].key);
    assert_eq!(q.members_of(&g).len(), 2);
    assert_eq!(q.location(&pods[0].key), None);
}

#[test]
fn hold_requeues_until_the_instant_whatever_the_backoff() {
    let mut q = q();
    let t0 = Instant::now();
    let (a, oa) = plain("a", 1);
    q.upsert(a.clone(), oa.clone(), Ok(()));
    let a = q.pop().unwrap();
    q.pop();
    q.requeue(
        a.clone(),
        oa,
        Requeue::Hold(t0 + Duration::from_millis(300)),
        t0,
    );
    assert_eq!(q.location(&a.key), Some(QueueLocation::Backoff));
    assert_eq!(q.next_deadline(), Some(t0 + Duration::from_millis(300)));
}

/// Once a gang's first member is popped, its other active members
/// come next, even ahead of higher-priority pods that arrived in between; the
/// heap order resumes once the gang has no active member left.
#[test]
fn a_gang_in_progress_is_popped_to_the_end_before_newer_pods() {
    let mut q = q();
    let g = group_key("g");
    for i in 0..3 {
        let mut m = member(&format!("g-{i}"), &g, 100, 1);
        m.created_ms = 10 + i;
        let order = OrderKey::member(&m, &g, 10);
        q.upsert(Arc::new(m), order, Ok(()));
    }
    assert_eq!(q.pop().unwrap().key.name.as_ref(), "g-0");
    for (name, priority) in [("urgent-a", 100), ("urgent-b", 50)] {
        let mut p = pod(name, 100, 1);
        p.priority = priority;
        let order = OrderKey::plain(&p);
        q.upsert(Arc::new(p), order, Ok(()));
    }
    let names: Vec<String> = std::iter::from_fn(|| q.pop())
        .map(|p| p.key.name.to_string())
        .collect();
    assert_eq!(names, ["g-1", "g-2", "urgent-a", "urgent-b"]);
}

/// A plain pod popped first leaves the heap order alone.
#[test]
fn a_plain_pod_starts_no_gang_in_progress() {
    let mut q = q();
    let g = group_key("g");
    let (p, o) = plain("first", 1);
    q.upsert(p, o, Ok(()));
    let m = member("g-0", &g, 100, 1);
    let order = OrderKey::member(&m, &g, 50);
    q.upsert(Arc::new(m), order, Ok(()));
    assert_eq!(q.pop().unwrap().key.name.as_ref(), "first");
    let mut hi = pod("hi", 100, 1);
    hi.priority = 10;
    let order = OrderKey::plain(&hi);
    q.upsert(Arc::new(hi), order, Ok(()));
    assert_eq!(q.pop().unwrap().key.name.as_ref(), "hi");
    assert_eq!(q.pop().unwrap().key.name.as_ref(), "g-0");
}
