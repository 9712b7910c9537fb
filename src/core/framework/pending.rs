//! Why a pending pod is not bound: the reason of its `PodScheduled=False`
//! condition. Cluster autoscalers read this reason: cluster-autoscaler and
//! Karpenter act on `Unschedulable` pods only, so that reason is kept for
//! one case, capacity missing (no node, or no set of nodes for a gang, has
//! room as the cluster stands). A pod waiting for anything else — its
//! group's definition, its quorum, a queue or quota, a reservation held for
//! another gang — carries its own reason and is
//! never counted as demand for nodes (docs/operations.md).

use std::fmt;

/// The reason a pending pod's `PodScheduled=False` condition names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PendingReason {
    /// Capacity is missing: no node (or no set of nodes, for a gang) has
    /// room for it as the cluster stands. The only reason an autoscaler
    /// scales for.
    Unschedulable,
    /// The pod's own `spec.schedulingGates` (Kueue's admission gate among
    /// them): kube-scheduler's reason.
    SchedulingGated,
    /// Its group's definition object (PodGroup, Workload, …) is not observed.
    WaitingForDefinition,
    /// Fewer members than the group's quorum are observed or ready (some
    /// not created yet, or behind scheduling gates).
    WaitingForMembers,
    /// The pod's ResourceClaims are not created yet.
    WaitingForResourceClaims,
    /// Room is held for a gang ahead of it (a reservation): it would fit
    /// without that hold.
    WaitingForReservation,
    /// A ProvisioningRequest for its gang is pending: capacity is being
    /// provisioned for it (the request carries the demand).
    WaitingForProvisioning,
    /// Reserved on a node at Permit, waiting for the rest of its gang.
    WaitingAtPermit,
    /// The group is unusable until a user fixes it (an invalid definition,
    /// members naming different schedulers).
    InvalidGroup,
    /// A write before the binding failed (PreBind): kube-scheduler's reason.
    SchedulerError,
}

impl PendingReason {
    /// The condition's `reason` string.
    pub fn as_str(self) -> &'static str {
        match self {
            PendingReason::Unschedulable => "Unschedulable",
            PendingReason::SchedulingGated => "SchedulingGated",
            PendingReason::WaitingForDefinition => "WaitingForDefinition",
            PendingReason::WaitingForMembers => "WaitingForMembers",
            PendingReason::WaitingForResourceClaims => "WaitingForResourceClaims",
            PendingReason::WaitingForReservation => "WaitingForReservation",
            PendingReason::WaitingForProvisioning => "WaitingForProvisioning",
            PendingReason::WaitingAtPermit => "WaitingAtPermit",
            PendingReason::InvalidGroup => "InvalidGroup",
            PendingReason::SchedulerError => "SchedulerError",
        }
    }

    /// Every reason, for documentation checks and tests.
    pub const ALL: [PendingReason; 10] = [
        PendingReason::Unschedulable,
        PendingReason::SchedulingGated,
        PendingReason::WaitingForDefinition,
        PendingReason::WaitingForMembers,
        PendingReason::WaitingForResourceClaims,
        PendingReason::WaitingForReservation,
        PendingReason::WaitingForProvisioning,
        PendingReason::WaitingAtPermit,
        PendingReason::InvalidGroup,
        PendingReason::SchedulerError,
    ];

    /// Whether an autoscaler counts the pod as demand for capacity.
    pub fn is_capacity_demand(self) -> bool {
        self == PendingReason::Unschedulable
    }
}

impl fmt::Display for PendingReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
