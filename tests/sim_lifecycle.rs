//! The kwok-style lifecycle, node templates, fault injection and the
//! `muster cluster` binary.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{bind, code, fast, next, start, until};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use muster::apiserver::fault::FaultRule;
use muster::kwok::templates;
use serde_json::json;

fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

#[tokio::test]
async fn node_templates_generate_topology_and_ready_nodes() {
    let t = templates::parse(
        "- namePrefix: gpu\n  count: 6\n  capacity: {cpu: '16', memory: 64Gi, pods: '110', nvidia.com/gpu: '8'}\n  labels: {pool: gpu}\n  taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]\n  topology: {hostsPerRack: 2, racksPerBlock: 2}\n- namePrefix: cpu\n  count: 2\n",
    )
    .unwrap();
    let (cluster, client) = start(fast().with_templates(t)).await;
    let nodes: Api<Node> = Api::all(client);
    let all = nodes.list(&ListParams::default()).await.unwrap();
    assert_eq!(all.items.len(), 8);
    let gpu5 = nodes.get("gpu-5").await.unwrap();
    let labels = gpu5.metadata.labels.unwrap();
    assert_eq!(labels[templates::RACK_LABEL], "rack-2");
    assert_eq!(labels[templates::BLOCK_LABEL], "block-1");
    assert_eq!(labels["topology.kubernetes.io/rack"], "rack-2");
    assert_eq!(labels["kubernetes.io/hostname"], "gpu-5");
    assert_eq!(labels["pool"], "gpu");
    assert_eq!(gpu5.spec.unwrap().taints.unwrap()[0].key, "nvidia.com/gpu");
    let status = gpu5.status.unwrap();
    assert_eq!(status.allocatable.unwrap()["nvidia.com/gpu"].0, "8");
    assert!(
        status
            .conditions
            .unwrap()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    );
    assert!(
        status
            .addresses
            .unwrap()
            .iter()
            .any(|a| a.type_ == "InternalIP")
    );
    // Racks keep counting across templates.
    let cpu0 = nodes.get("cpu-0").await.unwrap();
    assert_eq!(
        cpu0.metadata.labels.unwrap()[templates::RACK_LABEL],
        "rack-3"
    );
    let selected = nodes
        .list(&ListParams::default().labels("topology.muster.dev/block=block-0"))
        .await
        .unwrap();
    assert_eq!(selected.items.len(), 4);
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn bound_pods_run_and_complete() {
    let (cluster, client) = start(
        fast()
            .with_nodes(1)
            .pod_start_delay(Duration::from_millis(50)),
    )
    .await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    let spec = |name: &str, run: Option<&str>| -> Pod {
        let mut p = json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
        if let Some(s) = run {
            p["metadata"]["annotations"] = json!({"muster.dev/sim-run-seconds": s});
        }
        serde_json::from_value(p).unwrap()
    };
    let created = pods
        .create(&PostParams::default(), &spec("long", None))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &spec("short", Some("0.2")))
        .await
        .unwrap();
    assert_eq!(phase(&created), "Pending");

    let rv = created.metadata.resource_version.unwrap();
    let mut stream = pods
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    bind(&pods, "long", "sim-node-0").await.unwrap();
    bind(&pods, "short", "sim-node-0").await.unwrap();

    let running = |name: &'static str| move |e: &kube::Result<WatchEvent<Pod>>| matches!(e, Ok(WatchEvent::Modified(p)) if p.metadata.name.as_deref() == Some(name) && phase(p) == "Running");
    let Ok(WatchEvent::Modified(long)) = until(&mut stream, running("long")).await else {
        unreachable!()
    };
    let status = long.status.unwrap();
    assert!(status.pod_ip.unwrap().starts_with("10."));
    assert!(status.host_ip.unwrap().starts_with("172."));
    assert!(status.start_time.is_some());
    let conditions = status.conditions.unwrap();
    for kind in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
        assert!(
            conditions
                .iter()
                .any(|c| c.type_ == kind && c.status == "True"),
            "{kind}"
        );
    }
    assert!(status.container_statuses.unwrap()[0].ready);

    let done = until(&mut stream, |e| {
        matches!(e, Ok(WatchEvent::Modified(p)) if p.metadata.name.as_deref() == Some("short") && phase(p) == "Succeeded")
    })
    .await;
    let Ok(WatchEvent::Modified(short)) = done else {
        unreachable!()
    };
    let terminated = short.status.unwrap().container_statuses.unwrap()[0]
        .state
        .clone()
        .unwrap()
        .terminated
        .unwrap();
    assert_eq!(terminated.exit_code, 0);

    // The kubelet recorded a Started event for each pod.
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::default_namespaced(pods.clone().into_client());
    let started = events
        .list(&ListParams::default().fields("involvedObject.name=long"))
        .await
        .unwrap();
    assert_eq!(started.items[0].reason.as_deref(), Some("Started"));
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn injected_faults_fail_and_delay_matching_requests() {
    let config = fast()
        .with_nodes(1)
        .with_fault(
            "verb=create,resource=pods/binding,rate=1,code=500"
                .parse::<FaultRule>()
                .unwrap(),
        )
        .with_fault(
            "verb=list,resource=nodes,code=409"
                .parse::<FaultRule>()
                .unwrap(),
        )
        .with_fault(
            "verb=get,resource=pods,latency-ms=150"
                .parse::<FaultRule>()
                .unwrap(),
        );
    // (429, 503 and 504 would be retried for minutes by kube-rs's default
    // retry policy, so this test sticks to codes clients do not retry.)
    let (cluster, client) = start(config).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i"}]}}))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    assert_eq!(
        code(bind(&pods, "p", "sim-node-0").await),
        (500, "InternalError".into())
    );
    let nodes: Api<Node> = Api::all(client);
    assert_eq!(
        code(nodes.list(&ListParams::default()).await),
        (409, "Conflict".into())
    );
    assert!(
        nodes.get("sim-node-0").await.is_ok(),
        "other verbs are untouched"
    );
    let began = std::time::Instant::now();
    pods.get("p").await.unwrap();
    assert!(began.elapsed() >= Duration::from_millis(150));
    cluster.shutdown().await.unwrap();
}

#[test]
fn bad_fault_spec_is_rejected_by_the_cli() {
    let out = Command::new(env!("CARGO_BIN_EXE_muster"))
        .args(["cluster", "--fault", "verb=fly,code=500"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("verb must be one of"), "{err}");
}

#[tokio::test]
async fn cluster_command_serves_until_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let mut child = Command::new(env!("CARGO_BIN_EXE_muster"))
        .args(["cluster", "--listen", "127.0.0.1:0", "--node-template"])
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/config/sim-nodes.yaml"
        ))
        .arg("--kubeconfig-out")
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("http://127.0.0.1:"), "{first}");

    let kc = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    // config/sim-nodes.yaml: 32 GPU nodes and 64 CPU nodes.
    let all = nodes.list(&ListParams::default()).await.unwrap();
    assert_eq!(all.items.len(), 96);
    let gpu = nodes
        .list(&ListParams::default().labels("pool=gpu"))
        .await
        .unwrap();
    assert_eq!(gpu.items.len(), 32);
    // An open watch must not keep the server from stopping.
    let mut watch = nodes
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    next(&mut watch).await.unwrap();

    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status:?}");
}
