//! The levels of a topology hierarchy and the domains each level cuts the
//! node table into.
//!
//! A level a group names is found in a hierarchy: a node label in the first
//! Kueue `Topology` (by name) that lists it, else in the plugin's
//! `topologyLevels`, else a hierarchy of that one label; a Volcano tier in
//! the HyperNode tree. In a label hierarchy a node's domain at a level is
//! its values of that label and of every outer one (Kueue's domain IDs: rack
//! `r1` of block `b1` and rack `r1` of block `b2` are different racks); a
//! node missing any of them is in no domain of that level. In the HyperNode
//! tree it is the HyperNode of that tier above the node.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::cache::NodeState;
use crate::model::LevelRef;
use crate::model::topology::{HyperNodeDef, HyperNodeMemberKind, MemberSelector};

use super::DeclaredTopologies;

/// A hierarchy's levels, outermost first, and where it was declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    /// For messages: `Topology default`, `topologyLevels`, `HyperNodes`.
    pub source: String,
    pub levels: Vec<LevelRef>,
}

/// The hierarchy `level` belongs to and its index there.
pub fn resolve(declared: &DeclaredTopologies, level: &LevelRef) -> (Hierarchy, usize) {
    match level {
        LevelRef::Label(key) => {
            let labels =
                |levels: &[Arc<str>]| levels.iter().map(|l| LevelRef::Label(l.clone())).collect();
            if let Some(t) = declared.topologies().find(|t| t.levels.contains(key)) {
                let index = t.levels.iter().position(|l| l == key).unwrap_or(0);
                let source = format!("Topology {}", t.name);
                return (
                    Hierarchy {
                        source,
                        levels: labels(&t.levels),
                    },
                    index,
                );
            }
            let plugin = declared.plugin_levels();
            if let Some(index) = plugin.iter().position(|l| l == key) {
                let source = "topologyLevels".to_string();
                return (
                    Hierarchy {
                        source,
                        levels: labels(plugin),
                    },
                    index,
                );
            }
            let source = format!("node label {key}");
            (
                Hierarchy {
                    source,
                    levels: vec![level.clone()],
                },
                0,
            )
        }
        LevelRef::TierName(name) => {
            // The tier of the HyperNodes carrying that `tierName`.
            let tier = declared
                .hyper_nodes()
                .values()
                .find(|h| h.tier_name.as_deref() == Some(&**name))
                .map(|h| h.tier);
            match tier {
                Some(t) => resolve(declared, &LevelRef::Tier(t)),
                None => {
                    let source = "HyperNodes".to_string();
                    (
                        Hierarchy {
                            source,
                            levels: vec![level.clone()],
                        },
                        0,
                    )
                }
            }
        }
        LevelRef::Tier(tier) => {
            // Tiers outermost first: the highest declared down to 1.
            let top = declared
                .hyper_nodes()
                .values()
                .map(|h| h.tier)
                .max()
                .unwrap_or(0)
                .max(*tier);
            let levels: Vec<LevelRef> = (1..=top).rev().map(LevelRef::Tier).collect();
            let index = levels.iter().position(|l| l == level).unwrap_or(0);
            let source = "HyperNodes".to_string();
            (Hierarchy { source, levels }, index)
        }
    }
}

/// Node indices (ascending) by domain of `hierarchy.levels[level]`.
pub fn domains_of_level(
    nodes: &[NodeState],
    declared: &DeclaredTopologies,
    hierarchy: &Hierarchy,
    level: usize,
) -> BTreeMap<String, Vec<usize>> {
    let Some(LevelRef::Tier(tier)) = hierarchy.levels.get(level) else {
        return label_domains(
            nodes,
            &hierarchy.levels[..=level.min(hierarchy.levels.len().saturating_sub(1))],
        );
    };
    let tree = HyperNodeTree::build(declared.hyper_nodes(), nodes);
    let mut out: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for i in 0..nodes.len() {
        if let Some(name) = tree.domain(i, *tier) {
            out.entry(name.to_string()).or_default().push(i);
        }
    }
    out
}

/// Domains of the innermost of `levels` (all labels): the node's values of
/// every one of them, joined with `/`.
fn label_domains(nodes: &[NodeState], levels: &[LevelRef]) -> BTreeMap<String, Vec<usize>> {
    let mut out: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    'nodes: for (i, node) in nodes.iter().enumerate() {
        let mut id = String::new();
        for level in levels {
            let LevelRef::Label(key) = level else {
                continue 'nodes;
            };
            let Some(value) = node.info.labels.get(&**key) else {
                continue 'nodes;
            };
            if !id.is_empty() {
                id.push('/');
            }
            id.push_str(value);
        }
        out.entry(id).or_default().push(i);
    }
    out
}

/// Which HyperNode of each tier every node is under.
struct HyperNodeTree<'a> {
    /// Node index → the HyperNode of the lowest tier holding it directly.
    leaf: HashMap<usize, &'a HyperNodeDef>,
    /// HyperNode → the HyperNode of a higher tier holding it.
    parent: HashMap<&'a str, &'a HyperNodeDef>,
}

impl<'a> HyperNodeTree<'a> {
    fn build(hyper_nodes: &'a BTreeMap<Arc<str>, HyperNodeDef>, nodes: &[NodeState]) -> Self {
        let mut leaf: HashMap<usize, &HyperNodeDef> = HashMap::new();
        let mut parent: HashMap<&str, &HyperNodeDef> = HashMap::new();
        // By name, so a node or HyperNode claimed twice goes to the first.
        for h in hyper_nodes.values() {
            for m in &h.members {
                let matcher = Matcher::new(&m.selector);
                match m.kind {
                    HyperNodeMemberKind::Node => {
                        for (i, node) in nodes.iter().enumerate() {
                            if matcher.selects_node(node) {
                                leaf.entry(i).or_insert(h);
                            }
                        }
                    }
                    HyperNodeMemberKind::HyperNode => {
                        for child in hyper_nodes.values() {
                            // A parent is always of a higher tier: no cycles.
                            if child.tier < h.tier && matcher.selects_name(&child.name) {
                                parent.entry(&child.name).or_insert(h);
                            }
                        }
                    }
                }
            }
        }
        HyperNodeTree { leaf, parent }
    }

    /// The HyperNode of `tier` above node `i`, if any.
    fn domain(&self, i: usize, tier: u32) -> Option<&'a str> {
        let mut at = *self.leaf.get(&i)?;
        // Tiers strictly rise along parents, so this ends.
        loop {
            if at.tier == tier {
                return Some(&at.name);
            }
            if at.tier > tier {
                return None;
            }
            at = self.parent.get(&*at.name)?;
        }
    }
}

/// A member selector, its pattern compiled once.
enum Matcher<'a> {
    Exact(&'a str),
    /// `None`: a pattern that does not compile (refused when the object was
    /// read; matches nothing here).
    Regex(Option<regex::Regex>),
    Labels(&'a crate::model::LabelSelector),
}

impl<'a> Matcher<'a> {
    fn new(selector: &'a MemberSelector) -> Self {
        match selector {
            MemberSelector::Exact(n) => Matcher::Exact(n),
            MemberSelector::Regex(p) => Matcher::Regex(regex::Regex::new(p).ok()),
            MemberSelector::Labels(sel) => Matcher::Labels(sel),
        }
    }

    fn selects_name(&self, name: &str) -> bool {
        match self {
            Matcher::Exact(n) => *n == name,
            Matcher::Regex(r) => r.as_ref().is_some_and(|r| r.is_match(name)),
            Matcher::Labels(_) => false,
        }
    }

    fn selects_node(&self, node: &NodeState) -> bool {
        match self {
            Matcher::Labels(sel) => sel.matches(&node.info.labels),
            other => other.selects_name(&node.info.name),
        }
    }
}
