//! The `muster` command line: `run` (the scheduler daemon), `cluster` (the
//! simulated API server), `simulate` (both, running a scenario) and `load`
//! (a load generator against any cluster).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc instead of glibc malloc: 25-35% less CPU in the scheduler, the
/// simulated API server and the load generator, for ~8% more scheduler RSS
/// (docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "muster", version, about = "A gang scheduler for Kubernetes")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The commands this build has: `run` always; `cluster` with the `apiserver`
/// feature; `simulate` and `load` with `load` (the container image builds
/// `daemon` alone).
#[derive(Subcommand)]
enum Command {
    /// Run the scheduler against a Kubernetes API server.
    Run(muster_scheduler::daemon::RunArgs),
    /// Serve a simulated Kubernetes API server with kwok-style nodes.
    #[cfg(feature = "apiserver")]
    Cluster(muster_cluster::apiserver::cli::ClusterArgs),
    /// Run a scenario on the embedded simulated cluster with the scheduler.
    #[cfg(feature = "load")]
    Simulate(muster_tools::simulate::SimulateArgs),
    /// Generate load from a scenario against a cluster and report what the
    /// scheduler achieved (or, with --bind-directly, the harness ceiling).
    #[cfg(feature = "load")]
    Load(muster_tools::load::LoadArgs),
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    // `simulate` talks to the user through its progress and summary; logs
    // only when something is wrong (RUST_LOG overrides).
    let default_level = match cli.command {
        #[cfg(feature = "load")]
        Command::Simulate(_) | Command::Load(_) => "warn",
        _ => "info",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level)),
        )
        .with_writer(std::io::stderr)
        .init();
    let result = match cli.command {
        Command::Run(args) => muster_scheduler::daemon::run(args).await,
        #[cfg(feature = "apiserver")]
        Command::Cluster(args) => muster_cluster::apiserver::cli::run(args).await,
        #[cfg(feature = "load")]
        Command::Simulate(args) => muster_tools::simulate::run(args).await,
        #[cfg(feature = "load")]
        Command::Load(args) => muster_tools::load::run(args).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // The whole chain: "invalid scheduler configuration ...: caused by ...".
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
