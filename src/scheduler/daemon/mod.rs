//! `muster run`: the scheduler daemon. Wiring only: informers in, the
//! engine in the scheduling loop, the write dispatcher (`kube::writer`) out,
//! with leader election and the HTTP endpoints beside them; takes them down
//! in order on shutdown. Scheduling decisions are the engine's.

mod bind_window;
mod huge_pages;
mod scheduler_loop;
mod supervisor;
mod translate;

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::sync::{mpsc, watch};
use tracing::{info, warn};

pub use supervisor::{FaultKind, InjectedFault, TaskEnded};
pub use translate::{Directory, POD_GROUP_CONDITION};

use crate::kube::fence::Fence;
use crate::kube::informers;
use crate::kube::leader::LeaderElector;
use crate::kube::review::KubeReviewer;
use crate::kube::writer::{Writer, WriterConfig};
use crate::metrics::Metrics;
use crate::server::auth::{AllowPaths, Auth, CacheTtls};
use crate::server::tls::CertSource;
use crate::server::{self, Health, ServerState, Serving};
use muster_core::config::SchedulerConfig;
use muster_core::engine::{Engine, EngineConfig, ProfileConfig};
use scheduler_loop::SchedulerLoop;
use supervisor::Supervisor;

/// The API writer's name as a critical task.
pub const WRITER_TASK: &str = "api-writer";

/// How long shutdown waits for in-flight API writes.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// Default [`DaemonOptions::status_grace`].
pub const STATUS_GRACE: Duration = Duration::from_secs(1);

/// `muster run` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Kubeconfig to use (default: the configuration's
    /// clientConnection.kubeconfig, then $KUBECONFIG, then ~/.kube/config,
    /// then the in-cluster service account, as kube-rs infers it).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Scheduler configuration (a KubeSchedulerConfiguration subset; see docs/configuration.md).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Address for /metrics, /healthz, /livez, /readyz and /debug/* (HTTPS
    /// unless --insecure-serving). --bind-address and --secure-port, as
    /// kube-scheduler names them, override its IP and port.
    #[arg(long, default_value = "0.0.0.0:10259")]
    pub http_addr: SocketAddr,
    /// The IP to serve on (overrides the IP of --http-addr).
    #[arg(long)]
    pub bind_address: Option<IpAddr>,
    /// The port to serve HTTPS on (overrides the port of --http-addr).
    #[arg(long)]
    pub secure_port: Option<u16>,
    /// PEM certificate (chain) to serve; without it a self-signed
    /// certificate is generated at start.
    #[arg(long, requires = "tls_private_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key of --tls-cert-file.
    #[arg(long, requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,
    /// Paths served without authentication or authorization (comma-separated;
    /// a trailing `*` matches a prefix).
    #[arg(long, value_delimiter = ',', default_values = ["/healthz", "/readyz", "/livez"])]
    pub authorization_always_allow_paths: Vec<String>,
    /// Serve plain HTTP with no authentication, for local use only (what
    /// `muster simulate` does): anyone who reaches the port reads every
    /// tenant's pod and group names in /debug/queue.
    #[arg(long, conflicts_with_all = ["tls_cert_file", "tls_private_key_file"])]
    pub insecure_serving: bool,
    /// Identity in the leader-election Lease (default: hostname plus a random suffix).
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,
    /// Maximum concurrent API writes per lane (bindings; everything else).
    #[arg(long, default_value_t = 64)]
    pub max_in_flight_writes: usize,
}

/// How the HTTP endpoints are served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServingOptions {
    /// Plain HTTP, no authentication (`--insecure-serving`).
    Insecure,
    /// HTTPS with delegated authentication and authorization (`muster run`'s
    /// default).
    Secure {
        cert: CertSource,
        /// Paths that need neither a token nor a permission.
        always_allow_paths: Vec<String>,
    },
}

impl ServingOptions {
    /// HTTPS with a self-signed certificate; probes always allowed.
    pub fn secure() -> Self {
        ServingOptions::Secure {
            cert: CertSource::SelfSigned,
            always_allow_paths: DEFAULT_ALWAYS_ALLOW_PATHS
                .iter()
                .map(|p| p.to_string())
                .collect(),
        }
    }
}

/// `--authorization-always-allow-paths`' default, as kube-scheduler's.
pub const DEFAULT_ALWAYS_ALLOW_PATHS: &[&str] = &["/healthz", "/readyz", "/livez"];

/// What a daemon needs besides the API client.
#[derive(Debug, Clone)]
pub struct DaemonOptions {
    pub config: SchedulerConfig,
    pub http_addr: SocketAddr,
    /// [`DaemonOptions::new`] serves plain HTTP on a loopback port (an
    /// embedded daemon: tests, `muster simulate`); `muster run` serves HTTPS
    /// with authentication unless `--insecure-serving`.
    pub serving: ServingOptions,
    pub identity: String,
    pub writer: WriterConfig,
    /// How often a group-definition API that is not installed is looked for
    /// again (30 s; tests shorten it).
    pub absent_api_recheck: Duration,
    /// How long a pod's or group's waiting messages (conditions, events,
    /// status) are held back in case it is bound meanwhile
    /// (`muster_core::dispatch::Holds`; zero writes at once).
    pub status_grace: Duration,
    /// Faults to inject into critical tasks (`api-writer`, an informer by
    /// name): for the tests that prove a dead task takes the daemon down.
    /// None by default; `muster run` has no flag for it.
    pub faults: Vec<InjectedFault>,
}

impl DaemonOptions {
    pub fn new(config: SchedulerConfig) -> Self {
        let writer = WriterConfig {
            qps: config
                .client
                .qps
                .map(|q| (q, config.client.burst.unwrap_or(q.ceil() as u32))),
            ..WriterConfig::default()
        };
        DaemonOptions {
            config,
            http_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            serving: ServingOptions::Insecure,
            identity: default_identity(),
            writer,
            absent_api_recheck: informers::ABSENT_API_RECHECK,
            status_grace: STATUS_GRACE,
            faults: Vec::new(),
        }
    }
}

/// A started daemon.
pub struct RunningDaemon {
    pub http_addr: SocketAddr,
    pub health: Arc<Health>,
    pub metrics: Arc<Metrics>,
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<()>>,
    elector: tokio::task::AbortHandle,
}

impl RunningDaemon {
    /// Asks the daemon to stop and waits for it.
    pub async fn shutdown(self) -> Result<()> {
        self.shutdown.send_replace(true);
        self.task.await.context("daemon task panicked")?
    }

    /// Stops the daemon the way a crash would for the rest of the cluster: the
    /// lease is not released (a standby must wait out `leaseDuration`) and no
    /// further writes are started. For fault-injection tests.
    pub async fn kill(self) {
        self.elector.abort();
        self.shutdown.send_replace(true);
        let _ = self.task.await;
    }

    /// Waits until the daemon stops on its own (lost leadership, informers
    /// ended) or `signal` completes, whichever is first; then shuts down.
    pub async fn run_until(self, signal: impl std::future::Future<Output = ()>) -> Result<()> {
        let RunningDaemon {
            shutdown, mut task, ..
        } = self;
        tokio::select! {
            r = &mut task => r.context("daemon task panicked")?,
            _ = signal => {
                info!("shutdown requested");
                shutdown.send_replace(true);
                task.await.context("daemon task panicked")?
            }
        }
    }
}

/// Builds the engine's profiles from the configuration.
pub fn engine_config(config: &SchedulerConfig) -> EngineConfig {
    let profiles = config
        .profiles
        .iter()
        .map(|p| {
            let mut profile = ProfileConfig::new(&p.scheduler_name, p.framework.clone());
            profile.gang = p.gang.clone();
            profile.preemption = p.preemption;
            profile
        })
        .collect();
    let mut engine = EngineConfig::new(profiles);
    engine.pod_initial_backoff = config.pod_initial_backoff;
    engine.pod_max_backoff = config.pod_max_backoff;
    engine.record_samples = true;
    engine
}

/// Starts every part of the daemon against `client`.
pub async fn start(client: kube::Client, opts: DaemonOptions) -> Result<RunningDaemon> {
    let config = opts.config;
    if let Some(threads) = config.parallelism {
        // Only the first pool configuration in a process takes effect; later
        // daemons in the same process (tests) share it.
        let _ = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build_global();
    }
    let engine = Engine::new(engine_config(&config));
    let metrics = Arc::new(Metrics::new().context("registering metrics")?);
    let health = Arc::new(Health::default());
    let debug = Arc::new(RwLock::new(Arc::new(String::from("starting\n"))));
    let (shutdown_tx, shutdown_rx) = watch::channel(false);

    let (explain_tx, explain_rx) = mpsc::channel(server::explain::QUEUED_REQUESTS);
    let server_state = ServerState {
        metrics: metrics.clone(),
        health: health.clone(),
        debug: debug.clone(),
        explain: Some(explain_tx),
    };
    let (serving, scheme) = match &opts.serving {
        ServingOptions::Insecure => (Serving::Insecure, "http"),
        ServingOptions::Secure {
            cert,
            always_allow_paths,
        } => {
            let tls = server::tls::server_config(cert).context("the serving certificate")?;
            let auth = Auth::new(
                Arc::new(KubeReviewer::new(client.clone())),
                AllowPaths::new(always_allow_paths.iter().cloned()),
                CacheTtls::default(),
            );
            let auth = Arc::new(auth);
            (Serving::Secure { tls, auth }, "https")
        }
    };
    if scheme == "http" && !opts.http_addr.ip().is_loopback() {
        warn!(addr = %opts.http_addr, "serving /metrics and /debug/queue without TLS or authentication");
    }
    // HTTP stops last, so probes and /metrics answer (readiness failing)
    // while in-flight writes drain.
    let (server_stop, mut server_shutdown) = watch::channel(false);
    let (http_addr, server_task) =
        server::serve(opts.http_addr, server_state, serving, async move {
            let _ = server_shutdown.wait_for(|s| *s).await;
        })
        .await
        .with_context(|| format!("binding the HTTP endpoint {}", opts.http_addr))?;
    info!(%http_addr, scheme, "serving /metrics, /healthz, /livez, /readyz, /debug/*");

    // The lease is released only after in-flight writes have finished, so a
    // standby never starts scheduling while our last bindings are still landing.
    let (release_tx, release_rx) = watch::channel(false);
    let (leading_tx, leading_rx) = watch::channel(false);
    // Leader fencing: every API write first checks that this replica's
    // lease was renewed within renewDeadline (src/scheduler/kube/fence.rs).
    let fence = Arc::new(if config.leader_election.enabled {
        Fence::new(config.leader_election.renew_deadline)
    } else {
        Fence::open()
    });
    let elector = if config.leader_election.enabled {
        let elector = LeaderElector::new(
            client.clone(),
            opts.identity.clone(),
            config.leader_election.clone(),
            fence.clone(),
        );
        tokio::spawn(elector.run(leading_tx, release_rx))
    } else {
        let mut release = release_rx;
        tokio::spawn(async move {
            leading_tx.send_replace(true);
            let _ = release.wait_for(|r| *r).await;
        })
    };
    let elector_abort = elector.abort_handle();
    let leader_name = config.leader_election.resource_name.clone();
    spawn_leader_gauge(
        leading_rx.clone(),
        health.clone(),
        metrics.clone(),
        leader_name,
    );

    // The writer and every informer are critical: one that stops takes the
    // daemon down (supervisor.rs).
    let (supervisor, task_ended) = Supervisor::new(shutdown_rx.clone(), opts.faults.clone());
    let (obs_tx, obs_rx) = mpsc::channel(16 * 1024);
    let mut informer_names = Vec::new();
    let mut informer_tasks = Vec::new();
    for informer in informers::informers(client.clone(), obs_tx, opts.absent_api_recheck) {
        informer_names.push(informer.name);
        informer_tasks.push(supervisor.spawn(informer.name, informer.task));
    }
    let (bind_tx, bind_rx) = mpsc::unbounded_channel();
    let writer_config = WriterConfig {
        hold_waiting: opts.status_grace,
        ..opts.writer.clone()
    };
    let writer_in_flight = writer_config.max_in_flight;
    let (writer, dispatcher) = Writer::new(
        client,
        writer_config,
        metrics.clone(),
        bind_tx,
        fence.clone(),
    );
    let writer_task = supervisor.spawn(WRITER_TASK, dispatcher).stopped;
    let served: HashSet<String> = config
        .profiles
        .iter()
        .map(|p| p.scheduler_name.clone())
        .collect();

    let scheduler = SchedulerLoop {
        engine,
        writer,
        metrics: metrics.clone(),
        health: health.clone(),
        debug,
        explain: explain_rx,
        observed: obs_rx,
        informers: informer_names,
        task_ended,
        bind_outcomes: bind_rx,
        leading: leading_rx,
        fence,
        shutdown: shutdown_rx,
        served,
        binds: bind_window::BindWindow::for_writer(writer_in_flight),
    };
    let health_for_task = health.clone();
    let shutdown_for_task = shutdown_tx.clone();
    let task = tokio::spawn(async move {
        let result = scheduler.run().await;
        // Whatever ended the loop, take the rest down in order: no new writes,
        // in-flight writes finish (bounded), the lease is released, HTTP stops.
        health_for_task.shutting_down.store(true, Ordering::Relaxed);
        shutdown_for_task.send_replace(true);
        for t in &informer_tasks {
            t.abort();
        }
        if tokio::time::timeout(SHUTDOWN_GRACE, writer_task)
            .await
            .is_err()
        {
            warn!(
                "in-flight API writes did not finish within {}s",
                SHUTDOWN_GRACE.as_secs()
            );
        }
        release_tx.send_replace(true);
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, elector).await;
        server_stop.send_replace(true);
        let _ = server_task.await;
        result
    });
    Ok(RunningDaemon {
        http_addr,
        health,
        metrics,
        shutdown: shutdown_tx,
        task,
        elector: elector_abort,
    })
}

fn spawn_leader_gauge(
    mut leading: watch::Receiver<bool>,
    health: Arc<Health>,
    metrics: Arc<Metrics>,
    name: String,
) {
    tokio::spawn(async move {
        loop {
            let is = *leading.borrow_and_update();
            health.leading.store(is, Ordering::Relaxed);
            metrics
                .leader
                .with_label_values(&[name.as_str()])
                .set(i64::from(is));
            if leading.changed().await.is_err() {
                return;
            }
        }
    });
}

/// `hostname_<random>`, like client-go's leader-election identity.
pub fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "muster".into());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{host}_{:08x}{:04x}", nanos, std::process::id() & 0xffff)
}

/// `muster run`.
pub async fn run(args: RunArgs) -> Result<()> {
    huge_pages::disable_unless_asked();
    let config = match &args.config {
        Some(path) => SchedulerConfig::load(path)?,
        None => SchedulerConfig::default(),
    };
    let kubeconfig = args
        .kubeconfig
        .clone()
        .or_else(|| config.client.kubeconfig.clone());
    let client = crate::kube::client::connect(
        kubeconfig.as_deref(),
        crate::kube::client::SCHEDULER_USER_AGENT,
    )
    .await?;
    let mut opts = DaemonOptions::new(config);
    opts.http_addr = SocketAddr::new(
        args.bind_address.unwrap_or(args.http_addr.ip()),
        args.secure_port.unwrap_or(args.http_addr.port()),
    );
    opts.serving = serving_options(&args);
    opts.writer.max_in_flight = args.max_in_flight_writes.max(1);
    if let Some(id) = args.identity {
        opts.identity = id;
    }
    let daemon = start(client, opts).await?;
    daemon.run_until(shutdown_signal()).await
}

/// The serving half of `muster run`'s flags.
fn serving_options(args: &RunArgs) -> ServingOptions {
    if args.insecure_serving {
        return ServingOptions::Insecure;
    }
    let cert = match (&args.tls_cert_file, &args.tls_private_key_file) {
        (Some(cert), Some(key)) => CertSource::Files {
            cert: cert.clone(),
            key: key.clone(),
        },
        // clap requires both or neither.
        _ => CertSource::SelfSigned,
    };
    ServingOptions::Secure {
        cert,
        always_allow_paths: args.authorization_always_allow_paths.clone(),
    }
}

/// SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: RunArgs,
    }

    fn parse(flags: &[&str]) -> Result<RunArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("run").chain(flags.iter().copied())).map(|c| c.args)
    }

    #[test]
    fn serving_is_secure_unless_opted_out() {
        let args = parse(&[]).unwrap();
        assert_eq!(serving_options(&args), ServingOptions::secure());
        assert_eq!(args.http_addr, "0.0.0.0:10259".parse().unwrap());

        let args = parse(&[
            "--tls-cert-file=/c.pem",
            "--tls-private-key-file=/k.pem",
            "--authorization-always-allow-paths=/healthz,/debug/*",
        ])
        .unwrap();
        assert_eq!(
            serving_options(&args),
            ServingOptions::Secure {
                cert: CertSource::Files {
                    cert: "/c.pem".into(),
                    key: "/k.pem".into()
                },
                always_allow_paths: vec!["/healthz".into(), "/debug/*".into()],
            }
        );
        let args = parse(&["--insecure-serving"]).unwrap();
        assert_eq!(serving_options(&args), ServingOptions::Insecure);

        assert!(parse(&["--tls-cert-file=/c.pem"]).is_err());
        assert!(
            parse(&[
                "--insecure-serving",
                "--tls-cert-file=/c",
                "--tls-private-key-file=/k"
            ])
            .is_err()
        );
    }
}
