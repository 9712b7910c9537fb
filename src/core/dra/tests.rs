use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1 as api;
use proptest::prelude::*;
use serde_json::{Value as Json, json};

use super::cel::{Evaluator, Selector};
use super::model::ConstraintKind;
use super::*;
use crate::model::Quantity;

pub(super) const DRIVER: &str = "gpu.example.com";

pub(super) fn slice(name: &str, node: &str, devices: Json) -> Slice {
    slice_in(name, node, name, 0, 1, devices)
}

pub(super) fn slice_in(
    name: &str,
    node: &str,
    pool: &str,
    generation: i64,
    count: i64,
    devices: Json,
) -> Slice {
    let s: api::ResourceSlice = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
            "devices": devices,
        }
    }))
    .unwrap();
    Slice::from_api(&s).unwrap()
}

pub(super) fn gpu(name: &str, clique: &str, memory: &str) -> Json {
    json!({
        "name": name,
        "attributes": {"model": {"string": "h100"}, "clique": {"string": clique}, "driverVersion": {"version": "1.2.3"}},
        "capacity": {"memory": {"value": memory}},
    })
}

fn class(name: &str, selector: &str) -> DeviceClass {
    let c: api::DeviceClass = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": selector}}]},
    }))
    .unwrap();
    DeviceClass::from_api(&c).unwrap()
}

pub(super) fn gpus() -> DeviceClass {
    class("gpu", "device.driver == 'gpu.example.com'")
}

pub(super) fn claim(spec: Json) -> Claim {
    claim_with(spec, Json::Null)
}

pub(super) fn claim_with(spec: Json, status: Json) -> Claim {
    let c: api::ResourceClaim = serde_json::from_value(json!({
        "metadata": {"name": "c", "namespace": "ns", "uid": "u1"},
        "spec": spec,
        "status": status,
    }))
    .unwrap();
    Claim::from_api(&c).unwrap()
}

pub(super) fn exact(name: &str, count: i64) -> Json {
    json!({"name": name, "exactly": {"deviceClassName": "gpu", "count": count}})
}

fn labels() -> BTreeMap<String, String> {
    BTreeMap::new()
}

pub(super) fn run(
    claims: &[&Claim],
    node: &str,
    inv: &Inventory,
    in_use: &InUse,
) -> Result<Vec<Allocation>, Unfit> {
    let labels = labels();
    allocate(
        claims,
        NodeView {
            name: node,
            labels: &labels,
        },
        inv,
        in_use,
        &Evaluator::new(),
        Budget::default(),
    )
}

pub(super) fn devices(a: &Allocation) -> Vec<&str> {
    a.results.iter().map(|r| &*r.device.device).collect()
}

// ---- CEL -------------------------------------------------------------------

#[test]
fn selectors_read_attributes_capacity_and_versions() {
    let s = slice("n1", "n1", json!([gpu("g0", "a", "80Gi")]));
    let d = cel::device_value(DRIVER, &s.devices[0]);
    let eval = Evaluator::new();
    for (expr, want) in [
        ("device.attributes['gpu.example.com'].model == 'h100'", true),
        (
            "device.attributes['gpu.example.com'].model == 'a100'",
            false,
        ),
        (
            "device.capacity['gpu.example.com'].memory.compareTo(quantity('40Gi')) > 0",
            true,
        ),
        (
            "device.capacity['gpu.example.com'].memory.isLessThan(quantity('40Gi'))",
            false,
        ),
        (
            "device.attributes['gpu.example.com'].driverVersion.isGreaterThan(semver('1.2.0'))",
            true,
        ),
        (
            "device.attributes['gpu.example.com'].driverVersion.major() == 1",
            true,
        ),
        ("'gpu.example.com' in device.attributes", true),
        ("device.driver.startsWith('gpu.')", true),
    ] {
        let sel = Selector::compile(expr).unwrap();
        assert_eq!(eval.matches(&sel, &d), Ok(want), "{expr}");
    }
}

#[test]
fn a_missing_attribute_is_an_error_not_a_no() {
    let s = slice("n1", "n1", json!([gpu("g0", "a", "80Gi")]));
    let d = cel::device_value(DRIVER, &s.devices[0]);
    let sel = Selector::compile("device.attributes['gpu.example.com'].absent == 1").unwrap();
    let err = Evaluator::new().matches(&sel, &d).unwrap_err();
    assert!(err.contains("absent"), "{err}");
}

#[test]
fn expressions_that_do_not_compile_or_cost_too_much_are_refused() {
    assert!(
        Selector::compile("device.driver ==")
            .unwrap_err()
            .contains("compilation")
    );
    let long = format!("device.driver == '{}'", "x".repeat(limits::MAX_CEL_LENGTH));
    assert!(Selector::compile(&long).unwrap_err().contains("bytes long"));
    // Four nested comprehensions over device maps: 32^4 × body.
    let nested = "device.attributes.all(a, device.attributes.all(b, device.attributes.all(c, \
                  device.attributes.all(d, a == b || c == d))))";
    let err = Selector::compile(nested).unwrap_err();
    assert!(err.contains("estimated cost"), "{err}");
    // One comprehension is fine.
    Selector::compile("device.attributes.exists(d, d == 'gpu.example.com')").unwrap();
    assert_eq!(
        Selector::compile("foo.bar == 1").unwrap_err(),
        "compilation failed: undeclared reference to 'foo'"
    );
    let deep = format!("{}1{}", "(".repeat(5000), ")".repeat(5000));
    assert!(Selector::compile(&deep).unwrap_err().contains("nested"));
    assert!(Selector::compile("  ").is_err());
    Selector::compile("cel.bind(d, device.attributes['gpu.example.com'], d.model == 'x')").unwrap();
}

// ---- decoding ----------------------------------------------------------------

#[test]
fn unsupported_fields_are_refused_by_name() {
    let c: api::ResourceClaim = serde_json::from_value(json!({
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {
            "deviceClassName": "gpu", "capacity": {"requests": {"memory": "-1Gi"}}}}]}},
    }))
    .unwrap();
    let err = Claim::from_api(&c).unwrap_err();
    assert!(
        err.0.contains("capacity.requests[memory] is negative"),
        "{err}"
    );
    let c: api::ResourceClaim = serde_json::from_value(json!({
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"devices": {"requests": [exact("r", 1)], "constraints": [{"matchAttribute": "clique"}]}},
    }))
    .unwrap();
    assert!(
        Claim::from_api(&c)
            .unwrap_err()
            .0
            .contains("fully qualified")
    );
    let c: api::ResourceClaim = serde_json::from_value(json!({
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"devices": {"requests": [exact("r", 33)]}},
    }))
    .unwrap();
    assert!(
        Claim::from_api(&c)
            .unwrap_err()
            .0
            .contains("count must be between 1 and 32")
    );
}

#[test]
fn a_slice_names_exactly_one_reach() {
    let s: api::ResourceSlice = serde_json::from_value(json!({
        "metadata": {"name": "s"},
        "spec": {"driver": DRIVER, "nodeName": "n1", "allNodes": true,
                 "pool": {"name": "p", "generation": 0, "resourceSliceCount": 1}},
    }))
    .unwrap();
    assert!(Slice::from_api(&s).unwrap_err().0.contains("more than one"));
}

// ---- pools -------------------------------------------------------------------

#[test]
fn only_complete_pools_of_the_newest_generation_are_used() {
    let old = slice_in("old", "n1", "p", 1, 1, json!([gpu("g-old", "a", "80Gi")]));
    let half = slice_in("half", "n1", "p", 2, 2, json!([gpu("g-new", "a", "80Gi")]));
    let inv = Inventory::new([&old, &half], [gpus()]);
    let pool = inv.pools().next().unwrap();
    assert!(
        pool.problem
            .as_deref()
            .unwrap()
            .contains("1 of its 2 slices"),
        "{:?}",
        pool.problem
    );
    let c = claim(json!({"devices": {"requests": [exact("r", 1)]}}));
    let err = run(&[&c], "n1", &inv, &InUse::default()).unwrap_err();
    assert!(err.to_string().contains("incomplete"), "{err}");
    let rest = slice_in("rest", "n1", "p", 2, 2, json!([gpu("g-new2", "a", "80Gi")]));
    let inv = Inventory::new([&old, &half, &rest], [gpus()]);
    let a = run(&[&c], "n1", &inv, &InUse::default()).unwrap();
    assert_eq!(devices(&a[0]), ["g-new"], "the old generation is not used");
}

// ---- allocation ----------------------------------------------------------------

#[test]
fn devices_on_the_node_that_are_free_are_allocated() {
    let n1 = slice(
        "n1",
        "n1",
        json!([gpu("g0", "a", "80Gi"), gpu("g1", "a", "80Gi")]),
    );
    let n2 = slice("n2", "n2", json!([gpu("h0", "a", "80Gi")]));
    let inv = Inventory::new([&n1, &n2], [gpus()]);
    let held = claim_with(
        json!({"devices": {"requests": [exact("r", 1)]}}),
        json!({"allocation": {"devices": {"results": [
            {"request": "r", "driver": DRIVER, "pool": "n1", "device": "g0"}]}}}),
    );
    let in_use = InUse::of([&held], &inv);
    let c = claim(json!({"devices": {"requests": [exact("r", 1)]}}));
    let a = run(&[&c], "n1", &inv, &in_use).unwrap();
    assert_eq!(devices(&a[0]), ["g1"]);
    assert_eq!(a[0].reach, [Reach::Node("n1".into())]);
    let two = claim(json!({"devices": {"requests": [exact("r", 2)]}}));
    let err = run(&[&two], "n1", &inv, &in_use).unwrap_err();
    assert!(
        err.to_string().contains(
            "2 device(s) of class gpu needed, 1 available on node n1: 1 matching device(s) allocated or tainted"
        ),
        "{err}"
    );
}

#[test]
fn a_match_constraint_backtracks_past_a_greedy_first_choice() {
    // g0 is alone in clique a; the request for two of one clique fits only
    // with g1 and g2.
    let n1 = slice(
        "n1",
        "n1",
        json!([
            gpu("g0", "a", "80Gi"),
            gpu("g1", "b", "80Gi"),
            gpu("g2", "b", "80Gi")
        ]),
    );
    let inv = Inventory::new([&n1], [gpus()]);
    let c = claim(json!({"devices": {
        "requests": [exact("r", 2)],
        "constraints": [{"matchAttribute": "gpu.example.com/clique"}],
    }}));
    let a = run(&[&c], "n1", &inv, &InUse::default()).unwrap();
    assert_eq!(devices(&a[0]), ["g1", "g2"]);
    let d = claim(json!({"devices": {
        "requests": [exact("r", 2)],
        "constraints": [{"distinctAttribute": "gpu.example.com/clique"}],
    }}));
    let a = run(&[&d], "n1", &inv, &InUse::default()).unwrap();
    assert_eq!(devices(&a[0]), ["g0", "g1"]);
    let three = claim(json!({"devices": {
        "requests": [exact("r", 3)],
        "constraints": [{"matchAttribute": "gpu.example.com/clique"}],
    }}));
    let err = run(&[&three], "n1", &inv, &InUse::default()).unwrap_err();
    assert!(
        err.to_string()
            .contains("matchAttribute gpu.example.com/clique"),
        "{err}"
    );
}

#[test]
fn first_available_takes_the_first_alternative_that_fits() {
    let n1 = slice("n1", "n1", json!([gpu("g0", "a", "40Gi")]));
    let big = class(
        "big",
        "device.capacity['gpu.example.com'].memory.compareTo(quantity('80Gi')) >= 0",
    );
    let inv = Inventory::new([&n1], [gpus(), big]);
    let c = claim(
        json!({"devices": {"requests": [{"name": "r", "firstAvailable": [
            {"name": "large", "deviceClassName": "big"},
            {"name": "any", "deviceClassName": "gpu"},
        ]}]}}),
    );
    let a = run(&[&c], "n1", &inv, &InUse::default()).unwrap();
    assert_eq!(&*a[0].results[0].request, "r/any");
}

#[test]
fn nodes_that_give_an_earlier_subrequest_score_higher() {
    let small = slice("n1", "n1", json!([gpu("g0", "a", "40Gi")]));
    let large = slice("n2", "n2", json!([gpu("g0", "a", "80Gi")]));
    let big = class(
        "big",
        "device.capacity['gpu.example.com'].memory.compareTo(quantity('80Gi')) >= 0",
    );
    let inv = Inventory::new([&small, &large], [gpus(), big]);
    let c = claim(
        json!({"devices": {"requests": [{"name": "r", "firstAvailable": [
            {"name": "large", "deviceClassName": "big"},
            {"name": "any", "deviceClassName": "gpu"},
        ]}]}}),
    );
    let plan = Plan::new(&[&c], &inv).unwrap();
    assert!(plan.has_subrequests());
    let labels = labels();
    let eval = Evaluator::new();
    let score = |node: &str| {
        let view = NodeView {
            name: node,
            labels: &labels,
        };
        plan.score(view, &inv, &InUse::default(), &eval, Budget::default())
    };
    // The first subrequest on n2, the second on n1; nothing on n3.
    assert_eq!(score("n2"), limits::MAX_SUBREQUESTS as i64);
    assert_eq!(score("n1"), limits::MAX_SUBREQUESTS as i64 - 1);
    assert_eq!(score("n3"), 0);
    // A claim without subrequests scores every node alike.
    let plain = claim(json!({"devices": {"requests": [exact("r", 1)]}}));
    assert!(!Plan::new(&[&plain], &inv).unwrap().has_subrequests());
}

#[test]
fn all_mode_takes_every_matching_device_or_none() {
    let n1 = slice(
        "n1",
        "n1",
        json!([gpu("g0", "a", "80Gi"), gpu("g1", "a", "80Gi")]),
    );
    let inv = Inventory::new([&n1], [gpus()]);
    let c = claim(json!({"devices": {"requests": [
        {"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}}]}}));
    let a = run(&[&c], "n1", &inv, &InUse::default()).unwrap();
    assert_eq!(devices(&a[0]), ["g0", "g1"]);
    let held = claim_with(
        json!({"devices": {"requests": [exact("r", 1)]}}),
        json!({"allocation": {"devices": {"results": [
            {"request": "r", "driver": DRIVER, "pool": "n1", "device": "g1"}]}}}),
    );
    assert!(run(&[&c], "n1", &inv, &InUse::of([&held], &inv)).is_err());
}

#[test]
fn tainted_devices_need_a_toleration() {
    let mut d = gpu("g0", "a", "80Gi");
    d["taints"] = json!([{"key": "broken", "effect": "NoSchedule"}]);
    let n1 = slice("n1", "n1", json!([d]));
    let inv = Inventory::new([&n1], [gpus()]);
    let c = claim(json!({"devices": {"requests": [exact("r", 1)]}}));
    assert!(run(&[&c], "n1", &inv, &InUse::default()).is_err());
    let t = claim(json!({"devices": {"requests": [{"name": "r", "exactly": {
        "deviceClassName": "gpu", "tolerations": [{"key": "broken", "operator": "Exists"}]}}]}}));
    assert!(run(&[&t], "n1", &inv, &InUse::default()).is_ok());
}

/// The slice of pool `node` (one of its two) that defines `sets`, the
/// pool's shared counters, and lists no device.
fn counter_slice(node: &str, sets: serde_json::Value) -> Slice {
    let s: api::ResourceSlice = serde_json::from_value(json!({
        "metadata": {"name": format!("{node}-counters")},
        "spec": {"driver": DRIVER, "nodeName": node,
            "pool": {"name": node, "generation": 0, "resourceSliceCount": 2},
            "sharedCounters": sets},
    }))
    .unwrap();
    Slice::from_api(&s).unwrap()
}

/// As kube-scheduler 1.37's allocator: a slice that defines shared
/// counters is a counter-set slice; devices listed beside them are not
/// offered (found by the upstream oracle, tests/oracle.rs).
#[test]
fn devices_beside_shared_counters_are_not_offered() {
    let s: api::ResourceSlice = serde_json::from_value(json!({
        "metadata": {"name": "n1"},
        "spec": {
            "driver": DRIVER, "nodeName": "n1",
            "pool": {"name": "n1", "generation": 0, "resourceSliceCount": 1},
            "sharedCounters": [{"name": "gpu0", "counters": {"memory": {"value": "80Gi"}}}],
            "devices": [{"name": "whole", "consumesCounters": [
                {"counterSet": "gpu0", "counters": {"memory": {"value": "80Gi"}}}]}],
        }
    }))
    .unwrap();
    let s = Slice::from_api(&s).unwrap();
    let inv = Inventory::new([&s], [gpus()]);
    let one = claim(json!({"devices": {"requests": [exact("r", 1)]}}));
    assert!(run(&[&one], "n1", &inv, &InUse::default()).is_err());
}

/// As kube-scheduler 1.37's allocator: devices allocated with admin access
/// consume their pool's shared counters too (found by the upstream oracle,
/// tests/oracle.rs).
#[test]
fn admin_access_consumes_shared_counters() {
    let counters = counter_slice(
        "n1",
        json!([{"name": "gpu0", "counters": {"memory": {"value": "80Gi"}}}]),
    );
    let part = |name: &str| {
        json!({"name": name, "consumesCounters": [
            {"counterSet": "gpu0", "counters": {"memory": {"value": "40Gi"}}}]})
    };
    let s: api::ResourceSlice = serde_json::from_value(json!({
        "metadata": {"name": "n1"},
        "spec": {"driver": DRIVER, "nodeName": "n1",
            "pool": {"name": "n1", "generation": 0, "resourceSliceCount": 2},
            "devices": [part("a"), part("b"), part("c")]},
    }))
    .unwrap();
    let s = Slice::from_api(&s).unwrap();
    let inv = Inventory::new([&s, &counters], [gpus()]);
    let admin = |count: u32| {
        claim(json!({"devices": {"requests": [{"name": "r", "exactly": {
            "deviceClassName": "gpu", "count": count, "adminAccess": true}}]}}))
    };
    assert!(run(&[&admin(2)], "n1", &inv, &InUse::default()).is_ok());
    assert!(
        run(&[&admin(3)], "n1", &inv, &InUse::default()).is_err(),
        "three halves exceed the counter, with admin access too"
    );
}

#[test]
fn partitions_share_their_pools_counters() {
    let counters = counter_slice(
        "n1",
        json!([{"name": "gpu0", "counters": {"memory": {"value": "80Gi"}}}]),
    );
    let s: api::ResourceSlice = serde_json::from_value(json!({
        "metadata": {"name": "n1"},
        "spec": {
            "driver": DRIVER, "nodeName": "n1",
            "pool": {"name": "n1", "generation": 0, "resourceSliceCount": 2},
            "devices": [
                {"name": "whole", "consumesCounters": [{"counterSet": "gpu0", "counters": {"memory": {"value": "80Gi"}}}]},
                {"name": "half-a", "consumesCounters": [{"counterSet": "gpu0", "counters": {"memory": {"value": "40Gi"}}}]},
                {"name": "half-b", "consumesCounters": [{"counterSet": "gpu0", "counters": {"memory": {"value": "40Gi"}}}]},
            ],
        }
    }))
    .unwrap();
    let s = Slice::from_api(&s).unwrap();
    let inv = Inventory::new([&s, &counters], [gpus()]);
    let two = claim(json!({"devices": {"requests": [exact("r", 2)]}}));
    let a = run(&[&two], "n1", &inv, &InUse::default()).unwrap();
    assert_eq!(
        devices(&a[0]),
        ["half-a", "half-b"],
        "whole and a half exceed the counter"
    );
    let held = claim_with(
        json!({"devices": {"requests": [exact("r", 1)]}}),
        json!({"allocation": {"devices": {"results": [
            {"request": "r", "driver": DRIVER, "pool": "n1", "device": "half-a"}]}}}),
    );
    let one = claim(json!({"devices": {"requests": [exact("r", 1)]}}));
    let a = run(&[&one], "n1", &inv, &InUse::of([&held], &inv)).unwrap();
    assert_eq!(devices(&a[0]), ["half-b"], "the whole GPU no longer fits");
}

#[test]
fn a_multi_node_device_reaches_the_nodes_its_selector_matches() {
    let s: api::ResourceSlice = serde_json::from_value(json!({
        "metadata": {"name": "rack-7"},
        "spec": {
            "driver": DRIVER,
            "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "rack", "operator": "In", "values": ["r7"]}]}]},
            "pool": {"name": "rack-7", "generation": 0, "resourceSliceCount": 1},
            "devices": [{"name": "fabric"}],
        }
    }))
    .unwrap();
    let s = Slice::from_api(&s).unwrap();
    let inv = Inventory::new([&s], [gpus()]);
    let c = claim(json!({"devices": {"requests": [exact("r", 1)]}}));
    let in_r7: BTreeMap<String, String> = [("rack".to_string(), "r7".to_string())].into();
    let eval = Evaluator::new();
    let at = |labels: &BTreeMap<String, String>| {
        allocate(
            &[&c],
            NodeView { name: "n1", labels },
            &inv,
            &InUse::default(),
            &eval,
            Budget::default(),
        )
    };
    let a = at(&in_r7).unwrap();
    assert!(
        matches!(a[0].reach[..], [Reach::Selector(_)]),
        "{:?}",
        a[0].reach
    );
    assert!(at(&labels()).is_err());
}

#[test]
fn admin_access_monitors_a_device_in_use() {
    let n1 = slice("n1", "n1", json!([gpu("g0", "a", "80Gi")]));
    let inv = Inventory::new([&n1], [gpus()]);
    let held = claim_with(
        json!({"devices": {"requests": [exact("r", 1)]}}),
        json!({"allocation": {"devices": {"results": [
            {"request": "r", "driver": DRIVER, "pool": "n1", "device": "g0"}]}}}),
    );
    let in_use = InUse::of([&held], &inv);
    let admin = claim(json!({"devices": {"requests": [{"name": "r", "exactly": {
        "deviceClassName": "gpu", "adminAccess": true}}]}}));
    let a = run(&[&admin], "n1", &inv, &in_use).unwrap();
    assert!(a[0].results[0].admin_access);
}

#[test]
fn a_missing_class_is_named() {
    let n1 = slice("n1", "n1", json!([gpu("g0", "a", "80Gi")]));
    let inv = Inventory::new([&n1], []);
    let c = claim(json!({"devices": {"requests": [exact("r", 1)]}}));
    let err = run(&[&c], "n1", &inv, &InUse::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "claim ns/c: request r: device class gpu does not exist"
    );
}

#[test]
fn two_claims_never_share_a_device() {
    let n1 = slice(
        "n1",
        "n1",
        json!([gpu("g0", "a", "80Gi"), gpu("g1", "a", "80Gi")]),
    );
    let inv = Inventory::new([&n1], [gpus()]);
    let c1 = claim(json!({"devices": {"requests": [exact("r", 1)]}}));
    let c2 = claim(json!({"devices": {"requests": [exact("r", 1)]}}));
    let a = run(&[&c1, &c2], "n1", &inv, &InUse::default()).unwrap();
    assert_eq!((devices(&a[0]), devices(&a[1])), (vec!["g0"], vec!["g1"]));
    let c3 = claim(json!({"devices": {"requests": [exact("r", 1)]}}));
    assert!(run(&[&c1, &c2, &c3], "n1", &inv, &InUse::default()).is_err());
}

#[test]
fn the_search_is_bounded() {
    // 24 devices in 6 cliques of 4, 7 wanted from distinct cliques: no fit,
    // and proving it visits every way of picking up to 6 (5^6 of them).
    let list: Vec<Json> = (0..24)
        .map(|i| gpu(&format!("g{i}"), &format!("c{}", i % 6), "1"))
        .collect();
    let n1 = slice("n1", "n1", Json::Array(list));
    let inv = Inventory::new([&n1], [gpus()]);
    let c = claim(json!({"devices": {
        "requests": [exact("r", 7)],
        "constraints": [{"distinctAttribute": "gpu.example.com/clique"}],
    }}));
    let labels = labels();
    let err = allocate(
        &[&c],
        NodeView {
            name: "n1",
            labels: &labels,
        },
        &inv,
        &InUse::default(),
        &Evaluator::new(),
        Budget { steps: 1_000 },
    )
    .unwrap_err();
    assert_eq!(
        err,
        Unfit::TooComplex {
            node: "n1".into(),
            steps: 1_000
        }
    );
}

// ---- properties ------------------------------------------------------------------

/// Whether some choice of distinct free devices meets the claim (brute force
/// over every assignment, for small instances).
fn exists_fit(claim: &Claim, devices: &[(String, String)], taken: &[bool]) -> bool {
    let counts: Vec<usize> = claim
        .requests
        .iter()
        .map(|r| match r.alternatives[0].mode {
            model::Mode::Exact(n) => n as usize,
            model::Mode::All => unreachable!(),
        })
        .collect();
    let matching = claim
        .constraints
        .iter()
        .any(|k| matches!(k.kind, ConstraintKind::Match(_)));
    // Assign each device to no request or one request.
    let n = devices.len();
    let options = counts.len() + 1;
    let total = options.pow(n as u32);
    (0..total).any(|mut code| {
        let mut per = vec![Vec::new(); counts.len()];
        for (i, taken) in taken.iter().enumerate() {
            let o = code % options;
            code /= options;
            if o > 0 {
                if *taken {
                    return false;
                }
                per[o - 1].push(i);
            }
        }
        if per.iter().zip(&counts).any(|(p, c)| p.len() != *c) {
            return false;
        }
        let cliques: std::collections::BTreeSet<&str> = per
            .iter()
            .flatten()
            .map(|i| devices[*i].1.as_str())
            .collect();
        !matching || cliques.len() <= 1
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// An allocation gives each request its count of distinct free devices
    /// meeting the constraint; a refusal means no such choice exists.
    #[test]
    fn allocations_are_valid_and_refusals_are_true(
        cliques in proptest::collection::vec(0u8..3, 1..7),
        taken in proptest::collection::vec(any::<bool>(), 7),
        counts in proptest::collection::vec(1i64..3, 1..3),
        matching in any::<bool>(),
    ) {
        let list: Vec<Json> = cliques
            .iter()
            .enumerate()
            .map(|(i, c)| gpu(&format!("g{i}"), &format!("c{c}"), "1"))
            .collect();
        let n1 = slice("n1", "n1", Json::Array(list));
        let inv = Inventory::new([&n1], [gpus()]);
        let requests: Vec<Json> = counts.iter().enumerate().map(|(i, n)| exact(&format!("r{i}"), *n)).collect();
        let constraints = match matching {
            true => json!([{"matchAttribute": "gpu.example.com/clique"}]),
            false => json!([]),
        };
        let c = claim(json!({"devices": {"requests": requests, "constraints": constraints}}));
        let taken = &taken[..cliques.len()];
        let mut in_use = InUse::default();
        for (i, t) in taken.iter().enumerate() {
            if *t {
                in_use.take(&DeviceId { driver: DRIVER.into(), pool: "n1".into(), device: format!("g{i}").into() }, &inv);
            }
        }
        let devices: Vec<(String, String)> =
            cliques.iter().enumerate().map(|(i, c)| (format!("g{i}"), format!("c{c}"))).collect();
        match run(&[&c], "n1", &inv, &in_use) {
            Ok(a) => {
                let got: Vec<&str> = a[0].results.iter().map(|r| &*r.device.device).collect();
                let unique: std::collections::BTreeSet<&&str> = got.iter().collect();
                prop_assert_eq!(unique.len(), got.len(), "a device twice");
                for r in &a[0].results {
                    let i: usize = r.device.device[1..].parse().unwrap();
                    prop_assert!(!taken[i], "a taken device");
                }
                for (i, n) in counts.iter().enumerate() {
                    let name = format!("r{i}");
                    let k = a[0].results.iter().filter(|r| *r.request == *name).count();
                    prop_assert_eq!(k as i64, *n);
                }
                if matching {
                    let cl: std::collections::BTreeSet<&str> = a[0].results.iter().map(|r| {
                        let i: usize = r.device.device[1..].parse().unwrap();
                        devices[i].1.as_str()
                    }).collect();
                    prop_assert!(cl.len() <= 1, "{:?}", cl);
                }
            }
            Err(e) => {
                let complex = matches!(e, Unfit::TooComplex { .. });
                prop_assert!(!complex, "too complex");
                prop_assert!(!exists_fit(&c, &devices, taken), "refused, but a fit exists: {}", e);
            }
        }
    }
}

// ---- consumable capacity -------------------------------------------------------

/// A NIC shared by many claims: 100G of bandwidth, consumed in steps of
/// 10G (10G when a request does not say).
fn nic(name: &str) -> Json {
    json!({
        "name": name,
        "allowMultipleAllocations": true,
        "attributes": {"model": {"string": "nic"}},
        "capacity": {"bandwidth": {"value": "100G", "requestPolicy": {
            "default": "10G", "validRange": {"min": "10G", "step": "10G"}}}},
    })
}

fn bandwidth(name: &str, amount: &str) -> Json {
    json!({"name": name, "exactly": {"deviceClassName": "gpu",
        "capacity": {"requests": {"bandwidth": amount}}}})
}

pub(super) fn named(c: Json, name: &str, uid: &str) -> Claim {
    let c: api::ResourceClaim = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns", "uid": uid},
        "spec": c,
    }))
    .unwrap();
    Claim::from_api(&c).unwrap()
}

/// `a` recorded as `c`'s allocation, as the API would return it.
fn recorded(c: &Claim, a: &Allocation) -> Claim {
    let mut c = c.clone();
    let json = write::allocation_json(a, "n1");
    let api: api::AllocationResult = serde_json::from_value(json).unwrap();
    let wrapped: api::ResourceClaim = serde_json::from_value(json!({
        "metadata": {"name": &*c.name, "namespace": "ns", "uid": &*c.uid},
        "spec": {"devices": {"requests": []}},
        "status": {"allocation": api},
    }))
    .unwrap();
    c.allocation = Claim::from_api(&wrapped).unwrap().allocation;
    c
}

#[test]
fn a_shared_device_serves_claims_until_its_capacity_is_consumed() {
    let n1 = slice("n1", "n1", json!([nic("nic-0")]));
    let inv = Inventory::new([&n1], [gpus()]);
    let a = named(
        json!({"devices": {"requests": [bandwidth("r", "25G")]}}),
        "a",
        "ua",
    );
    let got = run(&[&a], "n1", &inv, &InUse::default()).unwrap();
    let share = got[0].results[0].share.clone().expect("a share");
    assert_eq!(
        share.consumed,
        [("bandwidth".into(), Quantity::parse("30G").unwrap())],
        "rounded up to a step"
    );
    let id = &*share.id;
    assert_eq!(id.len(), 36, "{id}");
    assert_eq!(id.matches('-').count(), 4, "{id}");
    let a = recorded(&a, &got[0]);
    assert_eq!(a.allocation.as_ref().unwrap().results[0].share, Some(share));
    // 70G are left: a second claim for 70G fits, one for 80G does not.
    let in_use = InUse::of([&a], &inv);
    let b = named(
        json!({"devices": {"requests": [bandwidth("r", "70G")]}}),
        "b",
        "ub",
    );
    let got_b = run(&[&b], "n1", &inv, &in_use).unwrap();
    assert_ne!(
        got_b[0].results[0].share.as_ref().unwrap().id,
        a.allocation.as_ref().unwrap().results[0]
            .share
            .as_ref()
            .unwrap()
            .id
    );
    let big = named(
        json!({"devices": {"requests": [bandwidth("r", "80G")]}}),
        "c",
        "uc",
    );
    let err = run(&[&big], "n1", &inv, &in_use).unwrap_err();
    assert!(
        err.to_string()
            .contains("1 matching device(s) without the capacity requested left"),
        "{err}"
    );
    // Released, its capacity is free again.
    let mut in_use = in_use;
    in_use.unhold(a.allocation.as_ref().unwrap(), &inv);
    assert!(run(&[&big], "n1", &inv, &in_use).is_ok());
    // Holding one allocation twice (planned, then recorded) counts it once.
    in_use.hold(a.allocation.as_ref().unwrap(), &inv);
    in_use.hold(a.allocation.as_ref().unwrap(), &inv);
    assert!(run(&[&b], "n1", &inv, &in_use).is_ok());
    assert!(run(&[&big], "n1", &inv, &in_use).is_err());
}

#[test]
fn requests_of_one_claim_share_a_device_and_a_distinct_constraint_spreads_them() {
    let n1 = slice("n1", "n1", json!([nic("nic-0"), nic("nic-1")]));
    let inv = Inventory::new([&n1], [gpus()]);
    let two = named(
        json!({"devices": {"requests": [bandwidth("a", "40G"), bandwidth("b", "60G")]}}),
        "two",
        "u2",
    );
    let got = run(&[&two], "n1", &inv, &InUse::default()).unwrap();
    assert_eq!(devices(&got[0]), ["nic-0", "nic-0"]);
    let ids: Vec<_> = got[0]
        .results
        .iter()
        .map(|r| r.share.as_ref().unwrap().id.clone())
        .collect();
    assert_ne!(ids[0], ids[1]);
    let spread = named(
        json!({"devices": {
            "requests": [bandwidth("a", "40G"), bandwidth("b", "60G")],
            "constraints": [{"distinctAttribute": "gpu.example.com/name"}],
        }}),
        "spread",
        "u3",
    );
    // No device has the attribute: the constraint cannot hold.
    assert!(run(&[&spread], "n1", &inv, &InUse::default()).is_err());
    let over = named(
        json!({"devices": {"requests": [bandwidth("a", "60G"), bandwidth("b", "60G")]}}),
        "over",
        "u4",
    );
    let got = run(&[&over], "n1", &inv, &InUse::default()).unwrap();
    assert_eq!(
        devices(&got[0]),
        ["nic-0", "nic-1"],
        "60G twice does not fit one NIC"
    );
}

#[test]
fn capacity_requests_filter_devices_that_are_not_shared() {
    let n1 = slice(
        "n1",
        "n1",
        json!([gpu("g0", "a", "40Gi"), gpu("g1", "a", "80Gi")]),
    );
    let inv = Inventory::new([&n1], [gpus()]);
    let c = claim(json!({"devices": {"requests": [{"name": "r", "exactly": {
        "deviceClassName": "gpu", "capacity": {"requests": {"memory": "60Gi"}}}}]}}));
    let a = run(&[&c], "n1", &inv, &InUse::default()).unwrap();
    assert_eq!(devices(&a[0]), ["g1"]);
    assert_eq!(a[0].results[0].share, None, "a whole device has no share");
    let two = claim(json!({"devices": {"requests": [{"name": "r", "exactly": {
        "deviceClassName": "gpu", "count": 2, "capacity": {"requests": {"memory": "60Gi"}}}}]}}));
    let err = run(&[&two], "n1", &inv, &InUse::default()).unwrap_err();
    assert!(
        err.to_string()
            .contains("1 matching device(s) without the capacity requested left"),
        "{err}"
    );
    let unknown = claim(json!({"devices": {"requests": [{"name": "r", "exactly": {
        "deviceClassName": "gpu", "capacity": {"requests": {"cores": "1"}}}}]}}));
    assert!(run(&[&unknown], "n1", &inv, &InUse::default()).is_err());
}

#[test]
fn a_request_policy_needs_a_shared_device_and_selectors_see_sharing() {
    let s: api::ResourceSlice = serde_json::from_value(json!({
        "metadata": {"name": "s"},
        "spec": {"driver": DRIVER, "nodeName": "n1", "pool": {"name": "n1", "generation": 0, "resourceSliceCount": 1},
            "devices": [{"name": "d", "capacity": {"bandwidth": {"value": "1", "requestPolicy": {"default": "1"}}}}]},
    }))
    .unwrap();
    assert!(
        Slice::from_api(&s)
            .unwrap_err()
            .0
            .contains("does not allow multiple allocations")
    );
    let n1 = slice("n1", "n1", json!([nic("nic-0"), gpu("g0", "a", "80Gi")]));
    let inv = Inventory::new([&n1], [class("gpu", "device.allowMultipleAllocations")]);
    let c = claim(json!({"devices": {"requests": [exact("r", 2)]}}));
    let err = run(&[&c], "n1", &inv, &InUse::default()).unwrap_err();
    assert!(err.to_string().contains("1 available"), "{err}");
}

#[test]
fn a_shared_device_consumes_its_counters_once() {
    let counters = counter_slice(
        "n1",
        json!([{"name": "port", "counters": {"lanes": {"value": "1"}}}]),
    );
    let s: api::ResourceSlice = serde_json::from_value(json!({
        "metadata": {"name": "n1"},
        "spec": {"driver": DRIVER, "nodeName": "n1", "pool": {"name": "n1", "generation": 0, "resourceSliceCount": 2},
            "devices": [
                {"name": "vf", "allowMultipleAllocations": true,
                 "capacity": {"bandwidth": {"value": "100G"}},
                 "consumesCounters": [{"counterSet": "port", "counters": {"lanes": {"value": "1"}}}]},
                {"name": "pf", "consumesCounters": [{"counterSet": "port", "counters": {"lanes": {"value": "1"}}}]},
            ]},
    }))
    .unwrap();
    let n1 = Slice::from_api(&s).unwrap();
    let inv = Inventory::new(
        [&n1, &counters],
        [class("gpu", "device.allowMultipleAllocations")],
    );
    let a = named(
        json!({"devices": {"requests": [bandwidth("r", "10G")]}}),
        "a",
        "ua",
    );
    let got = run(&[&a], "n1", &inv, &InUse::default()).unwrap();
    let a = recorded(&a, &got[0]);
    let in_use = InUse::of([&a], &inv);
    let b = named(
        json!({"devices": {"requests": [bandwidth("r", "10G")]}}),
        "b",
        "ub",
    );
    assert!(
        run(&[&b], "n1", &inv, &in_use).is_ok(),
        "the device's lanes are consumed already"
    );
    let both = named(
        json!({"devices": {"requests": [bandwidth("x", "10G"), bandwidth("y", "10G")]}}),
        "both",
        "u2",
    );
    assert!(run(&[&both], "n1", &inv, &InUse::default()).is_ok());
    let pf = Inventory::new([&n1], [class("gpu", "!device.allowMultipleAllocations")]);
    let whole = claim(json!({"devices": {"requests": [exact("r", 1)]}}));
    assert!(
        run(&[&whole], "n1", &pf, &InUse::of([&a], &pf)).is_err(),
        "the lane is the shared device's"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 100, ..ProptestConfig::default() })]

    /// Claims allocated one after another on shared devices never consume
    /// more than a device's capacity, and one is refused only when no
    /// device has what its request would consume left.
    #[test]
    fn shares_never_exceed_a_device_capacity(
        asks in proptest::collection::vec(1u32..=60, 1..12),
        nics in 1usize..3,
    ) {
        let list: Vec<Json> = (0..nics).map(|i| nic(&format!("nic-{i}"))).collect();
        let n1 = slice("n1", "n1", Json::Array(list));
        let inv = Inventory::new([&n1], [gpus()]);
        let mut held: Vec<Claim> = Vec::new();
        let mut used = vec![0u64; nics];
        for (k, g) in asks.iter().enumerate() {
            let c = named(
                json!({"devices": {"requests": [bandwidth("r", &format!("{g}G"))]}}),
                &format!("c{k}"),
                &format!("u{k}"),
            );
            let in_use = InUse::of(held.iter(), &inv);
            let consumes = u64::from(g.div_ceil(10) * 10);
            match run(&[&c], "n1", &inv, &in_use) {
                Ok(a) => {
                    let r = &a[0].results[0];
                    let i: usize = r.device.device[4..].parse().unwrap();
                    used[i] += consumes;
                    prop_assert!(used[i] <= 100, "nic-{} over capacity: {:?}", i, used);
                    let share = r.share.as_ref().unwrap();
                    prop_assert_eq!(share.consumed[0].1, Quantity::parse(&format!("{consumes}G")).unwrap());
                    held.push(recorded(&c, &a[0]));
                }
                Err(e) => {
                    prop_assert!(used.iter().all(|u| u + consumes > 100), "refused with room: {} {:?}", e, used);
                }
            }
        }
    }
}
