//! Preemption for a pod that needs devices: a candidate is a node where
//! evicting lower-priority pods frees what the pod needs — CPU, memory and
//! the devices of the victims' claims alike.
//!
//! The dry run of `preempt::find_candidates` edits a copy of one node, and
//! DynamicResources reads the devices held cluster-wide, so a victim's
//! devices would still look taken there. For a pod with claims (or with
//! extended resources a DeviceClass serves) each node is asked on the real
//! node table instead, with the pods taken off by what-if edits, which also
//! release the devices of claims reserved only for pods taken off
//! (`Cache::what_if_remove`): the full PreFilter and Filter on that node.
//! The reprieve is kube-scheduler's: the units most important first (and
//! budget-protected ones before others) are put back while the pod still
//! fits; where the node's choices are few, a cheaper set that fits is
//! searched for exactly (`cheapest_victims`). The victims' claims are freed only when they are gone: the
//! resourceclaim controller deallocates them, and the pod is retried on
//! that claim event.

use std::collections::HashSet;
use std::sync::Arc;

use super::Engine;
use super::cheapest_victims::cheaper_sets;
use super::preempt::Candidate;
use crate::cache::WhatIf;
use crate::framework::Snapshot;
use crate::model::{PodInfo, PodKey};
use crate::preemption::{Blocker, Cost, VictimUnit, reprieve_order, units_of};

impl Engine {
    /// Whether `pod` asks for devices: its candidates are found on the
    /// node table (`find_device_candidates`).
    pub(super) fn needs_devices(&self, pod: &PodInfo) -> bool {
        !pod.constraints.resource_claims.is_empty() || self.cache.facts().dra.serves_extended(pod)
    }

    /// Candidate nodes for `pod`, from the rotating offset, until `want`
    /// are found, each checked on the node table with its victims off.
    pub(super) fn find_device_candidates(
        &mut self,
        pod: &Arc<PodInfo>,
        want: usize,
    ) -> Vec<Candidate> {
        let n = self.cache.nodes().len();
        let start = self.preemptions.search_start(n);
        let (out, visited) =
            super::preempt::rotate(n, start, want, |i| self.device_candidate(pod, i));
        self.preemptions.searched(start, visited, n);
        out
    }

    /// Node `i` as a candidate: every lower-priority pod in the way taken
    /// off, then units put back while the pod still fits.
    fn device_candidate(&mut self, pod: &Arc<PodInfo>, i: usize) -> Option<Candidate> {
        let node = self.cache.nodes().get(i)?;
        let going: Vec<PodKey> = self
            .going_below(node, pod.priority)
            .map(|p| p.key.clone())
            .collect();
        let in_way = self.in_the_way(node, pod.priority);
        if in_way.is_empty() {
            return None;
        }
        let blocker = Blocker {
            pod: pod.key.clone(),
            node: Some(node.info.name.clone()),
        };
        let units = units_of(in_way.clone(), pod.priority, &|p| self.gang_facts(p));
        let evictable: HashSet<PodKey> = units.iter().flat_map(|u| u.keys()).cloned().collect();
        let mut edits = WhatIf::default();
        for key in going.iter().chain(evictable.iter()) {
            let _ = self.cache.what_if_remove(key, &mut edits);
        }
        let all_units = units.clone();
        let found = self.fits_on(pod, i).then(|| {
            let on_node: HashSet<&PodKey> = in_way.iter().map(|p| &p.key).collect();
            let mut victims = Vec::new();
            let mut violations = 0usize;
            for (unit, violates) in reprieve_order(units, &self.cache.facts().budgets) {
                let here: Vec<PodKey> = unit
                    .pods
                    .iter()
                    .filter(|p| on_node.contains(&p.key))
                    .map(|p| p.key.clone())
                    .collect();
                for key in &here {
                    self.cache.what_if_restore(key, &mut edits);
                }
                if self.fits_on(pod, i) {
                    continue;
                }
                for key in &here {
                    let _ = self.cache.what_if_remove(key, &mut edits);
                }
                if violates {
                    violations = violations.saturating_add(unit.pods.len());
                }
                let mut unit = unit;
                unit.blocked = Some(blocker.clone());
                victims.push(unit);
            }
            (victims, violations)
        });
        let found = found
            .filter(|(v, _)| !v.is_empty())
            .map(|(victims, violations)| {
                let cost = Cost::of(&victims, violations);
                self.cheaper_on(pod, i, &all_units, &blocker, &mut edits, &cost)
                    .unwrap_or(Candidate {
                        node: i,
                        victims,
                        cost,
                    })
            });
        self.cache.revert(edits);
        found
    }

    /// Where node `i`'s choices are few, the cheapest set of `units`
    /// cheaper than `than`'s with which the pod fits there
    /// (`cheapest_victims`). `edits` are as the reprieve left them and are
    /// reverted by the caller.
    fn cheaper_on(
        &mut self,
        pod: &Arc<PodInfo>,
        i: usize,
        units: &[VictimUnit],
        blocker: &Blocker,
        edits: &mut WhatIf,
        than: &Cost,
    ) -> Option<Candidate> {
        let cheaper = cheaper_sets(units, &self.cache.facts().budgets, than)?;
        for key in units.iter().flat_map(|u| u.keys()) {
            self.cache.what_if_restore(key, edits);
        }
        for (cost, set) in cheaper {
            for key in set.iter().flat_map(|u| u.keys()) {
                let _ = self.cache.what_if_remove(key, edits);
            }
            let fits = self.fits_on(pod, i);
            for key in set.iter().flat_map(|u| u.keys()) {
                self.cache.what_if_restore(key, edits);
            }
            if fits {
                return Some(Candidate::blocked(i, set, cost, blocker));
            }
        }
        None
    }

    /// PreFilter and Filter for `pod` on node `i` of the node table as it
    /// stands (edits included).
    fn fits_on(&mut self, pod: &Arc<PodInfo>, i: usize) -> bool {
        let Some(profile) = self.profiles.get_mut(&pod.scheduler_name) else {
            return false;
        };
        let snapshot = Snapshot::of_cache(&self.cache);
        super::cycle::schedule_on(&mut profile.framework, pod, &snapshot, i).is_ok()
    }
}
