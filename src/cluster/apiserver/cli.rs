//! `muster cluster`: the command-line face of the simulator. Parses flags
//! into a [`SimConfig`], serves until SIGINT/SIGTERM, and prints the server
//! URL as the first line of stdout so scripts can read it.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

use super::fault::{FaultRule, parse_duration};
use super::{SimCluster, SimConfig, TokenUser};
use crate::kwok::devices::DeviceTemplate;
use crate::kwok::templates;

/// Serve a simulated Kubernetes API with kwok-style fake nodes.
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterArgs {
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Write a kubeconfig for the server here.
    #[arg(long)]
    pub kubeconfig_out: Option<PathBuf>,
    /// Nodes to create (from the default template, or overriding the count of
    /// a single-template --node-template file).
    #[arg(long)]
    pub nodes: Option<usize>,
    /// YAML file of node templates (see docs/simulated-cluster.md).
    #[arg(long)]
    pub node_template: Option<PathBuf>,
    /// DRA devices per node (driver gpu.kwok.muster.dev, published as one
    /// ResourceSlice per node) for every template that declares none; a
    /// template's `devices:` says more (model, memory, PCIe roots, cliques).
    #[arg(long)]
    pub devices_per_node: Option<usize>,
    /// Fault rule, e.g. 'verb=create,resource=pods/binding,rate=0.05,code=500'
    /// (repeatable).
    #[arg(long = "fault", value_parser = parse_fault)]
    pub faults: Vec<FaultRule>,
    /// API group not to serve, e.g. scheduling.x-k8s.io, or one version of
    /// it, e.g. scheduling.k8s.io/v1beta1 (repeatable).
    #[arg(long = "without-group")]
    pub without_groups: Vec<String>,
    /// Delay from binding to Running, e.g. 100ms, 2s.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    pub pod_start_delay: Duration,
    /// Do not record a `Started` event per pod.
    #[arg(long)]
    pub no_pod_events: bool,
    /// Change events kept per resource for watch resumption (older → 410 Gone).
    #[arg(long, default_value_t = 100_000)]
    pub history: usize,
    /// A user that authenticates with a bearer token, for TokenReview:
    /// 'name=token[,group...]'; 'system:serviceaccount:<ns>:<sa>=token' is
    /// that ServiceAccount (repeatable; see docs/simulated-cluster.md).
    #[arg(long = "token-user", value_parser = parse_token_user)]
    pub token_users: Vec<TokenUser>,
    /// Longest grace a deleted pod on a node gets before the fake kubelet
    /// removes it, e.g. 0s, 2s (load tests); unset honours each pod's
    /// gracePeriodSeconds / terminationGracePeriodSeconds.
    #[arg(long, value_parser = parse_duration)]
    pub max_termination_grace: Option<Duration>,
    /// YAML file of node pools the simulated cluster-autoscaler grows for
    /// ProvisioningRequests (`autoscaling.x-k8s.io/v1`, served only with
    /// pools; see docs/simulate.md).
    #[arg(long)]
    pub node_pools: Option<PathBuf>,
    /// How long a provisioned ProvisioningRequest's capacity stays booked,
    /// e.g. 10m, 30s.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub booking: Duration,
}

fn parse_token_user(s: &str) -> Result<TokenUser, String> {
    s.parse()
}

fn parse_fault(s: &str) -> Result<FaultRule, String> {
    s.parse()
}

impl ClusterArgs {
    pub fn to_config(&self) -> anyhow::Result<SimConfig> {
        let mut node_templates = match &self.node_template {
            Some(path) => templates::load(path).map_err(anyhow::Error::msg)?,
            None => vec![templates::NodeTemplate::default()],
        };
        match (self.nodes, node_templates.as_mut_slice()) {
            (Some(n), [only]) => only.count = n,
            (Some(_), _) => {
                anyhow::bail!("--nodes needs a template file with exactly one template")
            }
            (None, _) if self.node_template.is_none() => node_templates.clear(),
            (None, _) => {}
        }
        if let Some(count) = self.devices_per_node {
            let devices = DeviceTemplate::with_count(count);
            devices.check().map_err(anyhow::Error::msg)?;
            for t in node_templates.iter_mut().filter(|t| t.devices.is_none()) {
                t.devices = Some(devices.clone());
            }
        }
        Ok(SimConfig {
            listen: self.listen,
            node_templates,
            without_groups: self.without_groups.iter().cloned().collect(),
            faults: self.faults.clone(),
            pod_start_delay: self.pod_start_delay,
            pod_events: !self.no_pod_events,
            history: self.history,
            token_users: self.token_users.clone(),
            max_termination_grace: self.max_termination_grace,
            node_pools: match &self.node_pools {
                Some(path) => crate::kwok::pools::load(path).map_err(anyhow::Error::msg)?,
                None => Vec::new(),
            },
            booking: self.booking,
            ..SimConfig::default()
        })
    }
}

/// Runs `muster cluster` until SIGINT or SIGTERM.
pub async fn run(args: ClusterArgs) -> anyhow::Result<()> {
    let cluster = SimCluster::start(args.to_config()?).await?;
    if let Some(path) = &args.kubeconfig_out {
        cluster
            .write_kubeconfig(path)
            .with_context(|| format!("writing kubeconfig to {}", path.display()))?;
    }
    let mut stdout = std::io::stdout();
    writeln!(stdout, "http://{}", cluster.addr())?;
    stdout.flush()?;
    wait_for_signal().await?;
    tracing::info!("shutting down");
    cluster.shutdown().await
}

async fn wait_for_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ClusterArgs,
    }

    #[test]
    fn flags_build_a_config() {
        let cli = Cli::try_parse_from([
            "x",
            "--nodes",
            "3",
            "--fault",
            "resource=pods,latency-ms=5",
            "--fault",
            "watch-close-every=1s",
            "--without-group",
            "scheduling.volcano.sh",
            "--without-group",
            "scheduling.k8s.io/v1beta1",
            "--token-user",
            "alice=t0k,dev",
            "--max-termination-grace",
            "2s",
        ])
        .unwrap();
        let config = cli.args.to_config().unwrap();
        assert_eq!(config.node_templates[0].count, 3);
        assert_eq!(config.faults.len(), 2);
        assert_eq!(config.max_termination_grace, Some(Duration::from_secs(2)));
        assert!(config.without_groups.contains("scheduling.volcano.sh"));
        assert!(config.without_groups.contains("scheduling.k8s.io/v1beta1"));
        assert_eq!(
            config.token_users,
            [TokenUser::new("alice", "t0k", &["dev"])]
        );
    }

    #[test]
    fn devices_per_node_reach_the_templates() {
        let cli = Cli::try_parse_from(["x", "--nodes", "2", "--devices-per-node", "8"]).unwrap();
        let config = cli.args.to_config().unwrap();
        let d = config.node_templates[0].devices.as_ref().unwrap();
        assert_eq!((d.count, d.driver.as_str()), (8, "gpu.kwok.muster.dev"));
        let cli = Cli::try_parse_from(["x", "--nodes", "2", "--devices-per-node", "0"]).unwrap();
        assert!(cli.args.to_config().is_err());
    }

    #[test]
    fn bad_fault_is_a_clear_error() {
        let err = Cli::try_parse_from(["x", "--fault", "rate=7"])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("between 0 and 1"), "{err}");
    }
}
