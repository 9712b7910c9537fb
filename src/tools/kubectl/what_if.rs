//! `kubectl muster what-if -f FILE`: lists the live cluster read-only with
//! the scheduler's own informers (nodes, pods, groups of every dialect,
//! owners, PodDisruptionBudgets, PriorityClasses, topology objects, DRA
//! and storage objects), stops them once each has listed, and answers
//! offline (`simulation`). It never writes to the cluster: the informers
//! only list and watch.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use tokio::sync::mpsc;

use super::Exit;
use super::connect::{self, ClusterArgs};
use super::explain::Output;
use super::simulation::{self, Asked, Changes, Verdict};
use muster_core::config::SchedulerConfig;
use muster_core::engine::ClusterEvent;
use muster_scheduler::kube::informers::{self, Observed, Signal};

/// The whole listing must finish within this.
const LIST_WITHIN: Duration = Duration::from_secs(120);
/// An informer whose list failed this often is reported, not waited for.
const LIST_FAILURES: usize = 3;

#[derive(Args, Debug, Clone)]
pub struct WhatIfArgs {
    /// The pods (and their group definitions) to ask about: YAML or JSON,
    /// several documents or a List; `-` reads standard input.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub file: PathBuf,
    /// Also add N copies of node TEMPLATE (an existing node's name).
    #[arg(long = "add-nodes", value_name = "TEMPLATE=N", value_parser = parse_add)]
    pub add_nodes: Vec<(String, usize)>,
    /// Cordon NODE and take its pods off it first.
    #[arg(long = "drain", value_name = "NODE")]
    pub drain: Vec<String>,
    /// The scheduler's configuration (as given to `muster run --config`;
    /// default: the built-in one).
    #[arg(long = "scheduler-config", value_name = "FILE")]
    pub scheduler_config: Option<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

fn parse_add(s: &str) -> Result<(String, usize), String> {
    let (t, n) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected TEMPLATE=N"))?;
    let n: usize = n.parse().map_err(|_| format!("{s:?}: N must be a count"))?;
    if t.is_empty() {
        return Err(format!("{s:?}: TEMPLATE names a node"));
    }
    Ok((t.to_string(), n))
}

pub async fn run(args: WhatIfArgs) -> Result<Exit> {
    let user = connect::user_config(&args.cluster).await?;
    let namespace = connect::namespace(&args.cluster, &user);
    let text = match args.file.to_str() {
        Some("-") => std::io::read_to_string(std::io::stdin()).context("reading standard input")?,
        _ => std::fs::read_to_string(&args.file)
            .with_context(|| format!("reading {}", args.file.display()))?,
    };
    let now_rfc3339 = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let asked = Asked::read(&text, &namespace, &now_rfc3339)?;
    let config = match &args.scheduler_config {
        Some(p) => SchedulerConfig::load(p)?,
        None => SchedulerConfig::default(),
    };
    for p in &asked.pods {
        if !config
            .profiles
            .iter()
            .any(|pr| *pr.scheduler_name == *p.scheduler_name)
        {
            bail!(
                "pod {} names schedulerName {:?}, which this scheduler configuration does not serve",
                p.key,
                p.scheduler_name
            );
        }
    }
    let client = kube::Client::try_from(user).context("a client for the cluster")?;
    let events = list_cluster(client).await?;
    let changes = Changes {
        add_nodes: args.add_nodes.clone(),
        drain: args.drain.clone(),
    };
    let events = simulation::apply_changes(events, &changes)?;
    let answer = simulation::answer(&config, events, &asked, Instant::now());
    match args.output {
        Output::Text => print!("{}", simulation::render(&answer)),
        Output::Json => println!("{}", serde_json::to_string_pretty(&answer)?),
    }
    Ok(match answer.verdict {
        Verdict::Fits => Exit::Yes,
        Verdict::FitsByPreemption => Exit::ByPreemption,
        Verdict::DoesNotFit => Exit::No,
    })
}

/// Every object the scheduler reads, as its informers list it, in the
/// order they arrived; the informers are stopped once each has listed.
pub async fn list_cluster(client: kube::Client) -> Result<Vec<ClusterEvent>> {
    let (tx, mut rx) = mpsc::channel(16 * 1024);
    let all = informers::informers(client, tx, informers::ABSENT_API_RECHECK);
    let mut pending: std::collections::HashMap<&'static str, usize> =
        all.iter().map(|i| (i.name, 0)).collect();
    let tasks: Vec<_> = all.into_iter().map(|i| tokio::spawn(i.task)).collect();
    let stop = || {
        for t in &tasks {
            t.abort();
        }
    };
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + LIST_WITHIN;
    while !pending.is_empty() {
        let next = tokio::time::timeout_at(deadline, rx.recv()).await;
        let observed = match next {
            Ok(Some(o)) => o,
            Ok(None) => {
                stop();
                bail!("the informers stopped before listing the cluster");
            }
            Err(_) => {
                stop();
                let mut left: Vec<&str> = pending.keys().copied().collect();
                left.sort();
                bail!(
                    "the cluster was not listed within {}s: still listing {}",
                    LIST_WITHIN.as_secs(),
                    left.join(", ")
                );
            }
        };
        match observed {
            Observed::Event(e) => events.push(e),
            Observed::Signal(Signal::Synced(name)) => {
                pending.remove(name);
            }
            Observed::Signal(Signal::WatchFailed(name)) => {
                if let Some(n) = pending.get_mut(name) {
                    *n += 1;
                    if *n >= LIST_FAILURES {
                        stop();
                        bail!(
                            "listing {name} failed {n} times: may this user list it? (the muster-what-if ClusterRole grants what what-if reads)"
                        );
                    }
                }
            }
            Observed::Signal(_) => {}
        }
    }
    stop();
    Ok(events)
}
