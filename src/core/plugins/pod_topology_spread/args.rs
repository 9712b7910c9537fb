//! `PodTopologySpreadArgs`: the default constraints for pods that declare
//! none, decoded and validated as kube-scheduler's
//! `ValidatePodTopologySpreadArgs` does.

use std::collections::HashMap;

use crate::framework::args::{self, ConfigError};
use crate::model::spread::{HOSTNAME_LABEL, SpreadConstraint, ZONE_LABEL};
use crate::model::wire::TopologySpreadConstraintWire;
use crate::model::{LabelSelector, WhenUnsatisfiable};

/// `defaultingType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DefaultingType {
    /// kube-scheduler's built-in defaults ([`system_default_constraints`]).
    #[default]
    System,
    /// The configured `defaultConstraints` (possibly none).
    List,
}

/// `PodTopologySpreadArgs`. The constraints have no selector yet: each pod's
/// is deduced from the Services and controllers selecting it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodTopologySpreadArgs {
    pub default_constraints: Vec<SpreadConstraint>,
    pub defaulting_type: DefaultingType,
}

impl PodTopologySpreadArgs {
    /// The default constraints in force: the system ones, or the list.
    pub fn effective_defaults(&self) -> Vec<SpreadConstraint> {
        match self.defaulting_type {
            DefaultingType::System => system_default_constraints(),
            DefaultingType::List => self.default_constraints.clone(),
        }
    }
}

/// kube-scheduler's system defaults: hostname with maxSkew 3 and zone with
/// maxSkew 5, both `ScheduleAnyway`.
pub fn system_default_constraints() -> Vec<SpreadConstraint> {
    let soft = |key: &str, max_skew| SpreadConstraint {
        max_skew,
        topology_key: key.to_string(),
        when_unsatisfiable: WhenUnsatisfiable::ScheduleAnyway,
        selector: LabelSelector::default(),
        min_domains: 1,
        node_affinity_policy: crate::model::spread::InclusionPolicy::Honor,
        node_taints_policy: crate::model::spread::InclusionPolicy::Ignore,
    };
    vec![soft(HOSTNAME_LABEL, 3), soft(ZONE_LABEL, 5)]
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WireArgs {
    default_constraints: Option<Vec<WireConstraint>>,
    defaulting_type: Option<String>,
}

/// A `v1.TopologySpreadConstraint` as written in the args (unknown fields
/// refused, unlike a pod's, which the API server already checked).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
struct WireConstraint {
    max_skew: Option<i64>,
    topology_key: String,
    when_unsatisfiable: String,
    label_selector: Option<serde_json::Value>,
    min_domains: Option<i64>,
    node_affinity_policy: Option<String>,
    node_taints_policy: Option<String>,
    match_label_keys: Vec<String>,
}

/// Decodes and validates `PodTopologySpreadArgs` at `path`.
pub fn decode_args(
    path: &str,
    value: serde_json::Value,
) -> Result<PodTopologySpreadArgs, ConfigError> {
    let raw: WireArgs = args::decode(path, value)?;
    let constraints = raw.default_constraints.unwrap_or_default();
    let defaulting_type = match raw.defaulting_type.as_deref() {
        None | Some("System") => DefaultingType::System,
        Some("List") => DefaultingType::List,
        Some(other) => {
            return Err(ConfigError::at(
                format!("{path}.defaultingType"),
                format!("Unsupported value: {other:?}: supported values: \"List\", \"System\""),
            ));
        }
    };
    if defaulting_type == DefaultingType::System && !constraints.is_empty() {
        return Err(ConfigError::at(
            format!("{path}.defaultingType"),
            "Invalid value: \"System\": when .defaultConstraints are not empty",
        ));
    }
    let mut parsed: Vec<SpreadConstraint> = Vec::with_capacity(constraints.len());
    let mut seen: HashMap<(String, WhenUnsatisfiable), usize> = HashMap::new();
    for (i, c) in constraints.into_iter().enumerate() {
        let at = format!("{path}.defaultConstraints[{i}]");
        if c.label_selector.is_some() {
            return Err(ConfigError::at(
                format!("{at}.labelSelector"),
                "Forbidden: constraint must not define a selector, as they deduced for each pod",
            ));
        }
        if !c.match_label_keys.is_empty() {
            // The selector is deduced, so there is nothing to merge keys into.
            return Err(ConfigError::at(
                format!("{at}.matchLabelKeys"),
                "Forbidden: default constraints take their selector from the objects selecting the pod",
            ));
        }
        let wire = TopologySpreadConstraintWire {
            max_skew: c.max_skew,
            topology_key: c.topology_key,
            when_unsatisfiable: c.when_unsatisfiable,
            label_selector: None,
            min_domains: c.min_domains,
            node_affinity_policy: c.node_affinity_policy,
            node_taints_policy: c.node_taints_policy,
            match_label_keys: Vec::new(),
        };
        let constraint = SpreadConstraint::parse_fields(&wire, LabelSelector::default())
            .map_err(|e| ConfigError::at(format!("{at}.{}", e.field), e.message))?;
        let key = (
            constraint.topology_key.clone(),
            constraint.when_unsatisfiable,
        );
        if seen.insert(key, i).is_some() {
            return Err(ConfigError::at(
                format!("{path}.defaultConstraints[{i}]"),
                format!(
                    "Duplicate value: \"{{{}, {}}}\"",
                    constraint.topology_key,
                    constraint.when_unsatisfiable.as_str()
                ),
            ));
        }
        parsed.push(constraint);
    }
    Ok(PodTopologySpreadArgs {
        default_constraints: parsed,
        defaulting_type,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_are_system() {
        let a = decode_args("a", serde_json::Value::Null).unwrap();
        assert_eq!(a.defaulting_type, DefaultingType::System);
        let d = a.effective_defaults();
        assert_eq!(
            d.iter()
                .map(|c| (c.topology_key.as_str(), c.max_skew))
                .collect::<Vec<_>>(),
            [
                ("kubernetes.io/hostname", 3),
                ("topology.kubernetes.io/zone", 5)
            ]
        );
        assert!(
            d.iter()
                .all(|c| c.when_unsatisfiable == WhenUnsatisfiable::ScheduleAnyway)
        );
    }

    #[test]
    fn list_defaulting() {
        let a = decode_args(
            "a",
            json!({"defaultingType": "List", "defaultConstraints": [
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}),
        )
        .unwrap();
        assert_eq!(a.effective_defaults().len(), 1);
        let none = decode_args("a", json!({"defaultingType": "List"})).unwrap();
        assert!(none.effective_defaults().is_empty());
    }

    #[test]
    fn invalid_args_name_the_field() {
        let c = |extra: serde_json::Value| {
            let mut c =
                json!({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"});
            for (k, v) in extra.as_object().unwrap() {
                c[k] = v.clone();
            }
            json!({"defaultingType": "List", "defaultConstraints": [c]})
        };
        let cases = [
            (
                json!({"defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}),
                "a.defaultingType",
                "when .defaultConstraints are not empty",
            ),
            (
                json!({"defaultingType": "Both"}),
                "a.defaultingType",
                "Unsupported value",
            ),
            (
                c(json!({"maxSkew": 0})),
                "a.defaultConstraints[0].maxSkew",
                "Invalid value: 0",
            ),
            (
                c(json!({"topologyKey": ""})),
                "a.defaultConstraints[0].topologyKey",
                "Required",
            ),
            (
                c(json!({"whenUnsatisfiable": "Never"})),
                "a.defaultConstraints[0].whenUnsatisfiable",
                "Unsupported value",
            ),
            (
                c(json!({"labelSelector": {}})),
                "a.defaultConstraints[0].labelSelector",
                "must not define a selector",
            ),
            (
                c(json!({"matchLabelKeys": ["x"]})),
                "a.defaultConstraints[0].matchLabelKeys",
                "Forbidden",
            ),
            (
                c(json!({"bogus": 1})),
                "a.defaultConstraints[0].bogus",
                "unknown field `bogus`",
            ),
        ];
        for (args, path, msg) in cases {
            let e = decode_args("a", args.clone()).unwrap_err();
            assert!(
                e.path == path && e.message.contains(msg),
                "{args}: {} {}",
                e.path,
                e.message
            );
        }
        let dup = decode_args(
            "a",
            json!({"defaultingType": "List", "defaultConstraints": [
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
                {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}),
        )
        .unwrap_err();
        assert_eq!(dup.path, "a.defaultConstraints[1]");
        assert!(dup.message.contains("Duplicate"), "{dup}");
    }
}
