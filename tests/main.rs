//! Muster's integration tests, linked as one binary: the core's scenario and
//! property tests, the simulated cluster's API tests, and end-to-end tests
//! of the daemon, kubectl, helm and the load tools over HTTP.
//! `cargo test --test muster <module>::` runs one file's tests.

mod common;
mod e2e;

mod autoscale_e2e;
mod autoscale_gangs;
mod autoscale_properties;
mod autoscale_sim;
mod chaos;
mod cli_run;
mod composite_e2e;
mod core_properties;
mod core_scenarios;
mod daemon_e2e;
mod deploy;
mod dialects_e2e;
mod dra_e2e;
mod dra_extended_e2e;
mod dra_gang_e2e;
mod dra_properties;
mod explain_e2e;
mod fuzz_regressions;
mod inter_pod_affinity_e2e;
mod kubectl_compat;
mod kwok_manifests;
mod load_dra_e2e;
mod load_e2e;
mod metrics_auth_e2e;
mod oracle;
mod owners_e2e;
mod parsers_proptest;
mod preemption;
mod preemption_e2e;
mod preemption_minimal;
mod preemption_properties;
mod real_cluster;
mod real_cluster_e2e;
mod real_dra_e2e;
mod real_gangs_e2e;
mod real_kubectl_muster_e2e;
mod real_leader_e2e;
mod real_owners_e2e;
mod real_preemption_e2e;
mod real_secure_serving_e2e;
mod reservation_properties;
mod reservations_e2e;
mod scenario_phases_e2e;
mod sim_api;
mod sim_dra;
mod sim_eviction;
mod sim_kubectl_versions;
mod sim_lifecycle;
mod sim_quantities;
mod sim_versions;
mod sim_vs_real;
mod sim_watch;
mod simulate_e2e;
mod tenant_input_e2e;
mod topology_e2e;
mod topology_sources_e2e;
mod topology_spread_e2e;
mod unschedulable_e2e;
mod unschedulable_reasons;
mod volumes_e2e;
mod what_if_e2e;

/// Every test file in tests/ is a module of this binary: with `autotests`
/// off, a file left out of the list above would never build or run.
#[test]
fn every_test_file_is_a_module_of_this_binary() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let main = std::fs::read_to_string(dir.join("main.rs")).expect("tests/main.rs");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("tests/") {
        let path = entry.expect("a tests/ entry").path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        let declared = main.lines().any(|l| l.trim() == format!("mod {stem};"));
        let is_module = path.extension().is_some_and(|e| e == "rs") || path.join("mod.rs").exists();
        if is_module && stem != "main" && !declared {
            missing.push(stem.to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "tests/main.rs does not declare: {missing:?}"
    );
}
