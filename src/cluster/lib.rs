//! The simulated cluster: a Kubernetes-compatible API server (`apiserver`)
//! that kube-rs and the real kubectl talk to over HTTP, and kwok-style nodes
//! (`kwok`). It validates objects with its own validation and, for the gang
//! dialects, with the scheduler's dialect parsers (`muster_core::dialects`):
//! docs/simulated-cluster.md says which.

pub mod apiserver;
pub mod kwok;
