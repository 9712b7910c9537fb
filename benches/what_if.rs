//! `muster what-if` end to end at 5,000 nodes and 50,000 pods: `muster
//! cluster` as a child process, 50,000 pods created already bound, then
//! `muster what-if -f FILE` (a gang of 8) run as the user would, three
//! times, each timed from process start to its answer: the listing through
//! the informers, the load into a fresh engine and the answer.
//!
//! `cargo bench --bench what_if` (part of `make bench-explain`). Sizes via
//! env: WHAT_IF_NODES (5000), WHAT_IF_PODS (50000).

mod sim_process;

use std::process::Command;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::json;
use sim_process::Server;

fn env_or(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn running(i: usize, nodes: usize) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": format!("pod-{i:05}"), "labels": {"app": "scale"}},
        "spec": {"schedulerName": "muster", "nodeName": format!("sim-node-{}", i % nodes),
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]},
    }))
    .expect("valid pod")
}

const GANG: &str = "apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: asked, namespace: default}
spec: {schedulingPolicy: {gang: {minCount: 8}}}
";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let nodes = env_or("WHAT_IF_NODES", 5_000);
    let pods_n = env_or("WHAT_IF_PODS", 50_000);
    let dir = tempfile::tempdir()?;
    let kubeconfig = dir.path().join("kubeconfig");
    let server = Server::start(nodes, Some(&kubeconfig));
    let client = kube::Client::try_from(kube::Config::new(server.url.parse()?))?;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let t = Instant::now();
    stream::iter(0..pods_n)
        .map(|i| {
            let pods = pods.clone();
            async move {
                pods.create(&PostParams::default(), &running(i, nodes))
                    .await
            }
        })
        .buffer_unordered(64)
        .try_for_each(|_| async { Ok(()) })
        .await?;
    println!(
        "{nodes} nodes, {pods_n} pods bound, created in {:.1?}",
        t.elapsed()
    );

    let mut file = GANG.to_string();
    for m in 0..8 {
        file.push_str(&format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: asked-{m}, namespace: default}}\nspec:\n  schedulerName: muster\n  schedulingGroup: {{podGroupName: asked}}\n  containers: [{{name: c, image: x, resources: {{requests: {{cpu: \"1\"}}}}}}]\n"
        ));
    }
    let asked = dir.path().join("asked.yaml");
    std::fs::write(&asked, file)?;
    let mut took: Vec<Duration> = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_muster"))
            .arg("what-if")
            .arg("-f")
            .arg(&asked)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["-o", "json"])
            .output()?;
        took.push(t.elapsed());
        let answer: serde_json::Value = serde_json::from_slice(&out.stdout)
            .map_err(|e| anyhow::anyhow!("{e}: {}", String::from_utf8_lossy(&out.stderr)))?;
        anyhow::ensure!(answer["verdict"] == "fits", "unexpected answer: {answer}");
    }
    took.sort();
    println!(
        "what-if on {nodes} nodes / {pods_n} pods: median {:.2?} (runs {:?}), target 5 s",
        took[1], took
    );
    Ok(())
}
