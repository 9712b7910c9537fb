//! One object in every version, and server-side field validation, through
//! kube-rs: a PodGroup written in one version of scheduling.k8s.io is read,
//! listed, watched and deleted through the others (converted, one
//! resourceVersion); unknown fields are refused under
//! `fieldValidation=Strict` and dropped otherwise; custom resources are
//! pruned to their CRD's schema.

use crate::common::{code, dynamic, fast, next, resource, start, until};
use futures::StreamExt;
use kube::api::{DeleteParams, DynamicObject, PostParams, WatchEvent, WatchParams};
use serde_json::{Value, json};

fn pg(version: &str) -> kube::core::ApiResource {
    resource("scheduling.k8s.io", version, "PodGroup", "podgroups")
}

fn object(v: Value) -> DynamicObject {
    serde_json::from_value(v).unwrap()
}

#[tokio::test]
async fn a_podgroup_is_one_object_in_every_version() {
    let (cluster, client) = start(fast()).await;
    let alpha2 = dynamic(&client, &pg("v1alpha2"), Some("default"));
    let beta1 = dynamic(&client, &pg("v1beta1"), Some("default"));
    let alpha3 = dynamic(&client, &pg("v1alpha3"), Some("default"));
    let mut watch_alpha2 = alpha2
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();

    let created = beta1
        .create(
            &PostParams::default(),
            &object(json!({
                "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                "metadata": {"name": "g"},
                "spec": {"workloadRef": {"workloadName": "w", "templateName": "t"},
                         "disruptionMode": {"all": {}}, "preemptionPolicy": "Never",
                         "schedulingPolicy": {"gang": {"minCount": 2}}}})),
        )
        .await
        .unwrap();

    // Read through v1alpha2: the 1.36 shape, the same resourceVersion.
    let old = alpha2.get("g").await.unwrap();
    assert_eq!(
        old.types.as_ref().unwrap().api_version,
        "scheduling.k8s.io/v1alpha2"
    );
    assert_eq!(
        old.data["spec"],
        json!({"podGroupTemplateRef": {"workload": {"workloadName": "w", "podGroupTemplateName": "t"}},
               "disruptionMode": "PodGroup", "schedulingPolicy": {"gang": {"minCount": 2}}})
    );
    assert_eq!(
        old.metadata.resource_version,
        created.metadata.resource_version
    );
    let new = alpha3.get("g").await.unwrap();
    assert_eq!(new.data["spec"], created.data["spec"]);

    // A watch on v1alpha2 saw the v1beta1 create, in its own shape.
    let seen = until(&mut watch_alpha2, |e| matches!(e, Ok(WatchEvent::Added(_)))).await;
    let Ok(WatchEvent::Added(seen)) = seen else {
        unreachable!()
    };
    assert_eq!(
        seen.types.unwrap().api_version,
        "scheduling.k8s.io/v1alpha2"
    );
    assert_eq!(seen.data["spec"]["disruptionMode"], "PodGroup");

    // Lists agree across versions.
    assert_eq!(
        alpha2.list(&Default::default()).await.unwrap().items.len(),
        1
    );
    assert_eq!(
        beta1.list(&Default::default()).await.unwrap().items.len(),
        1
    );

    // A write through v1alpha2 loses what only v1beta1 has
    // (preemptionPolicy), as a real server's conversion does.
    let mut edit = old.clone();
    edit.data["spec"]["schedulingPolicy"]["gang"]["minCount"] = json!(3);
    alpha2
        .replace("g", &PostParams::default(), &edit)
        .await
        .unwrap();
    let after = beta1.get("g").await.unwrap();
    assert_eq!(
        after.data["spec"]["schedulingPolicy"]["gang"]["minCount"],
        3
    );
    assert_eq!(after.data["spec"]["workloadRef"]["templateName"], "t");
    assert!(after.data["spec"].get("preemptionPolicy").is_none());

    // Deleting through v1alpha2 deletes it in every version.
    alpha2.delete("g", &DeleteParams::default()).await.unwrap();
    assert_eq!(code(beta1.get("g").await).0, 404);
    assert_eq!(code(alpha3.get("g").await).0, 404);
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_created_alpha2_podgroup_is_stored_as_beta1() {
    let (cluster, client) = start(fast()).await;
    let alpha2 = dynamic(&client, &pg("v1alpha2"), Some("default"));
    let beta1 = dynamic(&client, &pg("v1beta1"), Some("default"));
    let mut watch_beta1 = beta1
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    alpha2
        .create(
            &PostParams::default(),
            &object(json!({
                "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                "metadata": {"name": "old"},
                "spec": {"podGroupTemplateRef": {"workload": {"workloadName": "w", "podGroupTemplateName": "t"}},
                         "schedulingPolicy": {"gang": {"minCount": 2}}}})),
        )
        .await
        .unwrap();
    let Ok(WatchEvent::Added(seen)) = next(&mut watch_beta1).await else {
        panic!("expected ADDED")
    };
    assert_eq!(
        seen.data["spec"]["workloadRef"],
        json!({"workloadName": "w", "templateName": "t"})
    );
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn composite_pod_groups_are_served_in_v1alpha3() {
    let (cluster, client) = start(fast()).await;
    let ar = resource(
        "scheduling.k8s.io",
        "v1alpha3",
        "CompositePodGroup",
        "compositepodgroups",
    );
    let api = dynamic(&client, &ar, Some("default"));
    api.create(
        &PostParams::default(),
        &object(json!({
            "apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
            "metadata": {"name": "c"},
            "spec": {"schedulingPolicy": {"gang": {"minGroupCount": 2}}},
            "status": {"conditions": []}})),
    )
    .await
    .unwrap();
    let got = api.get("c").await.unwrap();
    assert_eq!(
        got.data["spec"]["schedulingPolicy"]["gang"]["minGroupCount"],
        2
    );
    // Status is a subresource: dropped on create.
    assert!(got.data.get("status").is_none());
    cluster.shutdown().await.unwrap();
}

/// Sends a raw JSON request; the answer's code and body.
async fn raw(client: &kube::Client, method: &str, path: &str, body: Value) -> (u16, Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(body.to_string().into_bytes())
        .unwrap();
    match client.request_text(req).await {
        Ok(text) => (200, serde_json::from_str(&text).unwrap()),
        Err(kube::Error::Api(s)) => (s.code, json!({"message": s.message, "reason": s.reason})),
        Err(e) => panic!("{e}"),
    }
}

#[tokio::test]
async fn unknown_fields_are_refused_when_strict_and_dropped_otherwise() {
    let (cluster, client) = start(fast()).await;
    let pod = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "i", "resourcez": {}}], "foo": 1}})
    };
    let pods = "/api/v1/namespaces/default/pods";
    let (status, body) = raw(
        &client,
        "POST",
        &format!("{pods}?fieldValidation=Strict"),
        pod("a"),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(
        body["message"],
        "Pod in version \"v1\" cannot be handled as a Pod: strict decoding error: unknown field \"spec.containers[0].resourcez\", unknown field \"spec.foo\""
    );
    // Without the parameter (Warn) and with Ignore: stored without them.
    for (name, query) in [("b", ""), ("c", "?fieldValidation=Ignore")] {
        let (status, stored) = raw(&client, "POST", &format!("{pods}{query}"), pod(name)).await;
        assert_eq!(status, 200);
        assert!(stored["spec"].get("foo").is_none(), "{stored}");
        assert!(stored["spec"]["containers"][0].get("resourcez").is_none());
    }
    // A patch adding an unknown field: the same.
    let merge = |q: &str| {
        let req = http::Request::builder()
            .method("PATCH")
            .uri(format!("{pods}/b{q}"))
            .header("content-type", "application/merge-patch+json")
            .body(br#"{"spec":{"bar":true}}"#.to_vec())
            .unwrap();
        client.request_text(req)
    };
    let (status, _) = code(merge("?fieldValidation=Strict").await);
    assert_eq!(status, 400);
    let patched: Value = serde_json::from_str(&merge("").await.unwrap()).unwrap();
    assert!(patched["spec"].get("bar").is_none());
    // A PodGroup in v1alpha2 may not carry what only v1beta1 has.
    let (status, body) = raw(
        &client,
        "POST",
        "/apis/scheduling.k8s.io/v1alpha2/namespaces/default/podgroups?fieldValidation=Strict",
        json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
            "metadata": {"name": "g"},
            "spec": {"workloadRef": {"workloadName": "w"}, "schedulingPolicy": {"basic": {}}}}),
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .ends_with("strict decoding error: unknown field \"spec.workloadRef\""),
        "{body}"
    );
    cluster.shutdown().await.unwrap();
}

/// scheduler-plugins' PodGroup CRD as upstream ships it today (schema
/// trimmed to the fields; `status.scheduled` was removed upstream).
const COSCHEDULING_CRD: &str = r#"{
  "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "podgroups.scheduling.x-k8s.io"},
  "spec": {"group": "scheduling.x-k8s.io", "scope": "Namespaced",
    "names": {"plural": "podgroups", "singular": "podgroup", "kind": "PodGroup", "shortNames": ["pg", "pgs"]},
    "versions": [{"name": "v1alpha1", "served": true, "storage": true,
      "subresources": {"status": {}},
      "schema": {"openAPIV3Schema": {"type": "object", "properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
        "spec": {"type": "object", "properties": {
          "minMember": {"type": "integer", "format": "int32"},
          "minResources": {"type": "object", "additionalProperties": {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": true}},
          "scheduleTimeoutSeconds": {"type": "integer", "format": "int32"}}},
        "status": {"type": "object", "properties": {
          "failed": {"type": "integer", "format": "int32"}, "occupiedBy": {"type": "string"},
          "phase": {"type": "string"}, "running": {"type": "integer", "format": "int32"},
          "succeeded": {"type": "integer", "format": "int32"}}}}}}}]}
}"#;

#[tokio::test]
async fn custom_resources_are_pruned_to_their_schema() {
    let (cluster, client) = start(fast().without_groups(["scheduling.x-k8s.io"])).await;
    let crds = dynamic(
        &client,
        &resource(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
        ),
        None,
    );
    let crd: DynamicObject = serde_json::from_str(COSCHEDULING_CRD).unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let base = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups";
    let pg = json!({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "g"}, "spec": {"minMember": 2, "minResources": {"cpu": "1"}, "priority": 3}});
    let (status, body) = raw(
        &client,
        "POST",
        &format!("{base}?fieldValidation=Strict"),
        pg.clone(),
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .ends_with("strict decoding error: unknown field \"spec.priority\""),
        "{body}"
    );
    let (status, stored) = raw(&client, "POST", base, pg).await;
    assert_eq!(status, 200);
    assert_eq!(
        stored["spec"],
        json!({"minMember": 2, "minResources": {"cpu": "1"}})
    );

    // The status a pre-2024 coscheduling controller wrote: `scheduled` is
    // pruned, the rest kept.
    let mut with_status = stored.clone();
    with_status["status"] = json!({"phase": "Running", "running": 2, "scheduled": 2});
    let (status, updated) = raw(&client, "PUT", &format!("{base}/g/status"), with_status).await;
    assert_eq!(status, 200);
    assert_eq!(updated["status"], json!({"phase": "Running", "running": 2}));
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_crd_served_in_two_versions_stores_one_object() {
    let (cluster, client) = start(fast()).await;
    let crds = dynamic(
        &client,
        &resource(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
        ),
        None,
    );
    let schema = json!({"openAPIV3Schema": {"type": "object",
        "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}});
    let crd = object(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.io"},
        "spec": {"group": "example.io", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "conversion": {"strategy": "None"},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema},
                {"name": "v2", "served": true, "storage": false, "schema": schema}]}}));
    let created = crds.create(&PostParams::default(), &crd).await.unwrap();
    assert_eq!(created.data["status"]["storedVersions"], json!(["v1"]));
    let v1 = dynamic(
        &client,
        &resource("example.io", "v1", "Widget", "widgets"),
        Some("default"),
    );
    let v2 = dynamic(
        &client,
        &resource("example.io", "v2", "Widget", "widgets"),
        Some("default"),
    );
    v2.create(
        &PostParams::default(),
        &object(json!({"apiVersion": "example.io/v2", "kind": "Widget",
            "metadata": {"name": "w"}, "spec": {"size": 3}})),
    )
    .await
    .unwrap();
    let got = v1.get("w").await.unwrap();
    assert_eq!(got.types.unwrap().api_version, "example.io/v1");
    assert_eq!(got.data["spec"]["size"], 3);
    v1.delete("w", &DeleteParams::default()).await.unwrap();
    assert_eq!(code(v2.get("w").await).0, 404);
    cluster.shutdown().await.unwrap();
}
