//! The simulated storage controllers of `muster cluster`: a PersistentVolume
//! controller and a CSI external-provisioner, kwok-style (no disks, only the
//! API objects a real cluster would show).
//!
//! On every change to claims, volumes or classes it reconciles all claims:
//! - a volume whose `claimRef` names a claim (set by the scheduler's PreBind,
//!   or pre-bound by hand) is bound to it: the claim's `spec.volumeName`, both
//!   phases `Bound`;
//! - an unbound claim of an `Immediate` class (or of none) is bound to the
//!   smallest matching `Available` volume (class, access modes, capacity,
//!   volume mode, selector), else provisioned if its class has a provisioner;
//! - an unbound claim of a `WaitForFirstConsumer` class is provisioned once
//!   it carries `volume.kubernetes.io/selected-node`, with node affinity to
//!   that node's `kubernetes.io/hostname`.
//!
//! Before that, a claim that names no class at all (`spec.storageClassName`
//! absent, not `""`) is given the default class when one exists, as the PV
//! controller does retroactively since 1.28 (admission does it at creation,
//! see [`default_class`]).
//!
//! Provisioned volumes are named `pvc-<claim uid>`, carry `spec.csi` with the
//! class's provisioner as driver, and the class's `allowedTopologies` as node
//! affinity when an `Immediate` class has them.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use super::objects::{as_map, child_mut, new_uid, now, str_at};
use super::store::{CommitError, Store, Stored};
use muster_core::model::volumes::{
    Claim, ClaimWire, PersistentVolume, PvWire, SELECTED_NODE_ANNOTATION, StorageClass,
    StorageClassWire,
};

const CLAIMS: &str = "/v1/persistentvolumeclaims";
const VOLUMES: &str = "/v1/persistentvolumes";
const CLASSES: &str = "storage.k8s.io/v1/storageclasses";
const NODES: &str = "/v1/nodes";

/// Starts the controller; it runs until `shutdown`.
pub fn spawn(store: Arc<Store>, shutdown: CancellationToken) {
    tokio::spawn(run(store, shutdown));
}

async fn run(store: Arc<Store>, shutdown: CancellationToken) {
    let mut events = store.subscribe_all();
    reconcile(&store);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            ev = events.recv() => match ev {
                Ok(ev) if [CLAIMS, VOLUMES, CLASSES].contains(&&*ev.resource) => reconcile(&store),
                Ok(_) => {}
                // Missed events: everything is looked at again anyway.
                Err(RecvError::Lagged(_)) => reconcile(&store),
                Err(RecvError::Closed) => return,
            },
        }
    }
}

/// The default StorageClass, as the DefaultStorageClass admission plugin and
/// the PV controller choose it: among classes annotated
/// `storageclass.kubernetes.io/is-default-class: "true"`, the newest (by
/// creation time, then name, as upstream breaks ties since 1.26).
pub(super) fn default_class(store: &Store) -> Option<String> {
    all(store, CLASSES)
        .into_iter()
        .filter_map(|s| {
            let v = s.value();
            let default = annotation(&v, DEFAULT_CLASS_ANNOTATION).is_some_and(|a| a == "true");
            let created = str_at(&v, "/metadata/creationTimestamp")
                .unwrap_or_default()
                .to_string();
            let name = str_at(&v, "/metadata/name")?.to_string();
            default.then_some((created, name))
        })
        .max()
        .map(|(_, name)| name)
}

/// Gives a claim without `spec.storageClassName` the default class, if any
/// (creation-time admission and the PV controller's retroactive pass).
pub(super) fn assign_default_class(store: &Store, claim: &mut Value) -> bool {
    let spec = child_mut(as_map(claim), "spec");
    if spec.contains_key("storageClassName") {
        return false;
    }
    match default_class(store) {
        Some(class) => {
            spec.insert("storageClassName".into(), json!(class));
            true
        }
        None => false,
    }
}

const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";

fn all(store: &Store, res: &str) -> Vec<Arc<Stored>> {
    store.list(res, None, None, None, |_| true).0
}

/// One pass over every claim. Each write triggers another pass, which finds
/// the claim done; passes are idempotent.
fn reconcile(store: &Store) {
    let classes: Vec<StorageClass> = all(store, CLASSES)
        .iter()
        .filter_map(|s| serde_json::from_value::<StorageClassWire>(s.value()).ok())
        .filter_map(|w| StorageClass::from_wire(&w).ok())
        .collect();
    let volumes: Vec<(Arc<Stored>, PersistentVolume)> = all(store, VOLUMES)
        .into_iter()
        .filter_map(|s| {
            let w: PvWire = serde_json::from_value(s.value()).ok()?;
            let pv = PersistentVolume::from_wire(&w).ok()?;
            Some((s, pv))
        })
        .collect();
    for stored in all(store, CLAIMS) {
        let value = stored.value();
        let Some(claim) = serde_json::from_value::<ClaimWire>(value.clone())
            .ok()
            .and_then(|w| Claim::from_wire(&w).ok())
        else {
            continue;
        };
        if claim.deleting || (claim.bound && claim.volume_name.is_some()) {
            continue;
        }
        if claim.storage_class.is_none() && claim.volume_name.is_none() {
            let mut updated = value.clone();
            if assign_default_class(store, &mut updated) {
                // The next pass (this write's event) binds or provisions it.
                let _ = replace(store, CLAIMS, stored.rv, updated);
                continue;
            }
        }
        // A volume that names this claim (PreBind's static binding, or the
        // claim's own spec.volumeName).
        let named = volumes.iter().find(|(_, pv)| {
            pv.claim_ref
                .as_ref()
                .is_some_and(|r| r.key == claim.key && (r.uid.is_empty() || r.uid == claim.uid))
                || claim.volume_name.as_deref() == Some(&*pv.name)
        });
        if let Some((pv_stored, pv)) = named {
            bind(store, &stored, &claim, pv_stored, pv);
            continue;
        }
        let class = classes.iter().find(|c| &*c.name == claim.class_name());
        let wffc = class.is_some_and(|c| c.wait_for_first_consumer);
        if !wffc {
            let available = volumes
                .iter()
                .filter(|(_, pv)| pv.claim_ref.is_none() && pv.can_bind(&claim))
                .min_by_key(|(_, pv)| (pv.capacity_bytes, pv.name.clone()));
            if let Some((pv_stored, pv)) = available {
                bind(store, &stored, &claim, pv_stored, pv);
                continue;
            }
        }
        let Some(class) = class.filter(|c| c.provisions()) else {
            continue;
        };
        let selected = annotation(&value, SELECTED_NODE_ANNOTATION);
        if wffc && selected.is_none() {
            continue;
        }
        provision(store, &value, &claim, class, selected.as_deref());
    }
}

fn annotation(obj: &Value, key: &str) -> Option<String> {
    obj.pointer("/metadata/annotations")?
        .get(key)?
        .as_str()
        .map(str::to_string)
}

/// Binds both sides: the volume's claimRef and phase, then the claim's
/// volumeName and phase.
fn bind(
    store: &Store,
    claim_stored: &Stored,
    claim: &Claim,
    pv_stored: &Stored,
    pv: &PersistentVolume,
) {
    let mut pv_value = pv_stored.value();
    let pv_done = str_at(&pv_value, "/status/phase") == Some("Bound")
        && str_at(&pv_value, "/spec/claimRef/uid") == Some(&*claim.uid);
    if !pv_done {
        let spec = child_mut(as_map(&mut pv_value), "spec");
        spec.insert(
            "claimRef".into(),
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "namespace": &*claim.key.namespace, "name": &*claim.key.name,
                "uid": &*claim.uid}),
        );
        child_mut(as_map(&mut pv_value), "status").insert("phase".into(), json!("Bound"));
        if replace(store, VOLUMES, pv_stored.rv, pv_value).is_err() {
            return;
        }
    }
    let mut claim_value = claim_stored.value();
    child_mut(as_map(&mut claim_value), "spec").insert("volumeName".into(), json!(&*pv.name));
    let annotations = child_mut(
        child_mut(as_map(&mut claim_value), "metadata"),
        "annotations",
    );
    annotations.insert("pv.kubernetes.io/bind-completed".into(), json!("yes"));
    let status = child_mut(as_map(&mut claim_value), "status");
    status.insert("phase".into(), json!("Bound"));
    status.insert(
        "capacity".into(),
        pv_stored
            .value()
            .pointer("/spec/capacity")
            .cloned()
            .unwrap_or_else(|| json!({})),
    );
    status.insert(
        "accessModes".into(),
        pv_stored
            .value()
            .pointer("/spec/accessModes")
            .cloned()
            .unwrap_or_else(|| json!([])),
    );
    let _ = replace(store, CLAIMS, claim_stored.rv, claim_value);
}

/// Creates the claim's volume (bound to it: its claimRef set, phase Bound);
/// the next pass binds the claim.
fn provision(
    store: &Store,
    claim_value: &Value,
    claim: &Claim,
    class: &StorageClass,
    node: Option<&str>,
) {
    let name = format!("pvc-{}", claim.uid);
    if store.get(VOLUMES, "", &name).is_some() {
        return;
    }
    let affinity = match node {
        Some(node) => {
            let hostname = store
                .get(NODES, "", node)
                .and_then(|n| {
                    n.value()
                        .pointer("/metadata/labels/kubernetes.io~1hostname")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                })
                .unwrap_or_else(|| node.to_string());
            Some(
                json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [hostname]}]}]}}),
            )
        }
        None => class.allowed_topologies.as_ref().map(|t| {
            let terms: Vec<Value> = t
                .terms
                .iter()
                .map(|term| {
                    let exprs: Vec<Value> = term
                        .match_expressions
                        .iter()
                        .map(|r| json!({"key": r.key, "operator": "In", "values": r.values}))
                        .collect();
                    json!({"matchExpressions": exprs})
                })
                .collect();
            json!({"required": {"nodeSelectorTerms": terms}})
        }),
    };
    let storage = claim_value
        .pointer("/spec/resources/requests/storage")
        .cloned()
        .unwrap_or_else(|| json!("1Gi"));
    let modes = claim_value
        .pointer("/spec/accessModes")
        .cloned()
        .unwrap_or_else(|| json!(["ReadWriteOnce"]));
    let mut pv = json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": name, "uid": new_uid(), "creationTimestamp": now(),
            "annotations": {"pv.kubernetes.io/provisioned-by": &*class.provisioner},
        },
        "spec": {
            "capacity": {"storage": storage},
            "accessModes": modes,
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": &*class.name,
            "volumeMode": if claim.block { "Block" } else { "Filesystem" },
            "csi": {"driver": &*class.provisioner, "volumeHandle": name},
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "namespace": &*claim.key.namespace, "name": &*claim.key.name,
                "uid": &*claim.uid},
        },
        "status": {"phase": "Bound"},
    });
    if let Some(a) = affinity {
        child_mut(as_map(&mut pv), "spec").insert("nodeAffinity".into(), a);
    }
    if let Err(e) = store.create(&Arc::from(VOLUMES), pv) {
        tracing::warn!(claim = %claim.key, error = ?e, "provisioning a volume failed");
    } else {
        tracing::info!(claim = %claim.key, volume = %name, node = ?node, "provisioned a volume");
    }
}

fn replace(store: &Store, res: &str, rv: u64, value: Value) -> Result<(), CommitError> {
    store.replace(&Arc::from(res), Some(rv), value).map(|_| ())
}
