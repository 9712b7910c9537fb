//! Kueue plain-pod groups: members carry the label
//! `kueue.x-k8s.io/pod-group-name` and the annotation
//! `kueue.x-k8s.io/pod-group-total-count` (the gang's `min_count`). There is no
//! definition object, so [`KueueGroups`] synthesizes one from the members the
//! informers report; members that disagree on the total (or on any other
//! annotation below) make the definition malformed, which every member is
//! told. Nothing is written back.
//!
//! Also read and validated: the topology annotations (`podset-required-`,
//! `-preferred-`, `-unconstrained-topology`, `podset-slice-required-topology`
//! with `podset-slice-size`; [`pod_set_topology`], which top-owner groups
//! share for their pod templates) and `pod-group-fast-admission` /
//! `pod-group-serving`. What Muster does with each: docs/dialects.md.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::common::bounded_count;
use super::topology::label_level;
use crate::model::wire::PodWire;
use crate::model::{
    DefinitionKey, GroupDef, GroupExtras, GroupKey, GroupMembership, GroupPolicy, GroupSource,
    KueueOptions, LevelRef, PodInfo, PodKey, SliceRequest, TopologyRequest,
};

/// The label naming a pod's Kueue pod group.
pub const GROUP_NAME_LABEL: &str = "kueue.x-k8s.io/pod-group-name";
/// The annotation giving the group's total member count.
pub const TOTAL_COUNT_ANNOTATION: &str = "kueue.x-k8s.io/pod-group-total-count";
/// The annotation requesting that every member share one value of a node label.
pub const REQUIRED_TOPOLOGY_ANNOTATION: &str = "kueue.x-k8s.io/podset-required-topology";
/// The annotation asking, without requiring, that members share one value.
pub const PREFERRED_TOPOLOGY_ANNOTATION: &str = "kueue.x-k8s.io/podset-preferred-topology";
/// The annotation saying the pod set has no topology constraint.
pub const UNCONSTRAINED_TOPOLOGY_ANNOTATION: &str = "kueue.x-k8s.io/podset-unconstrained-topology";
/// The annotation requiring each slice of members to share one value.
pub const SLICE_TOPOLOGY_ANNOTATION: &str = "kueue.x-k8s.io/podset-slice-required-topology";
/// The number of members in each slice.
pub const SLICE_SIZE_ANNOTATION: &str = "kueue.x-k8s.io/podset-slice-size";
/// Kueue's multi-level slices (a JSON list of levels and sizes; beta behind
/// its `TASMultiLayerTopology` gate): refused here.
pub const SLICE_CONSTRAINTS_ANNOTATION: &str =
    "kueue.x-k8s.io/podset-slice-required-topology-constraints";
/// The annotation letting Kueue admit the group before every member exists.
pub const FAST_ADMISSION_ANNOTATION: &str = "kueue.x-k8s.io/pod-group-fast-admission";
/// The annotation marking a serving group (members replaced while it runs).
pub const SERVING_ANNOTATION: &str = "kueue.x-k8s.io/pod-group-serving";

/// The label → the pod's membership, if it carries the label. The total count
/// must be readable on every member.
pub fn membership(pod: &PodWire, namespace: &str) -> Option<GroupMembership> {
    let name = pod.metadata.labels.get(GROUP_NAME_LABEL)?;
    if name.is_empty() {
        return Some(GroupMembership::Invalid(format!(
            "label {GROUP_NAME_LABEL} is empty"
        )));
    }
    if let Err(e) =
        total_count(&pod.metadata.annotations).and_then(|_| options(&pod.metadata.annotations))
    {
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

/// A boolean annotation: absent is false; otherwise `"true"` or `"false"`.
fn flag(annotations: &BTreeMap<String, String>, key: &str) -> Result<bool, String> {
    match annotations.get(key).map(String::as_str) {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(v) => Err(format!(
            "annotation {key} must be \"true\" or \"false\", got {v:?}"
        )),
    }
}

/// A boolean as Kueue parses `podset-unconstrained-topology` (Go's
/// `strconv.ParseBool`).
fn go_bool(key: &str, v: &str) -> Result<bool, String> {
    match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(format!(
            "annotation {key}: Invalid value: {v:?}: must be a boolean value"
        )),
    }
}

/// A node-label annotation: absent is none; present, a valid label key.
fn level(annotations: &BTreeMap<String, String>, key: &str) -> Result<Option<LevelRef>, String> {
    annotations
        .get(key)
        .map(|v| label_level(v, &format!("annotation {key}")))
        .transpose()
}

/// A pod set's topology request from its annotations (a member pod's, or a
/// top owner's pod template's), validated as Kueue's webhook does: at most
/// one of required, preferred and unconstrained (each counts when present,
/// even `unconstrained: "false"`); every level a valid label key; a slice
/// level only with a slice size of at least 1, and the size only with it;
/// the multi-level slice annotation refused. Whether the slice level lies
/// at or below the required one depends on the hierarchy the gang lands
/// in, so it is the planner's to check.
pub fn pod_set_topology(annotations: &BTreeMap<String, String>) -> Result<TopologyRequest, String> {
    let required = level(annotations, REQUIRED_TOPOLOGY_ANNOTATION)?;
    let preferred = level(annotations, PREFERRED_TOPOLOGY_ANNOTATION)?;
    let unconstrained = annotations.get(UNCONSTRAINED_TOPOLOGY_ANNOTATION);
    let modes = [
        (required.is_some(), REQUIRED_TOPOLOGY_ANNOTATION),
        (preferred.is_some(), PREFERRED_TOPOLOGY_ANNOTATION),
        (unconstrained.is_some(), UNCONSTRAINED_TOPOLOGY_ANNOTATION),
    ];
    let set: Vec<&str> = modes
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, k)| *k)
        .collect();
    if set.len() > 1 {
        return Err(format!(
            "annotations {} are mutually exclusive",
            set.join(" and ")
        ));
    }
    let unconstrained = match unconstrained {
        Some(v) => go_bool(UNCONSTRAINED_TOPOLOGY_ANNOTATION, v)?,
        None => false,
    };
    if annotations.contains_key(SLICE_CONSTRAINTS_ANNOTATION) {
        return Err(format!(
            "annotation {SLICE_CONSTRAINTS_ANNOTATION} (multi-level slices) is not supported by this scheduler"
        ));
    }
    let slice_level = level(annotations, SLICE_TOPOLOGY_ANNOTATION)?;
    let slice = match (slice_level, annotations.get(SLICE_SIZE_ANNOTATION)) {
        (None, None) => None,
        (Some(_), None) => {
            return Err(format!(
                "annotation {SLICE_SIZE_ANNOTATION} is required with {SLICE_TOPOLOGY_ANNOTATION}"
            ));
        }
        (None, Some(_)) => {
            return Err(format!(
                "annotation {SLICE_SIZE_ANNOTATION} is only valid with {SLICE_TOPOLOGY_ANNOTATION}"
            ));
        }
        (Some(level), Some(size)) => {
            let field = format!("annotation {SLICE_SIZE_ANNOTATION}");
            match size.trim().parse::<i64>() {
                Ok(n) if n > 0 => Some(SliceRequest {
                    level,
                    size: bounded_count(n, &field)?,
                }),
                _ => return Err(format!("{field} must be a positive integer, got {size:?}")),
            }
        }
    };
    Ok(TopologyRequest {
        required,
        preferred,
        slice,
        unconstrained,
    })
}

/// A slice larger than the pod set can never be whole (Kueue's webhook:
/// "must not be greater than pod set count").
pub fn slice_fits(topology: &TopologyRequest, count: u32) -> Result<(), String> {
    match &topology.slice {
        Some(slice) if slice.size > count => Err(format!(
            "annotation {SLICE_SIZE_ANNOTATION}: Invalid value: \"{}\": must not be greater than pod set count {count}",
            slice.size
        )),
        _ => Ok(()),
    }
}

/// The member's topology and pod-group options.
fn options(
    annotations: &BTreeMap<String, String>,
) -> Result<(TopologyRequest, KueueOptions), String> {
    Ok((
        pod_set_topology(annotations)?,
        KueueOptions {
            fast_admission: flag(annotations, FAST_ADMISSION_ANNOTATION)?,
            serving: flag(annotations, SERVING_ANNOTATION)?,
        },
    ))
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
    topology: TopologyRequest,
    options: KueueOptions,
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
        let Ok((topology, options)) = options(&pod.annotations) else {
            return self.forget(&pod.key);
        };
        let mut out = Vec::new();
        if self.pods.get(&pod.key).is_some_and(|old| *old != key) {
            out = self.forget(&pod.key);
        }
        let member = Member {
            count,
            created_ms: pod.created_ms,
            topology,
            options,
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

/// What members must agree on besides the total count: the annotation and
/// each member's value of it.
type Agreed = (&'static str, fn(&Member) -> Option<String>);

const AGREED: [Agreed; 6] = [
    (REQUIRED_TOPOLOGY_ANNOTATION, |m| {
        m.topology.required.as_ref().map(LevelRef::to_string)
    }),
    (PREFERRED_TOPOLOGY_ANNOTATION, |m| {
        m.topology.preferred.as_ref().map(LevelRef::to_string)
    }),
    (UNCONSTRAINED_TOPOLOGY_ANNOTATION, |m| {
        Some(m.topology.unconstrained.to_string())
    }),
    (SLICE_TOPOLOGY_ANNOTATION, |m| {
        m.topology
            .slice
            .as_ref()
            .map(|s| format!("{} (size {})", s.level, s.size))
    }),
    (FAST_ADMISSION_ANNOTATION, |m| {
        Some(m.options.fast_admission.to_string())
    }),
    (SERVING_ANNOTATION, |m| Some(m.options.serving.to_string())),
];

/// The first annotation the members disagree on, with their values in order
/// (counts numerically: "3 vs 4").
fn disagreement(members: &BTreeMap<PodKey, Member>) -> Option<(&'static str, Vec<String>)> {
    let counts: BTreeSet<u32> = members.values().map(|m| m.count).collect();
    if counts.len() > 1 {
        return Some((
            TOTAL_COUNT_ANNOTATION,
            counts.iter().map(u32::to_string).collect(),
        ));
    }
    AGREED.iter().find_map(|(annotation, value)| {
        let values: BTreeSet<String> = members.values().filter_map(value).collect();
        (values.len() > 1).then(|| (*annotation, values.into_iter().collect()))
    })
}

fn synthesize(key: &DefinitionKey, members: &BTreeMap<PodKey, Member>) -> GroupDef {
    let disagreement = disagreement(members).map(|(annotation, values)| {
        format!(
            "pods of group {}/{} disagree on {annotation}: {}",
            key.namespace,
            key.name,
            values.join(" vs ")
        )
    });
    let first = members.values().next();
    let topology = first.map(|m| m.topology.clone()).unwrap_or_default();
    let min_count = first.map_or(1, |m| m.count);
    let policy = match disagreement {
        Some(m) => Err(m),
        None => slice_fits(&topology, min_count)
            .map(|()| GroupPolicy::Gang {
                min_count,
                schedule_timeout: None,
            })
            .map_err(|e| format!("Kueue pod group {}/{}: {e}", key.namespace, key.name)),
    };
    let created_ms = members.values().map(|m| m.created_ms).min().unwrap_or(0);
    let options = first.map(|m| m.options.clone()).unwrap_or_default();
    GroupDef {
        topology: Box::new(topology),
        extras: Box::new(GroupExtras {
            kueue: options,
            ..GroupExtras::default()
        }),
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

    fn pod_with(name: &str, extra: serde_json::Value) -> PodInfo {
        let mut annotations = json!({TOTAL_COUNT_ANNOTATION: "2"});
        for (k, v) in extra.as_object().unwrap() {
            annotations[k] = v.clone();
        }
        let v = json!({"metadata": {"name": name, "namespace": "default",
            "labels": {GROUP_NAME_LABEL: "g"}, "annotations": annotations},
            "spec": {"containers": []}});
        PodInfo::from_json(&serde_json::to_vec(&v).unwrap()).unwrap()
    }

    #[test]
    fn options_are_read_into_the_definition() {
        let mut k = KueueGroups::default();
        let extra = json!({PREFERRED_TOPOLOGY_ANNOTATION: "rack",
            FAST_ADMISSION_ANNOTATION: "true", SERVING_ANNOTATION: "false"});
        k.observe(&pod_with("a", extra.clone()));
        let out = k.observe(&pod_with("b", extra));
        assert!(out.is_empty(), "the second member agrees: unchanged");
        let out = k.observe(&pod_with(
            "a",
            json!({PREFERRED_TOPOLOGY_ANNOTATION: "rack",
            FAST_ADMISSION_ANNOTATION: "true"}),
        ));
        assert!(out.is_empty(), "absent is false");
        let mut k = KueueGroups::default();
        let out = k.observe(&pod_with(
            "a",
            json!({PREFERRED_TOPOLOGY_ANNOTATION: "rack",
            FAST_ADMISSION_ANNOTATION: "true"}),
        ));
        let d = upserted(&out);
        assert_eq!(
            d.extras.kueue,
            KueueOptions {
                fast_admission: true,
                ..KueueOptions::default()
            }
        );
        assert_eq!(*d.topology, TopologyRequest::preferred(label("rack")));
        assert_eq!(d.unsupported, None);
        let out = k.observe(&pod_with(
            "b",
            json!({PREFERRED_TOPOLOGY_ANNOTATION: "block"}),
        ));
        assert_eq!(
            upserted(&out).policy,
            Err("pods of group default/g disagree on kueue.x-k8s.io/podset-preferred-topology: block vs rack".into())
        );
    }

    fn label(key: &str) -> LevelRef {
        LevelRef::Label(key.into())
    }

    /// Each topology annotation set, as Kueue's samples write them, into
    /// the request.
    #[test]
    fn topology_annotations_into_the_request() {
        let slice = |key: &str, size| {
            Some(SliceRequest {
                level: label(key),
                size,
            })
        };
        for (annotations, want) in [
            (json!({}), TopologyRequest::default()),
            (
                json!({REQUIRED_TOPOLOGY_ANNOTATION: "cloud.provider.com/topology-rack"}),
                TopologyRequest::required(label("cloud.provider.com/topology-rack")),
            ),
            (
                json!({PREFERRED_TOPOLOGY_ANNOTATION: "cloud.provider.com/topology-block"}),
                TopologyRequest::preferred(label("cloud.provider.com/topology-block")),
            ),
            (
                json!({UNCONSTRAINED_TOPOLOGY_ANNOTATION: "true"}),
                TopologyRequest {
                    unconstrained: true,
                    ..TopologyRequest::default()
                },
            ),
            (
                json!({UNCONSTRAINED_TOPOLOGY_ANNOTATION: "False"}),
                TopologyRequest::default(),
            ),
            (
                json!({SLICE_TOPOLOGY_ANNOTATION: "rack", SLICE_SIZE_ANNOTATION: "2"}),
                TopologyRequest {
                    slice: slice("rack", 2),
                    ..TopologyRequest::default()
                },
            ),
            (
                json!({REQUIRED_TOPOLOGY_ANNOTATION: "block",
                       SLICE_TOPOLOGY_ANNOTATION: "rack", SLICE_SIZE_ANNOTATION: "2"}),
                TopologyRequest {
                    required: Some(label("block")),
                    slice: slice("rack", 2),
                    ..TopologyRequest::default()
                },
            ),
            (
                json!({PREFERRED_TOPOLOGY_ANNOTATION: "block",
                       SLICE_TOPOLOGY_ANNOTATION: "rack", SLICE_SIZE_ANNOTATION: "1"}),
                TopologyRequest {
                    preferred: Some(label("block")),
                    slice: slice("rack", 1),
                    ..TopologyRequest::default()
                },
            ),
        ] {
            let mut k = KueueGroups::default();
            let out = k.observe(&pod_with("a", annotations.clone()));
            let d = upserted(&out);
            assert!(d.policy.is_ok(), "{annotations}: {:?}", d.policy);
            assert_eq!(*d.topology, want, "{annotations}");
            assert_eq!(d.unsupported, None, "{annotations}");
        }
    }

    #[test]
    fn slices_must_fit_the_group() {
        let mut k = KueueGroups::default();
        let out = k.observe(&pod_with(
            "a",
            json!({SLICE_TOPOLOGY_ANNOTATION: "rack", SLICE_SIZE_ANNOTATION: "3"}),
        ));
        assert_eq!(
            upserted(&out).policy,
            Err("Kueue pod group default/g: annotation kueue.x-k8s.io/podset-slice-size: Invalid value: \"3\": must not be greater than pod set count 2".into())
        );
        let out = k.observe(&pod_with(
            "b",
            json!({SLICE_TOPOLOGY_ANNOTATION: "rack", SLICE_SIZE_ANNOTATION: "2"}),
        ));
        assert_eq!(
            upserted(&out).policy,
            Err("pods of group default/g disagree on kueue.x-k8s.io/podset-slice-required-topology: rack (size 2) vs rack (size 3)".into())
        );
    }

    #[test]
    fn malformed_options() {
        let wire = |annotations: serde_json::Value| -> PodWire {
            let mut a = json!({TOTAL_COUNT_ANNOTATION: "2"});
            for (k, v) in annotations.as_object().unwrap() {
                a[k] = v.clone();
            }
            serde_json::from_value(
                json!({"metadata": {"labels": {GROUP_NAME_LABEL: "g"}, "annotations": a}}),
            )
            .unwrap()
        };
        let prefix = "Kueue pod group default/g: ";
        for (annotations, message) in [
            (
                json!({UNCONSTRAINED_TOPOLOGY_ANNOTATION: "yes"}),
                "annotation kueue.x-k8s.io/podset-unconstrained-topology: Invalid value: \"yes\": must be a boolean value",
            ),
            (
                json!({FAST_ADMISSION_ANNOTATION: "1"}),
                "annotation kueue.x-k8s.io/pod-group-fast-admission must be \"true\" or \"false\", got \"1\"",
            ),
            (
                json!({SERVING_ANNOTATION: "True"}),
                "annotation kueue.x-k8s.io/pod-group-serving must be \"true\" or \"false\", got \"True\"",
            ),
            (
                json!({PREFERRED_TOPOLOGY_ANNOTATION: ""}),
                "annotation kueue.x-k8s.io/podset-preferred-topology: Invalid value: \"\": name part must be non-empty",
            ),
            (
                json!({REQUIRED_TOPOLOGY_ANNOTATION: "rack/a/b"}),
                "annotation kueue.x-k8s.io/podset-required-topology: Invalid value: \"rack/a/b\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
            ),
            (
                json!({SLICE_TOPOLOGY_ANNOTATION: "-rack", SLICE_SIZE_ANNOTATION: "2"}),
                "annotation kueue.x-k8s.io/podset-slice-required-topology: Invalid value: \"-rack\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            ),
            (
                json!({UNCONSTRAINED_TOPOLOGY_ANNOTATION: "false", PREFERRED_TOPOLOGY_ANNOTATION: "rack"}),
                "annotations kueue.x-k8s.io/podset-preferred-topology and kueue.x-k8s.io/podset-unconstrained-topology are mutually exclusive",
            ),
            (
                json!({SLICE_CONSTRAINTS_ANNOTATION: "[{\"topology\": \"rack\", \"size\": 2}]"}),
                "annotation kueue.x-k8s.io/podset-slice-required-topology-constraints (multi-level slices) is not supported by this scheduler",
            ),
            (
                json!({REQUIRED_TOPOLOGY_ANNOTATION: "rack", PREFERRED_TOPOLOGY_ANNOTATION: "block"}),
                "annotations kueue.x-k8s.io/podset-required-topology and kueue.x-k8s.io/podset-preferred-topology are mutually exclusive",
            ),
            (
                json!({SLICE_TOPOLOGY_ANNOTATION: "rack"}),
                "annotation kueue.x-k8s.io/podset-slice-size is required with kueue.x-k8s.io/podset-slice-required-topology",
            ),
            (
                json!({SLICE_SIZE_ANNOTATION: "2"}),
                "annotation kueue.x-k8s.io/podset-slice-size is only valid with kueue.x-k8s.io/podset-slice-required-topology",
            ),
            (
                json!({SLICE_TOPOLOGY_ANNOTATION: "rack", SLICE_SIZE_ANNOTATION: "0"}),
                "annotation kueue.x-k8s.io/podset-slice-size must be a positive integer, got \"0\"",
            ),
            (
                json!({SLICE_TOPOLOGY_ANNOTATION: "rack", SLICE_SIZE_ANNOTATION: "200000"}),
                "annotation kueue.x-k8s.io/podset-slice-size must be at most 100000, got 200000",
            ),
        ] {
            assert_eq!(
                membership(&wire(annotations.clone()), "default"),
                Some(GroupMembership::Invalid(format!("{prefix}{message}"))),
                "{annotations}"
            );
        }
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
