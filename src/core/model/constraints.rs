//! What a pod asks of where it runs beyond its requests: its node selector
//! and node affinity, inter-pod (anti-)affinity, tolerations, host ports,
//! resource claims, volumes and topology spread.
//!
//! Most pods set none of these, and a template's replicas set the same
//! ones, so a pod holds them behind one `Arc` that the pod informer shares
//! between equal sets (`shared::PodPools`, `PodInfo::share_with`): inline
//! they were ~300 of a pod's ~630 bytes (memory per object).

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use super::pod::HostPort;
use super::spread::PodSpread;
use super::volumes::PodVolume;
use super::{NodeSelector, PodAffinity, PreferredTerm, Toleration};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Constraints {
    pub node_selector: BTreeMap<String, String>,
    pub required_affinity: Option<NodeSelector>,
    pub preferred_affinity: Vec<PreferredTerm>,
    /// Inter-pod affinity and anti-affinity (`podAffinity`, `podAntiAffinity`).
    pub pod_affinity: PodAffinity,
    pub tolerations: Vec<Toleration>,
    pub host_ports: Vec<HostPort>,
    /// `spec.resourceClaims`, each resolved to its ResourceClaim as far as
    /// the pod's status says (`plugins::dynamic_resources`).
    pub resource_claims: Vec<super::pod_claims::PodClaim>,
    /// The volumes the volume plugins read (claims, inline CSI, in-tree
    /// disks); empty for most pods.
    pub volumes: Vec<PodVolume>,
    /// `spec.topologySpreadConstraints`, parsed, and the controller reference
    /// default constraints read.
    pub spread: PodSpread,
    /// Containers requesting extended resources a DeviceClass may serve
    /// (`plugins::dynamic_resources::extended`); empty for most pods.
    pub extended: Vec<super::extended::ContainerExtended>,
}

/// Hashes the parts that tell sets apart cheaply — the node selector, the
/// host ports, claims and volumes (a StatefulSet's replicas differ only in
/// their volume claims), the controller, and how many of each other kind
/// there are. Equal sets hash equal, which is all a `Pool` needs; sets that
/// differ only in the terms' contents share a hash and are told apart by
/// `Eq`.
impl Hash for Constraints {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let Constraints {
            node_selector,
            required_affinity,
            preferred_affinity,
            pod_affinity,
            tolerations,
            host_ports,
            resource_claims,
            volumes,
            spread,
            extended,
        } = self;
        node_selector.hash(state);
        required_affinity
            .as_ref()
            .map(|a| a.terms.len())
            .hash(state);
        preferred_affinity.len().hash(state);
        [
            pod_affinity.required_affinity.len(),
            pod_affinity.required_anti_affinity.len(),
            pod_affinity.preferred_affinity.len(),
            pod_affinity.preferred_anti_affinity.len(),
        ]
        .hash(state);
        tolerations.len().hash(state);
        host_ports.hash(state);
        resource_claims.hash(state);
        volumes.hash(state);
        spread.constraints.len().hash(state);
        spread.controller.hash(state);
        extended.hash(state);
    }
}

impl Constraints {
    /// Equal but for the names of the claims generated from templates for
    /// each pod (two replicas' claims, made from one template, have their
    /// own names): whether the claims ask the same is the caller's to
    /// compare (`Claim::same_demand`).
    pub fn same_but_generated_claims(&self, other: &Constraints) -> bool {
        let Constraints {
            node_selector,
            required_affinity,
            preferred_affinity,
            pod_affinity,
            tolerations,
            host_ports,
            resource_claims,
            volumes,
            spread,
            extended,
        } = self;
        node_selector == &other.node_selector
            && required_affinity == &other.required_affinity
            && preferred_affinity == &other.preferred_affinity
            && pod_affinity == &other.pod_affinity
            && tolerations == &other.tolerations
            && host_ports == &other.host_ports
            && resource_claims.len() == other.resource_claims.len()
            && resource_claims
                .iter()
                .zip(&other.resource_claims)
                .all(|(a, b)| a.same_but_generated_name(b))
            && volumes == &other.volumes
            && spread == &other.spread
            && extended == &other.extended
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::shared::Pool;
    use std::sync::Arc;

    fn claim(name: &str) -> PodVolume {
        PodVolume::Claim {
            claim: Arc::from(name),
            ephemeral: false,
            template_class: None,
        }
    }

    #[test]
    fn equal_sets_share_and_replicas_with_their_own_claims_do_not() {
        let mut pool: Pool<Constraints> = Pool::default();
        let a = pool.share(Arc::new(Constraints::default()));
        let b = pool.share(Arc::new(Constraints::default()));
        assert!(
            Arc::ptr_eq(&a, &b),
            "every pod without constraints holds one set"
        );
        let with = |v: &str| {
            Arc::new(Constraints {
                volumes: vec![claim(v)],
                ..Constraints::default()
            })
        };
        let first = pool.share(with("data-web-0"));
        let second = pool.share(with("data-web-1"));
        assert!(!Arc::ptr_eq(&first, &second));
        assert!(Arc::ptr_eq(&pool.share(with("data-web-0")), &first));
        assert_eq!(pool.len(), 3);
    }

    #[test]
    fn sets_that_differ_only_in_a_terms_content_share_a_hash_and_stay_apart() {
        use crate::model::Toleration;
        let toleration = |key: &str| Toleration {
            key: key.into(),
            exists: true,
            value: String::new(),
            effect: None,
        };
        let one = Constraints {
            tolerations: vec![toleration("gpu")],
            ..Constraints::default()
        };
        let other = Constraints {
            tolerations: vec![toleration("tpu")],
            ..Constraints::default()
        };
        let hash = |c: &Constraints| {
            use std::hash::BuildHasher;
            foldhash::fast::FixedState::default().hash_one(c)
        };
        assert_eq!(hash(&one), hash(&other));
        let mut pool: Pool<Constraints> = Pool::default();
        let a = pool.share(Arc::new(one));
        let b = pool.share(Arc::new(other.clone()));
        assert!(!Arc::ptr_eq(&a, &b));
        assert_eq!(*b, other);
    }
}
