//! The kubelet's side of a pod's resource claims: which ResourceClaim each
//! `spec.resourceClaims[]` entry resolves to (`resourceClaimName`, or the
//! claim the controller recorded in `status.resourceClaimStatuses` for a
//! template), whether all are allocated and reserved for the pod (a pod
//! starts only then), and the devices each container was given, reported
//! in `containerStatuses[].allocatedResourcesStatus` as the kubelet does
//! (`claim:<claim>/<request>`, devices as `<driver>/<pool>/<device>`).

use std::collections::HashMap;

use serde_json::{Value, json};

use super::controller::{CLAIMS, owner_pod_uid};
use crate::apiserver::store::Store;

/// A pod's claims, resolved: (name in the pod, the ResourceClaim).
pub type Resolved = Vec<(String, Value)>;

/// What a pod that cannot start waits for: a change of this claim, or (its
/// template claim not made yet) of a claim owned by the pod.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Blocker {
    /// (namespace, claim name)
    Claim(String, String),
    /// The pod's uid.
    Owner(String),
}

/// Why a pod cannot start yet, and what to wait for.
#[derive(Debug)]
pub struct NotReady {
    pub blocker: Blocker,
    pub why: String,
}

/// A change of a ResourceClaim, as the kubelet hears of it.
#[derive(Debug, Clone)]
pub struct ClaimChange {
    pub namespace: String,
    pub name: String,
    /// The uid of the pod controlling the claim, if any.
    pub owner: Option<String>,
}

/// The pod's claims when every one is allocated and reserved for it;
/// what it waits for otherwise. A pod without claims is ready.
pub fn ready(store: &Store, pod: &Value) -> Result<Resolved, NotReady> {
    let ns = pod
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let uid = pod
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut out = Vec::new();
    // Entries equal to one of the pod's PodGroup's are the group's claims
    // (KEP-5729), made for and reserved for the group.
    let group = super::pod_groups::group_of(store, pod).map(|g| (g.name.clone(), g.value()));
    for entry in pod
        .pointer("/spec/resourceClaims")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = entry["name"].as_str().unwrap_or_default();
        let from_template = entry.get("resourceClaimTemplateName").is_some();
        let shared = group
            .as_ref()
            .filter(|(_, g)| super::pod_groups::matching_entry(g, entry).is_some());
        let claim_name = match entry["resourceClaimName"].as_str() {
            Some(n) => n.to_string(),
            None => generated_name(pod, name).ok_or_else(|| NotReady {
                blocker: Blocker::Owner(uid.to_string()),
                why: format!("claim {name:?} not created from its template yet"),
            })?,
        };
        let user = match shared {
            Some((group, _)) => User::Group(group),
            None => User::Pod(uid),
        };
        let claim = usable(
            store,
            ns,
            &claim_name,
            user,
            from_template,
            "resource claim",
        )?;
        out.push((name.to_string(), claim));
    }
    if let Some(claim) = extended_claim(store, pod, ns, uid)? {
        out.push((EXTENDED.to_string(), claim));
    }
    Ok(out)
}

/// The name the pod's extended-resource claim is listed under in
/// `Resolved` (not a valid pod claim name, so it meets none).
pub const EXTENDED: &str = "<extended-resources>";

/// The claim the scheduler made for the pod's extended resources
/// (`status.extendedResourceClaimStatus`), when the pod has one: it must be
/// allocated and reserved for the pod, as its own claims must.
fn extended_claim(
    store: &Store,
    pod: &Value,
    ns: &str,
    uid: &str,
) -> Result<Option<Value>, NotReady> {
    let Some(claim_name) = pod
        .pointer("/status/extendedResourceClaimStatus/resourceClaimName")
        .and_then(Value::as_str)
    else {
        return Ok(None);
    };
    usable(
        store,
        ns,
        claim_name,
        User::Pod(uid),
        true,
        "extended resource claim",
    )
    .map(Some)
}

/// Whom a claim must be made and reserved for.
#[derive(Debug, Clone, Copy)]
enum User<'a> {
    /// The pod (its uid).
    Pod(&'a str),
    /// The pod's PodGroup (its name): a claim the group shares.
    Group(&'a str),
}

/// The claim, when it exists, was made for its user (`owned`: generated
/// from a template, controlled by the pod or its group), is allocated and
/// is reserved for the user; what it waits for otherwise. `what` names the
/// kind of claim in the messages.
fn usable(
    store: &Store,
    ns: &str,
    claim_name: &str,
    user: User<'_>,
    owned: bool,
    what: &str,
) -> Result<Value, NotReady> {
    let blocked = |why: String| NotReady {
        blocker: Blocker::Claim(ns.to_string(), claim_name.to_string()),
        why,
    };
    let claim = store
        .get(CLAIMS, ns, claim_name)
        .ok_or_else(|| blocked(format!("{what} {claim_name:?} not found")))?
        .value();
    let made_for_user = match user {
        User::Pod(uid) => owner_pod_uid(&claim) == Some(uid),
        User::Group(group) => {
            super::pod_groups::owner_group(&claim).is_some_and(|o| o["name"] == group)
        }
    };
    if owned && !made_for_user {
        return Err(blocked(format!(
            "{what} {claim_name:?} was not created for this pod"
        )));
    }
    if claim
        .pointer("/status/allocation")
        .is_none_or(Value::is_null)
    {
        return Err(blocked(format!("{what} {claim_name:?} is not allocated")));
    }
    let reserved = match user {
        User::Pod(uid) => claim
            .pointer("/status/reservedFor")
            .and_then(Value::as_array)
            .is_some_and(|r| r.iter().any(|c| c["uid"] == uid)),
        User::Group(group) => super::pod_groups::reserved_for_group(&claim, group, None),
    };
    if !reserved {
        return Err(blocked(format!(
            "{what} {claim_name:?} is not reserved for the pod"
        )));
    }
    Ok(claim)
}

/// Pods waiting for their claims, indexed by what each waits for, so a
/// claim's change looks again at the pods it concerns only.
#[derive(Debug)]
pub struct Waiting<T> {
    by_blocker: HashMap<Blocker, HashMap<(String, String), T>>,
    /// (namespace, pod name) → what it waits for.
    blocker_of: HashMap<(String, String), Blocker>,
}

impl<T> Default for Waiting<T> {
    fn default() -> Self {
        Waiting {
            by_blocker: HashMap::new(),
            blocker_of: HashMap::new(),
        }
    }
}

impl<T> Waiting<T> {
    /// The pod `(namespace, name)` waits for `blocker` (replacing what it
    /// waited for before).
    pub fn add(&mut self, pod: (String, String), blocker: Blocker, item: T) {
        self.remove(&pod);
        self.by_blocker
            .entry(blocker.clone())
            .or_default()
            .insert(pod.clone(), item);
        self.blocker_of.insert(pod, blocker);
    }

    /// The pod no longer waits (deleted).
    pub fn remove(&mut self, pod: &(String, String)) {
        let Some(blocker) = self.blocker_of.remove(pod) else {
            return;
        };
        if let Some(pods) = self.by_blocker.get_mut(&blocker) {
            pods.remove(pod);
            if pods.is_empty() {
                self.by_blocker.remove(&blocker);
            }
        }
    }

    /// The pods a change of this claim concerns, no longer waiting.
    pub fn take(&mut self, change: &ClaimChange) -> Vec<T> {
        let mut keys = vec![Blocker::Claim(
            change.namespace.clone(),
            change.name.clone(),
        )];
        keys.extend(change.owner.clone().map(Blocker::Owner));
        let mut out = Vec::new();
        for key in keys {
            for (pod, item) in self.by_blocker.remove(&key).unwrap_or_default() {
                self.blocker_of.remove(&pod);
                out.push(item);
            }
        }
        out
    }

    /// Every waiting pod (after missed changes).
    pub fn take_all(&mut self) -> Vec<T> {
        self.blocker_of.clear();
        self.by_blocker
            .drain()
            .flat_map(|(_, pods)| pods.into_values())
            .collect()
    }
}

fn generated_name(pod: &Value, claim: &str) -> Option<String> {
    pod.pointer("/status/resourceClaimStatuses")?
        .as_array()?
        .iter()
        .find(|s| s["name"] == claim)?
        .get("resourceClaimName")?
        .as_str()
        .map(str::to_string)
}

/// `allocatedResourcesStatus` for a container with `resources.claims`
/// (None for one without): per claim and request, the allocated devices.
pub fn container_devices(container: &Value, claims: &Resolved) -> Option<Value> {
    let uses = container.pointer("/resources/claims")?.as_array()?;
    let mut out: Vec<Value> = Vec::new();
    for used in uses {
        let name = used["name"].as_str().unwrap_or_default();
        let only = used["request"].as_str().filter(|r| !r.is_empty());
        let Some((_, claim)) = claims.iter().find(|(n, _)| n == name) else {
            continue;
        };
        let results = claim
            .pointer("/status/allocation/devices/results")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        // Grouped by request, in allocation order.
        let mut requests: Vec<&str> = Vec::new();
        for r in results {
            let req = r["request"].as_str().unwrap_or_default();
            let top = req.split('/').next().unwrap_or_default();
            if only.is_none_or(|o| o == top) && !requests.contains(&req) {
                requests.push(req);
            }
        }
        for req in requests {
            let devices: Vec<Value> = results
                .iter()
                .filter(|r| r["request"] == req)
                .map(|r| {
                    let s = |k: &str| r[k].as_str().unwrap_or_default();
                    json!({"resourceID": format!("{}/{}/{}", s("driver"), s("pool"), s("device")),
                           "health": "Healthy"})
                })
                .collect();
            out.push(json!({"name": format!("claim:{name}/{req}"), "resources": devices}));
        }
    }
    (!out.is_empty()).then_some(Value::Array(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_pods_are_found_by_claim_or_owner() {
        let mut w: Waiting<&str> = Waiting::default();
        let key = |n: &str| ("ns".to_string(), n.to_string());
        w.add(key("a"), Blocker::Claim("ns".into(), "c1".into()), "a");
        w.add(key("b"), Blocker::Claim("ns".into(), "c1".into()), "b");
        w.add(key("c"), Blocker::Owner("uid-c".into()), "c");
        w.add(key("d"), Blocker::Claim("ns".into(), "c2".into()), "d");
        w.remove(&key("d"));
        let change = |name: &str, owner: Option<&str>| ClaimChange {
            namespace: "ns".into(),
            name: name.into(),
            owner: owner.map(str::to_string),
        };
        assert!(w.take(&change("c2", None)).is_empty());
        let mut got = w.take(&change("c1", Some("uid-c")));
        got.sort();
        assert_eq!(got, ["a", "b", "c"]);
        assert!(w.take_all().is_empty());
    }

    /// A member's entry equal to its PodGroup's resolves to the group's
    /// claim, made for the group and ready once reserved for it; a claim
    /// reserved for the pod alone does not do for it.
    #[test]
    fn a_member_starts_on_its_groups_claim_reserved_for_the_group() {
        use super::super::pod_groups::PODGROUPS;
        let store = Store::new(100, 100);
        let create =
            |res: &str, v: serde_json::Value| store.create(&std::sync::Arc::from(res), v).unwrap();
        create(
            PODGROUPS,
            json!({"metadata": {"name": "pg", "namespace": "ns", "uid": "g1"},
                   "spec": {"resourceClaims": [{"name": "rack", "resourceClaimTemplateName": "t"}]},
                   "status": {"resourceClaimStatuses": [{"name": "rack", "resourceClaimName": "pg-rack-x"}]}}),
        );
        let claim = |reserved: serde_json::Value| {
            json!({"metadata": {"name": "pg-rack-x", "namespace": "ns",
                   "ownerReferences": [{"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                                        "name": "pg", "uid": "g1", "controller": true}]},
                   "status": {"allocation": {"devices": {}}, "reservedFor": [reserved]}})
        };
        let stored = create(
            CLAIMS,
            claim(json!({"resource": "pods", "name": "a", "uid": "u1"})),
        );
        let pod = json!({"metadata": {"name": "a", "namespace": "ns", "uid": "u1"},
            "spec": {"schedulingGroup": {"podGroupName": "pg"},
                     "resourceClaims": [{"name": "rack", "resourceClaimTemplateName": "t"}]},
            "status": {"resourceClaimStatuses": [{"name": "rack", "resourceClaimName": "pg-rack-x"}]}});
        let why = ready(&store, &pod).unwrap_err();
        assert!(
            why.why.contains("is not reserved for the pod"),
            "{}",
            why.why
        );
        store
            .replace(
                &std::sync::Arc::from(CLAIMS),
                Some(stored.rv),
                claim(
                    json!({"apiGroup": "scheduling.k8s.io", "resource": "podgroups",
                             "name": "pg", "uid": "g1"}),
                ),
            )
            .unwrap();
        let claims = ready(&store, &pod).unwrap();
        assert_eq!(claims.len(), 1);
        assert_eq!(claims[0].0, "rack");
    }

    #[test]
    fn devices_per_request() {
        let claim = json!({"status": {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "d", "pool": "n0", "device": "gpu-0"},
            {"request": "gpu", "driver": "d", "pool": "n0", "device": "gpu-1"},
            {"request": "nic/fast", "driver": "n", "pool": "n0", "device": "nic-0"}]}}}});
        let claims = vec![("c".to_string(), claim)];
        let all =
            container_devices(&json!({"resources": {"claims": [{"name": "c"}]}}), &claims).unwrap();
        assert_eq!(all[0]["name"], "claim:c/gpu");
        assert_eq!(all[0]["resources"][1]["resourceID"], "d/n0/gpu-1");
        assert_eq!(all[1]["name"], "claim:c/nic/fast");
        let one = container_devices(
            &json!({"resources": {"claims": [{"name": "c", "request": "nic"}]}}),
            &claims,
        )
        .unwrap();
        assert_eq!(one.as_array().unwrap().len(), 1);
        assert!(container_devices(&json!({"name": "x"}), &claims).is_none());
    }
}
