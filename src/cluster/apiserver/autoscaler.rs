//! The simulated cluster-autoscaler of `muster cluster`: it serves
//! `autoscaling.x-k8s.io/v1` ProvisioningRequests against the node pools it
//! was given (`crate::kwok::pools`), for the two classes cluster-autoscaler
//! documents:
//!
//! - `check-capacity.autoscaling.x-k8s.io`: does the cluster, as it stands,
//!   have room for every pod of the request? Yes: `Provisioned=True` (the
//!   room is booked); no: `Provisioned=False` (`CapacityIsNotFound`), looked
//!   at again as nodes and pods change. It never adds nodes.
//! - `best-effort-atomic-scale-up.autoscaling.x-k8s.io`: all or nothing. The
//!   pods that do not fit the free room are packed onto new nodes of one
//!   pool; if that pool may grow by that many, all of them are created at
//!   once after the pool's delay, then `Provisioned=True`; otherwise
//!   nothing is created and the request `Failed`.
//!
//! Every request of either class is first `Accepted`. A provisioned request's
//! booking lasts the configured time, then `BookingExpired`; a node
//! provisioned for it that disappears while booked makes it
//! `CapacityRevoked`. Requests of any other class are left alone, as
//! cluster-autoscaler leaves them. Free room is each ready node's
//! allocatable minus the requests of its bound, unfinished pods and the
//! room other requests hold while they scale up or are booked (less their
//! pods already bound: pods carrying
//! `autoscaling.x-k8s.io/consume-provisioning-request`); node selectors are
//! honoured, taints and affinities are not simulated (the scheduler's own
//! placement decides where pods land).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::SimState;
use super::create;
use super::objects::{now, str_at};
use super::store::Stored;
use crate::kwok::pools::{NodePool, POOL_LABEL};
use muster_core::model::Resources;

pub(super) const REQUESTS: &str = "autoscaling.x-k8s.io/v1/provisioningrequests";
const TEMPLATES: &str = "/v1/podtemplates";
const NODES: &str = "/v1/nodes";
const PODS: &str = "/v1/pods";

/// The class that scales up all or nothing.
pub const ATOMIC_CLASS: &str = "best-effort-atomic-scale-up.autoscaling.x-k8s.io";
/// The class that only checks for room.
pub const CHECK_CLASS: &str = "check-capacity.autoscaling.x-k8s.io";
/// Pods counted for one request at most (tenant input is bounded).
const MAX_PODS: i64 = 10_000;

/// What the provisioner was given.
#[derive(Debug, Clone)]
pub struct AutoscalerConfig {
    pub pools: Vec<NodePool>,
    /// How long a provisioned request's capacity stays booked.
    pub booking: Duration,
}

/// The request's conditions, as the API names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Condition {
    Accepted,
    Provisioned,
    Failed,
    BookingExpired,
    CapacityRevoked,
}

impl Condition {
    fn as_str(self) -> &'static str {
        match self {
            Condition::Accepted => "Accepted",
            Condition::Provisioned => "Provisioned",
            Condition::Failed => "Failed",
            Condition::BookingExpired => "BookingExpired",
            Condition::CapacityRevoked => "CapacityRevoked",
        }
    }
}

/// A scale-up decided and waiting out its pool's delay, or a booking.
#[derive(Debug, Clone)]
enum Progress {
    ScalingUp {
        ready_at: Instant,
        pool: usize,
        nodes: usize,
        hold: Hold,
    },
    Booked {
        until: Instant,
        nodes: Vec<String>,
        hold: Hold,
    },
}

/// The room a request holds while it scales up or is booked: its pods,
/// less those of its pods already bound (they hold their own room).
#[derive(Debug, Clone)]
struct Hold {
    namespace: String,
    name: String,
    pods: Vec<Shape>,
}

impl Progress {
    fn hold(&self) -> &Hold {
        match self {
            Progress::ScalingUp { hold, .. } | Progress::Booked { hold, .. } => hold,
        }
    }
}

/// The annotation by which a pod consumes a request's capacity.
pub const CONSUME_ANNOTATION: &str = "autoscaling.x-k8s.io/consume-provisioning-request";

/// Starts the provisioner; it runs until `shutdown`.
pub(super) fn spawn(state: Arc<SimState>, config: AutoscalerConfig, shutdown: CancellationToken) {
    tokio::spawn(run(state, config, shutdown));
}

async fn run(state: Arc<SimState>, config: AutoscalerConfig, shutdown: CancellationToken) {
    let mut events = state.store.subscribe_all();
    // Keyed by the request's UID.
    let mut progress: HashMap<String, Progress> = HashMap::new();
    loop {
        reconcile(&state, &config, &mut progress);
        let next = progress
            .values()
            .map(|p| match p {
                Progress::ScalingUp { ready_at, .. } => *ready_at,
                Progress::Booked { until, .. } => *until,
            })
            .min()
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep_until(next) => {}
            ev = events.recv() => match ev {
                Ok(ev) if [REQUESTS, TEMPLATES, NODES, PODS].contains(&&*ev.resource) => {}
                Ok(_) => continue,
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return,
            },
        }
    }
}

fn all(state: &SimState, res: &str) -> Vec<Arc<Stored>> {
    state.store.list(res, None, None, None, |_| true).0
}

/// One pod of a request: its requests and node selector.
#[derive(Debug, Clone)]
struct Shape {
    requests: Resources,
    selector: BTreeMap<String, String>,
}

/// A node's labels and free room.
struct Room {
    labels: BTreeMap<String, String>,
    free: Resources,
}

fn fits(r: &Resources, free: &Resources) -> bool {
    r.exceeding(free).next().is_none()
}

fn matches(selector: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

fn resources_at(v: &Value, pointer: &str) -> Resources {
    let items: Vec<(String, String)> = v
        .pointer(pointer)
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, q)| Some((k.clone(), q.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    Resources::from_quantities(items.iter().map(|(k, q)| (k.as_str(), q.as_str())))
        .unwrap_or_default()
}

fn string_map(v: &Value, pointer: &str) -> BTreeMap<String, String> {
    v.pointer(pointer)
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, s)| Some((k.clone(), s.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// A pod spec's effective requests: its containers' sum, at least each
/// init container's, and the pod itself.
fn pod_requests(spec: &Value) -> Resources {
    let mut sum = Resources::default();
    for c in spec
        .get("containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        sum.add(&resources_at(c, "/resources/requests"));
    }
    for c in spec
        .get("initContainers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        sum.max_with(&resources_at(c, "/resources/requests"));
    }
    sum.pods = 1;
    sum
}

/// Every ready node's free room, less what the requests in `progress`
/// other than `except` hold (their pods not yet bound).
fn rooms(state: &SimState, progress: &HashMap<String, Progress>, except: &str) -> Vec<Room> {
    let mut used: HashMap<String, Resources> = HashMap::new();
    let mut consumed: HashMap<(String, String), usize> = HashMap::new();
    for p in all(state, PODS) {
        let v = p.value();
        let Some(node) = str_at(&v, "/spec/nodeName") else {
            continue;
        };
        if let Some(pr) = str_at(
            &v,
            &format!(
                "/metadata/annotations/{}",
                CONSUME_ANNOTATION.replace('/', "~1")
            ),
        ) {
            let ns = str_at(&v, "/metadata/namespace").unwrap_or_default();
            *consumed
                .entry((ns.to_string(), pr.to_string()))
                .or_default() += 1;
        }
        if matches!(
            str_at(&v, "/status/phase"),
            Some("Succeeded") | Some("Failed")
        ) {
            continue;
        }
        if let Some(spec) = v.get("spec") {
            used.entry(node.to_string())
                .or_default()
                .add(&pod_requests(spec));
        }
    }
    let mut rooms: Vec<Room> = all(state, NODES)
        .iter()
        .map(|n| n.value())
        .filter(|v| v.pointer("/spec/unschedulable") != Some(&Value::Bool(true)))
        .map(|v| {
            let mut free = resources_at(&v, "/status/allocatable");
            let name = str_at(&v, "/metadata/name").unwrap_or_default();
            if let Some(u) = used.get(name) {
                free.sub(u);
            }
            Room {
                labels: string_map(&v, "/metadata/labels"),
                free,
            }
        })
        .collect();
    let mut held: Vec<(&String, &Hold)> = progress
        .iter()
        .filter(|(uid, _)| uid.as_str() != except)
        .map(|(uid, p)| (uid, p.hold()))
        .collect();
    held.sort_by_key(|(uid, _)| *uid);
    for (_, hold) in held {
        let bound = consumed
            .get(&(hold.namespace.clone(), hold.name.clone()))
            .copied()
            .unwrap_or(0);
        let waiting: Vec<Shape> = hold.pods.iter().skip(bound).cloned().collect();
        pack(waiting, &mut rooms);
    }
    rooms
}

/// Places each pod on the first room that takes it; returns those that
/// fit nowhere.
fn pack(pods: Vec<Shape>, rooms: &mut [Room]) -> Vec<Shape> {
    let mut left = Vec::new();
    for pod in pods {
        match rooms
            .iter_mut()
            .find(|r| matches(&pod.selector, &r.labels) && fits(&pod.requests, &r.free))
        {
            Some(r) => r.free.sub(&pod.requests),
            None => left.push(pod),
        }
    }
    left
}

/// The request's pods, from its pod sets and their PodTemplates; `Err`
/// names what is missing or wrong.
fn shapes(state: &SimState, ns: &str, pr: &Value) -> Result<Vec<Shape>, String> {
    let sets = pr
        .pointer("/spec/podSets")
        .and_then(Value::as_array)
        .filter(|s| !s.is_empty())
        .ok_or("spec.podSets is empty")?;
    let mut out = Vec::new();
    for set in sets {
        let name = str_at(set, "/podTemplateRef/name").ok_or("a pod set names no template")?;
        let count = set.get("count").and_then(Value::as_i64).unwrap_or(0);
        if count <= 0 || count > MAX_PODS || out.len() as i64 + count > MAX_PODS {
            return Err(format!(
                "pod set {name}: count must be 1 to {MAX_PODS} in all"
            ));
        }
        let template = state
            .store
            .get(TEMPLATES, ns, name)
            .ok_or_else(|| format!("PodTemplate {ns}/{name} not found"))?
            .value();
        let spec = template
            .pointer("/template/spec")
            .ok_or_else(|| format!("PodTemplate {ns}/{name} has no template.spec"))?;
        let shape = Shape {
            requests: pod_requests(spec),
            selector: string_map(spec, "/nodeSelector"),
        };
        out.extend(std::iter::repeat_n(shape, count as usize));
    }
    Ok(out)
}

/// The condition of `type_`, if set: (status, reason).
fn condition(pr: &Value, type_: Condition) -> Option<(bool, String)> {
    pr.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| str_at(c, "/type") == Some(type_.as_str()))
        .map(|c| {
            (
                str_at(c, "/status") == Some("True"),
                str_at(c, "/reason").unwrap_or_default().to_string(),
            )
        })
}

/// Sets a condition (keeping its transition time when the status holds)
/// and writes the request's status; a conflict is retried on its event.
fn set(state: &SimState, stored: &Stored, type_: Condition, status: bool, reason: &str, msg: &str) {
    let mut v = stored.value();
    let generation = v
        .pointer("/metadata/generation")
        .cloned()
        .unwrap_or(json!(1));
    let new = json!({
        "type": type_.as_str(),
        "status": if status { "True" } else { "False" },
        "reason": reason,
        "message": msg,
        "lastTransitionTime": now(),
        "observedGeneration": generation,
    });
    let conditions = v
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
        .map(std::mem::take)
        .unwrap_or_default();
    let mut out: Vec<Value> = Vec::with_capacity(conditions.len() + 1);
    let mut replaced = false;
    for c in conditions {
        if str_at(&c, "/type") == Some(type_.as_str()) {
            let same = str_at(&c, "/status") == new.get("status").and_then(Value::as_str)
                && str_at(&c, "/reason") == Some(reason)
                && str_at(&c, "/message") == Some(msg);
            if same {
                return;
            }
            out.push(new.clone());
            replaced = true;
        } else {
            out.push(c);
        }
    }
    if !replaced {
        out.push(new);
    }
    v["status"]["conditions"] = Value::Array(out);
    let res: Arc<str> = Arc::from(REQUESTS);
    let _ = state.store.replace(&res, Some(stored.rv), v);
}

fn reconcile(
    state: &SimState,
    config: &AutoscalerConfig,
    progress: &mut HashMap<String, Progress>,
) {
    let requests = all(state, REQUESTS);
    let live: HashSet<String> = requests
        .iter()
        .filter_map(|s| str_at(&s.value(), "/metadata/uid").map(str::to_string))
        .collect();
    progress.retain(|uid, _| live.contains(uid));
    let node_names: HashSet<String> = all(state, NODES)
        .iter()
        .filter_map(|n| str_at(&n.value(), "/metadata/name").map(str::to_string))
        .collect();
    for stored in requests {
        let v = stored.value();
        let class = str_at(&v, "/spec/provisioningClassName").unwrap_or_default();
        if class != ATOMIC_CLASS && class != CHECK_CLASS {
            continue;
        }
        if v.pointer("/metadata/deletionTimestamp").is_some() {
            continue;
        }
        let uid = str_at(&v, "/metadata/uid").unwrap_or_default().to_string();
        let ns = str_at(&v, "/metadata/namespace")
            .unwrap_or_default()
            .to_string();
        let terminal = [Condition::Failed, Condition::BookingExpired]
            .iter()
            .any(|c| condition(&v, *c).is_some_and(|(s, _)| s));
        if terminal {
            progress.remove(&uid);
            continue;
        }
        if condition(&v, Condition::Accepted).is_none() {
            set(
                state,
                &stored,
                Condition::Accepted,
                true,
                "Accepted",
                "the request is accepted",
            );
            // Its event brings it back.
            continue;
        }
        step(
            state,
            config,
            progress,
            &stored,
            &v,
            class,
            &uid,
            &ns,
            &node_names,
        );
    }
}

#[allow(clippy::too_many_arguments)]
fn step(
    state: &SimState,
    config: &AutoscalerConfig,
    progress: &mut HashMap<String, Progress>,
    stored: &Stored,
    v: &Value,
    class: &str,
    uid: &str,
    ns: &str,
    node_names: &HashSet<String>,
) {
    let now_i = Instant::now();
    match progress.get(uid).cloned() {
        Some(Progress::Booked { until, nodes, .. }) => {
            if let Some(gone) = nodes.iter().find(|n| !node_names.contains(*n)) {
                let msg = format!("node {gone} provisioned for the request was removed");
                set(
                    state,
                    stored,
                    Condition::CapacityRevoked,
                    true,
                    "CapacityRevoked",
                    &msg,
                );
            }
            if now_i >= until {
                set(
                    state,
                    stored,
                    Condition::BookingExpired,
                    true,
                    "BookingExpired",
                    &format!("the capacity was booked for {}s", config.booking.as_secs()),
                );
                progress.remove(uid);
            }
            return;
        }
        Some(Progress::ScalingUp {
            ready_at,
            pool,
            nodes,
            hold,
        }) => {
            if now_i < ready_at {
                return;
            }
            match create_nodes(state, config, pool, nodes) {
                Ok(names) => {
                    let msg = format!(
                        "{} node(s) of pool {} provisioned: {}",
                        names.len(),
                        config.pools.get(pool).map_or("?", |p| p.name.as_str()),
                        names.join(", ")
                    );
                    set(
                        state,
                        stored,
                        Condition::Provisioned,
                        true,
                        "Provisioned",
                        &msg,
                    );
                    progress.insert(
                        uid.to_string(),
                        Progress::Booked {
                            until: now_i + config.booking,
                            nodes: names,
                            hold,
                        },
                    );
                }
                Err(why) => {
                    set(
                        state,
                        stored,
                        Condition::Failed,
                        true,
                        "ScaleUpFailed",
                        &why,
                    );
                    progress.remove(uid);
                }
            }
            return;
        }
        None => {}
    }
    if condition(v, Condition::Provisioned).is_some_and(|(s, _)| s) {
        // Provisioned before this provisioner started: booked from now.
        let hold = Hold {
            namespace: ns.to_string(),
            name: str_at(v, "/metadata/name").unwrap_or_default().to_string(),
            pods: shapes(state, ns, v).unwrap_or_default(),
        };
        progress.insert(
            uid.to_string(),
            Progress::Booked {
                until: now_i + config.booking,
                nodes: Vec::new(),
                hold,
            },
        );
        return;
    }
    let pods = match shapes(state, ns, v) {
        Ok(p) => p,
        Err(why) => {
            set(
                state,
                stored,
                Condition::Failed,
                true,
                "InvalidRequest",
                &why,
            );
            return;
        }
    };
    let count = pods.len();
    let hold = Hold {
        namespace: ns.to_string(),
        name: str_at(v, "/metadata/name").unwrap_or_default().to_string(),
        pods: pods.clone(),
    };
    let mut rooms = rooms(state, progress, uid);
    let left = pack(pods, &mut rooms);
    if left.is_empty() {
        let msg = format!("room for all {count} pod(s) is in the cluster; booked");
        set(
            state,
            stored,
            Condition::Provisioned,
            true,
            "CapacityIsFound",
            &msg,
        );
        progress.insert(
            uid.to_string(),
            Progress::Booked {
                until: now_i + config.booking,
                nodes: Vec::new(),
                hold,
            },
        );
        return;
    }
    if class == CHECK_CLASS {
        let msg = format!(
            "{} of {count} pod(s) fit nowhere in the cluster",
            left.len()
        );
        set(
            state,
            stored,
            Condition::Provisioned,
            false,
            "CapacityIsNotFound",
            &msg,
        );
        return;
    }
    match plan_scale_up(state, config, &left) {
        Ok((pool, nodes)) => {
            let p = &config.pools[pool];
            let msg = format!(
                "scaling pool {} up by {nodes} node(s) for {} pod(s)",
                p.name,
                left.len()
            );
            set(
                state,
                stored,
                Condition::Provisioned,
                false,
                "ScaleUpInProgress",
                &msg,
            );
            progress.insert(
                uid.to_string(),
                Progress::ScalingUp {
                    ready_at: now_i + p.delay(),
                    pool,
                    nodes,
                    hold,
                },
            );
        }
        Err(why) => set(
            state,
            stored,
            Condition::Failed,
            true,
            "NotProvisioned",
            &why,
        ),
    }
}

/// Nodes of the pool now, by name.
fn pool_nodes(state: &SimState, pool: &NodePool) -> HashSet<String> {
    all(state, NODES)
        .iter()
        .map(|n| n.value())
        .filter(|v| {
            str_at(
                v,
                &format!("/metadata/labels/{}", POOL_LABEL.replace('/', "~1")),
            ) == Some(pool.name.as_str())
        })
        .filter_map(|v| str_at(&v, "/metadata/name").map(str::to_string))
        .collect()
}

/// The pool whose new nodes hold every one of `pods`, and how many it
/// takes: the first pool (in the order given) that may grow by that many.
fn plan_scale_up(
    state: &SimState,
    config: &AutoscalerConfig,
    pods: &[Shape],
) -> Result<(usize, usize), String> {
    let mut why = Vec::new();
    for (i, pool) in config.pools.iter().enumerate() {
        let template = pool.node(0);
        let labels = string_map(&template, "/metadata/labels");
        let empty = resources_at(&template, "/status/allocatable");
        if let Some(p) = pods
            .iter()
            .find(|p| !matches(&p.selector, &labels) || !fits(&p.requests, &empty))
        {
            let _ = p;
            why.push(format!("{}: a pod fits none of its nodes", pool.name));
            continue;
        }
        let mut fresh: Vec<Room> = Vec::new();
        for p in pods {
            match fresh.iter_mut().find(|r| fits(&p.requests, &r.free)) {
                Some(r) => r.free.sub(&p.requests),
                None => {
                    let mut free = empty.clone();
                    free.sub(&p.requests);
                    fresh.push(Room {
                        labels: labels.clone(),
                        free,
                    });
                }
            }
        }
        let have = pool_nodes(state, pool).len();
        if have.saturating_add(fresh.len()) > pool.max {
            why.push(format!(
                "{}: needs {} more node(s), has {have} of at most {}",
                pool.name,
                fresh.len(),
                pool.max
            ));
            continue;
        }
        return Ok((i, fresh.len()));
    }
    if why.is_empty() {
        why.push("no node pool is configured".into());
    }
    Err(format!(
        "no pool can add the {} pod(s) all at once: {}",
        pods.len(),
        why.join("; ")
    ))
}

/// Creates `n` new nodes of the pool, named after its free indexes.
fn create_nodes(
    state: &SimState,
    config: &AutoscalerConfig,
    pool: usize,
    n: usize,
) -> Result<Vec<String>, String> {
    let pool = config.pools.get(pool).ok_or("unknown pool")?;
    let existing = pool_nodes(state, pool);
    if existing.len().saturating_add(n) > pool.max {
        return Err(format!(
            "pool {} reached its maximum of {} nodes meanwhile",
            pool.name, pool.max
        ));
    }
    let def = state
        .registry
        .lookup("", "v1", "nodes")
        .ok_or("nodes are not served")?;
    let mut names = Vec::with_capacity(n);
    let mut index = 0;
    while names.len() < n && index < crate::kwok::pools::MAX_POOL_NODES {
        let name = pool.node_name(index);
        index += 1;
        if existing.contains(&name) || state.store.get(NODES, "", &name).is_some() {
            continue;
        }
        create::create_object(state, &def, None, pool.node(index - 1))
            .map_err(|e| e.message.to_string())?;
        names.push(name);
    }
    Ok(names)
}
