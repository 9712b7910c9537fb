//! End-to-end: a scenario in phases through the runner against the
//! in-process cluster and scheduler. The gated phase starts only once every
//! pod of the first has been seen bound; its churn workload creates one pod
//! per interval beside a measured workload; throughput is over the measured
//! pods only.

use crate::e2e;
use std::time::Duration;

use muster::apiserver::SimConfig;
use muster::runner::{self, Lines, RunOptions};
use muster::scenario::{Outcome, Scenario};
use muster::simulate::Simulation;

const SCENARIO: &str = r#"
name: e2e-phases
timeoutSeconds: 40
nodes:
  - {namePrefix: n, count: 2, capacity: {cpu: 4, memory: 16Gi, pods: 40}}
workloads:
  - pods: {namePrefix: fill, count: 6, requests: {cpu: 500m}, expect: {outcome: bound}}
  - pods: {namePrefix: churn, count: 3, intervalMilliseconds: 150,
           requests: {cpu: 100m}, start: {after: previousSettled},
           expect: {outcome: bound}}
  - pods: {namePrefix: measured, count: 4, requests: {cpu: 100m}, measured: true,
           expect: {outcome: bound}}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gated_phase_waits_for_the_first_and_churns_at_its_interval() {
    let scenario = Scenario::parse(SCENARIO, "e2e-phases").expect("scenario parses");
    let sim = Simulation::start(
        SimConfig::default().pod_start_delay(Duration::from_millis(10)),
        e2e::test_config(""),
    )
    .await
    .expect("simulation starts");
    let client = sim.cluster.client().expect("client");
    let mut sink = std::io::sink();
    let opts = RunOptions {
        gang: Default::default(),
        concurrency: 8,
        progress: &mut Lines::new(&mut sink),
    };
    let finished = tokio::time::timeout(e2e::HANG_GUARD, runner::run(&client, &scenario, opts))
        .await
        .expect("run ends before the hang guard")
        .expect("scenario runs");

    let summary = &finished.summary;
    assert!(
        runner::summary::failures(summary).is_empty(),
        "{}",
        runner::summary::render(summary)
    );
    assert!(summary.pods.iter().all(|p| p.outcome == Outcome::Bound));
    // Plain pods' timings are in plan order: fill, churn, measured.
    let times = &finished.pods;
    assert_eq!(times.len(), 13);
    let (fill, later) = times.split_at(6);
    let last_fill_bound = fill.iter().filter_map(|p| p.bound).max().expect("bound");
    for p in later {
        let created = p.created.expect("created");
        assert!(
            created >= last_fill_bound,
            "created at {created:?}, before the first phase settled at {last_fill_bound:?}"
        );
    }
    // Three churn pods 150 ms apart: at least two intervals from the first
    // to the last (creation is observed through a watch, so allow jitter).
    let churn: Vec<Duration> = later[..3].iter().filter_map(|p| p.created).collect();
    let spread = churn
        .iter()
        .max()
        .unwrap()
        .saturating_sub(*churn.iter().min().unwrap());
    assert!(
        spread >= Duration::from_millis(250),
        "churn spread {spread:?}"
    );
    assert_eq!(finished.measured_pods.len(), 4, "measured pods only");
    assert_eq!(finished.measured_pods, later[3..].to_vec());

    sim.shutdown().await.expect("shutdown");
}

const PREEMPTED: &str = r#"
name: e2e-preempted
timeoutSeconds: 40
nodes:
  - {namePrefix: n, count: 2, capacity: {cpu: 4, memory: 16Gi, pods: 40}}
workloads:
  - pods: {namePrefix: low, count: 8, requests: {cpu: 900m},
           terminationGracePeriodSeconds: 0, expect: {outcome: boundOrPreempted}}
  - pods: {namePrefix: high, count: 1, priority: 1000, requests: {cpu: 3970m},
           start: {after: previousSettled}, expect: {outcome: bound}}
"#;

/// Pods Muster preempts after they were bound count as preempted and
/// satisfy `boundOrPreempted`: the gated high pod (3970m) fits nowhere, so
/// the daemon evicts one node's four low pods and binds it there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_deleted_after_binding_count_as_preempted() {
    let scenario = Scenario::parse(PREEMPTED, "e2e-preempted").expect("scenario parses");
    let env = e2e::cluster(Vec::new()).await;
    let _daemon = e2e::daemon(&env, e2e::test_config("")).await;
    let mut sink = std::io::sink();
    let opts = RunOptions {
        gang: Default::default(),
        concurrency: 4,
        progress: &mut Lines::new(&mut sink),
    };
    let finished = tokio::time::timeout(e2e::HANG_GUARD, runner::run(&env.client, &scenario, opts))
        .await
        .expect("run ends before the hang guard");
    let finished = finished.expect("scenario runs");

    let summary = &finished.summary;
    let text = runner::summary::render(summary);
    assert!(runner::summary::failures(summary).is_empty(), "{text}");
    let low = &summary.pods[0];
    assert_eq!(low.outcome, Outcome::Preempted, "{text}");
    assert_eq!((low.bound, low.preempted), (8, 4), "{text}");
    assert_eq!(summary.pods[1].outcome, Outcome::Bound, "{text}");
    assert_eq!(summary.totals.pods_preempted, 4);
    assert!(text.contains("PREEMPTED"), "{text}");
}
