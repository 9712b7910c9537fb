//! Devices of kwok-style nodes for Dynamic Resource Allocation: what a node
//! template declares (`devices:`), carried on each node it makes as the
//! annotation [`DEVICES_ANNOTATION`], and the ResourceSlices a DRA driver
//! would publish for such a node. Pure data; the simulated driver that
//! publishes and removes the slices is `crate::apiserver::dra::driver`.
//!
//! ```yaml
//! devices:
//!   driver: gpu.kwok.muster.dev   # the default
//!   count: 8                      # devices per node
//!   model: h100
//!   memory: 80Gi                  # capacity `memory` of each device
//!   pcieRoots: 2                  # devices spread evenly over PCIe roots
//!   cliqueLabel: topology.muster.dev/rack   # the NVLink clique: this label's value
//!   multiNode:                    # optional: devices shared by a clique
//!     count: 4
//!     model: nvswitch
//!   shared:                       # optional: devices many claims share
//!     count: 1                    # per node, published as `nic-<i>`
//!     model: kwok-nic             # the default
//!     capacity: bandwidth         # the consumable capacity's name (the default)
//!     value: 100Gi                # how much each device has
//!     default: 10Gi               # what a request that names no amount consumes
//!     step: 1Gi                   # optional: amounts are whole steps, at least one
//! ```

use muster_core::model::Quantity;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::templates::RACK_LABEL;

/// The node annotation carrying its [`DeviceTemplate`] (JSON).
pub const DEVICES_ANNOTATION: &str = "kwok.muster.dev/devices";
pub const DEFAULT_DRIVER: &str = "gpu.kwok.muster.dev";
/// Devices one ResourceSlice may hold (the API's bound).
pub const MAX_DEVICES: usize = 128;
/// PCIe roots, bounded well below any real machine's count.
const MAX_PCIE_ROOTS: usize = 64;

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeviceTemplate {
    #[serde(default = "default_driver")]
    pub driver: String,
    pub count: usize,
    #[serde(default = "default_model")]
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    #[serde(default = "one")]
    pub pcie_roots: usize,
    #[serde(default = "default_clique_label")]
    pub clique_label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multi_node: Option<MultiNode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared: Option<Shared>,
}

/// Devices shared by every node of a clique, published once per clique
/// in a slice whose `nodeSelector` spans it.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MultiNode {
    pub count: usize,
    #[serde(default = "default_fabric_model")]
    pub model: String,
}

/// Devices of a node that many claims may be allocated at once
/// (`allowMultipleAllocations`), each claim consuming part of one
/// capacity (DRA consumable capacity): published in the node's own slice
/// as `nic-<i>`, next to the GPUs.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Shared {
    pub count: usize,
    #[serde(default = "default_shared_model")]
    pub model: String,
    /// The capacity's name.
    #[serde(default = "default_shared_capacity")]
    pub capacity: String,
    /// How much of it each device has.
    pub value: String,
    /// What a request that names no amount consumes
    /// (`requestPolicy.default`).
    pub default: String,
    /// The granularity of amounts: `requestPolicy.validRange` is
    /// `{min: step, step: step}`; without it amounts are free.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
}

fn default_shared_model() -> String {
    "kwok-nic".into()
}
fn default_shared_capacity() -> String {
    "bandwidth".into()
}

fn default_driver() -> String {
    DEFAULT_DRIVER.into()
}
fn default_model() -> String {
    "kwok-gpu".into()
}
fn default_fabric_model() -> String {
    "kwok-fabric".into()
}
fn default_clique_label() -> String {
    RACK_LABEL.into()
}
fn one() -> usize {
    1
}

impl Shared {
    /// One NIC per node with `value` of `bandwidth`, a request consuming
    /// `default` unless it says, in steps of `step`.
    pub fn nic(value: &str, default: &str, step: &str) -> Self {
        Shared {
            count: 1,
            model: default_shared_model(),
            capacity: default_shared_capacity(),
            value: value.into(),
            default: default.into(),
            step: Some(step.into()),
        }
    }
}

impl DeviceTemplate {
    /// `count` devices per node, everything else the defaults.
    pub fn with_count(count: usize) -> Self {
        DeviceTemplate {
            driver: default_driver(),
            count,
            model: default_model(),
            memory: None,
            pcie_roots: 1,
            clique_label: default_clique_label(),
            multi_node: None,
            shared: None,
        }
    }

    /// Why the template cannot describe a valid ResourceSlice, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        if !(1..=MAX_DEVICES).contains(&self.count) {
            return Err(format!("devices.count must be 1 to {MAX_DEVICES}"));
        }
        if let Some(m) = &self.multi_node
            && !(1..=MAX_DEVICES).contains(&m.count)
        {
            return Err(format!(
                "devices.multiNode.count must be 1 to {MAX_DEVICES}"
            ));
        }
        if !(1..=MAX_PCIE_ROOTS.min(self.count)).contains(&self.pcie_roots) {
            return Err("devices.pcieRoots must be 1 to devices.count (at most 64)".into());
        }
        if !is_dns_subdomain(&self.driver) {
            return Err(format!(
                "devices.driver {:?} is not a DNS subdomain",
                self.driver
            ));
        }
        for model in std::iter::once(&self.model).chain(self.multi_node.as_ref().map(|m| &m.model))
        {
            if model.is_empty() || model.len() > 64 {
                return Err("devices model names must be 1 to 64 characters".into());
            }
        }
        if let Some(mem) = &self.memory
            && Quantity::parse(mem).is_err()
        {
            return Err(format!("devices.memory {mem:?} is not a quantity"));
        }
        if let Some(s) = &self.shared {
            s.check(self.count)?;
        }
        Ok(())
    }
}

impl Shared {
    /// Why these shared devices, next to `gpus` others, cannot be published
    /// in a valid slice, if they cannot.
    fn check(&self, gpus: usize) -> Result<(), String> {
        if self.count == 0 || self.count + gpus > MAX_DEVICES {
            return Err(format!(
                "devices.shared.count must be 1 to {MAX_DEVICES} less devices.count (a slice holds {MAX_DEVICES} devices)"
            ));
        }
        if self.model.is_empty() || self.model.len() > 64 {
            return Err("devices model names must be 1 to 64 characters".into());
        }
        if !is_capacity_name(&self.capacity) {
            return Err(format!(
                "devices.shared.capacity {:?} is not a capacity name (a C identifier of at most 32 characters, optionally prefixed by a DNS subdomain and '/')",
                self.capacity
            ));
        }
        let quantity = |field: &str, text: &str| match Quantity::parse(text) {
            Ok(q) if !q.is_negative() => Ok(q),
            _ => Err(format!(
                "devices.shared.{field} {text:?} is not a quantity of at least zero"
            )),
        };
        let value = quantity("value", &self.value)?;
        let default = quantity("default", &self.default)?;
        if default > value {
            return Err("devices.shared.default must not be more than devices.shared.value".into());
        }
        if let Some(text) = &self.step {
            let step = quantity("step", text)?;
            if step.sign() == 0 || step > value {
                return Err(
                    "devices.shared.step must be more than zero and at most devices.shared.value"
                        .into(),
                );
            }
            // The range starts at one step, and one step above that must
            // still fit the device.
            if step.checked_add(step).is_none_or(|two| two > value) {
                return Err(
                    "devices.shared.step must be at most half of devices.shared.value".into(),
                );
            }
            // Whole units, rounded up, as the API server compares them.
            let (d, st) = (default.value(), step.value());
            if default < step || st == 0 || d % st != 0 {
                return Err(
                    "devices.shared.default must be a whole number of steps, at least one".into(),
                );
            }
        }
        Ok(())
    }

    /// The capacity of each device, with its request policy.
    fn capacity_json(&self) -> Value {
        let mut policy = json!({"default": self.default});
        if let Some(step) = &self.step {
            policy["validRange"] = json!({"min": step, "step": step});
        }
        let mut capacity = Map::new();
        capacity.insert(
            self.capacity.clone(),
            json!({"value": self.value, "requestPolicy": policy}),
        );
        Value::Object(capacity)
    }
}

/// A capacity name: a C identifier of at most 32 characters, optionally
/// prefixed by a DNS subdomain and `/`.
fn is_capacity_name(name: &str) -> bool {
    let (domain, id) = match name.split_once('/') {
        Some((d, id)) => (Some(d), id),
        None => (None, name),
    };
    let identifier = !id.is_empty()
        && id.len() <= 32
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !id.as_bytes()[0].is_ascii_digit();
    identifier && domain.is_none_or(is_dns_subdomain)
}

fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

/// The device template a node carries, if it carries a valid one.
pub fn of_node(node: &Value) -> Option<DeviceTemplate> {
    let text = node
        .pointer("/metadata/annotations")?
        .get(DEVICES_ANNOTATION)?
        .as_str()?;
    let t: DeviceTemplate = serde_json::from_str(text).ok()?;
    t.check().ok().map(|()| t)
}

/// The node's clique: its value of the template's clique label.
pub fn clique_of(node: &Value, t: &DeviceTemplate) -> Option<String> {
    node.pointer("/metadata/labels")?
        .get(&t.clique_label)?
        .as_str()
        .map(str::to_string)
}

/// The name of the node-local slice of `node` for `driver`.
pub fn node_slice_name(node: &str, driver: &str) -> String {
    format!("{node}-{driver}")
}

/// The name of a clique's multi-node slice for `driver`.
pub fn clique_slice_name(clique: &str, driver: &str) -> String {
    format!("clique-{clique}-{driver}")
}

/// The ResourceSlice (spec only, plus its name) of the node's own devices:
/// its GPUs `gpu-<i>`, then its shared devices `nic-<i>` if it has any.
pub fn node_slice(node_name: &str, node: &Value, t: &DeviceTemplate) -> (String, Value) {
    let clique = clique_of(node, t).unwrap_or_default();
    let per_root = t.count.div_ceil(t.pcie_roots).max(1);
    let mut devices: Vec<Value> = (0..t.count)
        .map(|i| {
            let mut attributes = Map::new();
            attributes.insert("model".into(), json!({"string": t.model}));
            attributes.insert("index".into(), json!({"int": i}));
            attributes.insert(
                "pcieRoot".into(),
                json!({"string": format!("pci{}", i / per_root)}),
            );
            if !clique.is_empty() {
                attributes.insert("clique".into(), json!({"string": clique}));
            }
            let mut device = json!({"name": format!("gpu-{i}"), "attributes": attributes});
            if let Some(mem) = &t.memory {
                device["capacity"] = json!({"memory": {"value": mem}});
            }
            device
        })
        .collect();
    if let Some(s) = &t.shared {
        let capacity = s.capacity_json();
        devices.extend((0..s.count).map(|i| {
            let mut attributes = Map::new();
            attributes.insert("model".into(), json!({"string": s.model}));
            attributes.insert("index".into(), json!({"int": i}));
            if !clique.is_empty() {
                attributes.insert("clique".into(), json!({"string": clique}));
            }
            json!({"name": format!("nic-{i}"), "attributes": attributes,
                "allowMultipleAllocations": true, "capacity": capacity})
        }));
    }
    let spec = json!({
        "driver": t.driver,
        "nodeName": node_name,
        "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
        "devices": devices,
    });
    (node_slice_name(node_name, &t.driver), spec)
}

/// The ResourceSlice (spec, and its name) of a clique's shared devices.
pub fn clique_slice(clique: &str, t: &DeviceTemplate, m: &MultiNode) -> (String, Value) {
    let devices: Vec<Value> = (0..m.count)
        .map(|i| {
            json!({"name": format!("fabric-{i}"), "attributes": {
                "model": {"string": m.model},
                "index": {"int": i},
                "clique": {"string": clique},
            }})
        })
        .collect();
    let spec = json!({
        "driver": t.driver,
        "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": t.clique_label, "operator": "In", "values": [clique]}]}]},
        "pool": {"name": format!("clique-{clique}"), "generation": 1, "resourceSliceCount": 1},
        "devices": devices,
    });
    (clique_slice_name(clique, &t.driver), spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template() -> DeviceTemplate {
        serde_json::from_value(json!({"count": 4, "model": "h100", "memory": "80Gi",
            "pcieRoots": 2, "multiNode": {"count": 2}}))
        .unwrap()
    }

    #[test]
    fn node_slices_carry_attributes_and_capacity() {
        let t = template();
        let node = json!({"metadata": {"name": "n0", "labels": {RACK_LABEL: "rack-3"}}});
        let (name, spec) = node_slice("n0", &node, &t);
        assert_eq!(name, "n0-gpu.kwok.muster.dev");
        assert_eq!(spec["pool"]["name"], "n0");
        let d3 = &spec["devices"][3];
        assert_eq!(d3["name"], "gpu-3");
        assert_eq!(d3["attributes"]["pcieRoot"]["string"], "pci1");
        assert_eq!(d3["attributes"]["clique"]["string"], "rack-3");
        assert_eq!(d3["capacity"]["memory"]["value"], "80Gi");
        let (cname, cspec) = clique_slice("rack-3", &t, t.multi_node.as_ref().unwrap());
        assert_eq!(cname, "clique-rack-3-gpu.kwok.muster.dev");
        assert_eq!(
            cspec["nodeSelector"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0],
            "rack-3"
        );
    }

    fn shared_template(shared: Value) -> DeviceTemplate {
        serde_json::from_value(json!({"count": 4, "shared": shared})).unwrap()
    }

    #[test]
    fn shared_devices_follow_the_gpus_in_the_node_slice() {
        let t = shared_template(json!({"count": 2, "value": "100Gi", "default": "10Gi",
            "step": "1Gi"}));
        assert!(t.check().is_ok());
        let node = json!({"metadata": {"name": "n0", "labels": {RACK_LABEL: "rack-1"}}});
        let (_, spec) = node_slice("n0", &node, &t);
        let devices = spec["devices"].as_array().unwrap();
        assert_eq!(devices.len(), 6);
        assert!(devices[3].get("allowMultipleAllocations").is_none());
        let nic = &devices[5];
        assert_eq!(nic["name"], "nic-1");
        assert_eq!(nic["allowMultipleAllocations"], true);
        assert_eq!(nic["attributes"]["model"]["string"], "kwok-nic");
        assert_eq!(nic["attributes"]["index"]["int"], 1);
        assert_eq!(nic["attributes"]["clique"]["string"], "rack-1");
        assert_eq!(
            nic["capacity"],
            json!({"bandwidth": {"value": "100Gi", "requestPolicy": {
                "default": "10Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}}})
        );
        // Without a step, no range: any amount up to the capacity; and no
        // clique attribute on a node outside one.
        let t = shared_template(json!({"count": 1, "model": "cx7",
            "capacity": "net.example.com/bw", "value": "400G", "default": "25G"}));
        let (_, spec) = node_slice("n0", &json!({"metadata": {"name": "n0"}}), &t);
        let nic = &spec["devices"][4];
        assert_eq!(nic["attributes"]["model"]["string"], "cx7");
        assert!(nic["attributes"].get("clique").is_none());
        assert_eq!(
            nic["capacity"],
            json!({"net.example.com/bw": {"value": "400G", "requestPolicy": {"default": "25G"}}})
        );
        // The template travels on the node as JSON and comes back whole.
        let text = serde_json::to_string(&t).unwrap();
        assert_eq!(serde_json::from_str::<DeviceTemplate>(&text).unwrap(), t);
    }

    #[test]
    fn shared_devices_are_bounded() {
        let ok = json!({"count": 1, "value": "100Gi", "default": "10Gi", "step": "1Gi"});
        assert!(shared_template(ok.clone()).check().is_ok());
        let with = |key: &str, value: Value| {
            let mut s = ok.clone();
            s[key] = value;
            shared_template(s)
        };
        let refused = [
            (with("count", json!(0)), "devices.shared.count"),
            (with("count", json!(125)), "devices.shared.count"),
            (with("model", json!("")), "model names"),
            (
                with("capacity", json!("Band-Width")),
                "devices.shared.capacity",
            ),
            (with("capacity", json!("a/b/c")), "devices.shared.capacity"),
            (with("value", json!("lots")), "devices.shared.value"),
            (with("value", json!("-1Gi")), "devices.shared.value"),
            (
                with("default", json!("200Gi")),
                "devices.shared.default must not be more",
            ),
            (
                with("step", json!("0")),
                "devices.shared.step must be more than zero",
            ),
            (
                with("step", json!("200Gi")),
                "devices.shared.step must be more than zero",
            ),
            (with("step", json!("60Gi")), "at most half"),
            (with("step", json!("3Gi")), "whole number of steps"),
            (with("default", json!("0")), "whole number of steps"),
        ];
        for (t, why) in refused {
            let err = t.check().unwrap_err();
            assert!(err.contains(why), "{:?}: {err}", t.shared);
        }
        // 4 GPUs and 124 shared devices fill a slice exactly.
        assert!(with("count", json!(124)).check().is_ok());
        // Unknown fields are refused, as elsewhere in the template.
        let unknown = serde_json::from_value::<DeviceTemplate>(json!({"count": 1,
            "shared": {"count": 1, "value": "1", "default": "1", "min": "1"}}));
        assert!(unknown.is_err());
        let missing = serde_json::from_value::<DeviceTemplate>(json!({"count": 1,
            "shared": {"count": 1, "default": "1"}}));
        assert!(missing.is_err());
    }

    #[test]
    fn templates_are_bounded() {
        let mut t = template();
        assert!(t.check().is_ok());
        t.count = 129;
        assert!(t.check().is_err());
        t.count = 4;
        t.pcie_roots = 5;
        assert!(t.check().is_err());
        t.pcie_roots = 1;
        t.driver = "Bad_Driver".into();
        assert!(t.check().is_err());
        assert!(
            of_node(&json!({"metadata": {"annotations": {DEVICES_ANNOTATION: "{nonsense"}}}))
                .is_none()
        );
    }
}
