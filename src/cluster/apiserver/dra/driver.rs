//! A kwok-style DRA driver: for every node that declares devices (the
//! `kwok.muster.dev/devices` annotation its template put there, see
//! `crate::kwok::devices`) it publishes one ResourceSlice of the node's own
//! devices (pool = node name, `nodeName` set, owned by the node), and, for a
//! template with `multiNode` devices, one ResourceSlice per clique whose
//! `nodeSelector` spans the clique's label value. Deleting a node deletes its
//! slice, and a clique's slice goes with the clique's last node.
//!
//! Works from the store's event stream like the other simulated
//! controllers; a lagged stream resyncs every node.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use crate::apiserver::objects::{new_uid, now};
use crate::apiserver::store::{CommitError, EventType, Store, Stored};
use crate::kwok::devices::{self, DEVICES_ANNOTATION, DeviceTemplate};

const NODES: &str = "/v1/nodes";
pub const SLICES: &str = "resource.k8s.io/v1/resourceslices";
/// Marks the slices this driver owns (it never touches others).
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "kwok-dra-driver";

/// Starts the driver; it runs until `shutdown`.
pub fn spawn(store: Arc<Store>, shutdown: CancellationToken) {
    tokio::spawn(run(store, shutdown));
}

async fn run(store: Arc<Store>, shutdown: CancellationToken) {
    let mut events = store.subscribe_all();
    resync(&store);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            ev = events.recv() => match ev {
                Ok(ev) if &*ev.resource == NODES => {
                    let had = ev.prev.as_ref().is_some_and(|p| declares_devices(p));
                    if declares_devices(&ev.obj) || had {
                        on_node(&store, &ev.obj, ev.kind == EventType::Deleted, ev.prev.as_deref());
                    }
                }
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => resync(&store),
                Err(RecvError::Closed) => return,
            },
        }
    }
}

/// A cheap look at the stored bytes before decoding.
fn declares_devices(node: &Stored) -> bool {
    let needle = DEVICES_ANNOTATION.as_bytes();
    node.bytes.windows(needle.len()).any(|w| w == needle)
}

fn all(store: &Store, res: &str) -> Vec<Arc<Stored>> {
    store.list(res, None, None, None, |_| true).0
}

/// Every node's slices brought up to date, and slices of nodes and
/// cliques that are gone removed.
fn resync(store: &Store) {
    let nodes = all(store, NODES);
    for node in nodes.iter().filter(|n| declares_devices(n)) {
        on_node(store, node, false, None);
    }
    for slice in all(store, SLICES)
        .into_iter()
        .filter(|s| s.label(MANAGED_BY_LABEL) == Some(MANAGED_BY))
    {
        let value = slice.value();
        let orphan = match value.pointer("/spec/nodeName").and_then(Value::as_str) {
            Some(node) => store.get(NODES, "", node).is_none(),
            None => !clique_has_nodes(store, &value),
        };
        if orphan {
            remove(store, &slice);
        }
    }
}

fn on_node(store: &Store, node: &Stored, deleted: bool, prev: Option<&Stored>) {
    let value = node.value();
    let template = if deleted {
        None
    } else {
        devices::of_node(&value)
    };
    // What the node published before (its template may have changed).
    let before = prev
        .map(|p| p.value())
        .and_then(|p| devices::of_node(&p).map(|t| (t, p)))
        .or_else(|| devices::of_node(&value).map(|t| (t, value.clone())));
    if let Some((old, old_node)) = &before {
        let gone = template.as_ref().is_none_or(|t| t.driver != old.driver);
        if gone {
            remove_named(store, &devices::node_slice_name(&node.name, &old.driver));
        }
        if let (Some(_), Some(clique)) = (&old.multi_node, devices::clique_of(old_node, old)) {
            let name = devices::clique_slice_name(&clique, &old.driver);
            if let Some(s) = store.get(SLICES, "", &name)
                && !clique_has_nodes(store, &s.value())
            {
                remove(store, &s);
            }
        }
    }
    let Some(t) = template else {
        return;
    };
    let (name, spec) = devices::node_slice(&node.name, &value, &t);
    let owner = json!([{"apiVersion": "v1", "kind": "Node", "name": node.name, "uid": node.uid,
        "controller": true}]);
    publish(store, &name, spec, Some(owner));
    if let (Some(m), Some(clique)) = (&t.multi_node, devices::clique_of(&value, &t)) {
        let (name, spec) = devices::clique_slice(&clique, &t, m);
        publish(store, &name, spec, None);
    }
}

/// Does any node still carry the clique label value a clique slice selects?
fn clique_has_nodes(store: &Store, slice: &Value) -> bool {
    let Some(expr) = slice.pointer("/spec/nodeSelector/nodeSelectorTerms/0/matchExpressions/0")
    else {
        return false;
    };
    let (Some(key), Some(value)) = (
        expr["key"].as_str(),
        expr.pointer("/values/0").and_then(Value::as_str),
    ) else {
        return false;
    };
    let driver = slice.pointer("/spec/driver").and_then(Value::as_str);
    !store
        .list(NODES, None, None, Some(1), |n| {
            n.label(key) == Some(value)
                && declares_devices(n)
                && devices::of_node(&n.value()).is_some_and(|t: DeviceTemplate| {
                    t.multi_node.is_some() && Some(t.driver.as_str()) == driver
                })
        })
        .0
        .is_empty()
}

/// Creates the slice, or replaces its spec (bumping the pool generation)
/// when it differs.
fn publish(store: &Store, name: &str, mut spec: Value, owner: Option<Value>) {
    let res: Arc<str> = Arc::from(SLICES);
    for _ in 0..10 {
        match store.get(SLICES, "", name) {
            None => {
                let mut meta = json!({"name": name, "uid": new_uid(), "creationTimestamp": now(),
                    "generation": 1, "labels": {MANAGED_BY_LABEL: MANAGED_BY}});
                if let Some(o) = &owner {
                    meta["ownerReferences"] = o.clone();
                }
                let slice = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                    "metadata": meta, "spec": spec});
                match store.create(&res, slice) {
                    Ok(_) => return,
                    Err(CommitError::AlreadyExists) => continue,
                    Err(e) => {
                        tracing::warn!(slice = name, error = ?e, "publishing a resource slice failed");
                        return;
                    }
                }
            }
            Some(current) => {
                let mut value = current.value();
                let old_gen = value
                    .pointer("/spec/pool/generation")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                spec["pool"]["generation"] = json!(old_gen);
                if value.get("spec") == Some(&spec) {
                    return;
                }
                spec["pool"]["generation"] = json!(old_gen.saturating_add(1));
                value["spec"] = spec.clone();
                let generation = value
                    .pointer("/metadata/generation")
                    .and_then(Value::as_i64)
                    .unwrap_or(1);
                value["metadata"]["generation"] = json!(generation.saturating_add(1));
                match store.replace(&res, Some(current.rv), value) {
                    Ok(_) => return,
                    Err(CommitError::Conflict) => continue,
                    Err(e) => {
                        tracing::warn!(slice = name, error = ?e, "updating a resource slice failed");
                        return;
                    }
                }
            }
        }
    }
}

fn remove_named(store: &Store, name: &str) {
    if let Some(s) = store.get(SLICES, "", name) {
        remove(store, &s);
    }
}

fn remove(store: &Store, slice: &Stored) {
    if slice.label(MANAGED_BY_LABEL) != Some(MANAGED_BY) {
        return;
    }
    let res: Arc<str> = Arc::from(SLICES);
    if let Err(e) = store.remove(&res, "", &slice.name, Some(slice.rv)) {
        tracing::debug!(slice = %slice.name, error = ?e, "resource slice not removed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kwok::templates::{RACK_LABEL, parse};

    #[test]
    fn published_slices_are_valid() {
        let t = parse(
            "count: 2\ndevices: {count: 8, memory: 80Gi, pcieRoots: 2, multiNode: {count: 2}}",
        )
        .unwrap();
        let node = &crate::kwok::templates::expand(&t)[0];
        let d = devices::of_node(node).unwrap();
        let (_, spec) = devices::node_slice("sim-node-0", node, &d);
        let slice = json!({"spec": spec});
        assert!(super::super::validate::object("ResourceSlice", &slice).is_empty());
        let clique = node["metadata"]["labels"][RACK_LABEL].as_str().unwrap();
        let (_, spec) = devices::clique_slice(clique, &d, d.multi_node.as_ref().unwrap());
        let slice = json!({"spec": spec});
        assert!(super::super::validate::object("ResourceSlice", &slice).is_empty());
    }

    #[test]
    fn published_shared_devices_are_valid() {
        for shared in [
            "{count: 2, value: 100Gi, default: 10Gi, step: 1Gi}",
            "{count: 1, model: cx7, capacity: net.example.com/bandwidth, value: 400G, default: 25G}",
            "{count: 120, value: '8', default: '2', step: '2'}",
        ] {
            let t = parse(&format!(
                "count: 1\ndevices: {{count: 8, memory: 80Gi, shared: {shared}}}"
            ))
            .unwrap();
            let node = &crate::kwok::templates::expand(&t)[0];
            let d = devices::of_node(node).unwrap();
            let (_, spec) = devices::node_slice("sim-node-0", node, &d);
            let count = spec["devices"].as_array().unwrap().len();
            assert!(count > 8, "{shared}");
            let slice = json!({"spec": spec});
            let why = super::super::validate::object("ResourceSlice", &slice);
            assert!(why.is_empty(), "{shared}: {why:?}");
        }
    }
}
