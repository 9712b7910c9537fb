//! The `muster` command line: `run` (the scheduler daemon), `cluster` (the
//! simulated API server) and, later, `simulate` and `load`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "muster", version, about = "A gang scheduler for Kubernetes")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the scheduler against a Kubernetes API server.
    Run(muster::daemon::RunArgs),
    /// Serve a simulated Kubernetes API server with kwok-style nodes.
    Cluster(muster::sim::cli::ClusterArgs),
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let result = match Cli::parse().command {
        Command::Run(args) => muster::daemon::run(args).await,
        Command::Cluster(args) => muster::sim::cli::run(args).await,
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
