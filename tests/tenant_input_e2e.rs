//! End-to-end, hostile tenant input (the "Trust" issue): nothing a tenant
//! writes in a pod or a group definition crashes or stalls the scheduler.
//! The simulated cluster and `muster run` talk only over HTTP.

use std::time::Duration;

use crate::e2e::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, PostParams};
use muster::apiserver::{SimCluster, SimConfig};
use serde_json::json;

/// A cluster of `n` nodes of 4 CPUs and 64Gi that stores what a real API
/// server would refuse: the scheduler must not trust that it refused it.
async fn unvalidated_cluster(n: usize) -> Env {
    let config = SimConfig::default()
        .pod_start_delay(Duration::from_millis(10))
        .bookmark_interval(Duration::from_millis(500))
        .with_templates(vec![nodes(n, "4")])
        .validate(false);
    let cluster = SimCluster::start(config).await.expect("cluster starts");
    let client = cluster.client().expect("client");
    Env { cluster, client }
}

fn pod_with(name: &str, containers: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"schedulerName": "muster", "containers": containers}
    }))
    .expect("pod json")
}

/// Two containers of `7Ei` (the sum wraps in 64 bits) and a
/// negative CPU request were bound. Now each is refused with a
/// `PodScheduled=False` condition and a `FailedScheduling` event naming the
/// field, never bound, and the scheduler keeps scheduling other pods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overflowing_and_negative_requests_are_refused_naming_the_field() {
    let env = unvalidated_cluster(2).await;
    let daemon = daemon(&env, test_config("")).await;
    let huge = json!({"requests": {"memory": "7Ei"}});
    create_pods(
        &env,
        "default",
        vec![
            pod_with(
                "wraps",
                json!([{"name": "a", "image": "i", "resources": huge},
                       {"name": "b", "image": "i", "resources": huge}]),
            ),
            pod_with(
                "negative",
                json!([{"name": "a", "image": "i", "resources": {"requests": {"cpu": "-1"}}}]),
            ),
            pod("fine", "1", "muster", None),
        ],
    )
    .await;

    let expected = [
        (
            "wraps",
            "spec.containers[1].resources.requests.memory: sum overflows",
        ),
        (
            "negative",
            "spec.containers[0].resources.requests.cpu: must not be negative",
        ),
    ];
    for (name, field) in expected {
        let e = wait_event(&env, "default", |e| {
            e.involved_object.name.as_deref() == Some(name)
                && e.reason.as_deref() == Some("FailedScheduling")
        })
        .await;
        assert_eq!(e.type_.as_deref(), Some("Warning"));
        let message = e.message.unwrap_or_default();
        assert!(message.contains(field), "{name}: {message}");
    }
    let pods = wait_pods(&env, "default", |p| {
        bound(&p["fine"])
            && expected.iter().all(|(name, _)| {
                p.get(*name)
                    .and_then(pod_condition_message)
                    .is_some_and(|m| m.contains("invalid pod spec"))
            })
    })
    .await;
    for (name, field) in expected {
        let p = &pods[name];
        assert!(!bound(p), "{name} must never be bound");
        let cond = p
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
            .expect("PodScheduled condition");
        assert_eq!(
            (cond.status.as_str(), cond.reason.as_deref()),
            ("False", Some("SchedulerError"))
        );
        assert!(
            cond.message.as_deref().is_some_and(|m| m.contains(field)),
            "{name}: {cond:?}"
        );
    }

    // Still scheduling afterwards.
    create_pods(&env, "default", vec![pod("later", "1", "muster", None)]).await;
    let pods = wait_pods(&env, "default", |p| p.get("later").is_some_and(bound)).await;
    assert!(!bound(&pods["wraps"]) && !bound(&pods["negative"]));
    daemon.shutdown().await.expect("clean shutdown");
}

/// `muster.dev/schedule-timeout-seconds: "9223372036854775807"`
/// panicked the barrier ("overflow when adding duration to instant"). Now the
/// timeout is capped at a day, the gang schedules and the scheduler lives on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_gang_timeout_is_capped_and_the_gang_schedules() {
    let env = cluster(vec![nodes(3, "4")]).await;
    let daemon = daemon(&env, test_config("")).await;
    let group: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "forever", "namespace": "default",
            "annotations": {"muster.dev/schedule-timeout-seconds": "9223372036854775807"}},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}
    }))
    .expect("podgroup json");
    Api::<DynamicObject>::namespaced_with(env.client.clone(), "default", &podgroup_resource())
        .create(&PostParams::default(), &group)
        .await
        .expect("create podgroup");
    // Members arrive one by one: the first ones wait at the barrier with the
    // (capped) deadline, which is where the overflow was.
    for i in 0..3 {
        create_pods(
            &env,
            "default",
            vec![pod(&format!("forever-{i}"), "2", "muster", Some("forever"))],
        )
        .await;
    }
    let pods = wait_pods(&env, "default", |p| names_bound(p, "forever-").len() == 3).await;
    assert_eq!(names_bound(&pods, "forever-").len(), 3);
    wait_podgroup_condition(&env, "default", "forever", |c| c["status"] == "True").await;
    // The tenant is told: a warning on the PodGroup names the field and the cap.
    let capped = wait_event(&env, "default", |e| {
        e.reason.as_deref() == Some("TimeoutCapped")
            && e.involved_object.name.as_deref() == Some("forever")
    })
    .await;
    let message = capped.message.unwrap_or_default();
    assert!(
        message.contains("muster.dev/schedule-timeout-seconds") && message.contains("86400"),
        "{message}"
    );

    create_pods(&env, "default", vec![pod("after", "1", "muster", None)]).await;
    wait_pods(&env, "default", |p| p.get("after").is_some_and(bound)).await;
    daemon.shutdown().await.expect("clean shutdown");
}
