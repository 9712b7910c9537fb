//! One merge of a profile's `plugins` and `pluginConfig` over the registry's
//! defaults, with kube-scheduler's rules (`default_plugins.go`,
//! `mergePluginSet`):
//!
//! 1. The default profile: every plugin enabled by default, at its
//!    `multi_point` points, in registry order, with its default weight.
//! 2. `multiPoint`: `disabled` (a name, or `*` for every default) removes a
//!    plugin from every point; `enabled` adds it at its `multi_point` points.
//! 3. Each point's own set, the same way for that point alone.
//!
//! An `enabled` entry naming a plugin already there replaces it in place (its
//! weight changes); others are appended in order. A weight of 0 or none means
//! the plugin's default weight; otherwise 1..=100. Then the result must make
//! sense as a whole: a plugin's points that work together follow their last
//! one (PreScore follows Score) and cannot be switched off alone, exactly
//! one QueueSort, and behaviour Muster always has is not disabled. Every error
//! names the field it comes from.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::registry::{self, Point, REGISTRY, Registration};
use crate::framework::{Args, ConfigError};

/// `profiles[].plugins` as written.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginsSpec {
    pub multi_point: Option<PluginSetSpec>,
    pub pre_enqueue: Option<PluginSetSpec>,
    pub queue_sort: Option<PluginSetSpec>,
    pub pre_filter: Option<PluginSetSpec>,
    pub filter: Option<PluginSetSpec>,
    pub post_filter: Option<PluginSetSpec>,
    pub pre_score: Option<PluginSetSpec>,
    pub score: Option<PluginSetSpec>,
    pub reserve: Option<PluginSetSpec>,
    pub permit: Option<PluginSetSpec>,
    pub pre_bind: Option<PluginSetSpec>,
    pub bind: Option<PluginSetSpec>,
    pub post_bind: Option<PluginSetSpec>,
}

impl PluginsSpec {
    fn point(&self, point: Point) -> Option<&PluginSetSpec> {
        match point {
            Point::PreEnqueue => self.pre_enqueue.as_ref(),
            Point::QueueSort => self.queue_sort.as_ref(),
            Point::PreFilter => self.pre_filter.as_ref(),
            Point::Filter => self.filter.as_ref(),
            Point::PostFilter => self.post_filter.as_ref(),
            Point::PreScore => self.pre_score.as_ref(),
            Point::Score => self.score.as_ref(),
            Point::Reserve => self.reserve.as_ref(),
            Point::Permit => self.permit.as_ref(),
            Point::PreBind => self.pre_bind.as_ref(),
            Point::Bind => self.bind.as_ref(),
            Point::PostBind => self.post_bind.as_ref(),
        }
    }
}

/// One point's changes to the defaults.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginSetSpec {
    #[serde(default)]
    pub enabled: Vec<PluginSpec>,
    #[serde(default)]
    pub disabled: Vec<PluginSpec>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginSpec {
    pub name: String,
    pub weight: Option<i64>,
}

/// `profiles[].pluginConfig[]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginConfigSpec {
    pub name: String,
    #[serde(default)]
    pub args: serde_json::Value,
}

/// A plugin enabled at a point, with its Score weight (meaningful at Score).
#[derive(Clone, Copy)]
pub struct Enabled {
    pub plugin: &'static Registration,
    pub weight: i64,
}

impl std::fmt::Debug for Enabled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.plugin.name, self.weight)
    }
}

impl PartialEq for Enabled {
    fn eq(&self, other: &Self) -> bool {
        self.plugin.name == other.plugin.name && self.weight == other.weight
    }
}

/// The plugins a profile runs at each point, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct EnabledPlugins(BTreeMap<Point, Vec<Enabled>>);

impl EnabledPlugins {
    /// The default profile.
    pub fn defaults() -> Self {
        let mut points: BTreeMap<Point, Vec<Enabled>> = BTreeMap::new();
        for plugin in REGISTRY.iter().filter(|r| r.enabled_by_default) {
            for p in plugin.multi_point {
                points.entry(*p).or_default().push(Enabled {
                    plugin,
                    weight: plugin.default_weight,
                });
            }
        }
        EnabledPlugins(points)
    }

    /// The plugins enabled at `point`, in run order.
    pub fn at(&self, point: Point) -> &[Enabled] {
        self.0.get(&point).map(Vec::as_slice).unwrap_or_default()
    }

    pub fn is_enabled(&self, point: Point, name: &str) -> bool {
        self.at(point).iter().any(|e| e.plugin.name == name)
    }
}

/// Where each (plugin, point) was last changed, for messages about the whole.
type Origins = BTreeMap<(&'static str, Point), String>;

/// Applies `spec` over the defaults (`path` is `profiles[i].plugins`).
pub fn merge_plugins(path: &str, spec: &PluginsSpec) -> Result<EnabledPlugins, ConfigError> {
    let mut enabled = EnabledPlugins::defaults();
    let mut origins = Origins::new();
    if let Some(multi) = &spec.multi_point {
        apply(
            &format!("{path}.multiPoint"),
            multi,
            None,
            &mut enabled,
            &mut origins,
        )?;
    }
    for point in Point::ALL {
        if let Some(set) = spec.point(point) {
            let at = format!("{path}.{}", point.field());
            apply(&at, set, Some(point), &mut enabled, &mut origins)?;
        }
    }
    check_whole(path, &enabled, &origins)?;
    Ok(enabled)
}

/// Applies one set: at `point`, or (`None`) at every point a plugin is
/// enabled at by `multiPoint`.
fn apply(
    path: &str,
    set: &PluginSetSpec,
    point: Option<Point>,
    enabled: &mut EnabledPlugins,
    origins: &mut Origins,
) -> Result<(), ConfigError> {
    let points: Vec<Point> = point.map_or_else(|| Point::ALL.to_vec(), |p| vec![p]);
    for (i, d) in set.disabled.iter().enumerate() {
        let at = format!("{path}.disabled[{i}].name");
        let name = if d.name == "*" {
            None
        } else {
            Some(registry::resolve(&at, &d.name)?.name)
        };
        for p in &points {
            if let Some(list) = enabled.0.get_mut(p) {
                list.retain(|e| {
                    // `*` leaves what Muster always does (refused by name).
                    let drop = match name {
                        None => e.plugin.can_disable || matches!(p, Point::PreScore | Point::Score),
                        Some(n) => n == e.plugin.name,
                    };
                    if drop {
                        origins.insert((e.plugin.name, *p), at.clone());
                    }
                    !drop
                });
            }
        }
    }
    for (i, e) in set.enabled.iter().enumerate() {
        let at = format!("{path}.enabled[{i}]");
        let plugin = registry::resolve(&format!("{at}.name"), &e.name)?;
        if set.enabled[..i]
            .iter()
            .any(|o| registry::lookup(&o.name).is_some_and(|r| r.name == plugin.name))
        {
            return Err(ConfigError::at(
                format!("{at}.name"),
                format!("plugin {:?} is listed twice", e.name),
            ));
        }
        let targets: &[Point] = match point {
            Some(p) if !plugin.implements(p) => {
                return Err(ConfigError::at(
                    format!("{at}.name"),
                    format!("{:?} is not a {} plugin", e.name, p.title()),
                ));
            }
            Some(p) => &[p][..],
            None => plugin.multi_point,
        };
        let weight = weight(&at, plugin, e.weight)?;
        for p in targets.iter().copied() {
            let list = enabled.0.entry(p).or_default();
            match list.iter_mut().find(|x| x.plugin.name == plugin.name) {
                Some(x) => x.weight = weight,
                None => list.push(Enabled { plugin, weight }),
            }
            origins.insert((plugin.name, p), format!("{at}.name"));
        }
    }
    Ok(())
}

/// The Score weight of an `enabled` entry: none or 0 is the plugin's default.
fn weight(at: &str, plugin: &Registration, weight: Option<i64>) -> Result<i64, ConfigError> {
    match weight {
        None | Some(0) => Ok(plugin.default_weight),
        Some(_) if !plugin.implements(Point::Score) => Err(ConfigError::at(
            format!("{at}.weight"),
            format!(
                "{:?} is not a Score plugin; weight has no meaning",
                plugin.name
            ),
        )),
        Some(w) if (1..=100).contains(&w) => Ok(w),
        Some(w) => Err(ConfigError::at(
            format!("{at}.weight"),
            format!("must be between 1 and 100, got {w}"),
        )),
    }
}

/// Rules about the profile as a whole.
fn check_whole(path: &str, enabled: &EnabledPlugins, origins: &Origins) -> Result<(), ConfigError> {
    let origin = |name: &'static str, p: Point| {
        origins
            .get(&(name, p))
            .cloned()
            .unwrap_or_else(|| path.to_string())
    };
    for plugin in REGISTRY {
        // A group runs as its last point (Filter, Score, Permit) says; an
        // earlier point of it cannot be switched off on its own.
        for group in plugin.together {
            let Some((lead, rest)) = group.split_last() else {
                continue;
            };
            if !enabled.is_enabled(*lead, plugin.name) {
                continue;
            }
            if let Some(off) = rest
                .iter()
                .copied()
                .find(|p| !enabled.is_enabled(*p, plugin.name))
            {
                let names: Vec<&str> = group.iter().map(|p| p.title()).collect();
                return Err(ConfigError::at(
                    origin(plugin.name, off),
                    format!(
                        "{} runs at {} together: it cannot be disabled at {} while it is enabled at {}; \
                         disable it at {} (or under multiPoint)",
                        plugin.name,
                        names.join(", "),
                        off.title(),
                        lead.title(),
                        lead.title()
                    ),
                ));
            }
        }
        // What cannot be disabled is what a plugin decides (which pods, which
        // nodes); a preference (PreScore, Score) may be.
        if !plugin.can_disable
            && let Some(p) = plugin
                .multi_point
                .iter()
                .copied()
                .filter(|p| !matches!(p, Point::PreScore | Point::Score))
                .find(|p| !enabled.is_enabled(*p, plugin.name))
        {
            return Err(ConfigError::at(
                origin(plugin.name, p),
                format!(
                    "{} cannot be disabled: Muster always has this behaviour",
                    plugin.name
                ),
            ));
        }
    }
    match enabled.at(Point::QueueSort) {
        [_] => Ok(()),
        [] => Err(ConfigError::at(
            format!("{path}.queueSort"),
            "exactly one QueueSort plugin is required (PrioritySort or GangScheduling); none is enabled",
        )),
        [_, second, ..] => Err(ConfigError::at(
            origin(second.plugin.name, Point::QueueSort),
            "exactly one QueueSort plugin may be enabled; disable PrioritySort to use GangScheduling's",
        )),
    }
}

/// Decodes `pluginConfig` (`path` is `profiles[i].pluginConfig`): every
/// plugin's default args, replaced by the configured ones.
pub fn merge_args(path: &str, configs: &[PluginConfigSpec]) -> Result<Args, ConfigError> {
    let mut args = registry::default_args();
    let mut seen: Vec<&'static str> = Vec::new();
    for (i, pc) in configs.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let plugin = registry::resolve(&format!("{at}.name"), &pc.name)?;
        if seen.contains(&plugin.name) {
            return Err(ConfigError::at(
                format!("{at}.name"),
                format!("duplicate config for plugin {:?}", pc.name),
            ));
        }
        seen.push(plugin.name);
        let Some(spec) = &plugin.args else {
            return Err(ConfigError::at(
                format!("{at}.name"),
                format!("plugin {:?} has no configurable args", pc.name),
            ));
        };
        args.insert(
            plugin.name,
            (spec.decode)(&format!("{at}.args"), pc.args.clone())?,
        );
    }
    Ok(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> PluginsSpec {
        serde_norway::from_str(yaml).unwrap()
    }

    fn names(e: &EnabledPlugins, p: Point) -> Vec<(&'static str, i64)> {
        e.at(p).iter().map(|x| (x.plugin.name, x.weight)).collect()
    }

    #[test]
    fn defaults_follow_kube_scheduler() {
        let d = EnabledPlugins::defaults();
        assert_eq!(
            names(&d, Point::Filter)
                .iter()
                .map(|x| x.0)
                .collect::<Vec<_>>(),
            [
                "NodeUnschedulable",
                "NodeName",
                "TaintToleration",
                "NodeAffinity",
                "NodePorts",
                "NodeResourcesFit",
                "VolumeRestrictions",
                "NodeVolumeLimits",
                "VolumeBinding",
                "VolumeZone",
                "PodTopologySpread",
                "InterPodAffinity",
                "DynamicResources"
            ]
        );
        assert_eq!(
            names(&d, Point::Score),
            [
                ("TaintToleration", 3),
                ("NodeAffinity", 2),
                ("NodeResourcesFit", 1),
                ("PodTopologySpread", 2),
                ("InterPodAffinity", 2),
                ("DynamicResources", 1),
                ("NodeResourcesBalancedAllocation", 1),
                ("ImageLocality", 1)
            ]
        );
        assert!(d.is_enabled(Point::Permit, "GangScheduling"));
        assert_eq!(names(&d, Point::QueueSort), [("PrioritySort", 0)]);
    }

    #[test]
    fn disable_replace_and_append() {
        let e = merge_plugins(
            "p",
            &spec(
                "filter: {disabled: [{name: NodePorts}]}\nscore:\n  disabled: [{name: '*'}]\n  enabled: [{name: NodeResourcesFit, weight: 5}, {name: NodeAffinity}]\n",
            ),
        )
        .unwrap();
        assert!(!e.is_enabled(Point::Filter, "NodePorts"));
        assert_eq!(e.at(Point::Filter).len(), 12);
        assert_eq!(
            names(&e, Point::Score),
            [("NodeResourcesFit", 5), ("NodeAffinity", 2)]
        );
        let e = merge_plugins(
            "p",
            &spec("score: {enabled: [{name: TaintToleration, weight: 10}]}"),
        )
        .unwrap();
        assert_eq!(
            names(&e, Point::Score)[0],
            ("TaintToleration", 10),
            "replaced in place"
        );
    }

    #[test]
    fn multi_point_and_coscheduling_readme_shape() {
        // scheduler-plugins' documented profile for Coscheduling.
        let e = merge_plugins(
            "p",
            &spec(
                "multiPoint: {enabled: [{name: Coscheduling}]}\nqueueSort: {enabled: [{name: Coscheduling}], disabled: [{name: '*'}]}\n",
            ),
        )
        .unwrap();
        assert_eq!(names(&e, Point::QueueSort), [("GangScheduling", 0)]);
        assert!(e.is_enabled(Point::Permit, "GangScheduling"));
        let off = merge_plugins(
            "p",
            &spec("multiPoint: {disabled: [{name: GangScheduling}]}"),
        )
        .unwrap();
        assert!(!off.is_enabled(Point::Permit, "GangScheduling"));
        assert!(!off.is_enabled(Point::PreEnqueue, "GangScheduling"));
        let at_permit =
            merge_plugins("p", &spec("permit: {disabled: [{name: GangScheduling}]}")).unwrap();
        assert!(
            !at_permit.is_enabled(Point::Permit, "GangScheduling"),
            "Permit leads the gang's points"
        );
    }

    #[test]
    fn whole_profile_rules_name_the_field() {
        let cases = [
            (
                "preFilter: {disabled: [{name: NodeAffinity}]}",
                "p.preFilter.disabled[0].name",
                "together",
            ),
            (
                "preEnqueue: {disabled: [{name: '*'}]}",
                "p.preEnqueue.disabled[0].name",
                "together",
            ),
            (
                "bind: {disabled: [{name: DefaultBinder}]}",
                "p.bind.disabled[0].name",
                "cannot be disabled",
            ),
            (
                "queueSort: {disabled: [{name: '*'}]}",
                "p.queueSort",
                "none is enabled",
            ),
            (
                "queueSort: {enabled: [{name: GangScheduling}]}",
                "p.queueSort.enabled[0].name",
                "exactly one QueueSort",
            ),
            (
                "filter: {enabled: [{name: NodeName}, {name: NodeName}]}",
                "p.filter.enabled[1].name",
                "twice",
            ),
            (
                "score: {enabled: [{name: NodeName}]}",
                "p.score.enabled[0].name",
                "not a Score plugin",
            ),
            (
                "filter: {enabled: [{name: NodeName, weight: 3}]}",
                "p.filter.enabled[0].weight",
                "weight has no meaning",
            ),
            (
                "score: {enabled: [{name: NodeAffinity, weight: 101}]}",
                "p.score.enabled[0].weight",
                "between 1 and 100",
            ),
            (
                "filter: {enabled: [{name: EBSLimits}]}",
                "p.filter.enabled[0].name",
                "does not implement",
            ),
        ];
        for (yaml, path, needle) in cases {
            let e = merge_plugins("p", &spec(yaml)).unwrap_err();
            assert_eq!(e.path, path, "{yaml}: {e}");
            assert!(e.message.contains(needle), "{yaml}: {e}");
        }
    }

    #[test]
    fn args_are_typed_with_defaults() {
        let configs: Vec<PluginConfigSpec> =
            serde_norway::from_str("- name: Coscheduling\n  args: {permitWaitingTimeSeconds: 7}\n")
                .unwrap();
        let args = merge_args("c", &configs).unwrap();
        let gang = args.get::<crate::gang::GangArgs>("GangScheduling").unwrap();
        assert_eq!(gang.permit_waiting_time.as_secs(), 7);
        assert!(
            args.get::<super::super::NodeResourcesFitArgs>("NodeResourcesFit")
                .is_some()
        );
        let dup: Vec<PluginConfigSpec> =
            serde_norway::from_str("- name: GangScheduling\n- name: Coscheduling\n").unwrap();
        assert_eq!(merge_args("c", &dup).unwrap_err().path, "c[1].name");
        let none: Vec<PluginConfigSpec> = serde_norway::from_str("- name: NodeName\n").unwrap();
        assert!(
            merge_args("c", &none)
                .unwrap_err()
                .message
                .contains("no configurable args")
        );
    }
}
