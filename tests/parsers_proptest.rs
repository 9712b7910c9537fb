//! A short smoke of the fuzz targets' properties (tests/fuzz, `make fuzz`)
//! in `make test`: random strings and JSON into every parser that reads
//! tenant input — quantities, label and field selectors, pods of every
//! dialect, group definitions of every dialect, nodes, the configuration.
//! Never a panic; always an error that says something (and names the field
//! where there is one).

use muster::apiserver::selectors::{FieldSelector, LabelSelector};
use muster::config::SchedulerConfig;
use muster::dialects::{DEFINITION_SOURCES, KueueGroups};
use muster::model::{
    GroupPolicy, MAX_GROUP_COUNT, MAX_SCHEDULE_TIMEOUT, NodeInfo, PodInfo, Quantity,
};
use proptest::prelude::*;
use serde_json::{Value, json};

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Quantity-like strings: a sign, digits and dots, a suffix or exponent.
fn quantity_text() -> impl Strategy<Value = String> {
    (
        "[+-]?",
        "[0-9]{0,25}(\\.[0-9]{0,45})?",
        prop_oneof![
            Just(String::new()),
            "(n|u|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)",
            "[eE][+-]?[0-9]{1,4}",
            "[a-zA-Z]{1,3}",
        ],
    )
        .prop_map(|(s, n, x)| format!("{s}{n}{x}"))
}

/// Numbers a tenant might write where a count or a timeout goes.
fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-5i64..5).prop_map(Value::from),
        Just(json!(i64::MAX)),
        Just(json!(u64::MAX)),
        Just(json!(1e300)),
        Just(json!(0.5)),
        "[0-9]{1,30}".prop_map(Value::from),
        quantity_text().prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        Just(Value::Null),
    ]
}

/// Any JSON, shallow.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![number(), ".{0,12}".prop_map(Value::from)];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-zA-Z]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn resources() -> impl Strategy<Value = Value> {
    let name = prop_oneof![
        Just("cpu".to_string()),
        Just("memory".to_string()),
        Just("ephemeral-storage".to_string()),
        Just("nvidia.com/gpu".to_string()),
        Just("hugepages-2Mi".to_string()),
        "[a-z./-]{1,12}",
    ];
    prop::collection::btree_map(name, number(), 0..4)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
}

fn container() -> impl Strategy<Value = Value> {
    (
        resources(),
        resources(),
        prop::option::of("Always|Never"),
        any_json(),
    )
        .prop_map(|(requests, limits, restart, ports)| {
            json!({"name": "c", "restartPolicy": restart,
                   "resources": {"requests": requests, "limits": limits},
                   "ports": [{"containerPort": 1, "hostPort": ports}]})
        })
}

/// A pod with random quantities and random references of every dialect.
fn pod() -> impl Strategy<Value = Value> {
    let annotations = prop::collection::btree_map(
        prop_oneof![
            Just("scheduling.k8s.io/group-name".to_string()),
            Just("kueue.x-k8s.io/pod-group-total-count".to_string()),
            Just("kueue.x-k8s.io/podset-required-topology".to_string()),
            Just("muster.dev/ignore-groups".to_string()),
            Just("volcano.sh/task-spec".to_string()),
        ],
        prop_oneof![".{0,8}", "[0-9-]{1,25}"],
        0..4,
    );
    let labels = prop::collection::btree_map(
        prop_oneof![
            Just("scheduling.x-k8s.io/pod-group".to_string()),
            Just("kueue.x-k8s.io/pod-group-name".to_string()),
        ],
        ".{0,8}",
        0..3,
    );
    (
        prop::collection::vec(container(), 0..3),
        prop::collection::vec(container(), 0..3),
        resources(),
        resources(),
        annotations,
        labels,
        "[a-z]{0,4}",
        prop_oneof![Just(Value::Null), any_json()],
    )
        .prop_map(
            |(containers, init, overhead, pod_level, annotations, labels, group, affinity)| {
                json!({"metadata": {"name": "p", "namespace": "ns",
                        "annotations": annotations, "labels": labels},
                       "spec": {"containers": containers, "initContainers": init,
                        "overhead": overhead, "resources": {"requests": pod_level},
                        "schedulingGroup": {"podGroupName": group},
                        "workloadRef": {"name": group, "podGroup": "w"},
                        "affinity": {"nodeAffinity": affinity},
                        "priority": 1}})
            },
        )
}

/// A group definition of any dialect's shape, with random numbers.
fn definition() -> impl Strategy<Value = Value> {
    (
        number(),
        number(),
        number(),
        any_json(),
        resources(),
        any_json(),
    )
        .prop_map(
            |(count, timeout, annotation, tasks, min_resources, policy)| {
                let annotation = match annotation {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                json!({"metadata": {"name": "g", "namespace": "ns",
                    "annotations": {"muster.dev/schedule-timeout-seconds": annotation}},
                   "spec": {"minMember": count, "scheduleTimeoutSeconds": timeout,
                    "minTaskMember": tasks, "minResources": min_resources,
                    "schedulingPolicy": {"gang": {"minCount": count}, "extra": policy},
                    "podGroups": [{"name": "a", "policy": {"gang": {"minCount": count}}},
                                  {"name": "b", "policy": policy}]}})
            },
        )
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn quantities_parse_or_say_why(s in prop_oneof![quantity_text(), ".{0,40}"]) {
        match Quantity::parse(&s) {
            Ok(q) => {
                // Whole units always fit; millicores are checked, not wrapped.
                let _ = (q.value(), q.milli_value(), q.checked_milli_value());
            }
            Err(e) => prop_assert!(e.to_string().contains("invalid quantity") && !e.reason.is_empty()),
        }
    }

    #[test]
    fn selectors_parse_or_say_why(s in prop_oneof![".{0,40}", "[a-z!=(), ]{0,30}(in|notin)[ (a-z,)]{0,10}"]) {
        if let Err(e) = LabelSelector::parse(&s) {
            prop_assert!(!e.is_empty());
        }
        if let Err(e) = FieldSelector::parse(&s) {
            prop_assert!(!e.is_empty());
        }
    }

    #[test]
    fn arbitrary_bytes_are_not_pods_nodes_or_configs(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        if let Err(e) = PodInfo::from_json(&bytes) {
            prop_assert!(e.to_string().starts_with("pod JSON: "), "{e}");
        }
        if let Err(e) = NodeInfo::from_json(&bytes) {
            prop_assert!(!e.to_string().is_empty());
        }
        let text = String::from_utf8_lossy(&bytes);
        if let Err(e) = SchedulerConfig::from_yaml(&text) {
            prop_assert!(!e.to_string().is_empty());
        }
    }

    #[test]
    fn pods_decode_or_name_the_field(v in pod()) {
        let bytes = serde_json::to_vec(&v).unwrap();
        match PodInfo::from_json(&bytes) {
            Ok(p) => {
                // Accepted requests are never negative (nor wrapped).
                let r = &p.requests;
                prop_assert!(r.milli_cpu >= 0 && r.memory >= 0 && r.ephemeral_storage >= 0);
                prop_assert!(r.scalar.values().all(|v| *v >= 0));
                prop_assert!(p.non_zero_milli_cpu >= 0 && p.non_zero_memory >= 0);
                let mut kueue = KueueGroups::default();
                let _ = kueue.observe(&p);
            }
            Err(e) => {
                let e = e.to_string();
                prop_assert!(e.starts_with("pod ns/p: ") || e.starts_with("pod JSON: "), "{e}");
                prop_assert!(e.len() > "pod ns/p: ".len(), "{e}");
            }
        }
    }

    #[test]
    fn definitions_translate_or_name_the_field(v in definition()) {
        for source in DEFINITION_SOURCES {
            let defs = (source.translate)(&v);
            let Ok(defs) = defs else { continue };
            for d in defs {
                match &d.policy {
                    Ok(GroupPolicy::Gang { min_count, schedule_timeout }) => {
                        prop_assert!(*min_count >= 1 && *min_count <= MAX_GROUP_COUNT);
                        prop_assert!(schedule_timeout.is_none_or(|t| t <= MAX_SCHEDULE_TIMEOUT));
                    }
                    Ok(GroupPolicy::Basic) => {}
                    Err(e) => prop_assert!(
                        e.starts_with(&d.key.source.kind_name().to_string()) && e.contains(": "),
                        "{}: {e}", source.name
                    ),
                }
                prop_assert!(d.min_task_members.values().all(|n| *n <= MAX_GROUP_COUNT));
            }
        }
    }

    #[test]
    fn configurations_load_or_name_the_path(
        timeout in number(), backoff in number(), extra in any_json()
    ) {
        let yaml = format!(
            "profiles:\n- schedulerName: muster\n  pluginConfig:\n  - name: GangScheduling\n    args: {{permitWaitingTimeSeconds: {timeout}, podGroupBackoffSeconds: {backoff}}}\npodInitialBackoffSeconds: {extra}\n"
        );
        if let Err(e) = SchedulerConfig::from_yaml(&yaml) {
            prop_assert!(!e.to_string().is_empty());
        }
    }
}

/// The generators reach both outcomes (else the properties above would
/// check only one side).
#[test]
fn generated_pods_are_sometimes_accepted_and_sometimes_refused() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let (mut ok, mut refused) = (0, 0);
    for _ in 0..200 {
        let v = pod().new_tree(&mut runner).unwrap().current();
        match PodInfo::from_json(&serde_json::to_vec(&v).unwrap()) {
            Ok(_) => ok += 1,
            Err(_) => refused += 1,
        }
    }
    assert!(ok > 0 && refused > 0, "accepted {ok}, refused {refused}");
}
