//! Node templates: a YAML file describing groups of identical fake nodes
//! (capacity, allocatable, labels, taints, count), expanded into Node
//! objects with generated topology labels derived from the node index.
//!
//! ```yaml
//! - namePrefix: gpu          # nodes gpu-0, gpu-1, ...
//!   count: 16
//!   capacity: {cpu: "64", memory: 512Gi, pods: "110", nvidia.com/gpu: "8"}
//!   allocatable: {cpu: "63"} # optional; missing keys default to capacity
//!   labels: {pool: gpu}
//!   taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
//!   topology: {hostsPerRack: 8, racksPerBlock: 4}
//!   devices: {count: 8, model: h100, memory: 80Gi}  # optional DRA devices
//! ```
//!
//! A single mapping instead of a list is one template.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};

pub const BLOCK_LABEL: &str = "topology.muster.dev/block";
pub const RACK_LABEL: &str = "topology.muster.dev/rack";
pub const K8S_RACK_LABEL: &str = "topology.kubernetes.io/rack";
pub const HOST_LABEL: &str = "topology.muster.dev/host";

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeTemplate {
    #[serde(default = "default_prefix")]
    pub name_prefix: String,
    #[serde(default = "one")]
    pub count: usize,
    #[serde(default = "default_capacity", deserialize_with = "quantity_map")]
    pub capacity: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "quantity_map")]
    pub allocatable: BTreeMap<String, String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    #[serde(default)]
    pub taints: Vec<Value>,
    #[serde(default)]
    pub topology: Topology,
    /// DRA devices of each node (published as ResourceSlices, see
    /// [`super::devices`]).
    #[serde(default)]
    pub devices: Option<super::devices::DeviceTemplate>,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Topology {
    #[serde(default = "eight")]
    pub hosts_per_rack: usize,
    #[serde(default = "four")]
    pub racks_per_block: usize,
}

impl Default for Topology {
    fn default() -> Self {
        Topology {
            hosts_per_rack: 8,
            racks_per_block: 4,
        }
    }
}

fn default_prefix() -> String {
    "sim-node".into()
}
fn one() -> usize {
    1
}
fn eight() -> usize {
    8
}
fn four() -> usize {
    4
}
fn default_capacity() -> BTreeMap<String, String> {
    [
        ("cpu", "32"),
        ("memory", "256Gi"),
        ("pods", "110"),
        ("ephemeral-storage", "1Ti"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

impl Default for NodeTemplate {
    fn default() -> Self {
        NodeTemplate {
            name_prefix: default_prefix(),
            count: 0,
            capacity: default_capacity(),
            allocatable: BTreeMap::new(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            taints: Vec::new(),
            topology: Topology::default(),
            devices: None,
        }
    }
}

/// A map of resource quantities, accepting YAML numbers (`cpu: 8`) as well
/// as strings (`memory: 32Gi`); values stay strings, as on the wire.
pub fn quantity_map<'de, D>(de: D) -> Result<BTreeMap<String, String>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Scalar {
        Text(String),
        Int(i64),
        Float(f64),
    }
    let raw = BTreeMap::<String, Scalar>::deserialize(de)?;
    Ok(raw
        .into_iter()
        .map(|(k, v)| {
            let v = match v {
                Scalar::Text(s) => s,
                Scalar::Int(i) => i.to_string(),
                Scalar::Float(f) => f.to_string(),
            };
            (k, v)
        })
        .collect())
}

/// Reads a template file.
pub fn load(path: &Path) -> Result<Vec<NodeTemplate>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read node template {}: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("node template {}: {e}", path.display()))
}

pub fn parse(text: &str) -> Result<Vec<NodeTemplate>, String> {
    // Decide list vs. single mapping first, so errors name the bad field.
    let doc: serde_norway::Value = serde_norway::from_str(text).map_err(|e| e.to_string())?;
    let templates: Vec<NodeTemplate> = if doc.is_sequence() {
        serde_norway::from_value(doc).map_err(|e| e.to_string())?
    } else {
        vec![serde_norway::from_value(doc).map_err(|e| e.to_string())?]
    };
    for t in &templates {
        if t.topology.hosts_per_rack == 0 || t.topology.racks_per_block == 0 {
            return Err(format!(
                "{}: topology sizes must be positive",
                t.name_prefix
            ));
        }
        if let Some(d) = &t.devices {
            d.check().map_err(|e| format!("{}: {e}", t.name_prefix))?;
        }
    }
    Ok(templates)
}

/// Expands templates into Node objects (metadata, spec, capacity and
/// allocatable; the kwok lifecycle adds conditions and addresses). Each
/// template starts a new rack and block, numbered after the previous
/// template's, so topology values are unique cluster-wide.
pub fn expand(templates: &[NodeTemplate]) -> Vec<Value> {
    let mut nodes = Vec::new();
    let (mut first_rack, mut first_block) = (0usize, 0usize);
    for t in templates {
        let Topology {
            hosts_per_rack,
            racks_per_block,
        } = t.topology;
        for i in 0..t.count {
            let rack = i / hosts_per_rack;
            let place = Place {
                rack: first_rack + rack,
                block: first_block + rack / racks_per_block,
            };
            nodes.push(node(t, i, place));
        }
        let racks = t.count.div_ceil(hosts_per_rack);
        first_rack += racks;
        first_block += racks.div_ceil(racks_per_block);
    }
    nodes
}

/// Where a node sits in the generated topology.
struct Place {
    rack: usize,
    block: usize,
}

fn node(t: &NodeTemplate, index: usize, place: Place) -> Value {
    let name = format!("{}-{index}", t.name_prefix);
    let Place { rack, block } = place;
    let mut labels: BTreeMap<String, String> = [
        ("kubernetes.io/hostname", name.clone()),
        ("kubernetes.io/os", "linux".into()),
        ("kubernetes.io/arch", "amd64".into()),
        ("type", "kwok".into()),
        (BLOCK_LABEL, format!("block-{block}")),
        (RACK_LABEL, format!("rack-{rack}")),
        (K8S_RACK_LABEL, format!("rack-{rack}")),
        (HOST_LABEL, name.clone()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    labels.extend(t.labels.clone());
    let mut annotations = t.annotations.clone();
    annotations.insert("kwok.x-k8s.io/node".into(), "fake".into());
    if let Some(devices) = &t.devices
        && let Ok(text) = serde_json::to_string(devices)
    {
        annotations.insert(super::devices::DEVICES_ANNOTATION.into(), text);
    }
    let mut allocatable = t.capacity.clone();
    allocatable.extend(t.allocatable.clone());
    let mut spec = json!({});
    if !t.taints.is_empty() {
        spec["taints"] = json!(t.taints);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": { "name": name, "labels": labels, "annotations": annotations },
        "spec": spec,
        "status": { "capacity": t.capacity, "allocatable": allocatable },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_with_topology_and_overrides() {
        let t = parse(
            "- namePrefix: gpu\n  count: 10\n  capacity: {cpu: '8', nvidia.com/gpu: '4'}\n  allocatable: {cpu: '7'}\n  labels: {pool: gpu}\n  taints: [{key: g, effect: NoSchedule}]\n  topology: {hostsPerRack: 2, racksPerBlock: 2}\n",
        )
        .unwrap();
        let nodes = expand(&t);
        assert_eq!(nodes.len(), 10);
        let n9 = &nodes[9];
        assert_eq!(n9["metadata"]["name"], "gpu-9");
        assert_eq!(n9["metadata"]["labels"][RACK_LABEL], "rack-4");
        assert_eq!(n9["metadata"]["labels"][BLOCK_LABEL], "block-2");
        assert_eq!(n9["metadata"]["labels"]["pool"], "gpu");
        assert_eq!(n9["status"]["allocatable"]["cpu"], "7");
        assert_eq!(n9["status"]["allocatable"]["nvidia.com/gpu"], "4");
        assert_eq!(n9["spec"]["taints"][0]["key"], "g");
    }

    #[test]
    fn single_mapping_and_errors() {
        assert_eq!(parse("count: 3").unwrap()[0].count, 3);
        let numeric = parse("capacity: {cpu: 8, memory: 1.5}").unwrap();
        assert_eq!(numeric[0].capacity["cpu"], "8");
        assert_eq!(numeric[0].capacity["memory"], "1.5");
        let err = parse("count: 3\ncolour: red").unwrap_err();
        assert!(err.contains("colour"), "{err}");
        let err = parse("devices: {count: 0}").unwrap_err();
        assert!(err.contains("devices.count"), "{err}");
    }

    #[test]
    fn devices_travel_on_the_node() {
        let t = parse("count: 1\ndevices: {count: 2, model: h100}").unwrap();
        let node = &expand(&t)[0];
        let d = super::super::devices::of_node(node).unwrap();
        assert_eq!((d.count, d.model.as_str()), (2, "h100"));
        assert_eq!(d.driver, "gpu.kwok.muster.dev");
    }
}
