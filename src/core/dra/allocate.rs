//! Structured allocation: devices for a pod's claims on one node, as
//! kube-scheduler's DRA allocator chooses them, in a search that backtracks.
//!
//! Each request (in claim order, then request order) takes one of its
//! alternatives (`exactly`, or the first `firstAvailable` subrequest that
//! can be met) and that many devices: reachable from the node, in a
//! complete pool, passing the class's and the request's selectors, their
//! `NoSchedule`/`NoExecute` taints tolerated, free (or monitored only, with
//! admin access), within their pool's shared counters, and meeting the
//! claim's constraints (`matchAttribute`: one value across the devices of
//! the requests named; `distinctAttribute`: a value each). A choice that
//! leaves a later request unmet is undone and the next one tried, so an
//! early pick never blocks a fit that exists. The search is bounded by
//! `Budget::steps`; past it the node is reported as too complex to decide,
//! never as fitting.

use std::sync::Arc;

use super::cel::Evaluator;
use super::inventory::{CounterId, InUse, Inventory, PoolDevice, consumption};
use super::model::{Allocated, Allocation, Alternative, Claim, ConstraintKind, Mode, Reach};
use crate::model::Quantity;

/// The node the pod would run on.
#[derive(Debug, Clone, Copy)]
pub struct NodeView<'a> {
    pub name: &'a str,
    pub labels: &'a std::collections::BTreeMap<String, String>,
}

/// How much search a node may cost.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Device choices tried before giving up.
    pub steps: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Budget { steps: 100_000 }
    }
}

/// Why the claims cannot be allocated on the node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unfit {
    #[error("claim {claim}: request {request}: device class {class} does not exist")]
    NoClass {
        claim: String,
        request: String,
        class: String,
    },
    #[error("{at}: {wanted} needed, {have} available on node {node}{why}")]
    Short {
        /// `claim <namespace>/<name>: request <name>`.
        at: String,
        /// `<n> device(s) of class <class>`, and ` where <selector> && ...`
        /// for the request's own selectors.
        wanted: String,
        have: usize,
        node: String,
        /// What kept other devices out, when one reason did.
        why: String,
    },
    #[error(
        "claim {claim}: the devices available on node {node} cannot meet its constraints together ({detail})"
    )]
    Constraints {
        claim: String,
        node: String,
        detail: String,
    },
    #[error("claim {claim}: {message}")]
    Selector { claim: String, message: String },
    #[error("allocating devices on node {node} took more than {steps} steps; not decided")]
    TooComplex { node: String, steps: u64 },
}

impl Unfit {
    /// The reason without the node's name, so that nodes failing alike are
    /// counted together in a fit error ("4990 node(s) cannot allocate ...").
    pub fn node_reason(&self) -> String {
        match self {
            Unfit::Short {
                at,
                wanted,
                have,
                why,
                ..
            } => format!("cannot allocate {at}: {wanted} wanted, {have} free{why}"),
            Unfit::Constraints { claim, detail, .. } => format!(
                "cannot allocate claim {claim}: the free devices cannot meet its constraints together ({detail})"
            ),
            Unfit::TooComplex { steps, .. } => {
                format!("cannot decide the device allocation within {steps} steps")
            }
            other => other.to_string(),
        }
    }
}

/// One slot of the search: a request's alternative and its candidates.
struct Slot<'a> {
    claim: usize,
    alternative: &'a Alternative,
    /// Candidate devices, in inventory order.
    candidates: Vec<&'a PoolDevice>,
    /// `Mode::All`: every candidate, taken together.
    need: usize,
}

/// Allocates every claim (none of which is allocated yet) on `node`.
/// `in_use` is what other claims hold. Returns one allocation per claim,
/// in order.
pub fn allocate(
    claims: &[&Claim],
    node: NodeView<'_>,
    inv: &Inventory,
    in_use: &InUse,
    eval: &Evaluator,
    budget: Budget,
) -> Result<Vec<Allocation>, Unfit> {
    let reachable: Vec<&PoolDevice> = inv.reachable(node.name, node.labels).collect();
    let incomplete = inv.problems();
    // Per request, its alternatives' candidate lists; the search walks
    // requests in order and alternatives in order.
    let mut requests: Vec<Vec<Slot<'_>>> = Vec::new();
    for (ci, claim) in claims.iter().enumerate() {
        // For messages only: formatted when a request fails.
        let claim_name = || format!("{}/{}", claim.namespace, claim.name);
        for request in &claim.requests {
            let mut slots = Vec::new();
            let mut shortest: Option<Unfit> = None;
            for alt in &request.alternatives {
                let class = inv.class(&alt.class).ok_or_else(|| Unfit::NoClass {
                    claim: claim_name(),
                    request: alt.name.to_string(),
                    class: alt.class.to_string(),
                })?;
                let selectors: Vec<_> = class
                    .selectors
                    .iter()
                    .chain(&alt.selectors)
                    .map(|s| (s, inv.verdicts(s)))
                    .collect();
                let mut matching = Vec::new();
                for d in &reachable {
                    let passes = selectors
                        .iter()
                        .try_fold(true, |ok, (s, v)| {
                            Ok(ok && Inventory::passes(eval, s, v, d)?)
                        })
                        .map_err(|message| Unfit::Selector {
                            claim: claim_name(),
                            message,
                        })?;
                    if passes {
                        matching.push(*d);
                    }
                }
                let tainted = |d: &PoolDevice| {
                    d.device.taints.iter().any(|t| {
                        matches!(&*t.effect, "NoSchedule" | "NoExecute")
                            && !alt.tolerations.iter().any(|tol| tol.tolerates(t))
                    })
                };
                let usable =
                    |d: &PoolDevice| !tainted(d) && (alt.admin_access || !in_use.contains(&d.id));
                let (candidates, need, short) = match alt.mode {
                    Mode::Exact(n) => {
                        let c: Vec<&PoolDevice> =
                            matching.iter().copied().filter(|d| usable(d)).collect();
                        let need = n as usize;
                        let short = c.len() < need;
                        (c, need, short)
                    }
                    Mode::All => {
                        // Every matching device, none of them taken, and
                        // none hidden in a pool that is not complete.
                        let all = matching.iter().all(|d| usable(d)) && incomplete.is_empty();
                        let c = matching.clone();
                        let need = c.len();
                        (c, need, !all || need == 0)
                    }
                };
                if short {
                    let taken = matching.len().saturating_sub(candidates.len());
                    let mut why = Vec::new();
                    if taken > 0 {
                        why.push(format!("{taken} matching device(s) allocated or tainted"));
                    }
                    if let Some(p) = incomplete.first() {
                        why.push((*p).to_string());
                    }
                    let mut wanted = match alt.mode {
                        Mode::Exact(n) => format!("{n} device(s) of class {}", alt.class),
                        Mode::All => format!(
                            "all matching devices (at least 1, all free) of class {}",
                            alt.class
                        ),
                    };
                    for (i, s) in alt.selectors.iter().enumerate() {
                        wanted.push_str(if i == 0 { " where " } else { " && " });
                        wanted.push_str(s.source());
                    }
                    let unfit = Unfit::Short {
                        at: format!("claim {}: request {}", claim_name(), alt.name),
                        wanted,
                        have: candidates.len(),
                        node: node.name.to_string(),
                        why: match why.is_empty() {
                            true => String::new(),
                            false => format!(": {}", why.join("; ")),
                        },
                    };
                    shortest.get_or_insert(unfit);
                    continue;
                }
                slots.push(Slot {
                    claim: ci,
                    alternative: alt,
                    candidates,
                    need,
                });
            }
            if slots.is_empty() {
                return Err(shortest.unwrap_or_else(|| Unfit::Constraints {
                    claim: claim_name(),
                    node: node.name.to_string(),
                    detail: format!("request {} has no alternative", request.name),
                }));
            }
            requests.push(slots);
        }
    }
    let mut search = Search {
        claims,
        inv,
        requests: &requests,
        in_use,
        consumed: Vec::new(),
        chosen: Vec::new(),
        steps: 0,
        budget,
        node: node.name,
        failed_claim: None,
    };
    if search.request(0)? {
        return Ok(search.allocations(claims.len()));
    }
    let claim = search.failed_claim.unwrap_or(0);
    let c = claims.get(claim);
    Err(Unfit::Constraints {
        claim: c.map_or_else(String::new, |c| format!("{}/{}", c.namespace, c.name)),
        node: node.name.to_string(),
        detail: c
            .map(|c| describe_constraints(c))
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| "the pool's shared counters or devices wanted twice".to_string()),
    })
}

fn describe_constraints(c: &Claim) -> String {
    c.constraints
        .iter()
        .map(|k| {
            let (what, attr) = match &k.kind {
                ConstraintKind::Match(a) => ("matchAttribute", a),
                ConstraintKind::Distinct(a) => ("distinctAttribute", a),
            };
            format!("{what} {}", attr.0)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

struct Search<'s, 'a> {
    claims: &'s [&'a Claim],
    inv: &'a Inventory,
    requests: &'s [Vec<Slot<'a>>],
    /// Devices (and counters) held by other claims.
    in_use: &'s InUse,
    /// The counters the choices so far consume, beside `in_use`'s.
    consumed: Vec<(CounterId, Quantity)>,
    /// The choices so far: (claim, alternative name, device, admin access).
    chosen: Vec<(usize, Arc<str>, &'a PoolDevice, bool)>,
    steps: u64,
    budget: Budget,
    node: &'s str,
    /// The claim whose request failed deepest, for the message.
    failed_claim: Option<usize>,
}

impl<'a> Search<'_, 'a> {
    /// Satisfies requests from `r` on; `Ok(false)` when no choice works.
    fn request(&mut self, r: usize) -> Result<bool, Unfit> {
        let Some(slots) = self.requests.get(r) else {
            return Ok(true);
        };
        for slot in slots {
            if self.devices(r, slot, 0, 0)? {
                return Ok(true);
            }
        }
        self.failed_claim.get_or_insert(slots[0].claim);
        Ok(false)
    }

    /// Picks `slot.need - picked` more devices from `slot.candidates[from..]`,
    /// then moves on to request `r + 1`.
    fn devices(
        &mut self,
        r: usize,
        slot: &Slot<'a>,
        from: usize,
        picked: usize,
    ) -> Result<bool, Unfit> {
        if picked == slot.need {
            return self.request(r + 1);
        }
        let left = slot.need - picked;
        let mut i = from;
        while i + left <= slot.candidates.len() {
            let d = slot.candidates[i];
            i += 1;
            self.steps = self.steps.saturating_add(1);
            if self.steps > self.budget.steps {
                return Err(Unfit::TooComplex {
                    node: self.node.to_string(),
                    steps: self.budget.steps,
                });
            }
            if !self.fits(slot, d) {
                continue;
            }
            let admin = slot.alternative.admin_access;
            let mark = self.consumed.len();
            if !admin {
                self.consumed.extend(consumption(d));
            }
            self.chosen
                .push((slot.claim, slot.alternative.name.clone(), d, admin));
            if self.devices(r, slot, i, picked + 1)? {
                return Ok(true);
            }
            self.chosen.pop();
            self.consumed.truncate(mark);
        }
        Ok(false)
    }

    /// Whether `d` can be added to the choices so far.
    fn fits(&self, slot: &Slot<'a>, d: &PoolDevice) -> bool {
        let admin = slot.alternative.admin_access;
        if self.chosen.iter().any(|(_, _, c, _)| c.id == d.id) {
            return false;
        }
        // Candidates are free of other claims already (or monitored with
        // admin access); what remains is the pool's shared counters.
        if !admin && !self.counters_fit(d) {
            return false;
        }
        let claim = self.claims[slot.claim];
        for k in &claim.constraints {
            if !k.covers(&slot.alternative.name) {
                continue;
            }
            let (attr, distinct) = match &k.kind {
                ConstraintKind::Match(a) => (a, false),
                ConstraintKind::Distinct(a) => (a, true),
            };
            let Some(value) = d.device.attributes.get(attr) else {
                return false;
            };
            let others = self
                .chosen
                .iter()
                .filter(|(c, name, _, _)| *c == slot.claim && k.covers(name))
                .filter_map(|(_, _, o, _)| o.device.attributes.get(attr));
            for other in others {
                if (value == other) == distinct {
                    return false;
                }
            }
        }
        true
    }

    /// Whether `d`'s consumption fits its counters, with what other claims
    /// and the choices so far consume.
    fn counters_fit(&self, d: &PoolDevice) -> bool {
        consumption(d).all(|(id, q)| {
            let cap = self.inv.counter(&id).unwrap_or(Quantity::ZERO);
            let ours = self
                .consumed
                .iter()
                .filter(|(c, _)| *c == id)
                .try_fold(self.in_use.used(&id), |sum, (_, q)| sum.checked_add(*q));
            ours.and_then(|sum| sum.checked_add(q))
                .is_some_and(|total| total <= cap)
        })
    }

    fn allocations(&self, n: usize) -> Vec<Allocation> {
        let mut out: Vec<Allocation> = (0..n)
            .map(|_| Allocation {
                results: Vec::new(),
                reach: Vec::new(),
            })
            .collect();
        for (claim, name, d, admin) in &self.chosen {
            let Some(a) = out.get_mut(*claim) else {
                continue;
            };
            a.results.push(Allocated {
                request: name.clone(),
                device: d.id.clone(),
                admin_access: *admin,
            });
            if !a.reach.contains(&d.reach) {
                a.reach.push(d.reach.clone());
            }
        }
        for a in &mut out {
            if a.reach.len() > 1 {
                a.reach.retain(|r| *r != Reach::All);
            }
        }
        out
    }
}
