//! How the engine applies what its intake part (`intake.rs`) decides about
//! the objects the informers report: admitted pods, unreadable pods (a pod
//! of ours is told why, once per distinct error), Kueue definitions implied
//! by their members, and definitions re-resolved when a PriorityClass
//! changes.

use std::sync::Arc;
use std::time::Instant;

use super::Engine;
use super::actions::{EventType, ObjectRef};
use crate::dialects::Synthesized;
use crate::model::{GroupDef, GroupKey, PodKey};

impl Engine {
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
        let news = self.intake.invalid_is_news(&key, &error);
        self.on_pod_deleted(&key, now);
        let ours = scheduler_name
            .as_deref()
            .is_some_and(|s| self.cache.is_served(s));
        if !ours {
            return;
        }
        self.intake.invalid_reported(key.clone(), error.clone());
        if news {
            let message = format!("invalid pod spec: {error}");
            self.outbox.invalid_pod(key, uid, message);
        }
    }

    /// Kueue definitions follow their members.
    pub(super) fn apply_synthesized(&mut self, changes: Vec<Synthesized>, now: Instant) {
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
        let defs = self.intake.class_upserted(name, value, global_default);
        self.redefine(defs, now);
    }

    pub(super) fn on_priority_class_deleted(&mut self, name: &str, now: Instant) {
        let defs = self.intake.class_deleted(name);
        self.redefine(defs, now);
    }

    /// Definitions naming a class get its current value (an unchanged
    /// definition is a no-op for the gang plugin).
    fn redefine(&mut self, defs: Vec<GroupDef>, now: Instant) {
        for def in defs {
            self.apply_def(def, now);
        }
    }

    /// A definition as the informer reported it: its class resolved first.
    pub(super) fn on_def_observed(&mut self, def: GroupDef, now: Instant) {
        let def = self.intake.resolve_def(def);
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
