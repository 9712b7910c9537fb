//! `muster run` refuses bad input at startup with a message that names it and
//! a non-zero exit code — before touching any cluster.

use std::process::Command;

fn muster(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_muster"))
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .expect("muster runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_configuration_names_the_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bad.yaml");
    std::fs::write(
        &path,
        "profiles:\n- schedulerName: muster\n  pluginConfig:\n  - name: GangScheduling\n    args: {permitWaitingTimeSeconds: 0}\n",
    )
    .expect("write config");
    let (code, stderr) = muster(&[
        "run",
        "--config",
        path.to_str().expect("utf-8 path"),
        "--kubeconfig",
        "/nonexistent",
    ]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("profiles[0].pluginConfig[0].args.permitWaitingTimeSeconds")
            && stderr.contains("must be between 1 and 86400"),
        "{stderr}"
    );
}

#[test]
fn missing_kubeconfig_is_a_clear_error() {
    let (code, stderr) = muster(&["run", "--kubeconfig", "/nonexistent/kubeconfig"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("/nonexistent/kubeconfig"), "{stderr}");
}

#[test]
fn unknown_flag_is_a_usage_error() {
    let (code, stderr) = muster(&["run", "--no-such-flag"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--no-such-flag"), "{stderr}");
}
