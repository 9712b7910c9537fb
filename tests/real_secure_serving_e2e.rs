//! Secure serving on a real Kubernetes 1.37 control plane
//! (tests/real_cluster), under the RBAC Muster ships: the kustomize base
//! (deploy/manifests, rendered by the real kubectl; its two Prometheus
//! Operator objects left out, the cluster has no such CRDs) is applied, the
//! daemon runs as the base's `muster-system/muster` ServiceAccount with the
//! base's scheduler configuration, schedules a gang, and authenticates
//! /metrics readers with real TokenReviews and authorizes them with real
//! SubjectAccessReviews: a user bound to the shipped `muster-metrics-reader`
//! reads /metrics, an unbound user is refused, a request without a token
//! is unauthenticated, and the probes need none.

use muster::daemon::{DaemonOptions, ServingOptions};
use serde_json::Value;

use crate::e2e::{https_get, metric, wait_ready_https};
use crate::real_cluster as rc;

const GUARD: std::time::Duration = std::time::Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_metrics_are_served_to_the_shipped_role_and_refused_to_others() {
    let env = rc::cluster(vec![rc::nodes(2, "4")]).await;
    let k = rc::kubectl(&env);
    let base = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/manifests");
    let rendered = k.ok(&["kustomize", base]).await;
    let docs: Vec<Value> = rendered
        .split("\n---\n")
        .map(|d| serde_norway::from_str::<Value>(d).expect("rendered YAML"))
        .filter(|o| {
            !o["apiVersion"]
                .as_str()
                .is_some_and(|v| v.starts_with("monitoring.coreos.com/"))
        })
        .collect();
    let kinds: Vec<&str> = docs.iter().filter_map(|o| o["kind"].as_str()).collect();
    for kind in [
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "ServiceAccount",
    ] {
        assert!(kinds.contains(&kind), "the base has a {kind}: {kinds:?}");
    }
    let manifest = docs
        .iter()
        .map(|o| serde_json::to_string(o).expect("json"))
        .collect::<Vec<_>>()
        .join("\n---\n");
    k.apply(&manifest).await;
    // alice is bound to the shipped metrics role; bob is not.
    k.ok(&[
        "create",
        "clusterrolebinding",
        "alice-muster-metrics",
        "--clusterrole=muster-metrics-reader",
        "--user=alice",
    ])
    .await;

    // The daemon as the base's ServiceAccount, with the base's configuration.
    let token = k
        .ok(&[
            "-n",
            "muster-system",
            "create",
            "token",
            "muster",
            "--duration=1h",
        ])
        .await;
    let client = env
        .cluster
        .client_with_token("muster-sa", token.trim())
        .await;
    let config_map = docs
        .iter()
        .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "muster-config")
        .expect("the base's muster-config");
    let yaml = config_map["data"]["muster.yaml"]
        .as_str()
        .expect("muster.yaml in the ConfigMap");
    let config = muster::config::SchedulerConfig::from_yaml(yaml).expect("shipped config");
    let mut opts = DaemonOptions::new(config);
    opts.serving = ServingOptions::secure();
    opts.identity = "muster-0".into();
    let d = muster::daemon::start(client, opts)
        .await
        .expect("daemon starts");
    wait_ready_https(&d).await;

    // It schedules under the shipped ClusterRole (and takes its Lease under
    // the shipped Role).
    rc::create_podgroup(&env, "default", "pair", 2, None).await;
    let pods = (0..2)
        .map(|i| rc::pod(&format!("pair-{i}"), "1", "muster", Some("pair")))
        .collect();
    rc::create_pods(&env, "default", pods).await;
    rc::wait_pods_or_describe(&env, "default", GUARD, |p| {
        rc::names_bound(p, "pair-").len() == 2
    })
    .await;
    rc::wait_podgroup_condition(&env, "default", "pair", "PodGroupInitiallyScheduled", |c| {
        c["status"] == "True"
    })
    .await;

    let (code, body) = https_get(d.http_addr, "/metrics", Some(rc::ALICE_TOKEN)).await;
    assert_eq!(code, 200, "alice, bound to muster-metrics-reader: {body}");
    assert!(
        metric(
            &body,
            "scheduler_schedule_attempts_total{profile=\"all\",result=\"scheduled\"}"
        )
        .is_some_and(|n| n >= 2.0),
        "the gang's two binds are counted: {body}"
    );
    let (code, body) = https_get(d.http_addr, "/metrics", Some(rc::BOB_TOKEN)).await;
    assert_eq!(code, 403, "bob, bound to nothing: {body}");
    let (code, _) = https_get(d.http_addr, "/metrics", None).await;
    assert_eq!(code, 401, "no token");
    let (code, _) = https_get(d.http_addr, "/metrics", Some("not-a-token")).await;
    assert_eq!(code, 401, "a token the API server does not know");
    // /debug is not in the metrics role.
    let (code, _) = https_get(d.http_addr, "/debug/leader", Some(rc::ALICE_TOKEN)).await;
    assert_eq!(code, 403, "alice may not read /debug");
    // The admin (system:masters) may.
    let (code, body) = https_get(d.http_addr, "/debug/leader", Some(rc::ADMIN_TOKEN)).await;
    assert_eq!((code, body.as_str()), (200, "leading\n"));
    let (code, _) = https_get(d.http_addr, "/readyz", None).await;
    assert_eq!(code, 200, "probes need no token");
    d.shutdown().await.expect("daemon stops");
}
