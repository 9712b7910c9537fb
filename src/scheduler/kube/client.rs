//! The API client every command uses (`muster run`, `muster load`): from a
//! kubeconfig file when one is given, else kube-rs inference.

use std::path::Path;

use anyhow::{Context, Result};

/// The `User-Agent` of the scheduler's requests (`muster/<version>`), as
/// kube-scheduler sends `kube-scheduler/<version>`: audit logs and API
/// priority-and-fairness rules can tell its traffic apart.
pub const SCHEDULER_USER_AGENT: &str = concat!("muster/", env!("CARGO_PKG_VERSION"));

/// The `User-Agent` of `muster load`'s requests.
pub const LOAD_USER_AGENT: &str = concat!("muster-load/", env!("CARGO_PKG_VERSION"));

/// Resolves the API client: `--kubeconfig`, then the configuration's
/// `clientConnection.kubeconfig`, then kube-rs inference (in-cluster, $KUBECONFIG, ~/.kube/config).
pub async fn connect(kubeconfig: Option<&Path>, user_agent: &'static str) -> Result<kube::Client> {
    let mut config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("using kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("no kubeconfig given and none could be inferred")?,
    };
    config.headers.push((
        axum::http::header::USER_AGENT,
        axum::http::HeaderValue::from_static(user_agent),
    ));
    kube::Client::try_from(config).context("building the API client")
}
