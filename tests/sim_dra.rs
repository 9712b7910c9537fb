//! Dynamic Resource Allocation (`resource.k8s.io`) on the simulated
//! cluster, driven over HTTP with kube-rs and the real kubectl v1.37: the
//! five kinds served in v1 and v1beta2 from one storage, admission
//! validation answering 422 with field paths (CEL selectors compiled), the
//! ResourceClaim table, spec immutability and the `/status` subresource,
//! the resourceclaim controller (claims from templates, released
//! reservations, deallocation, claims deleted with their pod) and the
//! kubelet starting a pod only once its claims are allocated and reserved,
//! and the kwok-style DRA driver publishing the slices of template nodes.
//!
//! kubectl comes from $MUSTER_KUBECTL or `.tools/kubectl`, fetched with
//! `tests/support/fetch-tools.sh` when missing.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::await_condition;
use serde_json::{Value, json};

use crate::common::kubectl::Kubectl;
use crate::common::{self, bind, dynamic, resource};

/// A hang guard, not a synchronization.
const HANG_GUARD: Duration = Duration::from_secs(20);

async fn wait_for<K, F>(api: &Api<K>, name: &str, cond: F) -> Option<K>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
    F: Fn(Option<&K>) -> bool,
{
    tokio::time::timeout(HANG_GUARD, await_condition(api.clone(), name, cond))
        .await
        .expect("condition reached before the hang guard")
        .expect("watch")
}

const CLAIM_V1BETA2: &str = r#"
apiVersion: resource.k8s.io/v1beta2
kind: ResourceClaim
metadata: {name: gpus, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.kwok.muster.dev
        count: 2
        selectors:
        - cel: {expression: 'device.attributes["gpu.kwok.muster.dev"].model == "h100"'}
"#;

fn allocated_for(pod: &Pod) -> Value {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    json!({"status": {
        "allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.kwok.muster.dev", "pool": "sim-node-0", "device": "gpu-0"},
            {"request": "gpu", "driver": "gpu.kwok.muster.dev", "pool": "sim-node-0", "device": "gpu-1"}]}},
        "reservedFor": [{"resource": "pods", "name": name, "uid": uid}]}})
}

/// Writes `allocated_for(pod)` to the claim's status, as a scheduler would.
async fn allocate_to(claims: &Api<ResourceClaim>, claim: &str, pod: &Pod) {
    claims
        .patch_status(
            claim,
            &PatchParams::default(),
            &Patch::Merge(allocated_for(pod)),
        )
        .await
        .expect("claim status written");
}

#[tokio::test]
async fn kinds_are_served_in_both_versions_and_printed() {
    let (cluster, client) = common::start(common::fast()).await;
    let kubectl = Kubectl::for_cluster(&cluster);
    let kinds = kubectl
        .ok(&["api-resources", "--api-group=resource.k8s.io", "-o", "name"])
        .await;
    for plural in [
        "deviceclasses",
        "resourceclaims",
        "resourceclaimtemplates",
        "resourceslices",
        "devicetaintrules",
    ] {
        assert!(
            kinds.contains(&format!("{plural}.resource.k8s.io")),
            "{kinds}"
        );
    }
    kubectl.apply(CLAIM_V1BETA2).await;
    // One object, read in v1 with the typed API and in v1beta2.
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), "default");
    let claim = claims.get("gpus").await.expect("v1 read");
    let request = &claim
        .spec
        .as_ref()
        .unwrap()
        .devices
        .as_ref()
        .unwrap()
        .requests
        .as_ref()
        .unwrap()[0];
    let exactly = request.exactly.as_ref().unwrap();
    assert_eq!(exactly.count, Some(2));
    assert_eq!(exactly.allocation_mode.as_deref(), Some("ExactCount"));
    let beta = dynamic(
        &client,
        &resource(
            "resource.k8s.io",
            "v1beta2",
            "ResourceClaim",
            "resourceclaims",
        ),
        Some("default"),
    );
    let b = beta.get("gpus").await.expect("v1beta2 read");
    assert_eq!(b.types.unwrap().api_version, "resource.k8s.io/v1beta2");
    assert_eq!(b.metadata.uid, claim.metadata.uid);

    let table = kubectl.ok(&["get", "resourceclaims"]).await;
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "STATE", "AGE"]);
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(row[..2], ["gpus", "pending"]);

    // The spec cannot change (a replace with the same spec, without the
    // defaults the server filled in, is no change); the status can,
    // through /status.
    kubectl
        .ok_with(&["replace", "-f", "-"], CLAIM_V1BETA2)
        .await;
    let changed = kubectl
        .fails(&[
            "patch",
            "resourceclaim",
            "gpus",
            "--type=merge",
            "-p",
            r#"{"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"other"}}]}}}"#,
        ])
        .await;
    assert!(changed.contains("field is immutable"), "{changed}");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "user"},
        "spec": {"containers": [{"name": "c", "image": "x"}]}}))
    .unwrap();
    let pod = pods.create(&PostParams::default(), &pod).await.unwrap();
    allocate_to(&claims, "gpus", &pod).await;
    let row = kubectl
        .ok(&["get", "resourceclaim", "gpus", "--no-headers"])
        .await;
    assert!(row.contains("allocated,reserved"), "{row}");
    let unallocated = json!({"status": {"allocation": null}});
    match claims
        .patch_status("gpus", &PatchParams::default(), &Patch::Merge(unallocated))
        .await
    {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 422);
            assert!(
                s.message.contains("status.reservedFor: Forbidden"),
                "{}",
                s.message
            );
        }
        other => panic!("expected 422, got {other:?}"),
    }

    let slices = "
apiVersion: resource.k8s.io/v1beta2
kind: ResourceSlice
metadata: {name: n0-gpu}
spec:
  driver: gpu.kwok.muster.dev
  nodeName: n0
  pool: {name: n0, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    attributes: {model: {string: h100}}
    capacity: {memory: {value: 80Gi}}
";
    kubectl.apply(slices).await;
    let table = kubectl.ok(&["get", "resourceslices"]).await;
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "NODE", "DRIVER", "POOL", "AGE"]);
    assert!(table.contains("gpu.kwok.muster.dev"), "{table}");
}

#[tokio::test]
async fn invalid_objects_are_422_with_the_field() {
    let (cluster, client) = common::start(common::fast()).await;
    let kubectl = Kubectl::for_cluster(&cluster);
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), "default");
    let bad: ResourceClaim = serde_json::from_value(json!({
        "metadata": {"name": "bad"},
        "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "c",
                "selectors": [{"cel": {"expression": "device.driver =="}}]}},
            {"name": "gpu", "exactly": {"deviceClassName": "c", "count": 0}}]}}}))
    .unwrap();
    match claims.create(&PostParams::default(), &bad).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
            let text = s.message;
            for field in [
                "spec.devices.requests[0].exactly.selectors[0].cel.expression",
                "spec.devices.requests[1].name: Duplicate value",
                "spec.devices.requests[1].exactly.count",
            ] {
                assert!(text.contains(field), "{field} in {text}");
            }
        }
        other => panic!("expected 422, got {other:?}"),
    }
    // Admin access needs the namespace's consent.
    let admin: ResourceClaim = serde_json::from_value(json!({
        "metadata": {"name": "admin"},
        "spec": {"devices": {"requests": [
            {"name": "all", "exactly": {"deviceClassName": "c", "allocationMode": "All", "adminAccess": true}}]}}}))
    .unwrap();
    let (status, _) = common::code(claims.create(&PostParams::default(), &admin).await);
    assert_eq!(status, 422);
    kubectl
        .ok(&[
            "label",
            "namespace",
            "default",
            "resource.kubernetes.io/admin-access=true",
        ])
        .await;
    claims
        .create(&PostParams::default(), &admin)
        .await
        .expect("admin access in a consenting namespace");

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "t"}],
                 "containers": [{"name": "c", "image": "x",
                                 "resources": {"claims": [{"name": "nics"}]}}]}}))
    .unwrap();
    match pods.create(&PostParams::default(), &pod).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 422);
            assert!(
                s.message
                    .contains("spec.containers[0].resources.claims[0].name: Not found: \"nics\""),
                "{}",
                s.message
            );
        }
        other => panic!("expected 422, got {other:?}"),
    }
    let slice = "
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s}
spec:
  driver: gpu.kwok.muster.dev
  nodeName: n0
  allNodes: true
  pool: {name: n0, generation: 0, resourceSliceCount: 1}
";
    let err = kubectl.fails_with(&["apply", "-f", "-"], slice).await;
    assert!(err.contains("exactly one of `nodeName`"), "{err}");
    let class = "
apiVersion: resource.k8s.io/v1beta2
kind: DeviceClass
metadata: {name: c}
spec:
  selectors:
  - cel: {expression: 'gpu.model == 1'}
";
    let err = kubectl.fails_with(&["apply", "-f", "-"], class).await;
    assert!(
        err.contains("spec.selectors[0].cel.expression") && err.contains("undeclared reference"),
        "{err}"
    );
}

const TEMPLATE: &str = r#"
apiVersion: resource.k8s.io/v1beta2
kind: ResourceClaimTemplate
metadata: {name: two-gpus, namespace: default}
spec:
  metadata:
    labels: {team: ml}
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.kwok.muster.dev, count: 2}
"#;

#[tokio::test]
async fn a_pod_starts_once_its_template_claim_is_allocated_and_reserved() {
    let (cluster, client) = common::start(common::fast().with_nodes(1)).await;
    let kubectl = Kubectl::for_cluster(&cluster);
    kubectl.apply(TEMPLATE).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "train"},
        "spec": {"resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "two-gpus"}],
                 "containers": [{"name": "main", "image": "x",
                                 "resources": {"claims": [{"name": "gpus"}]}}]}}))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let pod = wait_for(&pods, "train", |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref())
            .and_then(|s| s.resource_claim_statuses.as_ref())
            .is_some_and(|s| !s.is_empty())
    })
    .await
    .unwrap();
    let entry = &pod
        .status
        .as_ref()
        .unwrap()
        .resource_claim_statuses
        .as_ref()
        .unwrap()[0];
    assert_eq!(entry.name, "gpus");
    let claim_name = entry.resource_claim_name.clone().unwrap();
    assert!(claim_name.starts_with("train-gpus-"), "{claim_name}");
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), "default");
    let claim = claims.get(&claim_name).await.unwrap();
    let owner = &claim.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.controller), ("Pod", Some(true)));
    assert_eq!(Some(&owner.uid), pod.metadata.uid.as_ref());
    assert_eq!(
        claim.metadata.annotations.as_ref().unwrap()["resource.kubernetes.io/pod-claim-name"],
        "gpus"
    );
    assert_eq!(claim.metadata.labels.as_ref().unwrap()["team"], "ml");

    // Bound but not allocated: Pending, its containers being created.
    bind(&pods, "train", "sim-node-0").await.unwrap();
    let waiting = wait_for(&pods, "train", |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref())
            .and_then(|s| s.container_statuses.as_ref())
            .is_some_and(|cs| {
                cs.iter().any(|c| {
                    c.state
                        .as_ref()
                        .and_then(|s| s.waiting.as_ref())
                        .and_then(|w| w.reason.as_deref())
                        == Some("ContainerCreating")
                })
            })
    })
    .await
    .unwrap();
    assert_eq!(waiting.status.unwrap().phase.as_deref(), Some("Pending"));
    let row = kubectl.ok(&["get", "pod", "train", "--no-headers"]).await;
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[..3], ["train", "0/1", "ContainerCreating"], "{row}");

    // Allocated and reserved: Running, with its devices.
    claims
        .patch_status(
            &claim_name,
            &PatchParams::default(),
            &Patch::Merge(allocated_for(&pod)),
        )
        .await
        .unwrap();
    let running = wait_for(&pods, "train", |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref())
            .and_then(|s| s.phase.as_deref())
            == Some("Running")
    })
    .await
    .unwrap();
    let status = &running.status.unwrap().container_statuses.unwrap()[0];
    let devices = &status.allocated_resources_status.as_ref().unwrap()[0];
    assert_eq!(devices.name, "claim:gpus/gpu");
    let ids: Vec<&str> = devices
        .resources
        .iter()
        .flatten()
        .map(|r| r.resource_id.as_str())
        .collect();
    assert_eq!(
        ids,
        [
            "gpu.kwok.muster.dev/sim-node-0/gpu-0",
            "gpu.kwok.muster.dev/sim-node-0/gpu-1"
        ]
    );

    // The pod goes, and its claim with it.
    pods.delete("train", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    wait_for(&claims, &claim_name, |c: Option<&ResourceClaim>| {
        c.is_none()
    })
    .await;
}

#[tokio::test]
async fn reservations_of_gone_pods_are_released_and_claims_deallocated() {
    let (cluster, client) = common::start(common::fast()).await;
    let kubectl = Kubectl::for_cluster(&cluster);
    kubectl.apply(CLAIM_V1BETA2).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "user"},
        "spec": {"resourceClaims": [{"name": "gpus", "resourceClaimName": "gpus"}],
                 "containers": [{"name": "c", "image": "x"}]}}))
    .unwrap();
    let pod = pods.create(&PostParams::default(), &pod).await.unwrap();
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), "default");
    let protected =
        json!({"metadata": {"finalizers": ["resource.kubernetes.io/delete-protection"]}});
    claims
        .patch("gpus", &PatchParams::default(), &Patch::Merge(protected))
        .await
        .unwrap();
    allocate_to(&claims, "gpus", &pod).await;
    pods.delete("user", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let claim = wait_for(&claims, "gpus", |c: Option<&ResourceClaim>| {
        c.and_then(|c| c.status.as_ref())
            .is_some_and(|s| s.allocation.is_none() && s.reserved_for.is_none())
    })
    .await
    .unwrap();
    // Deallocated: the scheduler's protection is gone; a claim not made
    // for a pod stays.
    assert!(claim.metadata.finalizers.unwrap_or_default().is_empty());
    let row = kubectl
        .ok(&["get", "resourceclaim", "gpus", "--no-headers"])
        .await;
    assert!(row.contains("pending"), "{row}");
    // A template is a plain namespaced object.
    kubectl.apply(TEMPLATE).await;
    let templates: Api<ResourceClaimTemplate> = Api::namespaced(client, "default");
    let t = templates.get("two-gpus").await.unwrap();
    let req = &t
        .spec
        .unwrap()
        .spec
        .unwrap()
        .devices
        .unwrap()
        .requests
        .unwrap()[0];
    assert_eq!(req.exactly.as_ref().unwrap().count, Some(2));
}

/// Nodes whose template declares devices get their ResourceSlices from
/// the kwok-style driver; a node's slice goes with it, a clique's with its
/// last node.
#[tokio::test]
async fn the_kwok_driver_publishes_slices_per_node_and_clique() {
    use k8s_openapi::api::core::v1::Node;
    use k8s_openapi::api::resource::v1::ResourceSlice;

    let templates = muster::kwok::templates::parse(
        "namePrefix: gpu
count: 2
topology: {hostsPerRack: 2}
devices: {count: 4, model: h100, memory: 80Gi, pcieRoots: 2, multiNode: {count: 1, model: nvswitch}}
",
    )
    .expect("template");
    let (cluster, client) = common::start(common::fast().with_templates(templates)).await;
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    let slice = wait_for(
        &slices,
        "gpu-0-gpu.kwok.muster.dev",
        |s: Option<&ResourceSlice>| s.is_some(),
    )
    .await
    .unwrap();
    assert_eq!(slice.spec.node_name.as_deref(), Some("gpu-0"));
    assert_eq!(slice.spec.pool.name, "gpu-0");
    let devices = slice.spec.devices.unwrap();
    assert_eq!(devices.len(), 4);
    let attrs = devices[3].attributes.as_ref().unwrap();
    assert_eq!(attrs["model"].string.as_deref(), Some("h100"));
    assert_eq!(attrs["index"].int, Some(3));
    assert_eq!(attrs["pcieRoot"].string.as_deref(), Some("pci1"));
    assert_eq!(attrs["clique"].string.as_deref(), Some("rack-0"));
    assert_eq!(
        devices[0].capacity.as_ref().unwrap()["memory"].value.0,
        "80Gi"
    );
    let owner = &slice.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Node", "gpu-0")
    );

    let clique = wait_for(
        &slices,
        "clique-rack-0-gpu.kwok.muster.dev",
        |s: Option<&ResourceSlice>| s.is_some(),
    )
    .await
    .unwrap();
    let selector = clique.spec.node_selector.unwrap();
    let expr = &selector.node_selector_terms[0]
        .match_expressions
        .as_ref()
        .unwrap()[0];
    assert_eq!(expr.key, "topology.muster.dev/rack");
    assert_eq!(expr.values.as_deref(), Some(&["rack-0".to_string()][..]));

    let kubectl = Kubectl::for_cluster(&cluster);
    let table = kubectl.ok(&["get", "resourceslices"]).await;
    let row: Vec<&str> = table
        .lines()
        .find(|l| l.starts_with("gpu-1-"))
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        row[..4],
        [
            "gpu-1-gpu.kwok.muster.dev",
            "gpu-1",
            "gpu.kwok.muster.dev",
            "gpu-1"
        ],
        "{table}"
    );

    // A node's slice goes with it; the clique's stays while a node remains.
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .delete("gpu-0", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        &slices,
        "gpu-0-gpu.kwok.muster.dev",
        |s: Option<&ResourceSlice>| s.is_none(),
    )
    .await;
    assert!(
        slices
            .get_opt("clique-rack-0-gpu.kwok.muster.dev")
            .await
            .unwrap()
            .is_some()
    );
    nodes
        .delete("gpu-1", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        &slices,
        "clique-rack-0-gpu.kwok.muster.dev",
        |s: Option<&ResourceSlice>| s.is_none(),
    )
    .await;
}

/// Two pods share one claim: each starts once the claim is reserved for
/// it, not before, whatever the other does.
#[tokio::test]
async fn a_shared_claim_starts_each_pod_once_reserved_for_it() {
    let (cluster, client) = common::start(common::fast().with_nodes(1)).await;
    let kubectl = Kubectl::for_cluster(&cluster);
    kubectl.apply(CLAIM_V1BETA2).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut made = Vec::new();
    for name in ["a", "b"] {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"nodeName": "sim-node-0",
                     "resourceClaims": [{"name": "shared", "resourceClaimName": "gpus"}],
                     "containers": [{"name": "c", "image": "x"}]}}))
        .unwrap();
        made.push(pods.create(&PostParams::default(), &pod).await.unwrap());
    }
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), "default");
    allocate_to(&claims, "gpus", &made[0]).await;
    let running = |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref())
            .and_then(|s| s.phase.as_deref())
            == Some("Running")
    };
    wait_for(&pods, "a", running).await;
    let b = pods.get("b").await.unwrap();
    assert_eq!(b.status.unwrap().phase.as_deref(), Some("Pending"));
    let mut both = allocated_for(&made[0]);
    both["status"]["reservedFor"]
        .as_array_mut()
        .unwrap()
        .push(json!({"resource": "pods", "name": "b", "uid": made[1].metadata.uid}));
    claims
        .patch_status("gpus", &PatchParams::default(), &Patch::Merge(both))
        .await
        .unwrap();
    wait_for(&pods, "b", running).await;
}

/// A watch in v1beta2 sees claims written in v1, in the v1beta2 form, and
/// their status changes; `kubectl describe` reads them.
#[tokio::test]
async fn a_v1beta2_watch_sees_v1_writes() {
    use kube::api::{WatchEvent, WatchParams};

    let (cluster, client) = common::start(common::fast()).await;
    let beta = dynamic(
        &client,
        &resource(
            "resource.k8s.io",
            "v1beta2",
            "ResourceClaim",
            "resourceclaims",
        ),
        Some("default"),
    );
    let mut events = common::watch_from_now(&beta, &WatchParams::default()).await;
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), "default");
    let claim: ResourceClaim = serde_json::from_value(json!({"metadata": {"name": "c"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}))
    .unwrap();
    claims.create(&PostParams::default(), &claim).await.unwrap();
    let added = common::next(&mut events).await.expect("event");
    let WatchEvent::Added(obj) = added else {
        panic!("expected ADDED, got {added:?}");
    };
    assert_eq!(obj.types.unwrap().api_version, "resource.k8s.io/v1beta2");
    assert_eq!(
        obj.data["spec"]["devices"]["requests"][0]["exactly"]["count"],
        1
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "x"}]}}))
    .unwrap();
    let pod = pods.create(&PostParams::default(), &pod).await.unwrap();
    allocate_to(&claims, "c", &pod).await;
    let modified = common::until(&mut events, |e| matches!(e, Ok(WatchEvent::Modified(_))))
        .await
        .expect("event");
    let WatchEvent::Modified(obj) = modified else {
        unreachable!("matched above");
    };
    assert_eq!(obj.data["status"]["reservedFor"][0]["name"], "p");
    let kubectl = Kubectl::for_cluster(&cluster);
    let described = kubectl.ok(&["describe", "resourceclaim", "c"]).await;
    assert!(described.contains("gpu.kwok.muster.dev"), "{described}");
}

/// Two writers of one claim's status from the same read: the second, whose
/// allocation differs from the one now recorded, loses on its stale
/// resourceVersion (409, re-read and retry), as kube-apiserver's store
/// checks the version before validating the update, not on the allocation
/// being immutable (422).
#[tokio::test]
async fn a_stale_status_write_is_a_conflict_before_it_is_validated() {
    let (cluster, client) = common::start(common::fast()).await;
    let kubectl = Kubectl::for_cluster(&cluster);
    kubectl.apply(CLAIM_V1BETA2).await;
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), "default");
    let read = claims.get("gpus").await.expect("claim");
    let allocated = |device: &str| {
        let mut c = read.clone();
        c.status = Some(
            serde_json::from_value(json!({"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.kwok.muster.dev", "pool": "p", "device": device}]}}}))
            .unwrap(),
        );
        c
    };
    claims
        .replace_status("gpus", &PostParams::default(), &allocated("gpu-0"))
        .await
        .expect("the first writer");
    match claims
        .replace_status("gpus", &PostParams::default(), &allocated("gpu-1"))
        .await
    {
        Err(kube::Error::Api(s)) => assert_eq!((s.code, s.reason.as_str()), (409, "Conflict")),
        other => panic!("expected 409, got {other:?}"),
    }
    cluster.shutdown().await.unwrap();
}

/// A PodGroup's `spec.resourceClaims` (KEP-5729) is validated as a pod's
/// entries are, and cannot change once created.
#[tokio::test]
async fn a_pod_groups_claims_are_validated_and_immutable() {
    let (cluster, _client) = common::start(common::fast()).await;
    let kubectl = Kubectl::for_cluster(&cluster);
    let group = |claims: &str| {
        format!(
            "apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {{name: train, namespace: default}}
spec:
  schedulingPolicy: {{gang: {{minCount: 2}}}}
  resourceClaims: {claims}
"
        )
    };
    let bad = kubectl
        .fails_with(
            &["create", "-f", "-"],
            &group(
                "[{name: fabric, resourceClaimTemplateName: t}, {name: fabric, resourceClaimName: c}, \
                 {name: both, resourceClaimName: c, resourceClaimTemplateName: t}, {name: Bad_Name, resourceClaimName: c}]",
            ),
        )
        .await;
    for needle in [
        "spec.resourceClaims[1].name: Duplicate value: \"fabric\"",
        "spec.resourceClaims[2]: Invalid value: \"both\": must specify one of",
        "spec.resourceClaims[3].name: Invalid value: \"Bad_Name\"",
    ] {
        assert!(bad.contains(needle), "{needle} in {bad}");
    }
    kubectl
        .ok_with(
            &["create", "-f", "-"],
            &group("[{name: fabric, resourceClaimTemplateName: t}]"),
        )
        .await;
    let changed = kubectl
        .fails(&[
            "patch",
            "podgroups.v1beta1.scheduling.k8s.io",
            "train",
            "--type=merge",
            "-p",
            r#"{"spec":{"resourceClaims":[{"name":"fabric","resourceClaimTemplateName":"u"}]}}"#,
        ])
        .await;
    assert!(
        changed.contains("spec.resourceClaims: Invalid value: \"object\": field is immutable"),
        "{changed}"
    );
    cluster.shutdown().await.unwrap();
}
