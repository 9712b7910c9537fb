//! The wire shape of `kubescheduler.config.k8s.io/v1` `KubeSchedulerConfiguration`,
//! restricted to the fields Muster honours. Every struct denies unknown fields so
//! a typo is a startup error that names it instead of a silently ignored setting.
//! The `plugins` and `pluginConfig` shapes belong to the plugin registry
//! (`crate::plugins::merge`), and each plugin's args to the plugin.

use serde::Deserialize;

use crate::plugins::{PluginConfigSpec, PluginsSpec};

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
    pub plugins: Option<PluginsSpec>,
    #[serde(default)]
    pub plugin_config: Vec<PluginConfigSpec>,
}
