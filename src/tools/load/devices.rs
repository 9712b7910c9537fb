//! The null scheduler's device allocation, for pods with DRA claims: a
//! simulated kubelet starts a pod only once each of its claims is allocated
//! and reserved for it, so the null scheduler writes that too before it
//! binds (the fewest writes any scheduler needs for such a pod), or its
//! ceiling would leave out work every DRA scheduler does.
//!
//! The allocation is trivial: no selectors, classes or constraints are
//! evaluated; each claim takes the next free devices of the pod's node, in
//! slice order, as many as its template's requests ask (the first
//! alternative of each; `All` takes what is left). The devices are those
//! the scenario's node templates publish (`muster_cluster::kwok::devices`);
//! a device once given is never given again. Pure: the binder does the
//! writes.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::scenario::dra::ClaimTemplateEntry;
use muster_cluster::kwok::devices;
use muster_core::dra::model::Mode;

/// The devices of the nodes the null scheduler binds to, and the requests
/// of the scenario's claim templates.
#[derive(Debug, Default)]
pub struct NullDevices {
    /// Per node, in the binder's node order; `None` for a node without
    /// devices.
    nodes: Vec<Option<NodeDevices>>,
    /// Template name → its requests: (result name, devices).
    templates: HashMap<String, Vec<(String, Need)>>,
}

#[derive(Debug)]
struct NodeDevices {
    name: String,
    driver: String,
    pool: String,
    devices: Vec<String>,
    /// `devices[..used]` are taken.
    used: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    Count(usize),
    /// Every device left on the node (at least one).
    All,
}

/// A pod's claim: the ResourceClaim's name and the template it was made
/// from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodClaim {
    pub claim: String,
    pub template: String,
}

/// What to write into one claim's `status.allocation`.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimAllocation {
    pub claim: String,
    pub allocation: Value,
}

impl NullDevices {
    /// From node objects (`templates::expand`, the binder's node order)
    /// and the scenario's claim templates.
    pub fn new(nodes: &[Value], templates: &[ClaimTemplateEntry]) -> Self {
        let nodes = nodes
            .iter()
            .map(|node| {
                let name = node["metadata"]["name"].as_str()?;
                let t = devices::of_node(node)?;
                let (_, slice) = devices::node_slice(name, node, &t);
                // Shared devices (consumable capacity) are not handed out
                // whole; the null scheduler leaves them alone.
                let devices = slice["devices"]
                    .as_array()?
                    .iter()
                    .filter(|d| d["allowMultipleAllocations"] != true)
                    .filter_map(|d| d["name"].as_str().map(str::to_string))
                    .collect();
                Some(NodeDevices {
                    name: name.to_string(),
                    driver: t.driver,
                    pool: slice["pool"]["name"].as_str()?.to_string(),
                    devices,
                    used: 0,
                })
            })
            .collect();
        let templates = templates
            .iter()
            .filter_map(|t| {
                let claim = t.claim("default").ok()?;
                let needs = claim
                    .requests
                    .iter()
                    .filter_map(|r| {
                        let first = r.alternatives.first()?;
                        let need = match first.mode {
                            Mode::Exact(n) => Need::Count(n as usize),
                            Mode::All => Need::All,
                        };
                        Some((first.name.to_string(), need))
                    })
                    .collect();
                Some((t.name.clone(), needs))
            })
            .collect();
        NullDevices { nodes, templates }
    }

    /// The first node from `start` on (round-robin) with free devices for
    /// every claim, and each claim's allocation there; the devices are then
    /// taken. An error says why no node has them.
    pub fn place(
        &mut self,
        start: usize,
        claims: &[PodClaim],
    ) -> Result<(usize, Vec<ClaimAllocation>), String> {
        let mut needs = Vec::with_capacity(claims.len());
        for c in claims {
            let requests = self.templates.get(&c.template).ok_or_else(|| {
                format!(
                    "claim {} comes from template {:?}, which the scenario does not declare",
                    c.claim, c.template
                )
            })?;
            needs.push((c, requests));
        }
        let n = self.nodes.len();
        for i in (0..n).map(|k| (start + k) % n.max(1)) {
            let Some(node) = self.nodes[i].as_mut() else {
                continue;
            };
            let mut next = node.used;
            let mut taken: Vec<Vec<(&str, std::ops::Range<usize>)>> = Vec::new();
            let fits = needs.iter().all(|(_, requests)| {
                let mut results = Vec::new();
                for (name, need) in requests.iter() {
                    let left = node.devices.len() - next;
                    let count = match *need {
                        Need::Count(k) if k <= left => k,
                        Need::All if left > 0 => left,
                        _ => return false,
                    };
                    results.push((name.as_str(), next..next + count));
                    next += count;
                }
                taken.push(results);
                true
            });
            if !fits {
                continue;
            }
            node.used = next;
            let allocations = needs
                .iter()
                .zip(taken)
                .map(|((c, _), results)| ClaimAllocation {
                    claim: c.claim.clone(),
                    allocation: allocation(node, &results),
                })
                .collect();
            return Ok((i, allocations));
        }
        Err("no node has free devices for its claims".into())
    }
}

/// `status.allocation` of a claim given `results` (request name, device
/// indices) on `node`: the devices, and the node they are reachable from.
fn allocation(node: &NodeDevices, results: &[(&str, std::ops::Range<usize>)]) -> Value {
    let results: Vec<Value> = results
        .iter()
        .flat_map(|(request, range)| {
            node.devices[range.clone()].iter().map(move |device| {
                json!({"request": request, "driver": node.driver,
                       "pool": node.pool, "device": device})
            })
        })
        .collect();
    json!({
        "devices": {"results": results},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node.name]}
        ]}]},
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;
    use muster_cluster::kwok::templates;

    const SCENARIO: &str = r#"
name: t
nodes:
  - {namePrefix: cpu, count: 1, capacity: {pods: 10}}
  - {namePrefix: gpu, count: 2, capacity: {pods: 10}, devices: {count: 4}}
deviceClasses: [{name: gpu}]
resourceClaimTemplates:
  - {name: three, devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu, count: 3}}]}}
  - {name: one, devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu}}]}}
  - {name: rest, devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu, allocationMode: All}}]}}
"#;

    fn devices() -> NullDevices {
        let s = Scenario::parse(SCENARIO, "t.yaml").unwrap();
        NullDevices::new(&templates::expand(&s.nodes), &s.resource_claim_templates)
    }

    fn claim(name: &str, template: &str) -> PodClaim {
        PodClaim {
            claim: name.into(),
            template: template.into(),
        }
    }

    fn devices_of(a: &ClaimAllocation) -> Vec<String> {
        a.allocation["devices"]["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                format!(
                    "{}/{}",
                    r["pool"].as_str().unwrap(),
                    r["device"].as_str().unwrap()
                )
            })
            .collect()
    }

    /// Nodes without devices are skipped; devices go in order and are never
    /// given twice; a pod's claims share its node.
    #[test]
    fn claims_take_the_next_free_devices_of_one_node() {
        let mut d = devices();
        let (node, a) = d.place(0, &[claim("c1", "three")]).unwrap();
        assert_eq!(node, 1, "cpu-0 has no devices");
        assert_eq!(
            devices_of(&a[0]),
            ["gpu-0/gpu-0", "gpu-0/gpu-1", "gpu-0/gpu-2"]
        );
        assert_eq!(a[0].allocation["devices"]["results"][0]["request"], "gpu");
        assert_eq!(
            a[0].allocation["devices"]["results"][0]["driver"],
            "gpu.kwok.muster.dev"
        );
        assert_eq!(
            a[0].allocation["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"][0],
            "gpu-0"
        );
        // Two claims of one pod: one device left on gpu-0, so gpu-1.
        let (node, a) = d
            .place(1, &[claim("c2", "one"), claim("c3", "one")])
            .unwrap();
        assert_eq!(node, 2);
        assert_eq!(devices_of(&a[0]), ["gpu-1/gpu-0"]);
        assert_eq!(devices_of(&a[1]), ["gpu-1/gpu-1"]);
        let (node, a) = d.place(0, &[claim("c4", "rest")]).unwrap();
        assert_eq!(
            (node, devices_of(&a[0])),
            (1, vec!["gpu-0/gpu-3".to_string()])
        );
        let (_, a) = d.place(0, &[claim("c5", "rest")]).unwrap();
        assert_eq!(devices_of(&a[0]), ["gpu-1/gpu-2", "gpu-1/gpu-3"]);
        let e = d.place(0, &[claim("c6", "one")]).unwrap_err();
        assert!(e.contains("no node has free devices"), "{e}");
    }

    #[test]
    fn an_undeclared_template_is_refused() {
        let e = devices().place(0, &[claim("c", "nine")]).unwrap_err();
        assert!(e.contains("\"nine\""), "{e}");
        let mut none = NullDevices::default();
        assert!(none.place(3, &[claim("c", "one")]).is_err());
    }
}
