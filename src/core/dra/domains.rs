//! Device domains: where the claims a gang's members share could be
//! allocated, as sets of nodes. A claim a PodGroup shares (KEP-5729) is
//! allocated once, and every member must run where its devices reach: a
//! multi-node device (a rack unit, an NVLink clique) confines the gang to
//! the nodes it reaches, a node-local device to its one node. Which device
//! the claim gets is the gang's domain choice.
//!
//! For each node not yet reached by a domain found, the shared claims are
//! allocated as Reserve would from that node; the devices they would get
//! are a domain, whose nodes are those every one of the devices reaches
//! (given by the caller, who may keep them: they change only with the
//! inventory and the nodes' labels). Each domain also counts its room: the
//! nodes where one member's own claims fit besides, so domains can be
//! ordered and explained ("6 of 8 members' devices free"). The search
//! starts where the caller says (where the last one found its first
//! domain, so a filling cluster is not searched from its full end each
//! time) and stops once it has the domains that will be tried.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::allocate::{Budget, NodeView, Plan};
use super::cel::Evaluator;
use super::inventory::{InUse, Inventory};
use super::model::DeviceId;

/// A node as the search sees it: its name and labels.
pub type NodeRef<'a> = (&'a str, &'a BTreeMap<String, String>);

/// One place the shared claims could be allocated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceDomain {
    /// The devices the shared claims would get, in allocation order.
    pub devices: Vec<DeviceId>,
    /// Indexes (into the nodes searched) of the nodes they reach.
    pub nodes: Vec<usize>,
    /// Of those, the nodes where one member's own claims fit too, counted
    /// up to the members to place.
    pub room: usize,
    /// The node (index) it was found from.
    pub first: usize,
}

impl DeviceDomain {
    /// `gpu.example.com/rack-7/unit-0`, the devices named (at most three).
    pub fn label(&self) -> String {
        let mut names: Vec<String> = self
            .devices
            .iter()
            .take(3)
            .map(ToString::to_string)
            .collect();
        if self.devices.len() > 3 {
            names.push(format!("and {} more", self.devices.len() - 3));
        }
        format!("devices {}", names.join(", "))
    }
}

/// What the domains search found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Domains {
    /// Every place the shared claims could be allocated.
    Found(Vec<DeviceDomain>),
    /// No node can allocate them: each reason, with how many nodes gave it.
    Nowhere(BTreeMap<String, usize>),
}

/// The nodes (indexes into those searched) every one of a domain's
/// devices reaches, given the devices and their reach; the caller may keep
/// them (they change only with the inventory and the nodes' labels).
pub type ReachedBy<'a> = dyn FnMut(&[DeviceId], &[super::model::Reach]) -> Arc<[usize]> + 'a;

/// Where a domains search starts and when it may stop.
#[derive(Debug, Clone, Copy)]
pub struct Scan {
    /// The node searched first; the search wraps around.
    pub start: usize,
    /// Stop once this many domains with room for `enough` are found: the
    /// first found are the ones tried, the rest would only be searched.
    pub wanted: usize,
}

/// The domains of `shared` (prepared claims, none allocated) over `nodes`,
/// each with its room for `own` (one member's own claims, prepared; `None`
/// when members have none), counted up to `enough` (the members to place:
/// a domain with that much room holds them). Nodes are searched in order
/// from `scan.start`, skipping those a domain found already reaches, until
/// `scan.wanted` domains with room for `enough` are found; the domains come
/// in the order their first node was found, with that node's index.
/// `reached` gives the nodes a domain's devices reach.
#[allow(clippy::too_many_arguments)]
pub fn device_domains(
    shared: &Plan,
    own: Option<&Plan>,
    enough: usize,
    nodes: &[NodeRef<'_>],
    scan: Scan,
    inv: &Inventory,
    in_use: &InUse,
    eval: &Evaluator,
    reached: &mut ReachedBy<'_>,
) -> Domains {
    let n = nodes.len();
    let mut covered = vec![false; n];
    let mut found: Vec<DeviceDomain> = Vec::new();
    let mut why: BTreeMap<String, usize> = BTreeMap::new();
    let mut roomy = 0usize;
    let room_of = |reached: &[usize]| match own {
        None => reached.len(),
        Some(own) => reached
            .iter()
            .filter_map(|&i| nodes.get(i))
            .filter(|(name, labels)| {
                own.fits(
                    NodeView { name, labels },
                    inv,
                    in_use,
                    eval,
                    Budget::default(),
                )
                .is_ok()
            })
            .take(enough)
            .count(),
    };
    for i in (0..n).map(|k| (scan.start + k) % n.max(1)) {
        if roomy >= scan.wanted {
            break;
        }
        if covered.get(i).copied().unwrap_or(true) {
            continue;
        }
        let Some((name, labels)) = nodes.get(i) else {
            continue;
        };
        let view = NodeView { name, labels };
        match shared.allocate(view, inv, in_use, eval, Budget::default()) {
            Ok(allocations) => {
                let devices: Vec<DeviceId> = allocations
                    .iter()
                    .flat_map(|a| a.results.iter().map(|r| r.device.clone()))
                    .collect();
                let reach: Vec<super::model::Reach> =
                    allocations.into_iter().flat_map(|a| a.reach).collect();
                let nodes_reached = reached(&devices, &reach);
                for &j in nodes_reached.iter() {
                    if let Some(c) = covered.get_mut(j) {
                        *c = true;
                    }
                }
                if let Some(c) = covered.get_mut(i) {
                    *c = true;
                }
                if !found.iter().any(|d| d.devices == devices) {
                    let room = room_of(&nodes_reached);
                    roomy += usize::from(room >= enough);
                    found.push(DeviceDomain {
                        devices,
                        nodes: nodes_reached.to_vec(),
                        room,
                        first: i,
                    });
                }
            }
            Err(e) => *why.entry(e.node_reason()).or_default() += 1,
        }
    }
    if found.is_empty() {
        return Domains::Nowhere(why);
    }
    Domains::Found(found)
}

/// The nodes (indexes) every reach in `reach` holds on. `index` narrows
/// the nodes to check where a reach names its nodes by label (`In` on a
/// label in every term, as a rack's slice does) or by name; the others are
/// checked on every node.
pub fn nodes_reached(
    nodes: &[NodeRef<'_>],
    reach: &[super::model::Reach],
    index: &mut LabelIndex,
) -> Arc<[usize]> {
    let reaches = |i: &usize| {
        nodes
            .get(*i)
            .is_some_and(|(n, l)| reach.iter().all(|r| r.reaches(n, l)))
    };
    match reach.iter().find_map(|r| index.candidates(nodes, r)) {
        Some(candidates) => candidates.into_iter().filter(reaches).collect(),
        None => (0..nodes.len()).filter(reaches).collect(),
    }
}

/// The nodes (indexes) of each value of a label, built once per label for
/// one list of nodes; the caller starts a new index when the nodes or their
/// labels change.
#[derive(Debug, Default)]
pub struct LabelIndex {
    by_key: std::collections::HashMap<String, std::collections::HashMap<String, Vec<usize>>>,
}

impl LabelIndex {
    /// A superset of the nodes `r` reaches, ascending, when it can be
    /// found without checking every node: a node's own reach, or a
    /// selector each of whose terms has an `In` on a label.
    fn candidates(&mut self, nodes: &[NodeRef<'_>], r: &super::model::Reach) -> Option<Vec<usize>> {
        use super::model::Reach;
        use crate::model::Operator;
        let terms = match r {
            Reach::Node(name) => {
                return Some(
                    nodes
                        .iter()
                        .position(|(n, _)| *n == &**name)
                        .into_iter()
                        .collect(),
                );
            }
            Reach::Selector(s) => &s.terms,
            Reach::All => return None,
        };
        let mut out = Vec::new();
        for t in terms {
            let e = t.match_expressions.iter().find(|e| e.op == Operator::In)?;
            let values = self.by_key.entry(e.key.clone()).or_insert_with(|| {
                let mut m: std::collections::HashMap<String, Vec<usize>> = Default::default();
                for (i, (_, labels)) in nodes.iter().enumerate() {
                    if let Some(v) = labels.get(&e.key) {
                        m.entry(v.clone()).or_default().push(i);
                    }
                }
                m
            });
            for v in &e.values {
                out.extend(values.get(v).into_iter().flatten().copied());
            }
        }
        out.sort_unstable();
        out.dedup();
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dra::model::Reach;
    use crate::model::{NodeSelector, NodeSelectorTerm, Operator, Requirement};

    fn term(key: &str, op: Operator, values: &[&str]) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: vec![Requirement {
                key: key.into(),
                op,
                values: values.iter().map(|v| v.to_string()).collect(),
            }],
            match_fields: Vec::new(),
        }
    }

    /// The index finds what checking every node finds, for selectors it
    /// narrows (`In` in every term) and those it cannot (`NotIn`).
    #[test]
    fn reach_by_label_index_matches_checking_every_node() {
        let labels: Vec<BTreeMap<String, String>> = (0..12)
            .map(|i| {
                let mut l = BTreeMap::new();
                if i % 5 != 4 {
                    l.insert("rack".to_string(), format!("r{}", i / 4));
                }
                l
            })
            .collect();
        let names: Vec<String> = (0..12).map(|i| format!("n{i}")).collect();
        let nodes: Vec<NodeRef<'_>> = names
            .iter()
            .zip(&labels)
            .map(|(n, l)| (n.as_str(), l))
            .collect();
        let selector = |terms: Vec<NodeSelectorTerm>| Reach::Selector(NodeSelector { terms });
        let cases = [
            vec![selector(vec![term("rack", Operator::In, &["r1"])])],
            vec![selector(vec![
                term("rack", Operator::In, &["r0"]),
                term("rack", Operator::In, &["r2", "r9"]),
            ])],
            vec![selector(vec![term("rack", Operator::NotIn, &["r1"])])],
            vec![
                selector(vec![term("rack", Operator::In, &["r1"])]),
                Reach::Node("n5".into()),
            ],
            vec![Reach::Node("n7".into())],
            vec![Reach::All],
        ];
        let mut index = LabelIndex::default();
        for reach in cases {
            let every: Vec<usize> = (0..nodes.len())
                .filter(|&i| reach.iter().all(|r| r.reaches(nodes[i].0, nodes[i].1)))
                .collect();
            let indexed = nodes_reached(&nodes, &reach, &mut index);
            assert_eq!(&*indexed, every.as_slice(), "{reach:?}");
        }
    }
}
