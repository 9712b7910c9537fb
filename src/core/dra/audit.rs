//! Invariant I9's first half, over any set of allocations: a device is held
//! whole by one claim at most (admin access excepted), and a device that
//! allows multiple allocations is held only in shares, each share by one
//! claim, which together consume no more than each of its capacities.
//!
//! Pure: the caller says whose each allocation is and how to find a device
//! (the scheduler's inventory, the harness's slices).

use std::collections::BTreeMap;

use super::model::{Allocated, Device, DeviceId, QualifiedName, Slice};
use crate::model::Quantity;

/// The device `id` as `slices` publish it: what `violations` is given to
/// find devices by when the slices are all there is (no inventory).
pub fn published<'a>(
    slices: impl IntoIterator<Item = &'a Slice>,
    id: &DeviceId,
) -> Option<&'a Device> {
    slices
        .into_iter()
        .filter(|s| s.driver == id.driver && s.pool == id.pool)
        .flat_map(|s| &s.devices)
        .find(|d| d.name == id.device)
}

/// Every violation among `held` (holder, allocation result), described;
/// `device` finds a device's capacities (a device it cannot find is not
/// checked for capacity). One holder may list the same result twice (a
/// planned allocation and its recorded copy).
pub fn violations<'a>(
    held: impl IntoIterator<Item = (String, &'a Allocated)>,
    device: impl Fn(&DeviceId) -> Option<&'a Device>,
) -> Vec<String> {
    /// What one share consumes (`Share::consumed`).
    type Consumed<'a> = &'a [(std::sync::Arc<str>, Quantity)];
    #[derive(Default)]
    struct Holders<'a> {
        whole: Vec<String>,
        /// shareID → holders, and what it consumes.
        shares: BTreeMap<&'a str, (Vec<String>, Consumed<'a>)>,
    }
    let mut by_device: BTreeMap<&DeviceId, Holders<'a>> = BTreeMap::new();
    for (who, r) in held {
        if r.admin_access {
            continue;
        }
        let h = by_device.entry(&r.device).or_default();
        let list = match &r.share {
            None => &mut h.whole,
            Some(s) => &mut h.shares.entry(&s.id).or_insert((Vec::new(), &s.consumed)).0,
        };
        if !list.contains(&who) {
            list.push(who);
        }
    }
    let mut out = Vec::new();
    for (id, h) in by_device {
        if h.whole.len() > 1 {
            out.push(format!(
                "device {id} allocated to {}",
                h.whole.join(" and ")
            ));
        }
        if h.shares.is_empty() {
            continue;
        }
        if !h.whole.is_empty() {
            out.push(format!(
                "device {id} allocated whole to {} and in shares to {}",
                h.whole.join(" and "),
                h.shares
                    .values()
                    .flat_map(|(who, _)| who.iter().map(String::as_str))
                    .collect::<Vec<_>>()
                    .join(" and ")
            ));
        }
        for (share, (who, _)) in &h.shares {
            if who.len() > 1 {
                out.push(format!(
                    "share {share} of device {id} allocated to {}",
                    who.join(" and ")
                ));
            }
        }
        let Some(d) = device(id) else {
            continue;
        };
        if !d.shared {
            out.push(format!(
                "device {id} does not allow multiple allocations but is allocated in shares"
            ));
            continue;
        }
        let mut used: BTreeMap<QualifiedName, Quantity> = BTreeMap::new();
        for (_, consumed) in h.shares.values() {
            for (name, q) in consumed.iter() {
                let sum = used
                    .entry(QualifiedName::of(&id.driver, name))
                    .or_insert(Quantity::ZERO);
                *sum = sum.checked_add(*q).unwrap_or(*sum);
            }
        }
        for (name, total) in used {
            match d.capacity.get(&name) {
                Some(cap) if total <= cap.value => {}
                Some(cap) => out.push(format!(
                    "device {id}: its shares consume {total} of capacity {} ({} available)",
                    name.0, cap.value
                )),
                None => out.push(format!(
                    "device {id}: its shares consume capacity {}, which it does not have",
                    name.0
                )),
            }
        }
    }
    out
}
