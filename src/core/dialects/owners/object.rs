//! One observed owner object, read from its JSON: its group definition (the
//! gang its kind implies, or its `muster.dev/min-count` override), its own
//! controlling owner (the next step of the walk up), and whether it opted
//! out with `muster.dev/gang: "false"`.

use serde_json::Value;

use super::super::common::{Meta, Timeout, positive_count};
use super::super::kueue::slice_fits;
use super::kinds::{OwnerSource, source_of_reference};
use super::topology::{TemplateTopology, owner_topology};
use crate::model::{DefinitionKey, GroupDef, GroupPolicy, GroupSource};

/// Annotation on a top owner: `"false"` makes its pods ordinary pods.
pub const GANG_ANNOTATION: &str = "muster.dev/gang";
/// Annotation on a top owner overriding the gang size its kind implies.
pub const MIN_COUNT_ANNOTATION: &str = "muster.dev/min-count";

/// An owner as the walk needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerObject {
    /// The group this owner defines when it is a top owner.
    pub def: GroupDef,
    /// Its controlling owner, when that is a kind of the table too (a Job of
    /// a JobSet, a JobSet of a TrainJob); other owners end the walk.
    pub parent: Option<DefinitionKey>,
    /// `muster.dev/gang: "false"`: its pods are ordinary pods.
    pub opted_out: bool,
    /// It runs its children in sequence (`OwnerSource::sequential`): the
    /// walk stops below it.
    pub sequential: bool,
    /// Its UID, so events on it are found by `kubectl describe`.
    pub uid: Option<String>,
}

/// What an observed owner object says, or `Err` when it is unreadable as a
/// whole (no name). A malformed size makes the definition malformed (its
/// members are held and told why), not the object.
pub fn read_owner(source: &OwnerSource, obj: &Value) -> Result<OwnerObject, String> {
    let meta = Meta::read(obj)?;
    let key = DefinitionKey::new(
        meta.namespace,
        GroupSource::Owner(source.kind_id),
        meta.name,
    );
    let opted_out = meta.annotation(GANG_ANNOTATION) == Some("false");
    let read = || -> Result<(GroupPolicy, Option<Timeout>), String> {
        let min_count = match meta.annotation(MIN_COUNT_ANNOTATION) {
            Some(v) => {
                let n = v.trim().parse::<i64>().map_err(|_| {
                    format!("annotation {MIN_COUNT_ANNOTATION} must be an integer, got {v:?}")
                })?;
                positive_count(
                    &Value::from(n),
                    &format!("annotation {MIN_COUNT_ANNOTATION}"),
                )?
            }
            None => match (source.size)(obj)? {
                0 => return Err(format!("{} implies a gang of 0 pods", source.rule)),
                n => n,
            },
        };
        let timeout = meta.timeout_annotation()?;
        let policy = GroupPolicy::Gang {
            min_count,
            schedule_timeout: timeout.as_ref().map(|t| t.value),
        };
        Ok((policy, timeout))
    };
    let mut def = match read() {
        Ok((policy, timeout)) => GroupDef {
            timeout_capped: Timeout::split(timeout).1,
            ..GroupDef::new(key.clone(), Ok(policy), meta.created_ms)
        },
        Err(e) => GroupDef::new(key.clone(), Err(format!("{key}: {e}")), meta.created_ms),
    };
    read_topology(obj, source, &mut def);
    crate::dialects::common::read_reserve_after(obj, &mut def);
    Ok(OwnerObject {
        def,
        parent: parent_of(obj, meta.namespace),
        opted_out,
        sequential: (source.sequential)(obj),
        uid: obj["metadata"]["uid"]
            .as_str()
            .filter(|u| !u.is_empty())
            .map(str::to_string),
    })
}

/// The Kueue topology annotations of the owner's pod templates (and a
/// Volcano Job's `spec.networkTopology`) into `def.topology`: invalid ones make the definition malformed, templates
/// that disagree make it unsupported, a slice larger than the gang makes it
/// malformed (it could never be whole).
fn read_topology(obj: &Value, source: &OwnerSource, def: &mut GroupDef) {
    let key = &def.key;
    let checked = owner_topology(obj, source.kind_id).and_then(|t| match (&t, &def.policy) {
        (TemplateTopology::Agreed(request), Ok(GroupPolicy::Gang { min_count, .. })) => {
            slice_fits(request, *min_count).map(|()| t)
        }
        _ => Ok(t),
    });
    match checked {
        Ok(TemplateTopology::Agreed(request)) => *def.topology = request,
        Ok(TemplateTopology::Disagree(why)) => def.unsupported = Some(format!("{key}: {why}")),
        Err(e) if def.policy.is_ok() => def.policy = Err(format!("{key}: {e}")),
        Err(_) => {}
    }
}

/// The controlling owner reference, when its kind is in the table. Owner
/// references never cross namespaces, so the parent is in the same one.
fn parent_of(obj: &Value, namespace: &str) -> Option<DefinitionKey> {
    let refs = obj["metadata"]["ownerReferences"].as_array()?;
    let controller = refs.iter().find(|r| r["controller"] == Value::Bool(true))?;
    let source = source_of_reference(
        controller["apiVersion"].as_str()?,
        controller["kind"].as_str()?,
    )?;
    let name = controller["name"].as_str().filter(|n| !n.is_empty())?;
    Some(DefinitionKey::new(
        namespace,
        GroupSource::Owner(source.kind_id),
        name,
    ))
}
