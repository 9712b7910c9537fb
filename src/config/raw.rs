//! The wire shape of `kubescheduler.config.k8s.io/v1` `KubeSchedulerConfiguration`,
//! restricted to the fields Muster honours. Every struct denies unknown fields so
//! a typo is a startup error that names it instead of a silently ignored setting.

use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawConfig {
    pub api_version: Option<String>,
    pub kind: Option<String>,
    pub parallelism: Option<i64>,
    pub leader_election: Option<RawLeaderElection>,
    pub client_connection: Option<RawClientConnection>,
    pub percentage_of_nodes_to_score: Option<i64>,
    pub pod_initial_backoff_seconds: Option<i64>,
    pub pod_max_backoff_seconds: Option<i64>,
    #[serde(default)]
    pub profiles: Vec<RawProfile>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawLeaderElection {
    pub leader_elect: Option<bool>,
    pub lease_duration: Option<String>,
    pub renew_deadline: Option<String>,
    pub retry_period: Option<String>,
    pub resource_lock: Option<String>,
    pub resource_name: Option<String>,
    pub resource_namespace: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawClientConnection {
    pub kubeconfig: Option<String>,
    pub qps: Option<f64>,
    pub burst: Option<i64>,
    // Accepted for compatibility; Muster always speaks JSON.
    #[allow(dead_code)]
    pub content_type: Option<String>,
    #[allow(dead_code)]
    pub accept_content_types: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawProfile {
    pub scheduler_name: Option<String>,
    pub percentage_of_nodes_to_score: Option<i64>,
    pub plugins: Option<RawPlugins>,
    #[serde(default)]
    pub plugin_config: Vec<RawPluginConfig>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawPlugins {
    pub multi_point: Option<RawPluginSet>,
    pub pre_enqueue: Option<RawPluginSet>,
    pub queue_sort: Option<RawPluginSet>,
    pub pre_filter: Option<RawPluginSet>,
    pub filter: Option<RawPluginSet>,
    pub post_filter: Option<RawPluginSet>,
    pub pre_score: Option<RawPluginSet>,
    pub score: Option<RawPluginSet>,
    pub reserve: Option<RawPluginSet>,
    pub permit: Option<RawPluginSet>,
    pub pre_bind: Option<RawPluginSet>,
    pub bind: Option<RawPluginSet>,
    pub post_bind: Option<RawPluginSet>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawPluginSet {
    #[serde(default)]
    pub enabled: Vec<RawPlugin>,
    #[serde(default)]
    pub disabled: Vec<RawPlugin>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawPlugin {
    pub name: String,
    pub weight: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawPluginConfig {
    pub name: String,
    #[serde(default)]
    pub args: serde_json::Value,
}

// ----- plugin args -----

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawNodeResourcesFitArgs {
    // Accepted because kube-scheduler allows typed args; they carry no setting.
    #[allow(dead_code)]
    pub api_version: Option<String>,
    #[allow(dead_code)]
    pub kind: Option<String>,
    #[serde(default)]
    pub ignored_resources: Vec<String>,
    #[serde(default)]
    pub ignored_resource_groups: Vec<String>,
    pub scoring_strategy: Option<RawScoringStrategy>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawScoringStrategy {
    #[serde(rename = "type")]
    pub type_: Option<String>,
    pub resources: Option<Vec<RawResourceSpec>>,
    pub requested_to_capacity_ratio: Option<RawRequestedToCapacityRatio>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawResourceSpec {
    pub name: String,
    pub weight: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawRequestedToCapacityRatio {
    #[serde(default)]
    pub shape: Vec<RawUtilizationShapePoint>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawUtilizationShapePoint {
    pub utilization: i64,
    pub score: i64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawBalancedAllocationArgs {
    #[allow(dead_code)]
    pub api_version: Option<String>,
    #[allow(dead_code)]
    pub kind: Option<String>,
    pub resources: Option<Vec<RawResourceSpec>>,
}

/// Args of `GangScheduling` (and its alias `Coscheduling`, whose field names
/// scheduler-plugins users already know).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawGangArgs {
    #[allow(dead_code)]
    pub api_version: Option<String>,
    #[allow(dead_code)]
    pub kind: Option<String>,
    pub permit_waiting_time_seconds: Option<i64>,
    pub pod_group_backoff_seconds: Option<i64>,
}
