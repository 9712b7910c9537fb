//! Node taints and pod tolerations, with the matching rules of
//! `k8s.io/api/core/v1` `Toleration.ToleratesTaint`.

use std::fmt;

use super::ModelError;
use super::wire::{TaintWire, TolerationWire};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    fn parse(s: &str) -> Result<Self, ModelError> {
        match s {
            "NoSchedule" => Ok(TaintEffect::NoSchedule),
            "PreferNoSchedule" => Ok(TaintEffect::PreferNoSchedule),
            "NoExecute" => Ok(TaintEffect::NoExecute),
            other => Err(ModelError::invalid(format!(
                "unknown taint effect {other:?}"
            ))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: TaintEffect,
}

impl Taint {
    pub fn from_wire(w: &TaintWire) -> Result<Self, ModelError> {
        Ok(Taint {
            key: w.key.clone(),
            value: w.value.clone().unwrap_or_default(),
            effect: TaintEffect::parse(&w.effect)?,
        })
    }
}

/// Formats like kube-scheduler's `untolerated taint {key: value}` message.
impl fmt::Display for Taint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{{{}: {}}}", self.key, self.value)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toleration {
    /// Empty key with `Exists` tolerates every taint.
    pub key: String,
    pub exists: bool,
    pub value: String,
    /// `None` tolerates every effect.
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    pub fn from_wire(w: &TolerationWire) -> Result<Self, ModelError> {
        let exists = match w.operator.as_deref() {
            None | Some("") | Some("Equal") => false,
            Some("Exists") => true,
            Some(other) => {
                return Err(ModelError::invalid(format!(
                    "toleration {:?}: unknown operator {other:?}",
                    w.key.as_deref().unwrap_or("")
                )));
            }
        };
        let effect = match w.effect.as_deref() {
            None | Some("") => None,
            Some(e) => Some(TaintEffect::parse(e)?),
        };
        Ok(Toleration {
            key: w.key.clone().unwrap_or_default(),
            exists,
            value: w.value.clone().unwrap_or_default(),
            effect,
        })
    }

    pub fn tolerates(&self, taint: &Taint) -> bool {
        if self.effect.is_some_and(|e| e != taint.effect) {
            return false;
        }
        if !self.key.is_empty() && self.key != taint.key {
            return false;
        }
        if self.exists {
            return true;
        }
        // An empty key is only valid with Exists; with Equal it tolerates nothing.
        !self.key.is_empty() && self.value == taint.value
    }
}

/// The first taint with one of `effects` that no toleration tolerates.
pub fn first_untolerated<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    effects: &[TaintEffect],
) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|t| effects.contains(&t.effect))
        .find(|t| !tolerations.iter().any(|tol| tol.tolerates(t)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: &str, effect: TaintEffect) -> Taint {
        Taint {
            key: key.into(),
            value: value.into(),
            effect,
        }
    }

    fn tol(
        key: Option<&str>,
        op: Option<&str>,
        value: Option<&str>,
        effect: Option<&str>,
    ) -> Toleration {
        Toleration::from_wire(&TolerationWire {
            key: key.map(Into::into),
            operator: op.map(Into::into),
            value: value.map(Into::into),
            effect: effect.map(Into::into),
            toleration_seconds: None,
        })
        .unwrap()
    }

    #[test]
    fn equal_and_exists() {
        let t = taint("gpu", "true", TaintEffect::NoSchedule);
        assert!(tol(Some("gpu"), None, Some("true"), None).tolerates(&t));
        assert!(!tol(Some("gpu"), None, Some("false"), None).tolerates(&t));
        assert!(tol(Some("gpu"), Some("Exists"), None, None).tolerates(&t));
        assert!(
            tol(None, Some("Exists"), None, None).tolerates(&t),
            "wildcard"
        );
        assert!(!tol(Some("gpu"), Some("Exists"), None, Some("NoExecute")).tolerates(&t));
        assert!(!tol(None, Some("Equal"), Some("true"), None).tolerates(&t));
    }

    #[test]
    fn first_untolerated_respects_effects() {
        let taints = vec![
            taint("a", "1", TaintEffect::PreferNoSchedule),
            taint("b", "2", TaintEffect::NoSchedule),
        ];
        let hard = [TaintEffect::NoSchedule, TaintEffect::NoExecute];
        assert_eq!(
            first_untolerated(&taints, &[], &hard).map(|t| t.key.as_str()),
            Some("b")
        );
        let tols = [tol(Some("b"), Some("Exists"), None, None)];
        assert!(first_untolerated(&taints, &tols, &hard).is_none());
    }
}
