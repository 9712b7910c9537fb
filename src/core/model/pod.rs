//! `PodInfo`: the lean, immutable view of a pod that the scheduler works with.
//!
//! Built once per informer event from the wire shape; shared as `Arc<PodInfo>`
//! between cache, queue and plugins. Derived values (effective requests, parsed
//! affinity and tolerations, host ports) are computed here once so the hot path
//! never re-parses.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::constraints::Constraints;
use super::requests::effective_requests;
use super::selector::{NodeSelector, NodeSelectorTerm, PreferredTerm};
use super::volumes::pod_volumes;
use super::wire::{PodWire, is_kept_annotation};
use super::{
    GroupMembership, ModelError, PodAffinity, PodSpread, PreemptionPolicy, Resources, Toleration,
};

/// kube-scheduler's defaults for scoring pods that request nothing
/// (`DefaultMilliCPURequest`, `DefaultMemoryRequest`).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

impl PodPhase {
    fn parse(s: Option<&str>) -> Self {
        match s {
            None | Some("") | Some("Pending") => PodPhase::Pending,
            Some("Running") => PodPhase::Running,
            Some("Succeeded") => PodPhase::Succeeded,
            Some("Failed") => PodPhase::Failed,
            Some(_) => PodPhase::Unknown,
        }
    }

    /// Terminal pods release their node's resources.
    pub fn is_terminal(self) -> bool {
        matches!(self, PodPhase::Succeeded | PodPhase::Failed)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostPort {
    pub port: i32,
    pub protocol: Arc<str>,
    /// Empty means every address (`0.0.0.0`).
    pub ip: Arc<str>,
}

impl HostPort {
    /// Two host ports conflict on the same protocol and port when either binds
    /// every address or both bind the same one.
    pub fn conflicts(&self, other: &HostPort) -> bool {
        self.port == other.port
            && self.protocol == other.protocol
            && (is_wildcard(&self.ip) || is_wildcard(&other.ip) || self.ip == other.ip)
    }
}

fn is_wildcard(ip: &str) -> bool {
    ip.is_empty() || ip == "0.0.0.0" || ip == "::"
}

/// A pod's identity within the cluster.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PodKey {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
}

impl PodKey {
    pub fn new(namespace: &str, name: &str) -> Self {
        PodKey {
            namespace: Arc::from(namespace),
            name: Arc::from(name),
        }
    }

    /// The key of an object as its metadata names it: no namespace (or
    /// `""`) is `default`, as kube-apiserver defaults it ([`namespace_or_default`]).
    pub fn of_meta(namespace: Option<&str>, name: Option<&str>) -> Self {
        PodKey::new(namespace_or_default(namespace), name.unwrap_or(""))
    }
}

/// The namespace of a namespaced object whose metadata has none, or `""`:
/// `default`, as kube-apiserver defaults it on create. The one copy of that
/// rule, for pods, claims, group definitions and owners alike.
pub fn namespace_or_default(namespace: Option<&str>) -> &str {
    namespace.filter(|n| !n.is_empty()).unwrap_or("default")
}

/// A map keyed by pod, hashed with foldhash rather than SipHash: the cache,
/// the queue and the barrier look pods up several times per pod event, and
/// SipHash over two strings was a visible share of the scheduler's CPU.
/// foldhash is seeded per process, and a tenant names pods but cannot see
/// the seed.
pub type PodMap<V> = std::collections::HashMap<PodKey, V, foldhash::fast::RandomState>;
/// A set of pods, hashed as `PodMap`.
pub type PodSet = std::collections::HashSet<PodKey, foldhash::fast::RandomState>;

impl std::fmt::Display for PodKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The longest `activeDeadlineSeconds` read as a declared end (a year).
pub const MAX_ACTIVE_DEADLINE_SECONDS: i64 = 365 * 24 * 3600;

#[derive(Debug, Clone, PartialEq)]
pub struct PodInfo {
    pub key: PodKey,
    pub uid: Arc<str>,
    pub scheduler_name: Arc<str>,
    /// `spec.nodeName`: set once the pod is bound.
    pub node_name: Option<Arc<str>>,
    pub phase: PodPhase,
    /// Set when the pod is being deleted (`deletionTimestamp`).
    pub deleting: bool,
    /// `spec.schedulingGates`, by name: not ready for scheduling while any
    /// is left (kept by name so that `explain` can say which).
    pub scheduling_gates: Arc<[Arc<str>]>,
    pub priority: i32,
    pub priority_class_name: Option<Arc<str>>,
    /// `spec.preemptionPolicy`: `Never` keeps the pod from preempting others.
    pub preemption_policy: PreemptionPolicy,
    /// `spec.activeDeadlineSeconds`: how long it may run from its start,
    /// its declared end (at most a year; more reads as no end).
    pub active_deadline_seconds: Option<u32>,
    pub created_ms: i64,
    /// `status.startTime` (creation when unset): among equally important
    /// victims, preemption evicts the one that started last.
    pub started_ms: i64,
    /// `status.nominatedNodeName`: where a preemption made room for it.
    pub nominated_node: Option<Arc<str>>,
    /// Effective requests: containers, init containers (sidecars included) and
    /// overhead, as kube-scheduler computes them, plus one pod.
    pub requests: Resources,
    /// Requests with kube-scheduler's non-zero defaults, used only for scoring.
    pub non_zero_milli_cpu: i64,
    pub non_zero_memory: i64,
    /// Node selector and affinities, inter-pod affinity, tolerations, host
    /// ports, resource claims, volumes, topology spread: shared between pods
    /// with equal sets when the decoder pools them (`PodInfo::share_with`).
    pub constraints: Arc<Constraints>,
    /// Images of init containers then containers, normalized as the
    /// container runtime names them (`busybox` is `busybox:latest`).
    pub images: Arc<[Arc<str>]>,
    /// Shared between pods with equal labels when the decoder pools them
    /// (`shared::PodPools`, `PodInfo::share_with`).
    pub labels: Arc<BTreeMap<String, String>>,
    /// Only the annotations the scheduler reads (`wire::KEPT_ANNOTATION_PREFIXES`).
    pub annotations: BTreeMap<String, String>,
    pub group: GroupMembership,
}

impl PodInfo {
    /// What a room estimate counts of this pod on a node (how many like it
    /// a node or domain holds): its requests, less the extended resources a
    /// DeviceClass may serve, which DynamicResources allocates from
    /// devices where a node does not advertise them. The estimate may then
    /// be optimistic, never pessimistic: Filter decides.
    pub fn room_requests(&self) -> Resources {
        let mut r = self.requests.clone();
        for x in self
            .constraints
            .extended
            .iter()
            .flat_map(|c| c.requests.iter())
        {
            r.scalar.remove(&x.resource);
        }
        r
    }

    /// Any `spec.schedulingGates` left: the pod waits at PreEnqueue.
    pub fn is_scheduling_gated(&self) -> bool {
        !self.scheduling_gates.is_empty()
    }

    /// Takes the pools' copies of what this pod repeats of other pods (its
    /// label map, its shared strings), as the pod informer does.
    pub fn share_with(&mut self, pools: &mut super::shared::PodPools) {
        self.share_labels(&mut pools.labels);
        self.share_strings(&mut pools.strings);
        self.share_images(&mut pools.images, &mut pools.strings);
        pools.constraints.share_in(&mut self.constraints);
    }

    /// Takes `lists`' copy of this pod's image list (a template's replicas
    /// hold one between them); a list seen first is kept with its names
    /// shared through `strings`.
    fn share_images(
        &mut self,
        lists: &mut super::shared::Pool<[Arc<str>]>,
        strings: &mut super::shared::Pool<str>,
    ) {
        if self.images.is_empty() {
            return;
        }
        if let Some(held) = lists.get(&self.images) {
            self.images = held;
            return;
        }
        let names: Vec<Arc<str>> = self
            .images
            .iter()
            .map(|i| strings.share(Arc::clone(i)))
            .collect();
        self.images = lists.share(Arc::from(names));
    }

    /// Takes `pool`'s copy of this pod's labels, so pods with equal labels
    /// hold one map between them.
    fn share_labels(&mut self, pool: &mut super::shared::Pool<BTreeMap<String, String>>) {
        // A clone of the handle, not `mem::take`: taking an `Arc` leaves a
        // freshly allocated empty map behind, one allocation per pod event.
        self.labels = pool.share(Arc::clone(&self.labels));
    }

    /// Takes `pool`'s copy of each string this pod shares with others: its
    /// namespace, scheduler name, node, priority class, images, and its
    /// group's names (a gang's members, a template's replicas, every pod of
    /// a namespace hold one copy between them). Name and uid are the pod's
    /// own and stay.
    fn share_strings(&mut self, pool: &mut super::shared::Pool<str>) {
        pool.share_in(&mut self.key.namespace);
        pool.share_in(&mut self.scheduler_name);
        for s in [
            &mut self.node_name,
            &mut self.priority_class_name,
            &mut self.nominated_node,
        ]
        .into_iter()
        .flatten()
        {
            pool.share_in(s);
        }
        if let GroupMembership::Member(group) = &mut self.group {
            pool.share_in(&mut group.definition.namespace);
            pool.share_in(&mut group.definition.name);
            if let Some(replica) = &mut group.replica {
                pool.share_in(replica);
            }
        }
    }

    /// The lean pod from its wire form. `group` is the membership its
    /// dialect resolved (`crate::dialects::resolve_membership`): the model
    /// knows no dialect, so the decoder passes it in.
    pub fn from_wire(w: &PodWire, group: GroupMembership) -> Result<Self, ModelError> {
        let name = w
            .metadata
            .name
            .as_deref()
            .filter(|n| !n.is_empty())
            .ok_or_else(|| ModelError::invalid("pod has no metadata.name"))?;
        let namespace = namespace_or_default(w.metadata.namespace.as_deref());
        let ctx = |e: ModelError| ModelError::invalid(format!("pod {namespace}/{name}: {e}"));

        let (requests, non_zero_milli_cpu, non_zero_memory) = effective_requests(w).map_err(ctx)?;
        let node_affinity = w
            .spec
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref());
        let required_affinity = node_affinity
            .and_then(|na| {
                na.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .map(NodeSelector::from_wire)
            .transpose()
            .map_err(ctx)?;
        let preferred_affinity = node_affinity
            .map(|na| {
                na.preferred_during_scheduling_ignored_during_execution
                    .iter()
                    .enumerate()
                    .map(|(i, p)| {
                        // The API server allows 1-100; a larger weight would
                        // let one term outweigh every other score.
                        if !(1..=100).contains(&p.weight) {
                            return Err(ModelError::invalid(format!(
                                "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}].weight: must be in the range 1-100, got {}",
                                p.weight
                            )));
                        }
                        NodeSelectorTerm::from_wire(&p.preference).map(|term| PreferredTerm {
                            weight: p.weight,
                            term,
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()
            .map_err(ctx)?
            .unwrap_or_default();
        let pod_affinity = PodAffinity::from_wire(
            w.spec
                .affinity
                .as_ref()
                .and_then(|a| a.pod_affinity.as_ref()),
            w.spec
                .affinity
                .as_ref()
                .and_then(|a| a.pod_anti_affinity.as_ref()),
            namespace,
            &w.metadata.labels,
        )
        .map_err(ctx)?;
        let tolerations = w
            .spec
            .tolerations
            .iter()
            .map(Toleration::from_wire)
            .collect::<Result<Vec<_>, _>>()
            .map_err(ctx)?;
        let spread = PodSpread::from_wire(w).map_err(ctx)?;

        let created_ms = w
            .metadata
            .creation_timestamp
            .map_or(0, |t| t.timestamp_millis());
        Ok(PodInfo {
            key: PodKey::new(namespace, name),
            uid: Arc::from(w.metadata.uid.as_deref().unwrap_or("")),
            scheduler_name: Arc::from(
                w.spec
                    .scheduler_name
                    .as_deref()
                    .filter(|s| !s.is_empty())
                    .unwrap_or("default-scheduler"),
            ),
            node_name: w
                .spec
                .node_name
                .as_deref()
                .filter(|n| !n.is_empty())
                .map(Arc::from),
            phase: PodPhase::parse(w.status.phase.as_deref()),
            deleting: w.metadata.deletion_timestamp.is_some(),
            scheduling_gates: w
                .spec
                .scheduling_gates
                .iter()
                .map(|g| Arc::from(g.name.as_str()))
                .collect(),
            priority: w.spec.priority.unwrap_or(0),
            priority_class_name: w
                .spec
                .priority_class_name
                .as_deref()
                .filter(|s| !s.is_empty())
                .map(Arc::from),
            active_deadline_seconds: w
                .spec
                .active_deadline_seconds
                .filter(|s| (1..=MAX_ACTIVE_DEADLINE_SECONDS).contains(s))
                .map(|s| s as u32),
            preemption_policy: match w.spec.preemption_policy.as_deref() {
                None | Some("") | Some("PreemptLowerPriority") => {
                    PreemptionPolicy::PreemptLowerPriority
                }
                Some("Never") => PreemptionPolicy::Never,
                Some(other) => {
                    return Err(ctx(ModelError::invalid(format!(
                        "spec.preemptionPolicy: unsupported value {other:?} (expected Never or PreemptLowerPriority)"
                    ))));
                }
            },
            created_ms,
            started_ms: match w.status.start_time.as_deref() {
                Some(t) => match parse_timestamp_ms(Some(t)) {
                    0 => created_ms,
                    ms => ms,
                },
                None => created_ms,
            },
            nominated_node: w
                .status
                .nominated_node_name
                .as_deref()
                .filter(|n| !n.is_empty())
                .map(Arc::from),
            requests,
            non_zero_milli_cpu,
            non_zero_memory,
            constraints: Arc::new(Constraints {
                node_selector: w.spec.node_selector.clone(),
                required_affinity,
                preferred_affinity,
                pod_affinity,
                tolerations,
                host_ports: host_ports(w),
                resource_claims: super::pod_claims::pod_claims(
                    &w.spec.resource_claims,
                    &w.status.resource_claim_statuses,
                )
                .map_err(ctx)?,
                volumes: pod_volumes(name, &w.spec.volumes).map_err(ctx)?,
                spread,
                extended: super::extended::extended_containers(w).map_err(ctx)?,
            }),
            images: images(w),
            labels: Arc::new(w.metadata.labels.clone()),
            annotations: w
                .metadata
                .annotations
                .iter()
                // Decoding already dropped the others; a wire built in code may not have.
                .filter(|(k, _)| is_kept_annotation(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            group,
        })
    }

    /// Whether the pod occupies its node's resources (bound and not terminal).
    pub fn occupies_node(&self) -> bool {
        self.node_name.is_some() && !self.phase.is_terminal()
    }

    /// Whether `self` and `other` are equal in every field but those
    /// `ignoring` names. Both pods are taken apart field by field, with no
    /// `..`: a field added to `PodInfo` stops this from compiling until it
    /// is placed on one side or the other, so no field is skipped unseen.
    pub fn same_except(&self, other: &PodInfo, ignoring: Ignoring) -> bool {
        let PodInfo {
            key,
            uid,
            scheduler_name,
            node_name,
            phase,
            deleting,
            scheduling_gates,
            priority,
            priority_class_name,
            preemption_policy,
            active_deadline_seconds,
            created_ms,
            // A start time is both identity (a timestamp) and status: every
            // kind of comparison passes over it.
            started_ms: _,
            nominated_node,
            requests,
            non_zero_milli_cpu,
            non_zero_memory,
            constraints,
            images,
            labels,
            annotations,
            group,
        } = self;
        // What one kind ignores the other compares.
        let compared = match ignoring {
            Ignoring::Identity => {
                key.namespace == other.key.namespace
                    && phase == &other.phase
                    && nominated_node == &other.nominated_node
                    && node_name == &other.node_name
            }
            Ignoring::Status => {
                key == &other.key && uid == &other.uid && created_ms == &other.created_ms
            }
        };
        compared
            && scheduler_name == &other.scheduler_name
            && deleting == &other.deleting
            && scheduling_gates == &other.scheduling_gates
            && priority == &other.priority
            && priority_class_name == &other.priority_class_name
            && preemption_policy == &other.preemption_policy
            && active_deadline_seconds == &other.active_deadline_seconds
            && requests == &other.requests
            && non_zero_milli_cpu == &other.non_zero_milli_cpu
            && non_zero_memory == &other.non_zero_memory
            // Pointer first: pooled sets are shared, and equal ones mostly
            // the same allocation.
            && (Arc::ptr_eq(constraints, &other.constraints)
                || match ignoring {
                    Ignoring::Identity => constraints.same_but_generated_claims(&other.constraints),
                    Ignoring::Status => constraints == &other.constraints,
                })
            && images == &other.images
            && labels == &other.labels
            && annotations == &other.annotations
            && group == &other.group
    }
}

/// Which fields `PodInfo::same_except` passes over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ignoring {
    /// The pod's identity: name, uid, creation and start times, and the
    /// names of the claims generated for it from templates (two replicas
    /// of one template compare equal; the namespace still counts).
    Identity,
    /// What moves as one pod is scheduled and runs: its binding
    /// (`spec.nodeName`), phase, start time and nominated node (the same pod
    /// seen again compares equal; callers that care where it runs compare
    /// that themselves).
    Status,
}

/// Parses an RFC 3339 timestamp; an absent or unparsable one sorts first (0).
/// For objects read as raw JSON (group definitions); pods and nodes carry
/// theirs parsed already (`ObjectMetaWire`).
pub fn parse_timestamp_ms(ts: Option<&str>) -> i64 {
    ts.and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.timestamp_millis())
        .unwrap_or(0)
}

/// Container images, init containers first, each normalized.
fn images(w: &PodWire) -> Arc<[Arc<str>]> {
    w.spec
        .init_containers
        .iter()
        .chain(&w.spec.containers)
        .filter_map(|c| c.image.as_deref())
        .map(|image| Arc::from(normalized_image_name(image).as_str()))
        .collect()
}

/// A reference with neither tag nor digest gets `:latest`, as the runtime
/// pulls it: a `:` after the last `/` is a tag (or a digest's `sha256:`).
pub fn normalized_image_name(image: &str) -> String {
    let last_colon = image.rfind(':');
    let last_slash = image.rfind('/');
    match (last_colon, last_slash) {
        (Some(c), Some(s)) if c > s => image.to_string(),
        (Some(_), None) => image.to_string(),
        _ => format!("{image}:latest"),
    }
}

fn host_ports(w: &PodWire) -> Vec<HostPort> {
    w.spec
        .containers
        .iter()
        .chain(&w.spec.init_containers)
        .flat_map(|c| &c.ports)
        .filter_map(|p| {
            let port = p.host_port.filter(|hp| *hp > 0)?;
            Some(HostPort {
                port,
                protocol: Arc::from(p.protocol.as_deref().unwrap_or("TCP")),
                ip: Arc::from(p.host_ip.as_deref().unwrap_or("")),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// No namespace and `""` are both `default`, for every caller of the
    /// one rule.
    #[test]
    fn a_missing_or_empty_namespace_is_default() {
        assert_eq!(namespace_or_default(None), "default");
        assert_eq!(namespace_or_default(Some("")), "default");
        assert_eq!(namespace_or_default(Some("ml")), "ml");
        assert_eq!(
            PodKey::of_meta(Some(""), Some("a")),
            PodKey::new("default", "a")
        );
        assert_eq!(PodKey::of_meta(None, None), PodKey::new("default", ""));
    }

    /// Two members of one gang, decoded apart, hold one copy of every
    /// string they repeat once shared, and their own names and uids.
    #[test]
    fn sharing_leaves_one_copy_of_what_pods_repeat() {
        use crate::driver::fixtures::{group_key, member};
        let mut pools = super::super::shared::PodPools::default();
        let mut decoded = ["a", "b"].map(|name| {
            let mut p = member(name, &group_key("train"), 100, 1);
            p.node_name = Some(Arc::from("n1"));
            p.images = Arc::from([Arc::from("busybox:latest")]);
            Arc::make_mut(&mut p.labels).insert("app".into(), "train".into());
            p
        });
        let [a, b] = &mut decoded;
        assert!(!Arc::ptr_eq(&a.key.namespace, &b.key.namespace));
        a.share_with(&mut pools);
        b.share_with(&mut pools);
        let group = |p: &PodInfo| p.group.key().cloned().unwrap();
        let (ga, gb) = (group(a), group(b));
        assert!(Arc::ptr_eq(&a.key.namespace, &b.key.namespace));
        assert!(Arc::ptr_eq(&a.scheduler_name, &b.scheduler_name));
        assert!(Arc::ptr_eq(
            a.node_name.as_ref().unwrap(),
            b.node_name.as_ref().unwrap()
        ));
        assert!(Arc::ptr_eq(&a.images, &b.images), "one image list");
        assert!(Arc::ptr_eq(&ga.definition.name, &gb.definition.name));
        assert!(Arc::ptr_eq(
            &ga.definition.namespace,
            &gb.definition.namespace
        ));
        assert!(Arc::ptr_eq(&a.labels, &b.labels));
        assert_ne!(a.key.name, b.key.name);
        assert_ne!(a.uid, b.uid);
    }

    fn pod(spec: serde_json::Value) -> PodInfo {
        let v = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec});
        PodInfo::from_json(&serde_json::to_vec(&v).unwrap()).unwrap()
    }

    #[test]
    fn sums_containers_and_maxes_init() {
        let p = pod(json!({
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                {"name": "b", "resources": {"requests": {"cpu": "500m"}}}
            ],
            "initContainers": [
                {"name": "i", "resources": {"requests": {"cpu": "3", "memory": "100Mi"}}}
            ],
            "overhead": {"cpu": "100m"}
        }));
        assert_eq!(p.requests.milli_cpu, 3100);
        assert_eq!(p.requests.memory, 1 << 30);
        assert_eq!(p.requests.pods, 1);
        assert_eq!(p.non_zero_memory, (1 << 30) + DEFAULT_MEMORY_REQUEST);
    }

    #[test]
    fn sidecars_add_to_steady_state() {
        let p = pod(json!({
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}],
            "initContainers": [
                {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
                {"name": "init", "resources": {"requests": {"cpu": "1"}}}
            ]
        }));
        // steady state 1 + 0.5; init peak 1 + 0.5 (sidecar started before it)
        assert_eq!(p.requests.milli_cpu, 1500);
    }

    #[test]
    fn limits_default_requests_and_zero_requests_score_with_defaults() {
        let p = pod(json!({"containers": [
            {"name": "a", "resources": {"limits": {"cpu": "2", "nvidia.com/gpu": "1"}}},
            {"name": "b"}
        ]}));
        assert_eq!(p.requests.milli_cpu, 2000);
        assert_eq!(p.requests.get("nvidia.com/gpu"), 1);
        assert_eq!(p.non_zero_milli_cpu, 2000 + DEFAULT_MILLI_CPU_REQUEST);
        assert_eq!(p.non_zero_memory, 2 * DEFAULT_MEMORY_REQUEST);
    }

    #[test]
    fn reads_scheduling_fields() {
        let p = pod(json!({
            "schedulerName": "muster",
            "priority": 100,
            "nodeSelector": {"zone": "a"},
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "a", "ports": [{"containerPort": 80, "hostPort": 8080}]}],
            "affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]},
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 5, "preference": {"matchExpressions": [{"key": "ssd", "operator": "Exists"}]}}]
            }}
        }));
        assert_eq!(&*p.scheduler_name, "muster");
        assert_eq!(p.priority, 100);
        assert_eq!(p.constraints.tolerations.len(), 1);
        assert_eq!(p.constraints.host_ports[0].port, 8080);
        assert_eq!(&*p.constraints.host_ports[0].protocol, "TCP");
        assert!(p.constraints.required_affinity.is_some());
        assert_eq!(p.constraints.preferred_affinity[0].weight, 5);
    }

    #[test]
    fn image_names_are_normalized() {
        for (given, wanted) in [
            ("busybox", "busybox:latest"),
            ("busybox:1.36", "busybox:1.36"),
            ("registry:5000/team/app", "registry:5000/team/app:latest"),
            ("registry:5000/team/app:v2", "registry:5000/team/app:v2"),
            ("gcr.io/x/app@sha256:abc", "gcr.io/x/app@sha256:abc"),
        ] {
            assert_eq!(normalized_image_name(given), wanted, "{given}");
        }
        let p = pod(json!({"initContainers": [{"name": "i", "image": "init"}],
                            "containers": [{"name": "a", "image": "app:v1"}, {"name": "b"}]}));
        let images: Vec<&str> = p.images.iter().map(|i| &**i).collect();
        assert_eq!(images, ["init:latest", "app:v1"]);
    }

    #[test]
    fn preferred_weight_outside_1_to_100_is_refused() {
        for weight in [0, 101, i32::MAX] {
            let v = json!({"metadata": {"name": "p", "namespace": "ns"},
                "spec": {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": weight, "preference": {"matchExpressions": [{"key": "ssd", "operator": "Exists"}]}}]}}}});
            let err = PodInfo::from_json(&serde_json::to_vec(&v).unwrap())
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("[0].weight: must be in the range 1-100"),
                "{err}"
            );
        }
    }

    #[test]
    fn bad_quantity_is_a_precise_error() {
        let v = json!({"metadata": {"name": "p", "namespace": "ns"},
            "spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "lots"}}}]}});
        let err = PodInfo::from_json(&serde_json::to_vec(&v).unwrap())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("ns/p")
                && err.contains("spec.containers[0].resources.requests.cpu")
                && err.contains("lots"),
            "{err}"
        );
    }

    fn refusal(spec: serde_json::Value) -> String {
        let v = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec});
        match PodInfo::from_json(&serde_json::to_vec(&v).unwrap()) {
            Ok(p) => panic!("accepted with requests {:?}", p.requests),
            Err(e) => e.to_string(),
        }
    }

    /// Two containers of `7Ei` wrap a 64-bit sum.
    #[test]
    fn an_overflowing_sum_is_refused_naming_the_field() {
        let big = json!({"requests": {"memory": "7Ei"}});
        let err = refusal(json!({"containers": [
            {"name": "a", "resources": big}, {"name": "b", "resources": big}]}));
        assert_eq!(
            err,
            "pod ns/p: spec.containers[1].resources.requests.memory: sum overflows"
        );
        let err = refusal(json!({"containers": [{"name": "a", "resources": big}],
            "overhead": {"memory": "7Ei"}}));
        assert_eq!(err, "pod ns/p: spec.overhead.memory: sum overflows");
        let err = refusal(json!({"containers": [{"name": "a", "resources": big}],
            "initContainers": [{"name": "s", "restartPolicy": "Always", "resources": big}]}));
        assert_eq!(
            err,
            "pod ns/p: spec.initContainers[0].resources.requests.memory: sum overflows"
        );
        let err = refusal(json!({"containers": [
            {"name": "a", "resources": {"requests": {"example.com/x": "7E"}}},
            {"name": "b", "resources": {"requests": {"example.com/x": "7E"}}}]}));
        assert_eq!(
            err,
            "pod ns/p: spec.containers[1].resources.requests.example.com/x: sum overflows"
        );
    }

    /// A negative request is refused, whoever let it through.
    #[test]
    fn a_negative_request_is_refused_naming_the_field() {
        let err = refusal(
            json!({"containers": [{"name": "a", "resources": {"requests": {"cpu": "-1"}}}]}),
        );
        assert_eq!(
            err,
            "pod ns/p: spec.containers[0].resources.requests.cpu: must not be negative, got \"-1\""
        );
        let err = refusal(
            json!({"containers": [{"name": "a", "resources": {"limits": {"memory": "-1Gi"}}}]}),
        );
        assert_eq!(
            err,
            "pod ns/p: spec.containers[0].resources.limits.memory: must not be negative, got \"-1Gi\""
        );
        let err = refusal(json!({"containers": [], "overhead": {"cpu": "-100m"}}));
        assert!(
            err.contains("spec.overhead.cpu: must not be negative"),
            "{err}"
        );
        let err = refusal(json!({"containers": [], "resources": {"requests": {"memory": "-1"}}}));
        assert!(
            err.contains("spec.resources.requests.memory: must not be negative"),
            "{err}"
        );
    }

    /// A CPU quantity whose millicores do not fit 64 bits is refused, not clamped.
    #[test]
    fn a_cpu_request_beyond_64_bit_millicores_is_refused() {
        let err = refusal(
            json!({"containers": [{"name": "a", "resources": {"requests": {"cpu": "9223372036854775807"}}}]}),
        );
        assert!(
            err.contains("spec.containers[0].resources.requests.cpu"),
            "{err}"
        );
    }

    #[test]
    fn host_port_conflicts() {
        let hp = |port, proto: &str, ip: &str| HostPort {
            port,
            protocol: Arc::from(proto),
            ip: Arc::from(ip),
        };
        assert!(hp(80, "TCP", "").conflicts(&hp(80, "TCP", "10.0.0.1")));
        assert!(!hp(80, "TCP", "10.0.0.2").conflicts(&hp(80, "TCP", "10.0.0.1")));
        assert!(!hp(80, "UDP", "").conflicts(&hp(80, "TCP", "")));
        assert!(!hp(81, "TCP", "").conflicts(&hp(80, "TCP", "")));
    }
}
