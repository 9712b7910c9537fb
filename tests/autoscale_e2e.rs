//! A gang that grows the cluster, end to end on the simulated cluster with
//! node pools: a pending gang → one ProvisioningRequest (one PodTemplate of
//! its members' scheduling fields) → the pool's nodes appear → the gang binds on
//! them whole → the request is deleted. A gang held by Kueue's admission
//! gate creates no request.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DynamicObject, ListParams};
use kube::runtime::watcher;
use muster::apiserver::{SimCluster, SimConfig};
use muster::kwok::pools::{self, POOL_LABEL};
use serde_json::json;

use crate::autoscale_sim::provisioning_requests;
use crate::e2e::{self, Env, test_config};

async fn cluster_with_pool() -> Env {
    let pools = pools::parse(
        "- name: burst\n  max: 4\n  delaySeconds: 0.5\n  template: {capacity: {cpu: '4', memory: 64Gi, pods: '110'}}\n",
    )
    .expect("pools");
    let config = SimConfig::default()
        .pod_start_delay(Duration::from_millis(10))
        .bookmark_interval(Duration::from_millis(500))
        .max_termination_grace(Duration::from_secs(1))
        .with_templates(vec![e2e::nodes(1, "4")])
        .with_pools(pools);
    let cluster = SimCluster::start(config).await.expect("cluster starts");
    let client = cluster.client().expect("client");
    Env { cluster, client }
}

fn kueue_member(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name,
                     "labels": {"kueue.x-k8s.io/pod-group-name": "queued"},
                     "annotations": {"kueue.x-k8s.io/pod-group-total-count": "2"}},
        "spec": {"schedulerName": "muster",
                 "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
                 "containers": [{"name": "main", "image": "busybox",
                                 "resources": {"requests": {"cpu": "4", "memory": "100Mi"}}}]}
    }))
    .expect("pod json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_short_of_capacity_grows_the_cluster_and_binds_on_the_new_nodes() {
    let env = cluster_with_pool().await;
    let d = e2e::daemon(&env, test_config("")).await;
    e2e::wait_ready(&d).await;
    // Quota-gated: no demand.
    e2e::create_pods(
        &env,
        "default",
        vec![kueue_member("queued-0"), kueue_member("queued-1")],
    )
    .await;
    // Three whole nodes for a cluster of one.
    e2e::create_podgroup(&env, "default", "big", 3, None).await;
    let pods: Vec<Pod> = (0..3)
        .map(|i| e2e::pod(&format!("big-{i}"), "4", "muster", Some("big")))
        .collect();
    e2e::create_pods(&env, "default", pods).await;

    // One request, for the gang's two missing nodes' worth of members.
    let requests: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), "default", &provisioning_requests());
    let made = e2e::wait_objects(requests.clone(), watcher::Config::default(), |o| {
        !o.is_empty()
    })
    .await;
    assert_eq!(made.len(), 1, "{:?}", made.keys());
    let (_, pr) = made.iter().next().expect("a request");
    assert_eq!(
        pr.data["spec"]["provisioningClassName"],
        "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
    );

    // The request's templates carry the members' scheduling fields.
    let templates: Api<DynamicObject> = Api::namespaced_with(
        env.client.clone(),
        "default",
        &kube::core::ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("", "v1", "PodTemplate"),
            "podtemplates",
        ),
    );
    let set = &pr.data["spec"]["podSets"][0];
    assert_eq!(set["count"], 3);
    let t = templates
        .get(
            set["podTemplateRef"]["name"]
                .as_str()
                .expect("template name"),
        )
        .await;
    // Read before the gang binds (its templates go with the request).
    if let Ok(t) = t {
        assert_eq!(
            t.data["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"],
            "4"
        );
    }
    let bound = e2e::wait_pods(&env, "default", |p| e2e::names_bound(p, "big-").len() == 3).await;
    let nodes: Api<Node> = Api::all(env.client.clone());
    let new: Vec<String> = nodes
        .list(&ListParams::default().labels(&format!("{POOL_LABEL}=burst")))
        .await
        .expect("nodes")
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert_eq!(new.len(), 2, "{new:?}");
    let on_new = bound
        .iter()
        .filter(|(n, _)| n.starts_with("big-"))
        .filter(|(_, p)| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .is_some_and(|n| new.contains(n))
        })
        .count();
    assert_eq!(on_new, 2, "two members landed on the new nodes");
    // The gang started: its request goes; the gated gang never made one.
    e2e::wait_objects(requests, watcher::Config::default(), |o| o.is_empty()).await;
    let queued = e2e::list_pods(&env, "default").await;
    assert!(!e2e::bound(&queued["queued-0"]));
    d.shutdown().await.expect("clean shutdown");
}
