//! PriorityClass resolution, as the API server's Priority admission would do
//! it: a pod that reaches the engine with priority 0 gets the value of its
//! `priorityClassName` (or of the global default class when it names none),
//! and a group definition's `priorityClassName` becomes its priority. Pods
//! arrive without it when they were created before the class, or by a
//! minimal API server; an explicit priority always wins.

use std::collections::HashMap;
use std::sync::Arc;

use crate::model::{DefinitionKey, GroupDef, PodInfo};

/// The PriorityClasses observed, and the definitions that name one.
#[derive(Debug, Default)]
pub(super) struct PriorityClasses {
    values: HashMap<Arc<str>, i32>,
    /// The class marked `globalDefault` (the last one seen so marked).
    global_default: Option<Arc<str>>,
    /// Definitions naming a class, as they arrived (before resolution), so a
    /// class created or changed later re-resolves them.
    class_defs: HashMap<DefinitionKey, GroupDef>,
}

impl PriorityClasses {
    pub fn upsert(&mut self, name: Arc<str>, value: i32, global_default: bool) {
        if global_default {
            self.global_default = Some(name.clone());
        } else if self.global_default.as_ref() == Some(&name) {
            self.global_default = None;
        }
        self.values.insert(name, value);
    }

    pub fn delete(&mut self, name: &str) {
        self.values.remove(name);
        if self.global_default.as_deref() == Some(name) {
            self.global_default = None;
        }
    }

    /// The pod with its priority filled in from its class, if it has none.
    pub fn resolve_pod(&self, pod: Arc<PodInfo>) -> Arc<PodInfo> {
        if pod.priority != 0 {
            return pod;
        }
        let value = match &pod.priority_class_name {
            Some(class) => self.values.get(&**class).copied(),
            None => self
                .global_default
                .as_ref()
                .and_then(|d| self.values.get(d).copied()),
        };
        match value {
            Some(v) if v != 0 => {
                let mut p = (*pod).clone();
                p.priority = v;
                Arc::new(p)
            }
            _ => pod,
        }
    }

    /// The definition with the value of its `priorityClassName` (none while
    /// the class is not observed); remembered so a later class change reaches it.
    pub fn resolve_def(&mut self, mut def: GroupDef) -> GroupDef {
        if def.priority_class_name.is_none() {
            self.class_defs.remove(&def.key);
            return def;
        }
        self.class_defs.insert(def.key.clone(), def.clone());
        // The definition's own `spec.priority` wins over its class.
        def.priority = def.priority.or_else(|| self.class_value(&def));
        def
    }

    pub fn forget_def(&mut self, key: &DefinitionKey) {
        self.class_defs.remove(key);
    }

    /// Every definition naming a class, resolved against the classes as they
    /// are now, in key order (the engine applies the ones that changed).
    pub fn resolved_defs(&self) -> Vec<GroupDef> {
        let mut defs: Vec<GroupDef> = self
            .class_defs
            .values()
            .map(|d| GroupDef {
                priority: d.priority.or_else(|| self.class_value(d)),
                ..d.clone()
            })
            .collect();
        defs.sort_by(|a, b| a.key.cmp(&b.key));
        defs
    }

    fn class_value(&self, def: &GroupDef) -> Option<i32> {
        let class = def.priority_class_name.as_deref()?;
        self.values.get(class).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::fixtures::{gang_def, pod};

    fn with(priority: i32, class: Option<&str>) -> Arc<PodInfo> {
        let mut p = pod("p", 100, 1);
        p.priority = priority;
        p.priority_class_name = class.map(Arc::from);
        Arc::new(p)
    }

    #[test]
    fn priority_from_class_and_global_default() {
        let mut c = PriorityClasses::default();
        c.upsert("high".into(), 1000, false);
        c.upsert("base".into(), 10, true);
        assert_eq!(c.resolve_pod(with(0, Some("high"))).priority, 1000);
        assert_eq!(c.resolve_pod(with(0, None)).priority, 10);
        assert_eq!(
            c.resolve_pod(with(5, Some("high"))).priority,
            5,
            "explicit priority wins"
        );
        c.upsert("base".into(), 10, false);
        assert_eq!(
            c.resolve_pod(with(0, None)).priority,
            0,
            "no longer default"
        );
        c.upsert("base".into(), 10, true);
        c.delete("base");
        assert_eq!(c.resolve_pod(with(0, None)).priority, 0);
    }

    #[test]
    fn definition_priority_follows_its_class() {
        let mut c = PriorityClasses::default();
        let mut def = gang_def("job", 2, 1);
        def.priority_class_name = Some("high".into());
        assert_eq!(c.resolve_def(def.clone()).priority, None);
        c.upsert("high".into(), 1000, false);
        assert_eq!(c.resolved_defs()[0].priority, Some(1000));
        c.delete("high");
        assert_eq!(c.resolved_defs()[0].priority, None);
        c.forget_def(&def.key);
        assert!(
            c.resolved_defs().is_empty(),
            "deleted definitions are forgotten"
        );
        let plain = gang_def("plain", 2, 1);
        assert_eq!(c.resolve_def(plain).priority, None);
        assert!(
            c.resolved_defs().is_empty(),
            "only definitions naming a class"
        );
    }
}
