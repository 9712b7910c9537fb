//! End-to-end: the simulated cluster and `muster run` (in-process), talking
//! only over HTTP. Each test is one scenario of the daemon's contract.

use crate::e2e::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gang_that_fits_is_bound_together_and_condition_turns_true() {
    let env = cluster(vec![nodes(4, "4")]).await;
    let daemon = daemon(&env, test_config("")).await;
    create_podgroup(&env, "default", "train", 4, None).await;
    create_pods(
        &env,
        "default",
        (0..4)
            .map(|i| pod(&format!("train-{i}"), "2", "muster", Some("train")))
            .collect(),
    )
    .await;

    let pods = wait_pods(&env, "default", |p| names_bound(p, "train-").len() == 4).await;
    assert_eq!(names_bound(&pods, "train-").len(), 4);
    let cond = wait_podgroup_condition(&env, "default", "train", |c| c["status"] == "True").await;
    assert_eq!(cond["reason"], "Scheduled");
    // Events name the pod's UID, which `kubectl describe` selects them by.
    let e = wait_event(&env, "default", |e| {
        e.involved_object.name.as_deref() == Some("train-0")
            && e.reason.as_deref() == Some("Scheduled")
    })
    .await;
    assert_eq!(e.involved_object.uid, pods["train-0"].metadata.uid);
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gang_that_cannot_fit_binds_nobody_until_a_node_is_added() {
    let env = cluster(vec![nodes(2, "4")]).await;
    let daemon = daemon(&env, test_config("")).await;
    create_podgroup(&env, "default", "big", 3, Some(5)).await;
    create_pods(
        &env,
        "default",
        (0..3)
            .map(|i| pod(&format!("big-{i}"), "3", "muster", Some("big")))
            .collect(),
    )
    .await;

    // Every member is told why, and the group condition says so too.
    for i in 0..3 {
        let name = format!("big-{i}");
        let e = wait_event(&env, "default", |e| {
            e.involved_object.name.as_deref() == Some(&name)
                && e.reason.as_deref() == Some("FailedScheduling")
        })
        .await;
        assert_eq!(e.type_.as_deref(), Some("Warning"));
    }
    let cond =
        wait_podgroup_condition(&env, "default", "big", |c| c["reason"] == "Unschedulable").await;
    assert_eq!(cond["reason"], "Unschedulable");
    assert!(cond["message"].as_str().is_some_and(|m| !m.is_empty()));
    assert!(
        names_bound(&list_pods(&env, "default").await, "big-").is_empty(),
        "no member of an unfit gang is bound"
    );

    add_node(&env, "extra", "4").await;
    let pods = wait_pods(&env, "default", |p| names_bound(p, "big-").len() == 3).await;
    assert_eq!(names_bound(&pods, "big-").len(), 3);
    wait_podgroup_condition(&env, "default", "big", |c| c["status"] == "True").await;
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gang_timeout_rejects_every_waiting_member() {
    let env = cluster(vec![nodes(3, "4")]).await;
    // Per pod: the gang cycle reserves nothing for a gang with a gated
    // member (`a_gang_with_a_gated_member_reserves_nothing`).
    let daemon = daemon(&env, test_config(PER_POD_PROFILE)).await;
    create_podgroup(&env, "default", "slow", 3, Some(1)).await;
    let mut members: Vec<_> = (0..2)
        .map(|i| pod(&format!("slow-{i}"), "1", "muster", Some("slow")))
        .collect();
    // The third member exists (so the gate opens) but is held by a scheduling
    // gate: the two others reserve and wait at permit until the timeout.
    members.push(gated(pod("slow-2", "1", "muster", Some("slow"))));
    create_pods(&env, "default", members).await;

    for name in ["slow-0", "slow-1"] {
        let e = wait_event(&env, "default", |e| {
            e.involved_object.name.as_deref() == Some(name)
                && e.type_.as_deref() == Some("Warning")
                && e.message
                    .as_deref()
                    .is_some_and(|m| m.contains("timed out"))
        })
        .await;
        assert_eq!(e.reason.as_deref(), Some("FailedScheduling"), "{e:?}");
    }
    // The condition goes False ("3 of 3 members observed") before the
    // timeout's write lands: wait for the latter.
    let cond = wait_podgroup_condition(&env, "default", "slow", |c| {
        c["reason"] == "Unschedulable"
            && c["message"]
                .as_str()
                .is_some_and(|m| m.contains("timed out"))
    })
    .await;
    assert_eq!(cond["status"], "False", "{cond}");
    assert!(names_bound(&list_pods(&env, "default").await, "slow-").is_empty());
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gangs_each_needing_sixty_percent_never_deadlock_or_split() {
    let env = cluster(vec![nodes(5, "4")]).await;
    let daemon = daemon(&env, test_config("")).await;
    for g in ["a", "b"] {
        create_podgroup(&env, "default", g, 3, Some(30)).await;
    }
    let mut pods: Vec<_> = Vec::new();
    for i in 0..3 {
        // Interleaved creation: the worst case for a naive scheduler.
        pods.push(pod(&format!("a-{i}"), "4", "muster", Some("a")));
        pods.push(pod(&format!("b-{i}"), "4", "muster", Some("b")));
    }
    create_pods(&env, "default", pods).await;

    let pods = wait_pods(&env, "default", |p| {
        names_bound(p, "a-").len() == 3 || names_bound(p, "b-").len() == 3
    })
    .await;
    let (winner, loser) = if names_bound(&pods, "a-").len() == 3 {
        ("a", "b")
    } else {
        ("b", "a")
    };
    // The loser is reported unschedulable, and still has no member bound.
    let loser_member = format!("{loser}-0");
    wait_event(&env, "default", |e| {
        e.involved_object.name.as_deref() == Some(loser_member.as_str())
            && e.reason.as_deref() == Some("FailedScheduling")
    })
    .await;
    let now = list_pods(&env, "default").await;
    assert_eq!(names_bound(&now, &format!("{winner}-")).len(), 3);
    assert!(
        names_bound(&now, &format!("{loser}-")).is_empty(),
        "partial gang: {:?}",
        names_bound(&now, &format!("{loser}-"))
    );
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_pods_beside_gangs_schedule_like_kube_scheduler() {
    let env = cluster(vec![nodes(3, "4")]).await;
    let daemon = daemon(&env, test_config("")).await;
    create_podgroup(&env, "default", "g", 2, None).await;
    let mut pods: Vec<_> = (0..2)
        .map(|i| pod(&format!("g-{i}"), "2", "muster", Some("g")))
        .collect();
    pods.extend((0..4).map(|i| pod(&format!("plain-{i}"), "1", "muster", None)));
    pods.push(pod("too-big", "5", "muster", None));
    create_pods(&env, "default", pods).await;

    let pods = wait_pods(&env, "default", |p| {
        names_bound(p, "g-").len() == 2
            && names_bound(p, "plain-").len() == 4
            && p.get("too-big").and_then(pod_condition_message).is_some()
    })
    .await;
    // kube-scheduler's exact wording for a pod that fits nowhere, with
    // DefaultPreemption's verdict (nothing of a lower priority to evict).
    assert_eq!(
        pod_condition_message(&pods["too-big"]).as_deref(),
        Some(
            "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
        )
    );
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_bound_by_another_scheduler_are_accounted() {
    let env = cluster(vec![nodes(1, "4")]).await;
    // Bound directly (as another scheduler or a DaemonSet would), before Muster starts.
    let mut other = pod("other", "3", "default-scheduler", None);
    other.spec.as_mut().expect("spec").node_name = Some("sim-node-0".into());
    create_pods(&env, "default", vec![other]).await;
    let daemon = daemon(&env, test_config("")).await;
    create_pods(&env, "default", vec![pod("mine", "2", "muster", None)]).await;

    let pods = wait_pods(&env, "default", |p| {
        p.get("mine").and_then(pod_condition_message).is_some()
    })
    .await;
    assert_eq!(
        pod_condition_message(&pods["mine"]).as_deref(),
        Some(
            "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
        )
    );
    assert!(!bound(&pods["mine"]), "node would be overcommitted");
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_while_members_wait_at_permit_leaves_no_partial_gang() {
    let env = cluster(vec![nodes(3, "4")]).await;
    let first = daemon(&env, test_config(PER_POD_PROFILE)).await;
    create_podgroup(&env, "default", "r", 3, Some(600)).await;
    let mut members: Vec<_> = (0..2)
        .map(|i| pod(&format!("r-{i}"), "1", "muster", Some("r")))
        .collect();
    members.push(gated(pod("r-2", "1", "muster", Some("r"))));
    create_pods(&env, "default", members).await;
    // Both ungated members reserved and waiting at permit.
    for name in ["r-0", "r-1"] {
        wait_event(&env, "default", |e| {
            e.involved_object.name.as_deref() == Some(name)
                && e.reason.as_deref() == Some("GangWaiting")
        })
        .await;
    }
    first.kill().await;
    assert!(
        names_bound(&list_pods(&env, "default").await, "r-").is_empty(),
        "reservations are in memory only"
    );

    let second = daemon(&env, test_config(PER_POD_PROFILE)).await;
    wait_ready(&second).await;
    // The new scheduler re-reserves the two members (its own GangWaiting events bump the counts).
    for name in ["r-0", "r-1"] {
        wait_event(&env, "default", |e| {
            e.involved_object.name.as_deref() == Some(name)
                && e.reason.as_deref() == Some("GangWaiting")
                && e.count.unwrap_or(0) >= 2
        })
        .await;
    }
    assert!(names_bound(&list_pods(&env, "default").await, "r-").is_empty());
    ungate(&env, "default", "r-2").await;
    let pods = wait_pods(&env, "default", |p| names_bound(p, "r-").len() == 3).await;
    assert_eq!(names_bound(&pods, "r-").len(), 3);
    second.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_one_leader_and_takeover_after_a_crash() {
    let env = cluster(vec![nodes(4, "4")]).await;
    // A renewDeadline with room for a renewal delayed by a loaded machine:
    // a leader that misses it stands down, which is not what this test is
    // about.
    let election = "leaderElection: {leaderElect: true, leaseDuration: 3s, renewDeadline: 2500ms, retryPeriod: 250ms, resourceNamespace: default}\n";
    let cfg = |extra: &str| {
        muster::config::SchedulerConfig::from_yaml(&format!(
            "podInitialBackoffSeconds: 1\npodMaxBackoffSeconds: 2\n{election}{extra}"
        ))
        .expect("config")
    };
    let a = daemon(&env, cfg("")).await;
    let b = daemon(&env, cfg("")).await;
    create_podgroup(&env, "default", "one", 2, None).await;
    create_pods(
        &env,
        "default",
        (0..2)
            .map(|i| pod(&format!("one-{i}"), "1", "muster", Some("one")))
            .collect(),
    )
    .await;
    wait_pods(&env, "default", |p| names_bound(p, "one-").len() == 2).await;

    let leaders = [&a, &b]
        .iter()
        .filter(|d| d.health.leading.load(std::sync::atomic::Ordering::Relaxed))
        .count();
    assert_eq!(leaders, 1, "exactly one replica leads");
    let (leader, standby) = if a.health.leading.load(std::sync::atomic::Ordering::Relaxed) {
        (a, b)
    } else {
        (b, a)
    };
    // Readiness does not depend on leadership: the synced standby is Ready
    // too (what lets a rolling update keep one replica up); which one leads
    // is a /debug fact.
    for (d, role) in [(&leader, "leading\n"), (&standby, "standby\n")] {
        wait_ready(d).await;
        assert_eq!(
            http_get(d.http_addr, "/debug/leader").await,
            (200, role.into())
        );
    }
    leader.kill().await;

    create_podgroup(&env, "default", "two", 2, None).await;
    create_pods(
        &env,
        "default",
        (0..2)
            .map(|i| pod(&format!("two-{i}"), "1", "muster", Some("two")))
            .collect(),
    )
    .await;
    let pods = wait_pods(&env, "default", |p| names_bound(p, "two-").len() == 2).await;
    assert!(
        standby
            .health
            .leading
            .load(std::sync::atomic::Ordering::Relaxed),
        "the standby took over"
    );
    assert_eq!(
        names_bound(&pods, "one-").len() + names_bound(&pods, "two-").len(),
        4
    );
    // No pod was bound twice: each has exactly one Scheduled event, counted once.
    for name in ["one-0", "one-1", "two-0", "two-1"] {
        let e = wait_event(&env, "default", |e| {
            e.involved_object.name.as_deref() == Some(name)
                && e.reason.as_deref() == Some("Scheduled")
        })
        .await;
        assert_eq!(e.count, Some(1), "{name} scheduled more than once");
    }
    standby.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_expose_the_gang_facts_of_the_scenario() {
    let env = cluster(vec![nodes(2, "4")]).await;
    // Members placed one per cycle, so they wait at Permit and the barrier's
    // metrics (permit wait, timeouts) have something to show.
    let daemon = daemon(&env, test_config(PER_POD_PROFILE)).await;
    create_podgroup(&env, "default", "fits", 2, None).await;
    create_podgroup(&env, "default", "never", 2, Some(1)).await;
    create_pods(
        &env,
        "default",
        (0..2)
            .map(|i| pod(&format!("fits-{i}"), "1", "muster", Some("fits")))
            .collect(),
    )
    .await;
    create_pods(
        &env,
        "default",
        vec![
            pod("never-0", "1", "muster", Some("never")),
            gated(pod("never-1", "1", "muster", Some("never"))),
        ],
    )
    .await;
    wait_pods(&env, "default", |p| names_bound(p, "fits-").len() == 2).await;
    wait_podgroup_condition(&env, "default", "never", |c| c["reason"] == "Unschedulable").await;

    let (code, text) = http_get(daemon.http_addr, "/metrics").await;
    assert_eq!(code, 200);
    assert_eq!(
        metric(&text, "muster_gang_scheduled_total"),
        Some(1.0),
        "{text}"
    );
    assert!(metric(&text, "muster_gang_timeouts_total").is_some());
    assert!(
        metric(
            &text,
            "scheduler_schedule_attempts_total{profile=\"all\",result=\"scheduled\"}"
        )
        .unwrap_or(0.0)
            >= 3.0,
        "{text}"
    );
    assert!(
        metric(&text, "muster_gang_permit_wait_seconds_count").unwrap_or(0.0) >= 1.0,
        "{text}"
    );
    assert!(
        text.contains("muster_api_writes_total{operation=\"bind\",result=\"success\"} 2"),
        "{text}"
    );
    // Waiting messages of the gang that fits are usually dropped when it
    // binds; how many depends on timing, so only the series is checked.
    assert!(
        metric(&text, "muster_api_writes_superseded_total").is_some(),
        "{text}"
    );
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_without_gang_scheduling_binds_members_alone_under_a_rate_limit() {
    let env = cluster(vec![nodes(2, "4")]).await;
    // The engine decides: members of the `solo` profile are ordinary pods,
    // while the `muster` profile's member of the same group waits for its
    // gang. Every write goes through the client-side rate limit.
    let config = test_config(
        "clientConnection: {qps: 20, burst: 2}\nprofiles:\n- schedulerName: muster\n- schedulerName: solo\n  plugins:\n    multiPoint:\n      disabled: [{name: GangScheduling}]\n",
    );
    let daemon = daemon(&env, config).await;
    create_podgroup(&env, "default", "big", 5, None).await;
    let mut pods: Vec<_> = (0..3)
        .map(|i| pod(&format!("solo-{i}"), "1", "solo", Some("big")))
        .collect();
    pods.push(pod("gang-0", "1", "muster", Some("big")));
    create_pods(&env, "default", pods).await;
    let pods = wait_pods(&env, "default", |p| names_bound(p, "solo-").len() == 3).await;
    assert!(
        names_bound(&pods, "gang-").is_empty(),
        "the gang of 5 waits"
    );
    let e = wait_event(&env, "default", |e| {
        e.involved_object.name.as_deref() == Some("solo-2")
            && e.reason.as_deref() == Some("Scheduled")
    })
    .await;
    assert_eq!(e.involved_object.uid, pods["solo-2"].metadata.uid);
    daemon.shutdown().await.expect("clean shutdown");
}

/// Leader fencing (gang-semantics I7): a
/// replica whose lease renewal is older than renewDeadline sends nothing.
/// The dispatcher is driven directly: a closed fence reports the binding
/// failed and the API server never sees it; once renewed, the same binding
/// goes through.
#[tokio::test]
async fn a_closed_leader_fence_drops_writes_before_they_leave() {
    use std::sync::Arc;
    use std::time::Instant;

    use k8s_openapi::api::core::v1::Pod;
    use kube::api::Api;
    use muster::dispatch::{ApiCall, Dispatch};
    use muster::kube::fence::Fence;
    use muster::kube::writer::{Writer, WriterConfig};
    use muster::metrics::Metrics;
    use muster::model::PodKey;

    let env = cluster(vec![nodes(1, "4")]).await;
    create_pods(&env, "default", vec![pod("fenced", "1", "nobody", None)]).await;
    let api: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    let uid: Arc<str> = Arc::from(
        api.get("fenced")
            .await
            .expect("pod")
            .metadata
            .uid
            .unwrap_or_default(),
    );
    let nodes_api: Api<k8s_openapi::api::core::v1::Node> = Api::all(env.client.clone());
    let node: Arc<str> = Arc::from(
        nodes_api
            .list(&Default::default())
            .await
            .expect("nodes")
            .items[0]
            .metadata
            .name
            .clone()
            .unwrap_or_default(),
    );
    let fence = Arc::new(Fence::new(std::time::Duration::from_secs(10)));
    let (tx, mut outcomes) = tokio::sync::mpsc::unbounded_channel();
    let metrics = Arc::new(Metrics::new().expect("metrics"));
    let (writer, dispatcher) = Writer::new(
        env.client.clone(),
        WriterConfig::default(),
        metrics,
        tx,
        fence.clone(),
    );
    tokio::spawn(dispatcher);
    let bind = || {
        Dispatch::immediate(ApiCall::Bind {
            pod: PodKey::new("default", "fenced"),
            uid: uid.clone(),
            node: node.clone(),
            claims: Vec::new(),
        })
    };

    assert!(writer.submit(vec![bind()]));
    let outcome = tokio::time::timeout(HANG_GUARD, outcomes.recv())
        .await
        .expect("an outcome")
        .expect("writer alive");
    let err = outcome.result.expect_err("fenced");
    assert!(err.contains("renewDeadline"), "{err}");
    let p = api.get("fenced").await.expect("pod");
    assert_eq!(p.spec.and_then(|s| s.node_name), None, "nothing was sent");

    fence.renewed(Instant::now());
    assert!(writer.submit(vec![bind()]));
    let outcome = tokio::time::timeout(HANG_GUARD, outcomes.recv())
        .await
        .expect("an outcome")
        .expect("writer alive");
    assert_eq!(outcome.result, Ok(()));
    let p = api.get("fenced").await.expect("pod");
    assert_eq!(p.spec.and_then(|s| s.node_name).as_deref(), Some(&*node));
}

/// The gang cycle: a gang one of whose members is behind a scheduling gate
/// reserves nothing (no member ever says `WaitingAtPermit`); lifting the gate
/// places the whole gang at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_with_a_gated_member_reserves_nothing_until_it_is_ready() {
    let env = cluster(vec![nodes(3, "4")]).await;
    let daemon = daemon(&env, test_config("")).await;
    create_podgroup(&env, "default", "ready", 3, None).await;
    let mut members: Vec<_> = (0..2)
        .map(|i| pod(&format!("ready-{i}"), "1", "muster", Some("ready")))
        .collect();
    members.push(gated(pod("ready-2", "1", "muster", Some("ready"))));
    create_pods(&env, "default", members).await;
    let e = wait_event(&env, "default", |e| {
        e.involved_object.name.as_deref() == Some("ready-0")
            && e.message
                .as_deref()
                .is_some_and(|m| m.contains("to be ready to schedule"))
    })
    .await;
    assert_eq!(e.reason.as_deref(), Some("FailedScheduling"), "{e:?}");
    let pods = list_pods(&env, "default").await;
    assert!(names_bound(&pods, "ready-").is_empty());
    ungate(&env, "default", "ready-2").await;
    wait_pods(&env, "default", |p| names_bound(p, "ready-").len() == 3).await;
    daemon.shutdown().await.expect("clean shutdown");
}

/// The default profile placing gang members one per cycle
/// (`planWholeGangs: false`).
const PER_POD_PROFILE: &str = "profiles:\n- schedulerName: muster\n  pluginConfig:\n  - name: GangScheduling\n    args: {planWholeGangs: false}\n";

/// Bounded under overload: when bindings finish slower than pods
/// can be placed, the loop places at most its bind window ahead of them
/// (16 bindings for one in flight); the other pods wait in the scheduling
/// queue, not as queued writes, and every pod binds in the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placement_waits_for_bindings_when_the_api_server_is_slow() {
    let env = cluster(vec![nodes(4, "64")]).await;
    env.cluster.set_faults(vec![
        "resource=pods/binding,latency-ms=40"
            .parse()
            .expect("fault rule"),
    ]);
    let mut opts = muster::daemon::DaemonOptions::new(test_config(""));
    opts.serving = muster::daemon::ServingOptions::Insecure;
    opts.writer.max_in_flight = 1;
    let daemon = muster::daemon::start(env.client.clone(), opts)
        .await
        .expect("daemon starts");
    wait_ready(&daemon).await;
    let pods = (0..64)
        .map(|i| pod(&format!("p-{i}"), "100m", "muster", None))
        .collect();
    create_pods(&env, "default", pods).await;

    // The gauges are published once a second; read them until one shows
    // pods held back in the active queue while bindings are under way.
    let held_back = async {
        loop {
            let (code, text) = http_get(daemon.http_addr, "/metrics").await;
            assert_eq!(code, 200);
            let gauge = |queue: &str| {
                metric(
                    &text,
                    &format!("scheduler_pending_pods{{queue=\"{queue}\"}}"),
                )
                .unwrap_or(0.0)
            };
            // Assumed pods whose binding is queued, in flight, or done but
            // not yet seen by the informer: the window (16), plus that lag,
            // never all 64 at once.
            assert!(gauge("binding") <= 48.0, "{text}");
            if gauge("active") > 0.0 && gauge("binding") > 0.0 {
                return;
            }
            // The gauges have no event stream; poll a few times a second
            // (bounded by the hang guard).
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(HANG_GUARD, held_back)
        .await
        .expect("pods were held back while bindings ran");
    wait_pods(&env, "default", |p| names_bound(p, "p-").len() == 64).await;
    daemon.shutdown().await.expect("clean shutdown");
}

/// A watch that cannot resume makes its informer re-list, and
/// operators see it. Every watch is cut after 300 ms and every pod resume
/// is told `410 Gone`, so the pod informer re-lists after each cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informer_watch_errors_and_relists_are_counted() {
    let config = muster::apiserver::SimConfig::default()
        .pod_start_delay(std::time::Duration::from_millis(10))
        .with_templates(vec![nodes(1, "4")])
        .with_fault("watch-close-every=300ms".parse().expect("fault rule"))
        .with_fault("resource=pods,resume-gone=1".parse().expect("fault rule"));
    let cluster = muster::apiserver::SimCluster::start(config)
        .await
        .expect("simulated cluster starts");
    let client = cluster.client().expect("client");
    let env = Env { cluster, client };
    let daemon = daemon(&env, test_config("")).await;
    wait_ready(&daemon).await;

    // Counters have no event stream; read them a few times a second
    // (bounded by the hang guard) until the first re-list shows.
    let counted = async {
        loop {
            let (code, text) = http_get(daemon.http_addr, "/metrics").await;
            assert_eq!(code, 200);
            let relists = metric(&text, "muster_informer_relists_total{informer=\"pods\"}");
            let errors = metric(
                &text,
                "muster_informer_watch_errors_total{informer=\"pods\"}",
            );
            if relists.unwrap_or(0.0) >= 1.0 && errors.unwrap_or(0.0) >= 1.0 {
                assert!(metric(&text, "muster_informer_backlog").is_some(), "{text}");
                // Quiet kinds resume: no 410 for them, so no re-list.
                assert_eq!(
                    metric(&text, "muster_informer_relists_total{informer=\"nodes\"}"),
                    None,
                    "{text}"
                );
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(HANG_GUARD, counted)
        .await
        .expect("a re-list is counted");
    // The re-listed cache still schedules (faults off: the helpers' own
    // watches expect a healthy server).
    env.cluster.set_faults(Vec::new());
    create_pods(&env, "default", vec![pod("after", "1", "muster", None)]).await;
    wait_pods(&env, "default", |p| names_bound(p, "after").len() == 1).await;
    daemon.shutdown().await.expect("clean shutdown");
}

/// A daemon with a fault armed in one critical task, ready.
async fn daemon_with_fault(
    env: &Env,
    task: &str,
    kind: muster::daemon::FaultKind,
) -> (
    muster::daemon::RunningDaemon,
    std::sync::Arc<tokio::sync::Notify>,
) {
    let trigger = std::sync::Arc::new(tokio::sync::Notify::new());
    let mut opts = muster::daemon::DaemonOptions::new(test_config(""));
    opts.faults = vec![muster::daemon::InjectedFault {
        task: task.into(),
        kind,
        trigger: trigger.clone(),
    }];
    let daemon = muster::daemon::start(env.client.clone(), opts)
        .await
        .expect("daemon starts");
    wait_ready(&daemon).await;
    (daemon, trigger)
}

/// An informer that panics takes the daemon down, as kube-scheduler exits
/// when a part it cannot do without stops: readiness and liveness fail with
/// the reason while in-flight writes drain, then the daemon stops with an
/// error (`muster run` exits 1 on it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_informer_that_panics_fails_the_probes_and_stops_the_daemon() {
    let env = cluster(vec![nodes(2, "4")]).await;
    // A binding that takes seconds keeps the daemon draining, and serving
    // its probes, after the failure.
    env.cluster.set_faults(vec![
        "resource=pods/binding,latency-ms=8000"
            .parse()
            .expect("fault rule"),
    ]);
    let (daemon, trigger) = daemon_with_fault(&env, "pods", muster::daemon::FaultKind::Panic).await;
    create_pods(&env, "default", vec![pod("slow", "1", "muster", None)]).await;
    let in_flight = async {
        loop {
            let (_, text) = http_get(daemon.http_addr, "/metrics").await;
            if metric(&text, "scheduler_pending_pods{queue=\"binding\"}").unwrap_or(0.0) >= 1.0 {
                return;
            }
            // The gauges are published once a second and have no event
            // stream; poll (bounded by the hang guard).
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(HANG_GUARD, in_flight)
        .await
        .expect("the binding is under way");

    trigger.notify_one();
    let reason = "critical task pods panicked: injected fault";
    let failed = async {
        loop {
            let (code, body) = http_get(daemon.http_addr, "/readyz").await;
            if code == 503 && body.contains("[-] critical tasks running") {
                return body;
            }
            // A probe has no event stream: poll (bounded by the hang guard).
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    let body = tokio::time::timeout(HANG_GUARD, failed)
        .await
        .expect("readiness fails");
    assert!(body.contains(reason), "{body}");
    let (code, body) = http_get(daemon.http_addr, "/livez").await;
    assert_eq!(code, 503, "{body}");
    assert!(body.contains(reason), "{body}");

    let err = tokio::time::timeout(HANG_GUARD, daemon.run_until(std::future::pending()))
        .await
        .expect("the daemon stops by itself")
        .expect_err("the daemon stops with an error");
    assert!(format!("{err:#}").contains(reason), "{err:#}");
}

/// The API writer ending takes the daemon down instead of leaving the loop
/// assuming pods that will never bind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_that_ends_stops_the_daemon_with_its_reason() {
    let env = cluster(vec![nodes(2, "4")]).await;
    let (daemon, trigger) = daemon_with_fault(
        &env,
        muster::daemon::WRITER_TASK,
        muster::daemon::FaultKind::End,
    )
    .await;
    let health = daemon.health.clone();
    trigger.notify_one();
    let err = tokio::time::timeout(HANG_GUARD, daemon.run_until(std::future::pending()))
        .await
        .expect("the daemon stops by itself")
        .expect_err("the daemon stops with an error");
    assert!(
        format!("{err:#}").contains("critical task api-writer ended"),
        "{err:#}"
    );
    assert_eq!(
        health.failed.get().map(String::as_str),
        Some("critical task api-writer ended: the scheduler cannot go on without it")
    );
}
