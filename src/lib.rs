//! Muster: a gang scheduler for Kubernetes.
//!
//! The scheduling core (`model`, `dialects`, `cache`, `queue`, `framework`,
//! `plugins`, `gang`, `engine`, `config`, `dispatch`, the write path's call
//! queue, and `driver`, the deterministic test driver) is a library with no I/O: it builds with
//! `--no-default-features` and then depends on none of kube, tokio, axum,
//! hyper or prometheus, so the compiler keeps it that way. The daemon
//! (`daemon` feature), the simulated API server (`apiserver`) and the scenario and
//! load tools (`load`) are built around it.

pub mod cache;
pub mod config;
pub mod dialects;
pub mod dispatch;
pub mod driver;
pub mod engine;
pub mod framework;
pub mod gang;
pub mod model;
pub mod plugins;
pub mod preemption;
pub mod queue;

#[cfg(feature = "daemon")]
pub mod daemon;
#[cfg(feature = "daemon")]
pub mod kube;
#[cfg(feature = "daemon")]
pub mod metrics;
#[cfg(feature = "daemon")]
pub mod server;

#[cfg(feature = "apiserver")]
pub mod apiserver;
#[cfg(feature = "apiserver")]
pub mod kwok;

#[cfg(feature = "load")]
pub mod load;
#[cfg(feature = "load")]
pub mod runner;
#[cfg(feature = "load")]
pub mod scenario;
#[cfg(feature = "load")]
pub mod simulate;
