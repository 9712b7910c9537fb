//! A pod's requests of extended resources that a DeviceClass may serve
//! (KEP-5004, "extended resources backed by DRA"), per container: what the
//! DynamicResources plugin needs to build the pod's extended-resource claim
//! (one device request per container and resource) on nodes that do not
//! advertise the resource.
//!
//! Only containers that request such a resource are kept, so most pods
//! hold an empty list.

use std::sync::Arc;

use super::ModelError;
use super::Quantity;
use super::wire::{ContainerWire, PodWire};

/// The prefix of a class's implicit extended resource name:
/// `deviceclass.resource.kubernetes.io/<class>`.
pub const DEVICE_CLASS_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

/// The most devices one container may ask for through one extended
/// resource (the API's bound on a request's `count`).
pub const MAX_EXTENDED_COUNT: i64 = 32;

/// One container (init or regular) with requests that may be served by DRA.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ContainerExtended {
    /// Index over `initContainers` then `containers` (upstream names the
    /// device requests after it: `container-<index>-request-<n>`).
    pub index: u32,
    pub name: Arc<str>,
    /// An init container that is not a sidecar: it runs before the others
    /// and may reuse their devices.
    pub short_lived: bool,
    /// The resources the container requests that DRA may serve, each with
    /// its position among all the container's requested resource names in
    /// sorted order, and its amount (non-zero, whole).
    pub requests: Vec<ExtendedRequest>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ExtendedRequest {
    pub resource: Arc<str>,
    /// Position of `resource` among the container's request names, sorted.
    pub position: u32,
    pub count: i64,
}

/// kube-apiserver's `IsExtendedResourceName`: a qualified name outside the
/// `kubernetes.io` domains, which `requests.` can prefix.
pub fn is_extended_resource_name(name: &str) -> bool {
    if !name.contains('/') || name.contains("kubernetes.io/") || name.starts_with("requests.") {
        return false;
    }
    is_qualified_name(&format!("requests.{name}"))
}

/// A name DRA may serve: an extended resource name, or a class's implicit
/// one (`deviceclass.resource.kubernetes.io/<class>`).
pub fn is_dra_extended_resource_name(name: &str) -> bool {
    name.starts_with(DEVICE_CLASS_PREFIX) || is_extended_resource_name(name)
}

/// A Kubernetes qualified name: an optional DNS-subdomain prefix and `/`,
/// then a name of at most 63 characters.
pub fn is_qualified_name(value: &str) -> bool {
    let (prefix, name) = match value.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, value),
    };
    if name.contains('/') {
        return false;
    }
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && label.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && label
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
    });
    name_ok && prefix_ok
}

/// The containers of `w` with requests DRA may serve (limits count as
/// requests where requests do not name the resource, as the API server
/// defaults them).
pub(super) fn extended_containers(w: &PodWire) -> Result<Vec<ContainerExtended>, ModelError> {
    let mut out = Vec::new();
    let all = w
        .spec
        .init_containers
        .iter()
        .map(|c| (c, true, "initContainers"))
        .enumerate()
        .chain(
            w.spec
                .containers
                .iter()
                .enumerate()
                .map(|(i, c)| (i, (c, false, "containers"))),
        )
        .collect::<Vec<_>>();
    for (index, (i_in_list, (c, init, list))) in all.into_iter().enumerate() {
        if let Some(x) = container(c, init, index, &format!("spec.{list}[{i_in_list}]"))? {
            out.push(x);
        }
    }
    Ok(out)
}

fn container(
    c: &ContainerWire,
    init: bool,
    index: usize,
    path: &str,
) -> Result<Option<ContainerExtended>, ModelError> {
    let Some(r) = &c.resources else {
        return Ok(None);
    };
    let mut names: Vec<&str> = r
        .requests
        .keys()
        .chain(r.limits.keys())
        .map(String::as_str)
        .collect();
    names.sort_unstable();
    names.dedup();
    let mut requests = Vec::new();
    for (position, name) in names.iter().enumerate() {
        if !is_dra_extended_resource_name(name) {
            continue;
        }
        let (raw, field) = match r.requests.get(*name) {
            Some(q) => (q.as_string(), "requests"),
            None => (r.limits[*name].as_string(), "limits"),
        };
        let at = || format!("{path}.resources.{field}.{name}");
        let q = Quantity::parse(&raw).map_err(|e| ModelError::invalid(format!("{}: {e}", at())))?;
        if !q.is_integer() {
            return Err(ModelError::invalid(format!(
                "{}: an extended resource must be a whole number, got {raw:?}",
                at()
            )));
        }
        let count = q.value();
        if count == 0 {
            continue;
        }
        requests.push(ExtendedRequest {
            resource: Arc::from(*name),
            position: u32::try_from(position).unwrap_or(u32::MAX),
            count,
        });
    }
    if requests.is_empty() {
        return Ok(None);
    }
    Ok(Some(ContainerExtended {
        index: u32::try_from(index).unwrap_or(u32::MAX),
        name: Arc::from(c.name.as_str()),
        short_lived: init && c.restart_policy.as_deref() != Some("Always"),
        requests,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extended_resource_names() {
        assert!(is_extended_resource_name("example.com/gpu"));
        assert!(is_extended_resource_name("nvidia.com/gpu"));
        assert!(!is_extended_resource_name("cpu"));
        assert!(!is_extended_resource_name("kubernetes.io/gpu"));
        assert!(!is_extended_resource_name("foo.kubernetes.io/gpu"));
        assert!(!is_extended_resource_name("requests.example.com/gpu"));
        assert!(!is_extended_resource_name("Example.com/gpu"));
        assert!(!is_extended_resource_name("example.com/-gpu"));
        assert!(is_dra_extended_resource_name(
            "deviceclass.resource.kubernetes.io/gpu.example.com"
        ));
        assert!(!is_dra_extended_resource_name("hugepages-2Mi"));
    }

    #[test]
    fn containers_are_indexed_over_init_then_regular() {
        let w: PodWire = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {
                "initContainers": [
                    {"name": "init", "resources": {"limits": {"example.com/gpu": "1"}}},
                    {"name": "side", "restartPolicy": "Always",
                     "resources": {"requests": {"cpu": "1"}}}
                ],
                "containers": [
                    {"name": "main", "resources": {
                        "requests": {"cpu": "1", "example.com/gpu": "2", "zz.io/x": "0"},
                        "limits": {"example.com/gpu": "2", "memory": "1Gi"}}}
                ]
            }
        }))
        .unwrap();
        let got = extended_containers(&w).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].index, got[0].short_lived), (0, true));
        assert_eq!(got[1].index, 2);
        assert!(!got[1].short_lived);
        // cpu, example.com/gpu, memory, zz.io/x: the gpu is the second.
        assert_eq!(got[1].requests.len(), 1);
        assert_eq!(got[1].requests[0].position, 1);
        assert_eq!(got[1].requests[0].count, 2);
    }

    #[test]
    fn fractional_extended_resources_are_refused() {
        let w: PodWire = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c",
                "resources": {"requests": {"example.com/gpu": "500m"}}}]}
        }))
        .unwrap();
        let e = extended_containers(&w).unwrap_err();
        assert!(e.0.contains("spec.containers[0].resources.requests.example.com/gpu"));
    }
}
