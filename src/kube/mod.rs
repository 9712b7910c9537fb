//! Kubernetes API glue: lean watch types, informers, the executor of API
//! writes and leader election. The only module tree that imports `kube`.

mod api_calls;
pub mod client;
pub mod fence;
pub mod informers;
pub mod leader;
pub mod objects;
pub mod writer;
