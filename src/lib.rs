//! Muster: a gang scheduler for Kubernetes.
