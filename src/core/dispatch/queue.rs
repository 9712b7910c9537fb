//! The call queue: per object, at most one call in flight and the calls
//! waiting behind it (folded by the rules of `merge` as they arrive); per
//! lane, the objects whose next call may start. Shared between the
//! dispatcher, which adds calls and starts them, and the write tasks, which
//! finish them: the per-object state is a `DashMap`, so neither side takes a
//! lock around the whole map. A call waiting for room is an entry here, not
//! a task, and an object's queue starts with room for one call (most have
//! one), so a backlog of 50,000 writes costs ~20 MB, not a task each.
//!
//! The backlog is bounded for events: while [`EVENT_BACKLOG`] events are
//! queued, a new event is dropped (and counted) instead of queued, as
//! client-go's event broadcaster drops events when its queue is full. Under
//! a creation burst larger than the API server's write rate the `Scheduled`
//! events would otherwise queue by the tens of thousands, in memory, and
//! compete with the bindings for the server. Bindings, conditions and
//! preemptions are never dropped (conditions are folded, one per object).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

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

/// Events queued (not in flight) at which a new event is dropped.
pub const EVENT_BACKLOG: usize = 5_000;

/// What became of a call handed to [`CallQueue::add`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Added {
    /// Queued; `superseded` queued calls were dropped or folded into it.
    Queued { superseded: usize },
    /// An event dropped because the backlog was full.
    EventDropped,
}

#[derive(Debug, Default)]
pub struct CallQueue {
    objects: DashMap<ObjectId, ObjectCalls>,
    /// Per lane, objects whose first queued call can start. An entry whose
    /// object has since moved lane or started is skipped when popped.
    ready: [Mutex<VecDeque<ObjectId>>; 2],
    /// Calls queued, not in flight.
    len: AtomicUsize,
    /// Events among them: what [`EVENT_BACKLOG`] bounds.
    events: AtomicUsize,
}

fn is_event(d: &Dispatch) -> bool {
    matches!(d.call, ApiCall::Event { .. })
}

fn events_in(queued: &VecDeque<Dispatch>) -> usize {
    queued.iter().filter(|d| is_event(d)).count()
}

/// Moves a running count by `after - before`, saturating: a miscount must
/// never wrap into a full backlog.
fn adjust(count: &AtomicUsize, before: usize, after: usize) {
    let _ = count.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
        Some(v.saturating_add(after).saturating_sub(before))
    });
}

impl CallQueue {
    /// Queues a call behind its object's, or drops it if it is an event and
    /// the event backlog is full.
    pub fn add(&self, d: Dispatch) -> Added {
        if is_event(&d) && self.events.load(Ordering::Relaxed) >= EVENT_BACKLOG {
            return Added::EventDropped;
        }
        let id = d.call.object();
        let mut calls = self
            .objects
            .entry(id.clone())
            .or_insert_with(|| ObjectCalls {
                queued: VecDeque::with_capacity(1),
                ..ObjectCalls::default()
            });
        // Counted before and after rather than from the merge's result: the
        // object's queue is short, and this way the count cannot drift from
        // what the rules dropped, folded or skipped.
        let (len, events) = (calls.queued.len(), events_in(&calls.queued));
        let superseded = merge::enqueue(&mut calls.queued, d);
        adjust(&self.len, len, calls.queued.len());
        adjust(&self.events, events, events_in(&calls.queued));
        self.relist(&id, &mut calls);
        Added::Queued { superseded }
    }

    /// Calls queued, not in flight.
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
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
            adjust(&self.len, 1, 0);
            adjust(&self.events, usize::from(is_event(&d)), 0);
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

    /// Whether some object's next call of `lane` waits to start. An entry
    /// whose object has since moved lane or started still counts until a
    /// `pop` of the lane skips it: this is a signal, not a count.
    pub fn waiting(&self, lane: Lane) -> bool {
        !self.ready_list(lane).is_empty()
    }

    /// No call queued or in flight.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// Calls queued (not in flight), counted object by object: what
    /// [`CallQueue::len`] keeps a running count of.
    #[cfg(test)]
    fn queued(&self) -> usize {
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
    fn a_lane_waits_while_a_call_of_it_is_ready_to_start() {
        let q = CallQueue::default();
        assert!(!q.waiting(Lane::Bindings));
        q.add(bind("a"));
        q.add(condition("b", "1"));
        assert!(q.waiting(Lane::Bindings) && q.waiting(Lane::Reports));
        assert!(q.pop(Lane::Bindings).is_some());
        assert!(!q.waiting(Lane::Bindings), "the binding started");
        assert!(q.waiting(Lane::Reports));
    }

    #[test]
    fn a_binding_moves_the_object_to_its_lane_and_drops_waiting_messages() {
        let q = CallQueue::default();
        q.add(condition("a", "1"));
        assert_eq!(q.add(bind("a")), Added::Queued { superseded: 1 });
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
        assert_eq!(
            q.add(condition("a", "3/3")),
            Added::Queued { superseded: 1 }
        );
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
    fn a_full_backlog_drops_events_and_nothing_else() {
        let q = CallQueue::default();
        let scheduled = |name: &str| event(name, "Scheduled", "m", Intent::Immediate);
        for i in 0..EVENT_BACKLOG {
            q.add(scheduled(&format!("p{i}")));
        }
        assert_eq!(q.add(scheduled("late")), Added::EventDropped);
        assert_eq!(
            q.add(bind("new")),
            Added::Queued { superseded: 0 },
            "a binding is never dropped"
        );
        assert_eq!(
            q.add(condition("other", "m")),
            Added::Queued { superseded: 0 },
            "nor a condition"
        );
        assert_eq!(q.len(), EVENT_BACKLOG + 2);
        assert!(q.pop(Lane::Bindings).is_some());
        assert_eq!(
            q.add(scheduled("late")),
            Added::EventDropped,
            "a binding started makes no room for events"
        );
        assert!(matches!(q.pop(Lane::Reports), Some(ApiCall::Event { .. })));
        assert!(matches!(q.add(scheduled("late")), Added::Queued { .. }));
    }

    proptest::proptest! {
        /// The running count is the calls queued object by object, whatever
        /// was added, superseded, folded or started.
        #[test]
        fn the_running_count_is_the_queued_calls(
            ops in proptest::collection::vec((0u8..6, 0u8..4), 1..80)
        ) {
            let q = CallQueue::default();
            for (op, who) in ops {
                let who = format!("p{who}");
                match op {
                    0 => { q.add(condition(&who, "m")); }
                    1 => { q.add(bind(&who)); }
                    2 => { q.add(event(&who, "Scheduled", "m", Intent::Immediate)); }
                    3 => { q.add(event(&who, "Waiting", "m", Intent::Waiting(crate::dispatch::Subject::Pod(crate::model::PodKey::new("ns", &who))))); }
                    4 => {
                        for lane in Lane::ALL {
                            q.pop(lane);
                        }
                    }
                    _ => { q.finish(&object(&who)); }
                }
                proptest::prop_assert_eq!(q.len(), q.queued());
                let events: usize = q.objects.iter().map(|c| events_in(&c.queued)).sum();
                proptest::prop_assert_eq!(q.events.load(Ordering::Relaxed), events);
            }
        }
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
