//! `DynamicResources`: a pod's ResourceClaims get their devices, as
//! kube-scheduler's plugin of that name allocates them with structured
//! parameters.
//!
//! PreEnqueue (`pre_enqueue`, asked by the gate) keeps a pod out of the
//! queue while one of its claims cannot be used: it does not exist yet (a
//! template's, not generated), is unreadable or being deleted, or was
//! generated for another pod; the pod waits, its condition naming the
//! claim, until that claim's event (`Cache::claim_users`) or its own update
//! lets it through. PreFilter resolves the claims again against the
//! cluster's (`cache::DraFacts`), refusing the pod the same way should one
//! have changed since; an allocated claim (recorded, or
//! planned at another pod's Reserve) restricts the pod to the nodes its
//! devices reach; the others are allocated per node by Filter, with the
//! structured allocator (`crate::dra`). Reserve (the cache's `assume`)
//! allocates on the chosen node and holds the devices; the pod's binding
//! first writes each claim's `status.allocation` and `status.reservedFor`
//! (`engine::prebind`'s `claim_writes`), so two pods never get one device.
//!
//! A node that cannot allocate is refused as resolvable (kube-scheduler
//! refuses it as unresolvable): preemption looks for pods whose claims,
//! once they are gone, free the devices (`Cache::what_if_remove` releases
//! the devices of claims reserved only for the pods it takes off). A node
//! an allocated claim does not reach, and a claim that cannot be used, are
//! unresolvable.

use std::sync::Arc;

use crate::dra::allocate::{Budget, NodeView, Plan};
use crate::dra::cel::Evaluator;
use crate::dra::{Claim, InUse, Inventory, Reach};

use crate::framework::{
    CycleState, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult, Rejection, ScorePlugin,
    Snapshot,
};
use crate::model::PodInfo;
use crate::queue::{Gate, Gated};

use crate::cache::{DraFacts, NodeState};

pub const NAME: &str = "DynamicResources";

/// The most consumers a claim may be reserved for (the API's bound on
/// `status.reservedFor`).
pub const MAX_RESERVED_FOR: usize = 256;

/// kube-scheduler's reason for a node an allocated claim does not reach.
pub const REASON_NOT_REACHABLE: &str = "resourceclaim not available on the node";

const STATE_KEY: &str = "DynamicResources";

#[derive(Debug, Default, Clone, Copy)]
pub struct DynamicResources;

/// What PreFilter resolved for Filter.
struct DraState {
    /// The allocated claims' names and where their devices reach.
    allocated: Vec<(Arc<str>, Vec<Reach>)>,
    /// Claims to allocate on each node.
    unallocated: Vec<Arc<Claim>>,
    /// The same, prepared once for every node.
    plan: Option<Plan>,
    inventory: Arc<Inventory>,
    in_use: Arc<InUse>,
    eval: Arc<Evaluator>,
    searches: Arc<std::sync::atomic::AtomicU64>,
}

/// PreEnqueue: the pod waits while one of its claims cannot be used; a
/// claim that exists but is unreadable or was generated for another pod is
/// the user's to fix, and warned of.
pub fn pre_enqueue(pod: &PodInfo, dra: &DraFacts) -> Gate {
    if pod.constraints.resource_claims.is_empty() {
        return Ok(());
    }
    match dra.pod_claims(pod) {
        Ok(_) => Ok(()),
        Err(problem) if problem.waiting => Err(Gated::waiting(
            crate::framework::PendingReason::WaitingForResourceClaims,
            problem.message,
        )),
        Err(problem) => Err(Gated::invalid(problem.message)),
    }
}

impl Plugin for DynamicResources {
    fn name(&self) -> &'static str {
        NAME
    }
}

impl PreFilterPlugin for DynamicResources {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot<'_>,
    ) -> PreFilterResult {
        if pod.constraints.resource_claims.is_empty() && pod.constraints.extended.is_empty() {
            return PreFilterResult::AllNodes;
        }
        let dra = &snapshot.facts.dra;
        let ext = match extended::pre_filter(pod, dra) {
            Ok(x) => x,
            Err(r) => return PreFilterResult::Reject(r),
        };
        let claims = match dra.pod_claims(pod) {
            Ok(c) => c,
            Err(why) => return PreFilterResult::Reject(Rejection::unresolvable(why.message)),
        };
        let (mut allocated, mut unallocated) = (Vec::new(), Vec::new());
        for claim in claims {
            let Some(a) = dra.effective_allocation(claim.claim) else {
                unallocated.push(claim.claim.clone());
                continue;
            };
            if !claim.reserved(pod) && claim.reserved_for.len() >= MAX_RESERVED_FOR {
                return PreFilterResult::Reject(Rejection::unresolvable(format!(
                    "resourceclaim {:?} is reserved for the maximum {MAX_RESERVED_FOR} consumers",
                    &*claim.name
                )));
            }
            if a.reach.iter().any(|r| !matches!(r, Reach::All)) {
                allocated.push((claim.name.clone(), a.reach.clone()));
            }
        }
        for claim in &unallocated {
            for alt in claim.requests.iter().flat_map(|r| &r.alternatives) {
                if let Some(problem) = dra.class_problem(&alt.class) {
                    return PreFilterResult::Reject(Rejection::unresolvable(format!(
                        "resourceclaim {:?}: request {}: DeviceClass {}: {problem}",
                        &*claim.name, alt.name, alt.class
                    )));
                }
            }
        }
        if allocated.is_empty() && unallocated.is_empty() && ext.is_none() {
            return PreFilterResult::AllNodes;
        }
        let inventory = dra.inventory().clone();
        let plan = match unallocated.is_empty() {
            true => None,
            false => {
                let claims: Vec<&Claim> = unallocated.iter().map(|c| &**c).collect();
                match Plan::new(&claims, &inventory) {
                    Ok(plan) => Some(plan),
                    Err(unfit) => {
                        return PreFilterResult::Reject(Rejection::unresolvable(
                            unfit.node_reason(),
                        ));
                    }
                }
            }
        };
        if let Some(x) = ext {
            state.write(extended::STATE_KEY, x);
        }
        state.write(
            STATE_KEY,
            DraState {
                allocated,
                unallocated,
                plan,
                inventory,
                in_use: dra.in_use().clone(),
                eval: dra.evaluator().clone(),
                searches: dra.searches().clone(),
            },
        );
        PreFilterResult::AllNodes
    }
}

impl DraState {
    /// Whether every allocated claim's devices reach the node.
    fn reaches(&self, node: &NodeState) -> Result<(), Rejection> {
        let (name, labels) = (&*node.info.name, &node.info.labels);
        for (_claim, reach) in &self.allocated {
            if !reach.iter().all(|r| r.reaches(name, labels)) {
                return Err(Rejection::unresolvable(REASON_NOT_REACHABLE));
            }
        }
        Ok(())
    }

    fn check(&self, node: &NodeState) -> Result<(), Rejection> {
        self.reaches(node)?;
        let (name, labels) = (&*node.info.name, &node.info.labels);
        let Some(plan) = &self.plan else {
            return Ok(());
        };
        self.searches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Devices held by other claims may be freed by evicting their
        // pods: resolvable, so preemption looks at the node.
        plan.fits(
            NodeView { name, labels },
            &self.inventory,
            &self.in_use,
            &self.eval,
            Budget::default(),
        )
        .map_err(Rejection::new)
    }
}

impl ScorePlugin for DynamicResources {
    /// Only a pod whose claims to allocate list `firstAvailable`
    /// subrequests is scored: elsewhere every node scores alike.
    fn pre_score(
        &self,
        state: &mut CycleState,
        _: &PodInfo,
        _: &Snapshot<'_>,
        _: &[usize],
    ) -> bool {
        state
            .read::<DraState>(STATE_KEY)
            .and_then(|s| s.plan.as_ref())
            .is_some_and(Plan::has_subrequests)
    }

    fn score(&self, state: &CycleState, _: &PodInfo, node: &NodeState) -> i64 {
        let Some(s) = state.read::<DraState>(STATE_KEY) else {
            return 0;
        };
        let Some(plan) = &s.plan else {
            return 0;
        };
        let view = NodeView {
            name: &node.info.name,
            labels: &node.info.labels,
        };
        plan.score(view, &s.inventory, &s.in_use, &s.eval, Budget::default())
    }

    fn normalize(&self, _: &CycleState, _: &PodInfo, scores: &mut [i64]) {
        super::normalize::default_normalize(scores, false);
    }
}

impl FilterPlugin for DynamicResources {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeState) -> Result<(), Rejection> {
        let Some(s) = state.read::<DraState>(STATE_KEY) else {
            return Ok(());
        };
        match state.read::<extended::ExtendedState>(extended::STATE_KEY) {
            Some(x) => extended::check(x, s, pod, node),
            None => s.check(node),
        }
    }
}

pub mod extended;

#[cfg(test)]
mod tests;
