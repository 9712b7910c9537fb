//! Scenarios with DRA: device classes and claim templates declared, parsed,
//! checked and turned into manifests; workloads claiming from templates.

use std::path::Path;

use super::manifests::SCENARIO_LABEL;
use super::*;

const DRA: &str = r#"
name: dra
nodes:
  - namePrefix: gpu
    count: 2
    capacity: {cpu: 64, memory: 512Gi, pods: 110}
    devices: {count: 8, model: h100, memory: 80Gi, pcieRoots: 2}
namespaces: [ml]
deviceClasses:
  - name: gpu.kwok.muster.dev
    selectors:
      - cel: {expression: 'device.driver == "gpu.kwok.muster.dev"'}
resourceClaimTemplates:
  - name: eight
    devices:
      requests:
        - name: gpu
          exactly:
            deviceClassName: gpu.kwok.muster.dev
            count: 8
            selectors:
              - cel: {expression: 'device.attributes["gpu.kwok.muster.dev"].model == "h100"'}
  - name: one
    devices:
      requests:
        - {name: gpu, exactly: {deviceClassName: gpu.kwok.muster.dev}}
workloads:
  - pods: {namePrefix: big, count: 1, claimTemplates: [eight]}
  - gang: {namePrefix: g, namespace: ml, size: 2, claimTemplates: [one]}
  - pods: {namePrefix: small, count: 2, claimTemplates: [one]}
"#;

fn err(text: &str) -> ScenarioError {
    Scenario::parse(text, "t.yaml").unwrap_err()
}

#[test]
fn classes_then_templates_in_each_namespace_that_uses_them() {
    let s = Scenario::parse(DRA, "dra.yaml").unwrap();
    let plan = s.plan();
    let setup: Vec<(Kind, Option<&str>, &str)> = plan
        .setup
        .iter()
        .filter(|m| m.kind != Kind::Node)
        .map(|m| (m.kind, m.namespace.as_deref(), m.name.as_str()))
        .collect();
    assert_eq!(
        setup,
        [
            (Kind::Namespace, None, "ml"),
            (Kind::DeviceClass, None, "gpu.kwok.muster.dev"),
            (Kind::ResourceClaimTemplate, Some("default"), "eight"),
            (Kind::ResourceClaimTemplate, Some("ml"), "one"),
            (Kind::ResourceClaimTemplate, Some("default"), "one"),
        ]
    );
    let class = &plan
        .setup
        .iter()
        .find(|m| m.kind == Kind::DeviceClass)
        .unwrap()
        .object;
    assert_eq!(class["apiVersion"], "resource.k8s.io/v1");
    assert_eq!(class["metadata"]["labels"][SCENARIO_LABEL], "dra");
    assert_eq!(
        class["spec"]["selectors"][0]["cel"]["expression"],
        r#"device.driver == "gpu.kwok.muster.dev""#
    );
    assert!(class["spec"].get("config").is_none());
    let template = &plan
        .setup
        .iter()
        .find(|m| m.kind == Kind::ResourceClaimTemplate)
        .unwrap()
        .object;
    assert_eq!(template["kind"], "ResourceClaimTemplate");
    assert_eq!(template["metadata"]["namespace"], "default");
    assert_eq!(
        template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"],
        8
    );
    let node = &plan
        .setup
        .iter()
        .find(|m| m.kind == Kind::Node)
        .unwrap()
        .object;
    assert!(
        node["metadata"]["annotations"]
            .get(muster_cluster::kwok::devices::DEVICES_ANNOTATION)
            .is_some(),
        "nodes carry their devices"
    );
}

#[test]
fn pods_claim_one_per_template_and_use_it() {
    let plan = Scenario::parse(DRA, "dra.yaml").unwrap().plan();
    let WorkloadPlan::Gang(g) = &plan.workloads[1] else {
        panic!("gang plan")
    };
    let spec = &g.pods[1].object["spec"];
    assert_eq!(
        spec["resourceClaims"],
        serde_json::json!([{"name": "one", "resourceClaimTemplateName": "one"}])
    );
    assert_eq!(
        spec["containers"][0]["resources"]["claims"],
        serde_json::json!([{"name": "one"}])
    );
    let plan = Scenario::parse(super::tests::SMALL, "small.yaml")
        .unwrap()
        .plan();
    let WorkloadPlan::Pods(p) = &plan.workloads[2] else {
        panic!("pods plan")
    };
    let spec = &p.pods[0].object["spec"];
    assert!(spec.get("resourceClaims").is_none());
    assert!(spec["containers"][0]["resources"].get("claims").is_none());
}

#[test]
fn a_template_counts_its_devices() {
    let s = Scenario::parse(DRA, "dra.yaml").unwrap();
    let counts: Vec<Option<u32>> = s
        .resource_claim_templates
        .iter()
        .map(|t| t.device_count())
        .collect();
    assert_eq!(counts, [Some(8), Some(1)]);
}

/// Replaces `from` in the DRA scenario (which must contain it).
fn with(from: &str, to: &str) -> String {
    assert!(DRA.contains(from), "{from}");
    DRA.replacen(from, to, 1)
}

#[test]
fn dra_mistakes_name_their_path() {
    let cases = [
        (
            with("claimTemplates: [eight]", "claimTemplates: [nine]"),
            "workloads[0].pods.claimTemplates[0]",
            r#""nine" is not declared in resourceClaimTemplates"#,
        ),
        (
            with("claimTemplates: [eight]", "claimTemplates: [one, one]"),
            "workloads[0].pods.claimTemplates[1]",
            "named twice",
        ),
        (
            with("- name: one\n", "- name: eight\n"),
            "resourceClaimTemplates[1].name",
            "declared twice",
        ),
        (
            with("- name: one\n", "- name: One.x\n"),
            "resourceClaimTemplates[1].name",
            "DNS label",
        ),
        (
            with("- name: gpu.kwok.muster.dev\n", "- name: Gpu\n"),
            "deviceClasses[0].name",
            "DNS subdomain",
        ),
        (
            with("    selectors:\n      - cel", "    selector:\n      - cel"),
            "deviceClasses[0].selector",
            "unknown field",
        ),
        (
            with(
                "- cel: {expression: 'device.driver",
                "- cel: {expresion: 'device.driver",
            ),
            "deviceClasses[0].selectors[0].cel.expresion",
            "unknown field",
        ),
        (
            with("count: 8\n", "count: 8\n            colour: red\n"),
            "resourceClaimTemplates[0].devices.requests[0].exactly.colour",
            "unknown field",
        ),
        (
            with("count: 8\n", "count: eight\n"),
            "resourceClaimTemplates[0].devices.requests[0].exactly.count",
            "invalid type",
        ),
        (
            with("count: 8\n", "count: 0\n"),
            "resourceClaimTemplates[0].devices",
            "count must be between 1",
        ),
        (
            with(r#".model == "h100"'"#, r#".model == '"#),
            "resourceClaimTemplates[0].devices",
            "selectors[0]",
        ),
        (
            with("devices: {count: 8,", "devices: {count: 0,"),
            "nodes[0].devices",
            "devices.count",
        ),
        (
            with(
                "size: 2, claimTemplates: [one]",
                "size: 2, groupClaimTemplates: [one], claimTemplates: [one]",
            ),
            "workloads[1].gang.claimTemplates[0]",
            "named twice",
        ),
        (
            with(
                "size: 2, claimTemplates: [one]",
                "size: 2, groupClaimTemplates: [two]",
            ),
            "workloads[1].gang.groupClaimTemplates[0]",
            "not declared",
        ),
        (
            with(
                "size: 2, claimTemplates: [one]",
                "size: 2, dialect: coscheduling, groupClaimTemplates: [one]",
            ),
            "workloads[1].gang.groupClaimTemplates",
            "dialect podGroup",
        ),
    ];
    for (text, path, needle) in cases {
        let e = err(&text);
        assert_eq!(e.path, path, "{e}");
        assert!(e.message.contains(needle), "{e}");
    }
}

/// `perf-dra-5k` is the shape docs/load-testing.md gives: 5,000 nodes of
/// 8 devices; 2,500 pods of 8 devices fill half of them, then (once those
/// are bound) 10,000 measured pods of one device each fit in the rest.
#[test]
fn perf_dra_5k_has_its_documented_shape() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/scenarios");
    let s = Scenario::load(&dir.join("perf-dra-5k.yaml")).unwrap();
    assert_eq!(s.node_count(), 5000);
    let devices = s.nodes[0].devices.as_ref().expect("nodes with devices");
    assert_eq!((devices.count, devices.model.as_str()), (8, "h100"));
    let per_pod = |name: &str| {
        s.resource_claim_templates
            .iter()
            .find(|t| t.name == name)
            .and_then(|t| t.device_count())
            .unwrap()
    };
    let shape: Vec<(u32, u32, bool, bool, Option<Outcome>)> = s
        .workloads
        .iter()
        .map(|w| {
            let Workload::Pods(p) = w else {
                panic!("plain pods only")
            };
            let [template] = p.claim_templates.as_slice() else {
                panic!("one claim per pod")
            };
            (
                p.count,
                per_pod(template),
                p.start.and_then(|st| st.after).is_some(),
                p.measured,
                p.expect.map(|e| e.outcome),
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            (2500, 8, false, false, Some(Outcome::Bound)),
            (10000, 1, true, true, Some(Outcome::Bound)),
        ]
    );
    let fill = u64::from(shape[0].0) * u64::from(shape[0].1);
    assert_eq!(fill, 2500 * devices.count as u64, "one node each");
    let measured = u64::from(shape[1].0) * u64::from(shape[1].1);
    assert!(measured <= (5000 - 2500) * devices.count as u64);
}

/// A gang's PodGroup claims from its group templates; each member names the
/// same entries first (so they resolve to the group's claims), then its own.
#[test]
fn a_pod_group_claims_for_its_members_and_they_name_its_entries() {
    let text = with(
        "size: 2, claimTemplates: [one]",
        "size: 2, groupClaimTemplates: [eight], claimTemplates: [one]",
    );
    let s = Scenario::parse(&text, "dra.yaml").unwrap();
    assert_eq!(
        s.group_claim_templates(),
        ["eight".to_string()].into_iter().collect()
    );
    let plan = s.plan();
    let WorkloadPlan::Gang(g) = &plan.workloads[1] else {
        panic!("gang plan")
    };
    let group = g.group.as_ref().expect("a PodGroup");
    assert_eq!(group.object["apiVersion"], "scheduling.k8s.io/v1beta1");
    assert_eq!(
        group.object["spec"]["resourceClaims"],
        serde_json::json!([{"name": "eight", "resourceClaimTemplateName": "eight"}])
    );
    let spec = &g.pods[0].object["spec"];
    assert_eq!(
        spec["resourceClaims"],
        serde_json::json!([
            {"name": "eight", "resourceClaimTemplateName": "eight"},
            {"name": "one", "resourceClaimTemplateName": "one"},
        ])
    );
    assert_eq!(
        spec["containers"][0]["resources"]["claims"],
        serde_json::json!([{"name": "eight"}, {"name": "one"}])
    );
    // The group's template is created in the gang's namespace.
    assert!(
        plan.setup
            .iter()
            .any(|m| m.kind == Kind::ResourceClaimTemplate
                && m.namespace.as_deref() == Some("ml")
                && m.name == "eight")
    );
}

/// `perf-dra-gangs-5k`: 625 racks of 8 nodes of 8 GPUs, a fabric unit per
/// rack; 500 gangs of 8 whose PodGroup shares a unit and whose members take
/// a node's 8 GPUs each, so each gang fills one rack.
#[test]
fn perf_dra_gangs_5k_has_its_documented_shape() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/scenarios");
    let s = Scenario::load(&dir.join("perf-dra-gangs-5k.yaml")).unwrap();
    assert_eq!(s.node_count(), 5000);
    let devices = s.nodes[0].devices.as_ref().expect("nodes with devices");
    assert_eq!(devices.count, 8);
    assert_eq!(devices.multi_node.as_ref().map(|m| m.count), Some(1));
    let [Workload::Gang(g)] = s.workloads.as_slice() else {
        panic!("one gang workload")
    };
    assert_eq!((g.count, g.size, g.measured), (500, 8, true));
    assert_eq!(g.group_claim_templates, ["rack-fabric"]);
    let per_member: u32 = g
        .claim_templates
        .iter()
        .filter_map(|t| s.resource_claim_templates.iter().find(|e| e.name == *t))
        .filter_map(|t| t.device_count())
        .sum();
    assert_eq!(per_member as usize, devices.count, "a node each");
    let racks = 5000 / 8;
    assert!(g.count as usize <= racks);
}
