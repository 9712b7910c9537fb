//! Dynamic Resource Allocation on a real Kubernetes 1.37 control plane
//! (tests/real_cluster): two kwok nodes, only one of which publishes GPUs
//! in a ResourceSlice; pods claim two GPUs each from a ResourceClaimTemplate,
//! the real resourceclaim controller generates their claims, and Muster
//! binds them where the devices are, each claim allocated (devices on one
//! PCIe root, the class's configuration carried) and reserved for its pod.

use std::collections::BTreeSet;

use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::Api;
use serde_json::json;

use crate::real_cluster as rc;

const GUARD: std::time::Duration = std::time::Duration::from_secs(30);

const DRIVER: &str = "gpu.kwok.muster.dev";

const CLASS_AND_TEMPLATE: &str = r#"
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.kwok.muster.dev}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.kwok.muster.dev"'}
  config:
  - opaque:
      driver: gpu.kwok.muster.dev
      parameters: {sharing: exclusive}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: two-gpus, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.kwok.muster.dev
          count: 2
          selectors:
          - cel: {expression: 'device.attributes["gpu.kwok.muster.dev"].model == "h100" && device.capacity["gpu.kwok.muster.dev"].memory.compareTo(quantity("40Gi")) >= 0'}
      constraints:
      - matchAttribute: gpu.kwok.muster.dev/pcieRoot
"#;

/// A pod claiming two GPUs from the template.
fn worker(name: &str) -> String {
    format!(
        "
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  schedulerName: muster
  containers:
  - name: main
    image: busybox
    resources:
      requests: {{cpu: 100m}}
      claims: [{{name: gpus}}]
  resourceClaims:
  - {{name: gpus, resourceClaimTemplateName: two-gpus}}
---
"
    )
}

/// The node-local slice of `node`: four H100s of 80Gi, two per PCIe root.
fn slice(node: &str) -> serde_json::Value {
    let devices: Vec<_> = (0..4)
        .map(|i| {
            json!({
                "name": format!("gpu-{i}"),
                "attributes": {
                    "model": {"string": "h100"},
                    "index": {"int": i},
                    "pcieRoot": {"string": format!("pci{}", i / 2)}
                },
                "capacity": {"memory": {"value": "80Gi"}}
            })
        })
        .collect();
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": format!("{node}-{DRIVER}")},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_claims_from_a_template_are_allocated_and_reserved_where_the_devices_are() {
    let env = rc::cluster(vec![rc::nodes(2, "8")]).await;
    let k = rc::kubectl(&env);
    // Only sim-node-1 has GPUs.
    rc::create_object(
        &env,
        &rc::resource("resource.k8s.io", "v1", "ResourceSlice", "resourceslices"),
        None,
        slice("sim-node-1"),
    )
    .await;
    k.apply(CLASS_AND_TEMPLATE).await;
    let d = rc::daemon(&env, rc::test_config("")).await;
    rc::wait_ready(&d).await;
    k.apply(&(worker("w-0") + &worker("w-1"))).await;

    let pods = rc::wait_pods_or_describe(&env, "default", GUARD, |p| {
        rc::names_bound(p, "w-").len() == 2
    })
    .await;
    let claims: Api<ResourceClaim> = Api::namespaced(env.client.clone(), "default");
    let mut seen = BTreeSet::new();
    for (name, pod) in &pods {
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        assert_eq!(
            node.as_deref(),
            Some("sim-node-1"),
            "{name} is where the GPUs are"
        );
        // The claim the resourceclaim controller generated for the pod.
        let statuses = pod
            .status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.clone())
            .unwrap_or_default();
        assert_eq!(statuses.len(), 1, "{name}: {statuses:?}");
        assert_eq!(statuses[0].name, "gpus");
        let claim_name = statuses[0]
            .resource_claim_name
            .clone()
            .unwrap_or_else(|| panic!("{name} has a generated claim: {statuses:?}"));
        let claim = claims.get(&claim_name).await.expect("get claim");
        let owner = claim
            .metadata
            .owner_references
            .as_ref()
            .and_then(|o| o.first())
            .map(|o| (o.kind.clone(), o.name.clone()));
        assert_eq!(owner, Some(("Pod".into(), name.clone())), "{claim_name}");
        let status = claim.status.as_ref().expect("claim status");
        let reserved: Vec<_> = status
            .reserved_for
            .iter()
            .flatten()
            .map(|r| (r.resource.clone(), r.name.clone(), r.uid.clone()))
            .collect();
        assert_eq!(
            reserved,
            [(
                "pods".to_string(),
                name.clone(),
                pod.metadata.uid.clone().unwrap_or_default()
            )],
            "{claim_name} reserved for its pod"
        );
        let allocation = status.allocation.as_ref().expect("allocation");
        let results = allocation
            .devices
            .as_ref()
            .and_then(|d| d.results.clone())
            .unwrap_or_default();
        assert_eq!(results.len(), 2, "{claim_name}: {results:?}");
        let roots: BTreeSet<_> = results
            .iter()
            .map(|r| {
                assert_eq!((r.driver.as_str(), r.pool.as_str()), (DRIVER, "sim-node-1"));
                assert_eq!(r.request, "gpu");
                assert!(
                    seen.insert(r.device.clone()),
                    "{} allocated twice",
                    r.device
                );
                r.device
                    .trim_start_matches("gpu-")
                    .parse::<usize>()
                    .expect("index")
                    / 2
            })
            .collect();
        assert_eq!(roots.len(), 1, "matchAttribute pcieRoot: {results:?}");
        let config = allocation
            .devices
            .as_ref()
            .and_then(|d| d.config.clone())
            .unwrap_or_default();
        assert_eq!(config.len(), 1, "the class's configuration is carried");
        assert_eq!(config[0].source, "FromClass");
        let selector = serde_json::to_value(&allocation.node_selector).expect("selector json");
        assert!(
            selector.to_string().contains("sim-node-1"),
            "allocation limited to the node: {selector}"
        );
    }
    assert_eq!(seen.len(), 4, "every GPU allocated once");
    rc::wait_pods_or_describe(&env, "default", GUARD, |p| {
        p.len() == 2 && p.values().all(rc::running)
    })
    .await;
    d.shutdown().await.expect("daemon stops");
}
