//! The `muster` command line: `run` (the scheduler daemon), `cluster` (the
//! simulated API server), `simulate` (both, running a scenario) and `load`
//! (a load generator against any cluster).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc instead of glibc malloc: the scheduler's resident memory at
/// 5,000 nodes and 50,000 pods is ~15% lower with it (docs/performance.md).
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
    Run(muster::daemon::RunArgs),
    /// Serve a simulated Kubernetes API server with kwok-style nodes.
    #[cfg(feature = "apiserver")]
    Cluster(muster::apiserver::cli::ClusterArgs),
    /// Run a scenario on the embedded simulated cluster with the scheduler.
    #[cfg(feature = "load")]
    Simulate(muster::simulate::SimulateArgs),
    /// Generate load from a scenario against a cluster and report what the
    /// scheduler achieved (or, with --bind-directly, the harness ceiling).
    #[cfg(feature = "load")]
    Load(muster::load::LoadArgs),
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
        Command::Run(args) => muster::daemon::run(args).await,
        #[cfg(feature = "apiserver")]
        Command::Cluster(args) => muster::apiserver::cli::run(args).await,
        #[cfg(feature = "load")]
        Command::Simulate(args) => muster::simulate::run(args).await,
        #[cfg(feature = "load")]
        Command::Load(args) => muster::load::run(args).await,
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
