//! The engine: a coordinator over parts that own their state — the cache,
//! the queue, the gang plugin (everything about a gang: definitions, the
//! pods waiting at Permit, timers), the intake (what the engine decides
//! about an object before scheduling it), the preemptions in progress, the
//! pods in PreBind, the outbox of API writes, the placement memos, and one
//! `Framework` per profile — and runs scheduling cycles over them.
//!
//! It is I/O-free and clock-injected: every entry point takes `now`, and the
//! engine never reads a clock. The daemon (or the deterministic driver) feeds
//! it `ClusterEvent`s — objects as the informers read them; every decision
//! about them (priority classes, Kueue groups, profiles without gang
//! scheduling, unreadable pods) is made here — calls
//! `schedule_one`/`run_until_idle` and `tick`, sleeps until `next_deadline`,
//! and performs the `Action`s it drains: every API write, the `Scheduled`
//! event included.

mod actions;
mod cheapest_victims;
mod cycle;
mod device_domains;
mod devices;
mod events;
mod explain;
mod gang_cycle;
mod inputs;
mod intake;
mod introspection;
mod joint_devices;
mod owners;
mod pod_memos;
mod prebind;
mod preempt;
mod preempt_devices;
mod preempt_gang;
mod preemptions;
mod priority;
pub mod provisioning;
mod reprieve;
mod reservations;
mod stats;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use actions::{
    Action, BELOW_MIN_COUNT, EventType, MIN_COUNT_MET, ObjectRef, RESERVATION_ENDED, RESERVED,
    RESERVED_CONDITION, SCHEDULED_REASON, scheduled_message,
};
pub use explain::Target as ExplainTarget;
pub use introspection::{AttemptCounts, Sample};
pub use prebind::PRE_BIND_FAILED;
pub use stats::{DeviceStats, DurationSummary, GroupCounts, PendingPods, ReservationStats, Stats};

use crate::cache::{Cache, SelectingKind};
use crate::dialects::owners::OwnerChange;
use crate::framework::QueueingEvent;
use crate::framework::placement::Framework;
use crate::gang::{DialectTimeouts, GangArgs, GangScheduling};
use crate::model::{DefinitionKey, GroupDef, LabelSelector, NodeInfo, PodInfo, PodKey};
use crate::queue::{QueueConfig, QueueLocation, SchedulingQueue};

use actions::Outbox;

/// One scheduler name this engine serves, with its plugins and gang arguments.
#[derive(Clone)]
pub struct ProfileConfig {
    pub scheduler_name: Arc<str>,
    pub framework: Framework,
    /// The GangScheduling plugin's arguments (`permitWaitingTimeSeconds`,
    /// `planWholeGangs`, topology, ...); `None` when the profile does not
    /// gang-schedule: its pods' group references are ignored and every pod
    /// is scheduled on its own.
    pub gang: Option<GangArgs>,
    /// DefaultPreemption's arguments; `None` when it is disabled.
    pub preemption: Option<crate::preemption::PreemptionArgs>,
}

impl ProfileConfig {
    /// A profile with the default gang arguments (60 s permit wait, 5 s
    /// group backoff, one timeout for every dialect).
    pub fn new(scheduler_name: &str, framework: Framework) -> Self {
        ProfileConfig {
            scheduler_name: Arc::from(scheduler_name),
            framework,
            gang: Some(GangArgs {
                dialect_timeouts: DialectTimeouts::UNIFORM,
                ..GangArgs::default()
            }),
            preemption: Some(crate::preemption::PreemptionArgs::default()),
        }
    }
}

#[derive(Clone)]
pub struct EngineConfig {
    pub profiles: Vec<ProfileConfig>,
    /// `podInitialBackoffSeconds` (1 s).
    pub pod_initial_backoff: Duration,
    /// `podMaxBackoffSeconds` (10 s).
    pub pod_max_backoff: Duration,
    /// `podMaxInUnschedulablePodsDuration` (5 min).
    pub max_in_unschedulable: Duration,
    /// Keep every permit-wait and quorum-to-bound duration for `drain_samples`
    /// (the daemon's histograms); off for the deterministic driver.
    pub record_samples: bool,
}

impl EngineConfig {
    /// Scheduler names of the profiles without gang scheduling: their
    /// members are ordinary pods.
    pub fn gang_disabled(&self) -> HashSet<Arc<str>> {
        self.profiles
            .iter()
            .filter(|p| p.gang.is_none())
            .map(|p| p.scheduler_name.clone())
            .collect()
    }

    /// The given profiles with kube-scheduler's default queue timings.
    pub fn new(profiles: Vec<ProfileConfig>) -> Self {
        let q = QueueConfig::default();
        EngineConfig {
            profiles,
            pod_initial_backoff: q.initial_backoff,
            pod_max_backoff: q.max_backoff,
            max_in_unschedulable: q.max_in_unschedulable,
            record_samples: false,
        }
    }
}

/// What the informers (and the binder) report, as they report it: pods and
/// definitions unresolved (the engine resolves priority classes, drops group
/// references for profiles without gang scheduling, and synthesizes Kueue
/// definitions from their members).
#[derive(Debug, Clone)]
pub enum ClusterEvent {
    NodeUpserted(Arc<NodeInfo>),
    NodeDeleted(Arc<str>),
    PodUpserted(Arc<PodInfo>),
    PodDeleted(PodKey),
    /// A pod whose spec cannot be read: whatever it was before, it can no
    /// longer be scheduled as it stands (as if deleted); a pod of ours is
    /// told why, once per distinct error.
    PodInvalid {
        pod: PodKey,
        uid: Arc<str>,
        scheduler_name: Option<Arc<str>>,
        error: String,
    },
    /// A group definition as its informer reads it; a `priorityClassName`
    /// is resolved by the engine.
    GroupDefUpserted(GroupDef),
    GroupDefDeleted(DefinitionKey),
    /// A PriorityClass appeared or changed: pods arriving with priority 0
    /// get its value, definitions naming it are re-resolved.
    PriorityClassUpserted {
        name: Arc<str>,
        value: i32,
        global_default: bool,
    },
    PriorityClassDeleted(Arc<str>),
    /// A namespace appeared or its labels changed (what inter-pod
    /// affinity's `namespaceSelector` reads).
    NamespaceUpserted {
        name: Arc<str>,
        labels: crate::cache::Labels,
    },
    NamespaceDeleted(Arc<str>),
    /// The outcome of an `Action::Bind` (`uid` and `node` as in the action: a
    /// result for an earlier pod of the same name changes no scheduling
    /// state). A success emits the pod's `Action::Scheduled`.
    BindFinished {
        pod: PodKey,
        uid: Arc<str>,
        node: Arc<str>,
        result: Result<(), String>,
    },
    /// A storage object (claim, volume, class, CSINode, CSIDriver) observed.
    Volume(crate::cache::VolumeChange),
    /// The outcome of an `Action::PreBindVolumes` (same `pod`, `uid`,
    /// `node`): on success the pod keeps waiting for its claims to be Bound.
    VolumesPreBound {
        pod: PodKey,
        uid: Arc<str>,
        node: Arc<str>,
        result: Result<(), String>,
    },
    /// A Service's or controller's selector (PodTopologySpread's default
    /// constraints); `None` when absent or unreadable.
    WorkloadSelectorUpserted {
        kind: SelectingKind,
        namespace: Arc<str>,
        name: Arc<str>,
        selector: Option<LabelSelector>,
    },
    WorkloadSelectorDeleted {
        kind: SelectingKind,
        namespace: Arc<str>,
        name: Arc<str>,
    },
    /// A workload owner (Job, JobSet, ...) observed or deleted: it defines
    /// its gang, and its pods may be grouped by it (top-owner grouping).
    Owner(OwnerChange),
    /// A ResourceSlice, DeviceClass or ResourceClaim observed or deleted
    /// (DynamicResources').
    Dra(crate::cache::DraChange),
    /// A Kueue `Topology` or Volcano `HyperNode` observed or deleted: the
    /// hierarchies gangs are placed over.
    Topology(crate::model::topology::TopologyChange),
    /// A PodDisruptionBudget observed or deleted: what preemption counts
    /// when it chooses victims.
    Budget(crate::model::disruption::BudgetChange),
    /// ProvisioningRequests: served or not, their states (`provisioning`).
    Provisioning(provisioning::ProvisioningChange),
}

/// Where a pending pod is (invariant I4: exactly one place at every moment).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PodLocation {
    Gated,
    Active,
    Backoff,
    Unschedulable,
    InCycle,
    WaitingAtPermit,
    Binding,
}

impl From<QueueLocation> for PodLocation {
    fn from(l: QueueLocation) -> Self {
        match l {
            QueueLocation::Gated => PodLocation::Gated,
            QueueLocation::Active => PodLocation::Active,
            QueueLocation::Backoff => PodLocation::Backoff,
            QueueLocation::Unschedulable => PodLocation::Unschedulable,
        }
    }
}

/// A profile the engine serves: its framework and sampling position (the
/// configuration's `config::Profile` is what it was built from).
struct ServedProfile {
    framework: Framework,
    /// Rotating start index for node sampling, carried between cycles.
    next_start: usize,
    /// DefaultPreemption's arguments; `None` when it is disabled.
    preemption: Option<crate::preemption::PreemptionArgs>,
}

pub struct Engine {
    profiles: HashMap<Arc<str>, ServedProfile>,
    cache: Cache,
    queue: SchedulingQueue,
    gang: GangScheduling,
    in_cycle: Option<PodKey>,
    outbox: Outbox,
    stats: Stats,
    /// Duration samples for histograms; `None` unless `record_samples` is set.
    samples: Option<std::collections::VecDeque<introspection::Sample>>,
    /// Priority classes, owners, Kueue synthesis, profiles' gang modes.
    intake: intake::Intake,
    /// Pods past Permit waiting for their claims to be bound (PreBind).
    pre_binding: prebind::PreBindings,
    /// Nominations, victims in flight, the candidate search's offset.
    preemptions: preemptions::Preemptions,
    /// The per-node memo tables of gang plans, kept between cycles so a
    /// cycle does not allocate (and zero) tables sized by the cluster; each
    /// cycle starts them empty (`gang_cycle::Batches::take_fresh`).
    batches: gang_cycle::Batches,
    /// The per-node memos of pods placed one cycle each, kept across
    /// cycles while the cluster outside each node stays the same.
    pod_memos: pod_memos::PodMemos,
    /// Gang plans give each member its devices greedily, without the joint
    /// search across members nor device domains: the baseline tests
    /// compare the search with.
    greedy_devices: bool,
    /// The nodes device domains reach (`device_domains`).
    device_reach: device_domains::DeviceReach,
    /// Each gang's last release without binding, for `explain`.
    releases: explain::Releases,
    /// Room held for gangs that kept failing, and backfill
    /// (`reservations`).
    reservations: reservations::Reservations,
    /// ProvisioningRequests of gangs short of capacity (`provisioning`).
    provisioning: provisioning::Provisioning,
}

impl Engine {
    pub fn new(cfg: EngineConfig) -> Self {
        let served: Vec<Arc<str>> = cfg
            .profiles
            .iter()
            .map(|p| p.scheduler_name.clone())
            .collect();
        let intake = intake::Intake::new(&cfg);
        let gang = GangScheduling::for_profiles(
            cfg.profiles
                .iter()
                .map(|p| (p.scheduler_name.clone(), p.gang.as_ref())),
        );
        let profiles = cfg
            .profiles
            .into_iter()
            .map(|p| {
                let profile = ServedProfile {
                    framework: p.framework,
                    next_start: 0,
                    preemption: p.preemption,
                };
                (p.scheduler_name, profile)
            })
            .collect();
        Engine {
            profiles,
            cache: Cache::new(served),
            queue: SchedulingQueue::new(QueueConfig {
                initial_backoff: cfg.pod_initial_backoff,
                max_backoff: cfg.pod_max_backoff,
                max_in_unschedulable: cfg.max_in_unschedulable,
            }),
            gang,
            in_cycle: None,
            outbox: Outbox::default(),
            stats: Stats::default(),
            samples: cfg.record_samples.then(std::collections::VecDeque::new),
            intake,
            pre_binding: prebind::PreBindings::default(),
            preemptions: preemptions::Preemptions::default(),
            batches: gang_cycle::Batches::default(),
            pod_memos: pod_memos::PodMemos::default(),
            greedy_devices: false,
            device_reach: device_domains::DeviceReach::default(),
            releases: explain::Releases::default(),
            provisioning: provisioning::Provisioning::default(),
            reservations: reservations::Reservations::default(),
        }
    }

    /// Applies one informer or binder report.
    pub fn on_event(&mut self, event: ClusterEvent, now: Instant) {
        match event {
            ClusterEvent::NodeUpserted(node) => self.on_node_upserted(node, now),
            ClusterEvent::NodeDeleted(name) => self.on_node_deleted(&name, now),
            ClusterEvent::PodUpserted(pod) => self.on_pod_upserted(pod, now),
            ClusterEvent::PodDeleted(key) => self.on_pod_deleted(&key, now),
            ClusterEvent::PodInvalid {
                pod,
                uid,
                scheduler_name,
                error,
            } => self.on_pod_invalid(pod, uid, scheduler_name, error, now),
            ClusterEvent::GroupDefUpserted(def) => self.on_def_observed(def, now),
            ClusterEvent::GroupDefDeleted(key) => self.on_def_deleted(&key, now),
            ClusterEvent::PriorityClassUpserted {
                name,
                value,
                global_default,
            } => self.on_priority_class_upserted(name, value, global_default, now),
            ClusterEvent::PriorityClassDeleted(name) => self.on_priority_class_deleted(&name, now),
            ClusterEvent::NamespaceUpserted { name, labels } => {
                self.on_namespace_upserted(&name, labels, now)
            }
            ClusterEvent::NamespaceDeleted(name) => self.on_namespace_deleted(&name, now),
            ClusterEvent::BindFinished {
                pod,
                uid,
                node,
                result,
            } => self.on_bind_finished(&pod, &uid, &node, result, now),
            ClusterEvent::Volume(change) => self.on_volume_change(change, now),
            ClusterEvent::VolumesPreBound {
                pod, uid, result, ..
            } => self.on_volumes_pre_bound(&pod, &uid, result, now),
            ClusterEvent::WorkloadSelectorUpserted {
                kind,
                namespace,
                name,
                selector,
            } => {
                // As in kube-scheduler, a selector change requeues no pod: it
                // changes the default constraints of later cycles only.
                let facts = &mut self.cache.facts_mut().workloads;
                facts.upsert(kind, &namespace, &name, selector);
            }
            ClusterEvent::WorkloadSelectorDeleted {
                kind,
                namespace,
                name,
            } => {
                self.cache
                    .facts_mut()
                    .workloads
                    .remove(kind, &namespace, &name);
            }
            ClusterEvent::Owner(change) => self.on_owner_changed(change, now),
            ClusterEvent::Budget(change) => self.cache.facts_mut().budgets.apply(change),
            ClusterEvent::Provisioning(change) => self.on_provisioning(change, now),
            ClusterEvent::Dra(change) => self.on_dra_change(change, now),
            ClusterEvent::Topology(change) => {
                // New domains may hold a gang that fitted none: retry them.
                if self.gang.topology_changed(change) {
                    self.flush_unschedulable(QueueingEvent::Gang, now);
                }
            }
        }
        self.apply_gang_outcomes(now);
    }

    /// Timers: permit timeouts, backoff → active, the periodic unschedulable
    /// flush, assumed-pod expiry.
    pub fn tick(&mut self, now: Instant) {
        self.gang.expire(now, &self.cache);
        self.expire_pre_bindings(now);
        self.expire_reservations(now);
        self.apply_gang_outcomes(now);
        let (gang, cache) = (&self.gang, &self.cache);
        let gate = |p: &PodInfo| gang.pre_enqueue(p, cache);
        self.queue.flush_backoff(now, gate);
        self.queue.flush_stale_unschedulable(now, gate);
    }

    /// Runs `tick` and then cycles until no pod is ready; returns the number of
    /// cycles run.
    pub fn run_until_idle(&mut self, now: Instant) -> usize {
        self.tick(now);
        let mut cycles = 0;
        while self.schedule_one(now).is_some() {
            cycles += 1;
        }
        cycles
    }

    /// When `tick` next has something to do.
    pub fn next_deadline(&self) -> Option<Instant> {
        [
            self.queue.next_deadline(),
            self.gang.next_deadline(),
            self.pre_binding.next_deadline(),
            self.reservations.next_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The API writes accumulated since the last call.
    pub fn drain_actions(&mut self) -> Vec<Action> {
        self.refresh_gate_messages();
        self.outbox.take()
    }

    /// Where a pending pod this engine schedules is; `None` when it is not
    /// pending here (bound, terminal, deleted, or another scheduler's).
    pub fn location(&self, key: &PodKey) -> Option<PodLocation> {
        self.locations(key).into_iter().next()
    }

    /// Every place the pod is recorded in; invariant I4 says at most one (and
    /// exactly one for a pending pod of ours).
    pub fn locations(&self, key: &PodKey) -> Vec<PodLocation> {
        let mut out = Vec::new();
        if let Some(l) = self.queue.location(key) {
            out.push(l.into());
        }
        let in_cycle = self.in_cycle.as_ref() == Some(key);
        if in_cycle {
            out.push(PodLocation::InCycle);
        }
        if self.gang.waiting().contains(key) {
            out.push(PodLocation::WaitingAtPermit);
        } else if self.cache.is_assumed(key) && !in_cycle {
            out.push(PodLocation::Binding);
        }
        out
    }

    /// Forgets the per-node memos (`framework::placement::Batch`) before
    /// each placement, in pod and gang cycles alike: the unmemoized pass,
    /// for tests that compare the two.
    #[cfg(any(test, feature = "testkit"))]
    pub fn forget_memos_each_cycle(&mut self) {
        self.pod_memos.forget_each_cycle();
        self.batches.forget_each_use();
    }

    /// Gang plans give members their devices greedily, one after another,
    /// as kube-scheduler does (no joint search, no device domains): the
    /// baseline the joint search must never do worse than.
    #[cfg(any(test, feature = "testkit"))]
    pub fn greedy_devices(&mut self) {
        self.greedy_devices = true;
    }

    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// An event's pod, with its UID from the cache (none for a pod the
    /// cache no longer holds).
    fn pod_ref(&self, key: &PodKey) -> ObjectRef {
        ObjectRef::Pod {
            key: key.clone(),
            uid: self.cache.pod(key).map(|p| p.info.uid.clone()),
        }
    }

    /// The node a preemption nominated the pod to, while the nomination
    /// holds.
    pub fn nominated_node(&self, key: &PodKey) -> Option<Arc<str>> {
        self.preemptions.nomination(key).map(|n| n.node.clone())
    }

    /// Pods past Permit waiting for their claims to be bound.
    pub fn pre_binding_count(&self) -> usize {
        self.pre_binding.len()
    }

    /// Whether the pod waits in PreBind for its claims.
    pub fn is_pre_binding(&self, key: &PodKey) -> bool {
        self.pre_binding.contains(key)
    }

    /// Scheduling cycles run for pods with resource claims (the daemon
    /// tells their durations apart by it).
    pub fn cycles_with_claims(&self) -> u64 {
        self.stats.devices.cycles
    }

    pub fn gang(&self) -> &GangScheduling {
        &self.gang
    }

    pub fn queue(&self) -> &SchedulingQueue {
        &self.queue
    }

    /// A snapshot of the counters and gauges.
    pub fn stats(&self, now: Instant) -> Stats {
        let mut s = self.stats.clone();
        let q = self.queue.counts();
        let assumed = self
            .cache
            .pods()
            .filter(|p| matches!(p.state, crate::cache::PodState::Assumed { .. }))
            .count();
        s.pending = PendingPods {
            gated: q.gated,
            active: q.active,
            backoff: q.backoff,
            unschedulable: q.unschedulable,
            waiting_at_permit: self.gang.waiting().len(),
            binding: assumed.saturating_sub(self.gang.waiting().len()),
        };
        let dra = &self.cache.facts().dra;
        let (slices, classes, claims) = dra.counts();
        s.devices = DeviceStats {
            allocated: dra.reserved,
            reserve_failures: dra.reserve_failures,
            searches: dra.searches().load(std::sync::atomic::Ordering::Relaxed),
            planned: dra.assumed_all().count(),
            in_use: dra.devices_in_use(),
            slices,
            classes,
            claims,
            cycles: s.devices.cycles,
            joint_searches: s.devices.joint_searches,
            joint_placements: s.devices.joint_placements,
        };
        s.groups.waiting = self.gang.waiting().groups().count();
        s.groups.denied = self.gang.denied_groups(now);
        s.groups.scheduled = self.outbox.scheduled_group_count();
        s.groups.unsatisfied = self.outbox.unsatisfied_count();
        s.reservations = ReservationStats {
            active: self.reservations.len(),
            reserved_nodes: self.reservations.reserved_nodes(),
            backfilled: self.reservations.backfilled,
        };
        for (state, groups) in [
            ("waiting", self.gang.waiting().groups().collect::<Vec<_>>()),
            ("backing_off", self.gang.denied_group_keys(now).collect()),
            ("scheduled", self.outbox.scheduled_groups().collect()),
            ("unsatisfied", self.outbox.unsatisfied_groups().collect()),
        ] {
            for g in groups {
                let n = s
                    .groups
                    .by_kind
                    .entry((state, g.definition.source.kind_name()))
                    .or_default();
                *n = n.saturating_add(1);
            }
        }
        s
    }
}

#[cfg(test)]
mod tests;
