//! The real kubectl against the simulator's versions and validation: a
//! v1alpha2 PodGroup applied is the same object as v1beta1 (`kubectl get
//! podgroups.v1beta1.scheduling.k8s.io`), and a manifest with a field its
//! kind lacks is refused by `kubectl apply` (kubectl asks for
//! `fieldValidation=Strict`) or warned of with `--validate=warn`.
//!
//! kubectl comes from $MUSTER_KUBECTL or `.tools/kubectl`, fetched with
//! `tests/support/fetch-tools.sh` when missing.

use crate::common;
use std::path::{Path, PathBuf};

use muster::apiserver::SimCluster;

use crate::common::tools::kubectl_binary;

struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl {
    async fn run(&self, args: &[&str]) -> std::process::Output {
        tokio::process::Command::new(&self.bin)
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .kill_on_drop(true)
            .output()
            .await
            .expect("kubectl runs")
    }

    /// stdout of a successful run, and its stderr.
    async fn ok(&self, args: &[&str]) -> (String, String) {
        let out = self.run(args).await;
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "kubectl {args:?} failed: {stderr}");
        (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
    }

    async fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert!(
            !out.status.success(),
            "kubectl {args:?} unexpectedly succeeded"
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

const PODGROUP_V1ALPHA2: &str = "apiVersion: scheduling.k8s.io/v1alpha2
kind: PodGroup
metadata: {name: trainer, namespace: default}
spec:
  podGroupTemplateRef:
    workload: {workloadName: job, podGroupTemplateName: workers}
  schedulingPolicy:
    gang: {minCount: 4}
";

const POD_WITH_TYPO: &str = "apiVersion: v1
kind: Pod
metadata: {name: typo, namespace: default}
spec:
  schedulerName: muster
  containers: [{name: c, image: i}]
  nodeSelectr: {disk: ssd}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_sees_one_podgroup_in_every_version_and_strict_validation() {
    let bin = kubectl_binary();
    let cluster = SimCluster::start(common::fast()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig).unwrap();
    let k = Kubectl { bin, kubeconfig };

    let pg = write(dir.path(), "pg.yaml", PODGROUP_V1ALPHA2);
    k.ok(&["apply", "-f", &pg]).await;
    let (again, _) = k.ok(&["apply", "-f", &pg]).await;
    assert!(again.contains("unchanged"), "{again}");

    let get = |resource: &'static str, path: &'static str| {
        let k = &k;
        async move {
            k.ok(&[
                "get",
                resource,
                "trainer",
                "-o",
                &format!("jsonpath={path}"),
            ])
            .await
            .0
        }
    };
    let beta = "podgroups.v1beta1.scheduling.k8s.io";
    let alpha2 = "podgroups.v1alpha2.scheduling.k8s.io";
    let alpha3 = "podgroups.v1alpha3.scheduling.k8s.io";
    assert_eq!(
        get(beta, "{.apiVersion}").await,
        "scheduling.k8s.io/v1beta1"
    );
    assert_eq!(
        get(
            beta,
            "{.spec.workloadRef.workloadName}/{.spec.workloadRef.templateName}"
        )
        .await,
        "job/workers"
    );
    assert_eq!(
        get(alpha3, "{.spec.schedulingPolicy.gang.minCount}").await,
        "4"
    );
    assert_eq!(
        get(
            alpha2,
            "{.spec.podGroupTemplateRef.workload.podGroupTemplateName}"
        )
        .await,
        "workers"
    );
    assert_eq!(
        get(beta, "{.metadata.resourceVersion}").await,
        get(alpha2, "{.metadata.resourceVersion}").await
    );
    k.ok(&["delete", beta, "trainer"]).await;
    let gone = k.fails(&["get", alpha2, "trainer"]).await;
    assert!(gone.contains("NotFound"), "{gone}");

    // kubectl's default validation is Strict: the typo is refused with the
    // server's words.
    let typo = write(dir.path(), "typo.yaml", POD_WITH_TYPO);
    let refused = k.fails(&["apply", "-f", &typo]).await;
    assert!(
        refused.contains(
            "Pod in version \"v1\" cannot be handled as a Pod: strict decoding error: unknown field \"spec.nodeSelectr\""
        ),
        "{refused}"
    );
    // --validate=warn: created, the field dropped, kubectl prints the warning.
    let (_, warned) = k.ok(&["create", "--validate=warn", "-f", &typo]).await;
    assert!(
        warned.contains("Warning: unknown field \"spec.nodeSelectr\""),
        "{warned}"
    );
    let (spec, _) = k
        .ok(&["get", "pod", "typo", "-o", "jsonpath={.spec}"])
        .await;
    assert!(
        !spec.contains("nodeSelectr") && spec.contains("muster"),
        "{spec}"
    );
    cluster.shutdown().await.unwrap();
}
