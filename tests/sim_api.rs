//! The simulated cluster's REST surface, through kube-rs: every resource's
//! verbs, errors, optimistic concurrency, selectors, pagination, bindings,
//! finalizers, status subresources and CRD registration.

use crate::common::{bind, code, dynamic, fast, next, resource, start, watch_from_now};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Binding, Node, ObjectReference, Pod};
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::core::ObjectMeta;
use serde_json::{Value, json};

/// (group, version, kind, plural, namespaced, spec)
fn every_resource() -> Vec<(
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
    Value,
)> {
    let gang = json!({"spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}});
    vec![
        ("", "v1", "Namespace", "namespaces", false, json!({})),
        ("", "v1", "Node", "nodes", false, json!({"spec": {}})),
        (
            "",
            "v1",
            "Pod",
            "pods",
            true,
            json!({"spec": {"containers": [{"name": "c", "image": "i"}]}}),
        ),
        (
            "",
            "v1",
            "Event",
            "events",
            true,
            json!({"involvedObject": {"kind": "Pod", "name": "p"}, "reason": "R"}),
        ),
        (
            "events.k8s.io",
            "v1",
            "Event",
            "events",
            true,
            json!({"reason": "R", "eventTime": "2026-01-01T00:00:00.000000Z"}),
        ),
        (
            "",
            "v1",
            "PersistentVolumeClaim",
            "persistentvolumeclaims",
            true,
            json!({"spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "none",
                "resources": {"requests": {"storage": "1Gi"}}}}),
        ),
        (
            "",
            "v1",
            "PersistentVolume",
            "persistentvolumes",
            false,
            json!({"spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                "storageClassName": "none", "hostPath": {"path": "/tmp"}}}),
        ),
        (
            "storage.k8s.io",
            "v1",
            "StorageClass",
            "storageclasses",
            false,
            json!({"provisioner": "example.com/p"}),
        ),
        (
            "storage.k8s.io",
            "v1",
            "CSINode",
            "csinodes",
            false,
            json!({"spec": {"drivers": []}}),
        ),
        (
            "storage.k8s.io",
            "v1",
            "CSIDriver",
            "csidrivers",
            false,
            json!({"spec": {"attachRequired": false}}),
        ),
        (
            "coordination.k8s.io",
            "v1",
            "Lease",
            "leases",
            true,
            json!({"spec": {"holderIdentity": "me"}}),
        ),
        (
            "scheduling.k8s.io",
            "v1",
            "PriorityClass",
            "priorityclasses",
            false,
            json!({"value": 1000}),
        ),
        (
            "scheduling.k8s.io",
            "v1alpha1",
            "Workload",
            "workloads",
            true,
            json!({"spec": {"podGroups": [{"name": "w", "policy": {"gang": {"minCount": 2}}}]}}),
        ),
        (
            "scheduling.k8s.io",
            "v1alpha2",
            "Workload",
            "workloads",
            true,
            json!({"spec": {"podGroupTemplates": []}}),
        ),
        (
            "scheduling.k8s.io",
            "v1alpha2",
            "PodGroup",
            "podgroups",
            true,
            gang.clone(),
        ),
        (
            "scheduling.k8s.io",
            "v1beta1",
            "Workload",
            "workloads",
            true,
            json!({"spec": {"podGroupTemplates": []}}),
        ),
        (
            "scheduling.k8s.io",
            "v1beta1",
            "PodGroup",
            "podgroups",
            true,
            gang,
        ),
        (
            "scheduling.x-k8s.io",
            "v1alpha1",
            "PodGroup",
            "podgroups",
            true,
            json!({"spec": {"minMember": 3}}),
        ),
        (
            "scheduling.volcano.sh",
            "v1beta1",
            "PodGroup",
            "podgroups",
            true,
            json!({"spec": {"minMember": 3, "queue": "q"}}),
        ),
        (
            "",
            "v1",
            "ConfigMap",
            "configmaps",
            true,
            json!({"data": {"k": "v"}}),
        ),
        (
            "",
            "v1",
            "Service",
            "services",
            true,
            json!({"spec": {"ports": [{"port": 80}]}}),
        ),
        (
            "",
            "v1",
            "ServiceAccount",
            "serviceaccounts",
            true,
            json!({}),
        ),
        (
            "apps",
            "v1",
            "Deployment",
            "deployments",
            true,
            json!({"spec": {"replicas": 1}}),
        ),
        (
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRole",
            "clusterroles",
            false,
            json!({"rules": []}),
        ),
        (
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRoleBinding",
            "clusterrolebindings",
            false,
            json!({"roleRef": {"kind": "ClusterRole", "name": "x", "apiGroup": "rbac.authorization.k8s.io"}}),
        ),
        (
            "rbac.authorization.k8s.io",
            "v1",
            "Role",
            "roles",
            true,
            json!({"rules": []}),
        ),
        (
            "rbac.authorization.k8s.io",
            "v1",
            "RoleBinding",
            "rolebindings",
            true,
            json!({"roleRef": {"kind": "Role", "name": "x", "apiGroup": "rbac.authorization.k8s.io"}}),
        ),
    ]
}

#[tokio::test]
async fn every_resource_supports_every_verb() {
    let (cluster, client) = start(fast()).await;
    for (group, version, kind, plural, namespaced, body) in every_resource() {
        let ar = resource(group, version, kind, plural);
        let api = dynamic(&client, &ar, namespaced.then_some("default"));
        let what = format!("{plural}.{group}/{version}");
        let name = format!("obj-{}", plural.trim_end_matches('s'));

        let mut watch = watch_from_now(&api, &WatchParams::default()).await;

        let mut obj: DynamicObject = serde_json::from_value(body).unwrap();
        obj.metadata = ObjectMeta {
            name: Some(name.clone()),
            ..Default::default()
        };
        obj.types = Some(kube::core::TypeMeta {
            api_version: ar.api_version.clone(),
            kind: kind.into(),
        });
        let created = api.create(&PostParams::default(), &obj).await.expect(&what);
        assert!(created.metadata.uid.is_some(), "{what}");
        assert!(
            matches!(next(&mut watch).await.unwrap(), WatchEvent::Added(o) if o.metadata.name == Some(name.clone())),
            "{what}"
        );

        let got = api.get(&name).await.expect(&what);
        assert_eq!(
            got.metadata.resource_version, created.metadata.resource_version,
            "{what}"
        );
        let listed = api.list(&ListParams::default()).await.expect(&what);
        assert!(
            listed
                .items
                .iter()
                .any(|o| o.metadata.name.as_deref() == Some(name.as_str())),
            "{what}"
        );

        let patch = json!({"metadata": {"labels": {"patched": "yes"}}});
        let patched = api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect(&what);
        assert_eq!(patched.metadata.labels.unwrap()["patched"], "yes", "{what}");
        assert!(
            matches!(next(&mut watch).await.unwrap(), WatchEvent::Modified(_)),
            "{what}"
        );

        api.delete(&name, &DeleteParams::default())
            .await
            .expect(&what);
        assert!(
            matches!(next(&mut watch).await.unwrap(), WatchEvent::Deleted(_)),
            "{what}"
        );
        assert_eq!(
            code(api.get(&name).await),
            (404, "NotFound".into()),
            "{what}"
        );
    }
    cluster.shutdown().await.unwrap();
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "web", "idx": name}},
        "spec": {"schedulerName": "muster", "containers": [{"name": "c", "image": "pause"}]},
    }))
    .unwrap()
}

#[tokio::test]
async fn errors_are_status_objects_with_details() {
    let (cluster, client) = start(fast()).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    pods.create(&PostParams::default(), &pod("a"))
        .await
        .unwrap();
    let Err(kube::Error::Api(s)) = pods.create(&PostParams::default(), &pod("a")).await else {
        panic!()
    };
    assert_eq!((s.code, s.reason.as_str()), (409, "AlreadyExists"));
    let details = s.details.unwrap();
    assert_eq!(
        (details.name.as_str(), details.kind.as_str()),
        ("a", "pods")
    );

    let Err(kube::Error::Api(s)) = pods.get("nope").await else {
        panic!()
    };
    assert_eq!((s.code, s.reason.as_str()), (404, "NotFound"));
    assert_eq!(s.message, "pods \"nope\" not found");

    let elsewhere: Api<Pod> = Api::namespaced(client.clone(), "missing-ns");
    assert_eq!(
        code(elsewhere.create(&PostParams::default(), &pod("b")).await).0,
        404
    );

    let bad = ListParams::default().labels("app in (web");
    assert_eq!(code(pods.list(&bad).await), (400, "BadRequest".into()));

    let mut nameless = pod("x");
    nameless.metadata.name = None;
    assert_eq!(
        code(pods.create(&PostParams::default(), &nameless).await),
        (422, "Invalid".into())
    );
    nameless.metadata.generate_name = Some("gen-".into());
    let generated = pods
        .create(&PostParams::default(), &nameless)
        .await
        .unwrap();
    let generated = generated.metadata.name.unwrap();
    assert!(
        generated.starts_with("gen-") && generated.len() == 9,
        "{generated}"
    );
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn stale_resource_version_is_a_conflict() {
    let (cluster, client) = start(fast()).await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    let first = pods
        .create(&PostParams::default(), &pod("a"))
        .await
        .unwrap();
    let mut second = first.clone();
    second
        .metadata
        .labels
        .get_or_insert_default()
        .insert("v".into(), "2".into());
    let second = pods
        .replace("a", &PostParams::default(), &second)
        .await
        .unwrap();
    assert_ne!(
        second.metadata.resource_version,
        first.metadata.resource_version
    );
    // Replacing from the first version again loses the race.
    assert_eq!(
        code(pods.replace("a", &PostParams::default(), &first).await),
        (409, "Conflict".into())
    );
    // A patch carrying a stale version is refused too.
    let stale = json!({"metadata": {"resourceVersion": first.metadata.resource_version}});
    assert_eq!(
        code(
            pods.patch("a", &PatchParams::default(), &Patch::Merge(&stale))
                .await
        )
        .0,
        409
    );
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn selectors_and_pagination() {
    // Bound pods stay Pending: the phase count below must not race the kubelet.
    let config = fast()
        .with_nodes(1)
        .pod_start_delay(std::time::Duration::from_secs(3600));
    let (cluster, client) = start(config).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    for i in 0..7 {
        let mut p = pod(&format!("p{i}"));
        if i % 2 == 0 {
            p.metadata
                .labels
                .get_or_insert_default()
                .insert("even".into(), "true".into());
        }
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
    let binding = |pod: &str| Binding {
        metadata: ObjectMeta {
            name: Some(pod.into()),
            ..Default::default()
        },
        target: ObjectReference {
            kind: Some("Node".into()),
            name: Some("sim-node-0".into()),
            ..Default::default()
        },
    };
    let _: serde_json::Value = pods
        .create_subresource("binding", "p1", &PostParams::default(), &binding("p1"))
        .await
        .unwrap();

    let names = |l: kube::core::ObjectList<Pod>| -> Vec<String> {
        l.items
            .into_iter()
            .map(|p| p.metadata.name.unwrap())
            .collect()
    };
    let count = |sel: ListParams| {
        let pods = pods.clone();
        async move { pods.list(&sel).await.unwrap().items.len() }
    };
    assert_eq!(count(ListParams::default().labels("even=true")).await, 4);
    assert_eq!(count(ListParams::default().labels("even!=true")).await, 3);
    assert_eq!(count(ListParams::default().labels("!even")).await, 3);
    assert_eq!(count(ListParams::default().labels("even")).await, 4);
    assert_eq!(
        count(ListParams::default().labels("idx in (p1,p2,zz)")).await,
        2
    );
    assert_eq!(
        count(ListParams::default().labels("idx notin (p1,p2),app==web")).await,
        5
    );
    assert_eq!(
        count(ListParams::default().fields("spec.nodeName=sim-node-0")).await,
        1
    );
    assert_eq!(
        count(ListParams::default().fields("spec.nodeName=")).await,
        6
    );
    assert_eq!(
        count(ListParams::default().fields("spec.nodeName!=,metadata.name==p1")).await,
        1
    );
    assert_eq!(
        count(ListParams::default().fields("spec.schedulerName=muster")).await,
        7
    );
    assert_eq!(
        count(ListParams::default().fields("status.phase=Pending,metadata.namespace=default"))
            .await,
        7
    );

    // Pages of 3 come out in name order and continue where they left off.
    let first = pods.list(&ListParams::default().limit(3)).await.unwrap();
    let token = first.metadata.continue_.clone().unwrap();
    let rv = first.metadata.resource_version.clone();
    assert_eq!(names(first), ["p0", "p1", "p2"]);
    let second = pods
        .list(&ListParams::default().limit(3).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(
        second.metadata.resource_version, rv,
        "continued pages keep the first page's version"
    );
    let token = second.metadata.continue_.clone().unwrap();
    assert_eq!(names(second), ["p3", "p4", "p5"]);
    let last = pods
        .list(&ListParams::default().limit(3).continue_token(&token))
        .await
        .unwrap();
    assert!(last.metadata.continue_.is_none());
    assert_eq!(names(last), ["p6"]);

    // deletecollection honours the selector.
    pods.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("even=true"),
    )
    .await
    .unwrap();
    assert_eq!(count(ListParams::default()).await, 3);
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn binding_sets_the_node_once() {
    let (cluster, client) = start(fast().with_nodes(2)).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    pods.create(&PostParams::default(), &pod("a"))
        .await
        .unwrap();
    let ok = bind(&pods, "a", "sim-node-0").await.unwrap();
    assert_eq!(ok["status"], "Success");
    let bound = pods.get("a").await.unwrap();
    assert_eq!(bound.spec.unwrap().node_name.as_deref(), Some("sim-node-0"));
    let conditions = bound.status.unwrap().conditions.unwrap();
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "True")
    );

    assert_eq!(
        code(bind(&pods, "a", "sim-node-1").await),
        (409, "Conflict".into())
    );
    assert_eq!(code(bind(&pods, "ghost", "sim-node-0").await).0, 404);
    pods.create(&PostParams::default(), &pod("b"))
        .await
        .unwrap();
    assert_eq!(code(bind(&pods, "b", "no-such-node").await).0, 404);

    // The namespaced `bindings` collection works too.
    let req = http::Request::post("/api/v1/namespaces/default/bindings")
        .header("content-type", "application/json")
        .body(
            serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": "b"}, "target": {"kind": "Node", "name": "sim-node-1"}}))
            .unwrap(),
        )
        .unwrap();
    let _: serde_json::Value = client.request(req).await.unwrap();
    assert_eq!(
        pods.get("b")
            .await
            .unwrap()
            .spec
            .unwrap()
            .node_name
            .as_deref(),
        Some("sim-node-1")
    );
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let (cluster, client) = start(fast()).await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    let mut p = pod("held");
    p.metadata.finalizers = Some(vec!["muster.dev/test".into()]);
    let created = pods.create(&PostParams::default(), &p).await.unwrap();
    let rv = created.metadata.resource_version.unwrap();
    let mut watch = pods
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();

    pods.delete("held", &DeleteParams::default()).await.unwrap();
    let marked = pods.get("held").await.unwrap();
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert!(matches!(
        next(&mut watch).await.unwrap(),
        WatchEvent::Modified(_)
    ));

    let clear = json!({"metadata": {"finalizers": null}});
    pods.patch("held", &PatchParams::default(), &Patch::Merge(&clear))
        .await
        .unwrap();
    assert!(matches!(
        next(&mut watch).await.unwrap(),
        WatchEvent::Deleted(_)
    ));
    assert_eq!(code(pods.get("held").await).0, 404);
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn status_subresource_splits_writes() {
    let (cluster, client) = start(fast()).await;
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "n"},
        "status": {"capacity": {"cpu": "4"}}}))
    .unwrap();
    let created = nodes.create(&PostParams::default(), &node).await.unwrap();
    let status = created.status.unwrap();
    assert_eq!(
        status.allocatable.unwrap()["cpu"].0,
        "4",
        "allocatable defaults to capacity"
    );
    assert!(
        status
            .conditions
            .unwrap()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    );

    // The main resource ignores status; /status ignores everything else.
    let both = json!({"metadata": {"labels": {"l": "1"}}, "status": {"capacity": {"cpu": "8"}}});
    let after = nodes
        .patch("n", &PatchParams::default(), &Patch::Merge(&both))
        .await
        .unwrap();
    assert_eq!(after.status.unwrap().capacity.unwrap()["cpu"].0, "4");
    assert_eq!(after.metadata.labels.unwrap()["l"], "1");
    let both = json!({"metadata": {"labels": {"l": "2"}}, "status": {"capacity": {"cpu": "8"}}});
    let after = nodes
        .patch_status("n", &PatchParams::default(), &Patch::Merge(&both))
        .await
        .unwrap();
    assert_eq!(after.status.unwrap().capacity.unwrap()["cpu"].0, "8");
    assert_eq!(after.metadata.labels.unwrap()["l"], "1");

    // Strategic merge patches merge containers by name.
    let pods: Api<Pod> = Api::default_namespaced(client);
    pods.create(&PostParams::default(), &pod("s"))
        .await
        .unwrap();
    let smp = json!({"spec": {"containers": [{"name": "side", "image": "x"}]}});
    let patched = pods
        .patch("s", &PatchParams::default(), &Patch::Strategic(&smp))
        .await
        .unwrap();
    assert_eq!(patched.spec.unwrap().containers.len(), 2);
    let jp: json_patch::Patch = serde_json::from_value(
        json!([{"op": "replace", "path": "/spec/containers/0/image", "value": "y"}]),
    )
    .unwrap();
    let patched = pods
        .patch("s", &PatchParams::default(), &Patch::<()>::Json(jp))
        .await
        .unwrap();
    assert_eq!(
        patched.spec.unwrap().containers[0].image.as_deref(),
        Some("y")
    );
    // Server-side apply is approximated as a strategic merge.
    let ssa = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "s", "labels": {"applied": "1"}}});
    let applied = pods
        .patch("s", &PatchParams::apply("test"), &Patch::Apply(&ssa))
        .await
        .unwrap();
    assert_eq!(applied.metadata.labels.unwrap()["applied"], "1");
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn crds_register_and_unregister_resources() {
    let (cluster, client) = start(fast().without_groups(["scheduling.x-k8s.io"])).await;
    let ar = resource("scheduling.x-k8s.io", "v1alpha1", "PodGroup", "podgroups");
    let pgs = dynamic(&client, &ar, Some("default"));
    assert_eq!(code(pgs.list(&ListParams::default()).await).0, 404);
    let groups = client.list_api_groups().await.unwrap();
    assert!(
        !groups
            .groups
            .iter()
            .any(|g| g.name == "scheduling.x-k8s.io")
    );

    let crd = resource(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    );
    let crds = dynamic(&client, &crd, None);
    let def: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "podgroups.scheduling.x-k8s.io"},
        "spec": {"group": "scheduling.x-k8s.io", "scope": "Namespaced",
            "names": {"plural": "podgroups", "singular": "podgroup", "kind": "PodGroup", "shortNames": ["pg"]},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    })).unwrap();
    let created = crds.create(&PostParams::default(), &def).await.unwrap();
    let conditions = &created.data["status"]["conditions"];
    assert!(
        conditions
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Established" && c["status"] == "True")
    );

    let discovery = kube::Discovery::new(client.clone()).run().await.unwrap();
    assert!(
        discovery
            .groups()
            .any(|g| g.name() == "scheduling.x-k8s.io")
    );
    let pg: DynamicObject =
        serde_json::from_value(json!({"apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup", "metadata": {"name": "g"}, "spec": {"minMember": 2}}))
        .unwrap();
    pgs.create(&PostParams::default(), &pg).await.unwrap();
    let status = json!({"status": {"phase": "Scheduling"}});
    let updated = pgs
        .patch_status("g", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    assert_eq!(updated.data["status"]["phase"], "Scheduling");

    // A name that is not plural.group is refused.
    let mut wrong = def.clone();
    wrong.metadata.name = Some("wrong.example.com".into());
    assert_eq!(
        code(crds.create(&PostParams::default(), &wrong).await).0,
        422
    );

    crds.delete("podgroups.scheduling.x-k8s.io", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(code(pgs.get("g").await).0, 404);
    assert_eq!(code(pgs.list(&ListParams::default()).await).0, 404);
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn deleting_a_namespace_removes_its_objects() {
    let (cluster, client) = start(fast()).await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let ns = serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap();
    let created = namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    assert_eq!(created.status.unwrap().phase.as_deref(), Some("Active"));
    let pods: Api<Pod> = Api::namespaced(client.clone(), "team");
    pods.create(&PostParams::default(), &pod("a"))
        .await
        .unwrap();
    namespaces
        .delete("team", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(code(pods.get("a").await).0, 404);
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn events_k8s_io_events_are_core_events() {
    use kube::runtime::events::{Event as Ev, EventType, Recorder, Reporter};
    let (cluster, client) = start(fast()).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let created = pods
        .create(&PostParams::default(), &pod("e"))
        .await
        .unwrap();
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: created.metadata.name.clone(),
        namespace: Some("default".into()),
        uid: created.metadata.uid.clone(),
        ..Default::default()
    };
    // kube-rs's Recorder writes events.k8s.io/v1 events (create, then merge
    // patches for a series)...
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "muster".into(),
            instance: None,
        },
    );
    let ev = Ev {
        type_: EventType::Normal,
        reason: "Scheduled".into(),
        note: Some("bound".into()),
        action: "Binding".into(),
        secondary: None,
    };
    recorder.publish(&ev, &reference).await.unwrap();
    recorder.publish(&ev, &reference).await.unwrap();

    // ...which readers of core/v1 events (kubectl describe) see.
    let core: Api<k8s_openapi::api::core::v1::Event> = Api::default_namespaced(client.clone());
    let seen = core
        .list(&ListParams::default().fields("involvedObject.name=e"))
        .await
        .unwrap();
    assert_eq!(seen.items.len(), 1);
    assert_eq!(seen.items[0].message.as_deref(), Some("bound"));
    assert_eq!(seen.items[0].reporting_component.as_deref(), Some("muster"));
    let new: Api<k8s_openapi::api::events::v1::Event> = Api::default_namespaced(client);
    let listed = new
        .list(&ListParams::default().fields("regarding.name=e"))
        .await
        .unwrap();
    assert_eq!(listed.items[0].note.as_deref(), Some("bound"));
    assert!(
        listed.items[0].series.is_some(),
        "the repeat became a series"
    );
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn raw_requests_get_precise_errors() {
    let (cluster, client) = start(fast()).await;
    let send = |method: &str, path: &str, body: &str| {
        let client = client.clone();
        let req = http::Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .body(body.as_bytes().to_vec())
            .unwrap();
        async move { client.request_text(req).await }
    };
    let (code_, reason) =
        code(send("POST", "/api/v1/namespaces/default/configmaps", "{not json").await);
    assert_eq!((code_, reason.as_str()), (400, "BadRequest"));
    assert_eq!(code(send("GET", "/api/v1/nothings", "").await).0, 404);
    assert_eq!(code(send("GET", "/apis/no.such.group/v1", "").await).0, 404);
    let dry = "/api/v1/namespaces/default/configmaps?dryRun=All";
    assert_eq!(
        code(send("POST", dry, r#"{"metadata":{"name":"x"}}"#).await).0,
        400
    );
    let wrong_kind = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"}}"#;
    assert_eq!(
        code(send("POST", "/api/v1/namespaces/default/configmaps", wrong_kind).await).0,
        400
    );
    let with_rv = r#"{"metadata":{"name":"x","resourceVersion":"5"}}"#;
    assert_eq!(
        code(send("POST", "/api/v1/namespaces/default/configmaps", with_rv).await).0,
        400
    );
    assert_eq!(
        code(send("GET", "/api/v1/namespaces/default/pods?limit=x", "").await).0,
        400
    );
    assert_eq!(
        code(send("GET", "/api/v1/namespaces/default/pods?continue=zz", "").await).0,
        400
    );

    // timeoutSeconds ends a watch on time.
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let wp = WatchParams::default().timeout(1);
    let mut stream = pods.watch(&wp, "0").await.unwrap().boxed();
    let drained = async {
        while let Some(e) = stream.next().await {
            assert!(matches!(e, Ok(WatchEvent::Bookmark(_))))
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), drained)
        .await
        .expect("the watch ended after its timeout");

    // The kubeconfig helpers agree with the address.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kc");
    cluster.write_kubeconfig(&path).unwrap();
    assert!(
        std::fs::read_to_string(&path)
            .unwrap()
            .contains(&cluster.addr().to_string())
    );
    assert_eq!(
        cluster.kubeconfig(),
        std::fs::read_to_string(&path).unwrap()
    );
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn pod_priority_comes_from_its_priority_class() {
    use k8s_openapi::api::scheduling::v1::PriorityClass;
    let (cluster, client) = start(fast()).await;
    let classes: Api<PriorityClass> = Api::all(client.clone());
    let high: PriorityClass =
        serde_json::from_value(json!({"metadata": {"name": "high"}, "value": 1000})).unwrap();
    classes.create(&PostParams::default(), &high).await.unwrap();
    let pods: Api<Pod> = Api::default_namespaced(client);
    let mut p = pod("urgent");
    p.spec.as_mut().unwrap().priority_class_name = Some("high".into());
    let created = pods.create(&PostParams::default(), &p).await.unwrap();
    assert_eq!(created.spec.unwrap().priority, Some(1000));
    let plain = pods
        .create(&PostParams::default(), &pod("plain"))
        .await
        .unwrap();
    assert_eq!(plain.spec.unwrap().priority, Some(0));
    let mut p = pod("lost");
    p.spec.as_mut().unwrap().priority_class_name = Some("nope".into());
    assert_eq!(
        code(pods.create(&PostParams::default(), &p).await),
        (403, "Forbidden".into())
    );
    cluster.shutdown().await.unwrap();
}

/// Like a real API server, negative resource quantities are refused at
/// create, update and patch with a 422 `Invalid` naming each field in
/// `details.causes` (the scheduler defends itself too: tenant_input_e2e).
#[tokio::test]
async fn negative_resource_quantities_are_invalid() {
    let (cluster, client) = start(fast()).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let negative: Pod = serde_json::from_value(json!({
        "metadata": {"name": "neg"},
        "spec": {"containers": [
            {"name": "ok", "image": "i", "resources": {"requests": {"cpu": "1"}}},
            {"name": "c", "image": "i", "resources": {"requests": {"cpu": "-1"}, "limits": {"memory": "-1Gi"}}}
        ], "overhead": {"cpu": "-100m"}},
    }))
    .unwrap();
    let Err(kube::Error::Api(s)) = pods.create(&PostParams::default(), &negative).await else {
        panic!("a negative request was accepted")
    };
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        s.message,
        "Pod \"neg\" is invalid: [spec.containers[1].resources.requests[cpu]: Invalid value: \"-1\": must be greater than or equal to 0, \
         spec.containers[1].resources.limits[memory]: Invalid value: \"-1Gi\": must be greater than or equal to 0, \
         spec.overhead[cpu]: Invalid value: \"-100m\": must be greater than or equal to 0]"
    );
    let causes = s.details.unwrap().causes;
    let fields: Vec<_> = causes.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "spec.containers[1].resources.requests[cpu]",
            "spec.containers[1].resources.limits[memory]",
            "spec.overhead[cpu]"
        ]
    );
    assert!(causes.iter().all(|c| c.reason == "FieldValueInvalid"));
    assert_eq!(
        causes[0].message,
        "Invalid value: \"-1\": must be greater than or equal to 0"
    );
    assert_eq!(code(pods.get("neg").await).0, 404, "nothing was stored");

    // A valid pod cannot be made negative afterwards, by update or patch.
    let created = pods
        .create(&PostParams::default(), &pod("p"))
        .await
        .unwrap();
    let mut changed = created.clone();
    changed.spec.as_mut().unwrap().init_containers = Some(vec![
        serde_json::from_value(
            json!({"name": "i", "image": "i", "resources": {"requests": {"memory": "-5"}}}),
        )
        .unwrap(),
    ]);
    let Err(kube::Error::Api(s)) = pods.replace("p", &PostParams::default(), &changed).await else {
        panic!("update accepted a negative request")
    };
    assert_eq!(
        (s.code, s.details.unwrap().causes[0].field.as_str()),
        (422, "spec.initContainers[0].resources.requests[memory]")
    );
    let patch = json!({"spec": {"overhead": {"memory": "-1"}}});
    let Err(kube::Error::Api(s)) = pods
        .patch("p", &PatchParams::default(), &Patch::Merge(&patch))
        .await
    else {
        panic!("patch accepted a negative overhead")
    };
    assert_eq!(
        (s.code, s.details.unwrap().causes[0].field.as_str()),
        (422, "spec.overhead[memory]")
    );
    let zero: Pod = serde_json::from_value(json!({
        "metadata": {"name": "zero"},
        "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "0"}}}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &zero).await.unwrap();
    cluster.shutdown().await.unwrap();
}
