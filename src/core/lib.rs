//! Muster's scheduling core: everything that decides where pods go, with no
//! I/O. Its manifest names none of kube, tokio, axum, hyper or prometheus, so
//! the compiler keeps it that way; the daemon (`muster-scheduler`) feeds it
//! cluster events and carries out the actions it returns.
//!
//! - `model`: the scheduler's view of pods, nodes and groups, decoded from
//!   Kubernetes objects; `dialects`: every gang dialect read into one form.
//! - `config`: the KubeSchedulerConfiguration-style configuration.
//! - `cache`, `queue`: the cluster state and the scheduling queue.
//! - `framework`, `plugins`: the extension points and the filter/score
//!   plugins; `gang`: the gang cycle, barrier and topology; `preemption`.
//! - `engine`: the coordinator that turns events into actions; `explain`:
//!   what it answers about a pod or gang (`kubectl muster explain`).
//! - `dispatch`: the write path's call queue (merging, holds, retries).
//! - `driver` (feature `testkit`): the deterministic test driver that checks
//!   the invariants after every step.

pub mod cache;
pub mod config;
pub mod dialects;
pub mod dispatch;
pub mod dra;
#[cfg(any(test, feature = "testkit"))]
pub mod driver;
pub mod engine;
pub mod explain;
pub mod framework;
pub mod gang;
pub mod model;
pub mod plugins;
pub mod preemption;
pub mod queue;
