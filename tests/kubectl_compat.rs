//! Compatibility with the real kubectl v1.37 against the simulated cluster:
//! apply of every example manifest in the repository, get (-o yaml, -w),
//! patch in three types, label, annotate, create, delete, describe,
//! api-resources and get --raw.
//!
//! kubectl comes from $MUSTER_KUBECTL or `.tools/kubectl`, fetched with
//! `tests/support/fetch-tools.sh` when missing.

use crate::{common, e2e};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use muster::apiserver::SimCluster;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::common::tools::{kubectl_binary, root};

struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl {
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .kill_on_drop(true);
        cmd
    }

    /// Runs kubectl; panics with its stderr on failure; returns stdout.
    async fn ok(&self, args: &[&str]) -> String {
        let out = self.command(args).output().await.expect("kubectl runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "kubectl {args:?} failed: {stderr}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs kubectl expecting failure; returns stderr.
    async fn fails(&self, args: &[&str]) -> String {
        let out = self.command(args).output().await.expect("kubectl runs");
        assert!(
            !out.status.success(),
            "kubectl {args:?} unexpectedly succeeded"
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

const KWOK_STAGE_CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: stages.kwok.x-k8s.io}
spec:
  group: kwok.x-k8s.io
  scope: Cluster
  names: {plural: stages, singular: stage, kind: Stage}
  versions:
    - name: v1alpha1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
";

/// Every YAML file under deploy/ and config/ with at least one document
/// that has apiVersion and kind (templated files that do not parse, and
/// component configuration files such as config/muster.yaml, are skipped);
/// files defining CRDs come first. Kustomize bases and Helm charts are
/// skipped too: they are rendered and applied as a whole by tests/deploy.rs.
fn example_manifests() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        if dir.join("kustomization.yaml").exists() || dir.join("Chart.yaml").exists() {
            return;
        }
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&root().join("deploy"), &mut files);
    walk(&root().join("config"), &mut files);
    let mut manifests: Vec<(bool, PathBuf)> = files
        .into_iter()
        .filter_map(|path| {
            let text = std::fs::read_to_string(&path).ok()?;
            let docs: Vec<serde_json::Value> = text
                .split("\n---")
                .filter_map(|doc| serde_norway::from_str(doc).ok())
                .collect();
            // Component configuration (kubescheduler.config.k8s.io, …) has
            // apiVersion and kind but is read from files, never served.
            let is_manifest = |d: &serde_json::Value| {
                d.get("kind").is_some()
                    && d["apiVersion"].as_str().is_some_and(|v| {
                        !v.split('/')
                            .next()
                            .unwrap_or("")
                            .ends_with(".config.k8s.io")
                    })
            };
            if !docs.iter().any(is_manifest) {
                return None;
            }
            let has_crd = docs.iter().any(|d| d["kind"] == "CustomResourceDefinition");
            Some((!has_crd, path))
        })
        .collect();
    manifests.sort();
    manifests.into_iter().map(|(_, p)| p).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_v1_37_works_against_the_simulator() {
    let bin = kubectl_binary();
    let cluster = SimCluster::start(common::fast().with_nodes(2))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig).unwrap();
    let k = Kubectl { bin, kubeconfig };

    // Discovery.
    let version = k.ok(&["get", "--raw", "/version"]).await;
    assert!(version.contains("\"gitVersion\":\"v1.37"), "{version}");
    let resources = k.ok(&["api-resources"]).await;
    for needle in [
        "podgroups",
        "scheduling.volcano.sh/v1beta1",
        "scheduling.x-k8s.io/v1alpha1",
        "workloads",
        "leases",
        "pods",
    ] {
        assert!(
            resources.contains(needle),
            "api-resources lacks {needle}:\n{resources}"
        );
    }

    // deploy/kwok/stages.yaml needs kwok's Stage CRD, which a real cluster
    // gets from kwok's release; here a permissive stand-in.
    let stage_crd = dir.path().join("kwok-stage-crd.yaml");
    std::fs::write(&stage_crd, KWOK_STAGE_CRD).unwrap();
    k.ok(&["apply", "-f", stage_crd.to_str().unwrap()]).await;

    // apply every example manifest, twice (create, then patch/unchanged).
    let manifests = example_manifests();
    assert!(
        manifests
            .iter()
            .any(|p| p.ends_with("deploy/examples/sim-smoke.yaml"))
    );
    for m in &manifests {
        let m = m.to_str().unwrap();
        k.ok(&["apply", "-f", m]).await;
        let again = k.ok(&["apply", "-f", m]).await;
        assert!(
            again.contains("unchanged") || again.contains("configured"),
            "{again}"
        );
    }

    let ns = ["-n", "sim-smoke"];
    let get = |what: &'static str, path: &'static str| {
        let k = &k;
        async move {
            k.ok(&[
                "-n",
                "sim-smoke",
                "get",
                what,
                "-o",
                &format!("jsonpath={path}"),
            ])
            .await
        }
    };
    let yaml = k
        .ok(&[ns[0], ns[1], "get", "pod", "smoke-worker-0", "-o", "yaml"])
        .await;
    assert!(
        yaml.contains("schedulerName: muster") && yaml.contains("phase: Pending"),
        "{yaml}"
    );
    let pg = k
        .ok(&[
            ns[0],
            ns[1],
            "get",
            "podgroups.scheduling.k8s.io",
            "smoke-workers",
            "-o",
            "yaml",
        ])
        .await;
    assert!(pg.contains("minCount: 2"), "{pg}");

    // get -w sees an update made by another client.
    let mut watch = k
        .command(&[
            ns[0],
            ns[1],
            "get",
            "pod",
            "smoke-worker-0",
            "-w",
            "-o",
            "jsonpath={.metadata.labels.stage}{\"\\n\"}",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        first.as_deref(),
        Some(""),
        "initial state has no stage label"
    );
    k.ok(&[
        ns[0],
        ns[1],
        "label",
        "pod",
        "smoke-worker-0",
        "stage=watched",
    ])
    .await;
    let seen = tokio::time::timeout(Duration::from_secs(20), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line == "watched" {
                return true;
            }
        }
        false
    })
    .await
    .unwrap();
    assert!(seen, "kubectl get -w did not show the update");
    watch.kill().await.ok();

    // patch in three types, label, annotate.
    k.ok(&[
        ns[0],
        ns[1],
        "patch",
        "pod",
        "smoke-worker-0",
        "--type",
        "merge",
        "-p",
        r#"{"metadata":{"labels":{"merge":"1"}}}"#,
    ])
    .await;
    k.ok(&[
        ns[0],
        ns[1],
        "patch",
        "pod",
        "smoke-worker-0",
        "--type",
        "json",
        "-p",
        r#"[{"op":"add","path":"/metadata/labels/json","value":"2"}]"#,
    ])
    .await;
    k.ok(&[
        ns[0],
        ns[1],
        "patch",
        "pod",
        "smoke-worker-0",
        "--type",
        "strategic",
        "-p",
        r#"{"spec":{"containers":[{"name":"worker","image":"registry.k8s.io/pause:3.11"}]}}"#,
    ])
    .await;
    k.ok(&[ns[0], ns[1], "label", "pod", "smoke-worker-0", "label=3"])
        .await;
    k.ok(&[ns[0], ns[1], "annotate", "pod", "smoke-worker-0", "note=4"])
        .await;
    let labels = get("pod/smoke-worker-0", "{.metadata.labels.merge}{.metadata.labels.json}{.metadata.labels.label}{.metadata.annotations.note}").await;
    assert_eq!(labels, "1234");
    let containers = get(
        "pod/smoke-worker-0",
        "{range .spec.containers[*]}{.name}={.image} {end}",
    )
    .await;
    assert_eq!(
        containers.trim(),
        "worker=registry.k8s.io/pause:3.11",
        "strategic merge kept one container"
    );
    let err = k
        .fails(&[
            ns[0], ns[1], "patch", "pod", "nope", "--type", "merge", "-p", "{}",
        ])
        .await;
    assert!(
        err.contains("NotFound") || err.contains("not found"),
        "{err}"
    );

    // create: a binding (the kwok kubelet then starts the pod) and a config map.
    let binding = dir.path().join("binding.yaml");
    std::fs::write(&binding, "apiVersion: v1\nkind: Binding\nmetadata: {name: smoke-worker-0, namespace: sim-smoke}\ntarget: {kind: Node, name: smoke-node-0}\n").unwrap();
    k.ok(&["create", "-f", binding.to_str().unwrap()]).await;
    let again = k.fails(&["create", "-f", binding.to_str().unwrap()]).await;
    assert!(again.contains("already assigned"), "{again}");
    k.ok(&[
        ns[0],
        ns[1],
        "wait",
        "--for=jsonpath={.status.phase}=Running",
        "pod/smoke-worker-0",
        "--timeout=20s",
    ])
    .await;
    // Human-readable output uses server-side tables, as on a real cluster.
    let table = k.ok(&[ns[0], ns[1], "get", "pods", "-o", "wide"]).await;
    assert!(table.contains("READY") && table.contains("NODE"), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.contains("smoke-worker-0") && l.contains("1/1") && l.contains("Running")),
        "{table}"
    );
    let nodes = k.ok(&["get", "nodes"]).await;
    assert!(
        nodes
            .lines()
            .any(|l| l.starts_with("sim-node-0") && l.contains("Ready")),
        "{nodes}"
    );
    let cm = dir.path().join("cm.yaml");
    std::fs::write(&cm, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: created, namespace: sim-smoke}\ndata: {k: v}\n").unwrap();
    k.ok(&["create", "-f", cm.to_str().unwrap()]).await;
    assert!(
        k.fails(&["create", "-f", cm.to_str().unwrap()])
            .await
            .contains("AlreadyExists")
    );

    // kubectl's generators send protobuf; the kinds they commonly create work.
    k.ok(&["create", "namespace", "generated"]).await;
    k.ok(&[
        "-n",
        "generated",
        "create",
        "configmap",
        "gen",
        "--from-literal=k=v",
    ])
    .await;
    assert_eq!(
        k.ok(&[
            "-n",
            "generated",
            "get",
            "cm",
            "gen",
            "-o",
            "jsonpath={.data.k}"
        ])
        .await,
        "v"
    );

    // describe shows the pod's events.
    let described = k
        .ok(&[ns[0], ns[1], "describe", "pod", "smoke-worker-0"])
        .await;
    assert!(described.contains("Status:       Running"), "{described}");
    assert!(
        described.contains("Started") && described.contains("kubelet"),
        "{described}"
    );

    // delete waits until the object is gone.
    k.ok(&[ns[0], ns[1], "delete", "pod", "smoke-worker-1"])
        .await;
    let err = k
        .fails(&[ns[0], ns[1], "get", "pod", "smoke-worker-1"])
        .await;
    assert!(err.contains("NotFound"), "{err}");
    for m in &manifests {
        k.ok(&["delete", "-f", m.to_str().unwrap(), "--ignore-not-found"])
            .await;
    }
    let left = k.ok(&["get", "pods", "-A", "-o", "name"]).await;
    assert!(left.trim().is_empty(), "{left}");

    cluster.shutdown().await.unwrap();
}

/// `kubectl apply -f deploy/examples/<dialect>.yaml` against the simulated
/// cluster, then Muster schedules the gang: every pod of the example bound.
/// (The v1alpha2 example is left out: the simulator stores each API version
/// separately, and Muster watches v1beta1 PodGroups whenever they are served,
/// as on a real 1.37 cluster where both versions are one object.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dialect_examples_applied_with_kubectl_are_scheduled_by_muster() {
    let bin = kubectl_binary();
    let env = e2e::cluster(vec![e2e::nodes(4, "4")]).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    env.cluster.write_kubeconfig(&kubeconfig).unwrap();
    let k = Kubectl { bin, kubeconfig };
    let daemon = e2e::daemon(&env, e2e::test_config("")).await;

    // podgroup-v1alpha2: the cluster serves v1alpha2 and v1beta1, Muster
    // watches v1beta1 and sees the same object.
    for dialect in [
        "podgroup-v1beta1",
        "podgroup-v1alpha2",
        "compositepodgroup-v1alpha3",
        "workload-v1alpha1",
        "coscheduling",
        "volcano",
        "kueue",
    ] {
        let file = root().join(format!("deploy/examples/{dialect}.yaml"));
        k.ok(&["apply", "-f", file.to_str().unwrap()]).await;
        let ns = format!("ex-{dialect}");
        let pods = e2e::wait_pods(&env, &ns, |p| !p.is_empty() && p.values().all(e2e::bound)).await;
        assert_eq!(pods.len(), 3, "{dialect}: {:?}", pods.keys());
    }
    daemon.shutdown().await.expect("clean shutdown");
}

/// `kubectl drain` evicts through `pods/eviction` and so respects a
/// PodDisruptionBudget: refused (429, retried until the timeout) while the
/// budget allows nothing, done once it allows enough. `kubectl get pdb`
/// prints kubectl's columns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_drain_respects_a_disruption_budget() {
    let cluster = SimCluster::start(common::fast().with_nodes(2))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig).unwrap();
    let k = Kubectl {
        bin: kubectl_binary(),
        kubeconfig,
    };
    let nodes = k
        .ok(&["get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"])
        .await;
    let nodes: Vec<&str> = nodes.split_whitespace().collect();
    let (drained, other) = (nodes[0], nodes[1]);
    // Two pods on the node drained, one elsewhere; the budget first wants
    // all three.
    let pod = |name: &str, node: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, labels: {{app: web}}}}\n\
             spec:\n  nodeName: {node}\n  terminationGracePeriodSeconds: 0\n  \
             containers: [{{name: c, image: i}}]\n---\n"
        )
    };
    let manifest = format!(
        "{}{}{}apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {{name: web}}\n\
         spec:\n  minAvailable: 3\n  selector: {{matchLabels: {{app: web}}}}\n",
        pod("web-0", drained),
        pod("web-1", drained),
        pod("web-2", other)
    );
    let file = dir.path().join("web.yaml");
    std::fs::write(&file, manifest).unwrap();
    k.ok(&["apply", "-f", file.to_str().unwrap()]).await;
    k.ok(&[
        "wait",
        "--for=condition=Ready",
        "pod",
        "-l",
        "app=web",
        "--timeout=30s",
    ])
    .await;
    k.ok(&[
        "wait",
        "--for=jsonpath={.status.currentHealthy}=3",
        "pdb/web",
        "--timeout=30s",
    ])
    .await;
    let table = k.ok(&["get", "pdb", "web"]).await;
    let mut lines = table.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap()
        .split("  ")
        .filter(|c| !c.trim().is_empty())
        .map(str::trim)
        .collect();
    assert_eq!(
        header,
        [
            "NAME",
            "MIN AVAILABLE",
            "MAX UNAVAILABLE",
            "ALLOWED DISRUPTIONS",
            "AGE"
        ],
        "{table}"
    );
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(&row[..4], ["web", "3", "N/A", "0"], "{table}");

    // Refused while it would violate the budget (kubectl retries 429s until
    // its timeout).
    let err = k
        .fails(&[
            "drain",
            drained,
            "--force",
            "--ignore-daemonsets",
            "--timeout=3s",
        ])
        .await;
    assert!(
        err.contains("Cannot evict pod as it would violate the pod's disruption budget."),
        "{err}"
    );
    for p in ["web-0", "web-1", "web-2"] {
        k.ok(&["get", "pod", p]).await;
    }

    // Two disruptions allowed: the drain evicts both pods and completes.
    k.ok(&[
        "patch",
        "pdb",
        "web",
        "--type=merge",
        "-p",
        "{\"spec\":{\"minAvailable\":1}}",
    ])
    .await;
    k.ok(&[
        "wait",
        "--for=jsonpath={.status.disruptionsAllowed}=2",
        "pdb/web",
        "--timeout=30s",
    ])
    .await;
    let out = k
        .ok(&[
            "drain",
            drained,
            "--force",
            "--ignore-daemonsets",
            "--timeout=30s",
        ])
        .await;
    assert!(out.contains("evicted"), "{out}");
    let left = k.ok(&["get", "pods", "-l", "app=web", "-o", "name"]).await;
    assert_eq!(left.trim(), "pod/web-2", "{left}");
    let node = k.ok(&["get", "node", drained]).await;
    assert!(node.contains("SchedulingDisabled"), "{node}");
}
