//! Top-owner grouping on a real Kubernetes 1.37 control plane
//! (tests/real_cluster): a Job whose pods the real job controller creates is
//! one gang; with room for three of its four pods nothing binds and the Job
//! is told why, with room for four all bind together.

use k8s_openapi::api::core::v1::{Event, Pod};
use muster::daemon::DaemonOptions;

use crate::real_cluster as rc;

const GUARD: std::time::Duration = std::time::Duration::from_secs(30);

fn job_event(reason: &'static str) -> impl FnMut(&Event) -> bool {
    move |e: &Event| {
        e.involved_object.kind.as_deref() == Some("Job")
            && e.involved_object.name.as_deref() == Some("train")
            && e.reason.as_deref() == Some(reason)
    }
}

fn bound_count(pods: &std::collections::BTreeMap<String, Pod>) -> usize {
    pods.values().filter(|p| rc::bound(p)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_job_pods_made_by_the_job_controller_bind_all_or_nothing() {
    let env = rc::cluster(vec![rc::nodes(3, "1")]).await;
    let config = rc::test_config(
        "profiles:
- schedulerName: muster
  pluginConfig:
  - name: GangScheduling
    args: {permitWaitingTimeSeconds: 3, topOwnerGrouping: {enabled: true}}
",
    );
    let mut opts = DaemonOptions::new(config);
    opts.serving = muster::daemon::ServingOptions::Insecure;
    let d = muster::daemon::start(env.client.clone(), opts)
        .await
        .expect("daemon starts");
    rc::wait_ready(&d).await;

    // Four pods of one core each; the job controller makes them.
    rc::kubectl(&env)
        .apply(
            "apiVersion: batch/v1
kind: Job
metadata: {name: train, namespace: default}
spec:
  parallelism: 4
  completions: 4
  template:
    spec:
      schedulerName: muster
      restartPolicy: Never
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: busybox
        resources: {requests: {cpu: '1', memory: 100Mi}}
",
        )
        .await;
    let pods = rc::wait_pods_or_describe(&env, "default", GUARD, |p| p.len() == 4).await;
    for (name, p) in &pods {
        let owner = p
            .metadata
            .owner_references
            .as_ref()
            .and_then(|o| o.iter().find(|o| o.controller == Some(true)));
        assert_eq!(
            owner.map(|o| (o.kind.as_str(), o.name.as_str())),
            Some(("Job", "train")),
            "{name} is the Job's"
        );
    }

    // Room for three of four: the gang is refused whole, and the Job says so.
    let refused = rc::wait_event(&env, "default", |e| {
        e.involved_object.kind.as_deref() == Some("Job")
            && matches!(e.reason.as_deref(), Some("GangTimedOut" | "GangWaiting"))
            && e.type_.as_deref() == Some("Warning")
    })
    .await;
    assert!(
        refused
            .message
            .as_deref()
            .unwrap_or("")
            .starts_with("Job default/train: "),
        "{refused:?}"
    );
    assert_eq!(
        bound_count(&rc::list_pods(&env, "default").await),
        0,
        "nothing binds short of the gang"
    );

    // Room for four: all bind together and run.
    rc::add_node(&env, "extra", "1").await;
    let pods = rc::wait_pods_or_describe(&env, "default", GUARD, |p| bound_count(p) == 4).await;
    assert_eq!(pods.len(), 4);
    rc::wait_event(&env, "default", job_event("GangScheduled")).await;
    d.shutdown().await.expect("daemon stops");
}
