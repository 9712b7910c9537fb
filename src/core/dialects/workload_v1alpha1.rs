//! Kubernetes 1.35 `Workload` (`scheduling.k8s.io/v1alpha1`): one object holds
//! up to eight named pod groups in `spec.podGroups`, each with its own policy.
//! Pods reference an entry with `spec.workloadRef{name, podGroup,
//! podGroupReplicaKey}`; each distinct replica key is a separate gang sharing
//! the entry's policy.

use std::collections::HashSet;

use serde_json::Value;

use super::common::Meta;
use super::workload_api::{scheduling_policy, split_capped};
use crate::model::wire::PodWire;
use crate::model::{DefinitionKey, GroupDef, GroupKey, GroupMembership, GroupSource};

/// `spec.workloadRef` → the pod's membership, if it sets one.
pub fn membership(pod: &PodWire, namespace: &str) -> Option<GroupMembership> {
    let wr = pod.spec.workload_ref.as_ref()?;
    let workload = wr.name.as_deref().unwrap_or("");
    let pod_group = wr.pod_group.as_deref().unwrap_or("");
    if workload.is_empty() {
        return Some(GroupMembership::Invalid(
            "spec.workloadRef.name is empty".into(),
        ));
    }
    if pod_group.is_empty() {
        return Some(GroupMembership::Invalid(format!(
            "spec.workloadRef.podGroup is empty (Workload {namespace}/{workload})"
        )));
    }
    let def = definition_key(namespace, workload, pod_group);
    let replica = wr
        .pod_group_replica_key
        .as_deref()
        .filter(|k| !k.is_empty());
    Some(GroupMembership::Member(match replica {
        Some(replica) => GroupKey::with_replica(def, replica),
        None => GroupKey::new(def),
    }))
}

/// The definition key of one pod group of a Workload (`"<workload>/<podGroup>"`).
pub fn definition_key(namespace: &str, workload: &str, pod_group: &str) -> DefinitionKey {
    DefinitionKey::new(
        namespace,
        GroupSource::Workload,
        &format!("{workload}/{pod_group}"),
    )
}

/// The most entries `spec.podGroups` may have (the API's validation limit);
/// a longer list is refused whole rather than read in part.
pub const MAX_WORKLOAD_POD_GROUPS: usize = 8;

/// Translates a Workload into one definition per `spec.podGroups` entry. A
/// malformed entry policy becomes that entry's `policy: Err`; an entry that
/// cannot be named (missing or duplicate name) makes the object unreadable.
pub fn workload_definitions(obj: &Value) -> Result<Vec<GroupDef>, String> {
    let meta = Meta::read(obj)?;
    let whole = |e: String| format!("Workload {}/{}: {e}", meta.namespace, meta.name);
    let entries = obj["spec"]["podGroups"]
        .as_array()
        .filter(|a| !a.is_empty())
        .ok_or_else(|| whole("spec.podGroups is missing or empty".into()))?;
    if entries.len() > MAX_WORKLOAD_POD_GROUPS {
        return Err(whole(format!(
            "spec.podGroups has {} entries, more than the {MAX_WORKLOAD_POD_GROUPS} allowed",
            entries.len()
        )));
    }
    let mut seen = HashSet::new();
    let mut defs = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let name = entry["name"]
            .as_str()
            .filter(|n| !n.is_empty())
            .ok_or_else(|| whole(format!("spec.podGroups[{i}].name is empty")))?;
        if name.contains('/') {
            return Err(whole(format!(
                "spec.podGroups[{i}].name {name:?} must not contain '/'"
            )));
        }
        if !seen.insert(name) {
            return Err(whole(format!(
                "spec.podGroups names {name:?} more than once"
            )));
        }
        let (policy, timeout_capped) = split_capped(scheduling_policy(
            &entry["policy"],
            "policy",
            "minCount",
            &meta,
        ));
        let policy = policy.map_err(|e| {
            format!(
                "Workload {}/{} podGroup {name:?}: {e}",
                meta.namespace, meta.name
            )
        });
        defs.push(GroupDef {
            timeout_capped,
            ..GroupDef::new(
                definition_key(meta.namespace, meta.name, name),
                policy,
                meta.created_ms,
            )
        });
    }
    Ok(defs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::GroupPolicy;
    use serde_json::json;
    use std::time::Duration;

    fn workload(pod_groups: Value) -> Result<Vec<GroupDef>, String> {
        workload_definitions(&json!({
            "apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload",
            "metadata": {"name": "training", "namespace": "ml",
                "annotations": {"muster.dev/schedule-timeout-seconds": "20"}},
            "spec": {"controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "training"},
                     "podGroups": pod_groups}
        }))
    }

    #[test]
    fn one_definition_per_pod_group() {
        let defs = workload(json!([
            {"name": "workers", "policy": {"gang": {"minCount": 4}}},
            {"name": "driver", "policy": {"basic": {}}}
        ]))
        .unwrap();
        assert_eq!(defs.len(), 2);
        assert_eq!(
            defs[0].key.to_string(),
            "Workload ml/training podGroup \"workers\""
        );
        assert_eq!(
            defs[0].policy,
            Ok(GroupPolicy::Gang {
                min_count: 4,
                schedule_timeout: Some(Duration::from_secs(20))
            })
        );
        assert_eq!(defs[1].policy, Ok(GroupPolicy::Basic));
    }

    #[test]
    fn malformed_entries() {
        let defs = workload(json!([
            {"name": "a", "policy": {"gang": {"minCount": 0}}},
            {"name": "b", "policy": {"gang": {}}},
            {"name": "c", "policy": {"gang": {"minCount": -1}}},
            {"name": "d", "policy": {"spread": {}}},
            {"name": "e"}
        ]))
        .unwrap();
        let errs: Vec<String> = defs.into_iter().map(|d| d.policy.unwrap_err()).collect();
        assert_eq!(
            errs[0],
            "Workload ml/training podGroup \"a\": policy.gang.minCount must be positive, got 0"
        );
        assert!(
            errs[1].ends_with("policy.gang.minCount is missing"),
            "{}",
            errs[1]
        );
        assert!(errs[2].ends_with("must be positive, got -1"), "{}", errs[2]);
        assert!(errs[3].contains("unknown policy \"spread\""), "{}", errs[3]);
        assert!(errs[4].ends_with("policy is missing (expected gang or basic)"));
    }

    #[test]
    fn unreadable_workloads() {
        for (groups, needle) in [
            (json!([]), "spec.podGroups is missing or empty"),
            (json!(null), "spec.podGroups is missing or empty"),
            (
                json!([{"name": "", "policy": {"basic": {}}}]),
                "spec.podGroups[0].name is empty",
            ),
            (
                json!([{"name": "x", "policy": {"basic": {}}}, {"name": "x", "policy": {"basic": {}}}]),
                "names \"x\" more than once",
            ),
            (
                Value::Array(
                    (0..9)
                        .map(|i| json!({"name": format!("g{i}"), "policy": {"basic": {}}}))
                        .collect(),
                ),
                "has 9 entries, more than the 8 allowed",
            ),
        ] {
            let err = workload(groups).unwrap_err();
            assert!(
                err.starts_with("Workload ml/training: ") && err.contains(needle),
                "{err}"
            );
        }
    }

    #[test]
    fn missing_pod_group_message() {
        let key = definition_key("ml", "training", "workers");
        assert_eq!(
            key.absent_message(true),
            "Workload ml/training has no podGroup \"workers\""
        );
        assert_eq!(
            key.absent_message(false),
            "waiting for Workload ml/training podGroup \"workers\" to be created"
        );
    }
}
