//! The volume plugins end to end, driven with the real kubectl against
//! `muster cluster` (with its simulated PV controller and provisioner) and
//! the Muster daemon: a WaitForFirstConsumer claim is provisioned on the node
//! the pod is placed on, a static volume is bound by PreBind, a missing claim
//! keeps the pod pending with kube-scheduler's message, a bound volume's node
//! affinity pins its pod, and a ReadWriteOncePod claim serves one pod.
//!
//! kubectl comes from $MUSTER_KUBECTL or `.tools/kubectl`, fetched with
//! `tests/support/fetch-tools.sh` when missing.

use crate::common::kubectl::Kubectl;
use crate::e2e;

const STORAGE: &str = "
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local-wffc}
provisioner: csi.sim.muster.dev
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local-static}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: csi.sim.muster.dev}
spec: {attachRequired: false}
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: sim-node-0}
spec:
  drivers:
  - {name: csi.sim.muster.dev, nodeID: sim-node-0, allocatable: {count: 8}}
";

fn claim(name: &str, class: &str, mode: &str, extra: &str) -> String {
    format!(
        "
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: {name}, namespace: default}}
spec:
  accessModes: [{mode}]
  storageClassName: {class}
  resources: {{requests: {{storage: 1Gi}}}}
  {extra}
"
    )
}

fn pod(name: &str, claim: &str) -> String {
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
    resources: {{requests: {{cpu: 100m}}}}
    volumeMounts: [{{name: data, mountPath: /data}}]
  volumes:
  - name: data
    persistentVolumeClaim: {{claimName: {claim}}}
"
    )
}

fn volume_on(name: &str, class: &str, host: &str, extra: &str) -> String {
    format!(
        "
apiVersion: v1
kind: PersistentVolume
metadata: {{name: {name}}}
spec:
  capacity: {{storage: 5Gi}}
  accessModes: [ReadWriteOnce]
  storageClassName: {class}
  hostPath: {{path: /tmp/{name}}}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - {{key: kubernetes.io/hostname, operator: In, values: [{host}]}}
  {extra}
"
    )
}

fn node_of(
    pods: &std::collections::BTreeMap<String, k8s_openapi::api::core::v1::Pod>,
    name: &str,
) -> String {
    pods[name]
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .expect("bound")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volumes_are_bound_provisioned_and_respected() {
    let env = e2e::cluster(vec![e2e::nodes(3, "4")]).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    env.cluster.write_kubeconfig(&kubeconfig).unwrap();
    let k = Kubectl::new(kubeconfig);
    let daemon = e2e::daemon(&env, e2e::test_config("")).await;

    k.apply(STORAGE).await;
    let listed = k.ok(&["get", "pvc,pv,sc,csinode,csidriver"]).await;
    for needle in [
        "local-wffc",
        "local-static",
        "sim-node-0",
        "csi.sim.muster.dev",
    ] {
        assert!(
            listed.contains(needle),
            "kubectl get lacks {needle}:\n{listed}"
        );
    }

    // A StatefulSet-style pod with a WaitForFirstConsumer claim: bound, and
    // its volume provisioned on the chosen node.
    k.apply(&claim("data-web-0", "local-wffc", "ReadWriteOnce", ""))
        .await;
    k.apply(&pod("web-0", "data-web-0")).await;
    let pods = e2e::wait_pods(&env, "default", |p| p.get("web-0").is_some_and(e2e::bound)).await;
    let node = node_of(&pods, "web-0");
    let pvc = k.json(&["get", "pvc", "data-web-0"]).await;
    assert_eq!(pvc["status"]["phase"], "Bound", "{pvc}");
    assert_eq!(
        pvc["metadata"]["annotations"]["volume.kubernetes.io/selected-node"],
        node.as_str()
    );
    let pv_name = pvc["spec"]["volumeName"]
        .as_str()
        .expect("volumeName")
        .to_string();
    let pv = k.json(&["get", "pv", &pv_name]).await;
    assert_eq!(pv["status"]["phase"], "Bound");
    assert_eq!(
        pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
            [0],
        node.as_str(),
        "{pv}"
    );

    // A static WaitForFirstConsumer volume on one node: PreBind binds it
    // and the pod lands there.
    k.apply(&volume_on("static-pv", "local-static", "sim-node-1", ""))
        .await;
    k.apply(&claim("static-claim", "local-static", "ReadWriteOnce", ""))
        .await;
    k.apply(&pod("static-user", "static-claim")).await;
    let pods = e2e::wait_pods(&env, "default", |p| {
        p.get("static-user").is_some_and(e2e::bound)
    })
    .await;
    assert_eq!(node_of(&pods, "static-user"), "sim-node-1");
    let pv = k.json(&["get", "pv", "static-pv"]).await;
    assert_eq!(pv["spec"]["claimRef"]["name"], "static-claim", "{pv}");

    // A bound volume pins its pod to the volume's node.
    k.apply(&volume_on(
        "pinned-pv",
        "manual",
        "sim-node-2",
        "claimRef: {namespace: default, name: pinned}",
    ))
    .await;
    k.apply(&claim(
        "pinned",
        "manual",
        "ReadWriteOnce",
        "volumeName: pinned-pv",
    ))
    .await;
    k.apply(&pod("pinned-user", "pinned")).await;
    let pods = e2e::wait_pods(&env, "default", |p| {
        p.get("pinned-user").is_some_and(e2e::bound)
    })
    .await;
    assert_eq!(node_of(&pods, "pinned-user"), "sim-node-2");

    // A missing claim: pending, with kube-scheduler's message.
    k.apply(&pod("orphan", "nope")).await;
    let ev = e2e::wait_event(&env, "default", |e| {
        e.involved_object.name.as_deref() == Some("orphan")
            && e.message
                .as_deref()
                .is_some_and(|m| m.contains("persistentvolumeclaim \"nope\" not found"))
    })
    .await;
    assert_eq!(ev.reason.as_deref(), Some("FailedScheduling"));
    let pods = e2e::wait_pods(&env, "default", |p| {
        p.get("orphan")
            .and_then(e2e::pod_condition_message)
            .is_some_and(|m| m.contains("persistentvolumeclaim \"nope\" not found"))
    })
    .await;
    assert!(!e2e::bound(&pods["orphan"]));

    // ReadWriteOncePod: the second user of the claim stays pending.
    k.apply(&claim("solo", "local-wffc", "ReadWriteOncePod", ""))
        .await;
    k.apply(&pod("solo-a", "solo")).await;
    e2e::wait_pods(&env, "default", |p| p.get("solo-a").is_some_and(e2e::bound)).await;
    k.apply(&pod("solo-b", "solo")).await;
    let pods = e2e::wait_pods(&env, "default", |p| {
        p.get("solo-b").and_then(e2e::pod_condition_message).is_some_and(|m| {
            m.contains(
                "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode",
            )
        })
    })
    .await;
    assert!(!e2e::bound(&pods["solo-b"]));

    daemon.shutdown().await.expect("clean shutdown");
}

/// Waits (on a watch) until claim `name` names a storage class; returns it.
async fn wait_claim_class(env: &e2e::Env, name: &str) -> String {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::PersistentVolumeClaim;
    use kube::runtime::watcher;
    let api: kube::Api<PersistentVolumeClaim> =
        kube::Api::namespaced(env.client.clone(), "default");
    let cfg = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut stream = Box::pin(watcher::watcher(api, cfg));
    let wait = async {
        while let Some(ev) = stream.next().await {
            if let watcher::Event::Apply(c) | watcher::Event::InitApply(c) = ev.expect("watch")
                && let Some(class) = c.spec.and_then(|s| s.storage_class_name)
            {
                return class;
            }
        }
        panic!("watch ended");
    };
    tokio::time::timeout(e2e::HANG_GUARD, wait)
        .await
        .expect("the claim got a class before the hang guard")
}

/// As a real API server: a claim naming no class gets the default one at
/// creation (DefaultStorageClass admission), and one created before any
/// default existed gets it when a default appears (the PV controller's
/// retroactive assignment); `storageClassName: ""` stays classless.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_without_a_class_get_the_default_one() {
    let env = e2e::cluster(vec![e2e::nodes(1, "4")]).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    env.cluster.write_kubeconfig(&kubeconfig).unwrap();
    let k = Kubectl::new(kubeconfig);
    let classless = |name: &str, class: &str| {
        format!(
            "
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: {name}, namespace: default}}
spec:
  accessModes: [ReadWriteOnce]
  {class}
  resources: {{requests: {{storage: 1Gi}}}}
"
        )
    };
    k.apply(&classless("early", "")).await;
    k.apply(&classless("none", "storageClassName: \"\"")).await;
    let early = k.json(&["get", "pvc", "early"]).await;
    assert!(early["spec"]["storageClassName"].is_null(), "{early}");

    k.apply(
        "
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations: {storageclass.kubernetes.io/is-default-class: \"true\"}
provisioner: csi.sim.muster.dev
volumeBindingMode: WaitForFirstConsumer
",
    )
    .await;
    assert_eq!(wait_claim_class(&env, "early").await, "standard");
    k.apply(&classless("late", "")).await;
    let late = k.json(&["get", "pvc", "late"]).await;
    assert_eq!(late["spec"]["storageClassName"], "standard", "{late}");
    let none = k.json(&["get", "pvc", "none"]).await;
    assert_eq!(none["spec"]["storageClassName"], "", "{none}");
}
