//! DRA structured allocation at 5,000 nodes × 8 devices: one claim tried on
//! every node, as Filter runs it for a pod (one device with a selector, and
//! four devices of one NVLink clique). Warm: the selectors' verdicts per
//! device are known from an earlier pass (a like pod's); cold: the first
//! pass over a new inventory evaluates every selector on every device;
//! full: every device taken, so each node is refused with its reason.

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use k8s_openapi::api::resource::v1 as api;
use muster::dra::cel::Evaluator;
use muster::dra::{Budget, Claim, DeviceClass, InUse, Inventory, NodeView, Plan, Slice};
use serde_json::json;

const NODES: usize = 5_000;
const DEVICES: usize = 8;

fn slices() -> Vec<Slice> {
    (0..NODES)
        .map(|n| {
            let devices: Vec<_> = (0..DEVICES)
                .map(|d| {
                    json!({
                        "name": format!("gpu-{d}"),
                        "attributes": {
                            "model": {"string": "h100"},
                            "index": {"int": d},
                            "clique": {"string": format!("n{n}-c{}", d / 4)},
                        },
                        "capacity": {"memory": {"value": "80Gi"}},
                    })
                })
                .collect();
            let s: api::ResourceSlice = serde_json::from_value(json!({
                "metadata": {"name": format!("node-{n}")},
                "spec": {
                    "driver": "gpu.example.com",
                    "nodeName": format!("node-{n}"),
                    "pool": {"name": format!("node-{n}"), "generation": 0, "resourceSliceCount": 1},
                    "devices": devices,
                }
            }))
            .expect("slice");
            Slice::from_api(&s).expect("valid slice")
        })
        .collect()
}

fn class() -> DeviceClass {
    let c: api::DeviceClass = serde_json::from_value(json!({
        "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]},
    }))
    .expect("class");
    DeviceClass::from_api(&c).expect("valid class")
}

fn claim(devices: serde_json::Value) -> Claim {
    let c: api::ResourceClaim = serde_json::from_value(json!({
        "metadata": {"name": "c", "namespace": "default"},
        "spec": {"devices": devices},
    }))
    .expect("claim");
    Claim::from_api(&c).expect("valid claim")
}

fn over_all_nodes(c: &mut Criterion) {
    let slices = slices();
    let inv = Inventory::new(&slices, [class()]);
    let one = claim(json!({"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu",
        "selectors": [{"cel": {"expression":
            "device.capacity['gpu.example.com'].memory.compareTo(quantity('40Gi')) >= 0"}}],
    }}]}));
    let clique = claim(json!({
        "requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu", "count": 4}}],
        "constraints": [{"matchAttribute": "gpu.example.com/clique"}],
    }));
    let names: Vec<String> = (0..NODES).map(|n| format!("node-{n}")).collect();
    let labels = BTreeMap::new();
    let in_use = InUse::default();
    let mut group = c.benchmark_group("dra");
    group.sample_size(10);
    // One claim tried on every node, as Filter does: prepared once for the
    // pod (PreFilter), then decided per node. Returns how many fit.
    let pass = |inv: &Inventory, claim: &Claim| {
        let eval = Evaluator::new();
        let plan = Plan::new(&[claim], inv).expect("the class exists");
        names
            .iter()
            .filter(|n| {
                let node = NodeView {
                    name: n,
                    labels: &labels,
                };
                plan.fits(node, inv, &in_use, &eval, Budget::default())
                    .is_ok()
            })
            .count()
    };
    for (label, claim) in [
        ("one_device_5000_nodes", &one),
        ("four_of_a_clique_5000_nodes", &clique),
    ] {
        group.bench_function(label, |b| {
            b.iter(|| {
                let fits = pass(&inv, claim);
                assert_eq!(fits, NODES);
                black_box(fits)
            })
        });
    }
    // Every device taken: each node refused, with its reason (what a pod
    // meets on a full cluster).
    let mut full = InUse::default();
    for p in inv.pools() {
        for d in &p.devices {
            full.take(&d.id, &inv);
        }
    }
    group.bench_function("one_device_5000_full_nodes", |b| {
        let eval = Evaluator::new();
        let plan = Plan::new(&[&one], &inv).expect("the class exists");
        b.iter(|| {
            let refused = names
                .iter()
                .filter_map(|n| {
                    let node = NodeView {
                        name: n,
                        labels: &labels,
                    };
                    plan.fits(node, &inv, &full, &eval, Budget::default()).err()
                })
                .count();
            assert_eq!(refused, NODES);
            black_box(refused)
        })
    });
    group.bench_function("one_device_5000_nodes_cold", |b| {
        b.iter_batched(
            || Inventory::new(&slices, [class()]),
            |inv| black_box(pass(&inv, &one)),
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(benches, over_all_nodes);
criterion_main!(benches);
