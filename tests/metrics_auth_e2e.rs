//! End-to-end: nobody reads what they may not. `muster cluster` in-process
//! with token users and RBAC objects, a daemon serving HTTPS (self-signed)
//! with delegated authentication and authorization against it, and requests
//! with an allowed token (200), a token without the permission (403), no or
//! a wrong token (401), and the probes with none (200).

use crate::e2e;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use muster::apiserver::{SimCluster, SimConfig, TokenUser};
use muster::daemon::{DaemonOptions, ServingOptions};
use serde_json::{Value, json};

use crate::e2e::{Env, https_get, test_config, wait_ready_https};

/// Prometheus' ServiceAccount, as the chart's ServiceMonitor scrapes.
const PROMETHEUS: &str = "system:serviceaccount:monitoring:prometheus";
const PROM_TOKEN: &str = "prometheus-token";
/// Authenticated, but RBAC grants it nothing on the scheduler.
const EVE_TOKEN: &str = "eve-token";
/// Used only once the API server is gone: nothing about it is cached.
const LATE_TOKEN: &str = "late-token";

async fn apply(client: &kube::Client, kind: &str, plural: &str, obj: Value) {
    let gvk = GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", kind);
    let ar = ApiResource::from_gvk_with_plural(&gvk, plural);
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let obj: DynamicObject = serde_json::from_value(obj).expect("RBAC object");
    api.create(&PostParams::default(), &obj)
        .await
        .expect("create RBAC object");
}

/// The chart's metrics-reader role (deploy/manifests/rbac.yaml), and one for
/// `/debug/*`, both bound to Prometheus; eve is bound to a role that grants
/// only pods.
async fn rbac(client: &kube::Client) {
    let manifests = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/manifests/rbac.yaml"
    ))
    .expect("rbac.yaml");
    let reader = manifests
        .split("\n---")
        .map(|doc| serde_norway::from_str::<Value>(doc).expect("YAML"))
        .find(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == "muster-metrics-reader")
        .expect("the kustomize base has a muster-metrics-reader ClusterRole");
    apply(client, "ClusterRole", "clusterroles", reader).await;
    apply(
        client,
        "ClusterRole",
        "clusterroles",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "muster-debug-reader"},
               "rules": [{"nonResourceURLs": ["/debug/*"], "verbs": ["get"]}]}),
    )
    .await;
    apply(
        client,
        "ClusterRole",
        "clusterroles",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "pod-reader"},
               "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]}),
    )
    .await;
    let prometheus =
        json!([{"kind": "ServiceAccount", "name": "prometheus", "namespace": "monitoring"}]);
    for (name, role, subjects) in [
        (
            "prometheus-metrics",
            "muster-metrics-reader",
            prometheus.clone(),
        ),
        ("prometheus-debug", "muster-debug-reader", prometheus),
        (
            "eve-pods",
            "pod-reader",
            json!([{"kind": "User", "name": "eve", "apiGroup": "rbac.authorization.k8s.io"}]),
        ),
    ] {
        apply(
            client,
            "ClusterRoleBinding",
            "clusterrolebindings",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": name},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                   "subjects": subjects}),
        )
        .await;
    }
}

/// `kubectl auth can-i get /metrics` as each token user: the cluster answers
/// a SelfSubjectAccessReview for the requester from the same RBAC.
async fn can_i_read_metrics(env: &Env) {
    use k8s_openapi::api::authorization::v1::{
        NonResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("kubeconfig");
    env.cluster.write_kubeconfig(&path).expect("kubeconfig");
    for (context, allowed) in [(PROMETHEUS, true), ("eve", false)] {
        let kc = kube::config::Kubeconfig::read_from(&path).expect("read kubeconfig");
        let options = kube::config::KubeConfigOptions {
            context: Some(context.to_string()),
            ..Default::default()
        };
        let config = kube::Config::from_custom_kubeconfig(kc, &options)
            .await
            .expect("context");
        let client = kube::Client::try_from(config).expect("client");
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some("/metrics".into()),
                    verb: Some("get".into()),
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let answer = Api::<SelfSubjectAccessReview>::all(client)
            .create(&PostParams::default(), &review)
            .await
            .expect("self review");
        let status = answer.status.expect("status");
        assert_eq!(status.allowed, allowed, "{context}: {status:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_debug_need_a_token_rbac_allows() {
    let config = SimConfig::default()
        .with_templates(vec![e2e::nodes(1, "4")])
        .record_requests(true)
        .with_token_user(TokenUser::new(PROMETHEUS, PROM_TOKEN, &[]))
        .with_token_user(TokenUser::new("eve", EVE_TOKEN, &["dev"]))
        .with_token_user(TokenUser::new("late", LATE_TOKEN, &[]));
    let cluster = SimCluster::start(config).await.expect("cluster starts");
    let env = Env {
        client: cluster.client().expect("client"),
        cluster,
    };
    rbac(&env.client).await;
    can_i_read_metrics(&env).await;
    // A tenant's pod, whose name /debug/queue would show.
    e2e::create_pods(
        &env,
        "default",
        vec![e2e::pod("tenant-secret-0", "1", "muster", None)],
    )
    .await;

    let mut opts = DaemonOptions::new(test_config(""));
    opts.serving = ServingOptions::secure();
    let daemon = muster::daemon::start(env.client.clone(), opts)
        .await
        .expect("daemon starts");
    // Probes need no token.
    wait_ready_https(&daemon).await;
    let addr = daemon.http_addr;
    for path in ["/readyz", "/livez", "/healthz"] {
        assert_eq!(https_get(addr, path, None).await.0, 200, "{path}");
    }
    e2e::wait_pods(&env, "default", |p| {
        e2e::names_bound(p, "tenant-").len() == 1
    })
    .await;

    let (code, body) = https_get(addr, "/metrics", Some(PROM_TOKEN)).await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("scheduler_schedule_attempts_total"), "{body}");
    let (code, body) = https_get(addr, "/debug/queue", Some(PROM_TOKEN)).await;
    assert_eq!(code, 200, "{body}");

    for path in ["/metrics", "/debug/queue", "/debug/leader"] {
        let (code, body) = https_get(addr, path, Some(EVE_TOKEN)).await;
        assert_eq!(code, 403, "{path}: {body}");
        assert!(body.contains("User \"eve\" cannot get path"), "{body}");
        for token in [None, Some("not-a-token")] {
            let (code, body) = https_get(addr, path, token).await;
            assert_eq!(code, 401, "{path} with {token:?}: {body}");
            assert!(!body.contains("tenant-secret"), "{body}");
        }
    }

    // `muster load --scheduler-metrics https://... --scheduler-token-file`
    // scrapes the same way.
    let dir = tempfile::tempdir().expect("temp dir");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{PROM_TOKEN}\n")).expect("token file");
    let access = muster::load::probe::Access {
        token_file: Some(token_file),
        ca_file: None,
    };
    let source =
        muster::load::probe::Source::metrics_with(&format!("https://{addr}/metrics"), &access)
            .expect("https source");
    let reading = source.read().await.expect("scrape with the token");
    assert!(reading.attempts.unwrap_or(0.0) >= 1.0, "{reading:?}");
    let anonymous = muster::load::probe::Source::metrics(&format!("https://{addr}/metrics"))
        .expect("https source");
    let err = anonymous.read().await.expect_err("no token, no metrics");
    assert!(format!("{err:#}").contains("401"), "{err:#}");

    // Plain HTTP on the secure port gets no page.
    let plain = tokio::time::timeout(e2e::HANG_GUARD, plain_get(addr))
        .await
        .expect("answer");
    assert!(!plain.starts_with("HTTP/1.1 200"), "{plain}");

    // The daemon asked the cluster, with the calls its RBAC grants.
    let calls: Vec<(String, String, String)> = env
        .cluster
        .requests()
        .into_iter()
        .map(|c| (c.verb, c.group, c.resource))
        .collect();
    for needed in [
        ("create", "authentication.k8s.io", "tokenreviews"),
        ("create", "authorization.k8s.io", "subjectaccessreviews"),
    ] {
        let n = (
            needed.0.to_string(),
            needed.1.to_string(),
            needed.2.to_string(),
        );
        assert!(calls.contains(&n), "{needed:?} not in {calls:?}");
    }

    // Reviews that cannot be made refuse (500): never allowed on error.
    let Env { cluster, client } = env;
    drop(client);
    cluster.shutdown().await.expect("cluster stops");
    let (code, body) = https_get(addr, "/metrics", Some(LATE_TOKEN)).await;
    assert_eq!(code, 500, "{body}");
    assert_eq!(https_get(addr, "/readyz", None).await.0, 200);
    daemon.shutdown().await.expect("clean shutdown");
}

/// A plain-HTTP GET; returns whatever came back (maybe nothing).
async fn plain_get(addr: std::net::SocketAddr) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let _ = s
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: muster\r\nConnection: close\r\n\r\n")
        .await;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    String::from_utf8_lossy(&out).into_owned()
}
