//! A deterministic in-memory driver for the engine: a fake cluster, a fake
//! clock, a binder with injectable failures and latency, and invariant checks.

pub mod fixtures;
