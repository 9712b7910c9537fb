//! Extended resources backed by DRA (KEP-5004) end to end, with the real
//! kubectl against `muster cluster` and the Muster daemon: a DeviceClass
//! with `extendedResourceName: example.com/gpu` serves pods asking for
//! `example.com/gpu` in their limits on nodes that publish devices but do
//! not advertise the resource. Such a pod binds with its extended-resource
//! claim created, allocated on its node, reserved for it, owned by it and
//! recorded in its `status.extendedResourceClaimStatus`; the kubelet starts
//! it; a pod that cannot be served says so naming the resource; deleting a
//! pod deletes its claim and frees the devices for the next. A node that
//! advertises the resource in its allocatable (a device plugin's) is used
//! with normal fit, without a claim. An invalid `extendedResourceName` is
//! refused at admission. The claim carries the delete-protection
//! finalizer; a claim made by a binding that then failed is deleted (the
//! finalizer removed first) while its pod is still pending, and deleting
//! the pods leaves no claim behind.
//!
//! kubectl comes from $MUSTER_KUBECTL or `.tools/kubectl`, fetched with
//! `tests/support/fetch-tools.sh` when missing.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::{Api, DeleteParams, ListParams};
use muster::kwok::devices::DeviceTemplate;

use crate::common::kubectl::Kubectl;
use crate::e2e;

const CLASS: &str = r#"
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.kwok.muster.dev}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.kwok.muster.dev"'}
  extendedResourceName: example.com/gpu
"#;

const ANNOTATION: &str = "resource.kubernetes.io/extended-resource-claim";
const PROTECTION: &str = "resource.kubernetes.io/delete-protection";

/// A pod of ours asking for `gpus` example.com/gpu, on nodes of `kind`.
fn gpu_pod(name: &str, kind: &str, gpus: u32) -> String {
    format!(
        "
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  schedulerName: muster
  nodeSelector: {{kind: {kind}}}
  containers:
  - name: main
    image: busybox
    resources:
      requests: {{cpu: 100m}}
      limits: {{example.com/gpu: {gpus}}}
"
    )
}

async fn claims(env: &e2e::Env) -> Vec<ResourceClaim> {
    let api: Api<ResourceClaim> = Api::namespaced(env.client.clone(), "default");
    api.list(&ListParams::default())
        .await
        .expect("claims")
        .items
}

/// Watches the claims until `done` holds for them; returns them.
async fn wait_claims<F>(env: &e2e::Env, mut done: F) -> Vec<ResourceClaim>
where
    F: FnMut(&[ResourceClaim]) -> bool,
{
    let api: Api<ResourceClaim> = Api::namespaced(env.client.clone(), "default");
    let config = kube::runtime::watcher::Config::default();
    e2e::wait_objects(api, config, |all| {
        done(&all.values().cloned().collect::<Vec<_>>())
    })
    .await
    .into_values()
    .collect()
}

fn named(c: &ResourceClaim, name: &str) -> bool {
    c.metadata.name.as_deref() == Some(name)
}

/// The pod's extended-resource claim: found by the name its status
/// records, checked to be marked, owned by the pod, allocated `count`
/// devices on its node and reserved for it. Returns the devices.
async fn check_extended_claim(env: &e2e::Env, pod: &Pod, count: usize) -> Vec<String> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .expect("bound");
    let status = pod
        .status
        .as_ref()
        .and_then(|s| s.extended_resource_claim_status.clone())
        .unwrap_or_else(|| panic!("{name}: no extendedResourceClaimStatus"));
    assert_eq!(status.request_mappings.len(), 1, "{status:?}");
    // The container requests cpu and (defaulted from its limits)
    // example.com/gpu: the second of its resources, sorted.
    let m = &status.request_mappings[0];
    assert_eq!(
        (&*m.container_name, &*m.resource_name, &*m.request_name),
        ("main", "example.com/gpu", "container-0-request-1")
    );
    assert!(
        status
            .resource_claim_name
            .starts_with(&format!("{name}-extended-resources-")),
        "{status:?}"
    );
    let all = claims(env).await;
    let claim = all
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(&*status.resource_claim_name))
        .unwrap_or_else(|| panic!("{name}: claim {} exists", status.resource_claim_name));
    let annotations = claim.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations.get(ANNOTATION).map(String::as_str),
        Some("true")
    );
    assert_eq!(
        claim.metadata.finalizers.as_deref(),
        Some(&[PROTECTION.to_string()][..]),
        "{name}'s claim is protected from deletion while allocated"
    );
    let owner = &claim.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(
        (&*owner.kind, &*owner.name, owner.controller),
        ("Pod", &*name, Some(true))
    );
    assert_eq!(Some(&owner.uid), pod.metadata.uid.as_ref());
    let requests = claim
        .spec
        .as_ref()
        .and_then(|s| s.devices.as_ref())
        .and_then(|d| d.requests.clone())
        .unwrap_or_default();
    let exactly = requests[0].exactly.as_ref().expect("exactly");
    assert_eq!(requests[0].name, "container-0-request-1");
    assert_eq!(exactly.device_class_name, "gpu.kwok.muster.dev");
    assert_eq!(exactly.count, Some(count as i64));
    let cs = claim.status.as_ref().expect("claim status");
    let reserved: Vec<_> = cs
        .reserved_for
        .iter()
        .flatten()
        .map(|r| r.name.clone())
        .collect();
    assert_eq!(
        reserved,
        std::slice::from_ref(&name),
        "reserved for its pod"
    );
    let results = cs
        .allocation
        .as_ref()
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.clone())
        .unwrap_or_default();
    assert_eq!(results.len(), count, "{results:?}");
    for r in &results {
        assert_eq!(r.pool, node, "{name}'s devices are on its node");
        assert_eq!(r.request, "container-0-request-1");
    }
    results
        .into_iter()
        .map(|r| format!("{}/{}", r.pool, r.device))
        .collect()
}

fn running(p: &Pod) -> bool {
    p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extended_resources_are_served_by_device_classes() {
    // Two nodes with two GPUs each published by the DRA driver; one node
    // advertising four through its allocatable, as a device plugin would.
    let mut dra = e2e::nodes(2, "8");
    dra.name_prefix = "dra-".into();
    dra.labels = BTreeMap::from([("kind".to_string(), "dra".to_string())]);
    dra.devices = Some(DeviceTemplate::with_count(2));
    let mut plugin = e2e::nodes(1, "8");
    plugin.name_prefix = "plugin-".into();
    plugin.labels = BTreeMap::from([("kind".to_string(), "plugin".to_string())]);
    plugin
        .capacity
        .insert("example.com/gpu".to_string(), "4".to_string());
    let env = e2e::cluster(vec![dra, plugin]).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    env.cluster.write_kubeconfig(&kubeconfig).unwrap();
    let k = Kubectl::new(kubeconfig);
    let daemon = e2e::daemon(&env, e2e::test_config("")).await;

    // kube-apiserver's rule for the name: an extended resource name.
    let refused = k
        .fails_with(
            &["apply", "-f", "-"],
            r#"
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: bad}
spec: {extendedResourceName: kubernetes.io/gpu}
"#,
        )
        .await;
    assert!(
        refused.contains("spec.extendedResourceName") && refused.contains("extended resource name"),
        "{refused}"
    );
    k.apply(CLASS).await;

    // Two GPUs each: e0 and e1 take both DRA nodes' devices.
    k.apply(&gpu_pod("e0", "dra", 2)).await;
    k.apply(&gpu_pod("e1", "dra", 2)).await;
    let pods = e2e::wait_pods(&env, "default", |p| {
        ["e0", "e1"]
            .iter()
            .all(|n| p.get(*n).is_some_and(|p| e2e::bound(p) && running(p)))
    })
    .await;
    let mut devices = check_extended_claim(&env, &pods["e0"], 2).await;
    devices.extend(check_extended_claim(&env, &pods["e1"], 2).await);
    devices.sort();
    devices.dedup();
    assert_eq!(devices.len(), 4, "no device in two claims: {devices:?}");
    let listed = k.ok(&["get", "resourceclaims"]).await;
    assert!(listed.contains("e0-extended-resources-"), "{listed}");

    // None left: e2 waits, naming the resource and what is free.
    k.apply(&gpu_pod("e2", "dra", 2)).await;
    let pods = e2e::wait_pods(&env, "default", |p| {
        p.get("e2")
            .and_then(e2e::pod_condition_message)
            .is_some_and(|m| m.contains("cannot allocate extended resource example.com/gpu"))
    })
    .await;
    let message = e2e::pod_condition_message(&pods["e2"]).unwrap();
    assert!(
        message.contains("2 cannot allocate extended resource example.com/gpu: 2 device(s) of class gpu.kwok.muster.dev wanted, 0 free"),
        "{message}"
    );
    assert!(!e2e::bound(&pods["e2"]));

    // Deleting e0 deletes its claim and frees its devices: e2 binds.
    let e0_claim = pods["e0"]
        .status
        .as_ref()
        .and_then(|s| s.extended_resource_claim_status.clone())
        .map(|s| s.resource_claim_name)
        .expect("e0's claim");
    let api: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    api.delete("e0", &DeleteParams::default())
        .await
        .expect("delete e0");
    let pods = e2e::wait_pods(&env, "default", |p| {
        !p.contains_key("e0") && p.get("e2").is_some_and(|p| e2e::bound(p) && running(p))
    })
    .await;
    check_extended_claim(&env, &pods["e2"], 2).await;
    assert!(
        !claims(&env)
            .await
            .iter()
            .any(|c| c.metadata.name.as_deref() == Some(&*e0_claim)),
        "{e0_claim} is deleted with its pod"
    );

    // The device-plugin node: normal fit, no claim.
    k.apply(&gpu_pod("p0", "plugin", 3)).await;
    let pods = e2e::wait_pods(&env, "default", |p| {
        p.get("p0").is_some_and(|p| e2e::bound(p) && running(p))
    })
    .await;
    let p0 = &pods["p0"];
    assert!(
        p0.status
            .as_ref()
            .and_then(|s| s.extended_resource_claim_status.as_ref())
            .is_none(),
        "no extended-resource claim where the node advertises the resource"
    );
    assert!(
        !claims(&env).await.iter().any(|c| c
            .metadata
            .name
            .as_deref()
            .is_some_and(|n| n.starts_with("p0-"))),
        "no claim for p0"
    );
    // One of four left there: a pod asking for two is refused by fit.
    k.apply(&gpu_pod("p1", "plugin", 2)).await;
    let pods = e2e::wait_pods(&env, "default", |p| {
        p.get("p1")
            .and_then(e2e::pod_condition_message)
            .is_some_and(|m| m.contains("Insufficient example.com/gpu"))
    })
    .await;
    assert!(!e2e::bound(&pods["p1"]));

    // Bindings fail (409, not retried) after e1's devices are freed: each
    // attempt creates e3's claim (allocated, reserved for e3, protected by
    // the finalizer) and deletes it again, the finalizer removed first, so
    // none leaks or stays behind being deleted while e3 is pending; once
    // bindings succeed, e3 binds with one claim.
    api.delete("e1", &DeleteParams::default())
        .await
        .expect("delete e1");
    let failing: muster::apiserver::fault::FaultRule =
        "verb=create,resource=pods/binding,rate=1,code=409"
            .parse()
            .expect("fault rule");
    env.cluster.set_faults(vec![failing]);
    k.apply(&gpu_pod("e3", "dra", 2)).await;
    let pods = e2e::wait_pods(&env, "default", |p| {
        !p.contains_key("e1")
            && p.get("e3").is_some_and(|p| {
                !e2e::bound(p)
                    && p.status
                        .as_ref()
                        .is_some_and(|s| s.extended_resource_claim_status.is_some())
            })
    })
    .await;
    let attempted = pods["e3"]
        .status
        .as_ref()
        .and_then(|s| s.extended_resource_claim_status.clone())
        .map(|s| s.resource_claim_name)
        .expect("e3's claim of a failed attempt");
    wait_claims(&env, |all| !all.iter().any(|c| named(c, &attempted))).await;
    assert!(
        !e2e::bound(&api.get("e3").await.expect("e3")),
        "bindings still fail"
    );
    env.cluster.set_faults(Vec::new());
    let pods = e2e::wait_pods(&env, "default", |p| {
        p.get("e3").is_some_and(|p| e2e::bound(p) && running(p))
    })
    .await;
    check_extended_claim(&env, &pods["e3"], 2).await;
    let e3_claims: Vec<String> = claims(&env)
        .await
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .filter(|n| n.starts_with("e3-extended-resources-"))
        .collect();
    assert_eq!(
        e3_claims.len(),
        1,
        "failed bindings leave no claim: {e3_claims:?}"
    );
    let deleting: Vec<_> = claims(&env)
        .await
        .into_iter()
        .filter(|c| c.metadata.deletion_timestamp.is_some())
        .filter_map(|c| c.metadata.name)
        .collect();
    assert!(deleting.is_empty(), "no claim stuck deleting: {deleting:?}");

    // The pods deleted, their claims are released, deallocated, freed of
    // the finalizer and deleted: none is left, none stuck deleting.
    for pod in ["e2", "e3"] {
        api.delete(pod, &DeleteParams::default())
            .await
            .expect("delete pod");
    }
    wait_claims(&env, <[ResourceClaim]>::is_empty).await;
    daemon.shutdown().await.expect("clean shutdown");
}
