//! Reservations and backfill: no gang starves. A gang that keeps failing
//! for `reserveAfterSeconds` (and has no older gang of at least its
//! priority waiting in its profile) gets room held on the nodes where it
//! could start soonest: the fewest pods to wait for, those with a declared
//! end (`activeDeadlineSeconds` from their start) first. From then on a
//! cycle of a pod of lower or equal priority sees the gang's members
//! counted on those nodes (as nominated pods are), so it cannot take the
//! room as it frees; the gang binds the moment it is free. A pod whose
//! declared end falls before the reservation's expected start may still
//! use the room (backfill, as Slurm's); one without a declared end never
//! does. Higher-priority pods never see a reservation.
//!
//! This part owns the reservations, when each waiting gang started
//! failing, and the members counted for the pod in its cycle. Everything
//! is derived from the engine's own observations: a new leader starts with
//! none and makes them again. The one departure from kube-scheduler's
//! treatment of plain pods (gang-semantics I5), documented in
//! docs/gang-scheduling.md with the knobs that turn it off.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use super::{Engine, EventType, ObjectRef};
use crate::cache::WhatIf;
use crate::framework::Snapshot;
use crate::model::{GroupKey, LevelRef, PodInfo, PodKey, Resources};

/// A node's rank for a member: pods declaring no end to wait for, the
/// latest declared end (Unix ms), pods to wait for. Lower is sooner.
type Rank = (usize, i64, usize);
/// A node that could hold a member: its index, the pods to wait for, its rank.
type Candidate = (usize, Vec<PodKey>, Rank);
/// Reserved slots (a member, its node) and the expected start (Unix ms).
type Room = (Vec<(Arc<PodInfo>, Arc<str>)>, Option<i64>);

/// One gang's held room.
#[derive(Debug, Clone)]
pub(super) struct Reservation {
    /// A member for each reserved slot, with its node.
    pub members: Vec<(Arc<PodInfo>, Arc<str>)>,
    pub priority: i32,
    pub profile: Arc<str>,
    pub made: Instant,
    /// When it ends if its gang has not started.
    pub until: Instant,
    /// Unix milliseconds when the last pod it waits for declared it ends;
    /// `None` when one of them declared no end.
    pub expected_start_ms: Option<i64>,
}

impl Reservation {
    fn nodes(&self) -> impl Iterator<Item = &Arc<str>> {
        self.members.iter().map(|(_, n)| n)
    }
}

/// Since when a gang has been failing, in which profile, at what priority.
#[derive(Debug, Clone)]
struct Failing {
    since: Instant,
    profile: Arc<str>,
    priority: i32,
}

#[derive(Debug, Default)]
pub(super) struct Reservations {
    by_group: BTreeMap<GroupKey, Reservation>,
    failing: HashMap<GroupKey, Failing>,
    /// The members counted for the pod in its cycle; taken off after.
    held: WhatIf,
    /// The nodes of the reservations the pod in its cycle may backfill.
    backfill_nodes: HashSet<Arc<str>>,
    /// A wall-clock reading: (engine instant, Unix milliseconds), for the
    /// pods' declared ends. None until the driver gives one.
    wall: Option<(Instant, i64)>,
    /// Pods placed on reserved room by backfill.
    pub backfilled: u64,
}

impl Reservations {
    pub fn get(&self, group: &GroupKey) -> Option<&Reservation> {
        self.by_group.get(group)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&GroupKey, &Reservation)> {
        self.by_group.iter()
    }

    pub fn len(&self) -> usize {
        self.by_group.len()
    }

    pub fn reserved_nodes(&self) -> usize {
        self.by_group.values().map(|r| r.members.len()).sum()
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        self.by_group.values().map(|r| r.until).min()
    }

    /// Unix milliseconds at `now`, from the last wall-clock reading.
    fn wall_ms(&self, now: Instant) -> Option<i64> {
        let (at, ms) = self.wall?;
        let ahead = now.saturating_duration_since(at).as_millis();
        let behind = at.saturating_duration_since(now).as_millis();
        let ahead = i64::try_from(ahead).unwrap_or(i64::MAX);
        let behind = i64::try_from(behind).unwrap_or(i64::MAX);
        Some(ms.saturating_add(ahead).saturating_sub(behind))
    }

    /// Seconds from `now` until the reservation's expected start.
    pub fn expected_start_in(&self, r: &Reservation, now: Instant) -> Option<f64> {
        let start = r.expected_start_ms?;
        let now_ms = self.wall_ms(now)?;
        Some(((start - now_ms).max(0)) as f64 / 1000.0)
    }
}

/// When a pod that started at `started_ms` and declares `deadline`
/// seconds ends, in Unix milliseconds.
fn declared_end(p: &PodInfo) -> Option<i64> {
    p.active_deadline_seconds.map(|d| {
        p.started_ms
            .saturating_add(i64::from(d).saturating_mul(1000))
    })
}

impl Engine {
    /// The wall clock at `now` (Unix milliseconds): what pods' declared
    /// ends are compared with. The daemon gives it every turn; without
    /// one, no end is known (no backfill, expected starts unknown).
    pub fn set_wall_clock(&mut self, now: Instant, unix_ms: i64) {
        self.reservations.wall = Some((now, unix_ms));
    }

    /// Counts, for the cycle of `pod`, the members of every reservation it
    /// must leave room for: those of gangs at least as important, other
    /// than its own, unless it may backfill (its declared end falls before
    /// the reservation's expected start).
    pub(super) fn hold_reservations(
        &mut self,
        pod: &PodInfo,
        own: Option<&GroupKey>,
        now: Instant,
    ) {
        let r = &mut self.reservations;
        r.backfill_nodes.clear();
        if r.by_group.is_empty() {
            return;
        }
        let now_ms = r.wall_ms(now);
        let ends = pod
            .active_deadline_seconds
            .zip(now_ms)
            .map(|(d, ms)| ms.saturating_add(i64::from(d).saturating_mul(1000)));
        let mut edits = std::mem::take(&mut r.held);
        for (group, res) in &r.by_group {
            if Some(group) == own || pod.priority > res.priority {
                continue;
            }
            let backfills = ends.zip(res.expected_start_ms).is_some_and(|(e, s)| e <= s);
            if backfills {
                r.backfill_nodes.extend(res.nodes().cloned());
                continue;
            }
            for (member, node) in &res.members {
                if let Some(i) = self.cache.node_index(node) {
                    let _ = self.cache.what_if_add(member, i, &mut edits);
                }
            }
        }
        r.held = edits;
    }

    /// Takes the reserved members counted for the cycle off their nodes,
    /// and counts `pod` as backfilled when it was placed on room it could
    /// backfill.
    pub(super) fn release_reservations(&mut self, pod: &PodKey) {
        self.cache
            .revert(std::mem::take(&mut self.reservations.held));
        if self.reservations.backfill_nodes.is_empty() {
            return;
        }
        let placed_on = self.cache.pod(pod).and_then(|c| c.state.node().cloned());
        if placed_on.is_some_and(|n| self.reservations.backfill_nodes.contains(&n)) {
            self.reservations.backfilled = self.reservations.backfilled.saturating_add(1);
        }
        self.reservations.backfill_nodes.clear();
    }

    /// A gang cycle did not place the gang: note since when it fails, and
    /// reserve room for it once it has failed long enough.
    pub(super) fn gang_failed(&mut self, group: &GroupKey, members: &[Arc<PodInfo>], now: Instant) {
        let Some(first) = members.first() else {
            return;
        };
        let failing = self
            .reservations
            .failing
            .entry(group.clone())
            .or_insert_with(|| Failing {
                since: now,
                profile: first.scheduler_name.clone(),
                priority: first.priority,
            });
        let since = failing.since;
        if self.reservations.by_group.contains_key(group) {
            return;
        }
        let args = self.gang.args_for(first).reservations;
        let after = self
            .gang
            .def(&group.definition)
            .and_then(|d| d.extras.reserve_after)
            .unwrap_or(args.reserve_after);
        if after.is_zero() || now.saturating_duration_since(since) < after {
            return;
        }
        // The oldest failing gang of at least its priority goes first.
        let older = self.reservations.failing.iter().any(|(g, f)| {
            g != group
                && f.profile == first.scheduler_name
                && f.priority >= first.priority
                && f.since < since
                && !self.reservations.by_group.contains_key(g)
        });
        if older {
            return;
        }
        let in_profile: Vec<(GroupKey, i32)> = self
            .reservations
            .by_group
            .iter()
            .filter(|(_, r)| r.profile == first.scheduler_name)
            .map(|(g, r)| (g.clone(), r.priority))
            .collect();
        if in_profile.len() >= args.max_reservations as usize {
            // A more important gang takes the place of the least important.
            let Some((weakest, _)) = in_profile
                .iter()
                .filter(|(_, p)| *p < first.priority)
                .min_by_key(|(_, p)| *p)
            else {
                return;
            };
            let why = format!("preempted by the reservation of more important {group}");
            self.end_reservation(weakest, &why, false, now);
        }
        let needed = self
            .gang
            .min_count(group)
            .map_or(members.len(), |m| m as usize)
            .saturating_sub(self.cache.group(group).map_or(0, |m| m.assumed_or_bound()))
            .min(members.len());
        if needed == 0 {
            return;
        }
        let nodes = self.cache.nodes().len();
        let allowed = nodes.saturating_mul(args.max_reserved_per_mille as usize) / 1000;
        if self.reservations.reserved_nodes().saturating_add(needed) > allowed {
            return;
        }
        let Some((slots, expected_start_ms)) = self.pick_room(group, &members[..needed]) else {
            return;
        };
        let reservation = Reservation {
            members: slots,
            priority: first.priority,
            profile: first.scheduler_name.clone(),
            made: now,
            until: crate::model::deadline::after(now, args.timeout),
            expected_start_ms,
        };
        let nodes: Vec<&str> = reservation.nodes().map(|n| &**n).collect();
        let start = match self.reservations.expected_start_in(&reservation, now) {
            Some(s) => format!("expected to start in {s:.0}s"),
            None => "start unknown (a pod it waits for declares no end)".to_string(),
        };
        let message = format!(
            "room reserved on {} node(s) [{}] after {:.0}s of waiting; {start}",
            nodes.len(),
            nodes.join(", "),
            now.saturating_duration_since(since).as_secs_f64()
        );
        self.reservations
            .by_group
            .insert(group.clone(), reservation);
        self.outbox.event(
            ObjectRef::Group(group.clone()),
            EventType::Normal,
            "Reserved",
            message.clone(),
        );
        self.outbox.group_reservation(group, true, message);
    }

    /// The gang was placed (wherever): its reservation ends, and it is no
    /// longer failing.
    pub(super) fn gang_started(&mut self, group: &GroupKey, now: Instant) {
        self.reservations.failing.remove(group);
        if let Some(r) = self.reservations.by_group.get(group) {
            let took = now.saturating_duration_since(r.made);
            self.sample(super::Sample::ReservationStarted(took));
            self.end_reservation(group, "its gang started", true, now);
        }
    }

    /// A pod left `node`: each reservation there whose every member now
    /// fits its node is tried at once, past its backoff and its gang's
    /// denial (the gang binds the moment its room is free).
    pub(super) fn reserved_room_freed(&mut self, node: &str) {
        let ready: Vec<GroupKey> = self
            .reservations
            .by_group
            .iter()
            .filter(|(_, r)| r.nodes().any(|n| **n == *node))
            .filter(|(_, r)| {
                r.members.iter().all(|(m, n)| {
                    self.cache.node(n).is_some_and(|s| {
                        let mut free = s.info.allocatable.clone();
                        free.sub(&s.requested);
                        fits(&m.requests, &free)
                    })
                })
            })
            .map(|(g, _)| g.clone())
            .collect();
        for g in ready {
            self.gang.lift_denial(&g);
            let (gang, cache) = (&self.gang, &self.cache);
            for key in self.queue.members_of(&g) {
                self.queue.retry_now(&key, |p| gang.pre_enqueue(p, cache));
            }
        }
    }

    /// A member of `group` left: with none of its members waiting any more,
    /// its reservation (and its failing record) end.
    pub(super) fn reserved_member_gone(&mut self, group: &GroupKey, now: Instant) {
        let tracked = self.reservations.failing.contains_key(group)
            || self.reservations.by_group.contains_key(group);
        if !tracked || !self.queue.members_of(group).is_empty() {
            return;
        }
        self.reservations.failing.remove(group);
        if self.reservations.by_group.contains_key(group) {
            self.end_reservation(group, "its gang has no pod waiting any more", false, now);
        }
    }

    /// A node was deleted: a reservation holding room there ends (its gang
    /// may get another, elsewhere, at its next failure).
    pub(super) fn reserved_node_gone(&mut self, node: &str, now: Instant) {
        let hit: Vec<GroupKey> = self
            .reservations
            .by_group
            .iter()
            .filter(|(_, r)| r.nodes().any(|n| **n == *node))
            .map(|(g, _)| g.clone())
            .collect();
        for g in hit {
            let why = format!("reserved node {node} was deleted");
            self.end_reservation(&g, &why, false, now);
        }
    }

    /// The definition is gone: so are its reservations.
    pub(super) fn reservations_forget(&mut self, def: &crate::model::DefinitionKey) {
        self.reservations
            .failing
            .retain(|g, _| g.definition != *def);
        let gone: Vec<GroupKey> = self
            .reservations
            .by_group
            .keys()
            .filter(|g| g.definition == *def)
            .cloned()
            .collect();
        for g in gone {
            self.reservations.by_group.remove(&g);
        }
    }

    /// Reservations past their timeout end.
    pub(super) fn expire_reservations(&mut self, now: Instant) {
        let due: Vec<GroupKey> = self
            .reservations
            .by_group
            .iter()
            .filter(|(_, r)| r.until <= now)
            .map(|(g, _)| g.clone())
            .collect();
        for g in due {
            // It waits again before it may have another.
            if let Some(f) = self.reservations.failing.get_mut(&g) {
                f.since = now;
            }
            self.end_reservation(
                &g,
                "its gang did not start within reservationTimeoutSeconds",
                false,
                now,
            );
        }
    }

    fn end_reservation(&mut self, group: &GroupKey, why: &str, started: bool, now: Instant) {
        if self.reservations.by_group.remove(group).is_none() {
            return;
        }
        let message = format!("reservation ended: {why}");
        let type_ = if started {
            EventType::Normal
        } else {
            EventType::Warning
        };
        self.outbox.event(
            ObjectRef::Group(group.clone()),
            type_,
            "ReservationEnded",
            message.clone(),
        );
        self.outbox.group_reservation(group, false, message);
        // Its room is free for others again.
        self.flush_unschedulable(crate::framework::QueueingEvent::PodRemoved, now);
    }

    /// The nodes where `members` could start soonest, one member each,
    /// within the gang's required label domain if it has one, and when.
    /// On each node the pods to wait for are those ending first (declared
    /// ends, then the rest); a node is ranked by how many of those declare
    /// no end, then the latest declared end, then how many there are. The
    /// member must pass Filter there once they are gone.
    fn pick_room(&mut self, group: &GroupKey, members: &[Arc<PodInfo>]) -> Option<Room> {
        let taken: HashSet<Arc<str>> = self
            .reservations
            .by_group
            .values()
            .flat_map(|r| r.nodes().cloned())
            .collect();
        let level = self
            .gang
            .def(&group.definition)
            .and_then(|d| match &d.topology.required {
                Some(LevelRef::Label(k)) => Some(k.clone()),
                _ => None,
            });
        let shape = &members[0].requests;
        // (unknown ends, latest end, pods to wait for, node index, blockers)
        let mut ranked: Vec<Candidate> = Vec::new();
        for (i, n) in self.cache.nodes().iter().enumerate() {
            if n.info.unschedulable || taken.contains(&n.info.name) {
                continue;
            }
            if let Some((rank, wait_for)) = wait_on(n, group, shape) {
                ranked.push((i, wait_for, rank));
            }
        }
        ranked.sort_by(|a, b| a.2.cmp(&b.2).then(a.0.cmp(&b.0)));
        let needed = members.len();
        // The domain whose needed-th best node is best, when one is required.
        let chosen: Vec<Candidate> = match &level {
            None => ranked,
            Some(key) => {
                let mut by_domain: BTreeMap<String, Vec<Candidate>> = BTreeMap::new();
                for c in ranked {
                    if let Some(v) = self.cache.nodes()[c.0].info.labels.get(&**key) {
                        by_domain.entry(v.clone()).or_default().push(c);
                    }
                }
                by_domain
                    .into_values()
                    .filter(|v| v.len() >= needed)
                    .min_by_key(|v| v[needed - 1].2)?
            }
        };
        let mut slots = Vec::new();
        let mut latest: Option<i64> = Some(0);
        for (i, wait_for, score) in chosen {
            if slots.len() == needed {
                break;
            }
            let member = &members[slots.len()];
            if !self.fits_once_gone(member, i, &wait_for) {
                continue;
            }
            latest = match (latest, score.0) {
                (Some(l), 0) => Some(l.max(score.1)),
                _ => None,
            };
            slots.push((member.clone(), self.cache.nodes()[i].info.name.clone()));
        }
        (slots.len() == needed).then_some((slots, latest.filter(|l| *l > 0)))
    }

    /// Whether `member` passes Filter on node `i` with `gone` removed.
    fn fits_once_gone(&mut self, member: &Arc<PodInfo>, i: usize, gone: &[PodKey]) -> bool {
        let mut edits = WhatIf::default();
        for k in gone {
            let _ = self.cache.what_if_remove(k, &mut edits);
        }
        let fits = match self.profiles.get_mut(&member.scheduler_name) {
            Some(profile) => {
                let snapshot = Snapshot::of_cache(&self.cache);
                super::cycle::schedule_on(&mut profile.framework, member, &snapshot, i).is_ok()
            }
            None => false,
        };
        self.cache.revert(edits);
        fits
    }
}

/// On one node: the pods a member of `shape` waits for (ending first
/// first) and the node's rank, or `None` when it could never hold one.
fn wait_on(
    n: &crate::cache::NodeState,
    group: &GroupKey,
    shape: &Resources,
) -> Option<(Rank, Vec<PodKey>)> {
    let mut free = n.info.allocatable.clone();
    free.sub(&n.requested);
    if fits(shape, &free) {
        return Some(((0, 0, 0), Vec::new()));
    }
    let mut pods: Vec<&Arc<PodInfo>> = n
        .pods
        .iter()
        .filter(|p| p.group.key() != Some(group))
        .collect();
    pods.sort_by_key(|p| {
        (
            declared_end(p).is_none(),
            declared_end(p).unwrap_or(i64::MAX),
        )
    });
    let (mut unknown, mut latest, mut wait_for) = (0usize, 0i64, Vec::new());
    for p in pods {
        free.add(&p.requests);
        match declared_end(p) {
            Some(e) => latest = latest.max(e),
            None => unknown += 1,
        }
        wait_for.push(p.key.clone());
        if fits(shape, &free) {
            return Some(((unknown, latest, wait_for.len()), wait_for));
        }
    }
    None
}

/// Whether `shape` fits in `free`, resource by resource.
fn fits(shape: &Resources, free: &Resources) -> bool {
    shape.exceeding(free).next().is_none()
}

#[cfg(test)]
#[path = "reservations_tests.rs"]
mod tests;

impl Engine {
    /// Runs `f` with the reservations held for `pod`'s cycle taken off, and
    /// holds them again after; `None` (and `f` not run) when none were held.
    /// What a refusal's reason asks: would the pod, or its gang, fit but for
    /// the room held for a gang ahead of it (`WaitingForReservation`, not
    /// `Unschedulable`: an autoscaler must not scale for room that is there).
    pub(super) fn without_reservations<T>(
        &mut self,
        pod: &PodInfo,
        now: Instant,
        f: impl FnOnce(&mut Engine) -> T,
    ) -> Option<T> {
        if self.reservations.held.is_empty() {
            return None;
        }
        let held = std::mem::take(&mut self.reservations.held);
        self.cache.revert(held);
        let backfill = std::mem::take(&mut self.reservations.backfill_nodes);
        let out = f(self);
        let own = pod.group.key().cloned();
        self.hold_reservations(pod, own.as_ref(), now);
        self.reservations.backfill_nodes = backfill;
        Some(out)
    }
}
