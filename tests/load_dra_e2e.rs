//! End-to-end: `muster load --bind-directly` with a DRA scenario (device
//! classes, claim templates, pods claiming from them) against the simulated
//! cluster. Every pod is bound and starts: each of its claims (made from the
//! template in the pod's namespace) is allocated devices of the pod's node,
//! reserved for the pod, and no device is given twice. Gangs whose
//! PodGroup shares a rack's unit (KEP-5729) start too: the group's claim is
//! allocated once, reserved for the PodGroup, and its members share a rack.
//! (Muster itself scheduling claims is `dra_e2e` and `dra_gang_e2e`.)

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::{Api, ListParams};
use serde_json::Value;

use crate::e2e::{Env, HANG_GUARD, bound, cluster, list_labelled_pods};
use muster::scenario::manifests::SCENARIO_LABEL;

/// Four nodes of four devices: two pods take a node's four each, then
/// six pods (in another namespace) one each on the other two nodes.
const SCENARIO: &str = r#"
name: load-dra
timeoutSeconds: 30
nodes:
  - {namePrefix: gpu, count: 4, capacity: {cpu: 8, memory: 32Gi, pods: 110},
     devices: {count: 4, model: h100, memory: 80Gi, pcieRoots: 2}}
namespaces: [ml]
deviceClasses:
  - name: gpu.kwok.muster.dev
    selectors:
      - cel: {expression: 'device.driver == "gpu.kwok.muster.dev"'}
resourceClaimTemplates:
  - name: four
    devices:
      requests:
        - name: gpu
          exactly:
            deviceClassName: gpu.kwok.muster.dev
            count: 4
            selectors:
              - cel: {expression: 'device.attributes["gpu.kwok.muster.dev"].model == "h100"'}
  - name: one
    devices:
      requests:
        - name: gpu
          exactly:
            deviceClassName: gpu.kwok.muster.dev
            selectors:
              - cel: {expression: 'device.capacity["gpu.kwok.muster.dev"].memory.compareTo(quantity("40Gi")) >= 0'}
workloads:
  - pods: {namePrefix: fill, count: 2, requests: {cpu: 100m}, claimTemplates: [four],
           expect: {outcome: bound}}
  - pods: {namePrefix: small, namespace: ml, count: 6, requests: {cpu: 100m},
           claimTemplates: [one], start: {after: previousSettled}, measured: true,
           expect: {outcome: bound}}
"#;

async fn muster_load(args: &[&str]) -> std::process::Output {
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_muster"))
        .arg("load")
        .args(args)
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(HANG_GUARD, run)
        .await
        .expect("muster load finishes")
        .expect("muster load runs")
}

fn read_report(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("report.json")).expect("report.json");
    serde_json::from_str(&text).expect("report.json is JSON")
}

/// The scenario's pods once every one is Running (the kubelet starts a pod
/// only once its claims are allocated and reserved for it).
async fn running_pods(env: &Env, scenario: &str, count: usize) -> BTreeMap<String, Pod> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let pods = list_labelled_pods(env, &format!("{SCENARIO_LABEL}={scenario}")).await;
        let phase = |p: &Pod| p.status.as_ref().and_then(|s| s.phase.clone());
        if pods.len() == count
            && pods
                .values()
                .all(|p| phase(p).as_deref() == Some("Running"))
        {
            return pods;
        }
        assert!(
            Instant::now() < deadline,
            "pods did not all start: {:?}",
            pods.iter().map(|(n, p)| (n, phase(p))).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every pod's claim holds `wanted` devices of the pod's node, is reserved
/// for it alone, and no device is in two claims.
async fn check_claims(env: &Env, pods: &BTreeMap<String, Pod>) {
    let claims: BTreeMap<String, ResourceClaim> = Api::<ResourceClaim>::all(env.client.clone())
        .list(&ListParams::default())
        .await
        .expect("claims")
        .items
        .into_iter()
        .map(|c| (c.metadata.name.clone().unwrap_or_default(), c))
        .collect();
    let mut seen = BTreeSet::new();
    for (name, pod) in pods {
        assert!(bound(pod), "{name} bound");
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap();
        let made = pod
            .status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.clone())
            .unwrap_or_default();
        let claim_name = made[0].resource_claim_name.clone().expect("claim made");
        let status = claims[&claim_name].status.clone().expect("claim status");
        let reserved: Vec<String> = status
            .reserved_for
            .unwrap_or_default()
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(
            reserved,
            [name.as_str()],
            "{claim_name} reserved for its pod"
        );
        let results = status
            .allocation
            .and_then(|a| a.devices)
            .and_then(|d| d.results)
            .unwrap_or_default();
        let wanted = if name.starts_with("null-fill") { 4 } else { 1 };
        assert_eq!(results.len(), wanted, "{claim_name}");
        for r in results {
            assert_eq!(r.pool, node, "{name}'s devices are on its node");
            assert_eq!(r.request, "gpu");
            assert!(
                seen.insert((r.pool.clone(), r.device.clone())),
                "{r:?} twice"
            );
        }
    }
}

/// A fresh cluster with no scheduler, and `muster load --bind-directly`
/// run on it with `scenario` (YAML text): the cluster and the report.
async fn null_scheduled(scenario: &str) -> (Env, Value) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("scenario.yaml");
    std::fs::write(&file, scenario).expect("scenario");
    let path = |p: &Path| p.display().to_string();
    let env = cluster(Vec::new()).await;
    let kubeconfig = dir.path().join("kubeconfig");
    env.cluster
        .write_kubeconfig(&kubeconfig)
        .expect("kubeconfig");
    let report = dir.path().join("report");
    let out = muster_load(&[
        "--kubeconfig",
        &path(&kubeconfig),
        "--scenario",
        &path(&file),
        "--report-dir",
        &path(&report),
        "--bind-directly",
    ])
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (env, read_report(&report))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_null_scheduler_allocates_claims_and_its_pods_start() {
    // The ceiling: the null scheduler allocates the claims itself.
    let (bare, ceiling) = null_scheduled(SCENARIO).await;
    assert_eq!(ceiling["pods_bound"], 8);
    assert_eq!(ceiling["pods_measured"], 6);
    assert_eq!(ceiling["null_bind_failures"], 0);
    check_claims(&bare, &running_pods(&bare, "load-dra-null", 8).await).await;
}

/// Two racks of two nodes, two devices a node and one fabric unit a rack;
/// two gangs of two whose PodGroup claims a unit and whose members take a
/// node's two devices each.
const GANGS: &str = r#"
name: load-dra-gangs
timeoutSeconds: 30
dialect: podGroup
nodes:
  - {namePrefix: gpu, count: 4, capacity: {cpu: 8, memory: 32Gi, pods: 110},
     topology: {hostsPerRack: 2, racksPerBlock: 2},
     devices: {count: 2, model: h100, multiNode: {count: 1, model: kwok-fabric}}}
deviceClasses:
  - name: gpu.kwok.muster.dev
    selectors:
      - cel: {expression: 'device.attributes["gpu.kwok.muster.dev"].model == "h100"'}
  - name: fabric.kwok.muster.dev
    selectors:
      - cel: {expression: 'device.attributes["gpu.kwok.muster.dev"].model == "kwok-fabric"'}
resourceClaimTemplates:
  - name: two
    devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.kwok.muster.dev, count: 2}}]}
  - name: unit
    devices: {requests: [{name: fabric, exactly: {deviceClassName: fabric.kwok.muster.dev}}]}
workloads:
  - gang: {namePrefix: train, count: 2, size: 2, requests: {cpu: 100m},
           groupClaimTemplates: [unit], claimTemplates: [two], measured: true,
           expect: {outcome: bound}}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_null_scheduler_gives_a_pod_groups_claim_one_rack_and_its_members_start() {
    let (env, r) = null_scheduled(GANGS).await;
    assert_eq!(
        (r["pods_bound"].as_u64(), r["null_bind_failures"].as_u64()),
        (Some(4), Some(0))
    );
    // Running: each member's own claim is reserved for it and the group's
    // for its PodGroup (the kubelet waits for both).
    let pods = running_pods(&env, "load-dra-gangs-null", 4).await;
    let claims: Vec<ResourceClaim> = Api::<ResourceClaim>::all(env.client.clone())
        .list(&ListParams::default())
        .await
        .expect("claims")
        .items;
    let mut units = BTreeSet::new();
    for gang in ["null-train-0", "null-train-1"] {
        let group: Vec<&ResourceClaim> =
            claims
                .iter()
                .filter(|c| {
                    c.metadata.owner_references.iter().flatten().any(|o| {
                        o.kind == "PodGroup" && o.name == gang && o.controller == Some(true)
                    })
                })
                .collect();
        let [claim] = group.as_slice() else {
            panic!("{gang}: one claim for the group, not {}", group.len())
        };
        let status = claim.status.clone().expect("status");
        let reserved: Vec<(String, String)> = status
            .reserved_for
            .unwrap_or_default()
            .into_iter()
            .map(|r| (r.resource, r.name))
            .collect();
        assert_eq!(reserved, [("podgroups".to_string(), gang.to_string())]);
        let results = status
            .allocation
            .and_then(|a| a.devices)
            .and_then(|d| d.results)
            .unwrap_or_default();
        let [unit] = results.as_slice() else {
            panic!("{gang}: one unit")
        };
        assert!(units.insert(unit.pool.clone()), "{} given twice", unit.pool);
        // Both members on nodes of that unit's rack (racks of two: gpu-0
        // and gpu-1 are rack-0).
        let nodes: BTreeSet<String> = pods
            .iter()
            .filter(|(n, _)| n.starts_with(&format!("{gang}-")))
            .filter_map(|(_, p)| p.spec.as_ref()?.node_name.clone())
            .collect();
        assert_eq!(nodes.len(), 2, "{gang}: {nodes:?}");
        let racks: BTreeSet<String> = nodes
            .iter()
            .map(|n| {
                let i: usize = n
                    .trim_start_matches(|c: char| !c.is_ascii_digit())
                    .parse()
                    .unwrap();
                format!("clique-rack-{}", i / 2)
            })
            .collect();
        assert_eq!(racks, [unit.pool.clone()].into_iter().collect(), "{gang}");
    }
}
