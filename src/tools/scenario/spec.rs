//! The scenario file's shape: plain serde types, every struct denying unknown
//! fields so a typo is an error naming it. Meaning of each field:
//! `docs/simulate.md`.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::dra::{ClaimTemplateEntry, DeviceClassEntry};
use muster_cluster::kwok::templates::{NodeTemplate, quantity_map};

/// A whole scenario: the cluster to build and the workloads to submit.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    /// Label value put on every object the scenario creates.
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// The run ends after this long even if some workloads never settle.
    #[serde(default = "default_run_timeout")]
    pub timeout_seconds: u64,
    /// Pods created per second (all workloads together); absent = as fast as
    /// the API accepts them.
    #[serde(default)]
    pub creation_rate: Option<f64>,
    /// `spec.schedulerName` of every pod.
    #[serde(default = "default_scheduler")]
    pub scheduler_name: String,
    /// How gangs declare their group, unless a gang says otherwise.
    #[serde(default)]
    pub dialect: Dialect,
    /// Node groups, in the simulator's node-template format.
    #[serde(default)]
    pub nodes: Vec<NodeTemplate>,
    /// A topology hierarchy, as node label keys outermost level first,
    /// created as a Kueue `Topology` object (named after the scenario) with
    /// the nodes: what a gang's preferred level falls back through.
    #[serde(default)]
    pub kueue_topology: Option<Vec<String>>,
    /// Namespaces to create besides `default`.
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// DRA DeviceClasses, created with the nodes.
    #[serde(default)]
    pub device_classes: Vec<DeviceClassEntry>,
    /// DRA ResourceClaimTemplates, each created in the namespaces of the
    /// workloads that name it (`claimTemplates`) before the workloads.
    #[serde(default)]
    pub resource_claim_templates: Vec<ClaimTemplateEntry>,
    /// Created in order.
    #[serde(default)]
    pub workloads: Vec<Workload>,
}

/// One entry of `workloads`: `- gang: {...}` or `- pods: {...}`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(try_from = "WorkloadEntry")]
pub enum Workload {
    Gang(GangWorkload),
    Pods(PodsWorkload),
}

/// The wire form of [`Workload`]: a mapping with exactly one key (YAML
/// without `!tags`, so JSON and kubectl-style files read the same).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WorkloadEntry {
    gang: Option<GangWorkload>,
    pods: Option<PodsWorkload>,
}

impl TryFrom<WorkloadEntry> for Workload {
    type Error = &'static str;

    fn try_from(entry: WorkloadEntry) -> Result<Self, Self::Error> {
        match (entry.gang, entry.pods) {
            (Some(g), None) => Ok(Workload::Gang(g)),
            (None, Some(p)) => Ok(Workload::Pods(p)),
            _ => Err("a workload has exactly one of `gang` or `pods`"),
        }
    }
}

/// `count` gangs, each a `PodGroup` and `size` member pods.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GangWorkload {
    /// Gang `i` is the PodGroup `<namePrefix>-<i>`; its pods are `<namePrefix>-<i>-<j>`.
    pub name_prefix: String,
    #[serde(default = "default_namespace")]
    pub namespace: String,
    #[serde(default = "one")]
    pub count: u32,
    pub size: u32,
    /// Defaults to `size`.
    #[serde(default)]
    pub min_count: Option<u32>,
    /// Container requests, e.g. `{cpu: 2, memory: 4Gi, nvidia.com/gpu: 1}`.
    #[serde(default, deserialize_with = "quantity_map")]
    pub requests: BTreeMap<String, String>,
    /// DRA: templates of `resourceClaimTemplates` each pod claims from,
    /// one claim per template (named after it), used by the container.
    #[serde(default)]
    pub claim_templates: Vec<String>,
    /// DRA, PodGroup claims (KEP-5729, `dialect: podGroup` only): templates
    /// the gang's PodGroup claims from in `spec.resourceClaims`, one claim
    /// per template for the whole group (named after it); every member
    /// names the same entry, so all of them share that one claim.
    #[serde(default)]
    pub group_claim_templates: Vec<String>,
    /// Pod priority; the scenario creates a PriorityClass with this value.
    #[serde(default)]
    pub priority: Option<i32>,
    /// The simulated kubelet marks the pod Succeeded this long after it starts.
    #[serde(default)]
    pub sim_run_seconds: Option<u64>,
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    /// Pod tolerations, as in a pod spec.
    #[serde(default)]
    pub tolerations: Vec<Value>,
    /// `spec.affinity` as in a pod spec. Gang pods carry the label
    /// `muster.dev/gang-name: <gang>`, so `matchLabelKeys:
    /// [muster.dev/gang-name]` confines a term to the pod's own gang.
    #[serde(default)]
    pub affinity: Option<Value>,
    /// Annotation `muster.dev/schedule-timeout-seconds` on the PodGroup
    /// (Coscheduling: `spec.scheduleTimeoutSeconds`); absent = the
    /// scheduler's default.
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    /// Overrides the scenario's `dialect` for these gangs.
    #[serde(default)]
    pub dialect: Option<Dialect>,
    /// Node label whose value every member must share (PodGroup
    /// `schedulingConstraints.topology`, Kueue `podset-required-topology`).
    #[serde(default)]
    pub required_topology: Option<String>,
    /// Node label whose value the members should share, tried first with
    /// fallback to wider levels of the hierarchy (PodGroup annotation
    /// `muster.dev/preferred-topology`, Kueue `podset-preferred-topology`).
    #[serde(default)]
    pub preferred_topology: Option<String>,
    /// Seconds the pod is given to terminate when deleted
    /// (`spec.terminationGracePeriodSeconds`); absent = the API's default (30).
    #[serde(default)]
    pub termination_grace_period_seconds: Option<u32>,
    /// When creation of this workload starts; absent = right after the
    /// workload before it (see `docs/simulate.md`, phases).
    #[serde(default)]
    pub start: Option<Start>,
    /// Throughput and latency are measured on the measured workloads' pods
    /// only (scheduler-perf's `collectMetrics`); when no workload is
    /// measured, on every pod.
    #[serde(default)]
    pub measured: bool,
    #[serde(default)]
    pub expect: Option<Expectation>,
}

/// How a gang declares its group: one of the dialects Muster reads
/// (`docs/dialects.md`).
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// `scheduling.k8s.io/v1beta1` PodGroup (Kubernetes 1.37).
    #[default]
    #[serde(rename = "podGroup")]
    PodGroup,
    /// `scheduling.k8s.io/v1alpha2` PodGroup (Kubernetes 1.36).
    #[serde(rename = "podGroupV1alpha2")]
    PodGroupV1alpha2,
    /// `scheduling.k8s.io/v1alpha1` Workload with one gang podGroup (1.35).
    #[serde(rename = "workload")]
    Workload,
    /// scheduler-plugins `scheduling.x-k8s.io/v1alpha1` PodGroup.
    #[serde(rename = "coscheduling")]
    Coscheduling,
    /// `scheduling.volcano.sh/v1beta1` PodGroup.
    #[serde(rename = "volcano")]
    Volcano,
    /// Kueue plain-pod group labels; no group object.
    #[serde(rename = "kueue")]
    Kueue,
}

impl Dialect {
    /// The group source Muster translates this dialect into.
    pub fn source(self) -> muster_core::model::GroupSource {
        use muster_core::model::GroupSource;
        match self {
            Dialect::PodGroup | Dialect::PodGroupV1alpha2 => GroupSource::PodGroup,
            Dialect::Workload => GroupSource::Workload,
            Dialect::Coscheduling => GroupSource::Coscheduling,
            Dialect::Volcano => GroupSource::Volcano,
            Dialect::Kueue => GroupSource::Kueue,
        }
    }

    /// The name used in scenario files.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::PodGroup => "podGroup",
            Dialect::PodGroupV1alpha2 => "podGroupV1alpha2",
            Dialect::Workload => "workload",
            Dialect::Coscheduling => "coscheduling",
            Dialect::Volcano => "volcano",
            Dialect::Kueue => "kueue",
        }
    }
}

/// `count` pods that belong to no group.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodsWorkload {
    /// Pod `i` is `<namePrefix>-<i>`.
    pub name_prefix: String,
    #[serde(default = "default_namespace")]
    pub namespace: String,
    #[serde(default = "one")]
    pub count: u32,
    /// Churn: create the pods one at a time, one every this many
    /// milliseconds (scheduler-perf's `churn` op, `mode: create`), on a pace
    /// of their own beside the other workloads; absent = at the scenario's
    /// `creationRate`.
    #[serde(default)]
    pub interval_milliseconds: Option<u64>,
    /// Container requests, e.g. `{cpu: 2, memory: 4Gi, nvidia.com/gpu: 1}`.
    #[serde(default, deserialize_with = "quantity_map")]
    pub requests: BTreeMap<String, String>,
    /// DRA: templates of `resourceClaimTemplates` each pod claims from,
    /// one claim per template (named after it), used by the container.
    #[serde(default)]
    pub claim_templates: Vec<String>,
    /// Pod priority; the scenario creates a PriorityClass with this value.
    #[serde(default)]
    pub priority: Option<i32>,
    /// The simulated kubelet marks the pod Succeeded this long after it starts.
    #[serde(default)]
    pub sim_run_seconds: Option<u64>,
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    /// Pod tolerations, as in a pod spec.
    #[serde(default)]
    pub tolerations: Vec<Value>,
    /// `spec.affinity` as in a pod spec. Gang pods carry the label
    /// `muster.dev/gang-name: <gang>`, so `matchLabelKeys:
    /// [muster.dev/gang-name]` confines a term to the pod's own gang.
    #[serde(default)]
    pub affinity: Option<Value>,
    /// Seconds the pod is given to terminate when deleted
    /// (`spec.terminationGracePeriodSeconds`); absent = the API's default (30).
    #[serde(default)]
    pub termination_grace_period_seconds: Option<u32>,
    /// When creation of this workload starts; absent = right after the
    /// workload before it (see `docs/simulate.md`, phases).
    #[serde(default)]
    pub start: Option<Start>,
    /// Throughput and latency are measured on the measured workloads' pods
    /// only (scheduler-perf's `collectMetrics`); when no workload is
    /// measured, on every pod.
    #[serde(default)]
    pub measured: bool,
    #[serde(default)]
    pub expect: Option<Expectation>,
}

/// What every pod of a workload looks like (the fields gangs and plain pods
/// share), borrowed from either.
#[derive(Debug, Clone, Copy)]
pub struct PodShape<'a> {
    pub requests: &'a BTreeMap<String, String>,
    pub claim_templates: &'a [String],
    /// The PodGroup's claim templates the pod shares (gangs only).
    pub group_claim_templates: &'a [String],
    pub priority: Option<i32>,
    pub sim_run_seconds: Option<u64>,
    pub node_selector: &'a BTreeMap<String, String>,
    pub tolerations: &'a [Value],
    pub affinity: Option<&'a Value>,
    pub termination_grace_period_seconds: Option<u32>,
}

macro_rules! pod_shape {
    ($t:ty) => {
        impl $t {
            pub fn shape(&self) -> PodShape<'_> {
                PodShape {
                    requests: &self.requests,
                    claim_templates: &self.claim_templates,
                    group_claim_templates: self.group_claim_templates(),
                    priority: self.priority,
                    sim_run_seconds: self.sim_run_seconds,
                    node_selector: &self.node_selector,
                    tolerations: &self.tolerations,
                    affinity: self.affinity.as_ref(),
                    termination_grace_period_seconds: self.termination_grace_period_seconds,
                }
            }
        }
    };
}
pod_shape!(GangWorkload);
pod_shape!(PodsWorkload);

impl Scenario {
    /// The templates any gang's PodGroup claims from.
    pub fn group_claim_templates(&self) -> std::collections::HashSet<String> {
        self.workloads
            .iter()
            .flat_map(|w| w.shape().group_claim_templates.iter().cloned())
            .collect()
    }
}

impl GangWorkload {
    fn group_claim_templates(&self) -> &[String] {
        &self.group_claim_templates
    }
}

impl PodsWorkload {
    /// Plain pods have no group to share a claim with.
    fn group_claim_templates(&self) -> &[String] {
        &[]
    }
}

/// When a workload's creation starts: a phase boundary. The workload (and
/// every one after it, until the next `start`) waits for the gate, then
/// for `delaySeconds`.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Start {
    /// What to wait for before the delay; absent = nothing (the delay counts
    /// from the moment the phase before started).
    #[serde(default)]
    pub after: Option<After>,
    #[serde(default)]
    pub delay_seconds: u64,
}

/// A phase gate.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum After {
    /// Every earlier workload has settled: each gang bound (or preempted, or
    /// timed out) and each plain pod bound (or preempted), as the end of a
    /// run judges it (scheduler-perf's `createPods` waiting for its pods to
    /// be scheduled, or a `barrier`).
    PreviousSettled,
}

/// What must be true at the end of the run for every gang (or for the pods)
/// of a workload.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expectation {
    pub outcome: Outcome,
}

/// How a gang or a set of plain pods ended.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    /// Every member (every pod) bound to a node.
    Bound,
    /// Not all bound within the gang's timeout, counted from quorum (gangs only).
    TimedOut,
    /// Neither, when the run ended.
    Waiting,
    /// At least one pod was deleted (or marked for deletion) after it was
    /// bound; for plain pods, every other pod is bound too.
    Preempted,
    /// Only as an expectation: `bound` or `preempted`, for workloads that
    /// fill a cluster more important work then preempts.
    BoundOrPreempted,
}

impl Outcome {
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Bound => "all bound",
            Outcome::TimedOut => "timed out",
            Outcome::Waiting => "waiting",
            Outcome::Preempted => "preempted",
            Outcome::BoundOrPreempted => "bound or preempted",
        }
    }

    /// Whether `actual` meets this outcome as an expectation.
    pub fn accepts(self, actual: Outcome) -> bool {
        match self {
            Outcome::BoundOrPreempted => matches!(actual, Outcome::Bound | Outcome::Preempted),
            expected => expected == actual,
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

fn default_run_timeout() -> u64 {
    60
}
fn default_scheduler() -> String {
    "muster".into()
}
fn default_namespace() -> String {
    "default".into()
}
fn one() -> u32 {
    1
}

impl Workload {
    pub fn name_prefix(&self) -> &str {
        match self {
            Workload::Gang(g) => &g.name_prefix,
            Workload::Pods(p) => &p.name_prefix,
        }
    }

    pub fn namespace(&self) -> &str {
        match self {
            Workload::Gang(g) => &g.namespace,
            Workload::Pods(p) => &p.namespace,
        }
    }

    pub fn expect(&self) -> Option<Expectation> {
        match self {
            Workload::Gang(g) => g.expect,
            Workload::Pods(p) => p.expect,
        }
    }

    pub fn shape(&self) -> PodShape<'_> {
        match self {
            Workload::Gang(g) => g.shape(),
            Workload::Pods(p) => p.shape(),
        }
    }

    pub fn start(&self) -> Option<Start> {
        match self {
            Workload::Gang(g) => g.start,
            Workload::Pods(p) => p.start,
        }
    }

    pub fn measured(&self) -> bool {
        match self {
            Workload::Gang(g) => g.measured,
            Workload::Pods(p) => p.measured,
        }
    }

    /// Pods this workload creates.
    pub fn pod_count(&self) -> u64 {
        match self {
            Workload::Gang(g) => u64::from(g.count) * u64::from(g.size),
            Workload::Pods(p) => u64::from(p.count),
        }
    }
}

impl GangWorkload {
    /// `minCount`, defaulting to the gang size.
    pub fn min_count(&self) -> u32 {
        self.min_count.unwrap_or(self.size)
    }
}
