//! Server-side printing of the `resource.k8s.io` kinds, with the columns
//! kube-apiserver prints: a ResourceClaim's STATE (`pending`, `allocated`,
//! `allocated,reserved`; `deleted` first, and no `pending`, while it is
//! being deleted), a
//! ResourceSlice's NODE, DRIVER and POOL.

use serde_json::{Value, json};

/// Column definitions between NAME and AGE, by plural; None for kinds
/// printed as NAME and AGE only.
pub fn middle_columns(plural: &str) -> Option<Vec<Value>> {
    let col = |name: &str, description: &str| json!({"name": name, "type": "string", "format": "", "description": description, "priority": 0});
    match plural {
        "resourceclaims" => Some(vec![col("State", "A summary of the claim's state")]),
        "resourceslices" => Some(vec![
            col("Node", "The node the slice's devices are local to"),
            col("Driver", "The driver that publishes the slice"),
            col("Pool", "The pool the slice belongs to"),
        ]),
        _ => None,
    }
}

/// The cells between NAME and AGE for one object.
pub fn middle_cells(plural: &str, obj: &Value) -> Vec<Value> {
    let s = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or_default();
    match plural {
        "resourceclaims" => vec![json!(claim_state(obj))],
        // Empty for a slice not local to one node, as the server prints it.
        "resourceslices" => vec![
            json!(s("/spec/nodeName")),
            json!(s("/spec/driver")),
            json!(s("/spec/pool/name")),
        ],
        _ => Vec::new(),
    }
}

/// A claim's STATE column.
pub fn claim_state(obj: &Value) -> String {
    let deleting = obj.pointer("/metadata/deletionTimestamp").is_some();
    let allocated = obj
        .pointer("/status/allocation")
        .is_some_and(|a| !a.is_null());
    let reserved = obj
        .pointer("/status/reservedFor")
        .and_then(Value::as_array)
        .is_some_and(|r| !r.is_empty());
    let mut states = Vec::new();
    if deleting {
        states.push("deleted");
    }
    if !allocated {
        if !deleting {
            states.push("pending");
        }
    } else {
        states.push("allocated");
        if reserved {
            states.push("reserved");
        }
    }
    states.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_states() {
        assert_eq!(claim_state(&json!({})), "pending");
        let alloc = json!({"status": {"allocation": {"devices": {"results": []}}}});
        assert_eq!(claim_state(&alloc), "allocated");
        let reserved = json!({"status": {"allocation": {}, "reservedFor": [{"uid": "u"}]}});
        assert_eq!(claim_state(&reserved), "allocated,reserved");
        let gone = json!({"metadata": {"deletionTimestamp": "t"}, "status": {"allocation": {}}});
        assert_eq!(claim_state(&gone), "deleted,allocated");
        let deleted = json!({"metadata": {"deletionTimestamp": "t"}});
        assert_eq!(claim_state(&deleted), "deleted");
    }

    #[test]
    fn slice_cells() {
        let s = json!({"spec": {"driver": "d", "pool": {"name": "p"}, "allNodes": true}});
        assert_eq!(
            middle_cells("resourceslices", &s),
            [json!(""), json!("d"), json!("p")]
        );
    }
}
