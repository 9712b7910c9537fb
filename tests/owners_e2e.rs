//! Top-owner grouping end to end, driven by the real kubectl against
//! `muster cluster`: no controller runs, so each test creates the owner and
//! its pods with owner references (or labels) as its controller would.
//! A Job of parallelism 4 with room for 3 binds nothing and says so on the
//! Job; with room for 4 it binds all; a JobSet of two replicated jobs is one
//! gang; a LeaderWorkerSet of two groups is two gangs; the opt-out
//! annotation and the namespace label make owner pods ordinary pods; a Job
//! scaled down changes its gang's size.

use crate::e2e;
use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use muster::daemon::{DaemonOptions, RunningDaemon};

use crate::common::kubectl::Kubectl;
use crate::e2e::{Env, add_node, bound, cluster, nodes, test_config, wait_event, wait_pods};

impl Kubectl {
    async fn uid(&self, ns: &str, resource: &str, name: &str) -> String {
        let args = [
            "-n",
            ns,
            "get",
            resource,
            name,
            "-o",
            "jsonpath={.metadata.uid}",
        ];
        let uid = self.ok_with(&args, "").await;
        assert!(!uid.is_empty(), "{resource} {name} has a uid");
        uid
    }

    /// Pods requesting one CPU each, controlled by `owner` (apiVersion,
    /// kind, name, uid), with `labels`.
    async fn owned_pods(&self, ns: &str, names: &[String], owner: [&str; 4], labels: &str) {
        let [api_version, kind, name, uid] = owner;
        let mut docs = Vec::new();
        for pod in names {
            docs.push(format!(
                "apiVersion: v1
kind: Pod
metadata:
  name: {pod}
  namespace: {ns}
  labels: {{{labels}}}
  ownerReferences:
  - {{apiVersion: {api_version}, kind: {kind}, name: {name}, uid: {uid}, controller: true, blockOwnerDeletion: true}}
spec:
  schedulerName: muster
  restartPolicy: Never
  containers:
  - name: main
    image: busybox
    resources: {{requests: {{cpu: '1', memory: 100Mi}}}}
"
            ));
        }
        self.apply(&docs.join("---\n")).await;
    }
}

/// A daemon whose profile groups pods by their top owner, with a short
/// gang timeout.
async fn start_daemon(env: &Env) -> RunningDaemon {
    let config = test_config(
        "profiles:
- schedulerName: muster
  pluginConfig:
  - name: GangScheduling
    args: {permitWaitingTimeSeconds: 3, topOwnerGrouping: {enabled: true}}
",
    );
    let mut opts = DaemonOptions::new(config);
    opts.serving = muster::daemon::ServingOptions::Insecure;
    opts.absent_api_recheck = Duration::from_millis(200);
    muster::daemon::start(env.client.clone(), opts)
        .await
        .expect("daemon starts")
}

fn on(kind: &'static str, name: &'static str, reason: &'static str) -> impl FnMut(&Event) -> bool {
    move |e: &Event| {
        e.involved_object.kind.as_deref() == Some(kind)
            && e.involved_object.name.as_deref() == Some(name)
            && e.reason.as_deref() == Some(reason)
    }
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// A Job as its owner's controller would create it; `owner` is a
/// metadata line (`ownerReferences: [...]`) or empty.
fn job_yaml(ns: &str, name: &str, parallelism: u32, annotations: &str, owner: &str) -> String {
    format!(
        "apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: {ns}
  annotations: {{{annotations}}}
  {owner}
spec:
  parallelism: {parallelism}
  completions: {parallelism}
  template:
    spec:
      schedulerName: muster
      restartPolicy: Never
      containers: [{{name: main, image: busybox}}]
"
    )
}

fn bound_count(
    pods: &std::collections::BTreeMap<String, k8s_openapi::api::core::v1::Pod>,
) -> usize {
    pods.values().filter(|p| bound(p)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_binds_all_or_nothing_and_reports_on_the_job() {
    let env = cluster(vec![nodes(3, "1")]).await;
    let k = Kubectl::for_cluster(&env.cluster);
    let daemon = start_daemon(&env).await;
    k.apply(&job_yaml("default", "train", 4, "", "")).await;
    let uid = k.uid("default", "jobs", "train").await;
    k.owned_pods(
        "default",
        &names("train", 4),
        ["batch/v1", "Job", "train", &uid],
        "job-name: train",
    )
    .await;
    // Room for 3 of 4: the gang is refused as a whole and the Job says so.
    let refused = wait_event(&env, "default", |e| {
        e.involved_object.kind.as_deref() == Some("Job")
            && matches!(e.reason.as_deref(), Some("GangTimedOut" | "GangWaiting"))
            && e.type_.as_deref() == Some("Warning")
    })
    .await;
    assert!(
        refused
            .message
            .as_deref()
            .unwrap_or("")
            .starts_with("Job default/train: "),
        "{refused:?}"
    );
    let pods = e2e::list_pods(&env, "default").await;
    assert_eq!(bound_count(&pods), 0, "nothing binds short of the gang");
    let described = k
        .ok_with(&["-n", "default", "describe", "job", "train"], "")
        .await;
    assert!(
        described.contains("GangWaiting") || described.contains("GangTimedOut"),
        "kubectl describe shows the gang's events: {described}"
    );
    // Room for 4: all four bind together.
    add_node(&env, "extra", "1").await;
    let pods = wait_pods(&env, "default", |p| bound_count(p) == 4).await;
    assert_eq!(pods.len(), 4);
    wait_event(&env, "default", on("Job", "train", "GangScheduled")).await;
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobset_is_one_gang_and_an_lws_one_gang_per_group() {
    let env = cluster(vec![nodes(3, "1")]).await;
    e2e::install_owner_crds(&env).await;
    let k = Kubectl::for_cluster(&env.cluster);
    let daemon = start_daemon(&env).await;
    // A JobSet of two replicated jobs (2 pods each): one gang of 4.
    k.apply(
        "apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: js, namespace: default}
spec:
  replicatedJobs:
  - name: a
    replicas: 1
    template: {spec: {parallelism: 2, completions: 2, template: {spec: {containers: [{name: c, image: busybox}]}}}}
  - name: b
    replicas: 1
    template: {spec: {parallelism: 2, completions: 2, template: {spec: {containers: [{name: c, image: busybox}]}}}}
",
    )
    .await;
    let js_uid = k.uid("default", "jobsets.jobset.x-k8s.io", "js").await;
    for job in ["js-a-0", "js-b-0"] {
        let owner = format!(
            "ownerReferences: [{{apiVersion: jobset.x-k8s.io/v1alpha2, kind: JobSet, name: js, uid: {js_uid}, controller: true}}]"
        );
        k.apply(&job_yaml("default", job, 2, "", &owner)).await;
        let uid = k.uid("default", "jobs", job).await;
        k.owned_pods(
            "default",
            &names(job, 2),
            ["batch/v1", "Job", job, &uid],
            "",
        )
        .await;
    }
    // Room for 3 of the JobSet's 4: nothing binds, and the JobSet says so.
    wait_event(&env, "default", |e| {
        e.involved_object.kind.as_deref() == Some("JobSet") && e.type_.as_deref() == Some("Warning")
    })
    .await;
    assert_eq!(bound_count(&e2e::list_pods(&env, "default").await), 0);
    add_node(&env, "extra", "1").await;
    wait_pods(&env, "default", |p| bound_count(p) == 4).await;
    wait_event(&env, "default", on("JobSet", "js", "GangScheduled")).await;

    // A LeaderWorkerSet of two groups of 2 in namespace lws, with room for
    // 3 pods: one group binds whole, the other waits whole.
    k.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: lws}\n")
        .await;
    k.apply(
        "apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: vllm, namespace: lws}
spec:
  replicas: 2
  leaderWorkerTemplate:
    size: 2
    workerTemplate: {spec: {containers: [{name: w, image: busybox}]}}
",
    )
    .await;
    for node in ["extra-2", "extra-3", "extra-4"] {
        add_node(&env, node, "1").await;
    }
    let sts_uid = "00000000-0000-0000-0000-000000000001";
    for group in 0..2 {
        let labels = format!(
            "leaderworkerset.sigs.k8s.io/name: vllm, leaderworkerset.sigs.k8s.io/group-index: '{group}'"
        );
        let set = format!("vllm-{group}");
        k.owned_pods(
            "lws",
            &names(&set, 2),
            ["apps/v1", "StatefulSet", &set, sts_uid],
            &labels,
        )
        .await;
    }
    let pods = wait_pods(&env, "lws", |p| bound_count(p) == 2).await;
    let groups: std::collections::BTreeSet<&str> = pods
        .iter()
        .filter(|(_, p)| bound(p))
        .map(|(n, _)| &n[..6])
        .collect();
    assert_eq!(groups.len(), 1, "one whole group bound: {groups:?}");
    wait_event(&env, "lws", on("LeaderWorkerSet", "vllm", "GangScheduled")).await;
    assert_eq!(bound_count(&e2e::list_pods(&env, "lws").await), 2);
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opt_out_annotation_and_namespace_label_make_plain_pods() {
    let env = cluster(vec![nodes(3, "1")]).await;
    let k = Kubectl::for_cluster(&env.cluster);
    let daemon = start_daemon(&env).await;
    // Annotated out: three of four pods bind as ordinary pods.
    k.apply(&job_yaml(
        "default",
        "solo",
        4,
        "muster.dev/gang: 'false'",
        "",
    ))
    .await;
    let uid = k.uid("default", "jobs", "solo").await;
    k.owned_pods(
        "default",
        &names("solo", 4),
        ["batch/v1", "Job", "solo", &uid],
        "",
    )
    .await;
    wait_pods(&env, "default", |p| bound_count(p) == 3).await;

    // A namespace labelled off: the same.
    k.apply(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: plain, labels: {muster.dev/top-owner-grouping: 'false'}}\n",
    )
    .await;
    // Room for 3 more pods, one of which the fourth `solo` pod may take:
    // at least 2 of this Job's 4 pods bind, which no gang of 4 would.
    for node in ["n-plain-0", "n-plain-1", "n-plain-2"] {
        add_node(&env, node, "1").await;
    }
    k.apply(&job_yaml("plain", "batch", 4, "", "")).await;
    let uid = k.uid("plain", "jobs", "batch").await;
    k.owned_pods(
        "plain",
        &names("batch", 4),
        ["batch/v1", "Job", "batch", &uid],
        "",
    )
    .await;
    wait_pods(&env, "plain", |p| bound_count(p) >= 2).await;
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_the_job_updates_the_gang_size() {
    let env = cluster(vec![nodes(3, "1")]).await;
    let k = Kubectl::for_cluster(&env.cluster);
    let daemon = start_daemon(&env).await;
    k.apply(&job_yaml("default", "elastic", 4, "", "")).await;
    let uid = k.uid("default", "jobs", "elastic").await;
    k.owned_pods(
        "default",
        &names("elastic", 4),
        ["batch/v1", "Job", "elastic", &uid],
        "",
    )
    .await;
    wait_event(&env, "default", |e| {
        e.involved_object.name.as_deref() == Some("elastic")
            && e.type_.as_deref() == Some("Warning")
    })
    .await;
    assert_eq!(bound_count(&e2e::list_pods(&env, "default").await), 0);
    // Parallelism scaled down to what fits: minCount follows, three bind.
    k.ok_with(
        &[
            "-n",
            "default",
            "patch",
            "job",
            "elastic",
            "--type=merge",
            "-p",
            r#"{"spec":{"parallelism":3}}"#,
        ],
        "",
    )
    .await;
    wait_pods(&env, "default", |p| bound_count(p) == 3).await;
    wait_event(&env, "default", on("Job", "elastic", "GangScheduled")).await;
    daemon.shutdown().await.expect("clean shutdown");
}
