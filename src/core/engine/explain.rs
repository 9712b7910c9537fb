//! `Engine::explain`: where a pod or gang stands in this engine and why,
//! read from the parts that own each fact (the cache's members, the
//! queue's slots and order, the barrier, the outbox's last conditions,
//! the preemptions), plus the one fact nothing else keeps: each gang's
//! last release without binding (`Releases`). Reads only; nothing here
//! changes scheduling state.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use super::{Engine, PodLocation};
use crate::explain::{
    Ahead, Explanation, Gang, LastAttempt, Member, Nominated, Permit, Phase, PodReason, Preemption,
    Queue, Release, Source, VictimReason, quorum_summary,
};
use crate::model::{
    DefinitionKey, GroupKey, GroupMembership, GroupPolicy, GroupSource, OwnerKind, PodInfo, PodKey,
};
use crate::queue::{OrderKey, QueueGroup};

/// The gangs and pods ahead a queue answer lists by name.
const AHEAD_SHOWN: usize = 10;
/// Distinct per-pod reasons a last attempt lists.
const REASONS_SHOWN: usize = 10;

/// What `explain` is asked about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Pod(PodKey),
    /// Every group of one definition (a Workload's entries, a
    /// LeaderWorkerSet's replicas): `name` is the object's name.
    Group {
        namespace: Arc<str>,
        source: GroupSource,
        name: Arc<str>,
    },
}

impl Target {
    /// Reads `KIND/NAME` as kubectl does (kinds singular or plural,
    /// short names, `kind.group` for the dialects sharing a kind).
    pub fn parse(namespace: &str, resource: &str) -> Result<Target, String> {
        let (kind, name) = resource.split_once('/').ok_or_else(|| {
            format!("{resource:?}: expected KIND/NAME (pod/NAME, podgroup/NAME, job/NAME, ...)")
        })?;
        if name.is_empty() || name.contains('/') {
            return Err(format!("{resource:?}: the name must be one path segment"));
        }
        let kind = kind.to_ascii_lowercase();
        let source = match kind.as_str() {
            "pod" | "pods" | "po" => return Ok(Target::Pod(PodKey::new(namespace, name))),
            "podgroup"
            | "podgroups"
            | "podgroup.scheduling.k8s.io"
            | "podgroups.scheduling.k8s.io" => GroupSource::PodGroup,
            "workload" | "workloads" => GroupSource::Workload,
            "compositepodgroup" | "compositepodgroups" => GroupSource::CompositePodGroup,
            "podgroup.scheduling.x-k8s.io" | "podgroups.scheduling.x-k8s.io" => {
                GroupSource::Coscheduling
            }
            "podgroup.scheduling.volcano.sh" | "podgroups.scheduling.volcano.sh" => {
                GroupSource::Volcano
            }
            "job" | "jobs" => GroupSource::Owner(OwnerKind::Job),
            "jobset" | "jobsets" => GroupSource::Owner(OwnerKind::JobSet),
            "leaderworkerset" | "leaderworkersets" | "lws" => {
                GroupSource::Owner(OwnerKind::LeaderWorkerSet)
            }
            "trainjob" | "trainjobs" => GroupSource::Owner(OwnerKind::TrainJob),
            "pytorchjob" | "pytorchjobs" => GroupSource::Owner(OwnerKind::PyTorchJob),
            "mpijob" | "mpijobs" => GroupSource::Owner(OwnerKind::MpiJob),
            "tfjob" | "tfjobs" => GroupSource::Owner(OwnerKind::TfJob),
            "xgboostjob" | "xgboostjobs" => GroupSource::Owner(OwnerKind::XgBoostJob),
            "jaxjob" | "jaxjobs" => GroupSource::Owner(OwnerKind::JaxJob),
            "raycluster" | "rayclusters" => GroupSource::Owner(OwnerKind::RayCluster),
            "vcjob" | "vcjobs" | "job.batch.volcano.sh" | "jobs.batch.volcano.sh" => {
                GroupSource::Owner(OwnerKind::VolcanoJob)
            }
            other => {
                return Err(format!(
                    "{other:?} is not a kind explain knows: use pod, podgroup, workload, compositepodgroup, podgroup.scheduling.x-k8s.io, podgroup.scheduling.volcano.sh, or a workload owner (job, jobset, lws, trainjob, pytorchjob, mpijob, tfjob, xgboostjob, jaxjob, raycluster, vcjob)"
                ));
            }
        };
        Ok(Target::Group {
            namespace: Arc::from(namespace),
            source,
            name: Arc::from(name),
        })
    }

    /// As the answer names it.
    pub fn describe(&self) -> String {
        match self {
            Target::Pod(k) => format!("pod/{k}"),
            Target::Group {
                namespace,
                source,
                name,
            } => format!("{}/{namespace}/{name}", source.kind_name()),
        }
    }

    /// Whether `def` is (one entry of) the target's object.
    pub fn names(&self, def: &DefinitionKey) -> bool {
        let Target::Group {
            namespace,
            source,
            name,
        } = self
        else {
            return false;
        };
        if def.namespace != *namespace || def.source != *source {
            return false;
        }
        match def.container() {
            Some((container, _)) => container.name == *name,
            None => def.name == *name,
        }
    }
}

/// Each gang's last release at Permit without binding (timed out, or
/// released early when a member fitted nowhere): when and why. Forgotten with the
/// definition.
#[derive(Debug, Default)]
pub(super) struct Releases {
    by_group: HashMap<GroupKey, (Instant, &'static str, String)>,
}

impl Releases {
    pub fn record(&mut self, group: &GroupKey, at: Instant, reason: &'static str, message: &str) {
        self.by_group
            .insert(group.clone(), (at, reason, message.to_string()));
    }

    pub fn forget_definition(&mut self, key: &DefinitionKey) {
        self.by_group.retain(|g, _| g.definition != *key);
    }

    fn get(&self, group: &GroupKey, now: Instant) -> Option<Release> {
        self.by_group
            .get(group)
            .map(|(at, reason, message)| Release {
                reason: (*reason).into(),
                message: message.clone(),
                seconds_ago: now.saturating_duration_since(*at).as_secs_f64(),
            })
    }
}

impl Engine {
    /// What this engine knows of `target`: one answer per group of a group
    /// target (usually one), one for a pod. Reads only; costs the target's
    /// members plus one walk of its profile's active pods.
    pub fn explain(&self, target: &Target, now: Instant) -> Vec<Explanation> {
        let asked = target.describe();
        match target {
            Target::Pod(key) => {
                let Some(cached) = self.cache.pod(key) else {
                    let summary = format!(
                        "{key} is not known to this scheduler (not found, already finished, or not yet observed)"
                    );
                    return vec![Explanation::new(
                        asked,
                        Source::Scheduler,
                        Phase::NotServed,
                        summary,
                    )];
                };
                let pod = &cached.info;
                if !self.cache.is_served(&pod.scheduler_name) {
                    let summary = format!(
                        "{key} names schedulerName {:?}, which this scheduler does not serve",
                        pod.scheduler_name
                    );
                    return vec![Explanation::new(
                        asked,
                        Source::Scheduler,
                        Phase::NotServed,
                        summary,
                    )];
                }
                match &pod.group {
                    GroupMembership::Member(group) => vec![self.explain_group(asked, group, now)],
                    GroupMembership::Invalid(msg) => {
                        let mut e = Explanation::new(
                            asked,
                            Source::Scheduler,
                            Phase::Invalid,
                            format!("invalid group reference: {msg}"),
                        );
                        e.members = vec![self.member(pod)];
                        vec![e]
                    }
                    GroupMembership::None => {
                        vec![self.explain_pods(asked, None, std::slice::from_ref(pod), now)]
                    }
                }
            }
            Target::Group { .. } => {
                let mut groups: Vec<GroupKey> = self
                    .cache
                    .referenced_definitions()
                    .filter(|d| target.names(d))
                    .flat_map(|d| self.cache.groups_of(d).cloned().collect::<Vec<_>>())
                    .collect();
                // A definition observed with no member yet.
                for def in self.gang.defs().filter(|d| target.names(&d.key)) {
                    let g = GroupKey::new(def.key.clone());
                    if !groups.contains(&g) && self.cache.groups_of(&def.key).next().is_none() {
                        groups.push(g);
                    }
                }
                groups.sort();
                groups.dedup();
                if groups.is_empty() {
                    let summary = format!(
                        "{asked} is not known to this scheduler: neither the object nor a pod naming it was observed"
                    );
                    return vec![Explanation::new(
                        asked,
                        Source::Scheduler,
                        Phase::NotServed,
                        summary,
                    )];
                }
                groups
                    .iter()
                    .map(|g| self.explain_group(asked.clone(), g, now))
                    .collect()
            }
        }
    }

    fn explain_group(&self, asked: String, group: &GroupKey, now: Instant) -> Explanation {
        let members = self.members_of(group);
        let mut e = self.explain_pods(asked, Some(group), &members, now);
        let bound = members
            .iter()
            .filter(|p| {
                self.cache
                    .pod(&p.key)
                    .is_some_and(|c| matches!(c.state, crate::cache::PodState::Bound { .. }))
            })
            .count();
        let gated = members
            .iter()
            .filter(|p| p.is_scheduling_gated() && p.node_name.is_none())
            .count();
        let placed = self.cache.group(group).map_or(0, |m| m.assumed_or_bound());
        let policy = self.gang.policy(group);
        let min_count = match &policy {
            Ok(GroupPolicy::Gang { min_count, .. }) => Some(*min_count),
            _ => None,
        };
        let present = members.len() - gated;
        e.gang = Some(Gang {
            group: group.to_string(),
            kind: group.definition.source.kind_name().into(),
            namespace: group.namespace().to_string(),
            name: group.definition.name.to_string(),
            replica: group.replica.as_deref().map(String::from),
            min_count,
            present: count(present),
            gated: count(gated),
            placed: count(placed),
            bound: count(bound),
            satisfied: self
                .outbox
                .is_scheduled(group)
                .then(|| self.outbox.is_satisfied(group)),
        });
        e.last_release = self.releases.get(group, now);
        if let Some(a) = e.last_attempt.as_mut() {
            a.group_message = self.outbox.group_condition_of(group).map(String::from);
        } else if let Some(m) = self.outbox.group_condition_of(group) {
            e.last_attempt = Some(LastAttempt {
                group_message: Some(m.to_string()),
                ..LastAttempt::default()
            });
        }
        if let Some((tried, chosen)) = self.gang.considered_domains().get(group) {
            let a = e.last_attempt.get_or_insert_with(LastAttempt::default);
            a.domains_tried = tried.clone();
            a.domain_chosen = chosen.clone();
        }
        if let Some(r) = self.reservations.get(group) {
            e.reservation = Some(crate::explain::Reservation {
                nodes: r.members.iter().map(|(_, n)| n.to_string()).collect(),
                held_seconds: now.saturating_duration_since(r.made).as_secs_f64(),
                expected_start_seconds: self.reservations.expected_start_in(r, now),
            });
            if matches!(
                e.phase,
                Phase::Queued | Phase::BackingOff | Phase::Unschedulable
            ) {
                e.phase = Phase::Reserved;
                e.summary = format!(
                    "room reserved on {} node(s); it binds once that room is free",
                    r.members.len()
                );
            }
        }
        // The gang's own phase, before anything its pods say.
        if self.gang.def(&group.definition).is_none() {
            e.phase = Phase::WaitingForDefinition;
            e.summary = self.gang.absent_message(&group.definition);
            return e;
        }
        match policy {
            Err(why) => {
                e.phase = Phase::Invalid;
                e.summary = why;
            }
            Ok(GroupPolicy::Gang { min_count, .. }) if present < min_count as usize => {
                e.phase = Phase::WaitingForQuorum;
                let gated: Vec<(String, String)> = members
                    .iter()
                    .filter(|p| p.is_scheduling_gated() && p.node_name.is_none())
                    .map(|p| (p.key.name.to_string(), p.scheduling_gates.join(", ")))
                    .collect();
                e.summary = quorum_summary(present, min_count, members.len(), &gated);
            }
            Ok(GroupPolicy::Gang { min_count, .. }) if e.phase == Phase::Bound => {
                let satisfied = !self.outbox.is_scheduled(group) || self.outbox.is_satisfied(group);
                e.summary = match satisfied {
                    true => format!("bound: {bound} member(s) running (minCount {min_count})"),
                    false => {
                        format!("bound, but below minCount: {bound} of {min_count} members running")
                    }
                };
            }
            Ok(_) => {
                if matches!(e.phase, Phase::Unschedulable | Phase::BackingOff)
                    && e.reservation.is_none()
                    && let Some(m) = self.outbox.group_condition_of(group)
                {
                    e.summary = format!("{}: {m}", e.phase.words());
                }
            }
        }
        e
    }

    /// The members cached for `group`, by name.
    fn members_of(&self, group: &GroupKey) -> Vec<Arc<PodInfo>> {
        let Some(m) = self.cache.group(group) else {
            return Vec::new();
        };
        let mut pods: Vec<Arc<PodInfo>> = m
            .pending()
            .iter()
            .chain(m.assumed())
            .chain(m.bound())
            .filter_map(|k| self.cache.pod(k).map(|c| c.info.clone()))
            .collect();
        pods.sort_by(|a, b| a.key.cmp(&b.key));
        pods
    }

    /// The answer from the pods alone: members, phase, queue, Permit,
    /// reasons, preemption.
    fn explain_pods(
        &self,
        asked: String,
        group: Option<&GroupKey>,
        pods: &[Arc<PodInfo>],
        now: Instant,
    ) -> Explanation {
        let members: Vec<Member> = pods.iter().map(|p| self.member(p)).collect();
        let has = |s: &str| members.iter().any(|m| m.state == s);
        let unit = match group {
            Some(g) => QueueGroup::Group(g.clone()),
            None => match pods.first() {
                Some(p) => QueueGroup::Pod(p.key.clone()),
                None => QueueGroup::Pod(PodKey::new("", "")),
            },
        };
        let victims = self.preemptions.victims_of(&unit);
        let nominated: Vec<Nominated> = pods
            .iter()
            .filter_map(|p| {
                self.preemptions.nomination(&p.key).map(|n| Nominated {
                    pod: p.key.to_string(),
                    node: n.node.to_string(),
                })
            })
            .collect();
        let (phase, summary) = if pods.is_empty() {
            (
                Phase::WaitingForQuorum,
                "no member observed yet".to_string(),
            )
        } else if !victims.is_empty() {
            (
                Phase::Preempting,
                format!("preempting: {} victim(s) still terminating", victims.len()),
            )
        } else if has("atPermit") {
            (
                Phase::AtPermit,
                "members hold nodes and wait at Permit for the rest".into(),
            )
        } else if has("binding") || has("preBind") {
            (Phase::Binding, "released to bind".into())
        } else if has("active") {
            (Phase::Queued, "queued for its turn".into())
        } else if has("backoff") {
            (
                Phase::BackingOff,
                "backing off after its last attempt".into(),
            )
        } else if has("unschedulable") {
            (
                Phase::Unschedulable,
                "did not fit; waiting for a cluster change that may help".into(),
            )
        } else if has("gated") || has("schedulingGated") {
            let why = members
                .iter()
                .find_map(|m| m.message.clone())
                .unwrap_or_else(|| "waiting at PreEnqueue".into());
            (Phase::WaitingForQuorum, why)
        } else if members
            .iter()
            .all(|m| m.state == "bound" || m.state == "terminating")
        {
            (
                Phase::Bound,
                format!("bound: {} pod(s) running", members.len()),
            )
        } else {
            (Phase::Unschedulable, "waiting".into())
        };
        let mut e = Explanation::new(asked, Source::Scheduler, phase, summary);
        e.queue = self.queue_facts(pods, now);
        if let Some(g) = group {
            let waiting = pods
                .iter()
                .filter(|p| self.gang.waiting().contains(&p.key))
                .count();
            if waiting > 0 {
                e.permit = Some(Permit {
                    waiting: count(waiting),
                    needed: self.gang.min_count(g).unwrap_or(0),
                    timeout_seconds: self
                        .gang
                        .deadline(g)
                        .map(|d| d.saturating_duration_since(now).as_secs_f64()),
                });
            }
        }
        let reasons = self.reasons(pods);
        if !reasons.is_empty() {
            e.last_attempt = Some(LastAttempt {
                pods: reasons,
                ..LastAttempt::default()
            });
        }
        if matches!(e.phase, Phase::Unschedulable | Phase::BackingOff)
            && let Some(first) = e.last_attempt.as_ref().and_then(|a| a.pods.first())
        {
            e.summary = format!("{}: {}", e.summary, first.message);
        }
        if !victims.is_empty() || !nominated.is_empty() {
            e.preemption = Some(Preemption {
                nominated,
                victims_terminating: victims.iter().map(|(k, _)| k.to_string()).collect(),
                why_victims: why_victims(&victims),
            });
        }
        e.members = members;
        e
    }

    fn member(&self, p: &Arc<PodInfo>) -> Member {
        let cached = self.cache.pod(&p.key);
        let state = match self.location(&p.key) {
            Some(PodLocation::Gated) if p.is_scheduling_gated() => "schedulingGated",
            Some(PodLocation::Gated) => "gated",
            Some(PodLocation::Active) => "active",
            Some(PodLocation::Backoff) => "backoff",
            Some(PodLocation::Unschedulable) => "unschedulable",
            Some(PodLocation::InCycle) => "inCycle",
            Some(PodLocation::WaitingAtPermit) => "atPermit",
            Some(PodLocation::Binding) if self.pre_binding.contains(&p.key) => "preBind",
            Some(PodLocation::Binding) => "binding",
            None => match cached.map(|c| &c.state) {
                _ if p.deleting => "terminating",
                Some(crate::cache::PodState::Bound { .. }) => "bound",
                Some(crate::cache::PodState::Done) => "terminating",
                _ => "unknown",
            },
        };
        Member {
            namespace: p.key.namespace.to_string(),
            name: p.key.name.to_string(),
            state: state.into(),
            node: cached.and_then(|c| c.state.node()).map(|n| n.to_string()),
            nominated_node: self.nominated_node(&p.key).map(|n| n.to_string()),
            scheduling_gates: p.scheduling_gates.iter().map(|g| g.to_string()).collect(),
            message: self
                .outbox
                .pod_condition_of(&p.key)
                .map(|(_, m)| m.to_string()),
        }
    }

    /// Distinct reasons written to the pods, each with the first pod that
    /// has it and how many more do.
    fn reasons(&self, pods: &[Arc<PodInfo>]) -> Vec<PodReason> {
        let mut seen: Vec<(PodReason, usize)> = Vec::new();
        for p in pods {
            let Some((reason, message)) = self.outbox.pod_condition_of(&p.key) else {
                continue;
            };
            let same = seen
                .iter()
                .position(|(r, _)| r.message == message && r.reason == reason.as_str());
            match same {
                Some(i) => seen[i].1 += 1,
                None if seen.len() < REASONS_SHOWN => seen.push((
                    PodReason {
                        pod: p.key.to_string(),
                        reason: reason.as_str().into(),
                        message: message.into(),
                    },
                    0,
                )),
                None => {}
            }
        }
        seen.into_iter()
            .map(|(mut r, more)| {
                if more > 0 {
                    r.pod = format!("{} (and {more} more)", r.pod);
                }
                r
            })
            .collect()
    }

    /// Its place among the active pods of its profile, its backoff, and
    /// the units ahead of it.
    fn queue_facts(&self, pods: &[Arc<PodInfo>], now: Instant) -> Option<Queue> {
        let queued: Vec<&Arc<PodInfo>> = pods
            .iter()
            .filter(|p| self.queue.contains(&p.key))
            .collect();
        let first = queued.first()?;
        let profile = first.scheduler_name.clone();
        let best: Option<&OrderKey> = queued
            .iter()
            .filter(|p| self.location(&p.key) == Some(PodLocation::Active))
            .filter_map(|p| self.queue.order_of(&p.key))
            .max();
        let backoff = queued
            .iter()
            .filter_map(|p| self.queue.backoff_until(&p.key))
            .max()
            .map(|t| t.saturating_duration_since(now).as_secs_f64());
        let attempts = queued
            .iter()
            .map(|p| self.queue.attempts(&p.key))
            .max()
            .unwrap_or(0);
        // Ahead: active pods of the profile that pop before its best pod
        // (or before where it would be, once out of backoff).
        let reference = best.cloned().or_else(|| {
            queued
                .iter()
                .filter_map(|p| self.queue.order_of(&p.key))
                .max()
                .cloned()
        });
        let mut active = 0u64;
        let mut ahead_pods = 0u64;
        let mut units: HashMap<QueueGroup, (OrderKey, u64)> = HashMap::new();
        let own = |o: &OrderKey| pods.iter().any(|p| p.key == o.pod);
        for (_, order) in self.queue.active_of(&profile) {
            active += 1;
            let Some(r) = &reference else { continue };
            if order > r && !own(order) {
                ahead_pods += 1;
                let e = units
                    .entry(order.group.clone())
                    .or_insert_with(|| (order.clone(), 0));
                e.1 += 1;
                if *order > e.0 {
                    e.0 = order.clone();
                }
            }
        }
        let ahead_total = units.len() as u64;
        let mut ahead: Vec<(OrderKey, u64)> = units.into_values().collect();
        ahead.sort_by(|a, b| b.0.cmp(&a.0));
        ahead.truncate(AHEAD_SHOWN);
        Some(Queue {
            profile: profile.to_string(),
            position: best.map(|_| ahead_pods + 1),
            active_pods: active,
            backoff_seconds: backoff,
            attempts,
            ahead: ahead
                .into_iter()
                .map(|(o, pods)| Ahead {
                    unit: match &o.group {
                        QueueGroup::Group(g) => g.to_string(),
                        QueueGroup::Pod(p) => format!("pod {p}"),
                    },
                    pods,
                    priority: o.priority,
                })
                .collect(),
            ahead_total,
        })
    }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
#[path = "explain_tests.rs"]
mod tests;

/// Each distinct reason a victim could not be spared, with the victims it
/// applies to (a gang evicted whole shares one).
fn why_victims(victims: &[(PodKey, Arc<str>)]) -> Vec<VictimReason> {
    let mut out: Vec<VictimReason> = Vec::new();
    for (key, why) in victims {
        match out.iter_mut().find(|r| *r.why == **why) {
            Some(r) => r.pods.push(key.to_string()),
            None => out.push(VictimReason {
                why: why.to_string(),
                pods: vec![key.to_string()],
            }),
        }
    }
    out
}
