//! What the engine decides about an object before it schedules it, from
//! facts the informers report as they are: a pod's priority from its
//! PriorityClass, whether its group counts (its profile may not gang-schedule),
//! and the Kueue group definitions its labels imply. Kept here rather than in
//! the daemon so the deterministic driver and its property tests reach them.
//! Also whether an unreadable pod is reported (ours, and not for the same
//! error twice).

use std::sync::Arc;
use std::time::Instant;

use super::Engine;
use super::actions::{EventType, ObjectRef};
use crate::dialects::Synthesized;
use crate::model::{GroupDef, GroupKey, GroupMembership, PodInfo, PodKey};

impl Engine {
    /// A pod as the engine schedules it: priority resolved, and its group
    /// membership dropped when its profile does not gang-schedule (such a pod
    /// is an ordinary pod). A malformed reference is kept: it is reported, not
    /// scheduled, whatever the profile.
    pub(super) fn admit_pod(&mut self, pod: Arc<PodInfo>) -> Arc<PodInfo> {
        let pod = self.group_by_owner(self.classes.resolve_pod(pod));
        if pod.group.key().is_some() && self.gang_disabled.contains(&pod.scheduler_name) {
            let mut plain = (*pod).clone();
            plain.group = GroupMembership::None;
            return Arc::new(plain);
        }
        pod
    }

    /// An unreadable pod leaves scheduling like a deleted one; a pod of ours
    /// is told why, once per distinct error.
    pub(super) fn on_pod_invalid(
        &mut self,
        key: PodKey,
        uid: Arc<str>,
        scheduler_name: Option<Arc<str>>,
        error: String,
        now: Instant,
    ) {
        let reported = self.invalid_reported.remove(&key);
        self.on_pod_deleted(&key, now);
        let ours = scheduler_name
            .as_deref()
            .is_some_and(|s| self.cache.is_served(s));
        if !ours {
            return;
        }
        if reported.as_ref() == Some(&error) {
            self.invalid_reported.insert(key, error);
            return;
        }
        let message = format!("invalid pod spec: {error}");
        self.invalid_reported.insert(key.clone(), error);
        self.outbox.invalid_pod(key, uid, message);
    }

    /// Kueue definitions follow their members: applied before the member's
    /// own event, so a member never waits for a definition it brings itself.
    pub(super) fn synthesize_kueue_for(&mut self, pod: &PodInfo, now: Instant) {
        let changes = self.kueue.observe(pod);
        self.apply_synthesized(changes, now);
    }

    pub(super) fn forget_kueue_member(&mut self, key: &PodKey, now: Instant) {
        let changes = self.kueue.forget(key);
        self.apply_synthesized(changes, now);
    }

    fn apply_synthesized(&mut self, changes: Vec<Synthesized>, now: Instant) {
        for change in changes {
            match change {
                Synthesized::Upserted(def) => self.apply_def(*def, now),
                Synthesized::Deleted(key) => self.on_def_deleted(&key, now),
            }
        }
    }

    pub(super) fn on_priority_class_upserted(
        &mut self,
        name: Arc<str>,
        value: i32,
        global_default: bool,
        now: Instant,
    ) {
        self.classes.upsert(name, value, global_default);
        self.redefine_by_classes(now);
    }

    pub(super) fn on_priority_class_deleted(&mut self, name: &str, now: Instant) {
        self.classes.delete(name);
        self.redefine_by_classes(now);
    }

    /// Definitions naming a class get its current value (an unchanged
    /// definition is a no-op for the gang plugin).
    fn redefine_by_classes(&mut self, now: Instant) {
        for def in self.classes.resolved_defs() {
            self.apply_def(def, now);
        }
    }

    /// A definition as the informer reported it: its class resolved first.
    pub(super) fn on_def_observed(&mut self, def: GroupDef, now: Instant) {
        let def = self.classes.resolve_def(def);
        self.report_capped_timeout(&def);
        self.apply_def(def, now);
    }

    /// A tenant asked for a gang timeout beyond the maximum: it applies
    /// capped, and the definition says so once per requested value.
    fn report_capped_timeout(&mut self, def: &GroupDef) {
        if !self.gang.newly_capped(def) {
            return;
        }
        let Some(capped) = def.timeout_capped.as_deref() else {
            return;
        };
        self.outbox.event(
            ObjectRef::Group(GroupKey::new(def.key.clone())),
            EventType::Warning,
            "TimeoutCapped",
            format!(
                "{}: {} asks for {}s; capped at {}s, the maximum gang timeout",
                def.key,
                capped.field,
                capped.requested,
                crate::model::MAX_SCHEDULE_TIMEOUT.as_secs()
            ),
        );
    }
}
