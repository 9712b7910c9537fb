//! Helpers shared by the dialect translators: object metadata and Muster's
//! group-definition annotations.

use std::time::Duration;

use serde_json::Value;

use crate::model::{
    DefinitionKey, GroupDef, GroupKey, GroupMembership, GroupPhase, GroupPolicy, GroupSource,
    Resources, parse_timestamp_ms,
};

/// Annotation on a group definition that sets its gang timeout when the dialect
/// has no field of its own (gang-semantics.md, "Timeout resolution").
pub const SCHEDULE_TIMEOUT_ANNOTATION: &str = "muster.dev/schedule-timeout-seconds";

/// The metadata fields a translator needs, read from a JSON object.
pub struct Meta<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub created_ms: i64,
    obj: &'a Value,
}

impl<'a> Meta<'a> {
    pub fn read(obj: &'a Value) -> Result<Self, String> {
        let meta = &obj["metadata"];
        let name = meta["name"]
            .as_str()
            .filter(|n| !n.is_empty())
            .ok_or("object has no metadata.name")?;
        Ok(Meta {
            namespace: meta["namespace"]
                .as_str()
                .filter(|n| !n.is_empty())
                .unwrap_or("default"),
            name,
            created_ms: parse_timestamp_ms(meta["creationTimestamp"].as_str()),
            obj,
        })
    }

    pub fn annotation(&self, key: &str) -> Option<&'a str> {
        self.obj["metadata"]["annotations"][key].as_str()
    }

    /// The timeout set by `muster.dev/schedule-timeout-seconds`, if any.
    pub fn timeout_annotation(&self) -> Result<Option<Duration>, String> {
        match self.annotation(SCHEDULE_TIMEOUT_ANNOTATION) {
            None => Ok(None),
            Some(v) => match v.trim().parse::<u64>() {
                Ok(s) if s > 0 => Ok(Some(Duration::from_secs(s))),
                _ => Err(format!(
                    "annotation {SCHEDULE_TIMEOUT_ANNOTATION} must be a positive integer, got {v:?}"
                )),
            },
        }
    }
}

/// Reads a positive count (`minCount`, `minMember`) with a precise error.
pub fn positive_count(value: &Value, field: &str) -> Result<u32, String> {
    match value {
        Value::Null => Err(format!("{field} is missing")),
        v => match v.as_i64() {
            Some(n) if n > 0 && n <= i64::from(u32::MAX) => Ok(n as u32),
            Some(n) => Err(format!("{field} must be positive, got {n}")),
            None => Err(format!("{field} must be an integer, got {v}")),
        },
    }
}

/// Reads an optional `minResources` map (`{cpu: "3", memory: 4Gi}`) into the
/// total a gang needs; quantities may be strings or plain numbers.
pub fn min_resources(value: &Value, field: &str) -> Result<Option<Resources>, String> {
    let map = match value {
        Value::Null => return Ok(None),
        Value::Object(map) => map,
        other => return Err(format!("{field} must be a map of quantities, got {other}")),
    };
    let mut items: Vec<(&str, String)> = Vec::with_capacity(map.len());
    for (name, q) in map {
        let q = match q {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            other => return Err(format!("{field}.{name} must be a quantity, got {other}")),
        };
        items.push((name, q));
    }
    Resources::from_quantities(items.iter().map(|(n, q)| (*n, q.as_str())))
        .map(|r| (!r.is_zero()).then_some(r))
        .map_err(|e| format!("{field}: {e}"))
}

/// What a dialect's own status says about a gang, as the engine reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GangStatus<'a> {
    /// Where the gang stands (`Scheduled` is terminal).
    pub phase: GroupPhase,
    pub reason: &'a str,
    pub message: &'a str,
    /// Members assumed or bound when the status was reported.
    pub scheduled_count: u32,
    /// The current time, RFC 3339.
    pub now: &'a str,
    /// First status written for this group since Muster started: the moment
    /// scheduling began (`scheduleStartTime`).
    pub first: bool,
}

/// Membership named by one label or annotation (`what` describes it for the
/// message): none without it, invalid when it is empty.
pub fn named_member(
    name: Option<&String>,
    what: &str,
    namespace: &str,
    source: GroupSource,
) -> Option<GroupMembership> {
    let name = name?;
    Some(if name.is_empty() {
        GroupMembership::Invalid(format!("{what} is empty"))
    } else {
        GroupMembership::Member(GroupKey::new(DefinitionKey::new(namespace, source, name)))
    })
}

/// A `minMember` gang definition (Coscheduling and Volcano share the shape):
/// `spec.minMember`, `spec.minResources`, and a timeout from `timeout_field`
/// when the dialect has one, else Muster's annotation. A malformed spec
/// becomes `policy: Err` naming the object.
pub fn min_member_definition(
    obj: &Value,
    source: GroupSource,
    timeout_field: Option<&str>,
) -> Result<GroupDef, String> {
    let meta = Meta::read(obj)?;
    let key = DefinitionKey::new(meta.namespace, source, meta.name);
    let spec = &obj["spec"];
    let read = || -> Result<(GroupPolicy, Option<Resources>), String> {
        let min_count = positive_count(&spec["minMember"], "spec.minMember")?;
        let own_timeout = timeout_field
            .map(|f| (f, &spec[f]))
            .filter(|(_, v)| !v.is_null());
        let schedule_timeout = match own_timeout {
            Some((field, v)) => Some(Duration::from_secs(u64::from(positive_count(
                v,
                &format!("spec.{field}"),
            )?))),
            None => meta.timeout_annotation()?,
        };
        let resources = min_resources(&spec["minResources"], "spec.minResources")?;
        Ok((
            GroupPolicy::Gang {
                min_count,
                schedule_timeout,
            },
            resources,
        ))
    };
    let (policy, min_resources) = match read() {
        Ok((p, r)) => (Ok(p), r),
        Err(e) => (Err(format!("{key}: {e}")), None),
    };
    Ok(GroupDef {
        min_resources,
        ..GroupDef::new(key, policy, meta.created_ms)
    })
}

/// `spec.priorityClassName`, when set and not empty.
pub fn priority_class_name(spec: &Value) -> Option<String> {
    spec["priorityClassName"]
        .as_str()
        .filter(|c| !c.is_empty())
        .map(str::to_string)
}
