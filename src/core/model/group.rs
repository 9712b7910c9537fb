//! The one internal group model every dialect is translated into.
//!
//! A group's identity is `(namespace, source, name[, replica key])`; its policy is
//! `Gang { min_count, schedule_timeout }` or `Basic`. The rest of the scheduler never
//! looks at a dialect again (see gang-semantics.md, "Words").

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::Resources;

/// Which API dialect a group was declared in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GroupSource {
    /// `scheduling.k8s.io` `PodGroup` (v1alpha2 / v1beta1), via `spec.schedulingGroup`.
    PodGroup,
    /// `scheduling.k8s.io/v1alpha1` `Workload` pod group, via `spec.workloadRef`.
    Workload,
    /// scheduler-plugins Coscheduling `scheduling.x-k8s.io/v1alpha1` `PodGroup`.
    Coscheduling,
    /// `scheduling.volcano.sh/v1beta1` `PodGroup`.
    Volcano,
    /// Kueue plain-pod group (no definition object).
    Kueue,
    /// `scheduling.k8s.io/v1alpha3` `CompositePodGroup`: a group of child
    /// groups (PodGroups or composites naming it as their parent). No pod
    /// references one directly; its policy's `min_count` counts child groups.
    CompositePodGroup,
    /// A workload's top owner (a Job, JobSet, LeaderWorkerSet, training job, ...):
    /// the group is the owner object itself (`dialects::owners`).
    Owner(OwnerKind),
}

/// The workload kinds whose objects are groups of their pods (top-owner
/// grouping); their table is `dialects::owners::OWNER_SOURCES`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OwnerKind {
    /// `batch/v1` `Job`.
    Job,
    /// `jobset.x-k8s.io` `JobSet`.
    JobSet,
    /// `leaderworkerset.x-k8s.io` `LeaderWorkerSet` (one gang per replica group).
    LeaderWorkerSet,
    /// `trainer.kubeflow.org` `TrainJob`.
    TrainJob,
    /// `kubeflow.org` `PyTorchJob`.
    PyTorchJob,
    /// `kubeflow.org` `MPIJob`.
    MpiJob,
    /// `kubeflow.org` `TFJob`.
    TfJob,
    /// `kubeflow.org` `XGBoostJob`.
    XgBoostJob,
    /// `kubeflow.org` `JAXJob`.
    JaxJob,
    /// `ray.io` `RayCluster`.
    RayCluster,
    /// `batch.volcano.sh` `Job` (vcjob).
    VolcanoJob,
}

impl OwnerKind {
    /// The name messages, metrics and `/debug` use (`Job ml/train`).
    pub fn kind_name(self) -> &'static str {
        match self {
            OwnerKind::Job => "Job",
            OwnerKind::JobSet => "JobSet",
            OwnerKind::LeaderWorkerSet => "LeaderWorkerSet",
            OwnerKind::TrainJob => "TrainJob",
            OwnerKind::PyTorchJob => "PyTorchJob",
            OwnerKind::MpiJob => "MPIJob",
            OwnerKind::TfJob => "TFJob",
            OwnerKind::XgBoostJob => "XGBoostJob",
            OwnerKind::JaxJob => "JAXJob",
            OwnerKind::RayCluster => "RayCluster",
            OwnerKind::VolcanoJob => "Job.batch.volcano.sh",
        }
    }
}

impl GroupSource {
    /// A human name for messages ("PodGroup ml/train").
    pub fn kind_name(self) -> &'static str {
        match self {
            GroupSource::PodGroup => "PodGroup",
            GroupSource::Workload => "Workload",
            GroupSource::Coscheduling => "PodGroup.scheduling.x-k8s.io",
            GroupSource::Volcano => "PodGroup.scheduling.volcano.sh",
            GroupSource::Kueue => "Kueue pod group",
            GroupSource::CompositePodGroup => "CompositePodGroup",
            GroupSource::Owner(kind) => kind.kind_name(),
        }
    }
}

/// The identity of the object that defines a group's policy. For a v1alpha1
/// `Workload`, `name` is `"<workload>/<podGroup>"` (a `/` never occurs in object
/// names, so this is unambiguous).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DefinitionKey {
    pub namespace: Arc<str>,
    pub source: GroupSource,
    pub name: Arc<str>,
}

impl DefinitionKey {
    pub fn new(namespace: &str, source: GroupSource, name: &str) -> Self {
        DefinitionKey {
            namespace: Arc::from(namespace),
            source,
            name: Arc::from(name),
        }
    }
}

impl DefinitionKey {
    /// For a definition that is one entry of a larger object (a v1alpha1
    /// `Workload` pod group, named `"<workload>/<podGroup>"`): the key of the
    /// containing object and the entry's name.
    pub fn container(&self) -> Option<(DefinitionKey, &str)> {
        match (self.source, self.name.split_once('/')) {
            (GroupSource::Workload, Some((object, entry))) => Some((
                DefinitionKey::new(&self.namespace, self.source, object),
                entry,
            )),
            _ => None,
        }
    }

    /// Why a pod of this definition waits while the definition is not observed:
    /// `container_observed` says whether the containing object exists (then the
    /// entry is missing from it), see [`DefinitionKey::container`].
    pub fn absent_message(&self, container_observed: bool) -> String {
        match self.container() {
            Some((container, entry)) if container_observed => format!(
                "{} {}/{} has no podGroup {entry:?}",
                self.source.kind_name(),
                container.namespace,
                container.name
            ),
            _ => format!("waiting for {self} to be created"),
        }
    }
}

impl fmt::Display for DefinitionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.source, self.name.split_once('/')) {
            (GroupSource::Workload, Some((workload, pod_group))) => write!(
                f,
                "Workload {}/{} podGroup {:?}",
                self.namespace, workload, pod_group
            ),
            _ => write!(
                f,
                "{} {}/{}",
                self.source.kind_name(),
                self.namespace,
                self.name
            ),
        }
    }
}

/// A group: the definition it belongs to plus an optional replica key (v1alpha1
/// `podGroupReplicaKey`: each distinct key is a separate gang sharing one policy).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupKey {
    pub definition: DefinitionKey,
    pub replica: Option<Arc<str>>,
}

impl GroupKey {
    pub fn new(definition: DefinitionKey) -> Self {
        GroupKey {
            definition,
            replica: None,
        }
    }

    pub fn with_replica(definition: DefinitionKey, replica: &str) -> Self {
        GroupKey {
            definition,
            replica: Some(Arc::from(replica)),
        }
    }

    pub fn namespace(&self) -> &str {
        &self.definition.namespace
    }
}

impl fmt::Display for GroupKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.replica {
            Some(r) => write!(f, "{} replica {:?}", self.definition, r),
            None => write!(f, "{}", self.definition),
        }
    }
}

/// The longest gang timeout a definition may ask for: one day. A longer one
/// (an annotation, Coscheduling's `scheduleTimeoutSeconds`) is applied as this
/// and recorded in [`GroupDef::timeout_capped`], so a tenant cannot pin
/// members at the barrier for years nor overflow a deadline (docs/reliability.md).
pub const MAX_SCHEDULE_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);

/// The largest member count a definition may ask for (`minCount`,
/// `minMember`, a `minTaskMember` entry, Kueue's total count); a larger one
/// makes the definition malformed with a precise error.
pub const MAX_GROUP_COUNT: u32 = 100_000;

/// A gang timeout a definition asked for beyond [`MAX_SCHEDULE_TIMEOUT`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CappedTimeout {
    /// Where it was written: `annotation muster.dev/schedule-timeout-seconds`
    /// or `spec.scheduleTimeoutSeconds`.
    pub field: String,
    /// The value as written, in seconds (it may not even fit 64 bits).
    pub requested: String,
}

/// How a group is scheduled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupPolicy {
    /// All-or-nothing: released when `min_count` members are assumed or bound.
    /// `schedule_timeout` is `None` when the definition does not set one; the
    /// configured default (`permitWaitingTimeSeconds`) applies then.
    Gang {
        min_count: u32,
        schedule_timeout: Option<Duration>,
    },
    /// No barrier: members are ordinary pods, grouped for status and metrics only.
    Basic,
}

/// The pod annotation naming the task a member belongs to (Volcano jobs),
/// counted against [`GroupDef::min_task_members`].
pub const TASK_ANNOTATION: &str = "volcano.sh/task-spec";

/// How a group may be disrupted (Workload API `spec.disruptionMode`):
/// v1beta1/v1alpha3 `single: {}` / `all: {}`, v1alpha2 `Pod` / `PodGroup`.
/// Read and validated; Muster does not preempt or evict yet, so it has no
/// effect on placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisruptionMode {
    /// Members may be disrupted one by one (upstream's default).
    Single,
    /// Members may only be disrupted together.
    All,
}

/// Whether a group may preempt lower-priority work (Workload API
/// `spec.preemptionPolicy`), and a pod's own `spec.preemptionPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreemptionPolicy {
    Never,
    PreemptLowerPriority,
}

/// Kueue's pod-group annotations (`kueue.x-k8s.io/...`) as the members
/// agree on them. Its topology annotations are read into
/// [`GroupDef::topology`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KueueOptions {
    /// `pod-group-fast-admission: "true"`: Kueue admits the group before
    /// every member exists. Admission is Kueue's; the gang still waits for
    /// its total count here.
    pub fast_admission: bool,
    /// `pod-group-serving: "true"`: a serving group whose members are
    /// replaced while it runs. Recorded; a replacement after the quorum was
    /// released is placed as any late member is.
    pub serving: bool,
}

/// Fields a definition may carry that placement does not use (yet), read
/// and validated so that none is silently ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupExtras {
    /// Workload API `spec.disruptionMode`, when set.
    pub disruption_mode: Option<DisruptionMode>,
    /// Workload API `spec.preemptionPolicy`, when set.
    pub preemption_policy: Option<PreemptionPolicy>,
    /// The Workload API `spec.resourceClaims` the members share (KEP-5729).
    pub resource_claims: Option<std::sync::Arc<super::pod_claims::GroupClaims>>,
    /// Kueue options beyond the member count and required topology.
    pub kueue: KueueOptions,
    /// `spec.parentCompositePodGroupName` (PodGroup, CompositePodGroup): the
    /// parent composite, in the definition's own namespace.
    pub parent_composite: Option<String>,
    /// `muster.dev/reserve-after-seconds`: the profile's
    /// `reserveAfterSeconds` for this group (0: never reserve for it).
    pub reserve_after: Option<std::time::Duration>,
}

/// The most levels a CompositePodGroup hierarchy may have, counting the
/// PodGroups at the bottom (upstream's maximum depth of 4).
pub const MAX_HIERARCHY_DEPTH: usize = 4;

impl GroupDef {
    /// The parent composite's key, if the definition names one.
    pub fn parent_key(&self) -> Option<DefinitionKey> {
        let parent = self.extras.parent_composite.as_deref()?;
        Some(DefinitionKey::new(
            &self.key.namespace,
            GroupSource::CompositePodGroup,
            parent,
        ))
    }
}

/// The most `resourceClaims` a PodGroup may list (what a pod may list).
pub const MAX_GROUP_RESOURCE_CLAIMS: usize = 32;

/// An observed group definition, already translated from its dialect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDef {
    pub key: DefinitionKey,
    /// `Err` carries the precise reason a definition is malformed (e.g. "minCount
    /// must be positive, got 0"); members of such a group are never scheduled.
    pub policy: Result<GroupPolicy, String>,
    /// Creation time in milliseconds since the Unix epoch; orders gangs in the queue.
    pub created_ms: i64,
    /// Total resources the gang needs before it is tried (Coscheduling, Volcano).
    pub min_resources: Option<Resources>,
    /// What the group asks of topology (required and preferred levels,
    /// slices), whatever the dialect said it in; boxed, as `extras` is.
    pub topology: Box<super::TopologyRequest>,
    /// Per-task quorum (Volcano `spec.minTaskMember`): task name → members of
    /// that task (pods annotated [`TASK_ANNOTATION`]) that must be assumed or
    /// bound, on top of `min_count`. Empty for every other dialect.
    pub min_task_members: BTreeMap<String, u32>,
    /// The definition's `priorityClassName` (Volcano, PodGroup), if any.
    pub priority_class_name: Option<String>,
    /// The group's priority: the Workload API's `spec.priority` when the
    /// definition sets it (it wins, as a pod's own priority does), else the
    /// value of `priority_class_name`, resolved by whoever observes
    /// PriorityClasses (the daemon); the queue order of members that carry
    /// no priority of their own.
    pub priority: Option<i32>,
    /// The Volcano queue the group names. Informational: Muster has no queues.
    pub queue: Option<String>,
    /// Set when the definition asked for a timeout longer than
    /// [`MAX_SCHEDULE_TIMEOUT`]: the policy's `schedule_timeout` is the cap,
    /// and this says what was asked and where, for the engine's warning event
    /// (reason `TimeoutCapped`) on the definition.
    pub timeout_capped: Option<Box<CappedTimeout>>,
    /// The dialects' other fields, boxed: rarely set, and a definition
    /// travels by value in every definition event.
    pub extras: Box<GroupExtras>,
    /// Why the group can never be placed by this scheduler although it is
    /// well formed (a feature Muster does not implement, e.g. DRA claims):
    /// its members are refused with this message instead of being placed
    /// without honouring it.
    pub unsupported: Option<String>,
}

impl GroupDef {
    /// A definition with the given policy and no other constraints.
    pub fn new(key: DefinitionKey, policy: Result<GroupPolicy, String>, created_ms: i64) -> Self {
        GroupDef {
            key,
            policy,
            created_ms,
            min_resources: None,
            topology: Box::default(),
            min_task_members: BTreeMap::new(),
            priority_class_name: None,
            priority: None,
            queue: None,
            timeout_capped: None,
            extras: Box::default(),
            unsupported: None,
        }
    }

    /// A gang definition with the given minimum and no other constraints.
    pub fn gang(key: DefinitionKey, min_count: u32, created_ms: i64) -> Self {
        let policy = Ok(GroupPolicy::Gang {
            min_count,
            schedule_timeout: None,
        });
        GroupDef::new(key, policy, created_ms)
    }
}

/// Where a gang stands, as its dialect's status reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupPhase {
    /// Fewer than `min_count` members observed: its members are gated.
    WaitingForMembers,
    /// The quorum of members is observed (after having been short): the gang
    /// is being placed.
    MembersObserved,
    /// Rejected (timeout, early release); it will be retried.
    Unschedulable,
    /// The quorum was released to binding. Terminal.
    Scheduled,
}

impl GroupPhase {
    /// The condition reason written with this phase.
    pub fn reason(self) -> &'static str {
        match self {
            GroupPhase::WaitingForMembers => "WaitingForMembers",
            GroupPhase::MembersObserved => "Scheduling",
            GroupPhase::Unschedulable => "Unschedulable",
            GroupPhase::Scheduled => "Scheduled",
        }
    }
}

/// What a pod says about group membership, resolved from its spec, labels and
/// annotations by the dialect layer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum GroupMembership {
    /// An ordinary pod.
    #[default]
    None,
    /// A member of the group.
    Member(GroupKey),
    /// The pod references a group but the reference is malformed; the message says
    /// exactly what is wrong. The pod is never scheduled as a standalone pod.
    Invalid(String),
}

impl GroupMembership {
    pub fn key(&self) -> Option<&GroupKey> {
        match self {
            GroupMembership::Member(k) => Some(k),
            _ => None,
        }
    }
}
