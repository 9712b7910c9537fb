//! `PlacementConfig`: which placement plugins a profile runs, their weights and
//! arguments, and sampling — and building a `Framework` from it.
//!
//! Plugin sets merge onto kube-scheduler's default profile the way
//! `KubeSchedulerConfiguration` does: defaults minus `disabled` (`"*"` removes
//! them all), an `enabled` entry naming a default replaces it in place, other
//! `enabled` entries are appended in order. Parsing YAML into this struct is the
//! configuration module's job; this one only validates and builds.

use std::sync::Arc;

use crate::framework::placement::{DEFAULT_PARALLEL_MIN_NODES, DEFAULT_TIE_BREAK_SEED, TieBreaker};
use crate::framework::{FilterPlugin, Framework, PreFilterPlugin, ScorePlugin};

use super::balanced_allocation::{self, BalancedAllocation, BalancedAllocationArgs};
use super::node_affinity::{self, NodeAffinity};
use super::node_name::{self, NodeName};
use super::node_ports::{self, NodePorts};
use super::node_resources_fit::{self, NodeResourcesFit, NodeResourcesFitArgs};
use super::node_unschedulable::{self, NodeUnschedulable};
use super::taint_toleration::{self, TaintToleration};

/// kube-scheduler's default Filter plugins, in its order (the order decides
/// which reason a node is reported with).
pub const DEFAULT_FILTERS: [&str; 6] = [
    node_unschedulable::NAME,
    node_name::NAME,
    taint_toleration::NAME,
    node_affinity::NAME,
    node_ports::NAME,
    node_resources_fit::NAME,
];

/// kube-scheduler's default Score plugins and weights.
pub const DEFAULT_SCORES: [(&str, i64); 4] = [
    (taint_toleration::NAME, 3),
    (node_affinity::NAME, 2),
    (node_resources_fit::NAME, 1),
    (balanced_allocation::NAME, 1),
];

/// The largest score weight accepted (the API field is an int32).
pub const MAX_SCORE_WEIGHT: i64 = i32::MAX as i64;

/// A placement profile.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PlacementConfig {
    pub filter: PluginSet,
    pub score: PluginSet,
    pub node_resources_fit: NodeResourcesFitArgs,
    pub balanced_allocation: BalancedAllocationArgs,
    /// `percentageOfNodesToScore` (`0..=100`); `None` or 0 is adaptive.
    pub percentage_of_nodes_to_score: Option<u32>,
    /// Seed of the tie-breaking RNG; `None` uses `DEFAULT_TIE_BREAK_SEED`.
    pub tie_break_seed: Option<u64>,
}

/// Changes to one extension point's default plugin list.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PluginSet {
    pub enabled: Vec<PluginRef>,
    /// Names of default plugins to drop; `"*"` drops every default.
    pub disabled: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginRef {
    pub name: String,
    /// Score weight. As in kube-scheduler, an enabled plugin without a weight
    /// (or with 0) gets weight 1, even when it replaces a default.
    pub weight: Option<i64>,
}

impl PluginRef {
    pub fn new(name: &str) -> Self {
        PluginRef {
            name: name.to_owned(),
            weight: None,
        }
    }

    pub fn weighted(name: &str, weight: i64) -> Self {
        PluginRef {
            name: name.to_owned(),
            weight: Some(weight),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("unknown {point} plugin {name:?}; known {point} plugins: {known}")]
    UnknownPlugin {
        point: &'static str,
        name: String,
        known: String,
    },
    #[error("{point} plugin {name:?} is listed twice")]
    DuplicatePlugin { point: &'static str, name: String },
    #[error(
        "score plugin {plugin:?} has weight {weight}; weights must be in 0..={MAX_SCORE_WEIGHT}"
    )]
    BadWeight { plugin: String, weight: i64 },
    #[error(
        "{plugin}: resource {resource:?} has weight {weight}; resource weights must be in 1..=100"
    )]
    BadResourceWeight {
        plugin: &'static str,
        resource: String,
        weight: i64,
    },
    #[error("percentageOfNodesToScore is {0}; it must be in 0..=100")]
    BadPercentage(u32),
    #[error("{0}")]
    Invalid(String),
}

impl ConfigError {
    pub fn invalid(msg: impl Into<String>) -> Self {
        ConfigError::Invalid(msg.into())
    }
}

/// The plugin instances a profile can use, built once from the arguments so
/// that a plugin enabled at several points is one object.
struct Registry {
    node_unschedulable: Arc<NodeUnschedulable>,
    node_name: Arc<NodeName>,
    taint_toleration: Arc<TaintToleration>,
    node_affinity: Arc<NodeAffinity>,
    node_ports: Arc<NodePorts>,
    node_resources_fit: Arc<NodeResourcesFit>,
    balanced_allocation: Arc<BalancedAllocation>,
}

const FILTER_NAMES: &str =
    "NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit";
const SCORE_NAMES: &str =
    "TaintToleration, NodeAffinity, NodeResourcesFit, NodeResourcesBalancedAllocation";

impl Registry {
    fn filter(&self, name: &str) -> Option<Arc<dyn FilterPlugin>> {
        Some(match name {
            node_unschedulable::NAME => self.node_unschedulable.clone(),
            node_name::NAME => self.node_name.clone(),
            taint_toleration::NAME => self.taint_toleration.clone(),
            node_affinity::NAME => self.node_affinity.clone(),
            node_ports::NAME => self.node_ports.clone(),
            node_resources_fit::NAME => self.node_resources_fit.clone(),
            _ => return None,
        })
    }

    /// The PreFilter half of a Filter plugin, where it has one that matters.
    fn pre_filter(&self, name: &str) -> Option<Arc<dyn PreFilterPlugin>> {
        match name {
            node_affinity::NAME => Some(self.node_affinity.clone()),
            _ => None,
        }
    }

    fn score(&self, name: &str) -> Option<Arc<dyn ScorePlugin>> {
        Some(match name {
            taint_toleration::NAME => self.taint_toleration.clone(),
            node_affinity::NAME => self.node_affinity.clone(),
            node_resources_fit::NAME => self.node_resources_fit.clone(),
            balanced_allocation::NAME => self.balanced_allocation.clone(),
            _ => return None,
        })
    }
}

/// kube-scheduler's `mergePluginSet` over `(name, default weight)` pairs.
fn merge(
    point: &'static str,
    defaults: &[(&str, i64)],
    set: &PluginSet,
) -> Result<Vec<(String, Option<i64>)>, ConfigError> {
    for (i, p) in set.enabled.iter().enumerate() {
        if set.enabled[..i].iter().any(|q| q.name == p.name) {
            return Err(ConfigError::DuplicatePlugin {
                point,
                name: p.name.clone(),
            });
        }
    }
    let all_disabled = set.disabled.iter().any(|d| d == "*");
    let mut replaced = vec![false; set.enabled.len()];
    let mut out = Vec::new();
    if !all_disabled {
        for &(name, weight) in defaults {
            if set.disabled.iter().any(|d| d == name) {
                continue;
            }
            match set.enabled.iter().position(|p| p.name == name) {
                Some(i) => {
                    replaced[i] = true;
                    out.push((name.to_owned(), Some(set.enabled[i].weight.unwrap_or(0))));
                }
                None => out.push((name.to_owned(), Some(weight))),
            }
        }
    }
    for (p, _) in set.enabled.iter().zip(&replaced).filter(|(_, r)| !**r) {
        out.push((p.name.clone(), p.weight));
    }
    Ok(out)
}

impl Framework {
    /// Builds a framework from `config`, validating every name, weight and
    /// argument.
    pub fn from_config(config: &PlacementConfig) -> Result<Framework, ConfigError> {
        if let Some(p) = config.percentage_of_nodes_to_score
            && p > 100
        {
            return Err(ConfigError::BadPercentage(p));
        }
        let registry = Registry {
            node_unschedulable: Arc::new(NodeUnschedulable),
            node_name: Arc::new(NodeName),
            taint_toleration: Arc::new(TaintToleration),
            node_affinity: Arc::new(NodeAffinity),
            node_ports: Arc::new(NodePorts),
            node_resources_fit: Arc::new(NodeResourcesFit::new(&config.node_resources_fit)?),
            balanced_allocation: Arc::new(BalancedAllocation::new(&config.balanced_allocation)?),
        };
        for name in config.filter.disabled.iter().filter(|d| *d != "*") {
            registry
                .filter(name)
                .ok_or_else(|| unknown("filter", name, FILTER_NAMES))?;
        }
        for name in config.score.disabled.iter().filter(|d| *d != "*") {
            registry
                .score(name)
                .ok_or_else(|| unknown("score", name, SCORE_NAMES))?;
        }

        let mut framework = Framework::empty();
        let filter_defaults: Vec<(&str, i64)> = DEFAULT_FILTERS.iter().map(|n| (*n, 0)).collect();
        for (name, _) in merge("filter", &filter_defaults, &config.filter)? {
            let plugin = registry
                .filter(&name)
                .ok_or_else(|| unknown("filter", &name, FILTER_NAMES))?;
            framework.pre_filters.extend(registry.pre_filter(&name));
            framework.filters.push(plugin);
        }
        for (name, weight) in merge("score", &DEFAULT_SCORES, &config.score)? {
            let plugin = registry
                .score(&name)
                .ok_or_else(|| unknown("score", &name, SCORE_NAMES))?;
            let weight = weight.unwrap_or(0);
            if !(0..=MAX_SCORE_WEIGHT).contains(&weight) {
                return Err(ConfigError::BadWeight {
                    plugin: name,
                    weight,
                });
            }
            // A weight of 0 means "unset" in the API: kube-scheduler uses 1.
            framework.scorers.push((plugin, weight.max(1)));
        }
        framework.percentage_of_nodes_to_score = config.percentage_of_nodes_to_score;
        framework.tie_breaker =
            TieBreaker::new(config.tie_break_seed.unwrap_or(DEFAULT_TIE_BREAK_SEED));
        framework.parallel_min_nodes = DEFAULT_PARALLEL_MIN_NODES;
        Ok(framework)
    }

    /// kube-scheduler's default profile (the placement plugins Muster ships,
    /// default weights and arguments, adaptive sampling). Same as `default()`.
    pub fn kube_default() -> Framework {
        let fit = Arc::new(NodeResourcesFit::default());
        let affinity = Arc::new(NodeAffinity);
        let taints = Arc::new(TaintToleration);
        let filters: Vec<Arc<dyn FilterPlugin>> = vec![
            Arc::new(NodeUnschedulable),
            Arc::new(NodeName),
            taints.clone(),
            affinity.clone(),
            Arc::new(NodePorts),
            fit.clone(),
        ];
        let scorers: Vec<(Arc<dyn ScorePlugin>, i64)> = vec![
            (taints, 3),
            (affinity.clone(), 2),
            (fit, 1),
            (Arc::new(BalancedAllocation::default()), 1),
        ];
        Framework {
            pre_filters: vec![affinity],
            filters,
            scorers,
            ..Framework::empty()
        }
    }
}

/// `Framework::default()` is kube-scheduler's default profile; use
/// `Framework::empty()` for a framework without plugins.
impl Default for Framework {
    fn default() -> Self {
        Framework::kube_default()
    }
}

fn unknown(point: &'static str, name: &str, known: &str) -> ConfigError {
    ConfigError::UnknownPlugin {
        point,
        name: name.to_owned(),
        known: known.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(f: &Framework) -> (Vec<&'static str>, Vec<(&'static str, i64)>) {
        (
            f.filters.iter().map(|p| p.name()).collect(),
            f.scorers.iter().map(|(p, w)| (p.name(), *w)).collect(),
        )
    }

    #[test]
    fn default_config_is_the_kube_default_profile() {
        let built = Framework::from_config(&PlacementConfig::default()).unwrap();
        assert_eq!(names(&built), names(&Framework::kube_default()));
        assert_eq!(names(&built).0, DEFAULT_FILTERS);
        assert_eq!(names(&built).1, DEFAULT_SCORES);
        assert_eq!(built.pre_filters.len(), 1);
        assert_eq!(format!("{built:?}"), format!("{:?}", Framework::default()));
    }

    #[test]
    fn disable_replace_and_append() {
        let config = PlacementConfig {
            filter: PluginSet {
                enabled: vec![],
                disabled: vec!["NodePorts".into()],
            },
            score: PluginSet {
                enabled: vec![
                    PluginRef::weighted("NodeResourcesFit", 5),
                    PluginRef::new("NodeAffinity"),
                ],
                disabled: vec!["*".into()],
            },
            ..Default::default()
        };
        let f = Framework::from_config(&config).unwrap();
        let (filters, scores) = names(&f);
        assert!(!filters.contains(&"NodePorts"));
        assert_eq!(filters.len(), 5);
        assert_eq!(scores, [("NodeResourcesFit", 5), ("NodeAffinity", 1)]);

        let replace = PlacementConfig {
            score: PluginSet {
                enabled: vec![PluginRef::weighted("TaintToleration", 10)],
                disabled: vec![],
            },
            ..Default::default()
        };
        let (_, scores) = names(&Framework::from_config(&replace).unwrap());
        assert_eq!(scores[0], ("TaintToleration", 10), "replaced in place");
        assert_eq!(scores.len(), 4);
    }

    #[test]
    fn unknown_plugins_are_named() {
        let config = PlacementConfig {
            score: PluginSet {
                enabled: vec![PluginRef::new("NodePorts")],
                disabled: vec![],
            },
            ..Default::default()
        };
        let err = Framework::from_config(&config).unwrap_err();
        assert!(
            matches!(&err, ConfigError::UnknownPlugin { point: "score", name, .. } if name == "NodePorts")
        );
        assert!(
            err.to_string()
                .starts_with("unknown score plugin \"NodePorts\""),
            "{err}"
        );

        let config = PlacementConfig {
            filter: PluginSet {
                enabled: vec![],
                disabled: vec!["NodeResourceFit".into()],
            },
            ..Default::default()
        };
        assert!(matches!(
            Framework::from_config(&config).unwrap_err(),
            ConfigError::UnknownPlugin {
                point: "filter",
                ..
            }
        ));
    }

    #[test]
    fn bad_weight_and_percentage() {
        let config = PlacementConfig {
            score: PluginSet {
                enabled: vec![PluginRef::weighted("NodeAffinity", -1)],
                disabled: vec![],
            },
            ..Default::default()
        };
        assert_eq!(
            Framework::from_config(&config).unwrap_err(),
            ConfigError::BadWeight {
                plugin: "NodeAffinity".into(),
                weight: -1
            }
        );
        let config = PlacementConfig {
            percentage_of_nodes_to_score: Some(101),
            ..Default::default()
        };
        assert_eq!(
            Framework::from_config(&config).unwrap_err().to_string(),
            "percentageOfNodesToScore is 101; it must be in 0..=100"
        );
        let dup = PlacementConfig {
            filter: PluginSet {
                enabled: vec![PluginRef::new("NodeName"), PluginRef::new("NodeName")],
                disabled: vec![],
            },
            ..Default::default()
        };
        assert!(matches!(
            Framework::from_config(&dup).unwrap_err(),
            ConfigError::DuplicatePlugin { .. }
        ));
    }
}
