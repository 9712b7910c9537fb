//! The invariants of gang-semantics.md, checked against the harness's own
//! record of the cluster rather than the engine's view of itself.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::Harness;
use crate::cache::PodState;
use crate::dialects::kueue::TOTAL_COUNT_ANNOTATION;
use crate::engine::{Action, PodLocation};
use crate::model::{GroupKey, GroupPolicy, GroupSource, PodAffinityTerm, PodKey, Resources};

impl Harness {
    /// I1–I5 and I9; the first violation found, described.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.check_no_partial_gang()?;
        self.check_no_overcommit()?;
        self.check_no_orphan_reservation()?;
        self.check_no_lost_pod()?;
        self.check_no_anti_affinity_violation()?;
        self.check_spread_respected()?;
        self.check_devices()
    }

    /// I5 — no binding violates required pod anti-affinity: when a `Bind` is
    /// issued, no pod bound or being bound shares a topology pair with it
    /// where either pod's required anti-affinity term selects the other.
    /// Checked as actions are drained (see `check_binds_respect_anti_affinity`).
    pub fn check_no_anti_affinity_violation(&self) -> Result<(), String> {
        match self.i5_violations.first() {
            Some(v) => Err(format!("I5: {v}")),
            None => Ok(()),
        }
    }

    /// Called with each batch of drained actions, after its binds were put in flight.
    pub(super) fn check_binds_respect_anti_affinity(&mut self, actions: &[Action]) {
        if !actions.iter().any(|a| matches!(a, Action::Bind { .. })) {
            return;
        }
        // Every pod holding a node: bound, or with a bind in flight. A
        // bind in flight for a pod since recreated under the same name will
        // fail on its uid: it holds nothing.
        let in_flight: BTreeMap<&PodKey, &Arc<str>> = self
            .in_flight
            .iter()
            .filter(|b| self.pods.get(&b.pod).is_some_and(|p| p.uid == b.uid))
            .map(|b| (&b.pod, &b.node))
            .collect();
        let has_terms = |p: &crate::model::PodInfo| {
            !p.constraints.pod_affinity.required_anti_affinity.is_empty()
        };
        // Only a pod with terms can be violated or violate.
        let any_bind_terms = actions.iter().any(|a| match a {
            Action::Bind { pod, .. } => self.pods.get(pod).is_some_and(|p| has_terms(p)),
            _ => false,
        });
        let holders: Vec<(&Arc<crate::model::PodInfo>, &Arc<str>)> = self
            .pods
            .values()
            .filter(|p| any_bind_terms || has_terms(p))
            .filter_map(|p| match in_flight.get(&p.key) {
                Some(n) => Some((p, *n)),
                None if p.occupies_node() => p.node_name.as_ref().map(|n| (p, n)),
                None => None,
            })
            .collect();
        let facts = self.engine.cache().facts();
        let mut found = Vec::new();
        for action in actions {
            let Action::Bind { pod, node, .. } = action else {
                continue;
            };
            let (Some(p), Some(n)) = (self.pods.get(pod), self.nodes.get(node)) else {
                continue;
            };
            let p_terms = has_terms(p);
            for &(q, other_node) in &holders {
                if q.key == p.key || !(p_terms || has_terms(q)) {
                    continue;
                }
                let Some(m) = self.nodes.get(other_node) else {
                    continue;
                };
                for (a, b) in [(p, q), (q, p)] {
                    let selects = |t: &PodAffinityTerm| {
                        t.matches(&b.key.namespace, &b.labels, || {
                            facts.namespace_labels(&b.key.namespace)
                        })
                    };
                    for t in a.constraints.pod_affinity.required_anti_affinity.iter() {
                        let same_pair =
                            match (n.labels.get(&t.topology_key), m.labels.get(&t.topology_key)) {
                                (Some(x), Some(y)) => x == y,
                                _ => false,
                            };
                        if same_pair && selects(t) {
                            found.push(format!(
                                "{} bound to {node} next to {} on {other_node}: {}'s anti-affinity on {} selects {}",
                                p.key, q.key, a.key, t.topology_key, b.key
                            ));
                        }
                    }
                }
            }
        }
        self.i5_violations.extend(found);
    }

    /// I1 — no partial gang: every `Bind` of a gang member was issued while at
    /// least `min_count` members were bound or being bound (a Kueue group's
    /// `min_count` is the total its members announce; members of a profile
    /// without gang scheduling are plain pods). Checked as actions
    /// are drained (see `check_binds_release_quorum`); this reports the result.
    pub fn check_no_partial_gang(&self) -> Result<(), String> {
        match self.i1_violations.first() {
            Some(v) => Err(format!("I1: {v}")),
            None => Ok(()),
        }
    }

    /// Called with each batch of drained actions, after its binds were put in flight.
    pub(super) fn check_binds_release_quorum(&mut self, actions: &[Action]) {
        // The harness's record does not change within a batch.
        let mut holding_of: std::collections::HashMap<GroupKey, usize> = Default::default();
        for action in actions {
            let Action::Bind { pod, .. } = action else {
                continue;
            };
            let Some(member) = self.pods.get(pod) else {
                continue;
            };
            let Some(group) = member.group.key().cloned() else {
                continue;
            };
            if self.gang_disabled.contains(&member.scheduler_name) {
                // Its profile does not gang-schedule: a plain pod.
                continue;
            }
            let policy = match group.definition.source {
                // No definition object: the size every member announces.
                GroupSource::Kueue => member
                    .annotations
                    .get(TOTAL_COUNT_ANNOTATION)
                    .and_then(|n| n.parse().ok())
                    .map(|min_count| {
                        Ok(GroupPolicy::Gang {
                            min_count,
                            schedule_timeout: None,
                        })
                    }),
                _ => self.defs.get(&group.definition).map(|d| d.policy.clone()),
            };
            let min_count = match policy {
                Some(Ok(GroupPolicy::Gang { min_count, .. })) => min_count as usize,
                Some(Ok(GroupPolicy::Basic)) => continue,
                _ => {
                    self.i1_violations.push(format!(
                        "{pod} bound as a member of {group}, which has no usable definition"
                    ));
                    continue;
                }
            };
            let holding = match holding_of.get(&group) {
                Some(&n) => n,
                None => {
                    let n = self.members_holding(&group);
                    holding_of.insert(group.clone(), n);
                    n
                }
            };
            if holding < min_count {
                self.i1_violations.push(format!(
                    "{pod} of {group} released with {holding}/{min_count} members bound or binding"
                ));
            }
        }
    }

    /// I1 for victims — a preemption evicts a gang whole or not at all:
    /// once a batch of actions asks for victims, every gang with a member
    /// among them keeps either none of its members holding a node (other
    /// than those asked to go) or at least its `minCount`.
    pub(super) fn check_preemptions_keep_gangs_whole(&mut self, actions: &[Action]) {
        let mut gangs = Vec::new();
        for action in actions {
            // A victim from a profile without gang scheduling is a plain pod,
            // whatever group it names: evicting it breaks no gang.
            if let Action::Preempt { victim, .. } = action
                && let Some(p) = self.pods.get(victim)
                && !self.gang_disabled.contains(&p.scheduler_name)
                && let Some(g) = p.group.key().cloned()
                && !gangs.contains(&g)
            {
                gangs.push(g);
            }
        }
        if gangs.is_empty() {
            return;
        }
        let preempted: std::collections::HashSet<&PodKey> = self.preempted.iter().collect();
        let mut staying: std::collections::HashMap<&GroupKey, usize> =
            gangs.iter().map(|g| (g, 0)).collect();
        for p in self.pods.values() {
            // Pods of a profile without gang scheduling are plain pods.
            if let Some(g) = p.group.key()
                && let Some(n) = staying.get_mut(g)
                && p.occupies_node()
                && !self.gang_disabled.contains(&p.scheduler_name)
                && !preempted.contains(&p.key)
            {
                *n += 1;
            }
        }
        let mut found = Vec::new();
        for group in &gangs {
            let Some(Ok(GroupPolicy::Gang { min_count, .. })) =
                self.defs.get(&group.definition).map(|d| d.policy.clone())
            else {
                continue;
            };
            let staying = staying.get(group).copied().unwrap_or(0);
            if staying > 0 && staying < min_count as usize {
                found.push(format!(
                    "preemption left {group} with {staying}/{min_count} members running"
                ));
            }
        }
        self.i1_violations.extend(found);
    }

    /// Members bound (not terminal) or with a bind in flight.
    fn members_holding(&self, group: &GroupKey) -> usize {
        let bound = self
            .pods
            .values()
            .filter(|p| p.group.key() == Some(group) && p.occupies_node())
            .count();
        let in_flight = self
            .in_flight
            .iter()
            .filter(|b| {
                self.pods
                    .get(&b.pod)
                    .is_some_and(|p| p.group.key() == Some(group) && p.node_name.is_none())
            })
            .count();
        bound + in_flight
    }

    /// I2 — no overcommit: on every node the requests of bound and assumed pods
    /// fit its allocatable, for every resource. An extended resource the
    /// node does not advertise and a DeviceClass serves is devices, not
    /// allocatable: I9 speaks for it.
    pub fn check_no_overcommit(&self) -> Result<(), String> {
        let dra = &self.engine.cache().facts().dra;
        for node in self.engine.cache().nodes() {
            let alloc = &node.info.allocatable;
            let over: Vec<&str> = node
                .requested
                .exceeding(alloc)
                .filter(|r| {
                    alloc.scalar.get(*r).copied().unwrap_or(0) > 0
                        || dra.extended_class(r).is_none()
                })
                .collect();
            let pods_over = node.requested.pods > alloc.pods && alloc.pods > 0;
            if !over.is_empty() || pods_over {
                return Err(format!(
                    "I2: node {} overcommitted ({over:?}, pods {}/{}): requested {:?}",
                    node.name(),
                    node.requested.pods,
                    alloc.pods,
                    node.requested
                ));
            }
        }
        Ok(())
    }

    /// I3 — no orphan reservation: every reservation belongs to a pod that is
    /// waiting at Permit or being bound, and each node's accounting equals the
    /// recomputation from the pods that are bound or legitimately assumed.
    pub fn check_no_orphan_reservation(&self) -> Result<(), String> {
        let mut expected: BTreeMap<Arc<str>, Resources> = BTreeMap::new();
        for pod in self.pods.values().filter(|p| p.occupies_node()) {
            if let Some(node) = &pod.node_name {
                expected.entry(node.clone()).or_default().add(&pod.requests);
            }
        }
        for cached in self.engine.cache().pods() {
            let PodState::Assumed { node, .. } = &cached.state else {
                continue;
            };
            let key = &cached.info.key;
            let real = self.pods.get(key);
            let waiting = self.engine.gang().waiting().contains(key);
            let binding = self.in_flight.iter().any(|b| &b.pod == key);
            let bound_unconfirmed = real.and_then(|p| p.node_name.as_ref()) == Some(node);
            if real.is_none() || !(waiting || binding || bound_unconfirmed) {
                return Err(format!(
                    "I3: {key} holds a reservation on {node} but is neither waiting at permit nor binding"
                ));
            }
            if !bound_unconfirmed {
                expected
                    .entry(node.clone())
                    .or_default()
                    .add(&cached.info.requests);
            }
        }
        for node in self.engine.cache().nodes() {
            let want = expected.remove(node.name()).unwrap_or_default();
            if !same_usage(&node.requested, &want) {
                return Err(format!(
                    "I3: node {} accounts {:?}, the cluster says {:?}",
                    node.name(),
                    node.requested,
                    want
                ));
            }
        }
        Ok(())
    }

    /// I4 — no lost pod: every pending pod of ours is in exactly one place, and
    /// nothing else is anywhere.
    pub fn check_no_lost_pod(&self) -> Result<(), String> {
        for pod in self.pods.values() {
            let locations = self.engine.locations(&pod.key);
            let pending = pod.node_name.is_none()
                && !pod.phase.is_terminal()
                && !pod.deleting
                && self.engine.cache().is_served(&pod.scheduler_name);
            let ok = if pending {
                locations.len() == 1
            } else {
                locations.is_empty() || (!self.confirm_binds && locations == [PodLocation::Binding])
            };
            if !ok {
                return Err(format!(
                    "I4: {} (pending: {pending}) is in {locations:?}",
                    pod.key
                ));
            }
        }
        Ok(())
    }
}

/// Equal in every component, treating absent scalars as zero.
fn same_usage(a: &Resources, b: &Resources) -> bool {
    let mut d = a.clone();
    d.sub(b);
    d.is_zero()
}
