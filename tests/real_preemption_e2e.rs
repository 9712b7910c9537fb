//! Preemption on a real Kubernetes 1.37 control plane (tests/real_cluster):
//! two low-priority gangs fill two nodes (created bound, as another
//! scheduler would have placed them); a high-priority gang arrives and
//! Muster evicts exactly one low gang, whole. The victims are deleted
//! gracefully and kwok's delete stage finishes them; the high gang binds on
//! the node they freed.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use crate::real_cluster as rc;

const GUARD: std::time::Duration = std::time::Duration::from_secs(40);

const CLASSES: &str = "apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 10
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
";

/// A pod of one core, priority class `class`, in PodGroup `group`, already
/// on `node` when given.
fn pod(name: &str, class: &str, group: &str, node: Option<&str>) -> String {
    let node = node.map_or(String::new(), |n| format!("\n  nodeName: {n}"));
    format!(
        "apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  schedulerName: muster
  priorityClassName: {class}
  terminationGracePeriodSeconds: 1
  schedulingGroup: {{podGroupName: {group}}}{node}
  containers:
  - name: main
    image: busybox
    resources: {{requests: {{cpu: \"1\", memory: 100Mi}}}}
---
"
    )
}

fn podgroup(name: &str, class: &str) -> String {
    format!(
        "apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {{name: {name}, namespace: default}}
spec:
  priorityClassName: {class}
  schedulingPolicy:
    gang: {{minCount: 2}}
---
"
    )
}

fn nodes_of(pods: &BTreeMap<String, Pod>, prefix: &str) -> Vec<String> {
    pods.iter()
        .filter(|(n, p)| n.starts_with(prefix) && rc::bound(p))
        .filter_map(|(_, p)| p.spec.as_ref()?.node_name.clone())
        .collect()
}

fn count(pods: &BTreeMap<String, Pod>, prefix: &str) -> usize {
    pods.keys().filter(|n| n.starts_with(prefix)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_high_priority_gang_evicts_exactly_one_whole_low_gang() {
    let mut two = rc::nodes(2, "2");
    two.name_prefix = "n".to_string();
    let env = rc::cluster(vec![two]).await;
    let k = rc::kubectl(&env);
    k.apply(CLASSES).await;
    let d = rc::daemon(&env, rc::test_config("")).await;
    rc::wait_ready(&d).await;

    // n-0: gang lowa (2 x 1 core); n-1: gang lowb. Both full.
    let mut low = podgroup("lowa", "low") + &podgroup("lowb", "low");
    for (g, n) in [("lowa", "n-0"), ("lowb", "n-1")] {
        for i in 0..2 {
            low += &pod(&format!("{g}-{i}"), "low", g, Some(n));
        }
    }
    k.apply(&low).await;
    rc::wait_pods_or_describe(&env, "default", GUARD, |p| {
        p.len() == 4 && p.values().all(rc::running)
    })
    .await;

    let mut high = podgroup("train", "high");
    for i in 0..2 {
        high += &pod(&format!("train-{i}"), "high", "train", None);
    }
    k.apply(&high).await;
    let pods =
        rc::wait_pods_or_describe(&env, "default", GUARD, |p| nodes_of(p, "train-").len() == 2)
            .await;

    // Exactly one low gang went, whole; the other still runs whole, and
    // the high gang is on the node the victim freed.
    let layout: Vec<(String, Option<String>)> = pods
        .iter()
        .map(|(n, p)| (n.clone(), p.spec.as_ref().and_then(|s| s.node_name.clone())))
        .collect();
    let (a, b) = (count(&pods, "lowa-"), count(&pods, "lowb-"));
    assert!(
        matches!((a, b), (2, 0) | (0, 2)),
        "one low gang evicted whole: {layout:?}"
    );
    let freed = if a == 0 { "n-0" } else { "n-1" };
    assert_eq!(nodes_of(&pods, "train-"), [freed, freed], "{layout:?}");
    let victim = if a == 0 { "lowa" } else { "lowb" };
    let e = rc::wait_event(&env, "default", |e| {
        e.reason.as_deref() == Some("Preempted")
            && e.involved_object.kind.as_deref() == Some("Pod")
            && e.involved_object
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with(victim))
    })
    .await;
    assert!(
        e.message
            .as_deref()
            .unwrap_or_default()
            .contains("Preempted by PodGroup default/train"),
        "{e:?}"
    );
    rc::wait_pods_or_describe(&env, "default", GUARD, |p| {
        nodes_of(p, "train-").len() == 2 && p.values().all(rc::running)
    })
    .await;
    d.shutdown().await.expect("daemon stops");
}
