//! Which fields of a JSON object a typed kind does not have, learnt from
//! the `k8s-openapi` type itself (the same Go types the real server
//! decodes into, generated from its OpenAPI): the object is fed to the
//! type's own `Deserialize` through [`Probe`], a deserializer over the JSON
//! that notes every key a struct does not list among its fields.
//!
//! Why not decode and re-encode, comparing: Go's decoder fills missing
//! fields with zero values, while the generated Rust types refuse an object
//! missing a required field (a condition without `lastTransitionTime`), so
//! the round trip would fail on objects the real decoder reads. The probe
//! instead answers the type's every question: an absent field is offered
//! as absent (`None`) or a zero value, a scalar of the wrong JSON type as a
//! zero value. The decoded value is thrown away; only the unknown paths
//! matter. What still fails (a malformed timestamp, an apiVersion the type
//! does not have) is a body the real server cannot decode either.

use std::cell::RefCell;
use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, SeqAccess, Visitor,
};
use serde_json::Value;

/// One step of a field path.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// A field path, shown as the real server shows it: `spec.containers[0].foo`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct FieldPath(pub Vec<Seg>);

impl FieldPath {
    pub fn child(&self, seg: Seg) -> FieldPath {
        let mut segs = self.0.clone();
        segs.push(seg);
        FieldPath(segs)
    }

    /// `rest` below this path.
    pub fn join(&self, rest: &FieldPath) -> FieldPath {
        let mut segs = self.0.clone();
        segs.extend(rest.0.iter().cloned());
        FieldPath(segs)
    }

    /// Removes the field at this path from `obj` (nothing if absent).
    pub fn remove_from(&self, obj: &mut Value) {
        let Some((last, parents)) = self.0.split_last() else {
            return;
        };
        let mut at = obj;
        for seg in parents {
            let next = match seg {
                Seg::Key(k) => at.get_mut(k.as_str()),
                Seg::Index(i) => at.get_mut(*i),
            };
            let Some(next) = next else {
                return;
            };
            at = next;
        }
        match (last, at) {
            (Seg::Key(k), Value::Object(map)) => {
                map.remove(k);
            }
            (Seg::Index(i), Value::Array(items)) if *i < items.len() => {
                items.remove(*i);
            }
            _ => {}
        }
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Key(k) if i == 0 => write!(f, "{k}")?,
                Seg::Key(k) => write!(f, ".{k}")?,
                Seg::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// The paths of `obj` that type `T` has no field for, in key order;
/// `Err` when the body cannot be decoded as `T` at all.
pub fn unknown_fields<'de, T: serde::Deserialize<'de>>(
    obj: &Value,
) -> Result<Vec<FieldPath>, String> {
    let found = RefCell::new(Vec::new());
    let probe = Probe {
        value: Some(obj),
        path: FieldPath::default(),
        found: &found,
    };
    T::deserialize(probe).map_err(|e| e.to_string())?;
    let mut found = found.into_inner();
    found.sort();
    Ok(found)
}

/// A placeholder every string-typed leaf accepts, timestamps included.
const ZERO_TEXT: &str = "1970-01-01T00:00:00Z";

/// Absent structs are not expanded below this depth.
const MAX_DEPTH: usize = 32;

struct Probe<'a> {
    /// None: a field the object does not have.
    value: Option<&'a Value>,
    path: FieldPath,
    found: &'a RefCell<Vec<FieldPath>>,
}

type Error = de::value::Error;

impl<'a> Probe<'a> {
    fn child(&self, seg: Seg, value: Option<&'a Value>) -> Probe<'a> {
        Probe {
            value,
            path: self.path.child(seg),
            found: self.found,
        }
    }
}

impl<'de, 'a> Deserializer<'de> for Probe<'a> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            None | Some(Value::Null) => visitor.visit_unit(),
            Some(Value::Bool(b)) => visitor.visit_bool(*b),
            Some(Value::Number(n)) => match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => visitor.visit_u64(u),
                (_, Some(i)) => visitor.visit_i64(i),
                _ => visitor.visit_f64(n.as_f64().unwrap_or(0.0)),
            },
            Some(Value::String(s)) => visitor.visit_str(s),
            Some(Value::Array(_)) => self.deserialize_seq(visitor),
            Some(Value::Object(_)) => self.deserialize_map(visitor),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let map = self.value.and_then(Value::as_object);
        for key in map
            .into_iter()
            .flat_map(|m| m.keys())
            .filter(|k| !fields.contains(&k.as_str()))
        {
            self.found
                .borrow_mut()
                .push(self.path.child(Seg::Key(key.clone())));
        }
        // Every field the type has, present or not, so no required field
        // is ever missing. (An absent struct nested this deep is offered
        // empty instead: a recursive type must not recurse forever.)
        let entries: Vec<(String, Probe<'a>)> = if map.is_none() && self.path.0.len() > MAX_DEPTH {
            Vec::new()
        } else {
            fields
                .iter()
                .map(|f| {
                    let value = map.and_then(|m| m.get(*f));
                    (f.to_string(), self.child(Seg::Key(f.to_string()), value))
                })
                .collect()
        };
        visitor.visit_map(Entries {
            entries: entries.into_iter(),
            next: None,
        })
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let entries = match self.value {
            Some(Value::Object(map)) => map
                .iter()
                .map(|(k, v)| (k.clone(), self.child(Seg::Key(k.clone()), Some(v))))
                .collect(),
            _ => Vec::new(),
        };
        visitor.visit_map(Entries {
            entries: entries.into_iter(),
            next: None,
        })
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let items = match self.value {
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| self.child(Seg::Index(i), Some(v)))
                .collect(),
            _ => Vec::new(),
        };
        visitor.visit_seq(Items(items.into_iter()))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            None | Some(Value::Null) => visitor.visit_none(),
            Some(_) => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Some(Value::String(s)) => visitor.visit_str(s),
            Some(Value::Number(n)) => visitor.visit_string(n.to_string()),
            Some(Value::Bool(b)) => visitor.visit_string(b.to_string()),
            _ => visitor.visit_str(ZERO_TEXT),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_bool(self.value.and_then(Value::as_bool).unwrap_or(false))
    }

    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value.and_then(Value::as_number) {
            Some(n) if n.is_u64() => visitor.visit_u64(n.as_u64().unwrap_or(0)),
            Some(n) if n.is_i64() => visitor.visit_i64(n.as_i64().unwrap_or(0)),
            Some(n) => visitor.visit_f64(n.as_f64().unwrap_or(0.0)),
            None => visitor.visit_u64(0),
        }
    }

    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_i64(visitor)
    }

    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_i64(visitor)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_f64(self.value.and_then(Value::as_f64).unwrap_or(0.0))
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        i8 i16 i128 u8 u16 u32 u128 f32 char bytes byte_buf unit unit_struct
        tuple tuple_struct enum
    }
}

/// A struct's or map's entries, each value probed.
struct Entries<'a> {
    entries: std::vec::IntoIter<(String, Probe<'a>)>,
    next: Option<Probe<'a>>,
}

impl<'de, 'a> MapAccess<'de> for Entries<'a> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some((key, probe)) = self.entries.next() else {
            return Ok(None);
        };
        self.next = Some(probe);
        let key: de::value::StringDeserializer<Error> = key.into_deserializer();
        seed.deserialize(key).map(Some)
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, Error> {
        match self.next.take() {
            Some(probe) => seed.deserialize(probe),
            None => Err(de::Error::custom("value requested before its key")),
        }
    }
}

struct Items<'a>(std::vec::IntoIter<Probe<'a>>);

impl<'de, 'a> SeqAccess<'de> for Items<'a> {
    type Error = Error;

    fn next_element_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, Error> {
        self.0.next().map(|p| seed.deserialize(p)).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::api::scheduling::v1beta1::PodGroup;
    use serde_json::json;

    fn shown(paths: Vec<FieldPath>) -> Vec<String> {
        paths.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn finds_unknown_fields_at_every_depth() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "foo": 1,
            "metadata": {"name": "p", "labelz": {}},
            "spec": {"containers": [{"name": "a", "image": "i"},
                                    {"name": "b", "resources": {"requests": {"cpu": 1}, "limitz": {}}}],
                     "nodeSelectr": {"a": "b"}}});
        assert_eq!(
            shown(unknown_fields::<Pod>(&pod).unwrap()),
            [
                "foo",
                "metadata.labelz",
                "spec.containers[1].resources.limitz",
                "spec.nodeSelectr"
            ]
        );
    }

    #[test]
    fn missing_required_fields_and_loose_scalars_still_probe() {
        // Conditions without lastTransitionTime/reason/message, and no
        // containers at all: the generated types would refuse these.
        let pg = json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "g"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": "2", "minCountt": 1}}},
            "status": {"conditions": [{"type": "PodGroupInitiallyScheduled", "status": "True"}]}});
        assert_eq!(
            shown(unknown_fields::<PodGroup>(&pg).unwrap()),
            ["spec.schedulingPolicy.gang.minCountt"]
        );
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "spec": {}});
        assert!(unknown_fields::<Pod>(&pod).unwrap().is_empty());
    }

    #[test]
    fn a_body_the_type_cannot_hold_is_an_error() {
        let wrong = json!({"apiVersion": "v2", "kind": "Pod"});
        assert!(unknown_fields::<Pod>(&wrong).is_err());
        let bad_time = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"creationTimestamp": "yesterday"}});
        assert!(unknown_fields::<Pod>(&bad_time).is_err());
    }
}
