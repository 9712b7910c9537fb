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

use std::collections::{HashMap, HashSet};

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
    nodes: Vec<Option<Devices>>,
    /// The multi-node devices each clique (a rack) shares, and its nodes.
    cliques: Vec<(Devices, Vec<usize>)>,
    /// Where the next clique search starts: full cliques are passed once.
    next_clique: usize,
    /// Template name → its requests: (result name, devices).
    templates: HashMap<String, Requests>,
    /// Templates PodGroups claim from: their claims are shared by a gang's
    /// members and take a clique's devices.
    group_templates: HashSet<String>,
    /// Each PodGroup claim allocated, and its clique.
    group_claims: HashMap<String, usize>,
    /// Turns taken by members with no claims of their own.
    spread: usize,
}

/// Devices handed out in slice order, and the node selector of a claim
/// allocated from them.
#[derive(Debug)]
struct Devices {
    driver: String,
    pool: String,
    devices: Vec<String>,
    /// `devices[..used]` are taken.
    used: usize,
    node_selector: Value,
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
    /// The claim is its PodGroup's: reserved for the group, not the pod.
    pub for_group: bool,
}

/// A template's requests: each result name and the devices it takes.
type Requests = std::sync::Arc<[(String, Need)]>;
type Needs<'a> = Vec<(&'a PodClaim, Requests)>;
/// Per claim, each request's result name and the devices it takes.
type Taken<'a> = Vec<Vec<(&'a str, std::ops::Range<usize>)>>;

impl NullDevices {
    /// From node objects (`templates::expand`, the binder's node order),
    /// the scenario's claim templates, and the ones PodGroups claim from.
    pub fn new(
        nodes: &[Value],
        templates: &[ClaimTemplateEntry],
        group_templates: HashSet<String>,
    ) -> Self {
        let mut cliques: Vec<(Devices, Vec<usize>)> = Vec::new();
        let mut clique_at: HashMap<(String, String), usize> = HashMap::new();
        let nodes = nodes
            .iter()
            .enumerate()
            .map(|(i, node)| {
                let name = node["metadata"]["name"].as_str()?;
                let t = devices::of_node(node)?;
                if let (Some(m), Some(clique)) = (&t.multi_node, devices::clique_of(node, &t)) {
                    let at = *clique_at
                        .entry((clique.clone(), t.driver.clone()))
                        .or_insert_with(|| {
                            let (_, slice) = devices::clique_slice(&clique, &t, m);
                            cliques.push((devices_of(&slice, &t.driver), Vec::new()));
                            cliques.len() - 1
                        });
                    cliques[at].1.push(i);
                }
                let (_, slice) = devices::node_slice(name, node, &t);
                Some(devices_of(&slice, &t.driver))
            })
            .collect();
        let templates = templates
            .iter()
            .filter_map(|t| {
                let claim = t.claim("default").ok()?;
                let needs: Requests = claim
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
        NullDevices {
            nodes,
            cliques,
            next_clique: 0,
            templates,
            group_templates,
            group_claims: HashMap::new(),
            spread: 0,
        }
    }

    /// Where a pod goes and what its claims are given, the devices then
    /// taken. Without PodGroup claims: the first node from `start` on
    /// (round-robin) with free devices for every claim. With them: the
    /// clique its group's claims were allocated in, else the first clique
    /// with free shared devices for them; the pod's own claims on the first
    /// node of that clique with room for them. An error says why nothing
    /// fits.
    pub fn place(
        &mut self,
        start: usize,
        claims: &[PodClaim],
    ) -> Result<(usize, Vec<ClaimAllocation>), String> {
        let mut shared: Needs = Vec::new();
        let mut own: Needs = Vec::new();
        for c in claims {
            let requests = self.templates.get(&c.template).cloned().ok_or_else(|| {
                format!(
                    "claim {} comes from template {:?}, which the scenario does not declare",
                    c.claim, c.template
                )
            })?;
            match self.group_templates.contains(&c.template) {
                true => shared.push((c, requests)),
                false => own.push((c, requests)),
            }
        }
        if shared.is_empty() {
            let n = self.nodes.len();
            let order: Vec<usize> = (0..n).map(|k| (start + k) % n.max(1)).collect();
            return self
                .place_own(&order, &own)
                .ok_or_else(|| "no node has free devices for its claims".to_string());
        }
        let known: HashSet<usize> = shared
            .iter()
            .filter_map(|(c, _)| self.group_claims.get(&c.claim).copied())
            .collect();
        let order: Vec<usize> = match known.len() {
            0 => {
                let n = self.cliques.len();
                (0..n).map(|k| (self.next_clique + k) % n.max(1)).collect()
            }
            1 => known.into_iter().collect(),
            _ => return Err("its PodGroup claims were allocated in different cliques".into()),
        };
        let new: Needs = shared
            .into_iter()
            .filter(|(c, _)| !self.group_claims.contains_key(&c.claim))
            .collect();
        for ci in order {
            let Some((clique, members)) = self.cliques.get(ci) else {
                continue;
            };
            let Some((next, taken)) = fit(clique, &new) else {
                continue;
            };
            let members = members.clone();
            let Some((node, mut allocations)) = self.place_own(&members, &own) else {
                continue;
            };
            let clique = &mut self.cliques[ci].0;
            clique.used = next;
            for ((c, _), results) in new.iter().zip(taken) {
                self.group_claims.insert(c.claim.clone(), ci);
                allocations.push(ClaimAllocation {
                    claim: c.claim.clone(),
                    allocation: allocation(clique, &results),
                    for_group: true,
                });
            }
            self.next_clique = ci;
            return Ok((node, allocations));
        }
        Err("no clique has free shared devices for its PodGroup claims and room for its own".into())
    }

    /// The first node of `order` with free devices for every claim of
    /// `needs`, and each claim's allocation there; the devices are taken.
    fn place_own(
        &mut self,
        order: &[usize],
        needs: &Needs,
    ) -> Option<(usize, Vec<ClaimAllocation>)> {
        for &i in order {
            let Some(node) = self.nodes.get_mut(i).and_then(Option::as_mut) else {
                continue;
            };
            let Some((next, taken)) = fit(node, needs) else {
                continue;
            };
            node.used = next;
            let allocations = needs
                .iter()
                .zip(taken)
                .map(|((c, _), results)| ClaimAllocation {
                    claim: c.claim.clone(),
                    allocation: allocation(node, &results),
                    for_group: false,
                })
                .collect();
            return Some((i, allocations));
        }
        // A pod without claims of its own fits any node: the next in turn.
        if needs.is_empty() && !order.is_empty() {
            self.spread = self.spread.wrapping_add(1);
            return Some((order[self.spread % order.len()], Vec::new()));
        }
        None
    }
}

/// The devices of a published slice, and the node selector its claims get.
fn devices_of(slice: &Value, driver: &str) -> Devices {
    // Shared devices (consumable capacity) are not handed out whole; the
    // null scheduler leaves them alone.
    let devices = slice["devices"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["allowMultipleAllocations"] != true)
        .filter_map(|d| d["name"].as_str().map(str::to_string))
        .collect();
    let node_selector = match slice["nodeName"].as_str() {
        Some(node) => json!({"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}
        ]}]}),
        None => slice["nodeSelector"].clone(),
    };
    Devices {
        driver: driver.to_string(),
        pool: slice["pool"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        devices,
        used: 0,
        node_selector,
    }
}

/// Whether every claim of `needs` gets its devices from `d`'s free ones,
/// in order: where the next free device would then be, and what each took.
fn fit<'a>(d: &Devices, needs: &'a Needs<'_>) -> Option<(usize, Taken<'a>)> {
    let mut next = d.used;
    let mut taken = Vec::with_capacity(needs.len());
    for (_, requests) in needs {
        let mut results = Vec::new();
        for (name, need) in requests.iter() {
            let left = d.devices.len() - next;
            let count = match *need {
                Need::Count(k) if k <= left => k,
                Need::All if left > 0 => left,
                _ => return None,
            };
            results.push((name.as_str(), next..next + count));
            next += count;
        }
        taken.push(results);
    }
    Some((next, taken))
}

/// `status.allocation` of a claim given `results` (request name, device
/// indices) from `d`: the devices, and the nodes they are reachable from.
fn allocation(d: &Devices, results: &[(&str, std::ops::Range<usize>)]) -> Value {
    let results: Vec<Value> = results
        .iter()
        .flat_map(|(request, range)| {
            d.devices[range.clone()].iter().map(move |device| {
                json!({"request": request, "driver": d.driver,
                       "pool": d.pool, "device": device})
            })
        })
        .collect();
    json!({"devices": {"results": results}, "nodeSelector": d.node_selector})
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
        NullDevices::new(
            &templates::expand(&s.nodes),
            &s.resource_claim_templates,
            HashSet::new(),
        )
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

    const RACKS: &str = r#"
name: t
nodes:
  - {namePrefix: n, count: 4, capacity: {pods: 10}, topology: {hostsPerRack: 2, racksPerBlock: 2},
     devices: {count: 2, multiNode: {count: 1, model: fabric}}}
deviceClasses: [{name: gpu}]
resourceClaimTemplates:
  - {name: two, devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu, count: 2}}]}}
  - {name: unit, devices: {requests: [{name: fabric, exactly: {deviceClassName: gpu}}]}}
"#;

    /// A PodGroup claim takes a rack's unit once; its members go to that
    /// rack's nodes; the next group's claim takes the other rack.
    #[test]
    fn a_group_claim_takes_a_racks_unit_and_its_members_that_rack() {
        let s = Scenario::parse(RACKS, "t.yaml").unwrap();
        let nodes = templates::expand(&s.nodes);
        let mut d = NullDevices::new(
            &nodes,
            &s.resource_claim_templates,
            ["unit".to_string()].into_iter().collect(),
        );
        let member = |gang: &str, i: usize| {
            [
                claim(&format!("{gang}-unit"), "unit"),
                claim(&format!("{gang}-{i}"), "two"),
            ]
        };
        let (n0, a) = d.place(0, &member("a", 0)).unwrap();
        assert_eq!(a.len(), 2);
        let unit = a.iter().find(|x| x.for_group).expect("the group's claim");
        let rack = devices_of(unit);
        assert_eq!(rack.len(), 1);
        assert!(rack[0].starts_with("clique-rack-"), "{rack:?}");
        assert!(
            unit.allocation["nodeSelector"]["nodeSelectorTerms"][0]["matchExpressions"][0]["key"]
                .as_str()
                .is_some()
        );
        // The second member: the same rack, the other node, no second
        // allocation of the group's claim.
        let (n1, a) = d.place(0, &member("a", 1)).unwrap();
        assert_eq!(a.len(), 1);
        assert!(!a[0].for_group);
        assert_ne!(n0, n1);
        assert_eq!(n0 / 2, n1 / 2, "one rack");
        // A third member finds its rack full.
        assert!(d.place(0, &member("a", 2)).is_err());
        // Another group takes the other rack.
        let (n2, a) = d.place(0, &member("b", 0)).unwrap();
        assert_ne!(n2 / 2, n0 / 2);
        assert_ne!(devices_of(a.iter().find(|x| x.for_group).unwrap()), rack);
        // No third rack.
        assert!(d.place(0, &member("c", 0)).is_err());
    }

    #[test]
    fn an_undeclared_template_is_refused() {
        let e = devices().place(0, &[claim("c", "nine")]).unwrap_err();
        assert!(e.contains("\"nine\""), "{e}");
        let mut none = NullDevices::default();
        assert!(none.place(3, &[claim("c", "one")]).is_err());
    }
}
