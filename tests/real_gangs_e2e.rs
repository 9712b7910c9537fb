//! Gangs of the Workload API on a real Kubernetes 1.37 control plane
//! (tests/real_cluster): a `scheduling.k8s.io/v1beta1` Workload and the
//! PodGroup made from its template, bound whole by Muster; and a gang held
//! below its quorum, released at its timeout, with the PodGroup conditions
//! Muster writes read back from the real API server.

use serde_json::json;

use crate::real_cluster as rc;

/// Within the e2e helpers' own hang guard, so that a wait that times out
/// says what the cluster looked like.
const GUARD: std::time::Duration = std::time::Duration::from_secs(30);

/// Members placed one per cycle, each reserving its node and waiting at
/// Permit: what a gang timeout releases.
const PER_POD_PROFILE: &str = "profiles:\n- schedulerName: muster\n  pluginConfig:\n  - name: GangScheduling\n    args: {planWholeGangs: false}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_workload_api_gang_is_bound_whole() {
    let env = rc::cluster(vec![rc::nodes(3, "4")]).await;
    let d = rc::daemon(&env, rc::test_config("")).await;
    rc::wait_ready(&d).await;

    // A Workload with one gang template, and the PodGroup made from it (as
    // a workload controller writes them).
    let workload = rc::resource("scheduling.k8s.io", "v1beta1", "Workload", "workloads");
    rc::create_object(
        &env,
        &workload,
        Some("default"),
        json!({
            "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
            "metadata": {"name": "training", "namespace": "default"},
            "spec": {"podGroupTemplates": [
                {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 3}}}
            ]}
        }),
    )
    .await;
    rc::create_object(
        &env,
        &rc::podgroup_resource(),
        Some("default"),
        json!({
            "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "training-workers", "namespace": "default"},
            "spec": {
                "workloadRef": {"workloadName": "training", "templateName": "workers"},
                "schedulingPolicy": {"gang": {"minCount": 3}}
            }
        }),
    )
    .await;
    // Three cores each on nodes of four: one member per node.
    let pods = (0..3)
        .map(|i| rc::pod(&format!("w-{i}"), "3", "muster", Some("training-workers")))
        .collect();
    rc::create_pods(&env, "default", pods).await;

    let pods = rc::wait_pods_or_describe(&env, "default", GUARD, |p| {
        rc::names_bound(p, "w-").len() == 3
    })
    .await;
    let nodes: std::collections::BTreeSet<_> = pods
        .values()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    assert_eq!(nodes.len(), 3, "one member per node: {nodes:?}");

    let cond = rc::wait_podgroup_condition(
        &env,
        "default",
        "training-workers",
        "PodGroupInitiallyScheduled",
        |c| c["status"] == "True",
    )
    .await;
    assert_eq!(cond["reason"], "Scheduled", "{cond}");
    // Each member has its Scheduled event, naming its UID.
    for name in ["w-0", "w-1", "w-2"] {
        let e = rc::wait_event(&env, "default", |e| {
            e.involved_object.name.as_deref() == Some(name)
                && e.reason.as_deref() == Some("Scheduled")
        })
        .await;
        assert_eq!(e.involved_object.uid, pods[name].metadata.uid, "{e:?}");
    }
    // kwok runs them.
    rc::wait_pods_or_describe(&env, "default", GUARD, |p| {
        p.len() == 3 && p.values().all(rc::running)
    })
    .await;
    d.shutdown().await.expect("daemon stops");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_gang_below_quorum_is_held_then_released_at_its_timeout() {
    let env = rc::cluster(vec![rc::nodes(3, "4")]).await;
    let d = rc::daemon(&env, rc::test_config(PER_POD_PROFILE)).await;
    rc::wait_ready(&d).await;
    // minCount 3, a one-second gang timeout.
    rc::create_podgroup(&env, "default", "slow", 3, Some(1)).await;
    let members = (0..2)
        .map(|i| rc::pod(&format!("slow-{i}"), "1", "muster", Some("slow")))
        .collect();
    rc::create_pods(&env, "default", members).await;

    // Two of three: held, and the PodGroup says why. The condition is
    // written when the gang goes short of its quorum and not again while it
    // stays short: "1 of 3" or "2 of 3" as the two pods reach Muster in one
    // batch of watch events or two.
    let cond =
        rc::wait_podgroup_condition(&env, "default", "slow", "PodGroupInitiallyScheduled", |c| {
            c["message"]
                .as_str()
                .is_some_and(|m| m.ends_with(" of 3 members observed"))
        })
        .await;
    assert_eq!(cond["status"], "False", "{cond}");
    assert_eq!(cond["reason"], "Unschedulable", "{cond}");
    let pods = rc::wait_pods_or_describe(&env, "default", GUARD, |p| {
        ["slow-0", "slow-1"].iter().all(|n| {
            p.get(*n)
                .and_then(rc::pod_condition_message)
                .is_some_and(|m| m == "waiting for 2/3 pods of PodGroup default/slow")
        })
    })
    .await;
    assert!(rc::names_bound(&pods, "slow-").is_empty());

    // The third exists but is held by a scheduling gate: the two others
    // reserve, wait at Permit, and are released at the timeout.
    rc::create_pods(
        &env,
        "default",
        vec![rc::gated(rc::pod("slow-2", "1", "muster", Some("slow")))],
    )
    .await;
    for name in ["slow-0", "slow-1"] {
        let e = rc::wait_event(&env, "default", |e| {
            e.involved_object.name.as_deref() == Some(name)
                && e.type_.as_deref() == Some("Warning")
                && e.message
                    .as_deref()
                    .is_some_and(|m| m.contains("timed out"))
        })
        .await;
        assert_eq!(e.reason.as_deref(), Some("FailedScheduling"), "{e:?}");
    }
    let cond =
        rc::wait_podgroup_condition(&env, "default", "slow", "PodGroupInitiallyScheduled", |c| {
            c["reason"] == "Unschedulable"
                && c["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("timed out"))
        })
        .await;
    assert_eq!(cond["status"], "False", "{cond}");
    // The real server keeps a condition's fields as metav1.Condition wants them.
    assert!(cond["lastTransitionTime"].as_str().is_some(), "{cond}");
    assert!(rc::names_bound(&rc::list_pods(&env, "default").await, "slow-").is_empty());
    d.shutdown().await.expect("daemon stops");
}
