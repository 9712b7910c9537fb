//! Devices for whole gangs end to end, with the real kubectl against
//! `muster cluster` and the daemon: a PodGroup whose `spec.resourceClaims`
//! names a template gets one ResourceClaim for the group from the
//! simulated resourceclaim controller; its members, each with GPUs of its
//! own, all land in the rack whose interconnect unit (a multi-node device
//! its rack's nodes share) the group's claim got, and the claim is reserved
//! for the PodGroup. A gang whose rack unit is taken waits whole, naming
//! the claim, and binds once a unit frees (its holder's PodGroup deleted).
//! Members sharing a claim their PodGroup names land where its one device
//! is. A gang greedy allocation strands (one member's GPU taken from the
//! PCIe root the other needs whole) binds with the joint device search.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::{Api, DeleteParams};
use muster::kwok::devices::{DeviceTemplate, MultiNode};
use muster::kwok::templates::{RACK_LABEL, Topology};

use crate::common::kubectl::Kubectl;
use crate::e2e;

const CLASSES: &str = r#"
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.kwok.muster.dev}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.kwok.muster.dev" && device.attributes["gpu.kwok.muster.dev"].model == "kwok-gpu"'}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: fabric.kwok.muster.dev}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.kwok.muster.dev" && device.attributes["gpu.kwok.muster.dev"].model == "kwok-fabric"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: two-gpus, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.kwok.muster.dev, count: 2}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: rack-fabric, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: fabric
        exactly: {deviceClassName: fabric.kwok.muster.dev}
"#;

/// A gang of `size` whose PodGroup shares the rack-fabric claim, each
/// member with two GPUs of its own.
fn gang(name: &str, size: usize) -> String {
    let mut yaml = format!(
        "
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {{name: {name}, namespace: default}}
spec:
  schedulingPolicy: {{gang: {{minCount: {size}}}}}
  resourceClaims:
  - {{name: fabric, resourceClaimTemplateName: rack-fabric}}
"
    );
    for i in 0..size {
        yaml.push_str(&format!(
            "---
apiVersion: v1
kind: Pod
metadata: {{name: {name}-{i}, namespace: default}}
spec:
  schedulerName: muster
  schedulingGroup: {{podGroupName: {name}}}
  containers:
  - name: main
    image: busybox
    resources:
      requests: {{cpu: 100m}}
      claims: [{{name: fabric}}, {{name: gpus}}]
  resourceClaims:
  - {{name: fabric, resourceClaimTemplateName: rack-fabric}}
  - {{name: gpus, resourceClaimTemplateName: two-gpus}}
"
        ));
    }
    yaml
}

/// The claims a PodGroup owns.
fn owned_by_group<'a>(
    claims: &'a BTreeMap<String, ResourceClaim>,
    group: &str,
) -> Vec<&'a ResourceClaim> {
    claims
        .values()
        .filter(|c| {
            c.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.kind == "PodGroup" && o.name == group && o.controller == Some(true))
        })
        .collect()
}

/// The racks of the pods whose names start with `prefix`, by node label.
async fn racks_of(env: &e2e::Env, pods: &BTreeMap<String, Pod>, prefix: &str) -> Vec<String> {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(env.client.clone());
    let mut out = Vec::new();
    for (name, p) in pods.iter().filter(|(n, _)| n.starts_with(prefix)) {
        let node = p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_else(|| panic!("{name} is bound"));
        let n = nodes.get(&node).await.expect("node");
        out.push(n.metadata.labels.unwrap_or_default()[RACK_LABEL].clone());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_shares_its_pod_groups_rack_unit_and_lands_in_that_rack() {
    // Two racks of two nodes, two GPUs a node, one fabric unit a rack.
    let mut template = e2e::nodes(4, "8");
    template.topology = Topology {
        hosts_per_rack: 2,
        racks_per_block: 2,
    };
    let mut devices = DeviceTemplate::with_count(2);
    devices.multi_node = Some(MultiNode {
        count: 1,
        model: "kwok-fabric".into(),
    });
    template.devices = Some(devices);
    let env = e2e::cluster(vec![template]).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    env.cluster.write_kubeconfig(&kubeconfig).unwrap();
    let k = Kubectl::new(kubeconfig);
    let daemon = e2e::daemon(&env, e2e::test_config("")).await;
    k.apply(CLASSES).await;
    k.apply(&gang("train", 2)).await;

    let pods = e2e::wait_pods(&env, "default", |p| {
        e2e::names_bound(p, "train-").len() == 2
    })
    .await;
    let racks = racks_of(&env, &pods, "train-").await;
    assert_eq!(racks[0], racks[1], "members in one rack: {racks:?}");
    let all = e2e::claims(&env).await;
    let shared = owned_by_group(&all, "train");
    assert_eq!(shared.len(), 1, "one claim for the group: {:?}", all.keys());
    let claim = shared[0];
    let status = claim.status.as_ref().expect("status");
    let reserved: Vec<(String, String)> = status
        .reserved_for
        .iter()
        .flatten()
        .map(|r| (r.resource.clone(), r.name.clone()))
        .collect();
    assert_eq!(reserved, [("podgroups".to_string(), "train".to_string())]);
    let pool = status
        .allocation
        .as_ref()
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|r| r.pool)
        .collect::<Vec<_>>();
    assert_eq!(
        pool,
        [format!("clique-{}", racks[0])],
        "the unit of that rack"
    );
    // kubectl shows the group's claim recorded on the PodGroup.
    let pg = k
        .json(&[
            "get",
            "podgroups.v1beta1.scheduling.k8s.io",
            "train",
            "-o",
            "json",
        ])
        .await;
    assert_eq!(
        pg["status"]["resourceClaimStatuses"][0]["resourceClaimName"],
        claim.metadata.name.clone().unwrap_or_default().as_str()
    );

    // A second gang takes the other rack; a third waits whole, naming
    // the claim its group shares.
    k.apply(&gang("eval", 2)).await;
    e2e::wait_pods(&env, "default", |p| e2e::names_bound(p, "eval-").len() == 2).await;
    k.apply(&gang("late", 2)).await;
    let message = e2e::wait_pod_message(&env, "default", "late-0", "shared by PodGroup late").await;
    assert!(
        message.contains("shared by PodGroup late") && message.contains("late-fabric-"),
        "{message}"
    );
    let waiting = e2e::list_pods(&env, "default").await;
    assert!(e2e::names_bound(&waiting, "late-").is_empty());

    // The first gang's PodGroup and pods go: its unit frees, and the
    // waiting gang binds whole in that rack.
    let pgs: Api<kube::api::DynamicObject> =
        Api::namespaced_with(env.client.clone(), "default", &e2e::podgroup_resource());
    pgs.delete("train", &DeleteParams::default())
        .await
        .expect("delete podgroup");
    let pods_api: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    for i in 0..2 {
        pods_api
            .delete(&format!("train-{i}"), &DeleteParams::default())
            .await
            .expect("delete pod");
    }
    let pods = e2e::wait_pods(&env, "default", |p| e2e::names_bound(p, "late-").len() == 2).await;
    let late = racks_of(&env, &pods, "late-").await;
    assert_eq!(late[0], racks[0], "the freed rack: {late:?}");
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_share_a_claim_their_pod_group_names() {
    // Three nodes with two GPUs each; the group's claim wants one GPU, so
    // every member runs on the node of that GPU.
    let mut template = e2e::nodes(3, "8");
    template.devices = Some(DeviceTemplate::with_count(2));
    let env = e2e::cluster(vec![template]).await;
    let k = Kubectl::for_cluster(&env.cluster);
    let daemon = e2e::daemon(&env, e2e::test_config("")).await;
    k.apply(CLASSES).await;
    let mut yaml = String::from(
        r#"
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: one-gpu, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.kwok.muster.dev}
---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: pair, namespace: default}
spec:
  schedulingPolicy: {gang: {minCount: 3}}
  resourceClaims:
  - {name: gpu, resourceClaimName: one-gpu}
"#,
    );
    for i in 0..3 {
        yaml.push_str(&format!(
            "---
apiVersion: v1
kind: Pod
metadata: {{name: pair-{i}, namespace: default}}
spec:
  schedulerName: muster
  schedulingGroup: {{podGroupName: pair}}
  containers:
  - {{name: main, image: busybox, resources: {{requests: {{cpu: 100m}}, claims: [{{name: gpu}}]}}}}
  resourceClaims:
  - {{name: gpu, resourceClaimName: one-gpu}}
"
        ));
    }
    k.apply(&yaml).await;
    let pods = e2e::wait_pods(&env, "default", |p| e2e::names_bound(p, "pair-").len() == 3).await;
    let nodes: Vec<String> = pods
        .values()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    assert!(nodes.iter().all(|n| *n == nodes[0]), "one node: {nodes:?}");
    let claim = k
        .json(&["get", "resourceclaim", "one-gpu", "-o", "json"])
        .await;
    let reserved = &claim["status"]["reservedFor"];
    assert_eq!(reserved.as_array().map(Vec::len), Some(1), "{reserved}");
    assert_eq!(reserved[0]["resource"], "podgroups");
    assert_eq!(reserved[0]["apiGroup"], "scheduling.k8s.io");
    assert_eq!(reserved[0]["name"], "pair");
    assert_eq!(
        claim["status"]["allocation"]["devices"]["results"][0]["pool"],
        nodes[0].as_str()
    );
    daemon.shutdown().await.expect("clean shutdown");
}

/// One node's GPUs under two PCIe roots: gpu-0 and gpu-1 on pci0, gpu-2 on
/// pci1. Member a (first in queue order) wants any GPU, member b two on
/// one root. Allocated greedily, a takes gpu-0 and b fits nowhere; the
/// joint search gives a gpu-2, and the gang binds whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_greedy_allocation_strands_binds_with_the_joint_search() {
    let mut template = e2e::nodes(1, "8");
    let mut devices = DeviceTemplate::with_count(3);
    devices.pcie_roots = 2;
    template.devices = Some(devices);
    let env = e2e::cluster(vec![template]).await;
    let k = Kubectl::for_cluster(&env.cluster);
    let daemon = e2e::daemon(&env, e2e::test_config("")).await;
    k.apply(CLASSES).await;
    let member = |name: &str, claim: &str| {
        format!(
            "---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  schedulerName: muster
  schedulingGroup: {{podGroupName: pair}}
  containers:
  - {{name: main, image: busybox, resources: {{requests: {{cpu: 100m}}, claims: [{{name: gpu}}]}}}}
  resourceClaims:
  - {{name: gpu, resourceClaimName: {claim}}}
"
        )
    };
    let yaml = format!(
        r#"
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: any-gpu, namespace: default}}
spec:
  devices:
    requests:
    - {{name: gpu, exactly: {{deviceClassName: gpu.kwok.muster.dev}}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: gpu-pair, namespace: default}}
spec:
  devices:
    requests:
    - {{name: gpu, exactly: {{deviceClassName: gpu.kwok.muster.dev, count: 2}}}}
    constraints:
    - matchAttribute: gpu.kwok.muster.dev/pcieRoot
---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {{name: pair, namespace: default}}
spec:
  schedulingPolicy: {{gang: {{minCount: 2}}}}
{}{}"#,
        member("a", "any-gpu"),
        member("b", "gpu-pair")
    );
    k.apply(&yaml).await;
    let pods = e2e::wait_pods(&env, "default", |p| {
        ["a", "b"].iter().all(|n| p.get(*n).is_some_and(e2e::bound))
    })
    .await;
    assert!(pods.values().all(e2e::bound));
    let claims = e2e::claims(&env).await;
    let devices_of = |claim: &str| -> Vec<String> {
        let mut d: Vec<String> = claims[claim]
            .status
            .as_ref()
            .and_then(|s| s.allocation.as_ref())
            .and_then(|a| a.devices.as_ref())
            .and_then(|d| d.results.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|r| r.device)
            .collect();
        d.sort();
        d
    };
    assert_eq!(devices_of("any-gpu"), ["gpu-2"]);
    assert_eq!(devices_of("gpu-pair"), ["gpu-0", "gpu-1"]);
    // Metrics are published once a second: the wait is on their content.
    let placed = "muster_dra_joint_searches_total{result=\"placed\"}";
    let scrape = async {
        loop {
            let (_, text) = e2e::http_get(daemon.http_addr, "/metrics").await;
            if e2e::metric(&text, placed).is_some_and(|n| n >= 1.0) {
                break text;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    };
    let text = tokio::time::timeout(e2e::HANG_GUARD, scrape)
        .await
        .expect("the joint search placed member b");
    assert_eq!(e2e::metric(&text, placed), Some(1.0));
    daemon.shutdown().await.expect("clean shutdown");
}
