//! Kubernetes API glue: lean watch types, informers, the executor of API
//! writes, leader election, and the reviews that guard the daemon's
//! endpoints. The only module tree that imports `kube`.

mod api_calls;
mod bodies;
mod claim_writes;
pub mod client;
pub mod fence;
pub mod informers;
pub mod leader;
pub mod objects;
pub mod provisioning;
pub mod review;
pub mod writer;
