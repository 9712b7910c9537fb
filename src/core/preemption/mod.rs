//! Preemption's rules, apart from the engine that applies them
//! (kube-scheduler's DefaultPreemption, extended to gangs):
//!
//! * `args`: the plugin's arguments and how many candidate nodes to find;
//! * `units`: which running pods may be victims, grouped into the units
//!   evicted together (a pod, or a whole gang that may not lose a member
//!   alone), most important first, and which of them a
//!   PodDisruptionBudget protects;
//! * `cost`: how one candidate's victims compare with another's.
//!
//! The engine (`engine::preempt`, `engine::preempt_gang`) finds candidates
//! by simulating on its node table, and performs the choice.

pub mod args;
mod cost;
mod units;

pub use args::{NAME, PreemptionArgs, decode_args};
pub use cost::Cost;
pub use units::{Blocker, GangFacts, VictimUnit, reprieve_order, split_by_budgets, units_of};
