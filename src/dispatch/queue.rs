//! The call queue: per object, at most one call in flight and the calls
//! waiting behind it (folded by the rules of `merge` as they arrive); per
//! lane, the objects whose next call may start. Shared between the
//! dispatcher, which adds calls and starts them, and the write tasks, which
//! finish them: the per-object state is a `DashMap`, so neither side takes a
//! lock around the whole map. A call waiting for room is an entry here, not
//! a task: a backlog of 50,000 writes costs kilobytes.

use std::collections::VecDeque;
use std::sync::Mutex;

use dashmap::DashMap;

use super::call::{ApiCall, Dispatch, Lane, ObjectId};
use super::merge;

#[derive(Debug, Default)]
struct ObjectCalls {
    in_flight: bool,
    /// The lane whose ready list names this object (for its first queued call).
    listed: Option<Lane>,
    queued: VecDeque<Dispatch>,
}

#[derive(Debug, Default)]
pub struct CallQueue {
    objects: DashMap<ObjectId, ObjectCalls>,
    /// Per lane, objects whose first queued call can start. An entry whose
    /// object has since moved lane or started is skipped when popped.
    ready: [Mutex<VecDeque<ObjectId>>; 2],
}

impl CallQueue {
    /// Queues a call behind its object's; returns how many queued calls it
    /// superseded.
    pub fn add(&self, d: Dispatch) -> usize {
        let id = d.call.object();
        let mut calls = self.objects.entry(id.clone()).or_default();
        let superseded = merge::enqueue(&mut calls.queued, d);
        self.relist(&id, &mut calls);
        superseded
    }

    /// Takes the next call of `lane` whose object has none in flight, and
    /// marks it in flight.
    pub fn pop(&self, lane: Lane) -> Option<ApiCall> {
        loop {
            let id = self.ready_list(lane).pop_front()?;
            let Some(mut calls) = self.objects.get_mut(&id) else {
                continue;
            };
            if calls.in_flight || calls.listed != Some(lane) {
                continue;
            }
            calls.listed = None;
            let Some(d) = calls.queued.pop_front() else {
                continue;
            };
            calls.in_flight = true;
            return Some(d.call);
        }
    }

    /// The object's call in flight finished: its next call, if any, becomes
    /// ready. Returns that call's lane.
    pub fn finish(&self, id: &ObjectId) -> Option<Lane> {
        let mut calls = self.objects.get_mut(id)?;
        calls.in_flight = false;
        if calls.queued.is_empty() {
            drop(calls);
            self.objects
                .remove_if(id, |_, c| !c.in_flight && c.queued.is_empty());
            return None;
        }
        self.relist(id, &mut calls);
        calls.listed
    }

    /// No call queued or in flight.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// Calls queued (not in flight).
    pub fn queued(&self) -> usize {
        self.objects.iter().map(|c| c.queued.len()).sum()
    }

    fn relist(&self, id: &ObjectId, calls: &mut ObjectCalls) {
        if calls.in_flight {
            return;
        }
        let Some(lane) = calls.queued.front().map(|d| d.call.lane()) else {
            calls.listed = None;
            return;
        };
        if calls.listed != Some(lane) {
            calls.listed = Some(lane);
            self.ready_list(lane).push_back(id.clone());
        }
    }

    fn ready_list(&self, lane: Lane) -> std::sync::MutexGuard<'_, VecDeque<ObjectId>> {
        // The lists hold plain ids and no code panics while holding them,
        // so a poisoned lock still guards a consistent list.
        self.ready[lane.index()]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::Intent;
    use crate::dispatch::merge::tests::{bind, condition, event, message, pod};

    fn object(name: &str) -> ObjectId {
        ObjectId::Pod(crate::model::PodKey::new("ns", name))
    }

    #[test]
    fn one_call_in_flight_per_object_in_order() {
        let q = CallQueue::default();
        q.add(condition("a", "1"));
        q.add(event("a", "Other", "2", Intent::Immediate));
        q.add(condition("b", "3"));
        let first = q.pop(Lane::Reports);
        assert!(matches!(first, Some(ApiCall::PodCondition { ref message, .. }) if message == "1"));
        let second = q.pop(Lane::Reports);
        assert!(
            matches!(second, Some(ApiCall::PodCondition { ref message, .. }) if message == "3")
        );
        assert!(
            q.pop(Lane::Reports).is_none(),
            "a's next call waits for the first"
        );
        assert_eq!(q.finish(&object("a")), Some(Lane::Reports));
        assert!(matches!(q.pop(Lane::Reports), Some(ApiCall::Event { .. })));
        assert_eq!(q.finish(&object("a")), None);
        assert_eq!(q.finish(&object("b")), None);
        assert!(q.is_empty());
    }

    #[test]
    fn a_binding_moves_the_object_to_its_lane_and_drops_waiting_messages() {
        let q = CallQueue::default();
        q.add(condition("a", "1"));
        assert_eq!(q.add(bind("a")), 1);
        assert!(q.pop(Lane::Reports).is_none(), "the condition was dropped");
        assert!(matches!(q.pop(Lane::Bindings), Some(ApiCall::Bind { .. })));
        assert_eq!(q.finish(&object("a")), None);
        assert!(q.is_empty());
    }

    #[test]
    fn calls_behind_one_in_flight_are_merged() {
        let q = CallQueue::default();
        q.add(condition("a", "1/3"));
        assert!(q.pop(Lane::Reports).is_some());
        q.add(condition("a", "2/3"));
        assert_eq!(q.add(condition("a", "3/3")), 1);
        assert_eq!(q.queued(), 1);
        assert!(q.pop(Lane::Reports).is_none(), "in flight");
        q.finish(&object("a"));
        let next = q.pop(Lane::Reports);
        assert!(
            matches!(next, Some(ApiCall::PodCondition { ref message, .. }) if message == "3/3")
        );
        let _ = (message, pod);
    }

    #[test]
    fn lanes_are_shared_across_threads() {
        let q = std::sync::Arc::new(CallQueue::default());
        for i in 0..100 {
            q.add(condition(&format!("p{i}"), "m"));
        }
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let q = q.clone();
                std::thread::spawn(move || {
                    let mut n = 0;
                    while let Some(call) = q.pop(Lane::Reports) {
                        q.finish(&call.object());
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        let total: usize = workers.into_iter().map(|w| w.join().unwrap_or(0)).sum();
        assert_eq!(total, 100);
        assert!(q.is_empty());
    }
}
