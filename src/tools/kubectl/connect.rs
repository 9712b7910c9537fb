//! How the plugin reaches the cluster and the scheduler: the user's
//! kubeconfig (as kubectl reads it: `--kubeconfig`, `KUBECONFIG`,
//! `~/.kube/config`, `--context`), and the scheduler's secure endpoint,
//! named with `--scheduler URL` or found through its Service.
//!
//! The scheduler is asked with the user's own credentials (the kubeconfig's
//! token or exec plugin): it checks them with a TokenReview and asks RBAC
//! whether the user may `get` the non-resource URL `/explain`.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use k8s_openapi::api::core::v1::Service;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

/// The annotation on the scheduler's Service naming where the endpoint is
/// reachable from outside the cluster (an Ingress, a LoadBalancer, a
/// tunnel), when the Service's cluster DNS name is not.
pub const ENDPOINT_ANNOTATION: &str = "muster.dev/endpoint";
/// The plugin's `User-Agent` on every request.
pub const USER_AGENT: &str = concat!("kubectl-muster/", env!("CARGO_PKG_VERSION"));
/// The Service port the endpoint is served on (`deploy/manifests/service.yaml`).
const SERVICE_PORT_NAME: &str = "metrics";

/// The cluster to read (the kubeconfig, as kubectl's flags name it).
#[derive(Args, Debug, Clone, Default)]
pub struct ClusterArgs {
    /// The kubeconfig file (default: KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// The namespace of the target (default: the context's).
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
}

/// Where the scheduler's endpoint is, and how to trust it.
#[derive(Args, Debug, Clone, Default)]
pub struct SchedulerArgs {
    /// The scheduler's endpoint (https://HOST:PORT). Default: found through
    /// the Service --scheduler-service in --scheduler-namespace. Also
    /// MUSTER_SCHEDULER.
    #[arg(long, env = "MUSTER_SCHEDULER", value_name = "URL")]
    pub scheduler: Option<String>,
    #[arg(long, default_value = "muster-system", value_name = "NAMESPACE")]
    pub scheduler_namespace: String,
    #[arg(long, default_value = "muster", value_name = "NAME")]
    pub scheduler_service: String,
    /// A PEM file of the CA that signed the scheduler's serving
    /// certificate (default: the kubeconfig cluster's CA).
    #[arg(long, value_name = "FILE")]
    pub scheduler_ca: Option<PathBuf>,
    /// Do not verify the scheduler's serving certificate (it is
    /// self-signed unless one was given to it).
    #[arg(long)]
    pub scheduler_insecure_skip_tls_verify: bool,
}

/// The user's configuration, as kubectl would load it.
pub async fn user_config(args: &ClusterArgs) -> Result<Config> {
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..KubeConfigOptions::default()
    };
    let config = match &args.kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            Config::from_custom_kubeconfig(kc, &options).await?
        }
        None if args.context.is_some() => Config::from_kubeconfig(&options).await?,
        None => Config::infer().await?,
    };
    let mut config = config;
    // Names the plugin in the API server's audit log.
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(USER_AGENT),
    ));
    Ok(config)
}

/// The namespace a target is read in.
pub fn namespace(args: &ClusterArgs, config: &Config) -> String {
    args.namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone())
}

/// The scheduler's endpoint URL: the flag, else the Service's annotation,
/// else its cluster DNS name and port.
pub async fn scheduler_url(args: &SchedulerArgs, client: &Client) -> Result<String> {
    if let Some(url) = &args.scheduler {
        return Ok(url.trim_end_matches('/').to_string());
    }
    let (ns, name) = (&args.scheduler_namespace, &args.scheduler_service);
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    let svc = services.get(name).await.with_context(|| {
        format!("finding the scheduler's Service {ns}/{name} (or name it with --scheduler URL)")
    })?;
    if let Some(url) = svc
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ENDPOINT_ANNOTATION))
    {
        return Ok(url.trim_end_matches('/').to_string());
    }
    let port = svc
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .and_then(|ports| {
            ports
                .iter()
                .find(|p| p.name.as_deref() == Some(SERVICE_PORT_NAME))
                .or(ports.first())
        })
        .map(|p| p.port);
    let Some(port) = port else {
        bail!("Service {ns}/{name} has no port {SERVICE_PORT_NAME:?}");
    };
    Ok(format!("https://{name}.{ns}.svc:{port}"))
}

/// A client for the scheduler's endpoint carrying the user's credentials.
pub fn scheduler_client(args: &SchedulerArgs, user: &Config, url: &str) -> Result<Client> {
    let mut config = user.clone();
    config.cluster_url = url
        .parse()
        .with_context(|| format!("the scheduler URL {url:?}"))?;
    // The cluster's server name does not name the scheduler.
    config.tls_server_name = None;
    if let Some(path) = &args.scheduler_ca {
        let pem = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        config.root_cert = Some(pem_certificates(&pem)?);
        config.root_cert_file = None;
    }
    config.accept_invalid_certs = args.scheduler_insecure_skip_tls_verify;
    config.read_timeout = Some(std::time::Duration::from_secs(10));
    config.connect_timeout = Some(std::time::Duration::from_secs(5));
    Ok(Client::try_from(config)?)
}

/// The DER certificates of a PEM bundle.
fn pem_certificates(pem: &[u8]) -> Result<Vec<Vec<u8>>> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let certs: Vec<Vec<u8>> = CertificateDer::pem_slice_iter(pem)
        .map(|c| c.map(|c| c.to_vec()))
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("the CA file: {e}"))?;
    if certs.is_empty() {
        bail!("the CA file holds no certificate");
    }
    Ok(certs)
}
