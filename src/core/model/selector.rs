//! Node selector terms (required and preferred node affinity, `nodeSelector`).
//!
//! Semantics follow `k8s.io/component-helpers/scheduling/corev1/nodeaffinity`:
//! terms are ORed, the requirements inside a term are ANDed, an empty term matches
//! nothing, and `matchFields` supports only `metadata.name`.
//!
//! Also `LabelSelector`, the `metav1.LabelSelector` that selects pods (and the
//! pods a Service, ReplicaSet, ... selects), with `LabelSelectorAsSelector`'s
//! semantics: an absent selector matches nothing, an empty one everything.

use std::collections::BTreeMap;

use super::ModelError;
use super::wire::{LabelSelectorWire, NodeSelectorTermWire, RequirementWire};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
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
    /// From its wire form (a pod's required node affinity, a volume's
    /// `nodeAffinity.required`).
    pub fn from_wire(w: &super::wire::NodeSelectorWire) -> Result<Self, ModelError> {
        let terms = w
            .node_selector_terms
            .iter()
            .map(NodeSelectorTerm::from_wire)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(NodeSelector { terms })
    }

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

/// A `metav1.LabelSelector` over object labels (pods, namespaces, volumes): `matchLabels` and
/// `matchExpressions` ANDed, with the label-selector operators only (`In`,
/// `NotIn`, `Exists`, `DoesNotExist`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct LabelSelector {
    /// Sorted by key then operator, so equal selectors compare (and hash) equal.
    requirements: Vec<Requirement>,
    /// `labels.Nothing()`: the selector of an absent `labelSelector`.
    nothing: bool,
}

/// Most values a label selector may list per requirement, and most
/// requirements: far above what a real selector holds, and small enough that
/// matching stays cheap on the hot path.
pub const MAX_SELECTOR_REQUIREMENTS: usize = 64;
pub const MAX_SELECTOR_VALUES: usize = 256;

impl LabelSelector {
    /// The selector that matches nothing (an absent `labelSelector`).
    pub fn nothing() -> Self {
        LabelSelector {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    /// `key = value` for every pair (a Service's or ReplicationController's
    /// map selector; empty matches everything).
    pub fn from_map(map: &BTreeMap<String, String>) -> Self {
        let mut s = LabelSelector::default();
        for (k, v) in map {
            s.push(Requirement {
                key: k.clone(),
                op: Operator::In,
                values: vec![v.clone()],
            });
        }
        s
    }

    /// From its wire form; `None` (absent) matches nothing.
    pub fn from_wire(w: Option<&LabelSelectorWire>) -> Result<Self, ModelError> {
        let Some(w) = w else {
            return Ok(LabelSelector::nothing());
        };
        if w.match_labels.len() + w.match_expressions.len() > MAX_SELECTOR_REQUIREMENTS {
            return Err(ModelError::invalid(format!(
                "label selector has more than {MAX_SELECTOR_REQUIREMENTS} requirements"
            )));
        }
        let mut s = LabelSelector::from_map(&w.match_labels);
        for e in &w.match_expressions {
            let r = Requirement::from_wire(e)
                .map_err(|err| ModelError::invalid(format!("label selector: {err}")))?;
            if matches!(r.op, Operator::Gt | Operator::Lt) {
                return Err(ModelError::invalid(format!(
                    "label selector requirement {:?}: operator {:?} is not a label selector operator",
                    e.key, e.operator
                )));
            }
            if r.values.len() > MAX_SELECTOR_VALUES {
                return Err(ModelError::invalid(format!(
                    "label selector requirement {:?}: more than {MAX_SELECTOR_VALUES} values",
                    e.key
                )));
            }
            s.push(r);
        }
        Ok(s)
    }

    fn push(&mut self, mut r: Requirement) {
        r.values.sort_unstable();
        r.values.dedup();
        let at = self
            .requirements
            .partition_point(|x| (&x.key, x.op as u8) <= (&r.key, r.op as u8));
        self.requirements.insert(at, r);
    }

    /// Adds `key = value` (`matchLabelKeys` merged from a pod's own labels);
    /// a selector that matches nothing stays so, as upstream.
    pub fn and_equals(&mut self, key: &str, value: &str) {
        self.and_requirement(Requirement {
            key: key.to_string(),
            op: Operator::In,
            values: vec![value.to_string()],
        });
    }

    /// Adds a requirement (ANDed), e.g. `mismatchLabelKeys`' `NotIn`; a
    /// selector that matches nothing stays so, as upstream.
    pub fn and_requirement(&mut self, r: Requirement) {
        if !self.nothing {
            self.push(r);
        }
    }

    /// Adds every requirement of `other` (ANDed); `nothing` wins.
    pub fn and(&mut self, other: &LabelSelector) {
        self.nothing |= other.nothing;
        for r in &other.requirements {
            self.push(r.clone());
        }
    }

    /// No requirement at all: `Empty()` upstream (matches everything, unless
    /// it is the `nothing` selector).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    pub fn matches_nothing(&self) -> bool {
        self.nothing
    }

    /// The requirements, sorted by key then operator (indexes read the
    /// equality ones to narrow their candidates).
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        !self.nothing
            && self
                .requirements
                .iter()
                .all(|r| r.matches(labels.get(&r.key).map(String::as_str)))
    }
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

    fn label_selector(v: serde_json::Value) -> Result<LabelSelector, ModelError> {
        let w: Option<LabelSelectorWire> = serde_json::from_value(v).unwrap();
        LabelSelector::from_wire(w.as_ref())
    }

    #[test]
    fn label_selector_null_matches_nothing_and_empty_everything() {
        use serde_json::json;
        let l = labels(&[("app", "web")]);
        assert!(!label_selector(json!(null)).unwrap().matches(&l));
        assert!(label_selector(json!({})).unwrap().matches(&l));
        assert!(label_selector(json!({})).unwrap().matches(&BTreeMap::new()));
        let s = label_selector(json!({"matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]},
                                 {"key": "canary", "operator": "DoesNotExist"}]}))
        .unwrap();
        assert!(s.matches(&labels(&[("app", "web"), ("tier", "fe")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "db")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("canary", "")])));
        for bad in [
            json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}),
            json!({"matchExpressions": [{"key": "a", "operator": "In"}]}),
            json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
        ] {
            assert!(label_selector(bad).is_err());
        }
    }
}
