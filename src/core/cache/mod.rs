//! The scheduler's cache: every node with the pods accounted on it, the pods
//! this scheduler has assumed, and per-group membership.
//!
//! The dense node table (`Cache::nodes`) *is* the per-cycle snapshot: the
//! scheduling loop is single-threaded, so the slice is consistent for the whole
//! cycle and is updated incrementally by events, never rebuilt.

pub mod dra;
mod facts;
mod groups;
mod images;
mod label_ids;
mod node_changes;
mod node_state;
mod pod_index;
mod selectors;
mod store;
pub mod volumes;

pub use dra::{ClaimProblem, DraChange, DraFacts, Lifted, ResourceClaimKey, UsedClaim};
pub use facts::{ClusterFacts, Labels};
pub use groups::{GroupMembers, MemberState};
pub use images::ImageSpread;
pub use label_ids::{LabelIds, NodeLabelIds, pack as pack_label_pair};
pub use node_changes::NodeChanges;
pub use node_state::NodeState;
pub use pod_index::{IndexedTerm, PodIndex, TermKind};
pub use selectors::{SelectingKind, WorkloadSelectors};
pub use store::{Cache, CachedPod, PodChange, PodState, WhatIf};
pub use volumes::{VolumeChange, VolumeFacts};
