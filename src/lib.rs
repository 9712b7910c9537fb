//! Muster: a gang scheduler for Kubernetes.
//!
//! This crate is the `muster` binary's library: it re-exports the layers,
//! each a crate of its own, under one path for the integration tests and
//! benchmarks. The scheduling core (`muster-core`: `model`, `dialects`,
//! `config`, `cache`, `queue`, `framework`, `plugins`, `gang`, `preemption`,
//! `engine`, `dispatch`, and `driver` with its `testkit` feature) has no I/O
//! and names none of kube, tokio, axum, hyper or prometheus. The daemon
//! (`muster-scheduler`, feature `daemon`), the simulated cluster
//! (`muster-cluster`, feature `apiserver`) and the scenario and load tools
//! (`muster-tools`, feature `load`) are built around it.

pub use muster_core::*;

#[cfg(feature = "apiserver")]
pub use muster_cluster::*;

#[cfg(feature = "daemon")]
pub use muster_scheduler::*;

#[cfg(feature = "load")]
pub use muster_tools::*;
