//! `VolumeFacts`: the storage objects the volume plugins read (claims,
//! volumes, classes, CSINodes, CSIDrivers), kept up to date by informer
//! events (`VolumeChange`).
//!
//! The index sits behind an `Arc` so a plugin can keep the cycle's view in
//! its `CycleState` for the price of a reference count; the next update
//! copies it only if a cycle still holds it (it never does between cycles).

use std::collections::HashMap;
use std::sync::Arc;

use crate::model::volumes::{Claim, ClaimKey, CsiDriver, CsiNode, PersistentVolume, StorageClass};

/// One storage object observed, changed or deleted.
#[derive(Debug, Clone)]
pub enum VolumeChange {
    ClaimUpserted(Arc<Claim>),
    ClaimDeleted(ClaimKey),
    VolumeUpserted(Arc<PersistentVolume>),
    VolumeDeleted(Arc<str>),
    ClassUpserted(Arc<StorageClass>),
    ClassDeleted(Arc<str>),
    CsiNodeUpserted(Arc<CsiNode>),
    CsiNodeDeleted(Arc<str>),
    CsiDriverUpserted(Arc<CsiDriver>),
    CsiDriverDeleted(Arc<str>),
}

#[derive(Debug, Default, Clone)]
struct Index {
    claims: HashMap<ClaimKey, Arc<Claim>>,
    volumes: HashMap<Arc<str>, Arc<PersistentVolume>>,
    classes: HashMap<Arc<str>, Arc<StorageClass>>,
    csi_nodes: HashMap<Arc<str>, Arc<CsiNode>>,
    drivers: HashMap<Arc<str>, Arc<CsiDriver>>,
}

/// The cluster's storage objects, as far as placement reads them.
#[derive(Debug, Default, Clone)]
pub struct VolumeFacts {
    index: Arc<Index>,
}

/// Inserts unless equal; returns whether the map changed.
fn upsert<K: std::hash::Hash + Eq, V: PartialEq>(
    map: &mut HashMap<K, Arc<V>>,
    key: K,
    value: Arc<V>,
) -> bool {
    if map.get(&key).is_some_and(|old| **old == *value) {
        return false;
    }
    map.insert(key, value);
    true
}

impl VolumeFacts {
    /// Applies one change; returns whether anything placement reads changed.
    pub fn apply(&mut self, change: VolumeChange) -> bool {
        // Skip the copy-on-write for no-op changes (resyncs).
        if !self.would_change(&change) {
            return false;
        }
        let ix = Arc::make_mut(&mut self.index);
        match change {
            VolumeChange::ClaimUpserted(c) => upsert(&mut ix.claims, c.key.clone(), c),
            VolumeChange::ClaimDeleted(k) => ix.claims.remove(&k).is_some(),
            VolumeChange::VolumeUpserted(v) => upsert(&mut ix.volumes, v.name.clone(), v),
            VolumeChange::VolumeDeleted(n) => ix.volumes.remove(&n).is_some(),
            VolumeChange::ClassUpserted(c) => upsert(&mut ix.classes, c.name.clone(), c),
            VolumeChange::ClassDeleted(n) => ix.classes.remove(&n).is_some(),
            VolumeChange::CsiNodeUpserted(c) => upsert(&mut ix.csi_nodes, c.name.clone(), c),
            VolumeChange::CsiNodeDeleted(n) => ix.csi_nodes.remove(&n).is_some(),
            VolumeChange::CsiDriverUpserted(d) => upsert(&mut ix.drivers, d.name.clone(), d),
            VolumeChange::CsiDriverDeleted(n) => ix.drivers.remove(&n).is_some(),
        }
    }

    fn would_change(&self, change: &VolumeChange) -> bool {
        let ix = &self.index;
        match change {
            VolumeChange::ClaimUpserted(c) => ix.claims.get(&c.key) != Some(c),
            VolumeChange::ClaimDeleted(k) => ix.claims.contains_key(k),
            VolumeChange::VolumeUpserted(v) => ix.volumes.get(&v.name) != Some(v),
            VolumeChange::VolumeDeleted(n) => ix.volumes.contains_key(n),
            VolumeChange::ClassUpserted(c) => ix.classes.get(&c.name) != Some(c),
            VolumeChange::ClassDeleted(n) => ix.classes.contains_key(n),
            VolumeChange::CsiNodeUpserted(c) => ix.csi_nodes.get(&c.name) != Some(c),
            VolumeChange::CsiNodeDeleted(n) => ix.csi_nodes.contains_key(n),
            VolumeChange::CsiDriverUpserted(d) => ix.drivers.get(&d.name) != Some(d),
            VolumeChange::CsiDriverDeleted(n) => ix.drivers.contains_key(n),
        }
    }

    pub fn claim(&self, namespace: &str, name: &str) -> Option<&Arc<Claim>> {
        // `ClaimKey` owns `Arc<str>`s; a lookup by borrowed parts would need a
        // second map, and claims are few per pod.
        self.index.claims.get(&ClaimKey::new(namespace, name))
    }

    pub fn volume(&self, name: &str) -> Option<&Arc<PersistentVolume>> {
        self.index.volumes.get(name)
    }

    pub fn class(&self, name: &str) -> Option<&Arc<StorageClass>> {
        self.index.classes.get(name)
    }

    pub fn csi_node(&self, name: &str) -> Option<&Arc<CsiNode>> {
        self.index.csi_nodes.get(name)
    }

    pub fn csi_driver(&self, name: &str) -> Option<&Arc<CsiDriver>> {
        self.index.drivers.get(name)
    }

    /// Every volume (for matching unbound claims).
    pub fn volumes(&self) -> impl Iterator<Item = &Arc<PersistentVolume>> {
        self.index.volumes.values()
    }

    /// Whether nothing storage-related was observed (the common case for
    /// clusters without volumes).
    pub fn is_empty(&self) -> bool {
        let ix = &self.index;
        ix.claims.is_empty()
            && ix.volumes.is_empty()
            && ix.classes.is_empty()
            && ix.csi_nodes.is_empty()
            && ix.drivers.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::volumes::{AccessModes, Claim};

    fn claim(name: &str, bound: bool) -> Arc<Claim> {
        Arc::new(Claim {
            key: ClaimKey::new("ns", name),
            uid: Arc::from("u"),
            deleting: false,
            access_modes: AccessModes::RWO,
            request_bytes: 0,
            selector: None,
            storage_class: None,
            volume_name: None,
            block: false,
            bound,
        })
    }

    #[test]
    fn changes_report_whether_they_changed_anything() {
        let mut f = VolumeFacts::default();
        assert!(f.is_empty());
        assert!(f.apply(VolumeChange::ClaimUpserted(claim("a", false))));
        assert!(!f.apply(VolumeChange::ClaimUpserted(claim("a", false))));
        assert!(f.apply(VolumeChange::ClaimUpserted(claim("a", true))));
        assert!(f.claim("ns", "a").is_some_and(|c| c.bound));
        // A snapshot held by a cycle keeps its view.
        let held = f.clone();
        assert!(f.apply(VolumeChange::ClaimDeleted(ClaimKey::new("ns", "a"))));
        assert!(held.claim("ns", "a").is_some() && f.claim("ns", "a").is_none());
        assert!(!f.apply(VolumeChange::ClaimDeleted(ClaimKey::new("ns", "a"))));
    }
}
