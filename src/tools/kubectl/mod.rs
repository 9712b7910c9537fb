//! The kubectl plugin (`kubectl muster`, the `muster` binary installed as
//! `kubectl-muster`): `explain` asks the leading scheduler why a pod or
//! gang is where it is (`explain`, `fallback`); `what-if` answers whether
//! FILE would fit, offline, from a read-only listing of the cluster
//! (`what_if`, `simulation`). `connect` finds the cluster and the
//! scheduler.

pub mod connect;
pub mod explain;
pub mod fallback;
pub mod simulation;
pub mod what_if;

/// What a command's exit code tells a script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Bound (explain) or fits now (what-if): 0.
    Yes,
    /// Fits only by preempting others (what-if): 3.
    ByPreemption,
    /// Not bound (explain) or does not fit (what-if): 4.
    No,
}

impl Exit {
    pub fn code(self) -> u8 {
        match self {
            Exit::Yes => 0,
            Exit::ByPreemption => 3,
            Exit::No => 4,
        }
    }
}
