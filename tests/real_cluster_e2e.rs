//! End-to-end tests against a real Kubernetes 1.37 control plane (etcd,
//! kube-apiserver, kube-controller-manager and kwok, built from
//! tests/upstream by tests/support/build-upstream.sh): what the API server
//! serves, and Muster scheduling a gang onto kwok's fake nodes.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::runtime::watcher;

use crate::real_cluster::{self as rc, RealCluster};

/// Within the e2e helpers' own hang guard, so that a wait that times out
/// says what the cluster looked like.
const GUARD: std::time::Duration = std::time::Duration::from_secs(30);

/// The names of the resources an API group version serves.
async fn resources(env: &rc::Env, group_version: &str) -> BTreeSet<String> {
    let path = if group_version == "v1" {
        "/api/v1".to_string()
    } else {
        format!("/apis/{group_version}")
    };
    rc::get_json(env, &path).await["resources"]
        .as_array()
        .unwrap_or_else(|| panic!("{path} lists no resources"))
        .iter()
        .filter_map(|r| r["name"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn real_cluster_serves_the_workload_and_dra_apis_and_kwok_readies_a_node() {
    let cluster = RealCluster::start().await;
    let client = cluster.client().await;
    let env = rc::Env { cluster, client };

    let version = rc::get_json(&env, "/version").await;
    assert_eq!(version["gitVersion"], "v1.37.2", "{version}");

    // scheduling.k8s.io: v1 (PriorityClass), the Workload API in v1beta1
    // (preferred after v1) and v1alpha3.
    let group = rc::get_json(&env, "/apis/scheduling.k8s.io").await;
    let versions: BTreeSet<&str> = group["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .filter_map(|v| v["version"].as_str())
        .collect();
    assert_eq!(
        versions,
        BTreeSet::from(["v1", "v1beta1", "v1alpha3"]),
        "{group}"
    );
    for gv in ["scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha3"] {
        let served = resources(&env, gv).await;
        for r in ["podgroups", "podgroups/status", "workloads"] {
            assert!(served.contains(r), "{gv} does not serve {r}: {served:?}");
        }
    }
    let alpha = resources(&env, "scheduling.k8s.io/v1alpha3").await;
    assert!(alpha.contains("compositepodgroups"), "{alpha:?}");
    let dra = resources(&env, "resource.k8s.io/v1").await;
    for r in [
        "deviceclasses",
        "resourceclaims",
        "resourceclaimtemplates",
        "resourceslices",
    ] {
        assert!(
            dra.contains(r),
            "resource.k8s.io/v1 does not serve {r}: {dra:?}"
        );
    }

    // A gang and a pod in it are accepted as Muster writes them.
    rc::create_podgroup(&env, "default", "probe", 2, None).await;
    rc::create_pods(
        &env,
        "default",
        vec![rc::pod("probe-0", "100m", "muster", Some("probe"))],
    )
    .await;
    let pods = rc::wait_pods(&env, "default", |p| p.contains_key("probe-0")).await;
    let group_name = pods["probe-0"]
        .spec
        .as_ref()
        .and_then(|s| s.scheduling_group.as_ref())
        .and_then(|g| g.pod_group_name.clone());
    assert_eq!(
        group_name.as_deref(),
        Some("probe"),
        "spec.schedulingGroup kept"
    );

    // kwok makes a fake node Ready; a node without the annotation is left alone.
    rc::add_node(&env, "kwok-0", "8").await;
    let nodes = rc::wait_nodes_ready(&env, &["kwok-0".to_string()]).await;
    let status = nodes["kwok-0"].status.as_ref().expect("node status");
    assert_eq!(
        status
            .allocatable
            .as_ref()
            .and_then(|a| a.get("cpu"))
            .map(|q| q.0.as_str()),
        Some("8")
    );
    let plain: Node = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": "not-kwok"}
    }))
    .expect("node json");
    Api::<Node>::all(env.client.clone())
        .create(&Default::default(), &plain)
        .await
        .expect("create node");
    let nodes = rc::wait_objects(
        Api::<Node>::all(env.client.clone()),
        watcher::Config::default(),
        |n| n.contains_key("not-kwok"),
    )
    .await;
    assert!(
        !rc::node_ready(&nodes["not-kwok"]),
        "kwok manages only its own nodes"
    );
    eprintln!("real_cluster: {}", env.cluster.timings_text());
}

#[tokio::test]
async fn real_cluster_muster_binds_a_gang_and_kwok_runs_it() {
    let env = rc::cluster(vec![rc::nodes(2, "4")]).await;
    let began = std::time::Instant::now();
    let d = rc::daemon(&env, rc::test_config("")).await;
    rc::wait_ready(&d).await;
    let ready_daemon = began.elapsed();

    rc::create_podgroup(&env, "default", "trio", 3, None).await;
    let pods = (0..3)
        .map(|i| rc::pod(&format!("trio-{i}"), "1", "muster", Some("trio")))
        .collect();
    rc::create_pods(&env, "default", pods).await;

    let bound = rc::wait_pods_or_describe(&env, "default", GUARD, |p| {
        rc::names_bound(p, "trio-").len() == 3
    })
    .await;
    let bound_at = began.elapsed();
    for (name, p) in &bound {
        let node = p.spec.as_ref().and_then(|s| s.node_name.as_deref());
        assert!(
            node.is_some_and(|n| n.starts_with("sim-node-")),
            "{name} bound to {node:?}"
        );
    }
    let running = rc::wait_pods_or_describe(&env, "default", GUARD, |p| {
        p.len() == 3 && p.values().all(rc::running)
    })
    .await;
    assert_eq!(running.len(), 3);
    eprintln!(
        "real_cluster: {}; then daemon ready {:.2} s, gang bound {:.2} s, running {:.2} s",
        env.cluster.timings_text(),
        ready_daemon.as_secs_f64(),
        bound_at.as_secs_f64(),
        began.elapsed().as_secs_f64()
    );
    d.shutdown().await.expect("daemon stops");
}

/// With `kube_scheduler`, upstream kube-scheduler binds the pods that name
/// it, beside Muster's (for comparing the two on one cluster).
#[tokio::test]
async fn real_cluster_kube_scheduler_binds_a_plain_pod() {
    let options = rc::Options {
        kube_scheduler: true,
        ..Default::default()
    };
    let env = rc::cluster_with(options, vec![rc::nodes(1, "4")]).await;
    rc::create_pods(
        &env,
        "default",
        vec![rc::pod("plain", "1", "default-scheduler", None)],
    )
    .await;
    let pods = rc::wait_pods_or_describe(&env, "default", GUARD, |p| {
        p.get("plain").is_some_and(rc::running)
    })
    .await;
    assert!(rc::bound(&pods["plain"]));
}
