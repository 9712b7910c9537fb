//! Device topology as gang topology: a claim a PodGroup shares with its
//! members (KEP-5729) is allocated once, and every member must run where
//! its devices reach, so the device the claim gets is the gang's domain.
//! Before a gang whose shared claims are not allocated yet is planned, the
//! places they could be allocated (`dra::domains`) become envelopes of the
//! gang's placement tries, composed with its label topology and its
//! composite's domain: the domains with room for the members still to
//! place come first (room counted up to that many, so in the order found),
//! then the roomiest of the rest, at most [`TRIES_PER_LEVEL`] of them. The first member's Reserve then allocates
//! the claims inside the try's nodes, which only that domain's devices
//! reach.
//!
//! A shared claim already allocated (recorded, or planned for a member)
//! confines each member through DynamicResources' PreFilter instead.

use std::collections::HashMap;
use std::sync::Arc;

use super::Engine;
use crate::dra::domains::{Domains, LabelIndex, NodeRef, device_domains, nodes_reached};
use crate::dra::{DeviceId, Plan};
use crate::gang::{MAX_TRIES, PlacementTry, TRIES_PER_LEVEL};
use crate::model::PodInfo;

/// The nodes each set of devices reaches, kept while the inventory and the
/// nodes' labels stay the same (`Cache::labels_generation`): a rack unit's
/// nodes are found once, not per gang cycle.
#[derive(Debug, Default)]
pub(super) struct DeviceReach {
    /// (inventory id, labels generation) the entries hold for.
    key: (u64, u64),
    by_devices: HashMap<Vec<DeviceId>, Arc<[usize]>>,
    /// Where the next domains search starts: where the last one found its
    /// first domain.
    scan_start: usize,
    /// The nodes of each label value, for the reach of multi-node devices.
    labels: LabelIndex,
}

/// Entries kept at most; past this the table starts over.
const MAX_REACH_ENTRIES: usize = 100_000;

impl Engine {
    /// `tries` inside the domains of the claims `first`'s PodGroup shares
    /// and has not allocated yet (unchanged when there are none); `Err`
    /// says why no node can take them.
    pub(super) fn within_shared_devices(
        &mut self,
        first: &PodInfo,
        needed: usize,
        tries: Vec<PlacementTry>,
    ) -> Result<Vec<PlacementTry>, String> {
        if self.greedy_devices {
            return Ok(tries);
        }
        // The inventory is fresh: the cycle refreshed it (`schedule_one`).
        let dra = &self.cache.facts().dra;
        let Some(group) = dra.group_claims_of(first) else {
            return Ok(tries);
        };
        // A claim that cannot be used is the members' PreFilter's to report.
        let Ok(used) = dra.pod_claims(first) else {
            return Ok(tries);
        };
        let unallocated =
            |u: &&crate::cache::UsedClaim<'_>| dra.effective_allocation(u.claim).is_none();
        let shared: Vec<&crate::dra::Claim> = used
            .iter()
            .filter(|u| u.group.is_some())
            .filter(unallocated)
            .map(|u| &***u)
            .collect();
        if shared.is_empty() {
            return Ok(tries);
        }
        let own: Vec<&crate::dra::Claim> = used
            .iter()
            .filter(|u| u.group.is_none())
            .filter(unallocated)
            .map(|u| &***u)
            .collect();
        let inventory = dra.inventory();
        let names = || {
            shared
                .iter()
                .map(|c| format!("{:?}", &*c.name))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let shared_plan = Plan::new(&shared, inventory).map_err(|e| {
            format!(
                "resourceclaim {} shared by PodGroup {}: {e}",
                names(),
                group.group
            )
        })?;
        let own_plan = match own.is_empty() {
            true => None,
            false => Plan::new(&own, inventory).ok(),
        };
        let nodes: Vec<NodeRef<'_>> = self
            .cache
            .nodes()
            .iter()
            .map(|n| (&*n.info.name, &n.info.labels))
            .collect();
        let key = (inventory.id(), self.cache.labels_generation());
        let cache = &mut self.device_reach;
        if cache.key != key || cache.by_devices.len() >= MAX_REACH_ENTRIES {
            cache.key = key;
            cache.by_devices.clear();
            cache.labels = LabelIndex::default();
        }
        let scan = crate::dra::domains::Scan {
            start: cache.scan_start % nodes.len().max(1),
            wanted: TRIES_PER_LEVEL,
        };
        let found = device_domains(
            &shared_plan,
            own_plan.as_ref(),
            needed,
            &nodes,
            scan,
            inventory,
            dra.in_use(),
            dra.evaluator(),
            &mut |devices, reach| {
                let labels = &mut cache.labels;
                cache
                    .by_devices
                    .entry(devices.to_vec())
                    .or_insert_with(|| nodes_reached(&nodes, reach, labels))
                    .clone()
            },
        );
        let mut domains = match found {
            Domains::Found(d) => {
                if let Some(first) = d.first() {
                    self.device_reach.scan_start = first.first;
                }
                d
            }
            Domains::Nowhere(why) => {
                let reasons: Vec<String> = why.iter().map(|(r, n)| format!("{n} {r}")).collect();
                return Err(format!(
                    "0/{} nodes are available for resourceclaim {} shared by PodGroup {}: {}",
                    nodes.len(),
                    names(),
                    group.group,
                    reasons.join("; ")
                ));
            }
        };
        // Domains with room for the members still to place first (room is
        // counted up to that many: they keep the order found); then the
        // roomiest of the rest.
        domains.sort_by_key(|d| match d.room >= needed {
            true => (0, d.room),
            false => (1, usize::MAX - d.room),
        });
        let mut out = Vec::new();
        for d in domains.iter().take(TRIES_PER_LEVEL) {
            let label = format!(
                "{} ({} of {needed} members' devices free)",
                d.label(),
                d.room.min(needed)
            );
            let reason = format!(
                "node(s) out of reach of {} for the claims PodGroup {} shares",
                d.label(),
                group.group
            );
            out.extend(
                tries
                    .iter()
                    .filter_map(|t| t.within_envelope(&d.nodes, &label, &reason)),
            );
        }
        out.truncate(MAX_TRIES);
        Ok(out)
    }
}
