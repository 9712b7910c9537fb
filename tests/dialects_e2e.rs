//! End-to-end: every gang dialect against the simulated cluster and an
//! in-process daemon — fits, cannot fit, replica keys, precedence, opt-out,
//! late definitions, a CRD installed after start, malformed input.

use std::time::Duration;

use crate::e2e::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::watcher;
use muster::apiserver::{SimCluster, SimConfig};
use muster::daemon::{DaemonOptions, RunningDaemon};
use serde_json::{Value, json};

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

fn coscheduling() -> ApiResource {
    resource("scheduling.x-k8s.io", "v1alpha1", "PodGroup", "podgroups")
}

fn volcano() -> ApiResource {
    resource("scheduling.volcano.sh", "v1beta1", "PodGroup", "podgroups")
}

fn workload_v1alpha1() -> ApiResource {
    resource("scheduling.k8s.io", "v1alpha1", "Workload", "workloads")
}

async fn cluster_with(config: SimConfig) -> Env {
    let cluster = SimCluster::start(
        config
            .pod_start_delay(Duration::from_millis(10))
            .bookmark_interval(Duration::from_millis(500)),
    )
    .await
    .expect("simulated cluster starts");
    let client = cluster.client().expect("client");
    Env { cluster, client }
}

async fn start_daemon(env: &Env) -> RunningDaemon {
    let mut opts = DaemonOptions::new(test_config(""));
    opts.absent_api_recheck = Duration::from_millis(200);
    muster::daemon::start(env.client.clone(), opts)
        .await
        .expect("daemon starts")
}

async fn create(env: &Env, ar: &ApiResource, ns: Option<&str>, obj: Value) {
    let obj: DynamicObject = serde_json::from_value(obj).expect("object json");
    let api: Api<DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(env.client.clone(), ns, ar),
        None => Api::all_with(env.client.clone(), ar),
    };
    api.create(&PostParams::default(), &obj)
        .await
        .expect("create object");
}

/// A pod of `cpu` for scheduler muster, with extra metadata and spec fields.
async fn create_pod(env: &Env, ns: &str, name: &str, cpu: &str, metadata: Value, spec: Value) {
    let mut obj = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"schedulerName": "muster", "containers": [{"name": "main", "image": "busybox",
            "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}]}});
    for (section, extra) in [("metadata", metadata), ("spec", spec)] {
        if let Value::Object(fields) = extra {
            for (k, v) in fields {
                obj[section][k] = v;
            }
        }
    }
    create(env, &resource("", "v1", "Pod", "pods"), Some(ns), obj).await;
}

async fn create_namespace(env: &Env, name: &str) {
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    create(
        env,
        &resource("", "v1", "Namespace", "namespaces"),
        None,
        ns,
    )
    .await;
}

/// Waits until the named object satisfies `pred`; returns it.
async fn wait_object<F>(env: &Env, ar: &ApiResource, ns: &str, name: &str, mut pred: F) -> Value
where
    F: FnMut(&Value) -> bool,
{
    let api: Api<DynamicObject> = Api::namespaced_with(env.client.clone(), ns, ar);
    let cfg = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut stream = Box::pin(watcher::watcher(api, cfg));
    let wait = async {
        while let Some(ev) = stream.next().await {
            if let watcher::Event::Apply(o) | watcher::Event::InitApply(o) = ev.expect("watch") {
                let v = serde_json::to_value(&o).expect("object json");
                if pred(&v) {
                    return v;
                }
            }
        }
        panic!("watch ended");
    };
    tokio::time::timeout(HANG_GUARD, wait)
        .await
        .expect("object reached the state before the hang guard")
}

/// Waits until every named pod has a `PodScheduled=False` message containing `needle`.
async fn wait_messages(env: &Env, ns: &str, names: &[&str], needle: &str) {
    wait_pods(env, ns, |pods| {
        names.iter().all(|n| {
            pods.get(*n)
                .and_then(pod_condition_message)
                .is_some_and(|m| m.contains(needle))
        })
    })
    .await;
}

async fn wait_failed_scheduling(env: &Env, ns: &str, pod: &str, needle: &str) {
    wait_event(env, ns, |e| {
        e.involved_object.name.as_deref() == Some(pod)
            && e.reason.as_deref() == Some("FailedScheduling")
            && e.message.as_deref().is_some_and(|m| m.contains(needle))
    })
    .await;
}

fn bound_count(pods: &std::collections::BTreeMap<String, Pod>, prefix: &str) -> usize {
    names_bound(pods, prefix).len()
}

fn cos_label(group: &str) -> Value {
    json!({"labels": {"scheduling.x-k8s.io/pod-group": group}})
}

fn volcano_annotation(group: &str) -> Value {
    json!({"annotations": {"scheduling.k8s.io/group-name": group}})
}

fn kueue_meta(group: &str, total: &str) -> Value {
    json!({"labels": {"kueue.x-k8s.io/pod-group-name": group},
           "annotations": {"kueue.x-k8s.io/pod-group-total-count": total}})
}

async fn create_coscheduling(env: &Env, name: &str, spec: Value) {
    let obj = json!({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"}, "spec": spec});
    create(env, &coscheduling(), Some("default"), obj).await;
}

async fn create_volcano(env: &Env, name: &str, spec: Value) {
    let obj = json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"}, "spec": spec});
    create(env, &volcano(), Some("default"), obj).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workload_v1alpha1_replicas_are_separate_gangs() {
    let env = cluster(vec![nodes(4, "4")]).await;
    let daemon = start_daemon(&env).await;
    create_namespace(&env, "ml").await;
    let workload = json!({"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload",
        "metadata": {"name": "training", "namespace": "ml"},
        "spec": {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 2}}},
                               {"name": "driver", "policy": {"basic": {}}}]}});
    create(&env, &workload_v1alpha1(), Some("ml"), workload).await;
    let reference = |replica: &str| json!({"workloadRef": {"name": "training", "podGroup": "workers", "podGroupReplicaKey": replica}});
    for name in ["r0-a", "r0-b"] {
        create_pod(&env, "ml", name, "1", json!({}), reference("0")).await;
    }
    create_pod(&env, "ml", "r1-a", "1", json!({}), reference("1")).await;
    let pods = wait_pods(&env, "ml", |p| bound_count(p, "r0-") == 2).await;
    assert_eq!(bound_count(&pods, "r1-"), 0, "replica 1 is its own gang");
    wait_messages(&env, "ml", &["r1-a"], "waiting for 1/2 pods").await;

    create_pod(&env, "ml", "r1-b", "1", json!({}), reference("1")).await;
    wait_pods(&env, "ml", |p| bound_count(p, "r1-") == 2).await;
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workload_without_the_referenced_pod_group_holds_the_pod_and_says_why() {
    let env = cluster(vec![nodes(2, "4")]).await;
    let daemon = start_daemon(&env).await;
    create_namespace(&env, "ml").await;
    let reference = json!({"workloadRef": {"name": "training", "podGroup": "workers"}});
    create_pod(&env, "ml", "w-0", "1", json!({}), reference).await;
    wait_messages(
        &env,
        "ml",
        &["w-0"],
        "waiting for Workload ml/training podGroup \"workers\" to be created",
    )
    .await;
    let workload = json!({"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload",
        "metadata": {"name": "training", "namespace": "ml"},
        "spec": {"podGroups": [{"name": "driver", "policy": {"basic": {}}}]}});
    create(&env, &workload_v1alpha1(), Some("ml"), workload).await;
    wait_messages(
        &env,
        "ml",
        &["w-0"],
        "Workload ml/training has no podGroup \"workers\"",
    )
    .await;
    assert_eq!(bound_count(&list_pods(&env, "ml").await, "w-"), 0);
    daemon.shutdown().await.expect("clean shutdown");
}

/// Registers a `PodGroup` CRD of one version in `group`.
async fn install_crd(env: &Env, group: &str, version: &str) {
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("podgroups.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "podgroups", "singular": "podgroup", "kind": "PodGroup"},
            "versions": [{"name": version, "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    });
    let crds = resource(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    );
    create(env, &crds, None, crd).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coscheduling_fits_and_cannot_fit_with_status_phase() {
    let env = cluster(vec![nodes(2, "4")]).await;
    let daemon = start_daemon(&env).await;
    create_coscheduling(
        &env,
        "fits",
        json!({"minMember": 3, "minResources": {"cpu": "3"}}),
    )
    .await;
    for i in 0..3 {
        create_pod(
            &env,
            "default",
            &format!("fits-{i}"),
            "1",
            cos_label("fits"),
            json!({}),
        )
        .await;
    }
    wait_pods(&env, "default", |p| bound_count(p, "fits-") == 3).await;
    let pg = wait_object(&env, &coscheduling(), "default", "fits", |o| {
        o["status"]["phase"] == "Running"
    })
    .await;
    assert!(
        pg["status"].get("scheduled").is_none(),
        "status.scheduled was removed upstream"
    );
    assert!(pg["status"]["scheduleStartTime"].is_string());

    // 5 cpu left in total: 3 members of 2 cpu never fit; nobody is bound.
    create_coscheduling(
        &env,
        "big",
        json!({"minMember": 3, "scheduleTimeoutSeconds": 2}),
    )
    .await;
    for i in 0..3 {
        create_pod(
            &env,
            "default",
            &format!("big-{i}"),
            "2",
            cos_label("big"),
            json!({}),
        )
        .await;
    }
    wait_failed_scheduling(&env, "default", "big-0", "").await;
    wait_object(&env, &coscheduling(), "default", "big", |o| {
        o["status"]["phase"] == "Scheduling"
    })
    .await;
    assert_eq!(bound_count(&list_pods(&env, "default").await, "big-"), 0);
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volcano_fits_and_cannot_fit_with_status_phase() {
    let env = cluster(vec![nodes(2, "4")]).await;
    let daemon = start_daemon(&env).await;
    create_volcano(&env, "job", json!({"minMember": 2, "queue": "default"})).await;
    for i in 0..2 {
        create_pod(
            &env,
            "default",
            &format!("job-{i}"),
            "1",
            volcano_annotation("job"),
            json!({}),
        )
        .await;
    }
    wait_pods(&env, "default", |p| bound_count(p, "job-") == 2).await;
    let pg = wait_object(&env, &volcano(), "default", "job", |o| {
        o["status"]["phase"] == "Running"
    })
    .await;
    assert_eq!(pg["status"]["running"], 2);

    // minResources beyond the whole cluster: never tried, reported on the pods.
    create_volcano(
        &env,
        "huge",
        json!({"minMember": 2, "minResources": {"cpu": "100"}}),
    )
    .await;
    for i in 0..2 {
        create_pod(
            &env,
            "default",
            &format!("huge-{i}"),
            "1",
            volcano_annotation("huge"),
            json!({}),
        )
        .await;
    }
    wait_failed_scheduling(&env, "default", "huge-0", "minResources").await;
    assert_eq!(bound_count(&list_pods(&env, "default").await, "huge-"), 0);
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueue_groups_are_synthesized_and_disagreement_is_reported() {
    let env = cluster(vec![nodes(3, "4")]).await;
    let daemon = start_daemon(&env).await;
    create_pod(
        &env,
        "default",
        "kq-0",
        "1",
        kueue_meta("kq", "3"),
        json!({}),
    )
    .await;
    create_pod(
        &env,
        "default",
        "kq-1",
        "1",
        kueue_meta("kq", "3"),
        json!({}),
    )
    .await;
    wait_messages(&env, "default", &["kq-0", "kq-1"], "waiting for 2/3 pods").await;
    create_pod(
        &env,
        "default",
        "kq-2",
        "1",
        kueue_meta("kq", "3"),
        json!({}),
    )
    .await;
    wait_pods(&env, "default", |p| bound_count(p, "kq-") == 3).await;

    // Cannot fit: every node has 3 of its 4 cpu left.
    for i in 0..3 {
        create_pod(
            &env,
            "default",
            &format!("kbig-{i}"),
            "4",
            kueue_meta("kbig", "3"),
            json!({}),
        )
        .await;
    }
    wait_failed_scheduling(&env, "default", "kbig-0", "").await;
    assert_eq!(bound_count(&list_pods(&env, "default").await, "kbig-"), 0);

    create_pod(
        &env,
        "default",
        "kd-0",
        "1",
        kueue_meta("kd", "3"),
        json!({}),
    )
    .await;
    create_pod(
        &env,
        "default",
        "kd-1",
        "1",
        kueue_meta("kd", "4"),
        json!({}),
    )
    .await;
    let message =
        "pods of group default/kd disagree on kueue.x-k8s.io/pod-group-total-count: 3 vs 4";
    wait_messages(&env, "default", &["kd-0", "kd-1"], message).await;
    wait_failed_scheduling(&env, "default", "kd-1", message).await;
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn precedence_and_opt_out() {
    let env = cluster(vec![nodes(2, "4")]).await;
    let daemon = start_daemon(&env).await;
    // Coscheduling (needs 2) beats Volcano (needs 5) on the same pods.
    create_coscheduling(&env, "both", json!({"minMember": 2})).await;
    create_volcano(&env, "both", json!({"minMember": 5})).await;
    for i in 0..2 {
        let meta = json!({"labels": {"scheduling.x-k8s.io/pod-group": "both"},
            "annotations": {"scheduling.k8s.io/group-name": "both"}});
        create_pod(&env, "default", &format!("both-{i}"), "1", meta, json!({})).await;
    }
    wait_pods(&env, "default", |p| bound_count(p, "both-") == 2).await;

    // Opted out: its (missing) group is ignored and it schedules alone.
    let meta = json!({"labels": {"scheduling.x-k8s.io/pod-group": "missing"},
        "annotations": {"muster.dev/ignore-groups": "true"}});
    create_pod(&env, "default", "solo", "1", meta, json!({})).await;
    wait_pods(&env, "default", |p| bound_count(p, "solo") == 1).await;
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn definition_created_after_its_pods() {
    let env = cluster(vec![nodes(2, "4")]).await;
    let daemon = start_daemon(&env).await;
    for i in 0..2 {
        create_pod(
            &env,
            "default",
            &format!("late-{i}"),
            "1",
            cos_label("late"),
            json!({}),
        )
        .await;
    }
    wait_messages(
        &env,
        "default",
        &["late-0", "late-1"],
        "waiting for PodGroup.scheduling.x-k8s.io default/late to be created",
    )
    .await;
    create_coscheduling(&env, "late", json!({"minMember": 2})).await;
    wait_pods(&env, "default", |p| bound_count(p, "late-") == 2).await;
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_installed_after_muster_started() {
    let env = cluster_with(
        SimConfig::default()
            .with_templates(vec![nodes(2, "4")])
            .without_groups(["scheduling.x-k8s.io"]),
    )
    .await;
    let daemon = start_daemon(&env).await;
    wait_ready(&daemon).await;
    install_crd(&env, "scheduling.x-k8s.io", "v1alpha1").await;
    create_coscheduling(&env, "new", json!({"minMember": 2})).await;
    for i in 0..2 {
        create_pod(
            &env,
            "default",
            &format!("new-{i}"),
            "1",
            cos_label("new"),
            json!({}),
        )
        .await;
    }
    wait_pods(&env, "default", |p| bound_count(p, "new-") == 2).await;
    wait_object(&env, &coscheduling(), "default", "new", |o| {
        o["status"]["phase"] == "Running"
    })
    .await;
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_references_and_definitions_are_reported_on_the_pod() {
    let env = cluster(vec![nodes(2, "4")]).await;
    let daemon = start_daemon(&env).await;
    create_coscheduling(&env, "zero", json!({"minMember": -1})).await;
    create_pod(&env, "default", "zero-0", "1", cos_label("zero"), json!({})).await;
    create_volcano(&env, "nomin", json!({"minMember": "two"})).await;
    create_pod(
        &env,
        "default",
        "nomin-0",
        "1",
        volcano_annotation("nomin"),
        json!({}),
    )
    .await;
    create_pod(
        &env,
        "default",
        "empty-0",
        "1",
        volcano_annotation(""),
        json!({}),
    )
    .await;
    let cases = [
        (
            "zero-0",
            "PodGroup.scheduling.x-k8s.io default/zero: spec.minMember must not be negative, got -1",
        ),
        (
            "nomin-0",
            "PodGroup.scheduling.volcano.sh default/nomin: spec.minMember must be an integer, got \"two\"",
        ),
        (
            "empty-0",
            "annotation scheduling.k8s.io/group-name is empty",
        ),
    ];
    for (pod, message) in cases {
        wait_messages(&env, "default", &[pod], message).await;
        wait_failed_scheduling(&env, "default", pod, message).await;
    }
    assert!(names_bound(&list_pods(&env, "default").await, "").is_empty());

    // minMember 0 or omitted is valid in both CRDs: no gang, the pod binds.
    create_coscheduling(&env, "basic", json!({"minMember": 0})).await;
    create_pod(
        &env,
        "default",
        "basic-0",
        "1",
        cos_label("basic"),
        json!({}),
    )
    .await;
    create_volcano(&env, "vbasic", json!({})).await;
    create_pod(
        &env,
        "default",
        "vbasic-0",
        "1",
        volcano_annotation("vbasic"),
        json!({}),
    )
    .await;
    wait_pods(&env, "default", |p| {
        bound_count(p, "basic-") == 1 && bound_count(p, "vbasic-") == 1
    })
    .await;
    daemon.shutdown().await.expect("clean shutdown");
}

// ---- required topology ----------------------------------------------------------

const RACK: &str = "topology.kubernetes.io/rack";

/// `n` nodes of `cpu` cores named `<prefix>-<i>`, forming one rack of their
/// own (each template starts a new rack).
fn one_rack(prefix: &str, n: usize, cpu: &str) -> muster::kwok::templates::NodeTemplate {
    let mut t = nodes(n, cpu);
    t.name_prefix = prefix.into();
    t.topology.hosts_per_rack = n;
    t
}

fn node_names(pods: &std::collections::BTreeMap<String, Pod>, prefix: &str) -> Vec<String> {
    pods.iter()
        .filter(|(n, _)| n.starts_with(prefix))
        .filter_map(|(_, p)| p.spec.as_ref().and_then(|s| s.node_name.clone()))
        .collect()
}

async fn create_topology_podgroup(env: &Env, name: &str, min_count: u32) {
    let pg = json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default",
                     "annotations": {"muster.dev/schedule-timeout-seconds": "2"}},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}},
                 "schedulingConstraints": {"topology": [{"key": RACK}]}}});
    create(env, &podgroup_resource(), Some("default"), pg).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn podgroup_required_topology_lands_in_one_rack() {
    // Rack 0: 3 nodes; rack 1: 5 nodes. Four members of 3 cpu could spread
    // over both racks; only rack 1 holds them all.
    let env = cluster(vec![one_rack("small", 3, "4"), one_rack("big", 5, "4")]).await;
    let daemon = start_daemon(&env).await;
    create_topology_podgroup(&env, "train", 4).await;
    let pods = (0..4)
        .map(|i| pod(&format!("train-{i}"), "3", "muster", Some("train")))
        .collect();
    create_pods(&env, "default", pods).await;
    let pods = wait_pods(&env, "default", |p| bound_count(p, "train-") == 4).await;
    let on = node_names(&pods, "train-");
    assert!(on.iter().all(|n| n.starts_with("big-")), "{on:?}");
    wait_podgroup_condition(&env, "default", "train", |c| c["status"] == "True").await;
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn podgroup_required_topology_without_a_big_enough_rack_binds_nothing() {
    // Six nodes would hold the four members, but no rack of three does.
    let env = cluster(vec![one_rack("a", 3, "4"), one_rack("b", 3, "4")]).await;
    let daemon = start_daemon(&env).await;
    create_topology_podgroup(&env, "wide", 4).await;
    let pods = (0..4)
        .map(|i| pod(&format!("wide-{i}"), "3", "muster", Some("wide")))
        .collect();
    create_pods(&env, "default", pods).await;
    let needle = "requires all members within one domain of topology.kubernetes.io/rack";
    wait_failed_scheduling(&env, "default", "wide-0", needle).await;
    let c = wait_podgroup_condition(&env, "default", "wide", |c| {
        c["status"] == "False" && c["message"].as_str().is_some_and(|m| m.contains(needle))
    })
    .await;
    assert_eq!(c["reason"], "Unschedulable");
    assert_eq!(bound_count(&list_pods(&env, "default").await, "wide-"), 0);
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueue_required_topology_lands_in_one_rack() {
    let env = cluster(vec![one_rack("small", 3, "4"), one_rack("big", 5, "4")]).await;
    let daemon = start_daemon(&env).await;
    let mut meta = kueue_meta("kt", "4");
    meta["annotations"]["kueue.x-k8s.io/podset-required-topology"] = json!(RACK);
    for i in 0..4 {
        create_pod(
            &env,
            "default",
            &format!("kt-{i}"),
            "3",
            meta.clone(),
            json!({}),
        )
        .await;
    }
    let pods = wait_pods(&env, "default", |p| bound_count(p, "kt-") == 4).await;
    let on = node_names(&pods, "kt-");
    assert!(on.iter().all(|n| n.starts_with("big-")), "{on:?}");
    daemon.shutdown().await.expect("clean shutdown");
}

// ---- 1.36: v1alpha2 PodGroup ----------------------------------------------------

fn podgroup_v1alpha2() -> ApiResource {
    resource("scheduling.k8s.io", "v1alpha2", "PodGroup", "podgroups")
}

/// The scheduler's condition of a v1alpha2 PodGroup (1.36 names it
/// `PodGroupScheduled`), if any.
fn initially_scheduled(o: &Value) -> Option<&Value> {
    o["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "PodGroupScheduled")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn podgroup_v1alpha2_on_a_cluster_without_v1beta1() {
    let env = cluster_with(
        SimConfig::default()
            .with_templates(vec![nodes(2, "4")])
            // A 1.36 cluster: v1alpha2 is the newest version served (with
            // v1alpha3 served too, one object would be read in v1alpha3).
            .without_groups(["scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha3"]),
    )
    .await;
    let daemon = start_daemon(&env).await;
    let podgroup = |name: &str, min: u32| {
        json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default",
                         "annotations": {"muster.dev/schedule-timeout-seconds": "2"}},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min}}}})
    };
    create(
        &env,
        &podgroup_v1alpha2(),
        Some("default"),
        podgroup("fits", 3),
    )
    .await;
    let pods = (0..3)
        .map(|i| pod(&format!("fits-{i}"), "1", "muster", Some("fits")))
        .collect();
    create_pods(&env, "default", pods).await;
    wait_pods(&env, "default", |p| bound_count(p, "fits-") == 3).await;
    wait_object(&env, &podgroup_v1alpha2(), "default", "fits", |o| {
        initially_scheduled(o).is_some_and(|c| c["status"] == "True")
    })
    .await;

    // 5 cpu left, in 3 + 2: three members of 2 cpu never fit together.
    create(
        &env,
        &podgroup_v1alpha2(),
        Some("default"),
        podgroup("big", 3),
    )
    .await;
    let pods = (0..3)
        .map(|i| pod(&format!("big-{i}"), "2", "muster", Some("big")))
        .collect();
    create_pods(&env, "default", pods).await;
    let pg = wait_object(&env, &podgroup_v1alpha2(), "default", "big", |o| {
        initially_scheduled(o).is_some_and(|c| c["reason"] == "Unschedulable")
    })
    .await;
    assert_eq!(
        initially_scheduled(&pg).map(|c| c["status"].clone()),
        Some(json!("False"))
    );
    assert_eq!(bound_count(&list_pods(&env, "default").await, "big-"), 0);
    daemon.shutdown().await.expect("clean shutdown");
}

// ---- Volcano minTaskMember ------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volcano_min_task_member_is_a_per_task_quorum() {
    let env = cluster(vec![nodes(2, "4")]).await;
    let daemon = start_daemon(&env).await;
    create_volcano(
        &env,
        "tf",
        json!({"minMember": 2, "minTaskMember": {"ps": 1, "worker": 2},
               "queue": "research", "priorityClassName": "high"}),
    )
    .await;
    let task = |t: &str| json!({"annotations": {"scheduling.k8s.io/group-name": "tf", "volcano.sh/task-spec": t}});
    for i in 0..2 {
        create_pod(
            &env,
            "default",
            &format!("tf-worker-{i}"),
            "1",
            task("worker"),
            json!({}),
        )
        .await;
    }
    // minMember is met, the "ps" task is not: the workers wait and say why.
    wait_messages(
        &env,
        "default",
        &["tf-worker-0", "tf-worker-1"],
        "task \"ps\": 0/1 observed (spec.minTaskMember)",
    )
    .await;
    assert_eq!(bound_count(&list_pods(&env, "default").await, "tf-"), 0);
    create_pod(&env, "default", "tf-ps-0", "1", task("ps"), json!({})).await;
    wait_pods(&env, "default", |p| bound_count(p, "tf-") == 3).await;
    wait_object(&env, &volcano(), "default", "tf", |o| {
        o["status"]["phase"] == "Running"
    })
    .await;
    daemon.shutdown().await.expect("clean shutdown");
}

// ---- group status while gated ------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gated_gangs_report_waiting_for_members_in_each_dialect() {
    let env = cluster(vec![nodes(2, "4")]).await;
    let daemon = start_daemon(&env).await;
    create_podgroup(&env, "default", "pg", 3, None).await;
    create_coscheduling(&env, "cos", json!({"minMember": 2})).await;
    create_volcano(&env, "vc", json!({"minMember": 2})).await;
    create_pods(
        &env,
        "default",
        vec![pod("pg-0", "1", "muster", Some("pg"))],
    )
    .await;
    create_pod(&env, "default", "cos-0", "1", cos_label("cos"), json!({})).await;
    create_pod(
        &env,
        "default",
        "vc-0",
        "1",
        volcano_annotation("vc"),
        json!({}),
    )
    .await;

    let c = wait_podgroup_condition(&env, "default", "pg", |c| {
        c["message"] == "1 of 3 members observed"
    })
    .await;
    assert_eq!(c["reason"], "Unschedulable", "upstream's reason vocabulary");
    assert_eq!(c["status"], "False");
    wait_object(&env, &coscheduling(), "default", "cos", |o| {
        o["status"]["phase"] == "Pending"
    })
    .await;
    let vc = wait_object(&env, &volcano(), "default", "vc", |o| {
        o["status"]["phase"] == "Pending"
    })
    .await;
    assert_eq!(vc["status"]["conditions"][0]["reason"], "NotEnoughTasks");
    assert_eq!(
        vc["status"]["conditions"][0]["message"],
        "1 of 2 members observed"
    );

    // The rest arrive: each gang is scheduled and says so.
    create_pods(
        &env,
        "default",
        vec![
            pod("pg-1", "1", "muster", Some("pg")),
            pod("pg-2", "1", "muster", Some("pg")),
        ],
    )
    .await;
    create_pod(&env, "default", "cos-1", "1", cos_label("cos"), json!({})).await;
    create_pod(
        &env,
        "default",
        "vc-1",
        "1",
        volcano_annotation("vc"),
        json!({}),
    )
    .await;
    wait_podgroup_condition(&env, "default", "pg", |c| c["status"] == "True").await;
    wait_object(&env, &coscheduling(), "default", "cos", |o| {
        o["status"]["phase"] == "Running"
    })
    .await;
    wait_object(&env, &volcano(), "default", "vc", |o| {
        o["status"]["phase"] == "Running"
    })
    .await;
    daemon.shutdown().await.expect("clean shutdown");
}

// ---- dialect fidelity ------------------------------------------------

/// Kubeflow Trainer labels its pods `scheduling.volcano.sh/group-name`: the
/// gang is held whole, and the status is written on the object itself (the
/// sim serves Volcano's PodGroup without `/status`, as its CRD has none).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volcano_label_gang_is_held_whole_and_status_written_without_a_status_subresource() {
    let env = cluster(vec![nodes(2, "4")]).await;
    let daemon = start_daemon(&env).await;
    let label = |g: &str| json!({"labels": {"scheduling.volcano.sh/group-name": g}});
    create_volcano(&env, "train", json!({"minMember": 3, "queue": "default"})).await;
    for i in 0..3 {
        let name = format!("train-{i}");
        create_pod(&env, "default", &name, "1", label("train"), json!({})).await;
    }
    wait_pods(&env, "default", |p| bound_count(p, "train-") == 3).await;
    let pg = wait_object(&env, &volcano(), "default", "train", |o| {
        o["status"]["phase"] == "Running"
    })
    .await;
    let c = &pg["status"]["conditions"][0];
    assert_eq!(c["type"], "Scheduled");
    assert_eq!(c["reason"], "tasks in gang are ready to be scheduled");
    assert!(c["transitionID"].is_string(), "{c}");

    // 5 cpu left: three members of 2 cpu never fit together; none binds.
    let obj = json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "big", "namespace": "default",
                     "annotations": {"muster.dev/schedule-timeout-seconds": "2"}},
        "spec": {"minMember": 3}});
    create(&env, &volcano(), Some("default"), obj).await;
    for i in 0..3 {
        let name = format!("big-{i}");
        create_pod(&env, "default", &name, "2", label("big"), json!({})).await;
    }
    let pg = wait_object(&env, &volcano(), "default", "big", |o| {
        o["status"]["conditions"][0]["reason"] == "NotEnoughResources"
    })
    .await;
    assert_eq!(pg["status"]["phase"], "Inqueue");
    assert_eq!(pg["status"]["conditions"][0]["type"], "Unschedulable");
    assert_eq!(bound_count(&list_pods(&env, "default").await, "big-"), 0);
    daemon.shutdown().await.expect("clean shutdown");
}

/// A basic-policy PodGroup gets the condition too, once a member is placed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_basic_podgroup_is_reported_scheduled() {
    let env = cluster(vec![nodes(1, "4")]).await;
    let daemon = start_daemon(&env).await;
    let obj = json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"schedulingPolicy": {"basic": {}}}});
    create(&env, &podgroup_resource(), Some("default"), obj).await;
    create_pods(
        &env,
        "default",
        vec![pod("web-0", "1", "muster", Some("web"))],
    )
    .await;
    let c = wait_podgroup_condition(&env, "default", "web", |c| c["status"] == "True").await;
    assert_eq!(c["reason"], "Scheduled");
    daemon.shutdown().await.expect("clean shutdown");
}
