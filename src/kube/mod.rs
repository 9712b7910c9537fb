//! Kubernetes API glue: lean watch types, informers, API writes and leader
//! election. The only module tree that imports `kube`.

pub mod client;
pub mod informers;
pub mod leader;
pub mod objects;
pub mod writer;
