//! The gate (gang-semantics §2) and the group checks made before a gang is
//! tried: scheduler-name conflicts and `minResources`.

use crate::cache::Cache;
use crate::framework::PendingReason;
use crate::model::{GroupKey, GroupMembership, GroupPolicy, PodInfo};
use crate::plugins::dynamic_resources;
use crate::queue::{Gate, Gated};

use super::hierarchy::{ChainError, Count};
use super::{GangScheduling, tasks};

/// PreEnqueue for one pod, the plugins in kube-scheduler's order: its own
/// scheduling gates, its ResourceClaims (DynamicResources), its membership
/// and its group.
pub(super) fn pre_enqueue(gang: &GangScheduling, pod: &PodInfo, cache: &Cache) -> Gate {
    if pod.is_scheduling_gated() {
        return Err(Gated::waiting(
            PendingReason::SchedulingGated,
            "Scheduling is blocked due to non-empty scheduling gates",
        ));
    }
    dynamic_resources::pre_enqueue(pod, &cache.facts().dra)?;
    match &pod.group {
        GroupMembership::None => Ok(()),
        GroupMembership::Invalid(msg) => {
            Err(Gated::invalid(format!("invalid group reference: {msg}")))
        }
        GroupMembership::Member(group) => group_gate(gang, group, cache),
    }
}

/// The group half of the gate: definition observed, usable, and at least
/// `min_count` members observed (pending or bound).
pub fn group_gate(gang: &GangScheduling, group: &GroupKey, cache: &Cache) -> Gate {
    if gang.def(&group.definition).is_none() {
        return Err(Gated::waiting(
            PendingReason::WaitingForDefinition,
            gang.absent_message(&group.definition),
        ));
    }
    own_gate(gang, group, cache)?;
    hierarchy_gate(gang, group, cache)
}

/// A child of a gang CompositePodGroup: its hierarchy well formed, and every
/// gang composite above it with `minGroupCount` children at their quorum.
fn hierarchy_gate(gang: &GangScheduling, group: &GroupKey, cache: &Cache) -> Gate {
    if gang
        .def(&group.definition)
        .and_then(|d| d.parent_key())
        .is_none()
    {
        return Ok(());
    }
    match gang.ancestors(&group.definition) {
        Err(ChainError::Missing(msg)) => {
            return Err(Gated::waiting(PendingReason::WaitingForDefinition, msg));
        }
        Err(ChainError::Invalid(msg)) => return Err(Gated::invalid(msg)),
        Ok(_) => {}
    }
    gang.chain_satisfied(group, cache, Count::Observed)
        .map_err(|short| {
            Gated::waiting(
                PendingReason::WaitingForMembers,
                format!("waiting for {short}"),
            )
        })
}

/// The group's own definition and quorum.
fn own_gate(gang: &GangScheduling, group: &GroupKey, cache: &Cache) -> Gate {
    match gang.policy(group) {
        Err(msg) => Err(Gated::invalid(msg)),
        Ok(GroupPolicy::Basic) => Ok(()),
        Ok(GroupPolicy::Gang { min_count, .. }) => {
            let observed = cache.group(group).map_or(0, |m| m.observed());
            if observed < usize::try_from(min_count).unwrap_or(usize::MAX) {
                return Err(Gated::waiting(
                    PendingReason::WaitingForMembers,
                    format!("waiting for {observed}/{min_count} pods of {group}"),
                ));
            }
            // Counted only once the overall quorum is observed (it walks members).
            let short = gang
                .def(&group.definition)
                .zip(cache.group(group))
                .and_then(|(def, m)| {
                    tasks::shortfall(def, cache, [m.pending(), m.assumed(), m.bound()])
                });
            match short {
                Some(t) => Err(Gated::waiting(
                    PendingReason::WaitingForMembers,
                    format!("waiting for pods of {group}: {t} observed (spec.minTaskMember)"),
                )),
                None => Ok(()),
            }
        }
    }
}

/// Members naming different scheduler names: nobody can be placed consistently.
pub(super) fn scheduler_conflict(group: &GroupKey, cache: &Cache) -> Option<String> {
    let names = cache.group(group)?.scheduler_names();
    if names.len() < 2 {
        return None;
    }
    let list: Vec<String> = names.iter().map(|(n, c)| format!("{n} ({c})")).collect();
    Some(format!(
        "members of {group} name different schedulerNames: {}; every member is rejected until they agree",
        list.join(", ")
    ))
}

/// A gang with `minResources` that the cluster's total free capacity cannot
/// cover is not tried. Only checked before the first member holds anything:
/// afterwards the members' own reservations are part of the answer.
pub(super) fn min_resources_shortfall(
    gang: &GangScheduling,
    group: &GroupKey,
    cache: &Cache,
) -> Option<String> {
    let needed = gang.def(&group.definition)?.min_resources.as_ref()?;
    if cache.group(group).is_some_and(|m| m.assumed_or_bound() > 0) {
        return None;
    }
    let free = cache.total_free();
    let short: Vec<String> = needed
        .exceeding(&free)
        .map(|name| {
            format!(
                "{name} (needs {}, {} free)",
                needed.get(name),
                free.get(name).max(0)
            )
        })
        .collect();
    if short.is_empty() {
        return None;
    }
    Some(format!(
        "{group} requires minResources the cluster cannot provide: insufficient {}",
        short.join(", ")
    ))
}
