//! CompositePodGroup hierarchies: the parent → children index, the walk
//! from a PodGroup up to its root (missing parents, cycles, depth), whether
//! a composite's `minGroupCount` children are at their own quorum, and the
//! scope a gang composite's barrier spans (every PodGroup under its topmost
//! gang ancestor: released together, rejected together).
//!
//! Walks are bounded by `MAX_HIERARCHY_DEPTH`, so a cycle a tenant writes
//! can never loop.

use std::collections::{BTreeSet, HashMap};

use crate::cache::Cache;
use crate::model::{
    DefinitionKey, GroupDef, GroupKey, GroupPolicy, GroupSource, MAX_HIERARCHY_DEPTH,
};

use super::GangScheduling;

/// Parent composite → the definitions naming it as their parent.
#[derive(Debug, Default)]
pub(super) struct Children(HashMap<DefinitionKey, BTreeSet<DefinitionKey>>);

impl Children {
    pub(super) fn link(&mut self, def: &GroupDef) {
        if let Some(parent) = def.parent_key() {
            self.0.entry(parent).or_default().insert(def.key.clone());
        }
    }

    pub(super) fn unlink(&mut self, def: &GroupDef) {
        if let Some(parent) = def.parent_key()
            && let Some(set) = self.0.get_mut(&parent)
        {
            set.remove(&def.key);
            if set.is_empty() {
                self.0.remove(&parent);
            }
        }
    }

    fn of(&self, key: &DefinitionKey) -> impl Iterator<Item = &DefinitionKey> {
        self.0.get(key).into_iter().flatten()
    }
}

/// Why a PodGroup's hierarchy cannot be used (yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainError {
    /// A parent is not observed: wait for it.
    Missing(String),
    /// The hierarchy is malformed (cycle, too deep, an invalid composite).
    Invalid(String),
}

/// What a subtree is counted by: members observed (the gate) or members
/// assumed or bound (the barrier).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    Observed,
    Placed,
}

impl GangScheduling {
    /// The composites above `key`, nearest first; empty for a root.
    pub fn ancestors(&self, key: &DefinitionKey) -> Result<Vec<DefinitionKey>, ChainError> {
        let mut chain: Vec<DefinitionKey> = Vec::new();
        let mut current = key.clone();
        while let Some(parent) = self.defs.get(&current).and_then(GroupDef::parent_key) {
            if parent == *key || chain.contains(&parent) {
                let mut path: Vec<String> = std::iter::once(key.to_string())
                    .chain(chain.iter().map(ToString::to_string))
                    .collect();
                path.push(parent.to_string());
                return Err(ChainError::Invalid(format!(
                    "the CompositePodGroup hierarchy of {key} has a cycle: {}",
                    path.join(" -> ")
                )));
            }
            let Some(def) = self.defs.get(&parent) else {
                return Err(ChainError::Missing(format!(
                    "waiting for {parent} (the parent of {current}) to be created; parent names are namespace-local, so it must be in namespace {}",
                    parent.namespace
                )));
            };
            if let Some(why) = &def.unsupported {
                return Err(ChainError::Invalid(why.clone()));
            }
            if let Err(msg) = &def.policy {
                return Err(ChainError::Invalid(format!("{parent} is invalid: {msg}")));
            }
            chain.push(parent.clone());
            // Levels: the PodGroup plus its composites.
            if chain.len() >= MAX_HIERARCHY_DEPTH {
                let path: Vec<String> = std::iter::once(key.to_string())
                    .chain(chain.iter().map(ToString::to_string))
                    .collect();
                return Err(ChainError::Invalid(format!(
                    "the CompositePodGroup hierarchy of {key} is deeper than {MAX_HIERARCHY_DEPTH} levels: {}",
                    path.join(" -> ")
                )));
            }
            current = parent;
        }
        Ok(chain)
    }

    /// The topmost gang composite above `key`, if its hierarchy is usable.
    fn top_gang(&self, key: &DefinitionKey) -> Option<DefinitionKey> {
        let chain = self.ancestors(key).ok()?;
        chain.into_iter().rev().find(|c| {
            matches!(
                self.defs.get(c).map(|d| &d.policy),
                Some(Ok(GroupPolicy::Gang { .. }))
            )
        })
    }

    /// The creation time a definition's members are queued by: the topmost
    /// gang composite's for a child of one, so that the children of one
    /// composite sort together (a subtree is tried as a unit, as far as the
    /// queue can), else the definition's own.
    pub(super) fn queue_created_ms(&self, def: &GroupDef) -> i64 {
        if def.parent_key().is_none() {
            return def.created_ms;
        }
        self.top_gang(&def.key)
            .and_then(|top| self.defs.get(&top))
            .map_or(def.created_ms, |top| top.created_ms)
    }

    /// The groups a member's barrier spans: every PodGroup under the topmost
    /// gang composite above it, or `None` when no gang composite is above.
    pub fn barrier_scope(&self, group: &GroupKey) -> Option<Vec<GroupKey>> {
        let top = self.top_gang(&group.definition)?;
        Some(
            self.leaves_under(&top)
                .into_iter()
                .map(GroupKey::new)
                .collect(),
        )
    }

    /// The PodGroups whose gate or barrier a change of `key` (a PodGroup
    /// or a composite, added, changed or removed) can affect: those under
    /// the topmost observed ancestor, and under `key` itself.
    pub fn hierarchy_affected(&self, key: &DefinitionKey) -> Vec<DefinitionKey> {
        let mut top = key.clone();
        for _ in 0..MAX_HIERARCHY_DEPTH {
            match self.defs.get(&top).and_then(GroupDef::parent_key) {
                Some(p) if self.defs.contains_key(&p) && p != *key => top = p,
                _ => break,
            }
        }
        let mut leaves = self.leaves_under(&top);
        if top != *key {
            leaves.extend(self.leaves_under(key));
        }
        leaves.retain(|l| l != key);
        leaves.sort();
        leaves.dedup();
        leaves
    }

    /// The PodGroups below `key` (bounded depth, each once), or `key` itself
    /// if it is a PodGroup.
    pub(super) fn leaves_under(&self, key: &DefinitionKey) -> Vec<DefinitionKey> {
        let mut leaves = Vec::new();
        let mut seen = BTreeSet::new();
        let mut level = vec![key.clone()];
        for _ in 0..=MAX_HIERARCHY_DEPTH {
            let mut next = Vec::new();
            for k in level {
                if !seen.insert(k.clone()) {
                    continue;
                }
                if k.source == GroupSource::CompositePodGroup {
                    next.extend(self.children.of(&k).cloned());
                } else {
                    leaves.push(k);
                }
            }
            level = next;
        }
        leaves
    }

    /// Whether every gang composite above the group has `minGroupCount`
    /// children at their quorum, counted by `count`; `Err` says which one
    /// is short and by how much.
    pub fn chain_satisfied(
        &self,
        group: &GroupKey,
        cache: &Cache,
        count: Count,
    ) -> Result<(), String> {
        let chain = self.ancestors(&group.definition).map_err(|e| match e {
            ChainError::Missing(m) | ChainError::Invalid(m) => m,
        })?;
        for composite in &chain {
            if let Some(Ok(GroupPolicy::Gang { min_count, .. })) =
                self.defs.get(composite).map(|d| &d.policy)
            {
                let ready = self.children_ready(composite, cache, count, 0);
                if ready < u64::from(*min_count) {
                    return Err(format!(
                        "{composite}: {ready}/{min_count} child groups have their quorum {} (minGroupCount)",
                        match count {
                            Count::Observed => "of pods observed",
                            Count::Placed => "assumed or bound",
                        }
                    ));
                }
            }
        }
        Ok(())
    }

    /// A gang composite's children with their quorum observed, and its
    /// `minGroupCount` (for its gating status).
    pub fn composite_readiness(&self, key: &DefinitionKey, cache: &Cache) -> Option<(u64, u32)> {
        match self.defs.get(key).map(|d| &d.policy) {
            Some(Ok(GroupPolicy::Gang { min_count, .. }))
                if key.source == GroupSource::CompositePodGroup =>
            {
                Some((
                    self.children_ready(key, cache, Count::Observed, 0),
                    *min_count,
                ))
            }
            _ => None,
        }
    }

    /// How many children of a composite are at their own quorum.
    fn children_ready(
        &self,
        key: &DefinitionKey,
        cache: &Cache,
        count: Count,
        depth: usize,
    ) -> u64 {
        let ready = self
            .children
            .of(key)
            .filter(|c| self.subtree_ready(c, cache, count, depth.saturating_add(1)))
            .count();
        u64::try_from(ready).unwrap_or(u64::MAX)
    }

    /// A PodGroup is ready at its own quorum (a basic one with one member);
    /// a gang composite with `minGroupCount` ready children; a basic
    /// composite (no constraint of its own) with any ready child.
    fn subtree_ready(
        &self,
        key: &DefinitionKey,
        cache: &Cache,
        count: Count,
        depth: usize,
    ) -> bool {
        if depth > MAX_HIERARCHY_DEPTH {
            return false;
        }
        let Some(def) = self.defs.get(key) else {
            return false;
        };
        if def.unsupported.is_some() {
            return false;
        }
        match (&def.policy, key.source) {
            (Ok(policy), GroupSource::CompositePodGroup) => {
                let ready = self.children_ready(key, cache, count, depth);
                match policy {
                    GroupPolicy::Gang { min_count, .. } => ready >= u64::from(*min_count),
                    GroupPolicy::Basic => ready > 0,
                }
            }
            (Ok(_), _) => self.own_quorum_met(&GroupKey::new(key.clone()), cache, count),
            (Err(_), _) => false,
        }
    }

    /// The group's own quorum (a basic group's is one member), by `count`.
    pub(super) fn own_quorum_met(&self, group: &GroupKey, cache: &Cache, count: Count) -> bool {
        let need = match self.policy(group) {
            Ok(GroupPolicy::Gang { min_count, .. }) => min_count,
            Ok(GroupPolicy::Basic) => 1,
            Err(_) => return false,
        };
        match count {
            Count::Placed => self.quorum_met(cache, group, need),
            Count::Observed => cache
                .group(group)
                .is_some_and(|m| m.observed() >= usize::try_from(need).unwrap_or(usize::MAX)),
        }
    }
}
