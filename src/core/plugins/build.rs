//! Builds a `Framework` from a merged profile. It cannot fail: every name was
//! resolved against the registry and every argument validated when the
//! profile was merged, so a validated profile always has its framework.

use std::collections::HashMap;
use std::sync::Arc;

use super::merge::EnabledPlugins;
use super::registry::{Instance, Point};
use crate::framework::placement::{DEFAULT_PARALLEL_MIN_NODES, DEFAULT_TIE_BREAK_SEED, TieBreaker};
use crate::framework::{Args, Framework};
use crate::gang::GangArgs;
use crate::preemption::PreemptionArgs;

/// Everything a profile's enabled plugins contribute, each built by its
/// registry row: the placement framework, and the arguments of the plugins
/// the engine runs around it.
#[derive(Clone)]
pub struct BuiltPlugins {
    pub framework: Framework,
    /// GangScheduling, when enabled (at Permit, with its other points).
    pub gang: Option<GangArgs>,
    /// DefaultPreemption, when enabled at PostFilter.
    pub preemption: Option<PreemptionArgs>,
}

/// Builds every enabled plugin of a profile from its registry row.
pub fn build_plugins(
    enabled: &EnabledPlugins,
    args: &Args,
    percentage: Option<u32>,
) -> BuiltPlugins {
    let instances = instances(enabled, args);
    let from = |point: Point| {
        enabled
            .at(point)
            .iter()
            .filter_map(|e| instances.get(e.plugin.name))
    };
    BuiltPlugins {
        framework: assemble(enabled, &instances, percentage),
        gang: from(Point::Permit).find_map(|i| i.gang.clone()),
        preemption: from(Point::PostFilter).find_map(|i| i.preemption),
    }
}

/// The placement framework for `enabled` plugins with `args`; `percentage`
/// is the profile's `percentageOfNodesToScore` (`None`: adaptive).
pub fn build_framework(
    enabled: &EnabledPlugins,
    args: &Args,
    percentage: Option<u32>,
) -> Framework {
    assemble(enabled, &instances(enabled, args), percentage)
}

/// One object per enabled plugin, shared by every point it runs at.
fn instances(enabled: &EnabledPlugins, args: &Args) -> HashMap<&'static str, Instance> {
    let mut instances: HashMap<&'static str, Instance> = HashMap::new();
    for point in Point::ALL {
        for e in enabled.at(point) {
            instances
                .entry(e.plugin.name)
                .or_insert_with(|| (e.plugin.build)(args));
        }
    }
    instances
}

fn assemble(
    enabled: &EnabledPlugins,
    instances: &HashMap<&'static str, Instance>,
    percentage: Option<u32>,
) -> Framework {
    let mut framework = Framework::empty();
    // PreFilter in its own order: a plugin may have a PreFilter and no
    // Filter (DynamicResources refuses there).
    for e in enabled.at(Point::PreFilter) {
        if let Some(p) = instances
            .get(e.plugin.name)
            .and_then(|b| b.pre_filter.as_ref())
        {
            framework.pre_filters.push(Arc::clone(p));
        }
    }
    for e in enabled.at(Point::Filter) {
        if let Some(f) = instances.get(e.plugin.name).and_then(|b| b.filter.as_ref()) {
            framework.filters.push(Arc::clone(f));
        }
    }
    for e in enabled.at(Point::Score) {
        if let Some(s) = instances.get(e.plugin.name).and_then(|b| b.score.as_ref()) {
            // A weight of 0 means "unset" in the API: kube-scheduler uses 1.
            framework.scorers.push((Arc::clone(s), e.weight.max(1)));
        }
    }
    for e in enabled.at(Point::PreBind) {
        if let Some(timeout) = instances
            .get(e.plugin.name)
            .and_then(|b| b.pre_bind_volumes)
        {
            framework.volume_bind_timeout = Some(timeout);
        }
    }
    framework.percentage_of_nodes_to_score = percentage;
    framework.tie_breaker = TieBreaker::new(DEFAULT_TIE_BREAK_SEED);
    framework.parallel_min_nodes = DEFAULT_PARALLEL_MIN_NODES;
    framework
}

/// `Framework::default()` is kube-scheduler's default profile as far as
/// Muster implements it; `Framework::empty()` runs no plugin at all.
impl Default for Framework {
    fn default() -> Self {
        build_framework(
            &EnabledPlugins::defaults(),
            &super::registry::default_args(),
            None,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::merge::{PluginsSpec, merge_plugins};

    fn names(f: &Framework) -> (Vec<&'static str>, Vec<(&'static str, i64)>) {
        (
            f.filters.iter().map(|p| p.name()).collect(),
            f.scorers.iter().map(|(p, w)| (p.name(), *w)).collect(),
        )
    }

    #[test]
    fn default_framework_is_the_default_profile() {
        let f = Framework::default();
        let (filters, scores) = names(&f);
        assert_eq!(filters.len(), 13);
        assert_eq!(scores.len(), 8);
        assert!(scores.contains(&("InterPodAffinity", 2)), "{scores:?}");
        assert!(scores.contains(&("PodTopologySpread", 2)), "{scores:?}");
        let pre_filters: Vec<_> = f.pre_filters.iter().map(|p| p.name()).collect();
        assert_eq!(pre_filters.len(), 8, "{pre_filters:?}");
        assert!(pre_filters.contains(&"DynamicResources"), "{pre_filters:?}");
        assert_eq!(
            f.volume_bind_timeout,
            Some(std::time::Duration::from_secs(600)),
            "VolumeBinding's PreBind"
        );
    }

    #[test]
    fn one_object_per_plugin_and_merged_weights() {
        let spec: PluginsSpec = serde_norway::from_str(
            "score: {disabled: [{name: '*'}], enabled: [{name: NodeAffinity, weight: 7}]}",
        )
        .unwrap();
        let enabled = merge_plugins("p", &spec).unwrap();
        let f = build_framework(
            &enabled,
            &crate::plugins::registry::default_args(),
            Some(50),
        );
        assert_eq!(names(&f).1, [("NodeAffinity", 7)]);
        assert_eq!(f.percentage_of_nodes_to_score, Some(50));
        // NodeAffinity's Filter, PreFilter and Score are one object.
        let filter = f
            .filters
            .iter()
            .find(|p| p.name() == "NodeAffinity")
            .unwrap();
        let score = &f.scorers[0].0;
        assert_eq!(
            Arc::as_ptr(filter) as *const u8,
            Arc::as_ptr(score) as *const u8
        );
    }

    #[test]
    fn gang_and_preemption_arguments_are_built_by_their_rows() {
        let defaults = build_plugins(
            &EnabledPlugins::defaults(),
            &crate::plugins::registry::default_args(),
            None,
        );
        assert_eq!(defaults.gang, Some(GangArgs::default()));
        assert_eq!(defaults.preemption, Some(PreemptionArgs::default()));
        let spec: PluginsSpec = serde_norway::from_str(
            "multiPoint: {disabled: [{name: GangScheduling}, {name: DefaultPreemption}]}",
        )
        .unwrap();
        let without = build_plugins(
            &merge_plugins("p", &spec).unwrap(),
            &crate::plugins::registry::default_args(),
            None,
        );
        assert_eq!(without.gang, None, "GangScheduling disabled");
        assert_eq!(without.preemption, None, "DefaultPreemption disabled");
    }
}
