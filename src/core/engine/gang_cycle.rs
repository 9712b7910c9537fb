//! The gang cycle: a gang whose quorum is present is planned as one unit.
//!
//! The member popped pulls every other queued member of its group into the
//! cycle. Each is placed in queue order on the same node table, every member
//! seeing the ones planned before it (they are assumed as they are planned,
//! so resources, ports, inter-pod affinity and spread among members all
//! count). Only a plan that meets the quorum is kept: its members pass
//! Permit together and bind. A plan short of the quorum is undone before
//! anything leaves the engine — no reservation is ever visible, so no other
//! gang waits on nodes that will be given back — and the whole gang backs
//! off with one message naming the member that could not be placed.
//!
//! This mirrors kube-scheduler 1.37's pod-group scheduling cycle (KEP-4671):
//! plan all members on one snapshot, then reserve. Late members of a
//! released gang, members of a partly reserved gang, plain pods and
//! basic-policy groups keep the per-pod cycle (`cycle.rs`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use super::Engine;
use crate::framework::lifecycle::{PreFilterVerdict, Refusal};
use crate::framework::placement::{Batch, FitError, Framework};
use crate::framework::{EventSet, NodeRestriction, PendingReason, QueueingEvent, Snapshot};
use crate::gang::placement_score::{self, Candidate, packing_score};
use crate::gang::{PlacementTry, SlicePlan};
use crate::model::{GroupKey, PodInfo};
use crate::plugins::registry;
use crate::queue::Requeue;

/// Per-node answers remembered across like members, one memo per profile,
/// for one gang cycle (`framework::placement::Batch`).
#[derive(Default)]
pub(super) struct Batches {
    by_profile: HashMap<Arc<str>, Batch>,
    /// Every memo is forgotten as it is handed out: the unmemoized pass,
    /// for tests that compare the two.
    forget_each_use: bool,
}

impl Batches {
    /// The engine's tables, every memo forgotten: what a fresh set would
    /// be, without allocating one. Give them back with `Engine::batches`.
    pub(super) fn take_fresh(from: &mut Batches) -> Batches {
        let mut batches = std::mem::take(from);
        batches.forget_all();
        batches
    }

    /// Forgets every memo, keeping the tables.
    pub(super) fn forget_all(&mut self) {
        for b in self.by_profile.values_mut() {
            b.forget();
        }
    }

    /// See `forget_each_use`.
    #[cfg(any(test, feature = "testkit"))]
    pub(super) fn forget_each_use(&mut self) {
        self.forget_each_use = true;
    }

    /// The memo for `scheduler`'s pods (created for `framework` on first use).
    pub(super) fn for_profile(
        &mut self,
        scheduler: &Arc<str>,
        framework: &Framework,
    ) -> &mut Batch {
        let batch = self
            .by_profile
            .entry(scheduler.clone())
            .or_insert_with(|| Batch::new(framework));
        if self.forget_each_use {
            batch.forget();
        }
        batch
    }
}

/// What a gang that found no placement learnt before giving up: what
/// preemption said, and whether it would fit but for reservations held for
/// gangs ahead of it.
#[derive(Default)]
pub(super) struct AfterPreemption {
    pub note: Option<String>,
    pub reservation_ahead: bool,
}

/// One member's place in a plan.
pub(super) struct Planned {
    pub pod: Arc<PodInfo>,
    pub node: Arc<str>,
}

/// What planning a gang came to.
pub(super) struct Plan {
    pub placed: Vec<Planned>,
    /// Members no node could take, with why; `None` for those not tried
    /// once the quorum was out of reach.
    pub unplaced: Vec<(Arc<PodInfo>, Option<FitError>)>,
    /// The joint device search stopped at one of its bounds
    /// (`joint_devices`).
    pub bounded: bool,
}

impl Engine {
    /// Plans `first`'s gang as one unit (see the module doc).
    pub(super) fn run_gang_cycle(
        &mut self,
        first: Arc<PodInfo>,
        group: GroupKey,
        min_count: u32,
        now: Instant,
    ) {
        // Group-level checks (denial, scheduler conflict, minResources,
        // topology domain) speak for every member: the first one's verdict
        // is the gang's.
        match self.gang.pod_group_pre_filter(&first, &self.cache, now) {
            PreFilterVerdict::Proceed | PreFilterVerdict::Restrict(_) => {}
            PreFilterVerdict::HoldUntil(until) => {
                let order = self.gang.order_key(&first);
                self.queue.requeue(first, order, Requeue::Hold(until), now);
                return;
            }
            PreFilterVerdict::Refuse(refusal) => return self.refuse(first, refusal, now),
        }
        let restriction = self.gang.confinement(&group, &self.cache);
        if !self.profiles.contains_key(&first.scheduler_name) {
            // Not a gang this engine can plan: the per-pod cycle reports it.
            return self.run_cycle(first, now);
        }
        let members = self.pull_members(first, &group);
        let placed_before = self.cache.group(&group).map_or(0, |m| m.assumed_or_bound());
        let needed = usize::try_from(min_count)
            .unwrap_or(usize::MAX)
            .saturating_sub(placed_before);
        if members.len() < needed {
            return self.park_short(&group, min_count, members, now);
        }
        let needed_u64 = u64::try_from(needed).unwrap_or(u64::MAX);
        let confined = restriction.is_some();
        let tries = match restriction {
            // The per-pod confinement of a gang already partly placed.
            Some(r) => vec![PlacementTry::within(Some(r))],
            // The claims the PodGroup shares and has not allocated yet
            // confine it to their devices' domains (`device_domains`).
            None => match self
                .gang
                .placement_tries(&members[0], &group, &self.cache, needed_u64)
                .and_then(|tries| self.within_shared_devices(&members[0], needed, tries))
            {
                Ok(tries) => tries,
                Err(mut message) => {
                    // No domain has room as the cluster stands: preemption
                    // weighs every domain of the required level.
                    let domains = self.gang.required_domains(&group, &self.cache);
                    let outcome = match self.preemption_wait(&group, &members[0], now) {
                        Some(wait) => super::preempt_gang::GangPreemption::NotDone(Some(wait)),
                        None => self
                            .preempt_for_gang(&group, &members, needed, min_count, &domains, now),
                    };
                    match outcome {
                        super::preempt_gang::GangPreemption::Done => return,
                        super::preempt_gang::GangPreemption::NotDone(note) => {
                            if let Some(note) = note {
                                message.push(' ');
                                message.push_str(&note);
                            }
                        }
                    }
                    let mut refusal = Refusal::group_wide("FailedScheduling", message);
                    if let Some(note) = self.provision_for_gang(&group, &members, needed, now) {
                        refusal.message.push(' ');
                        refusal.message.push_str(&note);
                        refusal = refusal.because(PendingReason::WaitingForProvisioning);
                    }
                    self.gang_failed(&group, &members, now);
                    return self.refuse_all(members, refusal, now);
                }
            },
        };
        let considered: Vec<String> = tries.iter().map(|t| t.label.clone()).collect();
        let mut batches = Batches::take_fresh(&mut self.batches);
        // Plans that met the quorum, scored (kube-scheduler's placement
        // scoring): all tries of the narrowest level holding the gang are
        // planned, and the best is committed. A gang with one try (no
        // topology request) plans once and commits, as before.
        let scoring = tries.len() > 1;
        let mut fitting: Vec<(Candidate, String, Plan)> = Vec::new();
        let mut last_assumed = false;
        let mut best: Option<(String, Plan)> = None;
        for (i, t) in tries.iter().enumerate() {
            if fitting.iter().any(|(c, _, _)| c.tier < t.tier) {
                // A narrower level already holds the gang.
                continue;
            }
            let plan = self.plan_try(&members, needed, t, &mut batches);
            if self.gang.placement_feasible(&self.cache, &group, min_count) {
                let candidate = Candidate {
                    tier: t.tier,
                    pods: u64::try_from(plan.placed.len().saturating_add(placed_before))
                        .unwrap_or(u64::MAX),
                    packing: match scoring {
                        true => packing_score(
                            self.cache.nodes(),
                            t.restriction.as_ref().map(|r| r.nodes.as_slice()),
                        ),
                        false => 0,
                    },
                };
                fitting.push((candidate, t.label.clone(), plan));
                // Keep the plan assumed when no later try can compete.
                let later: &[PlacementTry] = tries.get(i + 1..).unwrap_or(&[]);
                if !later.iter().any(|u| u.tier <= t.tier) {
                    last_assumed = true;
                    break;
                }
                if let Some((_, _, plan)) = fitting.last() {
                    self.undo(plan);
                }
                continue;
            }
            self.undo(&plan);
            if best
                .as_ref()
                .is_none_or(|(_, b)| plan.placed.len() > b.placed.len())
            {
                best = Some((t.label.clone(), plan));
            }
        }
        self.batches = batches;
        let scores: Vec<Candidate> = fitting.iter().map(|(c, _, _)| *c).collect();
        if let Some(win) = placement_score::best(&scores) {
            let last = fitting.len().saturating_sub(1);
            if last_assumed
                && win != last
                && let Some((_, _, plan)) = fitting.last()
            {
                self.undo(plan);
            }
            let (_, label, plan) = fitting.swap_remove(win);
            // The last plan is still assumed; any other is assumed again.
            let still_assumed = last_assumed && win == last;
            if !(still_assumed || self.redo(&plan)) {
                // The cache refused a node the plan had: plan afresh next time.
                self.gang.note_domains(&group, considered, None);
                return self.abandon(
                    &group,
                    min_count,
                    plan,
                    &label,
                    AfterPreemption::default(),
                    now,
                );
            }
            self.gang.note_domains(&group, considered, Some(label));
            return self.commit(&group, plan, now);
        }
        self.gang.note_domains(&group, considered, None);
        // PostFilter: the gang fits nowhere as the cluster stands; it may
        // make room by preempting lower-priority work (`preempt_gang`), in
        // any domain of its required level, not only in those whose room
        // looked enough and did not plan.
        let weigh = match confined {
            true => tries,
            false => self.with_every_required_domain(&members[0], &group, needed, tries),
        };
        let outcome = match self.preemption_wait(&group, &members[0], now) {
            Some(wait) => super::preempt_gang::GangPreemption::NotDone(Some(wait)),
            None => self.preempt_for_gang(&group, &members, needed, min_count, &weigh, now),
        };
        let note = match outcome {
            super::preempt_gang::GangPreemption::Done => return,
            super::preempt_gang::GangPreemption::NotDone(note) => note,
        };
        let ahead =
            self.fits_but_for_reservations(&members, &group, needed, min_count, &weigh, now);
        self.gang_failed(&group, &members, now);
        if let Some((label, plan)) = best {
            let after = AfterPreemption {
                note,
                reservation_ahead: ahead,
            };
            self.abandon(&group, min_count, plan, &label, after, now);
        }
    }

    /// Whether the gang would plan in one of `tries` with the room held for
    /// gangs ahead of it taken off (then it waits for a reservation, not
    /// for capacity). Plans nothing when no reservation was held.
    fn fits_but_for_reservations(
        &mut self,
        members: &[Arc<PodInfo>],
        group: &GroupKey,
        needed: usize,
        min_count: u32,
        tries: &[PlacementTry],
        now: Instant,
    ) -> bool {
        let Some(first) = members.first().cloned() else {
            return false;
        };
        self.without_reservations(&first, now, |e| {
            let mut batches = Batches::take_fresh(&mut e.batches);
            let mut fits = false;
            for t in tries {
                let plan = e.plan_try(members, needed, t, &mut batches);
                fits = e.gang.placement_feasible(&e.cache, group, min_count);
                e.undo(&plan);
                if fits {
                    break;
                }
            }
            e.batches = batches;
            fits
        })
        .unwrap_or(false)
    }

    /// `tries` and every other domain of the group's required level (within
    /// the domains of the devices its PodGroup shares, as `tries` are).
    fn with_every_required_domain(
        &mut self,
        first: &PodInfo,
        group: &GroupKey,
        needed: usize,
        mut tries: Vec<PlacementTry>,
    ) -> Vec<PlacementTry> {
        let every = self.gang.required_domains(group, &self.cache);
        if every.is_empty() {
            return tries;
        }
        if let Ok(every) = self.within_shared_devices(first, needed, every) {
            for t in every {
                if !tries.iter().any(|u| u.label == t.label) {
                    tries.push(t);
                }
            }
        }
        tries
    }

    /// Plans the members in one try's place, the way the try asks.
    pub(super) fn plan_try(
        &mut self,
        members: &[Arc<PodInfo>],
        needed: usize,
        t: &PlacementTry,
        batches: &mut Batches,
    ) -> Plan {
        match (&t.slices, &t.pack) {
            (Some(slices), _) => self.plan_slices(members, t, slices, batches),
            (None, Some(pack)) => self.plan_packed(members, needed, t, pack, batches),
            (None, None) => self.plan(members.to_vec(), needed, t.restriction.as_ref(), batches),
        }
    }

    /// Assumes again every member of a plan that was undone to try
    /// another place; false (and nothing assumed) if the cache refuses one.
    fn redo(&mut self, plan: &Plan) -> bool {
        for (i, p) in plan.placed.iter().enumerate() {
            let assumed = self
                .cache
                .node_index(&p.node)
                .is_some_and(|n| self.cache.assume(&p.pod.key, n).is_ok());
            if !assumed {
                for q in plan.placed.iter().take(i) {
                    self.cache.forget(&q.pod.key);
                }
                return false;
            }
        }
        true
    }

    /// Plans the members slice by slice (`size` each, in queue order), each
    /// slice within one domain of the slice level inside `t`'s domain.
    fn plan_slices(
        &mut self,
        members: &[Arc<PodInfo>],
        t: &PlacementTry,
        slices: &SlicePlan,
        batches: &mut Batches,
    ) -> Plan {
        let mut plan = Plan {
            placed: Vec::with_capacity(members.len()),
            unplaced: Vec::new(),
            bounded: false,
        };
        for chunk in members.chunks(slices.size) {
            let domains = self.gang.slice_domains(
                &chunk[0],
                &self.cache,
                slices,
                t.restriction.as_ref(),
                chunk.len(),
            );
            let mut placed = false;
            for domain in &domains {
                let sub = self.plan(chunk.to_vec(), chunk.len(), Some(domain), batches);
                plan.bounded |= sub.bounded;
                if sub.unplaced.is_empty() {
                    plan.placed.extend(sub.placed);
                    placed = true;
                    break;
                }
                self.undo(&sub);
            }
            if !placed {
                let why = format!(
                    "no domain of {} holds a slice of {} member(s) ({} tried)",
                    slices.level_name(),
                    chunk.len(),
                    domains.len()
                );
                let n = self.cache.nodes().len();
                for pod in chunk {
                    let err = FitError::pre_filter(crate::gang::NAME, n, why.clone().into(), false);
                    plan.unplaced.push((pod.clone(), Some(err)));
                }
            }
        }
        plan
    }

    /// Plans the members into as few domains of the level inside `t`'s as
    /// hold them (`GangScheduling::pack_domains`), each domain taking as
    /// many as its room says; whoever does not fit there is planned in the
    /// whole of `t`'s domain.
    fn plan_packed(
        &mut self,
        members: &[Arc<PodInfo>],
        needed: usize,
        t: &PlacementTry,
        pack: &SlicePlan,
        batches: &mut Batches,
    ) -> Plan {
        let order = self.gang.pack_domains(
            &members[0],
            &self.cache,
            pack,
            t.restriction.as_ref(),
            members.len(),
        );
        let mut plan = Plan {
            placed: Vec::with_capacity(members.len()),
            unplaced: Vec::new(),
            bounded: false,
        };
        let mut rest: &[Arc<PodInfo>] = members;
        let mut spill: Vec<Arc<PodInfo>> = Vec::new();
        for (domain, take) in &order {
            let (chunk, tail) = rest.split_at((*take).min(rest.len()));
            rest = tail;
            let sub = self.plan(chunk.to_vec(), 0, Some(domain), batches);
            plan.bounded |= sub.bounded;
            plan.placed.extend(sub.placed);
            spill.extend(sub.unplaced.into_iter().map(|(pod, _)| pod));
        }
        spill.extend(rest.iter().cloned());
        if !spill.is_empty() {
            let still = needed.saturating_sub(plan.placed.len());
            let sub = self.plan(spill, still, t.restriction.as_ref(), batches);
            plan.bounded |= sub.bounded;
            plan.placed.extend(sub.placed);
            plan.unplaced.extend(sub.unplaced);
        }
        plan
    }

    /// Gives back every node a plan assumed.
    pub(super) fn undo(&mut self, plan: &Plan) {
        for p in &plan.placed {
            self.cache.forget(&p.pod.key);
        }
    }

    /// A group-wide refusal before any plan: every member backs off with it.
    fn refuse_all(&mut self, members: Vec<Arc<PodInfo>>, refusal: Refusal, now: Instant) {
        let mut members = members.into_iter();
        let Some(first) = members.next() else {
            return;
        };
        let wake = refusal.wake_on;
        self.refuse(first.clone(), refusal, now);
        let how = match self.gang.denied_until(&first, now) {
            Some(until) => Requeue::NotBefore(until),
            None => Requeue::Unschedulable(wake),
        };
        for pod in members {
            self.stats.attempts_unschedulable += 1;
            let order = self.gang.order_key(&pod);
            self.queue.requeue(pod, order, how.clone(), now);
        }
    }

    /// `first` and every other member of `group` waiting in the queue (not
    /// behind the gate), in queue order.
    fn pull_members(&mut self, first: Arc<PodInfo>, group: &GroupKey) -> Vec<Arc<PodInfo>> {
        let mut others: Vec<Arc<PodInfo>> = self
            .queue
            .members_of(group)
            .iter()
            .filter_map(|key| self.queue.pull(key))
            .collect();
        // The queue pops the greatest key first.
        others.sort_by_cached_key(|p| std::cmp::Reverse(self.gang.order_key(p)));
        let mut members = Vec::with_capacity(others.len().saturating_add(1));
        members.push(first);
        members.extend(others);
        members
    }

    /// Places each member in turn, assuming it where it lands so the next
    /// one sees it; stops trying once fewer than `needed` could still be
    /// placed. Like members reuse each other's per-node answers (`batches`).
    fn plan(
        &mut self,
        members: Vec<Arc<PodInfo>>,
        needed: usize,
        restriction: Option<&NodeRestriction>,
        batches: &mut Batches,
    ) -> Plan {
        let spare = members.len().saturating_sub(needed);
        let mut joint = super::joint_devices::JointBudget::new();
        let mut plan = Plan {
            placed: Vec::with_capacity(members.len()),
            unplaced: Vec::new(),
            bounded: false,
        };
        for pod in members {
            if plan.unplaced.len() > spare {
                plan.unplaced.push((pod, None));
                continue;
            }
            let Some(profile) = self.profiles.get_mut(&pod.scheduler_name) else {
                let err = FitError::pre_filter(
                    "",
                    self.cache.nodes().len(),
                    format!("no profile serves schedulerName {}", pod.scheduler_name).into(),
                    true,
                );
                plan.unplaced.push((pod, Some(err)));
                continue;
            };
            let snapshot = Snapshot::of_cache(&self.cache);
            let batch = batches.for_profile(&pod.scheduler_name, &profile.framework);
            match profile.framework.schedule_batched(
                &pod,
                &snapshot,
                &mut profile.next_start,
                restriction,
                batch,
            ) {
                Ok(placement) => match self.cache.assume(&pod.key, placement.node_index) {
                    Ok(()) => plan.placed.push(Planned {
                        pod,
                        node: placement.node_name,
                    }),
                    Err(msg) => {
                        self.stats.attempts_error += 1;
                        let err =
                            FitError::pre_filter("", self.cache.nodes().len(), msg.into(), false);
                        plan.unplaced.push((pod, Some(err)));
                    }
                },
                // Fits no node as the plan's devices stand: search its
                // devices and the co-located members' together.
                Err(fit) => match self.place_jointly(&pod, &plan.placed, &mut joint) {
                    Some(node) => plan.placed.push(Planned { pod, node }),
                    None => plan.unplaced.push((pod, Some(fit))),
                },
            }
        }
        plan.bounded = joint.hit;
        plan
    }

    /// The plan meets the quorum: every placed member passes Permit (at
    /// once, in one release, unless a composite's barrier holds them), and
    /// the members no node took are refused on their own, as late members
    /// of a released gang are.
    fn commit(&mut self, group: &GroupKey, plan: Plan, now: Instant) {
        let keys = plan.placed.iter().map(|p| p.pod.key.clone()).collect();
        if self.gang.permit_pod_group(group, keys, &self.cache) {
            for Planned { pod, node } in plan.placed {
                self.stats.attempts_scheduled += 1;
                self.bind_or_pre_bind(&pod, node, now);
            }
        } else {
            for Planned { pod, node } in plan.placed {
                self.permit_assumed(pod, node, now);
            }
        }
        for (pod, fit) in plan.unplaced {
            // Every member is tried while the quorum is within reach.
            let refusal = match fit {
                None => Refusal::new("FailedScheduling", "not tried"),
                Some(fit) => Refusal::new("FailedScheduling", fit.to_string())
                    .waking_on(registry::requeue_on(&fit.rejected_by)),
            };
            self.refuse(pod, refusal, now);
        }
    }

    /// The plan falls short of the quorum: undo every assumption, and back
    /// the whole gang off with one message saying which member could not be
    /// placed and how many were.
    fn abandon(
        &mut self,
        group: &GroupKey,
        min_count: u32,
        plan: Plan,
        label: &str,
        after: AfterPreemption,
        now: Instant,
    ) {
        let AfterPreemption {
            note,
            reservation_ahead,
        } = after;
        let tasks = self.gang.task_shortfall_with(
            group,
            &self.cache,
            plan.placed.iter().map(|p| &p.pod.key),
        );
        let placed_before = self.cache.group(group).map_or(0, |m| m.assumed_or_bound());
        let planned = plan.placed.len().saturating_add(placed_before);
        let first_unplaced = plan
            .unplaced
            .iter()
            .find_map(|(pod, fit)| fit.as_ref().map(|f| (pod, f)));
        // What a member that fits no node waits for, and a changed
        // definition; anything, when the shortfall is members not ready.
        let wake = first_unplaced.map_or(EventSet::ALL, |(_, fit)| {
            registry::requeue_on(&fit.rejected_by).union(EventSet::of(&[QueueingEvent::Gang]))
        });
        let why = match first_unplaced {
            Some((pod, fit)) => format!("member {} fits no node: {fit}", pod.key),
            // Every member placed and still short: members behind a
            // scheduling gate or not yet observed, or a task's minimum.
            None => format!(
                "only {} members were ready to be placed (the others are gated or not yet created){}",
                plan.placed.len(),
                tasks
                    .map(|t| format!(", and {t} per spec.minTaskMember"))
                    .unwrap_or_default()
            ),
        };
        let within = match label {
            "" => String::new(),
            l => format!(" (best try: {l})"),
        };
        let mut message = format!(
            "{group} cannot be placed as a whole{within}: {planned} of the {min_count} members needed could be placed; {why}"
        );
        if plan.bounded {
            message.push_str(&format!(
                " (the joint device search across members stopped at its bound of {} tries or {} ms; the members' devices were chosen greedily)",
                super::joint_devices::MAX_TRIES,
                super::joint_devices::MAX_TIME.as_millis()
            ));
        }
        if let Some(note) = note {
            message.push(' ');
            message.push_str(&note);
        }
        // Members short of the quorum because others are not ready wait
        // for members, not for capacity.
        let mut condition = match first_unplaced {
            None => PendingReason::WaitingForMembers,
            Some(_) if reservation_ahead => PendingReason::WaitingForReservation,
            Some(_) => PendingReason::Unschedulable,
        };
        let members: Vec<Arc<PodInfo>> = plan
            .placed
            .into_iter()
            .map(|p| p.pod)
            .chain(plan.unplaced.into_iter().map(|(pod, _)| pod))
            .collect();
        if condition == PendingReason::Unschedulable {
            let needed = (min_count as usize).saturating_sub(placed_before);
            if let Some(note) = self.provision_for_gang(group, &members, needed, now) {
                condition = PendingReason::WaitingForProvisioning;
                message.push(' ');
                message.push_str(&note);
            }
        }
        let refusal = Refusal::group_wide("FailedScheduling", message)
            .waking_on(wake)
            .because(condition);
        // The first member's refusal backs the gang off (PostFilter) and
        // reports the message on every pending member; the rest follow it
        // into backoff.
        self.refuse_all(members, refusal, now);
    }

    /// Fewer members are ready than the quorum needs (the others are behind
    /// scheduling gates, or still binding from an earlier attempt): plan
    /// nothing and wait. The members park as unschedulable; the next
    /// member to become ready is popped and pulls them back.
    fn park_short(
        &mut self,
        group: &GroupKey,
        min_count: u32,
        members: Vec<Arc<PodInfo>>,
        now: Instant,
    ) {
        let placed = self.cache.group(group).map_or(0, |m| m.assumed_or_bound());
        let ready = members.len().saturating_add(placed);
        let message = format!(
            "waiting for {ready}/{min_count} members of {group} to be ready to schedule (the others are behind scheduling gates)"
        );
        for pod in members {
            self.stats.attempts_unschedulable += 1;
            self.report_refusal(
                &pod.key,
                &Refusal::new("FailedScheduling", message.clone())
                    .because(PendingReason::WaitingForMembers),
                false,
            );
            // The next member to become ready pulls them back; any event
            // may be the one that readies it.
            let order = self.gang.order_key(&pod);
            self.queue
                .requeue(pod, order, Requeue::Unschedulable(EventSet::ALL), now);
        }
    }
}
