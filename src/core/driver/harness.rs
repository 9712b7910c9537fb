//! `Harness`: holds the "cluster" (nodes, pods, group definitions; pods and
//! definitions as an informer reports them, priority classes unresolved and
//! Kueue groups without a definition object), feeds
//! events to the engine, performs its `Bind` actions after a configurable
//! latency (optionally failing them), confirms successful binds with a pod
//! update, records every decision with its time, and advances a fake clock
//! from deadline to deadline.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::{Action, ClusterEvent, Engine, EngineConfig, ProfileConfig};
use crate::framework::placement::Framework;
use crate::model::{DefinitionKey, GroupDef, GroupKey, NodeInfo, PodInfo, PodKey, PodPhase};

use super::fixtures::SCHEDULER;

/// One successful binding, as the fake API server recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindRecord {
    pub pod: PodKey,
    pub node: Arc<str>,
    pub at: Duration,
}

#[derive(Debug, Clone)]
pub(super) struct InFlight {
    pub(super) due: Instant,
    pub(super) pod: PodKey,
    pub(super) uid: Arc<str>,
    pub(super) node: Arc<str>,
    /// The binding's claim writes, made first.
    pub(super) claims: Vec<crate::dra::ClaimReservation>,
}

pub struct Harness {
    pub engine: Engine,
    start: Instant,
    now: Instant,
    pub(super) nodes: BTreeMap<Arc<str>, Arc<NodeInfo>>,
    pub(super) pods: BTreeMap<PodKey, Arc<PodInfo>>,
    pub(super) defs: BTreeMap<DefinitionKey, GroupDef>,
    pub(super) in_flight: Vec<InFlight>,
    /// Time from a `Bind` action to its result.
    pub bind_latency: Duration,
    /// Whether a successful bind is followed by the informer's pod update
    /// (turn off to exercise the assumed-pod TTL).
    pub confirm_binds: bool,
    fail_next: usize,
    fail_pods: HashSet<PodKey>,
    /// Every successful binding in order.
    pub binds: Vec<BindRecord>,
    /// Every drained action with the time it was drained.
    pub actions: Vec<(Duration, Action)>,
    /// Invariant I1 violations seen when actions were drained.
    pub(super) i1_violations: Vec<String>,
    /// Invariant I5 (required anti-affinity) violations seen at binding.
    /// Invariant I5 (topology spread) violations seen when actions were drained.
    pub(super) i5_violations: Vec<String>,
    /// Profiles that do not gang-schedule (their members are plain pods).
    pub(super) gang_disabled: HashSet<Arc<str>>,
    /// Preempted pods: marked terminating at once, deleted once their
    /// termination grace has passed.
    evictions: Vec<Eviction>,
    /// How long a preempted pod takes to terminate (0: deleted at once).
    pub termination_grace: Duration,
    /// Status writes of `nominatedNodeName` to apply (and report back as
    /// the informer would).
    nominations: Vec<(PodKey, Arc<str>, Option<Arc<str>>)>,
    /// Every victim the engine asked to delete, in order.
    pub preempted: Vec<PodKey>,
    /// ResourceClaims as the API server and the resourceclaim controller
    /// keep them.
    pub(super) dra: super::dra_cluster::DraCluster,
}

#[derive(Debug, Clone)]
struct Eviction {
    due: Instant,
    pod: PodKey,
    uid: Arc<str>,
    marked: bool,
}

/// The wall clock (Unix ms) at the harness's start: pods' declared ends
/// (`started_ms` + `activeDeadlineSeconds`) are read against it.
pub const WALL_START_MS: i64 = 1_700_000_000_000;

impl Harness {
    /// An engine with one profile (`fixtures::SCHEDULER`, kube-scheduler's
    /// default plugins) and default timings.
    pub fn new() -> Self {
        Self::with_config(EngineConfig::new(vec![ProfileConfig::new(
            SCHEDULER,
            Framework::default(),
        )]))
    }

    pub fn with_config(cfg: EngineConfig) -> Self {
        // The one place a real clock is read: the fake clock needs an origin.
        let start = Instant::now();
        let gang_disabled = cfg.gang_disabled();
        Harness {
            engine: Engine::new(cfg),
            start,
            now: start,
            nodes: BTreeMap::new(),
            pods: BTreeMap::new(),
            defs: BTreeMap::new(),
            in_flight: Vec::new(),
            bind_latency: Duration::ZERO,
            confirm_binds: true,
            fail_next: 0,
            fail_pods: HashSet::new(),
            binds: Vec::new(),
            actions: Vec::new(),
            i1_violations: Vec::new(),
            i5_violations: Vec::new(),
            gang_disabled,
            evictions: Vec::new(),
            termination_grace: Duration::ZERO,
            nominations: Vec::new(),
            preempted: Vec::new(),
            dra: Default::default(),
        }
    }

    pub fn now(&self) -> Instant {
        self.now
    }

    /// Time since the harness started.
    pub fn elapsed(&self) -> Duration {
        self.now - self.start
    }

    // ---- the cluster ---------------------------------------------------------

    pub fn add_node(&mut self, node: NodeInfo) {
        let node = Arc::new(node);
        self.nodes.insert(node.name.clone(), node.clone());
        self.send(ClusterEvent::NodeUpserted(node));
    }

    /// A PodDisruptionBudget observed (its status as given).
    pub fn put_budget(&mut self, budget: crate::model::disruption::DisruptionBudget) {
        self.send(ClusterEvent::Budget(
            crate::model::disruption::BudgetChange::Upserted(budget),
        ));
    }

    pub fn delete_node(&mut self, name: &str) {
        if let Some(node) = self.nodes.remove(name) {
            self.send(ClusterEvent::NodeDeleted(node.name.clone()));
        }
    }

    /// Adds or updates a pod (as the informer would report it).
    pub fn put_pod(&mut self, pod: PodInfo) {
        let pod = Arc::new(pod);
        self.pods.insert(pod.key.clone(), pod.clone());
        self.send(ClusterEvent::PodUpserted(pod));
    }

    pub fn delete_pod(&mut self, key: &PodKey) {
        if let Some(p) = self.pods.remove(key) {
            self.send(ClusterEvent::PodDeleted(key.clone()));
            self.release_claims(&p.uid, None);
            self.delete_extended_claims(&p.uid);
        }
    }

    /// The pod ran to completion (or failed): it releases its node.
    pub fn finish_pod(&mut self, key: &PodKey, phase: PodPhase) {
        if let Some(p) = self.pods.get(key) {
            let mut p = (**p).clone();
            p.phase = phase;
            let uid = p.uid.clone();
            self.put_pod(p);
            if phase.is_terminal() {
                self.release_claims(&uid, None);
            }
        }
    }

    /// What a re-listing pod informer reports: every pod as the cluster has it.
    pub fn relist(&mut self) {
        let pods: Vec<Arc<PodInfo>> = self.pods.values().cloned().collect();
        for p in pods {
            self.send(ClusterEvent::PodUpserted(p));
        }
    }

    pub fn put_def(&mut self, def: GroupDef) {
        self.defs.insert(def.key.clone(), def.clone());
        self.send(ClusterEvent::GroupDefUpserted(def));
    }

    /// A Kueue `Topology` or Volcano `HyperNode` observed or deleted.
    pub fn put_topology(&mut self, change: crate::model::topology::TopologyChange) {
        self.send(ClusterEvent::Topology(change));
    }

    pub fn delete_def(&mut self, key: &DefinitionKey) {
        if self.defs.remove(key).is_some() {
            self.send(ClusterEvent::GroupDefDeleted(key.clone()));
        }
    }

    /// The informer can no longer read the pod: it leaves the cluster as the
    /// engine sees it.
    pub fn put_invalid_pod(&mut self, key: &PodKey, scheduler_name: Option<&str>, error: &str) {
        let uid = self
            .pods
            .remove(key)
            .map_or_else(|| Arc::from(""), |p| p.uid.clone());
        self.send(ClusterEvent::PodInvalid {
            pod: key.clone(),
            uid,
            scheduler_name: scheduler_name.map(Arc::from),
            error: error.into(),
        });
    }

    /// A PriorityClass appeared or changed.
    pub fn put_priority_class(&mut self, name: &str, value: i32, global_default: bool) {
        self.send(ClusterEvent::PriorityClassUpserted {
            name: Arc::from(name),
            value,
            global_default,
        });
    }

    pub fn delete_priority_class(&mut self, name: &str) {
        self.send(ClusterEvent::PriorityClassDeleted(Arc::from(name)));
    }

    /// A namespace appeared or its labels changed.
    pub fn put_namespace(&mut self, name: &str, labels: &[(&str, &str)]) {
        self.send(ClusterEvent::NamespaceUpserted {
            name: Arc::from(name),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        });
    }

    /// The next `n` bind calls fail.
    pub fn fail_next_binds(&mut self, n: usize) {
        self.fail_next += n;
    }

    /// Every bind call for this pod fails until cleared.
    pub fn fail_binds_of(&mut self, key: &PodKey, fail: bool) {
        if fail {
            self.fail_pods.insert(key.clone());
        } else {
            self.fail_pods.remove(key);
        }
    }

    pub fn pod(&self, key: &PodKey) -> Option<&Arc<PodInfo>> {
        self.pods.get(key)
    }

    pub fn pods(&self) -> impl Iterator<Item = &Arc<PodInfo>> {
        self.pods.values()
    }

    pub fn node_of(&self, key: &PodKey) -> Option<Arc<str>> {
        self.pods.get(key).and_then(|p| p.node_name.clone())
    }

    /// Members of `group` bound and not terminal.
    pub fn bound_members(&self, group: &GroupKey) -> usize {
        self.pods
            .values()
            .filter(|p| p.group.key() == Some(group) && p.occupies_node())
            .count()
    }

    /// Drained actions matching `f`.
    pub fn actions_where(&self, f: impl Fn(&Action) -> bool) -> Vec<&Action> {
        self.actions
            .iter()
            .map(|(_, a)| a)
            .filter(|a| f(a))
            .collect()
    }

    /// Number of events with this reason.
    /// Events with `reason` whose message contains `needle`.
    pub fn events_with(&self, reason: &str, needle: &str) -> usize {
        self.actions_where(|a| {
            matches!(a, Action::Event { reason: r, message, .. } if *r == reason && message.contains(needle))
        })
        .len()
    }

    pub fn events(&self, reason: &str) -> usize {
        self.actions_where(|a| matches!(a, Action::Event { reason: r, .. } if *r == reason))
            .len()
    }

    // ---- time ----------------------------------------------------------------

    /// Schedules everything that is ready now and performs the binds that are
    /// due, until nothing changes.
    pub fn settle(&mut self) {
        loop {
            let wall = WALL_START_MS.saturating_add(self.elapsed().as_millis() as i64);
            self.engine.set_wall_clock(self.now, wall);
            self.engine.run_until_idle(self.now);
            self.drain();
            let writes = self.apply_status_writes();
            let evicted = self.complete_due_evictions();
            if !self.complete_due_binds() && !writes && !evicted {
                break;
            }
        }
    }

    /// Advances the clock by `d`, stopping at every engine deadline and bind
    /// completion on the way, and settles at each stop.
    pub fn advance(&mut self, d: Duration) {
        let target = self.now + d;
        self.settle();
        loop {
            let next = [
                self.engine.next_deadline(),
                self.in_flight.iter().map(|b| b.due).min(),
                self.evictions.iter().map(|e| e.due).min(),
            ]
            .into_iter()
            .flatten()
            .min();
            match next {
                Some(t) if t <= target => {
                    self.now = self.now.max(t);
                    self.settle();
                }
                _ => break,
            }
        }
        self.now = target;
        self.settle();
    }

    /// Runs for `d` as a busy scheduler would: one cycle at a time, each
    /// costing `cycle_cost` of clock time, so a backlog of pending pods turns
    /// into waiting time for whatever is queued behind it. Timers and due
    /// binds are handled between cycles; when nothing is ready the clock
    /// jumps to the next deadline. Stops at `d` even with pods still ready
    /// (unlike `settle`, which would run them at no cost).
    pub fn run_busy(&mut self, cycle_cost: Duration, d: Duration) {
        let target = self.now + d;
        while self.now < target {
            self.engine.tick(self.now);
            let ran = self.engine.schedule_one(self.now).is_some();
            self.drain();
            self.complete_due_binds();
            if ran {
                self.now += cycle_cost;
                continue;
            }
            let next = [
                self.engine.next_deadline(),
                self.in_flight.iter().map(|b| b.due).min(),
            ]
            .into_iter()
            .flatten()
            .filter(|t| *t > self.now)
            .min();
            self.now = next.map_or(target, |t| t.min(target));
        }
    }

    // ---- internals -----------------------------------------------------------

    pub(super) fn send(&mut self, event: ClusterEvent) {
        self.engine.on_event(event, self.now);
        self.drain();
    }

    fn drain(&mut self) {
        let actions = self.engine.drain_actions();
        let at = self.elapsed();
        let mut unreserve = Vec::new();
        for action in &actions {
            match action {
                Action::Bind {
                    pod,
                    uid,
                    node,
                    claims,
                } => self.in_flight.push(InFlight {
                    due: self.now + self.bind_latency,
                    pod: pod.clone(),
                    uid: uid.clone(),
                    node: node.clone(),
                    claims: claims.clone(),
                }),
                Action::UnreserveClaims { uid, claims, .. } => {
                    unreserve.push((uid.clone(), claims.clone()))
                }
                Action::Preempt { victim, uid, .. } => {
                    self.preempted.push(victim.clone());
                    self.evictions.push(Eviction {
                        due: self.now,
                        pod: victim.clone(),
                        uid: uid.clone(),
                        marked: false,
                    });
                }
                Action::Nominate { pod, uid, node } => {
                    self.nominations
                        .push((pod.clone(), uid.clone(), node.clone()))
                }
                _ => {}
            }
        }
        self.check_binds_release_quorum(&actions);
        self.check_preemptions_keep_gangs_whole(&actions);
        self.check_binds_respect_anti_affinity(&actions);
        self.check_binds_respect_spread(&actions);
        self.actions.extend(actions.into_iter().map(|a| (at, a)));
        for (uid, claims) in unreserve {
            self.release_claims(&uid, Some(&claims));
        }
    }

    /// Performs the binds that are due; returns whether any was.
    fn complete_due_binds(&mut self) -> bool {
        let now = self.now;
        let (due, later): (Vec<InFlight>, Vec<InFlight>) =
            self.in_flight.drain(..).partition(|b| b.due <= now);
        self.in_flight = later;
        for b in &due {
            // DynamicResources' PreBind: the claims first; a failed write
            // fails the binding.
            let result = self
                .write_claims(&b.pod, &b.uid, &b.claims)
                .and_then(|()| self.bind_call(b));
            let ok = result.is_ok();
            if ok {
                self.check_claims_at_bind(&b.pod, &b.node);
            } else {
                // The daemon deletes the extended-resource claim a failed
                // binding made.
                self.delete_extended_claims(&b.uid);
            }
            if self.pods.get(&b.pod).is_none_or(|p| p.uid != b.uid) {
                // The resourceclaim controller: reservations of pods that
                // are gone are removed.
                self.release_claims(&b.uid, None);
            }
            self.send(ClusterEvent::BindFinished {
                pod: b.pod.clone(),
                uid: b.uid.clone(),
                node: b.node.clone(),
                result,
            });
            if ok && let Some(p) = self.pods.get(&b.pod) {
                let mut p = (**p).clone();
                p.node_name = Some(b.node.clone());
                let p = Arc::new(p);
                self.pods.insert(p.key.clone(), p.clone());
                self.binds.push(BindRecord {
                    pod: b.pod.clone(),
                    node: b.node.clone(),
                    at: self.elapsed(),
                });
                if self.confirm_binds {
                    self.send(ClusterEvent::PodUpserted(p));
                }
            }
        }
        !due.is_empty()
    }

    /// Applies the `nominatedNodeName` writes, reporting each pod update
    /// back; returns whether any was applied.
    fn apply_status_writes(&mut self) -> bool {
        let writes = std::mem::take(&mut self.nominations);
        let mut any = false;
        for (key, uid, node) in writes {
            let Some(p) = self.pods.get(&key).filter(|p| p.uid == uid) else {
                continue;
            };
            let mut p = (**p).clone();
            p.nominated_node = node;
            any = true;
            self.put_pod(p);
        }
        any
    }

    /// Preempted pods: each is first marked terminating (`deleting`), then
    /// deleted once `termination_grace` has passed. Returns whether any
    /// step was taken.
    fn complete_due_evictions(&mut self) -> bool {
        let now = self.now;
        let (due, later): (Vec<Eviction>, Vec<Eviction>) =
            self.evictions.drain(..).partition(|e| e.due <= now);
        self.evictions = later;
        for mut e in due.iter().cloned() {
            let Some(p) = self.pods.get(&e.pod).filter(|p| p.uid == e.uid) else {
                continue;
            };
            if !e.marked && !self.termination_grace.is_zero() {
                let mut p = (**p).clone();
                p.deleting = true;
                e.marked = true;
                e.due = now + self.termination_grace;
                self.evictions.push(e);
                self.put_pod(p);
            } else {
                self.delete_pod(&e.pod);
            }
        }
        !due.is_empty()
    }

    /// What the API server would answer to the binding POST.
    fn bind_call(&mut self, b: &InFlight) -> Result<(), String> {
        let pod = self
            .pods
            .get(&b.pod)
            .ok_or_else(|| format!("pods \"{}\" not found", b.pod.name))?;
        if pod.uid != b.uid {
            return Err(format!("pod {} was recreated (uid changed)", b.pod));
        }
        if let Some(n) = &pod.node_name {
            return Err(format!("pod {} is already assigned to node {n}", b.pod));
        }
        if !self.nodes.contains_key(&b.node) {
            return Err(format!("node {} not found", b.node));
        }
        if self.fail_pods.contains(&b.pod) {
            return Err("injected failure".into());
        }
        if self.fail_next > 0 {
            self.fail_next -= 1;
            return Err("injected failure".into());
        }
        Ok(())
    }
}

impl Default for Harness {
    fn default() -> Self {
        Self::new()
    }
}
