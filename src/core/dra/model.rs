//! The DRA objects as the allocator reads them, decoded from the
//! `resource.k8s.io/v1` types: device classes, resource slices (with their
//! devices, attributes, capacities, taints and shared counters) and resource
//! claims (requests, constraints, the allocation and reservations already
//! recorded).
//!
//! Tenant input is bounded as the API server bounds it (`limits`); a field
//! the allocator cannot honour is refused by name (`DraError`), never
//! dropped.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::resource::v1 as api;

use super::cel::Selector;
use super::limits;
use crate::model::NodeSelector;
use crate::model::Quantity;
use crate::model::wire::NodeSelectorWire;

/// Why a DRA object cannot be used as it stands.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DraError(pub String);

fn err(msg: impl Into<String>) -> DraError {
    DraError(msg.into())
}

/// Refuses more than `max` of something.
fn at_most(what: &str, n: usize, max: usize, noun: &str) -> Result<(), DraError> {
    match n > max {
        true => Err(err(format!("{what}: more than {max} {noun}"))),
        false => Ok(()),
    }
}

/// A fully qualified attribute or capacity name: `<domain>/<id>`. A name
/// without a domain belongs to the device's driver.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QualifiedName(pub Arc<str>);

impl QualifiedName {
    /// `name` as a device of `driver` publishes it.
    pub fn of(driver: &str, name: &str) -> Self {
        match name.contains('/') {
            true => QualifiedName(Arc::from(name)),
            false => QualifiedName(Arc::from(format!("{driver}/{name}"))),
        }
    }

    /// The domain and the identifier.
    pub fn split(&self) -> (&str, &str) {
        self.0.rsplit_once('/').unwrap_or(("", &self.0))
    }
}

/// One attribute value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Attr {
    Bool(bool),
    Int(i64),
    Str(Arc<str>),
    /// A semantic version (`major.minor.patch[-pre][+build]`).
    Version(semver::Version),
    Bools(Vec<bool>),
    Ints(Vec<i64>),
    Strs(Vec<Arc<str>>),
    Versions(Vec<semver::Version>),
}

impl Attr {
    fn from_api(name: &str, a: &api::DeviceAttribute) -> Result<Self, DraError> {
        let bounded = |n: usize| match n > limits::MAX_ATTRIBUTE_LIST {
            true => Err(err(format!(
                "attribute {name}: more than {} values",
                limits::MAX_ATTRIBUTE_LIST
            ))),
            false => Ok(()),
        };
        let version = |v: &str| {
            semver::Version::parse(v).map_err(|e| {
                err(format!(
                    "attribute {name}: version {v:?} is not semver: {e}"
                ))
            })
        };
        let string = |s: &str| match s.len() > limits::MAX_ATTRIBUTE_STRING {
            true => Err(err(format!(
                "attribute {name}: string longer than {} bytes",
                limits::MAX_ATTRIBUTE_STRING
            ))),
            false => Ok(Arc::<str>::from(s)),
        };
        let set = [
            a.bool.is_some(),
            a.int.is_some(),
            a.string.is_some(),
            a.version.is_some(),
            a.bools.is_some(),
            a.ints.is_some(),
            a.strings.is_some(),
            a.versions.is_some(),
        ];
        if set.iter().filter(|s| **s).count() != 1 {
            return Err(err(format!(
                "attribute {name}: exactly one value type must be set"
            )));
        }
        Ok(if let Some(b) = a.bool {
            Attr::Bool(b)
        } else if let Some(i) = a.int {
            Attr::Int(i)
        } else if let Some(s) = &a.string {
            Attr::Str(string(s)?)
        } else if let Some(v) = &a.version {
            Attr::Version(version(v)?)
        } else if let Some(b) = &a.bools {
            bounded(b.len())?;
            Attr::Bools(b.clone())
        } else if let Some(i) = &a.ints {
            bounded(i.len())?;
            Attr::Ints(i.clone())
        } else if let Some(s) = &a.strings {
            bounded(s.len())?;
            Attr::Strs(s.iter().map(|s| string(s)).collect::<Result<_, _>>()?)
        } else if let Some(v) = &a.versions {
            bounded(v.len())?;
            Attr::Versions(v.iter().map(|v| version(v)).collect::<Result<_, _>>()?)
        } else {
            return Err(err(format!("attribute {name}: no value")));
        })
    }
}

/// A taint on a device: `NoSchedule` keeps new allocations off it,
/// `NoExecute` also evicts (for the allocator, the same: not allocatable
/// unless tolerated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceTaint {
    pub key: Arc<str>,
    pub value: Option<Arc<str>>,
    pub effect: Arc<str>,
}

impl DeviceTaint {
    /// Whether it keeps the device from being allocated unless tolerated
    /// (`NoSchedule`, `NoExecute`; `None` only informs).
    pub fn excludes(&self) -> bool {
        matches!(&*self.effect, "NoSchedule" | "NoExecute")
    }
}

/// A DeviceTaintRule: a taint put on the devices its selector picks (by
/// driver, pool and device name; an unset field picks every one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaintRule {
    pub driver: Option<Arc<str>>,
    pub pool: Option<Arc<str>>,
    pub device: Option<Arc<str>>,
    pub taint: DeviceTaint,
}

impl TaintRule {
    pub fn from_api(r: &api::DeviceTaintRule) -> Result<Self, DraError> {
        let name = r.metadata.name.as_deref().unwrap_or_default();
        let t = &r.spec.taint;
        if !matches!(t.effect.as_str(), "NoSchedule" | "NoExecute" | "None") {
            return Err(err(format!(
                "DeviceTaintRule {name}: spec.taint.effect {:?} is not NoSchedule, NoExecute or None",
                t.effect
            )));
        }
        let sel = r.spec.device_selector.as_ref();
        let pick = |f: Option<&String>| f.filter(|v| !v.is_empty()).map(|v| Arc::from(v.as_str()));
        Ok(TaintRule {
            driver: pick(sel.and_then(|s| s.driver.as_ref())),
            pool: pick(sel.and_then(|s| s.pool.as_ref())),
            device: pick(sel.and_then(|s| s.device.as_ref())),
            taint: DeviceTaint {
                key: Arc::from(t.key.as_str()),
                value: t.value.as_deref().map(Arc::from),
                effect: Arc::from(t.effect.as_str()),
            },
        })
    }

    /// Whether it picks devices of this driver's pool.
    pub fn picks_pool(&self, driver: &str, pool: &str) -> bool {
        self.driver.as_deref().is_none_or(|d| d == driver)
            && self.pool.as_deref().is_none_or(|p| p == pool)
    }

    /// Whether it picks this device (of a pool it picks).
    pub fn picks_device(&self, device: &str) -> bool {
        self.device.as_deref().is_none_or(|d| d == device)
    }
}

/// A request's toleration of device taints (as a pod's of node taints).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceToleration {
    pub key: Option<Arc<str>>,
    /// `Equal` (default) or `Exists`.
    pub exists: bool,
    pub value: Option<Arc<str>>,
    pub effect: Option<Arc<str>>,
}

impl DeviceToleration {
    fn from_api(t: &api::DeviceToleration) -> Result<Self, DraError> {
        let exists = match t.operator.as_deref() {
            None | Some("Equal") => false,
            Some("Exists") => true,
            Some(o) => {
                return Err(err(format!(
                    "toleration operator {o:?} is not Equal or Exists"
                )));
            }
        };
        Ok(DeviceToleration {
            key: t.key.as_deref().map(Arc::from),
            exists,
            value: t.value.as_deref().map(Arc::from),
            effect: t.effect.as_deref().map(Arc::from),
        })
    }

    pub fn tolerates(&self, taint: &DeviceTaint) -> bool {
        if self.effect.as_ref().is_some_and(|e| *e != taint.effect) {
            return false;
        }
        match &self.key {
            // An empty key with Exists tolerates every taint.
            None => self.exists,
            Some(k) if *k != taint.key => false,
            Some(_) if self.exists => true,
            Some(_) => self.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
        }
    }
}

/// Where a device can be used from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// Local to one node.
    Node(Arc<str>),
    /// Every node the selector matches (a rack, an interconnect domain).
    Selector(NodeSelector),
    /// Every node.
    All,
}

impl Reach {
    pub fn reaches(&self, node: &str, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Reach::Node(n) => **n == *node,
            Reach::Selector(s) => s.matches(node, labels),
            Reach::All => true,
        }
    }

    fn decode(
        what: &str,
        node_name: Option<&str>,
        selector: Option<&k8s_openapi::api::core::v1::NodeSelector>,
        all: Option<bool>,
    ) -> Result<Option<Self>, DraError> {
        let mut set = Vec::new();
        if let Some(n) = node_name.filter(|n| !n.is_empty()) {
            set.push(Reach::Node(Arc::from(n)));
        }
        if let Some(s) = selector {
            set.push(Reach::Selector(node_selector(what, s)?));
        }
        if all == Some(true) {
            set.push(Reach::All);
        }
        match set.len() {
            0 | 1 => Ok(set.pop()),
            _ => Err(err(format!(
                "{what}: more than one of nodeName, nodeSelector and allNodes is set"
            ))),
        }
    }
}

fn node_selector(
    what: &str,
    s: &k8s_openapi::api::core::v1::NodeSelector,
) -> Result<NodeSelector, DraError> {
    let wire: NodeSelectorWire = serde_json::to_value(s)
        .and_then(serde_json::from_value)
        .map_err(|e| err(format!("{what}: nodeSelector: {e}")))?;
    NodeSelector::from_wire(&wire).map_err(|e| err(format!("{what}: nodeSelector: {e}")))
}

/// How much of a shared counter a device consumes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consumption {
    pub counter_set: Arc<str>,
    pub counters: BTreeMap<Arc<str>, Quantity>,
}

/// One capacity of a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capacity {
    pub value: Quantity,
    /// Set on a shared device only, and boxed: every device keeps its
    /// capacities, and most are not shared.
    pub consumable: Option<Box<Consumable>>,
}

/// What the allocations of a shared device need to know of a capacity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consumable {
    /// The name as the slice spells it (with or without the driver's
    /// domain): a share records its consumption under it.
    pub published: Arc<str>,
    /// How each allocation consumes it.
    pub policy: Option<RequestPolicy>,
}

impl Capacity {
    pub fn policy(&self) -> Option<&RequestPolicy> {
        self.consumable.as_ref()?.policy.as_ref()
    }
}

/// `requestPolicy`: how much of a capacity one allocation of a shared
/// device consumes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestPolicy {
    /// Consumed by a request that does not name the capacity.
    pub default: Option<Quantity>,
    pub range: Option<CapacityRange>,
    /// Ascending; a request is rounded up to the first one it fits.
    pub values: Vec<Quantity>,
}

/// `requestPolicy.validRange`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapacityRange {
    pub min: Quantity,
    pub max: Option<Quantity>,
    pub step: Option<Quantity>,
}

/// One device of a slice.
#[derive(Debug, Clone, PartialEq)]
pub struct Device {
    pub name: Arc<str>,
    pub attributes: BTreeMap<QualifiedName, Attr>,
    pub capacity: BTreeMap<QualifiedName, Capacity>,
    /// `allowMultipleAllocations`: several allocations share the device,
    /// each consuming part of its capacity (`super::capacity`).
    pub shared: bool,
    pub taints: Vec<DeviceTaint>,
    pub consumes: Vec<Consumption>,
    /// Its own reach, in a slice with `perDeviceNodeSelection`.
    pub reach: Option<Reach>,
}

/// A ResourceSlice: one driver's devices in one pool, and where they reach.
#[derive(Debug, Clone, PartialEq)]
pub struct Slice {
    pub name: Arc<str>,
    pub driver: Arc<str>,
    pub pool: Arc<str>,
    pub generation: i64,
    pub slice_count: i64,
    /// `None` with `perDeviceNodeSelection`: each device says.
    pub reach: Option<Reach>,
    pub devices: Vec<Device>,
    /// Counter set → counter → capacity.
    pub shared_counters: BTreeMap<Arc<str>, BTreeMap<Arc<str>, Quantity>>,
}

fn quantity(
    what: &str,
    q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity,
) -> Result<Quantity, DraError> {
    Quantity::parse(&q.0).map_err(|e| err(format!("{what}: {e}")))
}

fn counters(
    what: &str,
    m: &BTreeMap<String, api::Counter>,
) -> Result<BTreeMap<Arc<str>, Quantity>, DraError> {
    at_most(what, m.len(), limits::MAX_COUNTERS, "counters")?;
    m.iter()
        .map(|(k, c)| {
            Ok((
                Arc::from(k.as_str()),
                quantity(&format!("{what}: counter {k}"), &c.value)?,
            ))
        })
        .collect()
}

impl Slice {
    pub fn from_api(s: &api::ResourceSlice) -> Result<Self, DraError> {
        let name = s.metadata.name.clone().unwrap_or_default();
        let spec = &s.spec;
        let what = format!("ResourceSlice {name}");
        let driver = spec.driver.as_str();
        if driver.is_empty() {
            return Err(err(format!("{what}: spec.driver is empty")));
        }
        if spec.pool.name.is_empty() {
            return Err(err(format!("{what}: spec.pool.name is empty")));
        }
        if spec.pool.generation < 0 || spec.pool.resource_slice_count < 1 {
            return Err(err(format!(
                "{what}: spec.pool needs a generation of at least 0 and a resourceSliceCount of at least 1"
            )));
        }
        let per_device = spec.per_device_node_selection == Some(true);
        let reach = Reach::decode(
            &what,
            spec.node_name.as_deref(),
            spec.node_selector.as_ref(),
            spec.all_nodes,
        )?;
        match (&reach, per_device) {
            (None, false) => {
                return Err(err(format!(
                    "{what}: one of nodeName, nodeSelector, allNodes or perDeviceNodeSelection must be set"
                )));
            }
            (Some(_), true) => {
                return Err(err(format!(
                    "{what}: perDeviceNodeSelection excludes nodeName, nodeSelector and allNodes"
                )));
            }
            _ => {}
        }
        let devices_api = spec.devices.as_deref().unwrap_or_default();
        at_most(
            &what,
            devices_api.len(),
            limits::MAX_DEVICES_PER_SLICE,
            "devices",
        )?;
        let mut devices = Vec::with_capacity(devices_api.len());
        let mut names = std::collections::HashSet::new();
        for d in devices_api {
            if !names.insert(d.name.as_str()) {
                return Err(err(format!("{what}: device {} is listed twice", d.name)));
            }
            devices.push(device(&what, driver, d, per_device)?);
        }
        let mut shared_counters = BTreeMap::new();
        for set in spec.shared_counters.as_deref().unwrap_or_default() {
            let c = counters(&format!("{what}: counter set {}", set.name), &set.counters)?;
            shared_counters.insert(Arc::from(set.name.as_str()), c);
        }
        Ok(Slice {
            name: Arc::from(name),
            driver: Arc::from(driver),
            pool: Arc::from(spec.pool.name.as_str()),
            generation: spec.pool.generation,
            slice_count: spec.pool.resource_slice_count,
            reach,
            devices,
            shared_counters,
        })
    }
}

fn device(what: &str, driver: &str, d: &api::Device, per_device: bool) -> Result<Device, DraError> {
    let what = format!("{what}: device {}", d.name);
    let attrs = d.attributes.as_ref();
    let caps = d.capacity.as_ref();
    let n = attrs.map_or(0, BTreeMap::len) + caps.map_or(0, BTreeMap::len);
    at_most(
        &what,
        n,
        limits::MAX_ATTRIBUTES_PER_DEVICE,
        "attributes and capacities",
    )?;
    if d.binding_conditions.as_ref().is_some_and(|c| !c.is_empty()) {
        return Err(err(format!(
            "{what}: bindingConditions are not supported by this scheduler"
        )));
    }
    let mut attributes = BTreeMap::new();
    for (k, a) in attrs.into_iter().flatten() {
        attributes.insert(QualifiedName::of(driver, k), Attr::from_api(k, a)?);
    }
    let shared = d.allow_multiple_allocations == Some(true);
    let mut capacity = BTreeMap::new();
    for (k, c) in caps.into_iter().flatten() {
        let at = format!("{what}: capacity {k}");
        let value = quantity(&at, &c.value)?;
        if value.is_negative() {
            return Err(err(format!("{at}: the value is negative")));
        }
        let policy = match &c.request_policy {
            Some(_) if !shared => {
                return Err(err(format!(
                    "{at}: requestPolicy is set but the device does not allow multiple allocations"
                )));
            }
            Some(p) => Some(request_policy(&at, p, value)?),
            None => None,
        };
        let name = QualifiedName::of(driver, k);
        // Spelled both with and without the driver's domain: the one with
        // it stands, as for attributes.
        if capacity.contains_key(&name) && !k.contains('/') {
            continue;
        }
        let consumable = shared.then(|| {
            Box::new(Consumable {
                published: Arc::from(k.as_str()),
                policy,
            })
        });
        capacity.insert(name, Capacity { value, consumable });
    }
    let taints = d
        .taints
        .as_deref()
        .unwrap_or_default()
        .iter()
        .map(|t| DeviceTaint {
            key: Arc::from(t.key.as_str()),
            value: t.value.as_deref().map(Arc::from),
            effect: Arc::from(t.effect.as_str()),
        })
        .collect();
    let mut consumes = Vec::new();
    for c in d.consumes_counters.as_deref().unwrap_or_default() {
        consumes.push(Consumption {
            counter_set: Arc::from(c.counter_set.as_str()),
            counters: counters(
                &format!("{what}: consumesCounters {}", c.counter_set),
                &c.counters,
            )?,
        });
    }
    let reach = Reach::decode(
        &what,
        d.node_name.as_deref(),
        d.node_selector.as_ref(),
        d.all_nodes,
    )?;
    match (&reach, per_device) {
        (Some(_), false) => {
            return Err(err(format!(
                "{what}: nodeName, nodeSelector and allNodes are per device only with perDeviceNodeSelection"
            )));
        }
        (None, true) => {
            return Err(err(format!(
                "{what}: with perDeviceNodeSelection one of nodeName, nodeSelector and allNodes must be set"
            )));
        }
        _ => {}
    }
    Ok(Device {
        name: Arc::from(d.name.as_str()),
        attributes,
        capacity,
        shared,
        taints,
        consumes,
        reach,
    })
}

fn request_policy(
    what: &str,
    p: &api::CapacityRequestPolicy,
    value: Quantity,
) -> Result<RequestPolicy, DraError> {
    let what = format!("{what}: requestPolicy");
    let q = |field: &str, q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity| {
        let v = quantity(&format!("{what}.{field}"), q)?;
        if v.is_negative() || v > value {
            return Err(err(format!(
                "{what}.{field}: {v} is not between 0 and the capacity ({value})"
            )));
        }
        Ok(v)
    };
    let default = p.default.as_ref().map(|d| q("default", d)).transpose()?;
    let range = match &p.valid_range {
        Some(r) => {
            let step = r
                .step
                .as_ref()
                .map(|s| q("validRange.step", s))
                .transpose()?;
            if step.is_some_and(|s| s.value() <= 0) {
                return Err(err(format!("{what}.validRange.step must be at least 1")));
            }
            Some(CapacityRange {
                min: q("validRange.min", &r.min)?,
                max: r.max.as_ref().map(|m| q("validRange.max", m)).transpose()?,
                step,
            })
        }
        None => None,
    };
    let values_api = p.valid_values.as_deref().unwrap_or_default();
    at_most(&what, values_api.len(), MAX_VALID_VALUES, "validValues")?;
    let values = values_api
        .iter()
        .map(|v| q("validValues", v))
        .collect::<Result<Vec<_>, _>>()?;
    if range.is_some() && !values.is_empty() {
        return Err(err(format!(
            "{what}: validRange and validValues are mutually exclusive"
        )));
    }
    if values.windows(2).any(|w| w[0] >= w[1]) {
        return Err(err(format!("{what}.validValues must be ascending")));
    }
    Ok(RequestPolicy {
        default,
        range,
        values,
    })
}

/// `requestPolicy.validValues` entries, as the API bounds them.
const MAX_VALID_VALUES: usize = 10;

/// A DeviceClass: the selectors every device of the class must pass.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceClass {
    pub name: Arc<str>,
    pub selectors: Vec<Selector>,
    /// `spec.config[].opaque`, as the API has it: carried into the
    /// allocations of requests made from the class (`FromClass`).
    pub config: Vec<serde_json::Value>,
    /// `spec.extendedResourceName`: the extended resource its devices
    /// serve (besides `deviceclass.resource.kubernetes.io/<name>`).
    pub extended_resource_name: Option<Arc<str>>,
    /// `metadata.creationTimestamp` in milliseconds: of two classes naming
    /// one extended resource, the newer serves it.
    pub created_ms: i64,
}

impl DeviceClass {
    pub fn from_api(c: &api::DeviceClass) -> Result<Self, DraError> {
        let name = c.metadata.name.clone().unwrap_or_default();
        let what = format!("DeviceClass {name}");
        let selectors = selectors(&what, c.spec.as_ref().and_then(|s| s.selectors.as_deref()))?;
        let config = c
            .spec
            .as_ref()
            .and_then(|s| s.config.as_deref())
            .unwrap_or_default();
        at_most(&what, config.len(), limits::MAX_CONFIGS, "config")?;
        let config = config
            .iter()
            .filter_map(|c| c.opaque.as_ref())
            .map(|o| serde_json::to_value(o).map_err(|e| err(format!("{what}: config: {e}"))))
            .collect::<Result<_, _>>()?;
        let extended_resource_name = match c
            .spec
            .as_ref()
            .and_then(|s| s.extended_resource_name.as_deref())
        {
            None => None,
            Some(n) if crate::model::extended::is_extended_resource_name(n) => Some(Arc::from(n)),
            Some(n) => {
                return Err(err(format!(
                    "{what}: spec.extendedResourceName {n:?} is not a valid extended resource name"
                )));
            }
        };
        let created_ms = c
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(0, |t| t.0.as_millisecond());
        Ok(DeviceClass {
            name: Arc::from(name),
            selectors,
            config,
            extended_resource_name,
            created_ms,
        })
    }
}

fn selectors(what: &str, s: Option<&[api::DeviceSelector]>) -> Result<Vec<Selector>, DraError> {
    let s = s.unwrap_or_default();
    at_most(what, s.len(), limits::MAX_SELECTORS, "selectors")?;
    s.iter()
        .enumerate()
        .map(|(i, sel)| {
            let cel = sel
                .cel
                .as_ref()
                .ok_or_else(|| err(format!("{what}: selectors[{i}] has no cel expression")))?;
            Selector::compile(&cel.expression)
                .map_err(|e| err(format!("{what}: selectors[{i}]: {e}")))
        })
        .collect()
}

/// How many devices a request takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Exact(u32),
    /// Every matching device (at least one).
    All,
}

/// One way to satisfy a request: the request itself (`exactly`) or one of
/// its `firstAvailable` alternatives, tried in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Alternative {
    /// The name results are recorded under: `request` or `request/sub`.
    pub name: Arc<str>,
    pub class: Arc<str>,
    pub selectors: Vec<Selector>,
    pub mode: Mode,
    pub admin_access: bool,
    pub tolerations: Vec<DeviceToleration>,
    /// `capacity.requests`, names as written (resolved against each
    /// device's driver): a filter on any device, and what a shared device
    /// gives up (`super::capacity`).
    pub capacity: Vec<(Arc<str>, Quantity)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub name: Arc<str>,
    pub alternatives: Vec<Alternative>,
}

/// A constraint over the devices of some requests (all when `requests` is
/// empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    pub requests: Vec<Arc<str>>,
    pub kind: ConstraintKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConstraintKind {
    /// Every device has the attribute, with one value.
    Match(QualifiedName),
    /// Every device has the attribute, each with its own value.
    Distinct(QualifiedName),
}

impl Constraint {
    /// Whether the constraint covers results recorded under `name`
    /// (`request` or `request/sub`).
    pub fn covers(&self, name: &str) -> bool {
        if self.requests.is_empty() {
            return true;
        }
        let request = name.split('/').next().unwrap_or(name);
        self.requests
            .iter()
            .any(|r| **r == *name || **r == *request)
    }
}

/// A device a claim was allocated.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceId {
    pub driver: Arc<str>,
    pub pool: Arc<str>,
    pub device: Arc<str>,
}

impl std::fmt::Display for DeviceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.driver, self.pool, self.device)
    }
}

/// One result of an allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocated {
    /// `request` or `request/sub`.
    pub request: Arc<str>,
    pub device: DeviceId,
    pub admin_access: bool,
    /// Set for one allocation among several of a shared device.
    pub share: Option<Share>,
}

/// One allocation of a shared device (`allowMultipleAllocations`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Share {
    /// `shareID`: tells the device's allocations apart.
    pub id: Arc<str>,
    /// `consumedCapacity`: each of the device's capacities (names as the
    /// slice spells them) and how much of it this allocation takes.
    pub consumed: Vec<(Arc<str>, Quantity)>,
}

/// A claim's allocation, recorded or planned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    pub results: Vec<Allocated>,
    /// Where the devices can be used from: every one of these holds.
    pub reach: Vec<Reach>,
}

/// Who a claim is reserved for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consumer {
    pub api_group: Arc<str>,
    pub resource: Arc<str>,
    pub name: Arc<str>,
    pub uid: Arc<str>,
}

impl Consumer {
    /// A PodGroup as the consumer of the claims it shares with its
    /// members (KEP-5729).
    pub fn pod_group(g: &crate::model::pod_claims::GroupClaims) -> Self {
        Consumer {
            api_group: Arc::from("scheduling.k8s.io"),
            resource: Arc::from("podgroups"),
            name: g.group.clone(),
            uid: g.uid.clone(),
        }
    }
}

/// A ResourceClaim as the allocator reads it.
#[derive(Debug, Clone)]
pub struct Claim {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
    pub uid: Arc<str>,
    pub requests: Vec<Request>,
    pub constraints: Vec<Constraint>,
    pub allocation: Option<Allocation>,
    pub reserved_for: Vec<Consumer>,
    /// The UID of the pod that controls it (a claim generated from a
    /// template for that pod).
    pub owner_pod: Option<Arc<str>>,
    /// The UID of the PodGroup that controls it (a claim generated from a
    /// template of the group's `spec.resourceClaims`, KEP-5729).
    pub owner_group: Option<Arc<str>>,
    /// Marked for deletion: no pod may start using it.
    pub deleting: bool,
    /// Annotated `resource.kubernetes.io/extended-resource-claim: "true"`:
    /// made by a scheduler for its owner pod's extended resources.
    pub extended: bool,
    /// `metadata.resourceVersion`, when it reads as a number (what the API
    /// server hands out in practice): a write's answer and the informer's
    /// older news of the same claim are told apart by it.
    pub resource_version: Option<u64>,
}

impl Claim {
    pub fn from_api(c: &api::ResourceClaim) -> Result<Self, DraError> {
        let namespace = crate::model::namespace_or_default(c.metadata.namespace.as_deref());
        let name = c.metadata.name.clone().unwrap_or_default();
        let what = format!("ResourceClaim {namespace}/{name}");
        let devices = c.spec.as_ref().and_then(|s| s.devices.as_ref());
        let requests_api = devices
            .and_then(|d| d.requests.as_deref())
            .unwrap_or_default();
        at_most(&what, requests_api.len(), limits::MAX_REQUESTS, "requests")?;
        let mut requests = Vec::with_capacity(requests_api.len());
        for r in requests_api {
            requests.push(request(&what, r)?);
        }
        let constraints_api = devices
            .and_then(|d| d.constraints.as_deref())
            .unwrap_or_default();
        at_most(
            &what,
            constraints_api.len(),
            limits::MAX_CONSTRAINTS,
            "constraints",
        )?;
        let mut constraints = Vec::with_capacity(constraints_api.len());
        for (i, k) in constraints_api.iter().enumerate() {
            let attr = |a: &str| {
                // A constraint's attribute must be fully qualified.
                match a.contains('/') {
                    true => Ok(QualifiedName(Arc::from(a))),
                    false => Err(err(format!(
                        "{what}: constraints[{i}]: attribute {a:?} is not fully qualified (<domain>/<name>)"
                    ))),
                }
            };
            let kind = match (&k.match_attribute, &k.distinct_attribute) {
                (Some(a), None) => ConstraintKind::Match(attr(a)?),
                (None, Some(a)) => ConstraintKind::Distinct(attr(a)?),
                _ => {
                    return Err(err(format!(
                        "{what}: constraints[{i}]: exactly one of matchAttribute and distinctAttribute must be set"
                    )));
                }
            };
            let names: Vec<Arc<str>> = k
                .requests
                .as_deref()
                .unwrap_or_default()
                .iter()
                .map(|r| Arc::from(r.as_str()))
                .collect();
            for n in &names {
                let request = n.split('/').next().unwrap_or(n);
                if !requests.iter().any(|r: &Request| *r.name == *request) {
                    return Err(err(format!(
                        "{what}: constraints[{i}] names request {n:?}, which the claim does not have"
                    )));
                }
            }
            constraints.push(Constraint {
                requests: names,
                kind,
            });
        }
        let status = c.status.as_ref();
        let allocation = status
            .and_then(|s| s.allocation.as_ref())
            .map(|a| allocation(&what, a))
            .transpose()?;
        let reserved_for = status
            .and_then(|s| s.reserved_for.as_deref())
            .unwrap_or_default()
            .iter()
            .map(|r| Consumer {
                api_group: Arc::from(r.api_group.as_deref().unwrap_or("")),
                resource: Arc::from(r.resource.as_str()),
                name: Arc::from(r.name.as_str()),
                uid: Arc::from(r.uid.as_str()),
            })
            .collect();
        Ok(Claim {
            namespace: Arc::from(namespace),
            name: Arc::from(name),
            uid: Arc::from(c.metadata.uid.as_deref().unwrap_or("")),
            requests,
            constraints,
            allocation,
            reserved_for,
            owner_pod: c
                .metadata
                .owner_references
                .as_deref()
                .unwrap_or_default()
                .iter()
                .find(|o| o.controller == Some(true) && o.kind == "Pod" && o.api_version == "v1")
                .map(|o| Arc::from(o.uid.as_str())),
            owner_group: c
                .metadata
                .owner_references
                .as_deref()
                .unwrap_or_default()
                .iter()
                .find(|o| {
                    o.controller == Some(true)
                        && o.kind == "PodGroup"
                        && o.api_version.starts_with("scheduling.k8s.io/")
                })
                .map(|o| Arc::from(o.uid.as_str())),
            deleting: c.metadata.deletion_timestamp.is_some(),
            extended: c
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(super::extended::CLAIM_ANNOTATION))
                .is_some_and(|v| v == "true"),
            resource_version: c
                .metadata
                .resource_version
                .as_deref()
                .and_then(|v| v.parse().ok()),
        })
    }

    /// Whether it is reserved for the consumer with this UID.
    pub fn reserved_for_uid(&self, uid: &str) -> bool {
        self.reserved_for.iter().any(|c| *c.uid == *uid)
    }

    /// Whether the allocator asks the same of the devices for both: equal
    /// requests and constraints, whatever the claims' names (two claims
    /// made from one template). Where their devices are allocated, and
    /// the messages naming them, still differ.
    pub fn same_demand(&self, other: &Claim) -> bool {
        self.namespace == other.namespace
            && self.requests == other.requests
            && self.constraints == other.constraints
    }
}

fn request(what: &str, r: &api::DeviceRequest) -> Result<Request, DraError> {
    let what = format!("{what}: request {}", r.name);
    let alternatives = match (&r.exactly, &r.first_available) {
        (Some(e), None) => vec![alternative(
            &what,
            &r.name,
            &e.device_class_name,
            e.selectors.as_deref(),
            e.allocation_mode.as_deref(),
            e.count,
            e.admin_access == Some(true),
            e.tolerations.as_deref(),
            e.capacity.as_ref(),
        )?],
        (None, Some(subs)) => {
            if subs.is_empty() || subs.len() > limits::MAX_SUBREQUESTS {
                return Err(err(format!(
                    "{what}: firstAvailable needs 1 to {} subrequests",
                    limits::MAX_SUBREQUESTS
                )));
            }
            subs.iter()
                .map(|s| {
                    alternative(
                        &what,
                        &format!("{}/{}", r.name, s.name),
                        &s.device_class_name,
                        s.selectors.as_deref(),
                        s.allocation_mode.as_deref(),
                        s.count,
                        false,
                        s.tolerations.as_deref(),
                        s.capacity.as_ref(),
                    )
                })
                .collect::<Result<_, _>>()?
        }
        _ => {
            return Err(err(format!(
                "{what}: exactly one of exactly and firstAvailable must be set"
            )));
        }
    };
    Ok(Request {
        name: Arc::from(r.name.as_str()),
        alternatives,
    })
}

#[allow(clippy::too_many_arguments)]
fn alternative(
    what: &str,
    name: &str,
    class: &str,
    selectors_api: Option<&[api::DeviceSelector]>,
    mode: Option<&str>,
    count: Option<i64>,
    admin_access: bool,
    tolerations: Option<&[api::DeviceToleration]>,
    capacity: Option<&api::CapacityRequirements>,
) -> Result<Alternative, DraError> {
    if class.is_empty() {
        return Err(err(format!("{what}: deviceClassName is empty")));
    }
    let capacity_api = capacity.and_then(|c| c.requests.as_ref());
    at_most(
        what,
        capacity_api.map_or(0, BTreeMap::len),
        limits::MAX_ATTRIBUTES_PER_DEVICE,
        "capacity requests",
    )?;
    let mut capacity = Vec::new();
    for (k, v) in capacity_api.into_iter().flatten() {
        let q = quantity(&format!("{what}: capacity.requests[{k}]"), v)?;
        if q.is_negative() {
            return Err(err(format!("{what}: capacity.requests[{k}] is negative")));
        }
        capacity.push((Arc::from(k.as_str()), q));
    }
    let mode = match (mode.unwrap_or("ExactCount"), count) {
        ("ExactCount", None) => Mode::Exact(1),
        ("ExactCount", Some(n)) if (1..=i64::from(limits::MAX_DEVICES_PER_CLAIM)).contains(&n) => {
            Mode::Exact(u32::try_from(n).unwrap_or(1))
        }
        ("ExactCount", Some(n)) => {
            return Err(err(format!(
                "{what}: count must be between 1 and {}, got {n}",
                limits::MAX_DEVICES_PER_CLAIM
            )));
        }
        ("All", None) => Mode::All,
        ("All", Some(_)) => {
            return Err(err(format!(
                "{what}: count is not allowed with allocationMode All"
            )));
        }
        (m, _) => {
            return Err(err(format!(
                "{what}: allocationMode {m:?} is not ExactCount or All"
            )));
        }
    };
    let tolerations = tolerations.unwrap_or_default();
    at_most(
        what,
        tolerations.len(),
        limits::MAX_TOLERATIONS,
        "tolerations",
    )?;
    Ok(Alternative {
        name: Arc::from(name),
        class: Arc::from(class),
        selectors: selectors(what, selectors_api)?,
        mode,
        admin_access,
        capacity,
        tolerations: tolerations
            .iter()
            .map(DeviceToleration::from_api)
            .collect::<Result<_, _>>()?,
    })
}

fn allocation(what: &str, a: &api::AllocationResult) -> Result<Allocation, DraError> {
    let results = a
        .devices
        .as_ref()
        .and_then(|d| d.results.as_deref())
        .unwrap_or_default()
        .iter()
        .map(|r| {
            let share = match &r.share_id {
                Some(id) => {
                    let entries = r.consumed_capacity.as_ref().map_or(0, BTreeMap::len);
                    at_most(
                        what,
                        entries,
                        limits::MAX_ATTRIBUTES_PER_DEVICE,
                        "consumed capacities",
                    )?;
                    let mut consumed = Vec::new();
                    for (k, q) in r.consumed_capacity.iter().flatten() {
                        let q = quantity(&format!("{what}: consumedCapacity[{k}]"), q)?;
                        consumed.push((Arc::from(k.as_str()), q));
                    }
                    Some(Share {
                        id: Arc::from(id.as_str()),
                        consumed,
                    })
                }
                None => None,
            };
            Ok(Allocated {
                request: Arc::from(r.request.as_str()),
                device: DeviceId {
                    driver: Arc::from(r.driver.as_str()),
                    pool: Arc::from(r.pool.as_str()),
                    device: Arc::from(r.device.as_str()),
                },
                admin_access: r.admin_access == Some(true),
                share,
            })
        })
        .collect::<Result<Vec<_>, DraError>>()?;
    let reach = match &a.node_selector {
        Some(s) => vec![Reach::Selector(node_selector(
            &format!("{what}: allocation"),
            s,
        )?)],
        None => vec![Reach::All],
    };
    Ok(Allocation { results, reach })
}
