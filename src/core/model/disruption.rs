//! What preemption reads of PodDisruptionBudgets (`policy/v1`): which pods a
//! budget covers and how many more disruptions it allows.

use std::collections::HashSet;
use std::sync::Arc;

use super::LabelSelector;

/// Most pod names kept from a budget's `status.disruptedPods`; a budget
/// listing more is read as listing these (the map is the API server's
/// bookkeeping of evictions in flight, normally a handful).
pub const MAX_DISRUPTED_PODS: usize = 10_000;

/// One PodDisruptionBudget as preemption counts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DisruptionBudget {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
    /// `spec.selector`; `None` when nil or empty, which (as kube-scheduler
    /// reads budgets for preemption) covers no pod.
    pub selector: Option<LabelSelector>,
    /// `status.disruptionsAllowed`, clamped at 0.
    pub disruptions_allowed: i32,
    /// `status.disruptedPods` names: evictions the API server has admitted
    /// and not yet seen through; such a pod no longer counts against the
    /// budget.
    pub disrupted_pods: HashSet<Arc<str>>,
}

impl DisruptionBudget {
    /// Whether the budget covers `pod` (same namespace, selector matches).
    pub fn covers(
        &self,
        namespace: &str,
        labels: &std::collections::BTreeMap<String, String>,
    ) -> bool {
        *self.namespace == *namespace && self.selector.as_ref().is_some_and(|s| s.matches(labels))
    }
}

/// A budget observed or deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BudgetChange {
    Upserted(DisruptionBudget),
    Deleted { namespace: Arc<str>, name: Arc<str> },
}

/// Every observed budget, by namespace.
#[derive(Debug, Default, Clone)]
pub struct Budgets {
    by_namespace: std::collections::HashMap<Arc<str>, Vec<DisruptionBudget>>,
}

impl Budgets {
    pub fn apply(&mut self, change: BudgetChange) {
        match change {
            BudgetChange::Upserted(b) => {
                let list = self.by_namespace.entry(b.namespace.clone()).or_default();
                match list.iter_mut().find(|x| x.name == b.name) {
                    Some(slot) => *slot = b,
                    None => list.push(b),
                }
            }
            BudgetChange::Deleted { namespace, name } => {
                if let Some(list) = self.by_namespace.get_mut(&namespace) {
                    list.retain(|b| b.name != name);
                    if list.is_empty() {
                        self.by_namespace.remove(&namespace);
                    }
                }
            }
        }
    }

    /// The budgets of one namespace.
    pub fn in_namespace(&self, namespace: &str) -> &[DisruptionBudget] {
        self.by_namespace.get(namespace).map_or(&[], Vec::as_slice)
    }

    pub fn is_empty(&self) -> bool {
        self.by_namespace.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn budget(ns: &str, name: &str, app: Option<&str>) -> DisruptionBudget {
        DisruptionBudget {
            namespace: Arc::from(ns),
            name: Arc::from(name),
            selector: app.map(|a| {
                LabelSelector::from_map(&BTreeMap::from([("app".to_string(), a.to_string())]))
            }),
            disruptions_allowed: 1,
            disrupted_pods: HashSet::new(),
        }
    }

    #[test]
    fn a_budget_covers_matching_pods_of_its_namespace_only() {
        let b = budget("ns", "web", Some("web"));
        let web = BTreeMap::from([("app".to_string(), "web".to_string())]);
        assert!(b.covers("ns", &web));
        assert!(!b.covers("other", &web));
        assert!(!b.covers("ns", &BTreeMap::new()));
        // A nil or empty selector covers nothing.
        assert!(!budget("ns", "none", None).covers("ns", &web));
    }

    #[test]
    fn upserts_replace_and_deletes_remove() {
        let mut all = Budgets::default();
        all.apply(BudgetChange::Upserted(budget("ns", "a", Some("x"))));
        let mut b = budget("ns", "a", Some("y"));
        b.disruptions_allowed = 0;
        all.apply(BudgetChange::Upserted(b.clone()));
        assert_eq!(all.in_namespace("ns"), &[b]);
        all.apply(BudgetChange::Deleted {
            namespace: Arc::from("ns"),
            name: Arc::from("a"),
        });
        assert!(all.is_empty());
    }
}
