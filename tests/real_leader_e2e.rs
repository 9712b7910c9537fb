//! Leader election over a real `coordination.k8s.io/v1` Lease on a
//! Kubernetes 1.37 control plane (tests/real_cluster): two replicas, one
//! holds the Lease and schedules; when it crashes the other takes the Lease
//! over once it expires and schedules the next gang, no pod bound twice; a
//! replica that shuts down cleanly gives the Lease up.

use std::sync::atomic::Ordering;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube::runtime::watcher;
use muster::daemon::{DaemonOptions, RunningDaemon};

use crate::real_cluster as rc;

const GUARD: std::time::Duration = std::time::Duration::from_secs(30);

/// A replica with leader election over `kube-system/muster` (the shipped
/// namespace and name) and short timings; a renewDeadline with room for a
/// renewal delayed by a loaded machine.
async fn replica(env: &rc::Env, identity: &str) -> RunningDaemon {
    let config = muster::config::SchedulerConfig::from_yaml(
        "podInitialBackoffSeconds: 1\npodMaxBackoffSeconds: 2\n\
         leaderElection: {leaderElect: true, leaseDuration: 3s, renewDeadline: 2500ms, \
         retryPeriod: 250ms, resourceNamespace: kube-system, resourceName: muster}\n",
    )
    .expect("config");
    let mut opts = DaemonOptions::new(config);
    opts.serving = muster::daemon::ServingOptions::Insecure;
    opts.identity = identity.to_string();
    muster::daemon::start(env.client.clone(), opts)
        .await
        .expect("daemon starts")
}

fn holder(l: &Lease) -> Option<String> {
    l.spec.as_ref()?.holder_identity.clone()
}

/// Watches the Lease `kube-system/muster` until `done` holds for it.
async fn wait_lease<F>(env: &rc::Env, mut done: F) -> Lease
where
    F: FnMut(&Lease) -> bool,
{
    let api: Api<Lease> = Api::namespaced(env.client.clone(), "kube-system");
    let leases = rc::wait_objects(
        api,
        watcher::Config::default().fields("metadata.name=muster"),
        |l| l.get("muster").is_some_and(&mut done),
    )
    .await;
    leases["muster"].clone()
}

async fn gang(env: &rc::Env, name: &str) {
    rc::create_podgroup(env, "default", name, 2, None).await;
    let pods = (0..2)
        .map(|i| rc::pod(&format!("{name}-{i}"), "1", "muster", Some(name)))
        .collect();
    rc::create_pods(env, "default", pods).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_lease_has_one_holder_and_passes_to_the_standby_after_a_crash() {
    let env = rc::cluster(vec![rc::nodes(2, "4")]).await;
    let a = replica(&env, "muster-a").await;
    let b = replica(&env, "muster-b").await;

    let lease = wait_lease(&env, |l| holder(l).is_some_and(|h| !h.is_empty())).await;
    let spec = lease.spec.clone().expect("lease spec");
    assert_eq!(spec.lease_duration_seconds, Some(3), "{spec:?}");
    assert!(
        spec.renew_time.is_some() && spec.acquire_time.is_some(),
        "{spec:?}"
    );
    let first = holder(&lease).expect("holder");

    gang(&env, "one").await;
    rc::wait_pods_or_describe(&env, "default", GUARD, |p| {
        rc::names_bound(p, "one-").len() == 2
    })
    .await;
    let leading: Vec<&str> = [("muster-a", &a), ("muster-b", &b)]
        .iter()
        .filter(|(_, d)| d.health.leading.load(Ordering::Relaxed))
        .map(|(id, _)| *id)
        .collect();
    assert_eq!(leading, [first.as_str()], "the Lease's holder leads, alone");
    let (leader, standby, standby_id) = if first == "muster-a" {
        (a, b, "muster-b")
    } else {
        (b, a, "muster-a")
    };
    for (d, role) in [(&leader, "leading\n"), (&standby, "standby\n")] {
        rc::wait_ready(d).await;
        assert_eq!(
            crate::e2e::http_get(d.http_addr, "/debug/leader").await,
            (200, role.into())
        );
    }

    // A crash keeps the Lease held until it expires; then the standby takes it.
    leader.kill().await;
    let lease = wait_lease(&env, |l| holder(l).as_deref() == Some(standby_id)).await;
    let transitions = lease.spec.as_ref().and_then(|s| s.lease_transitions);
    assert!(transitions.is_some_and(|t| t >= 1), "{lease:?}");
    gang(&env, "two").await;
    let pods = rc::wait_pods_or_describe(&env, "default", GUARD, |p| {
        rc::names_bound(p, "two-").len() == 2
    })
    .await;
    assert!(standby.health.leading.load(Ordering::Relaxed));
    assert_eq!(
        rc::names_bound(&pods, "one-").len() + rc::names_bound(&pods, "two-").len(),
        4
    );
    // No pod was bound twice: each has one Scheduled event, counted once.
    for name in ["one-0", "one-1", "two-0", "two-1"] {
        let e = rc::wait_event(&env, "default", |e| {
            e.involved_object.name.as_deref() == Some(name)
                && e.reason.as_deref() == Some("Scheduled")
        })
        .await;
        assert_eq!(e.count, Some(1), "{name} scheduled more than once");
    }

    // A clean shutdown gives the Lease up.
    standby.shutdown().await.expect("daemon stops");
    wait_lease(&env, |l| holder(l).is_none_or(|h| h.is_empty())).await;
}
