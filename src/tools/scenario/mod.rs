//! Scenarios: a YAML description of a cluster (node groups, namespaces) and
//! the workloads to submit to it (gangs and plain pods), with the outcome
//! each workload is expected to reach. Pure data: parsing, validation and
//! manifest generation; nothing here talks to an API server.
//!
//! Used by `muster simulate` (and meant for a `muster load` that mirrors
//! scheduler-perf). Format reference: `docs/simulate.md`.
//!
//! - [`spec`]: the serde types of the file.
//! - [`dra`]: the DeviceClasses and ResourceClaimTemplates a scenario
//!   declares, and their checks.
//! - [`validate`]: checks serde cannot express, each naming the field path.
//! - [`manifests`]: the Kubernetes objects a scenario creates, in order.

pub mod dra;
pub mod manifests;
pub mod spec;
mod validate;

use std::path::Path;

pub use manifests::{GangPlan, Kind, Manifest, Plan, PodsPlan, Stage, WorkloadPlan};
pub use spec::{
    After, Expectation, GangWorkload, Outcome, PodShape, PodsWorkload, Scenario, Start, Workload,
};

/// The scenario `muster simulate` runs when given none
/// (`config/scenarios/demo.yaml`).
pub const DEMO: &str = include_str!("../../../config/scenarios/demo.yaml");

/// A scenario file that does not parse or validate. Displays as
/// `<source>: <field path>: <message>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}: {path}: {message}")]
pub struct ScenarioError {
    pub source_name: String,
    /// Where in the document, e.g. `workloads[2].gang.minCount`.
    pub path: String,
    pub message: String,
}

impl Scenario {
    /// Reads, parses and validates a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let source_name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
            source_name: source_name.clone(),
            path: "<file>".into(),
            message: format!("cannot read: {e}"),
        })?;
        Scenario::parse(&text, &source_name)
    }

    /// The embedded demo scenario.
    pub fn demo() -> Result<Scenario, ScenarioError> {
        Scenario::parse(DEMO, "demo.yaml (built in)")
    }

    /// Parses and validates YAML (or JSON); `source_name` prefixes errors.
    pub fn parse(text: &str, source_name: &str) -> Result<Scenario, ScenarioError> {
        let error = |path: String, message: String| ScenarioError {
            source_name: source_name.to_string(),
            path,
            message,
        };
        let de = serde_norway::Deserializer::from_str(text);
        let scenario: Scenario = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            // serde_norway repeats the path in its message; keep it once.
            let message = e.into_inner().to_string();
            let message = match message.split_once(": ") {
                Some((at, rest)) if path.starts_with(at) => rest.to_string(),
                _ => message,
            };
            let path = if path == "." {
                "<document>".into()
            } else {
                path
            };
            error(path, message)
        })?;
        validate::check(&scenario).map_err(|(path, message)| error(path, message))?;
        Ok(scenario)
    }

    /// Nodes the scenario creates.
    pub fn node_count(&self) -> usize {
        self.nodes.iter().map(|t| t.count).sum()
    }

    /// Pods the scenario creates.
    pub fn pod_count(&self) -> u64 {
        self.workloads.iter().map(Workload::pod_count).sum()
    }

    /// Gangs (PodGroups) the scenario creates.
    pub fn gang_count(&self) -> u64 {
        self.workloads
            .iter()
            .map(|w| match w {
                Workload::Gang(g) => u64::from(g.count),
                Workload::Pods(_) => 0,
            })
            .sum()
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_dra;
