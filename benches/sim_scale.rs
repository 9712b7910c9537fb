//! Scale check of the simulated cluster (not a timed test): start
//! `muster cluster` as a child process with 5,000 nodes, create 50,000
//! pods, bind them all with a no-op client (concurrent binding POSTs over
//! HTTP with kube-rs), and report the bindings/s ceiling, the server's peak
//! memory (VmHWM) and how long a fresh `kube::runtime::watcher` takes to
//! list every pod.
//!
//! `make sim-scale`, or `cargo bench --bench sim_scale`. Sizes via env:
//! SIM_SCALE_NODES (5000), SIM_SCALE_PODS (50000), SIM_SCALE_CONCURRENCY (64).

mod sim_process;

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use kube::api::{Api, ListParams, PostParams};
use kube::core::ObjectMeta;
use kube::runtime::watcher;
use serde_json::json;
use sim_process::Server;

fn env_or(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Peak resident set of a process, from /proc/<pid>/status.
fn vm_hwm_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn pod(i: usize) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": format!("pod-{i:05}"), "labels": {"app": "scale", "gang": format!("g{}", i / 8)}},
        "spec": {"schedulerName": "muster", "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]},
    }))
    .expect("valid pod")
}

fn rate(n: usize, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let nodes = env_or("SIM_SCALE_NODES", 5_000);
    let pods_n = env_or("SIM_SCALE_PODS", 50_000);
    let concurrency = env_or("SIM_SCALE_CONCURRENCY", 64);

    let began = Instant::now();
    let server = Server::start(nodes, None);
    let startup = began.elapsed();
    let pid = server.child.id();
    let config = kube::Config::new(server.url.parse()?);
    let client = kube::Client::try_from(config)?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    println!(
        "server {} (pid {pid}): {nodes} nodes ready in {startup:.2?}",
        server.url
    );

    let t = Instant::now();
    stream::iter(0..pods_n)
        .map(|i| {
            let pods = pods.clone();
            async move { pods.create(&PostParams::default(), &pod(i)).await }
        })
        .buffer_unordered(concurrency)
        .try_for_each(|_| async { Ok(()) })
        .await?;
    let create = t.elapsed();

    let t = Instant::now();
    stream::iter(0..pods_n)
        .map(|i| {
            let pods = pods.clone();
            let binding = Binding {
                metadata: ObjectMeta {
                    name: Some(format!("pod-{i:05}")),
                    ..Default::default()
                },
                target: ObjectReference {
                    kind: Some("Node".into()),
                    name: Some(format!("sim-node-{}", i % nodes)),
                    ..Default::default()
                },
            };
            async move {
                let name = binding.metadata.name.clone().unwrap_or_default();
                pods.create_subresource::<_, serde_json::Value>(
                    "binding",
                    &name,
                    &PostParams::default(),
                    &binding,
                )
                .await
            }
        })
        .buffer_unordered(concurrency)
        .try_for_each(|_| async { Ok(()) })
        .await?;
    let bind = t.elapsed();

    // A fresh informer: kube-runtime's default paginated list (500 a page).
    let t = Instant::now();
    let mut events = watcher::watcher(pods.clone(), watcher::Config::default()).boxed();
    let mut listed = 0usize;
    while let Some(e) = events.try_next().await? {
        match e {
            watcher::Event::InitApply(_) => listed += 1,
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    let watch_list = t.elapsed();
    drop(events);

    let t = Instant::now();
    let all = pods.list(&ListParams::default()).await?;
    let one_list = t.elapsed();
    let hwm = vm_hwm_kib(pid);

    println!(
        "created {pods_n} pods in {create:.2?} ({:.0}/s, concurrency {concurrency})",
        rate(pods_n, create)
    );
    println!(
        "bound {pods_n} pods in {bind:.2?} ({:.0} bindings/s, concurrency {concurrency})",
        rate(pods_n, bind)
    );
    println!("fresh watcher listed {listed} pods in {watch_list:.2?} (pages of 500)");
    println!(
        "single unpaginated list of {} pods in {one_list:.2?}",
        all.items.len()
    );
    println!("server peak memory (VmHWM): {:.0} MiB", hwm as f64 / 1024.0);
    anyhow::ensure!(listed == pods_n, "watcher listed {listed} of {pods_n} pods");
    Ok(())
}
