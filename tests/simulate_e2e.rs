//! End-to-end: a small scenario through the `muster simulate` library entry
//! point (in-process cluster and scheduler), its summary checked against what
//! the simulated cluster actually holds.

use crate::e2e;
use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use muster::apiserver::SimConfig;
use muster::runner::summary as report;
use muster::scenario::Outcome;
use muster::scenario::Scenario;
use muster::scenario::manifests::SCENARIO_LABEL;
use muster::simulate::Simulation;

const SCENARIO: &str = r#"
name: e2e-small
timeoutSeconds: 40
nodes:
  - {namePrefix: n, count: 2, capacity: {cpu: 4, memory: 16Gi, pods: 20}}
namespaces: [team]
workloads:
  - gang:
      namePrefix: fits
      namespace: team
      size: 3
      requests: {cpu: 1}
      expect: {outcome: bound}
  - gang:
      namePrefix: unfit
      namespace: team
      size: 2
      requests: {cpu: 8}
      timeoutSeconds: 2
      expect: {outcome: timedOut}
  - pods:
      namePrefix: plain
      count: 3
      requests: {cpu: 500m}
      expect: {outcome: bound}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summary_matches_the_cluster_and_the_unfit_gang_times_out() {
    let scenario = Scenario::parse(SCENARIO, "e2e-small").expect("scenario parses");
    let sim = Simulation::start(
        SimConfig::default().pod_start_delay(Duration::from_millis(10)),
        e2e::test_config(""),
    )
    .await
    .expect("simulation starts");
    // The run ends on watch events (all settled) or the unfit gang's timeout;
    // the hang guard only stops a broken run.
    let summary = tokio::time::timeout(e2e::HANG_GUARD, sim.run(&scenario, &mut std::io::sink()))
        .await
        .expect("run ends before the hang guard")
        .expect("scenario runs");

    let client = sim.cluster.client().expect("client");
    let selector = ListParams::default().labels(&format!("{SCENARIO_LABEL}=e2e-small"));
    let pods = Api::<Pod>::all(client.clone())
        .list(&selector)
        .await
        .expect("list pods");
    let bound: BTreeMap<String, bool> = pods
        .items
        .iter()
        .map(|p| {
            let name = p.metadata.name.clone().unwrap_or_default();
            (
                name,
                p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some(),
            )
        })
        .collect();
    let nodes = Api::<Node>::all(client)
        .list(&selector)
        .await
        .expect("list nodes");

    assert_eq!(nodes.items.len(), 2, "the scenario created its nodes");
    assert_eq!(summary.totals.pods_created, pods.items.len());
    assert_eq!(summary.totals.pods_created, 8);
    assert_eq!(
        summary.totals.pods_bound,
        bound.values().filter(|b| **b).count()
    );
    assert_eq!(summary.totals.pods_bound, 6, "fits (3) and plain (3)");

    let gang = |name: &str| {
        summary
            .gangs
            .iter()
            .find(|g| g.name == name)
            .unwrap_or_else(|| panic!("gang {name} in the summary"))
    };
    assert_eq!(gang("fits-0").outcome, Outcome::Bound);
    assert!(gang("fits-0").quorum_to_bound.is_some());
    let unfit = gang("unfit-0");
    assert_eq!(unfit.outcome, Outcome::TimedOut);
    assert_eq!(unfit.bound, 0);
    assert!(
        unfit.condition.as_ref().is_some_and(|c| !c.status),
        "the scheduler said why: {:?}",
        unfit.condition
    );
    assert_eq!(summary.pods[0].outcome, Outcome::Bound);

    // No partial gang, judged from the cluster itself.
    for g in &summary.gangs {
        let members_bound = bound
            .iter()
            .filter(|(name, b)| name.starts_with(&format!("{}-", g.name)) && **b)
            .count();
        assert!(
            members_bound == 0 || members_bound >= g.min_count as usize,
            "gang {} partially bound: {members_bound}",
            g.name
        );
        assert_eq!(members_bound, g.bound, "summary agrees with the cluster");
    }
    assert!(summary.violations.is_empty(), "{:?}", summary.violations);
    assert!(
        report::failures(&summary).is_empty(),
        "{}",
        report::render(&summary)
    );
    assert!(report::render(&summary).contains("every expectation holds"));

    sim.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scenario_for_an_unserved_scheduler_is_refused() {
    let text = SCENARIO.replace("timeoutSeconds: 40", "schedulerName: someone-else");
    let scenario = Scenario::parse(&text, "other").expect("scenario parses");
    let sim = Simulation::start(SimConfig::default(), e2e::test_config(""))
        .await
        .expect("simulation starts");
    let err = sim
        .run(&scenario, &mut std::io::sink())
        .await
        .expect_err("refused");
    assert!(err.to_string().contains("someone-else"), "{err:#}");
    sim.shutdown().await.expect("clean shutdown");
}
