//! The resourceclaim controller of kube-controller-manager, simulated:
//! - a pod whose `spec.resourceClaims[]` entry names a
//!   `resourceClaimTemplateName` gets a ResourceClaim made from that template
//!   (named `<pod>-<claim>-<random>`, owned by the pod with `controller:
//!   true`, annotated `resource.kubernetes.io/pod-claim-name`), recorded in
//!   the pod's `status.resourceClaimStatuses`; a missing template is retried
//!   when templates change;
//! - a claim's `status.reservedFor` loses the pods that no longer exist (by
//!   uid) or are done (terminal, or being deleted before they were
//!   scheduled);
//! - a claim reserved by nobody loses its `status.allocation` and the
//!   scheduler's `resource.kubernetes.io/delete-protection` finalizer
//!   (deallocation: the scheduler allocates and reserves in one write);
//! - a claim generated for a pod is deleted once that pod is gone or done
//!   and the claim is reserved by nobody (what the garbage collector and
//!   this controller do together on a real cluster; the simulator has no
//!   general garbage collector);
//! - a PodGroup's claims (KEP-5729, `pod_groups`): one claim per template
//!   entry of the group, controlled by it and recorded in its status; a
//!   member's entry equal to the group's gets no claim of its own but the
//!   group's recorded in its status (a member of a group not created yet
//!   waits for it); a `podgroups` reservation stays while the group lives,
//!   and a claim made for a group is deleted once the group is gone and
//!   the claim reserved by nobody.
//!
//! It works from the store's event stream: each pod event with resource
//! claims and each claim event is handled on its own; a lagged stream
//! resyncs everything.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use super::consumer::ClaimChange;
use super::validate::default_claim_spec;
use crate::apiserver::kubelet::Lifecycle;
use crate::apiserver::objects::{
    as_map, child_mut, generated_base, meta_mut, name_suffix, new_uid, now, str_at,
};
use crate::apiserver::store::{CommitError, EventType, Store, Stored};

use super::pod_groups::{self, GROUP_CLAIM_NAME_ANNOTATION, group_name};

pub const PODS: &str = "/v1/pods";
pub const CLAIMS: &str = "resource.k8s.io/v1/resourceclaims";
pub const TEMPLATES: &str = "resource.k8s.io/v1/resourceclaimtemplates";
/// Names the pod's claim a generated ResourceClaim was made for.
pub const POD_CLAIM_NAME_ANNOTATION: &str = "resource.kubernetes.io/pod-claim-name";
/// Set by a scheduler on allocation; removed here on deallocation.
pub const DELETE_PROTECTION_FINALIZER: &str = "resource.kubernetes.io/delete-protection";

/// Conflicting writes retried before an item is left to the next event.
const RETRIES: usize = 10;

/// Starts the controller; it runs until `shutdown`. `lifecycle` hears of
/// claim changes (pods waiting for their claims start on them).
pub fn spawn(store: Arc<Store>, lifecycle: Lifecycle, shutdown: CancellationToken) {
    tokio::spawn(run(store, lifecycle, shutdown));
}

async fn run(store: Arc<Store>, lifecycle: Lifecycle, shutdown: CancellationToken) {
    let mut events = store.subscribe_all();
    let mut waiting = WaitingForGroups::default();
    resync(&store, &mut waiting);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            ev = events.recv() => match ev {
                Ok(ev) => match &*ev.resource {
                    PODS if mentions_claims(&ev.obj) => {
                        let deleted = ev.kind == EventType::Deleted;
                        waiting.handled(&ev.obj, on_pod(&store, &ev.obj, deleted));
                    }
                    res if pod_groups::is_podgroups(res) => {
                        if mentions_claims(&ev.obj) {
                            on_group(&store, res, &ev.obj, ev.kind == EventType::Deleted);
                        }
                        waiting.group_changed(&store, &ev.obj);
                    }
                    CLAIMS => {
                        if ev.kind != EventType::Deleted {
                            sync_claim(&store, &ev.obj);
                        }
                        let value = ev.obj.value();
                        lifecycle.claim_changed(ClaimChange {
                            namespace: ev.obj.namespace.clone(),
                            name: ev.obj.name.clone(),
                            owner: owner_pod_uid(&value).map(str::to_string),
                        });
                    }
                    TEMPLATES if ev.kind != EventType::Deleted => {
                        pods_of_namespace(&store, &ev.obj.namespace, &mut waiting);
                        groups_of_namespace(&store, &ev.obj.namespace);
                    }
                    _ => {}
                },
                Err(RecvError::Lagged(_)) => {
                    resync(&store, &mut waiting);
                    lifecycle.claims_resynced();
                }
                Err(RecvError::Closed) => return,
            },
        }
    }
}

/// A cheap look at the stored bytes before decoding: only pods with
/// `spec.resourceClaims` concern this controller.
fn mentions_claims(pod: &Stored) -> bool {
    // A pod given an extended-resource claim by the scheduler has it in
    // `status.extendedResourceClaimStatus`: released and deleted with it.
    const NEEDLES: [&[u8]; 2] = [b"\"resourceClaims\"", b"\"extendedResourceClaimStatus\""];
    NEEDLES
        .iter()
        .any(|n| pod.bytes.windows(n.len()).any(|w| w == *n))
}

fn all(store: &Store, res: &str, ns: Option<&str>) -> Vec<Arc<Stored>> {
    store.list(res, ns, None, None, |_| true).0
}

/// Pods that wait for their PodGroup (to exist, or to record the claim
/// of an entry they share with it), by (namespace, group): looked at again
/// when that group changes, never by walking the pods of a namespace.
#[derive(Debug, Default)]
struct WaitingForGroups {
    pods: std::collections::HashMap<(String, String), std::collections::BTreeSet<String>>,
}

impl WaitingForGroups {
    /// `pod` was handled; it waits for `group`, if any.
    fn handled(&mut self, pod: &Stored, group: Option<String>) {
        if let Some(group) = group {
            self.pods
                .entry((pod.namespace.clone(), group))
                .or_default()
                .insert(pod.name.clone());
        }
    }

    /// `group` changed: the pods waiting for it are handled again.
    fn group_changed(&mut self, store: &Store, group: &Stored) {
        let key = (group.namespace.clone(), group.name.clone());
        let Some(names) = self.pods.remove(&key) else {
            return;
        };
        for name in names {
            if let Some(pod) = store.get(PODS, &group.namespace, &name) {
                let waits = on_pod(store, &pod, false);
                self.handled(&pod, waits);
            }
        }
    }
}

/// Every pod with claims and every claim, looked at again.
fn resync(store: &Store, waiting: &mut WaitingForGroups) {
    for pod in all(store, PODS, None)
        .into_iter()
        .filter(|p| mentions_claims(p))
    {
        waiting.handled(&pod, on_pod(store, &pod, false));
    }
    for (res, group) in pod_groups::all(store, None)
        .into_iter()
        .filter(|(_, g)| mentions_claims(g))
    {
        on_group(store, res, &group, false);
    }
    for claim in all(store, CLAIMS, None) {
        sync_claim(store, &claim);
    }
}

fn groups_of_namespace(store: &Store, ns: &str) {
    for (res, group) in pod_groups::all(store, Some(ns))
        .into_iter()
        .filter(|(_, g)| mentions_claims(g))
    {
        on_group(store, res, &group, false);
    }
}

/// A PodGroup with `spec.resourceClaims` changed: its claims from templates
/// are made and recorded; a group gone (or going) releases its claims, and
/// those made for it go.
fn on_group(store: &Store, res: &str, group: &Stored, deleted: bool) {
    let value = group.value();
    if deleted || value.pointer("/metadata/deletionTimestamp").is_some() {
        for claim in claims_of_group(store, group, &value) {
            sync_claim(store, &claim);
        }
        return;
    }
    let owner = Owner {
        api_version: value["apiVersion"]
            .as_str()
            .unwrap_or("scheduling.k8s.io/v1beta1"),
        kind: "PodGroup",
        annotation: GROUP_CLAIM_NAME_ANNOTATION,
        obj: group,
    };
    let made = template_claims(store, &owner, pod_groups::entries(&value), &value);
    if !made.is_empty() {
        // Its members waiting for the record hear of it (`WaitingForGroups`).
        record(store, res, group, &made);
    }
}

/// The claims a PodGroup may hold: those its entries name, those its
/// status records, and those made for it whose recording was lost.
fn claims_of_group(store: &Store, group: &Stored, value: &Value) -> Vec<Arc<Stored>> {
    let entries = pod_groups::entries(value);
    let mut names: Vec<String> = entries
        .iter()
        .filter_map(|e| pod_groups::claim_of_entry(value, e))
        .collect();
    names.sort_unstable();
    names.dedup();
    let mut out: Vec<Arc<Stored>> = names
        .iter()
        .filter_map(|n| store.get(CLAIMS, &group.namespace, n))
        .collect();
    for entry in entries
        .iter()
        .filter(|e| e.get("resourceClaimTemplateName").is_some())
        .filter_map(|e| e.get("name")?.as_str())
    {
        let prefix = format!("{}-", claim_name_base(&group.name, entry));
        out.extend(store.list_prefixed(CLAIMS, &group.namespace, &prefix));
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out.dedup_by(|a, b| a.name == b.name);
    out
}

fn pods_of_namespace(store: &Store, ns: &str, waiting: &mut WaitingForGroups) {
    for pod in all(store, PODS, Some(ns))
        .into_iter()
        .filter(|p| mentions_claims(p))
    {
        waiting.handled(&pod, on_pod(store, &pod, false));
    }
}

/// Is the pod done with its claims: terminal, or deleted before it was
/// scheduled?
pub fn pod_done(pod: &Value) -> bool {
    let phase = str_at(pod, "/status/phase");
    let terminal = matches!(phase, Some("Succeeded" | "Failed"));
    let deleted_unscheduled = pod.pointer("/metadata/deletionTimestamp").is_some()
        && str_at(pod, "/spec/nodeName").is_none_or(str::is_empty);
    terminal || deleted_unscheduled
}

/// Handles a pod's event; the PodGroup it waits for, if it does (to exist,
/// or to record a claim the pod shares with it).
fn on_pod(store: &Store, pod: &Stored, deleted: bool) -> Option<String> {
    let value = pod.value();
    if deleted || pod_done(&value) {
        // Its claims may be released, and those made for it deleted.
        for claim in claims_of_pod(store, pod, &value) {
            let c = claim.value();
            if reserved_uids(&c).any(|u| u == pod.uid) || owner_pod_uid(&c) == Some(&pod.uid) {
                sync_claim(store, &claim);
            }
        }
        return None;
    }
    if value.pointer("/metadata/deletionTimestamp").is_some() {
        return None;
    }
    create_template_claims(store, pod, &value)
}

/// The claims a pod may hold, as kube-controller-manager's controller finds
/// them on the pod: those its entries name, those recorded in its status
/// (from templates, and the scheduler's extended-resource claim), and
/// those made for it whose recording was lost (found by the names they are
/// generated under). Read by name and name range, never by walking every
/// claim of the namespace for each pod that ends.
fn claims_of_pod(store: &Store, pod: &Stored, value: &Value) -> Vec<Arc<Stored>> {
    let entries = pod_groups::entries(value);
    let recorded = value
        .pointer("/status/resourceClaimStatuses")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut names: Vec<&str> = entries
        .iter()
        .filter_map(|e| e.get("resourceClaimName")?.as_str())
        .chain(
            recorded
                .iter()
                .filter_map(|s| s.get("resourceClaimName")?.as_str()),
        )
        .chain(str_at(
            value,
            "/status/extendedResourceClaimStatus/resourceClaimName",
        ))
        .collect();
    names.sort_unstable();
    names.dedup();
    let mut out: Vec<Arc<Stored>> = names
        .into_iter()
        .filter_map(|n| store.get(CLAIMS, &pod.namespace, n))
        .collect();
    let mut prefixes: Vec<String> = entries
        .iter()
        .filter(|e| e.get("resourceClaimTemplateName").is_some())
        .filter_map(|e| e.get("name")?.as_str())
        .map(|entry| format!("{}-", claim_name_base(&pod.name, entry)))
        .collect();
    // The scheduler's `generateName` for the extended-resource claim.
    prefixes.push(generated_base(&format!("{}-extended-resources-", pod.name)).to_string());
    for prefix in &prefixes {
        out.extend(store.list_prefixed(CLAIMS, &pod.namespace, prefix));
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out.dedup_by(|a, b| a.name == b.name);
    out
}

/// The object claims are made for from templates: a pod, or a PodGroup.
struct Owner<'a> {
    api_version: &'a str,
    kind: &'a str,
    /// Names the owner's claim entry a generated claim was made for.
    annotation: &'a str,
    obj: &'a Stored,
}

/// The pod's claims made from templates that it does not have yet; the
/// claims of its PodGroup it shares, recorded as the group's. Returns the
/// group it waits for: not created yet (which entries are the group's is
/// not known, so no claim is made), or not done recording a claim the pod
/// shares.
fn create_template_claims(store: &Store, pod: &Stored, value: &Value) -> Option<String> {
    let mut made = Vec::new();
    let mut waits = false;
    let shared = match group_name(value) {
        None => None,
        Some(name) => match pod_groups::find(store, &pod.namespace, name) {
            Some((_, g)) => Some(g.value()),
            None => return Some(name.to_string()),
        },
    };
    let own: Vec<&Value> = pod_groups::entries(value)
        .iter()
        .filter(|e| match &shared {
            Some(g) => match pod_groups::matching_entry(g, e) {
                Some(entry) => {
                    // The group's: its name recorded for the pod, once made.
                    if e.get("resourceClaimTemplateName").is_some()
                        && let Some(entry_name) = e["name"].as_str()
                    {
                        match pod_groups::claim_of_entry(g, entry) {
                            Some(claim) => made.push((entry_name.to_string(), claim)),
                            None => waits = true,
                        }
                    }
                    false
                }
                None => true,
            },
            None => true,
        })
        .collect();
    let owner = Owner {
        api_version: "v1",
        kind: "Pod",
        annotation: POD_CLAIM_NAME_ANNOTATION,
        obj: pod,
    };
    made.extend(template_claims(store, &owner, own, value));
    if !made.is_empty() {
        record(store, PODS, pod, &made);
    }
    waits.then(|| group_name(value).unwrap_or_default().to_string())
}

/// The claims `owner` lacks of its `entries` from templates (of its
/// `spec.resourceClaims`), made (or found made): (entry, claim name) for
/// each not recorded in the status of `value` (the owner) yet.
fn template_claims<'a>(
    store: &Store,
    owner: &Owner<'_>,
    entries: impl IntoIterator<Item = &'a Value>,
    value: &Value,
) -> Vec<(String, String)> {
    let wanted: Vec<(String, String)> = entries
        .into_iter()
        .filter_map(|c| {
            let name = c.get("name")?.as_str()?;
            let template = c.get("resourceClaimTemplateName")?.as_str()?;
            Some((name.to_string(), template.to_string()))
        })
        .collect();
    let recorded = |v: &Value, name: &str| {
        v.pointer("/status/resourceClaimStatuses")
            .and_then(Value::as_array)
            .is_some_and(|s| s.iter().any(|e| e["name"] == name))
    };
    let obj = owner.obj;
    let mut made: Vec<(String, String)> = Vec::new();
    for (claim_name, template) in &wanted {
        if recorded(value, claim_name) {
            continue;
        }
        // One made before whose recording was lost: adopt it. Claims made
        // here are named `<base>-<suffix>`, so only those are read: a range
        // of the store, not every claim of the namespace for every new pod.
        let prefix = format!("{}-", claim_name_base(&obj.name, claim_name));
        let existing = store
            .list_prefixed(CLAIMS, &obj.namespace, &prefix)
            .into_iter()
            .find(|c| {
                let v = c.value();
                controller_uid(&v, owner.kind) == Some(&obj.uid)
                    && annotation(&v, owner.annotation) == Some(claim_name.as_str())
            });
        let name = match existing {
            Some(c) => c.name.clone(),
            None => match create_claim(store, owner, claim_name, template) {
                Some(name) => name,
                None => continue,
            },
        };
        made.push((claim_name.clone(), name));
    }
    made
}

/// Records `made` (entry, claim name) in the object's
/// `status.resourceClaimStatuses`.
fn record(store: &Store, res: &str, obj: &Stored, made: &[(String, String)]) {
    update(store, res, &obj.namespace, &obj.name, &obj.uid, |p| {
        let status = child_mut(as_map(p), "status");
        let list = status
            .entry("resourceClaimStatuses")
            .or_insert_with(|| json!([]));
        let Some(list) = list.as_array_mut() else {
            return false;
        };
        let mut changed = false;
        for (claim_name, name) in made {
            if !list.iter().any(|e| e["name"] == claim_name.as_str()) {
                list.push(json!({"name": claim_name, "resourceClaimName": name}));
                changed = true;
            }
        }
        changed
    });
}

/// The uid of the controller of kind `kind` of a claim, if any.
fn controller_uid<'a>(claim: &'a Value, kind: &str) -> Option<&'a str> {
    match kind {
        "Pod" => owner_pod_uid(claim),
        _ => pod_groups::owner_group_uid(claim),
    }
}

/// Creates the claim for `claim_name` of `owner` from `template`; its
/// name, or None when the template does not exist (yet).
fn create_claim(
    store: &Store,
    owner: &Owner<'_>,
    claim_name: &str,
    template: &str,
) -> Option<String> {
    let obj = owner.obj;
    let Some(t) = store.get(TEMPLATES, &obj.namespace, template) else {
        tracing::debug!(owner = %obj.name, template, "resource claim template not found yet");
        return None;
    };
    let t = t.value();
    let base = claim_name_base(&obj.name, claim_name);
    let mut labels = t
        .pointer("/spec/metadata/labels")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let mut annotations = t
        .pointer("/spec/metadata/annotations")
        .cloned()
        .unwrap_or_else(|| json!({}));
    as_map(&mut annotations).insert(owner.annotation.into(), json!(claim_name));
    as_map(&mut labels);
    let mut spec = t
        .pointer("/spec/spec")
        .cloned()
        .unwrap_or_else(|| json!({}));
    default_claim_spec(&mut spec);
    let res: Arc<str> = Arc::from(CLAIMS);
    for _ in 0..RETRIES {
        let name = format!("{base}-{}", name_suffix());
        let claim = json!({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {
                "name": name,
                "generateName": format!("{base}-"),
                "namespace": obj.namespace,
                "uid": new_uid(),
                "creationTimestamp": now(),
                "generation": 1,
                "labels": labels,
                "annotations": annotations,
                "ownerReferences": [{"apiVersion": owner.api_version, "kind": owner.kind,
                    "name": obj.name, "uid": obj.uid, "controller": true,
                    "blockOwnerDeletion": true}],
            },
            "spec": spec,
        });
        match store.create(&res, claim) {
            Ok(_) => {
                tracing::info!(owner = %obj.name, kind = owner.kind, claim = %name, "resource claim created from template");
                return Some(name);
            }
            Err(CommitError::AlreadyExists) => continue,
            Err(e) => {
                tracing::warn!(owner = %obj.name, error = ?e, "creating a resource claim failed");
                return None;
            }
        }
    }
    None
}

/// `<pod>-<claim>`, leaving room for `-xxxxx` within 63 characters: when
/// `<pod>-<claim>-` is longer than 57, both names are cut in proportion to
/// their lengths so neither is lost (each cut part ends alphanumeric, so
/// the name stays a DNS subdomain).
fn claim_name_base(pod: &str, claim: &str) -> String {
    const MAX_BASE: usize = 57;
    let generate_len = pod.len() + claim.len() + 2;
    if generate_len <= MAX_BASE {
        return format!("{pod}-{claim}");
    }
    let cut = |s: &str| {
        let keep = s.len() * MAX_BASE / generate_len;
        let part: String = s.chars().take(keep).collect();
        part.trim_end_matches(['-', '.']).to_string()
    };
    format!("{}-{}", cut(pod), cut(claim))
}

fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.pointer("/metadata/annotations")?.get(key)?.as_str()
}

/// The uid of the pod that controls this claim, if a pod does.
pub fn owner_pod_uid(claim: &Value) -> Option<&str> {
    claim
        .pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r["kind"] == "Pod" && r["apiVersion"] == "v1" && r["controller"] == true)?
        .get("uid")?
        .as_str()
}

fn reserved_uids(claim: &Value) -> impl Iterator<Item = &str> {
    claim
        .pointer("/status/reservedFor")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r["uid"].as_str())
}

/// Is the pod `(ns, name, uid)` still a consumer: present with that uid,
/// and not done?
fn pod_alive(store: &Store, ns: &str, name: &str, uid: &str) -> bool {
    store
        .get(PODS, ns, name)
        .is_some_and(|p| p.uid == uid && !pod_done(&p.value()))
}

/// Releases dead reservations, deallocates an unreserved claim, deletes a
/// generated claim whose pod is gone or done.
fn sync_claim(store: &Store, claim: &Stored) {
    let ns = claim.namespace.clone();
    let released = update(store, CLAIMS, &ns, &claim.name, &claim.uid, |c| {
        let Some(reserved) = c
            .pointer("/status/reservedFor")
            .and_then(Value::as_array)
            .cloned()
        else {
            return deallocate(c);
        };
        let kept: Vec<Value> = reserved
            .iter()
            .filter(|r| {
                let (name, uid) = (
                    r["name"].as_str().unwrap_or_default(),
                    r["uid"].as_str().unwrap_or_default(),
                );
                match r["resource"].as_str() {
                    Some("pods") => pod_alive(store, &ns, name, uid),
                    Some("podgroups") if r["apiGroup"] == "scheduling.k8s.io" => {
                        pod_groups::group_alive(store, &ns, name, uid)
                    }
                    _ => true,
                }
            })
            .cloned()
            .collect();
        let changed = kept.len() != reserved.len();
        let status = child_mut(as_map(c), "status");
        if kept.is_empty() {
            status.remove("reservedFor");
        } else {
            status.insert("reservedFor".into(), Value::Array(kept));
        }
        deallocate(c) || changed
    });
    let Some(current) = released.or_else(|| store.get(CLAIMS, &ns, &claim.name)) else {
        return;
    };
    let value = current.value();
    if reserved_uids(&value).next().is_some() {
        return;
    }
    if let Some(owner) = owner_pod_uid(&value) {
        let owner_live = value
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .and_then(|refs| refs.iter().find(|r| r["uid"] == owner))
            .and_then(|r| r["name"].as_str())
            .is_some_and(|pod| pod_alive(store, &ns, pod, owner));
        if !owner_live {
            delete_claim(store, &current);
        }
    } else if let Some(owner) = pod_groups::owner_group(&value) {
        let (name, uid) = (
            owner["name"].as_str().unwrap_or_default(),
            owner["uid"].as_str().unwrap_or_default(),
        );
        if !pod_groups::group_alive(store, &ns, name, uid) {
            delete_claim(store, &current);
        }
    }
}

/// Clears the allocation of a claim nobody reserves, and its
/// delete-protection finalizer; a claim being deleted loses the finalizer
/// whether it was allocated or not (a scheduler may have protected it and
/// then failed to record the allocation), as upstream's controller does.
/// True if it changed.
fn deallocate(c: &mut Value) -> bool {
    let reserved = c
        .pointer("/status/reservedFor")
        .and_then(Value::as_array)
        .is_some_and(|r| !r.is_empty());
    let allocated = c.pointer("/status/allocation").is_some();
    let deleting = c.pointer("/metadata/deletionTimestamp").is_some();
    if reserved || !(allocated || deleting) {
        return false;
    }
    let mut changed = false;
    if allocated {
        child_mut(as_map(c), "status").remove("allocation");
        changed = true;
    }
    if let Some(f) = meta_mut(c)
        .get_mut("finalizers")
        .and_then(Value::as_array_mut)
    {
        let before = f.len();
        f.retain(|x| x != DELETE_PROTECTION_FINALIZER);
        changed |= f.len() != before;
    }
    changed
}

/// Deletes a claim: marked while finalizers remain, else removed.
fn delete_claim(store: &Store, claim: &Stored) {
    let res: Arc<str> = Arc::from(CLAIMS);
    let mut value = claim.value();
    let has_finalizers = value
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty());
    let result = if has_finalizers {
        if value.pointer("/metadata/deletionTimestamp").is_some() {
            return;
        }
        meta_mut(&mut value).insert("deletionTimestamp".into(), json!(now()));
        meta_mut(&mut value).insert("deletionGracePeriodSeconds".into(), json!(0));
        store.replace(&res, Some(claim.rv), value).map(drop)
    } else {
        store
            .remove(&res, &claim.namespace, &claim.name, Some(claim.rv))
            .map(drop)
    };
    match result {
        Ok(()) => {
            tracing::info!(claim = %claim.name, "generated resource claim deleted with its pod")
        }
        // Changed meanwhile: its event brings it back here.
        Err(e) => tracing::debug!(claim = %claim.name, error = ?e, "resource claim not deleted"),
    }
}

/// Applies `change` to the live object (same uid), retrying conflicts;
/// `change` returns whether it changed anything. The stored result, if
/// written.
fn update(
    store: &Store,
    res: &str,
    ns: &str,
    name: &str,
    uid: &str,
    mut change: impl FnMut(&mut Value) -> bool,
) -> Option<Arc<Stored>> {
    let key: Arc<str> = Arc::from(res);
    for _ in 0..RETRIES {
        let current = store.get(res, ns, name)?;
        if current.uid != uid {
            return None;
        }
        let mut value = current.value();
        if !change(&mut value) {
            return None;
        }
        match store.replace(&key, Some(current.rv), value) {
            Ok(stored) => return Some(stored),
            Err(CommitError::Conflict) => continue,
            Err(e) => {
                tracing::warn!(%name, error = ?e, "resource claim controller write failed");
                return None;
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::dra::pod_groups::PODGROUPS;

    /// A store holding the ResourceClaimTemplate `ns/one`.
    fn with_template_one() -> Store {
        let store = Store::new(100, 100);
        store
            .create(
                &Arc::from(TEMPLATES),
                json!({"metadata": {"name": "one", "namespace": "ns"},
                       "spec": {"spec": {"devices": {"requests": []}}}}),
            )
            .unwrap();
        store
    }

    #[test]
    fn done_pods() {
        assert!(pod_done(&json!({"status": {"phase": "Succeeded"}})));
        assert!(pod_done(&json!({"metadata": {"deletionTimestamp": "t"}})));
        assert!(!pod_done(
            &json!({"metadata": {"deletionTimestamp": "t"}, "spec": {"nodeName": "n"}})
        ));
        assert!(!pod_done(&json!({"status": {"phase": "Running"}})));
    }

    #[test]
    fn deallocation_drops_allocation_and_protection() {
        let mut c = json!({"metadata": {"finalizers": [DELETE_PROTECTION_FINALIZER, "x"]},
            "status": {"allocation": {"devices": {}}}});
        assert!(deallocate(&mut c));
        assert!(c["status"].get("allocation").is_none());
        assert_eq!(c["metadata"]["finalizers"], json!(["x"]));
        let mut reserved = json!({"status": {"allocation": {}, "reservedFor": [{"uid": "u"}]}});
        assert!(!deallocate(&mut reserved));
        // Protected, then the allocation never recorded: kept while live,
        // released once deleted.
        let mut live = json!({"metadata": {"finalizers": [DELETE_PROTECTION_FINALIZER]}});
        assert!(!deallocate(&mut live));
        let mut deleted = json!({"metadata": {"finalizers": [DELETE_PROTECTION_FINALIZER],
            "deletionTimestamp": "t"}});
        assert!(deallocate(&mut deleted));
        assert_eq!(deleted["metadata"]["finalizers"], json!([]));
        assert!(!deallocate(&mut deleted));
    }

    #[test]
    fn generated_names_keep_both_parts() {
        assert_eq!(claim_name_base("train", "gpus"), "train-gpus");
        // 60 + 40 + 2 = 102: each keeps 57/102 of its length.
        let long = claim_name_base(&"p".repeat(60), &"c".repeat(40));
        assert_eq!(long, format!("{}-{}", "p".repeat(33), "c".repeat(22)));
        assert!(long.len() + 6 <= 63);
        // The pod's part is cut right after its dot: the dot goes too.
        let dotted = claim_name_base(
            &format!("{}.{}", "a".repeat(33), "b".repeat(30)),
            &"c".repeat(41),
        );
        assert_eq!(dotted, format!("{}-{}", "a".repeat(33), "c".repeat(21)));
    }

    /// A claim made for the pod before, whose recording in the pod's status
    /// was lost, is adopted rather than made again; a claim of another pod
    /// whose name shares the prefix is not.
    #[test]
    fn a_claim_made_before_is_adopted() {
        let store = with_template_one();
        let create = |res: &str, v: Value| store.create(&Arc::from(res), v).unwrap();
        let claim = |name: &str, owner: &str| {
            json!({"metadata": {"name": name, "namespace": "ns",
                "annotations": {POD_CLAIM_NAME_ANNOTATION: "gpu"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p",
                                     "uid": owner, "controller": true}]}})
        };
        create(CLAIMS, claim("p-gpu-aaaaa", "someone-else"));
        create(CLAIMS, claim("p-gpu-bbbbb", "u1"));
        let pod = create(
            PODS,
            json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
                   "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one"}]}}),
        );
        create_template_claims(&store, &pod, &pod.value());
        let pod = store.get(PODS, "ns", "p").unwrap().value();
        assert_eq!(
            pod["status"]["resourceClaimStatuses"],
            json!([{"name": "gpu", "resourceClaimName": "p-gpu-bbbbb"}])
        );
        assert_eq!(all(&store, CLAIMS, Some("ns")).len(), 2, "none made");
    }

    /// A pod that ends releases and deletes the claims made for it, found
    /// by name: one its status records, one whose recording was lost, and
    /// the scheduler's extended-resource claim; another pod's claim under a
    /// similar name is left alone.
    #[test]
    fn an_ended_pod_frees_the_claims_made_for_it() {
        let store = Store::new(100, 100);
        let create = |res: &str, v: Value| store.create(&Arc::from(res), v).unwrap();
        let claim = |name: &str, owner: &str| {
            json!({"metadata": {"name": name, "namespace": "ns",
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p",
                                     "uid": owner, "controller": true}]},
                   "status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": owner}]}})
        };
        for (name, owner) in [
            ("p-gpu-aaaaa", "u1"),
            ("p-nic-bbbbb", "u1"),
            ("p-extended-resources-ccccc", "u1"),
            ("p-gpu-ddddd", "someone-else"),
        ] {
            create(CLAIMS, claim(name, owner));
        }
        let pod = create(
            PODS,
            json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
                   "spec": {"resourceClaims": [
                       {"name": "gpu", "resourceClaimTemplateName": "one"},
                       {"name": "nic", "resourceClaimTemplateName": "two"}]},
                   "status": {"phase": "Succeeded",
                       "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-aaaaa"}]}}),
        );
        on_pod(&store, &pod, false);
        let left: Vec<String> = all(&store, CLAIMS, Some("ns"))
            .iter()
            .map(|c| c.name.clone())
            .collect();
        assert_eq!(left, ["p-gpu-ddddd"]);
    }

    /// A PodGroup's template entry gets one claim, controlled by the group
    /// and recorded in its status and in its members'; a member makes a
    /// claim of its own only for its other entries, and waits for a group
    /// not created yet. A `podgroups` reservation stays while the group
    /// lives; the group gone, the claim is released, deallocated and
    /// deleted.
    #[test]
    fn a_pod_group_gets_one_claim_its_members_share() {
        let store = with_template_one();
        let create = |res: &str, v: Value| store.create(&Arc::from(res), v).unwrap();
        let member = create(
            PODS,
            json!({"metadata": {"name": "a", "namespace": "ns", "uid": "u1"},
                   "spec": {"schedulingGroup": {"podGroupName": "pg"}, "resourceClaims": [
                       {"name": "rack", "resourceClaimTemplateName": "one"},
                       {"name": "gpu", "resourceClaimTemplateName": "one"}]}}),
        );
        on_pod(&store, &member, false);
        assert!(
            all(&store, CLAIMS, Some("ns")).is_empty(),
            "waits for its group"
        );
        let group = create(
            PODGROUPS,
            json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                   "metadata": {"name": "pg", "namespace": "ns", "uid": "g1"},
                   "spec": {"schedulingPolicy": {"gang": {"minCount": 1}},
                            "resourceClaims": [{"name": "rack", "resourceClaimTemplateName": "one"}]}}),
        );
        on_group(&store, PODGROUPS, &group, false);
        // The member, waiting for its group, is handled again.
        assert_eq!(
            on_pod(&store, &store.get(PODS, "ns", "a").unwrap(), false),
            None
        );
        let claims = all(&store, CLAIMS, Some("ns"));
        assert_eq!(claims.len(), 2, "{claims:?}");
        let shared = claims
            .iter()
            .find(|c| c.name.starts_with("pg-rack-"))
            .unwrap();
        let own = claims
            .iter()
            .find(|c| c.name.starts_with("a-gpu-"))
            .unwrap();
        let v = shared.value();
        assert_eq!(pod_groups::owner_group_uid(&v), Some("g1"));
        assert_eq!(annotation(&v, GROUP_CLAIM_NAME_ANNOTATION), Some("rack"));
        let group = store.get(PODGROUPS, "ns", "pg").unwrap().value();
        assert_eq!(
            group["status"]["resourceClaimStatuses"],
            json!([{"name": "rack", "resourceClaimName": shared.name}])
        );
        let pod = store.get(PODS, "ns", "a").unwrap().value();
        let mut recorded = pod["status"]["resourceClaimStatuses"]
            .as_array()
            .unwrap()
            .clone();
        recorded.sort_by_key(|e| e["name"].as_str().unwrap_or_default().to_string());
        assert_eq!(
            recorded,
            [
                json!({"name": "gpu", "resourceClaimName": own.name}),
                json!({"name": "rack", "resourceClaimName": shared.name}),
            ]
        );
        // Handled again: nothing more is made.
        on_group(
            &store,
            PODGROUPS,
            &store.get(PODGROUPS, "ns", "pg").unwrap(),
            false,
        );
        assert_eq!(all(&store, CLAIMS, Some("ns")).len(), 2);

        // Allocated and reserved for the group: kept while it lives.
        let mut reserved = shared.value();
        reserved["status"] = json!({"allocation": {"devices": {}}, "reservedFor": [
            {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "pg", "uid": "g1"}]});
        store
            .replace(&Arc::from(CLAIMS), Some(shared.rv), reserved)
            .unwrap();
        sync_claim(&store, &store.get(CLAIMS, "ns", &shared.name).unwrap());
        let kept = store.get(CLAIMS, "ns", &shared.name).unwrap().value();
        assert!(kept.pointer("/status/allocation").is_some());

        // The group goes: released, deallocated, deleted.
        let gone = store.get(PODGROUPS, "ns", "pg").unwrap();
        store
            .remove(&Arc::from(PODGROUPS), "ns", "pg", Some(gone.rv))
            .unwrap();
        on_group(&store, PODGROUPS, &gone, true);
        let left: Vec<String> = all(&store, CLAIMS, Some("ns"))
            .iter()
            .map(|c| c.name.clone())
            .collect();
        assert_eq!(left, std::slice::from_ref(&own.name));
    }

    #[test]
    fn owners() {
        let c = json!({"metadata": {"ownerReferences": [
            {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u", "controller": true}]}});
        assert_eq!(owner_pod_uid(&c), Some("u"));
        assert_eq!(owner_pod_uid(&json!({})), None);
    }
}
