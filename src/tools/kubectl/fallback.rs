//! The answer when the scheduler cannot be asked: what the API objects say
//! (each pod's `PodScheduled` condition, its scheduling gates and node, the
//! group's conditions and `minCount`, the last events). Less than the
//! scheduler knows — no queue position, no Permit wait, no domains — and
//! the answer's `source` and `note` say so.

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};

use muster_core::dialects::definition_source;
use muster_core::engine::ExplainTarget;
use muster_core::explain::{
    Explanation, Gang, LastAttempt, Member, Phase, PodReason, Source, quorum_summary,
};
use muster_core::model::{GroupKey, GroupMembership, GroupPolicy, PodInfo};

/// Events read per pod.
const EVENTS_SHOWN: usize = 3;

pub async fn explain(
    api: &Client,
    target: &ExplainTarget,
    asked: &str,
    namespace: &str,
    note: String,
) -> Result<Vec<Explanation>> {
    let pods: Api<Pod> = Api::namespaced(api.clone(), namespace);
    let all = pods
        .list(&ListParams::default())
        .await
        .with_context(|| format!("listing pods in {namespace}"))?;
    let decoded: Vec<(Pod, PodInfo)> = all
        .items
        .into_iter()
        .filter_map(|p| {
            let json = serde_json::to_vec(&p).ok()?;
            let info = PodInfo::from_json(&json).ok()?;
            Some((p, info))
        })
        .collect();
    // The group the target is, or the pod's.
    let group: Option<GroupKey> = match target {
        ExplainTarget::Pod(key) => {
            let Some((_, info)) = decoded.iter().find(|(_, i)| i.key == *key) else {
                let mut e = Explanation::new(
                    asked.into(),
                    Source::ApiObjects,
                    Phase::NotServed,
                    format!("pod {key} does not exist"),
                );
                e.note = Some(note);
                return Ok(vec![e]);
            };
            match &info.group {
                GroupMembership::Member(g) => Some(g.clone()),
                _ => None,
            }
        }
        ExplainTarget::Group { .. } => decoded.iter().find_map(|(_, i)| {
            i.group
                .key()
                .filter(|g| target.names(&g.definition))
                .cloned()
        }),
    };
    let members: Vec<&(Pod, PodInfo)> = decoded
        .iter()
        .filter(|(_, i)| match (&group, target) {
            (Some(g), _) => i.group.key() == Some(g),
            (None, ExplainTarget::Pod(key)) => i.key == *key,
            (None, _) => false,
        })
        .collect();
    let mut e = Explanation::new(
        asked.into(),
        Source::ApiObjects,
        Phase::Queued,
        String::new(),
    );
    e.note = Some(note);
    let mut reasons = Vec::new();
    for (pod, info) in &members {
        let condition = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled"));
        let unscheduled = condition.filter(|c| c.status == "False");
        let node = info.node_name.as_deref().map(String::from);
        let state = match (&node, unscheduled.and_then(|c| c.reason.as_deref())) {
            (Some(_), _) if info.deleting => "terminating",
            (Some(_), _) => "bound",
            (None, _) if info.is_scheduling_gated() => "schedulingGated",
            (None, Some("Unschedulable")) => "unschedulable",
            (None, Some(_)) => "gated",
            (None, None) => "pending",
        };
        let message = unscheduled.and_then(|c| c.message.clone());
        if let (Some(m), Some(c)) = (&message, unscheduled) {
            reasons.push(PodReason {
                pod: info.key.to_string(),
                reason: c.reason.clone().unwrap_or_default(),
                message: m.clone(),
            });
        }
        e.members.push(Member {
            namespace: info.key.namespace.to_string(),
            name: info.key.name.to_string(),
            state: state.into(),
            node,
            nominated_node: info.nominated_node.as_deref().map(String::from),
            scheduling_gates: info
                .scheduling_gates
                .iter()
                .map(|g| g.to_string())
                .collect(),
            message,
        });
    }
    for r in recent_events(api, namespace, &members).await {
        reasons.push(r);
    }
    let gated = e
        .members
        .iter()
        .filter(|m| m.state == "schedulingGated")
        .count();
    let bound = e.members.iter().filter(|m| m.state == "bound").count();
    let present = e.members.len() - gated;
    let (min_count, group_message) = match &group {
        Some(g) => definition_facts(api, g).await,
        None => (None, None),
    };
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    if let Some(g) = &group {
        e.gang = Some(Gang {
            group: g.to_string(),
            kind: g.definition.source.kind_name().into(),
            namespace: g.namespace().to_string(),
            name: g.definition.name.to_string(),
            replica: g.replica.as_deref().map(String::from),
            min_count,
            present: count(present),
            gated: count(gated),
            placed: count(bound),
            bound: count(bound),
            satisfied: None,
        });
    }
    let has = |s: &str| e.members.iter().any(|m| m.state == s);
    (e.phase, e.summary) = if e.members.is_empty() {
        (Phase::WaitingForQuorum, "no member pod exists".into())
    } else if min_count.is_some_and(|m| present < m as usize) {
        let gated: Vec<(String, String)> = e
            .members
            .iter()
            .filter(|p| p.state == "schedulingGated")
            .map(|p| (p.name.clone(), p.scheduling_gates.join(", ")))
            .collect();
        let m = min_count.unwrap_or(0);
        let summary = quorum_summary(present, m, e.members.len(), &gated);
        (Phase::WaitingForQuorum, summary)
    } else if e
        .members
        .iter()
        .all(|m| m.state == "bound" || m.state == "terminating")
    {
        (Phase::Bound, format!("bound: {bound} pod(s) running"))
    } else if has("unschedulable") {
        let why = group_message
            .clone()
            .or_else(|| reasons.first().map(|r| r.message.clone()))
            .unwrap_or_default();
        (Phase::Unschedulable, format!("unschedulable: {why}"))
    } else if has("gated") || has("schedulingGated") {
        let why = reasons
            .first()
            .map(|r| r.message.clone())
            .unwrap_or_default();
        (Phase::WaitingForQuorum, why)
    } else {
        (
            Phase::Queued,
            "pending; no scheduling condition written yet".into(),
        )
    };
    if !reasons.is_empty() || group_message.is_some() {
        e.last_attempt = Some(LastAttempt {
            group_message,
            pods: reasons,
            ..LastAttempt::default()
        });
    }
    Ok(vec![e])
}

/// The definition's `minCount` and its False condition's message, read
/// in the first version the cluster serves.
async fn definition_facts(api: &Client, group: &GroupKey) -> (Option<u32>, Option<String>) {
    let Some(source) = definition_source(group.definition.source) else {
        return (None, None);
    };
    let name = match group.definition.container() {
        Some((container, _)) => container.name.to_string(),
        None => group.definition.name.to_string(),
    };
    for version in source.versions {
        let gvk = GroupVersionKind::gvk(source.group, version, source.kind);
        let ar = ApiResource::from_gvk_with_plural(&gvk, source.plural);
        let objs: Api<DynamicObject> = Api::namespaced_with(api.clone(), group.namespace(), &ar);
        let Ok(obj) = objs.get(&name).await else {
            continue;
        };
        let Ok(json) = serde_json::to_value(&obj) else {
            return (None, None);
        };
        let min = (source.translate)(&json).ok().and_then(|defs| {
            defs.into_iter()
                .find(|d| d.key == group.definition)
                .and_then(|d| match d.policy {
                    Ok(GroupPolicy::Gang { min_count, .. }) => Some(min_count),
                    _ => None,
                })
        });
        let message = json["status"]["conditions"].as_array().and_then(|cs| {
            cs.iter()
                .find(|c| c["status"] == "False")
                .and_then(|c| c["message"].as_str().map(String::from))
        });
        return (min, message);
    }
    (None, None)
}

/// The newest Warning events of the members, newest first.
async fn recent_events(
    api: &Client,
    namespace: &str,
    members: &[&(Pod, PodInfo)],
) -> Vec<PodReason> {
    let events: Api<Event> = Api::namespaced(api.clone(), namespace);
    let mut out = Vec::new();
    for (_, info) in members.iter().take(EVENTS_SHOWN) {
        let params = ListParams::default().fields(&format!(
            "involvedObject.name={},involvedObject.kind=Pod",
            info.key.name
        ));
        let Ok(list) = events.list(&params).await else {
            continue;
        };
        let mut items: Vec<Event> = list
            .items
            .into_iter()
            .filter(|e| e.type_.as_deref() == Some("Warning"))
            .collect();
        items.sort_by_key(|e| std::cmp::Reverse(e.last_timestamp.clone().map(|t| t.0)));
        if let Some(ev) = items.first() {
            out.push(PodReason {
                pod: info.key.to_string(),
                reason: format!("event {}", ev.reason.clone().unwrap_or_default()),
                message: ev.message.clone().unwrap_or_default(),
            });
        }
    }
    out
}
