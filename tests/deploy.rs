//! The deployment artefacts in deploy/: the kustomize base and the Helm chart
//! render valid objects of the kinds they claim, agree with each other, apply
//! to the simulated cluster, grant exactly the API calls Muster makes (recorded
//! against the simulator in an end-to-end run), and their dashboard and alerts
//! use only metrics Muster exports.
//!
//! kubectl and helm come from $MUSTER_KUBECTL / $MUSTER_HELM or `.tools/`.

use crate::{common, e2e};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, PostParams};
use muster::apiserver::recorder::ApiCall;
use muster::apiserver::{SimCluster, SimConfig};
use muster::config::SchedulerConfig;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::common::tools::{fails, helm_binary, kubectl_binary, root, run};

const NAMESPACE: &str = "muster-system";

// ---------------------------------------------------------------- rendering

/// Every non-empty document of a multi-document YAML stream.
fn documents(yaml: &str) -> Vec<Value> {
    serde_norway::Deserializer::from_str(yaml)
        .map(|doc| Value::deserialize(doc).expect("rendered YAML parses"))
        .filter(|v| !v.is_null())
        .collect()
}

fn kustomize() -> Vec<Value> {
    let base = root().join("deploy/manifests");
    documents(&run(
        &kubectl_binary(),
        &["kustomize", base.to_str().unwrap()],
    ))
}

fn chart() -> String {
    root().join("deploy/chart/muster").display().to_string()
}

/// `helm template <release> deploy/chart/muster -n <namespace> <extra…>`.
fn helm_template(release: &str, namespace: &str, extra: &[&str]) -> Vec<Value> {
    let chart = chart();
    let mut args = vec!["template", release, &chart, "--namespace", namespace];
    args.extend_from_slice(extra);
    documents(&run(&helm_binary(), &args))
}

/// Values that differ from every default the chart has.
const CUSTOM_VALUES: &[&str] = &[
    "--set",
    "image.repository=registry.example/muster,image.tag=1.2.3,replicas=3",
    "--set",
    "schedulerNames={batch,gangs}",
    "--set",
    "gang.permitWaitingTimeSeconds=120,gang.podGroupBackoffSeconds=0",
    "--set",
    "scoringStrategy.type=MostAllocated,resources.limits.memory=2Gi",
    "--set",
    "monitoring.enabled=false,createNamespace=true",
];

/// (kind, namespace, name) of every object.
fn ids(objs: &[Value]) -> BTreeSet<(String, String, String)> {
    objs.iter()
        .map(|o| {
            let s = |p: &str| {
                o.pointer(p)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            (s("/kind"), s("/metadata/namespace"), s("/metadata/name"))
        })
        .collect()
}

fn find<'a>(objs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objs.iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} rendered"))
}

/// Decodes into the Kubernetes type and checks nothing was lost: encoding it
/// again gives the same JSON, so no field is misspelt or misplaced.
fn typed<T: DeserializeOwned + serde::Serialize>(o: &Value) -> T {
    let t: T = serde_json::from_value(o.clone()).unwrap_or_else(|e| {
        panic!(
            "{} is not a valid {}: {e}",
            o["metadata"]["name"], o["kind"]
        )
    });
    let back = serde_json::to_value(&t).expect("re-encodes");
    assert_eq!(
        &back, o,
        "{} {} has fields its type does not know",
        o["kind"], o["metadata"]["name"]
    );
    t
}

/// Checks every object against the type its apiVersion and kind name.
fn check_types(objs: &[Value]) {
    for o in objs {
        let api_version = o["apiVersion"].as_str().unwrap_or("");
        match (api_version, o["kind"].as_str().unwrap_or("")) {
            ("v1", "Namespace") => drop(typed::<Namespace>(o)),
            ("v1", "ServiceAccount") => drop(typed::<ServiceAccount>(o)),
            ("v1", "ConfigMap") => drop(typed::<ConfigMap>(o)),
            ("v1", "Service") => drop(typed::<Service>(o)),
            ("apps/v1", "Deployment") => drop(typed::<Deployment>(o)),
            ("policy/v1", "PodDisruptionBudget") => drop(typed::<PodDisruptionBudget>(o)),
            ("rbac.authorization.k8s.io/v1", "ClusterRole") => drop(typed::<ClusterRole>(o)),
            ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
                drop(typed::<ClusterRoleBinding>(o))
            }
            ("rbac.authorization.k8s.io/v1", "Role") => drop(typed::<Role>(o)),
            ("rbac.authorization.k8s.io/v1", "RoleBinding") => drop(typed::<RoleBinding>(o)),
            ("monitoring.coreos.com/v1", "ServiceMonitor") => check_service_monitor(o),
            ("monitoring.coreos.com/v1", "PrometheusRule") => check_prometheus_rule(o),
            other => panic!("unexpected object {other:?}"),
        }
    }
}

fn check_service_monitor(o: &Value) {
    let spec = &o["spec"];
    assert!(spec["selector"]["matchLabels"].is_object(), "{o}");
    let endpoints = spec["endpoints"].as_array().expect("endpoints is a list");
    assert!(!endpoints.is_empty());
    for e in endpoints {
        assert!(e["port"].is_string() && e["path"] == "/metrics", "{e}");
        // Secure serving: HTTPS with Prometheus' own token.
        assert_eq!(e["scheme"], "https", "{e}");
        assert_eq!(
            e["bearerTokenFile"],
            "/var/run/secrets/kubernetes.io/serviceaccount/token"
        );
        assert!(e["tlsConfig"].is_object(), "{e}");
        let interval = e["interval"].as_str().expect("interval is a string");
        assert!(
            interval.ends_with('s') || interval.ends_with('m'),
            "{interval}"
        );
    }
    assert_eq!(spec["jobLabel"], "app.kubernetes.io/name");
}

fn check_prometheus_rule(o: &Value) {
    let groups = o["spec"]["groups"]
        .as_array()
        .expect("spec.groups is a list");
    for g in groups {
        assert!(g["name"].is_string());
        for r in g["rules"].as_array().expect("rules is a list") {
            let keys: BTreeSet<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
            let allowed: BTreeSet<&str> = ["alert", "expr", "for", "labels", "annotations"].into();
            assert!(keys.is_subset(&allowed), "unknown rule fields in {r}");
            assert!(r["alert"].is_string() && r["expr"].is_string(), "{r}");
            assert!(r["labels"]["severity"].is_string(), "{r}");
            assert!(r["annotations"]["summary"].is_string(), "{r}");
        }
    }
}

fn alert_names(objs: &[Value]) -> BTreeSet<String> {
    objs.iter()
        .filter(|o| o["kind"] == "PrometheusRule")
        .flat_map(|o| o["spec"]["groups"].as_array().cloned().unwrap_or_default())
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .filter_map(|r| r["alert"].as_str().map(str::to_string))
        .collect()
}

/// The Deployment's hardening, probes, rollout and wiring to the other objects.
fn check_deployment(objs: &[Value], name: &str, replicas: i32) {
    let d: Deployment = typed(find(objs, "Deployment", name));
    let spec = d.spec;
    assert_eq!(spec.replicas, Some(replicas));
    // A standby is Ready (readiness does not depend on leadership), so a
    // rolling update that surges one and keeps every replica up never has
    // both down.
    let strategy = spec.strategy.clone().expect("strategy");
    assert_eq!(strategy.type_.as_deref(), Some("RollingUpdate"));
    let rolling = strategy.rolling_update.expect("rollingUpdate");
    assert_eq!(rolling.max_unavailable, Some(IntOrString::Int(0)));
    assert_eq!(rolling.max_surge, Some(IntOrString::Int(1)));
    let pod = spec.template.spec.expect("pod spec");
    let psc = pod.security_context.expect("pod securityContext");
    assert_eq!(psc.run_as_non_root, Some(true));
    assert!(psc.run_as_user.is_some_and(|u| u != 0));
    assert_eq!(
        psc.seccomp_profile.expect("seccomp").type_,
        "RuntimeDefault"
    );
    let c = &pod.containers[0];
    let sc = c
        .security_context
        .as_ref()
        .expect("container securityContext");
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(
        sc.capabilities.as_ref().unwrap().drop.as_deref(),
        Some(&["ALL".to_string()][..])
    );
    let probe_path = |p: &Option<k8s_openapi::api::core::v1::Probe>| {
        p.as_ref()
            .and_then(|p| p.http_get.as_ref())
            .and_then(|h| h.path.clone())
    };
    assert_eq!(probe_path(&c.liveness_probe).as_deref(), Some("/livez"));
    assert_eq!(probe_path(&c.readiness_probe).as_deref(), Some("/readyz"));
    for probe in [&c.liveness_probe, &c.readiness_probe] {
        let scheme = probe
            .as_ref()
            .and_then(|p| p.http_get.as_ref()?.scheme.clone());
        assert_eq!(
            scheme.as_deref(),
            Some("HTTPS"),
            "probes follow secure serving"
        );
    }
    assert!(
        !c.args.iter().flatten().any(|a| a == "--insecure-serving"),
        "the deployed scheduler serves HTTPS"
    );
    let res = c.resources.as_ref().expect("resources");
    for side in [&res.requests, &res.limits] {
        let side = side.as_ref().expect("requests and limits");
        assert!(side.contains_key("cpu") && side.contains_key("memory"));
    }
    let args = c.args.clone().unwrap_or_default();
    assert_eq!(args[0], "run");
    assert!(
        args.contains(&"--config=/etc/muster/muster.yaml".to_string()),
        "{args:?}"
    );
    // Wiring: the account and the configuration exist; the Service selects the pods.
    let sa = pod.service_account_name.expect("serviceAccountName");
    find(objs, "ServiceAccount", &sa);
    let cm = pod.volumes.unwrap()[0]
        .config_map
        .clone()
        .expect("config volume")
        .name;
    let config = scheduler_config(objs, &cm);
    assert!(
        config.leader_election.enabled,
        "two replicas need leader election"
    );
    let labels = spec.template.metadata.unwrap().labels.unwrap();
    let svc: Service = typed(find(objs, "Service", name));
    let selector = svc.spec.unwrap().selector.unwrap();
    assert!(selector.iter().all(|(k, v)| labels.get(k) == Some(v)));
    // A drain keeps one replica (of several) running.
    let pdb: PodDisruptionBudget = typed(find(objs, "PodDisruptionBudget", name));
    let pdb = pdb.spec.expect("pdb spec");
    assert_eq!(pdb.min_available, Some(IntOrString::Int(1)));
    let selects = pdb
        .selector
        .and_then(|s| s.match_labels)
        .expect("matchLabels");
    assert!(!selects.is_empty());
    assert!(selects.iter().all(|(k, v)| labels.get(k) == Some(v)));
}

/// The scheduler configuration in a ConfigMap, parsed by Muster itself.
fn scheduler_config(objs: &[Value], cm: &str) -> SchedulerConfig {
    let yaml = find(objs, "ConfigMap", cm)["data"]["muster.yaml"]
        .as_str()
        .expect("muster.yaml key");
    SchedulerConfig::from_yaml(yaml).unwrap_or_else(|e| panic!("{cm}: {e}"))
}

fn rules(objs: &[Value], kind: &str, name: &str) -> Vec<PolicyRule> {
    let o = find(objs, kind, name);
    serde_json::from_value(o["rules"].clone()).expect("rules")
}

#[test]
fn helm_lints_with_default_and_custom_values() {
    let helm = helm_binary();
    let chart = chart();
    run(&helm, &["lint", "--strict", &chart]);
    let mut args = vec!["lint", "--strict", &chart];
    args.extend_from_slice(CUSTOM_VALUES);
    run(&helm, &args);
}

#[test]
fn chart_and_kustomize_render_the_same_objects() {
    let k = kustomize();
    let h = helm_template("muster", NAMESPACE, &["--set", "createNamespace=true"]);
    let h_default = helm_template("muster", NAMESPACE, &[]);
    for objs in [&k, &h, &h_default] {
        check_types(objs);
        check_deployment(objs, "muster", 2);
    }
    assert_eq!(ids(&k), ids(&h));
    // Without createNamespace the chart leaves the namespace to Helm.
    let mut no_ns = ids(&k);
    no_ns.retain(|(kind, _, _)| kind != "Namespace");
    assert_eq!(no_ns, ids(&h_default));
    let expected_kinds: BTreeSet<&str> = [
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "Deployment",
        "PodDisruptionBudget",
        "Service",
        "ServiceMonitor",
        "PrometheusRule",
    ]
    .into();
    let kinds: BTreeSet<&str> = k.iter().filter_map(|o| o["kind"].as_str()).collect();
    assert_eq!(kinds, expected_kinds);

    // Same RBAC, same configuration, same monitoring.
    assert_eq!(
        rules(&k, "ClusterRole", "muster"),
        rules(&h, "ClusterRole", "muster")
    );
    assert_eq!(
        rules(&k, "Role", "muster-leader-election"),
        rules(&h, "Role", "muster-leader-election")
    );
    // Every object is identical, except two that are equal in meaning: the
    // chart's pod template carries a checksum of the configuration (to roll
    // the pods on upgrade), and the configuration text is templated.
    for o in &k {
        let kind = o["kind"].as_str().unwrap();
        let name = o["metadata"]["name"].as_str().unwrap();
        let mut from_helm = find(&h, kind, name).clone();
        match (kind, name) {
            ("Deployment", _) => {
                let annotations = from_helm["spec"]["template"]["metadata"]
                    .as_object_mut()
                    .unwrap()
                    .remove("annotations")
                    .expect("pod template annotations");
                assert!(annotations["checksum/config"].is_string());
            }
            ("ConfigMap", "muster-config") => continue,
            _ => {}
        }
        assert_eq!(
            o, &from_helm,
            "{kind} {name} differs between kustomize and helm"
        );
    }
    assert_eq!(
        scheduler_config(&k, "muster-config"),
        scheduler_config(&h, "muster-config")
    );
    // The deployed configuration is Muster's defaults, except that the Lease
    // lives in Muster's own namespace (where its Role allows it).
    let mut expected = SchedulerConfig::default();
    expected.leader_election.resource_namespace = NAMESPACE.into();
    assert_eq!(scheduler_config(&k, "muster-config"), expected);
    let dashboard = find(&k, "ConfigMap", "muster-dashboard");
    assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");
    let json: Value = serde_json::from_str(dashboard["data"]["muster.json"].as_str().unwrap())
        .expect("dashboard is JSON");
    assert!(!json["panels"].as_array().unwrap().is_empty());
    let alerts = alert_names(&k);
    for a in [
        "MusterDown",
        "MusterNoLeader",
        "MusterGangsTimingOut",
        "MusterPendingPodsGrowing",
        "MusterBindingErrors",
    ] {
        assert!(alerts.contains(a), "missing alert {a}");
    }

    // Least privilege, on the rendered rules: nothing on secrets, no pod
    // creation, the lease only by name for get/update.
    for r in rules(&k, "ClusterRole", "muster").iter().chain(&rules(
        &k,
        "Role",
        "muster-leader-election",
    )) {
        assert!(
            !r.resources
                .iter()
                .flatten()
                .any(|x| x == "secrets" || x == "*"),
            "{r:?}"
        );
        assert!(!r.verbs.iter().any(|v| v == "*"), "{r:?}");
        // Pods are never created, updated or patched; preemption deletes
        // its victims.
        if r.resources.iter().flatten().any(|x| x == "pods") {
            assert!(
                !r.verbs
                    .iter()
                    .any(|v| matches!(v.as_str(), "create" | "update" | "patch")),
                "{r:?}"
            );
        }
    }
}

#[test]
fn chart_values_change_what_they_should() {
    let h = helm_template("gangs", "batch-system", CUSTOM_VALUES);
    check_types(&h);
    check_deployment(&h, "gangs", 3);
    let d = find(&h, "Deployment", "gangs");
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["image"], "registry.example/muster:1.2.3");
    assert_eq!(c["resources"]["limits"]["memory"], "2Gi");
    let config = scheduler_config(&h, "gangs-config");
    let names: Vec<&str> = config
        .profiles
        .iter()
        .map(|p| p.scheduler_name.as_str())
        .collect();
    assert_eq!(names, ["batch", "gangs"]);
    let gang = config.profiles[0].gang.clone().expect("gang scheduling on");
    assert_eq!(gang.permit_waiting_time, Duration::from_secs(120));
    assert_eq!(gang.group_backoff, Duration::ZERO);
    let raw: Value = serde_norway::from_str(
        find(&h, "ConfigMap", "gangs-config")["data"]["muster.yaml"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        raw["profiles"][1]["pluginConfig"][0]["args"]["scoringStrategy"]["type"],
        "MostAllocated"
    );
    // The lease Muster uses is the one its Role names, in the release namespace.
    assert_eq!(config.leader_election.resource_name, "gangs");
    assert_eq!(config.leader_election.resource_namespace, "batch-system");
    let role = find(&h, "Role", "gangs-leader-election");
    assert_eq!(role["metadata"]["namespace"], "batch-system");
    assert_eq!(role["rules"][1]["resourceNames"], json!(["gangs"]));
    assert_eq!(find(&h, "Namespace", "batch-system")["kind"], "Namespace");
    // Monitoring off: none of its objects.
    assert!(
        !h.iter()
            .any(|o| o["kind"] == "ServiceMonitor" || o["kind"] == "PrometheusRule")
    );
    assert!(!ids(&h).iter().any(|(_, _, n)| n == "gangs-dashboard"));
    // values.schema.json turns a mistyped value into an error, not a bad config.
    let chart = chart();
    for bad in [
        "scoringStrategy.type=Typo",
        "replicas=0",
        "schedulerNames={Bad_Name}",
    ] {
        let err = fails(&helm_binary(), &["template", "x", &chart, "--set", bad]);
        assert!(err.contains("schema"), "{bad}: {err}");
    }
    // One replica: no disruption budget (minAvailable 1 would block every drain).
    let single = helm_template("solo", "solo", &["--set", "replicas=1"]);
    check_types(&single);
    assert!(!single.iter().any(|o| o["kind"] == "PodDisruptionBudget"));
    assert_eq!(
        find(&single, "Deployment", "solo")["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"],
        0
    );
    // A certificate of one's own: mounted and passed, and the ServiceMonitor
    // verifies it; metrics-reader subjects get a binding.
    let h = helm_template(
        "muster",
        NAMESPACE,
        &[
            "--set",
            "tls.certSecret=muster-tls",
            "--set",
            "monitoring.metricsReaderSubjects[0].kind=ServiceAccount,monitoring.metricsReaderSubjects[0].name=prometheus-k8s,monitoring.metricsReaderSubjects[0].namespace=monitoring",
        ],
    );
    check_types(&h);
    check_deployment(&h, "muster", 2);
    let d = find(&h, "Deployment", "muster");
    let args = d["spec"]["template"]["spec"]["containers"][0]["args"].clone();
    assert!(
        args.as_array()
            .unwrap()
            .contains(&json!("--tls-cert-file=/etc/muster/tls/tls.crt")),
        "{args}"
    );
    assert_eq!(
        d["spec"]["template"]["spec"]["volumes"][1]["secret"]["secretName"],
        "muster-tls"
    );
    let tls = &find(&h, "ServiceMonitor", "muster")["spec"]["endpoints"][0]["tlsConfig"];
    assert_eq!(tls["ca"]["secret"]["name"], "muster-tls", "{tls}");
    assert!(tls.get("insecureSkipVerify").is_none(), "{tls}");
    let binding = find(&h, "ClusterRoleBinding", "muster-metrics-reader");
    assert_eq!(binding["roleRef"]["name"], "muster-metrics-reader");
    assert_eq!(binding["subjects"][0]["name"], "prometheus-k8s");

    // One monitoring object off, the others on.
    let h = helm_template(
        "muster",
        NAMESPACE,
        &["--set", "monitoring.serviceMonitor.enabled=false"],
    );
    assert!(!h.iter().any(|o| o["kind"] == "ServiceMonitor"));
    assert!(h.iter().any(|o| o["kind"] == "PrometheusRule"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rendered_manifests_apply_to_the_simulated_cluster() {
    let kubectl = kubectl_binary();
    let cluster = SimCluster::start(common::fast())
        .await
        .expect("cluster starts");
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig).unwrap();
    let kc = format!("--kubeconfig={}", kubeconfig.display());
    let crds = root().join("tests/fixtures/monitoring-crds.yaml");
    let k = |args: &[&str]| {
        let mut all = vec![kc.as_str()];
        all.extend_from_slice(args);
        run(&kubectl, &all)
    };
    // The Prometheus Operator's CRDs come first, as on a real cluster.
    k(&["apply", "-f", crds.to_str().unwrap()]);
    let base = root().join("deploy/manifests");
    k(&["apply", "-k", base.to_str().unwrap()]);
    let helm_out = dir.path().join("helm.yaml");
    let rendered = run(
        &helm_binary(),
        &[
            "template",
            "other",
            &chart(),
            "-n",
            "other",
            "--set",
            "createNamespace=true",
        ],
    );
    std::fs::write(&helm_out, rendered).unwrap();
    k(&["apply", "-f", helm_out.to_str().unwrap()]);
    for (ns, name) in [(NAMESPACE, "muster"), ("other", "other")] {
        let got = k(&[
            "-n",
            ns,
            "get",
            "deployment,poddisruptionbudget,service,servicemonitor,prometheusrule,serviceaccount",
            "-o",
            "name",
        ]);
        for kind in [
            "deployment.apps",
            "poddisruptionbudget.policy",
            "service",
            "servicemonitor.monitoring.coreos.com",
            "prometheusrule.monitoring.coreos.com",
            "serviceaccount",
        ] {
            assert!(
                got.contains(&format!("{kind}/{name}")),
                "{kind}/{name} missing in:\n{got}"
            );
        }
        assert!(
            k(&["-n", ns, "get", "configmap", "-o", "name"]).contains(&format!("{name}-config"))
        );
    }
    let rules = k(&[
        "get",
        "clusterrole",
        "other",
        "-o",
        "jsonpath={.rules[*].resources}",
    ]);
    assert!(rules.contains("pods/binding"), "{rules}");
    cluster.shutdown().await.unwrap();
}

// ---------------------------------------------------------------- RBAC

/// The user agent of the daemon's client: separates its calls from the test's.
const DAEMON_AGENT: &str = "muster-under-test";
/// A scraper whose request makes the daemon review a token and a permission.
const SCRAPER: &str = "system:serviceaccount:monitoring:prometheus";
const SCRAPER_TOKEN: &str = "scraper-token";

/// What a grant or a call is about: (verb, group, resource[/subresource]).
type Access = (String, String, String);

/// Grants that no recorded call exercises, each with the reason it is kept.
const UNEXERCISED_ALLOWED: &[(&str, &str, &str, &str)] = &[
    // Atomic scale-up: the recorded cluster has no node pools, so it does not
    // serve autoscaling.x-k8s.io (tests/autoscale_e2e.rs exercises these).
    (
        "list",
        "autoscaling.x-k8s.io",
        "provisioningrequests",
        "the informer of the requests Muster made (tests/autoscale_e2e.rs)",
    ),
    (
        "watch",
        "autoscaling.x-k8s.io",
        "provisioningrequests",
        "the informer of the requests Muster made (tests/autoscale_e2e.rs)",
    ),
    (
        "create",
        "autoscaling.x-k8s.io",
        "provisioningrequests",
        "one request per gang short of capacity (tests/autoscale_e2e.rs)",
    ),
    (
        "delete",
        "autoscaling.x-k8s.io",
        "provisioningrequests",
        "a request goes when its gang starts (tests/autoscale_e2e.rs)",
    ),
    (
        "list",
        "",
        "podtemplates",
        "a request's templates, found by label to delete them (tests/autoscale_e2e.rs)",
    ),
    (
        "create",
        "",
        "podtemplates",
        "a request's templates (tests/autoscale_e2e.rs)",
    ),
    (
        "delete",
        "",
        "podtemplates",
        "a request's templates go with it (tests/autoscale_e2e.rs)",
    ),
    (
        "get",
        "",
        "pods",
        "a member read to copy its scheduling fields into a template (tests/autoscale_e2e.rs)",
    ),
    // The recorded run keeps Muster's lease: a graceful stop releases it with
    // an update, and `create` happens once. Nothing else is granted unexercised
    // but VolumeBinding's PreBind writes, which tests/volumes_e2e.rs exercises
    // (this run has no pod with a claim).
    (
        "patch",
        "",
        "persistentvolumeclaims",
        "PreBind selects the node of WaitForFirstConsumer claims (tests/volumes_e2e.rs)",
    ),
    (
        "get",
        "",
        "persistentvolumes",
        "PreBind reads a static volume before binding it (tests/volumes_e2e.rs)",
    ),
    (
        "patch",
        "",
        "persistentvolumes",
        "PreBind binds a static volume to a claim (tests/volumes_e2e.rs)",
    ),
    (
        "get",
        "scheduling.k8s.io",
        "compositepodgroups/status",
        "the CompositePodGroupInitiallyScheduled condition is read before it is set (tests/composite_e2e.rs)",
    ),
    (
        "update",
        "scheduling.k8s.io",
        "compositepodgroups/status",
        "the CompositePodGroupInitiallyScheduled condition (tests/composite_e2e.rs)",
    ),
    (
        "delete",
        "",
        "pods",
        "preemption deletes its victims (this run preempts nothing)",
    ),
    (
        "get",
        "resource.k8s.io",
        "resourceclaims",
        "DynamicResources' PreBind reads each claim it reserves (tests/dra_e2e.rs)",
    ),
    (
        "create",
        "resource.k8s.io",
        "resourceclaims",
        "DynamicResources' PreBind creates a pod's extended-resource claim (tests/dra_extended_e2e.rs)",
    ),
    (
        "update",
        "resource.k8s.io",
        "resourceclaims",
        "DynamicResources' PreBind adds the delete-protection finalizer to a claim it allocates (tests/dra_e2e.rs)",
    ),
    (
        "delete",
        "resource.k8s.io",
        "resourceclaims",
        "a failed binding deletes the extended-resource claim it created (tests/dra_extended_e2e.rs)",
    ),
    (
        "update",
        "resource.k8s.io",
        "resourceclaims/status",
        "DynamicResources' PreBind records allocation and reservation (tests/dra_e2e.rs)",
    ),
];

/// Expands rules into single grants.
fn grants(rules: &[PolicyRule]) -> BTreeSet<Access> {
    let mut out = BTreeSet::new();
    for r in rules {
        for verb in &r.verbs {
            for group in r.api_groups.iter().flatten() {
                for res in r.resources.iter().flatten() {
                    out.insert((verb.clone(), group.clone(), res.clone()));
                }
            }
        }
    }
    out
}

fn access(c: &ApiCall) -> Access {
    let res = if c.subresource.is_empty() {
        c.resource.clone()
    } else {
        format!("{}/{}", c.resource, c.subresource)
    };
    (c.verb.clone(), c.group.clone(), res)
}

/// Runs the daemon with the deployed configuration against a recording
/// simulator: a gang, a plain pod, and a pod that cannot fit (its refusal
/// changes and changes back with the nodes, so an event repeats). Returns the
/// distinct calls the daemon made.
async fn record_daemon_calls(config: SchedulerConfig) -> BTreeSet<ApiCall> {
    let sim = SimConfig::default()
        .pod_start_delay(Duration::from_millis(10))
        .bookmark_interval(Duration::from_millis(500))
        .with_templates(vec![e2e::nodes(2, "4")])
        .record_requests(true)
        .with_token_user(muster::apiserver::TokenUser::new(
            SCRAPER,
            SCRAPER_TOKEN,
            &[],
        ));
    let cluster = SimCluster::start(sim).await.expect("cluster starts");
    let env = e2e::Env {
        client: cluster.client().expect("client"),
        cluster,
    };
    let namespaces: Api<Namespace> = Api::all(env.client.clone());
    for ns in [NAMESPACE, "team-a"] {
        let obj: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        namespaces
            .create(&PostParams::default(), &obj)
            .await
            .expect("namespace");
    }
    let mut kc = muster::apiserver::kubeconfig::config(env.cluster.addr());
    kc.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(DAEMON_AGENT),
    ));
    // Every owner kind is served, so its list + watch grant is exercised.
    e2e::install_owner_crds(&env).await;
    let daemon_client = kube::Client::try_from(kc).expect("daemon client");
    let mut opts = muster::daemon::DaemonOptions::new(config);
    opts.identity = "muster-0".into();
    // As deployed: HTTPS, and a scrape is reviewed (TokenReview, then
    // SubjectAccessReview) with the daemon's own client.
    opts.serving = muster::daemon::ServingOptions::secure();
    let daemon = muster::daemon::start(daemon_client, opts)
        .await
        .expect("daemon starts");
    e2e::wait_ready_https(&daemon).await;
    let (code, body) = e2e::https_get(daemon.http_addr, "/metrics", Some(SCRAPER_TOKEN)).await;
    assert_eq!(
        code, 403,
        "no RBAC lets the scraper read /metrics here: {body}"
    );

    e2e::create_podgroup(&env, "team-a", "trainers", 2, None).await;
    e2e::create_pods(
        &env,
        "team-a",
        vec![
            e2e::pod("trainer-0", "1", "muster", Some("trainers")),
            e2e::pod("trainer-1", "1", "muster", Some("trainers")),
            e2e::pod("web", "1", "muster", None),
            e2e::pod("huge", "64", "muster", None),
        ],
    )
    .await;
    e2e::wait_pods(&env, "team-a", |pods| {
        ["trainer-0", "trainer-1", "web"]
            .iter()
            .all(|n| pods.get(*n).is_some_and(e2e::bound))
            && pods
                .get("huge")
                .is_some_and(|p| e2e::pod_condition_message(p).is_some())
    })
    .await;
    e2e::wait_podgroup_condition(&env, "team-a", "trainers", |c| c["status"] == "True").await;
    // Coscheduling and Volcano gangs: their definitions are watched and their
    // status is patched on release.
    dialect_gangs(&env).await;
    let is_failed = |e: &k8s_openapi::api::core::v1::Event| {
        e.reason.as_deref() == Some("FailedScheduling")
            && e.involved_object.name.as_deref() == Some("huge")
    };
    let first = e2e::wait_event(&env, "team-a", is_failed).await.message;
    // Nodes are added (events that can make room, so the pod is retried):
    // the refusal's message changes with the node count. Two nodes are then
    // deleted (no retry: that makes no room) and one added, so the message
    // returns to an earlier one, which is recorded by bumping that event's
    // count (get + patch of the event).
    e2e::add_node(&env, "extra", "4").await;
    let with_extra = e2e::wait_event(&env, "team-a", |e| is_failed(e) && e.message != first)
        .await
        .message;
    e2e::add_node(&env, "extra-2", "4").await;
    e2e::wait_event(&env, "team-a", |e| {
        is_failed(e) && e.message != first && e.message != with_extra
    })
    .await;
    let nodes: Api<Node> = Api::all(env.client.clone());
    for gone in ["extra", "extra-2"] {
        nodes
            .delete(gone, &Default::default())
            .await
            .expect("node deleted");
    }
    e2e::add_node(&env, "extra-3", "4").await;
    e2e::wait_event(&env, "team-a", |e| {
        is_failed(e) && e.message == with_extra && e.count.unwrap_or(1) >= 2
    })
    .await;

    // A graceful stop releases the lease (an update), as on a rollout.
    daemon.shutdown().await.expect("daemon stops cleanly");
    let calls = env.cluster.requests();
    env.cluster.shutdown().await.unwrap();
    calls
        .into_iter()
        .filter(|c| c.user_agent == DAEMON_AGENT)
        .collect()
}

/// A Coscheduling and a Volcano gang of two, each scheduled to completion.
async fn dialect_gangs(env: &e2e::Env) {
    let kinds = [
        (
            "scheduling.x-k8s.io",
            "v1alpha1",
            "cos",
            json!({"labels": {"scheduling.x-k8s.io/pod-group": "cos"}}),
        ),
        (
            "scheduling.volcano.sh",
            "v1beta1",
            "vol",
            json!({"annotations": {"scheduling.k8s.io/group-name": "vol"}}),
        ),
    ];
    for (group, version, name, member_meta) in kinds {
        let ar = kube::core::ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk(group, version, "PodGroup"),
            "podgroups",
        );
        let api: Api<kube::core::DynamicObject> =
            Api::namespaced_with(env.client.clone(), "team-a", &ar);
        let pg: kube::core::DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{group}/{version}"), "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "team-a"},
            "spec": {"minMember": 2}
        }))
        .unwrap();
        api.create(&PostParams::default(), &pg)
            .await
            .expect("dialect podgroup");
        let members = (0..2)
            .map(|i| {
                let mut p = e2e::pod(&format!("{name}-{i}"), "100m", "muster", None);
                let meta: kube::core::ObjectMeta =
                    serde_json::from_value(member_meta.clone()).unwrap();
                p.metadata.labels = meta.labels;
                p.metadata.annotations = meta.annotations;
                p
            })
            .collect();
        e2e::create_pods(env, "team-a", members).await;
    }
    e2e::wait_pods(env, "team-a", |pods| {
        ["cos-0", "cos-1", "vol-0", "vol-1"]
            .iter()
            .all(|n| pods.get(*n).is_some_and(e2e::bound))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_grants_exactly_the_calls_muster_makes() {
    let manifests = std::fs::read_to_string(root().join("deploy/manifests/rbac.yaml")).unwrap();
    let objs = documents(&manifests);
    let cluster_rules = rules(&objs, "ClusterRole", "muster");
    let role_rules = rules(&objs, "Role", "muster-leader-election");
    let role_ns = find(&objs, "Role", "muster-leader-election")["metadata"]["namespace"].clone();
    let config_text = std::fs::read_to_string(root().join("deploy/manifests/muster.yaml")).unwrap();
    let config = SchedulerConfig::from_yaml(&config_text).expect("deployed configuration parses");
    assert_eq!(
        config.leader_election.resource_namespace,
        role_ns.as_str().unwrap()
    );
    // get/update of the lease are limited to the configured Lease name.
    for r in &role_rules {
        if r.verbs.iter().any(|v| v == "get" || v == "update") {
            assert_eq!(
                r.resource_names.as_deref(),
                Some(&[config.leader_election.resource_name.clone()][..])
            );
        }
    }

    let calls = record_daemon_calls(config).await;
    let cluster_grants = grants(&cluster_rules);
    let role_grants = grants(&role_rules);
    let mut denied = Vec::new();
    for c in &calls {
        let a = access(c);
        let by_role = role_grants.contains(&a) && c.namespace == role_ns.as_str().unwrap();
        if !cluster_grants.contains(&a) && !by_role {
            denied.push(c.clone());
        }
    }
    assert!(
        denied.is_empty(),
        "calls the RBAC does not grant: {denied:#?}"
    );

    let exercised: BTreeSet<Access> = calls.iter().map(access).collect();
    if std::env::var_os("MUSTER_PRINT_CALLS").is_some() {
        eprintln!("recorded: {calls:#?}");
    }
    let allowed: BTreeMap<Access, &str> = UNEXERCISED_ALLOWED
        .iter()
        .map(|(v, g, r, why)| ((v.to_string(), g.to_string(), r.to_string()), *why))
        .collect();
    let stale: Vec<&Access> = allowed.keys().filter(|a| exercised.contains(*a)).collect();
    assert!(
        stale.is_empty(),
        "allow-listed as unexercised but called: {stale:?}"
    );
    let unjustified: Vec<&Access> = cluster_grants
        .union(&role_grants)
        .filter(|a| !exercised.contains(*a) && !allowed.contains_key(*a))
        .collect();
    assert!(
        unjustified.is_empty(),
        "granted but never called nor justified: {unjustified:?}\nrecorded: {exercised:#?}"
    );
    // The run covered every kind of write Muster makes.
    for needed in [
        ("create", "", "pods/binding"),
        ("patch", "", "pods/status"),
        ("create", "", "events"),
        ("patch", "", "events"),
        ("get", "scheduling.k8s.io", "podgroups/status"),
        ("update", "scheduling.k8s.io", "podgroups/status"),
        ("create", "coordination.k8s.io", "leases"),
        ("update", "coordination.k8s.io", "leases"),
        ("create", "authentication.k8s.io", "tokenreviews"),
        ("create", "authorization.k8s.io", "subjectaccessreviews"),
    ] {
        let a = (
            needed.0.to_string(),
            needed.1.to_string(),
            needed.2.to_string(),
        );
        assert!(
            exercised.contains(&a),
            "the run did not exercise {a:?}: {exercised:#?}"
        );
    }
}

// ---------------------------------------------------------------- metrics

/// Metric names a PromQL expression selects, from its syntax tree
/// (promql-parser, the Prometheus grammar); an expression Prometheus would
/// refuse fails the test.
fn metric_names(expr: &str) -> BTreeSet<String> {
    struct Names(BTreeSet<String>);
    impl promql_parser::util::ExprVisitor for Names {
        type Error = std::convert::Infallible;
        fn pre_visit(&mut self, e: &promql_parser::parser::Expr) -> Result<bool, Self::Error> {
            use promql_parser::parser::Expr;
            let selector = match e {
                Expr::VectorSelector(vs) => Some(vs),
                Expr::MatrixSelector(ms) => Some(&ms.vs),
                _ => None,
            };
            if let Some(name) = selector.and_then(|vs| vs.name.clone()) {
                self.0.insert(name);
            }
            Ok(true)
        }
    }
    let ast = promql_parser::parser::parse(expr)
        .unwrap_or_else(|e| panic!("not valid PromQL: {expr}: {e}"));
    let mut names = Names(BTreeSet::new());
    let Ok(_) = promql_parser::util::walk_expr(&mut names, &ast);
    names.0
}

/// A dashboard expression as Grafana sends it to Prometheus: its interval
/// variables become durations (`$job` stays inside its label string).
fn grafana_expand(expr: &str) -> String {
    expr.replace("$__rate_interval", "5m")
        .replace("$__interval", "1m")
        .replace("$__range", "1h")
}

/// Every series name Muster can export: each family touched once so labelled
/// families appear in the text too, plus histogram suffixes.
fn exported_names() -> BTreeSet<String> {
    let m = muster::metrics::Metrics::new().expect("metrics register");
    m.schedule_attempts
        .with_label_values(&["scheduled", "all"])
        .inc();
    m.attempt_duration
        .with_label_values(&["scheduled", "all"])
        .observe(0.1);
    m.pending_pods.with_label_values(&["active"]).set(0);
    m.pod_scheduling_sli_duration
        .with_label_values(&["1"])
        .observe(0.1);
    m.cache_size.with_label_values(&["nodes"]).set(0);
    m.gang_groups.with_label_values(&["waiting"]).set(0);
    m.api_writes.with_label_values(&["bind", "success"]).inc();
    m.leader.with_label_values(&["muster"]).set(0);
    m.render()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next().map(str::to_string))
        .collect()
}

#[test]
fn dashboard_and_alerts_use_only_exported_metrics() {
    let exported = exported_names();
    let documented = std::fs::read_to_string(root().join("docs/metrics.md")).unwrap();
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("deploy/manifests/dashboards/muster.json")).unwrap(),
    )
    .expect("dashboard is JSON");
    let mut exprs: Vec<String> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .map(|t| grafana_expand(t["expr"].as_str().expect("target expr")))
        .collect();
    let rules = documents(
        &std::fs::read_to_string(root().join("deploy/manifests/prometheusrule.yaml")).unwrap(),
    );
    exprs.extend(
        rules[0]["spec"]["groups"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
            .map(|r| r["expr"].as_str().unwrap().to_string()),
    );
    assert!(exprs.len() > 10);
    let mut used = BTreeSet::new();
    for e in &exprs {
        let names = metric_names(e);
        assert!(!names.is_empty(), "no metric found in {e}");
        used.extend(names);
    }
    for name in &used {
        assert!(
            exported.contains(name) || name.starts_with("process_"),
            "{name} is not exported by Muster"
        );
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(name);
        assert!(
            documented.contains(&format!("`{family}`")) || name.starts_with("process_"),
            "{name} is not documented in docs/metrics.md"
        );
    }
    // The extraction itself.
    assert_eq!(
        metric_names(r#"sum by (le) (rate(a_bucket{job="x", q!="y"}[5m])) > 0 and on() b"#),
        ["a_bucket".to_string(), "b".to_string()].into()
    );
    assert!(std::panic::catch_unwind(|| metric_names("sum(rate(x[5m])")).is_err());
}
