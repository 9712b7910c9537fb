//! Dynamic Resource Allocation (`resource.k8s.io`) as kube-apiserver 1.37
//! and its DRA controllers serve it. The kinds themselves are table entries
//! (`registry`); this module owns what is particular to them:
//! - [`validate`]: admission validation and defaulting of the five kinds;
//! - [`cel`]: the compile check of CEL device selectors;
//! - [`table`]: `kubectl get` columns;
//! - [`controller`]: the resourceclaim controller (claims from templates,
//!   reservations released, deallocation, generated claims deleted);
//! - [`consumer`]: what the fake kubelet needs of a pod's claims to start it;
//! - [`driver`]: a kwok-style DRA driver publishing the ResourceSlices of
//!   nodes whose template declares devices;
//! - [`pod_groups`]: claims PodGroups share with their members (KEP-5729).

pub mod cel;
pub mod consumer;
pub mod controller;
pub mod driver;
pub mod pod_groups;
pub mod table;
pub mod validate;

/// The API group.
pub const GROUP: &str = "resource.k8s.io";
