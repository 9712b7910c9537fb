//! Devices for whole gangs end to end, with the real kubectl against
//! `muster cluster` and the daemon: members sharing the claim their
//! PodGroup names land where its one device is, and the claim is reserved
//! for the PodGroup.

use muster::kwok::devices::DeviceTemplate;

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
