//! The cluster's declared hierarchies, read from their objects: a Kueue
//! `Topology` (`kueue.x-k8s.io`, v1beta1 and v1beta2 share the shape) into a
//! [`TopologyDef`], a Volcano `HyperNode` (`topology.volcano.sh/v1alpha1`)
//! into a [`HyperNodeDef`].
//!
//! Each object is validated as upstream's CRD schema and admission webhook
//! would (a cluster without the webhook may still hold an invalid one), and
//! an invalid object is an error as a whole: its domains are never used
//! half-read. Every list and number is bounded.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;

use crate::model::topology::{
    HyperNodeDef, HyperNodeMember, HyperNodeMemberKind, MAX_HYPERNODE_MEMBERS, MAX_HYPERNODE_TIER,
    MAX_TOPOLOGY_LEVELS, MemberSelector, TopologyChange, TopologyDef, compile_member_regex,
    label_key_error,
};
use crate::model::wire::LabelSelectorWire;
use crate::model::{LabelSelector, LevelRef};

/// The node label Kueue allows only as the lowest level of a Topology.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// Longest `nodeLabel` Kueue's CRD accepts.
const MAX_NODE_LABEL_LEN: usize = 316;
/// Longest `tierName` and `exactMatch.name` Volcano's CRD accepts.
const MAX_NAME_LEN: usize = 253;

/// A kind of object that declares a hierarchy, and how to read one: what
/// the informers watch (while the API is served) to produce
/// `TopologyChange`s.
pub struct TopologySource {
    /// The informer's name (`<plural>.<group>`), unique among informers.
    pub name: &'static str,
    pub group: &'static str,
    /// Served versions in order of preference.
    pub versions: &'static [&'static str],
    pub kind: &'static str,
    pub plural: &'static str,
    /// Object JSON → its upsert; `Err` when invalid (then it declares
    /// nothing: the informer reports it deleted).
    pub read: fn(&Value) -> Result<TopologyChange, String>,
    /// The deletion of the object of this name.
    pub deleted: fn(Arc<str>) -> TopologyChange,
}

/// Every hierarchy kind Muster watches.
pub const TOPOLOGY_SOURCES: &[TopologySource] = &[
    TopologySource {
        name: "topologies.kueue.x-k8s.io",
        group: "kueue.x-k8s.io",
        // v1beta2 is Kueue's storage version; v1beta1 (same shape) is
        // deprecated but still served by older installs.
        versions: &["v1beta2", "v1beta1"],
        kind: "Topology",
        plural: "topologies",
        read: |obj| topology_def(obj).map(TopologyChange::TopologyUpserted),
        deleted: TopologyChange::TopologyDeleted,
    },
    TopologySource {
        name: "hypernodes.topology.volcano.sh",
        group: "topology.volcano.sh",
        versions: &["v1alpha1"],
        kind: "HyperNode",
        plural: "hypernodes",
        read: |obj| hyper_node_def(obj).map(TopologyChange::HyperNodeUpserted),
        deleted: TopologyChange::HyperNodeDeleted,
    },
];

/// `metadata.name` of a cluster-scoped object.
fn object_name(obj: &Value) -> Result<Arc<str>, String> {
    match obj["metadata"]["name"].as_str() {
        Some(n) if !n.is_empty() => Ok(Arc::from(n)),
        _ => Err("metadata.name is required".into()),
    }
}

/// A Kueue `Topology` → its levels, outermost first. Errors are prefixed
/// with `Topology <name>: ` and name the field.
pub fn topology_def(obj: &Value) -> Result<TopologyDef, String> {
    let name = object_name(obj)?;
    let levels = topology_levels(&obj["spec"]["levels"])
        .map_err(|e| format!("Topology {name}: spec.levels{e}"))?;
    Ok(TopologyDef { name, levels })
}

/// `spec.levels`: 1 to 16 entries, each a valid, distinct label key, the
/// hostname label only last. Errors start with the path below `levels`.
fn topology_levels(levels: &Value) -> Result<Vec<Arc<str>>, String> {
    let list = match levels {
        Value::Array(list) => list,
        Value::Null => return Err(": Required value".into()),
        other => return Err(format!(": must be a list, got {other}")),
    };
    let keys = list
        .iter()
        .enumerate()
        .map(|(i, level)| match level["nodeLabel"].as_str() {
            Some(key) => Ok(key),
            None => Err(format!("[{i}].nodeLabel: Required value")),
        })
        .collect::<Result<Vec<&str>, String>>()?;
    let strings: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
    validate_level_keys(&strings).map_err(|e| e.to_string())?;
    if let Some(i) = keys.iter().position(|k| *k == HOSTNAME_LABEL)
        && i + 1 != keys.len()
    {
        return Err(format!(
            ": the {HOSTNAME_LABEL} label can only be used at the lowest level of topology"
        ));
    }
    Ok(keys.into_iter().map(Arc::from).collect())
}

/// Why a list of hierarchy levels is invalid: the path below the list and
/// the message (`[1]: ...` or `: ...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LevelsError {
    /// `""` for the list itself, `"[i]"` (Kueue: `"[i].nodeLabel"`) for an entry.
    pub at: String,
    pub message: String,
}

impl std::fmt::Display for LevelsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.at, self.message)
    }
}

/// The rules every hierarchy's level list follows (a Kueue `Topology`, the
/// gang plugin's `topologyLevels`): 1 to [`MAX_TOPOLOGY_LEVELS`] entries,
/// each a valid label key of at most 316 characters, no duplicates.
pub fn validate_level_keys(keys: &[String]) -> Result<(), LevelsError> {
    let whole = |message: String| LevelsError {
        at: String::new(),
        message,
    };
    if keys.is_empty() {
        return Err(whole("must have at least 1 item".into()));
    }
    if keys.len() > MAX_TOPOLOGY_LEVELS {
        return Err(whole(format!(
            "must have at most {MAX_TOPOLOGY_LEVELS} items, got {}",
            keys.len()
        )));
    }
    let mut seen = BTreeSet::new();
    for (i, key) in keys.iter().enumerate() {
        let at = |message: String| LevelsError {
            at: format!("[{i}]"),
            message: format!("{key:?}: {message}"),
        };
        if key.len() > MAX_NODE_LABEL_LEN {
            return Err(at(format!(
                "must be no more than {MAX_NODE_LABEL_LEN} characters"
            )));
        }
        if let Some(e) = label_key_error(key) {
            return Err(at(e));
        }
        if !seen.insert(key.as_str()) {
            return Err(at("must be unique".into()));
        }
    }
    Ok(())
}

/// A node label key a group names as a level (an annotation's value, a
/// `topology[].key`): `LevelRef::Label` when it is a valid label key, else
/// the message naming `field`.
pub fn label_level(key: &str, field: &str) -> Result<LevelRef, String> {
    match label_key_error(key) {
        None => Ok(LevelRef::Label(Arc::from(key))),
        Some(e) => Err(format!("{field}: Invalid value: {key:?}: {e}")),
    }
}

/// A Volcano `HyperNode` → its tier and members. Errors are prefixed with
/// `HyperNode <name>: ` and name the field.
pub fn hyper_node_def(obj: &Value) -> Result<HyperNodeDef, String> {
    let name = object_name(obj)?;
    let spec = &obj["spec"];
    let read = || -> Result<HyperNodeDef, String> {
        let tier = match &spec["tier"] {
            Value::Null => return Err("spec.tier: Required value".into()),
            v => v
                .as_u64()
                .filter(|t| *t <= u64::from(MAX_HYPERNODE_TIER))
                .and_then(|t| u32::try_from(t).ok())
                .ok_or_else(|| {
                    format!(
                        "spec.tier: must be an integer between 0 and {MAX_HYPERNODE_TIER}, got {v}"
                    )
                })?,
        };
        let tier_name = match &spec["tierName"] {
            Value::Null => None,
            Value::String(s) if s.is_empty() => None,
            Value::String(s) if s.len() <= MAX_NAME_LEN => Some(Arc::from(s.as_str())),
            Value::String(_) => {
                return Err(format!(
                    "spec.tierName: must be no more than {MAX_NAME_LEN} characters"
                ));
            }
            other => return Err(format!("spec.tierName: must be a string, got {other}")),
        };
        let members = match &spec["members"] {
            Value::Array(list) if list.is_empty() => {
                return Err("spec.members: must have at least 1 item".into());
            }
            Value::Array(list) if list.len() > MAX_HYPERNODE_MEMBERS => {
                return Err(format!(
                    "spec.members: must have at most {MAX_HYPERNODE_MEMBERS} items, got {}",
                    list.len()
                ));
            }
            Value::Array(list) => list
                .iter()
                .enumerate()
                .map(|(i, m)| member(m).map_err(|e| format!("spec.members[{i}].{e}")))
                .collect::<Result<Vec<_>, _>>()?,
            Value::Null => return Err("spec.members: Required value".into()),
            other => return Err(format!("spec.members: must be a list, got {other}")),
        };
        Ok(HyperNodeDef {
            name: name.clone(),
            tier,
            tier_name,
            members,
        })
    };
    read().map_err(|e| format!("HyperNode {name}: {e}"))
}

/// One `spec.members[]` entry; errors start with the field below it.
fn member(m: &Value) -> Result<HyperNodeMember, String> {
    let kind = match m["type"].as_str() {
        Some("Node") => HyperNodeMemberKind::Node,
        Some("HyperNode") => HyperNodeMemberKind::HyperNode,
        Some(other) => {
            return Err(format!(
                "type: Unsupported value: {other:?}: supported values: \"Node\", \"HyperNode\""
            ));
        }
        None => return Err("type: Required value".into()),
    };
    let sel = &m["selector"];
    let given: Vec<&str> = ["exactMatch", "regexMatch", "labelMatch"]
        .into_iter()
        .filter(|k| !sel[*k].is_null())
        .collect();
    let selector = match given.as_slice() {
        [] => {
            return Err(
                "selector: Either ExactMatch or RegexMatch or LabelMatch must be specified".into(),
            );
        }
        ["exactMatch"] => MemberSelector::Exact(exact_name(&sel["exactMatch"]["name"])?),
        ["regexMatch"] => MemberSelector::Regex(regex_pattern(&sel["regexMatch"]["pattern"])?),
        ["labelMatch"] if kind == HyperNodeMemberKind::HyperNode => {
            // Volcano applies labelMatch to nodes only; on a HyperNode
            // member it would select nothing, so it is refused.
            return Err("selector.labelMatch: only valid for members of type \"Node\"".into());
        }
        ["labelMatch"] => MemberSelector::Labels(label_match(&sel["labelMatch"])?),
        _ => {
            return Err(
                "selector: Only one of ExactMatch, RegexMatch, or LabelMatch can be specified"
                    .into(),
            );
        }
    };
    Ok(HyperNodeMember { kind, selector })
}

/// `exactMatch.name`: a DNS subdomain of 1 to 253 characters (a node or
/// HyperNode name).
fn exact_name(v: &Value) -> Result<Arc<str>, String> {
    let field = "selector.exactMatch.name";
    let name = match v.as_str() {
        Some(n) if !n.is_empty() => n,
        Some(_) | None => return Err(format!("{field}: Required value")),
    };
    // A DNS subdomain: reuse the label-key prefix rule through a dummy key.
    if name.len() > MAX_NAME_LEN || label_key_error(&format!("{name}/x")).is_some() {
        return Err(format!(
            "{field}: {name:?}: must be a lowercase RFC 1123 subdomain of at most {MAX_NAME_LEN} characters"
        ));
    }
    Ok(Arc::from(name))
}

/// `regexMatch.pattern`: not empty, and it must compile.
fn regex_pattern(v: &Value) -> Result<Arc<str>, String> {
    let field = "selector.regexMatch.pattern";
    match v.as_str() {
        Some(p) if !p.is_empty() => compile_member_regex(p)
            .map(|_| Arc::from(p))
            .map_err(|e| format!("{field}: {p:?}: {e}")),
        _ => Err(format!("{field}: Required value")),
    }
}

/// `labelMatch`: a label selector over nodes (bounded as every selector is).
fn label_match(v: &Value) -> Result<LabelSelector, String> {
    let field = "selector.labelMatch";
    let wire: LabelSelectorWire =
        serde_json::from_value(v.clone()).map_err(|e| format!("{field}: {e}"))?;
    LabelSelector::from_wire(Some(&wire)).map_err(|e| format!("{field}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn topology(levels: Value) -> Result<TopologyDef, String> {
        topology_def(
            &json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
            "metadata": {"name": "default"}, "spec": {"levels": levels}}),
        )
    }

    #[test]
    fn kueue_sample_topology() {
        let t = topology(json!([
            {"nodeLabel": "cloud.provider.com/topology-block"},
            {"nodeLabel": "cloud.provider.com/topology-rack"},
            {"nodeLabel": "kubernetes.io/hostname"},
        ]))
        .unwrap();
        assert_eq!(&*t.name, "default");
        let levels: Vec<&str> = t.levels.iter().map(|l| &**l).collect();
        assert_eq!(
            levels,
            [
                "cloud.provider.com/topology-block",
                "cloud.provider.com/topology-rack",
                "kubernetes.io/hostname"
            ]
        );
    }

    #[test]
    fn invalid_topologies() {
        let many: Vec<Value> = (0..17)
            .map(|i| json!({"nodeLabel": format!("l{i}")}))
            .collect();
        for (levels, message) in [
            (Value::Null, "Topology default: spec.levels: Required value"),
            (
                json!("rack"),
                "Topology default: spec.levels: must be a list, got \"rack\"",
            ),
            (
                json!([]),
                "Topology default: spec.levels: must have at least 1 item",
            ),
            (
                Value::Array(many),
                "Topology default: spec.levels: must have at most 16 items, got 17",
            ),
            (
                json!([{"nodeLabel": "rack"}, {}]),
                "Topology default: spec.levels[1].nodeLabel: Required value",
            ),
            (
                json!([{"nodeLabel": "rack"}, {"nodeLabel": "rack"}]),
                "Topology default: spec.levels[1]: \"rack\": must be unique",
            ),
            (
                json!([{"nodeLabel": "-rack"}]),
                "Topology default: spec.levels[0]: \"-rack\": name part must consist",
            ),
            (
                json!([{"nodeLabel": ""}]),
                "Topology default: spec.levels[0]: \"\": name part must be non-empty",
            ),
            (
                json!([{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "rack"}]),
                "Topology default: spec.levels: the kubernetes.io/hostname label can only be used at the lowest level of topology",
            ),
        ] {
            let e = topology(levels.clone()).unwrap_err();
            assert!(e.starts_with(message), "{levels}: {e}");
        }
        assert_eq!(
            topology_def(&json!({"spec": {"levels": [{"nodeLabel": "rack"}]}})).unwrap_err(),
            "metadata.name is required"
        );
    }

    fn hyper_node(spec: Value) -> Result<HyperNodeDef, String> {
        hyper_node_def(
            &json!({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
            "metadata": {"name": "s0"}, "spec": spec}),
        )
    }

    #[test]
    fn volcano_hyper_nodes() {
        let h = hyper_node(json!({"tier": 1, "tierName": "rack", "members": [
            {"type": "Node", "selector": {"exactMatch": {"name": "node-0"}}},
            {"type": "Node", "selector": {"regexMatch": {"pattern": "^node-[1-3]$"}}},
            {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"topology-rack": "rack1"}}}},
        ]}))
        .unwrap();
        assert_eq!((h.tier, h.tier_name.as_deref()), (1, Some("rack")));
        assert_eq!(
            h.members[0],
            HyperNodeMember {
                kind: HyperNodeMemberKind::Node,
                selector: MemberSelector::Exact("node-0".into())
            }
        );
        assert_eq!(
            h.members[1].selector,
            MemberSelector::Regex("^node-[1-3]$".into())
        );
        let MemberSelector::Labels(sel) = &h.members[2].selector else {
            panic!("labels");
        };
        assert!(sel.matches(&[("topology-rack".to_string(), "rack1".to_string())].into()));
        let h = hyper_node(json!({"tier": 2, "members": [
            {"type": "HyperNode", "selector": {"exactMatch": {"name": "s0"}}},
            {"type": "HyperNode", "selector": {"regexMatch": {"pattern": "s[12]"}}},
        ]}))
        .unwrap();
        assert_eq!(h.tier_name, None);
        assert_eq!(h.members[1].kind, HyperNodeMemberKind::HyperNode);
    }

    #[test]
    fn invalid_hyper_nodes() {
        let node = |selector: Value| json!({"type": "Node", "selector": selector});
        let exact = node(json!({"exactMatch": {"name": "n"}}));
        let many: Vec<Value> = (0..=MAX_HYPERNODE_MEMBERS).map(|_| exact.clone()).collect();
        for (spec, message) in [
            (json!({"members": [exact]}), "spec.tier: Required value"),
            (
                json!({"tier": -1, "members": [exact]}),
                "spec.tier: must be an integer between 0 and 16, got -1",
            ),
            (
                json!({"tier": 17, "members": [exact]}),
                "spec.tier: must be an integer between 0 and 16, got 17",
            ),
            (
                json!({"tier": "1", "members": [exact]}),
                "spec.tier: must be an integer between 0 and 16, got \"1\"",
            ),
            (
                json!({"tier": 1, "tierName": "r".repeat(254), "members": [exact]}),
                "spec.tierName: must be no more than 253 characters",
            ),
            (json!({"tier": 1}), "spec.members: Required value"),
            (
                json!({"tier": 1, "members": []}),
                "spec.members: must have at least 1 item",
            ),
            (
                json!({"tier": 1, "members": many}),
                "spec.members: must have at most 10000 items, got 10001",
            ),
            (
                json!({"tier": 1, "members": [{"selector": {"exactMatch": {"name": "n"}}}]}),
                "spec.members[0].type: Required value",
            ),
            (
                json!({"tier": 1, "members": [{"type": "Rack", "selector": {"exactMatch": {"name": "n"}}}]}),
                "spec.members[0].type: Unsupported value: \"Rack\"",
            ),
            (
                json!({"tier": 1, "members": [exact, node(json!({}))]}),
                "spec.members[1].selector: Either ExactMatch or RegexMatch or LabelMatch must be specified",
            ),
            (
                json!({"tier": 1, "members": [node(json!({"exactMatch": {"name": "n"}, "regexMatch": {"pattern": "n"}}))]}),
                "spec.members[0].selector: Only one of ExactMatch, RegexMatch, or LabelMatch can be specified",
            ),
            (
                json!({"tier": 1, "members": [node(json!({"exactMatch": {"name": ""}}))]}),
                "spec.members[0].selector.exactMatch.name: Required value",
            ),
            (
                json!({"tier": 1, "members": [node(json!({"exactMatch": {"name": "Node_1"}}))]}),
                "spec.members[0].selector.exactMatch.name: \"Node_1\": must be a lowercase RFC 1123 subdomain",
            ),
            (
                json!({"tier": 1, "members": [node(json!({"regexMatch": {"pattern": ""}}))]}),
                "spec.members[0].selector.regexMatch.pattern: Required value",
            ),
            (
                json!({"tier": 1, "members": [node(json!({"regexMatch": {"pattern": "node-("}}))]}),
                "spec.members[0].selector.regexMatch.pattern: \"node-(\": invalid regular expression",
            ),
            (
                json!({"tier": 1, "members": [node(json!({"labelMatch": {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}}))]}),
                "spec.members[0].selector.labelMatch: ",
            ),
            (
                json!({"tier": 1, "members": [node(json!({"labelMatch": {"matchLabels": "rack"}}))]}),
                "spec.members[0].selector.labelMatch: ",
            ),
            (
                json!({"tier": 2, "members": [{"type": "HyperNode", "selector": {"labelMatch": {}}}]}),
                "spec.members[0].selector.labelMatch: only valid for members of type \"Node\"",
            ),
        ] {
            let e = hyper_node(spec.clone()).unwrap_err();
            let want = format!("HyperNode s0: {message}");
            assert!(e.starts_with(&want), "{spec}:\n  {e}\n  wanted {want}");
        }
    }

    /// Hostile objects: any shape of JSON where the fields are expected
    /// (keys among the real ones) never panics, and what is accepted holds
    /// every bound.
    mod hostile {
        use super::*;
        use proptest::prelude::*;

        fn value() -> impl Strategy<Value = Value> {
            let key = prop_oneof![
                Just("levels"),
                Just("nodeLabel"),
                Just("tier"),
                Just("tierName"),
                Just("members"),
                Just("type"),
                Just("selector"),
                Just("exactMatch"),
                Just("regexMatch"),
                Just("labelMatch"),
                Just("name"),
                Just("pattern"),
                Just("matchLabels"),
                Just("matchExpressions"),
            ];
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<i64>().prop_map(Value::from),
                any::<f64>().prop_map(Value::from),
                prop_oneof![
                    Just("Node"),
                    Just("HyperNode"),
                    Just("rack"),
                    Just("kubernetes.io/hostname"),
                    Just("("),
                    Just("^n-[0-9]+$"),
                    Just(""),
                    Just("a/b/c"),
                ]
                .prop_map(Value::from),
                "[ -~]{0,12}".prop_map(Value::from),
            ];
            leaf.prop_recursive(5, 48, 4, move |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                    prop::collection::btree_map(key.clone(), inner, 0..4).prop_map(|m| {
                        Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
                    }),
                ]
            })
        }

        proptest! {
            #[test]
            fn readers_never_panic_and_bound_what_they_accept(spec in value()) {
                let obj = json!({"metadata": {"name": "x"}, "spec": spec});
                if let Ok(t) = topology_def(&obj) {
                    prop_assert!((1..=MAX_TOPOLOGY_LEVELS).contains(&t.levels.len()));
                }
                if let Ok(h) = hyper_node_def(&obj) {
                    prop_assert!(h.tier <= MAX_HYPERNODE_TIER);
                    prop_assert!((1..=MAX_HYPERNODE_MEMBERS).contains(&h.members.len()));
                }
                let _ = crate::dialects::volcano::network_topology(&obj["spec"]);
            }
        }
    }

    #[test]
    fn label_levels() {
        assert_eq!(label_level("rack", "f"), Ok(LevelRef::Label("rack".into())));
        assert_eq!(
            label_level("a/b/c", "annotation x").unwrap_err(),
            "annotation x: Invalid value: \"a/b/c\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        );
    }

    #[test]
    fn level_lists_follow_one_rule() {
        let keys = |k: &[&str]| k.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(validate_level_keys(&keys(&["block", "rack"])), Ok(()));
        let e = validate_level_keys(&keys(&["block", "block"])).unwrap_err();
        assert_eq!(e.at, "[1]");
        assert_eq!(e.message, "\"block\": must be unique");
        let e = validate_level_keys(&[]).unwrap_err();
        assert_eq!(
            (e.at.as_str(), e.message.as_str()),
            ("", "must have at least 1 item")
        );
        let long = format!("{}/{}", "p".repeat(253), "n".repeat(63));
        let e = validate_level_keys(&[long]).unwrap_err();
        assert!(
            e.message.ends_with("must be no more than 316 characters"),
            "{e}"
        );
    }
}
