//! The kubelet's side of a pod's resource claims: which ResourceClaim each
//! `spec.resourceClaims[]` entry resolves to (`resourceClaimName`, or the
//! claim the controller recorded in `status.resourceClaimStatuses` for a
//! template), whether all are allocated and reserved for the pod (a pod
//! starts only then), and the devices each container was given, reported
//! in `containerStatuses[].allocatedResourcesStatus` as the kubelet does
//! (`claim:<claim>/<request>`, devices as `<driver>/<pool>/<device>`).

use serde_json::{Value, json};

use super::controller::{CLAIMS, owner_pod_uid};
use crate::apiserver::store::Store;

/// A pod's claims, resolved: (name in the pod, the ResourceClaim).
pub type Resolved = Vec<(String, Value)>;

/// The pod's claims when every one is allocated and reserved for it;
/// Err with what it waits for otherwise. A pod without claims is ready.
pub fn ready(store: &Store, pod: &Value) -> Result<Resolved, String> {
    let ns = pod
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let uid = pod
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut out = Vec::new();
    for entry in pod
        .pointer("/spec/resourceClaims")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = entry["name"].as_str().unwrap_or_default();
        let from_template = entry.get("resourceClaimTemplateName").is_some();
        let claim_name = match entry["resourceClaimName"].as_str() {
            Some(n) => n.to_string(),
            None => generated_name(pod, name)
                .ok_or_else(|| format!("claim {name:?} not created from its template yet"))?,
        };
        let claim = store
            .get(CLAIMS, ns, &claim_name)
            .ok_or_else(|| format!("resource claim {claim_name:?} not found"))?
            .value();
        if from_template && owner_pod_uid(&claim) != Some(uid) {
            return Err(format!(
                "resource claim {claim_name:?} was not created for this pod"
            ));
        }
        if claim
            .pointer("/status/allocation")
            .is_none_or(Value::is_null)
        {
            return Err(format!("resource claim {claim_name:?} is not allocated"));
        }
        let reserved = claim
            .pointer("/status/reservedFor")
            .and_then(Value::as_array)
            .is_some_and(|r| r.iter().any(|c| c["uid"] == uid));
        if !reserved {
            return Err(format!(
                "resource claim {claim_name:?} is not reserved for the pod"
            ));
        }
        out.push((name.to_string(), claim));
    }
    Ok(out)
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
