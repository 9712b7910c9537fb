//! The `GangScheduling` plugin: the gate (PreEnqueue), gang queue order
//! (QueueSort), the cache-aware PreFilter (group denial, scheduler-name
//! conflicts, `minResources`), early release (PostFilter) and the permit
//! barrier with its per-group timeout (Permit, Unreserve). PreFilter also
//! confines a gang with a required topology to one domain (`topology`).
//!
//! It is the one owner of a gang's scheduling state: the observed group
//! definitions (and the timeouts capped on them), the pods waiting at its
//! Permit barrier, the per-group timers and denials, the domain chosen for a
//! required topology, the gangs released and not yet all bound, and the
//! groups whose gate messages need rewriting. Membership counts are a view
//! of the cache's pods. The engine reaches it through its extension points
//! — PreEnqueue (`pre_enqueue`), QueueSort (`order_key`), PreFilter
//! (`pre_filter`, and `pod_group_pre_filter` for a whole gang), the
//! placements a gang cycle tries (`placement_tries`), PlacementFeasible
//! (`placement_feasible`), Permit (`permit`, and `permit_pod_group` for a
//! planned gang), PostFilter (`post_filter`), Unreserve (`unreserve`,
//! `withdraw`) — and its timers (`expire`); what it decided that the engine must report (a gang released,
//! timed out, released early) is queued as `GangNotice`s.

pub mod args;
mod barrier;
mod composite_barrier;
mod declared;
mod domains;
mod gate;
pub mod hierarchy;
mod levels;
pub mod placement_score;
mod runtime;
mod tasks;
mod topology;

pub use args::{ALIAS, DialectTimeouts, GangArgs, NAME, ReservationArgs};
pub use declared::DeclaredTopologies;
pub(crate) use domains::smallest;
pub use domains::{
    DomainOrder, MAX_TRIES, PlacementTry, SlicePlan, TRIES_PER_LEVEL, Tries,
    describe as describe_requests,
};
pub use gate::group_gate;
pub use topology::copies as copies_fitting;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use crate::cache::Cache;
use crate::framework::lifecycle::{PreFilterVerdict, Refusal, WaitingPods};
use crate::model::{DefinitionKey, GroupDef, GroupKey, GroupPolicy, GroupSource, PodInfo, PodKey};
use crate::queue::{Gate, OrderKey};

/// Something the engine reports (group status, events, metrics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GangNotice {
    /// Quorum reached: these members (waiting ones and the arriving one) were allowed.
    Released {
        group: GroupKey,
        allowed: Vec<PodKey>,
        quorum: u32,
    },
    /// The barrier was not satisfied in time; `rejected` members were sent back.
    TimedOut {
        group: GroupKey,
        rejected: usize,
        message: String,
    },
    /// A member was unschedulable; the waiting members were released at once
    /// and the gang denied until `denied_until`.
    EarlyReleased {
        group: GroupKey,
        trigger: PodKey,
        rejected: usize,
        denied_until: Instant,
        message: String,
    },
}

/// How a definition changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefChange {
    Added,
    Changed,
    Unchanged,
}

pub struct GangScheduling {
    default_args: GangArgs,
    args: HashMap<Arc<str>, GangArgs>,
    defs: HashMap<DefinitionKey, GroupDef>,
    /// Containing object (see `DefinitionKey::container`) → definitions observed in it.
    containers: HashMap<DefinitionKey, usize>,
    /// CompositePodGroup → the definitions naming it as their parent.
    children: hierarchy::Children,
    /// Group → when its barrier times out (first member started waiting + timeout).
    deadlines: HashMap<GroupKey, Instant>,
    timers: BTreeSet<(Instant, GroupKey)>,
    /// Group → denied (after an early release) until.
    denied: HashMap<GroupKey, Instant>,
    /// Groups with a required topology → their domain and the domains to avoid.
    domains: HashMap<GroupKey, DomainChoice>,
    /// Topology key → nodes by label value.
    topology_index: HashMap<String, topology::DomainIndex>,
    /// The hierarchies the cluster declares.
    declared: DeclaredTopologies,
    /// Per group, the domains its last gang cycle considered and the one it
    /// was placed in (for `/debug`).
    considered: HashMap<GroupKey, (Vec<String>, Option<String>)>,
    notices: Vec<GangNotice>,
    /// The pods parked at the Permit barrier, their nodes held.
    waiting: WaitingPods,
    /// Gangs whose quorum was released, until every released member binds.
    released: HashMap<GroupKey, runtime::ReleasedGang>,
    /// Groups whose gate messages may have changed (rewritten on drain).
    dirty: HashSet<GroupKey>,
    /// Definitions whose timeout was capped, with the value reported, so a
    /// resync does not repeat the warning.
    capped: HashMap<DefinitionKey, String>,
}

/// A required-topology group's domain: the one its members are confined to,
/// and the ones it was rejected in since it last reached quorum.
#[derive(Debug, Clone, Default)]
struct DomainChoice {
    current: Option<String>,
    avoid: BTreeSet<String>,
    /// A preferred (not required) topology that could not be honoured: the
    /// members go anywhere until the gang reaches quorum.
    spilled: bool,
}

impl GangScheduling {
    /// `args`: per scheduler name; `default_args` for any other.
    pub fn new(default_args: GangArgs, args: HashMap<Arc<str>, GangArgs>) -> Self {
        GangScheduling {
            default_args,
            args,
            defs: HashMap::new(),
            containers: HashMap::new(),
            children: hierarchy::Children::default(),
            deadlines: HashMap::new(),
            timers: BTreeSet::new(),
            denied: HashMap::new(),
            domains: HashMap::new(),
            topology_index: HashMap::new(),
            declared: DeclaredTopologies::default(),
            considered: HashMap::new(),
            notices: Vec::new(),
            waiting: WaitingPods::new(),
            released: HashMap::new(),
            dirty: HashSet::new(),
            capped: HashMap::new(),
        }
    }

    /// The plugin for the engine's profiles, each with the arguments its
    /// registry row built (`None`: the profile does not gang-schedule, and
    /// its pods never reach the plugin as members). The hierarchy of last
    /// resort is the first profile's `topologyLevels` that sets one.
    pub fn for_profiles<'a>(
        profiles: impl Iterator<Item = (Arc<str>, Option<&'a GangArgs>)>,
    ) -> Self {
        let mut levels = Vec::new();
        let mut args = HashMap::new();
        for (name, a) in profiles {
            if levels.is_empty()
                && let Some(a) = a
            {
                levels = a.topology_levels.clone();
            }
            args.insert(name, a.cloned().unwrap_or_default());
        }
        let mut gang = GangScheduling::new(GangArgs::default(), args);
        gang.set_topology_levels(levels);
        gang
    }

    pub fn args_for(&self, pod: &PodInfo) -> &GangArgs {
        self.args
            .get(&pod.scheduler_name)
            .unwrap_or(&self.default_args)
    }

    // ---- definitions ---------------------------------------------------------

    pub fn upsert_def(&mut self, def: GroupDef) -> DefChange {
        let container = def.key.container().map(|(c, _)| c);
        self.children.link(&def);
        let old = self.defs.insert(def.key.clone(), def.clone());
        if let Some(old) = &old
            && old.parent_key() != def.parent_key()
        {
            self.children.unlink(old);
            self.children.link(&def);
        }
        match old {
            None => {
                if let Some(c) = container {
                    *self.containers.entry(c).or_default() += 1;
                }
                DefChange::Added
            }
            Some(old) if old == def => DefChange::Unchanged,
            Some(_) => DefChange::Changed,
        }
    }

    pub fn remove_def(&mut self, key: &DefinitionKey) -> bool {
        let Some(old) = self.defs.remove(key) else {
            return false;
        };
        self.children.unlink(&old);
        self.capped.remove(key);
        self.domains.retain(|g, _| g.definition != *key);
        self.considered.retain(|g, _| g.definition != *key);
        if let Some((c, _)) = key.container()
            && let Some(n) = self.containers.get_mut(&c)
        {
            *n -= 1;
            if *n == 0 {
                self.containers.remove(&c);
            }
        }
        true
    }

    /// Why members of an unobserved definition wait: the definition is not
    /// created yet, or its containing object exists without it.
    pub fn absent_message(&self, key: &DefinitionKey) -> String {
        let container_observed = key
            .container()
            .is_some_and(|(c, _)| self.containers.contains_key(&c));
        key.absent_message(container_observed)
    }

    /// Every definition observed.
    pub fn defs(&self) -> impl Iterator<Item = &GroupDef> {
        self.defs.values()
    }

    pub fn def(&self, key: &DefinitionKey) -> Option<&GroupDef> {
        self.defs.get(key)
    }

    /// The group's usable policy, or why there is none.
    pub fn policy(&self, group: &GroupKey) -> Result<GroupPolicy, String> {
        let def = self
            .defs
            .get(&group.definition)
            .ok_or_else(|| format!("{} does not exist", group.definition))?;
        // Well formed but asking for what Muster cannot do: refused, never
        // placed without it.
        if let Some(why) = &def.unsupported {
            return Err(why.clone());
        }
        match &def.policy {
            Err(msg) => Err(format!("{} is invalid: {msg}", def.key)),
            Ok(GroupPolicy::Gang { min_count: 0, .. }) => Err(format!(
                "{} is invalid: minCount must be positive, got 0",
                def.key
            )),
            Ok(p) => Ok(p.clone()),
        }
    }

    /// `min_count` of a usable gang policy.
    pub fn min_count(&self, group: &GroupKey) -> Option<u32> {
        match self.policy(group) {
            Ok(GroupPolicy::Gang { min_count, .. }) => Some(min_count),
            _ => None,
        }
    }

    // ---- timers --------------------------------------------------------------

    /// Until when the pod's group is denied, if it is.
    pub fn denied_until(&self, pod: &PodInfo, now: Instant) -> Option<Instant> {
        let group = pod.group.key()?;
        self.denied.get(group).copied().filter(|t| *t > now)
    }

    pub fn deadline(&self, group: &GroupKey) -> Option<Instant> {
        self.deadlines.get(group).copied()
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        self.timers.first().map(|(t, _)| *t)
    }

    /// Ends the group's denial: the room it waited for is free (a
    /// reservation's), so it is tried at once.
    pub fn lift_denial(&mut self, group: &GroupKey) {
        self.denied.remove(group);
    }

    /// Groups currently denied.
    pub fn denied_groups(&self, now: Instant) -> usize {
        self.denied_group_keys(now).count()
    }

    /// The groups in their early-release backoff window at `now`.
    pub fn denied_group_keys(&self, now: Instant) -> impl Iterator<Item = &GroupKey> {
        self.denied
            .iter()
            .filter(move |(_, t)| **t > now)
            .map(|(g, _)| g)
    }

    /// A topology object (Kueue `Topology`, Volcano `HyperNode`) changed;
    /// true when the declared hierarchies changed.
    pub fn topology_changed(&mut self, change: crate::model::topology::TopologyChange) -> bool {
        self.declared.apply(change)
    }

    /// Records the domains a gang cycle considered (kept for groups with a
    /// topology request only, and dropped with the definition).
    pub fn note_domains(&mut self, group: &GroupKey, tried: Vec<String>, chosen: Option<String>) {
        if tried.iter().all(String::is_empty) {
            return;
        }
        self.considered.insert(group.clone(), (tried, chosen));
    }

    /// The domains `group`'s last gang cycle considered, and its choice.
    pub fn considered_domains(&self) -> &HashMap<GroupKey, (Vec<String>, Option<String>)> {
        &self.considered
    }

    /// The plugin's `topologyLevels`: the hierarchy of last resort.
    pub fn set_topology_levels(&mut self, levels: Vec<Arc<str>>) {
        self.declared.set_plugin_levels(levels);
    }

    /// The hierarchies the cluster declares.
    pub fn declared_topologies(&self) -> &DeclaredTopologies {
        &self.declared
    }

    pub fn take_notices(&mut self) -> Vec<GangNotice> {
        std::mem::take(&mut self.notices)
    }
}

impl GangScheduling {
    /// QueueSort: PrioritySort's order, extended to keep a gang's members
    /// together (by the definition's creation time) and to give a Workload
    /// API group's priority to its members.
    pub fn order_key(&self, pod: &PodInfo) -> OrderKey {
        match pod.group.key() {
            Some(group) => {
                let def = self.defs.get(&group.definition);
                let created = def.map_or(pod.created_ms, |d| self.queue_created_ms(d));
                let mut key = OrderKey::member(pod, group, created);
                // A Workload API PodGroup's priority (`spec.priority` or its
                // class) is authoritative for its members (KEP-5710): the
                // group is ordered, and will preempt, as one. Elsewhere the
                // definition's class stands in only for a member carrying no
                // priority of its own (Volcano).
                let authoritative = group.definition.source == GroupSource::PodGroup;
                if let Some(p) = def.and_then(|d| d.priority)
                    && (authoritative || (pod.priority == 0 && pod.priority_class_name.is_none()))
                {
                    key.priority = p;
                }
                key
            }
            None => OrderKey::plain(pod),
        }
    }
}

impl GangScheduling {
    /// PreEnqueue: a member waits at the gate until its definition and its
    /// quorum are observed.
    pub fn pre_enqueue(&self, pod: &PodInfo, cache: &Cache) -> Gate {
        gate::pre_enqueue(self, pod, cache)
    }
}

impl GangScheduling {
    /// Required topology: the nodes of the group's domain, chosen now if no
    /// member holds one yet; a refusal naming the key if no domain can hold
    /// the gang.
    fn topology_verdict(
        &mut self,
        pod: &PodInfo,
        group: &GroupKey,
        cache: &Cache,
    ) -> PreFilterVerdict {
        let Some(def) = self.defs.get(&group.definition) else {
            return PreFilterVerdict::Proceed;
        };
        // A required topology binds; Kueue's preferred one is tried first
        // (the best domain), and after a failure there, or with no domain
        // big enough, the gang goes anywhere (upstream also tries each
        // higher level in between, which Muster does not know).
        use crate::model::LevelRef;
        let (key, preferred) = match (&def.topology.required, &def.topology.preferred) {
            (Some(LevelRef::Label(k)), _) => (&**k, false),
            (None, Some(LevelRef::Label(k))) => (&**k, true),
            _ => return PreFilterVerdict::Proceed,
        };
        let placed = cache.group(group).map_or(0, |m| m.assumed_or_bound());
        let choice = self.domains.entry(group.clone()).or_default();
        if preferred && (choice.spilled || !choice.avoid.is_empty()) {
            choice.spilled = true;
            return PreFilterVerdict::Proceed;
        }
        let held = match placed {
            0 => None,
            _ => choice
                .current
                .clone()
                .or_else(|| topology::current(cache, group, key)),
        };
        let value = match held {
            Some(v) => v,
            None => {
                let remaining = match &def.policy {
                    Ok(GroupPolicy::Gang { min_count, .. }) => {
                        u64::from(*min_count).saturating_sub(placed as u64).max(1)
                    }
                    _ => 1,
                };
                let need = topology::Need {
                    remaining,
                    min_resources: def.min_resources.as_ref().filter(|_| placed == 0),
                };
                let index = topology::index_for(&mut self.topology_index, cache, key);
                let domains =
                    index.domains(cache, &pod.room_requests(), need.min_resources.is_some());
                match topology::choose(domains.rooms(), &need, &choice.avoid) {
                    Ok(v) => v,
                    Err(_) if preferred => {
                        choice.current = None;
                        choice.spilled = true;
                        return PreFilterVerdict::Proceed;
                    }
                    Err(none) => {
                        choice.current = None;
                        let msg = none.message(group, key, &need, cache.nodes().len());
                        return PreFilterVerdict::Refuse(Refusal::new("FailedScheduling", msg));
                    }
                }
            }
        };
        choice.current = Some(value.clone());
        let index = topology::index_for(&mut self.topology_index, cache, key);
        PreFilterVerdict::Restrict(topology::restriction(index.values(), group, key, &value))
    }

    /// The gang was rejected in its domain (early release, timeout): prefer
    /// another one next time.
    fn avoid_current_domain(&mut self, group: &GroupKey) {
        if let Some(choice) = self.domains.get_mut(group)
            && let Some(d) = choice.current.take()
        {
            choice.avoid.insert(d);
        }
    }

    /// Quorum was reached: the avoided domains are history.
    fn domain_succeeded(&mut self, group: &GroupKey) {
        if let Some(choice) = self.domains.get_mut(group) {
            choice.avoid.clear();
            choice.spilled = false;
        }
    }
}

impl GangScheduling {
    /// The pod-group cycle's PreFilter: the group checks, without topology: the gang's denial,
    /// scheduler-name conflicts and `minResources`. The gang cycle runs
    /// these, then places the gang over its topology itself.
    pub fn pod_group_pre_filter(
        &self,
        pod: &PodInfo,
        cache: &Cache,
        now: Instant,
    ) -> PreFilterVerdict {
        if let Some(until) = self.denied_until(pod, now) {
            return PreFilterVerdict::HoldUntil(until);
        }
        let Some(group) = pod.group.key() else {
            return PreFilterVerdict::Proceed;
        };
        if let Some(msg) = gate::scheduler_conflict(group, cache) {
            return PreFilterVerdict::Refuse(
                Refusal::group_wide("FailedScheduling", msg)
                    .because(crate::framework::PendingReason::InvalidGroup),
            );
        }
        if let Some(msg) = gate::min_resources_shortfall(self, group, cache) {
            return PreFilterVerdict::Refuse(Refusal::new("FailedScheduling", msg));
        }
        PreFilterVerdict::Proceed
    }
}

impl GangScheduling {
    /// PreFilter for a pod placed on its own: the group checks, then the
    /// required topology's domain.
    pub fn pre_filter(&mut self, pod: &PodInfo, cache: &Cache, now: Instant) -> PreFilterVerdict {
        match self.pod_group_pre_filter(pod, cache, now) {
            PreFilterVerdict::Proceed => {}
            other => return other,
        }
        let Some(group) = pod.group.key().cloned() else {
            return PreFilterVerdict::Proceed;
        };
        self.topology_verdict(pod, &group, cache)
    }
}

#[cfg(test)]
mod tests;
