//! The `muster` command line: `run` (the scheduler daemon), `cluster` (the
//! simulated API server), `simulate` (both, running a scenario), `load`
//! (a load generator against any cluster), and the kubectl plugin's
//! `explain` and `what-if` (with `completion`). Installed as
//! `kubectl-muster` (what `make build` also writes), it is the plugin:
//! `kubectl muster explain ...`.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

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
    /// Why a pod or gang is where it is: asks the leading scheduler (or, when
    /// it cannot be reached, reads the API objects). Exit 0 when bound, 4
    /// when not, 1 on error.
    #[cfg(feature = "load")]
    Explain(muster_tools::kubectl::explain::ExplainArgs),
    /// Whether the pods in FILE would fit now, only by preemption, or not,
    /// from a read-only listing of the cluster. Exit 0 fits, 3 only by
    /// preemption, 4 does not fit, 1 on error.
    #[cfg(feature = "load")]
    WhatIf(muster_tools::kubectl::what_if::WhatIfArgs),
    /// Prints a shell completion script (bash, zsh, fish, elvish, powershell).
    #[cfg(feature = "load")]
    Completion { shell: clap_complete::Shell },
}

/// The name the plugin is invoked by (kubectl finds `kubectl-muster` on PATH).
const PLUGIN_NAME: &str = "kubectl-muster";
/// The name kubectl (1.26+) runs to complete `kubectl muster ...`.
const PLUGIN_COMPLETION_NAME: &str = "kubectl_complete-muster";

/// The file name this process was started as.
fn invoked_as() -> Option<String> {
    std::env::args_os()
        .next()
        .map(std::path::PathBuf::from)
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
}

/// The command line, named as it was invoked: `kubectl muster` for the
/// plugin, so its help reads as kubectl users type it.
fn command() -> clap::Command {
    let cmd = Cli::command();
    match invoked_as().as_deref() {
        Some(PLUGIN_NAME) => cmd.name(PLUGIN_NAME).bin_name("kubectl muster"),
        _ => cmd,
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    if invoked_as().as_deref() == Some(PLUGIN_COMPLETION_NAME) {
        let words: Vec<String> = std::env::args().skip(1).collect();
        print!("{}", plugin_completions(&Cli::command(), &words));
        return ExitCode::SUCCESS;
    }
    let mut cmd = command();
    let cli = match Cli::from_arg_matches(&cmd.get_matches_mut()) {
        Ok(cli) => cli,
        Err(e) => e.format(&mut cmd).exit(),
    };
    // `simulate` talks to the user through its progress and summary; logs
    // only when something is wrong (RUST_LOG overrides).
    let default_level = match cli.command {
        #[cfg(feature = "load")]
        Command::Simulate(_) | Command::Load(_) => "warn",
        #[cfg(feature = "load")]
        Command::Explain(_) | Command::WhatIf(_) | Command::Completion { .. } => "error",
        _ => "info",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level)),
        )
        .with_writer(std::io::stderr)
        .init();
    #[cfg(feature = "load")]
    let cli = match cli.command {
        Command::Explain(args) => return exit(muster_tools::kubectl::explain::run(args).await),
        Command::WhatIf(args) => return exit(muster_tools::kubectl::what_if::run(args).await),
        Command::Completion { shell } => {
            let name = match invoked_as().as_deref() {
                Some(PLUGIN_NAME) => PLUGIN_NAME,
                _ => "muster",
            };
            let mut cmd = Cli::command().name(name);
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut cmd, name, &mut script);
            // A closed pipe (`| head`) is the reader's choice, not an error.
            let _ = std::io::Write::write_all(&mut std::io::stdout(), &script);
            return ExitCode::SUCCESS;
        }
        other => Cli { command: other },
    };
    let result = match cli.command {
        Command::Run(args) => muster_scheduler::daemon::run(args).await,
        #[cfg(feature = "apiserver")]
        Command::Cluster(args) => muster_cluster::apiserver::cli::run(args).await,
        #[cfg(feature = "load")]
        Command::Simulate(args) => muster_tools::simulate::run(args).await,
        #[cfg(feature = "load")]
        Command::Load(args) => muster_tools::load::run(args).await,
        #[cfg(feature = "load")]
        Command::Explain(_) | Command::WhatIf(_) | Command::Completion { .. } => {
            unreachable!("answered above")
        }
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

/// A plugin command's exit: its answer's code, or 1 with the error.
#[cfg(feature = "load")]
fn exit(result: anyhow::Result<muster_tools::kubectl::Exit>) -> ExitCode {
    match result {
        Ok(answer) => ExitCode::from(answer.code()),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// kubectl's plugin completion (cobra's `__complete` protocol): the
/// candidates for the last of `words`, one per line, then the directive
/// line (`:4`, no file completion, for subcommands and flags; `:0`, the
/// shell's default, for a value).
fn plugin_completions(cmd: &clap::Command, words: &[String]) -> String {
    let (current, before) = match words.split_last() {
        Some((c, b)) => (c.as_str(), b),
        None => ("", &[][..]),
    };
    // The subcommand named so far, if any.
    let sub = before
        .iter()
        .find_map(|w| cmd.get_subcommands().find(|s| s.get_name() == w));
    let mut out = String::new();
    let directive = match sub {
        None => {
            for s in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
                if s.get_name().starts_with(current) {
                    out.push_str(s.get_name());
                    out.push('\n');
                }
            }
            4
        }
        Some(s) if current.starts_with('-') => {
            for a in s.get_arguments() {
                if let Some(long) = a.get_long() {
                    let flag = format!("--{long}");
                    if flag.starts_with(current) {
                        out.push_str(&flag);
                        out.push('\n');
                    }
                }
            }
            4
        }
        Some(_) => 0,
    };
    out.push_str(&format!(":{directive}\n"));
    out
}
