//! Node pools for the simulated autoscaler: a kwok node template the
//! provisioner adds nodes of, up to a maximum, each scale-up taking a delay
//! (as a cloud takes to boot machines).
//!
//! ```yaml
//! - name: burst            # nodes burst-0, burst-1, ... labelled with the pool
//!   max: 8                 # nodes of this pool at most
//!   delaySeconds: 2        # from the decision to the nodes' appearance
//!   template: {capacity: {cpu: "8", memory: 64Gi, pods: "110"}, labels: {tier: burst}}
//! ```
//!
//! A single mapping instead of a list is one pool.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::templates::{self, BLOCK_LABEL, K8S_RACK_LABEL, NodeTemplate, RACK_LABEL};

/// The label naming the pool a provisioned node belongs to.
pub const POOL_LABEL: &str = "autoscaling.muster.dev/pool";

/// Most pools a cluster takes, and most nodes one pool may have.
pub const MAX_POOLS: usize = 64;
pub const MAX_POOL_NODES: usize = 10_000;

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodePool {
    pub name: String,
    /// Nodes of this pool at most (those already there included).
    pub max: usize,
    /// From a scale-up decision to its nodes' creation, in seconds.
    #[serde(default)]
    pub delay_seconds: f64,
    /// The nodes it adds (`count` is ignored; the name prefix is the pool's
    /// name unless the template gives one).
    #[serde(default)]
    pub template: NodeTemplate,
}

impl NodePool {
    pub fn delay(&self) -> Duration {
        Duration::try_from_secs_f64(self.delay_seconds).unwrap_or_default()
    }

    fn prefix(&self) -> &str {
        match self.template.name_prefix.as_str() {
            "sim-node" => &self.name,
            p => p,
        }
    }

    /// The name of this pool's node number `index`.
    pub fn node_name(&self, index: usize) -> String {
        format!("{}-{index}", self.prefix())
    }

    /// The Node object of this pool's node number `index`: the template's
    /// node, labelled with the pool, in racks and blocks of its own.
    pub fn node(&self, index: usize) -> Value {
        let mut t = self.template.clone();
        t.name_prefix = self.prefix().to_string();
        t.count = index.saturating_add(1);
        let mut node = templates::expand(std::slice::from_ref(&t))
            .pop()
            .unwrap_or(Value::Null);
        let rack = index / t.topology.hosts_per_rack.max(1);
        let block = rack / t.topology.racks_per_block.max(1);
        if let Some(labels) = node
            .pointer_mut("/metadata/labels")
            .and_then(Value::as_object_mut)
        {
            labels.insert(POOL_LABEL.into(), self.name.clone().into());
            let rack = format!("{}-rack-{rack}", self.name);
            labels.insert(RACK_LABEL.into(), rack.clone().into());
            labels.insert(K8S_RACK_LABEL.into(), rack.into());
            labels.insert(
                BLOCK_LABEL.into(),
                format!("{}-block-{block}", self.name).into(),
            );
        }
        node
    }
}

/// Reads a pool file.
pub fn load(path: &Path) -> Result<Vec<NodePool>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read node pools {}: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("node pools {}: {e}", path.display()))
}

pub fn parse(text: &str) -> Result<Vec<NodePool>, String> {
    let doc: serde_norway::Value = serde_norway::from_str(text).map_err(|e| e.to_string())?;
    let pools: Vec<NodePool> = if doc.is_sequence() {
        serde_norway::from_value(doc).map_err(|e| e.to_string())?
    } else {
        vec![serde_norway::from_value(doc).map_err(|e| e.to_string())?]
    };
    check(&pools)?;
    Ok(pools)
}

/// Names unique and non-empty, maxima and delays bounded.
pub fn check(pools: &[NodePool]) -> Result<(), String> {
    if pools.len() > MAX_POOLS {
        return Err(format!("at most {MAX_POOLS} node pools"));
    }
    let mut seen = BTreeMap::new();
    for p in pools {
        if p.name.is_empty() || p.name.len() > 40 {
            return Err("a pool's name must be 1 to 40 characters".into());
        }
        if seen.insert(p.name.clone(), ()).is_some() {
            return Err(format!("{}: pool named twice", p.name));
        }
        if p.max > MAX_POOL_NODES {
            return Err(format!("{}: max is at most {MAX_POOL_NODES}", p.name));
        }
        if !(0.0..=3600.0).contains(&p.delay_seconds) {
            return Err(format!("{}: delaySeconds must be 0 to 3600", p.name));
        }
        if p.template.topology.hosts_per_rack == 0 || p.template.topology.racks_per_block == 0 {
            return Err(format!("{}: topology sizes must be positive", p.name));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_names_and_labels_its_nodes() {
        let pools = parse(
            "- name: burst\n  max: 4\n  delaySeconds: 1.5\n  template: {capacity: {cpu: '8'}, labels: {tier: burst}}\n",
        )
        .unwrap();
        let p = &pools[0];
        assert_eq!(p.delay(), Duration::from_millis(1500));
        let n = p.node(3);
        assert_eq!(n["metadata"]["name"], "burst-3");
        assert_eq!(n["metadata"]["labels"][POOL_LABEL], "burst");
        assert_eq!(n["metadata"]["labels"]["tier"], "burst");
        assert_eq!(n["metadata"]["labels"][RACK_LABEL], "burst-rack-0");
        assert_eq!(n["status"]["capacity"]["cpu"], "8");
    }

    #[test]
    fn bad_pools_are_refused() {
        assert!(parse("name: a\nmax: 1\ncolour: red").is_err());
        assert!(parse("- {name: a, max: 1}\n- {name: a, max: 2}").is_err());
        assert!(parse("name: a\nmax: 1\ndelaySeconds: -1").is_err());
        assert!(parse("name: a\nmax: 1").is_ok());
    }
}
