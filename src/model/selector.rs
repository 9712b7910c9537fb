//! Node selector terms (required and preferred node affinity, `nodeSelector`).
//!
//! Semantics follow `k8s.io/component-helpers/scheduling/corev1/nodeaffinity`:
//! terms are ORed, the requirements inside a term are ANDed, an empty term matches
//! nothing, and `matchFields` supports only `metadata.name`.

use std::collections::BTreeMap;

use super::ModelError;
use super::wire::{NodeSelectorTermWire, RequirementWire};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub op: Operator,
    pub values: Vec<String>,
}

impl Requirement {
    fn from_wire(w: &RequirementWire) -> Result<Self, ModelError> {
        let op = match w.operator.as_str() {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            "Gt" => Operator::Gt,
            "Lt" => Operator::Lt,
            other => {
                return Err(ModelError::invalid(format!(
                    "node selector requirement {:?}: unknown operator {other:?}",
                    w.key
                )));
            }
        };
        let arity_ok = match op {
            Operator::In | Operator::NotIn => !w.values.is_empty(),
            Operator::Exists | Operator::DoesNotExist => w.values.is_empty(),
            Operator::Gt | Operator::Lt => {
                w.values.len() == 1 && w.values[0].parse::<i64>().is_ok()
            }
        };
        if !arity_ok {
            return Err(ModelError::invalid(format!(
                "node selector requirement {:?}: operator {:?} has invalid values {:?}",
                w.key, w.operator, w.values
            )));
        }
        Ok(Requirement {
            key: w.key.clone(),
            op,
            values: w.values.clone(),
        })
    }

    /// Whether `value` (the label's value, if the label exists) satisfies this requirement.
    pub fn matches(&self, value: Option<&str>) -> bool {
        match (self.op, value) {
            (Operator::In, Some(v)) => self.values.iter().any(|x| x == v),
            (Operator::In, None) => false,
            (Operator::NotIn, Some(v)) => !self.values.iter().any(|x| x == v),
            (Operator::NotIn, None) => true,
            (Operator::Exists, v) => v.is_some(),
            (Operator::DoesNotExist, v) => v.is_none(),
            (Operator::Gt | Operator::Lt, None) => false,
            (op, Some(v)) => {
                let (Ok(have), Some(Ok(want))) = (
                    v.parse::<i64>(),
                    self.values.first().map(|s| s.parse::<i64>()),
                ) else {
                    return false;
                };
                if op == Operator::Gt {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

/// One node selector term: all expressions and fields must match.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeSelectorTerm {
    pub match_expressions: Vec<Requirement>,
    pub match_fields: Vec<Requirement>,
}

impl NodeSelectorTerm {
    pub fn from_wire(w: &NodeSelectorTermWire) -> Result<Self, ModelError> {
        let match_expressions = w
            .match_expressions
            .iter()
            .map(Requirement::from_wire)
            .collect::<Result<_, _>>()?;
        let match_fields: Vec<Requirement> = w
            .match_fields
            .iter()
            .map(Requirement::from_wire)
            .collect::<Result<_, _>>()?;
        if let Some(bad) = match_fields.iter().find(|r| r.key != "metadata.name") {
            return Err(ModelError::invalid(format!(
                "node selector matchFields key {:?} is not supported (only metadata.name)",
                bad.key
            )));
        }
        Ok(NodeSelectorTerm {
            match_expressions,
            match_fields,
        })
    }

    /// An empty term matches no node (kube-scheduler semantics).
    pub fn matches(&self, node_name: &str, labels: &BTreeMap<String, String>) -> bool {
        if self.match_expressions.is_empty() && self.match_fields.is_empty() {
            return false;
        }
        self.match_expressions
            .iter()
            .all(|r| r.matches(labels.get(&r.key).map(String::as_str)))
            && self.match_fields.iter().all(|r| r.matches(Some(node_name)))
    }
}

/// Required node affinity: a node must match at least one term.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeSelector {
    pub terms: Vec<NodeSelectorTerm>,
}

impl NodeSelector {
    pub fn matches(&self, node_name: &str, labels: &BTreeMap<String, String>) -> bool {
        self.terms.iter().any(|t| t.matches(node_name, labels))
    }
}

/// One weighted preferred-affinity term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreferredTerm {
    pub weight: i32,
    pub term: NodeSelectorTerm,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(key: &str, op: &str, values: &[&str]) -> RequirementWire {
        RequirementWire {
            key: key.into(),
            operator: op.into(),
            values: values.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn operators() {
        let l = labels(&[("zone", "a"), ("gpus", "8")]);
        let term = |r: RequirementWire| {
            NodeSelectorTerm::from_wire(&NodeSelectorTermWire {
                match_expressions: vec![r],
                match_fields: vec![],
            })
            .unwrap()
        };
        assert!(term(req("zone", "In", &["a", "b"])).matches("n", &l));
        assert!(!term(req("zone", "NotIn", &["a"])).matches("n", &l));
        assert!(term(req("rack", "NotIn", &["a"])).matches("n", &l));
        assert!(term(req("zone", "Exists", &[])).matches("n", &l));
        assert!(term(req("rack", "DoesNotExist", &[])).matches("n", &l));
        assert!(term(req("gpus", "Gt", &["4"])).matches("n", &l));
        assert!(!term(req("gpus", "Lt", &["4"])).matches("n", &l));
        assert!(
            !term(req("zone", "Gt", &["4"])).matches("n", &l),
            "non-integer label never matches Gt"
        );
    }

    #[test]
    fn match_fields_by_name() {
        let t = NodeSelectorTerm::from_wire(&NodeSelectorTermWire {
            match_expressions: vec![],
            match_fields: vec![req("metadata.name", "In", &["node-1"])],
        })
        .unwrap();
        assert!(t.matches("node-1", &BTreeMap::new()));
        assert!(!t.matches("node-2", &BTreeMap::new()));
    }

    #[test]
    fn empty_term_matches_nothing() {
        assert!(!NodeSelectorTerm::default().matches("n", &labels(&[("a", "b")])));
    }

    #[test]
    fn invalid_requirements_are_errors() {
        for r in [
            req("k", "Bogus", &[]),
            req("k", "In", &[]),
            req("k", "Exists", &["x"]),
            req("k", "Gt", &["x"]),
        ] {
            let w = NodeSelectorTermWire {
                match_expressions: vec![r],
                match_fields: vec![],
            };
            assert!(NodeSelectorTerm::from_wire(&w).is_err());
        }
    }
}
