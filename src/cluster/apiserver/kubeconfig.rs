//! Kubeconfig for a running simulator: the YAML file kubectl reads, and a
//! `kube::Config` built directly for in-process clients. Token users
//! ([`super::authn`]) are added as users with a context each, named after
//! them; the current context stays the credential-less `muster-sim`.

use std::net::SocketAddr;
use std::path::Path;

use super::authn::TokenUser;

/// The context, cluster and user name used in generated kubeconfigs.
pub const CONTEXT: &str = "muster-sim";

/// A kubeconfig pointing at `http://addr` with no credentials.
pub fn render(addr: SocketAddr) -> String {
    render_with_users(addr, &[])
}

/// A kubeconfig pointing at `http://addr`: the credential-less current
/// context, and one user and context per token user.
pub fn render_with_users(addr: SocketAddr, users: &[TokenUser]) -> String {
    // JSON strings are YAML strings: names and tokens need no escaping rules of their own.
    let q = |s: &str| serde_json::Value::from(s).to_string();
    let mut extra_users = String::new();
    let mut extra_contexts = String::new();
    for u in users {
        let name = q(&u.name);
        extra_users.push_str(&format!(
            "- name: {name}\n  user:\n    token: {}\n",
            q(&u.token)
        ));
        extra_contexts.push_str(&format!(
            "- name: {name}\n  context:\n    cluster: {CONTEXT}\n    user: {name}\n    namespace: default\n"
        ));
    }
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: {CONTEXT}
  cluster:
    server: http://{addr}
users:
- name: {CONTEXT}
  user: {{}}
{extra_users}contexts:
- name: {CONTEXT}
  context:
    cluster: {CONTEXT}
    user: {CONTEXT}
    namespace: default
{extra_contexts}current-context: {CONTEXT}
preferences: {{}}
"
    )
}

pub fn write(addr: SocketAddr, path: &Path) -> std::io::Result<()> {
    write_with_users(addr, &[], path)
}

pub fn write_with_users(addr: SocketAddr, users: &[TokenUser], path: &Path) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, render_with_users(addr, users))
}

/// A kube-rs configuration for the simulator at `addr`.
pub fn config(addr: SocketAddr) -> kube::Config {
    let url = format!("http://{addr}")
        .parse()
        .unwrap_or_else(|_| unreachable!("a socket address always forms a valid URL"));
    let mut config = kube::Config::new(url);
    config.default_namespace = "default".into();
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_rs_accepts_the_rendered_file() {
        let text = render("127.0.0.1:6443".parse().unwrap());
        let kc = kube::config::Kubeconfig::from_yaml(&text).unwrap();
        assert_eq!(kc.current_context.as_deref(), Some(CONTEXT));
        assert_eq!(
            kc.clusters[0].cluster.as_ref().unwrap().server.as_deref(),
            Some("http://127.0.0.1:6443")
        );
        let users = [TokenUser::new(
            "system:serviceaccount:monitoring:prom",
            "t\"ok",
            &[],
        )];
        let text = render_with_users("127.0.0.1:6443".parse().unwrap(), &users);
        let kc = kube::config::Kubeconfig::from_yaml(&text).unwrap();
        assert_eq!(kc.current_context.as_deref(), Some(CONTEXT));
        assert!(kc.auth_infos.iter().any(|u| u.name == users[0].name));
        assert!(kc.contexts.iter().any(|c| c.name == users[0].name));
        let raw: serde_json::Value = serde_norway::from_str(&text).unwrap();
        assert_eq!(raw["users"][1]["user"]["token"], "t\"ok");
    }
}
