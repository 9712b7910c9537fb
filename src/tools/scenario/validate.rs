//! Checks a parsed scenario for what serde cannot express: positive counts
//! (a `minCount` above `size` is allowed: such a gang waits), valid quantities and names, outcomes that make sense
//! for the workload kind, unique names, topology levels as the API server
//! would take them, phase gates and churn intervals in bounds, DRA classes
//! and templates as the API reads them (`super::dra`), and claim templates
//! named by workloads declared. Each error names its field path.

use std::collections::BTreeSet;

use super::spec::{Dialect, GangWorkload, Outcome, Scenario, Workload};
use muster_core::dialects::topology::validate_level_keys;
use muster_core::model::Quantity;
use muster_core::model::topology::label_key_error;

/// A field path and what is wrong there.
pub type Problem = (String, String);

pub fn check(s: &Scenario) -> Result<(), Problem> {
    label_value("name", &s.name)?;
    positive("timeoutSeconds", s.timeout_seconds)?;
    if let Some(rate) = s.creation_rate
        && !(rate.is_finite() && rate > 0.0)
    {
        return Err(("creationRate".into(), "must be a positive number".into()));
    }
    non_empty("schedulerName", &s.scheduler_name)?;
    nodes(s)?;
    kueue_topology(s)?;
    for (i, ns) in s.namespaces.iter().enumerate() {
        dns_label(&format!("namespaces[{i}]"), ns)?;
    }
    super::dra::check(&s.device_classes, &s.resource_claim_templates)?;
    workloads(s)
}

fn nodes(s: &Scenario) -> Result<(), Problem> {
    let mut prefixes = BTreeSet::new();
    for (i, t) in s.nodes.iter().enumerate() {
        let at = |field: &str| format!("nodes[{i}].{field}");
        dns_label(&at("namePrefix"), &t.name_prefix)?;
        if !prefixes.insert(t.name_prefix.as_str()) {
            return Err((
                at("namePrefix"),
                format!("{:?} is used twice", t.name_prefix),
            ));
        }
        if t.topology.hosts_per_rack == 0 || t.topology.racks_per_block == 0 {
            return Err((at("topology"), "sizes must be positive".into()));
        }
        for (key, value) in &t.capacity {
            quantity(&at(&format!("capacity.{key}")), value)?;
        }
        for (key, value) in &t.allocatable {
            quantity(&at(&format!("allocatable.{key}")), value)?;
        }
        if let Some(devices) = &t.devices {
            devices.check().map_err(|m| (at("devices"), m))?;
        }
        // `capacity` replaces the default map as a whole; a node without pod
        // slots silently accepts nothing.
        if !t.capacity.contains_key("pods") {
            return Err((
                at("capacity.pods"),
                "missing: a capacity map replaces the defaults as a whole, so without `pods` the nodes accept no pods".into(),
            ));
        }
    }
    Ok(())
}

/// The levels of the Kueue `Topology` the scenario creates, as Kueue's CRD
/// and webhook check them (the simulated cluster refuses the same).
fn kueue_topology(s: &Scenario) -> Result<(), Problem> {
    let Some(levels) = &s.kueue_topology else {
        return Ok(());
    };
    validate_level_keys(levels).map_err(|e| (format!("kueueTopology{}", e.at), e.message))?;
    let hostname = "kubernetes.io/hostname";
    if let Some(i) = levels.iter().position(|l| l == hostname)
        && i + 1 != levels.len()
    {
        return Err((
            format!("kueueTopology[{i}]"),
            format!("{hostname:?} may only be the last level"),
        ));
    }
    Ok(())
}

fn workloads(s: &Scenario) -> Result<(), Problem> {
    let mut names = BTreeSet::new();
    for (i, w) in s.workloads.iter().enumerate() {
        let kind = match w {
            Workload::Gang(_) => "gang",
            Workload::Pods(_) => "pods",
        };
        let at = |field: &str| format!("workloads[{i}].{kind}.{field}");
        dns_label(&at("namePrefix"), w.name_prefix())?;
        dns_label(&at("namespace"), w.namespace())?;
        if w.namespace() != "default" && !s.namespaces.iter().any(|n| n == w.namespace()) {
            return Err((
                at("namespace"),
                format!("{:?} is not listed in namespaces", w.namespace()),
            ));
        }
        if !names.insert((w.namespace(), w.name_prefix())) {
            return Err((
                at("namePrefix"),
                format!(
                    "{:?} is used twice in namespace {}",
                    w.name_prefix(),
                    w.namespace()
                ),
            ));
        }
        for (key, value) in w.shape().requests {
            quantity(&at(&format!("requests.{key}")), value)?;
        }
        claim_templates(s, w, &at)?;
        if let Some(seconds) = w.shape().termination_grace_period_seconds {
            at_most(
                &at("terminationGracePeriodSeconds"),
                u64::from(seconds),
                MAX_GRACE_SECONDS,
            )?;
        }
        phase(i, w, s.timeout_seconds, &at)?;
        match w {
            Workload::Gang(g) => {
                positive(&at("count"), u64::from(g.count))?;
                positive(&at("size"), u64::from(g.size))?;
                positive(&at("minCount"), u64::from(g.min_count()))?;
                if let Some(t) = g.timeout_seconds {
                    positive(&at("timeoutSeconds"), t)?;
                }
                dialect_fields(g, s.gang_dialect(g), &at)?;
            }
            Workload::Pods(p) => {
                positive(&at("count"), u64::from(p.count))?;
                if let Some(ms) = p.interval_milliseconds {
                    positive(&at("intervalMilliseconds"), ms)?;
                    at_most(&at("intervalMilliseconds"), ms, MAX_INTERVAL_MS)?;
                }
                if p.expect.is_some_and(|e| e.outcome == Outcome::TimedOut) {
                    return Err((
                        at("expect.outcome"),
                        "timedOut applies to gangs only; plain pods are bound or waiting".into(),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Each template a workload claims from is declared, and named once (its
/// own and its PodGroup's together: each names one claim of the pod);
/// PodGroup claims only where the group is a `scheduling.k8s.io/v1beta1`
/// PodGroup, the version that has `spec.resourceClaims`.
fn claim_templates(s: &Scenario, w: &Workload, at: &dyn Fn(&str) -> String) -> Result<(), Problem> {
    let shape = w.shape();
    if let Workload::Gang(g) = w
        && !g.group_claim_templates.is_empty()
        && s.gang_dialect(g) != super::spec::Dialect::PodGroup
    {
        return Err((
            at("groupClaimTemplates"),
            "PodGroup claims need dialect podGroup (scheduling.k8s.io/v1beta1)".into(),
        ));
    }
    let named: Vec<(String, &String)> = shape
        .group_claim_templates
        .iter()
        .enumerate()
        .map(|(j, n)| (format!("groupClaimTemplates[{j}]"), n))
        .chain(
            shape
                .claim_templates
                .iter()
                .enumerate()
                .map(|(j, n)| (format!("claimTemplates[{j}]"), n)),
        )
        .collect();
    let names: Vec<&String> = named.iter().map(|(_, n)| *n).collect();
    for (j, (field, name)) in named.iter().enumerate() {
        let path = at(field);
        if !s.resource_claim_templates.iter().any(|t| t.name == **name) {
            return Err((
                path,
                format!("{name:?} is not declared in resourceClaimTemplates"),
            ));
        }
        if names[..j].contains(name) {
            return Err((path, format!("{name:?} is named twice")));
        }
    }
    Ok(())
}

/// Longest `terminationGracePeriodSeconds` a scenario may ask for (a day).
const MAX_GRACE_SECONDS: u64 = 86_400;
/// Longest churn interval (an hour).
const MAX_INTERVAL_MS: u64 = 3_600_000;

/// A workload's `start`: a gate needs an earlier workload to wait for, and
/// a delay must leave the run time to do something.
fn phase(
    i: usize,
    w: &Workload,
    run_timeout: u64,
    at: &dyn Fn(&str) -> String,
) -> Result<(), Problem> {
    let Some(start) = w.start() else {
        return Ok(());
    };
    if i == 0 && start.after.is_some() {
        return Err((
            at("start.after"),
            "the first workload has no earlier workload to wait for".into(),
        ));
    }
    if start.delay_seconds >= run_timeout {
        return Err((
            at("start.delaySeconds"),
            format!("must be less than the scenario's timeoutSeconds ({run_timeout})"),
        ));
    }
    Ok(())
}

/// Fields a gang's dialect cannot express.
fn dialect_fields(
    g: &GangWorkload,
    dialect: Dialect,
    at: &dyn Fn(&str) -> String,
) -> Result<(), Problem> {
    if let Some(key) = &g.required_topology {
        label_key(&at("requiredTopology"), key)?;
        if !matches!(
            dialect,
            Dialect::PodGroup | Dialect::PodGroupV1alpha2 | Dialect::Kueue
        ) {
            return Err((
                at("requiredTopology"),
                format!(
                    "the {} dialect has no required topology (use podGroup, podGroupV1alpha2 or kueue)",
                    dialect.name()
                ),
            ));
        }
    }
    if let Some(key) = &g.preferred_topology {
        label_key(&at("preferredTopology"), key)?;
        if !matches!(
            dialect,
            Dialect::PodGroup | Dialect::PodGroupV1alpha2 | Dialect::Kueue
        ) {
            return Err((
                at("preferredTopology"),
                format!(
                    "the {} dialect has no preferred topology level (use podGroup, podGroupV1alpha2 or kueue)",
                    dialect.name()
                ),
            ));
        }
        if dialect == Dialect::Kueue && g.required_topology.is_some() {
            return Err((
                at("preferredTopology"),
                "the kueue dialect takes a required or a preferred topology, not both (its annotations are mutually exclusive)".into(),
            ));
        }
    }
    if dialect == Dialect::Kueue {
        if g.min_count() != g.size {
            return Err((
                at("minCount"),
                "the kueue dialect has no minCount: a Kueue group needs all of its pod-group-total-count pods".into(),
            ));
        }
        if g.timeout_seconds.is_some() {
            return Err((
                at("timeoutSeconds"),
                "the kueue dialect has no group object to carry a timeout; the scheduler's permitWaitingTimeSeconds applies".into(),
            ));
        }
    }
    Ok(())
}

fn positive(path: &str, n: u64) -> Result<(), Problem> {
    if n == 0 {
        return Err((path.into(), "must be positive".into()));
    }
    Ok(())
}

fn at_most(path: &str, n: u64, max: u64) -> Result<(), Problem> {
    if n > max {
        return Err((path.into(), format!("must be at most {max}")));
    }
    Ok(())
}

fn non_empty(path: &str, s: &str) -> Result<(), Problem> {
    if s.is_empty() {
        return Err((path.into(), "must not be empty".into()));
    }
    Ok(())
}

/// A node label key (a topology level), worded as the API server words it.
fn label_key(path: &str, key: &str) -> Result<(), Problem> {
    match label_key_error(key) {
        Some(e) => Err((path.into(), format!("{key:?}: {e}"))),
        None => Ok(()),
    }
}

fn quantity(path: &str, value: &str) -> Result<(), Problem> {
    match Quantity::parse(value) {
        Ok(q) if q.milli_value() < 0 => Err((path.into(), "must not be negative".into())),
        Ok(_) => Ok(()),
        Err(e) => Err((path.into(), e.to_string())),
    }
}

/// A DNS-1123 label (names, prefixes, namespaces), leaving room for the
/// `-<i>-<j>` suffixes the scenario appends.
fn dns_label(path: &str, s: &str) -> Result<(), Problem> {
    let ok = !s.is_empty()
        && s.len() <= 50
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if !ok {
        return Err((
            path.into(),
            format!(
                "{s:?} must be 1-50 lowercase letters, digits or '-', not starting or ending with '-'"
            ),
        ));
    }
    Ok(())
}

/// A label value (the scenario name labels every object).
fn label_value(path: &str, s: &str) -> Result<(), Problem> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.as_bytes()[s.len() - 1].is_ascii_alphanumeric();
    if !ok {
        return Err((
            path.into(),
            format!(
                "{s:?} must be a label value: 1-63 letters, digits, '-', '_' or '.', alphanumeric at both ends"
            ),
        ));
    }
    Ok(())
}
