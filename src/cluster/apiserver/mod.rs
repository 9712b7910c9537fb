//! The simulated cluster: a Kubernetes-compatible API server over plain
//! HTTP with kwok-style fake nodes and pods. Started in-process with
//! [`SimCluster::start`] (tests, `muster simulate`) or as `muster cluster`.
//!
//! Map of the modules:
//! - [`registry`]: the resource table (one entry per resource).
//! - [`store`]: objects, resourceVersions, history for watch resumption.
//! - [`watch`]: watch streams; `http`: routing and discovery; `handlers`: verb
//!   dispatch and reads; `create`, `write`, `binding`: the writes; `kinds`:
//!   per-kind behaviour (pod defaults, node status, namespaces, CRDs).
//! - `fields` (with `probe` for built-in kinds, `prune` for custom
//!   resources): unknown fields dropped, warned of or refused (`fieldValidation`).
//! - [`patch`], [`selectors`], [`status`], [`objects`], `protobuf`: request mechanics;
//!   `quantity`: resource quantities decoded (capped) as the server decodes them.
//! - [`kubelet`]: the fake kubelet (kwok-style node and pod lifecycle) (node templates are `crate::kwok`).
//! - [`autoscaler`]: the simulated cluster-autoscaler: ProvisioningRequests served from node pools (nodes appear, all or nothing).
//! - [`provisioner`]: the simulated PV controller and CSI external-provisioner (claims get volumes).
//! - `termination`: graceful pod deletion; `eviction`: the `pods/eviction`
//!   subresource; `disruption`: PodDisruptionBudget status (the disruption
//!   controller's part).
//! - `dra`: Dynamic Resource Allocation (`resource.k8s.io`): validation,
//!   printing, the resourceclaim controller.
//! - [`fault`]: injected errors, latency and watch closes.
//! - [`recorder`]: which API calls clients made (opt-in, for RBAC tests).
//! - `views`, `convert`: one storage per resource served in every version
//!   (conversion between versions; events.k8s.io/v1 as core events).
//! - [`kubeconfig`], [`cli`]: how clients and users reach it.
//! - [`authn`], [`rbac`]: TokenReview from token users and
//!   SubjectAccessReview from stored RBAC objects, for components that
//!   delegate authentication and authorization; a token user's own
//!   resource requests are authorized by the same RBAC objects.

pub mod authn;
pub mod autoscaler;
mod binding;
pub mod cli;
mod convert;
mod create;
mod disruption;
mod dra;
mod eviction;
pub mod fault;
mod fields;
mod handlers;
mod http;
mod kinds;
pub mod kubeconfig;
pub mod kubelet;
pub mod objects;
mod openapi;
pub mod patch;
mod probe;
mod protobuf;
pub mod provisioner;
mod prune;
mod quantity;
pub mod rbac;
pub mod recorder;
pub mod registry;
mod request;
mod response;
pub mod selectors;
pub mod status;
pub mod store;
mod table;
mod termination;
mod validate;
mod views;
pub mod watch;
mod write;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::kwok::pools::NodePool;
use crate::kwok::templates::{self, NodeTemplate};
pub use authn::TokenUser;
use authn::Tokens;
use fault::{FaultRule, Faults};
use kubelet::{Lifecycle, LifecycleConfig};
use recorder::{ApiCall, Recorder};
use registry::Registry;
use store::Store;

/// How to start a simulated cluster. `Default` is a loopback server on a
/// free port with no nodes.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub listen: SocketAddr,
    /// Node groups created at start.
    pub node_templates: Vec<NodeTemplate>,
    /// API groups (`scheduling.x-k8s.io`) or single group versions
    /// (`scheduling.k8s.io/v1beta1`) not served; install them later through a
    /// CRD.
    pub without_groups: BTreeSet<String>,
    pub faults: Vec<FaultRule>,
    /// From binding to Running.
    pub pod_start_delay: Duration,
    /// Record a `Started` event for every pod that starts.
    pub pod_events: bool,
    /// Change events kept per resource for watch resumption; older versions
    /// get 410 Gone.
    pub history: usize,
    /// Events of its resource a watcher may fall behind by before it is
    /// dropped as too slow.
    pub watch_buffer: usize,
    pub bookmark_interval: Duration,
    /// Record the shape of every resource request (see [`SimCluster::requests`]).
    pub record_requests: bool,
    /// Users that authenticate with a bearer token (TokenReview), also
    /// written into the kubeconfig.
    pub token_users: Vec<TokenUser>,
    /// Validate writes as a real server does (`validate`); off, pods a real
    /// server would refuse (negative quantities) are stored, to prove that
    /// the scheduler defends itself.
    pub validate: bool,
    /// Longest grace a deleted pod is given before the fake kubelet removes
    /// it (load tests); `None` honours each pod's own.
    pub max_termination_grace: Option<Duration>,
    /// Node pools the simulated cluster-autoscaler grows for
    /// ProvisioningRequests; with none, `autoscaling.x-k8s.io` is not served.
    pub node_pools: Vec<NodePool>,
    /// How long a provisioned request's capacity stays booked.
    pub booking: Duration,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            node_templates: Vec::new(),
            without_groups: BTreeSet::new(),
            faults: Vec::new(),
            pod_start_delay: Duration::from_millis(100),
            pod_events: true,
            history: 100_000,
            watch_buffer: 1 << 16,
            bookmark_interval: Duration::from_secs(5),
            record_requests: false,
            token_users: Vec::new(),
            validate: true,
            node_pools: Vec::new(),
            booking: Duration::from_secs(600),
            max_termination_grace: None,
        }
    }
}

impl SimConfig {
    /// `n` nodes from the default template (32 CPU, 256Gi, 110 pods).
    pub fn with_nodes(mut self, n: usize) -> Self {
        self.node_templates.push(NodeTemplate {
            count: n,
            ..NodeTemplate::default()
        });
        self
    }

    /// Node pools for the simulated cluster-autoscaler (`autoscaler`).
    pub fn with_pools(mut self, pools: Vec<NodePool>) -> Self {
        self.node_pools.extend(pools);
        self
    }

    /// How long a provisioned request's capacity stays booked.
    pub fn booking(mut self, d: Duration) -> Self {
        self.booking = d;
        self
    }

    pub fn with_templates(mut self, templates: Vec<NodeTemplate>) -> Self {
        self.node_templates.extend(templates);
        self
    }

    /// Does not serve these API groups or group versions (see
    /// [`SimConfig::without_groups`](SimConfig#structfield.without_groups)).
    pub fn without_groups<I, S>(mut self, groups: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.without_groups
            .extend(groups.into_iter().map(Into::into));
        self
    }

    pub fn with_fault(mut self, rule: FaultRule) -> Self {
        self.faults.push(rule);
        self
    }

    pub fn pod_start_delay(mut self, d: Duration) -> Self {
        self.pod_start_delay = d;
        self
    }

    pub fn history(mut self, events: usize) -> Self {
        self.history = events;
        self
    }

    /// Events a watcher may fall behind by ([`SimConfig::watch_buffer`]).
    pub fn watch_buffer(mut self, events: usize) -> Self {
        self.watch_buffer = events;
        self
    }

    pub fn bookmark_interval(mut self, d: Duration) -> Self {
        self.bookmark_interval = d;
        self
    }

    /// A user that authenticates with `token` ([`authn`]).
    pub fn with_token_user(mut self, user: TokenUser) -> Self {
        self.token_users.push(user);
        self
    }

    /// Turns write validation off or on ([`SimConfig::validate`]).
    pub fn validate(mut self, on: bool) -> Self {
        self.validate = on;
        self
    }

    /// Caps the grace of deleted pods ([`SimConfig::max_termination_grace`]).
    pub fn max_termination_grace(mut self, cap: Duration) -> Self {
        self.max_termination_grace = Some(cap);
        self
    }

    /// Records the distinct API calls clients make ([`SimCluster::requests`]).
    pub fn record_requests(mut self, on: bool) -> Self {
        self.record_requests = on;
        self
    }
}

/// Shared by every request handler.
pub(crate) struct SimState {
    pub registry: Registry,
    pub store: Arc<Store>,
    pub lifecycle: Lifecycle,
    pub faults: Arc<Faults>,
    pub shutdown: CancellationToken,
    pub bookmark_every: Duration,
    pub addr: SocketAddr,
    /// Present when [`SimConfig::record_requests`] is on.
    pub recorder: Option<Recorder>,
    /// Token users, for TokenReview.
    pub tokens: Tokens,
    /// [`SimConfig::validate`].
    pub validate: bool,
    /// [`SimConfig::max_termination_grace`].
    pub max_termination_grace: Option<Duration>,
}

/// A running simulated cluster. Dropping it without [`SimCluster::shutdown`]
/// stops it too (the server task is cancelled), just less gracefully.
pub struct SimCluster {
    addr: SocketAddr,
    state: Arc<SimState>,
    server: Option<JoinHandle<std::io::Result<()>>>,
    token_users: Vec<TokenUser>,
}

/// Namespaces every cluster starts with.
const INITIAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

impl SimCluster {
    /// Binds the listener, creates the initial namespaces and nodes, and
    /// serves in the background.
    pub async fn start(config: SimConfig) -> anyhow::Result<SimCluster> {
        let listener = tokio::net::TcpListener::bind(config.listen).await?;
        let addr = listener.local_addr()?;
        let shutdown = CancellationToken::new();
        let store = Arc::new(Store::new(config.history, config.watch_buffer));
        let lifecycle = Lifecycle::spawn(
            store.clone(),
            LifecycleConfig {
                start_delay: config.pod_start_delay,
                events: config.pod_events,
            },
            shutdown.clone(),
        );
        let state = Arc::new(SimState {
            registry: Registry::new(&served_groups(&config)),
            store,
            lifecycle,
            faults: Arc::new(Faults::new(config.faults.clone())),
            shutdown: shutdown.clone(),
            bookmark_every: config.bookmark_interval,
            addr,
            recorder: config.record_requests.then(Recorder::default),
            tokens: Tokens::new(&config.token_users),
            validate: config.validate,
            max_termination_grace: config.max_termination_grace,
        });
        provisioner::spawn(state.store.clone(), shutdown.clone());
        disruption::spawn(state.store.clone(), shutdown.clone());
        dra::controller::spawn(
            state.store.clone(),
            state.lifecycle.clone(),
            shutdown.clone(),
        );
        dra::driver::spawn(state.store.clone(), shutdown.clone());
        if !config.node_pools.is_empty() {
            autoscaler::spawn(
                state.clone(),
                autoscaler::AutoscalerConfig {
                    pools: config.node_pools.clone(),
                    booking: config.booking,
                },
                shutdown.clone(),
            );
        }
        seed(&state, &config.node_templates)?;
        let app = http::router(state.clone());
        let stop = shutdown.clone();
        let server = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await
        });
        tracing::info!(%addr, "simulated cluster serving");
        Ok(SimCluster {
            addr,
            state,
            server: Some(server),
            token_users: config.token_users,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The kubeconfig YAML for this cluster.
    pub fn kubeconfig(&self) -> String {
        kubeconfig::render_with_users(self.addr, &self.token_users)
    }

    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        kubeconfig::write_with_users(self.addr, &self.token_users, path)
    }

    /// A kube-rs client for this cluster (default namespace `default`).
    pub fn client(&self) -> anyhow::Result<kube::Client> {
        Ok(kube::Client::try_from(kubeconfig::config(self.addr))?)
    }

    /// The distinct resource requests made so far, in RBAC's terms (verb,
    /// group, resource, subresource, namespace) with the client's user agent.
    /// Empty unless the cluster was started with [`SimConfig::record_requests`].
    pub fn requests(&self) -> BTreeSet<ApiCall> {
        self.state
            .recorder
            .as_ref()
            .map(Recorder::calls)
            .unwrap_or_default()
    }

    /// Replaces the fault rules while the cluster serves (a chaos run's next
    /// step). Requests already delayed keep the rule they met; watches pick
    /// up a new `watch-close-every` when they are next opened.
    pub fn set_faults(&self, rules: Vec<FaultRule>) {
        self.state.faults.set(rules);
    }

    /// Stops accepting requests, ends every watch, and waits for the server.
    pub async fn shutdown(mut self) -> anyhow::Result<()> {
        self.state.shutdown.cancel();
        if let Some(server) = self.server.take() {
            server.await??;
        }
        Ok(())
    }
}

impl Drop for SimCluster {
    fn drop(&mut self) {
        self.state.shutdown.cancel();
        if let Some(server) = self.server.take() {
            server.abort();
        }
    }
}

/// The groups not served: those asked, and the autoscaler's API when no
/// node pool was given (as a cluster without cluster-autoscaler lacks its CRD).
fn served_groups(config: &SimConfig) -> BTreeSet<String> {
    let mut without = config.without_groups.clone();
    if config.node_pools.is_empty() {
        without.insert("autoscaling.x-k8s.io".to_string());
    }
    without
}

/// Creates the initial namespaces and the template nodes through the same
/// path as API requests, so they get the same defaults.
fn seed(state: &SimState, templates: &[NodeTemplate]) -> anyhow::Result<()> {
    let lookup = |plural: &str| {
        state
            .registry
            .lookup("", "v1", plural)
            .ok_or_else(|| anyhow::anyhow!("core resource {plural} missing from the table"))
    };
    let namespaces = lookup("namespaces")?;
    for ns in INITIAL_NAMESPACES {
        let obj = json!({"metadata": {"name": ns}});
        create::create_object(state, &namespaces, None, obj)
            .map_err(|e| anyhow::anyhow!(e.message))?;
    }
    let nodes = lookup("nodes")?;
    for node in templates::expand(templates) {
        create::create_object(state, &nodes, None, node).map_err(|e| anyhow::anyhow!(e.message))?;
    }
    Ok(())
}
