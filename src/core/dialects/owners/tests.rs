//! Each kind's size from a realistic manifest, the pod-side reference, the
//! walk to the top owner, opt-outs and the profile arguments.

use serde_json::{Value, json};

use super::*;
use crate::model::{GroupPolicy, MAX_GROUP_COUNT};

fn size_of(kind: OwnerKind, obj: Value) -> Result<u32, String> {
    (owner_source(kind).unwrap().size)(&obj)
}

fn meta(name: &str) -> Value {
    json!({"name": name, "namespace": "ml", "uid": format!("uid-{name}"),
           "creationTimestamp": "2026-01-01T00:00:00Z"})
}

fn job(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta(name), "spec": spec})
}

#[test]
fn job_size_is_parallelism_capped_by_completions() {
    let template = json!({"spec": {"containers": [{"name": "c", "image": "busybox"}],
                                   "restartPolicy": "Never"}});
    let cases = [
        (json!({"parallelism": 4, "template": template}), Ok(4)),
        (
            json!({"parallelism": 4, "completions": 8, "template": template}),
            Ok(4),
        ),
        (
            json!({"parallelism": 4, "completions": 3, "completionMode": "Indexed", "template": template}),
            Ok(3),
        ),
        (json!({"completions": 5, "template": template}), Ok(1)),
        (json!({"template": template}), Ok(1)),
        (json!({"parallelism": 0}), Ok(0)),
        (
            json!({"parallelism": -1}),
            Err("spec.parallelism must not be negative, got -1".to_string()),
        ),
        (
            json!({"parallelism": "4"}),
            Err("spec.parallelism must be an integer, got \"4\"".to_string()),
        ),
        (
            json!({"parallelism": 100_001}),
            Err(format!(
                "spec.parallelism must be at most {MAX_GROUP_COUNT}, got 100001"
            )),
        ),
    ];
    for (i, (spec, want)) in cases.into_iter().enumerate() {
        assert_eq!(size_of(OwnerKind::Job, job("j", spec)), want, "case {i}");
    }
    // Progress: 8 completions, 6 succeeded: at most 2 more pods.
    let mut j = job("j", json!({"parallelism": 4, "completions": 8}));
    j["status"] = json!({"succeeded": 6, "active": 2});
    assert_eq!(size_of(OwnerKind::Job, j.clone()), Ok(2));
    j["status"] = json!({"succeeded": 8});
    assert_eq!(size_of(OwnerKind::Job, j), Ok(1), "never a gang of 0");
}

#[test]
fn jobset_size_sums_replicated_jobs() {
    let js = json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": meta("js"),
    "spec": {"replicatedJobs": [
        {"name": "driver", "replicas": 1, "template": {"spec": {"parallelism": 1, "completions": 1,
            "template": {"spec": {"containers": [{"name": "d", "image": "x"}]}}}}},
        {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 4, "completions": 4,
            "backoffLimit": 0, "template": {"spec": {"containers": [{"name": "w", "image": "x"}]}}}}}
    ]}});
    assert_eq!(size_of(OwnerKind::JobSet, js), Ok(9));
    let huge = json!({"spec": {"replicatedJobs": [
        {"replicas": 100_000, "template": {"spec": {"parallelism": 100_000}}}]}});
    assert!(
        size_of(OwnerKind::JobSet, huge)
            .unwrap_err()
            .contains("more than 100000")
    );
    assert_eq!(
        size_of(OwnerKind::JobSet, json!({"spec": {}})),
        Err("spec.replicatedJobs must be a list".into())
    );
}

#[test]
fn lws_size_is_one_group() {
    let lws = json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": meta("vllm"), "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 4,
            "leaderTemplate": {"spec": {"containers": [{"name": "l", "image": "x"}]}},
            "workerTemplate": {"spec": {"containers": [{"name": "w", "image": "x"}]}}},
            "startupPolicy": "LeaderCreated"}});
    assert_eq!(size_of(OwnerKind::LeaderWorkerSet, lws), Ok(4));
    assert_eq!(
        size_of(OwnerKind::LeaderWorkerSet, json!({"spec": {}})),
        Ok(1)
    );
}

#[test]
fn training_operator_jobs_sum_replica_specs() {
    let pod = json!({"spec": {"containers": [{"name": "pytorch", "image": "x"}]}});
    let pytorch = json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": meta("p"),
        "spec": {"pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": pod},
            "Worker": {"replicas": 3, "restartPolicy": "OnFailure", "template": pod}}}});
    assert_eq!(size_of(OwnerKind::PyTorchJob, pytorch), Ok(4));
    let mpi = json!({"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": meta("m"),
        "spec": {"slotsPerWorker": 1, "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": pod},
            "Worker": {"replicas": 2, "template": pod}}}});
    assert_eq!(size_of(OwnerKind::MpiJob, mpi), Ok(3));
    let tf = json!({"spec": {"tfReplicaSpecs": {"Chief": {"template": pod},
        "PS": {"replicas": 2, "template": pod}, "Worker": {"replicas": 4, "template": pod}}}});
    assert_eq!(
        size_of(OwnerKind::TfJob, tf),
        Ok(7),
        "Chief defaults to 1 replica"
    );
    let xgb = json!({"spec": {"xgbReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 2}}}});
    assert_eq!(size_of(OwnerKind::XgBoostJob, xgb), Ok(3));
    let jax = json!({"spec": {"jaxReplicaSpecs": {"Worker": {"replicas": 8}}}});
    assert_eq!(size_of(OwnerKind::JaxJob, jax), Ok(8));
    // runPolicy.schedulingPolicy.minAvailable is the operators' minMember.
    let elastic = json!({"spec": {"runPolicy": {"schedulingPolicy": {"minAvailable": 3}},
        "pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 7}}}});
    assert_eq!(size_of(OwnerKind::PyTorchJob, elastic), Ok(3));
    let too_many = json!({"spec": {"runPolicy": {"schedulingPolicy": {"minAvailable": 9}},
        "pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 7}}}});
    assert_eq!(
        size_of(OwnerKind::PyTorchJob, too_many),
        Err("spec.runPolicy.schedulingPolicy.minAvailable must be between 1 and the 8 replicas of spec.pytorchReplicaSpecs, got 9".into())
    );
    assert_eq!(
        size_of(OwnerKind::JaxJob, json!({"spec": {}})),
        Err("spec.jaxReplicaSpecs must be a map of replica types".into())
    );
    let bad = json!({"spec": {"jaxReplicaSpecs": {"Worker": {"replicas": -2}}}});
    assert_eq!(
        size_of(OwnerKind::JaxJob, bad),
        Err("spec.jaxReplicaSpecs.Worker.replicas must not be negative, got -2".into())
    );
}

#[test]
fn trainjob_size_is_num_nodes() {
    let tj = json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": meta("t"), "spec": {"runtimeRef": {"name": "torch-distributed"},
        "trainer": {"numNodes": 4, "resourcesPerNode": {"requests": {"nvidia.com/gpu": 1}}}}});
    assert_eq!(size_of(OwnerKind::TrainJob, tj), Ok(4));
    assert_eq!(
        size_of(
            OwnerKind::TrainJob,
            json!({"spec": {"runtimeRef": {"name": "r"}}})
        ),
        Ok(1)
    );
}

#[test]
fn raycluster_size_is_head_plus_worker_minimums() {
    let rc = json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta("r"),
        "spec": {"rayVersion": "2.9.0",
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head", "image": "x"}]}}},
            "workerGroupSpecs": [
                {"groupName": "small", "replicas": 3, "minReplicas": 2, "maxReplicas": 5, "rayStartParams": {}},
                {"groupName": "tpu", "replicas": 1, "minReplicas": 1, "maxReplicas": 1, "numOfHosts": 4, "rayStartParams": {}},
                {"groupName": "elastic", "maxReplicas": 10, "rayStartParams": {}}]}});
    assert_eq!(size_of(OwnerKind::RayCluster, rc), Ok(7));
    assert_eq!(size_of(OwnerKind::RayCluster, json!({"spec": {}})), Ok(1));
}

#[test]
fn vcjob_size_is_min_available_else_all_tasks() {
    let vc = json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": meta("v"),
        "spec": {"minAvailable": 3, "schedulerName": "volcano", "tasks": [
            {"name": "ps", "replicas": 1}, {"name": "worker", "replicas": 4}]}});
    assert_eq!(size_of(OwnerKind::VolcanoJob, vc), Ok(3));
    let all = json!({"spec": {"tasks": [{"replicas": 1}, {"replicas": 4}]}});
    assert_eq!(size_of(OwnerKind::VolcanoJob, all), Ok(5));
}

#[test]
fn every_row_is_unique_and_found_by_reference() {
    let mut names: Vec<_> = OWNER_SOURCES.iter().map(|s| s.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), OWNER_SOURCES.len());
    for s in OWNER_SOURCES {
        let api_version = format!("{}/{}", s.group, s.versions[0]);
        assert_eq!(
            source_of_reference(&api_version, s.kind).unwrap().kind_id,
            s.kind_id
        );
        assert!(owner_source(s.kind_id).is_some());
    }
    assert!(source_of_reference("apps/v1", "ReplicaSet").is_none());
    assert!(
        source_of_reference("v1", "Job").is_none(),
        "the core group has no Job"
    );
}

fn owner(kind: OwnerKind, obj: Value) -> OwnerObject {
    read_owner(owner_source(kind).unwrap(), &obj).unwrap()
}

fn controller(api_version: &str, kind: &str, name: &str) -> Value {
    json!([{"apiVersion": api_version, "kind": kind, "name": name, "uid": format!("uid-{name}"), "controller": true}])
}

#[test]
fn read_owner_defines_the_gang_and_its_parent() {
    let mut j = job("js-workers-0", json!({"parallelism": 4}));
    j["metadata"]["ownerReferences"] = controller("jobset.x-k8s.io/v1alpha2", "JobSet", "js");
    let o = owner(OwnerKind::Job, j);
    assert_eq!(o.def.key.to_string(), "Job ml/js-workers-0");
    assert_eq!(
        o.def.policy,
        Ok(GroupPolicy::Gang {
            min_count: 4,
            schedule_timeout: None
        })
    );
    assert_eq!(o.parent.unwrap().to_string(), "JobSet ml/js");
    assert!(!o.opted_out);

    let mut j = job("j", json!({"parallelism": 4}));
    j["metadata"]["annotations"] = json!({"muster.dev/min-count": "2", "muster.dev/gang": "false",
        "muster.dev/schedule-timeout-seconds": "30"});
    j["metadata"]["ownerReferences"] = controller("batch/v1", "CronJob", "nightly");
    let o = owner(OwnerKind::Job, j);
    assert!(o.opted_out);
    assert!(
        o.parent.is_none(),
        "a CronJob is not grouped: the Job is the top"
    );
    assert_eq!(
        o.def.policy,
        Ok(GroupPolicy::Gang {
            min_count: 2,
            schedule_timeout: Some(std::time::Duration::from_secs(30))
        })
    );
}

#[test]
fn malformed_sizes_make_the_definition_malformed() {
    let cases = [
        (
            json!({}),
            json!({"parallelism": 0}),
            "Job ml/j: spec.parallelism (default 1), or the completions left when fewer implies a gang of 0 pods",
        ),
        (
            json!({"muster.dev/min-count": "many"}),
            json!({}),
            "Job ml/j: annotation muster.dev/min-count must be an integer, got \"many\"",
        ),
        (
            json!({"muster.dev/min-count": "0"}),
            json!({}),
            "Job ml/j: annotation muster.dev/min-count must be positive, got 0",
        ),
        (
            json!({"muster.dev/min-count": "100001"}),
            json!({}),
            "Job ml/j: annotation muster.dev/min-count must be at most 100000, got 100001",
        ),
        (
            json!({}),
            json!({"completions": -3}),
            "Job ml/j: spec.completions must not be negative, got -3",
        ),
    ];
    for (annotations, spec, want) in cases {
        let mut j = job("j", spec);
        j["metadata"]["annotations"] = annotations;
        assert_eq!(owner(OwnerKind::Job, j).def.policy, Err(want.to_string()));
    }
    let unnamed = json!({"metadata": {"namespace": "ml"}, "spec": {}});
    assert!(read_owner(owner_source(OwnerKind::Job).unwrap(), &unnamed).is_err());
}

fn pod_wire(metadata: Value) -> crate::model::wire::PodWire {
    serde_json::from_value(json!({"metadata": metadata, "spec": {}})).unwrap()
}

#[test]
fn a_pod_names_its_own_owner() {
    let p = pod_wire(json!({"name": "j-abc", "namespace": "ml",
        "ownerReferences": controller("batch/v1", "Job", "j")}));
    let key = crate::dialects::resolve_membership(&p)
        .key()
        .cloned()
        .unwrap();
    assert_eq!(key.to_string(), "Job ml/j");
    let lws = pod_wire(json!({"name": "vllm-1-2", "namespace": "ml",
        "labels": {"leaderworkerset.sigs.k8s.io/name": "vllm", "leaderworkerset.sigs.k8s.io/group-index": "1"},
        "ownerReferences": controller("apps/v1", "StatefulSet", "vllm-1")}));
    let key = crate::dialects::resolve_membership(&lws)
        .key()
        .cloned()
        .unwrap();
    assert_eq!(key.to_string(), "LeaderWorkerSet ml/vllm replica \"1\"");
    for plain in [
        json!({"name": "d", "ownerReferences": controller("apps/v1", "ReplicaSet", "web")}),
        json!({"name": "s", "ownerReferences": controller("apps/v1", "StatefulSet", "db")}),
        json!({"name": "bare"}),
        json!({"name": "n", "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u"}]}),
    ] {
        assert_eq!(
            crate::dialects::resolve_membership(&pod_wire(plain.clone())),
            GroupMembership::None,
            "{plain}"
        );
    }
}

#[test]
fn explicit_groups_win_unless_the_workload_api_is_ignored() {
    let mut m = json!({"name": "p", "namespace": "ml",
        "labels": {"scheduling.x-k8s.io/pod-group": "cos"},
        "ownerReferences": controller("batch/v1", "Job", "j")});
    let p: crate::model::wire::PodWire = serde_json::from_value(json!({"metadata": m,
        "spec": {"schedulingGroup": {"podGroupName": "pg"}}}))
    .unwrap();
    assert_eq!(
        crate::dialects::resolve_membership(&p)
            .key()
            .unwrap()
            .to_string(),
        "PodGroup ml/pg"
    );
    m["annotations"] = json!({"muster.dev/ignore-workload-api": "true"});
    let p: crate::model::wire::PodWire = serde_json::from_value(json!({"metadata": m,
        "spec": {"schedulingGroup": {"podGroupName": "pg"}}}))
    .unwrap();
    assert_eq!(
        crate::dialects::resolve_membership(&p)
            .key()
            .unwrap()
            .to_string(),
        "PodGroup.scheduling.x-k8s.io ml/cos",
        "only the Workload API is skipped"
    );
    m["labels"] = json!({});
    let p: crate::model::wire::PodWire = serde_json::from_value(json!({"metadata": m,
        "spec": {"schedulingGroup": {"podGroupName": "pg"}}}))
    .unwrap();
    assert_eq!(
        crate::dialects::resolve_membership(&p)
            .key()
            .unwrap()
            .to_string(),
        "Job ml/j"
    );
}

fn direct(kind: OwnerKind, name: &str) -> GroupKey {
    GroupKey::new(DefinitionKey::new("ml", GroupSource::Owner(kind), name))
}

#[test]
fn the_walk_reaches_the_top_owner() {
    let mut index = OwnerIndex::default();
    let pod = crate::model::PodKey::new("ml", "js-workers-0-0");
    let d = direct(OwnerKind::Job, "js-workers-0");
    index.track(&pod, &d);
    let all = OwnerKindSet::ALL;
    assert_eq!(
        index.resolve(&d, all),
        Resolution::Waiting(d.definition.clone()),
        "the Job is not observed yet"
    );
    let mut j = job("js-workers-0", json!({"parallelism": 4}));
    j["metadata"]["ownerReferences"] = controller("jobset.x-k8s.io/v1alpha2", "JobSet", "js");
    assert_eq!(index.upsert(owner(OwnerKind::Job, j)), vec![pod.clone()]);
    let js_key = direct(OwnerKind::JobSet, "js");
    assert_eq!(
        index.resolve(&d, all),
        Resolution::Waiting(js_key.definition.clone())
    );
    let js = json!({"metadata": meta("js"), "spec": {"replicatedJobs": [{"replicas": 2,
        "template": {"spec": {"parallelism": 4}}}]}});
    assert_eq!(
        index.upsert(owner(OwnerKind::JobSet, js.clone())),
        vec![pod.clone()]
    );
    assert_eq!(index.resolve(&d, all), Resolution::Member(js_key.clone()));
    // Grouping only Jobs: the JobSet's pods are not grouped by their Job.
    let jobs_only = OwnerKindSet::NONE.with(OwnerKind::Job);
    assert_eq!(index.resolve(&d, jobs_only), Resolution::Plain);
    // The JobSet opts out.
    let mut opted = js;
    opted["metadata"]["annotations"] = json!({"muster.dev/gang": "false"});
    assert_eq!(
        index.upsert(owner(OwnerKind::JobSet, opted)),
        vec![pod.clone()]
    );
    assert_eq!(index.resolve(&d, all), Resolution::Plain);
    // Deleted: the pod waits for it again.
    assert_eq!(index.remove(&js_key.definition), vec![pod.clone()]);
    assert_eq!(
        index.resolve(&d, all),
        Resolution::Waiting(js_key.definition)
    );
    index.forget(&pod);
    assert!(index.tracked().next().is_none());
}

#[test]
fn lws_groups_keep_their_index_and_cycles_end() {
    let mut index = OwnerIndex::default();
    let lws = json!({"metadata": meta("vllm"), "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 3}}});
    index.upsert(owner(OwnerKind::LeaderWorkerSet, lws));
    let d = GroupKey::with_replica(
        DefinitionKey::new("ml", GroupSource::Owner(OwnerKind::LeaderWorkerSet), "vllm"),
        "1",
    );
    assert_eq!(
        index.resolve(&d, OwnerKindSet::ALL),
        Resolution::Member(d.clone())
    );
    // A tenant's cycle a → b → a resolves to some owner, without looping.
    let mut a = job("a", json!({}));
    a["metadata"]["ownerReferences"] = controller("batch/v1", "Job", "b");
    let mut b = job("b", json!({}));
    b["metadata"]["ownerReferences"] = controller("batch/v1", "Job", "a");
    index.upsert(owner(OwnerKind::Job, a));
    index.upsert(owner(OwnerKind::Job, b));
    assert!(matches!(
        index.resolve(&direct(OwnerKind::Job, "a"), OwnerKindSet::ALL),
        Resolution::Member(_)
    ));
}

#[test]
fn grouping_args_and_namespace_label() {
    let g = decode_grouping("a", json!({"enabled": true, "kinds": ["Job", "JobSet"]})).unwrap();
    assert!(
        g.enabled
            && g.kinds.contains(OwnerKind::JobSet)
            && !g.kinds.contains(OwnerKind::RayCluster)
    );
    let d = decode_grouping("a", Value::Null).unwrap();
    assert_eq!(d, TopOwnerGrouping::default());
    assert!(!d.enabled && d.kinds.contains(OwnerKind::VolcanoJob));
    let e = decode_grouping("a", json!({"kinds": ["Job", "Deployment"]})).unwrap_err();
    assert_eq!(e.path, "a.kinds[1]");
    assert!(
        e.message.starts_with("unknown kind \"Deployment\""),
        "{}",
        e.message
    );
    assert!(decode_grouping("a", json!({"enable": true})).is_err());

    let labels =
        |v: &str| crate::cache::Labels::from([(NAMESPACE_LABEL.to_string(), v.to_string())]);
    assert!(d.enabled_in(Some(&labels("true"))));
    assert!(!g.enabled_in(Some(&labels("false"))));
    assert!(g.enabled_in(None) && !d.enabled_in(None));
}

#[test]
fn status_becomes_events_on_the_owner() {
    assert_eq!(
        status_event(GroupPhase::WaitingForMembers, "1 of 4 members observed"),
        ("GangWaiting", false)
    );
    assert_eq!(
        status_event(GroupPhase::Scheduled, "ok"),
        ("GangScheduled", false)
    );
    assert_eq!(
        status_event(
            GroupPhase::Unschedulable,
            "Job ml/j timed out waiting at permit: 3/4 members assumed or bound"
        ),
        ("GangTimedOut", true)
    );
    assert_eq!(
        status_event(GroupPhase::Unschedulable, "0/3 nodes are available"),
        ("GangWaiting", true)
    );
}

#[test]
fn a_jobset_of_dependent_jobs_groups_each_job() {
    // A TrainJob's JobSet: initializers first, then the trainer nodes.
    let mut index = OwnerIndex::default();
    let mut js = json!({"metadata": meta("tj"), "spec": {"replicatedJobs": [
        {"name": "dataset-initializer", "template": {"spec": {"parallelism": 1}}},
        {"name": "node", "dependsOn": [{"name": "dataset-initializer", "status": "Complete"}],
         "template": {"spec": {"parallelism": 4}}}]}});
    js["metadata"]["ownerReferences"] =
        controller("trainer.kubeflow.org/v1alpha1", "TrainJob", "tj");
    let js = owner(OwnerKind::JobSet, js);
    assert!(js.sequential);
    assert_eq!(js.parent.as_ref().unwrap().to_string(), "TrainJob ml/tj");
    index.upsert(js);
    let mut node = job("tj-node-0", json!({"parallelism": 4}));
    node["metadata"]["ownerReferences"] = controller("jobset.x-k8s.io/v1alpha2", "JobSet", "tj");
    index.upsert(owner(OwnerKind::Job, node));
    let d = direct(OwnerKind::Job, "tj-node-0");
    assert_eq!(
        index.resolve(&d, OwnerKindSet::ALL),
        Resolution::Member(d.clone())
    );
}

/// A pod template carrying `annotations`, as Kueue's TAS samples write one.
fn tas_template(annotations: Value) -> Value {
    json!({"metadata": {"annotations": annotations},
           "spec": {"containers": [{"name": "c", "image": "busybox",
                    "resources": {"requests": {"cpu": "1"}}}],
                    "restartPolicy": "Never"}})
}

fn jobset(name: &str, parallelism: i64, annotations: Value) -> Value {
    json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": meta(name),
           "spec": {"replicatedJobs": [{"name": "workers", "replicas": 1, "template": {"spec": {
               "parallelism": parallelism, "completions": parallelism, "backoffLimit": 0,
               "template": tas_template(annotations)}}}]}})
}

/// Kueue's TAS samples (site/static/examples/tas and examples/jobs): the
/// annotations on the pod template become the gang's request.
#[test]
fn kueue_topology_annotations_on_pod_templates() {
    use crate::model::{LevelRef, SliceRequest, TopologyRequest};
    let rack = || LevelRef::Label("cloud.provider.com/topology-rack".into());
    let block = || LevelRef::Label("cloud.provider.com/topology-block".into());
    let job_with = |parallelism: i64, annotations: Value| {
        job(
            "tas",
            json!({"parallelism": parallelism, "completions": parallelism,
                   "completionMode": "Indexed", "template": tas_template(annotations)}),
        )
    };
    let cases = [
        (
            OwnerKind::Job,
            job_with(
                10,
                json!({"kueue.x-k8s.io/podset-required-topology": "cloud.provider.com/topology-rack"}),
            ),
            TopologyRequest::required(rack()),
        ),
        (
            OwnerKind::Job,
            job_with(
                40,
                json!({"kueue.x-k8s.io/podset-preferred-topology": "cloud.provider.com/topology-block"}),
            ),
            TopologyRequest::preferred(block()),
        ),
        (
            OwnerKind::Job,
            job_with(
                6,
                json!({"kueue.x-k8s.io/podset-unconstrained-topology": "true"}),
            ),
            TopologyRequest {
                unconstrained: true,
                ..TopologyRequest::default()
            },
        ),
        (
            OwnerKind::JobSet,
            jobset(
                "required",
                4,
                json!({"kueue.x-k8s.io/podset-required-topology": "cloud.provider.com/topology-rack"}),
            ),
            TopologyRequest::required(rack()),
        ),
        (
            OwnerKind::JobSet,
            jobset(
                "sliced",
                8,
                json!({"kueue.x-k8s.io/podset-slice-required-topology": "cloud.provider.com/topology-rack",
                       "kueue.x-k8s.io/podset-slice-size": "4"}),
            ),
            TopologyRequest {
                slice: Some(SliceRequest {
                    level: rack(),
                    size: 4,
                }),
                ..TopologyRequest::default()
            },
        ),
        (
            OwnerKind::JobSet,
            jobset(
                "combined",
                8,
                json!({"kueue.x-k8s.io/podset-required-topology": "cloud.provider.com/topology-block",
                       "kueue.x-k8s.io/podset-slice-required-topology": "cloud.provider.com/topology-rack",
                       "kueue.x-k8s.io/podset-slice-size": "4"}),
            ),
            TopologyRequest {
                required: Some(block()),
                slice: Some(SliceRequest {
                    level: rack(),
                    size: 4,
                }),
                ..TopologyRequest::default()
            },
        ),
        (
            OwnerKind::LeaderWorkerSet,
            json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                   "metadata": meta("lws"),
                   "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 3,
                       "leaderTemplate": tas_template(json!({
                           "kueue.x-k8s.io/podset-required-topology": "cloud.provider.com/topology-rack",
                           "kueue.x-k8s.io/podset-group-name": "lws-group"})),
                       "workerTemplate": tas_template(json!({
                           "kueue.x-k8s.io/podset-required-topology": "cloud.provider.com/topology-rack",
                           "kueue.x-k8s.io/podset-group-name": "lws-group"}))}}}),
            TopologyRequest::required(rack()),
        ),
        (
            OwnerKind::Job,
            job_with(2, json!({})),
            TopologyRequest::default(),
        ),
    ];
    for (kind, obj, want) in cases {
        let o = owner(kind, obj.clone());
        assert!(o.def.policy.is_ok(), "{obj}: {:?}", o.def.policy);
        assert_eq!(*o.def.topology, want, "{obj}");
        assert_eq!(o.def.unsupported, None, "{obj}");
    }
}

#[test]
fn pod_template_topology_errors_and_disagreements() {
    let o = owner(
        OwnerKind::JobSet,
        jobset(
            "bad",
            4,
            json!({"kueue.x-k8s.io/podset-required-topology": "rack",
                   "kueue.x-k8s.io/podset-preferred-topology": "block"}),
        ),
    );
    assert_eq!(
        o.def.policy,
        Err("JobSet ml/bad: spec.replicatedJobs[0].template.spec.template.metadata.annotations: annotations kueue.x-k8s.io/podset-required-topology and kueue.x-k8s.io/podset-preferred-topology are mutually exclusive".into())
    );
    let o = owner(
        OwnerKind::JobSet,
        jobset(
            "big-slice",
            4,
            json!({"kueue.x-k8s.io/podset-slice-required-topology": "rack",
                   "kueue.x-k8s.io/podset-slice-size": "8"}),
        ),
    );
    assert_eq!(
        o.def.policy,
        Err("JobSet ml/big-slice: annotation kueue.x-k8s.io/podset-slice-size: Invalid value: \"8\": must not be greater than pod set count 4".into())
    );
    // A launcher without annotations beside workers confined to a rack:
    // Kueue gives each pod set its own request; one gang cannot.
    let mut js = jobset(
        "mixed",
        4,
        json!({"kueue.x-k8s.io/podset-required-topology": "rack"}),
    );
    let launcher = json!({"name": "launcher", "replicas": 1, "template": {"spec": {
        "parallelism": 1, "template": tas_template(json!({}))}}});
    js["spec"]["replicatedJobs"]
        .as_array_mut()
        .unwrap()
        .push(launcher);
    let o = owner(OwnerKind::JobSet, js);
    assert!(o.def.policy.is_ok());
    assert_eq!(
        o.def.unsupported.as_deref(),
        Some(
            "JobSet ml/mixed: pod templates ask for different topologies (spec.replicatedJobs[0].template.spec.template: required rack; spec.replicatedJobs[1].template.spec.template: none), and one gang is placed under one request"
        )
    );
}

#[test]
fn volcano_jobs_state_their_network_topology() {
    use crate::model::{LevelRef, TopologyRequest};
    let vcjob = |spec: Value| {
        json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": meta("v"),
               "spec": spec})
    };
    let tasks = json!([{"name": "worker", "replicas": 4,
                        "template": tas_template(json!({}))}]);
    let o = owner(
        OwnerKind::VolcanoJob,
        vcjob(json!({"minAvailable": 4, "tasks": tasks,
                     "networkTopology": {"mode": "hard", "highestTierAllowed": 2}})),
    );
    assert_eq!(
        *o.def.topology,
        TopologyRequest {
            required: Some(LevelRef::Tier(2)),
            preferred: Some(LevelRef::Tier(1)),
            ..TopologyRequest::default()
        }
    );
    let o = owner(
        OwnerKind::VolcanoJob,
        vcjob(json!({"tasks": tasks, "networkTopology": {"mode": "hard"}})),
    );
    assert_eq!(
        o.def.policy,
        Err("Job.batch.volcano.sh ml/v: spec.networkTopology: mode hard needs highestTierAllowed or highestTierName (network topology constraint has no tier boundary)".into())
    );
    let o = owner(
        OwnerKind::VolcanoJob,
        vcjob(
            json!({"tasks": [{"name": "w", "replicas": 2, "template": tas_template(json!({})),
                                "partitionPolicy": {"totalPartitions": 2, "partitionSize": 1,
                                    "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}}]}),
        ),
    );
    assert_eq!(
        o.def.unsupported.as_deref(),
        Some(
            "Job.batch.volcano.sh ml/v: spec.tasks[0].partitionPolicy.networkTopology (a network topology per partition) is not supported by this scheduler"
        )
    );
    let o = owner(
        OwnerKind::VolcanoJob,
        vcjob(
            json!({"tasks": [{"name": "w", "replicas": 2, "template": tas_template(json!({
                         "kueue.x-k8s.io/podset-required-topology": "rack"}))}],
                     "networkTopology": {"mode": "soft"}}),
        ),
    );
    assert_eq!(
        o.def.unsupported.as_deref(),
        Some(
            "Job.batch.volcano.sh ml/v: spec.networkTopology (preferred HyperNode tier 1) and the pod templates' Kueue topology annotations (required rack) both ask for a topology"
        )
    );
}
