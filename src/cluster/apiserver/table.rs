//! Server-side printing: `meta.k8s.io/v1` `Table` responses for clients
//! that ask for them (`kubectl get` without `-o`), so pods show READY,
//! STATUS, NODE and nodes STATUS, VERSION as on a real cluster. Kinds
//! without their own columns get NAME and AGE, like custom resources.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::registry::ResourceDef;

/// The content type of a Table response.
pub const CONTENT_TYPE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

/// Does this Accept header ask for a v1 Table?
pub fn wanted(accept: &str) -> bool {
    accept.split(',').any(|media| {
        let params: Vec<&str> = media.split(';').map(str::trim).collect();
        params.contains(&"as=Table")
            && params.contains(&"v=v1")
            && params.contains(&"g=meta.k8s.io")
    })
}

/// What each row carries besides its cells (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Include {
    None,
    Metadata,
    Object,
}

impl Include {
    pub fn from_param(p: Option<&str>) -> Include {
        match p {
            Some("None") => Include::None,
            Some("Object") => Include::Object,
            _ => Include::Metadata,
        }
    }
}

/// A Table of `objects`; `metadata` is the list metadata (version, continue).
/// Column definitions are left out when `headers` is false (watch events
/// after the first, as a real server does).
pub fn table(
    def: &ResourceDef,
    metadata: Value,
    objects: &[Value],
    include: Include,
    headers: bool,
) -> Value {
    let now = Utc::now();
    let rows: Vec<Value> = objects.iter().map(|o| row(def, o, include, now)).collect();
    let columns = if headers { columns(def) } else { json!([]) };
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": columns,
        "rows": rows,
    })
}

fn column(name: &str, description: &str, priority: u8) -> Value {
    let format = if name == "Name" { "name" } else { "" };
    json!({"name": name, "type": "string", "format": format, "description": description, "priority": priority})
}

fn kind_of(def: &ResourceDef) -> &str {
    match def.group.as_str() {
        "" | "policy" | super::dra::GROUP => def.plural.as_str(),
        _ => "",
    }
}

/// An int-or-percent spec field as kubectl prints it (`N/A` when unset).
fn int_or_percent(obj: &Value, pointer: &str) -> String {
    match obj.pointer(pointer) {
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::String(s)) => s.clone(),
        _ => "N/A".to_string(),
    }
}

fn columns(def: &ResourceDef) -> Value {
    let name = column("Name", "Name of the object", 0);
    let age = column("Age", "Time since creation", 0);
    match kind_of(def) {
        "pods" => json!([
            name,
            column("Ready", "Ready containers", 0),
            column("Status", "Pod status", 0),
            column("Restarts", "Container restarts", 0),
            age,
            column("IP", "Pod IP", 1),
            column("Node", "Node the pod is bound to", 1)
        ]),
        "nodes" => json!([
            name,
            column("Status", "Node condition", 0),
            column("Roles", "Node roles", 0),
            age,
            column("Version", "Kubelet version", 0),
            column("Internal-IP", "Internal address", 1)
        ]),
        "namespaces" => json!([name, column("Status", "Namespace phase", 0), age]),
        // kube-apiserver's event columns (`kubectl get events`).
        "events" => json!([
            column("Last Seen", "Time since the event was last seen", 0),
            column("Type", "Normal or Warning", 0),
            column("Reason", "Why the event was recorded", 0),
            column("Object", "The object the event is about", 0),
            column("Message", "What happened", 0),
            name
        ]),
        "poddisruptionbudgets" => json!([
            name,
            column("Min Available", "spec.minAvailable", 0),
            column("Max Unavailable", "spec.maxUnavailable", 0),
            column("Allowed Disruptions", "status.disruptionsAllowed", 0),
            age
        ]),
        plural => match super::dra::table::middle_columns(plural) {
            Some(middle) => {
                let mut all = vec![name];
                all.extend(middle);
                all.push(age);
                json!(all)
            }
            None => json!([name, age]),
        },
    }
}

fn row(def: &ResourceDef, obj: &Value, include: Include, now: DateTime<Utc>) -> Value {
    let s = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let name = s("/metadata/name");
    let age = age(&s("/metadata/creationTimestamp"), now);
    let cells = match kind_of(def) {
        "pods" => {
            let containers = obj
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let ready = obj
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array)
                .map_or(0, |cs| cs.iter().filter(|c| c["ready"] == true).count());
            let status = if obj.pointer("/metadata/deletionTimestamp").is_some() {
                "Terminating".to_string()
            } else {
                // A container's waiting reason (ContainerCreating while a
                // pod waits for its resource claims) stands for the phase,
                // as kubectl's printer shows it.
                let waiting = obj
                    .pointer("/status/containerStatuses")
                    .and_then(Value::as_array)
                    .and_then(|cs| {
                        cs.iter()
                            .find_map(|c| c.pointer("/state/waiting/reason")?.as_str())
                    })
                    .filter(|r| !r.is_empty());
                match (s("/status/phase").as_str(), waiting) {
                    ("Succeeded", _) => "Completed".to_string(),
                    ("Pending" | "Running", Some(reason)) => reason.to_string(),
                    (phase, _) => phase.to_string(),
                }
            };
            let or_none = |v: String| {
                if v.is_empty() {
                    "<none>".to_string()
                } else {
                    v
                }
            };
            json!([
                name,
                format!("{ready}/{containers}"),
                status,
                0,
                age,
                or_none(s("/status/podIP")),
                or_none(s("/spec/nodeName"))
            ])
        }
        "nodes" => {
            let ready = obj
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                });
            let mut status = if ready { "Ready" } else { "NotReady" }.to_string();
            if obj.pointer("/spec/unschedulable") == Some(&json!(true)) {
                status.push_str(",SchedulingDisabled");
            }
            let roles: Vec<&str> = obj
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .map(|l| {
                    l.keys()
                        .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                        .collect()
                })
                .unwrap_or_default();
            let roles = if roles.is_empty() {
                "<none>".to_string()
            } else {
                roles.join(",")
            };
            let ip = obj
                .pointer("/status/addresses")
                .and_then(Value::as_array)
                .and_then(|a| a.iter().find(|a| a["type"] == "InternalIP"))
                .and_then(|a| a["address"].as_str())
                .unwrap_or("<none>")
                .to_string();
            json!([
                name,
                status,
                roles,
                age,
                s("/status/nodeInfo/kubeletVersion"),
                ip
            ])
        }
        "namespaces" => json!([name, s("/status/phase"), age]),
        "events" => {
            let seen = [
                "/lastTimestamp",
                "/eventTime",
                "/series/lastObservedTime",
                "/metadata/creationTimestamp",
            ]
            .iter()
            .map(|p| s(p))
            .find(|t| !t.is_empty())
            .unwrap_or_default();
            let object = format!(
                "{}/{}",
                s("/involvedObject/kind").to_lowercase(),
                s("/involvedObject/name")
            );
            json!([
                self::age(&seen, now),
                s("/type"),
                s("/reason"),
                object,
                s("/message"),
                name
            ])
        }
        "poddisruptionbudgets" => json!([
            name,
            int_or_percent(obj, "/spec/minAvailable"),
            int_or_percent(obj, "/spec/maxUnavailable"),
            obj.pointer("/status/disruptionsAllowed")
                .and_then(Value::as_i64)
                .unwrap_or(0),
            age
        ]),
        plural => {
            let mut cells = vec![json!(name)];
            cells.extend(super::dra::table::middle_cells(plural, obj));
            cells.push(json!(age));
            json!(cells)
        }
    };
    let mut row = json!({ "cells": cells });
    match include {
        Include::None => {}
        Include::Object => row["object"] = obj.clone(),
        Include::Metadata => {
            row["object"] = json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata").cloned().unwrap_or_default(),
            })
        }
    }
    row
}

/// Age as kubectl prints it (`45s`, `3m12s`, `5h`, `2d3h`, `40d`).
fn age(created: &str, now: DateTime<Utc>) -> String {
    let Ok(created) = DateTime::parse_from_rfc3339(created) else {
        return "<unknown>".into();
    };
    let secs = (now - created.with_timezone(&Utc)).num_seconds().max(0);
    let (m, h, d) = (secs / 60, secs / 3600, secs / 86_400);
    match secs {
        s if s < 120 => format!("{s}s"),
        _ if m < 10 => format!("{m}m{}s", secs % 60),
        _ if h < 3 => format!("{m}m"),
        _ if h < 8 => format!("{h}h{}m", m % 60),
        _ if h < 48 => format!("{h}h"),
        _ if d < 8 => format!("{d}d{}h", h % 24),
        _ => format!("{d}d"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::registry::Registry;

    #[test]
    fn recognises_kubectl_accept_headers() {
        assert!(wanted(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
        ));
        assert!(!wanted("application/json"));
        assert!(!wanted("application/json;as=Table;v=v1beta1;g=meta.k8s.io"));
    }

    #[test]
    fn event_rows_say_what_happened_to_what() {
        let reg = Registry::new(&Default::default());
        let def = reg.lookup("", "v1", "events").unwrap();
        let ev = json!({"metadata": {"name": "big.1", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "type": "Warning", "reason": "FailedScheduling", "message": "0/3 nodes",
            "involvedObject": {"kind": "Pod", "name": "big"}});
        let t = table(&def, json!({}), &[ev], Include::Metadata, true);
        let cells = t["rows"][0]["cells"].as_array().unwrap();
        assert_eq!(
            cells[1..5],
            [
                json!("Warning"),
                json!("FailedScheduling"),
                json!("pod/big"),
                json!("0/3 nodes")
            ]
        );
        assert_eq!(t["columnDefinitions"].as_array().unwrap().len(), 6);
    }

    #[test]
    fn pod_rows() {
        let reg = Registry::new(&Default::default());
        let def = reg.lookup("", "v1", "pods").unwrap();
        let pod = json!({"metadata": {"name": "p", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n"},
            "status": {"phase": "Running", "podIP": "10.0.0.1", "containerStatuses": [{"ready": true}, {"ready": false}]}});
        let t = table(&def, json!({}), &[pod], Include::Metadata, true);
        let cells = t["rows"][0]["cells"].as_array().unwrap();
        assert_eq!(cells[..3], [json!("p"), json!("1/2"), json!("Running")]);
        assert_eq!(t["rows"][0]["cells"][6], "n");
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(t["columnDefinitions"].as_array().unwrap().len(), 7);
        let creating = json!({"metadata": {"name": "q"}, "status": {"phase": "Pending",
            "containerStatuses": [{"state": {"waiting": {"reason": "ContainerCreating"}}}]}});
        let t = table(&def, json!({}), &[creating], Include::None, false);
        assert_eq!(t["rows"][0]["cells"][2], "ContainerCreating");
    }

    #[test]
    fn ages() {
        let now = DateTime::parse_from_rfc3339("2026-01-03T05:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(age("2026-01-03T04:59:15Z", now), "45s");
        assert_eq!(age("2026-01-03T04:55:00Z", now), "5m0s");
        assert_eq!(age("2026-01-03T00:00:00Z", now), "5h0m");
        assert_eq!(age("2026-01-01T00:00:00Z", now), "2d5h");
        assert_eq!(age("garbage", now), "<unknown>");
    }
}
