//! Device domains: where the claims a gang's members share could be
//! allocated, as sets of nodes. A claim a PodGroup shares (KEP-5729) is
//! allocated once, and every member must run where its devices reach: a
//! multi-node device (a rack unit, an NVLink clique) confines the gang to
//! the nodes it reaches, a node-local device to its one node. Which device
//! the claim gets is the gang's domain choice.
//!
//! For each node, the shared claims are allocated as Reserve would from
//! that node; nodes whose allocation takes the same devices form one
//! domain (its nodes are those every one of the devices reaches). Each
//! domain also counts its room: the nodes where one member's own claims
//! fit besides, so domains can be ordered and explained ("6 of 8 members'
//! devices free").

use std::collections::BTreeMap;

use super::allocate::{Budget, NodeView, Plan};
use super::cel::Evaluator;
use super::inventory::{InUse, Inventory};
use super::model::{Allocation, DeviceId};

/// A node as the search sees it: its name and labels.
pub type NodeRef<'a> = (&'a str, &'a BTreeMap<String, String>);

/// One place the shared claims could be allocated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceDomain {
    /// The devices the shared claims would get, in allocation order.
    pub devices: Vec<DeviceId>,
    /// Indexes (into the nodes searched) of the nodes they reach.
    pub nodes: Vec<usize>,
    /// Of those, the nodes where one member's own claims fit too.
    pub room: usize,
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

/// The domains of `shared` (prepared claims, none allocated) over `nodes`,
/// each with its room for `own` (one member's own claims, prepared; `None`
/// when members have none). Nodes are searched in order; the domains come
/// in the order their first node was found.
pub fn device_domains(
    shared: &Plan,
    own: Option<&Plan>,
    nodes: &[NodeRef<'_>],
    inv: &Inventory,
    in_use: &InUse,
    eval: &Evaluator,
) -> Domains {
    let mut found: Vec<(Vec<DeviceId>, Allocation)> = Vec::new();
    let mut why: BTreeMap<String, usize> = BTreeMap::new();
    for (name, labels) in nodes {
        // A node an earlier domain's devices reach would get them again.
        let view = NodeView { name, labels };
        if found
            .iter()
            .any(|(_, a)| a.reach.iter().all(|r| r.reaches(name, labels)))
        {
            continue;
        }
        match shared.allocate(view, inv, in_use, eval, Budget::default()) {
            Ok(allocations) => {
                let devices: Vec<DeviceId> = allocations
                    .iter()
                    .flat_map(|a| a.results.iter().map(|r| r.device.clone()))
                    .collect();
                if found.iter().any(|(d, _)| *d == devices) {
                    continue;
                }
                let reach = allocations.into_iter().flat_map(|a| a.reach).collect();
                found.push((
                    devices,
                    Allocation {
                        results: Vec::new(),
                        reach,
                    },
                ));
            }
            Err(e) => *why.entry(e.node_reason()).or_default() += 1,
        }
    }
    if found.is_empty() {
        return Domains::Nowhere(why);
    }
    let domains = found
        .into_iter()
        .map(|(devices, a)| {
            let reached: Vec<usize> = nodes
                .iter()
                .enumerate()
                .filter(|(_, (n, l))| a.reach.iter().all(|r| r.reaches(n, l)))
                .map(|(i, _)| i)
                .collect();
            let room = match own {
                None => reached.len(),
                Some(own) => reached
                    .iter()
                    .filter(|&&i| {
                        let (name, labels) = nodes[i];
                        own.fits(
                            NodeView { name, labels },
                            inv,
                            in_use,
                            eval,
                            Budget::default(),
                        )
                        .is_ok()
                    })
                    .count(),
            };
            DeviceDomain {
                devices,
                nodes: reached,
                room,
            }
        })
        .collect();
    Domains::Found(domains)
}
