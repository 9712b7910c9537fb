//! The plugin registry: every plugin Muster knows, in one table, in the
//! manner of kube-scheduler's `registry.go` with `default_plugins.go`.
//!
//! A row names a plugin, the extension points it can be enabled at, where the
//! default profile enables it (and with which Score weight), the points that
//! only work together (a plugin's PreFilter and Filter), its typed arguments
//! (defaults, decoding and validation live in the plugin's own file) and the
//! factory that builds it from those arguments. Adding a plugin is its own file
//! plus one row here. `merge.rs` applies a profile's `plugins` and
//! `pluginConfig` over these defaults; `build.rs` turns the result into a
//! `Framework`.

use std::sync::Arc;

use crate::framework::{
    Args, ConfigError, EventSet, FilterPlugin, PluginArgs, PreFilterPlugin, QueueingEvent,
    ScorePlugin,
};
use crate::gang;

use super::{
    balanced_allocation, dynamic_resources, image_locality, inter_pod_affinity, node_affinity,
    node_name, node_ports, node_resources_fit, node_unschedulable, node_volume_limits,
    pod_topology_spread, taint_toleration, volume_binding, volume_restrictions, volume_zone,
};

/// kube-scheduler's extension points, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Point {
    PreEnqueue,
    QueueSort,
    PreFilter,
    Filter,
    PostFilter,
    PreScore,
    Score,
    Reserve,
    Permit,
    PreBind,
    Bind,
    PostBind,
}

impl Point {
    pub const ALL: [Point; 12] = [
        Point::PreEnqueue,
        Point::QueueSort,
        Point::PreFilter,
        Point::Filter,
        Point::PostFilter,
        Point::PreScore,
        Point::Score,
        Point::Reserve,
        Point::Permit,
        Point::PreBind,
        Point::Bind,
        Point::PostBind,
    ];

    /// The field of `profiles[].plugins` that configures this point.
    pub fn field(self) -> &'static str {
        match self {
            Point::PreEnqueue => "preEnqueue",
            Point::QueueSort => "queueSort",
            Point::PreFilter => "preFilter",
            Point::Filter => "filter",
            Point::PostFilter => "postFilter",
            Point::PreScore => "preScore",
            Point::Score => "score",
            Point::Reserve => "reserve",
            Point::Permit => "permit",
            Point::PreBind => "preBind",
            Point::Bind => "bind",
            Point::PostBind => "postBind",
        }
    }

    /// The point's name in messages ("a Filter plugin").
    pub fn title(self) -> &'static str {
        match self {
            Point::PreEnqueue => "PreEnqueue",
            Point::QueueSort => "QueueSort",
            Point::PreFilter => "PreFilter",
            Point::Filter => "Filter",
            Point::PostFilter => "PostFilter",
            Point::PreScore => "PreScore",
            Point::Score => "Score",
            Point::Reserve => "Reserve",
            Point::Permit => "Permit",
            Point::PreBind => "PreBind",
            Point::Bind => "Bind",
            Point::PostBind => "PostBind",
        }
    }
}

/// The plugin objects one registration contributes to a `Framework`: one
/// object, shared by every point it is enabled at.
#[derive(Default)]
pub struct Instance {
    pub pre_filter: Option<Arc<dyn PreFilterPlugin>>,
    pub filter: Option<Arc<dyn FilterPlugin>>,
    pub score: Option<Arc<dyn ScorePlugin>>,
    /// VolumeBinding's PreBind: how long the engine waits for the pod's
    /// claims to be bound (`bindTimeoutSeconds`).
    pub pre_bind_volumes: Option<std::time::Duration>,
    /// GangScheduling's profile: the arguments the engine's gang runtime
    /// applies to this profile's pods at PreEnqueue, PreFilter, PostFilter,
    /// Reserve and Permit (the runtime's state is shared by every profile,
    /// as a group's members may name different schedulers).
    pub gang: Option<gang::GangArgs>,
    /// DefaultPreemption's PostFilter: the candidate search's arguments.
    pub preemption: Option<crate::preemption::PreemptionArgs>,
}

/// Decodes and validates a `pluginConfig[].args` value at a path.
pub type DecodeArgs = fn(&str, serde_json::Value) -> Result<Arc<dyn PluginArgs>, ConfigError>;

/// A plugin's typed arguments: their defaults, and how they are decoded.
pub struct ArgsSpec {
    pub default: fn() -> Arc<dyn PluginArgs>,
    pub decode: DecodeArgs,
}

/// One row of the registry.
pub struct Registration {
    pub name: &'static str,
    /// Another name the plugin answers to (scheduler-plugins' `Coscheduling`).
    pub alias: Option<&'static str>,
    /// Every point it can be named at.
    pub points: &'static [Point],
    /// Where `multiPoint` (and the default profile, when `enabled_by_default`)
    /// enables it.
    pub multi_point: &'static [Point],
    pub enabled_by_default: bool,
    /// Score weight in the default profile, and when enabled without one.
    pub default_weight: i64,
    /// Groups of points that only work together. The last point of a group
    /// leads: the others run when it is enabled and cannot be disabled alone.
    pub together: &'static [&'static [Point]],
    /// `false` for behaviour Muster always has: disabling it is refused
    /// rather than silently ignored.
    pub can_disable: bool,
    /// Its Filter verdict and raw Score for a pod on a node depend only on
    /// the pod's signature and on that node (and on cluster state a like
    /// pod's placement cannot change), so the batch memo may reuse them
    /// across like pods (`framework::placement::batch`). A profile that runs
    /// any plugin without it at PreFilter, Filter or Score is not batched.
    pub node_local: bool,
    /// The cluster events that can make a pod it rejected schedulable
    /// (kube-scheduler's `EventsToRegister`): a pod parked as unschedulable
    /// waits for the events of the plugins that rejected it. Every plugin
    /// that can reject (PreFilter or Filter) declares at least one; a pod's
    /// own update always requeues it.
    pub requeue_on: EventSet,
    pub args: Option<ArgsSpec>,
    /// Builds the plugin from the profile's arguments (validated already).
    pub build: fn(&Args) -> Instance,
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration")
            .field("name", &self.name)
            .field("points", &self.points)
            .finish_non_exhaustive()
    }
}

impl Registration {
    pub fn implements(&self, point: Point) -> bool {
        self.points.contains(&point)
    }

    pub fn answers_to(&self, name: &str) -> bool {
        self.name == name || self.alias == Some(name)
    }
}

use Point::*;
use QueueingEvent::*;

/// The events a pod rejected by `plugins` waits for: the union of their
/// rows' `requeue_on`; every event when no plugin is named or one has no row.
pub fn requeue_on(plugins: &[&str]) -> EventSet {
    if plugins.is_empty() {
        return EventSet::ALL;
    }
    plugins.iter().fold(EventSet::EMPTY, |set, name| {
        match REGISTRY.iter().find(|r| r.answers_to(name)) {
            Some(r) => set.union(r.requeue_on),
            None => EventSet::ALL,
        }
    })
}

/// Every plugin, in kube-scheduler's default-profile order (the order decides
/// which Filter reason a node is reported with).
pub static REGISTRY: &[Registration] = &[
    Registration {
        name: "SchedulingGates",
        alias: None,
        points: &[PreEnqueue],
        multi_point: &[PreEnqueue],
        enabled_by_default: true,
        default_weight: 0,
        together: &[],
        can_disable: false,
        node_local: false,
        requeue_on: EventSet::EMPTY,
        args: None,
        build: |_| Instance::default(),
    },
    Registration {
        name: "PrioritySort",
        alias: None,
        points: &[QueueSort],
        multi_point: &[QueueSort],
        enabled_by_default: true,
        default_weight: 0,
        together: &[],
        can_disable: true,
        node_local: false,
        requeue_on: EventSet::EMPTY,
        args: None,
        build: |_| Instance::default(),
    },
    Registration {
        name: node_unschedulable::NAME,
        alias: None,
        points: &[Filter],
        multi_point: &[Filter],
        enabled_by_default: true,
        default_weight: 0,
        together: &[],
        can_disable: true,
        node_local: true,
        requeue_on: EventSet::of(&[NodeAdded, NodeTaints]),
        args: None,
        build: |_| filter_only(Arc::new(node_unschedulable::NodeUnschedulable)),
    },
    Registration {
        name: node_name::NAME,
        alias: None,
        points: &[Filter],
        multi_point: &[Filter],
        enabled_by_default: true,
        default_weight: 0,
        together: &[],
        can_disable: true,
        node_local: true,
        requeue_on: EventSet::of(&[NodeAdded]),
        args: None,
        build: |_| filter_only(Arc::new(node_name::NodeName)),
    },
    Registration {
        name: taint_toleration::NAME,
        alias: None,
        points: &[Filter, PreScore, Score],
        multi_point: &[Filter, PreScore, Score],
        enabled_by_default: true,
        default_weight: 3,
        together: &[&[PreScore, Score]],
        can_disable: true,
        node_local: true,
        requeue_on: EventSet::of(&[NodeAdded, NodeTaints]),
        args: None,
        build: |_| {
            let p = Arc::new(taint_toleration::TaintToleration);
            Instance {
                filter: Some(p.clone()),
                score: Some(p),
                ..Instance::default()
            }
        },
    },
    Registration {
        name: node_affinity::NAME,
        alias: None,
        points: &[PreFilter, Filter, PreScore, Score],
        multi_point: &[PreFilter, Filter, PreScore, Score],
        enabled_by_default: true,
        default_weight: 2,
        together: &[&[PreFilter, Filter], &[PreScore, Score]],
        can_disable: true,
        node_local: true,
        requeue_on: EventSet::of(&[NodeAdded, NodeLabels]),
        args: None,
        build: |_| {
            let p = Arc::new(node_affinity::NodeAffinity);
            Instance {
                pre_filter: Some(p.clone()),
                filter: Some(p.clone()),
                score: Some(p),
                ..Instance::default()
            }
        },
    },
    Registration {
        name: node_ports::NAME,
        alias: None,
        points: &[PreFilter, Filter],
        multi_point: &[PreFilter, Filter],
        enabled_by_default: true,
        default_weight: 0,
        together: &[&[PreFilter, Filter]],
        can_disable: true,
        node_local: true,
        requeue_on: EventSet::of(&[NodeAdded, PodRemoved]),
        args: None,
        build: |_| filter_only(Arc::new(node_ports::NodePorts)),
    },
    Registration {
        name: node_resources_fit::NAME,
        alias: None,
        points: &[PreFilter, Filter, Score],
        multi_point: &[PreFilter, Filter, Score],
        enabled_by_default: true,
        default_weight: 1,
        together: &[&[PreFilter, Filter]],
        can_disable: true,
        node_local: true,
        // Devices: a DeviceClass naming an extended resource the pod
        // asks for hands it to DynamicResources on nodes without it.
        requeue_on: EventSet::of(&[NodeAdded, NodeAllocatable, PodRemoved, Devices]),
        args: Some(ArgsSpec {
            default: || Arc::new(node_resources_fit::NodeResourcesFitArgs::default()),
            decode: |path, v| Ok(Arc::new(node_resources_fit::decode_args(path, v)?)),
        }),
        build: |args| {
            let p = Arc::new(node_resources_fit::NodeResourcesFit::new(
                &args.get_or_default(node_resources_fit::NAME),
            ));
            Instance {
                filter: Some(p.clone()),
                score: Some(p),
                ..Instance::default()
            }
        },
    },
    Registration {
        name: volume_restrictions::NAME,
        alias: None,
        points: &[PreFilter, Filter],
        multi_point: &[PreFilter, Filter],
        enabled_by_default: true,
        default_weight: 0,
        together: &[&[PreFilter, Filter]],
        can_disable: true,
        node_local: true,
        requeue_on: EventSet::of(&[PodRemoved, Storage]),
        args: None,
        build: |_| pre_filter_and_filter(Arc::new(volume_restrictions::VolumeRestrictions)),
    },
    Registration {
        name: node_volume_limits::NAME,
        alias: None,
        points: &[PreFilter, Filter],
        multi_point: &[PreFilter, Filter],
        enabled_by_default: true,
        default_weight: 0,
        together: &[&[PreFilter, Filter]],
        can_disable: true,
        node_local: true,
        requeue_on: EventSet::of(&[NodeAdded, NodeAllocatable, PodRemoved, Storage]),
        args: None,
        build: |_| pre_filter_and_filter(Arc::new(node_volume_limits::NodeVolumeLimits)),
    },
    Registration {
        name: volume_binding::NAME,
        alias: None,
        points: &[PreFilter, Filter, Reserve, PreBind],
        multi_point: &[PreFilter, Filter, Reserve, PreBind],
        enabled_by_default: true,
        default_weight: 0,
        together: &[&[PreFilter, Filter], &[Reserve, PreBind]],
        can_disable: true,
        node_local: true,
        requeue_on: EventSet::of(&[NodeAdded, NodeLabels, Storage]),
        args: Some(ArgsSpec {
            default: || Arc::new(volume_binding::VolumeBindingArgs::default()),
            decode: |path, v| Ok(Arc::new(volume_binding::decode_args(path, v)?)),
        }),
        build: |args| {
            let a: volume_binding::VolumeBindingArgs = args.get_or_default(volume_binding::NAME);
            Instance {
                pre_bind_volumes: Some(a.bind_timeout),
                ..pre_filter_and_filter(Arc::new(volume_binding::VolumeBinding))
            }
        },
    },
    Registration {
        name: volume_zone::NAME,
        alias: None,
        points: &[PreFilter, Filter],
        multi_point: &[PreFilter, Filter],
        enabled_by_default: true,
        default_weight: 0,
        together: &[&[PreFilter, Filter]],
        can_disable: true,
        node_local: true,
        requeue_on: EventSet::of(&[NodeAdded, NodeLabels, Storage]),
        args: None,
        build: |_| pre_filter_and_filter(Arc::new(volume_zone::VolumeZone)),
    },
    Registration {
        name: pod_topology_spread::NAME,
        alias: None,
        points: &[PreFilter, Filter, PreScore, Score],
        multi_point: &[PreFilter, Filter, PreScore, Score],
        enabled_by_default: true,
        default_weight: 2,
        together: &[&[PreFilter, Filter], &[PreScore, Score]],
        can_disable: true,
        node_local: true,
        requeue_on: EventSet::of(&[NodeAdded, NodeLabels, NodeTaints, PodPlaced, PodRemoved]),
        args: Some(ArgsSpec {
            default: || Arc::new(pod_topology_spread::PodTopologySpreadArgs::default()),
            decode: |path, v| Ok(Arc::new(pod_topology_spread::decode_args(path, v)?)),
        }),
        build: |args| {
            let p = Arc::new(pod_topology_spread::PodTopologySpread::new(
                &args.get_or_default(pod_topology_spread::NAME),
            ));
            Instance {
                pre_filter: Some(p.clone()),
                filter: Some(p.clone()),
                score: Some(p),
                ..Instance::default()
            }
        },
    },
    Registration {
        name: gang::NAME,
        alias: Some(gang::ALIAS),
        points: &[
            PreEnqueue, QueueSort, PreFilter, PostFilter, Reserve, Permit,
        ],
        // Its queue order is PrioritySort's, extended to keep a gang's members
        // together; it takes QueueSort only when named there.
        multi_point: &[PreEnqueue, PreFilter, PostFilter, Reserve, Permit],
        enabled_by_default: true,
        default_weight: 0,
        together: &[&[PreEnqueue, PreFilter, PostFilter, Reserve, Permit]],
        can_disable: true,
        node_local: false,
        requeue_on: EventSet::ANY_NODE.union(EventSet::of(&[PodRemoved, Gang])),
        args: Some(ArgsSpec {
            default: || Arc::new(gang::GangArgs::default()),
            decode: |path, v| Ok(Arc::new(gang::args::decode_args(path, v)?)),
        }),
        build: |args| Instance {
            gang: Some(args.get_or_default::<gang::GangArgs>(gang::NAME)),
            ..Instance::default()
        },
    },
    Registration {
        name: inter_pod_affinity::NAME,
        alias: None,
        points: &[PreFilter, Filter, PreScore, Score],
        multi_point: &[PreFilter, Filter, PreScore, Score],
        enabled_by_default: true,
        default_weight: 2,
        together: &[&[PreFilter, Filter], &[PreScore, Score]],
        can_disable: true,
        node_local: true,
        requeue_on: EventSet::of(&[NodeAdded, NodeLabels, PodPlaced, PodRemoved, Namespace]),
        args: Some(ArgsSpec {
            default: || Arc::new(inter_pod_affinity::InterPodAffinityArgs::default()),
            decode: |path, v| Ok(Arc::new(inter_pod_affinity::decode_args(path, v)?)),
        }),
        build: |args| {
            let p = Arc::new(inter_pod_affinity::InterPodAffinity::new(
                &args.get_or_default(inter_pod_affinity::NAME),
            ));
            Instance {
                pre_filter: Some(p.clone()),
                filter: Some(p.clone()),
                score: Some(p),
                ..Instance::default()
            }
        },
    },
    Registration {
        name: dynamic_resources::NAME,
        alias: None,
        // PreEnqueue is the gate's (`gang::gate`), which asks
        // `dynamic_resources::pre_enqueue`.
        points: &[PreEnqueue, PreFilter, Filter, PreScore, Score],
        multi_point: &[PreEnqueue, PreFilter, Filter, PreScore, Score],
        enabled_by_default: true,
        default_weight: 1,
        together: &[&[PreEnqueue, PreFilter, Filter], &[PreScore, Score]],
        // Disabling it would bind pods as if their claims did not exist
        // (its Score, the `firstAvailable` preference, may be).
        can_disable: false,
        // Its answer on a node reads that node's devices and their use: a
        // change in the use of a node's own devices marks the node changed,
        // any other change of the device facts moves their epoch, which
        // forgets the memos of pods with claims (`batch`).
        node_local: true,
        // A claim created, allocated or freed; devices published; a node
        // added or relabelled (devices reach nodes by name and label); a
        // reservation given back (its planned devices are free again); a
        // node's allocatable changed (one advertising an extended resource
        // serves it by normal fit instead of devices).
        requeue_on: EventSet::of(&[
            QueueingEvent::ResourceClaim,
            QueueingEvent::Devices,
            QueueingEvent::NodeAdded,
            QueueingEvent::NodeLabels,
            QueueingEvent::NodeAllocatable,
            QueueingEvent::PodRemoved,
        ]),
        args: None,
        build: |_| {
            let p = Arc::new(dynamic_resources::DynamicResources);
            Instance {
                pre_filter: Some(p.clone()),
                filter: Some(p.clone()),
                score: Some(p),
                ..Instance::default()
            }
        },
    },
    Registration {
        name: balanced_allocation::NAME,
        alias: None,
        points: &[PreScore, Score],
        multi_point: &[PreScore, Score],
        enabled_by_default: true,
        default_weight: 1,
        together: &[&[PreScore, Score]],
        can_disable: true,
        node_local: true,
        requeue_on: EventSet::EMPTY,
        args: Some(ArgsSpec {
            default: || Arc::new(balanced_allocation::BalancedAllocationArgs::default()),
            decode: |path, v| Ok(Arc::new(balanced_allocation::decode_args(path, v)?)),
        }),
        build: |args| Instance {
            score: Some(Arc::new(balanced_allocation::BalancedAllocation::new(
                &args.get_or_default(balanced_allocation::NAME),
            ))),
            ..Instance::default()
        },
    },
    Registration {
        name: image_locality::NAME,
        alias: None,
        points: &[Score],
        multi_point: &[Score],
        enabled_by_default: true,
        default_weight: 1,
        together: &[],
        can_disable: true,
        node_local: true,
        requeue_on: EventSet::EMPTY,
        args: None,
        build: |_| Instance {
            score: Some(Arc::new(image_locality::ImageLocality)),
            ..Instance::default()
        },
    },
    Registration {
        name: crate::preemption::NAME,
        alias: None,
        points: &[PostFilter],
        multi_point: &[PostFilter],
        enabled_by_default: true,
        default_weight: 0,
        together: &[],
        can_disable: true,
        node_local: false,
        requeue_on: EventSet::EMPTY,
        args: Some(ArgsSpec {
            default: || Arc::new(crate::preemption::PreemptionArgs::default()),
            decode: |path, v| Ok(Arc::new(crate::preemption::decode_args(path, v)?)),
        }),
        build: |args| Instance {
            preemption: Some(
                args.get_or_default::<crate::preemption::PreemptionArgs>(crate::preemption::NAME),
            ),
            ..Instance::default()
        },
    },
    Registration {
        name: "DefaultBinder",
        alias: None,
        points: &[Bind],
        multi_point: &[Bind],
        enabled_by_default: true,
        default_weight: 0,
        together: &[],
        can_disable: false,
        node_local: false,
        requeue_on: EventSet::EMPTY,
        args: None,
        build: |_| Instance::default(),
    },
];

/// kube-scheduler plugins Muster does not implement (yet): naming one is an
/// error that says so, rather than scheduling silently without it.
pub const NOT_IMPLEMENTED: &[&str] = &[
    "EBSLimits",
    "GCEPDLimits",
    "AzureDiskLimits",
    "NodeDeclaredFeatures",
];

/// A plugin whose PreFilter prepares what its Filter reads.
fn pre_filter_and_filter<P: PreFilterPlugin + FilterPlugin + 'static>(p: Arc<P>) -> Instance {
    Instance {
        pre_filter: Some(p.clone()),
        filter: Some(p),
        ..Instance::default()
    }
}

fn filter_only(p: Arc<dyn FilterPlugin>) -> Instance {
    Instance {
        filter: Some(p),
        ..Instance::default()
    }
}

/// The registration answering to `name` (its name or alias).
pub fn lookup(name: &str) -> Option<&'static Registration> {
    REGISTRY.iter().find(|r| r.answers_to(name))
}

/// [`lookup`], or the error for an unknown name at `path`.
pub fn resolve(path: &str, name: &str) -> Result<&'static Registration, ConfigError> {
    lookup(name).ok_or_else(|| {
        let message = if NOT_IMPLEMENTED.contains(&name) {
            format!("plugin {name:?} is a kube-scheduler plugin that Muster does not implement")
        } else {
            let known: Vec<&str> = REGISTRY.iter().map(|r| r.name).collect();
            format!(
                "plugin {name:?} is not a plugin Muster knows (known: {})",
                known.join(", ")
            )
        };
        ConfigError::at(path, message)
    })
}

/// Every plugin's default arguments.
pub fn default_args() -> Args {
    let mut args = Args::default();
    for r in REGISTRY {
        if let Some(spec) = &r.args {
            args.insert(r.name, (spec.default)());
        }
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each row is consistent: the points it enables by default and the
    /// groups it couples are points it implements, its factory provides an
    /// object for every placement point it implements, and names are unique.
    #[test]
    fn every_row_is_consistent() {
        let args = default_args();
        for (i, r) in REGISTRY.iter().enumerate() {
            assert!(r.multi_point.iter().all(|p| r.implements(*p)), "{}", r.name);
            assert!(
                r.together
                    .iter()
                    .flat_map(|g| g.iter())
                    .all(|p| r.implements(*p)),
                "{}",
                r.name
            );
            let built = (r.build)(&args);
            assert_eq!(built.filter.is_some(), r.implements(Filter), "{}", r.name);
            assert_eq!(built.score.is_some(), r.implements(Score), "{}", r.name);
            if built.pre_filter.is_some() {
                assert!(r.implements(PreFilter), "{}", r.name);
            }
            if r.implements(Score) {
                assert!(r.default_weight >= 1, "{}", r.name);
            }
            assert!(
                REGISTRY[..i]
                    .iter()
                    .all(|q| !q.answers_to(r.name) && r.alias.is_none_or(|a| !q.answers_to(a))),
                "{} registered twice",
                r.name
            );
            assert!(!NOT_IMPLEMENTED.contains(&r.name), "{}", r.name);
        }
    }

    #[test]
    fn unknown_names_are_explained() {
        assert_eq!(resolve("x", "Coscheduling").unwrap().name, "GangScheduling");
        let e = resolve("x", "EBSLimits").unwrap_err();
        assert!(e.message.contains("does not implement"), "{e}");
        let e = resolve("x", "Bogus").unwrap_err();
        assert!(e.message.contains("not a plugin Muster knows"), "{e}");
        assert!(e.message.contains("NodeResourcesFit"), "{e}");
    }

    /// The default profile's rows as docs/configuration.md tabulates them.
    fn default_profile_table() -> String {
        let mut table = String::from(
            "| plugin | points | Score weight | can be disabled | arguments |\n\
             | --- | --- | --- | --- | --- |\n",
        );
        for r in REGISTRY.iter().filter(|r| r.enabled_by_default) {
            let points: Vec<&str> = r.multi_point.iter().map(|p| p.field()).collect();
            let weight = if r.multi_point.contains(&Score) {
                r.default_weight.to_string()
            } else {
                "—".to_string()
            };
            table.push_str(&format!(
                "| `{}` | {} | {} | {} | {} |\n",
                r.name,
                points.join(", "),
                weight,
                if r.can_disable { "yes" } else { "no" },
                if r.args.is_some() { "yes" } else { "—" },
            ));
        }
        table
    }

    /// docs/configuration.md's default-profile table is the registry's:
    /// a row added, removed or changed here fails until the doc says so.
    #[test]
    fn the_documented_default_profile_is_the_registrys() {
        let docs = include_str!("../../../docs/configuration.md");
        let section = docs
            .split("## Default profile\n\n")
            .nth(1)
            .expect("docs/configuration.md has a `## Default profile` section");
        let documented: String = section
            .lines()
            .take_while(|l| l.starts_with('|'))
            .map(|l| format!("{l}\n"))
            .collect();
        let expected = default_profile_table();
        assert!(
            documented == expected,
            "docs/configuration.md's default-profile table differs from the registry; it should read:\n{expected}"
        );
    }

    /// A Filter rejection depends on a node, so some cluster change must
    /// be able to lift it: every plugin with a Filter point declares the
    /// events it waits for (a pod rejected by it would otherwise wait for
    /// the periodic flush).
    #[test]
    fn every_filter_plugin_declares_its_queueing_events() {
        for r in REGISTRY.iter().filter(|r| r.implements(Filter)) {
            assert!(
                !r.requeue_on.is_empty(),
                "{} declares no queueing events",
                r.name
            );
        }
        assert_eq!(requeue_on(&[]), EventSet::ALL);
        assert_eq!(requeue_on(&["NoSuchPlugin"]), EventSet::ALL);
        assert_eq!(
            requeue_on(&[node_resources_fit::NAME, node_affinity::NAME]),
            EventSet::of(&[NodeAdded, NodeLabels, NodeAllocatable, PodRemoved, Devices])
        );
        assert!(requeue_on(&[inter_pod_affinity::NAME]).contains(PodPlaced));
        assert!(!requeue_on(&[node_resources_fit::NAME]).contains(PodPlaced));
    }
}
