//! The object store: every object of every resource, a global monotonically
//! increasing resourceVersion, and per resource a bounded history of change
//! events from which watches resume (older than the window → `410 Gone`)
//! and a broadcast of its live events.
//!
//! Per resource, as a real API server's watch cache is: a watch of a quiet
//! resource (priority classes, nodes) is neither compacted nor lagged by a
//! burst of pod writes; it ends with `410` only when its own resource
//! changes faster than it reads. In-process controllers that follow several
//! resources subscribe to every event (`subscribe_all`).
//!
//! Objects are kept as their serialized JSON bytes (`Bytes`, shared by
//! reference with every list response, watch event and history entry), plus
//! the few fields selectors read, extracted once at write time. Tables are
//! `BTreeMap`s keyed by (namespace, name), so lists come out in order without
//! sorting and pagination is a range scan. One mutex guards everything; the
//! critical sections are map operations and one serialization.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::broadcast;

use super::selectors::field_of;

/// (namespace, name); the namespace is "" for cluster-scoped objects.
pub type ObjKey = (String, String);

/// One stored object version.
#[derive(Debug)]
pub struct Stored {
    pub rv: u64,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub bytes: Bytes,
    labels: Vec<(String, String)>,
    node_name: Option<String>,
    scheduler_name: Option<String>,
    phase: Option<String>,
}

impl Stored {
    fn build(value: &Value, rv: u64) -> Result<Stored, String> {
        let meta = &value["metadata"];
        let text = |v: &Value| v.as_str().map(str::to_string);
        let labels = meta["labels"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        Ok(Stored {
            rv,
            namespace: text(&meta["namespace"]).unwrap_or_default(),
            name: text(&meta["name"]).unwrap_or_default(),
            uid: text(&meta["uid"]).unwrap_or_default(),
            bytes: Bytes::from(serde_json::to_vec(value).map_err(|e| e.to_string())?),
            labels,
            node_name: text(&value["spec"]["nodeName"]),
            scheduler_name: text(&value["spec"]["schedulerName"]),
            phase: text(&value["status"]["phase"]),
        })
    }

    /// The object decoded (a fresh copy the caller may modify).
    pub fn value(&self) -> Value {
        // Bytes were produced by serde_json from a Value, so decoding cannot fail.
        serde_json::from_slice(&self.bytes).unwrap_or(Value::Null)
    }

    /// This object's content stamped with a later version. A watch whose
    /// selector an update made the object stop matching gets it as DELETED:
    /// the last state that watch saw, at the version of the change (what the
    /// API server's watch cache sends). `None` if it cannot be re-encoded.
    pub fn restamped(&self, rv: u64) -> Option<Arc<Stored>> {
        let mut value = self.value();
        stamp(&mut value, rv).ok()
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// A field for field selectors: the hot ones come from the index, any
    /// other path decodes the object.
    pub fn field(&self, path: &str) -> Option<String> {
        match path {
            "metadata.name" => Some(self.name.clone()),
            "metadata.namespace" => Some(self.namespace.clone()),
            "spec.nodeName" => self.node_name.clone(),
            "spec.schedulerName" => self.scheduler_name.clone(),
            "status.phase" => self.phase.clone(),
            other => field_of(&self.value(), other),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change, shared by the history ring and every watcher.
#[derive(Debug)]
pub struct Event {
    pub resource: Arc<str>,
    pub kind: EventType,
    pub obj: Arc<Stored>,
    /// The version before this change (none for ADDED): lets a filtered
    /// watch turn "stopped matching" into DELETED, as a real server does.
    pub prev: Option<Arc<Stored>>,
}

/// Why a write was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum CommitError {
    NotFound,
    AlreadyExists,
    /// The object changed since the version the caller based its write on.
    Conflict,
    /// The object could not be serialized (should not happen).
    Encode(String),
}

/// A consistent starting point for a watch.
pub struct WatchStart {
    /// Events (for the resource) after the requested version, oldest first.
    pub backlog: Vec<Arc<Event>>,
    /// Every later event of the resource.
    pub live: broadcast::Receiver<Arc<Event>>,
    /// The store's version when the backlog was taken.
    pub rv: u64,
}

struct Inner {
    rv: u64,
    tables: HashMap<Arc<str>, BTreeMap<ObjKey, Arc<Stored>>>,
    /// Per resource: its recent events and live watchers.
    watched: HashMap<Arc<str>, Window>,
    /// Events kept per resource.
    history_cap: usize,
    /// Live events a resource's watcher may fall behind by before it lags.
    watch_buffer: usize,
}

/// One resource's watch cache.
struct Window {
    history: VecDeque<Arc<Event>>,
    /// Watches of the resource may resume from any version >= this one.
    compacted_rv: u64,
    /// Created by the first watch: a resource nobody watches costs no buffer.
    live: Option<broadcast::Sender<Arc<Event>>>,
}

impl Window {
    fn new() -> Self {
        Window {
            history: VecDeque::new(),
            compacted_rv: 0,
            live: None,
        }
    }

    fn subscribe(&mut self, buffer: usize) -> broadcast::Receiver<Arc<Event>> {
        match &self.live {
            Some(tx) => tx.subscribe(),
            None => {
                let (tx, rx) = broadcast::channel(buffer);
                self.live = Some(tx);
                rx
            }
        }
    }
}

impl Inner {
    /// The stored object a conditional write applies to: `NotFound` when
    /// absent, `Conflict` when its version is not the expected one.
    fn current(
        &self,
        res: &Arc<str>,
        key: &ObjKey,
        expected_rv: Option<u64>,
    ) -> Result<Arc<Stored>, CommitError> {
        let current = self
            .tables
            .get(res)
            .and_then(|t| t.get(key))
            .cloned()
            .ok_or(CommitError::NotFound)?;
        if expected_rv.is_some_and(|rv| rv != current.rv) {
            return Err(CommitError::Conflict);
        }
        Ok(current)
    }
}

pub struct Store {
    inner: Mutex<Inner>,
    /// Every event of every resource, for in-process controllers.
    all: broadcast::Sender<Arc<Event>>,
}

impl Store {
    /// `history_cap` events are kept per resource to resume watches from;
    /// a watcher may fall `watch_buffer` live events behind.
    pub fn new(history_cap: usize, watch_buffer: usize) -> Self {
        let watch_buffer = watch_buffer.max(16);
        let (all, _) = broadcast::channel(watch_buffer);
        Store {
            inner: Mutex::new(Inner {
                rv: 1,
                tables: HashMap::new(),
                watched: HashMap::new(),
                history_cap: history_cap.max(1),
                watch_buffer,
            }),
            all,
        }
    }

    /// Every later event of every resource (in-process controllers that
    /// follow several resources; they re-read the store when they lag).
    pub fn subscribe_all(&self) -> broadcast::Receiver<Arc<Event>> {
        self.all.subscribe()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Writers finish every mutation before anything can panic, so a
        // poisoned lock still guards consistent data.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    pub fn get(&self, res: &str, ns: &str, name: &str) -> Option<Arc<Stored>> {
        let inner = self.lock();
        inner
            .tables
            .get(res)?
            .get(&(ns.to_string(), name.to_string()))
            .cloned()
    }

    /// Inserts a new object; `value` gets its resourceVersion set here.
    pub fn create(&self, res: &Arc<str>, mut value: Value) -> Result<Arc<Stored>, CommitError> {
        let key = key_of(&value);
        let mut inner = self.lock();
        let table = inner.tables.entry(res.clone()).or_default();
        if table.contains_key(&key) {
            return Err(CommitError::AlreadyExists);
        }
        let rv = inner.rv + 1;
        let stored = stamp(&mut value, rv)?;
        inner.rv = rv;
        inner.table(res).insert(key, stored.clone());
        self.publish(&mut inner, res, EventType::Added, stored.clone(), None);
        Ok(stored)
    }

    /// Replaces an object. `expected_rv` is the version the write is based on
    /// (`None`: unconditional). An object being deleted whose last finalizer
    /// is removed by this write is deleted instead.
    pub fn replace(
        &self,
        res: &Arc<str>,
        expected_rv: Option<u64>,
        mut value: Value,
    ) -> Result<Arc<Stored>, CommitError> {
        let key = key_of(&value);
        let mut inner = self.lock();
        let current = inner.current(res, &key, expected_rv)?;
        let rv = inner.rv + 1;
        let finished = is_finished(&value);
        let stored = stamp(&mut value, rv)?;
        inner.rv = rv;
        let kind = if finished {
            inner.table(res).remove(&key);
            EventType::Deleted
        } else {
            inner.table(res).insert(key, stored.clone());
            EventType::Modified
        };
        self.publish(&mut inner, res, kind, stored.clone(), Some(current));
        Ok(stored)
    }

    /// Removes an object outright; the DELETED event carries the deletion's
    /// version.
    pub fn remove(
        &self,
        res: &Arc<str>,
        ns: &str,
        name: &str,
        expected_rv: Option<u64>,
    ) -> Result<Arc<Stored>, CommitError> {
        let key = (ns.to_string(), name.to_string());
        let mut inner = self.lock();
        let current = inner.current(res, &key, expected_rv)?;
        let rv = inner.rv + 1;
        let mut value = current.value();
        let stored = stamp(&mut value, rv)?;
        inner.rv = rv;
        inner.table(res).remove(&key);
        self.publish(
            &mut inner,
            res,
            EventType::Deleted,
            stored.clone(),
            Some(current),
        );
        Ok(stored)
    }

    /// Deletes a whole table (its CRD was deleted), with DELETED events.
    pub fn drop_resource(&self, res: &Arc<str>) {
        let objs: Vec<Arc<Stored>> = {
            let inner = self.lock();
            inner
                .tables
                .get(res)
                .map(|t| t.values().cloned().collect())
                .unwrap_or_default()
        };
        for o in objs {
            let _ = self.remove(res, &o.namespace, &o.name, None);
        }
    }

    /// Deletes every object in namespace `ns`, in every table.
    pub fn drop_namespace(&self, ns: &str) {
        let victims: Vec<(Arc<str>, Arc<Stored>)> = {
            let inner = self.lock();
            inner
                .tables
                .iter()
                .flat_map(|(res, t)| {
                    range_in(t, Some(ns), None).map(move |(_, o)| (res.clone(), o.clone()))
                })
                .collect()
        };
        for (res, o) in victims {
            let _ = self.remove(&res, &o.namespace, &o.name, None);
        }
    }

    /// Up to `limit` objects after `after` (exclusive) that pass `keep`,
    /// in (namespace, name) order, with the key to continue from if more
    /// remain, and the store version.
    pub fn list(
        &self,
        res: &str,
        ns: Option<&str>,
        after: Option<&ObjKey>,
        limit: Option<usize>,
        keep: impl Fn(&Stored) -> bool,
    ) -> (Vec<Arc<Stored>>, Option<ObjKey>, u64) {
        let inner = self.lock();
        let Some(table) = inner.tables.get(res) else {
            return (Vec::new(), None, inner.rv);
        };
        let limit = limit.unwrap_or(usize::MAX);
        let mut items = Vec::new();
        let mut more = false;
        for (_, obj) in range_in(table, ns, after) {
            if !keep(obj) {
                continue;
            }
            if items.len() == limit {
                more = true;
                break;
            }
            items.push(obj.clone());
        }
        // Continue after the last item returned (a page is never empty when
        // more remain: the handler maps limit=0 to "no limit").
        let next = items
            .last()
            .filter(|_| more)
            .map(|o| (o.namespace.clone(), o.name.clone()));
        (items, next, inner.rv)
    }

    /// The objects of namespace `ns` whose names start with `prefix`, in
    /// name order: a range of the table, not a walk of the namespace.
    pub fn list_prefixed(&self, res: &str, ns: &str, prefix: &str) -> Vec<Arc<Stored>> {
        let inner = self.lock();
        let Some(table) = inner.tables.get(res) else {
            return Vec::new();
        };
        let from = (ns.to_string(), prefix.to_string());
        table
            .range(from..)
            .take_while(|((k_ns, k_name), _)| k_ns == ns && k_name.starts_with(prefix))
            .map(|(_, o)| o.clone())
            .collect()
    }

    /// Subscribes to changes and returns the current objects of a resource,
    /// atomically: nothing is missed or seen twice between the two.
    pub fn snapshot_and_subscribe(
        &self,
        res: &str,
        ns: Option<&str>,
    ) -> (Vec<Arc<Stored>>, broadcast::Receiver<Arc<Event>>, u64) {
        let mut inner = self.lock();
        let buffer = inner.watch_buffer;
        let live = inner.window(Arc::from(res)).subscribe(buffer);
        let objs = inner
            .tables
            .get(res)
            .map(|t| range_in(t, ns, None).map(|(_, o)| o.clone()).collect())
            .unwrap_or_default();
        (objs, live, inner.rv)
    }

    /// Subscribes to changes after version `since`; `Err(compacted)` when
    /// that version has left the history window.
    pub fn watch_from(&self, res: &str, since: u64) -> Result<WatchStart, u64> {
        let mut inner = self.lock();
        let rv = inner.rv;
        let buffer = inner.watch_buffer;
        let window = inner.window(Arc::from(res));
        if since < window.compacted_rv {
            return Err(window.compacted_rv);
        }
        let live = window.subscribe(buffer);
        // History is ordered by version: skip to the first event after `since`.
        let start = window.history.partition_point(|e| e.obj.rv <= since);
        let backlog = window.history.range(start..).cloned().collect();
        Ok(WatchStart { backlog, live, rv })
    }

    fn publish(
        &self,
        inner: &mut Inner,
        res: &Arc<str>,
        kind: EventType,
        obj: Arc<Stored>,
        prev: Option<Arc<Stored>>,
    ) {
        let event = Arc::new(Event {
            resource: res.clone(),
            kind,
            obj,
            prev,
        });
        let cap = inner.history_cap;
        let window = inner.window(res.clone());
        if window.history.len() == cap
            && let Some(old) = window.history.pop_front()
        {
            window.compacted_rv = old.obj.rv;
        }
        window.history.push_back(event.clone());
        // No receivers is fine: nobody is watching.
        if let Some(tx) = &window.live {
            let _ = tx.send(event.clone());
        }
        let _ = self.all.send(event);
    }
}

impl Inner {
    fn window(&mut self, res: Arc<str>) -> &mut Window {
        self.watched.entry(res).or_insert_with(Window::new)
    }

    fn table(&mut self, res: &Arc<str>) -> &mut BTreeMap<ObjKey, Arc<Stored>> {
        self.tables.entry(res.clone()).or_default()
    }
}

/// Objects of one namespace (or all) strictly after `after`.
fn range_in<'a>(
    table: &'a BTreeMap<ObjKey, Arc<Stored>>,
    ns: Option<&'a str>,
    after: Option<&ObjKey>,
) -> impl Iterator<Item = (&'a ObjKey, &'a Arc<Stored>)> + 'a {
    let lower = match (after, ns) {
        (Some(k), _) => Bound::Excluded(k.clone()),
        (None, Some(ns)) => Bound::Included((ns.to_string(), String::new())),
        (None, None) => Bound::Unbounded,
    };
    table
        .range((lower, Bound::Unbounded))
        .take_while(move |((k_ns, _), _)| ns.is_none_or(|ns| k_ns == ns))
}

fn key_of(value: &Value) -> ObjKey {
    let meta = &value["metadata"];
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (s(&meta["namespace"]), s(&meta["name"]))
}

fn stamp(value: &mut Value, rv: u64) -> Result<Arc<Stored>, CommitError> {
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
    Stored::build(value, rv)
        .map(Arc::new)
        .map_err(CommitError::Encode)
}

/// Being deleted, no grace period left to run (a pod terminating
/// gracefully is removed by the fake kubelet) and no finalizer left: the
/// write completes the deletion.
fn is_finished(value: &Value) -> bool {
    let meta = &value["metadata"];
    meta.get("deletionTimestamp").is_some_and(|t| !t.is_null())
        && meta["deletionGracePeriodSeconds"].as_i64().unwrap_or(0) <= 0
        && meta["finalizers"].as_array().is_none_or(|f| f.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(ns: &str, name: &str) -> Value {
        json!({"metadata": {"namespace": ns, "name": name}})
    }

    #[test]
    fn list_is_ordered_and_paginates() {
        let store = Store::new(100, 16);
        let res: Arc<str> = Arc::from("/v1/pods");
        for name in ["c", "a", "b"] {
            store.create(&res, obj("x", name)).unwrap();
        }
        store.create(&res, obj("y", "a")).unwrap();
        let (page, next, _) = store.list(&res, Some("x"), None, Some(2), |_| true);
        assert_eq!(
            page.iter().map(|o| o.name.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        let (page, next, _) = store.list(&res, Some("x"), next.as_ref(), Some(2), |_| true);
        assert_eq!(page.len(), 1);
        assert!(next.is_none());
        let (all, _, _) = store.list(&res, None, None, None, |_| true);
        assert_eq!(all.len(), 4);
    }

    #[test]
    fn stale_version_conflicts_and_history_compacts() {
        let store = Store::new(2, 16);
        let res: Arc<str> = Arc::from("/v1/pods");
        let first = store.create(&res, obj("x", "a")).unwrap();
        let second = store.replace(&res, Some(first.rv), obj("x", "a")).unwrap();
        assert_eq!(
            store
                .replace(&res, Some(first.rv), obj("x", "a"))
                .unwrap_err(),
            CommitError::Conflict
        );
        store.replace(&res, Some(second.rv), obj("x", "a")).unwrap();
        assert!(store.watch_from(&res, first.rv - 1).is_err());
        assert_eq!(store.watch_from(&res, second.rv).unwrap().backlog.len(), 1);
    }

    /// Per resource, as the API server's watch cache: a burst of pod writes
    /// neither compacts nor lags a watch of nodes.
    #[test]
    fn windows_and_fan_out_are_per_resource() {
        let store = Store::new(2, 16);
        let pods: Arc<str> = Arc::from("/v1/pods");
        let nodes: Arc<str> = Arc::from("/v1/nodes");
        let node = store.create(&nodes, obj("", "n0")).unwrap();
        let mut node_watch = store.watch_from(&nodes, node.rv).unwrap().live;
        let mut all = store.subscribe_all();
        for i in 0..40 {
            store.create(&pods, obj("x", &format!("p{i}"))).unwrap();
        }
        // Nodes: still resumable from before the burst, and not lagged.
        assert!(
            store
                .watch_from(&nodes, node.rv)
                .unwrap()
                .backlog
                .is_empty()
        );
        assert!(matches!(
            node_watch.try_recv(),
            Err(broadcast::error::TryRecvError::Empty)
        ));
        // Pods: compacted beyond their window; the firehose lagged.
        assert!(store.watch_from(&pods, node.rv).is_err());
        assert!(matches!(
            all.try_recv(),
            Err(broadcast::error::TryRecvError::Lagged(_))
        ));
    }
}
