//! A deterministic in-memory driver for the engine: a fake cluster, a fake
//! clock, a binder with injectable failures and latency that reports back the
//! way an informer would, and the invariant checks I1–I4 of gang-semantics.md.

pub mod fixtures;
mod harness;
mod invariants;

pub use harness::{BindRecord, Harness};
