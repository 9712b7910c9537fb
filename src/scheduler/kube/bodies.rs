//! The request bodies of the writer's two most frequent calls, a pod's
//! binding and a core/v1 event, serialized straight from borrowed fields.
//!
//! `Binding` and `Event` from k8s-openapi own every string: building one
//! cloned a dozen strings per call, and the generic `Api` path decoded the
//! answer it then dropped. At thousands of bindings a second that showed in
//! the scheduler's profile, so these two calls write the same
//! JSON from borrowed fields and read no answer. Field names are those of
//! core/v1 (`k8s_openapi::api::core::v1::{Binding, Event}`); the test below
//! decodes each body as the k8s-openapi type to keep them so.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use serde::Serialize;

/// core/v1 `Binding` of a pod to a node.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct BindingBody<'a> {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub metadata: Meta<'a>,
    pub target: Target<'a>,
}

impl<'a> BindingBody<'a> {
    /// Binds pod `namespace/name` (with `uid`, when known, as the
    /// precondition kube-scheduler sends) to `node`.
    pub fn new(namespace: &'a str, name: &'a str, uid: &'a str, node: &'a str) -> Self {
        BindingBody {
            api_version: "v1",
            kind: "Binding",
            metadata: Meta {
                name,
                namespace,
                uid: (!uid.is_empty()).then_some(uid),
            },
            target: Target {
                kind: "Node",
                name: node,
            },
        }
    }
}

/// An object's name and namespace, and its UID when a precondition is wanted.
#[derive(Serialize)]
pub(super) struct Meta<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<&'a str>,
}

#[derive(Serialize)]
pub(super) struct Target<'a> {
    pub kind: &'static str,
    pub name: &'a str,
}

/// core/v1 `Event`, as `record_event` writes it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct EventBody<'a> {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub metadata: Meta<'a>,
    pub involved_object: Involved<'a>,
    pub reason: &'a str,
    pub message: &'a str,
    #[serde(rename = "type")]
    pub type_: &'static str,
    pub count: i32,
    pub first_timestamp: &'a Time,
    pub last_timestamp: &'a Time,
    pub event_time: MicroTime,
    pub reporting_component: &'static str,
    pub reporting_instance: &'static str,
    pub action: &'static str,
    pub source: Source,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Involved<'a> {
    pub api_version: &'a str,
    pub kind: &'a str,
    pub name: &'a str,
    pub namespace: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<&'a str>,
}

#[derive(Serialize)]
pub(super) struct Source {
    pub component: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Binding, Event};

    #[test]
    fn a_binding_body_is_a_core_v1_binding() {
        let body = serde_json::to_vec(&BindingBody::new("ns", "p", "u-1", "n1")).unwrap();
        let b: Binding = serde_json::from_slice(&body).unwrap();
        assert_eq!(b.metadata.name.as_deref(), Some("p"));
        assert_eq!(b.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(b.metadata.uid.as_deref(), Some("u-1"));
        assert_eq!(b.target.kind.as_deref(), Some("Node"));
        assert_eq!(b.target.name.as_deref(), Some("n1"));
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            (v["apiVersion"].as_str(), v["kind"].as_str()),
            (Some("v1"), Some("Binding"))
        );
        // No UID known: no precondition.
        let body = serde_json::to_vec(&BindingBody::new("ns", "p", "", "n1")).unwrap();
        let b: Binding = serde_json::from_slice(&body).unwrap();
        assert_eq!(b.metadata.uid, None);
    }

    #[test]
    fn an_event_body_is_a_core_v1_event() {
        // Whole seconds: `Time` keeps seconds, `MicroTime` microseconds.
        let now = Time(k8s_openapi::jiff::Timestamp::from_second(1_790_000_000).unwrap());
        let body = EventBody {
            api_version: "v1",
            kind: "Event",
            metadata: Meta {
                name: "p.1",
                namespace: "ns",
                uid: None,
            },
            involved_object: Involved {
                api_version: "v1",
                kind: "Pod",
                name: "p",
                namespace: "ns",
                uid: Some("u-1"),
            },
            reason: "Scheduled",
            message: "Successfully assigned ns/p to n1",
            type_: "Normal",
            count: 1,
            first_timestamp: &now,
            last_timestamp: &now,
            event_time: MicroTime(now.0),
            reporting_component: "muster",
            reporting_instance: "muster",
            action: "Binding",
            source: Source {
                component: "muster",
            },
        };
        let e: Event = serde_json::from_slice(&serde_json::to_vec(&body).unwrap()).unwrap();
        assert_eq!(e.metadata.name.as_deref(), Some("p.1"));
        assert_eq!(e.involved_object.uid.as_deref(), Some("u-1"));
        assert_eq!(e.involved_object.kind.as_deref(), Some("Pod"));
        assert_eq!(e.reason.as_deref(), Some("Scheduled"));
        assert_eq!(e.type_.as_deref(), Some("Normal"));
        assert_eq!(e.count, Some(1));
        assert_eq!(e.first_timestamp, Some(now.clone()));
        assert_eq!(e.event_time.map(|t| t.0), Some(now.0));
        assert_eq!(e.reporting_component.as_deref(), Some("muster"));
        assert_eq!(e.action.as_deref(), Some("Binding"));
        assert_eq!(
            e.source.and_then(|s| s.component).as_deref(),
            Some("muster")
        );
    }
}
