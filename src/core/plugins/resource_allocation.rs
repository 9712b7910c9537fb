//! What the resource-scoring plugins share: resolving configured resource names
//! once, and kube-scheduler's `(allocatable, requested + pod)` pair per resource.

use std::sync::Arc;

use crate::cache::NodeState;
use crate::framework::{ConfigError, CycleState};
use crate::model::{CPU, EPHEMERAL_STORAGE, MEMORY, PodInfo, is_scalar_resource};

/// A configured resource, resolved so scoring never matches strings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceKey {
    Cpu,
    Memory,
    EphemeralStorage,
    Scalar(Arc<str>),
    /// A name scoring does not account (e.g. `pods`): always skipped.
    Ignored,
}

impl ResourceKey {
    pub fn parse(name: &str) -> Self {
        match name {
            CPU => ResourceKey::Cpu,
            MEMORY => ResourceKey::Memory,
            EPHEMERAL_STORAGE => ResourceKey::EphemeralStorage,
            n if is_scalar_resource(n) => ResourceKey::Scalar(Arc::from(n)),
            _ => ResourceKey::Ignored,
        }
    }
}

/// A resource with its weight in the score.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightedResource {
    pub key: ResourceKey,
    pub weight: i64,
}

/// Which request figures a scorer reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requests {
    /// kube-scheduler's non-zero CPU/memory defaults for containers that request
    /// nothing (NodeResourcesFit scoring), so empty pods do not pile up.
    NonZero,
    /// The actual requests (BalancedAllocation).
    Actual,
}

/// The pod's request for `key`.
pub fn pod_request(key: &ResourceKey, pod: &PodInfo, requests: Requests) -> i64 {
    match (key, requests) {
        (ResourceKey::Cpu, Requests::NonZero) => pod.non_zero_milli_cpu,
        (ResourceKey::Cpu, Requests::Actual) => pod.requests.milli_cpu,
        (ResourceKey::Memory, Requests::NonZero) => pod.non_zero_memory,
        (ResourceKey::Memory, Requests::Actual) => pod.requests.memory,
        (ResourceKey::EphemeralStorage, _) => pod.requests.ephemeral_storage,
        (ResourceKey::Scalar(name), _) => pod.requests.scalar.get(name).copied().unwrap_or(0),
        (ResourceKey::Ignored, _) => 0,
    }
}

/// `(allocatable, already requested + pod_request)` for one resource, or `None`
/// when the resource takes no part in this node's score: an extended resource
/// the pod does not request or the node does not offer, or zero allocatable.
/// An extended resource a DeviceClass serves on a node that does not
/// advertise it counts the class's devices there instead (`state` holds
/// what DynamicResources' PreFilter found: `dynamic_resources::extended::
/// devices_on`).
pub fn allocatable_and_requested(
    state: &CycleState,
    key: &ResourceKey,
    node: &NodeState,
    pod_request: i64,
    requests: Requests,
) -> Option<(i64, i64)> {
    let alloc = &node.info.allocatable;
    let (allocatable, requested) = match key {
        ResourceKey::Cpu => (
            alloc.milli_cpu,
            match requests {
                Requests::NonZero => node.non_zero_milli_cpu,
                Requests::Actual => node.requested.milli_cpu,
            },
        ),
        ResourceKey::Memory => (
            alloc.memory,
            match requests {
                Requests::NonZero => node.non_zero_memory,
                Requests::Actual => node.requested.memory,
            },
        ),
        ResourceKey::EphemeralStorage => {
            (alloc.ephemeral_storage, node.requested.ephemeral_storage)
        }
        ResourceKey::Scalar(name) => {
            if pod_request == 0 {
                return None;
            }
            match alloc.scalar.get(name).copied() {
                Some(a) if a > 0 => (a, node.requested.scalar.get(name).copied().unwrap_or(0)),
                _ => super::dynamic_resources::extended::devices_on(state, name, node)?,
            }
        }
        ResourceKey::Ignored => return None,
    };
    // Saturating: the sums come from tenant quantities. A node offering a
    // negative amount takes no part either (nothing to divide by).
    (allocatable > 0).then_some((allocatable, requested.saturating_add(pod_request)))
}

/// `value * scale / divisor` without overflow (128-bit intermediate),
/// clamped to 64 bits; `divisor` must be positive.
pub fn mul_div(value: i64, scale: i64, divisor: i64) -> i64 {
    let q = i128::from(value) * i128::from(scale) / i128::from(divisor.max(1));
    i64::try_from(q).unwrap_or(if q < 0 { i64::MIN } else { i64::MAX })
}

/// Wire shapes the resource plugins' args share.
pub mod wire {
    /// `ResourceSpec` as written in args: a resource name and its weight.
    #[derive(Debug, Default, serde::Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct WireResourceSpec {
        pub name: String,
        pub weight: Option<i64>,
    }
}

/// Validates a list of `{name, weight}` at `path`: names non-empty and
/// distinct, weights in `1..=100` (1 when omitted), as kube-scheduler's
/// `validateResources`.
pub fn resource_specs(
    path: &str,
    raw: Vec<wire::WireResourceSpec>,
) -> Result<Vec<(String, i64)>, ConfigError> {
    let mut out: Vec<(String, i64)> = Vec::new();
    for (i, r) in raw.into_iter().enumerate() {
        if r.name.is_empty() {
            return Err(ConfigError::at(
                format!("{path}[{i}].name"),
                "must not be empty",
            ));
        }
        if out.iter().any(|(n, _)| *n == r.name) {
            return Err(ConfigError::at(
                format!("{path}[{i}].name"),
                format!("duplicate resource {:?}", r.name),
            ));
        }
        let weight = match r.weight {
            None => 1,
            Some(w) if (1..=100).contains(&w) => w,
            Some(w) => {
                return Err(ConfigError::at(
                    format!("{path}[{i}].weight"),
                    format!("must be between 1 and 100, got {w}"),
                ));
            }
        };
        out.push((r.name, weight));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::test_util::{node, pod_requesting};

    #[test]
    fn parses_names() {
        assert_eq!(ResourceKey::parse("cpu"), ResourceKey::Cpu);
        assert_eq!(
            ResourceKey::parse("nvidia.com/gpu"),
            ResourceKey::Scalar("nvidia.com/gpu".into())
        );
        assert_eq!(ResourceKey::parse("pods"), ResourceKey::Ignored);
    }

    #[test]
    fn extended_resources_only_count_when_requested_and_offered() {
        let gpu = ResourceKey::parse("nvidia.com/gpu");
        let with = node("a", &[("nvidia.com/gpu", "4")]).build();
        let without = node("b", &[("cpu", "4")]).build();
        assert_eq!(
            allocatable_and_requested(&CycleState::new(), &gpu, &with, 1, Requests::NonZero),
            Some((4, 1))
        );
        assert_eq!(
            allocatable_and_requested(&CycleState::new(), &gpu, &with, 0, Requests::NonZero),
            None
        );
        assert_eq!(
            allocatable_and_requested(&CycleState::new(), &gpu, &without, 1, Requests::NonZero),
            None
        );
    }

    #[test]
    fn non_zero_versus_actual() {
        let empty = pod_requesting(&[]);
        let n = node("a", &[("cpu", "4")]).with_pod(empty.clone()).build();
        let nz = pod_request(&ResourceKey::Cpu, &empty, Requests::NonZero);
        assert_eq!(nz, 100);
        assert_eq!(
            allocatable_and_requested(
                &CycleState::new(),
                &ResourceKey::Cpu,
                &n,
                nz,
                Requests::NonZero
            ),
            Some((4000, 200))
        );
        assert_eq!(
            allocatable_and_requested(
                &CycleState::new(),
                &ResourceKey::Cpu,
                &n,
                0,
                Requests::Actual
            ),
            Some((4000, 0))
        );
    }
}
