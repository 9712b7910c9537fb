//! A pod's topology spread constraints (`spec.topologySpreadConstraints`),
//! validated as the API server validates them and parsed once, when the pod
//! is decoded: `matchLabelKeys` are merged into the selector from the pod's
//! own labels here, so PodTopologySpread only counts.
//!
//! Also the pod's controlling owner (ReplicaSet, StatefulSet or
//! ReplicationController), whose selector the plugin's default constraints
//! borrow for pods that declare none.

use std::sync::Arc;

use super::ModelError;
use super::selector::LabelSelector;
use super::wire::{PodWire, TopologySpreadConstraintWire};

/// `kubernetes.io/hostname`: the one topology whose domains are single nodes.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// `topology.kubernetes.io/zone`.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// Most constraints one pod may declare. The API sets no limit, but keys may
/// not repeat per action, so real pods have a handful; the bound keeps Filter
/// O(constraints) cheap for hostile pods.
pub const MAX_SPREAD_CONSTRAINTS: usize = 32;

/// `whenUnsatisfiable`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WhenUnsatisfiable {
    DoNotSchedule,
    ScheduleAnyway,
}

impl WhenUnsatisfiable {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "DoNotSchedule" => Ok(WhenUnsatisfiable::DoNotSchedule),
            "ScheduleAnyway" => Ok(WhenUnsatisfiable::ScheduleAnyway),
            "" => Err("Required value".into()),
            other => Err(format!(
                "Unsupported value: {other:?}: supported values: \"DoNotSchedule\", \"ScheduleAnyway\""
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            WhenUnsatisfiable::DoNotSchedule => "DoNotSchedule",
            WhenUnsatisfiable::ScheduleAnyway => "ScheduleAnyway",
        }
    }
}

/// `nodeAffinityPolicy` / `nodeTaintsPolicy`: whether a node that the pod's
/// node affinity (or taints) would exclude still counts as a domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InclusionPolicy {
    Honor,
    Ignore,
}

impl InclusionPolicy {
    /// `None` (absent) gives `default`.
    pub fn parse(s: Option<&str>, default: Self) -> Result<Self, String> {
        match s {
            None => Ok(default),
            Some("Honor") => Ok(InclusionPolicy::Honor),
            Some("Ignore") => Ok(InclusionPolicy::Ignore),
            Some(other) => Err(format!(
                "Unsupported value: {other:?}: supported values: \"Honor\", \"Ignore\""
            )),
        }
    }
}

/// One parsed constraint.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SpreadConstraint {
    /// At least 1.
    pub max_skew: i32,
    pub topology_key: String,
    pub when_unsatisfiable: WhenUnsatisfiable,
    /// The `labelSelector` with `matchLabelKeys` merged in.
    pub selector: LabelSelector,
    /// At least 1 (1 when absent); above 1 only with `DoNotSchedule`.
    pub min_domains: i32,
    pub node_affinity_policy: InclusionPolicy,
    pub node_taints_policy: InclusionPolicy,
}

impl SpreadConstraint {
    /// Parses the scalar fields of `w` (everything but the selector, which
    /// the caller builds: a pod's from its own field, a default constraint's
    /// from the objects selecting the pod). Messages are relative to the
    /// constraint (`maxSkew: ...`).
    pub fn parse_fields(
        w: &TopologySpreadConstraintWire,
        selector: LabelSelector,
    ) -> Result<Self, FieldError> {
        let max = i64::from(i32::MAX);
        let max_skew = match w.max_skew {
            Some(s) if (1..=max).contains(&s) => s as i32,
            Some(s) => {
                return Err(FieldError::new(
                    "maxSkew",
                    format!("Invalid value: {s}: must be greater than zero and at most {max}"),
                ));
            }
            None => return Err(FieldError::new("maxSkew", "Required value")),
        };
        if w.topology_key.is_empty() {
            return Err(FieldError::new(
                "topologyKey",
                "Required value: can not be empty",
            ));
        }
        validate_label_name(&w.topology_key).map_err(|e| {
            FieldError::new(
                "topologyKey",
                format!("Invalid value: {:?}: {e}", w.topology_key),
            )
        })?;
        let when_unsatisfiable = WhenUnsatisfiable::parse(&w.when_unsatisfiable)
            .map_err(|e| FieldError::new("whenUnsatisfiable", e))?;
        let min_domains = match w.min_domains {
            None => 1,
            Some(m) if !(1..=max).contains(&m) => {
                return Err(FieldError::new(
                    "minDomains",
                    format!("Invalid value: {m}: must be greater than zero and at most {max}"),
                ));
            }
            Some(m) if when_unsatisfiable != WhenUnsatisfiable::DoNotSchedule => {
                return Err(FieldError::new(
                    "minDomains",
                    format!(
                        "Invalid value: {m}: can only use minDomains if whenUnsatisfiable=DoNotSchedule"
                    ),
                ));
            }
            Some(m) => m as i32,
        };
        let node_affinity_policy =
            InclusionPolicy::parse(w.node_affinity_policy.as_deref(), InclusionPolicy::Honor)
                .map_err(|e| FieldError::new("nodeAffinityPolicy", e))?;
        let node_taints_policy =
            InclusionPolicy::parse(w.node_taints_policy.as_deref(), InclusionPolicy::Ignore)
                .map_err(|e| FieldError::new("nodeTaintsPolicy", e))?;
        Ok(SpreadConstraint {
            max_skew,
            topology_key: w.topology_key.clone(),
            when_unsatisfiable,
            selector,
            min_domains,
            node_affinity_policy,
            node_taints_policy,
        })
    }
}

/// A problem with one field of a constraint, named relative to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub field: &'static str,
    pub message: String,
}

impl FieldError {
    pub fn new(field: &'static str, message: impl Into<String>) -> Self {
        FieldError {
            field,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// The kinds whose selector default constraints borrow through the pod's
/// controller reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControllerKind {
    ReplicationController,
    ReplicaSet,
    StatefulSet,
}

/// The pod's controlling owner, when it is one of [`ControllerKind`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ControllerRef {
    pub kind: ControllerKind,
    pub name: Arc<str>,
}

/// What PodTopologySpread reads of a pod.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodSpread {
    pub constraints: Vec<SpreadConstraint>,
    pub controller: Option<ControllerRef>,
}

impl PodSpread {
    pub fn from_wire(w: &PodWire) -> Result<Self, ModelError> {
        let wires = &w.spec.topology_spread_constraints;
        if wires.len() > MAX_SPREAD_CONSTRAINTS {
            return Err(ModelError::invalid(format!(
                "spec.topologySpreadConstraints: Too many: {}: must have at most {MAX_SPREAD_CONSTRAINTS} items",
                wires.len()
            )));
        }
        let mut constraints: Vec<SpreadConstraint> = Vec::with_capacity(wires.len());
        for (i, c) in wires.iter().enumerate() {
            let at =
                |e: String| ModelError::invalid(format!("spec.topologySpreadConstraints[{i}].{e}"));
            let selector = pod_selector(c, &w.metadata.labels).map_err(|e| at(e.to_string()))?;
            let parsed =
                SpreadConstraint::parse_fields(c, selector).map_err(|e| at(e.to_string()))?;
            if constraints.iter().any(|o| {
                o.topology_key == parsed.topology_key
                    && o.when_unsatisfiable == parsed.when_unsatisfiable
            }) {
                return Err(at(format!(
                    "{{topologyKey, whenUnsatisfiable}}: Duplicate value: \"{{{}, {}}}\"",
                    parsed.topology_key,
                    parsed.when_unsatisfiable.as_str()
                )));
            }
            constraints.push(parsed);
        }
        Ok(PodSpread {
            constraints,
            controller: controller_ref(w),
        })
    }

    /// The constraints with this action, in declaration order.
    pub fn with_action(
        &self,
        action: WhenUnsatisfiable,
    ) -> impl Iterator<Item = &SpreadConstraint> + '_ {
        self.constraints
            .iter()
            .filter(move |c| c.when_unsatisfiable == action)
    }
}

/// The constraint's selector with `matchLabelKeys` merged in from the pod's
/// labels (keys the pod lacks are skipped, as upstream).
fn pod_selector(
    c: &TopologySpreadConstraintWire,
    pod_labels: &std::collections::BTreeMap<String, String>,
) -> Result<LabelSelector, FieldError> {
    let mut selector = LabelSelector::from_wire(c.label_selector.as_ref())
        .map_err(|e| FieldError::new("labelSelector", e.to_string()))?;
    let keys = "matchLabelKeys";
    if !c.match_label_keys.is_empty() && c.label_selector.is_none() {
        return Err(FieldError::new(
            keys,
            "Forbidden: must not be specified when labelSelector is not set",
        ));
    }
    if c.match_label_keys.len() > super::selector::MAX_SELECTOR_REQUIREMENTS {
        return Err(FieldError::new(
            keys,
            format!(
                "Too many: {}: must have at most {} items",
                c.match_label_keys.len(),
                super::selector::MAX_SELECTOR_REQUIREMENTS
            ),
        ));
    }
    for key in &c.match_label_keys {
        validate_label_name(key)
            .map_err(|e| FieldError::new(keys, format!("Invalid value: {key:?}: {e}")))?;
        if let Some(value) = pod_labels.get(key) {
            selector.and_equals(key, value);
        }
    }
    Ok(selector)
}

fn controller_ref(w: &PodWire) -> Option<ControllerRef> {
    let r = w
        .metadata
        .owner_references
        .iter()
        .find(|r| r.controller == Some(true))?;
    let kind = match (r.api_version.as_str(), r.kind.as_str()) {
        ("v1", "ReplicationController") => ControllerKind::ReplicationController,
        ("apps/v1", "ReplicaSet") => ControllerKind::ReplicaSet,
        ("apps/v1", "StatefulSet") => ControllerKind::StatefulSet,
        _ => return None,
    };
    Some(ControllerRef {
        kind,
        name: Arc::from(r.name.as_str()),
    })
}

/// A qualified label name (`[prefix/]name`): the name at most 63 characters
/// of alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric; the
/// prefix a DNS subdomain of at most 253 characters.
pub fn validate_label_name(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let alnum = |c: char| c.is_ascii_alphanumeric();
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(alnum)
        && name.ends_with(alnum)
        && name
            .chars()
            .all(|c| alnum(c) || matches!(c, '-' | '_' | '.'));
    if !name_ok {
        return Err("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (at most 63 characters)".into());
    }
    if let Some(p) = prefix {
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && l.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                && l.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                && l.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        };
        if p.is_empty() || p.len() > 253 || !p.split('.').all(label_ok) {
            return Err(
                "prefix part must be a lowercase DNS subdomain (at most 253 characters)".into(),
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spread(labels: serde_json::Value, tsc: serde_json::Value) -> Result<PodSpread, ModelError> {
        let w: PodWire = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "labels": labels},
            "spec": {"topologySpreadConstraints": tsc}
        }))
        .unwrap();
        PodSpread::from_wire(&w)
    }

    fn err(tsc: serde_json::Value) -> String {
        spread(json!({}), tsc).unwrap_err().to_string()
    }

    #[test]
    fn parses_defaults_and_policies() {
        let s = spread(
            json!({"app": "web"}),
            json!([
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                 "labelSelector": {"matchLabels": {"app": "web"}}, "minDomains": 3},
                {"maxSkew": 2, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
                 "labelSelector": {}, "nodeAffinityPolicy": "Ignore", "nodeTaintsPolicy": "Honor"}
            ]),
        )
        .unwrap();
        let [a, b] = &s.constraints[..] else {
            panic!("{s:?}")
        };
        assert_eq!((a.max_skew, a.min_domains), (1, 3));
        assert_eq!(a.node_affinity_policy, InclusionPolicy::Honor);
        assert_eq!(a.node_taints_policy, InclusionPolicy::Ignore);
        assert_eq!(b.when_unsatisfiable, WhenUnsatisfiable::ScheduleAnyway);
        assert_eq!(b.min_domains, 1);
        assert_eq!(b.node_affinity_policy, InclusionPolicy::Ignore);
        assert_eq!(b.node_taints_policy, InclusionPolicy::Honor);
        assert!(b.selector.is_empty() && !b.selector.matches_nothing());
        assert_eq!(s.with_action(WhenUnsatisfiable::DoNotSchedule).count(), 1);
    }

    #[test]
    fn match_label_keys_merge_the_pods_own_values() {
        let s = spread(
            json!({"app": "web", "pod-template-hash": "abc"}),
            json!([{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
                "matchLabelKeys": ["pod-template-hash", "absent"]}]),
        )
        .unwrap();
        let sel = &s.constraints[0].selector;
        let labels = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert!(sel.matches(&labels(&[("app", "web"), ("pod-template-hash", "abc")])));
        assert!(!sel.matches(&labels(&[("app", "web"), ("pod-template-hash", "old")])));
        assert!(!sel.matches(&labels(&[("app", "web")])));
    }

    #[test]
    fn absent_selector_matches_nothing() {
        let s = spread(
            json!({}),
            json!([{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]),
        )
        .unwrap();
        assert!(s.constraints[0].selector.matches_nothing());
    }

    #[test]
    fn invalid_constraints_are_refused_precisely() {
        let base = |extra: serde_json::Value| {
            let mut c = json!({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {}});
            for (k, v) in extra.as_object().unwrap() {
                c[k] = v.clone();
            }
            json!([c])
        };
        let cases = [
            (
                json!({"maxSkew": 0}),
                "spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0",
            ),
            (json!({"maxSkew": 1_i64 << 40}), "maxSkew: Invalid value"),
            (json!({"maxSkew": null}), "maxSkew: Required value"),
            (json!({"topologyKey": ""}), "topologyKey: Required value"),
            (json!({"topologyKey": "a b"}), "topologyKey: Invalid value"),
            (
                json!({"whenUnsatisfiable": "Maybe"}),
                "whenUnsatisfiable: Unsupported value: \"Maybe\"",
            ),
            (
                json!({"whenUnsatisfiable": ""}),
                "whenUnsatisfiable: Required value",
            ),
            (json!({"minDomains": 0}), "minDomains: Invalid value: 0"),
            (
                json!({"minDomains": 2, "whenUnsatisfiable": "ScheduleAnyway"}),
                "can only use minDomains if whenUnsatisfiable=DoNotSchedule",
            ),
            (
                json!({"nodeAffinityPolicy": "Sometimes"}),
                "nodeAffinityPolicy: Unsupported value",
            ),
            (
                json!({"nodeTaintsPolicy": "x"}),
                "nodeTaintsPolicy: Unsupported value",
            ),
            (
                json!({"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}}),
                "not a label selector operator",
            ),
            (
                json!({"labelSelector": null, "matchLabelKeys": ["app"]}),
                "matchLabelKeys: Forbidden",
            ),
        ];
        for (extra, want) in cases {
            let e = err(base(extra.clone()));
            assert!(e.contains(want), "{extra}: {e}");
        }
        let dup = err(json!([
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
            {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
        ]));
        assert!(
            dup.contains("[1].{topologyKey, whenUnsatisfiable}: Duplicate"),
            "{dup}"
        );
        let many: Vec<_> = (0..=MAX_SPREAD_CONSTRAINTS)
            .map(|i| json!({"maxSkew": 1, "topologyKey": format!("k{i}"), "whenUnsatisfiable": "DoNotSchedule"}))
            .collect();
        assert!(err(json!(many)).contains("Too many"));
    }

    #[test]
    fn controller_reference_is_kept_for_known_kinds() {
        let w: PodWire = serde_json::from_value(json!({
            "metadata": {"name": "p", "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "1"},
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "2", "controller": true}
            ]}
        }))
        .unwrap();
        assert_eq!(
            w.metadata.owner_references.len(),
            1,
            "only the controller's"
        );
        assert_eq!(
            PodSpread::from_wire(&w).unwrap().controller,
            Some(ControllerRef {
                kind: ControllerKind::ReplicaSet,
                name: Arc::from("rs")
            })
        );
    }

    #[test]
    fn label_names() {
        for ok in ["zone", "topology.kubernetes.io/zone", "a_b.c-d", "x/Y"] {
            assert!(validate_label_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-a", "a b", "/a", "UPPER.example/a", &"a".repeat(64)] {
            assert!(validate_label_name(bad).is_err(), "{bad}");
        }
    }
}
