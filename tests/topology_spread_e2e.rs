//! End-to-end: PodTopologySpread against `muster cluster` and the daemon.
//! Zones are node labels (`topology.kubernetes.io/zone`); node names start
//! with their zone, so a pod's zone is read from its node's name.

use std::collections::BTreeMap;

use crate::e2e::*;
use k8s_openapi::api::core::v1::Pod;
use muster::kwok::templates::NodeTemplate;
use serde_json::json;

const ZONE: &str = "topology.kubernetes.io/zone";

/// One template per zone: `count` nodes of `cpu` cores named `<zone>-<i>`.
fn zone_nodes(zone: &str, count: usize, cpu: &str) -> NodeTemplate {
    let mut t = nodes(count, cpu);
    t.name_prefix = zone.to_string();
    t.labels.insert(ZONE.into(), zone.into());
    t
}

/// A pod of `app` requesting one CPU, spreading over zones with `maxSkew` 1
/// (and `minDomains`, when given).
fn spread_pod(name: &str, app: &str, min_domains: Option<u32>, group: Option<&str>) -> Pod {
    let base = pod(name, "1", "muster", group);
    let mut constraint = json!({"maxSkew": 1, "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": app}}});
    if let Some(m) = min_domains {
        constraint["minDomains"] = json!(m);
    }
    let mut v = serde_json::to_value(&base).expect("pod json");
    v["metadata"]["labels"] = json!({"app": app});
    v["spec"]["topologySpreadConstraints"] = json!([constraint]);
    serde_json::from_value(v).expect("pod json")
}

/// Bound pods named `prefix*` per zone.
fn per_zone(pods: &BTreeMap<String, Pod>, prefix: &str) -> BTreeMap<String, usize> {
    let mut zones = BTreeMap::new();
    for (_, p) in pods.iter().filter(|(n, _)| n.starts_with(prefix)) {
        if let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            let zone = node.rsplit_once('-').map_or(node, |(z, _)| z);
            *zones.entry(zone.to_string()).or_default() += 1;
        }
    }
    zones
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zone_spread_fills_zones_evenly_and_a_pod_that_would_skew_stays_pending() {
    // zone-c's one node holds two 1-CPU pods; the others hold eight.
    let env = cluster(vec![
        zone_nodes("zone-a", 1, "8"),
        zone_nodes("zone-b", 1, "8"),
        zone_nodes("zone-c", 1, "2"),
    ])
    .await;
    let daemon = daemon(&env, test_config("")).await;
    let web = |i: usize| spread_pod(&format!("web-{i}"), "web", None, None);

    create_pods(&env, "default", (0..6).map(web).collect()).await;
    let pods = wait_pods(&env, "default", |p| names_bound(p, "web-").len() == 6).await;
    let even: BTreeMap<String, usize> = [("zone-a", 2), ("zone-b", 2), ("zone-c", 2)]
        .into_iter()
        .map(|(z, n)| (z.to_string(), n))
        .collect();
    assert_eq!(per_zone(&pods, "web-"), even);

    // zone-c is full: two more fit (3/3/2), the third would make skew 2.
    create_pods(&env, "default", (6..9).map(web).collect()).await;
    let e = wait_event(&env, "default", |e| {
        e.reason.as_deref() == Some("FailedScheduling")
            && e.message
                .as_deref()
                .is_some_and(|m| m.contains("didn't match pod topology spread constraints"))
    })
    .await;
    let message = e.message.unwrap_or_default();
    assert!(
        message.contains("0/3 nodes are available")
            && message.contains("2 node(s) didn't match pod topology spread constraints")
            && message.contains("1 Insufficient cpu"),
        "{message}"
    );
    let pods = wait_pods(&env, "default", |p| names_bound(p, "web-").len() == 8).await;
    let zones = per_zone(&pods, "web-");
    assert_eq!(zones.get("zone-c"), Some(&2));
    assert_eq!(zones.get("zone-a"), Some(&3));
    assert_eq!(zones.get("zone-b"), Some(&3));
    let pending = pods
        .iter()
        .find(|(n, p)| n.starts_with("web-") && !bound(p))
        .expect("one pod pending");
    assert!(
        pod_condition_message(pending.1)
            .is_some_and(|m| m.contains("didn't match pod topology spread constraints")),
        "{:?}",
        pod_condition_message(pending.1)
    );
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_domains_holds_pods_back_until_enough_zones_exist() {
    let env = cluster(vec![
        zone_nodes("zone-a", 1, "8"),
        zone_nodes("zone-b", 1, "8"),
    ])
    .await;
    let daemon = daemon(&env, test_config("")).await;
    // minDomains 3 with two zones: the minimum counts as 0, so one pod per zone.
    create_pods(
        &env,
        "default",
        (0..3)
            .map(|i| spread_pod(&format!("md-{i}"), "md", Some(3), None))
            .collect(),
    )
    .await;
    wait_event(&env, "default", |e| {
        e.reason.as_deref() == Some("FailedScheduling")
            && e.message.as_deref().is_some_and(|m| {
                m.contains("2 node(s) didn't match pod topology spread constraints")
            })
    })
    .await;
    let pods = list_pods(&env, "default").await;
    assert_eq!(names_bound(&pods, "md-").len(), 2);
    assert_eq!(per_zone(&pods, "md-").len(), 2, "one per zone");

    // A third zone appears: the last pod goes there.
    let mut node: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "zone-c-0", "labels": {ZONE: "zone-c", "kubernetes.io/hostname": "zone-c-0"}},
        "status": {"capacity": {"cpu": "8", "memory": "64Gi", "pods": "110"},
                   "allocatable": {"cpu": "8", "memory": "64Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}
    }))
    .expect("node json");
    node = kube::Api::<k8s_openapi::api::core::v1::Node>::all(env.client.clone())
        .create(&Default::default(), &node)
        .await
        .expect("create node");
    assert!(node.metadata.name.is_some());
    let pods = wait_pods(&env, "default", |p| names_bound(p, "md-").len() == 3).await;
    assert_eq!(per_zone(&pods, "md-").get("zone-c"), Some(&1));
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gangs_members_spread_across_zones_as_they_are_reserved() {
    // Each zone could hold the whole gang; spreading puts one member in each.
    let env = cluster(vec![
        zone_nodes("zone-a", 1, "8"),
        zone_nodes("zone-b", 1, "8"),
        zone_nodes("zone-c", 1, "8"),
    ])
    .await;
    let daemon = daemon(&env, test_config("")).await;
    create_podgroup(&env, "default", "train", 3, None).await;
    create_pods(
        &env,
        "default",
        (0..3)
            .map(|i| spread_pod(&format!("train-{i}"), "train", None, Some("train")))
            .collect(),
    )
    .await;
    let pods = wait_pods(&env, "default", |p| names_bound(p, "train-").len() == 3).await;
    let zones = per_zone(&pods, "train-");
    assert_eq!(zones.len(), 3, "{zones:?}");
    assert!(zones.values().all(|n| *n == 1), "{zones:?}");
    wait_podgroup_condition(&env, "default", "train", |c| c["status"] == "True").await;
    daemon.shutdown().await.expect("clean shutdown");
}
