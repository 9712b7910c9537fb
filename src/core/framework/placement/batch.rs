//! Opportunistic batching for a run of like pods (kube-scheduler's KEP-5598,
//! made exact).
//!
//! A gang's members usually share one pod template. For pods whose Filter
//! verdict and raw Score on a node depend only on the pod's scheduling
//! signature and on that node — not on where other pods like them land —
//! placing one member changes the verdicts and scores of one node only: the
//! node it landed on. A [`Batch`] remembers, per node, the verdict and the raw
//! scores computed for the current signature, stamped with the node's
//! generation (`NodeState::generation` changes whenever the node or its pods
//! do). The next member with the same signature reads them back for every
//! node whose stamp still matches, and evaluates only the rest.
//!
//! Upstream's batching hands the next pod the next-best node of the previous
//! pod's sorted list. That is not what a full pass would pick under
//! `percentageOfNodesToScore` (each pod searches a different window of
//! nodes) nor under random tie-breaking, so Muster keeps the full pass's
//! shape — the same rotating search, the same normalisation over the same
//! feasible nodes, the same tie-break draws — and only memoizes the per-node
//! plugin calls. The placements are exactly those of the unbatched pass.
//!
//! Eligibility follows upstream's signature rules: every plugin of the
//! profile must be one whose per-node answers are node-local (an unknown
//! plugin turns batching off for the profile), and the pod must not use what
//! makes them cross-node: inter-pod affinity or anti-affinity terms, topology
//! spread constraints (its own, or the defaults that apply to it), volumes
//! (a claim shared by two members conflicts across nodes), extended
//! resources served by devices, or a nominated node.
//!
//! Resource claims are eligible while none is allocated (an allocated one
//! restricts the pod to where its devices are, whatever the node), and
//! like pods' claims ask the same of the devices (`Claim::same_demand`:
//! replicas' claims made from one template, under names of their own).
//! What the allocator answers on a node then depends on that node's
//! devices and their use: a change in the use of a node's own devices
//! marks the node changed (`Cache::update_dra`), any other change of the
//! device facts moves their epoch (`DraFacts::epoch`), which forgets the
//! memo. Rejections naming a claim are not kept: the next pod's message
//! names its own claim.

use std::sync::Arc;

use crate::cache::{NodeChanges, NodeState};
use crate::dra::Claim;
use crate::framework::{Rejection, Snapshot};
use crate::model::{Ignoring, PodInfo};
use crate::plugins;

use super::Framework;

/// Whether the registry row of the plugin named `name` says it is node-local
/// (`Registration::node_local`): its Filter verdict and raw Score for an
/// eligible pod on a node depend only on the pod's signature and on that
/// node. Inter-pod affinity and topology spread are node-local only for the
/// pods `eligible` lets through: without terms of their own, a like pod's
/// placement changes no other node's answer.
fn node_local(name: &str) -> bool {
    plugins::registry::REGISTRY
        .iter()
        .any(|r| r.answers_to(name) && r.node_local)
}

/// What is known of one node's Filter verdict, as a Filter pass learns it.
#[derive(Clone)]
pub(super) enum Known {
    Pass,
    /// Rejected; the reason when it was built (the runner skips building
    /// reasons once a feasible node is found).
    Fail(Option<Rejection>),
}

/// A remembered verdict, as the memo hands it back.
pub(super) enum Seen<'a> {
    Pass,
    Fail(Option<&'a Rejection>),
}

/// When a memo entry was written: valid while the memo's epoch and the
/// node's generation are still these.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct Stamp {
    epoch: u64,
    generation: u64,
}

impl Stamp {
    fn at(epoch: u64, node: &NodeState) -> Self {
        Stamp {
            epoch,
            generation: node.generation,
        }
    }
}

/// One node's remembered Filter verdict: a stamp and a one-byte verdict,
/// so a pass that reads back thousands of them streams through a compact
/// table (the reasons of rejections live apart, read only while no node
/// has passed yet).
#[derive(Clone, Copy, Default)]
struct Slot {
    stamp: Stamp,
    verdict: Verdict,
}

#[derive(Clone, Copy, Default, PartialEq, Eq)]
enum Verdict {
    /// Nothing remembered (or forgotten: the node changed).
    #[default]
    Unknown,
    Pass,
    Fail,
    /// Rejected, the reason kept in `Batch::reasons` at the node's index.
    FailWithReason,
}

/// How far the memo has read a node-change log (`Snapshot::changes`).
#[derive(Clone, Copy, PartialEq, Eq)]
struct LogPosition {
    id: u64,
    seq: u64,
}

/// Per-node memo of Filter verdicts and raw scores for one signature.
///
/// Forgetting is a new epoch, not a new table: the per-node vectors are
/// sized by the cluster (50,000 nodes) and a gang cycle on one rack reads
/// twenty of them, so they are allocated once and reused.
///
/// An entry is valid while the node has not changed since it was written.
/// Given the cache's node-change log (`Snapshot::changes`), the memo
/// forgets the entries of the nodes the log names and then trusts the rest
/// without looking at the nodes at all: a warm pass over 2,500 of 50,000
/// nodes reads only the memo's own tables. Without a log, each entry is
/// checked against its node's generation.
pub struct Batch {
    /// Whether every plugin of the framework is node-local.
    enabled: bool,
    /// The pod the memo was filled for (its signature is what counts).
    exemplar: Option<PodInfo>,
    /// Its claims (`memoisable_claims`): like pods' claims ask the same.
    claims: Vec<Arc<Claim>>,
    /// The device facts' epoch the entries were written in, for pods
    /// with claims (`DraFacts::epoch`).
    dra_epoch: u64,
    /// Entries of other epochs are forgotten (0 is never current).
    epoch: u64,
    verdicts: Vec<Slot>,
    /// Rejection reasons by node index, valid where the slot says so.
    reasons: Vec<Option<Rejection>>,
    /// Verdicts written in this epoch (some may have gone stale since, as
    /// their nodes changed): how much of the cluster the memo has seen.
    written: usize,
    /// The node-change log the entries are kept current by, and how far it
    /// has been read; `None` checks every entry's generation instead.
    log: Option<LogPosition>,
    /// The scorers PreScore left active when the scores were remembered
    /// (bit k: scorer k); other masks start the score memo afresh.
    active: u64,
    /// Raw scores, node-major: `scores[node * k ..][..k]`, valid when
    /// `score_stamps[node]` is the score epoch (and, without a log, the
    /// node's generation).
    score_width: usize,
    score_epoch: u64,
    scores: Vec<i64>,
    score_stamps: Vec<Stamp>,
}

impl Batch {
    /// A batch for pods scheduled by `framework`.
    pub fn new(framework: &Framework) -> Self {
        let names = framework
            .pre_filters
            .iter()
            .map(|p| p.name())
            .chain(framework.filters.iter().map(|p| p.name()))
            .chain(framework.scorers.iter().map(|(p, _)| p.name()));
        let enabled = names.into_iter().all(node_local) && framework.scorers.len() <= 64;
        Batch {
            enabled,
            exemplar: None,
            claims: Vec::new(),
            dra_epoch: 0,
            epoch: 1,
            verdicts: Vec::new(),
            reasons: Vec::new(),
            written: 0,
            log: None,
            active: 0,
            score_width: 0,
            score_epoch: 1,
            scores: Vec::new(),
            score_stamps: Vec::new(),
        }
    }

    /// Forgets every remembered verdict and score (a new gang cycle: other
    /// cluster state may have changed), keeping the tables.
    pub fn forget(&mut self) {
        self.exemplar = None;
        self.claims.clear();
        self.forget_entries();
    }

    fn forget_entries(&mut self) {
        self.written = 0;
        match (self.epoch.checked_add(1), self.score_epoch.checked_add(1)) {
            (Some(e), Some(s)) => {
                self.epoch = e;
                self.score_epoch = s;
            }
            // Never in practice; starting the tables over is always right.
            _ => {
                self.epoch = 1;
                self.score_epoch = 1;
                self.verdicts.fill(Slot::default());
                self.score_stamps.fill(Stamp::default());
            }
        }
    }

    /// Whether `pod` may use the memo: batching is on for the profile and
    /// the pod is eligible. A pod whose signature differs from the memo's
    /// starts it afresh; the nodes changed since the last pass are
    /// forgotten.
    pub(super) fn admit(&mut self, pod: &PodInfo, snapshot: &Snapshot<'_>) -> bool {
        if !self.enabled || !eligible(pod, snapshot) {
            return false;
        }
        let Some(claims) = memoisable_claims(pod, snapshot) else {
            return false;
        };
        let n = snapshot.nodes.len();
        if self.verdicts.len() != n || self.score_stamps.len() != n {
            self.verdicts = vec![Slot::default(); n];
            self.reasons = vec![None; n];
            self.score_stamps = vec![Stamp::default(); n];
            self.scores.clear();
            self.exemplar = None;
            self.written = 0;
            self.log = None;
        }
        let same = self
            .exemplar
            .as_ref()
            .is_some_and(|e| same_signature(e, pod))
            && self.claims.len() == claims.len()
            && self
                .claims
                .iter()
                .zip(&claims)
                .all(|(a, b)| a.same_demand(b));
        let dra_epoch = snapshot.facts.dra.epoch();
        if !same {
            self.exemplar = Some(pod.clone());
            self.claims = claims;
            self.forget_entries();
        } else if !self.claims.is_empty() && self.dra_epoch != dra_epoch {
            self.forget_entries();
        }
        self.dra_epoch = dra_epoch;
        self.follow(snapshot.changes);
        true
    }

    /// Catches up with the snapshot's node-change log: forgets the entries
    /// of the nodes it names since the last pass, or everything when the
    /// log is another one or no longer reaches back (nodes were added or
    /// removed). Without a log, entries are checked by generation.
    fn follow(&mut self, changes: Option<&NodeChanges>) {
        let Some(log) = changes else {
            self.log = None;
            return;
        };
        let changed = self
            .log
            .filter(|p| p.id == log.id())
            .and_then(|p| log.since(p.seq));
        match changed {
            Some(indices) => {
                for &i in indices {
                    if let Some(slot) = self.verdicts.get_mut(i) {
                        slot.verdict = Verdict::Unknown;
                    }
                    if let Some(stamp) = self.score_stamps.get_mut(i) {
                        stamp.epoch = 0;
                    }
                }
            }
            None => self.forget_entries(),
        }
        self.log = Some(LogPosition {
            id: log.id(),
            seq: log.seq(),
        });
    }

    /// Whether an entry stamped `stamp` in `epoch` still holds for node
    /// `index`. Following a log, the node itself is not read (a changed
    /// node's entries were forgotten when the log named it); the node is
    /// looked up only on the other path, so its load cannot be hoisted
    /// into the common one (measured: it was, costing a cache miss per
    /// node at 50,000 nodes).
    #[inline]
    fn holds(&self, stamp: Stamp, epoch: u64, index: usize, nodes: &[NodeState]) -> bool {
        if stamp.epoch != epoch {
            return false;
        }
        if self.log.is_some() {
            return true;
        }
        nodes
            .get(index)
            .is_some_and(|n| n.generation != 0 && n.generation == stamp.generation)
    }

    /// Whether the memo has seen most of the cluster: a pass then mostly
    /// reads remembered answers, too little work per node to be worth
    /// waking other threads for (at 50,000 nodes, the rayon hand-off of a
    /// 2,500-node pass of lookups cost more than the lookups), or
    /// prefetching the nodes for.
    pub(super) fn warm(&self) -> bool {
        !self.verdicts.is_empty()
            && self.written.saturating_mul(10) >= self.verdicts.len().saturating_mul(9)
    }

    /// The remembered verdict for node `index` of `nodes`, if still valid.
    #[inline]
    pub(super) fn verdict(&self, index: usize, nodes: &[NodeState]) -> Option<Seen<'_>> {
        let slot = self.verdicts.get(index)?;
        if slot.verdict == Verdict::Unknown || !self.holds(slot.stamp, self.epoch, index, nodes) {
            return None;
        }
        Some(match slot.verdict {
            Verdict::Pass => Seen::Pass,
            Verdict::FailWithReason => Seen::Fail(self.reasons.get(index)?.as_ref()),
            Verdict::Fail | Verdict::Unknown => Seen::Fail(None),
        })
    }

    /// Remembers what a Filter pass learnt, each node by its index.
    pub(super) fn remember_verdicts(&mut self, nodes: &[NodeState], learnt: Vec<(usize, Known)>) {
        for (index, known) in learnt {
            let (Some(node), Some(slot)) = (nodes.get(index), self.verdicts.get_mut(index)) else {
                continue;
            };
            if slot.stamp.epoch != self.epoch {
                self.written = self.written.saturating_add(1);
            }
            slot.stamp = Stamp::at(self.epoch, node);
            slot.verdict = match known {
                Known::Pass => Verdict::Pass,
                Known::Fail(None) => Verdict::Fail,
                // A reason may name the claim: the next pod's is another.
                Known::Fail(Some(_)) if !self.claims.is_empty() => Verdict::Fail,
                Known::Fail(Some(r)) => match self.reasons.get_mut(index) {
                    Some(kept) => {
                        *kept = Some(r);
                        Verdict::FailWithReason
                    }
                    None => Verdict::Fail,
                },
            };
        }
    }

    /// Prepares the score memo for the scorers in `active` (`width` of
    /// them); a different set than last time forgets every score.
    pub(super) fn score_set(&mut self, active: u64, width: usize) {
        let len = self.verdicts.len().saturating_mul(width);
        if self.active != active || self.score_width != width || self.scores.len() != len {
            self.active = active;
            self.score_width = width;
            self.scores.resize(len, 0);
            match self.score_epoch.checked_add(1) {
                Some(e) => self.score_epoch = e,
                None => self.forget_entries(),
            }
        }
    }

    /// The remembered raw scores of node `index` of `nodes`, if still valid.
    #[inline]
    pub(super) fn scores(&self, index: usize, nodes: &[NodeState]) -> Option<&[i64]> {
        let stamp = *self.score_stamps.get(index)?;
        if !self.holds(stamp, self.score_epoch, index, nodes) {
            return None;
        }
        let from = index.checked_mul(self.score_width)?;
        self.scores.get(from..from.checked_add(self.score_width)?)
    }

    pub(super) fn remember_scores(&mut self, index: usize, node: &NodeState, row: &[i64]) {
        let Some(from) = index.checked_mul(self.score_width) else {
            return;
        };
        let Some(slot) = from
            .checked_add(self.score_width)
            .and_then(|to| self.scores.get_mut(from..to))
        else {
            return;
        };
        if slot.len() == row.len() {
            slot.copy_from_slice(row);
            let stamp = Stamp::at(self.score_epoch, node);
            if let Some(g) = self.score_stamps.get_mut(index) {
                *g = stamp;
            }
        }
    }
}

/// Upstream's signability rules, for Muster's plugins: no inter-pod
/// affinity terms, no spread constraints (own or defaulted), no resource
/// claims, no volumes, no nominated node.
fn eligible(pod: &PodInfo, snapshot: &Snapshot<'_>) -> bool {
    pod.constraints.pod_affinity.is_empty()
        && pod.constraints.spread.constraints.is_empty()
        && !snapshot.facts.dra.serves_extended(pod)
        && pod.constraints.volumes.is_empty()
        && pod.nominated_node.is_none()
        && pod.node_name.is_none()
        && snapshot.facts.workloads.default_selector(pod).is_empty()
}

/// The pod's claims when the memo may serve it: none, or every one
/// resolved, not being deleted, and with no allocation (recorded or
/// planned). `None` when it may not.
fn memoisable_claims(pod: &PodInfo, snapshot: &Snapshot<'_>) -> Option<Vec<Arc<Claim>>> {
    if pod.constraints.resource_claims.is_empty() {
        return Some(Vec::new());
    }
    let dra = &snapshot.facts.dra;
    let claims = dra.pod_claims(pod).ok()?;
    claims
        .iter()
        .all(|c| !c.deleting && dra.effective_allocation(c).is_none())
        .then(|| claims.into_iter().map(|c| c.claim.clone()).collect())
}

/// Whether `a` and `b` get the same verdicts and scores on every node:
/// equal in everything but their identity (name, uid, timestamps).
/// `same_except` compares every field it does not name, so a field added
/// later splits batches instead of merging unlike pods.
fn same_signature(a: &PodInfo, b: &PodInfo) -> bool {
    a.same_except(b, Ignoring::Identity)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::ClusterFacts;
    use crate::plugins::test_util::{node, pod_named};
    use serde_json::json;

    fn like(name: &str) -> PodInfo {
        let mut p = pod_named(
            name,
            json!({"containers": [{"resources": {"requests": {"cpu": "1"}}}]}),
        );
        std::sync::Arc::make_mut(&mut p.labels).insert("app".into(), "a".into());
        p
    }

    #[test]
    fn like_pods_share_a_signature_and_unlike_ones_do_not() {
        let (a, b) = (like("a"), like("b"));
        assert!(same_signature(&a, &b));
        let mut c = like("c");
        std::sync::Arc::make_mut(&mut c.labels).insert("x".into(), "y".into());
        assert!(!same_signature(&a, &c));
        let mut d = like("d");
        d.requests.milli_cpu += 1;
        assert!(!same_signature(&a, &d));
        let mut e = like("e");
        e.key.namespace = "other".into();
        assert!(!same_signature(&a, &e));
    }

    #[test]
    fn cross_node_pods_are_not_eligible() {
        let facts = ClusterFacts::default();
        let snapshot = Snapshot::new(&[], &facts);
        assert!(eligible(&like("a"), &snapshot));
        let anti = pod_named(
            "x",
            json!({"containers": [{}], "affinity": {"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{
                    "labelSelector": {"matchLabels": {"app": "a"}},
                    "topologyKey": "kubernetes.io/hostname"}]}}}),
        );
        assert!(!eligible(&anti, &snapshot));
        let spread = pod_named(
            "x",
            json!({"containers": [{}], "topologySpreadConstraints": [{
                "maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "a"}}}]}),
        );
        assert!(!eligible(&spread, &snapshot));
        let mut nominated = like("n");
        nominated.nominated_node = Some("node-1".into());
        assert!(!eligible(&nominated, &snapshot));
    }

    #[test]
    fn the_memo_is_warm_once_it_has_seen_nine_tenths_of_the_nodes() {
        let nodes: Vec<NodeState> = (0..10)
            .map(|i| node(&format!("n{i}"), &[("cpu", "4"), ("pods", "10")]).build())
            .collect();
        let snapshot = Snapshot::of_nodes(&nodes);
        let mut b = Batch::new(&Framework::default());
        assert!(b.admit(&like("a"), &snapshot));
        assert!(!b.warm());
        b.remember_verdicts(&nodes, (0..8).map(|i| (i, Known::Pass)).collect());
        // A node judged again counts once.
        b.remember_verdicts(&nodes, vec![(0, Known::Pass)]);
        assert!(!b.warm(), "8 of 10");
        b.remember_verdicts(&nodes, vec![(8, Known::Pass)]);
        assert!(b.warm(), "9 of 10");
        b.forget();
        assert!(!b.warm());
    }

    /// Following a node-change log, the memo forgets exactly the nodes the
    /// log names, and everything when the log is cut (nodes added or
    /// removed) or is another one.
    #[test]
    fn a_followed_log_forgets_the_nodes_it_names() {
        let nodes: Vec<NodeState> = (0..4)
            .map(|i| node(&format!("n{i}"), &[("cpu", "4"), ("pods", "10")]).build())
            .collect();
        let facts = ClusterFacts::default();
        let mut log = NodeChanges::default();
        fn tracked<'a>(
            nodes: &'a [NodeState],
            facts: &'a ClusterFacts,
            log: &'a NodeChanges,
        ) -> Snapshot<'a> {
            Snapshot {
                nodes,
                facts,
                changes: Some(log),
            }
        }
        let known = |b: &Batch, i: usize| b.verdict(i, &nodes).is_some();
        let mut b = Batch::new(&Framework::default());
        assert!(b.admit(&like("a"), &tracked(&nodes, &facts, &log)));
        b.remember_verdicts(&nodes, (0..4).map(|i| (i, Known::Pass)).collect());
        assert!((0..4).all(|i| known(&b, i)));

        log.record(1);
        log.record(3);
        assert!(b.admit(&like("b"), &tracked(&nodes, &facts, &log)));
        assert_eq!(
            (0..4).map(|i| known(&b, i)).collect::<Vec<_>>(),
            [true, false, true, false]
        );
        // The log read once is not read again.
        b.remember_verdicts(&nodes, vec![(1, Known::Fail(None))]);
        assert!(b.admit(&like("c"), &tracked(&nodes, &facts, &log)));
        assert!(matches!(b.verdict(1, &nodes), Some(Seen::Fail(None))));

        log.restructured();
        assert!(b.admit(&like("d"), &tracked(&nodes, &facts, &log)));
        assert!((0..4).all(|i| !known(&b, i)), "indices moved");

        b.remember_verdicts(&nodes, vec![(0, Known::Pass)]);
        let other = NodeChanges::default();
        assert!(b.admit(&like("e"), &tracked(&nodes, &facts, &other)));
        assert!(!known(&b, 0), "another cache's log");
    }

    /// Without a log, an entry holds while its node's generation does.
    #[test]
    fn without_a_log_entries_are_checked_by_generation() {
        let mut nodes: Vec<NodeState> = (0..2)
            .map(|i| node(&format!("n{i}"), &[("cpu", "4"), ("pods", "10")]).build())
            .collect();
        let mut b = Batch::new(&Framework::default());
        assert!(b.admit(&like("a"), &Snapshot::of_nodes(&nodes)));
        b.remember_verdicts(&nodes, vec![(0, Known::Pass), (1, Known::Pass)]);
        let other = std::sync::Arc::new(like("other"));
        nodes[1].add_pod(&other);
        assert!(b.admit(&like("b"), &Snapshot::of_nodes(&nodes)));
        assert!(b.verdict(0, &nodes).is_some());
        assert!(b.verdict(1, &nodes).is_none());
    }

    #[test]
    fn an_unknown_plugin_turns_batching_off() {
        assert!(Batch::new(&Framework::default()).enabled);
        assert!(Batch::new(&Framework::empty()).enabled);
        let mut f = Framework::empty();
        f.filters.push(std::sync::Arc::new(NeverKnown));
        assert!(!Batch::new(&f).enabled);
    }

    struct NeverKnown;
    impl crate::framework::Plugin for NeverKnown {
        fn name(&self) -> &'static str {
            "SomethingOutOfTree"
        }
    }
    impl crate::framework::FilterPlugin for NeverKnown {
        fn filter(
            &self,
            _: &crate::framework::CycleState,
            _: &PodInfo,
            _: &NodeState,
        ) -> Result<(), Rejection> {
            Ok(())
        }
    }
}
