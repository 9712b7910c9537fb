//! What-if, offline: the cluster as the informers listed it, loaded into a
//! fresh engine with the scheduler's configuration; capacity changes
//! applied (`--add-nodes`, `--drain`); the cluster's own pending work
//! placed first, as the running scheduler would; then the FILE's objects
//! added and the engine run until it has nothing more to do. Its actions
//! are the answer: bindings (fits, where), evictions and nominations (only
//! by preemption, whom), or neither (why, from `Engine::explain`). Nothing
//! here does I/O; nothing leaves the engine.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use muster_core::config::SchedulerConfig;
use muster_core::dialects::DEFINITION_SOURCES;
use muster_core::engine::{Action, ClusterEvent, Engine, ExplainTarget};
use muster_core::explain::Explanation;
use muster_core::model::{GroupDef, GroupKey, NodeInfo, PodInfo, PodKey};

/// Most nodes `--add-nodes` adds in all (a hostile number is refused).
pub const MAX_ADDED_NODES: usize = 100_000;
/// Most objects FILE may hold.
pub const MAX_FILE_OBJECTS: usize = 10_000;

/// The verdict, and the exit code scripts read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Verdict {
    /// Every pod in FILE fits now (exit 0).
    Fits,
    /// It fits only once the named victims are evicted (exit 3).
    FitsByPreemption,
    /// It does not fit (exit 4).
    DoesNotFit,
}

/// The answer, with stable field names (`docs/explain.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WhatIf {
    pub api_version: String,
    pub kind: String,
    pub verdict: Verdict,
    pub summary: String,
    /// Where each pod of FILE would be bound (or is nominated, when only
    /// preemption makes room).
    pub placements: Vec<Placement>,
    /// The topology domain each gang of FILE was placed in.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub domains: BTreeMap<String, String>,
    /// The pods that would be evicted, with their gangs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub victims: Vec<Victim>,
    /// PodDisruptionBudgets those evictions take below zero.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub budgets_broken: Vec<String>,
    /// Why it does not fit: the scheduler's explanation of each pod or
    /// gang of FILE that was not placed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<Explanation>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    pub pod: String,
    pub node: String,
    /// True when the node is nominated (room made by preemption).
    #[serde(default)]
    pub nominated: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Victim {
    pub pod: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub priority: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gang: Option<String>,
}

/// The objects of FILE, read.
#[derive(Debug, Clone, Default)]
pub struct Asked {
    pub pods: Vec<PodInfo>,
    pub defs: Vec<GroupDef>,
}

impl Asked {
    /// Reads FILE's documents (YAML or JSON, `---` separated, or a `List`):
    /// Pods and group definitions of any dialect. Anything else is refused
    /// by kind, never skipped.
    pub fn read(text: &str, namespace: &str, now_rfc3339: &str) -> Result<Asked> {
        let mut asked = Asked::default();
        let mut docs: Vec<serde_json::Value> = Vec::new();
        for doc in serde_norway::Deserializer::from_str(text) {
            let v: serde_json::Value = serde::Deserialize::deserialize(doc)?;
            if v.is_null() {
                continue;
            }
            match v.get("kind").and_then(|k| k.as_str()) {
                Some("List") => docs.extend(v["items"].as_array().cloned().unwrap_or_default()),
                _ => docs.push(v),
            }
        }
        if docs.len() > MAX_FILE_OBJECTS {
            bail!(
                "FILE holds {} objects; at most {MAX_FILE_OBJECTS} are read",
                docs.len()
            );
        }
        for (i, mut doc) in docs.into_iter().enumerate() {
            let kind = doc["kind"].as_str().unwrap_or("").to_string();
            let api_version = doc["apiVersion"].as_str().unwrap_or("").to_string();
            let name = doc["metadata"]["name"].as_str().unwrap_or("").to_string();
            if name.is_empty() {
                bail!(
                    "object {} ({kind}) has no metadata.name (generateName is not simulated)",
                    i + 1
                );
            }
            let meta = doc["metadata"]
                .as_object_mut()
                .expect("metadata is an object");
            meta.entry("namespace").or_insert_with(|| namespace.into());
            meta.entry("uid")
                .or_insert_with(|| format!("what-if-{i}").into());
            meta.entry("creationTimestamp")
                .or_insert_with(|| now_rfc3339.into());
            if kind == "Pod" && api_version == "v1" {
                let json = serde_json::to_vec(&doc)?;
                let pod =
                    PodInfo::from_json(&json).map_err(|e| anyhow::anyhow!("pod {name}: {e}"))?;
                asked.pods.push(pod);
                continue;
            }
            let group = api_version.split_once('/').map_or("", |(g, _)| g);
            let Some(source) = DEFINITION_SOURCES
                .iter()
                .find(|s| s.kind == kind && s.group == group)
            else {
                bail!(
                    "{kind} ({api_version}) {name}: what-if reads Pods and group definitions (PodGroup, Workload, CompositePodGroup, Coscheduling and Volcano PodGroups); create a workload's pods to ask about it"
                );
            };
            let defs =
                (source.translate)(&doc).map_err(|e| anyhow::anyhow!("{kind} {name}: {e}"))?;
            asked.defs.extend(defs);
        }
        if asked.pods.is_empty() {
            bail!("FILE holds no Pod: what-if answers for pods (and the gangs they form)");
        }
        Ok(asked)
    }
}

/// Capacity changes to ask about.
#[derive(Debug, Clone, Default)]
pub struct Changes {
    /// (an existing node to copy, how many copies).
    pub add_nodes: Vec<(String, usize)>,
    /// Nodes cordoned and emptied.
    pub drain: Vec<String>,
}

/// The cluster's events with the changes applied: drained nodes
/// unschedulable and without pods, copies of template nodes added.
pub fn apply_changes(
    mut events: Vec<ClusterEvent>,
    changes: &Changes,
) -> Result<Vec<ClusterEvent>> {
    let drained: HashSet<&str> = changes.drain.iter().map(String::as_str).collect();
    let mut templates: BTreeMap<&str, Arc<NodeInfo>> = BTreeMap::new();
    let mut seen: HashSet<String> = HashSet::new();
    let total: usize = changes
        .add_nodes
        .iter()
        .map(|(_, n)| *n)
        .fold(0, usize::saturating_add);
    if total > MAX_ADDED_NODES {
        bail!("--add-nodes adds {total} nodes; at most {MAX_ADDED_NODES}");
    }
    events.retain_mut(|e| match e {
        ClusterEvent::NodeUpserted(n) => {
            seen.insert(n.name.to_string());
            if let Some((t, _)) = changes.add_nodes.iter().find(|(t, _)| **t == *n.name) {
                templates.insert(t.as_str(), n.clone());
            }
            if drained.contains(&*n.name) {
                let mut cordoned = (**n).clone();
                cordoned.unschedulable = true;
                *n = Arc::new(cordoned);
            }
            true
        }
        ClusterEvent::PodUpserted(p) => {
            !p.node_name.as_deref().is_some_and(|n| drained.contains(n))
        }
        _ => true,
    });
    for d in &changes.drain {
        if !seen.contains(d) {
            bail!("--drain {d}: no such node");
        }
    }
    for (template, n) in &changes.add_nodes {
        let Some(t) = templates.get(template.as_str()) else {
            bail!("--add-nodes {template}={n}: no node named {template} to copy");
        };
        for i in 0..*n {
            let name = format!("{template}-what-if-{i}");
            let mut copy = (**t).clone();
            copy.name = Arc::from(name.as_str());
            copy.unschedulable = false;
            if copy.labels.contains_key("kubernetes.io/hostname") {
                copy.labels.insert("kubernetes.io/hostname".into(), name);
            }
            events.push(ClusterEvent::NodeUpserted(Arc::new(copy)));
        }
    }
    Ok(events)
}

/// Runs the question and reads the answer from the engine's actions.
pub fn answer(
    config: &SchedulerConfig,
    events: Vec<ClusterEvent>,
    asked: &Asked,
    now: Instant,
) -> WhatIf {
    let mut engine_config = muster_scheduler::daemon::engine_config(config);
    engine_config.record_samples = false;
    let mut engine = Engine::new(engine_config);
    for e in events {
        engine.on_event(e, now);
    }
    // The cluster's own pending work first, as the scheduler would place it.
    engine.run_until_idle(now);
    let placed = engine.drain_actions();
    settle(&mut engine, placed, now);
    for def in &asked.defs {
        engine.on_event(ClusterEvent::GroupDefUpserted(def.clone()), now);
    }
    let ours: HashSet<PodKey> = asked.pods.iter().map(|p| p.key.clone()).collect();
    for p in &asked.pods {
        engine.on_event(ClusterEvent::PodUpserted(Arc::new(p.clone())), now);
    }
    engine.run_until_idle(now);
    let actions = engine.drain_actions();
    read_answer(&engine, asked, &ours, actions, now)
}

/// Bindings succeed (the capacity stays held, as assumed pods hold it).
fn settle(engine: &mut Engine, actions: Vec<Action>, now: Instant) {
    for a in actions {
        if let Action::Bind { pod, uid, node, .. } = a {
            engine.on_event(
                ClusterEvent::BindFinished {
                    pod,
                    uid,
                    node,
                    result: Ok(()),
                },
                now,
            );
        }
    }
}

fn read_answer(
    engine: &Engine,
    asked: &Asked,
    ours: &HashSet<PodKey>,
    actions: Vec<Action>,
    now: Instant,
) -> WhatIf {
    let mut placements = Vec::new();
    let mut victims = Vec::new();
    for a in &actions {
        match a {
            Action::Bind { pod, node, .. } if ours.contains(pod) => placements.push(Placement {
                pod: pod.to_string(),
                node: node.to_string(),
                nominated: false,
            }),
            Action::Nominate {
                pod,
                node: Some(node),
                ..
            } if ours.contains(pod) => placements.push(Placement {
                pod: pod.to_string(),
                node: node.to_string(),
                nominated: true,
            }),
            Action::Preempt { victim, .. } => {
                let cached = engine.cache().pod(victim);
                victims.push(Victim {
                    pod: victim.to_string(),
                    node: cached.and_then(|c| c.state.node()).map(|n| n.to_string()),
                    priority: cached.map_or(0, |c| c.info.priority),
                    gang: cached
                        .and_then(|c| c.info.group.key())
                        .map(GroupKey::to_string),
                });
            }
            _ => {}
        }
    }
    placements.sort_by(|a, b| a.pod.cmp(&b.pod));
    // A pod nominated and then bound is bound.
    placements.dedup_by(|later, earlier| later.pod == earlier.pod);
    victims.sort_by(|a, b| a.pod.cmp(&b.pod));
    let budgets_broken = broken_budgets(engine, &victims);
    let placed: HashSet<&str> = placements.iter().map(|p| p.pod.as_str()).collect();
    let bound: HashSet<&str> = placements
        .iter()
        .filter(|p| !p.nominated)
        .map(|p| p.pod.as_str())
        .collect();
    let all = asked.pods.len();
    // A gang's members past minCount may wait at the gate for the rest:
    // the gang fits when every pod that could be placed was.
    let unplaced: Vec<&PodInfo> = asked
        .pods
        .iter()
        .filter(|p| !placed.contains(p.key.to_string().as_str()))
        .collect();
    let verdict = if unplaced.is_empty() && bound.len() == all {
        Verdict::Fits
    } else if unplaced.is_empty() && !victims.is_empty() {
        Verdict::FitsByPreemption
    } else {
        Verdict::DoesNotFit
    };
    let mut domains = BTreeMap::new();
    let groups: HashSet<GroupKey> = asked
        .pods
        .iter()
        .filter_map(|p| p.group.key().cloned())
        .collect();
    for g in &groups {
        if let Some((_, Some(chosen))) = engine.gang().considered_domains().get(g) {
            domains.insert(g.to_string(), chosen.clone());
        }
    }
    let mut reasons = Vec::new();
    if verdict == Verdict::DoesNotFit {
        let mut explained: HashSet<String> = HashSet::new();
        for p in &unplaced {
            let target = match p.group.key() {
                Some(g) => ExplainTarget::Group {
                    namespace: g.definition.namespace.clone(),
                    source: g.definition.source,
                    name: match g.definition.container() {
                        Some((c, _)) => c.name.clone(),
                        None => g.definition.name.clone(),
                    },
                },
                None => ExplainTarget::Pod(p.key.clone()),
            };
            if explained.insert(target.describe()) {
                reasons.extend(engine.explain(&target, now));
            }
        }
    }
    let summary = match verdict {
        Verdict::Fits => format!(
            "fits now: {all} pod(s) on {} node(s)",
            distinct_nodes(&placements)
        ),
        Verdict::FitsByPreemption => format!(
            "fits only by preemption: {} pod(s) evicted{}",
            victims.len(),
            match budgets_broken.len() {
                0 => String::new(),
                n => format!(", breaking {n} PodDisruptionBudget(s)"),
            }
        ),
        Verdict::DoesNotFit => {
            let why = reasons
                .first()
                .map(|r| r.summary.clone())
                .unwrap_or_else(|| "no node holds it".into());
            format!(
                "does not fit: {} of {all} pod(s) placed; {why}",
                bound.len()
            )
        }
    };
    WhatIf {
        api_version: muster_core::explain::API_VERSION.into(),
        kind: "WhatIf".into(),
        verdict,
        summary,
        placements,
        domains,
        victims,
        budgets_broken,
        reasons,
    }
}

fn distinct_nodes(p: &[Placement]) -> usize {
    p.iter()
        .map(|p| p.node.as_str())
        .collect::<HashSet<_>>()
        .len()
}

/// Budgets whose covered victims outnumber the disruptions they allow.
fn broken_budgets(engine: &Engine, victims: &[Victim]) -> Vec<String> {
    let budgets = &engine.cache().facts().budgets;
    let mut count: BTreeMap<String, (i32, i32)> = BTreeMap::new();
    for v in victims {
        let Some((ns, name)) = v.pod.split_once('/') else {
            continue;
        };
        let Some(cached) = engine.cache().pod(&PodKey::new(ns, name)) else {
            continue;
        };
        for b in budgets.in_namespace(ns) {
            if b.covers(ns, &cached.info.labels) && !b.disrupted_pods.contains(name) {
                let e = count
                    .entry(format!("{}/{}", b.namespace, b.name))
                    .or_insert((0, b.disruptions_allowed));
                e.0 += 1;
            }
        }
    }
    count
        .into_iter()
        .filter(|(_, (n, allowed))| n > allowed)
        .map(|(k, (n, allowed))| format!("{k} ({n} evicted, {allowed} allowed)"))
        .collect()
}

/// The answer as people read it.
pub fn render(w: &WhatIf) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(out, "{}", w.summary);
    if !w.placements.is_empty() {
        let _ = writeln!(out, "Placements:");
        for p in &w.placements {
            let how = if p.nominated {
                " (nominated: once its victims are gone)"
            } else {
                ""
            };
            let _ = writeln!(out, "  {} -> {}{how}", p.pod, p.node);
        }
    }
    for (g, d) in &w.domains {
        let _ = writeln!(out, "Domain: {g} in {d}");
    }
    if !w.victims.is_empty() {
        let _ = writeln!(out, "Evicted:");
        for v in &w.victims {
            let gang = v
                .gang
                .as_deref()
                .map_or(String::new(), |g| format!(", member of {g}"));
            let node = v.node.as_deref().unwrap_or("?");
            let _ = writeln!(out, "  {} on {node} (priority {}{gang})", v.pod, v.priority);
        }
    }
    if !w.budgets_broken.is_empty() {
        let _ = writeln!(
            out,
            "PodDisruptionBudgets broken: {}",
            w.budgets_broken.join(", ")
        );
    }
    for r in &w.reasons {
        let _ = writeln!(out, "Why:");
        for line in muster_core::explain::text::render(r).lines() {
            let _ = writeln!(out, "  {line}");
        }
    }
    out
}

#[cfg(test)]
#[path = "simulation_tests.rs"]
mod tests;
