//! `muster cluster` as preemption and `kubectl drain` need it: the Eviction
//! subresource with PodDisruptionBudget checks, PDB status computed from the
//! pods, and graceful termination (kube-rs against the simulated cluster).
//! Everything waits on watches; nothing sleeps.

use crate::common::{code, fast, next, start, until, watch_from_now};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, EvictParams, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::{Value, json};

const VIOLATION: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

async fn first_node(client: &kube::Client) -> String {
    let nodes: Api<Node> = Api::all(client.clone());
    let list = nodes.list(&ListParams::default()).await.unwrap();
    list.items[0].metadata.name.clone().unwrap()
}

/// A pod created on `node` (so the fake kubelet runs it), labelled
/// `app=<app>`, with the given grace and owner.
fn pod(name: &str, app: &str, node: Option<&str>, grace: i64, owner: Option<&ReplicaSet>) -> Pod {
    let mut p = json!({"metadata": {"name": name, "labels": {"app": app}},
        "spec": {"containers": [{"name": "c", "image": "i"}],
                 "terminationGracePeriodSeconds": grace}});
    if let Some(n) = node {
        p["spec"]["nodeName"] = json!(n);
    }
    if let Some(rs) = owner {
        p["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "name": rs.metadata.name, "uid": rs.metadata.uid, "controller": true}]);
    }
    serde_json::from_value(p).unwrap()
}

fn ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Creates the pods and waits (on a watch) until every one is Ready.
async fn running(pods: &Api<Pod>, list: Vec<Pod>) {
    let mut watch = watch_from_now(pods, &WatchParams::default()).await;
    let mut waiting: std::collections::BTreeSet<String> = list
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    for p in list {
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
    while !waiting.is_empty() {
        if let WatchEvent::Modified(p) | WatchEvent::Added(p) = next(&mut watch).await.unwrap()
            && ready(&p)
        {
            waiting.remove(p.metadata.name.as_deref().unwrap());
        }
    }
}

fn budget(name: &str, app: &str, rule: Value) -> PodDisruptionBudget {
    let mut spec = json!({"selector": {"matchLabels": {"app": app}}});
    spec.as_object_mut()
        .unwrap()
        .extend(rule.as_object().unwrap().clone());
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

/// The budget's (expectedPods, desiredHealthy, currentHealthy,
/// disruptionsAllowed) once its status has settled on `want` (watched).
async fn budget_settles(
    pdbs: &Api<PodDisruptionBudget>,
    name: &str,
    want: (i32, i32, i32, i32),
) -> PodDisruptionBudget {
    let figures = |b: &PodDisruptionBudget| {
        b.status.as_ref().map(|s| {
            (
                s.expected_pods.unwrap_or(0),
                s.desired_healthy.unwrap_or(0),
                s.current_healthy.unwrap_or(0),
                s.disruptions_allowed.unwrap_or(0),
            )
        })
    };
    let current = pdbs.get(name).await.unwrap();
    if figures(&current) == Some(want) {
        return current;
    }
    let rv = current.metadata.resource_version.clone().unwrap();
    let mut watch = pdbs
        .watch(
            &WatchParams::default().fields(&format!("metadata.name={name}")),
            &rv,
        )
        .await
        .unwrap()
        .boxed();
    let ev = until(
        &mut watch,
        |ev| matches!(ev, Ok(WatchEvent::Modified(b)) if figures(b) == Some(want)),
    )
    .await;
    match ev {
        Ok(WatchEvent::Modified(b)) => b,
        other => panic!("{other:?}"),
    }
}

/// A client that does not retry 429s (kube's default retries them for
/// minutes), so a refused eviction is seen as it is answered.
fn no_retry(cluster: &muster::apiserver::SimCluster) -> kube::Client {
    let mut config = muster::apiserver::kubeconfig::config(cluster.addr());
    config.default_retry = false;
    kube::Client::try_from(config).unwrap()
}

fn eviction_error(r: kube::Result<kube::core::response::Status>) -> kube::core::Status {
    match r {
        Err(kube::Error::Api(s)) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn eviction_without_a_budget_deletes_the_pod() {
    let (_cluster, client) = start(fast().with_nodes(1)).await;
    let node = first_node(&client).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    running(&pods, vec![pod("lone", "x", Some(&node), 0, None)]).await;
    pods.evict("lone", &EvictParams::default()).await.unwrap();
    assert_eq!(code(pods.get("lone").await), (404, "NotFound".into()));
    // An unknown pod is a 404.
    assert_eq!(
        code(pods.evict("ghost", &EvictParams::default()).await),
        (404, "NotFound".into())
    );
}

#[tokio::test]
async fn a_budget_allowing_one_admits_one_eviction() {
    let (cluster, _) = start(fast().with_nodes(1)).await;
    let client = no_retry(&cluster);
    let node = first_node(&client).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let pdbs: Api<PodDisruptionBudget> = Api::default_namespaced(client.clone());
    let web: Vec<Pod> = (0..3)
        .map(|i| pod(&format!("web-{i}"), "web", Some(&node), 0, None))
        .collect();
    running(&pods, web).await;
    pdbs.create(
        &PostParams::default(),
        &budget("web", "web", json!({"minAvailable": 2})),
    )
    .await
    .unwrap();
    budget_settles(&pdbs, "web", (3, 2, 3, 1)).await;

    pods.evict("web-0", &EvictParams::default()).await.unwrap();
    let e = eviction_error(pods.evict("web-1", &EvictParams::default()).await);
    assert_eq!(
        (e.code, e.reason.as_str(), e.message.as_str()),
        (429, "TooManyRequests", VIOLATION)
    );
    // The pod survived; the first is gone and the budget settles again.
    pods.get("web-1").await.unwrap();
    assert_eq!(code(pods.get("web-0").await), (404, "NotFound".into()));
    budget_settles(&pdbs, "web", (2, 2, 2, 0)).await;
    // A pod that is not running yet disrupts nothing: evicted regardless.
    pods.create(
        &PostParams::default(),
        &pod("web-new", "web", None, 0, None),
    )
    .await
    .unwrap();
    pods.evict("web-new", &EvictParams::default())
        .await
        .unwrap();
    assert_eq!(code(pods.get("web-new").await), (404, "NotFound".into()));
}

#[tokio::test]
async fn two_budgets_over_one_pod_are_a_server_error() {
    let (_cluster, client) = start(fast().with_nodes(1)).await;
    let node = first_node(&client).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let pdbs: Api<PodDisruptionBudget> = Api::default_namespaced(client.clone());
    running(&pods, vec![pod("db-0", "db", Some(&node), 0, None)]).await;
    for name in ["a", "b"] {
        pdbs.create(
            &PostParams::default(),
            &budget(name, "db", json!({"minAvailable": 0})),
        )
        .await
        .unwrap();
        budget_settles(&pdbs, name, (1, 0, 1, 1)).await;
    }
    let e = eviction_error(pods.evict("db-0", &EvictParams::default()).await);
    assert_eq!(e.code, 500);
    assert_eq!(
        e.message,
        "Internal error occurred: This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    );
    pods.get("db-0").await.unwrap();
}

#[tokio::test]
async fn budget_status_for_integers_and_percentages() {
    let (_cluster, client) = start(fast().with_nodes(1)).await;
    let node = first_node(&client).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let pdbs: Api<PodDisruptionBudget> = Api::default_namespaced(client.clone());
    let sets: Api<ReplicaSet> = Api::default_namespaced(client.clone());
    // Four replicas wanted, three running: the controller's scale is what
    // percentages and maxUnavailable count against.
    let rs: ReplicaSet = serde_json::from_value(json!({"metadata": {"name": "api"},
        "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "api"}},
                 "template": {"metadata": {"labels": {"app": "api"}},
                              "spec": {"containers": [{"name": "c", "image": "i"}]}}}}))
    .unwrap();
    let rs = sets.create(&PostParams::default(), &rs).await.unwrap();
    let api_pods: Vec<Pod> = (0..3)
        .map(|i| pod(&format!("api-{i}"), "api", Some(&node), 0, Some(&rs)))
        .collect();
    running(&pods, api_pods).await;
    // (rule, (expected, desired, healthy, allowed))
    let cases = [
        (json!({"minAvailable": 2}), (3, 2, 3, 1)),
        // 50% of 4 replicas = 2.
        (json!({"minAvailable": "50%"}), (4, 2, 3, 1)),
        // 4 - 1 = 3 must be healthy.
        (json!({"maxUnavailable": 1}), (4, 3, 3, 0)),
        // 30% of 4 = 1.2, rounded up: 2 may be unavailable.
        (json!({"maxUnavailable": "30%"}), (4, 2, 3, 1)),
    ];
    for (i, (rule, want)) in cases.into_iter().enumerate() {
        let name = format!("b{i}");
        pdbs.create(&PostParams::default(), &budget(&name, "api", rule.clone()))
            .await
            .unwrap();
        let b = budget_settles(&pdbs, &name, want).await;
        let status = b.status.unwrap();
        assert_eq!(status.observed_generation, Some(1), "{rule}");
        let c = &status.conditions.unwrap()[0];
        let allowed = want.3 > 0;
        assert_eq!(c.type_, "DisruptionAllowed");
        assert_eq!(c.status, if allowed { "True" } else { "False" });
        assert_eq!(
            c.reason,
            if allowed {
                "SufficientPods"
            } else {
                "InsufficientPods"
            }
        );
        pdbs.delete(&name, &DeleteParams::default()).await.unwrap();
    }
    // A percentage over pods without a controller cannot be computed.
    running(&pods, vec![pod("stray", "stray", Some(&node), 0, None)]).await;
    pdbs.create(
        &PostParams::default(),
        &budget("stray", "stray", json!({"minAvailable": "50%"})),
    )
    .await
    .unwrap();
    let mut watch =
        watch_from_now(&pdbs, &WatchParams::default().fields("metadata.name=stray")).await;
    let failed = |b: &PodDisruptionBudget| {
        b.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.first())
            .is_some_and(|c| {
                c.reason == "SyncFailed" && c.message == "found no controller ref for pod \"stray\""
            })
    };
    let current = pdbs.get("stray").await.unwrap();
    if !failed(&current) {
        let _ = until(
            &mut watch,
            |ev| matches!(ev, Ok(WatchEvent::Modified(b)) if failed(b)),
        )
        .await;
    }
}

#[tokio::test]
async fn graceful_deletion_marks_then_removes_after_the_grace() {
    let (_cluster, client) = start(fast().with_nodes(1)).await;
    let node = first_node(&client).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    running(&pods, vec![pod("slow", "x", Some(&node), 1, None)]).await;
    let mut watch =
        watch_from_now(&pods, &WatchParams::default().fields("metadata.name=slow")).await;
    let marked = pods.delete("slow", &DeleteParams::default()).await.unwrap();
    let marked = marked.left().expect("a graceful delete returns the pod");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert_eq!(marked.metadata.deletion_grace_period_seconds, Some(1));
    match next(&mut watch).await.unwrap() {
        WatchEvent::Modified(p) => {
            assert!(p.metadata.deletion_timestamp.is_some());
            assert_eq!(p.metadata.deletion_grace_period_seconds, Some(1));
        }
        other => panic!("{other:?}"),
    }
    // Still there (terminating) until the fake kubelet removes it.
    assert!(
        pods.get("slow")
            .await
            .is_ok_and(|p| p.metadata.deletion_timestamp.is_some())
    );
    let _ = until(&mut watch, |ev| matches!(ev, Ok(WatchEvent::Deleted(_)))).await;
    assert_eq!(code(pods.get("slow").await), (404, "NotFound".into()));
}

#[tokio::test]
async fn grace_zero_and_unbound_pods_go_at_once() {
    let (_cluster, client) = start(fast().with_nodes(1)).await;
    let node = first_node(&client).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    running(&pods, vec![pod("bound", "x", Some(&node), 30, None)]).await;
    pods.create(&PostParams::default(), &pod("pending", "x", None, 30, None))
        .await
        .unwrap();
    // A request for grace 0 overrides the pod's 30 s.
    let gone = pods
        .delete("bound", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    assert!(gone.is_left());
    assert_eq!(code(pods.get("bound").await), (404, "NotFound".into()));
    // A pod on no node has nothing to stop.
    pods.delete("pending", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(code(pods.get("pending").await), (404, "NotFound".into()));
}

#[tokio::test]
async fn the_grace_cap_bounds_pod_grace() {
    let (_cluster, client) = start(
        fast()
            .with_nodes(1)
            .max_termination_grace(std::time::Duration::ZERO),
    )
    .await;
    let node = first_node(&client).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    running(&pods, vec![pod("capped", "x", Some(&node), 600, None)]).await;
    pods.delete("capped", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(code(pods.get("capped").await), (404, "NotFound".into()));
}

#[tokio::test]
async fn discovery_advertises_the_eviction_subresource() {
    let (_cluster, client) = start(fast()).await;
    let list = client.list_core_api_resources("v1").await.unwrap();
    let eviction = list
        .resources
        .iter()
        .find(|r| r.name == "pods/eviction")
        .expect("pods/eviction is listed");
    assert_eq!(
        (
            eviction.kind.as_str(),
            eviction.group.as_deref(),
            eviction.version.as_deref()
        ),
        ("Eviction", Some("policy"), Some("v1"))
    );
    assert_eq!(eviction.verbs, ["create"]);
}

#[tokio::test]
async fn a_terminated_pod_with_finalizers_waits_for_them() {
    let (_cluster, client) = start(fast().with_nodes(1)).await;
    let node = first_node(&client).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let mut held = pod("held", "x", Some(&node), 1, None);
    held.metadata.finalizers = Some(vec!["muster.dev/test".into()]);
    running(&pods, vec![held]).await;
    let mut watch =
        watch_from_now(&pods, &WatchParams::default().fields("metadata.name=held")).await;
    pods.delete("held", &DeleteParams::default()).await.unwrap();
    // Marked with its grace, then (the grace over) kept with grace 0 for
    // the finalizer.
    let grace = |ev: &kube::Result<WatchEvent<Pod>>| match ev {
        Ok(WatchEvent::Modified(p)) => p.metadata.deletion_grace_period_seconds,
        _ => None,
    };
    assert_eq!(grace(&Ok(next(&mut watch).await.unwrap())), Some(1));
    let _ = until(&mut watch, |ev| grace(ev) == Some(0)).await;
    let clear = json!({"metadata": {"finalizers": null}});
    pods.patch(
        "held",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&clear),
    )
    .await
    .unwrap();
    let _ = until(&mut watch, |ev| matches!(ev, Ok(WatchEvent::Deleted(_)))).await;
}
