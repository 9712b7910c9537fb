//! PreScore's preference per topology pair and NormalizeScore's min-max.
//!
//! For every existing pod (every pod of every node when the incoming pod has
//! preferred terms, else only a node's `pods_with_affinity`), the pair of the
//! pod's node gains:
//! - the weight of each preferred affinity term of the incoming pod the
//!   existing pod matches (minus it for preferred anti-affinity);
//! - `hardPodAffinityWeight` for each required affinity term of the existing
//!   pod that selects the incoming pod;
//! - unless `ignorePreferredTermsOfExistingPods`, the weight of each preferred
//!   affinity term of the existing pod that selects the incoming pod (minus it
//!   for preferred anti-affinity).
//!
//! A node's raw score is the sum over the pairs it belongs to (looked up by
//! the ids of the cache's `LabelIds` on the nodes it numbered).

use std::collections::BTreeMap;

use super::InterPodAffinityArgs;
use super::counts::{Counts, TopologyCounts};
use crate::cache::TermKind;
use crate::framework::{MAX_NODE_SCORE, Snapshot};
use crate::model::{PodInfo, WeightedPodAffinityTerm};

/// What PreScore computed for one pod.
#[derive(Debug, Default)]
pub(super) struct ScoreState {
    /// Per pair, renumbered by the cache's `LabelIds` for Score's lookups.
    pub scores: Counts,
}

impl ScoreState {
    /// The preferences for `pod`; `None` when there is nothing to score.
    pub(super) fn compute(
        args: &InterPodAffinityArgs,
        pod: &PodInfo,
        snapshot: &Snapshot<'_>,
    ) -> Option<Self> {
        let terms = &pod.constraints.pod_affinity;
        let has_preferred =
            !terms.preferred_affinity.is_empty() || !terms.preferred_anti_affinity.is_empty();
        if args.ignore_preferred_terms_of_existing_pods && !has_preferred {
            return None;
        }
        let ctx = Ctx {
            args,
            pod,
            snapshot,
            own_ns_labels: snapshot.facts.namespace_labels(&pod.key.namespace),
        };
        let scores = if snapshot.facts.pods.is_maintained() {
            ctx.indexed(has_preferred)?
        } else {
            ctx.scan(has_preferred)?
        };
        (!scores.is_empty()).then(|| ScoreState {
            scores: Counts::new(scores, &snapshot.facts.label_ids),
        })
    }
}

struct Ctx<'a> {
    args: &'a InterPodAffinityArgs,
    pod: &'a PodInfo,
    snapshot: &'a Snapshot<'a>,
    own_ns_labels: Option<&'a BTreeMap<String, String>>,
}

impl Ctx<'_> {
    /// The preferences from the index: the pods each preferred term of the
    /// incoming pod may match, and the existing terms filed under its labels.
    /// `None` when no term anywhere can contribute.
    fn indexed(&self, has_preferred: bool) -> Option<TopologyCounts> {
        let facts = self.snapshot.facts;
        let index = &facts.pods;
        let hard = i64::from(self.args.hard_pod_affinity_weight);
        let symmetric = |kind| match kind {
            TermKind::RequiredAffinity => hard > 0,
            TermKind::PreferredAffinity | TermKind::PreferredAntiAffinity => {
                !self.args.ignore_preferred_terms_of_existing_pods
            }
            TermKind::RequiredAntiAffinity => false,
        };
        let any_existing = [
            TermKind::RequiredAffinity,
            TermKind::PreferredAffinity,
            TermKind::PreferredAntiAffinity,
        ]
        .into_iter()
        .any(|k| symmetric(k) && index.term_count(k) > 0);
        if !has_preferred && !any_existing {
            return None;
        }
        let mut scores = TopologyCounts::default();
        let incoming = &self.pod.constraints.pod_affinity;
        for (terms, sign) in [
            (&incoming.preferred_affinity, 1),
            (&incoming.preferred_anti_affinity, -1),
        ] {
            for w in terms {
                index.for_each_candidate(&w.term.label_selector, |existing, node| {
                    let ns_labels = || facts.namespace_labels(&existing.key.namespace);
                    if w.term
                        .matches(&existing.key.namespace, &existing.labels, ns_labels)
                    {
                        scores.add_on(
                            &w.term.topology_key,
                            &node.labels,
                            sign * i64::from(w.weight),
                        );
                    }
                });
            }
        }
        if any_existing {
            let own_ns = || self.own_ns_labels;
            index.for_each_term_selecting(&self.pod.labels, |t| {
                if !symmetric(t.kind)
                    || !t
                        .term
                        .matches(&self.pod.key.namespace, &self.pod.labels, own_ns)
                {
                    return;
                }
                let delta = match t.kind {
                    TermKind::RequiredAffinity => hard,
                    TermKind::PreferredAffinity => i64::from(t.weight),
                    TermKind::PreferredAntiAffinity => -i64::from(t.weight),
                    TermKind::RequiredAntiAffinity => 0,
                };
                scores.add_on(&t.term.topology_key, &t.node.labels, delta);
            });
        }
        Some(scores)
    }

    /// The preferences from every pod of every node (when the incoming pod
    /// has preferred terms) or every node's pods with terms (snapshots
    /// without a maintained index, as kube-scheduler computes them).
    fn scan(&self, has_preferred: bool) -> Option<TopologyCounts> {
        let snapshot = self.snapshot;
        // No terms anywhere: one pass over the node list, no fan-out.
        if !has_preferred
            && snapshot
                .nodes
                .iter()
                .all(|n| n.pods_with_affinity.is_empty())
        {
            return None;
        }
        let scores = super::filtering::fold_nodes(snapshot.nodes, |scores, node| {
            if node.info.labels.is_empty() {
                return;
            }
            let existing = if has_preferred {
                &node.pods
            } else {
                &node.pods_with_affinity
            };
            for e in existing {
                self.process(scores, e, &node.info.labels);
            }
        });
        Some(scores)
    }

    /// Adds what one existing pod on a node with `labels` contributes.
    fn process(
        &self,
        scores: &mut TopologyCounts,
        existing: &PodInfo,
        labels: &BTreeMap<String, String>,
    ) {
        let incoming = &self.pod.constraints.pod_affinity;
        let facts = self.snapshot.facts;
        let existing_ns = || facts.namespace_labels(&existing.key.namespace);
        // The incoming pod's preferences about the existing pod.
        let mut weigh = |terms: &[WeightedPodAffinityTerm], sign: i64| {
            for w in terms {
                if w.term
                    .matches(&existing.key.namespace, &existing.labels, existing_ns)
                {
                    scores.add_on(&w.term.topology_key, labels, sign * i64::from(w.weight));
                }
            }
        };
        weigh(&incoming.preferred_affinity, 1);
        weigh(&incoming.preferred_anti_affinity, -1);

        // The existing pod's terms about the incoming pod (symmetry).
        let theirs = &existing.constraints.pod_affinity;
        let own_ns = || self.own_ns_labels;
        let selects_incoming = |t: &crate::model::PodAffinityTerm| {
            t.matches(&self.pod.key.namespace, &self.pod.labels, own_ns)
        };
        let hard = i64::from(self.args.hard_pod_affinity_weight);
        if hard > 0 {
            for t in theirs
                .required_affinity
                .iter()
                .filter(|t| selects_incoming(t))
            {
                scores.add_on(&t.topology_key, labels, hard);
            }
        }
        if !self.args.ignore_preferred_terms_of_existing_pods {
            for (list, sign) in [
                (&theirs.preferred_affinity, 1),
                (&theirs.preferred_anti_affinity, -1),
            ] {
                for w in list.iter().filter(|w| selects_incoming(&w.term)) {
                    scores.add_on(&w.term.topology_key, labels, sign * i64::from(w.weight));
                }
            }
        }
    }
}

/// Min-max normalisation to `0..=MAX_NODE_SCORE` (all equal: all 0), in
/// floating point as kube-scheduler does so the same scores round the same.
pub(super) fn normalize(scores: &mut [i64]) {
    let (Some(min), Some(max)) = (scores.iter().min().copied(), scores.iter().max().copied())
    else {
        return;
    };
    let diff = i128::from(max) - i128::from(min);
    for s in scores.iter_mut() {
        *s = if diff > 0 {
            let frac = (i128::from(*s) - i128::from(min)) as f64 / diff as f64;
            (MAX_NODE_SCORE as f64 * frac) as i64
        } else {
            0
        };
    }
}
