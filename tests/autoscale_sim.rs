//! The simulated cluster-autoscaler of `muster cluster`: ProvisioningRequests
//! (`autoscaling.x-k8s.io/v1`) served from node pools. The atomic class adds
//! every node a request needs at once after the pool's delay, or none when
//! the pool may not grow that far (`Failed`); check-capacity only looks;
//! a booking expires (`BookingExpired`); a provisioned node removed while
//! booked revokes the capacity (`CapacityRevoked`). No pool, no API.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::watcher;
use muster::apiserver::{SimCluster, SimConfig};
use muster::kwok::pools::{self, POOL_LABEL};
use serde_json::{Value, json};

use crate::e2e::{self, Env};

pub fn provisioning_requests() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("autoscaling.x-k8s.io", "v1", "ProvisioningRequest"),
        "provisioningrequests",
    )
}

async fn cluster_with_pool(max: usize, booking: Duration) -> Env {
    let pools = pools::parse(&format!(
        "- name: burst\n  max: {max}\n  delaySeconds: 0.5\n  template: {{capacity: {{cpu: '4', memory: 64Gi, pods: '110'}}, labels: {{tier: burst}}}}\n"
    ))
    .expect("pools");
    let config = SimConfig::default()
        .pod_start_delay(Duration::from_millis(10))
        .bookmark_interval(Duration::from_millis(500))
        .with_templates(vec![e2e::nodes(1, "4")])
        .with_pools(pools)
        .booking(booking);
    let cluster = SimCluster::start(config).await.expect("cluster starts");
    let client = cluster.client().expect("client");
    Env { cluster, client }
}

/// A PodTemplate of `cpu` and a request for `count` of them in `class`.
async fn request(env: &Env, name: &str, class: &str, cpu: &str, count: u32) {
    let templates: Api<DynamicObject> = Api::namespaced_with(
        env.client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("", "v1", "PodTemplate"),
            "podtemplates",
        ),
    );
    let t: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PodTemplate",
        "metadata": {"name": name},
        "template": {"spec": {"containers": [{"name": "main", "image": "busybox",
            "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}]}}
    }))
    .expect("template json");
    templates
        .create(&PostParams::default(), &t)
        .await
        .expect("create template");
    let api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), "default", &provisioning_requests());
    let pr: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
        "metadata": {"name": name},
        "spec": {"provisioningClassName": class,
                 "podSets": [{"podTemplateRef": {"name": name}, "count": count}]}
    }))
    .expect("request json");
    api.create(&PostParams::default(), &pr)
        .await
        .expect("create request");
}

fn condition<'a>(pr: &'a DynamicObject, type_: &str) -> Option<&'a Value> {
    pr.data
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

fn is_true(pr: &DynamicObject, type_: &str) -> bool {
    condition(pr, type_).is_some_and(|c| c["status"] == "True")
}

async fn wait_request<F>(env: &Env, name: &str, done: F) -> DynamicObject
where
    F: Fn(&DynamicObject) -> bool,
{
    let api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), "default", &provisioning_requests());
    let all = e2e::wait_objects(api, watcher::Config::default(), |o| {
        o.get(name).is_some_and(&done)
    })
    .await;
    all.get(name).cloned().expect("the request")
}

async fn pool_nodes(env: &Env) -> BTreeMap<String, Node> {
    let api: Api<Node> = Api::all(env.client.clone());
    let list = api
        .list(&kube::api::ListParams::default().labels(&format!("{POOL_LABEL}=burst")))
        .await
        .expect("list nodes");
    list.items
        .into_iter()
        .map(|n| (n.metadata.name.clone().unwrap_or_default(), n))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_atomic_class_adds_every_node_at_once_or_none() {
    let env = cluster_with_pool(3, Duration::from_secs(600)).await;
    // 3 pods of 3 cores: the one 4-core node takes one, the pool adds 2.
    request(
        &env,
        "fits",
        "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
        "3",
        3,
    )
    .await;
    let pr = wait_request(&env, "fits", |o| {
        is_true(o, "Provisioned") || is_true(o, "Failed")
    })
    .await;
    assert!(is_true(&pr, "Provisioned"), "{:?}", pr.data["status"]);
    assert!(is_true(&pr, "Accepted"));
    let nodes = pool_nodes(&env).await;
    assert_eq!(nodes.len(), 2, "{:?}", nodes.keys());
    // 4 more pods of 4 cores need 4 new nodes; the pool has 1 left: none.
    request(
        &env,
        "toomany",
        "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
        "4",
        4,
    )
    .await;
    let pr = wait_request(&env, "toomany", |o| is_true(o, "Failed")).await;
    let msg = condition(&pr, "Failed")
        .map(|c| c["message"].to_string())
        .unwrap_or_default();
    assert!(msg.contains("at most 3"), "{msg}");
    assert_eq!(
        pool_nodes(&env).await.len(),
        2,
        "all or nothing: no node added"
    );
    // A removed provisioned node revokes the booked capacity.
    let api: Api<Node> = Api::all(env.client.clone());
    let first = nodes.keys().next().expect("a node").clone();
    api.delete(&first, &DeleteParams::default())
        .await
        .expect("delete node");
    wait_request(&env, "fits", |o| is_true(o, "CapacityRevoked")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_capacity_only_looks_and_a_booking_expires() {
    let env = cluster_with_pool(3, Duration::from_secs(1)).await;
    request(&env, "room", "check-capacity.autoscaling.x-k8s.io", "2", 2).await;
    wait_request(&env, "room", |o| is_true(o, "Provisioned")).await;
    request(
        &env,
        "noroom",
        "check-capacity.autoscaling.x-k8s.io",
        "4",
        2,
    )
    .await;
    let pr = wait_request(&env, "noroom", |o| {
        condition(o, "Provisioned").is_some_and(|c| c["reason"] == "CapacityIsNotFound")
    })
    .await;
    assert!(!is_true(&pr, "Failed"));
    assert!(
        pool_nodes(&env).await.is_empty(),
        "check-capacity adds no node"
    );
    wait_request(&env, "room", |o| is_true(o, "BookingExpired")).await;
    // Another class is not this provisioner's.
    request(&env, "other", "example.com/other", "1", 1).await;
    let api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), "default", &provisioning_requests());
    let other = api.get("other").await.expect("get");
    assert!(condition(&other, "Accepted").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_pools_the_api_is_not_served() {
    let env = e2e::cluster(vec![e2e::nodes(1, "4")]).await;
    let api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), "default", &provisioning_requests());
    assert!(api.list(&Default::default()).await.is_err());
}
