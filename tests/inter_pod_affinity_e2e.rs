//! End-to-end: inter-pod affinity and anti-affinity through the simulated
//! cluster and the daemon — pods spread by required anti-affinity, a gang
//! of mutually anti-affine members (spread one per node, or held whole when
//! the cluster is too small), affinity to a labelled pod's zone, and a
//! `namespaceSelector` that picks a labelled namespace.

use std::collections::BTreeMap;

use crate::e2e::*;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, PostParams};
use kube::core::ObjectMeta;
use muster::kwok::templates::NodeTemplate;
use serde_json::{Value, json};

const ZONE: &str = "topology.kubernetes.io/zone";
const HOSTNAME: &str = "kubernetes.io/hostname";

/// `pod(...)` with `labels`, and `affinity` as `spec.affinity`.
fn with_affinity(mut p: Pod, labels: &[(&str, &str)], affinity: Value) -> Pod {
    p.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    if let Some(spec) = p.spec.as_mut() {
        spec.affinity = Some(serde_json::from_value(affinity).expect("affinity json"));
    }
    p
}

/// Required anti-affinity to pods labelled `app=<app>`, by `key`.
fn anti_affinity(app: &str, key: &str) -> Value {
    json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}]}})
}

fn pinned_to_zone(mut p: Pod, zone: &str) -> Pod {
    if let Some(spec) = p.spec.as_mut() {
        spec.node_selector = Some(BTreeMap::from([(ZONE.to_string(), zone.to_string())]));
    }
    p
}

/// `n` nodes named `<zone>-<i>` labelled with `zone`.
fn zone(zone: &str, n: usize) -> NodeTemplate {
    let mut t = nodes(n, "4");
    t.name_prefix = zone.to_string();
    t.labels.insert(ZONE.into(), zone.into());
    t
}

fn node_of(pods: &BTreeMap<String, Pod>, name: &str) -> String {
    pods[name]
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .expect("bound")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anti_affine_pods_land_on_distinct_nodes() {
    let env = cluster(vec![nodes(2, "4")]).await;
    let daemon = daemon(&env, test_config("")).await;
    let web = |name: &str| {
        with_affinity(
            pod(name, "100m", "muster", None),
            &[("app", "web")],
            anti_affinity("web", HOSTNAME),
        )
    };
    create_pods(&env, "default", vec![web("web-0"), web("web-1")]).await;
    let pods = wait_pods(&env, "default", |p| names_bound(p, "web-").len() == 2).await;
    assert_ne!(node_of(&pods, "web-0"), node_of(&pods, "web-1"));
    daemon.shutdown().await.expect("clean shutdown");
}

fn spread_member(name: &str) -> Pod {
    with_affinity(
        pod(name, "100m", "muster", Some("spread")),
        &[("app", "spread")],
        anti_affinity("spread", HOSTNAME),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anti_affine_gang_spreads_one_member_per_node() {
    let env = cluster(vec![nodes(3, "4")]).await;
    let daemon = daemon(&env, test_config("")).await;
    create_podgroup(&env, "default", "spread", 3, None).await;
    let members = (0..3).map(|i| spread_member(&format!("spread-{i}")));
    create_pods(&env, "default", members.collect()).await;
    let pods = wait_pods(&env, "default", |p| names_bound(p, "spread-").len() == 3).await;
    let mut used: Vec<String> = (0..3)
        .map(|i| node_of(&pods, &format!("spread-{i}")))
        .collect();
    used.sort();
    used.dedup();
    assert_eq!(used.len(), 3, "one member per node: {used:?}");
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anti_affine_gang_larger_than_the_cluster_stays_whole_pending() {
    let env = cluster(vec![nodes(2, "4")]).await;
    let daemon = daemon(&env, test_config("")).await;
    create_podgroup(&env, "default", "spread", 3, Some(5)).await;
    let members = (0..3).map(|i| spread_member(&format!("spread-{i}")));
    create_pods(&env, "default", members.collect()).await;
    let reason = "didn't match pod anti-affinity rules";
    let e = wait_event(&env, "default", |e| {
        e.reason.as_deref() == Some("FailedScheduling")
            && e.message.as_deref().is_some_and(|m| m.contains(reason))
    })
    .await;
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    let pods = wait_pods(&env, "default", |p| {
        p.values()
            .any(|p| pod_condition_message(p).is_some_and(|m| m.contains(reason)))
    })
    .await;
    assert!(
        names_bound(&pods, "spread-").is_empty(),
        "no member of a gang that cannot spread is bound"
    );
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_affinity_follows_a_labelled_pod_to_its_zone() {
    let env = cluster(vec![zone("zone-a", 2), zone("zone-b", 2)]).await;
    let daemon = daemon(&env, test_config("")).await;
    let db = with_affinity(
        pinned_to_zone(pod("db", "100m", "muster", None), "zone-b"),
        &[("app", "db")],
        json!({}),
    );
    create_pods(&env, "default", vec![db]).await;
    wait_pods(&env, "default", |p| names_bound(p, "db").len() == 1).await;
    let affinity = json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": ZONE}]}});
    let webs = (0..3)
        .map(|i| {
            with_affinity(
                pod(&format!("web-{i}"), "100m", "muster", None),
                &[],
                affinity.clone(),
            )
        })
        .collect();
    create_pods(&env, "default", webs).await;
    let pods = wait_pods(&env, "default", |p| names_bound(p, "web-").len() == 3).await;
    for i in 0..3 {
        let node = node_of(&pods, &format!("web-{i}"));
        assert!(node.starts_with("zone-b"), "web-{i} on {node}");
    }
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_selector_picks_the_labelled_namespace() {
    let env = cluster(vec![zone("zone-a", 2), zone("zone-b", 2)]).await;
    let namespaces: Api<Namespace> = Api::all(env.client.clone());
    for (name, labels) in [("team-a", Some(("team", "a"))), ("team-b", None)] {
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: labels.map(|(k, v)| BTreeMap::from([(k.to_string(), v.to_string())])),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .expect("namespace");
    }
    let daemon = daemon(&env, test_config("")).await;
    wait_ready(&daemon).await;
    // A cache in each namespace, in different zones.
    for (ns, z) in [("team-a", "zone-b"), ("team-b", "zone-a")] {
        let cache = with_affinity(
            pinned_to_zone(pod("cache", "100m", "muster", None), z),
            &[("app", "cache")],
            json!({}),
        );
        create_pods(&env, ns, vec![cache]).await;
        wait_pods(&env, ns, |p| names_bound(p, "cache").len() == 1).await;
    }
    let affinity = json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "cache"}},
         "namespaceSelector": {"matchLabels": {"team": "a"}}, "topologyKey": ZONE}]}});
    let apps = (0..3)
        .map(|i| {
            with_affinity(
                pod(&format!("app-{i}"), "100m", "muster", None),
                &[],
                affinity.clone(),
            )
        })
        .collect();
    create_pods(&env, "default", apps).await;
    let pods = wait_pods(&env, "default", |p| names_bound(p, "app-").len() == 3).await;
    for i in 0..3 {
        let node = node_of(&pods, &format!("app-{i}"));
        assert!(
            node.starts_with("zone-b"),
            "app-{i} on {node}: team-a's cache is in zone-b"
        );
    }
    daemon.shutdown().await.expect("clean shutdown");
}
