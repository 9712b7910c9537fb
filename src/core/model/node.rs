//! `NodeInfo`: the static facts about a node that scheduling reads.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::wire::{NodeWire, QuantityWire};
use super::{ModelError, Resources, Taint};

#[derive(Debug, Clone, PartialEq)]
pub struct NodeInfo {
    pub name: Arc<str>,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub unschedulable: bool,
    pub allocatable: Resources,
    /// Every name of every image present (`status.images[].names`), sorted,
    /// with the image's size in bytes: what `ImageLocality` looks up.
    pub images: Vec<(Arc<str>, i64)>,
}

/// The most image names read from one node: the kubelet reports 50 images
/// by default (`nodeStatusMaxImages`), each under a few names.
pub const MAX_NODE_IMAGE_NAMES: usize = 1024;

impl NodeInfo {
    /// A node with the given allocatable resources and no labels or taints.
    pub fn new(name: &str, allocatable: Resources) -> Self {
        NodeInfo {
            name: Arc::from(name),
            labels: BTreeMap::new(),
            taints: Vec::new(),
            unschedulable: false,
            allocatable,
            images: Vec::new(),
        }
    }

    pub fn from_wire(w: &NodeWire) -> Result<Self, ModelError> {
        let name = w
            .metadata
            .name
            .as_deref()
            .filter(|n| !n.is_empty())
            .ok_or_else(|| ModelError::invalid("node has no metadata.name"))?;
        // Allocatable is what the kubelet reports as schedulable; fall back to
        // capacity for nodes that report only that (kwok templates sometimes do).
        let source = if w.status.allocatable.is_empty() {
            &w.status.capacity
        } else {
            &w.status.allocatable
        };
        let allocatable =
            quantities(source).map_err(|e| ModelError::invalid(format!("node {name}: {e}")))?;
        let taints = w
            .spec
            .taints
            .iter()
            .map(Taint::from_wire)
            .collect::<Result<_, _>>()
            .map_err(|e| ModelError::invalid(format!("node {name}: {e}")))?;
        Ok(NodeInfo {
            name: Arc::from(name),
            labels: w.metadata.labels.clone(),
            taints,
            unschedulable: w.spec.unschedulable.unwrap_or(false),
            allocatable,
            images: images(w),
        })
    }

    pub fn from_json(json: &[u8]) -> Result<Self, ModelError> {
        let wire: NodeWire = serde_json::from_slice(json)
            .map_err(|e| ModelError::invalid(format!("node JSON: {e}")))?;
        Self::from_wire(&wire)
    }
}

/// Each name of each reported image with its size (negative sizes read as
/// 0), sorted and deduplicated, at most [`MAX_NODE_IMAGE_NAMES`].
fn images(w: &NodeWire) -> Vec<(Arc<str>, i64)> {
    let mut names: Vec<(Arc<str>, i64)> = w
        .status
        .images
        .iter()
        .flat_map(|image| {
            let size = image.size_bytes.unwrap_or(0).max(0);
            image
                .names
                .iter()
                .map(move |n| (Arc::from(n.as_str()), size))
        })
        .take(MAX_NODE_IMAGE_NAMES)
        .collect();
    names.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    names.dedup_by(|a, b| a.0 == b.0);
    names
}

impl NodeInfo {
    /// The size of image `name` when the node has it.
    pub fn image_size(&self, name: &str) -> Option<i64> {
        self.images
            .binary_search_by(|(n, _)| (**n).cmp(name))
            .ok()
            .and_then(|i| self.images.get(i))
            .map(|(_, size)| *size)
    }
}

pub(crate) fn quantities(map: &BTreeMap<String, QuantityWire>) -> Result<Resources, ModelError> {
    let owned: Vec<(&str, String)> = map
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_string()))
        .collect();
    Resources::from_quantities(owned.iter().map(|(k, v)| (*k, v.as_str())))
        .map_err(|e| ModelError::invalid(e.to_string()))
}
