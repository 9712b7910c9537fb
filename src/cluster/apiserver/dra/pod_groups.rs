//! ResourceClaims for PodGroups (KEP-5729, `DRAWorkloadResourceClaims`,
//! beta in 1.37), as kube-controller-manager's resourceclaim controller and
//! the kubelet treat them:
//! - a PodGroup's `spec.resourceClaims[]` entry naming a
//!   `resourceClaimTemplateName` gets one ResourceClaim for the group,
//!   named `<podgroup>-<claim>-<random>`, controlled by the PodGroup and
//!   annotated [`GROUP_CLAIM_NAME_ANNOTATION`], recorded in the group's
//!   `status.resourceClaimStatuses`;
//! - a pod whose `spec.resourceClaims[]` entry equals one of its group's
//!   (`spec.schedulingGroup.podGroupName`) in every field uses the group's
//!   claim: none is made for the pod, and the group's claim name is
//!   recorded in the pod's status;
//! - such a claim is reserved for the PodGroup (a `podgroups` consumer in
//!   `status.reservedFor`), which stays while the group lives: the kubelet
//!   starts a member when the claim names its group;
//! - the group gone, its reservations go, and a claim generated for it is
//!   deleted once reserved by nobody.
//!
//! Pure functions over stored objects; `controller` drives them.

use serde_json::Value;

use crate::apiserver::objects::str_at;
use crate::apiserver::store::{Store, Stored};

/// Where PodGroups are stored by default (every served version shares the
/// table, named by the storage version: 1.37 stores them as v1beta1).
pub const PODGROUPS: &str = "scheduling.k8s.io/v1beta1/podgroups";
/// Every table PodGroups may be kept in: v1beta1, or v1alpha3 or v1alpha2
/// when the simulator serves none later.
const KEYS: [&str; 3] = [
    PODGROUPS,
    "scheduling.k8s.io/v1alpha3/podgroups",
    "scheduling.k8s.io/v1alpha2/podgroups",
];

/// Is `res` (a store key) a table of `scheduling.k8s.io` PodGroups?
pub fn is_podgroups(res: &str) -> bool {
    KEYS.contains(&res)
}

/// The PodGroup `ns/name`, whatever version it is stored in, with the
/// table it is kept in.
pub fn find(store: &Store, ns: &str, name: &str) -> Option<(&'static str, std::sync::Arc<Stored>)> {
    KEYS.iter()
        .find_map(|key| Some((*key, store.get(key, ns, name)?)))
}

/// Every PodGroup of namespace `ns` (every namespace with `None`), with
/// the table it is kept in.
pub fn all(store: &Store, ns: Option<&str>) -> Vec<(&'static str, std::sync::Arc<Stored>)> {
    KEYS.iter()
        .flat_map(|key| {
            let groups = store.list(key, ns, None, None, |_| true).0;
            groups.into_iter().map(move |g| (*key, g))
        })
        .collect()
}
/// Names the group's claim a generated ResourceClaim was made for.
pub const GROUP_CLAIM_NAME_ANNOTATION: &str = "resource.kubernetes.io/podgroup-claim-name";

/// The PodGroup a pod belongs to, when it names one that exists.
pub fn group_of(store: &Store, pod: &Value) -> Option<std::sync::Arc<Stored>> {
    let name = str_at(pod, "/spec/schedulingGroup/podGroupName").filter(|n| !n.is_empty())?;
    let ns = str_at(pod, "/metadata/namespace").unwrap_or("default");
    find(store, ns, name).map(|(_, g)| g)
}

/// The name of the PodGroup a pod belongs to, if it names one.
pub fn group_name(pod: &Value) -> Option<&str> {
    str_at(pod, "/spec/schedulingGroup/podGroupName").filter(|n| !n.is_empty())
}

/// `spec.resourceClaims[]` of a pod or PodGroup.
pub fn entries(obj: &Value) -> &[Value] {
    obj.pointer("/spec/resourceClaims")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The group's `spec.resourceClaims` entry a pod's entry stands for:
/// equal in every field.
pub fn matching_entry<'a>(group: &'a Value, entry: &Value) -> Option<&'a Value> {
    let field = |e: &Value, k: &str| e.get(k).and_then(Value::as_str).map(str::to_string);
    entries(group).iter().find(|g| {
        ["name", "resourceClaimName", "resourceClaimTemplateName"]
            .iter()
            .all(|k| field(g, k) == field(entry, k))
    })
}

/// The ResourceClaim a group's entry resolves to: the one it names, or the
/// one recorded for its template in the group's status.
pub fn claim_of_entry(group: &Value, entry: &Value) -> Option<String> {
    if let Some(n) = entry.get("resourceClaimName").and_then(Value::as_str) {
        return Some(n.to_string());
    }
    let name = entry.get("name")?.as_str()?;
    recorded(group, name)
}

/// The claim the group's status records for its entry `name`.
pub fn recorded(group: &Value, name: &str) -> Option<String> {
    group
        .pointer("/status/resourceClaimStatuses")?
        .as_array()?
        .iter()
        .find(|s| s["name"] == name)?
        .get("resourceClaimName")?
        .as_str()
        .map(str::to_string)
}

/// Whether `claim` is reserved for the PodGroup `group` (by name, and by
/// uid when `uid` is given).
pub fn reserved_for_group(claim: &Value, group: &str, uid: Option<&str>) -> bool {
    claim
        .pointer("/status/reservedFor")
        .and_then(Value::as_array)
        .is_some_and(|r| {
            r.iter().any(|c| {
                c["resource"] == "podgroups"
                    && c["apiGroup"] == "scheduling.k8s.io"
                    && c["name"] == group
                    && uid.is_none_or(|u| c["uid"] == u)
            })
        })
}

/// Is the PodGroup `(ns, name, uid)` still a consumer: present with that
/// uid and not being deleted?
pub fn group_alive(store: &Store, ns: &str, name: &str, uid: &str) -> bool {
    store
        .get(PODGROUPS, ns, name)
        .is_some_and(|g| g.uid == uid && g.value().pointer("/metadata/deletionTimestamp").is_none())
}

/// The uid of the PodGroup that controls this claim, if one does.
pub fn owner_group_uid(claim: &Value) -> Option<&str> {
    owner_group(claim).and_then(|r| r.get("uid")?.as_str())
}

/// The controlling PodGroup owner reference of a claim, if any.
pub fn owner_group(claim: &Value) -> Option<&Value> {
    claim
        .pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r["kind"] == "PodGroup" && r["controller"] == true)
}
