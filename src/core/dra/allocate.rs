//! Structured allocation: devices for a pod's claims on one node, as
//! kube-scheduler's DRA allocator chooses them, in a search that backtracks.
//!
//! Each request (in claim order, then request order) takes one of its
//! alternatives (`exactly`, or the first `firstAvailable` subrequest that
//! can be met) and that many devices: reachable from the node, in a
//! complete pool, passing the class's and the request's selectors, their
//! `NoSchedule`/`NoExecute` taints tolerated, free (or monitored only, with
//! admin access) or, for a device that allows multiple allocations, with
//! the capacity the request consumes left (`super::capacity`), with the
//! capacity `capacity.requests` names, within their pool's shared counters,
//! and meeting the
//! claim's constraints (`matchAttribute`: one value across the devices of
//! the requests named; `distinctAttribute`: a value each). A choice that
//! leaves a later request unmet is undone and the next one tried, so an
//! early pick never blocks a fit that exists. The search is bounded by
//! `Budget::steps`; past it the node is reported as too complex to decide,
//! never as fitting.
//!
//! The work that does not depend on the node is done once per pod
//! (`Plan::new`: classes resolved, selectors' verdict tables found, the
//! messages' fixed parts written), so trying the claims on each of
//! thousands of nodes (`Plan::fits`, Filter) costs a pass over the node's
//! few devices; a lone request without constraints or shared counters is
//! decided by counting, without the search.

use std::sync::Arc;

use super::capacity;
use super::cel::{Evaluator, Selector};
use super::inventory::{
    CONSUMES, Column, CounterId, InUse, Inventory, SHARED, TAINTED, Verdicts, consumption,
};
use super::model::{
    Allocated, Allocation, Alternative, Claim, Constraint, ConstraintKind, Mode, Reach, Share,
};
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
    /// A selector that fails to evaluate, or a request that cannot be met
    /// by any alternative as written.
    #[error("claim {claim}: {message}")]
    Invalid { claim: String, message: String },
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
    Plan::new(claims, inv)?.allocate(node, inv, in_use, eval, budget)
}

/// A pod's unallocated claims, prepared against one inventory: what does
/// not depend on the node.
#[derive(Debug)]
pub struct Plan {
    /// The inventory the verdict tables belong to (`Inventory::id`).
    inventory: u64,
    claims: Vec<PlanClaim>,
    /// Every request's alternatives, in claim, request, alternative order;
    /// the alternatives of one request are adjacent.
    choices: Vec<Choice>,
    /// One request with one `exactly` alternative, and no constraints:
    /// decided by counting the devices that could take it.
    counting: bool,
    /// The reasons of short requests written so far, by (alternative,
    /// have, taken): nodes failing alike (the many full ones) share the
    /// words instead of each writing them.
    reasons: std::sync::Mutex<Vec<(ShortKey, String)>>,
}

#[derive(Debug)]
struct PlanClaim {
    /// `<namespace>/<name>`, for messages.
    label: String,
    /// The claim's UID (empty before it exists): with `label`, what makes
    /// its shares' IDs unique.
    uid: Arc<str>,
    /// Each constraint with its attribute's column.
    constraints: Vec<(Constraint, Arc<Column>)>,
}

#[derive(Debug)]
struct Choice {
    claim: usize,
    /// The request's position among all the claims' requests.
    request: usize,
    alternative: Alternative,
    /// Its position among its request's `firstAvailable` subrequests;
    /// `None` for an `exactly` request.
    rank: Option<usize>,
    /// The class's selectors, then the request's, each with its verdicts.
    selectors: Vec<(Selector, Verdicts)>,
    /// `claim <namespace>/<name>: request <name>`.
    at: String,
    /// `<n> device(s) of class <class>`, and ` where <selector> && ...` for
    /// the request's own selectors.
    wanted: String,
}

/// Why the claims do not fit a node, before it is put into words.
#[derive(Debug)]
enum Fail {
    /// A request's first alternative finds too few devices.
    Short {
        choice: usize,
        have: usize,
        /// Matching devices other claims hold, or tainted.
        taken: usize,
        /// Matching devices without the capacity the request takes.
        lacking: usize,
    },
    /// Enough devices, but no choice of them meets the claim's
    /// constraints and the pools' counters together.
    Constraints {
        claim: usize,
    },
    Invalid {
        claim: usize,
        message: String,
    },
    TooComplex {
        steps: u64,
    },
}

/// One alternative's candidates on a node: `flat[start..end]`.
#[derive(Debug, Clone, Copy)]
struct Slot {
    choice: usize,
    request: usize,
    start: usize,
    end: usize,
    /// How many of them to take (`Mode::All`: every one).
    need: usize,
    /// One past the last candidate whose selectors failed to evaluate
    /// (`start` when none did): the search may not stop short of it.
    poison_end: usize,
}

/// A candidate whose selectors failed to evaluate: (its position in
/// `flat`, the claim, the error). kube-scheduler's allocator evaluates a
/// request's selectors on a device only when its search reaches the device
/// free, and an error there ends the attempt; so does Muster's, at the same
/// point of the same search.
type Poison = (usize, usize, String);

impl Plan {
    /// Resolves the claims' classes and selectors against `inv`; a class
    /// that does not exist refuses them on every node.
    pub fn new(claims: &[&Claim], inv: &Inventory) -> Result<Plan, Unfit> {
        let mut plan = Plan {
            inventory: inv.id(),
            claims: Vec::with_capacity(claims.len()),
            choices: Vec::new(),
            counting: false,
            reasons: Default::default(),
        };
        let mut requests = 0usize;
        for (ci, claim) in claims.iter().enumerate() {
            let label = format!("{}/{}", claim.namespace, claim.name);
            for request in &claim.requests {
                if request.alternatives.is_empty() {
                    return Err(Unfit::Invalid {
                        claim: label,
                        message: format!("request {} has no alternative", request.name),
                    });
                }
                let prioritised = request.alternatives.len() > 1
                    || request.alternatives.iter().any(|a| a.name.contains('/'));
                for (rank, alt) in request.alternatives.iter().enumerate() {
                    let class = inv.class(&alt.class).ok_or_else(|| Unfit::NoClass {
                        claim: label.clone(),
                        request: alt.name.to_string(),
                        class: alt.class.to_string(),
                    })?;
                    let selectors = class
                        .selectors
                        .iter()
                        .chain(&alt.selectors)
                        .map(|s| (s.clone(), inv.verdicts(s)))
                        .collect();
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
                    plan.choices.push(Choice {
                        claim: ci,
                        request: requests,
                        alternative: alt.clone(),
                        rank: prioritised.then_some(rank),
                        selectors,
                        at: format!("claim {label}: request {}", alt.name),
                        wanted,
                    });
                }
                requests += 1;
            }
            let constraints = claim
                .constraints
                .iter()
                .map(|k| {
                    let attribute = match &k.kind {
                        ConstraintKind::Match(a) | ConstraintKind::Distinct(a) => a,
                    };
                    (k.clone(), inv.column(attribute))
                })
                .collect();
            plan.claims.push(PlanClaim {
                label,
                uid: claim.uid.clone(),
                constraints,
            });
        }
        plan.counting = requests == 1
            && plan.choices.len() == 1
            && matches!(plan.choices[0].alternative.mode, Mode::Exact(_))
            && plan.claims.iter().all(|c| c.constraints.is_empty());
        Ok(plan)
    }

    /// Whether the claims can be allocated on `node` (Filter); the refusal
    /// is the node's reason, without its name.
    pub fn fits(
        &self,
        node: NodeView<'_>,
        inv: &Inventory,
        in_use: &InUse,
        eval: &Evaluator,
        budget: Budget,
    ) -> Result<(), String> {
        if self.counting
            && let Some(counted) = self.count(node, inv, in_use, eval)
        {
            return counted.map_err(|f| self.reason(f, inv));
        }
        self.search(node, inv, in_use, eval, budget, |_| ())
            .map_err(|f| self.reason(f, inv))
    }

    /// Whether some request lists `firstAvailable` subrequests, so nodes
    /// differ in which one they can give (`score`).
    pub fn has_subrequests(&self) -> bool {
        self.choices.iter().any(|c| c.rank.is_some())
    }

    /// DynamicResources' Score on a node that passed Filter: for each
    /// `firstAvailable` request, `MAX_SUBREQUESTS - i` for the subrequest
    /// `i` the node's allocation would use, so nodes that can give an
    /// earlier (preferred) subrequest rank higher. 0 when nothing differs
    /// or the node does not fit after all.
    pub fn score(
        &self,
        node: NodeView<'_>,
        inv: &Inventory,
        in_use: &InUse,
        eval: &Evaluator,
        budget: Budget,
    ) -> i64 {
        if !self.has_subrequests() {
            return 0;
        }
        self.search(node, inv, in_use, eval, budget, |s| {
            let mut seen: Vec<usize> = Vec::new();
            let mut score = 0i64;
            for (choice, _) in &s.chosen {
                let c = &self.choices[*choice];
                if let Some(rank) = c.rank
                    && !seen.contains(&c.request)
                {
                    seen.push(c.request);
                    let rank = i64::try_from(rank).unwrap_or(i64::MAX);
                    let max = i64::try_from(super::limits::MAX_SUBREQUESTS).unwrap_or(0);
                    score = score.saturating_add(max.saturating_sub(rank).max(0));
                }
            }
            score
        })
        .unwrap_or(0)
    }

    /// The claims' allocations on `node` (Reserve), one per claim in order.
    pub fn allocate(
        &self,
        node: NodeView<'_>,
        inv: &Inventory,
        in_use: &InUse,
        eval: &Evaluator,
        budget: Budget,
    ) -> Result<Vec<Allocation>, Unfit> {
        self.search(node, inv, in_use, eval, budget, |s| s.allocations())
            .map_err(|f| self.unfit(f, node.name, inv))
    }

    /// The lone request decided by counting; `None` when a candidate
    /// consumes shared counters, which only the search accounts for.
    fn count(
        &self,
        node: NodeView<'_>,
        inv: &Inventory,
        in_use: &InUse,
        eval: &Evaluator,
    ) -> Option<Result<(), Fail>> {
        let c = &self.choices[0];
        let Mode::Exact(n) = c.alternative.mode else {
            return None;
        };
        if inv.id() != self.inventory {
            return Some(Err(self.stale()));
        }
        let need = n as usize;
        let (mut have, mut matching, mut lacking) = (0usize, 0usize, 0usize);
        for i in inv.reachable_indexes(node.name, node.labels) {
            match Self::passes(c, i, inv, eval) {
                // A device other claims hold is passed over before its
                // selectors are evaluated; any other one, not yet enough
                // devices found, is where upstream's search fails too.
                Err(_) if !c.alternative.admin_access && in_use.holds(i, inv) => continue,
                Err(f) => return Some(Err(f)),
                Ok(false) => continue,
                Ok(true) => {}
            }
            // Counters are charged with admin access too (kube-scheduler
            // 1.37): only the search accounts for them.
            if inv.flags(i) & CONSUMES != 0 {
                return None;
            }
            matching += 1;
            match usable(c, i, in_use, inv) {
                Err(f) => return Some(Err(f)),
                Ok(Use::Free) => {
                    have += 1;
                    if have >= need {
                        return Some(Ok(()));
                    }
                }
                Ok(Use::Taken) => {}
                Ok(Use::Lacking) => lacking += 1,
            }
        }
        Some(Err(Fail::Short {
            choice: 0,
            have,
            taken: matching - have - lacking,
            lacking,
        }))
    }

    /// The candidates of each alternative on `node`, then the search;
    /// `found` reads the choices when one is found.
    fn search<T>(
        &self,
        node: NodeView<'_>,
        inv: &Inventory,
        in_use: &InUse,
        eval: &Evaluator,
        budget: Budget,
        found: impl FnOnce(&Search<'_, '_>) -> T,
    ) -> Result<T, Fail> {
        if inv.id() != self.inventory {
            return Err(self.stale());
        }
        // Asked only for `All` requests: the problems of pools reaching the
        // node.
        let mut incomplete: Option<bool> = None;
        let mut flat: Vec<u32> = Vec::new();
        let mut poison: Vec<Poison> = Vec::new();
        // A short alternative searched for its poisoned candidates: the
        // reason when the search fails.
        let mut poisoned_short: Option<Fail> = None;
        let mut slots: Vec<Slot> = Vec::with_capacity(self.choices.len());
        // The first alternative's shortfall, per request, for the message.
        let mut short: Option<Fail> = None;
        for (i, c) in self.choices.iter().enumerate() {
            let first_of_request = i == 0 || self.choices[i - 1].request != c.request;
            if first_of_request {
                if i > 0 && slots.last().is_none_or(|s| s.request != c.request - 1) {
                    return Err(short.take().unwrap_or(Fail::Constraints {
                        claim: self.choices[i - 1].claim,
                    }));
                }
                short = None;
            }
            let start = flat.len();
            let (mut matching, mut lacking, mut all_usable) = (0usize, 0usize, true);
            let (mut poisoned, mut poison_end) = (0usize, start);
            for i in inv.reachable_indexes(node.name, node.labels) {
                match Self::passes(c, i, inv, eval) {
                    Ok(true) => {}
                    Ok(false) => continue,
                    // Upstream evaluates every device for `All` before its
                    // search: an error ends the attempt.
                    Err(f) if c.alternative.mode == Mode::All => return Err(f),
                    // Held by other claims: never evaluated upstream.
                    Err(_) if !c.alternative.admin_access && in_use.holds(i, inv) => continue,
                    Err(f) => {
                        let Fail::Invalid { claim, message } = f else {
                            return Err(f);
                        };
                        poison.push((flat.len(), claim, message));
                        flat.push(i);
                        poisoned += 1;
                        poison_end = flat.len();
                        continue;
                    }
                }
                matching += 1;
                match usable(c, i, in_use, inv)? {
                    Use::Free => flat.push(i),
                    Use::Taken => {
                        all_usable = false;
                        if c.alternative.mode == Mode::All {
                            flat.push(i);
                        }
                    }
                    // Not one of "all" the devices: it cannot serve the
                    // request at all (upstream leaves it out likewise).
                    Use::Lacking => lacking += 1,
                }
            }
            let have = flat.len() - start - poisoned;
            let (need, enough) = match c.alternative.mode {
                Mode::Exact(n) => (n as usize, have >= n as usize),
                Mode::All => (
                    have,
                    all_usable
                        && have > 0
                        && !*incomplete
                            .get_or_insert_with(|| inv.problems_reach(node.name, node.labels)),
                ),
            };
            if !enough {
                let fail = Fail::Short {
                    choice: i,
                    have,
                    taken: matching - have - lacking,
                    lacking,
                };
                if poisoned == 0 {
                    flat.truncate(start);
                    short.get_or_insert(fail);
                    continue;
                }
                poisoned_short.get_or_insert(fail);
            }
            slots.push(Slot {
                choice: i,
                request: c.request,
                start,
                end: flat.len(),
                need,
                poison_end,
            });
        }
        if let Some(last) = self.choices.last()
            && slots.last().is_none_or(|s| s.request != last.request)
        {
            return Err(short.unwrap_or(Fail::Constraints { claim: last.claim }));
        }
        let mut search = Search {
            plan: self,
            inv,
            slots: &slots,
            flat: &flat,
            poison: &poison,
            in_use,
            consumed: Vec::new(),
            chosen: Vec::new(),
            steps: 0,
            budget,
            failed_claim: None,
        };
        if search.request(0)? {
            return Ok(found(&search));
        }
        Err(poisoned_short.unwrap_or(Fail::Constraints {
            claim: search.failed_claim.unwrap_or(0),
        }))
    }

    /// Whether `d` passes the alternative's selectors (its class's, then
    /// its own), each evaluated once per device of the inventory.
    fn passes(c: &Choice, index: u32, inv: &Inventory, eval: &Evaluator) -> Result<bool, Fail> {
        for (s, v) in &c.selectors {
            let yes = inv
                .passes_at(eval, s, v, index)
                .map_err(|message| Fail::Invalid {
                    claim: c.claim,
                    message,
                })?;
            if !yes {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The plan used with an inventory other than its own: its verdicts
    /// and columns would describe other devices, so nothing is decided.
    fn stale(&self) -> Fail {
        Fail::Invalid {
            claim: 0,
            message: "the device inventory changed after the claims were prepared".to_string(),
        }
    }

    fn unfit(&self, f: Fail, node: &str, inv: &Inventory) -> Unfit {
        let label = |claim: usize| self.claims.get(claim).map_or("", |c| &c.label).to_string();
        match f {
            Fail::Short {
                choice,
                have,
                taken,
                lacking,
            } => {
                let c = &self.choices[choice];
                Unfit::Short {
                    at: c.at.clone(),
                    wanted: c.wanted.clone(),
                    have,
                    node: node.to_string(),
                    why: why(taken, lacking, inv),
                }
            }
            Fail::Constraints { claim } => Unfit::Constraints {
                claim: label(claim),
                node: node.to_string(),
                detail: self
                    .claims
                    .get(claim)
                    .map(|c| describe_constraints(c.constraints.iter().map(|(k, _)| k)))
                    .filter(|d| !d.is_empty())
                    .unwrap_or_else(|| {
                        "the pool's shared counters or devices wanted twice".to_string()
                    }),
            },
            Fail::Invalid { claim, message } => Unfit::Invalid {
                claim: label(claim),
                message,
            },
            Fail::TooComplex { steps } => Unfit::TooComplex {
                node: node.to_string(),
                steps,
            },
        }
    }

    /// `Unfit::node_reason` of the failure, written into one string when
    /// the request is short (the common refusal, once per node).
    fn reason(&self, f: Fail, inv: &Inventory) -> String {
        use std::fmt::Write;
        match f {
            Fail::Short {
                choice,
                have,
                taken,
                lacking,
            } => {
                let key = (choice, have, taken, lacking);
                // Contended, or a new combination: written afresh.
                let known = self.reasons.try_lock().ok().and_then(|r| {
                    r.iter()
                        .find(|(k, _)| *k == key)
                        .map(|(_, reason)| reason.clone())
                });
                if let Some(reason) = known {
                    return reason;
                }
                let c = &self.choices[choice];
                let problem = inv.problems().first();
                let mut out = String::with_capacity(
                    c.at.len() + c.wanted.len() + problem.map_or(0, String::len) + 96,
                );
                let _ = write!(
                    out,
                    "cannot allocate {}: {} wanted, {have} free",
                    c.at, c.wanted
                );
                write_why(&mut out, taken, lacking, problem);
                if let Ok(mut r) = self.reasons.try_lock()
                    && r.len() < MAX_KEPT_REASONS
                {
                    r.push((key, out.clone()));
                }
                out
            }
            other => self.unfit(other, "", inv).node_reason(),
        }
    }
}

/// A short request's failure: (alternative, devices free, devices taken,
/// devices lacking capacity).
type ShortKey = (usize, usize, usize, usize);

/// How many distinct reasons a plan keeps (`Plan::reasons`).
const MAX_KEPT_REASONS: usize = 16;

/// What kept devices out of a short request, when one reason did.
fn why(taken: usize, lacking: usize, inv: &Inventory) -> String {
    let mut out = String::new();
    write_why(&mut out, taken, lacking, inv.problems().first());
    out
}

/// `: <n> matching device(s) allocated or tainted; <problem>`, each part
/// when it applies.
fn write_why(out: &mut String, taken: usize, lacking: usize, problem: Option<&String>) {
    use std::fmt::Write;
    let mut sep = ": ";
    if taken > 0 {
        let _ = write!(out, "{sep}{taken} matching device(s) allocated or tainted");
        sep = "; ";
    }
    if lacking > 0 {
        let _ = write!(
            out,
            "{sep}{lacking} matching device(s) without the capacity requested left"
        );
        sep = "; ";
    }
    if let Some(p) = problem {
        out.push_str(sep);
        out.push_str(p);
    }
}

/// Whether an alternative can use a device (`usable`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Use {
    Free,
    /// Held by another claim, or tainted.
    Taken,
    /// Without the capacity the request names, or, shared, without what
    /// it would consume left.
    Lacking,
}

/// Whether the alternative may take the device at `index`: its
/// `NoSchedule`/`NoExecute` taints tolerated, free of other claims (or
/// monitored only), with the capacity `capacity.requests` names, and, when
/// shared, with what the request consumes left. The device itself is read
/// only when it is tainted or shared, or capacity is requested.
fn usable(c: &Choice, index: u32, in_use: &InUse, inv: &Inventory) -> Result<Use, Fail> {
    let alt = &c.alternative;
    let flags = inv.flags(index);
    if flags & TAINTED != 0 {
        let Some(d) = inv.device_at(index) else {
            return Ok(Use::Taken);
        };
        let tainted = d
            .device
            .taints
            .iter()
            .any(|t| t.excludes() && !alt.tolerations.iter().any(|tol| tol.tolerates(t)));
        if tainted {
            return Ok(Use::Taken);
        }
    }
    if !alt.admin_access && in_use.holds(index, inv) {
        return Ok(Use::Taken);
    }
    if flags & SHARED == 0 && alt.capacity.is_empty() {
        return Ok(Use::Free);
    }
    let Some(d) = inv.device_at(index) else {
        return Ok(Use::Taken);
    };
    let want = match capacity::demand(&alt.capacity, &d.id.driver, &d.device) {
        Ok(Some(want)) => want,
        Ok(None) => return Ok(Use::Lacking),
        Err(message) => {
            return Err(Fail::Invalid {
                claim: c.claim,
                message: format!("request {}: {message}", alt.name),
            });
        }
    };
    if flags & SHARED != 0 && !capacity::fits(&want, &in_use.consumed(d), &d.device) {
        return Ok(Use::Lacking);
    }
    Ok(Use::Free)
}

/// A UUID-shaped ID for the `n`th share of `device` a claim's request
/// takes: derived from the claim (UID, namespace and name), the request and
/// the device, so the allocation planned at Reserve and the one written at
/// PreBind carry the same ID, and the shares of different claims differ.
fn share_id(
    claim: &PlanClaim,
    request: &str,
    device: &super::model::DeviceId,
    n: usize,
) -> Arc<str> {
    use std::hash::BuildHasher;
    let parts = (
        &*claim.uid,
        &claim.label,
        request,
        (&*device.driver, &*device.pool, &*device.device),
        n,
    );
    // Two fixed seeds: 128 bits, the same in every process.
    let h = [1u64, 2].map(|seed| foldhash::quality::FixedState::with_seed(seed).hash_one(parts));
    // Version 4, RFC 4122 variant, as random UUIDs are.
    let hi = (h[0] & !0xf000) | 0x4000;
    let lo = (h[1] & !(0xc << 60)) | (0x8 << 60);
    Arc::from(format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        hi >> 32,
        (hi >> 16) & 0xffff,
        hi & 0xffff,
        lo >> 48,
        lo & 0xffff_ffff_ffff
    ))
}

fn describe_constraints<'a>(constraints: impl Iterator<Item = &'a Constraint>) -> String {
    constraints
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
    plan: &'s Plan,
    inv: &'a Inventory,
    slots: &'s [Slot],
    /// Candidates, by device index.
    flat: &'s [u32],
    /// The candidates whose selectors failed to evaluate, by position.
    poison: &'s [Poison],
    /// Devices (and counters) held by other claims.
    in_use: &'s InUse,
    /// The counters the choices so far consume, beside `in_use`'s.
    consumed: Vec<(CounterId, Quantity)>,
    /// The choices so far: (alternative, device index).
    chosen: Vec<(usize, u32)>,
    steps: u64,
    budget: Budget,
    /// The claim whose request failed deepest, for the message.
    failed_claim: Option<usize>,
}

impl<'a> Search<'_, 'a> {
    /// Satisfies the requests from the one whose first slot is `s` on;
    /// `Ok(false)` when no choice works.
    fn request(&mut self, s: usize) -> Result<bool, Fail> {
        let Some(first) = self.slots.get(s) else {
            return Ok(true);
        };
        let next = s + self.slots[s..]
            .iter()
            .take_while(|x| x.request == first.request)
            .count();
        for j in s..next {
            if self.devices(j, next, self.slots[j].start, 0)? {
                return Ok(true);
            }
        }
        self.failed_claim
            .get_or_insert(self.plan.choices[first.choice].claim);
        Ok(false)
    }

    /// Picks `need - picked` more devices of slot `j` from `flat[from..]`,
    /// then moves on to the request whose first slot is `next`.
    fn devices(&mut self, j: usize, next: usize, from: usize, picked: usize) -> Result<bool, Fail> {
        let slot = self.slots[j];
        if picked == slot.need {
            return self.request(next);
        }
        let left = slot.need - picked;
        let mut i = from;
        // Too few candidates left ends the try, unless a poisoned one is
        // still ahead: upstream's search reaches it.
        while i < slot.end && (i + left <= slot.end || i < slot.poison_end) {
            let d = self.flat[i];
            let at = i;
            i += 1;
            self.steps = self.steps.saturating_add(1);
            if self.steps > self.budget.steps {
                return Err(Fail::TooComplex {
                    steps: self.budget.steps,
                });
            }
            if at < slot.poison_end
                && let Ok(k) = self.poison.binary_search_by_key(&at, |p| p.0)
            {
                if self.taken_now(slot.choice, d) {
                    continue;
                }
                let (_, claim, message) = &self.poison[k];
                return Err(Fail::Invalid {
                    claim: *claim,
                    message: message.clone(),
                });
            }
            if !self.fits(slot.choice, d) {
                continue;
            }
            let mark = self.consumed.len();
            if self.inv.flags(d) & CONSUMES != 0
                && self.first_use(d)
                && let Some(dev) = self.inv.device_at(d)
            {
                self.consumed.extend(consumption(dev));
            }
            self.chosen.push((slot.choice, d));
            if self.devices(j, next, i, picked + 1)? {
                return Ok(true);
            }
            self.chosen.pop();
            self.consumed.truncate(mark);
        }
        Ok(false)
    }

    /// Whether the device at index `d` is not taken yet, by other claims
    /// (shared: has no shares) or by the choices so far: its counters are
    /// consumed now, and only now.
    fn first_use(&self, d: u32) -> bool {
        if self.inv.flags(d) & SHARED == 0 {
            return true;
        }
        !self.in_use.shared_out_at(d, self.inv) && !self.chosen.iter().any(|(_, dev)| *dev == d)
    }

    /// Whether a share of the shared device at index `d` for `choice` fits
    /// beside the shares other claims hold and those chosen so far.
    fn share_fits(&self, choice: usize, d: u32) -> bool {
        let Some(dev) = self.inv.device_at(d) else {
            return false;
        };
        let demand = |choice: usize| {
            let alt = &self.plan.choices[choice].alternative;
            capacity::demand(&alt.capacity, &dev.id.driver, &dev.device)
                .ok()
                .flatten()
        };
        let Some(want) = demand(choice) else {
            return false;
        };
        let mut used = self.in_use.consumed(dev);
        used.resize(want.len(), Quantity::ZERO);
        for (o, _) in self.chosen.iter().filter(|(_, other)| *other == d) {
            let Some(theirs) = demand(*o) else {
                return false;
            };
            for (u, t) in used.iter_mut().zip(theirs) {
                let Some(sum) = u.checked_add(t) else {
                    return false;
                };
                *u = sum;
            }
        }
        capacity::fits(&want, &used, &dev.device)
    }

    /// Whether the choices so far keep `choice` from the device at index
    /// `d`: a device that allows one allocation, chosen already (with admin
    /// access: by the same claim; another claim's allocation does not keep
    /// a monitor out, as upstream's allocator lets it in).
    fn taken_now(&self, choice: usize, d: u32) -> bool {
        if self.inv.flags(d) & SHARED != 0 {
            return false;
        }
        let c = &self.plan.choices[choice];
        self.chosen.iter().any(|(o, dev)| {
            *dev == d && (!c.alternative.admin_access || self.plan.choices[*o].claim == c.claim)
        })
    }

    /// Whether the device at index `d` can be added to the choices so far.
    fn fits(&self, choice: usize, d: u32) -> bool {
        let c = &self.plan.choices[choice];
        let shared = self.inv.flags(d) & SHARED != 0;
        if shared {
            // Shared: any number of requests may take it, while what they
            // consume together fits.
            if self.chosen.iter().any(|(_, o)| *o == d) && !self.share_fits(choice, d) {
                return false;
            }
        } else if self.taken_now(choice, d) {
            return false;
        }
        // Candidates are free of other claims already (or monitored with
        // admin access); what remains is the pool's shared counters, which
        // an allocation with admin access consumes too, as kube-scheduler
        // 1.37's allocator charges them.
        if self.first_use(d) && !self.counters_fit(d) {
            return false;
        }
        let name = &c.alternative.name;
        for (k, column) in &self.plan.claims[c.claim].constraints {
            if !k.covers(name) {
                continue;
            }
            let distinct = matches!(k.kind, ConstraintKind::Distinct(_));
            let Some(value) = column.value_at(d, self.inv) else {
                return false;
            };
            let others = self
                .chosen
                .iter()
                .map(|(o, dev)| (&self.plan.choices[*o], dev))
                .filter(|(o, _)| o.claim == c.claim && k.covers(&o.alternative.name))
                .filter_map(|(_, dev)| column.value_at(*dev, self.inv));
            for other in others {
                if (value == other) == distinct {
                    return false;
                }
            }
        }
        true
    }

    /// Whether the consumption of the device at index `d` fits its
    /// counters, with what other claims and the choices so far consume.
    fn counters_fit(&self, d: u32) -> bool {
        if self.inv.flags(d) & CONSUMES == 0 {
            return true;
        }
        let Some(d) = self.inv.device_at(d) else {
            return false;
        };
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

    fn allocations(&self) -> Vec<Allocation> {
        let mut out: Vec<Allocation> = (0..self.plan.claims.len())
            .map(|_| Allocation {
                results: Vec::new(),
                reach: Vec::new(),
            })
            .collect();
        for (k, (choice, d)) in self.chosen.iter().enumerate() {
            let c = &self.plan.choices[*choice];
            let (Some(a), Some(dev)) = (out.get_mut(c.claim), self.inv.device_at(*d)) else {
                continue;
            };
            let share = dev.device.shared.then(|| {
                // The claim's earlier shares of the device, for a unique ID.
                let n = self.chosen[..k]
                    .iter()
                    .filter(|(o, other)| other == d && self.plan.choices[*o].claim == c.claim)
                    .count();
                let want = capacity::demand(&c.alternative.capacity, &dev.id.driver, &dev.device)
                    .ok()
                    .flatten()
                    .unwrap_or_default();
                Share {
                    id: share_id(&self.plan.claims[c.claim], &c.alternative.name, &dev.id, n),
                    consumed: dev
                        .device
                        .capacity
                        .iter()
                        .zip(want)
                        .map(|((name, cap), q)| {
                            let published = cap.consumable.as_ref().map(|c| c.published.clone());
                            (published.unwrap_or_else(|| name.0.clone()), q)
                        })
                        .collect(),
                }
            });
            let d = dev;
            a.results.push(Allocated {
                request: c.alternative.name.clone(),
                device: d.id.clone(),
                admin_access: c.alternative.admin_access,
                share,
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
