//! The table of workload kinds whose objects group their pods: one row per
//! kind, with where the informer finds it and how its gang size is derived
//! from its spec. Adding a kind is a row here, a size function and a test.
//!
//! Field paths follow each project's API types (batch/v1 `JobSpec`,
//! kubernetes-sigs/jobset `JobSetSpec`, kubernetes-sigs/lws
//! `LeaderWorkerSetSpec`, kubeflow `ReplicaSpec`s and `TrainJobSpec`,
//! ray-project/kuberay `RayClusterSpec`, volcano-sh/apis `JobSpec`).

use serde_json::Value;

use super::super::common::bounded_count;
use crate::model::{MAX_GROUP_COUNT, OwnerKind};

/// A workload kind Muster can group pods by.
pub struct OwnerSource {
    pub kind_id: OwnerKind,
    /// The informer's name (`<plural>.<group>`), unique among all informers.
    pub name: &'static str,
    pub group: &'static str,
    /// Served versions in order of preference.
    pub versions: &'static [&'static str],
    pub kind: &'static str,
    pub plural: &'static str,
    /// Object JSON → the members one gang of it needs (before a
    /// `muster.dev/min-count` override). `Err` names the offending field.
    pub size: fn(&Value) -> Result<u32, String>,
    /// What the size rule is, for docs and `/debug`.
    pub rule: &'static str,
    /// Whether an object runs its children one after another rather than
    /// together (a JobSet whose jobs `dependsOn` others): then it is no
    /// gang, and each child is the top owner of its own pods.
    pub sequential: fn(&Value) -> bool,
}

/// Every kind grouped by owner, in the order docs/dialects.md lists them.
pub const OWNER_SOURCES: &[OwnerSource] = &[
    OwnerSource {
        kind_id: OwnerKind::Job,
        name: "jobs.batch",
        group: "batch",
        versions: &["v1"],
        kind: "Job",
        plural: "jobs",
        size: job_size,
        rule: "spec.parallelism (default 1), or the completions left when fewer",
        sequential: never,
    },
    OwnerSource {
        kind_id: OwnerKind::JobSet,
        name: "jobsets.jobset.x-k8s.io",
        group: "jobset.x-k8s.io",
        versions: &["v1alpha2"],
        kind: "JobSet",
        plural: "jobsets",
        size: jobset_size,
        rule: "sum over spec.replicatedJobs of replicas x the Job template's size",
        sequential: jobset_is_sequential,
    },
    OwnerSource {
        kind_id: OwnerKind::LeaderWorkerSet,
        name: "leaderworkersets.leaderworkerset.x-k8s.io",
        group: "leaderworkerset.x-k8s.io",
        versions: &["v1"],
        kind: "LeaderWorkerSet",
        plural: "leaderworkersets",
        size: lws_size,
        rule: "per group: spec.leaderWorkerTemplate.size (leader + size-1 workers)",
        sequential: never,
    },
    OwnerSource {
        kind_id: OwnerKind::TrainJob,
        name: "trainjobs.trainer.kubeflow.org",
        group: "trainer.kubeflow.org",
        versions: &["v1alpha1"],
        kind: "TrainJob",
        plural: "trainjobs",
        size: trainjob_size,
        rule: "spec.trainer.numNodes (default 1)",
        sequential: never,
    },
    OwnerSource {
        kind_id: OwnerKind::PyTorchJob,
        name: "pytorchjobs.kubeflow.org",
        group: "kubeflow.org",
        versions: &["v1"],
        kind: "PyTorchJob",
        plural: "pytorchjobs",
        size: |o| replica_specs_size(o, "pytorchReplicaSpecs"),
        rule: "spec.runPolicy.schedulingPolicy.minAvailable, else the sum of spec.pytorchReplicaSpecs[*].replicas (Master + Worker)",
        sequential: never,
    },
    OwnerSource {
        kind_id: OwnerKind::MpiJob,
        name: "mpijobs.kubeflow.org",
        group: "kubeflow.org",
        versions: &["v2beta1", "v1"],
        kind: "MPIJob",
        plural: "mpijobs",
        size: |o| replica_specs_size(o, "mpiReplicaSpecs"),
        rule: "spec.runPolicy.schedulingPolicy.minAvailable, else the sum of spec.mpiReplicaSpecs[*].replicas (Launcher included)",
        sequential: never,
    },
    OwnerSource {
        kind_id: OwnerKind::TfJob,
        name: "tfjobs.kubeflow.org",
        group: "kubeflow.org",
        versions: &["v1"],
        kind: "TFJob",
        plural: "tfjobs",
        size: |o| replica_specs_size(o, "tfReplicaSpecs"),
        rule: "spec.runPolicy.schedulingPolicy.minAvailable, else the sum of spec.tfReplicaSpecs[*].replicas (Chief, PS, Worker, Evaluator)",
        sequential: never,
    },
    OwnerSource {
        kind_id: OwnerKind::XgBoostJob,
        name: "xgboostjobs.kubeflow.org",
        group: "kubeflow.org",
        versions: &["v1"],
        kind: "XGBoostJob",
        plural: "xgboostjobs",
        size: |o| replica_specs_size(o, "xgbReplicaSpecs"),
        rule: "spec.runPolicy.schedulingPolicy.minAvailable, else the sum of spec.xgbReplicaSpecs[*].replicas (Master + Worker)",
        sequential: never,
    },
    OwnerSource {
        kind_id: OwnerKind::JaxJob,
        name: "jaxjobs.kubeflow.org",
        group: "kubeflow.org",
        versions: &["v1"],
        kind: "JAXJob",
        plural: "jaxjobs",
        size: |o| replica_specs_size(o, "jaxReplicaSpecs"),
        rule: "spec.runPolicy.schedulingPolicy.minAvailable, else the sum of spec.jaxReplicaSpecs[*].replicas",
        sequential: never,
    },
    OwnerSource {
        kind_id: OwnerKind::RayCluster,
        name: "rayclusters.ray.io",
        group: "ray.io",
        versions: &["v1"],
        kind: "RayCluster",
        plural: "rayclusters",
        size: raycluster_size,
        rule: "1 head + sum of spec.workerGroupSpecs[*].minReplicas x numOfHosts",
        sequential: never,
    },
    OwnerSource {
        kind_id: OwnerKind::VolcanoJob,
        name: "jobs.batch.volcano.sh",
        group: "batch.volcano.sh",
        versions: &["v1alpha1"],
        kind: "Job",
        plural: "jobs",
        size: vcjob_size,
        rule: "spec.minAvailable, else the sum of spec.tasks[*].replicas",
        sequential: never,
    },
];

fn never(_: &Value) -> bool {
    false
}

/// A JobSet whose replicated jobs wait for others (`dependsOn`, e.g. a
/// TrainJob's initializers before its trainer nodes) never has all its pods
/// at once: a gang of all of them would wait forever.
fn jobset_is_sequential(obj: &Value) -> bool {
    obj["spec"]["replicatedJobs"]
        .as_array()
        .is_some_and(|jobs| jobs.iter().any(|j| !j["dependsOn"].is_null()))
}

/// The row of a kind.
pub fn owner_source(kind: OwnerKind) -> Option<&'static OwnerSource> {
    OWNER_SOURCES.iter().find(|s| s.kind_id == kind)
}

/// The row an owner reference (`apiVersion`, `kind`) names, any version.
pub fn source_of_reference(api_version: &str, kind: &str) -> Option<&'static OwnerSource> {
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    OWNER_SOURCES
        .iter()
        .find(|s| s.kind == kind && s.group == group)
}

/// An optional count field: `default` when absent, else a non-negative
/// integer of at most [`MAX_GROUP_COUNT`].
fn count_or(value: &Value, field: &str, default: u32) -> Result<u32, String> {
    match value {
        Value::Null => Ok(default),
        v => match v.as_i64() {
            Some(n) => bounded_count(n, field),
            None => Err(format!("{field} must be an integer, got {v}")),
        },
    }
}

/// Sums counts, refusing a total above [`MAX_GROUP_COUNT`].
fn add(total: u32, more: u32, field: &str) -> Result<u32, String> {
    total
        .checked_add(more)
        .filter(|t| *t <= MAX_GROUP_COUNT)
        .ok_or_else(|| format!("{field} adds up to more than {MAX_GROUP_COUNT} pods"))
}

fn times(a: u32, b: u32, field: &str) -> Result<u32, String> {
    a.checked_mul(b)
        .filter(|t| *t <= MAX_GROUP_COUNT)
        .ok_or_else(|| format!("{field} adds up to more than {MAX_GROUP_COUNT} pods"))
}

/// The pods a Job runs at once: `parallelism` (default 1), but never more
/// than `completions` (the Job controller starts at most
/// `min(parallelism, completions - succeeded)` pods, in both completion modes).
fn job_spec_size(spec: &Value, prefix: &str) -> Result<u32, String> {
    let parallelism = count_or(&spec["parallelism"], &format!("{prefix}.parallelism"), 1)?;
    let completions = match &spec["completions"] {
        Value::Null => parallelism,
        v => count_or(v, &format!("{prefix}.completions"), 1)?,
    };
    Ok(parallelism.min(completions))
}

/// A Job's gang shrinks as it progresses: once some completions succeeded,
/// the controller runs only `completions - succeeded` pods at most, and a
/// replacement pod must not wait for members that will never come back.
fn job_size(obj: &Value) -> Result<u32, String> {
    let spec = &obj["spec"];
    let size = job_spec_size(spec, "spec")?;
    if spec["completions"].is_null() {
        return Ok(size);
    }
    let completions = count_or(&spec["completions"], "spec.completions", 1)?;
    let succeeded = count_or(&obj["status"]["succeeded"], "status.succeeded", 0)?;
    let remaining = completions.saturating_sub(succeeded);
    Ok(size.min(remaining.max(1)))
}

fn jobset_size(obj: &Value) -> Result<u32, String> {
    let jobs = obj["spec"]["replicatedJobs"]
        .as_array()
        .ok_or("spec.replicatedJobs must be a list")?;
    let mut total = 0u32;
    for (i, job) in jobs.iter().enumerate() {
        let field = format!("spec.replicatedJobs[{i}]");
        let replicas = count_or(&job["replicas"], &format!("{field}.replicas"), 1)?;
        let per_job = job_spec_size(&job["template"]["spec"], &format!("{field}.template.spec"))?;
        total = add(
            total,
            times(replicas, per_job, &field)?,
            "spec.replicatedJobs",
        )?;
    }
    Ok(total)
}

fn lws_size(obj: &Value) -> Result<u32, String> {
    count_or(
        &obj["spec"]["leaderWorkerTemplate"]["size"],
        "spec.leaderWorkerTemplate.size",
        1,
    )
}

fn trainjob_size(obj: &Value) -> Result<u32, String> {
    count_or(
        &obj["spec"]["trainer"]["numNodes"],
        "spec.trainer.numNodes",
        1,
    )
}

/// Kubeflow training-operator jobs: `spec.<field>` maps a replica type
/// (Master, Worker, Launcher, PS, ...) to a `ReplicaSpec` whose `replicas`
/// defaults to 1. Every type counts: the operators' own PodGroup `minMember`
/// is this sum, launcher included — unless
/// `spec.runPolicy.schedulingPolicy.minAvailable` sets it (the operators
/// pass that to `minMember` as is, for jobs that tolerate resizing).
fn replica_specs_size(obj: &Value, field: &str) -> Result<u32, String> {
    let total = replica_specs_total(obj, field)?;
    const MIN_AVAILABLE: &str = "spec.runPolicy.schedulingPolicy.minAvailable";
    match &obj["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] {
        Value::Null => Ok(total),
        v => {
            let min = count_or(v, MIN_AVAILABLE, total)?;
            if min == 0 || min > total {
                return Err(format!(
                    "{MIN_AVAILABLE} must be between 1 and the {total} replicas of spec.{field}, got {min}"
                ));
            }
            Ok(min)
        }
    }
}

fn replica_specs_total(obj: &Value, field: &str) -> Result<u32, String> {
    let specs = obj["spec"][field]
        .as_object()
        .ok_or_else(|| format!("spec.{field} must be a map of replica types"))?;
    let mut total = 0u32;
    for (kind, spec) in specs {
        let f = format!("spec.{field}.{kind}.replicas");
        total = add(
            total,
            count_or(&spec["replicas"], &f, 1)?,
            &format!("spec.{field}"),
        )?;
    }
    Ok(total)
}

/// One head, plus each worker group's guaranteed minimum (`minReplicas`,
/// default 0, of `numOfHosts` pods each, default 1): what KubeRay's own
/// gang integrations ask for.
fn raycluster_size(obj: &Value) -> Result<u32, String> {
    let mut total = 1u32;
    let groups = match &obj["spec"]["workerGroupSpecs"] {
        Value::Null => return Ok(total),
        v => v.as_array().ok_or("spec.workerGroupSpecs must be a list")?,
    };
    for (i, g) in groups.iter().enumerate() {
        let field = format!("spec.workerGroupSpecs[{i}]");
        let min = count_or(&g["minReplicas"], &format!("{field}.minReplicas"), 0)?;
        let hosts = count_or(&g["numOfHosts"], &format!("{field}.numOfHosts"), 1)?;
        total = add(total, times(min, hosts, &field)?, "spec.workerGroupSpecs")?;
    }
    Ok(total)
}

/// `spec.minAvailable`; when absent, Volcano's webhook defaults it to every
/// task's replicas.
fn vcjob_size(obj: &Value) -> Result<u32, String> {
    let spec = &obj["spec"];
    if !spec["minAvailable"].is_null() {
        return count_or(&spec["minAvailable"], "spec.minAvailable", 1);
    }
    let tasks = spec["tasks"]
        .as_array()
        .ok_or("spec.tasks must be a list")?;
    let mut total = 0u32;
    for (i, t) in tasks.iter().enumerate() {
        let r = count_or(&t["replicas"], &format!("spec.tasks[{i}].replicas"), 1)?;
        total = add(total, r, "spec.tasks")?;
    }
    Ok(total)
}
