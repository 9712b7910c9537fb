//! Small helpers on schemaless objects: system-set metadata (uid,
//! timestamps, generated names) and condition lists.

use serde_json::{Map, Value, json};

/// A random RFC 4122 version-4 UUID.
pub fn new_uid() -> String {
    let mut b: [u8; 16] = std::array::from_fn(|_| fastrand::u8(..));
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Now, in the RFC 3339 second-precision form Kubernetes uses.
pub fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Now with microseconds, for `MicroTime` fields (events.k8s.io, leases).
pub fn now_micro() -> String {
    chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

/// The longest `generateName` a real server keeps: the rest is cut, so
/// that with its 5-character suffix the name fits a DNS label (63).
pub const MAX_GENERATED_BASE: usize = 58;

/// `generateName` as a real server uses it: cut to `MAX_GENERATED_BASE`
/// bytes (at a character boundary; names are ASCII once validated).
pub fn generated_base(prefix: &str) -> &str {
    let mut end = prefix.len().min(MAX_GENERATED_BASE);
    while !prefix.is_char_boundary(end) {
        end -= 1;
    }
    prefix.get(..end).unwrap_or_default()
}

/// The 5-character suffix a real server appends to `generateName`.
pub fn name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| ALPHABET[fastrand::usize(..ALPHABET.len())] as char)
        .collect()
}

/// `v` as a mutable map, replacing it with `{}` if it is not an object.
pub fn as_map(v: &mut Value) -> &mut Map<String, Value> {
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    match v {
        Value::Object(m) => m,
        _ => unreachable!("replaced by an object above"),
    }
}

/// `obj.metadata` as a mutable map, created if absent.
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    child_mut(as_map(obj), "metadata")
}

/// `obj[key]` as a mutable map, created if absent or not an object.
pub fn child_mut<'a>(obj: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    as_map(obj.entry(key).or_insert_with(|| json!({})))
}

pub fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

/// Inserts or replaces the condition with the same `type` in `status.conditions`.
pub fn set_condition(status: &mut Map<String, Value>, condition: Value) {
    let kind = condition.get("type").cloned();
    let list = status.entry("conditions").or_insert_with(|| json!([]));
    if !list.is_array() {
        *list = json!([]);
    }
    if let Some(list) = list.as_array_mut() {
        match list.iter_mut().find(|c| c.get("type") == kind.as_ref()) {
            Some(existing) => *existing = condition,
            None => list.push(condition),
        }
    }
}

/// A condition with status `"True"`/`"False"` stamped now.
pub fn condition(kind: &str, ok: bool, reason: Option<&str>) -> Value {
    let mut c = json!({
        "type": kind,
        "status": if ok { "True" } else { "False" },
        "lastTransitionTime": now(),
        "lastProbeTime": null,
    });
    if let Some(r) = reason {
        c["reason"] = json!(r);
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As a real server: a long `generateName` is cut so that the name,
    /// suffix included, fits 63 characters.
    #[test]
    fn a_long_generate_name_is_cut() {
        assert_eq!(generated_base("p-"), "p-");
        let long = format!("{}-extended-resources-", "a".repeat(60));
        assert_eq!(generated_base(&long), "a".repeat(58));
        assert_eq!(
            format!("{}{}", generated_base(&long), name_suffix()).len(),
            63
        );
    }

    #[test]
    fn uid_shape() {
        let u = new_uid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
    }

    #[test]
    fn conditions_replace_by_type() {
        let mut status = Map::new();
        set_condition(&mut status, condition("Ready", false, None));
        set_condition(&mut status, condition("Ready", true, None));
        set_condition(&mut status, condition("PodScheduled", true, None));
        let list = status["conditions"].as_array().unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0]["status"], "True");
    }
}
