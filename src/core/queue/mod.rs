//! The scheduling queue: the gate (PreEnqueue verdicts are stored here), the
//! active heap, backoff and the unschedulable pool.
//!
//! Every pod the queue holds is in exactly one of gated, active, backoff or
//! unschedulable: `entries` is the single source of truth for where a pod is,
//! and the heap and the two time-ordered sets are indexes over it. A pod popped
//! for a cycle leaves the queue (the engine then knows where it is); its
//! attempt count stays here until the pod is bound or deleted.
//!
//! Once a gang member is popped, the gang's other active members are popped
//! next, before anything newer in the heap (even of higher priority): a gang
//! whose first members reserve and wait at Permit must not see its timeout
//! consumed by a burst that arrived behind it.

mod order;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use priority_queue::PriorityQueue;

pub use order::{OrderKey, QueueGroup};

use crate::framework::{EventSet, PendingReason, QueueingEvent};
use crate::model::{GroupKey, PodInfo, PodKey, PodMap, PodSet, deadline};

/// Why a pod may not enter the active queue yet (a PreEnqueue verdict).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gated {
    /// Condition reason: what the pod waits for (never `Unschedulable`
    /// unless capacity is what is missing).
    pub reason: PendingReason,
    /// What the pod waits for, written to its `PodScheduled=False` condition.
    pub message: String,
    /// Something is wrong with the pod or its group (not merely early): a
    /// Warning event accompanies the condition.
    pub warning: bool,
}

impl Gated {
    /// A pod waiting for something that is expected to happen.
    pub fn waiting(reason: PendingReason, message: impl Into<String>) -> Self {
        Gated {
            reason,
            message: message.into(),
            warning: false,
        }
    }

    /// A pod that cannot be scheduled until a user fixes something: no
    /// capacity would help, so it is not `Unschedulable`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Gated {
            reason: PendingReason::InvalidGroup,
            message: message.into(),
            warning: true,
        }
    }
}

/// A PreEnqueue verdict.
pub type Gate = Result<(), Gated>;

#[derive(Debug, Clone, Copy)]
pub struct QueueConfig {
    /// `podInitialBackoffSeconds`.
    pub initial_backoff: Duration,
    /// `podMaxBackoffSeconds`.
    pub max_backoff: Duration,
    /// `podMaxInUnschedulablePodsDuration`: a pod left in the unschedulable pool
    /// this long is retried even without a relevant cluster event.
    pub max_in_unschedulable: Duration,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(10),
            max_in_unschedulable: Duration::from_secs(300),
        }
    }
}

/// Where in the queue a pod is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QueueLocation {
    Gated,
    Active,
    Backoff,
    Unschedulable,
}

/// How a pod coming back from a cycle re-enters the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requeue {
    /// Wait out its backoff (initial × 2^(attempts−1), capped), then active.
    Backoff,
    /// Not before `Instant` nor before its own backoff.
    NotBefore(Instant),
    /// Exactly until `Instant`, whatever its own backoff (its group is denied
    /// and this pod was not tried).
    Hold(Instant),
    /// Park until one of these cluster events (the queueing events of the
    /// plugins that rejected it) or the periodic flush.
    Unschedulable(EventSet),
    /// Back behind the gate.
    Gated(Gated),
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueCounts {
    pub gated: usize,
    pub active: usize,
    pub backoff: usize,
    pub unschedulable: usize,
}

#[derive(Debug, Clone)]
enum Slot {
    Gated(Gated),
    Active,
    Backoff(Instant),
    Unschedulable(Instant, EventSet),
}

#[derive(Debug, Clone)]
struct Entry {
    info: Arc<PodInfo>,
    order: OrderKey,
    slot: Slot,
}

pub struct SchedulingQueue {
    cfg: QueueConfig,
    entries: PodMap<Entry>,
    active: PriorityQueue<PodKey, OrderKey>,
    backoff: BTreeSet<(Instant, PodKey)>,
    unschedulable: BTreeSet<(Instant, PodKey)>,
    /// How many unschedulable pods wait for each event (`QueueingEvent as
    /// usize`): an event no pod waits for is answered without a scan.
    waiting_for: [usize; QueueingEvent::ALL.len()],
    /// Group → queued members (any slot), for gate re-evaluation.
    by_group: HashMap<GroupKey, PodSet>,
    attempts: PodMap<u32>,
    /// Pods whose gate verdict was set or changed since the last `take_gate_changes`.
    gate_changes: PodSet,
    /// The group of the member popped last: its active members go first.
    in_progress: Option<GroupKey>,
}

impl SchedulingQueue {
    pub fn new(cfg: QueueConfig) -> Self {
        SchedulingQueue {
            cfg,
            entries: PodMap::default(),
            active: PriorityQueue::new(),
            backoff: BTreeSet::new(),
            unschedulable: BTreeSet::new(),
            waiting_for: [0; QueueingEvent::ALL.len()],
            by_group: HashMap::new(),
            attempts: PodMap::default(),
            gate_changes: PodSet::default(),
            in_progress: None,
        }
    }

    pub fn config(&self) -> &QueueConfig {
        &self.cfg
    }

    // ---- reads -------------------------------------------------------------

    pub fn location(&self, key: &PodKey) -> Option<QueueLocation> {
        self.entries.get(key).map(|e| match e.slot {
            Slot::Gated(_) => QueueLocation::Gated,
            Slot::Active => QueueLocation::Active,
            Slot::Backoff(_) => QueueLocation::Backoff,
            Slot::Unschedulable(..) => QueueLocation::Unschedulable,
        })
    }

    pub fn contains(&self, key: &PodKey) -> bool {
        self.entries.contains_key(key)
    }

    pub fn gated(&self, key: &PodKey) -> Option<&Gated> {
        match self.entries.get(key).map(|e| &e.slot) {
            Some(Slot::Gated(g)) => Some(g),
            _ => None,
        }
    }

    /// A queued pod's place in the active order (wherever it waits).
    pub fn order_of(&self, key: &PodKey) -> Option<&OrderKey> {
        self.entries.get(key).map(|e| &e.order)
    }

    /// Until when a pod in backoff waits.
    pub fn backoff_until(&self, key: &PodKey) -> Option<Instant> {
        match self.entries.get(key).map(|e| &e.slot) {
            Some(Slot::Backoff(t)) => Some(*t),
            _ => None,
        }
    }

    /// The active pods of scheduler `profile`, each with its order: what
    /// `explain` ranks a pod among. Walks the active heap.
    pub fn active_of<'a>(
        &'a self,
        profile: &'a str,
    ) -> impl Iterator<Item = (&'a Arc<PodInfo>, &'a OrderKey)> + 'a {
        self.active.iter().filter_map(move |(k, order)| {
            let e = self.entries.get(k)?;
            (*e.info.scheduler_name == *profile).then_some((&e.info, order))
        })
    }

    pub fn attempts(&self, key: &PodKey) -> u32 {
        self.attempts.get(key).copied().unwrap_or(0)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn counts(&self) -> QueueCounts {
        let mut c = QueueCounts {
            active: self.active.len(),
            backoff: self.backoff.len(),
            unschedulable: self.unschedulable.len(),
            gated: 0,
        };
        c.gated = self.entries.len() - c.active - c.backoff - c.unschedulable;
        c
    }

    /// Queued members of `group`, in key order.
    pub fn members_of(&self, group: &GroupKey) -> Vec<PodKey> {
        let mut keys: Vec<PodKey> = self
            .by_group
            .get(group)
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        keys.sort();
        keys
    }

    /// The earliest moment a timer-driven move is due.
    pub fn next_deadline(&self) -> Option<Instant> {
        let backoff = self.backoff.first().map(|(t, _)| *t);
        let stale = self
            .unschedulable
            .first()
            .map(|(t, _)| deadline::after(*t, self.cfg.max_in_unschedulable));
        match (backoff, stale) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// How long a pod with `attempts` failed attempts backs off.
    pub fn backoff_for(&self, attempts: u32) -> Duration {
        if attempts == 0 {
            return Duration::ZERO;
        }
        let factor = 1u32 << (attempts - 1).min(16);
        self.cfg
            .initial_backoff
            .saturating_mul(factor)
            .min(self.cfg.max_backoff)
    }

    // ---- writes ------------------------------------------------------------

    /// Adds a pod or updates it in place. A passing gate releases a gated pod to
    /// the active queue; a failing one moves the pod behind the gate wherever it
    /// was. A pod already in backoff or unschedulable otherwise stays there.
    pub fn upsert(&mut self, info: Arc<PodInfo>, order: OrderKey, gate: Gate) {
        let previous = self.take(&info.key).map(|e| e.slot);
        let slot = match (&previous, gate) {
            (_, Err(g)) => Slot::Gated(g),
            (None | Some(Slot::Gated(_)) | Some(Slot::Active), Ok(())) => Slot::Active,
            (Some(other), Ok(())) => other.clone(),
        };
        self.insert(info, order, slot, previous.as_ref());
    }

    /// `upsert` for an update that may make the pod schedulable on its own
    /// (what its resource claims resolve to changed: kube-scheduler's
    /// `PodGeneratedResourceClaim` hint): a pod parked as unschedulable is
    /// retried once its backoff has passed.
    pub fn upsert_and_retry(
        &mut self,
        info: Arc<PodInfo>,
        order: OrderKey,
        gate: Gate,
        now: Instant,
    ) {
        let own = deadline::after(now, self.backoff_for(self.attempts(&info.key)));
        let previous = self.take(&info.key).map(|e| e.slot);
        let slot = match (&previous, gate) {
            (_, Err(g)) => Slot::Gated(g),
            (Some(Slot::Unschedulable(..)), Ok(())) => Self::backoff_or_active(own, now),
            (None | Some(Slot::Gated(_)) | Some(Slot::Active), Ok(())) => Slot::Active,
            (Some(other), Ok(())) => other.clone(),
        };
        self.insert(info, order, slot, previous.as_ref());
    }

    /// Removes a pod for good (bound elsewhere, deleted, no longer ours).
    pub fn remove(&mut self, key: &PodKey) -> bool {
        self.attempts.remove(key);
        self.gate_changes.remove(key);
        self.take(key).is_some()
    }

    /// Pops the next pod for a scheduling cycle and counts the attempt: the
    /// next active member of the gang popped last if there is one (see the
    /// module doc), else the head of the heap.
    pub fn pop(&mut self) -> Option<Arc<PodInfo>> {
        let key = match self.next_of_gang_in_progress() {
            Some(key) => key,
            None => self.active.pop()?.0,
        };
        let n = self.attempts.entry(key.clone()).or_insert(0);
        *n = n.saturating_add(1);
        let info = self.take(&key)?.info;
        self.in_progress = info.group.key().cloned();
        Some(info)
    }

    /// Whether the gang popped last still has active members, which `pop`
    /// hands out next: a caller pausing between cycles waits until this is
    /// false, so a gang's members are not split across the pause.
    pub fn gang_in_progress(&self) -> bool {
        self.next_of_gang_in_progress().is_some()
    }

    /// The best-ordered active member of the gang popped last. Walks only
    /// that gang's queued members (`by_group`), so it costs the gang's size.
    fn next_of_gang_in_progress(&self) -> Option<PodKey> {
        let group = self.in_progress.as_ref()?;
        self.by_group
            .get(group)?
            .iter()
            .filter_map(|k| {
                let e = self.entries.get(k)?;
                matches!(e.slot, Slot::Active).then_some((k, &e.order))
            })
            .max_by(|a, b| a.1.cmp(b.1))
            .map(|(k, _)| k.clone())
    }

    /// Takes a queued (not gated) pod out for its gang's cycle, counting
    /// the attempt as `pop` does: a gang is planned as one unit, so the
    /// members behind the one popped join its cycle from wherever they wait.
    pub fn pull(&mut self, key: &PodKey) -> Option<Arc<PodInfo>> {
        if matches!(self.entries.get(key)?.slot, Slot::Gated(_)) {
            return None;
        }
        let n = self.attempts.entry(key.clone()).or_insert(0);
        *n = n.saturating_add(1);
        self.take(key).map(|e| e.info)
    }

    /// Puts a pod that left for a cycle back.
    pub fn requeue(&mut self, info: Arc<PodInfo>, order: OrderKey, how: Requeue, now: Instant) {
        let own = deadline::after(now, self.backoff_for(self.attempts(&info.key)));
        let slot = match how {
            Requeue::Backoff => Self::backoff_or_active(own, now),
            Requeue::NotBefore(t) => Self::backoff_or_active(own.max(t), now),
            Requeue::Hold(t) => Self::backoff_or_active(t, now),
            Requeue::Unschedulable(events) => Slot::Unschedulable(now, events),
            Requeue::Gated(g) => Slot::Gated(g),
        };
        self.place(info, order, slot);
    }

    /// Backoff entries whose time has come go to active (through the gate).
    pub fn flush_backoff(&mut self, now: Instant, gate: impl Fn(&PodInfo) -> Gate) {
        let due: Vec<PodKey> = self
            .backoff
            .iter()
            .take_while(|(t, _)| *t <= now)
            .map(|(_, k)| k.clone())
            .collect();
        for key in due {
            self.activate(&key, &gate);
        }
    }

    /// A cluster event: every unschedulable pod waiting for it is retried,
    /// after its backoff if that has not elapsed yet (kube-scheduler's
    /// `MoveAllToActiveOrBackoffQueue` with queueing hints).
    /// `events` are the kinds one change is (a node relabelled and tainted
    /// at once): the pool is walked once for all of them.
    pub fn flush_unschedulable(
        &mut self,
        events: impl Into<EventSet>,
        now: Instant,
        gate: impl Fn(&PodInfo) -> Gate,
    ) {
        let events = events.into();
        if !QueueingEvent::ALL
            .iter()
            .any(|e| events.contains(*e) && self.waiting_for[*e as usize] > 0)
        {
            return;
        }
        let keys: Vec<(Instant, PodKey)> = self
            .unschedulable
            .iter()
            .filter(|(_, k)| {
                matches!(self.entries.get(k), Some(Entry { slot: Slot::Unschedulable(_, wake), .. }) if wake.intersects(events))
            })
            .cloned()
            .collect();
        self.retry_unschedulable(keys, now, &gate);
    }

    /// A pod whose wait ended for a reason of its own (a preemptor whose
    /// last victim is gone) is retried now, through the gate, without
    /// waiting out its backoff: the wait was not a failed attempt.
    /// Returns false when the pod is not waiting (active, gated, or not
    /// queued).
    pub fn retry_now(&mut self, key: &PodKey, gate: impl Fn(&PodInfo) -> Gate) -> bool {
        let waiting = matches!(
            self.entries.get(key).map(|e| &e.slot),
            Some(Slot::Unschedulable(..) | Slot::Backoff(_))
        );
        if waiting {
            self.activate(key, &gate);
        }
        waiting
    }

    /// Pods parked longer than `max_in_unschedulable` are retried anyway.
    pub fn flush_stale_unschedulable(&mut self, now: Instant, gate: impl Fn(&PodInfo) -> Gate) {
        let max = self.cfg.max_in_unschedulable;
        let keys: Vec<(Instant, PodKey)> = self
            .unschedulable
            .iter()
            .take_while(|(t, _)| deadline::elapsed(*t, max, now))
            .cloned()
            .collect();
        self.retry_unschedulable(keys, now, &gate);
    }

    /// Re-runs the gate for the gated members of `group`: those that pass go to
    /// active, the others get the new verdict.
    pub fn reevaluate_gated(&mut self, group: &GroupKey, gate: impl Fn(&PodInfo) -> Gate) {
        for key in self.members_of(group) {
            if let Some(Entry {
                slot: Slot::Gated(_),
                ..
            }) = self.entries.get(&key)
            {
                self.activate(&key, &gate);
            }
        }
    }

    /// Re-runs the gate for those of `keys` that are gated (a claim they
    /// name changed): those that pass go to active, the others get the new
    /// verdict.
    pub fn reevaluate_gated_pods<'k>(
        &mut self,
        keys: impl IntoIterator<Item = &'k PodKey>,
        gate: impl Fn(&PodInfo) -> Gate,
    ) {
        for key in keys {
            if let Some(Entry {
                slot: Slot::Gated(_),
                ..
            }) = self.entries.get(key)
            {
                self.activate(key, &gate);
            }
        }
    }

    /// Re-runs the gate for every queued member of `group` wherever it is:
    /// members that no longer pass go behind the gate (their definition was
    /// deleted or became malformed); gated ones that pass go to active.
    pub fn regate_group(&mut self, group: &GroupKey, gate: impl Fn(&PodInfo) -> Gate) {
        for key in self.members_of(group) {
            let Some(entry) = self.entries.get(&key) else {
                continue;
            };
            match (gate(&entry.info), &entry.slot) {
                (Err(g), _) => self.set_slot(&key, Slot::Gated(g)),
                (Ok(()), Slot::Gated(_)) => self.set_slot(&key, Slot::Active),
                (Ok(()), _) => {}
            }
        }
    }

    /// Gated pods whose verdict was set or changed since the last call, with
    /// their current verdict.
    pub fn take_gate_changes(&mut self) -> Vec<(PodKey, Gated)> {
        let mut out: Vec<(PodKey, Gated)> = self
            .gate_changes
            .drain()
            .filter_map(|k| match self.entries.get(&k).map(|e| &e.slot) {
                Some(Slot::Gated(g)) => Some((k, g.clone())),
                _ => None,
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    // ---- internals -----------------------------------------------------------

    fn backoff_or_active(until: Instant, now: Instant) -> Slot {
        if until > now {
            Slot::Backoff(until)
        } else {
            Slot::Active
        }
    }

    fn retry_unschedulable(
        &mut self,
        keys: Vec<(Instant, PodKey)>,
        now: Instant,
        gate: &impl Fn(&PodInfo) -> Gate,
    ) {
        for (since, key) in keys {
            let until = since + self.backoff_for(self.attempts(&key));
            if until > now {
                self.set_slot(&key, Slot::Backoff(until));
            } else {
                self.activate(&key, gate);
            }
        }
    }

    /// Active if the gate passes, gated otherwise.
    fn activate(&mut self, key: &PodKey, gate: &impl Fn(&PodInfo) -> Gate) {
        let Some(entry) = self.entries.get(key) else {
            return;
        };
        let slot = match gate(&entry.info) {
            Ok(()) => Slot::Active,
            Err(g) => Slot::Gated(g),
        };
        self.set_slot(key, slot);
    }

    fn set_slot(&mut self, key: &PodKey, slot: Slot) {
        if let (Some(Slot::Gated(old)), Slot::Gated(new)) =
            (self.entries.get(key).map(|e| &e.slot), &slot)
            && old == new
        {
            return;
        }
        if let Some(entry) = self.take(key) {
            self.insert(entry.info, entry.order, slot, Some(&entry.slot));
        }
    }

    /// Inserts (or replaces) an entry and indexes it.
    fn place(&mut self, info: Arc<PodInfo>, order: OrderKey, slot: Slot) {
        let previous = self.take(&info.key).map(|e| e.slot);
        self.insert(info, order, slot, previous.as_ref());
    }

    /// Inserts an entry that is not in the queue; `previous` is the slot it was
    /// just taken from, if any (to tell whether a gate verdict changed).
    fn insert(&mut self, info: Arc<PodInfo>, order: OrderKey, slot: Slot, previous: Option<&Slot>) {
        let key = info.key.clone();
        match &slot {
            Slot::Active => {
                self.active.push(key.clone(), order.clone());
            }
            Slot::Backoff(t) => {
                self.backoff.insert((*t, key.clone()));
            }
            Slot::Unschedulable(t, wake) => {
                self.unschedulable.insert((*t, key.clone()));
                self.count_waiting(*wake, true);
            }
            Slot::Gated(g) => {
                let unchanged = matches!(previous, Some(Slot::Gated(old)) if old == g);
                if !unchanged {
                    self.gate_changes.insert(key.clone());
                }
            }
        }
        if let Some(group) = info.group.key() {
            self.by_group
                .entry(group.clone())
                .or_default()
                .insert(key.clone());
        }
        self.entries.insert(key, Entry { info, order, slot });
    }

    /// Counts a parked pod in, or out of, the events it waits for.
    fn count_waiting(&mut self, wake: EventSet, parked: bool) {
        for e in QueueingEvent::ALL {
            if wake.contains(e) {
                let n = &mut self.waiting_for[e as usize];
                *n = if parked { *n + 1 } else { n.saturating_sub(1) };
            }
        }
    }

    /// Removes an entry and its indexes (attempts are kept).
    fn take(&mut self, key: &PodKey) -> Option<Entry> {
        let entry = self.entries.remove(key)?;
        match &entry.slot {
            Slot::Active => {
                self.active.remove(key);
            }
            Slot::Backoff(t) => {
                self.backoff.remove(&(*t, key.clone()));
            }
            Slot::Unschedulable(t, wake) => {
                self.unschedulable.remove(&(*t, key.clone()));
                let wake = *wake;
                self.count_waiting(wake, false);
            }
            Slot::Gated(_) => {}
        }
        if let Some(group) = entry.info.group.key()
            && let Some(set) = self.by_group.get_mut(group)
        {
            set.remove(key);
            if set.is_empty() {
                self.by_group.remove(group);
            }
        }
        Some(entry)
    }
}

#[cfg(test)]
mod tests;
