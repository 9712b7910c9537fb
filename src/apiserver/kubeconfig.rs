//! Kubeconfig for a running simulator: the YAML file kubectl reads, and a
//! `kube::Config` built directly for in-process clients.

use std::net::SocketAddr;
use std::path::Path;

/// The context, cluster and user name used in generated kubeconfigs.
pub const CONTEXT: &str = "muster-sim";

/// A kubeconfig pointing at `http://addr` with no credentials.
pub fn render(addr: SocketAddr) -> String {
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
contexts:
- name: {CONTEXT}
  context:
    cluster: {CONTEXT}
    user: {CONTEXT}
    namespace: default
current-context: {CONTEXT}
preferences: {{}}
"
    )
}

pub fn write(addr: SocketAddr, path: &Path) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, render(addr))
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
    }
}
