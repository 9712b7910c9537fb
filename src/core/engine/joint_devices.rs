//! The gang cycle's joint device search: when a member fits no node only
//! because of the devices earlier members of the same plan were given, the
//! devices of those members and of this one are searched for together.
//!
//! kube-scheduler plans a gang's members one by one, each member's devices
//! chosen greedily (its open issue #138765 asks for backtracking across
//! members): a GPU given to member A may strand member B on a node that
//! could hold both. Here, a member the greedy pass could not place is
//! tried, in turn, on each node where members of this plan were placed
//! with devices: their plans are lifted (`Cache::lift_device_plans`), the
//! member is filtered on that node alone, and if it passes, its claims and
//! the lifted ones are allocated together by the structured allocator,
//! which backtracks across all of them (`Cache::assume_jointly`). Either
//! every one of them gets devices, or the lifted plans are put back as
//! they were. The search only ever adds a member to the greedy plan, so it
//! finds a plan whenever greedy does.
//!
//! It is bounded: [`MAX_NODES`] nodes per member, [`MAX_TRIES`] per plan,
//! and [`MAX_TIME`] of search per plan (each allocation within the
//! allocator's own step bound). A plan that hit a bound says so in the
//! gang's message, and keeps what the greedy pass and the tries so far
//! placed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Engine;
use super::gang_cycle::Planned;
use crate::framework::{NodeRestriction, Snapshot};
use crate::model::{PodInfo, PodKey};

/// Nodes a member is tried on jointly.
pub(super) const MAX_NODES: usize = 16;
/// Joint tries per plan.
pub(super) const MAX_TRIES: usize = 64;
/// Time a plan's joint tries may take.
pub(super) const MAX_TIME: Duration = Duration::from_millis(20);

/// What one plan may still spend on joint tries.
#[derive(Debug)]
pub(super) struct JointBudget {
    tries_left: usize,
    deadline: Option<Instant>,
    /// A bound stopped a search.
    pub hit: bool,
}

impl JointBudget {
    pub(super) fn new() -> Self {
        JointBudget {
            tries_left: MAX_TRIES,
            deadline: None,
            hit: false,
        }
    }

    /// Takes one try; false (and `hit`) once a bound is reached.
    fn take(&mut self) -> bool {
        let now = Instant::now();
        let deadline = *self.deadline.get_or_insert(now + MAX_TIME);
        if self.tries_left == 0 || now >= deadline {
            self.hit = true;
            return false;
        }
        self.tries_left -= 1;
        true
    }
}

impl Engine {
    /// Tries to place `pod`, which fits no node on its own, on a node of
    /// `placed` by searching its devices and those of the members placed
    /// there together; the node it is assumed on, if any.
    pub(super) fn place_jointly(
        &mut self,
        pod: &PodInfo,
        placed: &[Planned],
        budget: &mut JointBudget,
    ) -> Option<Arc<str>> {
        if self.greedy_devices
            || (pod.constraints.resource_claims.is_empty() && pod.constraints.extended.is_empty())
        {
            return None;
        }
        let mut nodes: Vec<&Arc<str>> = Vec::new();
        for p in placed {
            if !nodes.contains(&&p.node) {
                nodes.push(&p.node);
            }
        }
        for node in nodes.into_iter().take(MAX_NODES) {
            let Some(index) = self.cache.node_index(node) else {
                continue;
            };
            let partners: Vec<PodKey> = placed
                .iter()
                .filter(|p| p.node == *node)
                .map(|p| p.pod.key.clone())
                .collect();
            let lifted = self.cache.lift_device_plans(&partners);
            if lifted.is_empty() {
                continue;
            }
            if !budget.take() {
                self.cache.put_back_device_plans(lifted);
                return None;
            }
            // Every other Filter must pass there with the lifted devices
            // free; the joint allocation then decides.
            let fits = self
                .profiles
                .get_mut(&pod.scheduler_name)
                .is_some_and(|profile| {
                    let only = NodeRestriction {
                        nodes: vec![index],
                        reason: "node(s) not tried in the joint device search".into(),
                    };
                    let snapshot = Snapshot::of_cache(&self.cache);
                    profile
                        .framework
                        .schedule_within(pod, &snapshot, &mut profile.next_start, Some(&only))
                        .is_ok()
                });
            if !fits {
                self.cache.put_back_device_plans(lifted);
                continue;
            }
            self.stats.devices.joint_searches += 1;
            if self.cache.assume_jointly(&pod.key, index, lifted).is_ok() {
                self.stats.devices.joint_placements += 1;
                return Some(node.clone());
            }
        }
        None
    }
}
