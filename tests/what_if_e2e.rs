//! `kubectl muster what-if` end to end, the real kubectl finding the
//! plugin on PATH, against a recording `muster cluster`: it fits, does
//! not fit (and fits once nodes are added), or fits only by preemption;
//! every request it makes is a read; and what it said is what `muster
//! run` then does when the same file is applied (the nodes, the victims).

use std::collections::BTreeSet;
use std::time::Duration;

use muster::apiserver::{SimCluster, SimConfig};
use serde_json::Value;

use crate::common::kubectl::Kubectl;
use crate::e2e::{self, Env, test_config};
use crate::explain_e2e::{CLASSES, plugin, plugin_dir, pod, podgroup};

/// A gang of `n` pods of `cpu` cores at priority `class`.
fn gang(name: &str, n: usize, cpu: &str, class: &str) -> String {
    let mut out = podgroup(name, n, class, "");
    for i in 0..n {
        let grace = "\n  terminationGracePeriodSeconds: 1";
        out.push_str(&pod(&format!("{name}-{i}"), cpu, class, Some(name), grace));
    }
    out
}

/// A low-priority pod already running on `node`.
fn running(name: &str, node: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  schedulerName: muster
  priorityClassName: low
  nodeName: {node}
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox
    resources: {{requests: {{cpu: \"3\", memory: 100Mi}}}}
---
"
    )
}

/// `what-if -f FILE -o json` with `extra` flags: its exit code and answer.
async fn what_if(
    k: &Kubectl,
    dir: &tempfile::TempDir,
    manifest: &str,
    extra: &[&str],
) -> (i32, Value) {
    let file = dir.path().join("asked.yaml");
    std::fs::write(&file, manifest).expect("write FILE");
    let path = file.display().to_string();
    let mut args = vec!["what-if", "-f", path.as_str(), "-o", "json"];
    args.extend_from_slice(extra);
    let out = plugin(k, dir, &args).await;
    let answer = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "what-if answered JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), answer)
}

fn placements(answer: &Value) -> BTreeSet<(String, String)> {
    answer["placements"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            (
                p["pod"].as_str().unwrap_or("").to_string(),
                p["node"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn victims(answer: &Value) -> BTreeSet<String> {
    answer["victims"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["pod"].as_str().map(String::from))
        .collect()
}

/// Where the pods named `prefix-*` are bound, once `n` of them are.
async fn bound_nodes(env: &Env, prefix: &str, n: usize) -> BTreeSet<(String, String)> {
    let pods = e2e::wait_pods(env, "default", |pods| {
        pods.iter()
            .filter(|(name, p)| name.starts_with(prefix) && e2e::bound(p))
            .count()
            == n
    })
    .await;
    pods.iter()
        .filter(|(name, p)| name.starts_with(prefix) && e2e::bound(p))
        .map(|(name, p)| {
            let node = p.spec.as_ref().and_then(|s| s.node_name.clone());
            (format!("default/{name}"), node.unwrap_or_default())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_if_only_reads_and_says_what_the_scheduler_then_does() {
    let mut nodes = e2e::nodes(2, "4");
    nodes.name_prefix = "n".into();
    let config = SimConfig::default()
        .pod_start_delay(Duration::from_millis(10))
        .bookmark_interval(Duration::from_millis(500))
        .max_termination_grace(Duration::from_secs(1))
        .record_requests(true)
        .with_templates(vec![nodes]);
    let cluster = SimCluster::start(config).await.expect("cluster starts");
    let client = cluster.client().expect("client");
    let env = Env { cluster, client };
    let k = Kubectl::for_cluster(&env.cluster);
    k.apply(CLASSES).await;
    let node_names: Vec<String> = {
        let v = k.json(&["get", "nodes"]).await;
        let mut names: Vec<String> = v["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|n| n["metadata"]["name"].as_str().map(String::from))
            .collect();
        names.sort();
        names
    };
    assert_eq!(node_names.len(), 2);
    k.apply(&format!(
        "{}{}",
        running("low-0", &node_names[0]),
        running("low-1", &node_names[1])
    ))
    .await;
    let dir = plugin_dir();

    // Fits now: one core left on each node, a gang of two one-core pods.
    let fit = gang("fit", 2, "1", "low");
    let (code, answer) = what_if(&k, &dir, &fit, &[]).await;
    assert_eq!(
        (code, answer["verdict"].as_str()),
        (0, Some("fits")),
        "{answer}"
    );
    let said = placements(&answer);
    assert_eq!(said.len(), 2, "{answer}");

    // Too big: two three-core members; fits on two copies of a node.
    let big = gang("big", 2, "3", "low");
    let (code, answer) = what_if(&k, &dir, &big, &[]).await;
    assert_eq!(
        (code, answer["verdict"].as_str()),
        (4, Some("doesNotFit")),
        "{answer}"
    );
    assert!(
        answer["summary"]
            .as_str()
            .unwrap_or("")
            .contains("0/2 nodes"),
        "{answer}"
    );
    let add = format!("{}=2", node_names[0]);
    let (code, answer) = what_if(&k, &dir, &big, &["--add-nodes", &add]).await;
    assert_eq!(code, 0, "{answer}");
    assert!(
        placements(&answer)
            .iter()
            .all(|(_, node)| node.contains("-what-if-")),
        "{answer}"
    );
    // Draining a node does not make room (it is cordoned).
    let (code, _) = what_if(&k, &dir, &big, &["--drain", &node_names[0]]).await;
    assert_eq!(code, 4);

    // Every request the plugin made was a read.
    let plugin_calls: Vec<_> = env
        .cluster
        .requests()
        .into_iter()
        .filter(|c| c.user_agent.starts_with("kubectl-muster"))
        .collect();
    assert!(
        !plugin_calls.is_empty(),
        "the plugin's requests are recorded"
    );
    let writes: Vec<_> = plugin_calls
        .iter()
        .filter(|c| !matches!(c.verb.as_str(), "get" | "list" | "watch"))
        .collect();
    assert!(writes.is_empty(), "what-if wrote: {writes:?}");

    // The scheduler then does what it said: the same nodes.
    let d = e2e::daemon(&env, test_config("")).await;
    e2e::wait_ready(&d).await;
    k.apply(&fit).await;
    assert_eq!(bound_nodes(&env, "fit-", 2).await, said);

    // Only by preemption: a high gang needs both low pods' room.
    let vip = gang("vip", 2, "3", "high");
    let (code, answer) = what_if(&k, &dir, &vip, &[]).await;
    assert_eq!(
        (code, answer["verdict"].as_str()),
        (3, Some("fitsByPreemption")),
        "{answer}"
    );
    let evicted = victims(&answer);
    assert_eq!(
        evicted,
        BTreeSet::from(["default/low-0".to_string(), "default/low-1".to_string()]),
        "{answer}"
    );
    let nominated = placements(&answer);
    k.apply(&vip).await;
    let deleted = e2e::wait_pods(&env, "default", |pods| {
        !pods.contains_key("low-0") && !pods.contains_key("low-1")
    })
    .await;
    assert!(!deleted.contains_key("low-0"));
    // The nodes it named; alike members may swap among them (the gang is
    // placed afresh once its victims are gone).
    let nodes = |s: &BTreeSet<(String, String)>| {
        let mut n: Vec<String> = s.iter().map(|(_, node)| node.clone()).collect();
        n.sort();
        n
    };
    assert_eq!(
        nodes(&bound_nodes(&env, "vip-", 2).await),
        nodes(&nominated)
    );
    d.shutdown().await.expect("clean shutdown");
}
