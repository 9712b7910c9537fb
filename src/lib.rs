//! Muster: a gang scheduler for Kubernetes.
pub mod sim;
