//! The synthetic 5,000-node cluster and incoming pod shared by the placement
//! benchmark (and any profiling harness that includes this file).

use std::sync::Arc;

use muster::cache::NodeState;
use muster::model::{NodeInfo, PodInfo, Resources, Taint, TaintEffect};

pub const NODES: usize = 5_000;

/// xorshift64: a fixed, dependency-free stream so every run sees the same cluster.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[(self.next() % xs.len() as u64) as usize]
    }
}

fn pod(json: serde_json::Value) -> PodInfo {
    PodInfo::from_json(&serde_json::to_vec(&json).expect("json")).expect("pod")
}

fn resident(milli_cpu: i64, memory_gi: i64) -> PodInfo {
    pod(serde_json::json!({
        "metadata": {"name": "resident", "namespace": "bench"},
        "spec": {"nodeName": "x", "containers": [{"name": "c", "resources": {"requests": {
            "cpu": format!("{milli_cpu}m"), "memory": format!("{memory_gi}Gi")}}}]}
    }))
}

/// Varied machine shapes, zones and instance types; 10% dedicated (NoSchedule
/// taint), 10% spot (PreferNoSchedule), 2% cordoned, 5% with GPUs; each node
/// already 0–90% requested by a few resident pods.
pub fn cluster() -> Vec<NodeState> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let shapes: [(i64, i64); 6] = [(4, 16), (8, 32), (16, 64), (32, 128), (64, 256), (96, 768)];
    (0..NODES)
        .map(|i| {
            let &(cpu, mem_gi) = rng.pick(&shapes);
            let mut alloc = Resources {
                milli_cpu: cpu * 1000,
                memory: mem_gi << 30,
                ephemeral_storage: 100 << 30,
                pods: 110,
                ..Default::default()
            };
            let roll = rng.next() % 100;
            if roll < 5 {
                alloc.scalar.insert(Arc::from("nvidia.com/gpu"), 8);
            }
            let mut info = NodeInfo::new(&format!("node-{i:05}"), alloc);
            info.labels.insert(
                "topology.kubernetes.io/zone".into(),
                (*rng.pick(&["zone-a", "zone-b", "zone-c"])).into(),
            );
            info.labels.insert(
                "node.kubernetes.io/instance-type".into(),
                format!("m.{cpu}x{mem_gi}"),
            );
            info.labels
                .insert("kubernetes.io/os".into(), "linux".into());
            match roll {
                5..15 => info.taints.push(Taint {
                    key: "dedicated".into(),
                    value: "infra".into(),
                    effect: TaintEffect::NoSchedule,
                }),
                15..25 => info.taints.push(Taint {
                    key: "spot".into(),
                    value: "true".into(),
                    effect: TaintEffect::PreferNoSchedule,
                }),
                25..27 => info.unschedulable = true,
                _ => {}
            }
            let mut node = NodeState::new(Arc::new(info));
            let fill = (rng.next() % 91) as i64; // percent of the node requested
            let residents = 1 + rng.next() % 8;
            for _ in 0..residents {
                node.add_pod(&Arc::new(resident(
                    cpu * 1000 * fill / 100 / residents as i64,
                    mem_gi * fill / 100 / residents as i64,
                )));
            }
            node
        })
        .collect()
}

/// A typical service pod: requests, a nodeSelector, a preferred zone.
pub fn incoming() -> PodInfo {
    pod(serde_json::json!({
        "metadata": {"name": "web", "namespace": "bench"},
        "spec": {
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}],
            "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": {"matchExpressions": [
                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]}]}}
            ]}}
        }
    }))
}
