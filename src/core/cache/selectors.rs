//! `WorkloadSelectors`: the selectors of the Services, ReplicationControllers,
//! ReplicaSets and StatefulSets in the cluster — only their namespace, name
//! and selector — from which PodTopologySpread's default constraints take
//! the selector of a pod that declares no constraints (kube-scheduler's
//! `helper.DefaultSelector`).

use std::collections::HashMap;
use std::sync::Arc;

use crate::model::spread::ControllerKind;
use crate::model::{LabelSelector, PodInfo};

/// Which kind of object a selector belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SelectingKind {
    /// Selects the pods its selector matches.
    Service,
    /// Selects the pods whose controller reference names it.
    Controller(ControllerKind),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ObjectKey {
    kind: SelectingKind,
    namespace: Arc<str>,
    name: Arc<str>,
}

#[derive(Debug, Default, Clone)]
pub struct WorkloadSelectors {
    /// Services with a non-empty selector, by namespace then name (a Service
    /// without one selects nothing and is not kept).
    services: HashMap<Arc<str>, HashMap<Arc<str>, LabelSelector>>,
    /// Controllers, by kind, namespace and name; `None` when their selector
    /// cannot be read (it then adds nothing, as upstream).
    controllers: HashMap<ObjectKey, Option<LabelSelector>>,
}

impl WorkloadSelectors {
    /// Records an object's selector; returns whether anything changed.
    pub fn upsert(
        &mut self,
        kind: SelectingKind,
        namespace: &str,
        name: &str,
        selector: Option<LabelSelector>,
    ) -> bool {
        match kind {
            SelectingKind::Service => {
                let Some(sel) = selector.filter(|s| !s.is_empty() && !s.matches_nothing()) else {
                    return self.remove(kind, namespace, name);
                };
                let ns = self.services.entry(Arc::from(namespace)).or_default();
                if ns.get(name) == Some(&sel) {
                    return false;
                }
                ns.insert(Arc::from(name), sel);
                true
            }
            SelectingKind::Controller(_) => {
                let key = ObjectKey {
                    kind,
                    namespace: Arc::from(namespace),
                    name: Arc::from(name),
                };
                if self.controllers.get(&key) == Some(&selector) {
                    return false;
                }
                self.controllers.insert(key, selector);
                true
            }
        }
    }

    pub fn remove(&mut self, kind: SelectingKind, namespace: &str, name: &str) -> bool {
        match kind {
            SelectingKind::Service => {
                let Some(ns) = self.services.get_mut(namespace) else {
                    return false;
                };
                let removed = ns.remove(name).is_some();
                if ns.is_empty() {
                    self.services.remove(namespace);
                }
                removed
            }
            SelectingKind::Controller(_) => self
                .controllers
                .remove(&ObjectKey {
                    kind,
                    namespace: Arc::from(namespace),
                    name: Arc::from(name),
                })
                .is_some(),
        }
    }

    /// The selector default constraints use for `pod`: every requirement of
    /// the Services in its namespace that select it, and of its controlling
    /// ReplicationController, ReplicaSet or StatefulSet. Empty when nothing
    /// selects the pod: default constraints then do not apply.
    pub fn default_selector(&self, pod: &PodInfo) -> LabelSelector {
        let mut selector = LabelSelector::default();
        if let Some(services) = self.services.get(&*pod.key.namespace) {
            for s in services.values().filter(|s| s.matches(&pod.labels)) {
                selector.and(s);
            }
        }
        if let Some(owner) = &pod.constraints.spread.controller {
            let key = ObjectKey {
                kind: SelectingKind::Controller(owner.kind),
                namespace: pod.key.namespace.clone(),
                name: owner.name.clone(),
            };
            // A selector that matches nothing (absent) adds no requirement.
            if let Some(Some(sel)) = self.controllers.get(&key)
                && !sel.matches_nothing()
            {
                selector.and(sel);
            }
        }
        selector
    }

    pub fn is_empty(&self) -> bool {
        self.services.is_empty() && self.controllers.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::spread::ControllerRef;
    use std::collections::BTreeMap;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn pod(ns: &str, labels: &[(&str, &str)], owner: Option<(ControllerKind, &str)>) -> PodInfo {
        let mut p = crate::driver::fixtures::pod("p", 100, 1);
        p.key = crate::model::PodKey::new(ns, "p");
        p.labels = map(labels).into();
        Arc::make_mut(&mut p.constraints).spread.controller =
            owner.map(|(kind, name)| ControllerRef {
                kind,
                name: Arc::from(name),
            });
        p
    }

    #[test]
    fn services_that_select_the_pod_and_its_controller_make_the_selector() {
        let mut w = WorkloadSelectors::default();
        let svc = |m: &[(&str, &str)]| Some(LabelSelector::from_map(&map(m)));
        assert!(w.upsert(SelectingKind::Service, "ns", "web", svc(&[("app", "web")])));
        assert!(!w.upsert(SelectingKind::Service, "ns", "web", svc(&[("app", "web")])));
        w.upsert(SelectingKind::Service, "ns", "other", svc(&[("app", "db")]));
        w.upsert(
            SelectingKind::Service,
            "elsewhere",
            "web",
            svc(&[("tier", "x")]),
        );
        let rs = SelectingKind::Controller(ControllerKind::ReplicaSet);
        w.upsert(rs, "ns", "web-1", svc(&[("hash", "1")]));

        let p = pod(
            "ns",
            &[("app", "web"), ("hash", "1"), ("tier", "x")],
            Some((ControllerKind::ReplicaSet, "web-1")),
        );
        let sel = w.default_selector(&p);
        assert!(sel.matches(&map(&[("app", "web"), ("hash", "1")])));
        assert!(!sel.matches(&map(&[("app", "web"), ("hash", "2")])));
        assert!(
            sel.matches(&map(&[("app", "web"), ("hash", "1"), ("tier", "y")])),
            "the other namespace's service does not count"
        );

        // Nothing selects it: no defaults.
        assert!(
            w.default_selector(&pod("ns", &[("app", "x")], None))
                .is_empty()
        );
        // A controller of another kind with the same name is not its owner.
        let owned_by_ss = pod("ns", &[], Some((ControllerKind::StatefulSet, "web-1")));
        assert!(w.default_selector(&owned_by_ss).is_empty());

        assert!(w.remove(SelectingKind::Service, "ns", "web"));
        assert!(w.remove(rs, "ns", "web-1"));
        assert!(w.default_selector(&p).is_empty());
    }

    #[test]
    fn services_without_a_selector_are_not_kept() {
        let mut w = WorkloadSelectors::default();
        assert!(!w.upsert(SelectingKind::Service, "ns", "headless", None));
        assert!(!w.upsert(
            SelectingKind::Service,
            "ns",
            "empty",
            Some(LabelSelector::default())
        ));
        assert!(w.is_empty());
    }
}
