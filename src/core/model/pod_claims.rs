//! A pod's `spec.resourceClaims`: for each entry, which ResourceClaim it
//! is — one named outright, or the one the resourceclaim controller
//! generates from a template and records in `status.resourceClaimStatuses`.
//! A PodGroup's `spec.resourceClaims` (KEP-5729) read alike
//! ([`GroupClaims`]): a member's entry equal to one of the group's in every
//! field is the group's one claim, reserved for the group.

use std::sync::Arc;

use super::ModelError;
use super::wire::{PodResourceClaimStatusWire, PodResourceClaimWire};

/// The most entries a pod's `spec.resourceClaims` may have (the API
/// server's bound is lower; this one is the scheduler's own).
pub const MAX_POD_CLAIMS: usize = 128;

/// One `spec.resourceClaims` entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodClaim {
    /// The entry's name (what containers' `resources.claims` name).
    pub name: Arc<str>,
    pub source: ClaimSource,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ClaimSource {
    /// `resourceClaimName`: a claim that exists on its own, possibly shared.
    Named(Arc<str>),
    /// `resourceClaimTemplateName`: a claim generated for this pod.
    Template {
        template: Arc<str>,
        generated: Generated,
    },
}

/// What `status.resourceClaimStatuses` says of a template's claim.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Generated {
    /// Not generated yet: the pod waits for the controller.
    Pending,
    /// Generated under this name.
    Claim(Arc<str>),
    /// The controller decided no claim is needed (an entry without a name).
    NotNeeded,
}

/// The claim an entry resolves to, as far as it is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolved<'a> {
    Claim(&'a str),
    /// A template's claim not generated yet.
    Pending,
    NotNeeded,
}

impl PodClaim {
    pub fn resolve(&self) -> Resolved<'_> {
        match &self.source {
            ClaimSource::Named(n) => Resolved::Claim(n),
            ClaimSource::Template { generated, .. } => match generated {
                Generated::Pending => Resolved::Pending,
                Generated::Claim(n) => Resolved::Claim(n),
                Generated::NotNeeded => Resolved::NotNeeded,
            },
        }
    }

    /// Equal, or both generated from one template under names of their
    /// own.
    pub fn same_but_generated_name(&self, other: &PodClaim) -> bool {
        self.name == other.name
            && match (&self.source, &other.source) {
                (
                    ClaimSource::Template {
                        template: a,
                        generated: Generated::Claim(_),
                    },
                    ClaimSource::Template {
                        template: b,
                        generated: Generated::Claim(_),
                    },
                ) => a == b,
                (a, b) => a == b,
            }
    }

    /// The entry this one stands for: its PodGroup's, when `group` lists
    /// an equal one (the claim is then the group's, reserved for the
    /// group, which is returned too), else itself.
    pub fn in_group<'p, 'g: 'p>(
        &'p self,
        group: Option<&'g GroupClaims>,
    ) -> (&'p PodClaim, Option<&'g GroupClaims>) {
        match group.and_then(|g| Some((g.matching(self)?, g))) {
            Some((entry, g)) => (entry, Some(g)),
            None => (self, None),
        }
    }

    /// Whether the claim is generated from a template (owned by the pod, or
    /// by the group for a group's entry).
    pub fn from_template(&self) -> bool {
        matches!(self.source, ClaimSource::Template { .. })
    }
}

/// A PodGroup's `spec.resourceClaims` (KEP-5729): claims every member
/// whose own entry matches shares, reserved for the group, not the pods.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupClaims {
    /// The PodGroup's name and UID: the consumer its claims are reserved for.
    pub group: Arc<str>,
    pub uid: Arc<str>,
    /// Each entry, a template's resolved against the group's
    /// `status.resourceClaimStatuses`.
    pub entries: Vec<PodClaim>,
}

impl GroupClaims {
    /// The group's entry a pod's entry stands for: equal in every field
    /// (name, and claim or template name), as the API matches them.
    pub fn matching(&self, pc: &PodClaim) -> Option<&PodClaim> {
        self.entries.iter().find(|g| {
            g.name == pc.name
                && match (&g.source, &pc.source) {
                    (ClaimSource::Named(a), ClaimSource::Named(b)) => a == b,
                    (
                        ClaimSource::Template { template: a, .. },
                        ClaimSource::Template { template: b, .. },
                    ) => a == b,
                    _ => false,
                }
        })
    }
}

/// The keys (in the pod's `namespace`) of the claims `entries` name, as far
/// as they are known: a template's once generated.
pub fn claim_keys<'a>(
    entries: &'a [PodClaim],
    namespace: &'a str,
) -> impl Iterator<Item = super::PodKey> + 'a {
    entries.iter().filter_map(move |pc| match pc.resolve() {
        Resolved::Claim(n) => Some(super::PodKey::new(namespace, n)),
        _ => None,
    })
}

/// The entries of `spec.resourceClaims`, each resolved against the status.
pub fn pod_claims(
    spec: &[PodResourceClaimWire],
    status: &[PodResourceClaimStatusWire],
) -> Result<Vec<PodClaim>, ModelError> {
    entries(spec, status, MAX_POD_CLAIMS)
}

/// A pod's or a PodGroup's entries (at most `max`), each resolved against
/// the object's `status.resourceClaimStatuses`.
pub fn entries(
    spec: &[PodResourceClaimWire],
    status: &[PodResourceClaimStatusWire],
    max: usize,
) -> Result<Vec<PodClaim>, ModelError> {
    if spec.len() > max {
        return Err(ModelError::invalid(format!(
            "spec.resourceClaims: {} entries, at most {max} are supported",
            spec.len()
        )));
    }
    let mut out: Vec<PodClaim> = Vec::with_capacity(spec.len());
    for (i, c) in spec.iter().enumerate() {
        let field = format!("spec.resourceClaims[{i}]");
        if c.name.is_empty() {
            return Err(ModelError::invalid(format!("{field}.name: required")));
        }
        if out.iter().any(|o| *o.name == *c.name) {
            return Err(ModelError::invalid(format!(
                "{field}.name: duplicate name {:?}",
                c.name
            )));
        }
        let named = c.resource_claim_name.as_deref().filter(|n| !n.is_empty());
        let template = c
            .resource_claim_template_name
            .as_deref()
            .filter(|n| !n.is_empty());
        let source = match (named, template) {
            (Some(n), None) => ClaimSource::Named(Arc::from(n)),
            (None, Some(t)) => {
                let generated = match status.iter().find(|s| s.name == c.name) {
                    None => Generated::Pending,
                    Some(s) => match s.resource_claim_name.as_deref() {
                        Some(n) if !n.is_empty() => Generated::Claim(Arc::from(n)),
                        _ => Generated::NotNeeded,
                    },
                };
                ClaimSource::Template {
                    template: Arc::from(t),
                    generated,
                }
            }
            _ => {
                return Err(ModelError::invalid(format!(
                    "{field}: exactly one of resourceClaimName and resourceClaimTemplateName must be set"
                )));
            }
        };
        out.push(PodClaim {
            name: Arc::from(c.name.as_str()),
            source,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, claim: Option<&str>, template: Option<&str>) -> PodResourceClaimWire {
        PodResourceClaimWire {
            name: name.into(),
            resource_claim_name: claim.map(Into::into),
            resource_claim_template_name: template.map(Into::into),
        }
    }

    #[test]
    fn entries_resolve_against_the_status() {
        let spec = [
            entry("shared", Some("nvlink"), None),
            entry("gpu", None, Some("gpu-template")),
            entry("nic", None, Some("nic-template")),
            entry("x", None, Some("x-template")),
        ];
        let status = [
            PodResourceClaimStatusWire {
                name: "gpu".into(),
                resource_claim_name: Some("pod-gpu-abc12".into()),
            },
            PodResourceClaimStatusWire {
                name: "x".into(),
                resource_claim_name: None,
            },
        ];
        let claims = pod_claims(&spec, &status).unwrap();
        let resolved: Vec<_> = claims.iter().map(PodClaim::resolve).collect();
        assert_eq!(
            resolved,
            vec![
                Resolved::Claim("nvlink"),
                Resolved::Claim("pod-gpu-abc12"),
                Resolved::Pending,
                Resolved::NotNeeded
            ]
        );
        assert!(!claims[0].from_template() && claims[1].from_template());
    }

    #[test]
    fn malformed_entries_are_refused_naming_the_field() {
        let both = pod_claims(&[entry("a", Some("c"), Some("t"))], &[]).unwrap_err();
        assert!(
            both.0.contains("spec.resourceClaims[0]: exactly one"),
            "{both}"
        );
        let neither = pod_claims(&[entry("a", None, None)], &[]).unwrap_err();
        assert!(neither.0.contains("exactly one"), "{neither}");
        let dup = pod_claims(
            &[entry("a", Some("c"), None), entry("a", Some("d"), None)],
            &[],
        )
        .unwrap_err();
        assert!(dup.0.contains("duplicate name"), "{dup}");
        let many: Vec<_> = (0..=MAX_POD_CLAIMS)
            .map(|i| entry(&format!("c{i}"), Some("c"), None))
            .collect();
        assert!(pod_claims(&many, &[]).is_err());
    }
}
