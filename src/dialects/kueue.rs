//! Kueue plain-pod groups: members carry the label
//! `kueue.x-k8s.io/pod-group-name` and the annotation
//! `kueue.x-k8s.io/pod-group-total-count` (the gang's `min_count`). There is no
//! definition object, so [`KueueGroups`] synthesizes one from the members the
//! informers report; members that disagree on the total make the definition
//! malformed, which every member is told. Nothing is written back.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::common::bounded_count;
use crate::model::wire::PodWire;
use crate::model::{
    DefinitionKey, GroupDef, GroupKey, GroupMembership, GroupPolicy, GroupSource, PodInfo, PodKey,
};

/// The label naming a pod's Kueue pod group.
pub const GROUP_NAME_LABEL: &str = "kueue.x-k8s.io/pod-group-name";
/// The annotation giving the group's total member count.
pub const TOTAL_COUNT_ANNOTATION: &str = "kueue.x-k8s.io/pod-group-total-count";
/// The annotation requesting that every member share one value of a node label.
pub const REQUIRED_TOPOLOGY_ANNOTATION: &str = "kueue.x-k8s.io/podset-required-topology";

/// The label → the pod's membership, if it carries the label. The total count
/// must be readable on every member.
pub fn membership(pod: &PodWire, namespace: &str) -> Option<GroupMembership> {
    let name = pod.metadata.labels.get(GROUP_NAME_LABEL)?;
    if name.is_empty() {
        return Some(GroupMembership::Invalid(format!(
            "label {GROUP_NAME_LABEL} is empty"
        )));
    }
    if let Err(e) = total_count(&pod.metadata.annotations) {
        return Some(GroupMembership::Invalid(format!(
            "Kueue pod group {namespace}/{name}: {e}"
        )));
    }
    Some(GroupMembership::Member(GroupKey::new(DefinitionKey::new(
        namespace,
        GroupSource::Kueue,
        name,
    ))))
}

fn total_count(annotations: &BTreeMap<String, String>) -> Result<u32, String> {
    let v = annotations
        .get(TOTAL_COUNT_ANNOTATION)
        .ok_or_else(|| format!("annotation {TOTAL_COUNT_ANNOTATION} is missing"))?;
    match v.trim().parse::<i64>() {
        Ok(n) if n > 0 => bounded_count(n, &format!("annotation {TOTAL_COUNT_ANNOTATION}")),
        Ok(n) => Err(format!(
            "annotation {TOTAL_COUNT_ANNOTATION} must be positive, got {n}"
        )),
        Err(_) => Err(format!(
            "annotation {TOTAL_COUNT_ANNOTATION} must be an integer, got {v:?}"
        )),
    }
}

/// A change to the synthesized definitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Synthesized {
    Upserted(Box<GroupDef>),
    Deleted(DefinitionKey),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Member {
    count: u32,
    created_ms: i64,
    topology: Option<String>,
}

/// Kueue group definitions synthesized from their members. Pure and stateful:
/// fed every pod upsert and deletion, it returns the definition changes.
#[derive(Debug, Default)]
pub struct KueueGroups {
    pods: HashMap<PodKey, DefinitionKey>,
    groups: HashMap<DefinitionKey, BTreeMap<PodKey, Member>>,
    emitted: HashMap<DefinitionKey, GroupDef>,
}

impl KueueGroups {
    /// A pod was added or changed.
    pub fn observe(&mut self, pod: &PodInfo) -> Vec<Synthesized> {
        let key = match pod.group.key() {
            Some(g) if g.definition.source == GroupSource::Kueue => g.definition.clone(),
            _ => return self.forget(&pod.key),
        };
        let Ok(count) = total_count(&pod.annotations) else {
            return self.forget(&pod.key);
        };
        let mut out = Vec::new();
        if self.pods.get(&pod.key).is_some_and(|old| *old != key) {
            out = self.forget(&pod.key);
        }
        let member = Member {
            count,
            created_ms: pod.created_ms,
            topology: pod
                .annotations
                .get(REQUIRED_TOPOLOGY_ANNOTATION)
                .filter(|t| !t.is_empty())
                .cloned(),
        };
        self.pods.insert(pod.key.clone(), key.clone());
        self.groups
            .entry(key.clone())
            .or_default()
            .insert(pod.key.clone(), member);
        out.extend(self.refresh(&key));
        out
    }

    /// A pod was deleted (or is no longer a Kueue member).
    pub fn forget(&mut self, pod: &PodKey) -> Vec<Synthesized> {
        let Some(key) = self.pods.remove(pod) else {
            return Vec::new();
        };
        if let Some(members) = self.groups.get_mut(&key) {
            members.remove(pod);
            if members.is_empty() {
                self.groups.remove(&key);
            }
        }
        self.refresh(&key).into_iter().collect()
    }

    fn refresh(&mut self, key: &DefinitionKey) -> Option<Synthesized> {
        let Some(members) = self.groups.get(key) else {
            return self
                .emitted
                .remove(key)
                .map(|_| Synthesized::Deleted(key.clone()));
        };
        let def = synthesize(key, members);
        if self.emitted.get(key) == Some(&def) {
            return None;
        }
        self.emitted.insert(key.clone(), def.clone());
        Some(Synthesized::Upserted(Box::new(def)))
    }
}

fn synthesize(key: &DefinitionKey, members: &BTreeMap<PodKey, Member>) -> GroupDef {
    let counts: BTreeSet<u32> = members.values().map(|m| m.count).collect();
    let topologies: BTreeSet<&str> = members
        .values()
        .filter_map(|m| m.topology.as_deref())
        .collect();
    let disagree = |what: &str, values: Vec<String>| {
        format!(
            "pods of group {}/{} disagree on {what}: {}",
            key.namespace,
            key.name,
            values.join(" vs ")
        )
    };
    let policy = if counts.len() > 1 {
        Err(disagree(
            TOTAL_COUNT_ANNOTATION,
            counts.iter().map(u32::to_string).collect(),
        ))
    } else if topologies.len() > 1 {
        Err(disagree(
            REQUIRED_TOPOLOGY_ANNOTATION,
            topologies.iter().map(|t| t.to_string()).collect(),
        ))
    } else {
        Ok(GroupPolicy::Gang {
            min_count: counts.first().copied().unwrap_or(1),
            schedule_timeout: None,
        })
    };
    let created_ms = members.values().map(|m| m.created_ms).min().unwrap_or(0);
    GroupDef {
        required_topology: topologies.first().map(|t| t.to_string()),
        ..GroupDef::new(key.clone(), policy, created_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, group: &str, count: &str) -> PodInfo {
        let v = json!({"metadata": {"name": name, "namespace": "default",
            "labels": {GROUP_NAME_LABEL: group},
            "annotations": {TOTAL_COUNT_ANNOTATION: count}},
            "spec": {"containers": []}});
        PodInfo::from_json(&serde_json::to_vec(&v).unwrap()).unwrap()
    }

    fn upserted(out: &[Synthesized]) -> &GroupDef {
        match out.last() {
            Some(Synthesized::Upserted(d)) => d,
            other => panic!("expected an upsert, got {other:?}"),
        }
    }

    #[test]
    fn synthesizes_from_members_and_retracts() {
        let mut k = KueueGroups::default();
        let out = k.observe(&pod("a", "g", "2"));
        let d = upserted(&out);
        assert_eq!(d.key.to_string(), "Kueue pod group default/g");
        assert_eq!(
            d.policy,
            Ok(GroupPolicy::Gang {
                min_count: 2,
                schedule_timeout: None
            })
        );
        assert!(k.observe(&pod("b", "g", "2")).is_empty(), "unchanged");
        assert!(k.forget(&PodKey::new("default", "a")).is_empty());
        assert_eq!(
            k.forget(&PodKey::new("default", "b")),
            vec![Synthesized::Deleted(d.key.clone())]
        );
    }

    #[test]
    fn disagreement_is_an_error_until_resolved() {
        let mut k = KueueGroups::default();
        k.observe(&pod("a", "g", "3"));
        let out = k.observe(&pod("b", "g", "4"));
        assert_eq!(
            upserted(&out).policy,
            Err(
                "pods of group default/g disagree on kueue.x-k8s.io/pod-group-total-count: 3 vs 4"
                    .into()
            )
        );
        let out = k.forget(&PodKey::new("default", "b"));
        assert!(upserted(&out).policy.is_ok());
    }

    #[test]
    fn moving_to_another_group_or_out() {
        let mut k = KueueGroups::default();
        k.observe(&pod("a", "g", "1"));
        let out = k.observe(&pod("a", "h", "1"));
        assert!(matches!(&out[0], Synthesized::Deleted(key) if &*key.name == "g"));
        assert!(matches!(&out[1], Synthesized::Upserted(d) if &*d.key.name == "h"));
        let plain =
            PodInfo::from_json(br#"{"metadata":{"name":"a","namespace":"default"},"spec":{}}"#)
                .unwrap();
        assert!(matches!(&k.observe(&plain)[..], [Synthesized::Deleted(_)]));
    }

    #[test]
    fn malformed_members() {
        let wire = |labels: serde_json::Value, annotations: serde_json::Value| -> PodWire {
            serde_json::from_value(
                json!({"metadata": {"labels": labels, "annotations": annotations}}),
            )
            .unwrap()
        };
        let cases = [
            (
                json!({GROUP_NAME_LABEL: ""}),
                json!({}),
                "label kueue.x-k8s.io/pod-group-name is empty",
            ),
            (
                json!({GROUP_NAME_LABEL: "g"}),
                json!({}),
                "Kueue pod group default/g: annotation kueue.x-k8s.io/pod-group-total-count is missing",
            ),
            (
                json!({GROUP_NAME_LABEL: "g"}),
                json!({TOTAL_COUNT_ANNOTATION: "0"}),
                "Kueue pod group default/g: annotation kueue.x-k8s.io/pod-group-total-count must be positive, got 0",
            ),
            (
                json!({GROUP_NAME_LABEL: "g"}),
                json!({TOTAL_COUNT_ANNOTATION: "-2"}),
                "Kueue pod group default/g: annotation kueue.x-k8s.io/pod-group-total-count must be positive, got -2",
            ),
            (
                json!({GROUP_NAME_LABEL: "g"}),
                json!({TOTAL_COUNT_ANNOTATION: "many"}),
                "Kueue pod group default/g: annotation kueue.x-k8s.io/pod-group-total-count must be an integer, got \"many\"",
            ),
        ];
        for (labels, annotations, message) in cases {
            assert_eq!(
                membership(&wire(labels, annotations), "default"),
                Some(GroupMembership::Invalid(message.into()))
            );
        }
    }
}
