//! Extended resources backed by DRA (KEP-5004), the allocator's half: which
//! DeviceClass serves an extended resource, and the claim a pod's extended
//! resources make on a node that does not advertise them — one device
//! request per container and resource, named as kube-scheduler names them
//! (`container-<index>-request-<position>`), with the mappings recorded in
//! the pod's `status.extendedResourceClaimStatus`.
//!
//! The claim is built in memory under a placeholder name (not a valid
//! object name, so it never meets a real claim) and created, with its
//! allocation, by the pod's binding.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::model::{Alternative, Claim, DeviceClass, Mode, Request};
use crate::model::extended::{ContainerExtended, DEVICE_CLASS_PREFIX};

/// Marks a claim made for a pod's extended resources.
pub const CLAIM_ANNOTATION: &str = "resource.kubernetes.io/extended-resource-claim";

/// The placeholder name of a pod's extended-resource claim before it is
/// created (`<extended-resources>/<pod uid>`).
pub fn placeholder_name(pod_uid: &str) -> String {
    format!("<extended-resources>/{pod_uid}")
}

/// Whether `name` is a placeholder (`placeholder_name`).
pub fn is_placeholder(name: &str) -> bool {
    name.starts_with("<extended-resources>/")
}

/// The class serving `resource`: the class a
/// `deviceclass.resource.kubernetes.io/<class>` name names, else the newest
/// class with that `extendedResourceName` (of two as old, the first by
/// name), as kube-apiserver documents the field.
pub fn class_for<'a>(
    resource: &str,
    classes: impl IntoIterator<Item = &'a DeviceClass>,
) -> Option<&'a DeviceClass> {
    if let Some(name) = resource.strip_prefix(DEVICE_CLASS_PREFIX) {
        return classes.into_iter().find(|c| *c.name == *name);
    }
    classes
        .into_iter()
        .filter(|c| c.extended_resource_name.as_deref() == Some(resource))
        .min_by(|a, b| b.created_ms.cmp(&a.created_ms).then(a.name.cmp(&b.name)))
}

/// One device request of the claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtendedDeviceRequest {
    pub name: Arc<str>,
    pub class: Arc<str>,
    pub count: u32,
}

/// `status.extendedResourceClaimStatus.requestMappings[]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestMapping {
    pub container: Arc<str>,
    pub resource: Arc<str>,
    pub request: Arc<str>,
}

/// What a pod's extended-resource claim asks for on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtendedClaim {
    /// The owner pod's name and uid.
    pub pod_name: Arc<str>,
    pub pod_uid: Arc<str>,
    /// In name order.
    pub requests: Vec<ExtendedDeviceRequest>,
    pub mappings: Vec<RequestMapping>,
    /// The resources served, each with its class.
    pub resources: BTreeMap<Arc<str>, Arc<str>>,
}

impl ExtendedClaim {
    /// The claim for the allocator, named `placeholder_name(pod_uid)`.
    pub fn claim(&self, namespace: &str) -> Claim {
        Claim {
            namespace: Arc::from(namespace),
            name: Arc::from(placeholder_name(&self.pod_uid)),
            uid: Arc::from(""),
            requests: self
                .requests
                .iter()
                .map(|r| Request {
                    name: r.name.clone(),
                    alternatives: vec![Alternative {
                        name: r.name.clone(),
                        class: r.class.clone(),
                        selectors: Vec::new(),
                        mode: Mode::Exact(r.count),
                        admin_access: false,
                        tolerations: Vec::new(),
                        capacity: Vec::new(),
                    }],
                })
                .collect(),
            constraints: Vec::new(),
            allocation: None,
            reserved_for: Vec::new(),
            owner_pod: Some(self.pod_uid.clone()),
            owner_group: None,
            deleting: false,
            extended: true,
            resource_version: None,
        }
    }

    /// A node's reason with the placeholder and request names replaced by
    /// the extended resources they serve.
    pub fn explain(&self, namespace: &str, reason: &str) -> String {
        let placeholder = format!("claim {namespace}/{}", placeholder_name(&self.pod_uid));
        let mut out = reason.to_string();
        for r in &self.requests {
            let resource = self
                .mappings
                .iter()
                .find(|m| m.request == r.name)
                .map_or("?", |m| &*m.resource);
            out = out.replace(
                &format!("{placeholder}: request {}:", r.name),
                &format!("extended resource {resource}:"),
            );
        }
        out.replace(&placeholder, "the claim of the pod's extended resources")
    }
}

/// The claim for `containers`' requests of `on_dra` (resource → class),
/// as kube-scheduler builds it: per resource, a request for each long-lived
/// container (regular or sidecar); a short-lived init container first uses
/// the requests of the long-lived containers after it and asks for the
/// rest, and the short-lived containers share the largest of their
/// requests. `None` when no container asks for those resources.
pub fn build(
    containers: &[ContainerExtended],
    on_dra: &BTreeMap<Arc<str>, Arc<str>>,
    pod_name: &str,
    pod_uid: &str,
) -> Option<ExtendedClaim> {
    let mut requests: Vec<ExtendedDeviceRequest> = Vec::new();
    let mut mappings = Vec::new();
    for (resource, class) in on_dra {
        let want = |c: &ContainerExtended| {
            c.requests
                .iter()
                .find(|r| r.resource == *resource)
                .map(|r| (r.position, r.count))
        };
        let name = |c: &ContainerExtended, position: u32| -> Arc<str> {
            Arc::from(format!("container-{}-request-{position}", c.index))
        };
        // Long-lived containers, in index order: each its own request.
        let mut long: Vec<(u32, ExtendedDeviceRequest)> = Vec::new();
        let mut long_mappings = Vec::new();
        for c in containers.iter().filter(|c| !c.short_lived) {
            let Some((position, count)) = want(c) else {
                continue;
            };
            let r = ExtendedDeviceRequest {
                name: name(c, position),
                class: class.clone(),
                count: u32::try_from(count).unwrap_or(u32::MAX),
            };
            long_mappings.push(RequestMapping {
                container: c.name.clone(),
                resource: resource.clone(),
                request: r.name.clone(),
            });
            long.push((c.index, r));
        }
        let mut largest: Option<ExtendedDeviceRequest> = None;
        let mut short_names: Vec<Arc<str>> = Vec::new();
        let mut short_mappings: Vec<RequestMapping> = Vec::new();
        for c in containers.iter().filter(|c| c.short_lived) {
            let Some((position, count)) = want(c) else {
                continue;
            };
            let mapping = |request: &Arc<str>| RequestMapping {
                container: c.name.clone(),
                resource: resource.clone(),
                request: request.clone(),
            };
            // The devices of the long-lived containers started after it.
            let mut reused = 0i64;
            let mut covered = false;
            for (_, r) in long.iter().filter(|(i, _)| *i >= c.index) {
                reused += i64::from(r.count);
                short_mappings.push(mapping(&r.name));
                if reused >= count {
                    covered = true;
                    break;
                }
            }
            if covered {
                continue;
            }
            let r = ExtendedDeviceRequest {
                name: name(c, position),
                class: class.clone(),
                count: u32::try_from(count - reused).unwrap_or(u32::MAX),
            };
            short_mappings.push(mapping(&r.name));
            short_names.push(r.name.clone());
            if largest.as_ref().is_none_or(|l| l.count < r.count) {
                largest = Some(r);
            }
        }
        if let Some(l) = &largest {
            for m in &mut short_mappings {
                if short_names.contains(&m.request) {
                    m.request = l.name.clone();
                }
            }
        }
        requests.extend(largest);
        requests.extend(long.into_iter().map(|(_, r)| r));
        mappings.extend(long_mappings);
        mappings.extend(short_mappings);
    }
    if requests.is_empty() {
        return None;
    }
    requests.sort_by(|a, b| a.name.cmp(&b.name));
    Some(ExtendedClaim {
        pod_name: Arc::from(pod_name),
        pod_uid: Arc::from(pod_uid),
        requests,
        mappings,
        resources: on_dra.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::extended::ExtendedRequest;

    fn container(
        index: u32,
        name: &str,
        short: bool,
        reqs: &[(&str, u32, i64)],
    ) -> ContainerExtended {
        ContainerExtended {
            index,
            name: Arc::from(name),
            short_lived: short,
            requests: reqs
                .iter()
                .map(|(r, p, n)| ExtendedRequest {
                    resource: Arc::from(*r),
                    position: *p,
                    count: *n,
                })
                .collect(),
        }
    }

    fn on(pairs: &[(&str, &str)]) -> BTreeMap<Arc<str>, Arc<str>> {
        pairs
            .iter()
            .map(|(r, c)| (Arc::from(*r), Arc::from(*c)))
            .collect()
    }

    fn class(name: &str, ext: Option<&str>, created_ms: i64) -> DeviceClass {
        DeviceClass {
            name: Arc::from(name),
            selectors: Vec::new(),
            config: Vec::new(),
            extended_resource_name: ext.map(Arc::from),
            created_ms,
        }
    }

    #[test]
    fn one_request_per_container_and_resource() {
        let cs = [
            container(0, "a", false, &[("example.com/gpu", 1, 2)]),
            container(
                1,
                "b",
                false,
                &[("example.com/gpu", 0, 1), ("example.com/nic", 1, 1)],
            ),
        ];
        let x = build(
            &cs,
            &on(&[
                ("example.com/gpu", "gpu.example.com"),
                ("example.com/nic", "nic"),
            ]),
            "p",
            "u",
        )
        .unwrap();
        let names: Vec<(&str, &str, u32)> = x
            .requests
            .iter()
            .map(|r| (&*r.name, &*r.class, r.count))
            .collect();
        assert_eq!(
            names,
            [
                ("container-0-request-1", "gpu.example.com", 2),
                ("container-1-request-0", "gpu.example.com", 1),
                ("container-1-request-1", "nic", 1),
            ]
        );
        assert_eq!(x.mappings.len(), 3);
        assert_eq!(&*x.mappings[2].container, "b");
        assert_eq!(&*x.mappings[2].resource, "example.com/nic");
        let claim = x.claim("ns");
        assert_eq!(&*claim.name, "<extended-resources>/u");
        assert!(matches!(
            claim.requests[0].alternatives[0].mode,
            Mode::Exact(2)
        ));
        assert!(claim.extended);
    }

    #[test]
    fn resources_not_on_dra_make_no_request() {
        let cs = [container(0, "a", false, &[("example.com/gpu", 0, 2)])];
        assert!(build(&cs, &on(&[("example.com/nic", "nic")]), "p", "u").is_none());
    }

    #[test]
    fn init_containers_reuse_later_devices_and_share_the_largest() {
        // init0 wants 3 (the main container's 2 are reused, 1 more asked),
        // init1 wants 1 (covered by main's 2): one short-lived request.
        let cs = [
            container(0, "init0", true, &[("example.com/gpu", 0, 3)]),
            container(1, "init1", true, &[("example.com/gpu", 0, 1)]),
            container(2, "main", false, &[("example.com/gpu", 0, 2)]),
        ];
        let x = build(&cs, &on(&[("example.com/gpu", "g")]), "p", "u").unwrap();
        let names: Vec<(&str, u32)> = x.requests.iter().map(|r| (&*r.name, r.count)).collect();
        assert_eq!(
            names,
            [("container-0-request-0", 1), ("container-2-request-0", 2)]
        );
        let m: Vec<(&str, &str)> = x
            .mappings
            .iter()
            .map(|m| (&*m.container, &*m.request))
            .collect();
        assert_eq!(
            m,
            [
                ("main", "container-2-request-0"),
                ("init0", "container-2-request-0"),
                ("init0", "container-0-request-0"),
                ("init1", "container-2-request-0"),
            ]
        );
    }

    #[test]
    fn the_newest_class_serves_a_name_and_implicit_names_pick_their_class() {
        let classes = [
            class("old", Some("example.com/gpu"), 1),
            class("new-b", Some("example.com/gpu"), 5),
            class("new-a", Some("example.com/gpu"), 5),
        ];
        assert_eq!(
            &*class_for("example.com/gpu", &classes).unwrap().name,
            "new-a"
        );
        assert_eq!(
            &*class_for("deviceclass.resource.kubernetes.io/old", &classes)
                .unwrap()
                .name,
            "old"
        );
        assert!(class_for("example.com/nic", &classes).is_none());
    }

    #[test]
    fn reasons_name_the_extended_resource() {
        let cs = [container(0, "a", false, &[("example.com/gpu", 0, 2)])];
        let x = build(&cs, &on(&[("example.com/gpu", "g")]), "p", "u").unwrap();
        let reason = "cannot allocate claim ns/<extended-resources>/u: request container-0-request-0: 2 device(s) of class g wanted, 0 free";
        assert_eq!(
            x.explain("ns", reason),
            "cannot allocate extended resource example.com/gpu: 2 device(s) of class g wanted, 0 free"
        );
    }
}
