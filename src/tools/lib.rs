//! The scenario and load tooling: scenario files (`scenario`), the scenario
//! runner (`runner`), `muster simulate` (`simulate`: the simulated cluster and
//! the scheduler in one process) and the `muster load` generator and report
//! (`load`).

pub mod load;
pub mod runner;
pub mod scenario;
pub mod simulate;
