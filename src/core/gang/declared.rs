//! The topology hierarchies a cluster declares: Kueue `Topology` objects,
//! Volcano `HyperNode`s and the plugin's `topologyLevels`, as observed.
//! A generation counts changes, so the domain indexes built from them know
//! when to rebuild.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::model::topology::{HyperNodeDef, TopologyChange, TopologyDef};

#[derive(Debug, Clone, Default)]
pub struct DeclaredTopologies {
    topologies: BTreeMap<Arc<str>, TopologyDef>,
    hyper_nodes: BTreeMap<Arc<str>, HyperNodeDef>,
    /// `topologyLevels` of the GangScheduling plugin args, outermost first.
    plugin_levels: Vec<Arc<str>>,
    generation: u64,
}

impl DeclaredTopologies {
    /// Applies one observed change; true when something changed.
    pub fn apply(&mut self, change: TopologyChange) -> bool {
        let changed = match change {
            TopologyChange::TopologyUpserted(def) => {
                self.topologies.insert(def.name.clone(), def.clone()) != Some(def)
            }
            TopologyChange::TopologyDeleted(name) => self.topologies.remove(&name).is_some(),
            TopologyChange::HyperNodeUpserted(def) => {
                self.hyper_nodes.insert(def.name.clone(), def.clone()) != Some(def)
            }
            TopologyChange::HyperNodeDeleted(name) => self.hyper_nodes.remove(&name).is_some(),
        };
        if changed {
            self.generation = self.generation.wrapping_add(1);
        }
        changed
    }

    /// Sets the plugin's `topologyLevels`.
    pub fn set_plugin_levels(&mut self, levels: Vec<Arc<str>>) {
        if self.plugin_levels != levels {
            self.plugin_levels = levels;
            self.generation = self.generation.wrapping_add(1);
        }
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Kueue `Topology` objects by name.
    pub fn topologies(&self) -> impl Iterator<Item = &TopologyDef> {
        self.topologies.values()
    }

    /// Volcano `HyperNode`s by name.
    pub fn hyper_nodes(&self) -> &BTreeMap<Arc<str>, HyperNodeDef> {
        &self.hyper_nodes
    }

    pub fn plugin_levels(&self) -> &[Arc<str>] {
        &self.plugin_levels
    }
}
