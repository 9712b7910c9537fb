//! Inter-pod affinity terms (`spec.affinity.podAffinity` and
//! `podAntiAffinity`), parsed once per pod as kube-scheduler's `PodInfo` does:
//! the namespaces a term covers are resolved (none listed and no
//! `namespaceSelector` means the pod's own namespace), and `matchLabelKeys` /
//! `mismatchLabelKeys` are merged into the label selector from the pod's own
//! labels, as the API server does when the pod is created (merging again is
//! harmless: the same requirement twice selects the same pods).
//!
//! Hostile input is bounded: at most [`MAX_TERMS`] terms per list, preferred
//! weights in `1..=100`, a non-empty `topologyKey`; anything else refuses the
//! pod with an error naming the field.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::ModelError;
use super::selector::LabelSelector;
use super::selector::{Operator, Requirement};
use super::wire::LabelSelectorWire;

/// Terms one list (e.g. required anti-affinity) may hold: far above any real
/// workload, low enough that PreFilter's work per pod stays bounded.
pub const MAX_TERMS: usize = 64;
/// The API's bounds for a preferred term's weight.
pub const MIN_WEIGHT: i64 = 1;
pub const MAX_WEIGHT: i64 = 100;

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct PodAffinityWire {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub required_during_scheduling_ignored_during_execution: Option<Vec<PodAffinityTermWire>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preferred_during_scheduling_ignored_during_execution:
        Option<Vec<WeightedPodAffinityTermWire>>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct PodAffinityTermWire {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelectorWire>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelectorWire>,
    pub topology_key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub match_label_keys: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mismatch_label_keys: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct WeightedPodAffinityTermWire {
    /// Wider than the API's int32 so an absurd value is refused by name
    /// rather than failing the whole decode.
    pub weight: i64,
    pub pod_affinity_term: PodAffinityTermWire,
}

/// One parsed `PodAffinityTerm`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodAffinityTerm {
    /// With `matchLabelKeys` / `mismatchLabelKeys` merged in.
    pub label_selector: LabelSelector,
    /// The namespaces listed, or the pod's own when none are listed and
    /// there is no `namespaceSelector`.
    pub namespaces: Vec<Arc<str>>,
    /// `null` selects no namespace, `{}` every namespace.
    pub namespace_selector: LabelSelector,
    pub topology_key: String,
    pub match_label_keys: Vec<String>,
    pub mismatch_label_keys: Vec<String>,
}

impl PodAffinityTerm {
    /// Whether `labels` of a pod in `namespace` are selected by this term.
    /// `ns_labels` yields the labels of `namespace` when known; it is only
    /// called when the `namespaceSelector` decides.
    pub fn matches<'a>(
        &self,
        namespace: &str,
        labels: &BTreeMap<String, String>,
        ns_labels: impl FnOnce() -> Option<&'a BTreeMap<String, String>>,
    ) -> bool {
        let listed = self.namespaces.iter().any(|n| **n == *namespace);
        if !listed && self.namespace_selector.matches_nothing() {
            return false;
        }
        if !self.label_selector.matches(labels) {
            return false;
        }
        listed || ns_labels().is_some_and(|l| self.namespace_selector.matches(l))
    }
}

/// One preferred term with its weight (`1..=100`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightedPodAffinityTerm {
    pub weight: i32,
    pub term: PodAffinityTerm,
}

/// A pod's inter-pod affinity and anti-affinity.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodAffinity {
    pub required_affinity: Vec<PodAffinityTerm>,
    pub required_anti_affinity: Vec<PodAffinityTerm>,
    pub preferred_affinity: Vec<WeightedPodAffinityTerm>,
    pub preferred_anti_affinity: Vec<WeightedPodAffinityTerm>,
}

impl PodAffinity {
    /// Parses both lists of `spec.affinity` for a pod in `namespace` with
    /// `labels`.
    pub fn from_wire(
        affinity: Option<&PodAffinityWire>,
        anti_affinity: Option<&PodAffinityWire>,
        namespace: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<Self, ModelError> {
        let ctx = Ctx { namespace, labels };
        let (required_affinity, preferred_affinity) =
            ctx.lists(affinity, "spec.affinity.podAffinity")?;
        let (required_anti_affinity, preferred_anti_affinity) =
            ctx.lists(anti_affinity, "spec.affinity.podAntiAffinity")?;
        Ok(PodAffinity {
            required_affinity,
            required_anti_affinity,
            preferred_affinity,
            preferred_anti_affinity,
        })
    }

    /// Any term at all (kube-scheduler's "pod with affinity").
    pub fn is_empty(&self) -> bool {
        self.required_affinity.is_empty()
            && self.required_anti_affinity.is_empty()
            && self.preferred_affinity.is_empty()
            && self.preferred_anti_affinity.is_empty()
    }
}

/// What parsing one pod's terms needs to know of the pod.
struct Ctx<'a> {
    namespace: &'a str,
    labels: &'a BTreeMap<String, String>,
}

type Lists = (Vec<PodAffinityTerm>, Vec<WeightedPodAffinityTerm>);

impl Ctx<'_> {
    fn lists(&self, w: Option<&PodAffinityWire>, field: &str) -> Result<Lists, ModelError> {
        let Some(w) = w else {
            return Ok(Default::default());
        };
        let required_field = format!("{field}.requiredDuringSchedulingIgnoredDuringExecution");
        let required = w
            .required_during_scheduling_ignored_during_execution
            .as_deref()
            .unwrap_or_default();
        bound(required.len(), &required_field)?;
        let required = required
            .iter()
            .enumerate()
            .map(|(i, t)| self.term(t, &format!("{required_field}[{i}]")))
            .collect::<Result<_, _>>()?;

        let preferred_field = format!("{field}.preferredDuringSchedulingIgnoredDuringExecution");
        let preferred = w
            .preferred_during_scheduling_ignored_during_execution
            .as_deref()
            .unwrap_or_default();
        bound(preferred.len(), &preferred_field)?;
        let preferred = preferred
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let at = format!("{preferred_field}[{i}]");
                let weight = i32::try_from(t.weight)
                    .ok()
                    .filter(|w| (MIN_WEIGHT..=MAX_WEIGHT).contains(&i64::from(*w)))
                    .ok_or_else(|| {
                        ModelError::invalid(format!(
                            "{at}.weight: must be in {MIN_WEIGHT}..={MAX_WEIGHT}, got {}",
                            t.weight
                        ))
                    })?;
                let term = self.term(&t.pod_affinity_term, &format!("{at}.podAffinityTerm"))?;
                Ok(WeightedPodAffinityTerm { weight, term })
            })
            .collect::<Result<_, ModelError>>()?;
        Ok((required, preferred))
    }

    fn term(&self, w: &PodAffinityTermWire, at: &str) -> Result<PodAffinityTerm, ModelError> {
        if w.topology_key.is_empty() {
            return Err(ModelError::invalid(format!(
                "{at}.topologyKey: must not be empty"
            )));
        }
        let selector = |w: Option<&LabelSelectorWire>, field: &str| {
            LabelSelector::from_wire(w)
                .map_err(|e| ModelError::invalid(format!("{at}.{field}: {e}")))
        };
        let mut label_selector = selector(w.label_selector.as_ref(), "labelSelector")?;
        let namespace_selector = selector(w.namespace_selector.as_ref(), "namespaceSelector")?;
        let match_label_keys = w.match_label_keys.clone().unwrap_or_default();
        let mismatch_label_keys = w.mismatch_label_keys.clone().unwrap_or_default();
        // The pod's own values for these keys: `In` for matchLabelKeys,
        // `NotIn` for mismatchLabelKeys; a key the pod lacks adds nothing.
        for (keys, op) in [
            (&match_label_keys, Operator::In),
            (&mismatch_label_keys, Operator::NotIn),
        ] {
            for key in keys {
                if let Some(value) = self.labels.get(key) {
                    label_selector.and_requirement(Requirement {
                        key: key.clone(),
                        op,
                        values: vec![value.clone()],
                    });
                }
            }
        }
        let listed = w.namespaces.as_deref().unwrap_or_default();
        let namespaces = if listed.is_empty() && w.namespace_selector.is_none() {
            vec![Arc::from(self.namespace)]
        } else {
            listed.iter().map(|n| Arc::from(n.as_str())).collect()
        };
        Ok(PodAffinityTerm {
            label_selector,
            namespaces,
            namespace_selector,
            topology_key: w.topology_key.clone(),
            match_label_keys,
            mismatch_label_keys,
        })
    }
}

fn bound(len: usize, field: &str) -> Result<(), ModelError> {
    if len > MAX_TERMS {
        return Err(ModelError::invalid(format!(
            "{field}: at most {MAX_TERMS} terms are supported, got {len}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn parse(anti: serde_json::Value, pod_labels: &[(&str, &str)]) -> Result<PodAffinity, String> {
        let w: PodAffinityWire = serde_json::from_value(anti).unwrap();
        PodAffinity::from_wire(None, Some(&w), "ns", &labels(pod_labels)).map_err(|e| e.0)
    }

    fn required(term: serde_json::Value) -> serde_json::Value {
        json!({"requiredDuringSchedulingIgnoredDuringExecution": [term]})
    }

    #[test]
    fn namespaces_default_to_the_pods_own() {
        let a = parse(
            required(json!({"labelSelector": {}, "topologyKey": "zone"})),
            &[],
        )
        .unwrap();
        let t = &a.required_anti_affinity[0];
        assert_eq!(t.namespaces, [Arc::from("ns")]);
        assert!(t.namespace_selector.matches_nothing());
        assert!(t.matches("ns", &labels(&[]), || None));
        assert!(!t.matches("other", &labels(&[]), || None));
    }

    #[test]
    fn an_empty_namespace_selector_selects_every_known_namespace() {
        let a = parse(
            required(json!({"labelSelector": {}, "namespaceSelector": {}, "topologyKey": "z"})),
            &[],
        )
        .unwrap();
        let t = &a.required_anti_affinity[0];
        assert!(t.namespaces.is_empty(), "a selector replaces the default");
        let known = labels(&[]);
        assert!(t.matches("other", &labels(&[]), || Some(&known)));
        assert!(!t.matches("unknown", &labels(&[]), || None));
    }

    #[test]
    fn namespace_selector_or_listed_namespaces() {
        let a = parse(
            required(json!({"labelSelector": {"matchLabels": {"app": "db"}},
                "namespaces": ["a"], "namespaceSelector": {"matchLabels": {"team": "x"}},
                "topologyKey": "z"})),
            &[],
        )
        .unwrap();
        let t = &a.required_anti_affinity[0];
        let team_x = labels(&[("team", "x")]);
        let db = labels(&[("app", "db")]);
        assert!(t.matches("a", &db, || None));
        assert!(t.matches("b", &db, || Some(&team_x)));
        assert!(!t.matches("b", &db, || Some(&db)));
        assert!(!t.matches("a", &labels(&[("app", "web")]), || None));
    }

    #[test]
    fn a_null_label_selector_matches_no_pod() {
        let a = parse(required(json!({"topologyKey": "z"})), &[]).unwrap();
        assert!(!a.required_anti_affinity[0].matches("ns", &labels(&[]), || None));
    }

    #[test]
    fn match_label_keys_merge_the_pods_own_values() {
        let a = parse(
            required(json!({"labelSelector": {"matchLabels": {"app": "web"}},
                "matchLabelKeys": ["rev", "absent"], "mismatchLabelKeys": ["tenant"],
                "topologyKey": "z"})),
            &[("rev", "2"), ("tenant", "t1")],
        )
        .unwrap();
        let t = &a.required_anti_affinity[0];
        let m = |pairs: &[(&str, &str)]| t.matches("ns", &labels(pairs), || None);
        assert!(m(&[("app", "web"), ("rev", "2"), ("tenant", "t2")]));
        assert!(!m(&[("app", "web"), ("rev", "1"), ("tenant", "t2")]));
        assert!(!m(&[("app", "web"), ("rev", "2"), ("tenant", "t1")]));
        // A null selector stays null (the API server leaves it alone too).
        let a = parse(
            required(json!({"matchLabelKeys": ["rev"], "topologyKey": "z"})),
            &[("rev", "2")],
        )
        .unwrap();
        assert!(a.required_anti_affinity[0].label_selector.matches_nothing());
    }

    #[test]
    fn bad_terms_are_refused_naming_the_field() {
        let pref = |weight: i64| {
            json!({"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": weight, "podAffinityTerm": {"labelSelector": {}, "topologyKey": "z"}}]})
        };
        assert!(parse(pref(1), &[]).is_ok());
        assert!(parse(pref(100), &[]).is_ok());
        assert_eq!(
            parse(pref(0), &[]).unwrap_err(),
            "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: must be in 1..=100, got 0"
        );
        assert!(parse(pref(101), &[]).is_err());
        assert!(parse(pref(1 << 40), &[]).is_err());
        assert_eq!(
            parse(
                required(json!({"labelSelector": {}, "topologyKey": ""})),
                &[]
            )
            .unwrap_err(),
            "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: must not be empty"
        );
        let bad_op = required(json!({"labelSelector": {"matchExpressions": [
            {"key": "a", "operator": "Lt", "values": ["1"]}]}, "topologyKey": "z"}));
        assert!(
            parse(bad_op, &[])
                .unwrap_err()
                .starts_with("spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector: ")
        );
        let many: Vec<_> = (0..=MAX_TERMS)
            .map(|_| json!({"labelSelector": {}, "topologyKey": "z"}))
            .collect();
        let e = parse(
            json!({"requiredDuringSchedulingIgnoredDuringExecution": many}),
            &[],
        )
        .unwrap_err();
        assert!(e.contains("at most 64 terms"), "{e}");
    }
}
