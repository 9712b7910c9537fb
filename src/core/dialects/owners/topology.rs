//! A top owner's topology: Kueue's topology annotations on its pod
//! templates (Kueue's TAS samples put them on the Job's
//! `spec.template.metadata.annotations`, a JobSet's
//! `spec.replicatedJobs[].template.spec.template.metadata.annotations`, a
//! LeaderWorkerSet's leader and worker templates) read into the gang's
//! `TopologyRequest`.
//!
//! Kueue gives each pod template (pod set) its own request; Muster places
//! the top owner's pods as one gang under one request, so the templates
//! that carry annotations must agree, and those that carry none must be
//! the only ones (a template without annotations beside one with them is a
//! pod set Kueue would leave unconstrained, which one request cannot say):
//! otherwise the gang is refused as unsupported, naming both templates.
//!
//! A Volcano Job (`batch.volcano.sh`) states its own: `spec.networkTopology`,
//! read as a Volcano PodGroup's (the PodGroup Volcano's job controller
//! would create carries it); a task's `partitionPolicy.networkTopology` (a
//! topology per partition) is refused as unsupported.

use std::collections::BTreeMap;

use serde_json::Value;

use super::super::kueue::{
    PREFERRED_TOPOLOGY_ANNOTATION, REQUIRED_TOPOLOGY_ANNOTATION, SLICE_CONSTRAINTS_ANNOTATION,
    SLICE_SIZE_ANNOTATION, SLICE_TOPOLOGY_ANNOTATION, UNCONSTRAINED_TOPOLOGY_ANNOTATION,
    pod_set_topology,
};
use super::super::volcano::network_topology;
use crate::model::{OwnerKind, TopologyRequest};

/// The annotations read from a pod template.
const KEYS: [&str; 6] = [
    REQUIRED_TOPOLOGY_ANNOTATION,
    PREFERRED_TOPOLOGY_ANNOTATION,
    UNCONSTRAINED_TOPOLOGY_ANNOTATION,
    SLICE_TOPOLOGY_ANNOTATION,
    SLICE_SIZE_ANNOTATION,
    SLICE_CONSTRAINTS_ANNOTATION,
];

/// How deep the walk for pod templates goes (a JobSet's pod template is
/// six objects down) and how many it reads: bounds on tenant input.
const MAX_DEPTH: usize = 10;
const MAX_TEMPLATES: usize = 64;

/// What a top owner's pod templates ask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateTopology {
    /// One request for the whole gang (empty when no template asks).
    Agreed(TopologyRequest),
    /// Well-formed, but the templates ask different things: why.
    Disagree(String),
}

/// The gang's request from an owner of `kind`: its pod templates' Kueue
/// annotations, and a Volcano Job's `spec.networkTopology`. `Err` when a
/// field is invalid (naming it).
pub fn owner_topology(obj: &Value, kind: OwnerKind) -> Result<TemplateTopology, String> {
    let templates = template_topology(obj)?;
    if kind != OwnerKind::VolcanoJob {
        return Ok(templates);
    }
    if let Some(i) = obj["spec"]["tasks"].as_array().and_then(|tasks| {
        tasks
            .iter()
            .position(|t| !t["partitionPolicy"]["networkTopology"].is_null())
    }) {
        return Ok(TemplateTopology::Disagree(format!(
            "spec.tasks[{i}].partitionPolicy.networkTopology (a network topology per partition) is not supported by this scheduler"
        )));
    }
    let network = network_topology(&obj["spec"]["networkTopology"])?;
    Ok(match templates {
        _ if network.is_empty() => templates,
        TemplateTopology::Agreed(t) if t.is_empty() => TemplateTopology::Agreed(network),
        TemplateTopology::Agreed(t) => TemplateTopology::Disagree(format!(
            "spec.networkTopology ({}) and the pod templates' Kueue topology annotations ({}) both ask for a topology",
            describe(&network),
            describe(&t)
        )),
        disagree => disagree,
    })
}

/// The request the pod templates' Kueue annotations make; `Err` when a
/// template's annotations are invalid (naming the template's path).
fn template_topology(obj: &Value) -> Result<TemplateTopology, String> {
    let mut templates = Vec::new();
    find_templates(&obj["spec"], "spec".to_string(), 0, &mut templates);
    let mut asked: Vec<(String, TopologyRequest)> = Vec::new();
    for (path, template) in templates {
        let annotations: BTreeMap<String, String> = KEYS
            .iter()
            .filter_map(|k| {
                let v = template["metadata"]["annotations"][*k].as_str()?;
                Some((k.to_string(), v.to_string()))
            })
            .collect();
        let request = pod_set_topology(&annotations)
            .map_err(|e| format!("{path}.metadata.annotations: {e}"))?;
        asked.push((path, request));
    }
    let Some((first_path, first)) = asked.first() else {
        return Ok(TemplateTopology::Agreed(TopologyRequest::default()));
    };
    if let Some((path, other)) = asked.iter().find(|(_, r)| r != first) {
        return Ok(TemplateTopology::Disagree(format!(
            "pod templates ask for different topologies ({first_path}: {}; {path}: {}), and one gang is placed under one request",
            describe(first),
            describe(other)
        )));
    }
    Ok(TemplateTopology::Agreed(first.clone()))
}

/// Every pod template (an object with `spec.containers`) under `v`, with
/// its field path, depth-first in document order.
fn find_templates<'a>(
    v: &'a Value,
    path: String,
    depth: usize,
    out: &mut Vec<(String, &'a Value)>,
) {
    if depth > MAX_DEPTH || out.len() >= MAX_TEMPLATES {
        return;
    }
    match v {
        Value::Object(map) => {
            if map.get("spec").is_some_and(|s| s["containers"].is_array()) {
                out.push((path, v));
                return;
            }
            for (k, child) in map {
                find_templates(child, format!("{path}.{k}"), depth + 1, out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                find_templates(child, format!("{path}[{i}]"), depth + 1, out);
            }
        }
        _ => {}
    }
}

/// A request in a few words, for messages.
fn describe(t: &TopologyRequest) -> String {
    let mut parts = Vec::new();
    if let Some(l) = &t.required {
        parts.push(format!("required {l}"));
    }
    if let Some(l) = &t.preferred {
        parts.push(format!("preferred {l}"));
    }
    if let Some(s) = &t.slice {
        parts.push(format!("slices of {} within {}", s.size, s.level));
    }
    if t.unconstrained {
        parts.push("unconstrained".into());
    }
    if parts.is_empty() {
        return "none".into();
    }
    parts.join(", ")
}
