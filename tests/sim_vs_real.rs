//! The simulated cluster measured against kube-apiserver: one corpus of HTTP
//! requests (what Muster's end-to-end suite sends) is sent in order to a
//! fresh real control plane (tests/real_cluster) and to a fresh simulated
//! cluster, and the answers are compared request by request:
//!
//! - the status code;
//! - for errors, the `Status` object's `reason`, `details.{name,group,kind}`
//!   and `details.causes[].{reason,field}` (the human-readable `message`
//!   texts are not compared: they are worded differently and say nothing a
//!   client acts on);
//! - for successes, the body with what a server sets on its own removed
//!   (uid, resourceVersion, creationTimestamp, managedFields, generation,
//!   selfLink, a generated name's suffix, continue tokens, and every
//!   timestamp);
//! - for a watch from a known resourceVersion, the event types and object
//!   names in order;
//! - for discovery, the served group versions and each group's preferred one.
//!
//! Every difference found is listed, with its reason (from [`REASONS`]), in
//! docs/simulated-cluster.md under "Differences from kube-apiserver"; the
//! test fails with the new text when the section disagrees with the run.
//! `MUSTER_WRITE_DIFFERENCES=1` rewrites the section instead.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kube::client::Body;
use kube::config::{KubeConfigOptions, Kubeconfig};
use muster::apiserver::{SimCluster, SimConfig};
use serde_json::{Map, Value, json};

use crate::real_cluster::RealCluster;

/// The doc the differences are listed in, and its section's heading.
const DOC: &str = "docs/simulated-cluster.md";
const HEADING: &str = "## Differences from kube-apiserver";

/// Why each listed difference is not fixed, by request name. A request that
/// differs without a reason here, or a reason whose request no longer
/// differs, fails the test.
const REASONS: &[(&str, &str)] = &[
    (
        "discovery-groups",
        "out of scope: the simulator serves the groups Muster and its tests use, plus the gang dialects' CRD groups built in (install their CRDs with `--without-group` instead), and the older `scheduling.k8s.io` and `resource.k8s.io` versions for older clients; the real cluster serves the default set plus `v1beta1` and `v1alpha3` of `scheduling.k8s.io`",
    ),
    (
        "namespace-create",
        "cosmetic: the `kubernetes.io/metadata.name` label and the `kubernetes` finalizer are not added; nothing in Muster selects namespaces by label",
    ),
    (
        "namespace-delete",
        "out of scope: no namespace controller, so deleting a namespace deletes its contents at once instead of passing through `Terminating`",
    ),
    (
        "pod-create-on-node",
        "a pod created with `spec.nodeName` gets `PodScheduled=True` at once, as a kubelet-less cluster's scheduler would never write it; Muster's placement checks read `spec.nodeName`, and the condition keeps `kubectl` output as after a binding",
    ),
    (
        "pod-list-node-name",
        "a pod created with `spec.nodeName` gets `PodScheduled=True` at once, as a kubelet-less cluster's scheduler would never write it; Muster's placement checks read `spec.nodeName`, and the condition keeps `kubectl` output as after a binding",
    ),
    (
        "pod-list-scheduler-name",
        "a pod created with `spec.nodeName` gets `PodScheduled=True` at once, as a kubelet-less cluster's scheduler would never write it; Muster's placement checks read `spec.nodeName`, and the condition keeps `kubectl` output as after a binding",
    ),
    (
        "pod-list-page-2",
        "a pod created with `spec.nodeName` gets `PodScheduled=True` at once, as a kubelet-less cluster's scheduler would never write it; Muster's placement checks read `spec.nodeName`, and the condition keeps `kubectl` output as after a binding",
    ),
    (
        "pod-create-with-resource-version",
        "kube-apiserver 1.37 answers this with a bare 500; the simulator's precise 400 is kept",
    ),
    (
        "pod-list-unsupported-field",
        "deliberate: the simulator accepts a field selector on any path (documented under List options)",
    ),
    (
        "pod-binding-missing-node",
        "deliberate: binding to a node that does not exist is refused with 404, so scheduler bugs surface (documented under Binding)",
    ),
    (
        "pod-status-condition",
        "cosmetic: a condition written without `lastTransitionTime` gets one stamped; kube-apiserver stores it as sent",
    ),
    (
        "pod-patch-immutable-spec",
        "out of scope: pod spec immutability is not validated (beyond what the simulator lists); Muster never updates a pod's spec",
    ),
    (
        "configmap-json-patch-failed-test",
        "cosmetic: the 422 of a failed JSON patch `test` names the object in `details`",
    ),
    (
        "configmap-apply-again",
        "out of scope: server-side apply is approximated as a strategic merge without field managers, so fields absent from the applied config are not removed (documented under Patches)",
    ),
    (
        "configmap-delete-uid-mismatch",
        "cosmetic: a failed precondition's `details.kind` is the resource's plural, not its kind",
    ),
    (
        "configmap-delete",
        "cosmetic: a delete answers with the deleted object for every kind; kube-apiserver answers a `Status` for kinds without graceful deletion. kube-rs's `delete` accepts both",
    ),
    (
        "event-create",
        "cosmetic: the deprecated fields of an events.k8s.io Event are left out when empty instead of written as null/empty",
    ),
    (
        "event-create-no-event-time",
        "out of scope: Event fields are not validated; only Muster's and kube-rs's recorders write events, and they set `eventTime`",
    ),
    (
        "event-list-core",
        "cosmetic: the core Event view of an events.k8s.io Event leaves out empty `firstTimestamp`, `lastTimestamp` and `source`",
    ),
    (
        "priorityclass-create",
        "cosmetic: a PriorityClass's `preemptionPolicy` default is not stored; the pod defaulting that reads it applies the same default",
    ),
    (
        "priorityclass-create-too-high",
        "out of scope: PriorityClass values are not validated against the range reserved for system classes",
    ),
    (
        "priorityclass-get-system",
        "the built-in `system-node-critical` and `system-cluster-critical` classes are not stored as objects; pods naming them still get their priority",
    ),
    (
        "pod-create-unknown-priority-class",
        "cosmetic: the 403 for an unknown PriorityClass carries no `details`",
    ),
    (
        "pdb-create",
        "cosmetic: a new PodDisruptionBudget has no `status` until the simulated disruption controller writes it, a moment later",
    ),
    (
        "podgroup-create-min-count-0",
        "not yet validated: PodGroup fields are stored as sent; Muster's parser refuses a gang with `minCount` below 1, so such a group never schedules",
    ),
    (
        "workload-create",
        "cosmetic: a null `schedulingConstraints` is not written into pod group templates",
    ),
    (
        "workload-create-min-count-negative",
        "not yet validated: Workload fields are stored as sent; Muster's parser refuses the template",
    ),
    (
        "workload-patch-templates",
        "cosmetic: a null `schedulingConstraints` is not written into pod group templates",
    ),
    (
        "resourceclaim-create",
        "cosmetic: an empty `status` is not added at creation",
    ),
    (
        "resourceclaim-create-count-0",
        "the simulator refuses `count: 0` where kube-apiserver defaults it to 1 (0 is the field's omitted zero value); to be aligned together with tests/sim_dra.rs, which expects the refusal",
    ),
    (
        "resourceclaimtemplate-create",
        "cosmetic: an empty `spec.metadata` is not added to a template",
    ),
    (
        "resourceclaimtemplate-create-count-0",
        "the simulator refuses `count: 0` where kube-apiserver defaults it to 1; see `resourceclaim-create-count-0`",
    ),
];

/// Fields that differ in every answer carrying an object of a kind, by
/// `Kind:/pointer` (array indices as `*`; the same field of a list's items
/// matches too), each with why it is not fixed. They are listed once, with
/// the requests they show in, rather than under every request.
const PERVASIVE: &[(&str, &str)] = &[
    (
        "Pod:/spec/containers/*/imagePullPolicy",
        "container defaults are not applied; Muster reads none of them",
    ),
    (
        "Pod:/spec/containers/*/terminationMessagePath",
        "container defaults are not applied; Muster reads none of them",
    ),
    (
        "Pod:/spec/containers/*/terminationMessagePolicy",
        "container defaults are not applied; Muster reads none of them",
    ),
    (
        "Pod:/spec/containers/*/resources",
        "an empty `resources` is not added to a container that has none; it means the same",
    ),
    (
        "Pod:/spec/containers/*/volumeMounts",
        "no ServiceAccount admission (no token volume); out of scope, nothing runs in a pod",
    ),
    (
        "Pod:/spec/volumes",
        "no ServiceAccount admission (no token volume); out of scope, nothing runs in a pod",
    ),
    (
        "Pod:/spec/serviceAccount",
        "no ServiceAccount admission; out of scope, the simulator has no authentication of pods",
    ),
    (
        "Pod:/spec/serviceAccountName",
        "no ServiceAccount admission; out of scope, the simulator has no authentication of pods",
    ),
    (
        "Pod:/spec/enableServiceLinks",
        "pod spec default not applied; no Services are injected into simulated containers",
    ),
    (
        "Pod:/spec/securityContext",
        "an empty `securityContext` is not added; it means the same",
    ),
    (
        "Pod:/spec/tolerations",
        "no DefaultTolerationSeconds admission: the simulator never taints nodes not-ready or \
         unreachable, so the tolerations would change nothing",
    ),
    (
        "Pod:/items/*/apiVersion",
        "list items carry apiVersion and kind (a real server leaves them out for built-in \
         kinds); clients accept both, and kube-rs's dynamic lists rely on it",
    ),
    (
        "Pod:/items/*/kind",
        "list items carry apiVersion and kind; clients accept both",
    ),
    (
        "Node:/items/*/apiVersion",
        "list items carry apiVersion and kind; clients accept both",
    ),
    (
        "Node:/items/*/kind",
        "list items carry apiVersion and kind; clients accept both",
    ),
    (
        "ResourceSlice:/items/*/apiVersion",
        "list items carry apiVersion and kind; clients accept both",
    ),
    (
        "ResourceSlice:/items/*/kind",
        "list items carry apiVersion and kind; clients accept both",
    ),
    (
        "Event:/items/*/apiVersion",
        "list items carry apiVersion and kind; clients accept both",
    ),
    (
        "Event:/items/*/kind",
        "list items carry apiVersion and kind; clients accept both",
    ),
    (
        "Node:/spec",
        "an empty `spec` is not added to a node created without one; it means the same",
    ),
    (
        "Node:/status/addresses",
        "the simulator's kwok-style kubelet reports every node at once (the real cluster's \
         kwok manages only annotated nodes, which this corpus's node is not)",
    ),
    (
        "Node:/status/conditions",
        "the simulator's kwok-style kubelet reports every node at once",
    ),
    (
        "Node:/status/daemonEndpoints/kubeletEndpoint/Port",
        "the simulator's kwok-style kubelet reports every node at once",
    ),
    (
        "Node:/status/nodeInfo/architecture",
        "the simulator's kwok-style kubelet reports every node at once",
    ),
    (
        "Node:/status/nodeInfo/containerRuntimeVersion",
        "the simulator's kwok-style kubelet reports every node at once",
    ),
    (
        "Node:/status/nodeInfo/kubeletVersion",
        "the simulator's kwok-style kubelet reports every node at once",
    ),
    (
        "Node:/status/nodeInfo/operatingSystem",
        "the simulator's kwok-style kubelet reports every node at once",
    ),
    (
        "Node:/status/phase",
        "the simulator's kwok-style kubelet reports every node at once",
    ),
    (
        "PodGroup:/metadata/finalizers",
        "no podgroup-protection finalizer: the simulator runs no protection controller to \
         remove it, and deleting a PodGroup goes at once",
    ),
    (
        "PodGroup:/spec/disruptionMode",
        "PodGroup defaults are not stored; Muster reads an absent field as its default",
    ),
    (
        "PodGroup:/spec/preemptionPolicy",
        "PodGroup defaults are not stored; Muster reads an absent field as its default",
    ),
    (
        "PodGroup:/spec/priority",
        "PodGroup defaults are not stored; Muster reads an absent field as its default",
    ),
    (
        "PodGroup:/status",
        "an empty `status` is not added at creation; it means the same",
    ),
];

/// How an answer is compared.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Shape {
    /// A resource request: code, and the error's Status or the normalised body.
    Object,
    /// A watch: the event types and object names (bookmarks left out).
    Watch,
    /// `/api` or `/apis`: the served group versions.
    Discovery,
}

/// One request of the corpus.
#[derive(Clone, Debug)]
struct Req {
    name: &'static str,
    method: &'static str,
    path: String,
    content_type: &'static str,
    body: Option<Value>,
    shape: Shape,
    /// Keeps the answer's `metadata.{resourceVersion,uid,continue}` under
    /// this key, for `{rv:KEY}`, `{uid:KEY}` and `{continue:KEY}` in later
    /// paths and bodies (each server's own).
    save: Option<&'static str>,
    /// Repeats the request (up to [`SETTLE`]) until the answer has a value
    /// at this JSON pointer: for what a controller writes a moment later.
    wait_for: Option<&'static str>,
}

/// How long a request with `wait_for` is repeated.
const SETTLE: Duration = Duration::from_secs(15);

const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

fn req(
    name: &'static str,
    method: &'static str,
    path: impl Into<String>,
    body: Option<Value>,
) -> Req {
    Req {
        name,
        method,
        path: path.into(),
        content_type: JSON,
        body,
        shape: Shape::Object,
        save: None,
        wait_for: None,
    }
}

fn get(name: &'static str, path: impl Into<String>) -> Req {
    req(name, "GET", path, None)
}

fn post(name: &'static str, path: impl Into<String>, body: Value) -> Req {
    req(name, "POST", path, Some(body))
}

fn put(name: &'static str, path: impl Into<String>, body: Value) -> Req {
    req(name, "PUT", path, Some(body))
}

fn patch(
    name: &'static str,
    path: impl Into<String>,
    content_type: &'static str,
    body: Value,
) -> Req {
    Req {
        content_type,
        ..req(name, "PATCH", path, Some(body))
    }
}

fn delete(name: &'static str, path: impl Into<String>, body: Option<Value>) -> Req {
    req(name, "DELETE", path, body)
}

impl Req {
    fn save(mut self, key: &'static str) -> Req {
        self.save = Some(key);
        self
    }
    fn wait_for(mut self, pointer: &'static str) -> Req {
        self.wait_for = Some(pointer);
        self
    }
    fn shape(mut self, shape: Shape) -> Req {
        self.shape = shape;
        self
    }
}

const NS: &str = "/api/v1/namespaces/default";
const NODE: &str = "diff-node";

fn pod_body(name: &str, node: Option<&str>) -> Value {
    let mut p = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "diff", "name": name}},
        "spec": {"schedulerName": "muster",
                 "containers": [{"name": "main", "image": "busybox:1.36",
                                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}
    });
    if let Some(n) = node {
        p["spec"]["nodeName"] = json!(n);
    }
    p
}

fn configmap(name: &str, rv: Option<&str>, value: &str) -> Value {
    let mut c = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"diff": "cm"}}, "data": {"k": value}});
    if let Some(rv) = rv {
        c["metadata"]["resourceVersion"] = json!(rv);
    }
    c
}

fn podgroup(version: &str, name: &str, min_count: i64) -> Value {
    json!({"apiVersion": format!("scheduling.k8s.io/{version}"), "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}})
}

fn workload(name: &str, min_count: i64) -> Value {
    json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
        "metadata": {"name": name},
        "spec": {"podGroupTemplates": [
            {"name": "workers", "schedulingPolicy": {"gang": {"minCount": min_count}}}]}})
}

fn claim_spec(requests: Value) -> Value {
    json!({"devices": {"requests": requests}})
}

fn exactly(name: &str, count: i64) -> Value {
    json!({"name": name, "exactly": {"deviceClassName": "gpu.diff.dev",
        "allocationMode": "ExactCount", "count": count}})
}

fn claim(name: &str, requests: Value) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name}, "spec": claim_spec(requests)})
}

fn claim_template(name: &str, requests: Value) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name}, "spec": {"spec": claim_spec(requests)}})
}

/// The corpus, in the order it is sent.
fn corpus() -> Vec<Req> {
    let pg = "/apis/scheduling.k8s.io/v1beta1/namespaces/default/podgroups";
    let wl = "/apis/scheduling.k8s.io/v1beta1/namespaces/default/workloads";
    let rs = "/apis/resource.k8s.io/v1";
    let many: Vec<Value> = (0..33).map(|i| exactly(&format!("r{i}"), 1)).collect();
    vec![
        // Discovery.
        get("discovery-core", "/api").shape(Shape::Discovery),
        get("discovery-groups", "/apis").shape(Shape::Discovery),
        // Nodes.
        post(
            "node-create",
            "/api/v1/nodes",
            json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}},
                "status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                           "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}}),
        ),
        post(
            "node-create-invalid-name",
            "/api/v1/nodes",
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "Bad_Node"}}),
        ),
        get("node-list-by-label", "/api/v1/nodes?labelSelector=kubernetes.io%2Fhostname%3Ddiff-node"),
        patch(
            "node-status-merge",
            "/api/v1/nodes/diff-node/status",
            MERGE,
            json!({"status": {"capacity": {"cpu": "16"}}}),
        ),
        get("node-get-missing", "/api/v1/nodes/no-such-node"),
        // Namespaces.
        post(
            "namespace-create",
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "diff-ns"}}),
        ),
        post(
            "namespace-create-duplicate",
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "diff-ns"}}),
        ),
        delete("namespace-delete", "/api/v1/namespaces/diff-ns", None),
        post(
            "configmap-create-missing-namespace",
            "/api/v1/namespaces/no-such-ns/configmaps",
            configmap("x", None, "1"),
        ),
        // Pods: create, list with selectors and pages.
        post("pod-create", format!("{NS}/pods"), pod_body("p1", None)),
        post("pod-create-2", format!("{NS}/pods"), pod_body("p2", None)),
        post("pod-create-on-node", format!("{NS}/pods"), pod_body("p3", Some(NODE))),
        post(
            "pod-create-generate-name",
            format!("{NS}/pods"),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "gen-"},
                "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}}),
        ),
        post("pod-create-duplicate", format!("{NS}/pods"), pod_body("p1", None)),
        post(
            "pod-create-no-containers",
            format!("{NS}/pods"),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "empty"},
                "spec": {"containers": []}}),
        ),
        post(
            "pod-create-with-resource-version",
            format!("{NS}/pods"),
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "rv", "resourceVersion": "5"},
                "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}}),
        ),
        get("pod-get", format!("{NS}/pods/p1")),
        get("pod-get-missing", format!("{NS}/pods/nope")),
        get("pod-list-label", format!("{NS}/pods?labelSelector=name%20in%20(p1,p2)")),
        get("pod-list-bad-label", format!("{NS}/pods?labelSelector=a%20b%20c")),
        get("pod-list-node-name", format!("{NS}/pods?fieldSelector=spec.nodeName%3Ddiff-node")),
        get("pod-list-unbound", format!("{NS}/pods?fieldSelector=spec.nodeName%3D&labelSelector=app%3Ddiff")),
        get(
            "pod-list-scheduler-name",
            format!("{NS}/pods?fieldSelector=spec.schedulerName%3Dmuster"),
        ),
        get(
            "pod-list-unsupported-field",
            format!("{NS}/pods?fieldSelector=spec.priority%3D0"),
        ),
        get("pod-list-page-1", format!("{NS}/pods?labelSelector=app%3Ddiff&limit=2"))
            .save("page"),
        get(
            "pod-list-page-2",
            format!("{NS}/pods?labelSelector=app%3Ddiff&limit=2&continue={{continue:page}}"),
        ),
        get("pod-list-bad-continue", format!("{NS}/pods?limit=2&continue=garbage")),
        // Binding and status.
        post(
            "pod-binding",
            format!("{NS}/pods/p1/binding"),
            json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p1"},
                "target": {"apiVersion": "v1", "kind": "Node", "name": NODE}}),
        ),
        post(
            "pod-binding-already-bound",
            format!("{NS}/pods/p1/binding"),
            json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p1"},
                "target": {"apiVersion": "v1", "kind": "Node", "name": NODE}}),
        ),
        post("pod-create-4", format!("{NS}/pods"), pod_body("p4", None)),
        post(
            "pod-binding-missing-node",
            format!("{NS}/pods/p4/binding"),
            json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p4"},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "no-such-node"}}),
        ),
        post(
            "bindings-missing-pod",
            format!("{NS}/bindings"),
            json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "nope"},
                "target": {"apiVersion": "v1", "kind": "Node", "name": NODE}}),
        ),
        patch(
            "pod-status-condition",
            format!("{NS}/pods/p3/status"),
            STRATEGIC,
            json!({"status": {"conditions": [{"type": "PodScheduled", "status": "False",
                "reason": "Unschedulable", "message": "0/1 nodes are available"}]}}),
        ),
        // Updates and patches.
        get("pod-get-for-update", format!("{NS}/pods/p2")).save("p2"),
        patch(
            "pod-patch-strategic-labels",
            format!("{NS}/pods/p2"),
            STRATEGIC,
            json!({"metadata": {"labels": {"extra": "yes"}}}),
        ),
        patch(
            "pod-patch-stale-resource-version",
            format!("{NS}/pods/p2"),
            MERGE,
            json!({"metadata": {"resourceVersion": "{rv:p2}", "labels": {"stale": "yes"}}}),
        ),
        patch(
            "pod-patch-immutable-spec",
            format!("{NS}/pods/p2"),
            MERGE,
            json!({"spec": {"schedulerName": "other"}}),
        ),
        post("configmap-create", format!("{NS}/configmaps"), configmap("cm1", None, "1"))
            .save("cm1"),
        put(
            "configmap-update",
            format!("{NS}/configmaps/cm1"),
            configmap("cm1", Some("{rv:cm1}"), "2"),
        ),
        put(
            "configmap-update-stale",
            format!("{NS}/configmaps/cm1"),
            configmap("cm1", Some("{rv:cm1}"), "3"),
        ),
        patch(
            "configmap-json-patch",
            format!("{NS}/configmaps/cm1"),
            JSON_PATCH,
            json!([{"op": "add", "path": "/data/j", "value": "x"},
                   {"op": "replace", "path": "/data/k", "value": "4"}]),
        ),
        patch(
            "configmap-json-patch-failed-test",
            format!("{NS}/configmaps/cm1"),
            JSON_PATCH,
            json!([{"op": "test", "path": "/data/k", "value": "nope"}]),
        ),
        patch(
            "configmap-apply",
            format!("{NS}/configmaps/cm2?fieldManager=diff"),
            APPLY,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "cm2", "labels": {"diff": "cm"}}, "data": {"a": "1"}}),
        ),
        patch(
            "configmap-apply-again",
            format!("{NS}/configmaps/cm2?fieldManager=diff"),
            APPLY,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "cm2", "labels": {"diff": "cm"}}, "data": {"b": "2"}}),
        ),
        patch(
            "configmap-merge-missing",
            format!("{NS}/configmaps/nope"),
            MERGE,
            json!({"data": {"a": "1"}}),
        ),
        patch(
            "configmap-patch-bad-content-type",
            format!("{NS}/configmaps/cm1"),
            JSON,
            json!({"data": {"a": "1"}}),
        ),
        delete(
            "configmap-delete-uid-mismatch",
            format!("{NS}/configmaps/cm1"),
            Some(json!({"apiVersion": "v1", "kind": "DeleteOptions",
                "preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}})),
        ),
        delete("configmap-delete", format!("{NS}/configmaps/cm1"), None),
        delete("configmap-delete-missing", format!("{NS}/configmaps/cm1"), None),
        // A watch from the first configmap's creation sees what followed.
        get(
            "configmap-watch-from-version",
            format!(
                "{NS}/configmaps?watch=true&labelSelector=diff%3Dcm&resourceVersion={{rv:cm1}}&timeoutSeconds=1"
            )
            .leak(),
        )
        .shape(Shape::Watch),
        // Eviction.
        post(
            "pod-eviction-unbound",
            format!("{NS}/pods/p2/eviction"),
            json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p2"}}),
        ),
        post(
            "pod-eviction-missing",
            format!("{NS}/pods/nope/eviction"),
            json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "nope"}}),
        ),
        delete("pod-delete-bound", format!("{NS}/pods/p1"), None),
        // Leases.
        post(
            "lease-create",
            "/apis/coordination.k8s.io/v1/namespaces/default/leases",
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": "muster"},
                "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15,
                         "acquireTime": "2026-01-01T00:00:00.000000Z",
                         "renewTime": "2026-01-01T00:00:00.000000Z", "leaseTransitions": 0}}),
        )
        .save("lease"),
        put(
            "lease-update-stale",
            "/apis/coordination.k8s.io/v1/namespaces/default/leases/muster",
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": "muster", "resourceVersion": "1"},
                "spec": {"holderIdentity": "b", "leaseDurationSeconds": 15}}),
        ),
        put(
            "lease-update",
            "/apis/coordination.k8s.io/v1/namespaces/default/leases/muster",
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": "muster", "resourceVersion": "{rv:lease}"},
                "spec": {"holderIdentity": "b", "leaseDurationSeconds": 15, "leaseTransitions": 1}}),
        ),
        // Events (events.k8s.io/v1).
        post(
            "event-create",
            "/apis/events.k8s.io/v1/namespaces/default/events",
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": "p1.diff", "labels": {"diff": "ev"}},
                "eventTime": "2026-01-01T00:00:00.000000Z",
                "reportingController": "muster.dev/scheduler", "reportingInstance": "muster-0",
                "action": "Scheduling", "reason": "FailedScheduling", "type": "Warning",
                "note": "0/1 nodes are available",
                "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "p1"}}),
        ),
        post(
            "event-create-no-event-time",
            "/apis/events.k8s.io/v1/namespaces/default/events",
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": "p1.bad"},
                "reportingController": "muster.dev/scheduler", "reportingInstance": "muster-0",
                "action": "Scheduling", "reason": "FailedScheduling", "type": "Warning",
                "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "p1"}}),
        ),
        get(
            "event-list-core",
            "/api/v1/namespaces/default/events?labelSelector=diff%3Dev",
        ),
        // PriorityClasses.
        post(
            "priorityclass-create",
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": "diff-high"}, "value": 1000}),
        ),
        post(
            "priorityclass-create-too-high",
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": "diff-huge"}, "value": 2000000000}),
        ),
        get(
            "priorityclass-get-system",
            "/apis/scheduling.k8s.io/v1/priorityclasses/system-node-critical",
        ),
        post(
            "pod-create-unknown-priority-class",
            format!("{NS}/pods"),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "prio"},
                "spec": {"priorityClassName": "no-such-class",
                         "containers": [{"name": "main", "image": "busybox:1.36"}]}}),
        ),
        // PodDisruptionBudgets.
        post(
            "pdb-create",
            "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": "diff-pdb"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "none"}}}}),
        ),
        get(
            "pdb-status-computed",
            "/apis/policy/v1/namespaces/default/poddisruptionbudgets/diff-pdb",
        )
        .wait_for("/status/observedGeneration"),
        // The Workload API: PodGroups and Workloads.
        post("podgroup-create", pg, podgroup("v1beta1", "pg1", 2)),
        post("podgroup-create-min-count-0", pg, podgroup("v1beta1", "pg0", 0)),
        post(
            "podgroup-create-v1alpha3",
            "/apis/scheduling.k8s.io/v1alpha3/namespaces/default/podgroups",
            podgroup("v1alpha3", "pg3", 1),
        ),
        get(
            "podgroup-get-other-version",
            "/apis/scheduling.k8s.io/v1alpha3/namespaces/default/podgroups/pg1",
        ),
        patch(
            "podgroup-patch-min-count",
            "/apis/scheduling.k8s.io/v1beta1/namespaces/default/podgroups/pg1",
            MERGE,
            json!({"spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}}),
        ),
        patch(
            "podgroup-status",
            "/apis/scheduling.k8s.io/v1beta1/namespaces/default/podgroups/pg1/status",
            MERGE,
            json!({"status": {"conditions": [{"type": "PodGroupScheduled", "status": "False",
                "reason": "Unschedulable", "message": "waiting",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}),
        ),
        post("workload-create", wl, workload("wl1", 2)),
        post("workload-create-min-count-negative", wl, workload("wl2", -1)),
        patch(
            "workload-patch-templates",
            "/apis/scheduling.k8s.io/v1beta1/namespaces/default/workloads/wl1",
            MERGE,
            json!({"spec": {"podGroupTemplates": [
                {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 4}}}]}}),
        ),
        post(
            "pod-create-in-podgroup",
            format!("{NS}/pods"),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "member"},
                "spec": {"schedulerName": "muster", "schedulingGroup": {"podGroupName": "pg1"},
                         "containers": [{"name": "main", "image": "busybox:1.36"}]}}),
        ),
        // Dynamic Resource Allocation.
        post(
            "deviceclass-create",
            format!("{rs}/deviceclasses"),
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                "metadata": {"name": "gpu.diff.dev"},
                "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.diff.dev\""}}]}}),
        ),
        post(
            "deviceclass-create-bad-cel",
            format!("{rs}/deviceclasses"),
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                "metadata": {"name": "bad-cel.diff.dev"},
                "spec": {"selectors": [{"cel": {"expression": "device.driver =="}}]}}),
        ),
        post(
            "resourceslice-create",
            format!("{rs}/resourceslices"),
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": "diff-node-gpu"},
                "spec": {"driver": "gpu.diff.dev", "nodeName": NODE,
                         "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1},
                         "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}}),
        ),
        post(
            "resourceslice-create-bad-device-name",
            format!("{rs}/resourceslices"),
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": "diff-bad"},
                "spec": {"driver": "gpu.diff.dev", "nodeName": NODE,
                         "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1},
                         "devices": [{"name": "GPU_0"}]}}),
        ),
        get(
            "resourceslice-list-node",
            format!("{rs}/resourceslices?fieldSelector=spec.nodeName%3Ddiff-node"),
        ),
        post(
            "resourceclaim-create",
            "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims",
            claim("c1", json!([exactly("gpu", 1)])),
        ),
        post(
            "resourceclaim-create-count-0",
            "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims",
            claim("c0", json!([exactly("gpu", 0)])),
        ),
        post(
            "resourceclaim-create-too-many-requests",
            "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims",
            claim("cmany", Value::Array(many)),
        ),
        post(
            "resourceclaim-create-bad-request-name",
            "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims",
            claim("cbad", json!([exactly("Bad_Name", 1)])),
        ),
        post(
            "resourceclaim-create-bad-cel",
            "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims",
            claim(
                "ccel",
                json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu.diff.dev",
                    "selectors": [{"cel": {"expression": "device.attributes["}}]}}]),
            ),
        ),
        patch(
            "resourceclaim-patch-spec-immutable",
            "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/c1",
            MERGE,
            json!({"spec": {"devices": {"requests": [exactly("gpu", 2)]}}}),
        ),
        post(
            "resourceclaimtemplate-create",
            "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates",
            claim_template("t1", json!([exactly("gpu", 1)])),
        ),
        post(
            "resourceclaimtemplate-create-count-0",
            "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates",
            claim_template("t0", json!([exactly("gpu", 0)])),
        ),
        post(
            "resourceclaimtemplate-create-invalid-name",
            "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates",
            claim_template("Bad_Template", json!([exactly("gpu", 1)])),
        ),
    ]
}

/// Each server's saved `metadata` values, by `{field:key}` placeholder.
type Saved = BTreeMap<String, String>;

fn fill(text: &str, saved: &Saved) -> String {
    let mut out = text.to_string();
    for (k, v) in saved {
        out = out.replace(k, v);
    }
    out
}

/// Sends one request and returns the status code and the body (JSON, or
/// the watch stream's lines as an array of events).
async fn send(client: &kube::Client, r: &Req, saved: &Saved) -> (u16, Value) {
    let path = fill(&r.path, saved);
    let body = r
        .body
        .as_ref()
        .map(|b| fill(&b.to_string(), saved).into_bytes())
        .unwrap_or_default();
    let mut builder = http::Request::builder().method(r.method).uri(&path);
    if r.body.is_some() {
        builder = builder.header(http::header::CONTENT_TYPE, r.content_type);
    }
    let request = builder.body(Body::from(body)).expect("request");
    let response = client
        .send(request)
        .await
        .unwrap_or_else(|e| panic!("{} {path}: {e}", r.method));
    let code = response.status().as_u16();
    let bytes = response
        .into_body()
        .collect_bytes()
        .await
        .unwrap_or_else(|e| panic!("{} {path}: reading the body: {e}", r.method));
    let value = if r.shape == Shape::Watch && code == 200 {
        Value::Array(
            bytes
                .split(|b| *b == b'\n')
                .filter(|l| !l.is_empty())
                .map(|l| serde_json::from_slice(l).unwrap_or(Value::Null))
                .collect(),
        )
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    };
    (code, value)
}

/// Runs the corpus against one server; returns each request's normalised answer.
async fn run(client: &kube::Client, corpus: &[Req]) -> Vec<Value> {
    let mut saved = Saved::new();
    let mut out = Vec::new();
    for r in corpus {
        let began = Instant::now();
        let (code, body) = loop {
            let (code, body) = send(client, r, &saved).await;
            let settled = r
                .wait_for
                .is_none_or(|p| body.pointer(p).is_some_and(|v| !v.is_null()));
            if settled || began.elapsed() > SETTLE {
                break (code, body);
            }
            // A controller writes this a moment later; it has no event to
            // wait on through one request, so poll.
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        if let Some(key) = r.save {
            for (field, short) in [
                ("resourceVersion", "rv"),
                ("uid", "uid"),
                ("continue", "continue"),
            ] {
                if let Some(v) = body["metadata"][field].as_str() {
                    saved.insert(format!("{{{short}:{key}}}"), v.into());
                }
            }
        }
        out.push(outcome(r.shape, code, body));
    }
    out
}

/// What is compared of one answer.
fn outcome(shape: Shape, code: u16, body: Value) -> Value {
    if code >= 400 {
        return json!({"code": code, "error": status_of(&body)});
    }
    match shape {
        Shape::Watch => {
            let events: Vec<Value> = body
                .as_array()
                .into_iter()
                .flatten()
                .filter(|e| e["type"] != "BOOKMARK")
                .map(|e| {
                    json!(format!(
                        "{} {}",
                        e["type"].as_str().unwrap_or("?"),
                        e["object"]["metadata"]["name"].as_str().unwrap_or("?")
                    ))
                })
                .collect();
            json!({"code": code, "events": events})
        }
        Shape::Discovery => json!({"code": code, "served": served(&body)}),
        Shape::Object => {
            let mut body = body;
            normalise(&mut body, None);
            json!({"code": code, "body": body})
        }
    }
}

/// The compared part of an error's `Status`.
fn status_of(body: &Value) -> Value {
    let d = &body["details"];
    let causes: Vec<Value> = d["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| json!({"reason": c["reason"], "field": c["field"]}))
        .collect();
    json!({"kind": body["kind"], "reason": body["reason"],
        "details": {"name": d["name"], "group": d["group"], "kind": d["kind"], "causes": causes}})
}

/// `/api` (APIVersions) or `/apis` (APIGroupList) as the served group
/// versions, with each group's preferred version.
fn served(body: &Value) -> Value {
    if let Some(versions) = body["versions"].as_array() {
        return json!({"": versions});
    }
    let mut groups = Map::new();
    for g in body["groups"].as_array().into_iter().flatten() {
        let versions: Vec<&Value> = g["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| &v["version"])
            .collect();
        groups.insert(
            g["name"].as_str().unwrap_or("?").to_string(),
            json!({"versions": versions, "preferred": g["preferredVersion"]["version"]}),
        );
    }
    Value::Object(groups)
}

/// Keys a server sets on its own, dropped wherever they appear.
const SERVER_SET: &[&str] = &[
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "managedFields",
    "generation",
    "selfLink",
];

/// Removes what a server sets on its own, and what differs between runs:
/// [`SERVER_SET`] keys, a generated name's suffix, continue tokens, random
/// suffixes of service-account volumes, and every timestamp.
fn normalise(v: &mut Value, key: Option<&str>) {
    match v {
        Value::Object(map) => {
            // `generation` is dropped from metadata only: a ResourceSlice's
            // `spec.pool.generation` is the client's.
            for k in SERVER_SET {
                if *k != "generation" || key == Some("metadata") {
                    map.remove(*k);
                }
            }
            if let (Some(prefix), Some(Value::String(name))) = (
                map.get("generateName").and_then(Value::as_str),
                map.get("name"),
            ) && name.starts_with(prefix)
            {
                let masked = format!("{prefix}*");
                map.insert("name".into(), json!(masked));
            }
            if let Some(Value::String(token)) = map.get_mut("continue")
                && !token.is_empty()
            {
                *token = "<token>".into();
            }
            for (k, child) in map.iter_mut() {
                normalise(child, Some(k));
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| normalise(i, key)),
        Value::String(s) => {
            if is_timestamp(s) {
                *s = "<time>".into();
            } else if let Some(rest) = s.strip_prefix("kube-api-access-")
                && rest.len() == 5
            {
                *s = "kube-api-access-*".into();
            }
        }
        _ => {}
    }
}

/// An RFC 3339 UTC time, as Kubernetes writes Time and MicroTime.
fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 20
        && s.ends_with('Z')
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && b[..4].iter().all(u8::is_ascii_digit)
}

/// One difference: a JSON pointer into the outcome, and the value each
/// server gave there (`None`: absent).
#[derive(Clone, Debug)]
struct Delta {
    path: String,
    real: Option<Value>,
    sim: Option<Value>,
}

impl Delta {
    fn line(&self, path: &str) -> String {
        format!(
            "`{path}`: kube-apiserver {}; simulator {}",
            shown(self.real.as_ref()),
            shown(self.sim.as_ref())
        )
    }
}

/// The pointers at which two outcomes differ.
fn diff(path: &str, real: Option<&Value>, sim: Option<&Value>, out: &mut Vec<Delta>) {
    match (real, sim) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let p = format!("{path}/{}", k.replace('~', "~0").replace('/', "~1"));
                diff(&p, a.get(k), b.get(k), out);
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                diff(&format!("{path}/{i}"), Some(x), Some(y), out);
            }
        }
        (a, b) if a == b => {}
        (a, b) => out.push(Delta {
            path: if path.is_empty() {
                "/".into()
            } else {
                path.into()
            },
            real: a.cloned(),
            sim: b.cloned(),
        }),
    }
}

/// A body difference as `Kind:/field` with array indices as `*` (list
/// items as `/items/*`), the key of [`PERVASIVE`].
fn field_key(outcome: &Value, path: &str) -> Option<String> {
    let rest = path.strip_prefix("/body")?;
    let kind = outcome["body"]["kind"].as_str()?;
    let kind = kind.strip_suffix("List").unwrap_or(kind);
    let rest: Vec<&str> = rest
        .split('/')
        .map(|seg| {
            if !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()) {
                "*"
            } else {
                seg
            }
        })
        .collect();
    Some(format!("{kind}:{}", rest.join("/")))
}

/// Whether `key` is the pervasive field `pattern`, on an object or on a
/// list's items.
fn is_pervasive(pattern: &str, key: &str) -> bool {
    let Some((kind, field)) = pattern.split_once(':') else {
        return false;
    };
    key == pattern || key == format!("{kind}:/items/*{field}")
}

fn shown(v: Option<&Value>) -> String {
    match v {
        None => "absent".into(),
        Some(v) => {
            let text = v.to_string();
            let text = if text.chars().count() > 120 {
                format!("{}…", text.chars().take(120).collect::<String>())
            } else {
                text
            };
            format!("`{}`", text.replace('`', "'"))
        }
    }
}

/// What the run found: per request, the differences not covered by
/// [`PERVASIVE`]; per pervasive field, the requests it showed in and its
/// first occurrence.
struct Findings {
    requests: Vec<(usize, Vec<String>)>,
    pervasive: Vec<(&'static str, Vec<usize>, String)>,
}

fn findings(corpus: &[Req], real: &[Value], sim: &[Value]) -> Findings {
    let mut requests = Vec::new();
    let mut pervasive: Vec<(&'static str, Vec<usize>, String)> = Vec::new();
    for (i, (a, b)) in real.iter().zip(sim).enumerate() {
        let mut deltas = Vec::new();
        diff("", Some(a), Some(b), &mut deltas);
        let mut lines = Vec::new();
        for d in deltas {
            let key = field_key(a, &d.path).or_else(|| field_key(b, &d.path));
            let hit = key
                .as_deref()
                .and_then(|k| PERVASIVE.iter().find(|(p, _)| is_pervasive(p, k)));
            match hit {
                Some((pattern, _)) => match pervasive.iter_mut().find(|(p, ..)| p == pattern) {
                    Some((_, seen, _)) => {
                        if seen.last() != Some(&i) {
                            seen.push(i);
                        }
                    }
                    None => pervasive.push((pattern, vec![i], d.line(pattern))),
                },
                None => lines.push(d.line(&d.path)),
            }
        }
        if !lines.is_empty() {
            requests.push((i, lines));
        }
    }
    // In the table's order, so the section reads as the table does.
    pervasive.sort_by_key(|(p, ..)| PERVASIVE.iter().position(|(q, _)| q == p));
    let _ = corpus;
    Findings {
        requests,
        pervasive,
    }
}

/// The doc section for these findings.
fn section(corpus: &[Req], f: &Findings) -> String {
    let reasons: BTreeMap<&str, &str> = REASONS.iter().copied().collect();
    let field_reasons: BTreeMap<&str, &str> = PERVASIVE.iter().copied().collect();
    let mut s = format!(
        "{HEADING}\n\n\
         Generated by `tests/sim_vs_real.rs` (`cargo test --test muster sim_vs_real`; \
         `MUSTER_WRITE_DIFFERENCES=1` rewrites this section). The test sends the same {} \
         requests, in order, to a fresh kube-apiserver 1.37 (with etcd, \
         kube-controller-manager and kwok, as tests/real_cluster starts them) and to a fresh \
         simulated cluster, and compares the status codes; for errors the `Status` kind, \
         reason, details (name, group, kind) and each cause's reason and field (messages are \
         worded differently and are not compared); for successes the body without uid, \
         resourceVersion, creationTimestamp, managedFields, generation, selfLink, \
         generated-name suffixes, continue tokens and timestamps; for a watch the event types \
         and object names; for discovery the served group versions.\n\n\
         **{} differences are listed**: {} fields that differ wherever their kind of object \
         is returned, and {} of the {} requests answering differently otherwise. Each says \
         why it is not fixed. Paths are JSON pointers into the compared outcome (`/code`, \
         `/error`, `/body`, `/events`, `/served`).\n",
        corpus.len(),
        f.pervasive.len() + f.requests.len(),
        f.pervasive.len(),
        f.requests.len(),
        corpus.len(),
    );
    if !f.pervasive.is_empty() {
        s.push_str("\n### Fields that differ in every answer of their kind\n\n");
        for (pattern, seen, line) in &f.pervasive {
            let names: Vec<String> = seen
                .iter()
                .take(3)
                .map(|i| format!("`{}`", corpus[*i].name))
                .collect();
            let more = if seen.len() > 3 {
                format!(" and {} more", seen.len() - 3)
            } else {
                String::new()
            };
            s.push_str(&format!(
                "- {line} ({} request{}: {}{more}). Why: {}\n",
                seen.len(),
                if seen.len() == 1 { "" } else { "s" },
                names.join(", "),
                field_reasons
                    .get(pattern)
                    .copied()
                    .unwrap_or("(no reason given)"),
            ));
        }
    }
    for (i, lines) in &f.requests {
        let r = &corpus[*i];
        s.push_str(&format!(
            "\n### `{}`\n\n`{} {}`. Why: {}\n\n",
            r.name,
            r.method,
            r.path,
            reasons.get(r.name).copied().unwrap_or("(no reason given)")
        ));
        for l in lines {
            s.push_str(&format!("- {l}\n"));
        }
    }
    s
}

/// The doc with its differences section replaced by `new` (or appended).
fn with_section(doc: &str, new: &str) -> String {
    let Some(start) = doc.find(&format!("\n{HEADING}\n")).map(|i| i + 1) else {
        return format!("{}\n\n{new}", doc.trim_end());
    };
    let rest = &doc[start + HEADING.len()..];
    let end = rest
        .find("\n## ")
        .map(|i| start + HEADING.len() + i + 1)
        .unwrap_or(doc.len());
    let tail = &doc[end..];
    if tail.is_empty() {
        format!("{}{new}", &doc[..start])
    } else {
        format!("{}{new}\n{tail}", &doc[..start])
    }
}

/// A client of `kubeconfig` that does not retry 429s and 503s, so each
/// request of the corpus is sent exactly once.
async fn client_of(kubeconfig: Kubeconfig) -> kube::Client {
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .expect("client configuration");
    config.default_retry = false;
    kube::Client::try_from(config).expect("client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulator_answers_as_kube_apiserver_does() {
    let began = Instant::now();
    let corpus = corpus();
    let mut names: Vec<&str> = corpus.iter().map(|r| r.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), corpus.len(), "request names are unique");

    // Both start together; the real one takes longer.
    let sim_config = SimConfig::default()
        // Bound pods stay Pending, as on the real cluster, whose nodes no
        // kwok manages (they lack its annotation).
        .pod_start_delay(Duration::from_secs(3600));
    let (real, sim) = tokio::join!(RealCluster::start(), SimCluster::start(sim_config));
    let sim = sim.expect("simulated cluster starts");
    let real_client = client_of(Kubeconfig::read_from(&real.kubeconfig).expect("kubeconfig")).await;
    let sim_client = client_of(Kubeconfig::from_yaml(&sim.kubeconfig()).expect("kubeconfig")).await;
    let started = began.elapsed();

    let real_answers = run(&real_client, &corpus).await;
    let sim_answers = run(&sim_client, &corpus).await;

    if let Some(dir) = std::env::var_os("MUSTER_SIM_VS_REAL_DUMP") {
        // Every outcome of both servers, for looking into a difference.
        let all: Vec<Value> = corpus
            .iter()
            .zip(real_answers.iter().zip(&sim_answers))
            .map(|(r, (a, b))| json!({"name": r.name, "real": a, "sim": b}))
            .collect();
        let path = std::path::Path::new(&dir).join("sim_vs_real.json");
        std::fs::write(&path, serde_json::to_string_pretty(&all).expect("json"))
            .expect("write the dump");
    }
    let found = findings(&corpus, &real_answers, &sim_answers);
    eprintln!(
        "sim_vs_real: {} requests, {} differ besides {} pervasive fields; clusters started in {:.1} s, all done in {:.1} s",
        corpus.len(),
        found.requests.len(),
        found.pervasive.len(),
        started.as_secs_f64(),
        began.elapsed().as_secs_f64()
    );

    let differing: Vec<&str> = found
        .requests
        .iter()
        .map(|(i, _)| corpus[*i].name)
        .collect();
    let unexplained: Vec<&&str> = differing
        .iter()
        .filter(|n| !REASONS.iter().any(|(r, _)| r == *n))
        .collect();
    let stale: Vec<&str> = REASONS
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| !differing.contains(n))
        .chain(
            PERVASIVE
                .iter()
                .map(|(p, _)| *p)
                .filter(|p| !found.pervasive.iter().any(|(q, ..)| q == p)),
        )
        .collect();

    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc_path = root.join(DOC);
    let doc = std::fs::read_to_string(&doc_path).expect("read the doc");
    let new_section = section(&corpus, &found);
    let new_doc = with_section(&doc, &new_section);
    if std::env::var_os("MUSTER_WRITE_DIFFERENCES").is_some() && new_doc != doc {
        std::fs::write(&doc_path, &new_doc).expect("write the doc");
        eprintln!("sim_vs_real: rewrote {HEADING:?} in {DOC}");
    } else {
        assert!(
            new_doc == doc,
            "{DOC}'s {HEADING:?} section disagrees with this run \
             (MUSTER_WRITE_DIFFERENCES=1 rewrites it); the run's section:\n\n{new_section}"
        );
    }
    assert!(
        unexplained.is_empty() && stale.is_empty(),
        "requests that differ without a reason in REASONS: {unexplained:?}; \
         reasons for requests or fields that no longer differ: {stale:?}"
    );
}

#[test]
fn a_section_is_replaced_in_place_or_appended() {
    let doc = "# T\n\nintro\n\n## Differences from kube-apiserver\n\nold\n\n## Next\n\nkept\n";
    assert_eq!(
        with_section(doc, "## Differences from kube-apiserver\n\nnew\n"),
        "# T\n\nintro\n\n## Differences from kube-apiserver\n\nnew\n\n## Next\n\nkept\n"
    );
    assert_eq!(
        with_section(
            "# T\n\nintro\n",
            "## Differences from kube-apiserver\n\nnew\n"
        ),
        "# T\n\nintro\n\n## Differences from kube-apiserver\n\nnew\n"
    );
}

#[test]
fn normalising_drops_what_a_server_sets_on_its_own() {
    let mut v = json!({"metadata": {"name": "gen-x7k2p", "generateName": "gen-", "uid": "u",
        "resourceVersion": "9", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "status": {"startTime": "2026-03-04T05:06:07.123456Z", "phase": "Pending"},
        "spec": {"volumes": [{"name": "kube-api-access-abcde"}]}});
    normalise(&mut v, None);
    assert_eq!(
        v,
        json!({"metadata": {"name": "gen-*", "generateName": "gen-"},
            "status": {"startTime": "<time>", "phase": "Pending"},
            "spec": {"volumes": [{"name": "kube-api-access-*"}]}})
    );
}
