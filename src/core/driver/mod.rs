//! A deterministic in-memory driver for the engine: a fake cluster, a fake
//! clock, a binder with injectable failures and latency that reports back the
//! way an informer would, and the invariant checks I1–I4 of gang-semantics.md, and I5: no binding
//! violates a `DoNotSchedule` topology spread constraint.

mod dra_cluster;
pub mod dra_fixtures;
pub mod fixtures;
mod harness;
mod invariants;
mod spread_invariant;

pub use harness::{BindRecord, Harness, WALL_START_MS};
