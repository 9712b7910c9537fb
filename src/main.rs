//! The `muster` command line.
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "muster", version, about = "A gang scheduler for Kubernetes")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve a simulated Kubernetes API server with kwok-style nodes.
    Cluster(muster::sim::cli::ClusterArgs),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Cluster(args) => muster::sim::cli::run(args).await,
    }
}
