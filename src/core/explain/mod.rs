//! What `kubectl muster explain` answers: where a pod or gang stands and
//! why, as one document with stable field names (`docs/explain.md` is its
//! schema). The engine fills it from its live state
//! (`Engine::explain`); the plugin fills it from API objects when the
//! scheduler cannot be reached; both render it with [`text`].

pub mod text;

use serde::{Deserialize, Serialize};

/// The document's `kind`, so a reader can tell it from other JSON.
pub const KIND: &str = "Explanation";
/// The document's `apiVersion`: fields are only ever added under it.
pub const API_VERSION: &str = "muster.dev/v1alpha1";

/// Where a gang (or a pod that is no gang's member) stands now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Phase {
    /// Not this scheduler's pod, or not known to it.
    NotServed,
    /// The group definition the pods name has not been observed.
    WaitingForDefinition,
    /// The definition (or the pod's reference to it) cannot be used.
    Invalid,
    /// Fewer than `minCount` members are present (observed and not
    /// held by a scheduling gate).
    WaitingForQuorum,
    /// In the active queue, waiting for its turn.
    Queued,
    /// Backing off after a failed attempt (or its gang's release).
    BackingOff,
    /// Tried and did not fit; retried on a cluster change that may help.
    Unschedulable,
    /// Preempting: victims are being evicted for it.
    Preempting,
    /// Not placed yet, with room reserved for it (`reservation`).
    Reserved,
    /// Members hold nodes and wait at Permit for the rest.
    AtPermit,
    /// Released to bind (or waiting in PreBind for its claims).
    Binding,
    /// Every present member is bound.
    Bound,
}

impl Phase {
    /// The words the text rendering uses.
    pub fn words(self) -> &'static str {
        match self {
            Phase::NotServed => "not scheduled by Muster",
            Phase::WaitingForDefinition => "waiting for its definition",
            Phase::Invalid => "refused: invalid",
            Phase::WaitingForQuorum => "waiting for quorum",
            Phase::Queued => "queued",
            Phase::BackingOff => "backing off",
            Phase::Unschedulable => "unschedulable",
            Phase::Preempting => "preempting",
            Phase::Reserved => "reserved",
            Phase::AtPermit => "waiting at Permit",
            Phase::Binding => "binding",
            Phase::Bound => "bound",
        }
    }
}

/// Where the facts came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Source {
    /// The leading scheduler's live state.
    Scheduler,
    /// Conditions and events on the API objects (the scheduler could not be
    /// asked; `note` says why).
    ApiObjects,
}

/// The answer for one target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    pub api_version: String,
    pub kind: String,
    /// What was asked about, as asked (`pod/ns/name`, `podgroup/ns/name`).
    pub target: String,
    pub source: Source,
    /// Why the answer is partial, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub phase: Phase,
    /// The answer in one line.
    pub summary: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gang: Option<Gang>,
    /// The pods explained: the gang's members, or the one pod.
    #[serde(default)]
    pub members: Vec<Member>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<Queue>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permit: Option<Permit>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempt: Option<LastAttempt>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_release: Option<Release>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption: Option<Preemption>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<Reservation>,
}

/// Room held for the gang (reservations and backfill).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reservation {
    /// The nodes room is held on, one member each.
    pub nodes: Vec<String>,
    /// Seconds since it was made.
    pub held_seconds: f64,
    /// Seconds until the last pod it waits for declared it ends; `None`
    /// when one of them declares no end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_start_seconds: Option<f64>,
}

impl Explanation {
    /// An explanation with only the answer filled in.
    pub fn new(target: String, source: Source, phase: Phase, summary: String) -> Self {
        Explanation {
            api_version: API_VERSION.into(),
            kind: KIND.into(),
            target,
            source,
            note: None,
            phase,
            summary,
            gang: None,
            members: Vec::new(),
            queue: None,
            permit: None,
            last_attempt: None,
            last_release: None,
            preemption: None,
            reservation: None,
        }
    }
}

/// The answer for a gang short of quorum, whoever reads it (the engine,
/// or the plugin from API objects): `2/3 present, muster-0 gated by
/// example.com/hold; 1 member(s) not created yet`. `gated` is each member
/// held by scheduling gates, with its gates; `observed` counts every member
/// that exists.
pub fn quorum_summary(
    present: usize,
    min_count: u32,
    observed: usize,
    gated: &[(String, String)],
) -> String {
    /// Gated members named; the rest are counted.
    const NAMED: usize = 5;
    let mut s = format!("{present}/{min_count} present");
    let named: Vec<String> = gated
        .iter()
        .take(NAMED)
        .map(|(pod, gates)| format!("{pod} gated by {gates}"))
        .collect();
    if !named.is_empty() {
        s.push_str(", ");
        s.push_str(&named.join(", "));
        if gated.len() > named.len() {
            s.push_str(&format!(" and {} more gated", gated.len() - named.len()));
        }
    }
    let missing = (min_count as usize).saturating_sub(observed);
    if missing > 0 {
        s.push_str(&format!("; {missing} member(s) not created yet"));
    }
    s
}

/// The gang a target belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Gang {
    /// As the scheduler names it in messages (`PodGroup default/train`).
    pub group: String,
    /// The dialect's kind (`PodGroup`, `PodGroup.scheduling.x-k8s.io`, `Job`).
    pub kind: String,
    pub namespace: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
    /// `None` for a group without a gang policy (every pod on its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_count: Option<u32>,
    /// Members observed and not held by a scheduling gate.
    pub present: u32,
    /// Members observed but held by a scheduling gate.
    pub gated: u32,
    /// Members holding a node: reserved (at Permit, binding) or bound.
    pub placed: u32,
    pub bound: u32,
    /// Whether a bound gang still has `minCount` members running
    /// (`PodGroupSatisfied`); `None` before it was first scheduled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub satisfied: Option<bool>,
}

/// Where one pod is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Member {
    pub namespace: String,
    pub name: String,
    /// `schedulingGated`, `gated` (PreEnqueue), `active`, `backoff`,
    /// `unschedulable`, `atPermit`, `binding`, `preBind`, `bound`,
    /// `terminating`, or `unknown`.
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nominated_node: Option<String>,
    /// `spec.schedulingGates` still on the pod.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scheduling_gates: Vec<String>,
    /// The pod's `PodScheduled=False` message, as last written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Its place in the queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Queue {
    /// The scheduler name (profile) it is queued under.
    pub profile: String,
    /// 1-based position of its first active pod among the active pods of
    /// its profile; `None` when none of its pods is active.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<u64>,
    /// Active pods of the profile.
    pub active_pods: u64,
    /// Seconds until its backoff ends, when it backs off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_seconds: Option<f64>,
    /// Scheduling attempts so far (the most any member made).
    pub attempts: u32,
    /// The gangs and pods ahead of it, first to go first (at most 10).
    #[serde(default)]
    pub ahead: Vec<Ahead>,
    /// How many gangs and pods are ahead in all.
    pub ahead_total: u64,
}

/// One gang (or pod) ahead in the queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ahead {
    /// `PodGroup default/a` or `pod default/p`.
    pub unit: String,
    /// Its active pods.
    pub pods: u64,
    pub priority: i32,
}

/// What the gang waits for at Permit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Permit {
    pub waiting: u32,
    /// Members that must hold a node before any binds.
    pub needed: u32,
    /// Seconds until the waiting members are rejected
    /// (`scheduleTimeoutSeconds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<f64>,
}

/// Why the last attempt did not place it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LastAttempt {
    /// The gang's reason, as written to its status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_message: Option<String>,
    /// Each pod that did not fit with its reason (the "0/N nodes are
    /// available: ..." breakdown, a claim that failed, why no preemption).
    #[serde(default)]
    pub pods: Vec<PodReason>,
    /// The topology domains the last gang cycle tried, best first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub domains_tried: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain_chosen: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodReason {
    pub pod: String,
    pub reason: String,
    pub message: String,
}

/// The gang's last release at Permit without binding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Release {
    /// `TimedOut` or `EarlyReleased`.
    pub reason: String,
    pub message: String,
    /// How long ago, in seconds.
    pub seconds_ago: f64,
}

/// A preemption in progress for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Preemption {
    /// Where room is held for its pods.
    #[serde(default)]
    pub nominated: Vec<Nominated>,
    /// Victims evicted for it and not gone yet.
    #[serde(default)]
    pub victims_terminating: Vec<String>,
    /// Why those victims could not be spared: each reason with the victims
    /// it applies to.
    #[serde(default)]
    pub why_victims: Vec<VictimReason>,
}

/// Why victims of a preemption could not be put back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VictimReason {
    /// "putting default/lo-b back leaves no room for default/hi-1 on node-2".
    pub why: String,
    pub pods: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Nominated {
    pub pod: String,
    pub node: String,
}
