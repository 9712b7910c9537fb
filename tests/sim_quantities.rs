//! Resource quantities as the simulated cluster decodes them, like
//! kube-apiserver: a value beyond 2^63-1 (`cpu: 1e30`) is accepted and
//! stored capped, text outside the quantity grammar is a 400, a negative
//! request a 422. Driven with kube-rs and the real kubectl.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::common::kubectl::Kubectl;
use crate::common::{self, code};

fn pod(name: &str, cpu: serde_json::Value) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "x",
            "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}))
    .expect("pod")
}

fn cpu(p: &Pod) -> String {
    p.spec.as_ref().unwrap().containers[0]
        .resources
        .as_ref()
        .unwrap()
        .requests
        .as_ref()
        .unwrap()["cpu"]
        .0
        .clone()
}

#[tokio::test]
async fn huge_quantities_are_capped_not_refused() {
    let (cluster, client) = common::start(common::fast()).await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let created = pods
        .create(&PostParams::default(), &pod("huge", json!("1e30")))
        .await
        .expect("1e30 is accepted");
    assert_eq!(cpu(&created), "9223372036854775807");
    assert_eq!(cpu(&pods.get("huge").await.unwrap()), "9223372036854775807");
    let (status, reason) = code(
        pods.create(&PostParams::default(), &pod("garbage", json!("lots")))
            .await,
    );
    assert_eq!((status, reason.as_str()), (400, "BadRequest"));
    let (status, _) = code(
        pods.create(&PostParams::default(), &pod("negative", json!("-1")))
            .await,
    );
    assert_eq!(status, 422);

    let kubectl = Kubectl::for_cluster(&cluster);
    kubectl
        .apply(
            "
apiVersion: v1
kind: Pod
metadata: {name: applied, namespace: default}
spec:
  containers:
  - name: c
    image: x
    resources: {requests: {memory: 1e40, cpu: 1e-40}}
",
        )
        .await;
    let p = kubectl.json(&["get", "pod", "applied"]).await;
    let requests = &p["spec"]["containers"][0]["resources"]["requests"];
    assert_eq!(requests["memory"], "9223372036854775807");
    assert_eq!(requests["cpu"], "1n");
}
