//! The API client every command uses (`muster run`, `muster load`): from a
//! kubeconfig file when one is given, else kube-rs inference.

use std::path::Path;

use anyhow::{Context, Result};

/// Resolves the API client: `--kubeconfig`, then the configuration's
/// `clientConnection.kubeconfig`, then kube-rs inference (in-cluster, $KUBECONFIG, ~/.kube/config).
pub async fn connect(kubeconfig: Option<&Path>) -> Result<kube::Client> {
    let config = match kubeconfig {
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
    kube::Client::try_from(config).context("building the API client")
}
