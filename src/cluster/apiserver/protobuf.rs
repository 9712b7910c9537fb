//! Just enough of the Kubernetes protobuf encoding to accept the bodies
//! kubectl's typed generators send (`kubectl create namespace`,
//! `create configmap`, `create serviceaccount`, `create priorityclass`):
//! the `k8s\0` envelope and a field table per supported kind, decoded into
//! the JSON a client would have sent. Other kinds are refused with 415 by
//! the caller; objects are otherwise schemaless and JSON throughout.

use base64::Engine;
use serde_json::{Map, Value, json};

/// How one protobuf field maps to JSON.
enum Field {
    Str(&'static str),
    Bool(&'static str),
    Int(&'static str),
    Msg(&'static str, &'static [(u32, Field)]),
    MapStr(&'static str),
    MapBytes(&'static str),
    RepStr(&'static str),
}

use Field::*;

const OBJECT_META: &[(u32, Field)] = &[
    (1, Str("name")),
    (2, Str("generateName")),
    (3, Str("namespace")),
    (11, MapStr("labels")),
    (12, MapStr("annotations")),
    (14, RepStr("finalizers")),
];
const NAMESPACE: &[(u32, Field)] = &[
    (1, Msg("metadata", OBJECT_META)),
    (2, Msg("spec", &[(1, RepStr("finalizers"))])),
];
const CONFIG_MAP: &[(u32, Field)] = &[
    (1, Msg("metadata", OBJECT_META)),
    (2, MapStr("data")),
    (3, MapBytes("binaryData")),
    (4, Bool("immutable")),
];
const SERVICE_ACCOUNT: &[(u32, Field)] = &[
    (1, Msg("metadata", OBJECT_META)),
    (4, Bool("automountServiceAccountToken")),
];
const PRIORITY_CLASS: &[(u32, Field)] = &[
    (1, Msg("metadata", OBJECT_META)),
    (2, Int("value")),
    (3, Bool("globalDefault")),
    (4, Str("description")),
    (5, Str("preemptionPolicy")),
];

fn schema(api_version: &str, kind: &str) -> Option<&'static [(u32, Field)]> {
    match (api_version, kind) {
        ("v1", "Namespace") => Some(NAMESPACE),
        ("v1", "ConfigMap") => Some(CONFIG_MAP),
        ("v1", "ServiceAccount") => Some(SERVICE_ACCOUNT),
        ("scheduling.k8s.io/v1", "PriorityClass") => Some(PRIORITY_CLASS),
        _ => None,
    }
}

/// Decodes an enveloped protobuf object into JSON.
pub fn decode(body: &[u8]) -> Result<Value, String> {
    let unknown = body
        .strip_prefix(b"k8s\0")
        .ok_or("protobuf body lacks the k8s envelope")?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for (field, value) in Fields(unknown) {
        match (field?, value) {
            (1, Wire::Bytes(type_meta)) => {
                for (f, v) in Fields(type_meta) {
                    match (f?, v) {
                        (1, Wire::Bytes(s)) => api_version = text(s)?,
                        (2, Wire::Bytes(s)) => kind = text(s)?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(r)) => raw = r,
            _ => {}
        }
    }
    let fields = schema(&api_version, &kind).ok_or_else(|| {
        format!("protobuf bodies of {api_version} {kind} are not supported; send JSON")
    })?;
    let mut obj = message(raw, fields)?;
    obj.insert("apiVersion".into(), json!(api_version));
    obj.insert("kind".into(), json!(kind));
    Ok(Value::Object(obj))
}

fn message(bytes: &[u8], fields: &[(u32, Field)]) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    for (number, value) in Fields(bytes) {
        let number = number?;
        let Some((_, field)) = fields.iter().find(|(n, _)| *n == number) else {
            continue;
        };
        match (field, value) {
            (Str(name), Wire::Bytes(b)) => {
                let s = text(b)?;
                if !s.is_empty() {
                    out.insert(name.to_string(), json!(s));
                }
            }
            (Bool(name), Wire::Varint(v)) => {
                out.insert(name.to_string(), json!(v != 0));
            }
            (Int(name), Wire::Varint(v)) => {
                // int32 fields are sign-extended to 64 bits on the wire.
                out.insert(name.to_string(), json!(v as i64 as i32));
            }
            (Msg(name, inner), Wire::Bytes(b)) => {
                out.insert(name.to_string(), Value::Object(message(b, inner)?));
            }
            (MapStr(name) | MapBytes(name), Wire::Bytes(b)) => {
                let (key, value) = map_entry(b)?;
                let value = match field {
                    MapBytes(_) => base64::engine::general_purpose::STANDARD.encode(value),
                    _ => text(value)?,
                };
                let map = out.entry(name.to_string()).or_insert_with(|| json!({}));
                if let Some(m) = map.as_object_mut() {
                    m.insert(key, json!(value));
                }
            }
            (RepStr(name), Wire::Bytes(b)) => {
                let list = out.entry(name.to_string()).or_insert_with(|| json!([]));
                if let Some(l) = list.as_array_mut() {
                    l.push(json!(text(b)?));
                }
            }
            _ => {
                return Err(format!(
                    "protobuf field {number} has an unexpected wire type"
                ));
            }
        }
    }
    Ok(out)
}

fn map_entry(bytes: &[u8]) -> Result<(String, &[u8]), String> {
    let (mut key, mut value) = (String::new(), &[][..]);
    for (f, v) in Fields(bytes) {
        match (f?, v) {
            (1, Wire::Bytes(k)) => key = text(k)?,
            (2, Wire::Bytes(v)) => value = v,
            _ => {}
        }
    }
    Ok((key, value))
}

fn text(b: &[u8]) -> Result<String, String> {
    String::from_utf8(b.to_vec()).map_err(|_| "protobuf string is not UTF-8".to_string())
}

enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

/// Iterates (field number, value) over a message; a malformed message
/// yields one error and stops.
struct Fields<'a>(&'a [u8]);

impl<'a> Iterator for Fields<'a> {
    type Item = (Result<u32, String>, Wire<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.0.is_empty() {
            return None;
        }
        match self.read_field() {
            Ok(item) => Some(item),
            Err(e) => {
                self.0 = &[];
                Some((Err(e), Wire::Fixed))
            }
        }
    }
}

impl<'a> Fields<'a> {
    fn read_field(&mut self) -> Result<(Result<u32, String>, Wire<'a>), String> {
        let tag = self.varint()?;
        let number = u32::try_from(tag >> 3).map_err(|_| "protobuf field number too large")?;
        let wire = match tag & 7 {
            0 => Wire::Varint(self.varint()?),
            1 => self.skip(8)?,
            2 => {
                let len =
                    usize::try_from(self.varint()?).map_err(|_| "protobuf length too large")?;
                let bytes = self.0.get(..len).ok_or("truncated protobuf message")?;
                self.0 = &self.0[len..];
                Wire::Bytes(bytes)
            }
            5 => self.skip(4)?,
            other => return Err(format!("unsupported protobuf wire type {other}")),
        };
        Ok((Ok(number), wire))
    }

    fn skip(&mut self, n: usize) -> Result<Wire<'a>, String> {
        self.0 = self.0.get(n..).ok_or("truncated protobuf message")?;
        Ok(Wire::Fixed)
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for (i, byte) in self.0.iter().enumerate().take(10) {
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                self.0 = &self.0[i + 1..];
                return Ok(value);
            }
        }
        Err("malformed protobuf varint".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Length-delimited field.
    fn ld(field: u8, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![(field << 3) | 2, bytes.len() as u8];
        out.extend_from_slice(bytes);
        out
    }

    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let type_meta = [ld(1, api_version.as_bytes()), ld(2, kind.as_bytes())].concat();
        let mut body = b"k8s\0".to_vec();
        body.extend(ld(1, &type_meta));
        body.extend(ld(2, raw));
        body
    }

    #[test]
    fn decodes_what_kubectl_create_sends() {
        // The bytes kubectl v1.37 sends for `kubectl create namespace x`.
        let body = b"k8s\x00\x0a\x0f\x0a\x02v1\x12\x09Namespace\x12\x19\x0a\x11\x0a\x01x\x12\x00\x1a\x00\x22\x00\x2a\x00\x32\x00\x38\x00\x42\x00\x12\x00\x1a\x02\x0a\x00\x1a\x00\x22\x00";
        let v = decode(body).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}, "spec": {}})
        );
    }

    #[test]
    fn config_map_with_maps() {
        let meta = [
            ld(1, b"cm"),
            ld(11, &[ld(1, b"app"), ld(2, b"web")].concat()),
        ]
        .concat();
        let raw = [
            ld(1, &meta),
            ld(2, &[ld(1, b"k"), ld(2, b"v")].concat()),
            vec![4 << 3, 1],
        ]
        .concat();
        let v = decode(&envelope("v1", "ConfigMap", &raw)).unwrap();
        assert_eq!(
            v["metadata"],
            json!({"name": "cm", "labels": {"app": "web"}})
        );
        assert_eq!(v["data"], json!({"k": "v"}));
        assert_eq!(v["immutable"], json!(true));
    }

    #[test]
    fn unsupported_and_malformed_bodies_are_errors() {
        assert!(
            decode(&envelope("apps/v1", "Deployment", &[]))
                .unwrap_err()
                .contains("not supported")
        );
        assert!(decode(b"nope").is_err());
        assert!(decode(b"k8s\0\x0a\x50").is_err());
    }
}
