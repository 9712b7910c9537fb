//! Regressions found by the differential test against kube-scheduler
//! 1.37's structured allocator (`tests/oracle.rs`): each test is one
//! difference the oracle found, answered here as upstream answers it.

use serde_json::{Value as Json, json};

use super::tests::{
    DRIVER, claim, claim_with, devices, exact, gpu, gpus, named, run, slice, slice_in,
};
use super::*;

/// A GPU with a rack in another attribute domain, or none.
fn racked(name: &str, rack: Option<&str>) -> Json {
    let mut d = gpu(name, "a", "80Gi");
    if let Some(r) = rack {
        d["attributes"]["other.example.com/rack"] = json!({"string": r});
    }
    d
}

const RACK_R0: &str = "device.attributes['other.example.com'].rack == 'r0'";

fn with_selector(name: &str, count: i64, selector: &str) -> Json {
    json!({"name": name, "exactly": {"deviceClassName": "gpu", "count": count,
        "selectors": [{"cel": {"expression": selector}}]}})
}

#[test]
fn a_selector_error_counts_only_where_the_search_evaluates_it() {
    // gpu-1 lacks the domain: evaluating the selector there is an error.
    let n1 = slice(
        "n1",
        "n1",
        json!([racked("g0", Some("r0")), racked("g1", None)]),
    );
    let inv = Inventory::new([&n1], [gpus()]);
    // One device wanted: g0 is found first, g1 never evaluated.
    let one = claim(json!({"devices": {"requests": [with_selector("r", 1, RACK_R0)]}}));
    let a = run(&[&one], "n1", &inv, &InUse::default()).unwrap();
    assert_eq!(devices(&a[0]), ["g0"]);
    // Two wanted: the search reaches g1, and the attempt ends there.
    let two = claim(json!({"devices": {"requests": [with_selector("r", 2, RACK_R0)]}}));
    let err = run(&[&two], "n1", &inv, &InUse::default()).unwrap_err();
    assert!(matches!(err, Unfit::Invalid { .. }), "{err}");
    // Held by another claim, g1 is passed over unevaluated.
    let n1b = slice(
        "n1",
        "n1",
        json!([racked("g0", None), racked("g1", Some("r0"))]),
    );
    let inv = Inventory::new([&n1b], [gpus()]);
    let held = claim_with(
        json!({"devices": {"requests": [exact("r", 1)]}}),
        json!({"allocation": {"devices": {"results": [
            {"request": "r", "driver": DRIVER, "pool": "n1", "device": "g0"}]}}}),
    );
    let in_use = InUse::of([&held], &inv);
    let a = run(&[&one], "n1", &inv, &in_use).unwrap();
    assert_eq!(devices(&a[0]), ["g1"]);
    // Taken by an earlier request of the same pod, likewise.
    let both = claim(json!({"devices": {"requests": [
        exact("first", 1), with_selector("second", 1, RACK_R0)]}}));
    let a = run(&[&both], "n1", &inv, &InUse::default()).unwrap();
    assert_eq!(devices(&a[0]), ["g0", "g1"]);
    // Free and reached first, it ends the attempt.
    assert!(matches!(
        run(&[&one], "n1", &inv, &InUse::default()),
        Err(Unfit::Invalid { .. })
    ));
}

#[test]
fn an_all_request_ignores_incomplete_pools_of_other_nodes() {
    let n1 = slice("n1", "n1", json!([gpu("g0", "a", "80Gi")]));
    let half = slice_in("n2-a", "n2", "n2", 1, 2, json!([gpu("g0", "a", "80Gi")]));
    let inv = Inventory::new([&n1, &half], [gpus()]);
    let all = claim(json!({"devices": {"requests": [
        {"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}}]}}));
    let a = run(&[&all], "n1", &inv, &InUse::default()).unwrap();
    assert_eq!(devices(&a[0]), ["g0"]);
    let err = run(&[&all], "n2", &inv, &InUse::default()).unwrap_err();
    assert!(err.to_string().contains("incomplete"), "{err}");
}

#[test]
fn admin_access_monitors_a_device_another_claim_of_the_pod_is_given() {
    let n1 = slice("n1", "n1", json!([gpu("g0", "a", "80Gi")]));
    let inv = Inventory::new([&n1], [gpus()]);
    let user = named(
        json!({"devices": {"requests": [exact("r", 1)]}}),
        "user",
        "u1",
    );
    let admin = named(
        json!({"devices": {"requests": [{"name": "r", "exactly": {
            "deviceClassName": "gpu", "adminAccess": true}}]}}),
        "admin",
        "u2",
    );
    let a = run(&[&user, &admin], "n1", &inv, &InUse::default()).unwrap();
    assert_eq!((devices(&a[0]), devices(&a[1])), (vec!["g0"], vec!["g0"]));
    assert!(a[1].results[0].admin_access);
    // The monitor's choice counts as taken for a later claim's own use.
    assert!(run(&[&admin, &user], "n1", &inv, &InUse::default()).is_err());
    // Within one claim, a device is given once.
    let twice = claim(json!({"devices": {"requests": [exact("a", 1),
        {"name": "b", "exactly": {"deviceClassName": "gpu", "adminAccess": true}}]}}));
    assert!(run(&[&twice], "n1", &inv, &InUse::default()).is_err());
}

#[test]
fn devices_are_tried_in_upstream_order() {
    // Slices by name, whatever order they arrive in.
    let b = slice_in("p-b", "n1", "p", 1, 2, json!([gpu("g-b", "a", "80Gi")]));
    let a = slice_in("p-a", "n1", "p", 1, 2, json!([gpu("g-a", "a", "80Gi")]));
    let inv = Inventory::new([&b, &a], [gpus()]);
    let one = claim(json!({"devices": {"requests": [exact("r", 1)]}}));
    let got = run(&[&one], "n1", &inv, &InUse::default()).unwrap();
    assert_eq!(devices(&got[0]), ["g-a"]);
}

#[test]
fn the_kubernetes_cel_libraries_evaluate() {
    let s = slice("n1", "n1", json!([gpu("g0", "a", "80Gi")]));
    let d = cel::device_value(DRIVER, &s.devices[0]);
    let eval = cel::Evaluator::new();
    for expr in [
        "device.attributes['gpu.example.com'].model.upperAscii() == 'H100'",
        "device.attributes['gpu.example.com'].model.split('1').size() == 2",
        "'%s-%d'.format(['a', 1]) == 'a-1'",
        "sets.contains(['h100', 'a100'], [device.attributes['gpu.example.com'].model])",
        "[3, 1, 2].max() == 3 && [1, 2, 3].sum() == 6 && [1, 2, 3].isSorted()",
        "[1, 2, 3].indexOf(2) == 1 && 'abc'.indexOf('c') == 2",
        "isQuantity('10Gi') && !isQuantity('ten') && isSemver('1.2.3')",
        "cidr('10.0.0.0/8').containsIP(ip('10.1.2.3')) && ip('::1').isLoopback()",
        "url('https://x.example.com:8443/a').getPort() == '8443' && !isURL('not a url')",
        "cel.bind(m, device.attributes['gpu.example.com'].model, m == 'a100' || m == 'h100')",
    ] {
        let sel = cel::Selector::compile(expr).unwrap();
        assert_eq!(eval.matches(&sel, &d), Ok(true), "{expr}");
    }
    // Refused when compiled, for their types.
    for expr in [
        "device.nosuch == 'x'",
        "quantity(1)",
        "[1, 2].map(x, x * 2)",
        "device.attributes['gpu.example.com'].model.reverse() == '001h'",
    ] {
        assert!(cel::Selector::compile(expr).is_err(), "{expr}");
    }
}
