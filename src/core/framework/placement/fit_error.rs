//! `FitError`: why no node fits a pod, worded exactly like kube-scheduler.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

/// Plugin names, sorted, each once, without the empty name.
pub(crate) fn blamed(plugins: impl IntoIterator<Item = &'static str>) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = plugins.into_iter().filter(|p| !p.is_empty()).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// No node fits: per-reason node counts, formatted like kube-scheduler's
/// `FitError.Error()` (`0/5 nodes are available: 2 node(s) had untolerated taint
/// {a: b}, 3 Insufficient cpu.`). As upstream, the `"<count> <reason>"` strings
/// are sorted as strings, and a node rejected with several reasons by one plugin
/// counts once per reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FitError {
    pub num_all_nodes: usize,
    /// Reason → number of nodes rejected for it.
    pub reasons: BTreeMap<Cow<'static, str>, usize>,
    /// True when every rejection was `UnschedulableAndUnresolvable`.
    pub unresolvable: bool,
    /// Set when a PreFilter plugin rejected the pod outright; the message then
    /// replaces the per-node histogram (which still counts every node).
    pub pre_filter_msg: Option<Cow<'static, str>>,
    /// The plugins whose rejections these are, sorted, each once: a parked
    /// pod waits for their queueing events. Empty when no plugin is to blame
    /// (no nodes at all, an internal error): the pod then waits for any event.
    pub rejected_by: Vec<&'static str>,
}

impl FitError {
    /// The pod was rejected by `plugin`'s PreFilter (or, with `""`, by no
    /// plugin): every node counts the reason.
    pub fn pre_filter(
        plugin: &'static str,
        num_all_nodes: usize,
        reason: Cow<'static, str>,
        unresolvable: bool,
    ) -> Self {
        let mut reasons = BTreeMap::new();
        if num_all_nodes > 0 {
            reasons.insert(reason.clone(), num_all_nodes);
        }
        FitError {
            num_all_nodes,
            reasons,
            unresolvable,
            pre_filter_msg: Some(reason),
            rejected_by: blamed([plugin]),
        }
    }

    /// The histogram entries in kube-scheduler's order.
    pub fn sorted_reasons(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .reasons
            .iter()
            .map(|(reason, count)| format!("{count} {reason}"))
            .collect();
        v.sort_unstable();
        v
    }
}

impl fmt::Display for FitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.num_all_nodes == 0 {
            // kube-scheduler's ErrNoNodesAvailable.
            return write!(f, "no nodes available to schedule pods");
        }
        write!(f, "0/{} nodes are available:", self.num_all_nodes)?;
        match &self.pre_filter_msg {
            Some(msg) => write!(f, " {msg}."),
            None if self.reasons.is_empty() => Ok(()),
            None => write!(f, " {}.", self.sorted_reasons().join(", ")),
        }
    }
}

impl std::error::Error for FitError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(reasons: &[(&'static str, usize)], n: usize) -> FitError {
        FitError {
            num_all_nodes: n,
            reasons: reasons
                .iter()
                .map(|(r, c)| (Cow::Borrowed(*r), *c))
                .collect(),
            unresolvable: false,
            pre_filter_msg: None,
            rejected_by: Vec::new(),
        }
    }

    #[test]
    fn histogram_is_sorted_on_the_formatted_entries() {
        // Upstream sorts "<count> <reason>" strings, so the count leads.
        let e = err(
            &[
                ("Insufficient cpu", 3),
                ("node(s) had untolerated taint {key: value}", 2),
            ],
            5,
        );
        assert_eq!(
            e.to_string(),
            "0/5 nodes are available: 2 node(s) had untolerated taint {key: value}, 3 Insufficient cpu."
        );
        let e = err(&[("Insufficient memory", 1), ("Insufficient cpu", 1)], 2);
        assert_eq!(
            e.to_string(),
            "0/2 nodes are available: 1 Insufficient cpu, 1 Insufficient memory."
        );
    }

    #[test]
    fn pre_filter_message_replaces_histogram() {
        let e = FitError::pre_filter(
            "NodeAffinity",
            4,
            Cow::Borrowed("node(s) didn't satisfy plugin NodeAffinity"),
            false,
        );
        assert_eq!(
            e.to_string(),
            "0/4 nodes are available: node(s) didn't satisfy plugin NodeAffinity."
        );
        assert_eq!(e.reasons.values().copied().collect::<Vec<_>>(), vec![4]);
        assert_eq!(e.rejected_by, ["NodeAffinity"]);
    }

    #[test]
    fn no_nodes() {
        assert_eq!(
            err(&[], 0).to_string(),
            "no nodes available to schedule pods"
        );
    }
}
