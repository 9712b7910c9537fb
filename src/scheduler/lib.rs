//! The scheduler daemon, `muster run`: the kube client, informers and the
//! API writer (`kube`), the scheduling loop around the core's engine
//! (`daemon`), HTTPS serving of probes, /metrics and /debug (`server`), and
//! the Prometheus metrics (`metrics`).

pub mod daemon;
pub mod kube;
pub mod metrics;
pub mod server;
