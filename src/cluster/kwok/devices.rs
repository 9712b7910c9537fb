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
//! ```

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
        let dns = |s: &str| {
            !s.is_empty()
                && s.len() <= 63
                && s.split('.').all(|l| {
                    !l.is_empty()
                        && l.bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                        && !l.starts_with('-')
                        && !l.ends_with('-')
                })
        };
        if !dns(&self.driver) {
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
            && muster_core::model::Quantity::parse(mem).is_err()
        {
            return Err(format!("devices.memory {mem:?} is not a quantity"));
        }
        Ok(())
    }
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

/// The ResourceSlice (spec only, plus its name) of the node's own devices.
pub fn node_slice(node_name: &str, node: &Value, t: &DeviceTemplate) -> (String, Value) {
    let clique = clique_of(node, t).unwrap_or_default();
    let per_root = t.count.div_ceil(t.pcie_roots).max(1);
    let devices: Vec<Value> = (0..t.count)
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
