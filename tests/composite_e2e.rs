//! End-to-end: CompositePodGroup (`scheduling.k8s.io/v1alpha3`) hierarchies
//! against the simulated cluster: a composite of two child PodGroups is
//! placed whole, or not at all.

use crate::e2e::*;
use futures::StreamExt;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::watcher;
use serde_json::{Value, json};

fn composite_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("scheduling.k8s.io", "v1alpha3", "CompositePodGroup"),
        "compositepodgroups",
    )
}

async fn create(env: &Env, resource: &ApiResource, obj: Value) {
    let obj: DynamicObject = serde_json::from_value(obj).expect("object json");
    let api: Api<DynamicObject> = Api::namespaced_with(env.client.clone(), "default", resource);
    api.create(&PostParams::default(), &obj)
        .await
        .expect("create");
}

/// A gang composite `job` (minGroupCount 2, gang timeout 2 s) with child
/// PodGroups `a` and `b` of two members each, every member asking `cpu`.
async fn composite_of_two(env: &Env, cpu: &str) {
    create(
        env,
        &composite_resource(),
        json!({"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
            "metadata": {"name": "job", "annotations": {"muster.dev/schedule-timeout-seconds": "2"}},
            "spec": {"schedulingPolicy": {"gang": {"minGroupCount": 2}},
                     "workloadRef": {"templateName": "job"}}}),
    )
    .await;
    for child in ["a", "b"] {
        create(
            env,
            &podgroup_resource(),
            json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                "metadata": {"name": child},
                "spec": {"parentCompositePodGroupName": "job",
                         "schedulingPolicy": {"gang": {"minCount": 2}}}}),
        )
        .await;
    }
    let pods = ["a", "b"]
        .iter()
        .flat_map(|g| (0..2).map(move |i| pod(&format!("{g}-{i}"), cpu, "muster", Some(g))))
        .collect();
    create_pods(env, "default", pods).await;
}

/// Watches the composite until its `CompositePodGroupInitiallyScheduled`
/// condition satisfies `pred`.
async fn wait_composite_condition<F>(env: &Env, mut pred: F) -> Value
where
    F: FnMut(&Value) -> bool,
{
    let api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), "default", &composite_resource());
    let cfg = watcher::Config::default().fields("metadata.name=job");
    let mut stream = Box::pin(watcher::watcher(api, cfg));
    let wait = async {
        while let Some(ev) = stream.next().await {
            if let watcher::Event::Apply(o) | watcher::Event::InitApply(o) =
                ev.expect("composite watch")
            {
                let cond = o.data["status"]["conditions"]
                    .as_array()
                    .and_then(|cs| {
                        cs.iter()
                            .find(|c| c["type"] == "CompositePodGroupInitiallyScheduled")
                    })
                    .cloned();
                if let Some(c) = cond
                    && pred(&c)
                {
                    return c;
                }
            }
        }
        panic!("composite watch ended");
    };
    tokio::time::timeout(HANG_GUARD, wait)
        .await
        .expect("condition reached before the hang guard")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_composite_that_fits_is_bound_whole() {
    let env = cluster(vec![nodes(4, "4")]).await;
    let daemon = daemon(&env, test_config("")).await;
    composite_of_two(&env, "2").await;

    let pods = wait_pods(&env, "default", |p| {
        names_bound(p, "a-").len() == 2 && names_bound(p, "b-").len() == 2
    })
    .await;
    assert_eq!(
        names_bound(&pods, "a-").len() + names_bound(&pods, "b-").len(),
        4
    );
    let cond = wait_composite_condition(&env, |c| c["status"] == "True").await;
    assert_eq!(cond["reason"], "Scheduled");
    for child in ["a", "b"] {
        wait_podgroup_condition(&env, "default", child, |c| c["status"] == "True").await;
    }
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_composite_that_does_not_fit_binds_nothing() {
    // Two nodes of 4 cores, four members of 3: either child alone would
    // fit, the composite (both children) does not.
    let env = cluster(vec![nodes(2, "4")]).await;
    let daemon = daemon(&env, test_config("")).await;
    composite_of_two(&env, "3").await;

    let cond = wait_composite_condition(&env, |c| c["reason"] == "Unschedulable").await;
    assert!(
        cond["message"]
            .as_str()
            .is_some_and(|m| m.contains("CompositePodGroup default/job")),
        "{cond}"
    );
    let e = wait_event(&env, "default", |e| {
        e.involved_object
            .name
            .as_deref()
            .is_some_and(|n| n.starts_with("a-"))
            && e.reason.as_deref() == Some("FailedScheduling")
    })
    .await;
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    let pods = list_pods(&env, "default").await;
    assert!(
        names_bound(&pods, "a-").is_empty() && names_bound(&pods, "b-").is_empty(),
        "no member of an unfit composite is bound"
    );
    daemon.shutdown().await.expect("clean shutdown");
}
