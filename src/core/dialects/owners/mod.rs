//! Top-owner grouping: pods with no group object of their own are grouped by
//! the workload that owns them (a `batch/v1` Job, a JobSet, a
//! LeaderWorkerSet group, a training job, a RayCluster, a vcjob), sized by
//! what that kind implies (`kinds::OWNER_SOURCES`).
//!
//! Three steps, all pure:
//! - [`membership`] (the lowest dialect) reads the pod alone: its
//!   controlling owner reference when that is a kind of the table, or the
//!   LeaderWorkerSet labels (LWS pods are owned by StatefulSets, and workers'
//!   StatefulSets by their leader pod: the labels the LWS controller puts on
//!   every pod name the set and the group directly);
//! - [`read_owner`] turns each owner object an informer observed into its
//!   gang definition, its own controlling owner and its opt-out;
//! - [`OwnerIndex::resolve`] walks from the pod's owner to the top owner
//!   over those objects; the engine does this when it admits the pod, with
//!   the profile's `topOwnerGrouping` and the namespace's label.

mod kinds;
mod object;
mod resolve;
mod topology;

#[cfg(test)]
mod tests;

pub use kinds::{OWNER_SOURCES, OwnerSource, owner_source, source_of_reference};
pub use object::{GANG_ANNOTATION, MIN_COUNT_ANNOTATION, OwnerObject, read_owner};
pub use resolve::{OwnerIndex, Resolution};
pub use topology::{TemplateTopology, owner_topology};

use crate::framework::args::ConfigError;
use crate::model::wire::PodWire;
use crate::model::{DefinitionKey, GroupKey, GroupMembership, GroupPhase, GroupSource, OwnerKind};

/// Namespace label turning top-owner grouping on (`"true"`) or off
/// (`"false"`) for the namespace, whatever the profile says.
pub const NAMESPACE_LABEL: &str = "muster.dev/top-owner-grouping";

/// Pod annotation: ignore `spec.schedulingGroup` / `spec.workloadRef` (the
/// Workload API), so the pod falls to the other dialects and to its top owner.
pub const IGNORE_WORKLOAD_API_ANNOTATION: &str = "muster.dev/ignore-workload-api";

/// Labels the LeaderWorkerSet controller sets on every pod of a set.
pub const LWS_NAME_LABEL: &str = "leaderworkerset.sigs.k8s.io/name";
pub const LWS_GROUP_INDEX_LABEL: &str = "leaderworkerset.sigs.k8s.io/group-index";

/// The kinds a profile groups by owner, as a small set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnerKindSet(u32);

impl OwnerKindSet {
    pub const ALL: OwnerKindSet = OwnerKindSet(u32::MAX);
    pub const NONE: OwnerKindSet = OwnerKindSet(0);

    fn bit(kind: OwnerKind) -> u32 {
        1u32 << (kind as u32)
    }

    pub fn contains(self, kind: OwnerKind) -> bool {
        self.0 & Self::bit(kind) != 0
    }

    pub fn with(self, kind: OwnerKind) -> Self {
        OwnerKindSet(self.0 | Self::bit(kind))
    }
}

/// `GangScheduling` args `topOwnerGrouping: {enabled, kinds}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopOwnerGrouping {
    /// Off by default: grouping by owner is opted into.
    pub enabled: bool,
    /// The top-owner kinds grouped (default: every kind of the table).
    pub kinds: OwnerKindSet,
}

impl Default for TopOwnerGrouping {
    fn default() -> Self {
        TopOwnerGrouping {
            enabled: false,
            kinds: OwnerKindSet::ALL,
        }
    }
}

impl TopOwnerGrouping {
    /// Whether pods in a namespace with these labels are grouped by owner.
    pub fn enabled_in(&self, namespace_labels: Option<&crate::cache::Labels>) -> bool {
        match namespace_labels
            .and_then(|l| l.get(NAMESPACE_LABEL))
            .map(String::as_str)
        {
            Some("true") => true,
            Some("false") => false,
            _ => self.enabled,
        }
    }
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WireGrouping {
    enabled: Option<bool>,
    kinds: Option<Vec<String>>,
}

/// Decodes `topOwnerGrouping` at `path`; kinds are named as in messages
/// (`Job`, `JobSet`, `LeaderWorkerSet`, `MPIJob`, `Job.batch.volcano.sh`, ...).
pub fn decode_grouping(
    path: &str,
    value: serde_json::Value,
) -> Result<TopOwnerGrouping, ConfigError> {
    let raw: WireGrouping = crate::framework::args::decode(path, value)?;
    let mut grouping = TopOwnerGrouping {
        enabled: raw.enabled.unwrap_or(false),
        ..TopOwnerGrouping::default()
    };
    if let Some(names) = raw.kinds {
        let mut kinds = OwnerKindSet::NONE;
        for (i, name) in names.iter().enumerate() {
            let kind = OWNER_SOURCES
                .iter()
                .map(|s| s.kind_id)
                .find(|k| k.kind_name() == name)
                .ok_or_else(|| {
                    let known: Vec<&str> = OWNER_SOURCES
                        .iter()
                        .map(|s| s.kind_id.kind_name())
                        .collect();
                    ConfigError::at(
                        format!("{path}.kinds[{i}]"),
                        format!(
                            "unknown kind {name:?} (expected one of {})",
                            known.join(", ")
                        ),
                    )
                })?;
            kinds = kinds.with(kind);
        }
        grouping.kinds = kinds;
    }
    Ok(grouping)
}

/// The group a pod's own owner names, before the walk: its controlling
/// owner when that is a kind of the table, else its LeaderWorkerSet and group
/// index. `None` for every other pod (Deployments, StatefulSets, bare pods).
pub fn membership(pod: &PodWire, namespace: &str) -> Option<GroupMembership> {
    let labels = &pod.metadata.labels;
    if let (Some(lws), Some(index)) = (
        labels.get(LWS_NAME_LABEL),
        labels.get(LWS_GROUP_INDEX_LABEL),
    ) && !lws.is_empty()
    {
        let key = DefinitionKey::new(
            namespace,
            GroupSource::Owner(OwnerKind::LeaderWorkerSet),
            lws,
        );
        return Some(GroupMembership::Member(GroupKey::with_replica(key, index)));
    }
    let owner = pod
        .metadata
        .owner_references
        .iter()
        .find(|r| r.controller == Some(true))?;
    let source = source_of_reference(&owner.api_version, &owner.kind)?;
    if owner.name.is_empty() {
        return None;
    }
    let key = DefinitionKey::new(namespace, GroupSource::Owner(source.kind_id), &owner.name);
    Some(GroupMembership::Member(GroupKey::new(key)))
}

/// The event a gang's status becomes on its top owner, which has no status
/// of its own for it: `(reason, warning)`.
pub fn status_event(phase: GroupPhase, message: &str) -> (&'static str, bool) {
    match phase {
        GroupPhase::WaitingForMembers | GroupPhase::MembersObserved => ("GangWaiting", false),
        GroupPhase::Unschedulable if message.contains("timed out") => ("GangTimedOut", true),
        GroupPhase::Unschedulable => ("GangWaiting", true),
        GroupPhase::Scheduled => ("GangScheduled", false),
    }
}

/// What an owner informer reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwnerChange {
    Upserted(Box<OwnerObject>),
    Deleted(DefinitionKey),
}
