//! Honest `Unschedulable` end to end on the simulated cluster: each pending
//! pod's `PodScheduled=False` reason as written to the API. Only the gang
//! that no set of nodes can hold is `Unschedulable` (what cluster-autoscaler
//! and Karpenter scale for); members waiting for their definition, their
//! quorum, or behind Kueue's admission gate say so with their own reasons.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use crate::e2e::{self, test_config};

fn reason(p: &Pod) -> Option<String> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")
        .and_then(|c| c.reason.clone())
}

/// A member of Kueue's pod group `group` (of `total`), held by Kueue's
/// admission gate as Kueue creates it while its workload waits for quota.
fn kueue_member(name: &str, group: &str, total: u32) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name,
                     "labels": {"kueue.x-k8s.io/pod-group-name": group},
                     "annotations": {"kueue.x-k8s.io/pod-group-total-count": total.to_string()}},
        "spec": {"schedulerName": "muster",
                 "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
                 "containers": [{"name": "main", "image": "busybox",
                                 "resources": {"requests": {"cpu": "1", "memory": "100Mi"}}}]}
    }))
    .expect("pod json")
}

fn reasons(pods: &BTreeMap<String, Pod>) -> BTreeMap<String, Option<String>> {
    pods.iter().map(|(n, p)| (n.clone(), reason(p))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_gang_short_of_capacity_is_unschedulable() {
    let env = e2e::cluster(vec![e2e::nodes(2, "4")]).await;
    let d = e2e::daemon(&env, test_config("")).await;
    e2e::wait_ready(&d).await;

    // Needs 3 whole nodes of 2: capacity is missing.
    e2e::create_podgroup(&env, "default", "big", 3, None).await;
    // Quorum of 3, one member created.
    e2e::create_podgroup(&env, "default", "short", 3, None).await;
    let mut pods: Vec<Pod> = (0..3)
        .map(|i| e2e::pod(&format!("big-{i}"), "4", "muster", Some("big")))
        .collect();
    pods.push(e2e::pod("short-0", "1", "muster", Some("short")));
    // Its PodGroup is never created.
    pods.push(e2e::pod("orphan-0", "1", "muster", Some("absent")));
    // Waiting for Kueue's quota: the admission gate.
    pods.push(kueue_member("queued-0", "queued", 2));
    pods.push(kueue_member("queued-1", "queued", 2));
    // A gang with one member gated (not ready) and one ready.
    e2e::create_podgroup(&env, "default", "half", 2, None).await;
    pods.push(e2e::gated(e2e::pod("half-0", "1", "muster", Some("half"))));
    pods.push(e2e::pod("half-1", "1", "muster", Some("half")));
    e2e::create_pods(&env, "default", pods).await;

    let want: BTreeMap<String, Option<String>> = [
        ("big-0", "Unschedulable"),
        ("big-1", "Unschedulable"),
        ("big-2", "Unschedulable"),
        ("short-0", "WaitingForMembers"),
        ("orphan-0", "WaitingForDefinition"),
        ("queued-0", "SchedulingGated"),
        ("queued-1", "SchedulingGated"),
        ("half-0", "SchedulingGated"),
        ("half-1", "WaitingForMembers"),
    ]
    .into_iter()
    .map(|(n, r)| (n.to_string(), Some(r.to_string())))
    .collect();
    let pods = e2e::wait_pods(&env, "default", |p| reasons(p) == want).await;
    assert!(pods.values().all(|p| !e2e::bound(p)));
    // What an autoscaler counts as demand: the big gang alone.
    let demand: Vec<&String> = pods
        .iter()
        .filter(|(_, p)| reason(p).as_deref() == Some("Unschedulable"))
        .map(|(n, _)| n)
        .collect();
    assert_eq!(demand, ["big-0", "big-1", "big-2"]);
    d.shutdown().await.expect("clean shutdown");
}
