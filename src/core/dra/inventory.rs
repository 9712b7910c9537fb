//! The devices the allocator may hand out, and those already taken.
//!
//! A pool (one driver's `pool.name`) is published as one or more
//! ResourceSlices; only a complete pool is used: every slice of its newest
//! generation observed (`resourceSliceCount` of them) and its device names
//! unique. Slices of an older generation are being replaced and are
//! ignored. An incomplete or inconsistent pool is kept with the reason, so
//! a claim that could only be met there is told why.
//!
//! `InUse` is what allocated claims hold: their devices (results with admin
//! access excepted: they monitor a device without taking it), the shares of
//! shared devices and the capacity each consumes, and the shared counters
//! those devices consume (a shared device's once, while it has a share).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError};

use super::cel;
use super::model::{
    Attr, Claim, Device, DeviceClass, DeviceId, DeviceTaint, QualifiedName, Reach, Slice,
};
use crate::model::Quantity;

/// Node name → a range (of `Inventory::local_devices`), with the names in
/// one arena and the entries inline in the table: a lookup per node per
/// cycle reads two small, dense tables instead of chasing each name's
/// allocation.
#[derive(Default)]
struct NodeTable {
    names: String,
    table: hashbrown::HashTable<NodeEntry>,
    hasher: foldhash::fast::RandomState,
}

#[derive(Debug, Clone, Copy)]
struct NodeEntry {
    name: (u32, u32),
    range: (u32, u32),
}

impl std::fmt::Debug for NodeTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeTable")
            .field("nodes", &self.table.len())
            .finish()
    }
}

impl NodeTable {
    fn name(&self, e: &NodeEntry) -> &str {
        let (at, len) = (e.name.0 as usize, e.name.1 as usize);
        self.names
            .get(at..at.saturating_add(len))
            .unwrap_or_default()
    }

    fn insert(&mut self, node: &str, range: (u32, u32)) {
        use std::hash::BuildHasher;
        let hash = self.hasher.hash_one(node);
        let at = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        let len = u32::try_from(node.len()).unwrap_or(u32::MAX);
        self.names.push_str(node);
        let entry = NodeEntry {
            name: (at, len),
            range,
        };
        let (names, hasher) = (&self.names, &self.hasher);
        let name_of = |e: &NodeEntry| {
            let (at, len) = (e.name.0 as usize, e.name.1 as usize);
            names.get(at..at.saturating_add(len)).unwrap_or_default()
        };
        self.table
            .insert_unique(hash, entry, |e| hasher.hash_one(name_of(e)));
    }

    fn get(&self, node: &str) -> Option<(u32, u32)> {
        use std::hash::BuildHasher;
        let hash = self.hasher.hash_one(node);
        self.table
            .find(hash, |e| self.name(e) == node)
            .map(|e| e.range)
    }
}

/// `Inventory::flags`: the device has `NoSchedule`/`NoExecute` taints.
pub const TAINTED: u8 = 1;
/// `Inventory::flags`: the device consumes shared counters.
pub const CONSUMES: u8 = 2;
/// `Inventory::flags`: the device allows multiple allocations (its
/// capacity is consumed, not the device).
pub const SHARED: u8 = 4;

/// One device of a complete pool, with where it reaches and how selectors
/// see it.
#[derive(Debug)]
pub struct PoolDevice {
    /// Its position among every device of the inventory.
    pub index: u32,
    pub id: DeviceId,
    pub device: Device,
    pub reach: Reach,
    pub value: ::cel::Value,
}

/// A counter of a pool's shared counter sets.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CounterId {
    pub driver: Arc<str>,
    pub pool: Arc<str>,
    pub set: Arc<str>,
    pub counter: Arc<str>,
}

#[derive(Debug, Default)]
pub struct Pool {
    pub driver: Arc<str>,
    pub name: Arc<str>,
    /// Why the pool's devices cannot be used, when they cannot.
    pub problem: Option<String>,
    pub devices: Vec<PoolDevice>,
    /// With a problem: where its newest slices (or, with
    /// `perDeviceNodeSelection`, their devices) reach.
    pub problem_reach: Vec<Reach>,
    /// The node every device of the pool is local to, when there is one:
    /// then what its devices consume of its counters reaches no other node.
    pub node: Option<Arc<str>>,
}

/// A pool's driver and name.
type PoolKey = (Arc<str>, Arc<str>);

/// A device's pool (index into `pools`) and position there.
type Loc = (u32, u32);

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// A selector's verdict per device (by `PoolDevice::index`): 0 not yet
/// evaluated, 1 no, 2 yes. Errors are not kept: they end the allocation,
/// and are evaluated again for the message.
pub type Verdicts = Arc<[AtomicU8]>;

/// Every pool and device class.
#[derive(Debug, Default)]
pub struct Inventory {
    /// Tells inventories apart (verdict tables are by device position).
    id: u64,
    /// In driver and pool name order.
    pools: Vec<Pool>,
    classes: HashMap<Arc<str>, DeviceClass>,
    counters: HashMap<CounterId, Quantity>,
    by_id: FastMap<DeviceId, Loc>,
    /// `PoolDevice::index` → where the device is.
    by_index: Vec<Loc>,
    /// Node → its local devices: a range of `local_devices`.
    local: NodeTable,
    /// The node-local devices' indexes, each node's together, in inventory
    /// order: a node's devices are read from one place.
    local_devices: Vec<u32>,
    /// The usable devices that reach by selector or everywhere (indexes).
    shared: Vec<u32>,
    /// Per device (by index), what the allocator must look at the device
    /// itself for (`TAINTED`, `CONSUMES`), so the common device is decided
    /// from compact tables alone.
    flags: Vec<u8>,
    /// Every device of complete pools.
    devices: u32,
    /// Why pools cannot be used, one line each.
    problems: Vec<String>,
    /// Where each pool with a problem reaches (the reach of its newest
    /// slices): `All` requests refuse on those nodes only, as the upstream
    /// allocator gathers only the pools with a slice for the node.
    problem_reach: Vec<Vec<Reach>>,
    /// A problem not tied to a pool (an unreadable slice): every node.
    problem_anywhere: bool,
    /// Selector (by source) → its verdicts, kept as long as the inventory (a
    /// device changes only with its slice, which makes a new inventory).
    verdicts: dashmap::DashMap<Arc<str>, Verdicts, foldhash::fast::RandomState>,
    /// Attribute (by name) → its values per device, for constraints.
    columns: dashmap::DashMap<QualifiedName, Arc<Column>, foldhash::fast::RandomState>,
    /// Node (by name) → the hash of its labels and the devices of `shared`
    /// reaching it, when there are many of them (a rack unit per rack):
    /// each node's selectors are matched once per label set, not per search.
    shared_reach: dashmap::DashMap<Box<str>, (u64, Arc<[u32]>), foldhash::fast::RandomState>,
}

/// Devices reaching by selector at which a node's are kept
/// (`Inventory::shared_reach`) rather than matched on every search.
const SHARED_REACH_KEPT_FROM: usize = 16;
/// Nodes whose shared devices are kept at most; past this the table
/// starts over.
const MAX_SHARED_REACH_NODES: usize = 200_000;

/// One attribute's value on every device of an inventory, as small
/// numbers (equal values, equal numbers), looked up once per device: what
/// `matchAttribute` and `distinctAttribute` compare, without walking each
/// device's attribute map on every node of every cycle.
#[derive(Debug)]
pub struct Column {
    attribute: QualifiedName,
    /// By `PoolDevice::index`: 0 not looked up yet, 1 the device lacks the
    /// attribute, `n + 2` the value numbered `n`.
    ids: Box<[AtomicU32]>,
    numbers: Mutex<HashMap<Attr, u32>>,
}

impl Column {
    /// `value` by the device's index in `inv` (the column's inventory):
    /// the device is read only the first time.
    pub fn value_at(&self, index: u32, inv: &Inventory) -> Option<u32> {
        match self
            .ids
            .get(index as usize)
            .map(|s| s.load(Ordering::Relaxed))
        {
            Some(1) => None,
            Some(n) if n >= 2 => Some(n - 2),
            _ => self.value(inv.device_at(index)?),
        }
    }

    /// The number of `d`'s value, `None` when it lacks the attribute.
    pub fn value(&self, d: &PoolDevice) -> Option<u32> {
        let slot = self.ids.get(d.index as usize);
        match slot.map(|s| s.load(Ordering::Relaxed)) {
            Some(1) => return None,
            Some(n) if n >= 2 => return Some(n - 2),
            _ => {}
        }
        let id = match d.device.attributes.get(&self.attribute) {
            None => 1,
            Some(v) => {
                let mut numbers = self.numbers.lock().unwrap_or_else(PoisonError::into_inner);
                let next = u32::try_from(numbers.len()).unwrap_or(u32::MAX - 2);
                numbers.entry(v.clone()).or_insert(next).saturating_add(2)
            }
        };
        if let Some(s) = slot {
            s.store(id, Ordering::Relaxed);
        }
        id.checked_sub(2)
    }
}

impl Inventory {
    pub fn new<'a>(
        slices: impl IntoIterator<Item = &'a Slice>,
        classes: impl IntoIterator<Item = DeviceClass>,
    ) -> Self {
        let mut by_pool: BTreeMap<PoolKey, Vec<&Slice>> = BTreeMap::new();
        for s in slices {
            by_pool
                .entry((s.driver.clone(), s.pool.clone()))
                .or_default()
                .push(s);
        }
        static IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let mut inv = Inventory {
            id: IDS.fetch_add(1, Ordering::Relaxed),
            classes: classes.into_iter().map(|c| (c.name.clone(), c)).collect(),
            ..Inventory::default()
        };
        let mut local: FastMap<Arc<str>, Vec<u32>> = FastMap::default();
        for ((driver, name), slices) in by_pool {
            let pool = inv.pool(driver.clone(), name.clone(), slices);
            let p = u32::try_from(inv.pools.len()).unwrap_or(u32::MAX);
            for (i, d) in pool.devices.iter().enumerate() {
                let at = (p, u32::try_from(i).unwrap_or(u32::MAX));
                inv.by_id.insert(d.id.clone(), at);
                debug_assert_eq!(d.index as usize, inv.by_index.len());
                inv.by_index.push(at);
                let tainted = d.device.taints.iter().any(DeviceTaint::excludes);
                let consumes = !d.device.consumes.is_empty();
                inv.flags.push(
                    if tainted { TAINTED } else { 0 }
                        | if consumes { CONSUMES } else { 0 }
                        | if d.device.shared { SHARED } else { 0 },
                );
                match &d.reach {
                    Reach::Node(n) => local.entry(n.clone()).or_default().push(d.index),
                    Reach::Selector(_) | Reach::All => inv.shared.push(d.index),
                }
            }
            inv.devices = inv
                .devices
                .saturating_add(u32::try_from(pool.devices.len()).unwrap_or(u32::MAX));
            if let Some(problem) = &pool.problem {
                inv.problems.push(problem.clone());
                inv.problem_reach.push(pool.problem_reach.clone());
            }
            inv.pools.push(pool);
        }
        for (node, devices) in local {
            let start = u32::try_from(inv.local_devices.len()).unwrap_or(u32::MAX);
            let len = u32::try_from(devices.len()).unwrap_or(u32::MAX);
            inv.local_devices.extend(devices);
            inv.local.insert(&node, (start, len));
        }
        inv
    }

    /// The pool of `slices` (one driver's, one pool name's), with where it
    /// reaches when it has a problem.
    fn pool(&mut self, driver: Arc<str>, name: Arc<str>, mut slices: Vec<&Slice>) -> Pool {
        // Slices in name order, as kube-scheduler 1.37's allocator visits
        // them: the first devices that fit are the same ones.
        slices.sort_by(|a, b| a.name.cmp(&b.name));
        let mut pool = self.pool_of(driver, name, &slices);
        if pool.problem.is_some() {
            let newest = slices.iter().map(|s| s.generation).max().unwrap_or(0);
            for s in slices.iter().filter(|s| s.generation == newest) {
                match &s.reach {
                    Some(r) => pool.problem_reach.push(r.clone()),
                    None => pool
                        .problem_reach
                        .extend(s.devices.iter().filter_map(|d| d.reach.clone())),
                }
            }
        }
        pool
    }

    fn pool_of(&mut self, driver: Arc<str>, name: Arc<str>, slices: &[&Slice]) -> Pool {
        let mut pool = Pool {
            driver: driver.clone(),
            name: name.clone(),
            ..Pool::default()
        };
        let newest = slices.iter().map(|s| s.generation).max().unwrap_or(0);
        let current: Vec<&&Slice> = slices.iter().filter(|s| s.generation == newest).collect();
        let expected = current.first().map_or(0, |s| s.slice_count);
        if current.iter().any(|s| s.slice_count != expected) {
            pool.problem = Some(format!(
                "pool {driver}/{name}: its slices of generation {newest} disagree on resourceSliceCount"
            ));
            return pool;
        }
        if i64::try_from(current.len()).unwrap_or(i64::MAX) != expected {
            pool.problem = Some(format!(
                "pool {driver}/{name} is incomplete: {} of its {expected} slices of generation {newest} are published",
                current.len()
            ));
            return pool;
        }
        let mut counters = HashMap::new();
        for s in &current {
            for (set, cs) in &s.shared_counters {
                for (counter, q) in cs {
                    let id = CounterId {
                        driver: driver.clone(),
                        pool: name.clone(),
                        set: set.clone(),
                        counter: counter.clone(),
                    };
                    if counters.insert(id, *q).is_some() {
                        pool.problem = Some(format!(
                            "pool {driver}/{name}: counter {set}/{counter} is defined twice"
                        ));
                        return pool;
                    }
                }
            }
        }
        let mut names = HashSet::new();
        // As kube-scheduler 1.37's allocator: a slice that defines shared
        // counters is a counter-set slice, and devices listed beside them
        // are not offered (the API server refuses such a slice).
        for s in current.iter().filter(|s| s.shared_counters.is_empty()) {
            for d in &s.devices {
                if !names.insert(d.name.clone()) {
                    pool.problem = Some(format!(
                        "pool {driver}/{name}: device {} is published twice",
                        d.name
                    ));
                    pool.devices.clear();
                    return pool;
                }
                for c in &d.consumes {
                    for counter in c.counters.keys() {
                        let id = CounterId {
                            driver: driver.clone(),
                            pool: name.clone(),
                            set: c.counter_set.clone(),
                            counter: counter.clone(),
                        };
                        if !counters.contains_key(&id) {
                            pool.problem = Some(format!(
                                "pool {driver}/{name}: device {} consumes counter {}/{counter}, which the pool does not define",
                                d.name, c.counter_set
                            ));
                            pool.devices.clear();
                            return pool;
                        }
                    }
                }
                let Some(reach) = d.reach.clone().or_else(|| s.reach.clone()) else {
                    continue;
                };
                pool.devices.push(PoolDevice {
                    index: self
                        .devices
                        .saturating_add(u32::try_from(pool.devices.len()).unwrap_or(u32::MAX)),
                    id: DeviceId {
                        driver: driver.clone(),
                        pool: name.clone(),
                        device: d.name.clone(),
                    },
                    value: cel::device_value(&driver, d),
                    device: d.clone(),
                    reach,
                });
            }
        }
        self.counters.extend(counters);
        let mut nodes = pool.devices.iter().map(|d| match &d.reach {
            Reach::Node(n) => Some(n),
            Reach::Selector(_) | Reach::All => None,
        });
        pool.node = match nodes.next() {
            Some(Some(first)) if nodes.all(|n| n == Some(first)) => Some(first.clone()),
            _ => None,
        };
        pool
    }

    /// The one node whose allocations a change in the use of device `id`
    /// can change: a node-local device's node, unless the device consumes
    /// counters its pool shares beyond that node. `None` when the change
    /// may reach other nodes (a device reaching several, counters shared
    /// across nodes, a device not in the inventory).
    pub fn confined_to(&self, id: &DeviceId) -> Option<&Arc<str>> {
        let &(p, i) = self.by_id.get(id)?;
        let pool = self.pools.get(p as usize)?;
        let d = pool.devices.get(i as usize)?;
        let Reach::Node(node) = &d.reach else {
            return None;
        };
        match d.device.consumes.is_empty() || pool.node.as_ref() == Some(node) {
            true => Some(node),
            false => None,
        }
    }

    /// Unique among the inventories of this process.
    pub fn id(&self) -> u64 {
        self.id
    }

    pub fn class(&self, name: &str) -> Option<&DeviceClass> {
        self.classes.get(name)
    }

    pub fn pools(&self) -> impl Iterator<Item = &Pool> {
        self.pools.iter()
    }

    /// Records why some devices cannot be used (an unreadable slice): a
    /// claim that could only be met there is told so, and `All` requests
    /// refuse to allocate while it stands.
    pub fn note_problem(&mut self, problem: String) {
        self.problems.push(problem);
        self.problem_anywhere = true;
    }

    /// Whether a pool with a problem has slices reaching `node` (or a
    /// problem is not tied to a pool): an `All` request cannot know all the
    /// node's devices there.
    pub fn problems_reach(&self, node: &str, labels: &BTreeMap<String, String>) -> bool {
        self.problem_anywhere
            || self
                .problem_reach
                .iter()
                .any(|reach| reach.iter().any(|r| r.reaches(node, labels)))
    }

    /// Why pools cannot be used (incomplete, inconsistent), one line each.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    /// The devices of complete pools that reach `node`: its own, then
    /// those shared by selector or with every node.
    pub fn reachable<'a>(
        &'a self,
        node: &'a str,
        labels: &'a BTreeMap<String, String>,
    ) -> impl Iterator<Item = &'a PoolDevice> + 'a {
        self.reachable_indexes(node, labels)
            .filter_map(|i| self.device_at(i))
    }

    /// `reachable`, as devices' indexes in inventory order (pools by driver
    /// and name, slices by name, devices as published: the order
    /// kube-scheduler's allocator tries them in): a node's own are read from
    /// one slice, without touching the devices, and merged with those
    /// reaching it by selector or everywhere.
    pub fn reachable_indexes<'a>(
        &'a self,
        node: &'a str,
        labels: &'a BTreeMap<String, String>,
    ) -> impl Iterator<Item = u32> + 'a {
        let local = self
            .local
            .get(node)
            .and_then(|(start, len)| {
                self.local_devices
                    .get(start as usize..(start as usize).saturating_add(len as usize))
            })
            .unwrap_or_default();
        // Few devices reaching by selector are matched on each call; many
        // (a rack unit per rack) are matched once per node and kept.
        let (few, kept) = match self.shared.len() >= SHARED_REACH_KEPT_FROM {
            true => (&[][..], Some(self.shared_reaching(node, labels))),
            false => (self.shared.as_slice(), None),
        };
        let matched = few.iter().copied().filter(move |&i| {
            self.device_at(i)
                .is_some_and(|d| d.reach.reaches(node, labels))
        });
        let kept = kept
            .into_iter()
            .flat_map(|k| (0..k.len()).filter_map(move |j| k.get(j).copied()));
        Ascending {
            a: local.iter().copied().peekable(),
            b: matched.chain(kept).peekable(),
        }
    }

    /// The devices of `shared` reaching `node`, matched once per label set
    /// of the node and kept.
    fn shared_reaching(&self, node: &str, labels: &BTreeMap<String, String>) -> Arc<[u32]> {
        use std::hash::BuildHasher;
        let hash = foldhash::fast::FixedState::default().hash_one(labels);
        if let Some(e) = self.shared_reach.get(node)
            && e.0 == hash
        {
            return e.1.clone();
        }
        let reaching: Arc<[u32]> = self
            .shared
            .iter()
            .copied()
            .filter(|&i| {
                self.device_at(i)
                    .is_some_and(|d| d.reach.reaches(node, labels))
            })
            .collect();
        if self.shared_reach.len() >= MAX_SHARED_REACH_NODES {
            self.shared_reach.clear();
        }
        self.shared_reach
            .insert(Box::from(node), (hash, reaching.clone()));
        reaching
    }

    /// The device at `index` (`PoolDevice::index`).
    pub fn device_at(&self, index: u32) -> Option<&PoolDevice> {
        self.at(self.by_index.get(index as usize)?)
    }

    /// What the allocator must read the device itself for (`TAINTED`,
    /// `CONSUMES`, `SHARED`), by index.
    pub fn flags(&self, index: u32) -> u8 {
        self.flags
            .get(index as usize)
            .copied()
            .unwrap_or(TAINTED | CONSUMES | SHARED)
    }

    fn at(&self, &(pool, i): &Loc) -> Option<&PoolDevice> {
        self.pools.get(pool as usize)?.devices.get(i as usize)
    }

    /// The selector's verdict table (see `Verdicts`), made on first use.
    pub fn verdicts(&self, selector: &cel::Selector) -> Verdicts {
        if let Some(v) = self.verdicts.get(&**selector.key()) {
            return v.clone();
        }
        self.verdicts
            .entry(selector.key().clone())
            .or_insert_with(|| (0..self.devices).map(|_| AtomicU8::new(0)).collect())
            .clone()
    }

    /// The attribute's column (see `Column`), made on first use.
    pub fn column(&self, attribute: &QualifiedName) -> Arc<Column> {
        if let Some(c) = self.columns.get(attribute) {
            return c.clone();
        }
        self.columns
            .entry(attribute.clone())
            .or_insert_with(|| {
                Arc::new(Column {
                    attribute: attribute.clone(),
                    ids: (0..self.devices).map(|_| AtomicU32::new(0)).collect(),
                    numbers: Mutex::default(),
                })
            })
            .clone()
    }

    /// `passes` by the device's index: the device is read only when the
    /// selector has not been evaluated on it yet.
    pub fn passes_at(
        &self,
        eval: &cel::Evaluator,
        selector: &cel::Selector,
        verdicts: &[AtomicU8],
        index: u32,
    ) -> Result<bool, String> {
        match verdicts
            .get(index as usize)
            .map(|v| v.load(Ordering::Relaxed))
        {
            Some(1) => Ok(false),
            Some(2) => Ok(true),
            _ => match self.device_at(index) {
                Some(d) => Self::passes(eval, selector, verdicts, d),
                None => Ok(false),
            },
        }
    }

    /// Whether `d` passes `selector`, evaluated once per inventory.
    pub fn passes(
        eval: &cel::Evaluator,
        selector: &cel::Selector,
        verdicts: &[AtomicU8],
        d: &PoolDevice,
    ) -> Result<bool, String> {
        let slot = verdicts.get(d.index as usize);
        match slot.map(|v| v.load(Ordering::Relaxed)) {
            Some(1) => return Ok(false),
            Some(2) => return Ok(true),
            _ => {}
        }
        let v = eval.matches(selector, &d.value);
        if let (Some(slot), Ok(yes)) = (slot, &v) {
            slot.store(if *yes { 2 } else { 1 }, Ordering::Relaxed);
        }
        v
    }

    /// A counter's capacity.
    pub fn counter(&self, id: &CounterId) -> Option<Quantity> {
        self.counters.get(id).copied()
    }

    /// The device, in a complete pool.
    pub fn device(&self, id: &DeviceId) -> Option<&PoolDevice> {
        self.at(self.by_id.get(id)?)
    }
}

/// Two ascending sequences of device indexes, merged in order.
struct Ascending<A: Iterator<Item = u32>, B: Iterator<Item = u32>> {
    a: std::iter::Peekable<A>,
    b: std::iter::Peekable<B>,
}

impl<A: Iterator<Item = u32>, B: Iterator<Item = u32>> Iterator for Ascending<A, B> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        match (self.a.peek(), self.b.peek()) {
            (Some(x), Some(y)) if y < x => self.b.next(),
            (Some(_), _) => self.a.next(),
            (None, _) => self.b.next(),
        }
    }
}

/// The counters a device consumes.
pub fn consumption(d: &PoolDevice) -> impl Iterator<Item = (CounterId, Quantity)> + '_ {
    d.device.consumes.iter().flat_map(move |c| {
        c.counters.iter().map(move |(counter, q)| {
            (
                CounterId {
                    driver: d.id.driver.clone(),
                    pool: d.id.pool.clone(),
                    set: c.counter_set.clone(),
                    counter: counter.clone(),
                },
                *q,
            )
        })
    })
}

/// The devices and counters allocated claims hold. A device may be held
/// more than once at a time (a claim's planned allocation and then its
/// recorded one): each holder takes it and releases it, and the device is
/// free when the last one has.
#[derive(Debug, Default, Clone)]
pub struct InUse {
    devices: FastMap<DeviceId, u32>,
    counters: FastMap<CounterId, Quantity>,
    /// The held devices of the inventory, by `PoolDevice::index` (one bit
    /// each): what the allocator asks per device, without hashing its id.
    held: Vec<u64>,
    /// The inventory `held` indexes (`Inventory::id`); 0 before the first
    /// device, `u64::MAX` once devices of two inventories were held (then
    /// `holds` asks the map).
    held_of: u64,
    /// Shares of shared devices, by device and `shareID`, with how many
    /// holders each has (a share is counted once however many hold it).
    shares: FastMap<(DeviceId, Arc<str>), (u32, Consumption)>,
    /// Per shared device with shares: how many, and the capacity they
    /// consume together.
    consumed: FastMap<DeviceId, SharedUse>,
}

/// Capacities (normalised names) and amounts.
type Consumption = Vec<(QualifiedName, Quantity)>;

/// What the shares of one shared device consume.
#[derive(Debug, Default, Clone)]
struct SharedUse {
    shares: u32,
    used: Consumption,
}

impl InUse {
    /// What the allocations of `claims` hold.
    pub fn of<'a>(claims: impl IntoIterator<Item = &'a Claim>, inv: &Inventory) -> Self {
        let mut in_use = InUse::default();
        for c in claims {
            if let Some(a) = &c.allocation {
                in_use.hold(a, inv);
            }
        }
        in_use
    }

    /// Takes what an allocation holds (its results with admin access
    /// excepted: they monitor a device without taking it).
    pub fn hold(&mut self, a: &super::model::Allocation, inv: &Inventory) {
        for r in a.results.iter().filter(|r| !r.admin_access) {
            match &r.share {
                Some(share) => self.share(&r.device, share, inv),
                None => {
                    self.take(&r.device, inv);
                }
            }
        }
    }

    /// Gives back what `hold` took for the same allocation.
    pub fn unhold(&mut self, a: &super::model::Allocation, inv: &Inventory) {
        for r in a.results.iter().filter(|r| !r.admin_access) {
            match &r.share {
                Some(share) => self.unshare(&r.device, &share.id, inv),
                None => {
                    self.release(&r.device, inv);
                }
            }
        }
    }

    /// Records one holder of a share of a shared device: the first adds
    /// its consumption (and, for the device's first share, the counters
    /// the device consumes).
    fn share(&mut self, id: &DeviceId, share: &super::model::Share, inv: &Inventory) {
        let key = (id.clone(), share.id.clone());
        if let Some((holders, _)) = self.shares.get_mut(&key) {
            *holders = holders.saturating_add(1);
            return;
        }
        let consumed: Consumption = share
            .consumed
            .iter()
            .map(|(name, q)| (QualifiedName::of(&id.driver, name), *q))
            .collect();
        let entry = self.consumed.entry(id.clone()).or_default();
        entry.shares = entry.shares.saturating_add(1);
        for (name, q) in &consumed {
            match entry.used.iter_mut().find(|(n, _)| n == name) {
                Some((_, used)) => *used = used.checked_add(*q).unwrap_or(*used),
                None => entry.used.push((name.clone(), *q)),
            }
        }
        let first = entry.shares == 1;
        self.shares.insert(key, (1, consumed));
        if first && let Some(d) = inv.device(id) {
            self.consume_counters(d);
        }
    }

    /// One holder gives a share back; the last gives back its consumption.
    fn unshare(&mut self, id: &DeviceId, share: &Arc<str>, inv: &Inventory) {
        let key = (id.clone(), share.clone());
        let Some((holders, _)) = self.shares.get_mut(&key) else {
            return;
        };
        *holders = holders.saturating_sub(1);
        if *holders > 0 {
            return;
        }
        let Some((_, consumed)) = self.shares.remove(&key) else {
            return;
        };
        let Some(entry) = self.consumed.get_mut(id) else {
            return;
        };
        entry.shares = entry.shares.saturating_sub(1);
        for (name, q) in &consumed {
            if let Some((_, used)) = entry.used.iter_mut().find(|(n, _)| n == name) {
                *used = used.checked_sub(*q).unwrap_or(Quantity::ZERO);
            }
        }
        if entry.shares == 0 {
            self.consumed.remove(id);
            if let Some(d) = inv.device(id) {
                self.return_counters(d);
            }
        }
    }

    /// What the shares of the shared device `d` consume of each of its
    /// capacities, in the device's capacity order; empty when it has none.
    pub fn consumed(&self, d: &PoolDevice) -> Vec<Quantity> {
        let Some(entry) = self.consumed.get(&d.id) else {
            return Vec::new();
        };
        d.device
            .capacity
            .keys()
            .map(|name| {
                entry
                    .used
                    .iter()
                    .find(|(n, _)| n == name)
                    .map_or(Quantity::ZERO, |(_, q)| *q)
            })
            .collect()
    }

    /// Whether the shared device `d` has shares (its counters are
    /// consumed already).
    pub fn is_shared_out(&self, d: &DeviceId) -> bool {
        self.consumed.contains_key(d)
    }

    /// `is_shared_out` for the device at `index` of `inv`: only a device
    /// that allows multiple allocations is read.
    pub fn shared_out_at(&self, index: u32, inv: &Inventory) -> bool {
        inv.flags(index) & SHARED != 0
            && inv
                .device_at(index)
                .is_some_and(|dev| self.is_shared_out(&dev.id))
    }

    /// Marks a device (and what it consumes) taken once more; `false` when
    /// it was taken already.
    pub fn take(&mut self, id: &DeviceId, inv: &Inventory) -> bool {
        let holders = self.devices.entry(id.clone()).or_insert(0);
        *holders = holders.saturating_add(1);
        if *holders > 1 {
            return false;
        }
        if self.held_of != inv.id() {
            self.held_of = match self.held_of {
                0 => inv.id(),
                _ => u64::MAX,
            };
        }
        if let Some(d) = inv.device(id) {
            let (word, bit) = ((d.index / 64) as usize, d.index % 64);
            if self.held.len() <= word {
                self.held.resize(word + 1, 0);
            }
            self.held[word] |= 1 << bit;
            self.consume_counters(d);
        }
        true
    }

    /// Adds what `d` consumes of its pool's shared counters.
    fn consume_counters(&mut self, d: &PoolDevice) {
        for (counter, q) in consumption(d) {
            let used = self.counters.entry(counter).or_insert(Quantity::ZERO);
            *used = used.checked_add(q).unwrap_or(*used);
        }
    }

    /// Gives back what `consume_counters` added for `d`.
    fn return_counters(&mut self, d: &PoolDevice) {
        for (counter, q) in consumption(d) {
            if let Some(used) = self.counters.get_mut(&counter) {
                *used = used.checked_sub(q).unwrap_or(Quantity::ZERO);
            }
        }
    }

    /// One holder gives the device back; `true` when it is free now.
    pub fn release(&mut self, id: &DeviceId, inv: &Inventory) -> bool {
        let Some(holders) = self.devices.get_mut(id) else {
            return false;
        };
        *holders = holders.saturating_sub(1);
        if *holders > 0 {
            return false;
        }
        self.devices.remove(id);
        if self.held_of != inv.id() && self.held_of != 0 {
            self.held_of = u64::MAX;
        }
        if let Some(d) = inv.device(id) {
            if let Some(w) = self.held.get_mut((d.index / 64) as usize)
                && self.held_of == inv.id()
            {
                *w &= !(1 << (d.index % 64));
            }
            self.return_counters(d);
        }
        true
    }

    /// Whether the device at `index` of `inv` is taken.
    pub fn holds(&self, index: u32, inv: &Inventory) -> bool {
        if self.devices.is_empty() {
            return false;
        }
        if self.held_of != inv.id() {
            return inv
                .device_at(index)
                .is_some_and(|d| self.devices.contains_key(&d.id));
        }
        self.held
            .get((index / 64) as usize)
            .is_some_and(|w| w & (1 << (index % 64)) != 0)
    }

    pub fn contains(&self, id: &DeviceId) -> bool {
        self.devices.contains_key(id)
    }

    /// How much of a counter is consumed.
    pub fn used(&self, id: &CounterId) -> Quantity {
        self.counters.get(id).copied().unwrap_or(Quantity::ZERO)
    }

    /// Devices held whole, and shared devices with shares.
    pub fn len(&self) -> usize {
        self.devices.len() + self.consumed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.devices.is_empty() && self.consumed.is_empty()
    }
}
