//! `muster simulate`: the simulated cluster and the scheduler daemon in one
//! process, a scenario applied to them through the API, progress on stderr
//! and a summary table on stdout. Exits non-zero when an expectation of the
//! scenario does not hold. Guide: `docs/simulate.md`.
//!
//! [`Simulation`] is the in-process cluster and daemon (used by tests too);
//! the scenario itself runs through `crate::runner`, as with `muster load`.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::runner::{self, Lines, RunOptions, Summary, summary};
use crate::scenario::Scenario;
use muster_cluster::apiserver::{SimCluster, SimConfig};
use muster_core::config::SchedulerConfig;
use muster_scheduler::daemon::{self, DaemonOptions, RunningDaemon, ServingOptions};

/// Run a scenario on the embedded simulated cluster with the scheduler.
#[derive(Debug, Clone, clap::Args)]
pub struct SimulateArgs {
    /// Scenario file (default: the built-in demo, config/scenarios/demo.yaml).
    #[arg(long)]
    pub scenario: Option<PathBuf>,
    /// Keep the cluster and the scheduler running after the scenario, until
    /// SIGINT or SIGTERM, so kubectl can look around.
    #[arg(long)]
    pub serve: bool,
    /// Where --serve writes the kubeconfig.
    #[arg(long, default_value = "muster-sim.kubeconfig")]
    pub kubeconfig_out: PathBuf,
}

/// The simulated cluster and a scheduler daemon attached to it.
pub struct Simulation {
    pub cluster: SimCluster,
    pub daemon: RunningDaemon,
    config: SchedulerConfig,
}

impl Simulation {
    /// Starts the cluster (no nodes: scenarios create their own) and the
    /// daemon; `config`'s leader election is turned off.
    pub async fn start(sim: SimConfig, mut config: SchedulerConfig) -> Result<Simulation> {
        config.leader_election.enabled = false;
        let cluster = SimCluster::start(sim)
            .await
            .context("starting the simulated cluster")?;
        let client = cluster.client()?;
        let mut opts = DaemonOptions::new(config.clone());
        // Local use: the endpoints are on a loopback port, plain HTTP with
        // no authentication (`muster run --insecure-serving`).
        opts.serving = ServingOptions::Insecure;
        let daemon = daemon::start(client, opts)
            .await
            .context("starting the scheduler")?;
        Ok(Simulation {
            cluster,
            daemon,
            config,
        })
    }

    /// Applies `scenario` and follows it to the end.
    pub async fn run(
        &self,
        scenario: &Scenario,
        progress: &mut (dyn Write + Send),
    ) -> Result<Summary> {
        let profile = self
            .config
            .profile(&scenario.scheduler_name)
            .with_context(|| {
                format!(
                    "scenario {}: schedulerName {:?} is not served by this scheduler",
                    scenario.name, scenario.scheduler_name
                )
            })?;
        let opts = RunOptions {
            gang: profile.gang.clone().unwrap_or_default(),
            concurrency: 1,
            progress: &mut Lines::new(progress),
        };
        Ok(runner::run(&self.cluster.client()?, scenario, opts)
            .await?
            .summary)
    }

    /// Stops the daemon, then the cluster.
    pub async fn shutdown(self) -> Result<()> {
        self.daemon.shutdown().await?;
        self.cluster.shutdown().await
    }
}

/// `muster simulate`.
pub async fn run(args: SimulateArgs) -> Result<()> {
    let scenario = match &args.scenario {
        Some(path) => Scenario::load(path)?,
        None => Scenario::demo()?,
    };
    let sim = Simulation::start(SimConfig::default(), SchedulerConfig::default()).await?;
    let mut stderr = std::io::stderr();
    let _ = writeln!(
        stderr,
        "muster simulate: scenario {} ({} nodes, {} gangs, {} pods); API http://{}, scheduler http://{}/metrics",
        scenario.name,
        scenario.node_count(),
        scenario.gang_count(),
        scenario.pod_count(),
        sim.cluster.addr(),
        sim.daemon.http_addr,
    );
    let summary = sim.run(&scenario, &mut stderr).await?;
    print!("{}", summary::render(&summary));
    if args.serve {
        serve(&sim, &args.kubeconfig_out).await?;
    }
    sim.shutdown().await?;
    let failures = summary::failures(&summary);
    if !failures.is_empty() {
        anyhow::bail!(
            "scenario {}: {} expectation(s) failed: {}",
            scenario.name,
            failures.len(),
            failures.join("; ")
        );
    }
    Ok(())
}

/// Writes the kubeconfig, says how to use it, and waits for SIGINT/SIGTERM.
async fn serve(sim: &Simulation, kubeconfig: &Path) -> Result<()> {
    sim.cluster
        .write_kubeconfig(kubeconfig)
        .with_context(|| format!("writing kubeconfig to {}", kubeconfig.display()))?;
    let mut stdout = std::io::stdout();
    writeln!(
        stdout,
        "\nserving until Ctrl-C: kubeconfig {path}\n  kubectl --kubeconfig {path} get pods -A -o wide",
        path = kubeconfig.display()
    )?;
    stdout.flush()?;
    daemon::shutdown_signal().await;
    Ok(())
}
