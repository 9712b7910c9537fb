//! Helpers shared by the dialect translators: object metadata and Muster's
//! group-definition annotations.

use std::time::Duration;

use serde_json::Value;

use crate::model::{
    CappedTimeout, DefinitionKey, GroupDef, GroupKey, GroupMembership, GroupPhase, GroupPolicy,
    GroupSource, MAX_GROUP_COUNT, MAX_SCHEDULE_TIMEOUT, Resources, parse_timestamp_ms,
};

/// Annotation on a group definition that sets its gang timeout when the dialect
/// has no field of its own (gang-semantics.md, "Timeout resolution").
pub const SCHEDULE_TIMEOUT_ANNOTATION: &str = "muster.dev/schedule-timeout-seconds";
/// A group's own `reserveAfterSeconds` (0: never reserve for it).
pub const RESERVE_AFTER_ANNOTATION: &str = "muster.dev/reserve-after-seconds";

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
            namespace: crate::model::namespace_or_default(meta["namespace"].as_str()),
            name,
            created_ms: parse_timestamp_ms(meta["creationTimestamp"].as_str()),
            obj,
        })
    }

    pub fn annotation(&self, key: &str) -> Option<&'a str> {
        self.obj["metadata"]["annotations"][key].as_str()
    }

    /// The timeout set by `muster.dev/schedule-timeout-seconds`, if any,
    /// capped at [`MAX_SCHEDULE_TIMEOUT`].
    pub fn timeout_annotation(&self) -> Result<Option<Timeout>, String> {
        let Some(v) = self.annotation(SCHEDULE_TIMEOUT_ANNOTATION) else {
            return Ok(None);
        };
        let digits = v.trim();
        let digits = digits.strip_prefix('+').unwrap_or(digits);
        let field = format!("annotation {SCHEDULE_TIMEOUT_ANNOTATION}");
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("{field} must be a positive integer, got {v:?}"));
        }
        // Only digits: a value too long for u64 is simply very large.
        let seconds = digits.parse::<u64>().unwrap_or(u64::MAX);
        if seconds == 0 {
            return Err(format!("{field} must be a positive integer, got {v:?}"));
        }
        Ok(Some(Timeout::capped(seconds, field, digits)))
    }
}

/// `muster.dev/reserve-after-seconds` on a definition object: seconds
/// within a day, 0 allowed, into each definition the object declares; an
/// unreadable value makes each of them invalid, naming it (never ignored).
pub fn with_reserve_after(obj: &Value, mut defs: Vec<GroupDef>) -> Vec<GroupDef> {
    for d in &mut defs {
        read_reserve_after(obj, d);
    }
    defs
}

/// [`with_reserve_after`] for one definition.
pub fn read_reserve_after(obj: &Value, def: &mut GroupDef) {
    let Some(v) = obj["metadata"]["annotations"][RESERVE_AFTER_ANNOTATION].as_str() else {
        return;
    };
    let parsed = v
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|s| *s <= MAX_SCHEDULE_TIMEOUT.as_secs());
    match parsed {
        Some(s) => def.extras.reserve_after = Some(Duration::from_secs(s)),
        None => {
            def.policy = Err(format!(
                "annotation {RESERVE_AFTER_ANNOTATION} must be a whole number of seconds between 0 and {}, got {v:?}",
                MAX_SCHEDULE_TIMEOUT.as_secs()
            ))
        }
    }
}

/// A gang timeout read from a definition, capped at [`MAX_SCHEDULE_TIMEOUT`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeout {
    pub value: Duration,
    /// What was asked when it exceeded the cap.
    pub capped: Option<Box<CappedTimeout>>,
}

impl Timeout {
    fn capped(seconds: u64, field: String, requested: &str) -> Self {
        let asked = Duration::from_secs(seconds);
        if asked <= MAX_SCHEDULE_TIMEOUT {
            return Timeout {
                value: asked,
                capped: None,
            };
        }
        Timeout {
            value: MAX_SCHEDULE_TIMEOUT,
            capped: Some(Box::new(CappedTimeout {
                field,
                requested: requested.to_string(),
            })),
        }
    }

    /// A positive number of seconds in a spec field (`spec.scheduleTimeoutSeconds`).
    pub fn from_field(value: &Value, field: &str) -> Result<Self, String> {
        match value.as_u64() {
            Some(s) if s > 0 => Ok(Timeout::capped(s, field.to_string(), &s.to_string())),
            _ => match value.as_i64() {
                Some(n) => Err(format!("{field} must be positive, got {n}")),
                None => Err(format!("{field} must be an integer, got {value}")),
            },
        }
    }

    /// Splits into the policy's timeout and the cap record.
    pub fn split(t: Option<Timeout>) -> (Option<Duration>, Option<Box<CappedTimeout>>) {
        match t {
            Some(t) => (Some(t.value), t.capped),
            None => (None, None),
        }
    }
}

/// Reads a positive count (`minCount`, `minMember`) of at most
/// [`MAX_GROUP_COUNT`] with a precise error.
pub fn positive_count(value: &Value, field: &str) -> Result<u32, String> {
    match value {
        Value::Null => Err(format!("{field} is missing")),
        v => match v.as_i64() {
            Some(n) if n <= 0 => Err(format!("{field} must be positive, got {n}")),
            Some(n) => bounded_count(n, field),
            // Larger than i64 (`as_u64`) or not an integer at all.
            None => match v.as_u64() {
                Some(_) => Err(format!(
                    "{field} must be at most {MAX_GROUP_COUNT}, got {v}"
                )),
                None => Err(format!("{field} must be an integer, got {v}")),
            },
        },
    }
}

/// `spec.minMember` of Coscheduling and Volcano: a non-negative integer of
/// at most [`MAX_GROUP_COUNT`]; omitted is 0 (both CRDs allow it).
pub fn min_member(value: &Value) -> Result<u32, String> {
    const FIELD: &str = "spec.minMember";
    match value {
        Value::Null => Ok(0),
        v => match v.as_i64() {
            Some(n) => bounded_count(n, FIELD),
            None if v.as_u64().is_some() => Err(format!(
                "{FIELD} must be at most {MAX_GROUP_COUNT}, got {v}"
            )),
            None => Err(format!("{FIELD} must be an integer, got {v}")),
        },
    }
}

/// A non-negative count of at most [`MAX_GROUP_COUNT`], with a precise error.
pub fn bounded_count(n: i64, field: &str) -> Result<u32, String> {
    if n < 0 {
        return Err(format!("{field} must not be negative, got {n}"));
    }
    u32::try_from(n)
        .ok()
        .filter(|c| *c <= MAX_GROUP_COUNT)
        .ok_or_else(|| format!("{field} must be at most {MAX_GROUP_COUNT}, got {n}"))
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

/// What a `minMember` spec yields when it is well formed: the policy, the
/// gang's `minResources` and a timeout cap record.
type MinMemberSpec = (GroupPolicy, Option<Resources>, Option<Box<CappedTimeout>>);

/// A `minMember` gang definition (Coscheduling and Volcano share the shape):
/// `spec.minMember` (0 or omitted: a basic group), `spec.minResources`, and a timeout from `timeout_field`
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
    let read = || -> Result<MinMemberSpec, String> {
        let min_count = min_member(&spec["minMember"])?;
        let own_timeout = timeout_field
            .map(|f| (f, &spec[f]))
            .filter(|(_, v)| !v.is_null());
        let timeout = match own_timeout {
            Some((field, v)) => Some(Timeout::from_field(v, &format!("spec.{field}"))?),
            None => meta.timeout_annotation()?,
        };
        let (schedule_timeout, capped) = Timeout::split(timeout);
        let resources = min_resources(&spec["minResources"], "spec.minResources")?;
        // Both dialects accept 0 (or no minMember at all): no gang then.
        let policy = match min_count {
            0 => GroupPolicy::Basic,
            min_count => GroupPolicy::Gang {
                min_count,
                schedule_timeout,
            },
        };
        Ok((policy, resources, capped))
    };
    let (policy, min_resources, timeout_capped) = match read() {
        Ok((p, r, c)) => (Ok(p), r, c),
        Err(e) => (Err(format!("{key}: {e}")), None, None),
    };
    Ok(GroupDef {
        min_resources,
        timeout_capped,
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
