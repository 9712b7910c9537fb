//! Atomic scale-up for gangs: one `autoscaling.x-k8s.io/v1`
//! ProvisioningRequest per gang whose gang cycle finds no placement because
//! capacity is missing (docs/gang-scheduling.md, docs/operations.md).
//!
//! This part owns the requests: which gang has one, in what state, and
//! when a gang whose request failed may ask again. It decides; the daemon
//! writes (`Action::CreateProvisioningRequest`, `…Delete…`) and reports
//! the requests' conditions back (`ClusterEvent::Provisioning`). Rules:
//! - only where the API is served (the daemon says so) and the profile's
//!   `provisioningRequests` argument is on (the default);
//! - never two requests for one gang: a gang with a live request waits for
//!   its outcome (`WaitingForProvisioning`, not `Unschedulable`, so
//!   cluster-autoscaler's ordinary loop does not scale for it a second time);
//! - at most `maxProvisioningRequests` live in the cluster;
//! - `Provisioned`: the gang is tried at once; `Failed`, `BookingExpired`,
//!   `CapacityRevoked`: the request is deleted, a Warning event says why,
//!   and the gang may ask again after a backoff (doubling, capped);
//! - deleted when the gang starts or its definition goes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Action, Engine, EventType, ObjectRef};
pub use crate::gang::args::ProvisioningArgs;
use crate::model::{DefinitionKey, GroupKey, PodInfo, PodKey};

/// The annotation by which a member consumes its gang's request.
pub const CONSUME_ANNOTATION: &str = "autoscaling.x-k8s.io/consume-provisioning-request";
pub use crate::gang::args::DEFAULT_PROVISIONING_CLASS as DEFAULT_CLASS;
/// The first wait after a failed request; it doubles up to [`MAX_RETRY`].
pub const FIRST_RETRY: Duration = Duration::from_secs(30);
pub const MAX_RETRY: Duration = Duration::from_secs(600);

/// A request's state, from its conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestState {
    /// Created, no outcome yet (Accepted or not).
    Pending,
    /// `Provisioned=True`: the capacity is there and booked.
    Provisioned,
    /// `Failed=True`.
    Failed,
    /// `BookingExpired=True`.
    BookingExpired,
    /// `CapacityRevoked=True`.
    CapacityRevoked,
}

impl RequestState {
    pub fn as_str(self) -> &'static str {
        match self {
            RequestState::Pending => "Pending",
            RequestState::Provisioned => "Provisioned",
            RequestState::Failed => "Failed",
            RequestState::BookingExpired => "BookingExpired",
            RequestState::CapacityRevoked => "CapacityRevoked",
        }
    }

    fn ended(self) -> bool {
        matches!(
            self,
            RequestState::Failed | RequestState::BookingExpired | RequestState::CapacityRevoked
        )
    }
}

/// What the daemon reports about ProvisioningRequests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProvisioningChange {
    /// Whether the cluster serves `autoscaling.x-k8s.io/v1`.
    Served(bool),
    /// A request's state as its conditions say.
    Status {
        namespace: Arc<str>,
        name: Arc<str>,
        state: RequestState,
        message: String,
    },
    Deleted {
        namespace: Arc<str>,
        name: Arc<str>,
    },
}

/// One pod set of a request: a member standing for `count` members of the
/// same scheduling-relevant shape (requests and constraints).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSet {
    pub template_of: PodKey,
    pub count: u32,
}

/// A gang's live request.
#[derive(Debug, Clone)]
pub struct Request {
    pub name: Arc<str>,
    pub state: RequestState,
    pub created: Instant,
    pub message: String,
}

#[derive(Debug, Default)]
pub(super) struct Provisioning {
    served: bool,
    live: BTreeMap<GroupKey, Request>,
    /// Gang → (when it may ask again, the next wait).
    retry: BTreeMap<GroupKey, (Instant, Duration)>,
    /// Requests made, for unique names.
    made: u64,
    /// Gang → since when its gang cycles fail (the preemption delay's start).
    failing_since: BTreeMap<GroupKey, Instant>,
}

impl Provisioning {
    pub fn live(&self) -> impl Iterator<Item = (&GroupKey, &Request)> {
        self.live.iter()
    }

    pub fn retry_at(&self, group: &GroupKey) -> Option<Instant> {
        self.retry.get(group).map(|(t, _)| *t)
    }

    fn group_of(&self, namespace: &str, name: &str) -> Option<GroupKey> {
        self.live
            .iter()
            .find(|(g, r)| &*g.definition.namespace == namespace && &*r.name == name)
            .map(|(g, _)| g.clone())
    }
}

/// The name of a gang's `n`th request: the group's name, shortened, and a
/// counter (unique per engine; a new leader starts with none live).
fn request_name(group: &GroupKey, n: u64) -> Arc<str> {
    let base: String = group
        .definition
        .name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(40)
        .collect::<String>()
        .to_ascii_lowercase();
    let base = base.trim_matches('-');
    Arc::from(format!(
        "muster-{}-{n}",
        if base.is_empty() { "gang" } else { base }
    ))
}

/// Members grouped by shape, in member order.
fn pod_sets(members: &[Arc<PodInfo>], needed: usize) -> Vec<PodSet> {
    let mut sets: Vec<(Arc<PodInfo>, u32)> = Vec::new();
    for m in members.iter().take(needed.max(1)) {
        match sets
            .iter_mut()
            .find(|(p, _)| p.requests == m.requests && p.constraints == m.constraints)
        {
            Some((_, n)) => *n = n.saturating_add(1),
            None => sets.push((m.clone(), 1)),
        }
    }
    sets.into_iter()
        .map(|(p, count)| PodSet {
            template_of: p.key.clone(),
            count,
        })
        .collect()
}

impl Engine {
    /// The gang found no placement because capacity is missing: ask for it,
    /// or keep waiting for the request it has. Returns the note for its
    /// refusal when it waits for a request (its members then say
    /// `WaitingForProvisioning`), `None` when it does not.
    pub(super) fn provision_for_gang(
        &mut self,
        group: &GroupKey,
        members: &[Arc<PodInfo>],
        needed: usize,
        now: Instant,
    ) -> Option<String> {
        let first = members.first()?;
        let args = self.gang.args_for(first).provisioning.clone();
        if !self.provisioning.served || !args.enabled {
            return None;
        }
        if let Some(r) = self.provisioning.live.get(group) {
            return match r.state {
                RequestState::Pending => Some(format!(
                    "waiting for ProvisioningRequest {} ({})",
                    r.name, r.message
                )),
                // Provisioned and still no room: the capacity went to
                // someone else, or is not what the gang needs.
                _ => None,
            };
        }
        if self.provisioning.retry_at(group).is_some_and(|t| t > now) {
            return None;
        }
        if self.provisioning.live.len() >= args.max_requests as usize {
            return None;
        }
        self.provisioning.made = self.provisioning.made.saturating_add(1);
        let name = request_name(group, self.provisioning.made);
        let sets = pod_sets(members, needed);
        let total: u32 = sets.iter().map(|s| s.count).sum();
        self.provisioning.live.insert(
            group.clone(),
            Request {
                name: name.clone(),
                state: RequestState::Pending,
                created: now,
                message: "created".into(),
            },
        );
        self.outbox.push(Action::CreateProvisioningRequest {
            group: group.clone(),
            name: name.clone(),
            class: args.class.clone(),
            pod_sets: sets,
        });
        let message = format!(
            "ProvisioningRequest {name} ({}) created for {total} member(s): capacity is missing",
            args.class
        );
        self.outbox.event(
            ObjectRef::Group(group.clone()),
            EventType::Normal,
            "ProvisioningRequested",
            message,
        );
        Some(format!("waiting for ProvisioningRequest {name} (created)"))
    }

    pub(super) fn on_provisioning(&mut self, change: ProvisioningChange, now: Instant) {
        match change {
            ProvisioningChange::Served(on) => self.provisioning.served = on,
            ProvisioningChange::Status {
                namespace,
                name,
                state,
                message,
            } => {
                let Some(group) = self.provisioning.group_of(&namespace, &name) else {
                    return;
                };
                if let Some(r) = self.provisioning.live.get_mut(&group) {
                    if r.state == state {
                        return;
                    }
                    r.state = state;
                    r.message = message.clone();
                }
                if state == RequestState::Provisioned {
                    self.outbox.event(
                        ObjectRef::Group(group.clone()),
                        EventType::Normal,
                        "Provisioned",
                        format!("ProvisioningRequest {name} provisioned; trying the gang now"),
                    );
                    self.try_gang_now(&group);
                } else if state.ended() {
                    self.request_ended(&group, state, &message, now);
                }
            }
            ProvisioningChange::Deleted { namespace, name } => {
                if let Some(group) = self.provisioning.group_of(&namespace, &name) {
                    self.provisioning.live.remove(&group);
                }
            }
        }
    }

    /// The request failed, expired or lost its capacity: delete it, say
    /// why, back off.
    fn request_ended(
        &mut self,
        group: &GroupKey,
        state: RequestState,
        message: &str,
        now: Instant,
    ) {
        let Some(r) = self.provisioning.live.remove(group) else {
            return;
        };
        let wait = self
            .provisioning
            .retry
            .get(group)
            .map_or(FIRST_RETRY, |(_, w)| (*w * 2).min(MAX_RETRY));
        self.provisioning.retry.insert(
            group.clone(),
            (crate::model::deadline::after(now, wait), wait),
        );
        self.outbox.push(Action::DeleteProvisioningRequest {
            namespace: group.definition.namespace.clone(),
            name: r.name.clone(),
        });
        self.outbox.event(
            ObjectRef::Group(group.clone()),
            EventType::Warning,
            "ProvisioningFailed",
            format!(
                "ProvisioningRequest {} {}: {message}; asking again in {}s at the earliest",
                r.name,
                state.as_str(),
                wait.as_secs()
            ),
        );
        // Members waiting for the outcome are tried again (they may
        // preempt, or ask again once the backoff ends).
        self.try_gang_now(group);
    }

    /// Lifts the gang's denial and moves its waiting members to the active
    /// queue.
    fn try_gang_now(&mut self, group: &GroupKey) {
        self.gang.lift_denial(group);
        let (gang, cache) = (&self.gang, &self.cache);
        for key in self.queue.members_of(group) {
            self.queue.retry_now(&key, |p| gang.pre_enqueue(p, cache));
        }
    }

    /// Whether the gang may preempt now, or why it waits: the preemption
    /// delay from its first failed gang cycle, and the outcome of its
    /// pending ProvisioningRequest. The gate is in front of the gang's
    /// PostFilter (preemption); `None` lets it run.
    pub(super) fn preemption_wait(
        &mut self,
        group: &GroupKey,
        first: &PodInfo,
        now: Instant,
    ) -> Option<String> {
        let args = self.gang.args_for(first).provisioning.clone();
        let since = *self
            .provisioning
            .failing_since
            .entry(group.clone())
            .or_insert(now);
        let waited = now.saturating_duration_since(since);
        if waited < args.preemption_delay {
            return Some(format!(
                "preemption delayed: waiting {}s of preemptionDelaySeconds {} before evicting anyone",
                (args.preemption_delay - waited).as_secs(),
                args.preemption_delay.as_secs()
            ));
        }
        match self.provisioning.live.get(group) {
            Some(r) if args.wait_before_preempting && r.state == RequestState::Pending => {
                Some(format!(
                    "preemption waits for the outcome of ProvisioningRequest {}",
                    r.name
                ))
            }
            _ => None,
        }
    }

    /// When the preemption delay of a gang ends, if it is running.
    pub fn preemption_delay_ends(&self, group: &GroupKey, delay: Duration) -> Option<Instant> {
        self.provisioning
            .failing_since
            .get(group)
            .map(|t| crate::model::deadline::after(*t, delay))
    }

    /// The gang started or went: its request is deleted.
    pub(super) fn provisioning_done(&mut self, group: &GroupKey) {
        self.provisioning.failing_since.remove(group);
        self.provisioning.retry.remove(group);
        if let Some(r) = self.provisioning.live.remove(group) {
            self.outbox.push(Action::DeleteProvisioningRequest {
                namespace: group.definition.namespace.clone(),
                name: r.name,
            });
        }
    }

    /// Every gang of the definition went.
    pub(super) fn provisioning_forget(&mut self, def: &DefinitionKey) {
        let groups: Vec<GroupKey> = self
            .provisioning
            .live
            .keys()
            .chain(self.provisioning.retry.keys())
            .chain(self.provisioning.failing_since.keys())
            .filter(|g| &g.definition == def)
            .cloned()
            .collect();
        for g in groups {
            self.provisioning_done(&g);
        }
    }

    /// Live requests by gang (tests, explain).
    pub fn provisioning_requests(&self) -> Vec<(GroupKey, Request)> {
        self.provisioning
            .live()
            .map(|(g, r)| (g.clone(), r.clone()))
            .collect()
    }
}
