//! `kubectl muster explain` and `kubectl muster what-if` (the real kubectl
//! v1.37 running the plugin) against a real Kubernetes 1.37 control plane
//! (tests/real_cluster), as a user bound to the shipped `muster-explain`
//! and `muster-what-if` ClusterRoles (deploy/manifests/rbac.yaml): explain
//! asks the daemon with the user's token, and a user without the role is
//! refused; what-if reads the real cluster and answers whether gangs fit.

use serde_json::Value;

use crate::common::kubectl::Kubectl;
use crate::explain_e2e::{plugin, plugin_dir};
use crate::real_cluster as rc;

const GUARD: std::time::Duration = std::time::Duration::from_secs(30);

/// A gang of `n` pods of `cpu` cores, as a manifest.
fn gang(name: &str, n: usize, cpu: &str) -> String {
    let mut out = format!(
        "apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {{name: {name}, namespace: default}}
spec:
  schedulingPolicy:
    gang: {{minCount: {n}}}
---
"
    );
    for i in 0..n {
        out += &format!(
            "apiVersion: v1
kind: Pod
metadata: {{name: {name}-{i}, namespace: default}}
spec:
  schedulerName: muster
  schedulingGroup: {{podGroupName: {name}}}
  containers:
  - {{name: main, image: busybox, resources: {{requests: {{cpu: \"{cpu}\"}}}}}}
---
"
        );
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_explain_and_what_if_answer_a_bound_user_and_refuse_an_unbound_one() {
    let env = rc::cluster(vec![rc::nodes(2, "4")]).await;
    let k = rc::kubectl(&env);
    let rbac = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/manifests/rbac.yaml"
    ))
    .expect("rbac.yaml");
    for role in ["muster-explain", "muster-what-if"] {
        let doc = rbac
            .split("\n---")
            .find(|doc| doc.contains(&format!("name: {role}\n")))
            .unwrap_or_else(|| panic!("the kustomize base has a {role} ClusterRole"));
        k.apply(doc).await;
        k.ok(&[
            "create",
            "clusterrolebinding",
            &format!("alice-{role}"),
            &format!("--clusterrole={role}"),
            "--user=alice",
        ])
        .await;
    }
    let mut opts = muster::daemon::DaemonOptions::new(rc::test_config(""));
    opts.serving = muster::daemon::ServingOptions::secure();
    let d = muster::daemon::start(env.client.clone(), opts)
        .await
        .expect("daemon starts");
    crate::e2e::wait_ready_https(&d).await;

    // A gang of two with one member: held.
    let held = gang("w", 2, "1");
    let first: Vec<&str> = held.split("---\n").take(2).collect();
    k.apply(&first.join("---\n")).await;
    rc::wait_pods_or_describe(&env, "default", GUARD, |p| {
        p.get("w-0")
            .and_then(rc::pod_condition_message)
            .is_some_and(|m| m.contains("waiting for"))
    })
    .await;

    let dir = plugin_dir();
    let as_user = |user: &str| Kubectl::new(env.cluster.dir().join(format!("{user}.kubeconfig")));
    let (alice, bob) = (as_user("alice"), as_user("bob"));
    let url = format!("https://{}", d.http_addr);
    let explain = [
        "explain",
        "podgroup/w",
        "-o",
        "json",
        "--scheduler",
        &url,
        "--scheduler-insecure-skip-tls-verify",
    ];
    let out = plugin(&alice, &dir, &explain).await;
    let json: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(json["source"], "scheduler", "{json}");
    assert_eq!(json["summary"], "1/2 present; 1 member(s) not created yet");

    let out = plugin(&bob, &dir, &explain).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stderr}{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        stderr.contains("cannot get path") && stderr.contains("nor the API objects read"),
        "{stderr}"
    );

    // what-if, read-only, from the real cluster's objects: two 3-core pods
    // fit (one per 4-core node, the held member's core beside one); two
    // 5-core pods fit nowhere.
    let what_if = |manifest: &str, file: &str| {
        let path = dir.path().join(file);
        std::fs::write(&path, manifest).expect("write FILE");
        path.display().to_string()
    };
    let fit = what_if(&gang("fit", 2, "3"), "fit.yaml");
    let out = plugin(&alice, &dir, &["what-if", "-f", &fit, "-o", "json"]).await;
    let answer: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(
        (out.status.code(), answer["verdict"].as_str()),
        (Some(0), Some("fits")),
        "{answer}"
    );
    assert_eq!(
        answer["placements"].as_array().map(Vec::len),
        Some(2),
        "{answer}"
    );
    let big = what_if(&gang("big", 2, "5"), "big.yaml");
    let out = plugin(&alice, &dir, &["what-if", "-f", &big, "-o", "json"]).await;
    let answer: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(
        (out.status.code(), answer["verdict"].as_str()),
        (Some(4), Some("doesNotFit")),
        "{answer}"
    );
    // Nothing was written: no pod of either gang exists.
    let pods = rc::list_pods(&env, "default").await;
    assert_eq!(
        pods.keys().collect::<Vec<_>>(),
        ["w-0"],
        "what-if only reads"
    );
    d.shutdown().await.expect("daemon stops");
}
