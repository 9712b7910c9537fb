//! The intake part: what the engine decides about an object before it
//! schedules it, and the state those decisions need — priority classes
//! (a pod's priority, a definition's), the profiles that do not
//! gang-schedule or place gangs one member per cycle, the workload owners
//! pods are grouped by (top-owner grouping), the Kueue definitions implied
//! by member labels, and the unreadable pods already reported. It decides;
//! the engine applies (`inputs.rs`, `owners.rs`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::EngineConfig;
use super::priority::PriorityClasses;
use crate::cache::Cache;
use crate::dialects::owners::{OwnerIndex, OwnerObject, Resolution, TopOwnerGrouping};
use crate::dialects::{KueueGroups, Synthesized};
use crate::model::{
    DefinitionKey, GroupDef, GroupKey, GroupMembership, GroupSource, PodInfo, PodKey,
};

pub(super) struct Intake {
    classes: PriorityClasses,
    /// Kueue group definitions, synthesized from their member pods.
    kueue: KueueGroups,
    /// Observed workload owners and the pods grouped by them.
    owners: OwnerIndex,
    /// Each profile's `topOwnerGrouping`.
    owner_grouping: HashMap<Arc<str>, TopOwnerGrouping>,
    /// Profiles that do not gang-schedule.
    gang_disabled: HashSet<Arc<str>>,
    /// Profiles that place gang members one per cycle (`planWholeGangs: false`).
    per_pod_gangs: HashSet<Arc<str>>,
    /// Unreadable pods of ours already reported, with the error reported.
    invalid_reported: HashMap<PodKey, String>,
}

impl Intake {
    pub fn new(cfg: &EngineConfig) -> Self {
        Intake {
            classes: PriorityClasses::default(),
            kueue: KueueGroups::default(),
            owners: OwnerIndex::default(),
            owner_grouping: cfg
                .profiles
                .iter()
                .map(|p| {
                    let grouping = p.gang.as_ref().map(|g| g.top_owner).unwrap_or_default();
                    (p.scheduler_name.clone(), grouping)
                })
                .collect(),
            gang_disabled: cfg.gang_disabled(),
            per_pod_gangs: cfg
                .profiles
                .iter()
                .filter(|p| p.gang.as_ref().is_some_and(|g| !g.plan_whole_gangs))
                .map(|p| p.scheduler_name.clone())
                .collect(),
            invalid_reported: HashMap::new(),
        }
    }

    /// Whether the profile places a gang's members one per cycle.
    pub fn places_members_alone(&self, scheduler: &str) -> bool {
        self.per_pod_gangs.contains(scheduler)
    }

    /// A pod as the engine schedules it: priority resolved, grouped by its
    /// top owner where that applies, and its group membership dropped when
    /// its profile does not gang-schedule (such a pod is an ordinary pod).
    /// A malformed reference is kept: it is reported, not scheduled,
    /// whatever the profile.
    pub fn admit(&mut self, pod: Arc<PodInfo>, cache: &Cache) -> Arc<PodInfo> {
        self.invalid_reported.remove(&pod.key);
        let pod = self.group_by_owner(self.classes.resolve_pod(pod), cache);
        if pod.group.key().is_some() && self.gang_disabled.contains(&pod.scheduler_name) {
            let mut plain = (*pod).clone();
            plain.group = GroupMembership::None;
            return Arc::new(plain);
        }
        pod
    }

    /// The pod with its owner reference resolved to its top owner's gang,
    /// or made an ordinary pod when grouping by owner does not apply to it.
    /// Other pods are returned as they are.
    fn group_by_owner(&mut self, pod: Arc<PodInfo>, cache: &Cache) -> Arc<PodInfo> {
        let direct = match pod.group.key() {
            Some(k) if matches!(k.definition.source, GroupSource::Owner(_)) => k.clone(),
            _ => {
                self.owners.forget(&pod.key);
                return pod;
            }
        };
        let group = if cache.is_served(&pod.scheduler_name) {
            self.owners.track(&pod.key, &direct);
            self.owner_membership(&pod, &direct, cache)
        } else {
            // Only accounted: nothing to regroup later.
            self.owners.forget(&pod.key);
            GroupMembership::None
        };
        if group == pod.group {
            return pod;
        }
        let mut resolved = (*pod).clone();
        resolved.group = group;
        Arc::new(resolved)
    }

    /// What a pod this scheduler serves is, by its owner. (Another
    /// scheduler's pods are never grouped by owner: their Job would look
    /// like a gang split across schedulers.)
    fn owner_membership(&self, pod: &PodInfo, direct: &GroupKey, cache: &Cache) -> GroupMembership {
        let grouping = self
            .owner_grouping
            .get(&pod.scheduler_name)
            .copied()
            .unwrap_or_default();
        let labels = cache.facts().namespace_labels(&pod.key.namespace);
        if !grouping.enabled_in(labels) {
            return GroupMembership::None;
        }
        match self.owners.resolve(direct, grouping.kinds) {
            Resolution::Plain => GroupMembership::None,
            Resolution::Member(group) => GroupMembership::Member(group),
            Resolution::Waiting(owner) => GroupMembership::Member(GroupKey::new(owner)),
        }
    }

    /// The cached pod grouped again by its owner, when its group changed
    /// (an owner on its walk, or its namespace's labels, changed); `None`
    /// when it stays as it is.
    pub fn regrouped(&self, key: &PodKey, cache: &Cache) -> Option<Arc<PodInfo>> {
        let (cached, direct) = (cache.pod(key)?, self.owners.direct(key)?);
        if self.gang_disabled.contains(&cached.info.scheduler_name) {
            return None;
        }
        let group = self.owner_membership(&cached.info, direct, cache);
        if group == cached.info.group {
            return None;
        }
        let mut pod = (*cached.info).clone();
        pod.group = GroupMembership::Member(direct.clone());
        Some(Arc::new(pod))
    }

    /// An owner observed: the pods whose walk passes through it.
    pub fn owner_upserted(&mut self, owner: OwnerObject) -> Vec<PodKey> {
        self.owners.upsert(owner)
    }

    /// An owner deleted: the pods whose walk passed through it.
    pub fn owner_removed(&mut self, key: &DefinitionKey) -> Vec<PodKey> {
        self.owners.remove(key)
    }

    /// The pods grouped by owner in `namespace`.
    pub fn owner_grouped_in(&self, namespace: &str) -> Vec<PodKey> {
        self.owners
            .tracked()
            .filter(|k| &*k.namespace == namespace)
            .cloned()
            .collect()
    }

    /// The pod is gone: forget its owner walk and its reported error; the
    /// Kueue definitions that change with it.
    pub fn pod_deleted(&mut self, key: &PodKey) -> Vec<Synthesized> {
        self.owners.forget(key);
        self.invalid_reported.remove(key);
        self.kueue.forget(key)
    }

    /// The Kueue definitions a member's labels imply, as they change with it
    /// (applied before the member's own event, so a member never waits for
    /// a definition it brings itself).
    pub fn kueue_member(&mut self, pod: &PodInfo) -> Vec<Synthesized> {
        self.kueue.observe(pod)
    }

    /// Whether an unreadable pod's error is news (not the one reported last).
    pub fn invalid_is_news(&self, key: &PodKey, error: &str) -> bool {
        self.invalid_reported.get(key).map(String::as_str) != Some(error)
    }

    /// An unreadable pod of ours was told `error` (until it is readable or
    /// gone).
    pub fn invalid_reported(&mut self, key: PodKey, error: String) {
        self.invalid_reported.insert(key, error);
    }

    /// A PriorityClass observed: the definitions naming it, with its value.
    pub fn class_upserted(
        &mut self,
        name: Arc<str>,
        value: i32,
        global_default: bool,
    ) -> Vec<GroupDef> {
        self.classes.upsert(name, value, global_default);
        self.classes.resolved_defs()
    }

    /// A PriorityClass deleted: the definitions naming it, without it.
    pub fn class_deleted(&mut self, name: &str) -> Vec<GroupDef> {
        self.classes.delete(name);
        self.classes.resolved_defs()
    }

    /// A definition with its priority class resolved (and remembered, to be
    /// resolved again when the class changes).
    pub fn resolve_def(&mut self, def: GroupDef) -> GroupDef {
        self.classes.resolve_def(def)
    }

    pub fn def_deleted(&mut self, key: &DefinitionKey) {
        self.classes.forget_def(key);
    }
}
