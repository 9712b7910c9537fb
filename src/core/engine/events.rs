//! How the engine reacts to cluster events: keep the cache exact, move pods
//! between the queue's places, re-run the gate and the barrier for the groups
//! an event touches, and flush the unschedulable pool on relevant changes.

use std::sync::Arc;
use std::time::Instant;

use super::{Engine, EventType, ObjectRef};
use crate::cache::PodState;
use crate::framework::{EventSet, QueueingEvent};
use crate::gang::{DefChange, group_gate};
use crate::model::{DefinitionKey, GroupDef, GroupKey, NodeInfo, PodInfo, PodKey};
use crate::queue::Requeue;

impl Engine {
    pub(super) fn on_node_upserted(&mut self, node: Arc<NodeInfo>, now: Instant) {
        let events = EventSet::of_node_update(self.cache.node(&node.name).map(|n| &*n.info), &node);
        self.cache.upsert_node(node);
        if !events.is_empty() {
            self.flush_unschedulable(events, now);
        }
    }

    pub(super) fn on_node_deleted(&mut self, name: &str, now: Instant) {
        // Gangs running there lose those members (PodGroupSatisfied).
        let groups: Vec<GroupKey> = self
            .cache
            .node(name)
            .into_iter()
            .flat_map(|n| n.pods.iter().filter_map(|p| p.group.key().cloned()))
            .collect();
        for g in &groups {
            self.gang.mark_dirty(g);
        }
        self.reserved_node_gone(name, now);
        for key in self.cache.remove_node(name) {
            self.pre_binding.remove(&key);
            self.gang.withdraw(&key);
            self.outbox.event(
                self.pod_ref(&key),
                EventType::Warning,
                "FailedScheduling",
                format!("node {name} was deleted while {key} was reserved on it; retrying"),
            );
            self.gang.forget_released(&key);
            self.requeue_from_cache(&key, Requeue::Backoff, now);
        }
    }

    /// Namespace labels decide `namespaceSelector` terms: a change may make
    /// an unschedulable pod fit.
    pub(super) fn on_namespace_upserted(
        &mut self,
        name: &str,
        labels: crate::cache::Labels,
        now: Instant,
    ) {
        if self.cache.facts_mut().upsert_namespace(name, labels) {
            self.regroup_namespace(name, now);
            self.flush_unschedulable(QueueingEvent::Namespace, now);
        }
    }

    pub(super) fn on_namespace_deleted(&mut self, name: &str, now: Instant) {
        if self.cache.facts_mut().remove_namespace(name) {
            self.flush_unschedulable(QueueingEvent::Namespace, now);
        }
    }

    pub(super) fn on_pod_upserted(&mut self, pod: Arc<PodInfo>, now: Instant) {
        let pod = self.intake.admit(pod, &self.cache);
        // Kueue definitions follow their members: applied before the
        // member's own event, so a member never waits for a definition it
        // brings itself.
        let synthesized = self.intake.kueue_member(&pod);
        self.apply_synthesized(synthesized, now);
        let relabelled = self
            .cache
            .pod(&pod.key)
            .is_some_and(|old| old.state.node().is_some() && old.info.labels != pod.labels);
        let key = pod.key.clone();
        // Its claims resolved differently (a template's claim generated):
        // DynamicResources' rejection may no longer hold.
        let claims_changed = self.cache.pod(&pod.key).is_some_and(|old| {
            old.info.constraints.resource_claims != pod.constraints.resource_claims
        });
        let change = self.cache.upsert_pod(pod.clone());
        let served = self.cache.is_served(&pod.scheduler_name);
        self.preemptions.observe(&pod, &change, served);
        if change.lost_reservation() {
            // Recreated under the same name: the old pod's place at Permit or in
            // binding is void (its bind will fail on the uid).
            self.gang.withdraw(&key);
            self.pre_binding.remove(&key);
            self.gang.forget_released(&key);
        }
        match &change.current {
            PodState::Pending if served => {
                let busy =
                    self.gang.waiting().contains(&key) || self.in_cycle.as_ref() == Some(&key);
                if !busy {
                    let gate = self.gang.pre_enqueue(&pod, &self.cache);
                    let order = self.gang.order_key(&pod);
                    match claims_changed {
                        true => self.queue.upsert_and_retry(pod.clone(), order, gate, now),
                        false => self.queue.upsert(pod.clone(), order, gate),
                    }
                }
                if !pod.constraints.resource_claims.is_empty() {
                    self.release_deleting_claims(&key);
                }
            }
            // Our own reservation; the informer has not seen the binding yet.
            PodState::Assumed { .. } => {}
            // Bound, finished, being deleted, or someone else's: not pending here.
            _ => {
                self.leave_scheduling(&key);
                if change.confirmed_assumed() {
                    self.confirm_released(&key, now);
                }
            }
        }
        let newly_placed = change.current.node().is_some()
            && (change.confirmed_assumed()
                || change.previous.as_ref().and_then(PodState::node) != change.current.node());
        let placed_pods_changed = newly_placed || (relabelled && change.current.node().is_some());
        if change.released_resources() {
            self.flush_unschedulable(QueueingEvent::PodRemoved, now);
            if let Some(node) = change.previous.as_ref().and_then(PodState::node) {
                self.reserved_room_freed(&node.clone());
            }
        }
        if placed_pods_changed {
            self.flush_unschedulable(QueueingEvent::PodPlaced, now);
        }
        // A pod seen again with only its status moved on changes nothing
        // its group's gate or barrier counts.
        if let Some(group) = pod.group.key()
            && !change.unchanged()
        {
            self.group_changed(group);
        }
    }

    pub(super) fn on_pod_deleted(&mut self, key: &PodKey, now: Instant) {
        let synthesized = self.intake.pod_deleted(key);
        self.apply_synthesized(synthesized, now);
        let removed = self.cache.remove_pod(key);
        let was_victim = self.preemptions.is_going(key);
        self.preemptions.forget(key);
        self.leave_scheduling(key);
        self.gang.forget_released(key);
        let Some(removed) = removed else {
            return;
        };
        if let Some(node) = removed.state.node() {
            self.flush_unschedulable(QueueingEvent::PodRemoved, now);
            if was_victim {
                self.victim_gone_from(node);
            }
            self.reserved_room_freed(node);
        }
        if let Some(group) = removed.info.group.key() {
            self.group_changed(group);
            self.reserved_member_gone(group, now);
        }
    }

    /// Applies a definition whose priority class is resolved.
    pub(super) fn apply_def(&mut self, def: GroupDef, now: Instant) {
        let key = def.key.clone();
        // The claims the members share are resolved with the DRA facts.
        let claims = def.extras.resource_claims.clone();
        self.cache
            .update_dra(|dra| dra.set_group_claims(&key, claims));
        let change = self.gang.upsert_def(def);
        if change == DefChange::Unchanged {
            return;
        }
        self.definition_changed(&key);
        if change == DefChange::Added {
            self.siblings_changed(&key);
        }
        self.hierarchy_changed(&key);
        self.flush_unschedulable(QueueingEvent::Gang, now);
    }

    pub(super) fn on_def_deleted(&mut self, key: &DefinitionKey, _now: Instant) {
        self.intake.def_deleted(key);
        self.releases.forget_definition(key);
        self.reservations_forget(key);
        self.provisioning_forget(key);
        self.cache.update_dra(|dra| dra.set_group_claims(key, None));
        if !self.gang.remove_def(key) {
            return;
        }
        let groups: Vec<GroupKey> = self.cache.groups_of(key).cloned().collect();
        for group in &groups {
            self.outbox.forget_group(group);
        }
        // A composite has no members: its own report is keyed by itself.
        self.outbox.forget_group(&GroupKey::new(key.clone()));
        self.definition_changed(key);
        self.siblings_changed(key);
        self.hierarchy_changed(key);
    }

    /// A PodGroup or CompositePodGroup of a hierarchy appeared, changed or
    /// left: the gates and barriers of the PodGroups it touches change.
    fn hierarchy_changed(&mut self, key: &DefinitionKey) {
        for leaf in self.gang.hierarchy_affected(key) {
            self.definition_changed(&leaf);
        }
    }

    /// A definition inside a containing object appeared or left: members of
    /// its unobserved siblings get a new reason for waiting.
    fn siblings_changed(&mut self, key: &DefinitionKey) {
        let Some((container, _)) = key.container() else {
            return;
        };
        let siblings: Vec<DefinitionKey> = self
            .cache
            .referenced_definitions()
            .filter(|d| {
                *d != key
                    && self.gang.def(d).is_none()
                    && d.container().is_some_and(|(c, _)| c == container)
            })
            .cloned()
            .collect();
        for sibling in &siblings {
            self.definition_changed(sibling);
        }
    }

    pub(super) fn on_bind_finished(
        &mut self,
        key: &PodKey,
        uid: &Arc<str>,
        node: &Arc<str>,
        result: Result<(), String>,
        now: Instant,
    ) {
        // The claims the binding wrote were observed before this report;
        // the plans it did not write are given back if it failed.
        self.cache
            .update_dra(|dra| dra.writes_done(key, result.is_ok()));
        if result.is_ok() {
            // The API server placed the pod: its `Scheduled` event is due
            // whatever happened to the pod here since (deleted, recreated).
            self.outbox
                .scheduled(key.clone(), uid.clone(), node.clone());
        }
        if self.cache.pod(key).is_none_or(|p| p.info.uid != *uid) {
            // A pod of that name that no longer exists here.
            return;
        }
        match result {
            // The reservation now stands for a bound pod: it stays until the
            // informer shows the pod (I7), with no timer.
            Ok(()) => self.stats.binds_succeeded += 1,
            Err(msg) => {
                self.stats.binds_failed += 1;
                // Only a reservation still held and past Permit is ours to undo;
                // anything else was already dropped (node deleted, expired).
                if !self.cache.is_assumed(key) || self.gang.waiting().contains(key) {
                    return;
                }
                self.cache.forget(key);
                if let Some(pod) = self.cache.pod(key).map(|p| p.info.clone()) {
                    self.gang.unreserve(&pod);
                    self.unreserve_claims(&pod);
                }
                self.gang.forget_released(key);
                self.outbox.event(
                    self.pod_ref(key),
                    EventType::Warning,
                    "FailedScheduling",
                    format!("Binding rejected: {msg}"),
                );
                self.requeue_from_cache(key, Requeue::Backoff, now);
                self.flush_unschedulable(QueueingEvent::PodRemoved, now);
            }
        }
    }

    // ---- shared reactions ------------------------------------------------------

    /// The pod is no longer pending here: out of the queue and the barrier.
    fn leave_scheduling(&mut self, key: &PodKey) {
        self.queue.remove(key);
        self.pre_binding.remove(key);
        if self.gang.withdraw(key).is_some() {
            self.cache.forget(key);
        }
        self.outbox.forget_pod(key);
    }

    /// A member appeared, changed or left: release gated members if the gate
    /// now passes, refresh gate messages later, re-run the barrier.
    pub(super) fn group_changed(&mut self, group: &GroupKey) {
        self.gang.mark_dirty(&group.clone());
        let (gang, cache) = (&self.gang, &self.cache);
        if group_gate(gang, group, cache).is_ok() {
            self.queue
                .reevaluate_gated(group, |p| gang.pre_enqueue(p, cache));
        }
        self.gang.reevaluate(group, &self.cache);
        // The other children of its gang composite may pass the gate now.
        for sibling in self.gang.barrier_scope(group).unwrap_or_default() {
            if sibling == *group {
                continue;
            }
            self.gang.mark_dirty(&sibling.clone());
            let (gang, cache) = (&self.gang, &self.cache);
            if group_gate(gang, &sibling, cache).is_ok() {
                self.queue
                    .reevaluate_gated(&sibling, |p| gang.pre_enqueue(p, cache));
            }
        }
    }

    /// A definition appeared, changed or disappeared: every queued member of its
    /// groups goes through the gate again (so a deleted or malformed definition
    /// re-gates them), and waiting members are released or rejected.
    fn definition_changed(&mut self, key: &DefinitionKey) {
        let groups: Vec<GroupKey> = self.cache.groups_of(key).cloned().collect();
        for group in &groups {
            let (gang, cache) = (&self.gang, &self.cache);
            self.queue
                .regate_group(group, |p| gang.pre_enqueue(p, cache));
            // Members' order depends on the definition's creation time.
            self.reorder_group(group);
            self.gang.mark_dirty(&group.clone());
            self.gang.reevaluate(group, &self.cache);
        }
    }

    fn reorder_group(&mut self, group: &GroupKey) {
        for key in self.queue.members_of(group) {
            if let Some(pod) = self.cache.pod(&key).map(|p| p.info.clone()) {
                let gate = self.gang.pre_enqueue(&pod, &self.cache);
                let order = self.gang.order_key(&pod);
                self.queue.upsert(pod, order, gate);
            }
        }
    }

    /// A cluster event: retry the pods parked as unschedulable that wait
    /// for it (the queueing events of the plugins that rejected them).
    /// A victim left `node`: each preemptor nominated there whose nominated
    /// nodes (its gang's, for a member) hold no more victims it waits for
    /// is retried now, not after its backoff: its room is made.
    fn victim_gone_from(&mut self, node: &str) {
        for pod in self.preemptions.nominated_on(node) {
            let left = self
                .preemptions
                .nominated_nodes_of(&pod)
                .iter()
                .filter_map(|n| self.cache.node(n))
                .any(|n| self.going_below(n, pod.priority).next().is_some());
            if !left {
                let (gang, cache) = (&self.gang, &self.cache);
                self.queue
                    .retry_now(&pod.key, |p| gang.pre_enqueue(p, cache));
            }
        }
    }

    pub(super) fn flush_unschedulable(&mut self, events: impl Into<EventSet>, now: Instant) {
        let (gang, cache) = (&self.gang, &self.cache);
        self.queue
            .flush_unschedulable(events, now, |p| gang.pre_enqueue(p, cache));
    }

    /// Puts a pod the cache holds as pending back into the queue, behind the
    /// gate if it no longer passes it.
    pub(super) fn requeue_from_cache(&mut self, key: &PodKey, how: Requeue, now: Instant) {
        let Some(cached) = self.cache.pod(key) else {
            return;
        };
        if cached.state != PodState::Pending || !cached.served || self.gang.waiting().contains(key)
        {
            return;
        }
        let pod = cached.info.clone();
        let order = self.gang.order_key(&pod);
        let how = match self.gang.pre_enqueue(&pod, &self.cache) {
            Err(gated) => Requeue::Gated(gated),
            Ok(()) => how,
        };
        self.queue.requeue(pod, order, how, now);
    }

    /// The group's gating status (members observed against its quorum), for
    /// a gang with a usable definition; the outbox writes it only on change.
    fn report_gating(&mut self, group: &GroupKey) {
        let Some(min_count) = self.gang.min_count(group) else {
            return;
        };
        let (observed, placed) = self
            .cache
            .group(group)
            .map_or((0, 0), |m| (m.observed(), m.assumed_or_bound()));
        let placed = u32::try_from(placed).unwrap_or(u32::MAX);
        self.outbox.group_gating(group, observed, min_count, placed);
    }

    /// A scheduled gang's health: its members holding a live node
    /// (bound and not terminating, or reserved) against `minCount`. A
    /// gang with no member left at all finished or was torn down: that is
    /// not reported as a shortfall.
    fn report_health(&mut self, group: &GroupKey) {
        let Some(min_count) = self.gang.min_count(group) else {
            return;
        };
        if !self.outbox.is_scheduled(group) {
            return;
        }
        let cache = &self.cache;
        let (running, observed) = cache.group(group).map_or((0, 0), |m| {
            let alive = m
                .bound()
                .iter()
                .filter(|k| {
                    cache.pod(k).is_some_and(|c| {
                        !c.info.deleting && c.state.node().is_some_and(|n| cache.node(n).is_some())
                    })
                })
                .count();
            (alive + m.assumed().len(), m.observed())
        });
        if observed == 0 && self.outbox.is_satisfied(group) {
            return;
        }
        let object = ObjectRef::Group(group.clone());
        self.outbox.group_health(group, running, min_count, object);
    }

    /// The gating status of the gang composites above a child group.
    fn report_composite_gating(&mut self, group: &GroupKey) {
        let has_parent = self
            .gang
            .def(&group.definition)
            .is_some_and(|d| d.parent_key().is_some());
        if !has_parent {
            return;
        }
        for composite in self.gang.ancestors(&group.definition).unwrap_or_default() {
            if let Some((ready, min)) = self.gang.composite_readiness(&composite, &self.cache) {
                self.outbox
                    .composite_gating(&GroupKey::new(composite), ready, min);
            }
        }
    }

    /// Writes changed gate messages (`waiting for N/M pods`, malformed
    /// definitions) once per change.
    pub(super) fn refresh_gate_messages(&mut self) {
        let groups = self.gang.take_dirty();
        for group in &groups {
            let (gang, cache) = (&self.gang, &self.cache);
            self.queue
                .reevaluate_gated(group, |p| gang.pre_enqueue(p, cache));
            self.report_gating(group);
            self.report_composite_gating(group);
            self.report_health(group);
        }
        for (key, gated) in self.queue.take_gate_changes() {
            if self
                .outbox
                .pod_condition(&key, gated.reason, &gated.message)
                && gated.warning
            {
                self.outbox.event(
                    self.pod_ref(&key),
                    EventType::Warning,
                    "FailedScheduling",
                    gated.message,
                );
            }
        }
    }
}
