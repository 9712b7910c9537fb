//! Muster's integration tests, linked as one binary: the core's scenario and
//! property tests, the simulated cluster's API tests, and end-to-end tests
//! of the daemon, kubectl, helm and the load tools over HTTP.
//! `cargo test --test muster <module>::` runs one file's tests.

mod common;
mod e2e;

mod chaos;
mod cli_run;
mod composite_e2e;
mod core_properties;
mod core_scenarios;
mod daemon_e2e;
mod deploy;
mod dialects_e2e;
mod fuzz_regressions;
mod inter_pod_affinity_e2e;
mod kubectl_compat;
mod kwok_manifests;
mod load_e2e;
mod metrics_auth_e2e;
mod owners_e2e;
mod parsers_proptest;
mod preemption;
mod preemption_e2e;
mod preemption_properties;
mod scenario_phases_e2e;
mod sim_api;
mod sim_eviction;
mod sim_kubectl_versions;
mod sim_lifecycle;
mod sim_versions;
mod sim_watch;
mod simulate_e2e;
mod tenant_input_e2e;
mod topology_e2e;
mod topology_sources_e2e;
mod topology_spread_e2e;
mod volumes_e2e;
