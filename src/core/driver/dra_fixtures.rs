//! Builders for `resource.k8s.io` objects as the informers report them
//! (`DraChange`s): a driver's per-node slice of GPUs, a device class, and
//! claims — named, or generated for a pod from a template — with the pod
//! fields that refer to them. Devices belong to driver `gpu.example.com`
//! and carry `index`, `model` and `clique` attributes; a node may also
//! publish a shared NIC (driver `nic.example.com`, `allowMultipleAllocations`)
//! whose bandwidth claims consume.

use std::sync::Arc;

use k8s_openapi::api::resource::v1 as api;
use serde_json::{Value, json};

use crate::cache::{DraChange, ResourceClaimKey};
use crate::dra::{Claim, DeviceClass, Slice};
use crate::model::PodInfo;
use crate::model::pod_claims::{ClaimSource, Generated, GroupClaims, PodClaim};

pub const DRIVER: &str = "gpu.example.com";
/// The class every fixture device belongs to.
pub const GPU_CLASS: &str = "gpu.example.com";

/// Node `node`'s slice: `count` GPUs `gpu-0..`, in clique `clique`.
pub fn node_slice(node: &str, count: usize, clique: &str) -> DraChange {
    let devices: Vec<Value> = (0..count)
        .map(|i| {
            json!({
                "name": format!("gpu-{i}"),
                "attributes": {
                    "index": {"int": i},
                    "model": {"string": "h100"},
                    "clique": {"string": clique},
                },
                "capacity": {"memory": {"value": "80Gi"}},
            })
        })
        .collect();
    gpu_slice(node, devices)
}

/// Node `node`'s slice of the GPU driver with `devices`.
fn gpu_slice(node: &str, devices: Vec<Value>) -> DraChange {
    let s: api::ResourceSlice = serde_json::from_value(json!({
        "metadata": {"name": format!("{node}-{DRIVER}")},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        }
    }))
    .expect("slice");
    DraChange::SliceUpserted {
        name: Arc::from(format!("{node}-{DRIVER}")),
        slice: Ok(Arc::new(Slice::from_api(&s).expect("slice"))),
    }
}

/// A node's slice withdrawn.
pub fn slice_deleted(node: &str) -> DraChange {
    DraChange::SliceDeleted(Arc::from(format!("{node}-{DRIVER}")))
}

/// The GPU class.
pub fn gpu_class() -> DraChange {
    let c: api::DeviceClass = serde_json::from_value(json!({
        "metadata": {"name": GPU_CLASS},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == '{DRIVER}'")}}]},
    }))
    .expect("class");
    DraChange::ClassUpserted {
        name: Arc::from(GPU_CLASS),
        class: Ok(Arc::new(DeviceClass::from_api(&c).expect("class"))),
    }
}

/// A claim for `count` GPUs of one clique (`matchAttribute`), unallocated.
pub fn gpu_claim(namespace: &str, name: &str, count: u32) -> Claim {
    claim_from(json!({
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-claim-{name}")},
        "spec": {"devices": {
            "requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, "count": count}}],
            "constraints": [{"matchAttribute": format!("{DRIVER}/clique")}],
        }},
    }))
}

/// The claim generated from a template for `owner` (controlled by it).
pub fn generated_claim(owner: &PodInfo, name: &str, count: u32) -> Claim {
    let mut c = gpu_claim(&owner.key.namespace, name, count);
    c.owner_pod = Some(owner.uid.clone());
    c
}

pub const NIC_DRIVER: &str = "nic.example.com";
pub const NIC_CLASS: &str = "nic.example.com";

/// Node `node`'s NIC slice: one NIC `nic-0` many claims share, with
/// `100G` of bandwidth consumed in steps of `10G` (`10G` by default).
pub fn nic_slice(node: &str) -> DraChange {
    let name = nic_slice_name(node);
    let s: api::ResourceSlice = serde_json::from_value(json!({
        "metadata": {"name": &name},
        "spec": {
            "driver": NIC_DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{
                "name": "nic-0",
                "allowMultipleAllocations": true,
                "capacity": {"bandwidth": {"value": "100G", "requestPolicy": {
                    "default": "10G", "validRange": {"min": "10G", "step": "10G"}}}},
            }],
        }
    }))
    .expect("slice");
    DraChange::SliceUpserted {
        name: Arc::from(name),
        slice: Ok(Arc::new(Slice::from_api(&s).expect("slice"))),
    }
}

pub fn nic_slice_name(node: &str) -> String {
    format!("{node}-{NIC_DRIVER}")
}

pub fn nic_class() -> DraChange {
    let c: api::DeviceClass = serde_json::from_value(json!({
        "metadata": {"name": NIC_CLASS},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == '{NIC_DRIVER}'")}}]},
    }))
    .expect("class");
    DraChange::ClassUpserted {
        name: Arc::from(NIC_CLASS),
        class: Ok(Arc::new(DeviceClass::from_api(&c).expect("class"))),
    }
}

/// A claim for `gbps` of a shared NIC's bandwidth, unallocated.
pub fn nic_claim(namespace: &str, name: &str, gbps: u32) -> Claim {
    claim_from(json!({
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-claim-{name}")},
        "spec": {"devices": {
            "requests": [{"name": "nic", "exactly": {"deviceClassName": NIC_CLASS,
                "capacity": {"requests": {"bandwidth": format!("{gbps}G")}}}}],
        }},
    }))
}

pub fn claim_from(v: Value) -> Claim {
    let c: api::ResourceClaim = serde_json::from_value(v).expect("claim");
    Claim::from_api(&c).expect("claim")
}

/// The claim observed (created or changed).
pub fn claim_upserted(c: Claim) -> DraChange {
    DraChange::ClaimUpserted {
        key: ResourceClaimKey::new(&c.namespace, &c.name),
        claim: Ok(Arc::new(c)),
    }
}

pub fn claim_deleted(namespace: &str, name: &str) -> DraChange {
    DraChange::ClaimDeleted(ResourceClaimKey::new(namespace, name))
}

/// `pod` with `spec.resourceClaims` entries: `(entry, claim)` by name.
pub fn with_claims(mut pod: PodInfo, claims: &[(&str, &str)]) -> PodInfo {
    let c = Arc::make_mut(&mut pod.constraints);
    for (entry, claim) in claims {
        c.resource_claims.push(PodClaim {
            name: Arc::from(*entry),
            source: ClaimSource::Named(Arc::from(*claim)),
        });
    }
    pod
}

/// `pod` with one entry from a template, generated as `generated` (or not
/// yet, with `None`).
pub fn with_template_claim(mut pod: PodInfo, entry: &str, generated: Option<&str>) -> PodInfo {
    let c = Arc::make_mut(&mut pod.constraints);
    c.resource_claims.push(PodClaim {
        name: Arc::from(entry),
        source: ClaimSource::Template {
            template: Arc::from(format!("{entry}-template")),
            generated: match generated {
                Some(g) => Generated::Claim(Arc::from(g)),
                None => Generated::Pending,
            },
        },
    });
    pod
}

/// The GPU class serving the extended resource `resource`
/// (`spec.extendedResourceName`).
pub fn gpu_class_serving(resource: &str) -> DraChange {
    let c: api::DeviceClass = serde_json::from_value(json!({
        "metadata": {"name": GPU_CLASS},
        "spec": {
            "selectors": [{"cel": {"expression": format!("device.driver == '{DRIVER}'")}}],
            "extendedResourceName": resource,
        },
    }))
    .expect("class");
    DraChange::ClassUpserted {
        name: Arc::from(GPU_CLASS),
        class: Ok(Arc::new(DeviceClass::from_api(&c).expect("class"))),
    }
}

/// The pod asking for `count` of the extended resource `resource` in its
/// one container (`main`), as `resources.limits` would.
pub fn with_extended(mut pod: PodInfo, resource: &str, count: i64) -> PodInfo {
    use crate::model::extended::{ContainerExtended, ExtendedRequest};
    pod.requests.scalar.insert(Arc::from(resource), count);
    Arc::make_mut(&mut pod.constraints).extended = vec![ContainerExtended {
        index: 0,
        name: Arc::from("main"),
        short_lived: false,
        requests: vec![ExtendedRequest {
            resource: Arc::from(resource),
            position: 0,
            count,
        }],
    }];
    pod
}

/// Node `node`'s slice of GPUs `gpu-0..`, each under the PCIe root its
/// entry of `roots` names (attribute `pcieRoot`).
pub fn pcie_slice(node: &str, roots: &[&str]) -> DraChange {
    let devices: Vec<Value> = roots
        .iter()
        .enumerate()
        .map(|(i, root)| {
            json!({"name": format!("gpu-{i}"), "attributes": {
                "index": {"int": i}, "pcieRoot": {"string": root}}})
        })
        .collect();
    gpu_slice(node, devices)
}

/// A claim for `count` GPUs, all under one PCIe root when `same_root`.
pub fn pcie_claim(namespace: &str, name: &str, count: u32, same_root: bool) -> Claim {
    let constraints = match same_root {
        true => json!([{"matchAttribute": format!("{DRIVER}/pcieRoot")}]),
        false => json!([]),
    };
    claim_from(json!({
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-claim-{name}")},
        "spec": {"devices": {
            "requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, "count": count}}],
            "constraints": constraints,
        }},
    }))
}

/// The claims a PodGroup named `group` (uid `uid-<group>`) shares with its
/// members: `(entry, claim)` by name.
pub fn group_claims(group: &str, claims: &[(&str, &str)]) -> Arc<GroupClaims> {
    Arc::new(GroupClaims {
        group: Arc::from(group),
        uid: Arc::from(format!("uid-{group}")),
        entries: claims
            .iter()
            .map(|(entry, claim)| PodClaim {
                name: Arc::from(*entry),
                source: ClaimSource::Named(Arc::from(*claim)),
            })
            .collect(),
    })
}

pub const RACK_DRIVER: &str = "rack.example.com";
pub const RACK_CLASS: &str = "rack.example.com";
/// The node label a rack-unit device's slice selects its nodes by.
pub const RACK_LABEL: &str = "example.com/rack";

/// Rack `rack`'s interconnect unit: one device every node labelled
/// [`RACK_LABEL`]` = rack` reaches (a slice with a `nodeSelector`).
pub fn rack_unit_slice(rack: &str) -> DraChange {
    let s: api::ResourceSlice = serde_json::from_value(json!({
        "metadata": {"name": format!("{rack}-{RACK_DRIVER}")},
        "spec": {
            "driver": RACK_DRIVER,
            "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": RACK_LABEL, "operator": "In", "values": [rack]}]}]},
            "pool": {"name": rack, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "unit"}],
        }
    }))
    .expect("slice");
    DraChange::SliceUpserted {
        name: Arc::from(format!("{rack}-{RACK_DRIVER}")),
        slice: Ok(Arc::new(Slice::from_api(&s).expect("slice"))),
    }
}

/// The rack-unit class.
pub fn rack_class() -> DraChange {
    let c: api::DeviceClass = serde_json::from_value(json!({
        "metadata": {"name": RACK_CLASS},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == '{RACK_DRIVER}'")}}]},
    }))
    .expect("class");
    DraChange::ClassUpserted {
        name: Arc::from(RACK_CLASS),
        class: Ok(Arc::new(DeviceClass::from_api(&c).expect("class"))),
    }
}

/// A claim for one rack unit, unallocated.
pub fn rack_claim(namespace: &str, name: &str) -> Claim {
    claim_from(json!({
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-claim-{name}")},
        "spec": {"devices": {
            "requests": [{"name": "rack", "exactly": {"deviceClassName": RACK_CLASS}}],
        }},
    }))
}
