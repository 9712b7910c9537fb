//! The Kubernetes objects a scenario creates, as JSON manifests in creation
//! order: first the setup (namespaces, priority classes, nodes, DRA device
//! classes, then the claim templates in their namespaces), then each
//! workload (a gang's PodGroup before its pods). Every object carries the
//! label `muster.dev/scenario: <name>` so watchers can select exactly it.

use std::collections::BTreeSet;
use std::ops::Range;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::dra::DeviceClassEntry;
use super::spec::{
    After, Dialect, GangWorkload, Outcome, PodShape, PodsWorkload, Scenario, Workload,
};
use muster_cluster::kwok::RUN_SECONDS_ANNOTATION;
use muster_cluster::kwok::templates;
use muster_core::dialects::{
    SCHEDULE_TIMEOUT_ANNOTATION, coscheduling, kueue, volcano, workload_api,
};
use muster_core::model::GroupSource;

/// Label on every object a scenario creates; its value is the scenario name.
pub const SCENARIO_LABEL: &str = "muster.dev/scenario";
/// Label on pods and PodGroups: the workload's name prefix.
pub const WORKLOAD_LABEL: &str = "muster.dev/workload";
/// Label naming a gang pod's own gang (for `matchLabelKeys` in scenario
/// affinity terms).
pub const GANG_NAME_LABEL: &str = "muster.dev/gang-name";
/// Prefix of the PriorityClasses created for `priority` values.
pub const PRIORITY_CLASS_PREFIX: &str = "muster-scenario-priority-";

/// The object kinds a scenario creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Namespace,
    PriorityClass,
    Node,
    /// `kueue.x-k8s.io/v1beta2` Topology (the scenario's `kueueTopology`).
    KueueTopology,
    /// `resource.k8s.io/v1`.
    DeviceClass,
    /// `resource.k8s.io/v1`, namespaced.
    ResourceClaimTemplate,
    /// `scheduling.k8s.io/v1beta1`.
    PodGroup,
    /// `scheduling.k8s.io/v1alpha2`.
    PodGroupV1alpha2,
    /// `scheduling.k8s.io/v1alpha1`.
    Workload,
    CoschedulingPodGroup,
    VolcanoPodGroup,
    Pod,
}

impl Kind {
    /// `(group, version, kind, plural)`.
    pub fn gvk(self) -> (&'static str, &'static str, &'static str, &'static str) {
        match self {
            Kind::Namespace => ("", "v1", "Namespace", "namespaces"),
            Kind::PriorityClass => (
                "scheduling.k8s.io",
                "v1",
                "PriorityClass",
                "priorityclasses",
            ),
            Kind::Node => ("", "v1", "Node", "nodes"),
            Kind::KueueTopology => ("kueue.x-k8s.io", "v1beta2", "Topology", "topologies"),
            Kind::DeviceClass => ("resource.k8s.io", "v1", "DeviceClass", "deviceclasses"),
            Kind::ResourceClaimTemplate => (
                "resource.k8s.io",
                "v1",
                "ResourceClaimTemplate",
                "resourceclaimtemplates",
            ),
            Kind::PodGroup => ("scheduling.k8s.io", "v1beta1", "PodGroup", "podgroups"),
            Kind::PodGroupV1alpha2 => ("scheduling.k8s.io", "v1alpha2", "PodGroup", "podgroups"),
            Kind::Workload => ("scheduling.k8s.io", "v1alpha1", "Workload", "workloads"),
            Kind::CoschedulingPodGroup => {
                ("scheduling.x-k8s.io", "v1alpha1", "PodGroup", "podgroups")
            }
            Kind::VolcanoPodGroup => ("scheduling.volcano.sh", "v1beta1", "PodGroup", "podgroups"),
            Kind::Pod => ("", "v1", "Pod", "pods"),
        }
    }

    /// `apiVersion` as written in manifests.
    pub fn api_version(self) -> String {
        match self.gvk() {
            ("", version, _, _) => version.to_string(),
            (group, version, _, _) => format!("{group}/{version}"),
        }
    }

    /// The kind of object that defines a gang in `dialect` (`None`: Kueue,
    /// whose groups live in pod labels only).
    pub fn group_kind(dialect: Dialect) -> Option<Kind> {
        match dialect {
            Dialect::PodGroup => Some(Kind::PodGroup),
            Dialect::PodGroupV1alpha2 => Some(Kind::PodGroupV1alpha2),
            Dialect::Workload => Some(Kind::Workload),
            Dialect::Coscheduling => Some(Kind::CoschedulingPodGroup),
            Dialect::Volcano => Some(Kind::VolcanoPodGroup),
            Dialect::Kueue => None,
        }
    }
}

/// The podGroup every Workload-dialect gang declares, and its pods reference.
pub const WORKLOAD_POD_GROUP: &str = "workers";

/// One object to create.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    pub kind: Kind,
    /// `None` for cluster-scoped kinds.
    pub namespace: Option<String>,
    pub name: String,
    pub object: Value,
}

/// Everything a scenario creates, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Namespaces, priority classes, nodes, the Kueue Topology, device
    /// classes and claim templates; may already exist. The namespaced ones
    /// come last (they need their namespace).
    pub setup: Vec<Manifest>,
    pub workloads: Vec<WorkloadPlan>,
    /// The phases `workloads` are created in, in order, covering them all.
    pub stages: Vec<Stage>,
}

/// A phase: consecutive workloads whose creation starts together, once the
/// phase before has started and the gate is open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stage {
    /// Indices into [`Plan::workloads`].
    pub workloads: Range<usize>,
    /// Wait until every workload before `workloads.start` has settled.
    pub after_settled: bool,
    /// Then wait this long.
    pub delay: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub enum WorkloadPlan {
    Gang(GangPlan),
    Pods(PodsPlan),
}

/// One gang: its group object and member pods.
#[derive(Debug, Clone, PartialEq)]
pub struct GangPlan {
    pub namespace: String,
    /// The gang's name: its group object's, or the Kueue group name.
    pub name: String,
    pub min_count: u32,
    /// From the scenario; `None` means the scheduler's default for `source`.
    pub timeout: Option<Duration>,
    /// The dialect the gang is written in (its default timeout depends on it).
    pub source: GroupSource,
    pub expect: Option<Outcome>,
    /// Counted in throughput and latency (see `Scenario` field `measured`).
    pub measured: bool,
    /// `None` for Kueue gangs.
    pub group: Option<Manifest>,
    pub pods: Vec<Manifest>,
}

/// The plain pods of one workload.
#[derive(Debug, Clone, PartialEq)]
pub struct PodsPlan {
    pub namespace: String,
    pub name_prefix: String,
    pub expect: Option<Outcome>,
    pub measured: bool,
    /// Churn: one pod every this long, on a pace of its own.
    pub interval: Option<Duration>,
    pub pods: Vec<Manifest>,
}

impl WorkloadPlan {
    pub fn pods(&self) -> &[Manifest] {
        match self {
            WorkloadPlan::Gang(g) => &g.pods,
            WorkloadPlan::Pods(p) => &p.pods,
        }
    }
}

impl Scenario {
    /// The objects this scenario creates.
    pub fn plan(&self) -> Plan {
        let mut setup: Vec<Manifest> = self
            .namespaces
            .iter()
            .map(|ns| self.namespace(ns))
            .collect();
        let priorities: BTreeSet<i32> = self
            .workloads
            .iter()
            .filter_map(|w| w.shape().priority)
            .collect();
        setup.extend(priorities.into_iter().map(|p| self.priority_class(p)));
        setup.extend(
            templates::expand(&self.nodes)
                .into_iter()
                .map(|n| self.node(n)),
        );
        setup.extend(self.kueue_topology());
        setup.extend(self.device_classes.iter().map(|c| self.device_class(c)));
        setup.extend(self.claim_templates());
        let mut workloads = Vec::new();
        let mut stages: Vec<Stage> = Vec::new();
        for w in &self.workloads {
            let first = workloads.len();
            match w {
                Workload::Gang(g) => {
                    workloads.extend((0..g.count).map(|i| WorkloadPlan::Gang(self.gang(g, i))))
                }
                Workload::Pods(p) => workloads.push(WorkloadPlan::Pods(self.plain_pods(p))),
            }
            match (w.start(), stages.last_mut()) {
                // Joins the phase before.
                (None, Some(stage)) => stage.workloads.end = workloads.len(),
                (start, _) => {
                    let start = start.unwrap_or_default();
                    stages.push(Stage {
                        workloads: first..workloads.len(),
                        after_settled: start.after == Some(After::PreviousSettled),
                        delay: Duration::from_secs(start.delay_seconds),
                    });
                }
            }
        }
        Plan {
            setup,
            workloads,
            stages,
        }
    }

    fn labels(&self) -> Map<String, Value> {
        let mut labels = Map::new();
        labels.insert(SCENARIO_LABEL.into(), json!(self.name));
        labels
    }

    fn namespace(&self, name: &str) -> Manifest {
        Manifest {
            kind: Kind::Namespace,
            namespace: None,
            name: name.into(),
            object: json!({
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": name, "labels": self.labels()},
            }),
        }
    }

    fn priority_class(&self, value: i32) -> Manifest {
        let name = priority_class_name(value);
        Manifest {
            kind: Kind::PriorityClass,
            namespace: None,
            name: name.clone(),
            object: json!({
                "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": name, "labels": self.labels()},
                "value": value,
                "description": format!("created by muster scenario {}", self.name),
            }),
        }
    }

    /// A node from the template expansion, labelled as the scenario's.
    fn node(&self, mut object: Value) -> Manifest {
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        object["metadata"]["labels"][SCENARIO_LABEL] = json!(self.name);
        Manifest {
            kind: Kind::Node,
            namespace: None,
            name,
            object,
        }
    }

    /// The hierarchy as a Kueue `Topology`, after the nodes it describes.
    fn kueue_topology(&self) -> Option<Manifest> {
        let levels = self.kueue_topology.as_ref()?;
        let (_, _, kind, _) = Kind::KueueTopology.gvk();
        let levels: Vec<Value> = levels.iter().map(|l| json!({"nodeLabel": l})).collect();
        Some(Manifest {
            kind: Kind::KueueTopology,
            namespace: None,
            name: self.name.clone(),
            object: json!({
                "apiVersion": Kind::KueueTopology.api_version(), "kind": kind,
                "metadata": {"name": self.name, "labels": self.labels()},
                "spec": {"levels": levels},
            }),
        })
    }

    fn device_class(&self, class: &DeviceClassEntry) -> Manifest {
        let mut object = class.object();
        object["metadata"]["labels"] = json!(self.labels());
        Manifest {
            kind: Kind::DeviceClass,
            namespace: None,
            name: class.name.clone(),
            object,
        }
    }

    /// Each declared template in each namespace whose workloads claim from
    /// it, in the order workloads first name them.
    fn claim_templates(&self) -> Vec<Manifest> {
        let mut wanted: Vec<(&str, &str)> = Vec::new();
        for w in &self.workloads {
            let shape = w.shape();
            for name in shape
                .group_claim_templates
                .iter()
                .chain(shape.claim_templates)
            {
                let key = (w.namespace(), name.as_str());
                if !wanted.contains(&key) {
                    wanted.push(key);
                }
            }
        }
        wanted
            .into_iter()
            .filter_map(|(namespace, name)| {
                let template = self
                    .resource_claim_templates
                    .iter()
                    .find(|t| t.name == name)?;
                let mut object = template.object(namespace);
                object["metadata"]["labels"] = json!(self.labels());
                Some(Manifest {
                    kind: Kind::ResourceClaimTemplate,
                    namespace: Some(namespace.into()),
                    name: name.into(),
                    object,
                })
            })
            .collect()
    }

    fn gang(&self, g: &GangWorkload, index: u32) -> GangPlan {
        let name = format!("{}-{index}", g.name_prefix);
        let dialect = self.gang_dialect(g);
        let group = self.group_object(g, dialect, &name);
        let pods = (0..g.size)
            .map(|j| {
                let mut pod = self.pod(
                    &g.namespace,
                    &format!("{name}-{j}"),
                    &g.name_prefix,
                    g.shape(),
                );
                join_gang(&mut pod.object, dialect, g, &name);
                pod.object["metadata"]["labels"][GANG_NAME_LABEL] = json!(name);
                pod
            })
            .collect();
        GangPlan {
            namespace: g.namespace.clone(),
            name,
            min_count: g.min_count(),
            timeout: g.timeout_seconds.map(Duration::from_secs),
            source: dialect.source(),
            expect: g.expect.map(|e| e.outcome),
            measured: g.measured,
            group,
            pods,
        }
    }

    /// The dialect a gang workload is written in.
    pub fn gang_dialect(&self, g: &GangWorkload) -> Dialect {
        g.dialect.unwrap_or(self.dialect)
    }

    /// The object that defines gang `name` in `dialect` (none for Kueue).
    fn group_object(&self, g: &GangWorkload, dialect: Dialect, name: &str) -> Option<Manifest> {
        let kind = Kind::group_kind(dialect)?;
        let mut labels = self.labels();
        labels.insert(WORKLOAD_LABEL.into(), json!(g.name_prefix));
        let mut annotations = Map::new();
        // Coscheduling carries the timeout in its spec; the rest read
        // Muster's annotation.
        if let Some(t) = g.timeout_seconds
            && dialect != Dialect::Coscheduling
        {
            annotations.insert(SCHEDULE_TIMEOUT_ANNOTATION.into(), json!(t.to_string()));
        }
        // Validation admits a preferred level only for the PodGroup
        // dialects here (Kueue's rides on the pods).
        if let Some(key) = &g.preferred_topology
            && matches!(dialect, Dialect::PodGroup | Dialect::PodGroupV1alpha2)
        {
            annotations.insert(
                workload_api::PREFERRED_TOPOLOGY_ANNOTATION.into(),
                json!(key),
            );
        }
        let priority_class = g.priority.map(priority_class_name);
        let spec = match dialect {
            Dialect::PodGroup | Dialect::PodGroupV1alpha2 => {
                let mut spec = json!({"schedulingPolicy": {"gang": {"minCount": g.min_count()}}});
                if let Some(key) = &g.required_topology {
                    spec["schedulingConstraints"] = json!({"topology": [{"key": key}]});
                }
                if let Some(pc) = priority_class {
                    spec["priorityClassName"] = json!(pc);
                }
                if !g.group_claim_templates.is_empty() {
                    let claims: Vec<Value> = g
                        .group_claim_templates
                        .iter()
                        .map(|t| json!({"name": t, "resourceClaimTemplateName": t}))
                        .collect();
                    spec["resourceClaims"] = json!(claims);
                }
                spec
            }
            Dialect::Workload => json!({"podGroups": [{
                "name": WORKLOAD_POD_GROUP,
                "policy": {"gang": {"minCount": g.min_count()}},
            }]}),
            Dialect::Coscheduling => {
                let mut spec = json!({"minMember": g.min_count()});
                if let Some(t) = g.timeout_seconds {
                    spec["scheduleTimeoutSeconds"] = json!(t);
                }
                spec
            }
            Dialect::Volcano => {
                let mut spec = json!({"minMember": g.min_count()});
                if let Some(pc) = priority_class {
                    spec["priorityClassName"] = json!(pc);
                }
                spec
            }
            Dialect::Kueue => return None,
        };
        let (_, _, kind_name, _) = kind.gvk();
        Some(Manifest {
            kind,
            namespace: Some(g.namespace.clone()),
            name: name.into(),
            object: json!({
                "apiVersion": kind.api_version(), "kind": kind_name,
                "metadata": {"name": name, "namespace": g.namespace,
                             "labels": labels, "annotations": annotations},
                "spec": spec,
            }),
        })
    }

    fn plain_pods(&self, p: &PodsWorkload) -> PodsPlan {
        let pods = (0..p.count)
            .map(|i| {
                let name = format!("{}-{i}", p.name_prefix);
                self.pod(&p.namespace, &name, &p.name_prefix, p.shape())
            })
            .collect();
        PodsPlan {
            namespace: p.namespace.clone(),
            name_prefix: p.name_prefix.clone(),
            expect: p.expect.map(|e| e.outcome),
            measured: p.measured,
            interval: p.interval_milliseconds.map(Duration::from_millis),
            pods,
        }
    }

    fn pod(&self, namespace: &str, name: &str, workload: &str, shape: PodShape<'_>) -> Manifest {
        let mut labels = self.labels();
        labels.insert(WORKLOAD_LABEL.into(), json!(workload));
        let mut annotations = Map::new();
        if let Some(s) = shape.sim_run_seconds {
            annotations.insert(RUN_SECONDS_ANNOTATION.into(), json!(s.to_string()));
        }
        let mut spec = json!({
            "schedulerName": self.scheduler_name,
            "containers": [{
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": shape.requests},
            }],
        });
        // The PodGroup's entries first, each equal to the group's own, so
        // each resolves to the group's claim.
        let templates: Vec<&String> = shape
            .group_claim_templates
            .iter()
            .chain(shape.claim_templates)
            .collect();
        if !templates.is_empty() {
            let claims: Vec<Value> = templates
                .iter()
                .map(|t| json!({"name": t, "resourceClaimTemplateName": t}))
                .collect();
            let uses: Vec<Value> = templates.iter().map(|t| json!({"name": t})).collect();
            spec["resourceClaims"] = json!(claims);
            spec["containers"][0]["resources"]["claims"] = json!(uses);
        }
        if let Some(p) = shape.priority {
            spec["priorityClassName"] = json!(priority_class_name(p));
        }
        if !shape.node_selector.is_empty() {
            spec["nodeSelector"] = json!(shape.node_selector);
        }
        if !shape.tolerations.is_empty() {
            spec["tolerations"] = json!(shape.tolerations);
        }
        if let Some(affinity) = shape.affinity {
            spec["affinity"] = affinity.clone();
        }
        if let Some(seconds) = shape.termination_grace_period_seconds {
            spec["terminationGracePeriodSeconds"] = json!(seconds);
        }
        Manifest {
            kind: Kind::Pod,
            namespace: Some(namespace.into()),
            name: name.into(),
            object: json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": namespace,
                             "labels": labels, "annotations": annotations},
                "spec": spec,
            }),
        }
    }
}

/// Makes `pod` a member of gang `name` the way `dialect` says.
fn join_gang(pod: &mut Value, dialect: Dialect, g: &GangWorkload, name: &str) {
    match dialect {
        Dialect::PodGroup | Dialect::PodGroupV1alpha2 => {
            pod["spec"]["schedulingGroup"] = json!({"podGroupName": name});
        }
        Dialect::Workload => {
            pod["spec"]["workloadRef"] = json!({"name": name, "podGroup": WORKLOAD_POD_GROUP});
        }
        Dialect::Coscheduling => {
            pod["metadata"]["labels"][coscheduling::POD_GROUP_LABEL] = json!(name);
        }
        Dialect::Volcano => {
            pod["metadata"]["annotations"][volcano::GROUP_NAME_ANNOTATION] = json!(name);
        }
        Dialect::Kueue => {
            let meta = &mut pod["metadata"];
            meta["labels"][kueue::GROUP_NAME_LABEL] = json!(name);
            meta["annotations"][kueue::TOTAL_COUNT_ANNOTATION] = json!(g.size.to_string());
            if let Some(key) = &g.required_topology {
                meta["annotations"][kueue::REQUIRED_TOPOLOGY_ANNOTATION] = json!(key);
            }
            if let Some(key) = &g.preferred_topology {
                meta["annotations"][kueue::PREFERRED_TOPOLOGY_ANNOTATION] = json!(key);
            }
        }
    }
}

/// The PriorityClass a scenario creates for a `priority` value.
pub fn priority_class_name(value: i32) -> String {
    if value < 0 {
        format!("{PRIORITY_CLASS_PREFIX}minus-{}", value.unsigned_abs())
    } else {
        format!("{PRIORITY_CLASS_PREFIX}{value}")
    }
}
