//! Muster: a gang scheduler for Kubernetes.
//!
//! The scheduling core (`model`, `cache`, `queue`, `framework`, `plugins`, `gang`,
//! `engine`, and the write path's call queue `dispatch`) is a deterministic
//! library with no I/O; the daemon, the simulated cluster and the load
//! generator are built around it.

pub mod cache;
pub mod config;
pub mod daemon;
pub mod dialects;
pub mod dispatch;
pub mod driver;
pub mod engine;
pub mod framework;
pub mod gang;
pub mod kube;
pub mod load;
pub mod metrics;
pub mod model;
pub mod plugins;
pub mod queue;
pub mod scenario;
pub mod server;
pub mod sim;
pub mod simulate;
