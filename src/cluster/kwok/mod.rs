//! The kwok-style fake fleet shared by the simulated API server (`muster
//! cluster --node-template`) and the scenario tools: node templates, the
//! DRA devices they may declare (`devices`), the node pools the simulated
//! autoscaler grows (`pools`), and the
//! annotation that tells the fake kubelet how long a pod runs. Pure data; the
//! server's lifecycle that acts on it is `crate::apiserver::kubelet`.

pub mod devices;
pub mod pools;
pub mod templates;

/// The annotation giving a pod's run time before it succeeds.
pub const RUN_SECONDS_ANNOTATION: &str = "muster.dev/sim-run-seconds";
