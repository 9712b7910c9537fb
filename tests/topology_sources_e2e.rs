//! The topology sources with the real kubectl v1.37 against the simulated
//! cluster: Kueue's sample `Topology` (site/static/examples/tas) and the
//! HyperNodes of Volcano's network-topology user guide are applied and read
//! back in every served version, by plural, kind and short name. Then a
//! daemon among such objects (valid and not): it becomes ready, and a
//! group whose topology constraint is invalid has its members refused with
//! the reason.
//!
//! kubectl comes from $MUSTER_KUBECTL or `.tools/kubectl`, fetched with
//! `tests/support/fetch-tools.sh` when missing.

use crate::{common, e2e};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::ApiResource;
use muster::apiserver::SimCluster;
use serde_json::{Value, json};

use crate::common::kubectl::Kubectl;

/// Kueue's sample Topology, as site/static/examples/tas/sample-queues.yaml
/// declares it.
const KUEUE_TOPOLOGY: &str = r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata:
  name: "default"
spec:
  levels:
  - nodeLabel: "cloud.provider.com/topology-block"
  - nodeLabel: "cloud.provider.com/topology-rack"
  - nodeLabel: "kubernetes.io/hostname"
"#;

/// A leaf and a non-leaf HyperNode in the shape of Volcano's
/// network-topology user guide (exact and regex member selectors, tiers 1
/// and 3), plus a label-selected leaf with a tier name.
const VOLCANO_HYPERNODES: &str = r#"apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata:
  name: s0
spec:
  tier: 1
  members:
  - type: Node
    selector:
      exactMatch:
        name: node-0
  - type: Node
    selector:
      regexMatch:
        pattern: node-[01]
---
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata:
  name: s1
spec:
  tier: 1
  tierName: rack
  members:
  - type: Node
    selector:
      labelMatch:
        matchLabels:
          topology-rack: rack-1
---
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata:
  name: s6
spec:
  tier: 3
  members:
  - type: HyperNode
    selector:
      exactMatch:
        name: s0
  - type: HyperNode
    selector:
      exactMatch:
        name: s1
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueue_topologies_and_volcano_hypernodes_with_kubectl() {
    let cluster = SimCluster::start(common::fast().with_nodes(2))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig).unwrap();
    let k = Kubectl::new(kubeconfig);

    let resources = k.ok(&["api-resources", "--api-group=kueue.x-k8s.io"]).await;
    assert!(
        resources.contains("topologies") && resources.contains("topo"),
        "{resources}"
    );
    let resources = k
        .ok(&["api-resources", "--api-group=topology.volcano.sh"])
        .await;
    assert!(
        resources.contains("hypernodes") && resources.contains("hn"),
        "{resources}"
    );

    // Kueue: applied as the sample writes it, read in both versions.
    let out = k.ok_with(&["apply", "-f", "-"], KUEUE_TOPOLOGY).await;
    assert!(
        out.contains("topology.kueue.x-k8s.io/default created"),
        "{out}"
    );
    let levels = k
        .ok(&[
            "get",
            "topo",
            "default",
            "-o",
            "jsonpath={.spec.levels[*].nodeLabel}",
        ])
        .await;
    assert_eq!(
        levels,
        "cloud.provider.com/topology-block cloud.provider.com/topology-rack kubernetes.io/hostname"
    );
    let v1beta1 = k
        .ok(&[
            "get",
            "topologies.v1beta1.kueue.x-k8s.io",
            "default",
            "-o",
            "jsonpath={.apiVersion} {.spec.levels[1].nodeLabel}",
        ])
        .await;
    assert_eq!(
        v1beta1,
        "kueue.x-k8s.io/v1beta1 cloud.provider.com/topology-rack"
    );
    let out = k.ok_with(&["apply", "-f", "-"], KUEUE_TOPOLOGY).await;
    assert!(
        out.contains("topology.kueue.x-k8s.io/default unchanged"),
        "{out}"
    );
    let table = k.ok(&["get", "topologies"]).await;
    assert!(table.contains("default"), "{table}");
    // Refused as Kueue's CRD rules refuse it.
    let err = k
        .fails_with(
            &["apply", "-f", "-"],
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Topology\nmetadata: {name: dup}\nspec:\n  levels: [{nodeLabel: rack}, {nodeLabel: rack}]\n",
        )
        .await;
    assert!(
        err.contains(r#"Topology "dup" is invalid: spec.levels[1]: "rack": must be unique"#),
        "{err}"
    );

    // Volcano: leaf and non-leaf HyperNodes.
    let out = k.ok_with(&["apply", "-f", "-"], VOLCANO_HYPERNODES).await;
    for name in ["s0", "s1", "s6"] {
        assert!(
            out.contains(&format!("hypernode.topology.volcano.sh/{name} created")),
            "{out}"
        );
    }
    let names = k
        .ok(&["get", "hn", "-o", "jsonpath={.items[*].metadata.name}"])
        .await;
    assert_eq!(names, "s0 s1 s6");
    let s0 = k
        .ok(&[
            "get",
            "hypernode",
            "s0",
            "-o",
            "jsonpath={.spec.tier} {.spec.members[1].selector.regexMatch.pattern}",
        ])
        .await;
    assert_eq!(s0, "1 node-[01]");
    let s1 = k
        .ok(&[
            "get",
            "hypernodes.topology.volcano.sh",
            "s1",
            "-o",
            "jsonpath={.spec.tierName} {.spec.members[0].selector.labelMatch.matchLabels.topology-rack}",
        ])
        .await;
    assert_eq!(s1, "rack rack-1");
    // The status subresource: the controller's node count, apart from spec.
    k.ok(&[
        "patch",
        "hypernode",
        "s6",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"nodeCount":3}}"#,
    ])
    .await;
    let s6 = k
        .ok(&[
            "get",
            "hn",
            "s6",
            "-o",
            "jsonpath={.spec.tier} {.status.nodeCount}",
        ])
        .await;
    assert_eq!(s6, "3 3");
    let out = k.ok(&["delete", "hn", "s6"]).await;
    assert!(out.contains("deleted"), "{out}");
    // Refused as Volcano's webhook refuses it.
    let err = k
        .fails_with(
            &["apply", "-f", "-"],
            "apiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\nmetadata: {name: both}\nspec:\n  tier: 1\n  members:\n  - type: Node\n    selector: {exactMatch: {name: a}, regexMatch: {pattern: b}}\n",
        )
        .await;
    assert!(
        err.contains("Only one of ExactMatch, RegexMatch, or LabelMatch can be specified"),
        "{err}"
    );
    cluster.shutdown().await.unwrap();
}

async fn create(env: &e2e::Env, ar: &ApiResource, ns: Option<&str>, obj: Value) {
    let obj: DynamicObject = serde_json::from_value(obj).expect("object json");
    let api: Api<DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(env.client.clone(), ns, ar),
        None => Api::all_with(env.client.clone(), ar),
    };
    api.create(&PostParams::default(), &obj)
        .await
        .expect("create object");
}

async fn wait_failed_scheduling(env: &e2e::Env, pod: &str, needle: &str) {
    e2e::wait_event(env, "default", |e| {
        e.involved_object.name.as_deref() == Some(pod)
            && e.reason.as_deref() == Some("FailedScheduling")
            && e.message.as_deref().is_some_and(|m| m.contains(needle))
    })
    .await;
}

/// The daemon watches the topology kinds (it is ready only once their
/// informers listed, an invalid object among them), and a group's invalid
/// topology constraint refuses its members with the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_topology_constraints_refuse_their_members() {
    // Validation off: a cluster without Kueue's CRD rules or Volcano's
    // webhook stores invalid objects; the scheduler must ignore them.
    let config = common::fast()
        .validate(false)
        .with_templates(vec![e2e::nodes(2, "4")]);
    let cluster = SimCluster::start(config).await.unwrap();
    let client = cluster.client().unwrap();
    let env = e2e::Env { cluster, client };
    let topology = common::resource("kueue.x-k8s.io", "v1beta2", "Topology", "topologies");
    let hypernode = common::resource("topology.volcano.sh", "v1alpha1", "HyperNode", "hypernodes");
    create(
        &env,
        &topology,
        None,
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology", "metadata": {"name": "default"},
        "spec": {"levels": [{"nodeLabel": "rack"}, {"nodeLabel": "kubernetes.io/hostname"}]}}),
    )
    .await;
    create(
        &env,
        &topology,
        None,
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology", "metadata": {"name": "bad"},
        "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "rack"}]}}),
    )
    .await;
    create(&env, &hypernode, None, json!({"apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode", "metadata": {"name": "s0"},
        "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "node-("}}}]}}))
    .await;
    let d = e2e::daemon(&env, e2e::test_config("")).await;
    e2e::wait_ready(&d).await;

    // Volcano: hard mode without a tier bound.
    let volcano = common::resource("scheduling.volcano.sh", "v1beta1", "PodGroup", "podgroups");
    create(
        &env,
        &volcano,
        Some("default"),
        json!({"apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup", "metadata": {"name": "vc", "namespace": "default"},
        "spec": {"minMember": 2, "networkTopology": {"mode": "hard"}}}),
    )
    .await;
    // PodGroup: two topology entries, where the API server admits one.
    create(
        &env,
        &e2e::podgroup_resource(),
        Some("default"),
        json!({
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "default"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}},
                 "schedulingConstraints": {"topology": [{"key": "rack"}, {"key": "block"}]}}}),
    )
    .await;
    let mut pods = Vec::new();
    for i in 0..2 {
        pods.push(e2e::pod(&format!("pg-{i}"), "1", "muster", Some("pg")));
        let mut p = e2e::pod(&format!("vc-{i}"), "1", "muster", None);
        p.metadata.annotations =
            Some([("scheduling.k8s.io/group-name".to_string(), "vc".to_string())].into());
        pods.push(p);
    }
    e2e::create_pods(&env, "default", pods).await;
    wait_failed_scheduling(
        &env,
        "vc-0",
        "PodGroup.scheduling.volcano.sh default/vc: spec.networkTopology: mode hard needs highestTierAllowed or highestTierName",
    )
    .await;
    wait_failed_scheduling(
        &env,
        "pg-0",
        "PodGroup default/pg: spec.schedulingConstraints.topology: Too many: 2: must have at most 1 item",
    )
    .await;
    let listed = e2e::list_pods(&env, "default").await;
    assert!(listed.values().all(|p| !e2e::bound(p)), "nothing placed");
    d.shutdown().await.expect("clean shutdown");
}
