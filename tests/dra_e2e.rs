//! Dynamic Resource Allocation end to end, driven with the real kubectl
//! against `muster cluster` (its resourceclaim controller, claim-aware
//! kubelet and kwok-style DRA driver) and the Muster daemon: pods claiming
//! GPUs from a template with a CEL selector and a `matchAttribute`
//! constraint bind where their devices are, each device is allocated to one
//! claim, claims are reserved for their pods, a pod whose devices do not
//! exist stays pending naming the claim and what is free, and deleting a
//! pod frees its devices for the next; pods share a device that allows
//! multiple allocations while its capacity lasts.
//!
//! kubectl comes from $MUSTER_KUBECTL or `.tools/kubectl`, fetched with
//! `tests/support/fetch-tools.sh` when missing.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::{Api, DeleteParams, ListParams};
use muster::kwok::devices::DeviceTemplate;

use crate::common::kubectl::Kubectl;
use crate::e2e;

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

/// The simulated cluster of nodes from `template`, kubectl on it, and the
/// daemon (the directory holds kubectl's kubeconfig).
async fn start(
    template: muster::kwok::templates::NodeTemplate,
) -> (
    e2e::Env,
    Kubectl,
    muster::daemon::RunningDaemon,
    tempfile::TempDir,
) {
    let env = e2e::cluster(vec![template]).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    env.cluster.write_kubeconfig(&kubeconfig).unwrap();
    let k = Kubectl::new(kubeconfig);
    let daemon = e2e::daemon(&env, e2e::test_config("")).await;
    (env, k, daemon, dir)
}

/// A pod of ours with one claim entry, `source` naming its claim or template.
fn claiming_pod(name: &str, entry: &str, source: &str) -> String {
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
      claims: [{{name: {entry}}}]
  resourceClaims:
  - {{name: {entry}, {source}}}
"
    )
}

fn worker(name: &str) -> String {
    claiming_pod(name, "gpus", "resourceClaimTemplateName: two-gpus")
}

const BIG_CLAIM: &str = r#"
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: eight, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.kwok.muster.dev
        count: 8
        selectors:
        - cel: {expression: 'device.capacity["gpu.kwok.muster.dev"].memory.compareTo(quantity("80Gi")) >= 0'}
---
apiVersion: v1
kind: Pod
metadata: {name: big, namespace: default}
spec:
  schedulerName: muster
  containers:
  - {name: main, image: busybox, resources: {requests: {cpu: 100m}}}
  resourceClaims:
  - {name: gpus, resourceClaimName: eight}
"#;

fn devices_of(c: &ResourceClaim) -> Vec<(String, String)> {
    c.status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|r| (r.pool, r.device))
        .collect()
}

fn pcie_root(device: &str) -> usize {
    // Four devices over two roots: gpu-0, gpu-1 on pci0; gpu-2, gpu-3 on pci1.
    device
        .trim_start_matches("gpu-")
        .parse::<usize>()
        .expect("device index")
        / 2
}

/// Every bound pod's claim: allocated on its node, reserved for it, with
/// devices on one PCIe root; no device in two claims (I9).
async fn check_allocations(env: &e2e::Env, pods: &BTreeMap<String, Pod>) -> usize {
    let claims = e2e::claims(env).await;
    let mut seen = BTreeSet::new();
    let mut checked = 0;
    for (name, pod) in pods {
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else {
            continue;
        };
        let statuses = pod
            .status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.clone())
            .unwrap_or_default();
        let Some(claim_name) = statuses.first().and_then(|s| s.resource_claim_name.clone()) else {
            continue;
        };
        let claim = &claims[&claim_name];
        let status = claim.status.as_ref().expect("claim status");
        let reserved: Vec<_> = status
            .reserved_for
            .iter()
            .flatten()
            .map(|r| r.name.clone())
            .collect();
        assert!(
            reserved.len() == 1 && reserved[0] == *name,
            "{claim_name} reserved for its pod: {reserved:?}"
        );
        let devices = devices_of(claim);
        assert_eq!(devices.len(), 2, "{claim_name}: {devices:?}");
        for (pool, device) in &devices {
            assert_eq!(*pool, node, "{name}'s devices are on its node");
            assert!(
                seen.insert((pool.clone(), device.clone())),
                "{pool}/{device} allocated twice"
            );
        }
        assert_eq!(
            pcie_root(&devices[0].1),
            pcie_root(&devices[1].1),
            "matchAttribute pcieRoot: {devices:?}"
        );
        let allocation = status.allocation.as_ref().expect("allocation");
        let config = allocation
            .devices
            .as_ref()
            .and_then(|d| d.config.clone())
            .unwrap_or_default();
        assert_eq!(config.len(), 1, "the class's configuration is carried");
        assert_eq!(config[0].source, "FromClass");
        checked += 1;
    }
    checked
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_get_their_devices_and_give_them_back() {
    let mut template = e2e::nodes(3, "8");
    let mut devices = DeviceTemplate::with_count(4);
    devices.model = "h100".into();
    devices.memory = Some("80Gi".into());
    devices.pcie_roots = 2;
    template.devices = Some(devices);
    let (env, k, daemon, _dir) = start(template).await;

    k.apply(CLASS_AND_TEMPLATE).await;
    let slices = k.ok(&["get", "resourceslices"]).await;
    assert!(slices.contains(DRIVER), "{slices}");

    // Twelve GPUs, six pods of two: every one fits, each on one PCIe root.
    for i in 0..6 {
        k.apply(&worker(&format!("w{i}"))).await;
    }
    let pods = e2e::wait_pods(&env, "default", |p| {
        (0..6).all(|i| p.get(&format!("w{i}")).is_some_and(e2e::bound))
    })
    .await;
    assert_eq!(check_allocations(&env, &pods).await, 6);
    let listed = k.ok(&["get", "resourceclaims"]).await;
    assert!(listed.contains("allocated,reserved"), "{listed}");

    // No GPU left: the seventh waits, saying which claim and what is free.
    k.apply(&worker("w6")).await;
    let message = e2e::wait_pod_message(
        &env,
        "default",
        "w6",
        "request gpu: 2 device(s) of class gpu.kwok.muster.dev",
    )
    .await;
    assert!(
        message.contains("0/3 nodes are available: 3 cannot allocate claim default/w6-gpus")
            && message.contains("wanted, 0 free"),
        "{message}"
    );

    // Deleting a pod frees its devices (its claim goes with it): w6 binds.
    let api: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    api.delete("w0", &DeleteParams::default())
        .await
        .expect("delete w0");
    let pods = e2e::wait_pods(&env, "default", |p| {
        !p.contains_key("w0") && p.get("w6").is_some_and(e2e::bound)
    })
    .await;
    assert_eq!(check_allocations(&env, &pods).await, 6);

    // Eight GPUs on one node exist nowhere: pending, with the shortfall.
    k.apply(BIG_CLAIM).await;
    let pods = e2e::wait_pods(&env, "default", |p| {
        p.get("big")
            .and_then(e2e::pod_condition_message)
            .is_some_and(|m| m.contains("cannot allocate claim default/eight"))
    })
    .await;
    let message = e2e::pod_condition_message(&pods["big"]).unwrap();
    assert!(
        message.contains("8 device(s) of class gpu.kwok.muster.dev where device.capacity"),
        "{message}"
    );
    assert!(!e2e::bound(&pods["big"]));
    let events = k
        .ok(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=big",
        ])
        .await;
    assert!(
        events.contains("FailedScheduling") && events.contains("pod/big"),
        "{events}"
    );
    // What the daemon says of it: allocations counted, objects observed.
    // (Metrics are published once a second; the wait is on their content.)
    let scrape = async {
        loop {
            let (_, text) = e2e::http_get(daemon.http_addr, "/metrics").await;
            if e2e::metric(&text, "muster_dra_allocations_total{result=\"reserved\"}")
                .is_some_and(|n| n >= 7.0)
            {
                break text;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    };
    let text = tokio::time::timeout(e2e::HANG_GUARD, scrape)
        .await
        .expect("allocations counted before the hang guard");
    assert_eq!(
        e2e::metric(&text, "muster_dra_objects{kind=\"resourceslices\"}"),
        Some(3.0),
        "{text}"
    );
    let (_, debug) = e2e::http_get(daemon.http_addr, "/debug/queue").await;
    assert!(debug.contains("devices: 3 slices, 1 classes"), "{debug}");
    daemon.shutdown().await.expect("clean shutdown");
}

/// The shapes of the DRA example driver's demos, written for a cluster
/// whose driver is `gpu.example.com` (the class its chart installs): pods
/// each with a claim from a template, one claim shared by two pods (both
/// land where its device is, and it is reserved for both), a request with
/// CEL selectors on an attribute and a capacity, and a DeviceTaintRule
/// keeping allocations off a tainted node's devices.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_driver_shapes_schedule() {
    let mut template = e2e::nodes(2, "8");
    let mut devices = DeviceTemplate::with_count(2);
    devices.driver = "gpu.example.com".into();
    devices.model = "LATEST-GPU-MODEL".into();
    devices.memory = Some("80Gi".into());
    template.devices = Some(devices);
    let (env, k, daemon, _dir) = start(template).await;
    k.apply(
        r#"
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors:
  - cel: {expression: "device.driver == 'gpu.example.com'"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: single-gpu, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.example.com}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: single-gpu-cel, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.example.com
          selectors:
          - cel: {expression: "device.attributes['gpu.example.com'].model == 'LATEST-GPU-MODEL'"}
          - cel: {expression: "device.capacity['gpu.example.com'].memory.compareTo(quantity('4Gi')) >= 0"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared-gpu, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.example.com}
---
apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata: {name: node-0-maintenance}
spec:
  deviceSelector: {driver: gpu.example.com, pool: sim-node-0}
  taint: {key: maintenance, effect: NoSchedule}
"#,
    )
    .await;
    // sim-node-0's devices are tainted: everything lands on sim-node-1's two.
    k.apply(&claiming_pod(
        "tmpl",
        "gpu",
        "resourceClaimTemplateName: single-gpu",
    ))
    .await;
    k.apply(&claiming_pod(
        "cel",
        "gpu",
        "resourceClaimTemplateName: single-gpu-cel",
    ))
    .await;
    let pods = e2e::wait_pods(&env, "default", |p| {
        ["tmpl", "cel"]
            .iter()
            .all(|n| p.get(*n).is_some_and(e2e::bound))
    })
    .await;
    for name in ["tmpl", "cel"] {
        let node = pods[name].spec.as_ref().and_then(|s| s.node_name.clone());
        assert_eq!(node.as_deref(), Some("sim-node-1"), "{name}");
    }
    // No device is left: the shared claim's pods wait, naming it.
    k.apply(&claiming_pod(
        "share-0",
        "shared",
        "resourceClaimName: shared-gpu",
    ))
    .await;
    e2e::wait_pods(&env, "default", |p| {
        p.get("share-0")
            .and_then(e2e::pod_condition_message)
            .is_some_and(|m| m.contains("cannot allocate claim default/shared-gpu"))
    })
    .await;
    // The maintenance is over: both sharers land where the claim's device is.
    k.ok(&["delete", "devicetaintrule", "node-0-maintenance"])
        .await;
    k.apply(&claiming_pod(
        "share-1",
        "shared",
        "resourceClaimName: shared-gpu",
    ))
    .await;
    let pods = e2e::wait_pods(&env, "default", |p| {
        ["share-0", "share-1"]
            .iter()
            .all(|n| p.get(*n).is_some_and(e2e::bound))
    })
    .await;
    let on = |n: &str| pods[n].spec.as_ref().and_then(|s| s.node_name.clone());
    assert_eq!(on("share-0"), Some("sim-node-0".to_string()));
    assert_eq!(on("share-1"), on("share-0"));
    let shared = &e2e::claims(&env).await["shared-gpu"];
    let reserved: BTreeSet<String> = shared
        .status
        .iter()
        .flat_map(|s| s.reserved_for.iter().flatten())
        .map(|r| r.name.clone())
        .collect();
    assert_eq!(
        reserved,
        BTreeSet::from(["share-0".to_string(), "share-1".to_string()])
    );
    daemon.shutdown().await.expect("clean shutdown");
}

/// Watches the claim `name` until `done` holds for it (None: absent).
async fn wait_claim<F>(env: &e2e::Env, name: &str, mut done: F) -> Option<ResourceClaim>
where
    F: FnMut(Option<&ResourceClaim>) -> bool,
{
    let api: Api<ResourceClaim> = Api::namespaced(env.client.clone(), "default");
    let config = kube::runtime::watcher::Config::default().fields(&format!("metadata.name={name}"));
    e2e::wait_objects(api, config, |all| done(all.get(name)))
        .await
        .remove(name)
}

/// A claim deleted after PreBind recorded its allocation and the pod's
/// reservation, while the binding is still in flight: the delete-protection
/// finalizer the scheduler put on the claim when it allocated it keeps the
/// claim (allocated, reserved) while the pod it was bound with holds it, so
/// its devices are not given to another claim under a running pod; once the
/// pod is gone the claim is deallocated and goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_deleted_while_its_pod_binds_is_kept_until_the_pod_is_gone() {
    let mut template = e2e::nodes(1, "8");
    template.devices = Some(DeviceTemplate::with_count(1));
    let (env, k, daemon, _dir) = start(template).await;
    // The binding is delayed: the claim is deleted in between.
    env.cluster.set_faults(vec![
        "resource=pods/binding,latency-ms=2000"
            .parse()
            .expect("fault rule"),
    ]);
    k.apply(CLASS_AND_TEMPLATE).await;
    k.apply(&claiming_pod("w0", "gpu", "resourceClaimName: one"))
        .await;
    k.apply(
        r#"
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: one, namespace: default}
spec:
  devices:
    requests:
    - {name: gpu, exactly: {deviceClassName: gpu.kwok.muster.dev}}
"#,
    )
    .await;
    let pods = e2e::wait_pods(&env, "default", |p| p.contains_key("w0")).await;
    let uid = pods["w0"].metadata.uid.clone().expect("uid");
    let reserved = |c: &ResourceClaim| {
        c.status
            .as_ref()
            .and_then(|s| s.reserved_for.as_ref())
            .is_some_and(|r| r.iter().any(|r| r.uid == uid))
    };
    let claim = wait_claim(&env, "one", |c| c.is_some_and(reserved))
        .await
        .expect("the claim");
    assert_eq!(
        claim.metadata.finalizers.as_deref(),
        Some(&["resource.kubernetes.io/delete-protection".to_string()][..]),
        "allocating the claim protects it"
    );
    let api: Api<ResourceClaim> = Api::namespaced(env.client.clone(), "default");
    api.delete("one", &DeleteParams::default())
        .await
        .expect("delete claim");
    e2e::wait_pods(&env, "default", |p| p.get("w0").is_some_and(e2e::bound)).await;
    env.cluster.set_faults(Vec::new());
    let kept = api.get("one").await.expect("the claim is kept");
    assert!(kept.metadata.deletion_timestamp.is_some());
    assert!(reserved(&kept), "still reserved for w0");
    assert_eq!(devices_of(&kept).len(), 1, "still allocated");
    Api::<Pod>::namespaced(env.client.clone(), "default")
        .delete("w0", &DeleteParams::default())
        .await
        .expect("delete w0");
    wait_claim(&env, "one", |c| c.is_none()).await;
    daemon.shutdown().await.expect("clean shutdown");
}

/// A claim being deleted while reserved for a pod that is pending (here
/// written so by the test, as a binding that failed after its claim
/// writes leaves it when taking the pod out fails too): the resourceclaim
/// controller keeps a live pod's reservation, so only the scheduler can
/// release it. It takes the pod out of `reservedFor`; the controller then
/// deallocates the claim and removes its finalizer, and the claim goes.
/// The pod is not bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_being_deleted_is_released_by_its_pending_pod() {
    let mut template = e2e::nodes(1, "8");
    template.devices = Some(DeviceTemplate::with_count(1));
    let (env, k, daemon, _dir) = start(template).await;
    k.apply(CLASS_AND_TEMPLATE).await;
    k.apply(
        r#"
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: one
  namespace: default
  finalizers: [resource.kubernetes.io/delete-protection]
spec:
  devices:
    requests:
    - {name: gpu, exactly: {deviceClassName: gpu.kwok.muster.dev}}
"#,
    )
    .await;
    // Pending for good: no node has the label.
    k.apply(
        &claiming_pod("w0", "gpu", "resourceClaimName: one")
            .replace("spec:\n", "spec:\n  nodeSelector: {kind: nowhere}\n"),
    )
    .await;
    let pods = e2e::wait_pods(&env, "default", |p| p.contains_key("w0")).await;
    let uid = pods["w0"].metadata.uid.clone().expect("uid");
    let node = kube::Api::<k8s_openapi::api::core::v1::Node>::all(env.client.clone())
        .list(&ListParams::default())
        .await
        .expect("nodes")
        .items[0]
        .metadata
        .name
        .clone()
        .expect("node name");
    let api: Api<ResourceClaim> = Api::namespaced(env.client.clone(), "default");
    let status = serde_json::json!({"status": {
        "allocation": {"devices": {"results": [
            {"request": "gpu", "driver": DRIVER, "pool": node, "device": "gpu-0"}]}},
        "reservedFor": [{"resource": "pods", "name": "w0", "uid": uid}],
    }});
    api.patch_status(
        "one",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(status),
    )
    .await
    .expect("claim status");
    api.delete("one", &DeleteParams::default())
        .await
        .expect("delete claim");
    wait_claim(&env, "one", |c| c.is_none()).await;
    let w0 = Api::<Pod>::namespaced(env.client.clone(), "default")
        .get("w0")
        .await
        .expect("w0");
    assert!(!e2e::bound(&w0), "w0 is not bound");
    daemon.shutdown().await.expect("clean shutdown");
}

const NIC_CLASS_AND_CLAIM: &str = r#"
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: nic.kwok.muster.dev}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.kwok.muster.dev" && device.allowMultipleAllocations'}
"#;

/// A pod with a claim of its own for `amount` of a shared NIC's bandwidth.
fn nic_pod(name: &str, amount: &str) -> String {
    format!(
        r#"
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: {name}-net, namespace: default}}
spec:
  devices:
    requests:
    - name: net
      exactly:
        deviceClassName: nic.kwok.muster.dev
        capacity: {{requests: {{bandwidth: {amount}}}}}
---
{}"#,
        claiming_pod(name, "net", &format!("resourceClaimName: {name}-net"))
    )
}

/// Consumable capacity: pods share one NIC while its bandwidth lasts, each
/// share recorded with its ID and what it consumes (rounded up to a step);
/// the pod that would overcommit it waits, saying so, and binds once a
/// share is given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_share_a_device_by_its_capacity() {
    let mut template = e2e::nodes(1, "8");
    let mut devices = DeviceTemplate::with_count(1);
    devices.shared = Some(muster::kwok::devices::Shared::nic("100G", "10G", "10G"));
    template.devices = Some(devices);
    let (env, k, _daemon, _dir) = start(template).await;
    k.apply(NIC_CLASS_AND_CLAIM).await;

    // 45G rounds up to 50G: two such shares fill the NIC.
    k.apply(&nic_pod("a", "45G")).await;
    k.apply(&nic_pod("b", "50G")).await;
    let pods = e2e::wait_pods(&env, "default", |p| {
        ["a", "b"].iter().all(|n| p.get(*n).is_some_and(e2e::bound))
    })
    .await;
    let all = e2e::claims(&env).await;
    let mut shares = BTreeSet::new();
    for name in ["a-net", "b-net"] {
        let r = &all[name]
            .status
            .as_ref()
            .and_then(|s| s.allocation.as_ref())
            .and_then(|a| a.devices.as_ref())
            .and_then(|d| d.results.clone())
            .expect("allocated")[0];
        assert!(r.device.starts_with("nic-"), "{r:?}");
        let consumed = r.consumed_capacity.as_ref().expect("consumedCapacity");
        assert_eq!(consumed["bandwidth"].0, "50000000000", "{consumed:?}");
        shares.insert(r.share_id.clone().expect("shareID"));
    }
    assert_eq!(shares.len(), 2, "two shares of one device");
    assert!(
        pods.values()
            .all(|p| p.spec.as_ref().unwrap().node_name.is_some())
    );

    // A third share would overcommit the NIC: it waits, and says why.
    k.apply(&nic_pod("c", "10G")).await;
    let pods = e2e::wait_pods(&env, "default", |p| {
        p.get("c")
            .and_then(e2e::pod_condition_message)
            .is_some_and(|m| m.contains("without the capacity requested left"))
    })
    .await;
    assert!(!e2e::bound(&pods["c"]));

    // One share given back: the third pod takes its place.
    let api: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    api.delete("a", &DeleteParams::default())
        .await
        .expect("delete a");
    e2e::wait_pods(&env, "default", |p| p.get("c").is_some_and(e2e::bound)).await;
}
