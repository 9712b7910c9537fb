//! What a client sees of stored objects, and what is stored of what it
//! sends: objects are kept in their resource's storage version and converted
//! (`convert`) to and from the version a request names. Also resources
//! served as a view of another resource's storage, as a real server does for
//! `events.k8s.io/v1` events, which are the same objects as core `v1`
//! events: a Recorder writing `events.k8s.io` events is seen by
//! `kubectl describe` reading core events.

use bytes::Bytes;
use serde_json::{Value, json};

use super::convert::convert;
use super::registry::{ResourceDef, View};
use super::store::Stored;

/// Field names: (core/v1 Event, events.k8s.io/v1 Event).
const EVENT_FIELDS: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

fn rename(obj: &mut Value, to_view: bool, api_version: &str) {
    if let Some(map) = obj.as_object_mut() {
        for (core, view) in EVENT_FIELDS {
            let (from, to) = if to_view { (core, view) } else { (view, core) };
            if let Some(v) = map.remove(*from) {
                map.insert(to.to_string(), v);
            }
        }
        map.insert("apiVersion".into(), json!(api_version));
    }
}

/// A client's object in the storage form.
pub fn to_storage(def: &ResourceDef, mut obj: Value) -> Value {
    match def.view {
        Some(View::CoreEvents) => rename(&mut obj, false, "v1"),
        None if def.is_storage_version() => {}
        None => convert(&def.group, &def.kind, &mut obj, &def.storage_version),
    }
    obj
}

/// A stored object (decoded) in the client's form.
pub fn to_view(def: &ResourceDef, mut obj: Value) -> Value {
    match def.view {
        Some(View::CoreEvents) => rename(&mut obj, true, &def.api_version()),
        None => {
            let api_version = def.api_version();
            if obj.get("apiVersion").and_then(Value::as_str) != Some(api_version.as_str()) {
                convert(&def.group, &def.kind, &mut obj, &def.version);
            }
        }
    }
    obj
}

/// The bytes to send for a stored object: the stored bytes, shared, when
/// the request speaks the storage version; converted otherwise.
pub fn render(def: &ResourceDef, obj: &Stored) -> Bytes {
    match def.view {
        None if def.is_storage_version() => obj.bytes.clone(),
        _ => {
            let v = to_view(def, obj.value());
            Bytes::from(serde_json::to_vec(&v).unwrap_or_default())
        }
    }
}

/// A field selector written against the view, rewritten for the storage form.
pub fn field_selector(def: &ResourceDef, selector: &str) -> String {
    match def.view {
        None => selector.to_string(),
        Some(View::CoreEvents) => selector
            .split(',')
            .map(|req| {
                let mut req = req.trim().to_string();
                for (core, view) in EVENT_FIELDS {
                    if let Some(rest) = req.strip_prefix(view)
                        && (rest.starts_with('.') || rest.starts_with('=') || rest.starts_with('!'))
                    {
                        req = format!("{core}{rest}");
                        break;
                    }
                }
                req
            })
            .collect::<Vec<_>>()
            .join(","),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::registry::Registry;

    #[test]
    fn events_round_trip_between_forms() {
        let reg = Registry::new(&Default::default());
        let def = reg.lookup("events.k8s.io", "v1", "events").unwrap();
        let new = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "note": "n",
            "regarding": {"name": "p"}, "reportingController": "muster", "reason": "Scheduled"});
        let core = to_storage(&def, new.clone());
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["message"], "n");
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["reportingComponent"], "muster");
        assert_eq!(to_view(&def, core), new);
        assert_eq!(
            field_selector(&def, "regarding.name=p,reason=x"),
            "involvedObject.name=p,reason=x"
        );
    }
}
