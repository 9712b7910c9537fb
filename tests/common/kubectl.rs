//! The real kubectl against one cluster: the runner the end-to-end tests
//! share (a manifest on stdin, the test's own kubeconfig, no in-cluster
//! environment leaking in).

use std::path::PathBuf;
use std::process::{Output, Stdio};

use muster::apiserver::SimCluster;
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use super::tools::kubectl_binary;

pub struct Kubectl {
    pub bin: PathBuf,
    pub kubeconfig: PathBuf,
    /// Holds a kubeconfig written for this runner.
    _dir: Option<tempfile::TempDir>,
}

impl Kubectl {
    /// The v1.37 kubectl with the given kubeconfig.
    pub fn new(kubeconfig: PathBuf) -> Self {
        Kubectl {
            bin: kubectl_binary(),
            kubeconfig,
            _dir: None,
        }
    }

    /// The v1.37 kubectl with a kubeconfig for `cluster`, written to a
    /// directory this runner keeps.
    pub fn for_cluster(cluster: &SimCluster) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let kubeconfig = dir.path().join("kubeconfig");
        cluster
            .write_kubeconfig(&kubeconfig)
            .expect("kubeconfig written");
        Kubectl {
            bin: kubectl_binary(),
            kubeconfig,
            _dir: Some(dir),
        }
    }

    /// Runs kubectl, `stdin` piped in when given.
    pub async fn output(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut child = Command::new(&self.bin)
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("kubectl runs");
        let mut input = child.stdin.take().expect("stdin piped");
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).await.expect("write stdin");
        }
        drop(input);
        child.wait_with_output().await.expect("kubectl finishes")
    }

    /// Runs kubectl with `stdin`; panics with its stderr on failure;
    /// returns stdout.
    pub async fn ok_with(&self, args: &[&str], stdin: &str) -> String {
        let out = self.output(args, Some(stdin)).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "kubectl {args:?} failed: {stderr}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs kubectl; panics with its stderr on failure; returns stdout.
    pub async fn ok(&self, args: &[&str]) -> String {
        self.ok_with(args, "").await
    }

    /// Runs kubectl with `stdin` expecting it to fail; returns stderr.
    pub async fn fails_with(&self, args: &[&str], stdin: &str) -> String {
        let out = self.output(args, Some(stdin)).await;
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            !out.status.success(),
            "kubectl {args:?} succeeded: {stdout}"
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// Runs kubectl expecting it to fail; returns stderr.
    pub async fn fails(&self, args: &[&str]) -> String {
        self.fails_with(args, "").await
    }

    pub async fn apply(&self, yaml: &str) {
        self.ok_with(&["apply", "-f", "-"], yaml).await;
    }

    /// `kubectl <args> -o json`, parsed.
    pub async fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&all).await).expect("kubectl prints json")
    }
}
