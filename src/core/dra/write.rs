//! What a pod's binding writes to its claims first (DynamicResources'
//! PreBind): the allocation planned at Reserve, when the claim has none
//! recorded yet, and the pod in `status.reservedFor`. The daemon performs
//! it; this module says what to write.

use std::sync::Arc;

use serde_json::{Value, json};

use super::model::{Allocation, Reach};
use crate::model::{NodeSelector, NodeSelectorTerm, Operator, PodKey, Requirement};

/// One claim a pod's binding reserves for the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimReservation {
    /// The claim's namespace (the pod's) and name.
    pub claim: PodKey,
    /// The UID the scheduler saw: a claim replaced meanwhile is not written.
    pub claim_uid: Arc<str>,
    /// The allocation to record, when the claim has none recorded yet.
    pub allocation: Option<Allocation>,
    /// Its classes' configuration (`FromClass`), for the requests made
    /// from each: recorded with the allocation.
    pub class_config: Vec<ClassConfig>,
    /// For the pod's extended-resource claim: the claim to create first
    /// (`claim` is then its placeholder name, `claim_uid` empty), and the
    /// pod's `status.extendedResourceClaimStatus` to record.
    pub extended: Option<Arc<super::extended::ExtendedClaim>>,
    /// The PodGroup to reserve the claim for instead of the pod: a claim
    /// the group shares with its members (KEP-5729).
    pub group: Option<super::model::Consumer>,
}

/// One `spec.config[].opaque` entry of a class, and the requests (or
/// subrequests) of the allocation it applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassConfig {
    pub requests: Vec<String>,
    pub opaque: Value,
}

/// Nodes a claim's allocation may be used from, at most this many
/// selector terms (an intersection of several selectors multiplies them;
/// past this the allocation is pinned to the node the pod was placed on).
const MAX_TERMS: usize = 16;

/// `status.allocation` for an allocation made for a pod on `node`: its
/// results, and a node selector every device's reach holds on (none when
/// every device reaches every node).
pub fn allocation_json(a: &Allocation, node: &str) -> Value {
    let results: Vec<Value> = a
        .results
        .iter()
        .map(|r| {
            let mut v = json!({
                "request": &*r.request,
                "driver": &*r.device.driver,
                "pool": &*r.device.pool,
                "device": &*r.device.device,
            });
            if r.admin_access {
                v["adminAccess"] = Value::Bool(true);
            }
            if let Some(share) = &r.share {
                v["shareID"] = Value::from(&*share.id);
                let consumed: serde_json::Map<String, Value> = share
                    .consumed
                    .iter()
                    .map(|(name, q)| (name.to_string(), Value::from(q.to_string())))
                    .collect();
                v["consumedCapacity"] = Value::Object(consumed);
            }
            v
        })
        .collect();
    let mut out = json!({ "devices": { "results": results } });
    if let Some(selector) = node_selector(&a.reach, node) {
        out["nodeSelector"] = selector;
    }
    out
}

/// The node selector of devices with these reaches, or `None` for "every
/// node".
fn node_selector(reach: &[Reach], node: &str) -> Option<Value> {
    let by_name = |n: &str| {
        json!({"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [n]}
        ]}]})
    };
    if let Some(Reach::Node(n)) = reach.iter().find(|r| matches!(r, Reach::Node(_))) {
        return Some(by_name(n));
    }
    let mut terms: Option<Vec<NodeSelectorTerm>> = None;
    for r in reach {
        let Reach::Selector(s) = r else { continue };
        terms = Some(match terms {
            None => s.terms.clone(),
            Some(have) => {
                let mut both = Vec::new();
                for a in &have {
                    for b in &s.terms {
                        let mut t = a.clone();
                        t.match_expressions
                            .extend(b.match_expressions.iter().cloned());
                        t.match_fields.extend(b.match_fields.iter().cloned());
                        both.push(t);
                    }
                }
                if both.len() > MAX_TERMS {
                    return Some(by_name(node));
                }
                both
            }
        });
    }
    terms.map(|terms| selector_json(&NodeSelector { terms }))
}

fn selector_json(s: &NodeSelector) -> Value {
    let reqs = |rs: &[Requirement]| -> Vec<Value> {
        rs.iter()
            .map(|r| {
                let op = match r.op {
                    Operator::In => "In",
                    Operator::NotIn => "NotIn",
                    Operator::Exists => "Exists",
                    Operator::DoesNotExist => "DoesNotExist",
                    Operator::Gt => "Gt",
                    Operator::Lt => "Lt",
                };
                let mut v = json!({"key": r.key, "operator": op});
                if !r.values.is_empty() {
                    v["values"] = json!(r.values);
                }
                v
            })
            .collect()
    };
    let terms: Vec<Value> = s
        .terms
        .iter()
        .map(|t| {
            let mut v = json!({});
            if !t.match_expressions.is_empty() {
                v["matchExpressions"] = Value::Array(reqs(&t.match_expressions));
            }
            if !t.match_fields.is_empty() {
                v["matchFields"] = Value::Array(reqs(&t.match_fields));
            }
            v
        })
        .collect();
    json!({ "nodeSelectorTerms": terms })
}

/// Whether a recorded allocation (as the API returns it) gives the same
/// devices to the same requests as `a`.
pub fn same_results(recorded: &Value, a: &Allocation) -> bool {
    let Some(results) = recorded["devices"]["results"].as_array() else {
        return a.results.is_empty();
    };
    results.len() == a.results.len()
        && results.iter().zip(&a.results).all(|(r, ours)| {
            r["request"] == *ours.request
                && r["driver"] == *ours.device.driver
                && r["pool"] == *ours.device.pool
                && r["device"] == *ours.device.device
                && r["shareID"].as_str() == ours.share.as_ref().map(|s| &*s.id)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dra::model::{Allocated, DeviceId};

    fn allocation(reach: Vec<Reach>) -> Allocation {
        Allocation {
            results: vec![Allocated {
                request: Arc::from("gpu"),
                device: DeviceId {
                    driver: Arc::from("gpu.example.com"),
                    pool: Arc::from("n1"),
                    device: Arc::from("gpu-0"),
                },
                admin_access: false,
                share: None,
            }],
            reach,
        }
    }

    fn selector(key: &str, value: &str) -> NodeSelector {
        NodeSelector {
            terms: vec![NodeSelectorTerm {
                match_expressions: vec![Requirement {
                    key: key.into(),
                    op: Operator::In,
                    values: vec![value.into()],
                }],
                match_fields: vec![],
            }],
        }
    }

    #[test]
    fn a_local_device_pins_the_node_and_a_shared_one_keeps_its_selector() {
        let local = allocation_json(&allocation(vec![Reach::Node(Arc::from("n1"))]), "n1");
        assert_eq!(
            local["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"][0],
            "n1"
        );
        assert_eq!(local["devices"]["results"][0]["device"], "gpu-0");
        assert!(same_results(&local, &allocation(vec![])));
        let everywhere = allocation_json(&allocation(vec![Reach::All]), "n1");
        assert!(everywhere.get("nodeSelector").is_none());
        let rack = allocation_json(
            &allocation(vec![
                Reach::Selector(selector("rack", "r1")),
                Reach::Selector(selector("zone", "z")),
            ]),
            "n1",
        );
        let term = &rack["nodeSelector"]["nodeSelectorTerms"][0]["matchExpressions"];
        assert_eq!(term.as_array().map(Vec::len), Some(2), "{rack}");
    }
}
