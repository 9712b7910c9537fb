//! `ImageSpread`: on how many nodes each image name is present, kept as
//! nodes come, change and go. `ImageLocality` scales an image's size by the
//! share of nodes that have it, so that a popular image does not draw every
//! pod to the few nodes that pulled it first.

use std::collections::HashMap;
use std::sync::Arc;

use crate::model::NodeInfo;

#[derive(Debug, Default, Clone)]
pub struct ImageSpread {
    nodes_with: HashMap<Arc<str>, u32>,
}

impl ImageSpread {
    /// Counts `node`'s images.
    pub fn add_node(&mut self, node: &NodeInfo) {
        for (name, _) in &node.images {
            let n = self.nodes_with.entry(name.clone()).or_default();
            *n = n.saturating_add(1);
        }
    }

    /// Uncounts `node`'s images (the node left, or is about to be replaced).
    pub fn remove_node(&mut self, node: &NodeInfo) {
        for (name, _) in &node.images {
            if let Some(n) = self.nodes_with.get_mut(name) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.nodes_with.remove(name);
                }
            }
        }
    }

    /// On how many nodes `name` is present.
    pub fn nodes_with(&self, name: &str) -> u32 {
        self.nodes_with.get(name).copied().unwrap_or(0)
    }

    /// No node reports any image.
    pub fn is_empty(&self) -> bool {
        self.nodes_with.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Resources;

    fn node(images: &[&str]) -> NodeInfo {
        let mut n = NodeInfo::new("n", Resources::default());
        n.images = images.iter().map(|i| (Arc::from(*i), 1)).collect();
        n
    }

    #[test]
    fn counts_follow_nodes() {
        let mut s = ImageSpread::default();
        s.add_node(&node(&["a:1", "b:1"]));
        s.add_node(&node(&["a:1"]));
        assert_eq!(s.nodes_with("a:1"), 2);
        s.remove_node(&node(&["a:1", "b:1"]));
        assert_eq!(s.nodes_with("a:1"), 1);
        assert_eq!(s.nodes_with("b:1"), 0);
        s.remove_node(&node(&["a:1"]));
        assert!(s.is_empty());
    }
}
