//! Topology over a hierarchy end to end, with the real kubectl against
//! `muster cluster` and the daemon: a three-level kwok topology (2 blocks ×
//! 2 racks × 2 nodes, labelled as Kueue's TAS kind cluster labels its
//! workers) under Kueue's sample `Topology`, then
//! - Kueue's TAS samples (the required and preferred Jobs of
//!   site/static/examples/tas, the combined and sliced JobSets of
//!   site/static/examples/jobs) applied unchanged but for
//!   `schedulerName: muster`: required → one rack, preferred with a gang
//!   bigger than a rack → one block, slices → each slice in one rack (all in
//!   one block when the block is required);
//! - v1beta1 PodGroups: a rack constraint lands in one rack, one too big for
//!   any rack binds nothing and says which rack came closest, and
//!   `muster.dev/preferred-topology: <rack>` falls back to one block;
//! - a Volcano PodGroup with `networkTopology: {mode: hard,
//!   highestTierAllowed: 2}` over HyperNodes (tier 1 by exact node names,
//!   tier 2 by a regex over tier-1 names): within one tier-1 HyperNode when
//!   it fits, else within one tier-2 HyperNode.
//!
//! Kueue itself does not run, and the simulated cluster has no Job or JobSet
//! controller: the daemon groups the Job's pods by their top owner
//! (`topOwnerGrouping`), and the test creates the Jobs' pods (and the
//! JobSet's Job) as those controllers would, from the templates read back
//! with kubectl, with controlling owner references.
//!
//! kubectl comes from $MUSTER_KUBECTL or `.tools/kubectl`, fetched with
//! `tests/support/fetch-tools.sh` when missing.

use crate::e2e;
use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use muster::kwok::templates::NodeTemplate;
use serde_json::{Value, json};

use crate::common::kubectl::Kubectl;
use crate::e2e::{Env, bound, test_config, wait_event, wait_pods};

const BLOCK: &str = "cloud.provider.com/topology-block";
const RACK: &str = "cloud.provider.com/topology-rack";

impl Kubectl {
    /// `kubectl create` (the Job samples use `generateName`, which apply
    /// refuses); returns the object's name.
    async fn create(&self, yaml: &str) -> String {
        let out = self
            .ok_with(&["create", "-f", "-", "-o", "name"], yaml)
            .await;
        let name = out.trim().rsplit('/').next().unwrap_or_default();
        assert!(!name.is_empty(), "kubectl create printed a name: {out}");
        name.to_string()
    }

    async fn get_json(&self, resource: &str, name: &str) -> Value {
        let out = self
            .ok_with(&["-n", "default", "get", resource, name, "-o", "json"], "")
            .await;
        serde_json::from_str(&out).expect("kubectl prints json")
    }
}

// ---- the cluster ----------------------------------------------------------------

/// Kueue's sample Topology: the first document of
/// site/static/examples/tas/sample-queues.yaml (its ResourceFlavor,
/// ClusterQueue and LocalQueue configure Kueue's quota, which does not run
/// here).
const KUEUE_TOPOLOGY: &str = r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata:
  name: "default"
spec:
  levels:
  - nodeLabel: "cloud.provider.com/topology-block"
  - nodeLabel: "cloud.provider.com/topology-rack"
  - nodeLabel: "kubernetes.io/hostname"
"#;

/// The workers of Kueue's TAS kind cluster
/// (site/static/examples/tas/kind-cluster.yaml): blocks b1, b2, each with
/// racks r1, r2 (rack names repeat across blocks), two nodes per rack,
/// here of `cpu` cores: nodes `b1-r1-0`, `b1-r1-1`, `b1-r2-0`, ...
fn kueue_kind_workers(cpu: &str) -> Vec<NodeTemplate> {
    let mut out = Vec::new();
    for block in ["b1", "b2"] {
        for rack in ["r1", "r2"] {
            let mut t = e2e::nodes(2, cpu);
            t.name_prefix = format!("{block}-{rack}");
            t.labels = [
                ("cloud.provider.com/node-group", "tas-group"),
                (BLOCK, block),
                (RACK, rack),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
            out.push(t);
        }
    }
    out
}

/// A cluster of Kueue's kind workers, its sample Topology applied with
/// kubectl (before the daemon starts, as an operator would), and a daemon
/// grouping pods by their top owner.
async fn start(cpu: &str) -> (Env, Kubectl, muster::daemon::RunningDaemon) {
    let env = e2e::cluster(kueue_kind_workers(cpu)).await;
    e2e::install_owner_crds(&env).await;
    let k = Kubectl::for_cluster(&env.cluster);
    k.apply(KUEUE_TOPOLOGY).await;
    let config = test_config(
        "profiles:
- schedulerName: muster
  pluginConfig:
  - name: GangScheduling
    args: {topOwnerGrouping: {enabled: true, kinds: [Job, JobSet]}}
",
    );
    let d = e2e::daemon(&env, config).await;
    e2e::wait_ready(&d).await;
    (env, k, d)
}

/// The node names the pods whose name starts with `prefix` are bound to.
fn placed(pods: &BTreeMap<String, Pod>, prefix: &str) -> Vec<String> {
    pods.iter()
        .filter(|(n, p)| n.starts_with(prefix) && bound(p))
        .filter_map(|(_, p)| p.spec.as_ref()?.node_name.clone())
        .collect()
}

/// The distinct blocks (`b1`) or racks (`b1-r2`: a rack is named within
/// its block) of `nodes`, with how many of them each holds.
fn domains(nodes: &[String], parts: usize) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for n in nodes {
        let d = n.split('-').take(parts).collect::<Vec<_>>().join("-");
        *out.entry(d).or_insert(0) += 1;
    }
    out
}

fn blocks(nodes: &[String]) -> BTreeMap<String, usize> {
    domains(nodes, 1)
}

fn racks(nodes: &[String]) -> BTreeMap<String, usize> {
    domains(nodes, 2)
}

/// Waits until `n` pods named `prefix...` are bound; returns their nodes.
async fn wait_bound(env: &Env, prefix: &str, n: usize) -> Vec<String> {
    let pods = wait_pods(env, "default", |p| placed(p, prefix).len() == n).await;
    placed(&pods, prefix)
}

/// Deletes the pods named `prefix...` and waits until they are gone, so the
/// next case starts on an empty cluster.
async fn delete_pods(env: &Env, prefix: &str) {
    let api: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    let names: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .filter(|n| n.starts_with(prefix))
        .collect();
    for n in &names {
        api.delete(n, &DeleteParams::default().grace_period(0))
            .await
            .unwrap();
    }
    wait_pods(env, "default", |p| !p.keys().any(|n| n.starts_with(prefix))).await;
}

async fn wait_failed_scheduling(env: &Env, pod: &str, needle: &str) -> String {
    let e = wait_event(env, "default", |e| {
        e.involved_object.name.as_deref() == Some(pod)
            && e.reason.as_deref() == Some("FailedScheduling")
            && e.message.as_deref().is_some_and(|m| m.contains(needle))
    })
    .await;
    e.message.unwrap_or_default()
}

// ---- the Job and JobSet controllers' part ------------------------------------

/// Creates a Job's pods as the Job controller would: `parallelism` pods
/// from `spec.template` (its labels and annotations, the Job's labels and
/// completion index added), each controlled by the Job.
async fn create_job_pods(env: &Env, job: &Value) {
    let name = job["metadata"]["name"].as_str().expect("job name");
    let uid = job["metadata"]["uid"].as_str().expect("job uid");
    let parallelism = job["spec"]["parallelism"].as_u64().expect("parallelism");
    let template = &job["spec"]["template"];
    let mut pods = Vec::new();
    for i in 0..parallelism {
        let mut labels = template["metadata"]["labels"].clone();
        if !labels.is_object() {
            labels = json!({});
        }
        labels["batch.kubernetes.io/job-name"] = json!(name);
        labels["job-name"] = json!(name);
        labels["batch.kubernetes.io/controller-uid"] = json!(uid);
        labels["batch.kubernetes.io/job-completion-index"] = json!(i.to_string());
        let mut annotations = template["metadata"]["annotations"].clone();
        if !annotations.is_object() {
            annotations = json!({});
        }
        annotations["batch.kubernetes.io/job-completion-index"] = json!(i.to_string());
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": format!("{name}-{i}"),
                "labels": labels, "annotations": annotations,
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                    "uid": uid, "controller": true, "blockOwnerDeletion": true}]
            },
            "spec": template["spec"].clone(),
        });
        pods.push(serde_json::from_value(pod).expect("pod json"));
    }
    e2e::create_pods(env, "default", pods).await;
}

/// Creates the Job of each replicated job of a JobSet (replica 0 only: the
/// samples have one), controlled by the JobSet, as the JobSet controller
/// would; returns them as read back.
async fn create_jobset_jobs(env: &Env, k: &Kubectl, jobset: &Value) -> Vec<Value> {
    let js = jobset["metadata"]["name"].as_str().expect("jobset name");
    let uid = jobset["metadata"]["uid"].as_str().expect("jobset uid");
    let api: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(env.client.clone(), "default");
    let mut out = Vec::new();
    for rj in jobset["spec"]["replicatedJobs"]
        .as_array()
        .expect("replicatedJobs")
    {
        let name = format!(
            "{js}-{}-0",
            rj["name"].as_str().expect("replicated job name")
        );
        let job = json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "default",
                "labels": {"jobset.sigs.k8s.io/jobset-name": js},
                "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                    "name": js, "uid": uid, "controller": true, "blockOwnerDeletion": true}]},
            "spec": rj["template"]["spec"].clone(),
        });
        api.create(
            &PostParams::default(),
            &serde_json::from_value(job).expect("job json"),
        )
        .await
        .expect("create job");
        out.push(k.get_json("jobs", &name).await);
    }
    out
}

// ---- Kueue's TAS samples ----------------------------------------------------------

/// site/static/examples/tas/sample-job-required.yaml, with
/// `schedulerName: muster`.
const SAMPLE_JOB_REQUIRED: &str = r#"apiVersion: batch/v1
kind: Job
metadata:
  generateName: tas-sample-required
  labels:
    kueue.x-k8s.io/queue-name: tas-user-queue
spec:
  parallelism: 10
  completions: 10
  completionMode: Indexed
  template:
    metadata:
      annotations:
        kueue.x-k8s.io/podset-required-topology: "cloud.provider.com/topology-rack"
    spec:
      schedulerName: muster
      containers:
      - name: dummy-job
        image: registry.k8s.io/e2e-test-images/agnhost:2.53
        args: ["pause"]
        resources:
          requests:
            cpu: "1"
            memory: "200Mi"
      restartPolicy: Never
"#;

/// site/static/examples/tas/sample-job-preferred.yaml, with
/// `schedulerName: muster`.
const SAMPLE_JOB_PREFERRED: &str = r#"apiVersion: batch/v1
kind: Job
metadata:
  generateName: tas-sample-preferred
  labels:
    kueue.x-k8s.io/queue-name: tas-user-queue
spec:
  parallelism: 40
  completions: 40
  completionMode: Indexed
  template:
    metadata:
      annotations:
        kueue.x-k8s.io/podset-preferred-topology: "cloud.provider.com/topology-block"
    spec:
      schedulerName: muster
      containers:
      - name: dummy-job
        image: registry.k8s.io/e2e-test-images/agnhost:2.53
        args: ["pause"]
        resources:
          requests:
            cpu: "1"
            memory: "200Mi"
      restartPolicy: Never
"#;

/// site/static/examples/jobs/sample-jobset-tas-combined.yaml (a block for
/// the whole, slices of 4 each in one rack), with `schedulerName: muster`.
const SAMPLE_JOBSET_COMBINED: &str = r#"# sample-jobset-tas-combined.yaml
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: jobset-tas-combined
  labels:
    kueue.x-k8s.io/queue-name: user-queue
spec:
  replicatedJobs:
    - name: workers
      replicas: 1
      template:
        spec:
          parallelism: 8
          completions: 8
          backoffLimit: 0
          template:
            metadata:
              annotations:
                kueue.x-k8s.io/podset-required-topology: "cloud.provider.com/topology-block"
                kueue.x-k8s.io/podset-slice-required-topology: "cloud.provider.com/topology-rack"
                kueue.x-k8s.io/podset-slice-size: "4"
            spec:
              schedulerName: muster
              containers:
                - name: sleep
                  image: busybox
                  resources:
                    requests:
                      cpu: 1
                      memory: "200Mi"
                  command:
                    - sleep
                  args:
                    - 100s
"#;

/// site/static/examples/jobs/sample-jobset-tas-sliced.yaml (slices of 4,
/// each in one rack, no level for the whole), with `schedulerName: muster`.
const SAMPLE_JOBSET_SLICED: &str = r#"# sample-jobset-tas-sliced.yaml
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: jobset-tas-sliced
  labels:
    kueue.x-k8s.io/queue-name: user-queue
spec:
  replicatedJobs:
    - name: workers
      replicas: 1
      template:
        spec:
          parallelism: 8
          completions: 8
          backoffLimit: 0
          template:
            metadata:
              annotations:
                kueue.x-k8s.io/podset-slice-required-topology: "cloud.provider.com/topology-rack"
                kueue.x-k8s.io/podset-slice-size: "4"
            spec:
              schedulerName: muster
              containers:
                - name: sleep
                  image: busybox
                  resources:
                    requests:
                      cpu: 1
                      memory: "200Mi"
                  command:
                    - sleep
                  args:
                    - 100s
"#;

/// Pods another scheduler placed: `cpu` on each node, bound directly.
async fn ballast(env: &Env, cpu: &str) {
    let mut pods = Vec::new();
    for block in ["b1", "b2"] {
        for rack in ["r1", "r2"] {
            for i in 0..2 {
                let node = format!("{block}-{rack}-{i}");
                let mut p = e2e::pod(&format!("ballast-{node}"), cpu, "default-scheduler", None);
                if let Some(spec) = p.spec.as_mut() {
                    spec.node_name = Some(node);
                }
                pods.push(p);
            }
        }
    }
    e2e::create_pods(env, "default", pods).await;
}

/// Kueue's required, preferred and combined (slices) samples, one after
/// the other on 8 nodes of 10 cpu (a rack holds 20 one-cpu pods, a block
/// 40).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueue_tas_samples_land_as_kueue_places_them() {
    let (env, k, d) = start("10").await;

    // Required rack: the 10 pods share one rack (of one block).
    let job = k.create(SAMPLE_JOB_REQUIRED).await;
    create_job_pods(&env, &k.get_json("jobs", &job).await).await;
    let nodes = wait_bound(&env, &job, 10).await;
    assert_eq!(racks(&nodes).len(), 1, "one rack: {nodes:?}");
    delete_pods(&env, &job).await;

    // Preferred block with 40 pods (two racks' worth): one whole block.
    let job = k.create(SAMPLE_JOB_PREFERRED).await;
    create_job_pods(&env, &k.get_json("jobs", &job).await).await;
    let nodes = wait_bound(&env, &job, 40).await;
    assert_eq!(blocks(&nodes).len(), 1, "one block: {nodes:?}");
    delete_pods(&env, &job).await;

    // Slices: with 7 of each node's 10 cpu taken by another scheduler's
    // pods, a rack has room for 6 one-cpu pods, so a slice of 4 fits a
    // rack and two do not: the 8 pods are two racks of 4, in one block.
    ballast(&env, "7").await;
    k.apply(SAMPLE_JOBSET_COMBINED).await;
    let jobset = k
        .get_json("jobsets.jobset.x-k8s.io", "jobset-tas-combined")
        .await;
    for job in create_jobset_jobs(&env, &k, &jobset).await {
        create_job_pods(&env, &job).await;
    }
    let nodes = wait_bound(&env, "jobset-tas-combined-", 8).await;
    assert_eq!(blocks(&nodes).len(), 1, "one block: {nodes:?}");
    assert_eq!(
        racks(&nodes).into_values().collect::<Vec<_>>(),
        vec![4, 4],
        "two whole slices of 4, each in one rack: {nodes:?}"
    );
    delete_pods(&env, "jobset-tas-combined-").await;

    // Slices alone: each slice of 4 in one rack, nothing asked of the whole.
    k.apply(SAMPLE_JOBSET_SLICED).await;
    let jobset = k
        .get_json("jobsets.jobset.x-k8s.io", "jobset-tas-sliced")
        .await;
    for job in create_jobset_jobs(&env, &k, &jobset).await {
        create_job_pods(&env, &job).await;
    }
    let nodes = wait_bound(&env, "jobset-tas-sliced-", 8).await;
    assert_eq!(
        racks(&nodes).into_values().collect::<Vec<_>>(),
        vec![4, 4],
        "two whole slices of 4, each in one rack: {nodes:?}"
    );
    d.shutdown().await.expect("clean shutdown");
}

// ---- PodGroups ------------------------------------------------------------------

/// A v1beta1 PodGroup of `min_count` applied with kubectl, with `extra`
/// spliced into its spec (and `annotations` into its metadata), and its
/// `min_count` one-cpu members.
async fn podgroup(
    env: &Env,
    k: &Kubectl,
    name: &str,
    min_count: usize,
    extra: &str,
    annotations: &str,
) {
    k.apply(&format!(
        "apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata:
  name: {name}
  namespace: default
  annotations: {{{annotations}}}
spec:
  schedulingPolicy:
    gang: {{minCount: {min_count}}}
{extra}"
    ))
    .await;
    let pods = (0..min_count)
        .map(|i| e2e::pod(&format!("{name}-{i}"), "1", "muster", Some(name)))
        .collect();
    e2e::create_pods(env, "default", pods).await;
}

/// A PodGroup with `schedulingConstraints.topology` on the rack lands in one
/// rack; one bigger than any rack binds nothing and names the closest rack;
/// one preferring a rack it does not fit in falls back to one block.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn podgroups_with_a_rack_constraint_or_preference() {
    // 4-cpu nodes: a rack holds 8 one-cpu members, a block 16.
    let (env, k, d) = start("4").await;
    let rack =
        "  schedulingConstraints:\n    topology: [{key: cloud.provider.com/topology-rack}]\n";

    podgroup(&env, &k, "fits", 6, rack, "").await;
    let nodes = wait_bound(&env, "fits-", 6).await;
    assert_eq!(racks(&nodes).len(), 1, "one rack: {nodes:?}");

    // 10 members: no rack holds them (the one used above has room for 2,
    // the others for 8), though the cluster does.
    podgroup(&env, &k, "big", 10, rack, "").await;
    let msg = wait_failed_scheduling(
        &env,
        "big-0",
        "PodGroup default/big requires all members within one domain of cloud.provider.com/topology-rack, and none holds them",
    )
    .await;
    // The closest rack is named within its block (`b2/r1`).
    assert!(
        msg.starts_with("0/8 nodes are available: ")
            && msg.contains("(the closest, cloud.provider.com/topology-rack b")
            // Then DefaultPreemption's verdict, as kube-scheduler appends it.
            && msg.contains(
                "has room for 8 of the 10 members: 2 more need 1 cpu, 100Mi memory each) preemption: "
            ),
        "the closest rack and its shortfall: {msg}"
    );
    let pods = e2e::list_pods(&env, "default").await;
    assert!(placed(&pods, "big-").is_empty(), "nothing bound: {pods:?}");
    let condition = e2e::pod_condition_message(&pods["big-0"]).unwrap_or_default();
    assert!(condition.contains("within one domain of"), "{condition}");

    // Preferring a rack, 12 members (more than a rack's 8) with 26 cpu
    // free: placed within one block, not across the cluster.
    k.ok_with(&["delete", "podgroup", "big"], "").await;
    delete_pods(&env, "big-").await;
    podgroup(
        &env,
        &k,
        "pref",
        12,
        "",
        "muster.dev/preferred-topology: cloud.provider.com/topology-rack",
    )
    .await;
    let nodes = wait_bound(&env, "pref-", 12).await;
    assert_eq!(blocks(&nodes).len(), 1, "one block: {nodes:?}");
    assert_eq!(racks(&nodes).len(), 2, "no rack holds 12: {nodes:?}");
    d.shutdown().await.expect("clean shutdown");
}

// ---- Volcano ----------------------------------------------------------------------

/// Tier-1 HyperNodes, one per rack, listing its nodes by exact name; tier-2
/// HyperNodes, one per block, selecting its racks' HyperNodes by a regex
/// over their names (the shapes of Volcano's network-topology guide).
fn hypernodes() -> String {
    let mut docs = Vec::new();
    for block in ["b1", "b2"] {
        for rack in ["r1", "r2"] {
            docs.push(format!(
                "apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {{name: {block}-{rack}}}
spec:
  tier: 1
  members:
  - {{type: Node, selector: {{exactMatch: {{name: {block}-{rack}-0}}}}}}
  - {{type: Node, selector: {{exactMatch: {{name: {block}-{rack}-1}}}}}}
"
            ));
        }
        docs.push(format!(
            "apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {{name: {block}}}
spec:
  tier: 2
  members:
  - {{type: HyperNode, selector: {{regexMatch: {{pattern: '^{block}-r[0-9]+$'}}}}}}
"
        ));
    }
    docs.join("---\n")
}

/// Volcano members of `group`: one-cpu pods naming it in the group
/// annotation.
async fn volcano_gang(env: &Env, k: &Kubectl, group: &str, members: usize) {
    k.apply(&format!(
        "apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {{name: {group}, namespace: default}}
spec:
  minMember: {members}
  networkTopology: {{mode: hard, highestTierAllowed: 2}}
"
    ))
    .await;
    let pods = (0..members)
        .map(|i| {
            let mut p = e2e::pod(&format!("{group}-{i}"), "1", "muster", None);
            p.metadata.annotations = Some(
                [(
                    "scheduling.k8s.io/group-name".to_string(),
                    group.to_string(),
                )]
                .into(),
            );
            p
        })
        .collect();
    e2e::create_pods(env, "default", pods).await;
}

/// `networkTopology` hard with `highestTierAllowed: 2`: a gang a tier-1
/// HyperNode holds lands in one; a bigger one in one tier-2 HyperNode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volcano_gang_lands_under_one_hypernode() {
    // 4-cpu nodes, no Kueue Topology: the HyperNodes are the hierarchy.
    let env = e2e::cluster(kueue_kind_workers("4")).await;
    let k = Kubectl::for_cluster(&env.cluster);
    k.apply(&hypernodes()).await;
    let d = e2e::daemon(&env, test_config("")).await;
    e2e::wait_ready(&d).await;

    volcano_gang(&env, &k, "small", 7).await;
    let nodes = wait_bound(&env, "small-", 7).await;
    assert_eq!(racks(&nodes).len(), 1, "one tier-1 HyperNode: {nodes:?}");

    volcano_gang(&env, &k, "large", 12).await;
    let nodes = wait_bound(&env, "large-", 12).await;
    let used: BTreeSet<String> = blocks(&nodes).into_keys().collect();
    assert_eq!(used.len(), 1, "one tier-2 HyperNode: {nodes:?}");
    d.shutdown().await.expect("clean shutdown");
}

/// A gang that falls back from a preferred rack to a block should still use
/// as few racks as it can (Kueue's BestFit packs the lowest levels first):
/// 5 members of a node each, in a block of 4 racks of 3
/// nodes, fit in 2 racks. The gang cycle plans members inside the chosen
/// domain with the profile's scoring alone, which spreads them over 3 or 4.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]

async fn a_fallback_block_is_filled_rack_by_rack() {
    let mut templates = Vec::new();
    for rack in ["r1", "r2", "r3", "r4"] {
        let mut t = e2e::nodes(3, "4");
        t.name_prefix = format!("b1-{rack}");
        t.labels = [(BLOCK, "b1"), (RACK, rack)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        templates.push(t);
    }
    let env = e2e::cluster(templates).await;
    let k = Kubectl::for_cluster(&env.cluster);
    k.apply(KUEUE_TOPOLOGY).await;
    let d = e2e::daemon(&env, test_config("")).await;
    e2e::wait_ready(&d).await;
    k.apply(
        "apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata:
  name: pack
  namespace: default
  annotations: {muster.dev/preferred-topology: cloud.provider.com/topology-rack}
spec:
  schedulingPolicy:
    gang: {minCount: 5}
",
    )
    .await;
    let pods = (0..5)
        .map(|i| e2e::pod(&format!("pack-{i}"), "4", "muster", Some("pack")))
        .collect();
    e2e::create_pods(&env, "default", pods).await;
    let nodes = wait_bound(&env, "pack-", 5).await;
    assert_eq!(racks(&nodes).len(), 2, "the fewest racks: {nodes:?}");
    d.shutdown().await.expect("clean shutdown");
}
