//! The scenario and load tooling: scenario files (`scenario`), the scenario
//! runner (`runner`), `muster simulate` (`simulate`: the simulated cluster and
//! the scheduler in one process) and the `muster load` generator and report
//! (`load`), and the kubectl plugin (`kubectl`: explain, what-if).

pub mod kubectl;
pub mod load;
pub mod runner;
pub mod scenario;
pub mod simulate;
