//! The real kubectl and helm binaries: `$MUSTER_KUBECTL` / `$MUSTER_HELM`, else
//! `.tools/…`, fetched with `tests/support/fetch-tools.sh` when missing.

use std::path::PathBuf;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tool(env: &str, name: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(env)
        .map(PathBuf::from)
        .filter(|p| p.exists())
    {
        return p;
    }
    let local = root().join(".tools").join(name);
    if !local.exists() {
        let status = std::process::Command::new("bash")
            .arg(root().join("tests/support/fetch-tools.sh"))
            .status()
            .expect("bash runs fetch-tools.sh");
        assert!(status.success(), "fetching {name} failed");
    }
    local
}

pub fn kubectl_binary() -> PathBuf {
    tool("MUSTER_KUBECTL", "kubectl")
}

pub fn helm_binary() -> PathBuf {
    tool("MUSTER_HELM", "helm")
}

/// Runs a tool to completion; panics with its stderr on failure; returns stdout.
pub fn run(bin: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new(bin)
        .args(args)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .unwrap_or_else(|e| panic!("{} runs: {e}", bin.display()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{} {args:?} failed: {stderr}",
        bin.display()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs a tool expecting failure; returns its stderr.
pub fn fails(bin: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new(bin)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{} runs: {e}", bin.display()));
    assert!(
        !out.status.success(),
        "{} {args:?} unexpectedly succeeded",
        bin.display()
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}
