//! `metav1.LabelSelector` over object labels (pods, namespaces), as
//! `metav1.LabelSelectorAsSelector` reads it: `matchLabels` and
//! `matchExpressions` are ANDed, an empty selector `{}` matches everything and
//! an absent (`null`) one matches nothing.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ModelError;
use super::selector::{Operator, Requirement};

/// A label selector as written in an object.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct LabelSelectorWire {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub match_labels: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub match_expressions: Option<Vec<LabelSelectorRequirementWire>>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct LabelSelectorRequirementWire {
    pub key: String,
    pub operator: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
}

/// A parsed label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelSelector {
    /// `null`: selects no object.
    Nothing,
    /// Every requirement must hold; none at all selects every object.
    All(Vec<Requirement>),
}

impl LabelSelector {
    /// Parses an optional selector; `field` names it in errors.
    pub fn from_wire(w: Option<&LabelSelectorWire>, field: &str) -> Result<Self, ModelError> {
        let Some(w) = w else {
            return Ok(LabelSelector::Nothing);
        };
        let mut reqs: Vec<Requirement> = w
            .match_labels
            .iter()
            .flatten()
            .map(|(k, v)| Requirement {
                key: k.clone(),
                op: Operator::In,
                values: vec![v.clone()],
            })
            .collect();
        for (i, e) in w.match_expressions.iter().flatten().enumerate() {
            reqs.push(requirement(e).map_err(|msg| {
                ModelError::invalid(format!("{field}.matchExpressions[{i}]: {msg}"))
            })?);
        }
        Ok(LabelSelector::All(reqs))
    }

    /// Whether an object with `labels` is selected.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            LabelSelector::Nothing => false,
            LabelSelector::All(reqs) => reqs
                .iter()
                .all(|r| r.matches(labels.get(&r.key).map(String::as_str))),
        }
    }

    pub fn is_nothing(&self) -> bool {
        matches!(self, LabelSelector::Nothing)
    }

    /// Adds a requirement (`matchLabelKeys` merging); a `Nothing` selector
    /// stays `Nothing`, as the API server leaves a null selector alone.
    pub fn push(&mut self, r: Requirement) {
        if let LabelSelector::All(reqs) = self {
            reqs.push(r);
        }
    }
}

/// One `matchExpressions` entry: only the set-based operators are valid.
fn requirement(e: &LabelSelectorRequirementWire) -> Result<Requirement, String> {
    let values = e.values.clone().unwrap_or_default();
    let op = match e.operator.as_str() {
        "In" => Operator::In,
        "NotIn" => Operator::NotIn,
        "Exists" => Operator::Exists,
        "DoesNotExist" => Operator::DoesNotExist,
        other => return Err(format!("key {:?}: unknown operator {other:?}", e.key)),
    };
    let arity_ok = match op {
        Operator::In | Operator::NotIn => !values.is_empty(),
        _ => values.is_empty(),
    };
    if !arity_ok {
        return Err(format!(
            "key {:?}: operator {:?} has invalid values {values:?}",
            e.key, e.operator
        ));
    }
    Ok(Requirement {
        key: e.key.clone(),
        op,
        values,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sel(v: serde_json::Value) -> Result<LabelSelector, ModelError> {
        let w: Option<LabelSelectorWire> = serde_json::from_value(v).unwrap();
        LabelSelector::from_wire(w.as_ref(), "s")
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn null_matches_nothing_and_empty_matches_everything() {
        let l = labels(&[("app", "web")]);
        assert!(!sel(json!(null)).unwrap().matches(&l));
        assert!(sel(json!({})).unwrap().matches(&l));
        assert!(sel(json!({})).unwrap().matches(&BTreeMap::new()));
    }

    #[test]
    fn labels_and_expressions_are_anded() {
        let s = sel(json!({"matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]},
                                 {"key": "canary", "operator": "DoesNotExist"}]}))
        .unwrap();
        assert!(s.matches(&labels(&[("app", "web")])));
        assert!(s.matches(&labels(&[("app", "web"), ("tier", "fe")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "db")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("canary", "")])));
        assert!(!s.matches(&labels(&[("app", "db")])));
    }

    #[test]
    fn invalid_expressions_name_the_field() {
        let e = sel(json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "s.matchExpressions[0]: key \"a\": unknown operator \"Gt\""
        );
        assert!(sel(json!({"matchExpressions": [{"key": "a", "operator": "In"}]})).is_err());
        assert!(
            sel(json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}))
                .is_err()
        );
    }
}
