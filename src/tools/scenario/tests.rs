use std::path::Path;

use super::manifests::{SCENARIO_LABEL, priority_class_name};
use super::*;

pub(super) const SMALL: &str = r#"
name: small
nodes:
  - {namePrefix: cpu, count: 2, capacity: {cpu: 4, memory: 8Gi, pods: 10}}
  - namePrefix: gpu
    count: 1
    capacity: {cpu: "16", nvidia.com/gpu: 8, pods: 110}
    taints: [{key: nvidia.com/gpu, effect: NoSchedule}]
namespaces: [ml]
workloads:
  - gang:
      namePrefix: train
      namespace: ml
      count: 2
      size: 3
      minCount: 2
      requests: {cpu: 1, nvidia.com/gpu: 2}
      priority: 50
      simRunSeconds: 30
      timeoutSeconds: 7
      tolerations: [{key: nvidia.com/gpu, operator: Exists}]
      nodeSelector: {pool: gpu}
      expect: {outcome: bound}
  - pods: {namePrefix: web, count: 3, requests: {cpu: 100m}}
"#;

fn err(text: &str) -> ScenarioError {
    Scenario::parse(text, "t.yaml").unwrap_err()
}

#[test]
fn parses_every_field() {
    let s = Scenario::parse(SMALL, "small.yaml").unwrap();
    assert_eq!(s.name, "small");
    assert_eq!(s.timeout_seconds, 60);
    assert_eq!(s.scheduler_name, "muster");
    assert_eq!(s.node_count(), 3);
    assert_eq!(s.pod_count(), 9);
    assert_eq!(s.gang_count(), 2);
    assert_eq!(s.nodes[1].capacity["nvidia.com/gpu"], "8");
    let Workload::Gang(g) = &s.workloads[0] else {
        panic!("first workload is a gang")
    };
    assert_eq!((g.size, g.min_count(), g.count), (3, 2, 2));
    assert_eq!(g.requests["cpu"], "1");
    assert_eq!(g.expect.map(|e| e.outcome), Some(Outcome::Bound));
    let Workload::Pods(p) = &s.workloads[1] else {
        panic!("second workload is plain pods")
    };
    assert_eq!((p.count, p.namespace.as_str()), (3, "default"));
}

#[test]
fn plan_creates_setup_then_groups_and_members() {
    let plan = Scenario::parse(SMALL, "small.yaml").unwrap().plan();
    let kinds: Vec<Kind> = plan.setup.iter().map(|m| m.kind).collect();
    assert_eq!(
        kinds,
        [
            Kind::Namespace,
            Kind::PriorityClass,
            Kind::Node,
            Kind::Node,
            Kind::Node
        ]
    );
    assert_eq!(plan.setup[1].name, priority_class_name(50));
    assert_eq!(
        plan.setup[4].object["spec"]["taints"][0]["key"],
        "nvidia.com/gpu"
    );
    assert_eq!(plan.workloads.len(), 3, "two gangs, one batch of pods");
    let WorkloadPlan::Gang(g) = &plan.workloads[1] else {
        panic!("gang plan")
    };
    assert_eq!(g.name, "train-1");
    assert_eq!(g.min_count, 2);
    assert_eq!(g.timeout, Some(std::time::Duration::from_secs(7)));
    assert_eq!(
        g.group.as_ref().unwrap().object["spec"]["schedulingPolicy"]["gang"]["minCount"],
        2
    );
    assert_eq!(
        g.group.as_ref().unwrap().object["metadata"]["annotations"]["muster.dev/schedule-timeout-seconds"],
        "7"
    );
    let names: Vec<&str> = g.pods.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["train-1-0", "train-1-1", "train-1-2"]);
    let pod = &g.pods[0].object;
    assert_eq!(pod["metadata"]["namespace"], "ml");
    assert_eq!(pod["metadata"]["labels"][SCENARIO_LABEL], "small");
    assert_eq!(
        pod["metadata"]["annotations"]["muster.dev/sim-run-seconds"],
        "30"
    );
    assert_eq!(pod["spec"]["schedulerName"], "muster");
    assert_eq!(pod["spec"]["schedulingGroup"]["podGroupName"], "train-1");
    assert_eq!(pod["spec"]["priorityClassName"], priority_class_name(50));
    assert_eq!(pod["spec"]["nodeSelector"]["pool"], "gpu");
    assert_eq!(
        pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"],
        "2"
    );
    let WorkloadPlan::Pods(p) = &plan.workloads[2] else {
        panic!("pods plan")
    };
    assert_eq!(p.pods.len(), 3);
    assert!(p.pods[0].object["spec"].get("schedulingGroup").is_none());
}

#[test]
fn the_demo_is_what_the_task_promises() {
    let s = Scenario::demo().unwrap();
    assert_eq!(s.node_count(), 8);
    let gangs: Vec<(u32, Option<Outcome>)> = s
        .plan()
        .workloads
        .iter()
        .filter_map(|w| match w {
            WorkloadPlan::Gang(g) => Some((g.pods.len() as u32, g.expect)),
            WorkloadPlan::Pods(_) => None,
        })
        .collect();
    assert_eq!(
        gangs,
        [
            (4, Some(Outcome::Bound)),
            (4, Some(Outcome::Bound)),
            (8, Some(Outcome::Bound)),
            (4, Some(Outcome::TimedOut)),
        ]
    );
    assert!(s.timeout_seconds < 30 + 1);
}

#[test]
fn every_shipped_scenario_parses() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/scenarios");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
            seen += 1;
        }
    }
    assert!(seen >= 1, "no scenarios in {}", dir.display());
}

#[test]
fn unknown_field_names_its_path() {
    let e = err(
        "name: x\nworkloads:\n  - pods: {namePrefix: a}\n  - gang: {namePrefix: b, size: 2, minCuont: 1}\n",
    );
    assert_eq!(e.path, "workloads[1].gang.minCuont");
    assert!(e.message.contains("minCuont"), "{e}");
    assert!(
        e.to_string()
            .starts_with("t.yaml: workloads[1].gang.minCuont: unknown field"),
        "{e}"
    );

    let e = err("name: x\nnodes: [{count: 1, colour: red}]\n");
    assert_eq!(e.path, "nodes[0].colour");
    assert!(e.message.contains("colour"), "{e}");

    let e = err("name: x\nworkloads: [{job: {}}]\n");
    assert_eq!(e.path, "workloads[0].job");
    assert!(e.message.contains("expected `gang` or `pods`"), "{e}");

    let e = err("name: x\nworkloads: [{}]\n");
    assert_eq!(e.path, "workloads[0]");
    assert!(e.message.contains("exactly one of"), "{e}");
}

#[test]
fn bad_values_name_their_path() {
    let cases = [
        (
            "name: x\nworkloads: [{gang: {namePrefix: g, size: 0}}]",
            "workloads[0].gang.size",
        ),
        (
            "name: x\nworkloads: [{gang: {namePrefix: g, size: 2, count: 0}}]",
            "workloads[0].gang.count",
        ),
        (
            "name: x\nworkloads: [{pods: {namePrefix: p, requests: {cpu: lots}}}]",
            "workloads[0].pods.requests.cpu",
        ),
        (
            "name: x\nworkloads: [{pods: {namePrefix: p, expect: {outcome: timedOut}}}]",
            "workloads[0].pods.expect.outcome",
        ),
        (
            "name: x\nworkloads: [{pods: {namePrefix: p, namespace: ml}}]",
            "workloads[0].pods.namespace",
        ),
        (
            "name: x\nworkloads: [{pods: {namePrefix: Web}}]",
            "workloads[0].pods.namePrefix",
        ),
        (
            "name: x\nworkloads: [{pods: {namePrefix: p}}, {pods: {namePrefix: p}}]",
            "workloads[1].pods.namePrefix",
        ),
        (
            "name: x\nnodes: [{capacity: {cpu: many}}]",
            "nodes[0].capacity.cpu",
        ),
        ("name: x\ncreationRate: 0", "creationRate"),
        ("name: 'bad name'", "name"),
        (
            "name: x\nworkloads: [{gang: {namePrefix: g, size: 2, expect: {outcome: done}}}]",
            "workloads[0].gang.expect.outcome",
        ),
    ];
    for (text, path) in cases {
        assert_eq!(err(text).path, path, "{text}");
    }
    assert_eq!(err("workloads: []").path, "<document>");
}

/// Every dialect's manifests read back, through Muster's own dialect
/// translators, as one gang with the scenario's minCount.
#[test]
fn every_dialect_round_trips_through_the_translators() {
    use muster_core::dialects::{DEFINITION_SOURCES, KueueGroups, Synthesized, resolve_membership};
    use muster_core::model::{GroupPolicy, PodInfo};
    for dialect in [
        "podGroup",
        "podGroupV1alpha2",
        "workload",
        "coscheduling",
        "volcano",
        "kueue",
    ] {
        let min = if dialect == "kueue" { 3 } else { 2 };
        let text = format!(
            "name: d\ndialect: {dialect}\nworkloads:\n  - gang: {{namePrefix: g, size: 3, minCount: {min}}}\n"
        );
        let plan = Scenario::parse(&text, "d.yaml").unwrap().plan();
        let WorkloadPlan::Gang(g) = &plan.workloads[0] else {
            panic!("a gang")
        };
        let pods: Vec<PodInfo> = g
            .pods
            .iter()
            .map(|p| PodInfo::from_json(&serde_json::to_vec(&p.object).unwrap()).unwrap())
            .collect();
        let wire: muster_core::model::wire::PodWire =
            serde_json::from_value(g.pods[0].object.clone()).unwrap();
        let key = resolve_membership(&wire)
            .key()
            .cloned()
            .unwrap_or_else(|| panic!("{dialect}: the pod is a member"));
        let def = match &g.group {
            Some(m) => {
                let (group, version, kind, _) = m.kind.gvk();
                let source = DEFINITION_SOURCES
                    .iter()
                    .find(|s| s.group == group && s.kind == kind && s.versions.contains(&version))
                    .unwrap_or_else(|| panic!("{dialect}: {group}/{version} {kind} is watched"));
                (source.translate)(&m.object).unwrap().remove(0)
            }
            None => {
                let mut groups = KueueGroups::default();
                let out: Vec<_> = pods.iter().flat_map(|p| groups.observe(p)).collect();
                match out.last() {
                    Some(Synthesized::Upserted(d)) => (**d).clone(),
                    other => panic!("{dialect}: expected a synthesized group, got {other:?}"),
                }
            }
        };
        assert_eq!(def.key, key.definition, "{dialect}");
        match def.policy {
            Ok(GroupPolicy::Gang { min_count, .. }) => assert_eq!(min_count, min, "{dialect}"),
            other => panic!("{dialect}: {other:?}"),
        }
    }
}

#[test]
fn required_topology_is_written_where_the_dialect_has_it() {
    let text = "name: t\nworkloads:\n  - gang: {namePrefix: g, size: 2, requiredTopology: topology.kubernetes.io/rack}\n";
    let plan = Scenario::parse(text, "t.yaml").unwrap().plan();
    let WorkloadPlan::Gang(g) = &plan.workloads[0] else {
        panic!("a gang")
    };
    assert_eq!(
        g.group.as_ref().unwrap().object["spec"]["schedulingConstraints"]["topology"][0]["key"],
        "topology.kubernetes.io/rack"
    );
    let e = err(
        "name: t\ndialect: volcano\nworkloads:\n  - gang: {namePrefix: g, size: 2, requiredTopology: rack}\n",
    );
    assert_eq!(e.path, "workloads[0].gang.requiredTopology");
    assert!(
        e.message
            .contains("volcano dialect has no required topology"),
        "{e}"
    );
    let e = err(
        "name: t\nworkloads:\n  - gang: {namePrefix: g, size: 2, minCount: 1, dialect: kueue}\n",
    );
    assert_eq!(e.path, "workloads[0].gang.minCount");
    let e = err("name: t\ndialect: slurm\n");
    assert_eq!(e.path, "dialect");
    assert!(e.message.contains("unknown variant"), "{e}");
}

/// `kueueTopology` becomes a Kueue Topology after the nodes, and a gang's
/// `preferredTopology` reads back, through Muster's own translators, as the
/// preferred level (PodGroup annotation, Kueue pod annotation).
#[test]
fn kueue_topology_and_preferred_topology_round_trip() {
    use muster_core::dialects::{DEFINITION_SOURCES, KueueGroups, Synthesized};
    use muster_core::model::{LevelRef, PodInfo};
    let text = "name: t
nodes: [{count: 2, capacity: {cpu: 4, pods: 10}, topology: {hostsPerRack: 1, racksPerBlock: 2}}]
kueueTopology: [topology.muster.dev/block, topology.muster.dev/rack, kubernetes.io/hostname]
workloads:
  - gang: {namePrefix: pg, size: 2, preferredTopology: topology.muster.dev/rack, requiredTopology: topology.muster.dev/block}
  - gang: {namePrefix: kq, size: 2, dialect: kueue, preferredTopology: topology.muster.dev/rack}
";
    let plan = Scenario::parse(text, "t.yaml").unwrap().plan();
    let kinds: Vec<Kind> = plan.setup.iter().map(|m| m.kind).collect();
    assert_eq!(kinds, [Kind::Node, Kind::Node, Kind::KueueTopology]);
    let topology = muster_core::dialects::topology::topology_def(&plan.setup[2].object).unwrap();
    assert_eq!(&*topology.name, "t");
    let levels: Vec<&str> = topology.levels.iter().map(|l| &**l).collect();
    assert_eq!(
        levels,
        [
            "topology.muster.dev/block",
            "topology.muster.dev/rack",
            "kubernetes.io/hostname"
        ]
    );
    let label = |k: &str| Some(LevelRef::Label(k.into()));

    let WorkloadPlan::Gang(pg) = &plan.workloads[0] else {
        panic!("a gang")
    };
    let m = pg.group.as_ref().unwrap();
    let (group, version, kind, _) = m.kind.gvk();
    let source = DEFINITION_SOURCES
        .iter()
        .find(|s| s.group == group && s.kind == kind && s.versions.contains(&version))
        .unwrap();
    let def = (source.translate)(&m.object).unwrap().remove(0);
    assert_eq!(def.topology.preferred, label("topology.muster.dev/rack"));
    assert_eq!(def.topology.required, label("topology.muster.dev/block"));

    let WorkloadPlan::Gang(kq) = &plan.workloads[1] else {
        panic!("a gang")
    };
    let mut groups = KueueGroups::default();
    let out: Vec<_> = kq
        .pods
        .iter()
        .map(|p| PodInfo::from_json(&serde_json::to_vec(&p.object).unwrap()).unwrap())
        .flat_map(|p| groups.observe(&p))
        .collect();
    let Some(Synthesized::Upserted(def)) = out.last() else {
        panic!("a synthesized group: {out:?}")
    };
    assert_eq!(def.topology.preferred, label("topology.muster.dev/rack"));
    assert_eq!(def.topology.required, None);
}

#[test]
fn bad_topology_fields_name_their_path() {
    let gang = |fields: &str| {
        format!("name: x\nworkloads: [{{gang: {{namePrefix: g, size: 2, {fields}}}}}]")
    };
    let cases = [
        (
            "name: x\nkueueTopology: []".to_string(),
            "kueueTopology",
            "at least 1",
        ),
        (
            "name: x\nkueueTopology: [rack, rack]".into(),
            "kueueTopology[1]",
            "must be unique",
        ),
        (
            "name: x\nkueueTopology: ['a b']".into(),
            "kueueTopology[0]",
            "name part must consist",
        ),
        (
            "name: x\nkueueTopology: [kubernetes.io/hostname, rack]".into(),
            "kueueTopology[0]",
            "may only be the last level",
        ),
        (
            gang("preferredTopology: 'rack/'"),
            "workloads[0].gang.preferredTopology",
            "name part must be non-empty",
        ),
        (
            gang("requiredTopology: ''"),
            "workloads[0].gang.requiredTopology",
            "name part must be non-empty",
        ),
        (
            gang("preferredTopology: rack, dialect: volcano"),
            "workloads[0].gang.preferredTopology",
            "volcano dialect has no preferred topology level",
        ),
        (
            gang("preferredTopology: rack, dialect: workload"),
            "workloads[0].gang.preferredTopology",
            "workload dialect has no preferred topology level",
        ),
        (
            gang("preferredTopology: rack, requiredTopology: block, dialect: kueue"),
            "workloads[0].gang.preferredTopology",
            "not both",
        ),
    ];
    for (text, path, needle) in cases {
        let e = err(&text);
        assert_eq!(e.path, path, "{text}: {e}");
        assert!(e.message.contains(needle), "{text}: {e}");
    }
}

/// The TAS scenarios are the shapes docs/load-testing.md says: 5,000
/// nodes in 50 racks of 100 and 10 blocks of 5 racks.
#[test]
fn tas_scenarios_have_upstreams_shape() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/scenarios");
    let tas = |name: &str| Scenario::load(&dir.join(name)).unwrap();
    for (file, gangs, size) in [
        ("perf-tas-rack-5k.yaml", 750, 4),
        ("perf-tas-rack-5k-1500.yaml", 1500, 4),
        ("perf-tas-rack-5k-2250.yaml", 2250, 4),
        ("perf-tas-block-5k.yaml", 3, 1000),
        ("perf-tas-preferred-5k.yaml", 30, 120),
    ] {
        let s = tas(file);
        assert_eq!(s.node_count(), 5000, "{file}");
        assert_eq!(s.gang_count(), gangs, "{file}");
        assert_eq!(s.pod_count(), gangs * size, "{file}");
        let t = s.nodes[0].topology;
        assert_eq!((t.hosts_per_rack, t.racks_per_block), (100, 5), "{file}");
    }
}

const PHASES: &str = r#"
name: phases
workloads:
  - pods: {namePrefix: low, count: 4, terminationGracePeriodSeconds: 0,
           expect: {outcome: boundOrPreempted}}
  - gang: {namePrefix: g, count: 2, size: 2}
  - pods: {namePrefix: high, count: 3, intervalMilliseconds: 200, priority: 10,
           start: {after: previousSettled, delaySeconds: 2}}
  - pods: {namePrefix: measured, count: 5, measured: true}
  - pods: {namePrefix: late, count: 1, start: {delaySeconds: 5}}
"#;

/// `start` opens a phase that runs to the next `start`; a workload without
/// one joins the phase before; gangs expand to one plan workload each.
#[test]
fn plan_phases_follow_start() {
    use std::time::Duration;
    let s = Scenario::parse(PHASES, "phases.yaml").unwrap();
    let plan = s.plan();
    let stages: Vec<_> = plan
        .stages
        .iter()
        .map(|st| (st.workloads.clone(), st.after_settled, st.delay))
        .collect();
    assert_eq!(
        stages,
        [
            (0..3, false, Duration::ZERO),
            (3..5, true, Duration::from_secs(2)),
            (5..6, false, Duration::from_secs(5)),
        ]
    );
    let WorkloadPlan::Pods(low) = &plan.workloads[0] else {
        panic!("pods plan")
    };
    assert_eq!(low.expect, Some(Outcome::BoundOrPreempted));
    assert_eq!(
        low.pods[0].object["spec"]["terminationGracePeriodSeconds"],
        0
    );
    assert!(!low.measured);
    let WorkloadPlan::Pods(high) = &plan.workloads[3] else {
        panic!("pods plan")
    };
    assert_eq!(high.interval, Some(Duration::from_millis(200)));
    assert!(
        high.pods[0].object["spec"]
            .get("terminationGracePeriodSeconds")
            .is_none()
    );
    let WorkloadPlan::Pods(measured) = &plan.workloads[4] else {
        panic!("pods plan")
    };
    assert!(measured.measured);
    assert_eq!(measured.interval, None);
}

#[test]
fn a_scenario_without_start_is_one_phase() {
    let plan = Scenario::parse(SMALL, "small.yaml").unwrap().plan();
    assert_eq!(plan.stages.len(), 1);
    assert_eq!(plan.stages[0].workloads, 0..3);
    assert!(!plan.stages[0].after_settled);
}

#[test]
fn phase_and_churn_fields_are_checked() {
    let pods = |fields: &str| {
        format!(
            "name: x\nworkloads:\n  - pods: {{namePrefix: a}}\n  - pods: {{namePrefix: b, {fields}}}\n"
        )
    };
    let cases = [
        (
            "name: x\nworkloads: [{pods: {namePrefix: a, start: {after: previousSettled}}}]"
                .to_string(),
            "workloads[0].pods.start.after",
            "no earlier workload",
        ),
        (
            pods("start: {after: everything}"),
            "workloads[1].pods.start.after",
            "unknown variant `everything`",
        ),
        (
            pods("start: {delaySeconds: 60}"),
            "workloads[1].pods.start.delaySeconds",
            "less than the scenario's timeoutSeconds (60)",
        ),
        (
            pods("start: {afterr: previousSettled}"),
            "workloads[1].pods.start.afterr",
            "unknown field",
        ),
        (
            pods("intervalMilliseconds: 0"),
            "workloads[1].pods.intervalMilliseconds",
            "must be positive",
        ),
        (
            pods("intervalMilliseconds: 3600001"),
            "workloads[1].pods.intervalMilliseconds",
            "at most 3600000",
        ),
        (
            pods("terminationGracePeriodSeconds: 86401"),
            "workloads[1].pods.terminationGracePeriodSeconds",
            "at most 86400",
        ),
        (
            pods("terminationGracePeriodSeconds: -1"),
            "workloads[1].pods.terminationGracePeriodSeconds",
            "invalid type: integer `-1`",
        ),
        (
            pods("expect: {outcome: preemptedd}"),
            "workloads[1].pods.expect.outcome",
            "unknown variant",
        ),
        (
            "name: x\nworkloads: [{gang: {namePrefix: g, size: 2, intervalMilliseconds: 5}}]"
                .to_string(),
            "workloads[0].gang.intervalMilliseconds",
            "unknown field",
        ),
        (
            pods("measured: yes please"),
            "workloads[1].pods.measured",
            "invalid type",
        ),
    ];
    for (text, path, needle) in cases {
        let e = err(&text);
        assert_eq!(e.path, path, "{text}: {e}");
        assert!(e.message.contains(needle), "{text}: {e}");
    }
    for outcome in ["bound", "preempted", "boundOrPreempted", "waiting"] {
        Scenario::parse(&pods(&format!("expect: {{outcome: {outcome}}}")), "t").unwrap();
    }
}

/// The preemption scenarios have the shapes their headers (and
/// docs/load-testing.md) describe.
#[test]
fn preemption_scenarios_have_upstreams_shape() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/scenarios");
    let load = |name: &str| Scenario::load(&dir.join(name)).unwrap();

    // PreemptionAsync/5000Nodes.
    let s = load("perf-preemption-5k.yaml");
    assert_eq!(s.node_count(), 5000);
    assert_eq!(s.nodes[0].capacity["cpu"], "4");
    let pods: Vec<_> = s
        .workloads
        .iter()
        .map(|w| {
            let Workload::Pods(p) = w else {
                panic!("plain pods only")
            };
            (
                p.count,
                p.requests["cpu"].as_str(),
                p.priority,
                p.interval_milliseconds,
                p.measured,
                p.start.and_then(|st| st.after),
            )
        })
        .collect();
    assert_eq!(
        pods,
        [
            (20000, "900m", None, None, false, None),
            (
                50,
                "3970m",
                Some(10000),
                Some(200),
                false,
                Some(After::PreviousSettled)
            ),
            (5000, "100m", None, None, true, None),
        ]
    );
    let plan = s.plan();
    assert_eq!(
        plan.stages.len(),
        2,
        "fill, then churn with the measured pods"
    );

    // Gang preemption: low gangs fill every CPU, high gangs a node per member.
    let s = load("perf-gang-preemption-5k.yaml");
    assert_eq!(s.node_count(), 5000);
    let (Workload::Gang(low), Workload::Gang(high)) = (&s.workloads[0], &s.workloads[1]) else {
        panic!("two gang workloads")
    };
    let cpus = |q: &str| {
        muster_core::model::Quantity::parse(q)
            .unwrap()
            .milli_value()
    };
    assert_eq!(
        i64::from(low.count * low.size) * cpus(&low.requests["cpu"]),
        5000 * cpus(&s.nodes[0].capacity["cpu"]),
        "the low gangs fill every CPU"
    );
    assert_eq!(high.requests["cpu"], s.nodes[0].capacity["cpu"]);
    assert!(high.priority > low.priority);
    assert_eq!(
        high.start.and_then(|st| st.after),
        Some(After::PreviousSettled)
    );
    assert!(high.measured && high.required_topology.is_some());
    assert_eq!(
        low.expect.map(|e| e.outcome),
        Some(Outcome::BoundOrPreempted)
    );
    assert_eq!(high.expect.map(|e| e.outcome), Some(Outcome::Bound));
}
