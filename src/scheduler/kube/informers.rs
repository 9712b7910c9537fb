//! Informers: kube-rs watchers whose objects become the engine's own
//! `ClusterEvent`s (and a few `Signal`s about the informers) for the loop.
//!
//! The pod watch leaves terminal pods out (`NOT_TERMINAL_PODS`, as
//! kube-scheduler does); a pod that finishes arrives as a deletion.
//! They own no scheduling state. Each object is decoded straight into the lean
//! model (`PodInfo`, `NodeInfo`, `GroupDef`) and sent over one bounded channel,
//! so a slow loop pushes back on the watches instead of growing memory. After a
//! re-list (`Init` … `InitDone`) objects that were not listed again are reported
//! deleted, because kube-rs leaves that to the consumer. Group-definition kinds
//! and workload-owner kinds (top-owner grouping) whose API group is not
//! installed are skipped with one log line and re-checked periodically, so
//! installing a CRD later needs no restart. The hierarchy kinds (Kueue
//! `Topology`, Volcano `HyperNode`) are watched the same way; an invalid
//! one is logged and reported deleted, so its domains are never used
//! half-read.

mod dra;

use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, Stream, StreamExt};
use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::core::v1::{ReplicationController, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::mpsc;
use tracing::{info, warn};

use super::objects::{
    LeanClaim, LeanCsiDriver, LeanCsiNode, LeanNode, LeanPod, LeanStorageClass, LeanVolume,
};
use muster_core::cache::SelectingKind;
use muster_core::cache::VolumeChange;
use muster_core::dialects::owners::{OWNER_SOURCES, OwnerChange, OwnerSource, read_owner};
use muster_core::dialects::topology::{TOPOLOGY_SOURCES, TopologySource};
use muster_core::dialects::{DEFINITION_SOURCES, DefinitionSource};
use muster_core::engine::ClusterEvent;
use muster_core::model::disruption::{BudgetChange, DisruptionBudget, MAX_DISRUPTED_PODS};
use muster_core::model::shared::PodPools;
use muster_core::model::spread::ControllerKind;
use muster_core::model::volumes::{Claim, CsiDriver, CsiNode, PersistentVolume, StorageClass};
use muster_core::model::wire::LabelSelectorWire;
use muster_core::model::{
    DefinitionKey, LabelSelector, NodeInfo, PodInfo, PodKey, namespace_or_default,
};

/// What the informers report to the scheduling loop: a change of the
/// cluster in the engine's own vocabulary, applied as it is, or a fact about
/// an informer that only the loop needs.
// Events are nearly every message, and boxing them would allocate once
// more per event; signals are a handful per informer.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Observed {
    Event(ClusterEvent),
    Signal(Signal),
}

/// What an informer reports about itself, or about an object the engine
/// never sees.
#[derive(Debug, Clone)]
pub enum Signal {
    /// The named informer finished its initial list.
    Synced(&'static str),
    /// The named informer's watch failed; it retries with backoff.
    WatchFailed(&'static str),
    /// The named informer lists everything again after its first sync
    /// (its watch could not resume).
    Relisting(&'static str),
    /// A definition or owner kind (by informer name, `DefinitionSource::name`,
    /// `OwnerSource::name`) is served in this version, or no longer served.
    DefinitionServed {
        informer: &'static str,
        version: Option<&'static str>,
    },
    /// A group-definition object that cannot be read at all.
    GroupDefInvalid { object: String, error: String },
}

/// How often an absent group-definition API is looked for again, by default
/// (`DaemonOptions::absent_api_recheck` overrides it, e.g. in tests).
pub const ABSENT_API_RECHECK: Duration = Duration::from_secs(30);

/// One informer, not yet started: the name it reports (`Synced`,
/// `WatchFailed`, `Relisting`, and the daemon's task name) and its task,
/// which runs until the receiver is dropped.
pub struct Informer {
    pub name: &'static str,
    pub task: BoxFuture<'static, ()>,
}

/// How a built-in kind's informer runs, given its name.
type RunKind = fn(&'static str, kube::Client, mpsc::Sender<Observed>) -> BoxFuture<'static, ()>;

/// The built-in kinds the scheduler watches, one row each: the informer's
/// name and how it runs. The definition, topology and owner kinds come from
/// their source tables (`DEFINITION_SOURCES`, `TOPOLOGY_SOURCES`,
/// `OWNER_SOURCES`). Every informer [`informers`] returns must list before
/// the scheduler is ready, so the required set is this table and those.
const KINDS: &[(&str, RunKind)] = &[
    ("nodes", |n, c, tx| run_nodes(n, Api::all(c), tx).boxed()),
    ("pods", |n, c, tx| run_pods(n, Api::all(c), tx).boxed()),
    ("priorityclasses", |n, c, tx| {
        run_priority_classes(n, Api::all(c), tx).boxed()
    }),
    ("namespaces", |n, c, tx| {
        run_namespaces(n, Api::all(c), tx).boxed()
    }),
    ("persistentvolumeclaims", |n, c, tx| {
        run_claims(n, Api::all(c), tx).boxed()
    }),
    ("persistentvolumes", |n, c, tx| {
        run_cluster_storage(
            n,
            "PersistentVolume",
            Api::all(c),
            tx,
            |v: LeanVolume| PersistentVolume::from_wire(&v.into_wire()),
            VolumeChange::VolumeUpserted,
            VolumeChange::VolumeDeleted,
        )
        .boxed()
    }),
    ("storageclasses", |n, c, tx| {
        run_cluster_storage(
            n,
            "StorageClass",
            Api::all(c),
            tx,
            |c: LeanStorageClass| StorageClass::from_wire(&c.into_wire()),
            VolumeChange::ClassUpserted,
            VolumeChange::ClassDeleted,
        )
        .boxed()
    }),
    ("csinodes", |n, c, tx| {
        run_cluster_storage(
            n,
            "CSINode",
            Api::all(c),
            tx,
            |c: LeanCsiNode| CsiNode::from_wire(&c.into_wire()),
            VolumeChange::CsiNodeUpserted,
            VolumeChange::CsiNodeDeleted,
        )
        .boxed()
    }),
    ("csidrivers", |n, c, tx| {
        run_cluster_storage(
            n,
            "CSIDriver",
            Api::all(c),
            tx,
            |c: LeanCsiDriver| CsiDriver::from_wire(&c.into_wire()),
            VolumeChange::CsiDriverUpserted,
            VolumeChange::CsiDriverDeleted,
        )
        .boxed()
    }),
    ("services", |n, c, tx| {
        run_services(n, Api::all(c), tx).boxed()
    }),
    ("replicationcontrollers", |n, c, tx| {
        run_replication_controllers(n, Api::all(c), tx).boxed()
    }),
    ("replicasets", |n, c, tx| {
        run_replica_sets(n, Api::all(c), tx).boxed()
    }),
    ("statefulsets", |n, c, tx| {
        run_stateful_sets(n, Api::all(c), tx).boxed()
    }),
    ("poddisruptionbudgets", |n, c, tx| {
        run_budgets(n, Api::all(c), tx).boxed()
    }),
    ("resourceslices", |n, c, tx| {
        dra::run_slices(n, Api::all(c), tx).boxed()
    }),
    ("deviceclasses", |n, c, tx| {
        dra::run_classes(n, Api::all(c), tx).boxed()
    }),
    ("devicetaintrules", |n, c, tx| {
        dra::run_taint_rules(n, Api::all(c), tx).boxed()
    }),
    ("resourceclaims", |n, c, tx| {
        dra::run_resource_claims(n, Api::all(c), tx).boxed()
    }),
];

/// Every informer, not yet started: the built-in kinds, then each
/// group-definition, topology and owner source (absent APIs are looked for
/// again every `recheck`). The daemon spawns them and watches each task.
pub fn informers(
    client: kube::Client,
    tx: mpsc::Sender<Observed>,
    recheck: Duration,
) -> Vec<Informer> {
    let mut all: Vec<Informer> = KINDS
        .iter()
        .map(|&(name, run)| Informer {
            name,
            task: run(name, client.clone(), tx.clone()),
        })
        .collect();
    for source in DEFINITION_SOURCES {
        let kind = ServedKind::of_definitions(source);
        all.push(served(&client, kind, &tx, recheck, move || Definitions {
            source,
            produced: HashMap::new(),
            relist: Relist::new(),
        }));
    }
    for source in TOPOLOGY_SOURCES {
        let kind = ServedKind::of_topology(source);
        all.push(served(&client, kind, &tx, recheck, move || Topologies {
            source,
            live: HashSet::new(),
            relist: Relist::new(),
        }));
    }
    all.push(served(
        &client,
        ServedKind {
            informer: "provisioningrequests.autoscaling.x-k8s.io",
            group: "autoscaling.x-k8s.io",
            versions: &["v1"],
            kind: "ProvisioningRequest",
            plural: "provisioningrequests",
        },
        &tx,
        recheck,
        super::provisioning::Requests::default,
    ));
    for source in OWNER_SOURCES {
        let kind = ServedKind::of_owners(source);
        all.push(served(&client, kind, &tx, recheck, move || Owners {
            source,
            live: HashMap::new(),
            relist: Relist::new(),
        }));
    }
    all
}

/// The informer of a kind that may or may not be served (`run_served`).
fn served<H: ServedHandler + Send + 'static>(
    client: &kube::Client,
    kind: ServedKind,
    tx: &mpsc::Sender<Observed>,
    recheck: Duration,
    handler: impl Fn() -> H + Send + 'static,
) -> Informer {
    Informer {
        name: kind.informer,
        task: run_served(client.clone(), kind, tx.clone(), recheck, handler).boxed(),
    }
}

fn watch_config() -> watcher::Config {
    // Bookmarks keep resumption cheap; pages bound the memory of the first list.
    watcher::Config::default().page_size(500)
}

/// kube-scheduler's pod field selector: terminal pods hold no resources and
/// are never scheduled, so they are not cached. A pod that finishes stops
/// matching, and the API server's watch sends it as a deletion, which is what
/// releases its resources in the cache.
pub const NOT_TERMINAL_PODS: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// Tracks the keys seen so deletions implied by a re-list can be reported.
/// (foldhash: `seen` runs for every pod event.)
struct Relist<K> {
    live: HashSet<K, foldhash::fast::RandomState>,
    relisting: Option<HashSet<K, foldhash::fast::RandomState>>,
}

impl<K: Eq + Hash + Clone> Relist<K> {
    fn new() -> Self {
        Relist {
            live: HashSet::default(),
            relisting: None,
        }
    }
    fn begin(&mut self) {
        self.relisting = Some(HashSet::default());
    }
    fn seen(&mut self, k: K) {
        if let Some(r) = self.relisting.as_mut() {
            r.insert(k.clone());
        }
        self.live.insert(k);
    }
    fn gone(&mut self, k: &K) {
        self.live.remove(k);
    }
    /// Ends a re-list; returns the keys that were not listed again.
    fn finish(&mut self) -> Vec<K> {
        let Some(listed) = self.relisting.take() else {
            return Vec::new();
        };
        let stale: Vec<K> = self
            .live
            .iter()
            .filter(|k| !listed.contains(*k))
            .cloned()
            .collect();
        self.live = listed;
        stale
    }
}

/// Drives a watcher, mapping its events; returns when the stream ends or the
/// receiver is gone.
async fn drive<K, S, F>(
    name: &'static str,
    stream: S,
    tx: &mpsc::Sender<Observed>,
    mut on_event: F,
) -> bool
where
    S: Stream<Item = Result<Event<K>, watcher::Error>>,
    F: FnMut(Event<K>) -> Vec<Observed>,
{
    let mut stream = std::pin::pin!(stream);
    let mut synced = false;
    while let Some(item) = stream.next().await {
        match item {
            Ok(ev) => {
                let done = matches!(ev, Event::InitDone);
                if synced
                    && matches!(ev, Event::Init)
                    && tx
                        .send(Observed::Signal(Signal::Relisting(name)))
                        .await
                        .is_err()
                {
                    return false;
                }
                for o in on_event(ev) {
                    if tx.send(o).await.is_err() {
                        return false;
                    }
                }
                if done && !synced {
                    synced = true;
                    if tx
                        .send(Observed::Signal(Signal::Synced(name)))
                        .await
                        .is_err()
                    {
                        return false;
                    }
                }
            }
            Err(e) => {
                warn!(informer = name, error = %e, "watch error; retrying with backoff");
                if tx
                    .send(Observed::Signal(Signal::WatchFailed(name)))
                    .await
                    .is_err()
                {
                    return false;
                }
            }
        }
    }
    true
}

/// What an added or changed object means.
enum Upsert {
    Live(Observed),
    /// Report it, but treat the object as gone (e.g. a node the scheduler cannot read).
    Gone(Observed),
}

/// What a keyed informer can watch.
trait Watched:
    kube::Resource<DynamicType = ()>
    + Clone
    + serde::de::DeserializeOwned
    + std::fmt::Debug
    + Send
    + 'static
{
}

impl<K> Watched for K where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static
{
}

/// Drives one watcher for a kind whose objects map one-to-one onto
/// `Observed` events.
async fn run_keyed<K, Key>(
    name: &'static str,
    api: Api<K>,
    config: watcher::Config,
    tx: mpsc::Sender<Observed>,
    key: impl Fn(&K) -> Key,
    mut upsert: impl FnMut(K) -> Upsert,
    deleted: impl Fn(Key) -> Observed,
) where
    K: Watched,
    Key: Eq + Hash + Clone,
{
    let keyed_upsert = |o: K| (key(&o), upsert(o));
    run_keyed_with(name, api, config, tx, &key, keyed_upsert, deleted).await;
}

/// `run_keyed` for a kind whose upsert yields the object's key itself: the
/// pod informer keys its re-list record with the decoded pod's own (shared)
/// strings rather than a fresh copy per event.
async fn run_keyed_with<K, Key>(
    name: &'static str,
    api: Api<K>,
    config: watcher::Config,
    tx: mpsc::Sender<Observed>,
    key: impl Fn(&K) -> Key,
    mut upsert: impl FnMut(K) -> (Key, Upsert),
    deleted: impl Fn(Key) -> Observed,
) where
    K: Watched,
    Key: Eq + Hash + Clone,
{
    let mut relist = Relist::new();
    let stream = watcher::watcher(api, config).default_backoff();
    drive(name, stream, &tx, |ev| match ev {
        Event::Init => {
            relist.begin();
            Vec::new()
        }
        Event::InitApply(o) | Event::Apply(o) => match upsert(o) {
            (k, Upsert::Live(observed)) => {
                relist.seen(k);
                vec![observed]
            }
            (k, Upsert::Gone(observed)) => {
                relist.gone(&k);
                vec![observed]
            }
        },
        Event::Delete(o) => {
            let k = key(&o);
            relist.gone(&k);
            vec![deleted(k)]
        }
        Event::InitDone => relist.finish().into_iter().map(&deleted).collect(),
    })
    .await;
}

async fn run_nodes(name: &'static str, api: Api<LeanNode>, tx: mpsc::Sender<Observed>) {
    let key = |n: &LeanNode| n.metadata.name.clone().unwrap_or_default();
    let upsert = |n: LeanNode| {
        let name = n.metadata.name.clone().unwrap_or_default();
        match NodeInfo::from_wire(&n.into_wire()) {
            Ok(info) => Upsert::Live(Observed::Event(ClusterEvent::NodeUpserted(Arc::new(info)))),
            Err(e) => {
                // A node the scheduler cannot read is not a candidate.
                warn!(node = %name, error = %e, "ignoring unreadable node");
                Upsert::Gone(Observed::Event(ClusterEvent::NodeDeleted(Arc::from(name))))
            }
        }
    };
    let config = watch_config();
    run_keyed(name, api, config, tx, key, upsert, |n: String| {
        Observed::Event(ClusterEvent::NodeDeleted(Arc::from(n)))
    })
    .await;
}

/// A pod's key as `PodInfo::from_wire` makes it (the one namespace rule,
/// `PodKey::of_meta`), so a deletion finds the key its upserts recorded.
fn pod_key(p: &LeanPod) -> PodKey {
    PodKey::of_meta(p.metadata.namespace.as_deref(), p.metadata.name.as_deref())
}

async fn run_pods(name: &'static str, api: Api<LeanPod>, tx: mpsc::Sender<Observed>) {
    // Pods with equal labels (a gang's members, a template's replicas)
    // share one map, and repeated strings one copy.
    let mut pools = PodPools::default();
    let upsert = move |p: LeanPod| {
        let wire = p.into_wire();
        // An unreadable pod stays live: the loop reports it on the pod.
        match PodInfo::from_wire_resolved(&wire) {
            Ok(mut info) => {
                info.share_with(&mut pools);
                // The key of the re-list record holds the pod's own strings
                // (its namespace pooled): no copy per event or per pod.
                let key = info.key.clone();
                (
                    key,
                    Upsert::Live(Observed::Event(ClusterEvent::PodUpserted(Arc::new(info)))),
                )
            }
            Err(e) => {
                let key = PodKey::of_meta(
                    wire.metadata.namespace.as_deref(),
                    wire.metadata.name.as_deref(),
                );
                let invalid = Observed::Event(ClusterEvent::PodInvalid {
                    pod: key.clone(),
                    uid: Arc::from(wire.metadata.uid.as_deref().unwrap_or_default()),
                    scheduler_name: wire.spec.scheduler_name.as_deref().map(Arc::from),
                    error: e.to_string(),
                });
                (key, Upsert::Live(invalid))
            }
        }
    };
    let config = watch_config().fields(NOT_TERMINAL_PODS);
    run_keyed_with(name, api, config, tx, pod_key, upsert, |k| {
        Observed::Event(ClusterEvent::PodDeleted(k))
    })
    .await;
}

async fn run_priority_classes(
    name: &'static str,
    api: Api<PriorityClass>,
    tx: mpsc::Sender<Observed>,
) {
    let key = |pc: &PriorityClass| pc.metadata.name.clone().unwrap_or_default();
    let upsert = |pc: PriorityClass| {
        Upsert::Live(Observed::Event(ClusterEvent::PriorityClassUpserted {
            name: Arc::from(pc.metadata.name.as_deref().unwrap_or_default()),
            value: pc.value.unwrap_or(0),
            global_default: pc.global_default.unwrap_or(false),
        }))
    };
    run_keyed(name, api, watch_config(), tx, key, upsert, |n: String| {
        Observed::Event(ClusterEvent::PriorityClassDeleted(Arc::from(n)))
    })
    .await;
}

async fn run_namespaces(name: &'static str, api: Api<Namespace>, tx: mpsc::Sender<Observed>) {
    let key = |ns: &Namespace| ns.metadata.name.clone().unwrap_or_default();
    let upsert = |ns: Namespace| {
        Upsert::Live(Observed::Event(ClusterEvent::NamespaceUpserted {
            name: Arc::from(ns.metadata.name.as_deref().unwrap_or_default()),
            labels: ns.metadata.labels.unwrap_or_default(),
        }))
    };
    run_keyed(name, api, watch_config(), tx, key, upsert, |n: String| {
        Observed::Event(ClusterEvent::NamespaceDeleted(Arc::from(n)))
    })
    .await;
}

// ----- PodDisruptionBudgets (what preemption spares) -----

/// A budget as preemption counts it. Its selector is read as kube-scheduler
/// reads it for preemption: nil or empty covers no pod. `Err` when the
/// selector cannot be read (such a budget is treated as deleted).
pub fn read_budget(pdb: &PodDisruptionBudget) -> Result<DisruptionBudget, String> {
    let selector = match pdb.spec.as_ref().and_then(|s| s.selector.as_ref()) {
        Some(sel)
            if sel.match_labels.as_ref().is_some_and(|m| !m.is_empty())
                || sel
                    .match_expressions
                    .as_ref()
                    .is_some_and(|e| !e.is_empty()) =>
        {
            let wire: LabelSelectorWire = serde_json::to_value(sel)
                .and_then(serde_json::from_value)
                .map_err(|e| format!("spec.selector: {e}"))?;
            Some(LabelSelector::from_wire(Some(&wire)).map_err(|e| format!("spec.selector: {e}"))?)
        }
        _ => None,
    };
    let status = pdb.status.as_ref();
    let disrupted_pods = status
        .and_then(|s| s.disrupted_pods.as_ref())
        .map(|m| {
            m.keys()
                .take(MAX_DISRUPTED_PODS)
                .map(|k| Arc::from(k.as_str()))
                .collect()
        })
        .unwrap_or_default();
    Ok(DisruptionBudget {
        namespace: Arc::from(namespace_or_default(pdb.metadata.namespace.as_deref())),
        name: Arc::from(pdb.metadata.name.as_deref().unwrap_or("")),
        selector,
        // Negative counts (a budget already violated) allow nothing.
        disruptions_allowed: status
            .and_then(|s| s.disruptions_allowed)
            .unwrap_or(0)
            .max(0),
        disrupted_pods,
    })
}

async fn run_budgets(
    name: &'static str,
    api: Api<PodDisruptionBudget>,
    tx: mpsc::Sender<Observed>,
) {
    let upsert = |pdb: PodDisruptionBudget| match read_budget(&pdb) {
        Ok(b) => Upsert::Live(Observed::Event(ClusterEvent::Budget(
            BudgetChange::Upserted(b),
        ))),
        Err(e) => {
            let (namespace, name) = object_key(&pdb);
            warn!(budget = %format!("{namespace}/{name}"), error = %e, "ignoring unreadable PodDisruptionBudget");
            Upsert::Gone(Observed::Event(ClusterEvent::Budget(
                BudgetChange::Deleted { namespace, name },
            )))
        }
    };
    let deleted = |(namespace, name): ObjectKey| {
        Observed::Event(ClusterEvent::Budget(BudgetChange::Deleted {
            namespace,
            name,
        }))
    };
    run_keyed(name, api, watch_config(), tx, object_key, upsert, deleted).await;
}

// ----- selectors of Services and controllers (PodTopologySpread's defaults) -----
//
// Lean: of each object only its namespace, name and selector reach the loop.

type ObjectKey = (Arc<str>, Arc<str>);

fn object_key<K: kube::Resource>(o: &K) -> ObjectKey {
    (
        Arc::from(namespace_or_default(o.meta().namespace.as_deref())),
        Arc::from(o.meta().name.as_deref().unwrap_or_default()),
    )
}

fn selector_upserted<K: kube::Resource>(
    o: &K,
    kind: SelectingKind,
    selector: Option<LabelSelector>,
) -> Upsert {
    let (namespace, name) = object_key(o);
    Upsert::Live(Observed::Event(ClusterEvent::WorkloadSelectorUpserted {
        kind,
        namespace,
        name,
        selector,
    }))
}

/// A map selector (Services, ReplicationControllers).
fn map_selector(map: Option<&std::collections::BTreeMap<String, String>>) -> Option<LabelSelector> {
    map.map(LabelSelector::from_map)
}

/// A `metav1.LabelSelector` (ReplicaSets, StatefulSets); unreadable → `None`.
fn label_selector(
    sel: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
) -> Option<LabelSelector> {
    let wire: LabelSelectorWire = serde_json::to_value(sel)
        .ok()
        .and_then(|v| serde_json::from_value(v).ok())?;
    LabelSelector::from_wire(Some(&wire)).ok()
}

async fn run_services(name: &'static str, api: Api<Service>, tx: mpsc::Sender<Observed>) {
    let upsert = |s: Service| {
        let sel = map_selector(s.spec.as_ref().and_then(|sp| sp.selector.as_ref()));
        selector_upserted(&s, SelectingKind::Service, sel)
    };
    let deleted = |(namespace, name): ObjectKey| {
        Observed::Event(ClusterEvent::WorkloadSelectorDeleted {
            kind: SelectingKind::Service,
            namespace,
            name,
        })
    };
    run_keyed(name, api, watch_config(), tx, object_key, upsert, deleted).await;
}

/// A storage object decoded into its model; an unreadable one is reported
/// and treated as absent (pods using it are told it is not found).
fn storage_upsert<T>(
    kind: &str,
    name: String,
    decoded: Result<T, muster_core::model::ModelError>,
    live: fn(Arc<T>) -> VolumeChange,
    gone: VolumeChange,
) -> Upsert {
    match decoded {
        Ok(v) => Upsert::Live(Observed::Event(ClusterEvent::Volume(live(Arc::new(v))))),
        Err(e) => {
            warn!(kind, object = %name, error = %e, "ignoring unreadable storage object");
            Upsert::Gone(Observed::Event(ClusterEvent::Volume(gone)))
        }
    }
}

fn cluster_key(meta: &kube::api::ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

async fn run_claims(name: &'static str, api: Api<LeanClaim>, tx: mpsc::Sender<Observed>) {
    fn key(c: &LeanClaim) -> PodKey {
        PodKey::of_meta(c.metadata.namespace.as_deref(), c.metadata.name.as_deref())
    }
    let upsert = |c: LeanClaim| {
        let k = key(&c);
        storage_upsert(
            "PersistentVolumeClaim",
            k.to_string(),
            Claim::from_wire(&c.into_wire()),
            VolumeChange::ClaimUpserted,
            VolumeChange::ClaimDeleted(k),
        )
    };
    let deleted = |k| Observed::Event(ClusterEvent::Volume(VolumeChange::ClaimDeleted(k)));
    run_keyed(name, api, watch_config(), tx, key, upsert, deleted).await;
}

/// A cluster-scoped storage kind, keyed by name: each object decoded into
/// its model (`storage_upsert` reports an unreadable one as gone).
async fn run_cluster_storage<K, T>(
    name: &'static str,
    kind: &'static str,
    api: Api<K>,
    tx: mpsc::Sender<Observed>,
    decode: fn(K) -> Result<T, muster_core::model::ModelError>,
    live: fn(Arc<T>) -> VolumeChange,
    gone: fn(Arc<str>) -> VolumeChange,
) where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    let key = |o: &K| cluster_key(o.meta());
    let upsert = move |o: K| {
        let k = key(&o);
        let absent = gone(Arc::from(k.as_str()));
        storage_upsert(kind, k, decode(o), live, absent)
    };
    let deleted = move |k: String| Observed::Event(ClusterEvent::Volume(gone(Arc::from(k))));
    run_keyed(name, api, watch_config(), tx, key, upsert, deleted).await;
}

async fn run_replication_controllers(
    name: &'static str,
    api: Api<ReplicationController>,
    tx: mpsc::Sender<Observed>,
) {
    const KIND: SelectingKind = SelectingKind::Controller(ControllerKind::ReplicationController);
    let upsert = |rc: ReplicationController| {
        let sel = map_selector(rc.spec.as_ref().and_then(|sp| sp.selector.as_ref()));
        selector_upserted(&rc, KIND, sel)
    };
    let deleted = |(namespace, name): ObjectKey| {
        Observed::Event(ClusterEvent::WorkloadSelectorDeleted {
            kind: KIND,
            namespace,
            name,
        })
    };
    run_keyed(name, api, watch_config(), tx, object_key, upsert, deleted).await;
}

async fn run_replica_sets(name: &'static str, api: Api<ReplicaSet>, tx: mpsc::Sender<Observed>) {
    const KIND: SelectingKind = SelectingKind::Controller(ControllerKind::ReplicaSet);
    let upsert = |rs: ReplicaSet| {
        let sel = label_selector(&rs.spec.selector);
        selector_upserted(&rs, KIND, sel)
    };
    let deleted = |(namespace, name): ObjectKey| {
        Observed::Event(ClusterEvent::WorkloadSelectorDeleted {
            kind: KIND,
            namespace,
            name,
        })
    };
    run_keyed(name, api, watch_config(), tx, object_key, upsert, deleted).await;
}

async fn run_stateful_sets(name: &'static str, api: Api<StatefulSet>, tx: mpsc::Sender<Observed>) {
    const KIND: SelectingKind = SelectingKind::Controller(ControllerKind::StatefulSet);
    let upsert = |ss: StatefulSet| {
        let sel = label_selector(&ss.spec.selector);
        selector_upserted(&ss, KIND, sel)
    };
    let deleted = |(namespace, name): ObjectKey| {
        Observed::Event(ClusterEvent::WorkloadSelectorDeleted {
            kind: KIND,
            namespace,
            name,
        })
    };
    run_keyed(name, api, watch_config(), tx, object_key, upsert, deleted).await;
}

/// A kind watched only while its API is served (CRDs may come and go).
struct ServedKind {
    /// The informer's name (`<plural>.<group>`), unique among informers.
    informer: &'static str,
    group: &'static str,
    /// Versions in order of preference.
    versions: &'static [&'static str],
    kind: &'static str,
    plural: &'static str,
}

impl ServedKind {
    fn of_definitions(source: &'static DefinitionSource) -> Self {
        ServedKind {
            informer: source.name,
            group: source.group,
            versions: source.versions,
            kind: source.kind,
            plural: source.plural,
        }
    }

    fn of_topology(source: &'static TopologySource) -> Self {
        ServedKind {
            informer: source.name,
            group: source.group,
            versions: source.versions,
            kind: source.kind,
            plural: source.plural,
        }
    }

    fn of_owners(source: &'static OwnerSource) -> Self {
        ServedKind {
            informer: source.name,
            group: source.group,
            versions: source.versions,
            kind: source.kind,
            plural: source.plural,
        }
    }
}

/// How one watch of a served kind turns its events into `Observed` ones.
trait ServedHandler {
    fn on_event(&mut self, ev: Event<DynamicObject>) -> Vec<Observed>;
    /// The API went away: everything it reported is gone too.
    fn retract_all(self) -> Vec<Observed>;
}

/// Finds the preferred served version of a kind, if its group is installed.
async fn served_version(client: &kube::Client, kind: &ServedKind) -> Option<&'static str> {
    for version in kind.versions {
        if let Ok(list) = client
            .list_api_group_resources(&format!("{}/{}", kind.group, version))
            .await
            && list.resources.iter().any(|r| r.name == kind.plural)
        {
            return Some(version);
        }
    }
    None
}

/// Watches `kind` in its preferred served version while it is served,
/// looking for it again every `recheck` while it is not; `handler` makes
/// the event mapping of one watch.
async fn run_served<H: ServedHandler>(
    client: kube::Client,
    kind: ServedKind,
    tx: mpsc::Sender<Observed>,
    recheck: Duration,
    handler: impl Fn() -> H,
) {
    let informer = kind.informer;
    let mut announced_absent = false;
    let mut synced_sent = false;
    loop {
        let Some(version) = served_version(&client, &kind).await else {
            if !announced_absent {
                info!(
                    group = kind.group,
                    kind = kind.kind,
                    "API not installed; will look again every {:?}",
                    recheck
                );
                announced_absent = true;
            }
            // An absent kind has nothing to list: count it as synced.
            if !synced_sent {
                synced_sent = true;
                if tx
                    .send(Observed::Signal(Signal::Synced(informer)))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            if tx.is_closed() {
                return;
            }
            tokio::time::sleep(recheck).await;
            continue;
        };
        announced_absent = false;
        info!(group = kind.group, version, kind = kind.kind, "watching");
        let served = Observed::Signal(Signal::DefinitionServed {
            informer,
            version: Some(version),
        });
        if tx.send(served).await.is_err() {
            return;
        }
        let ar = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(kind.group, version, kind.kind),
            kind.plural,
        );
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        let mut h = handler();
        // Stop this watcher (and look for the API again) when the kind disappears.
        let stream = watcher::watcher(api, watch_config())
            .default_backoff()
            .take_while(|item| {
                let gone = matches!(item, Err(watcher::Error::InitialListFailed(kube::Error::Api(s))) if s.code == 404);
                std::future::ready(!gone)
            });
        let open = drive(informer, stream, &tx, |ev| h.on_event(ev)).await;
        if !open {
            return;
        }
        for o in h.retract_all() {
            if tx.send(o).await.is_err() {
                return;
            }
        }
        warn!(
            group = kind.group,
            kind = kind.kind,
            "API disappeared; looking for it again"
        );
        let gone = Observed::Signal(Signal::DefinitionServed {
            informer,
            version: None,
        });
        if tx.send(gone).await.is_err() {
            return;
        }
        tokio::time::sleep(recheck).await;
    }
}

fn object_key_of(o: &DynamicObject) -> String {
    format!(
        "{}/{}",
        o.metadata.namespace.as_deref().unwrap_or(""),
        o.metadata.name.as_deref().unwrap_or("")
    )
}

impl ServedHandler for super::provisioning::Requests {
    fn on_event(&mut self, ev: Event<DynamicObject>) -> Vec<Observed> {
        super::provisioning::Requests::on_event(self, ev)
    }

    fn retract_all(self) -> Vec<Observed> {
        super::provisioning::Requests::retract_all(self)
    }
}

/// A group-definition kind's watch: the definitions each object declares.
struct Definitions {
    source: &'static DefinitionSource,
    produced: HashMap<String, Vec<DefinitionKey>>,
    relist: Relist<String>,
}

impl ServedHandler for Definitions {
    fn on_event(&mut self, ev: Event<DynamicObject>) -> Vec<Observed> {
        definition_event(ev, self.source, &mut self.produced, &mut self.relist)
    }

    fn retract_all(self) -> Vec<Observed> {
        self.produced
            .into_values()
            .flatten()
            .map(|k| Observed::Event(ClusterEvent::GroupDefDeleted(k)))
            .collect()
    }
}

fn definition_event(
    ev: Event<DynamicObject>,
    source: &DefinitionSource,
    produced: &mut HashMap<String, Vec<DefinitionKey>>,
    relist: &mut Relist<String>,
) -> Vec<Observed> {
    let retract = |keys: Option<Vec<DefinitionKey>>| {
        keys.unwrap_or_default()
            .into_iter()
            .map(|k| Observed::Event(ClusterEvent::GroupDefDeleted(k)))
    };
    match ev {
        Event::Init => {
            relist.begin();
            Vec::new()
        }
        Event::InitApply(o) | Event::Apply(o) => {
            let key = object_key_of(&o);
            relist.seen(key.clone());
            let json = match serde_json::to_value(&o) {
                Ok(j) => j,
                Err(e) => {
                    return vec![Observed::Signal(Signal::GroupDefInvalid {
                        object: key,
                        error: e.to_string(),
                    })];
                }
            };
            match (source.translate)(&json) {
                Ok(defs) => {
                    let new_keys: Vec<DefinitionKey> = defs.iter().map(|d| d.key.clone()).collect();
                    // Definitions this object no longer declares (a podGroup removed from a Workload).
                    let dropped = produced
                        .insert(key, new_keys.clone())
                        .unwrap_or_default()
                        .into_iter()
                        .filter(|k| !new_keys.contains(k))
                        .map(|k| Observed::Event(ClusterEvent::GroupDefDeleted(k)));
                    dropped
                        .chain(
                            defs.into_iter()
                                .map(|d| Observed::Event(ClusterEvent::GroupDefUpserted(d))),
                        )
                        .collect()
                }
                Err(error) => {
                    let mut out: Vec<Observed> = retract(produced.remove(&key)).collect();
                    out.push(Observed::Signal(Signal::GroupDefInvalid {
                        object: format!("{} {key}", source.kind),
                        error,
                    }));
                    out
                }
            }
        }
        Event::Delete(o) => {
            let key = object_key_of(&o);
            relist.gone(&key);
            retract(produced.remove(&key)).collect()
        }
        Event::InitDone => relist
            .finish()
            .into_iter()
            .flat_map(|k| retract(produced.remove(&k)))
            .collect(),
    }
}

/// A workload owner kind's watch (top-owner grouping): each object read
/// into its gang definition and parent, or reported gone.
struct Owners {
    source: &'static OwnerSource,
    /// `namespace/name` → the definition key reported for it.
    live: HashMap<String, DefinitionKey>,
    relist: Relist<String>,
}

impl Owners {
    fn gone(&mut self, key: &str) -> Option<Observed> {
        let def = self.live.remove(key)?;
        Some(Observed::Event(ClusterEvent::Owner(OwnerChange::Deleted(
            def,
        ))))
    }
}

impl ServedHandler for Owners {
    fn on_event(&mut self, ev: Event<DynamicObject>) -> Vec<Observed> {
        match ev {
            Event::Init => {
                self.relist.begin();
                Vec::new()
            }
            Event::InitApply(o) | Event::Apply(o) => {
                let key = object_key_of(&o);
                self.relist.seen(key.clone());
                let read = serde_json::to_value(&o)
                    .map_err(|e| e.to_string())
                    .and_then(|json| read_owner(self.source, &json));
                match read {
                    Ok(owner) => {
                        self.live.insert(key, owner.def.key.clone());
                        vec![Observed::Event(ClusterEvent::Owner(OwnerChange::Upserted(
                            Box::new(owner),
                        )))]
                    }
                    Err(error) => {
                        let mut out: Vec<Observed> = self.gone(&key).into_iter().collect();
                        out.push(Observed::Signal(Signal::GroupDefInvalid {
                            object: format!("{} {key}", self.source.kind),
                            error,
                        }));
                        out
                    }
                }
            }
            Event::Delete(o) => {
                let key = object_key_of(&o);
                self.relist.gone(&key);
                self.gone(&key).into_iter().collect()
            }
            Event::InitDone => {
                let stale = self.relist.finish();
                stale.iter().filter_map(|k| self.gone(k)).collect()
            }
        }
    }

    fn retract_all(self) -> Vec<Observed> {
        self.live
            .into_values()
            .map(|k| Observed::Event(ClusterEvent::Owner(OwnerChange::Deleted(k))))
            .collect()
    }
}

/// A hierarchy kind's watch: each object read into its description, or
/// reported gone (deleted, or invalid: never used half-read).
struct Topologies {
    source: &'static TopologySource,
    /// Names of the objects reported upserted and not since gone.
    live: HashSet<String>,
    relist: Relist<String>,
}

impl Topologies {
    fn gone(&mut self, name: &str) -> Option<Observed> {
        self.live.remove(name).then(|| {
            Observed::Event(ClusterEvent::Topology((self.source.deleted)(Arc::from(
                name,
            ))))
        })
    }
}

impl ServedHandler for Topologies {
    fn on_event(&mut self, ev: Event<DynamicObject>) -> Vec<Observed> {
        match ev {
            Event::Init => {
                self.relist.begin();
                Vec::new()
            }
            Event::InitApply(o) | Event::Apply(o) => {
                let name = o.metadata.name.clone().unwrap_or_default();
                self.relist.seen(name.clone());
                let read = serde_json::to_value(&o)
                    .map_err(|e| e.to_string())
                    .and_then(|json| (self.source.read)(&json));
                match read {
                    Ok(change) => {
                        self.live.insert(name);
                        vec![Observed::Event(ClusterEvent::Topology(change))]
                    }
                    Err(error) => {
                        warn!(kind = self.source.kind, %name, %error, "invalid object: its domains are not used");
                        self.gone(&name).into_iter().collect()
                    }
                }
            }
            Event::Delete(o) => {
                let name = o.metadata.name.clone().unwrap_or_default();
                self.relist.gone(&name);
                self.gone(&name).into_iter().collect()
            }
            Event::InitDone => {
                let stale = self.relist.finish();
                stale.iter().filter_map(|k| self.gone(k)).collect()
            }
        }
    }

    fn retract_all(self) -> Vec<Observed> {
        let deleted = self.source.deleted;
        self.live
            .into_iter()
            .map(|name| Observed::Event(ClusterEvent::Topology(deleted(Arc::from(name)))))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pdb(v: serde_json::Value) -> PodDisruptionBudget {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn budgets_are_read_as_preemption_counts_them() {
        let b = read_budget(&pdb(serde_json::json!({
            "metadata": {"namespace": "ml", "name": "web"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
            "status": {"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2,
                       "expectedPods": 3, "disruptedPods": {"web-1": "2026-01-01T00:00:00Z"}}
        })))
        .unwrap();
        assert_eq!((&*b.namespace, &*b.name), ("ml", "web"));
        let web = std::collections::BTreeMap::from([("app".to_string(), "web".to_string())]);
        assert!(b.covers("ml", &web));
        assert_eq!(b.disruptions_allowed, 1);
        assert!(b.disrupted_pods.contains("web-1"));
    }

    #[test]
    fn budget_edge_cases() {
        // Nil and empty selectors cover nothing; no status allows nothing.
        for spec in [
            serde_json::json!({}),
            serde_json::json!({"selector": {}}),
            serde_json::json!({"selector": {"matchLabels": {}, "matchExpressions": []}}),
        ] {
            let b = read_budget(&pdb(serde_json::json!({
                "metadata": {"namespace": "ml", "name": "x"}, "spec": spec})))
            .unwrap();
            assert_eq!(b.selector, None);
            assert_eq!(b.disruptions_allowed, 0);
        }
        // A violated budget's negative count is clamped.
        let b = read_budget(&pdb(serde_json::json!({
            "metadata": {"namespace": "ml", "name": "x"},
            "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}},
            "status": {"disruptionsAllowed": -3}})))
        .unwrap();
        assert_eq!(b.disruptions_allowed, 0);
        assert!(b.selector.is_some());
        // An unreadable selector is an error (the informer reports it gone).
        let bad = pdb(serde_json::json!({
            "metadata": {"namespace": "ml", "name": "x"},
            "spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}}}));
        assert!(read_budget(&bad).is_err());
        // disruptedPods is capped.
        let many: serde_json::Map<String, serde_json::Value> = (0..MAX_DISRUPTED_PODS + 5)
            .map(|i| (format!("p{i}"), serde_json::json!("2026-01-01T00:00:00Z")))
            .collect();
        let b = read_budget(&pdb(serde_json::json!({
            "metadata": {"namespace": "ml", "name": "x"},
            "status": {"disruptionsAllowed": 0, "disruptedPods": many}})))
        .unwrap();
        assert_eq!(b.disrupted_pods.len(), MAX_DISRUPTED_PODS);
    }

    #[test]
    fn relist_reports_objects_not_listed_again() {
        let mut r = Relist::new();
        r.seen("a");
        r.seen("b");
        r.begin();
        r.seen("b");
        r.seen("c");
        let mut stale = r.finish();
        stale.sort();
        assert_eq!(stale, vec!["a"]);
        assert!(r.finish().is_empty(), "no re-list in progress");
    }

    #[tokio::test]
    async fn every_kind_and_source_has_one_informer_of_its_own_name() {
        let config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let (tx, _rx) = mpsc::channel(1);
        let names: Vec<&str> = informers(client, tx, ABSENT_API_RECHECK)
            .iter()
            .map(|i| i.name)
            .collect();
        let unique: HashSet<&str> = names.iter().copied().collect();
        assert_eq!(
            unique.len(),
            names.len(),
            "duplicate informer names: {names:?}"
        );
        // The kinds, every source, and the ProvisioningRequests Muster made.
        let expected = KINDS.len()
            + DEFINITION_SOURCES.len()
            + TOPOLOGY_SOURCES.len()
            + OWNER_SOURCES.len()
            + 1;
        assert_eq!(names.len(), expected);
        for name in [
            "nodes",
            "pods",
            "podgroups.scheduling.k8s.io",
            "podgroups.scheduling.x-k8s.io",
            "provisioningrequests.autoscaling.x-k8s.io",
        ] {
            assert!(unique.contains(name), "{name} is not watched");
        }
    }
}

#[cfg(test)]
mod sim_tests {
    //! The pod informer against `muster cluster`: terminal pods are never
    //! cached, and a pod that finishes arrives as a deletion.

    use std::time::Duration;

    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Patch, PatchParams, PostParams};
    use serde_json::json;

    use super::*;
    use muster_cluster::apiserver::{SimCluster, SimConfig};
    use muster_core::model::topology::TopologyChange;

    /// Every informer, spawned.
    fn start(
        client: kube::Client,
        tx: mpsc::Sender<Observed>,
        recheck: Duration,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        informers(client, tx, recheck)
            .into_iter()
            .map(|i| tokio::spawn(i.task))
            .collect()
    }

    async fn next_pod_event(rx: &mut mpsc::Receiver<Observed>) -> Observed {
        loop {
            let o = tokio::time::timeout(Duration::from_secs(10), rx.recv())
                .await
                .expect("an informer event in time")
                .expect("informers running");
            if matches!(
                o,
                Observed::Event(ClusterEvent::PodUpserted(_))
                    | Observed::Event(ClusterEvent::PodDeleted(_))
                    | Observed::Event(ClusterEvent::PodInvalid { .. })
                    | Observed::Signal(Signal::Synced("pods"))
            ) {
                return o;
            }
        }
    }

    /// The budget informer against `muster cluster`: the status its
    /// disruption controller computes reaches the loop; deletion is seen.
    #[tokio::test]
    async fn budgets_are_watched_with_their_status() {
        use k8s_openapi::api::policy::v1::PodDisruptionBudget;
        use kube::api::DeleteParams;
        let cluster = SimCluster::start(SimConfig::default()).await.unwrap();
        let client = cluster.client().unwrap();
        let (tx, mut rx) = mpsc::channel(1024);
        let tasks = vec![tokio::spawn(run_budgets(
            "poddisruptionbudgets",
            Api::all(client.clone()),
            tx,
        ))];
        let pdbs: Api<PodDisruptionBudget> = Api::default_namespaced(client);
        let pdb: PodDisruptionBudget = serde_json::from_value(json!({"metadata": {"name": "web"},
            "spec": {"minAvailable": 0, "selector": {"matchLabels": {"app": "web"}}}}))
        .unwrap();
        pdbs.create(&PostParams::default(), &pdb).await.unwrap();
        let mut recv = async || {
            tokio::time::timeout(Duration::from_secs(10), rx.recv())
                .await
                .expect("an informer event in time")
                .expect("informer running")
        };
        // Created without status, then with the controller's.
        loop {
            match recv().await {
                Observed::Event(ClusterEvent::Budget(BudgetChange::Upserted(b)))
                    if b.selector.is_some() =>
                {
                    assert_eq!((&*b.namespace, &*b.name), ("default", "web"));
                    // No pods, nothing expected: nothing allowed.
                    assert_eq!(b.disruptions_allowed, 0);
                    break;
                }
                Observed::Event(ClusterEvent::Budget(BudgetChange::Upserted(_)))
                | Observed::Signal(Signal::Synced(_)) => {}
                other => panic!("unexpected {other:?}"),
            }
        }
        pdbs.delete("web", &DeleteParams::default()).await.unwrap();
        loop {
            match recv().await {
                Observed::Event(ClusterEvent::Budget(BudgetChange::Deleted { name, .. })) => {
                    assert_eq!(&*name, "web");
                    break;
                }
                Observed::Event(ClusterEvent::Budget(BudgetChange::Upserted(_))) => {}
                other => panic!("unexpected {other:?}"),
            }
        }
        for t in tasks {
            t.abort();
        }
        cluster.shutdown().await.unwrap();
    }

    #[tokio::test]
    async fn terminal_pods_are_not_cached_and_finishing_is_a_deletion() {
        // Pods never start on their own: phases change only by the test's patches.
        let config = SimConfig::default().pod_start_delay(Duration::from_secs(3600));
        let cluster = SimCluster::start(config).await.unwrap();
        let client = cluster.client().unwrap();
        let pods: Api<Pod> = Api::default_namespaced(client.clone());
        let set_phase = |name: &'static str, phase: &'static str| {
            let pods = pods.clone();
            async move {
                let patch = Patch::Merge(json!({"status": {"phase": phase}}));
                pods.patch_status(name, &PatchParams::default(), &patch)
                    .await
                    .unwrap();
            }
        };
        for name in ["finished", "running"] {
            let pod: Pod = serde_json::from_value(json!({"metadata": {"name": name},
                "spec": {"containers": [{"name": "c", "image": "i"}]}}))
            .unwrap();
            pods.create(&PostParams::default(), &pod).await.unwrap();
        }
        set_phase("finished", "Succeeded").await;
        set_phase("running", "Running").await;

        let (tx, mut rx) = mpsc::channel(1024);
        let tasks = start(client, tx, Duration::from_secs(3600));
        let mut listed = Vec::new();
        loop {
            match next_pod_event(&mut rx).await {
                Observed::Event(ClusterEvent::PodUpserted(p)) => listed.push(p.key.to_string()),
                Observed::Signal(Signal::Synced(_)) => break,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(listed, ["default/running"]);

        set_phase("running", "Failed").await;
        match next_pod_event(&mut rx).await {
            Observed::Event(ClusterEvent::PodDeleted(key)) => {
                assert_eq!(key, PodKey::new("default", "running"))
            }
            other => panic!("expected the finished pod deleted, got {other:?}"),
        }
        for t in tasks {
            t.abort();
        }
        cluster.shutdown().await.unwrap();
    }

    /// The next topology event, skipping every other informer's.
    async fn next_topology_event(rx: &mut mpsc::Receiver<Observed>) -> TopologyChange {
        loop {
            let o = tokio::time::timeout(Duration::from_secs(10), rx.recv())
                .await
                .expect("an informer event in time")
                .expect("informers running");
            if let Observed::Event(ClusterEvent::Topology(change)) = o {
                return change;
            }
        }
    }

    fn dynamic_api(
        client: &kube::Client,
        gvk: (&str, &str, &str),
        plural: &str,
    ) -> Api<DynamicObject> {
        let ar =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(gvk.0, gvk.1, gvk.2), plural);
        Api::all_with(client.clone(), &ar)
    }

    /// Kueue Topologies and Volcano HyperNodes arrive as topology changes;
    /// an invalid one is never reported as declared, and one that becomes
    /// invalid is reported gone.
    #[tokio::test]
    async fn topology_objects_are_watched_and_invalid_ones_are_gone() {
        use muster_core::model::topology::{HyperNodeMemberKind, MemberSelector};
        // Validation off: the simulator refuses invalid topology objects, as
        // a cluster with Kueue's CRD and Volcano's webhook does; one without
        // them stores them, and the scheduler must defend itself.
        let config = SimConfig::default().validate(false);
        let cluster = SimCluster::start(config).await.unwrap();
        let client = cluster.client().unwrap();
        let topologies = dynamic_api(
            &client,
            ("kueue.x-k8s.io", "v1beta2", "Topology"),
            "topologies",
        );
        let hypernodes = dynamic_api(
            &client,
            ("topology.volcano.sh", "v1alpha1", "HyperNode"),
            "hypernodes",
        );
        let create = |api: &Api<DynamicObject>, obj: serde_json::Value| {
            let api = api.clone();
            async move {
                let obj: DynamicObject = serde_json::from_value(obj).unwrap();
                api.create(&PostParams::default(), &obj).await.unwrap();
            }
        };
        create(
            &topologies,
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
            "metadata": {"name": "default"},
            "spec": {"levels": [{"nodeLabel": "cloud.provider.com/topology-block"},
                                {"nodeLabel": "cloud.provider.com/topology-rack"},
                                {"nodeLabel": "kubernetes.io/hostname"}]}}),
        )
        .await;
        // Duplicate levels: invalid, so never declared.
        create(
            &topologies,
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
            "metadata": {"name": "dup"},
            "spec": {"levels": [{"nodeLabel": "rack"}, {"nodeLabel": "rack"}]}}),
        )
        .await;
        create(
            &hypernodes,
            json!({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
            "metadata": {"name": "s0"},
            "spec": {"tier": 1, "members": [
                {"type": "Node", "selector": {"exactMatch": {"name": "node-0"}}},
                {"type": "Node", "selector": {"regexMatch": {"pattern": "node-[01]"}}}]}}),
        )
        .await;

        let (tx, mut rx) = mpsc::channel(1024);
        let tasks = start(client, tx, Duration::from_secs(3600));
        let mut seen = [
            next_topology_event(&mut rx).await,
            next_topology_event(&mut rx).await,
        ];
        seen.sort_by_key(|c| format!("{c:?}"));
        match &seen[..] {
            [
                TopologyChange::HyperNodeUpserted(h),
                TopologyChange::TopologyUpserted(t),
            ] => {
                assert_eq!((&*h.name, h.tier, h.members.len()), ("s0", 1, 2));
                assert_eq!(h.members[1].kind, HyperNodeMemberKind::Node);
                assert_eq!(
                    h.members[1].selector,
                    MemberSelector::Regex("node-[01]".into())
                );
                assert_eq!(&*t.name, "default");
                assert_eq!(t.levels.len(), 3);
            }
            other => panic!("unexpected {other:?}"),
        }

        // s0 made invalid (a pattern that does not compile): gone.
        let patch = Patch::Merge(json!({"spec": {"members": [
            {"type": "Node", "selector": {"regexMatch": {"pattern": "node-("}}}]}}));
        hypernodes
            .patch("s0", &PatchParams::default(), &patch)
            .await
            .unwrap();
        assert_eq!(
            next_topology_event(&mut rx).await,
            TopologyChange::HyperNodeDeleted("s0".into())
        );
        topologies
            .delete("default", &Default::default())
            .await
            .unwrap();
        assert_eq!(
            next_topology_event(&mut rx).await,
            TopologyChange::TopologyDeleted("default".into())
        );
        for t in tasks {
            t.abort();
        }
        cluster.shutdown().await.unwrap();
    }
}
