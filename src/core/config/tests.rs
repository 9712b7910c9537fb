use super::*;
use crate::plugins::{NodeResourcesFitArgs, ResourceSpec, ScoringStrategyType};

fn err(yaml: &str) -> ConfigError {
    SchedulerConfig::from_yaml(yaml).expect_err("configuration should be rejected")
}

#[test]
fn empty_document_gives_defaults() {
    let c = SchedulerConfig::from_yaml("").unwrap();
    assert_eq!(c.profiles.len(), 1);
    let p = &c.profiles[0];
    assert_eq!(p.scheduler_name, "muster");
    assert_eq!(
        p.filters().collect::<Vec<_>>(),
        [
            "NodeUnschedulable",
            "NodeName",
            "TaintToleration",
            "NodeAffinity",
            "NodePorts",
            "NodeResourcesFit",
            "VolumeRestrictions",
            "NodeVolumeLimits",
            "VolumeBinding",
            "VolumeZone",
            "PodTopologySpread",
            "InterPodAffinity",
            "DynamicResources"
        ]
    );
    assert_eq!(p.scores().count(), 8);
    assert_eq!(p.gang, Some(GangArgs::default()));
    assert_eq!(c.pod_initial_backoff, Duration::from_secs(1));
    assert_eq!(c.pod_max_backoff, Duration::from_secs(10));
    assert!(c.leader_election.enabled);
    assert_eq!(c, SchedulerConfig::default());
}

#[test]
fn shipped_example_is_valid_and_equals_defaults() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/muster.yaml");
    let c = SchedulerConfig::load(&path).unwrap();
    assert_eq!(
        c,
        SchedulerConfig::default(),
        "config/muster.yaml documents the defaults"
    );
}

#[test]
fn several_profiles_and_plugin_args() {
    let c = SchedulerConfig::from_yaml(
        r#"
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 30
profiles:
- schedulerName: muster
- schedulerName: muster-packed
  percentageOfNodesToScore: 100
  plugins:
    score:
      disabled: [{name: NodeResourcesBalancedAllocation}]
      enabled: [{name: NodeResourcesFit, weight: 5}]
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources: [{name: cpu, weight: 2}, {name: nvidia.com/gpu, weight: 5}]
  - name: Coscheduling
    args: {permitWaitingTimeSeconds: 10, podGroupBackoffSeconds: 0}
"#,
    )
    .unwrap();
    assert_eq!(c.percentage_of_nodes_to_score, Some(30));
    let p = c.profile("muster-packed").unwrap();
    assert_eq!(p.percentage_of_nodes_to_score, Some(100));
    assert_eq!(p.framework.percentage_of_nodes_to_score, Some(100));
    assert_eq!(
        c.profile("muster")
            .unwrap()
            .framework
            .percentage_of_nodes_to_score,
        Some(30),
        "the global value where the profile sets none"
    );
    let strategy = &p
        .plugin_args::<NodeResourcesFitArgs>("NodeResourcesFit")
        .unwrap()
        .scoring_strategy;
    assert_eq!(strategy.kind, ScoringStrategyType::MostAllocated);
    assert_eq!(
        strategy.resources,
        vec![
            ResourceSpec::new("cpu", 2),
            ResourceSpec::new("nvidia.com/gpu", 5)
        ]
    );
    assert!(p.scores().any(|s| s == ("NodeResourcesFit", 5)));
    assert!(
        !p.scores()
            .any(|(n, _)| n == "NodeResourcesBalancedAllocation")
    );
    let gang = p.gang.clone().unwrap();
    assert_eq!(gang.permit_waiting_time, Duration::from_secs(10));
    assert_eq!(gang.group_backoff, Duration::ZERO);
}

#[test]
fn top_owner_grouping_is_opt_in() {
    let c = SchedulerConfig::from_yaml(
        "profiles:\n- pluginConfig:\n  - name: GangScheduling\n    args: {topOwnerGrouping: {enabled: true, kinds: [JobSet, LeaderWorkerSet]}}\n",
    )
    .unwrap();
    let grouping = c.profiles[0].gang.clone().unwrap().top_owner;
    assert!(grouping.enabled);
    assert!(grouping.kinds.contains(crate::model::OwnerKind::JobSet));
    assert!(!grouping.kinds.contains(crate::model::OwnerKind::Job));
    let default = SchedulerConfig::from_yaml("profiles: [{schedulerName: muster}]\n").unwrap();
    assert!(!default.profiles[0].gang.clone().unwrap().top_owner.enabled);
}

#[test]
fn disabling_gang_and_wildcards() {
    let c = SchedulerConfig::from_yaml(
        "profiles:\n- plugins:\n    multiPoint:\n      disabled: [{name: GangScheduling}]\n    score:\n      disabled: [{name: '*'}]\n",
    )
    .unwrap();
    assert_eq!(c.profiles[0].gang, None);
    assert_eq!(c.profiles[0].scores().count(), 0);
    assert_eq!(c.profiles[0].filters().count(), 13);
}

#[test]
fn unknown_field_names_its_path() {
    let e = err(
        "profiles:\n- schedulerName: muster\n  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        typo: 1\n",
    );
    assert_eq!(
        e.path,
        "profiles[0].pluginConfig[0].args.scoringStrategy.typo"
    );
    assert!(e.message.contains("unknown field `typo`"), "{e}");
    let e = err("percentageOfNodesToScor: 5\n");
    assert!(
        e.message
            .contains("unknown field `percentageOfNodesToScor`"),
        "{e}"
    );
}

#[test]
fn bad_values_are_precise() {
    let cases = [
        ("apiVersion: v2\n", "apiVersion", "must be"),
        (
            "percentageOfNodesToScore: 101\n",
            "percentageOfNodesToScore",
            "between 0 and 100",
        ),
        (
            "podInitialBackoffSeconds: 0\n",
            "podInitialBackoffSeconds",
            "between 1 and 86400",
        ),
        (
            "podInitialBackoffSeconds: 20\n",
            "podMaxBackoffSeconds",
            ">= podInitialBackoffSeconds",
        ),
        (
            "leaderElection: {leaseDuration: 5s}\n",
            "leaderElection.renewDeadline",
            "less than leaseDuration",
        ),
        (
            "leaderElection: {retryPeriod: 2x}\n",
            "leaderElection.retryPeriod",
            "invalid unit",
        ),
        (
            "leaderElection: {resourceLock: endpoints}\n",
            "leaderElection.resourceLock",
            "leases",
        ),
        (
            "profiles: [{schedulerName: a}, {schedulerName: a}]\n",
            "profiles[1].schedulerName",
            "duplicate",
        ),
        (
            "profiles: [{schedulerName: ''}]\n",
            "profiles[0].schedulerName",
            "empty",
        ),
        (
            "profiles: [{plugins: {score: {enabled: [{name: NodeAffinity, weight: 500}]}}}]\n",
            "profiles[0].plugins.score.enabled[0].weight",
            "between 1 and 100",
        ),
        (
            "profiles: [{plugins: {filter: {enabled: [{name: Bogus}]}}}]\n",
            "profiles[0].plugins.filter.enabled[0].name",
            "not a plugin Muster knows",
        ),
        (
            "profiles: [{pluginConfig: [{name: NodeName, args: {}}]}]\n",
            "profiles[0].pluginConfig[0].name",
            "no configurable args",
        ),
        (
            "profiles: [{plugins: {preFilter: {disabled: [{name: NodeAffinity}]}}}]\n",
            "profiles[0].plugins.preFilter.disabled[0].name",
            "together",
        ),
        (
            "profiles: [{plugins: {bind: {disabled: [{name: DefaultBinder}]}}}]\n",
            "profiles[0].plugins.bind.disabled[0].name",
            "cannot be disabled",
        ),
        (
            "profiles: [{plugins: {filter: {enabled: [{name: EBSLimits}]}}}]\n",
            "profiles[0].plugins.filter.enabled[0].name",
            "does not implement",
        ),
        (
            "profiles: [{plugins: {score: {enabled: [{name: NodeName}]}}}]\n",
            "profiles[0].plugins.score.enabled[0].name",
            "not a Score plugin",
        ),
        (
            "profiles: [{pluginConfig: [{name: GangScheduling, args: {permitWaitingTimeSeconds: -1}}]}]\n",
            "profiles[0].pluginConfig[0].args.permitWaitingTimeSeconds",
            "between 1 and 86400",
        ),
        (
            "profiles: [{pluginConfig: [{name: GangScheduling, args: {topOwnerGrouping: {enabled: true, kinds: [Job, Deployment]}}}]}]\n",
            "profiles[0].pluginConfig[0].args.topOwnerGrouping.kinds[1]",
            "unknown kind \"Deployment\"",
        ),
        (
            "profiles: [{pluginConfig: [{name: NodeResourcesFit, args: {scoringStrategy: {type: Random}}}]}]\n",
            "profiles[0].pluginConfig[0].args.scoringStrategy.type",
            "LeastAllocated",
        ),
    ];
    for (yaml, path, needle) in cases {
        let e = err(yaml);
        assert_eq!(e.path, path, "{yaml}: {e}");
        assert!(e.message.contains(needle), "{yaml}: {e}");
    }
}

#[test]
fn syntax_error_is_reported_not_panicked() {
    let e = err("profiles: [\n");
    assert!(!e.message.is_empty());
    let e = err("- just\n- a list\n");
    assert!(
        e.to_string().contains("invalid scheduler configuration"),
        "{e}"
    );
}

#[test]
fn missing_file_names_it() {
    let e = SchedulerConfig::load(Path::new("/nonexistent/muster.yaml")).unwrap_err();
    assert!(e.to_string().contains("/nonexistent/muster.yaml"), "{e}");
}
