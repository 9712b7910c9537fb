//! A real Kubernetes control plane on loopback for end-to-end tests: etcd,
//! kube-apiserver, kube-controller-manager and kwok (optionally
//! kube-scheduler), the upstream releases pinned in tests/upstream/ and built
//! by tests/support/build-upstream.sh into .tools/upstream/.
//!
//! [`RealCluster::start`] starts them on free 127.0.0.1 ports in a temporary
//! directory (certificates, tokens, kubeconfigs, etcd's data and each
//! process's log), waits on their health endpoints, and hands out
//! `kube::Client`s; dropping it kills the processes and removes the
//! directory. A start that fails panics with the tail of every process's log.
//!
//! [`Env`], [`cluster`], [`daemon`] and the helpers below have the shape of
//! the simulated cluster's (tests/e2e/mod.rs), so a test can be written
//! against either. Nodes are fake: created with the `kwok.x-k8s.io/node:
//! fake` annotation (as `muster::kwok::templates::expand` writes them), kwok
//! makes them Ready and moves their bound pods to Running.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod, ServiceAccount};
use kube::api::{Api, DynamicObject, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::watcher;
use muster::config::SchedulerConfig;
use muster::daemon::{DaemonOptions, RunningDaemon};
use muster::kwok::templates::NodeTemplate;
use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

#[allow(unused_imports)]
pub use crate::e2e::{
    HANG_GUARD, bound, gated, names_bound, nodes, pod, pod_condition_message, podgroup_resource,
    test_config, wait_objects, wait_ready,
};

/// How long starting the control plane may take before the start fails (a
/// hang guard: each step returns as soon as its health check passes).
pub const START_GUARD: Duration = Duration::from_secs(120);

/// Feature gates for the API server and the controller manager: the
/// Workload API (scheduling.k8s.io Workload and PodGroup, and pods'
/// `spec.schedulingGroup`) and its beta and alpha parts that Muster reads:
/// PodGroups' ResourceClaims, topology constraints, preemption policy and
/// CompositePodGroups. Dynamic Resource Allocation (resource.k8s.io/v1) and
/// its extended resources are GA in 1.37.
pub const FEATURE_GATES: &str = "GenericWorkload=true,DRAWorkloadResourceClaims=true,\
TopologyAwareWorkloadScheduling=true,PodGroupPreemptionPolicy=true,CompositePodGroup=true";

/// API versions served besides the defaults: the Workload API's beta and
/// alpha versions (resource.k8s.io/v1 is on by default).
pub const RUNTIME_CONFIG: &str = "scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true";

/// The controllers kube-controller-manager runs: what pods, gangs and
/// claims need around a scheduler, with the Workload API's PodGroup
/// protection (a PodGroup is kept while pods name it). No node lifecycle:
/// kwok keeps the fake nodes' leases and conditions.
pub const CONTROLLERS: &[&str] = &[
    "garbage-collector-controller",
    "namespace-controller",
    "job-controller",
    "disruption-controller",
    "resourceclaim-controller",
    "serviceaccount-token-controller",
    "serviceaccount-controller",
    "podgroup-protection-controller",
];

/// Users of the static token file: `(token, user, uid, groups)`. The admin
/// is in `system:masters`; alice and bob have no RBAC grants until a test
/// gives them some.
pub const ADMIN_TOKEN: &str = "muster-test-admin";
pub const ALICE_TOKEN: &str = "muster-test-alice";
pub const BOB_TOKEN: &str = "muster-test-bob";
const CONTROLLER_MANAGER_TOKEN: &str = "muster-test-kube-controller-manager";
const SCHEDULER_TOKEN: &str = "muster-test-kube-scheduler";
const USERS: &[(&str, &str, &str, &str)] = &[
    (ADMIN_TOKEN, "admin", "admin", "system:masters"),
    (ALICE_TOKEN, "alice", "alice", "muster:tenants"),
    (BOB_TOKEN, "bob", "bob", "muster:tenants"),
    (
        CONTROLLER_MANAGER_TOKEN,
        "system:kube-controller-manager",
        "kube-controller-manager",
        "",
    ),
    (
        SCHEDULER_TOKEN,
        "system:kube-scheduler",
        "kube-scheduler",
        "",
    ),
];

/// The upstream binaries, and kwok's stage configuration, that the cluster runs.
const BINARIES: &[&str] = &[
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
];
const KWOK_STAGES: &str = "kwok.yaml";

/// .tools/upstream/, built by tests/support/build-upstream.sh when a binary
/// is missing (once per test process; a failure is kept and reported to
/// every test that asks).
pub fn binaries() -> PathBuf {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let dir = root.join(".tools/upstream");
        if all_present(&dir) {
            return Ok(dir);
        }
        let script = root.join("tests/support/build-upstream.sh");
        eprintln!(
            "real_cluster: {} is incomplete; running {}",
            dir.display(),
            script.display()
        );
        let mut child = Command::new("bash")
            .arg(&script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run bash {}: {e}", script.display()))?;
        // Shown as it goes (a first build is long), and kept for the panic.
        let mut said = String::new();
        if let Some(err) = child.stderr.take() {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                eprintln!("{line}");
                said.push_str(&line);
                said.push('\n');
            }
        }
        let status = child.wait().map_err(|e| e.to_string())?;
        if status.success() && all_present(&dir) {
            Ok(dir)
        } else {
            Err(format!("{} failed ({status}):\n{said}", script.display()))
        }
    })
    .clone()
    .unwrap_or_else(|e| panic!("the upstream Kubernetes binaries are not available: {e}"))
}

fn all_present(dir: &Path) -> bool {
    BINARIES.iter().all(|b| dir.join(b).is_file()) && dir.join(KWOK_STAGES).is_file()
}

/// What to start besides etcd, kube-apiserver, kube-controller-manager and kwok.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Also run kube-scheduler (for pods with `schedulerName:
    /// default-scheduler`; Muster's pods name `muster`).
    pub kube_scheduler: bool,
    /// Extra kube-apiserver flags, after the harness's own (a repeated flag wins).
    pub apiserver_args: Vec<String>,
    /// A KubeSchedulerConfiguration (JSON) for kube-scheduler, passed with
    /// `--config`; the harness sets its `clientConnection.kubeconfig` and
    /// turns leader election off. `None`: kube-scheduler's defaults.
    pub kube_scheduler_config: Option<Value>,
    /// Extra kube-scheduler flags, after the harness's own.
    pub kube_scheduler_args: Vec<String>,
    /// Extra kube-controller-manager flags, after the harness's own (e.g.
    /// `--kube-api-qps`: its default 20 requests a second paces the
    /// resourceclaim controller's claims under load).
    pub controller_manager_args: Vec<String>,
}

/// One running process of the control plane.
struct Proc {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

/// A running control plane; dropping it stops every process and removes
/// its directory.
pub struct RealCluster {
    /// The API server's address (`https://{api_addr}`).
    pub api_addr: SocketAddr,
    /// The admin's kubeconfig (token in `system:masters`).
    pub kubeconfig: PathBuf,
    /// The certificate authority of the API server's serving certificate.
    pub ca_file: PathBuf,
    /// How long each step of the start took, in order.
    pub timings: Vec<(&'static str, Duration)>,
    /// kube-scheduler's secure serving address (`/metrics`, `/debug/pprof`),
    /// when it runs.
    pub kube_scheduler_addr: Option<SocketAddr>,
    dir: Option<tempfile::TempDir>,
    path: PathBuf,
    procs: Vec<Proc>,
    keep_dir: bool,
    _slot: OwnedSemaphorePermit,
}

/// At most this many control planes at once in a test process
/// (MUSTER_REAL_CLUSTERS, default 1): each is several processes on a small
/// machine, and tests run in parallel.
fn slots() -> Arc<Semaphore> {
    static SLOTS: OnceLock<Arc<Semaphore>> = OnceLock::new();
    SLOTS
        .get_or_init(|| {
            let n = std::env::var("MUSTER_REAL_CLUSTERS")
                .ok()
                .and_then(|v| v.parse().ok())
                .filter(|&n: &usize| n > 0)
                .unwrap_or(1);
            Arc::new(Semaphore::new(n))
        })
        .clone()
}

/// Free loopback ports, all distinct (each held until all are picked).
fn free_ports<const N: usize>() -> [u16; N] {
    let listeners: Vec<TcpListener> = (0..N)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind a loopback port"))
        .collect();
    std::array::from_fn(|i| listeners[i].local_addr().expect("local address").port())
}

impl RealCluster {
    /// etcd, kube-apiserver, kube-controller-manager and kwok.
    pub async fn start() -> RealCluster {
        Self::start_with(Options::default()).await
    }

    pub async fn start_with(options: Options) -> RealCluster {
        let bin = binaries();
        let slot = slots().acquire_owned().await.expect("cluster slots");
        let began = Instant::now();
        let dir = tempfile::Builder::new()
            .prefix("muster-real-cluster-")
            .tempdir()
            .expect("temporary directory");
        let path = dir.path().to_path_buf();
        let [
            etcd_client,
            etcd_peer,
            api_port,
            kcm_port,
            kwok_port,
            sched_port,
        ] = free_ports();
        let api_addr = SocketAddr::from(([127, 0, 0, 1], api_port));
        let mut c = RealCluster {
            api_addr,
            kubeconfig: path.join("admin.kubeconfig"),
            ca_file: path.join("pki/ca.crt"),
            timings: Vec::new(),
            kube_scheduler_addr: None,
            dir: Some(dir),
            path: path.clone(),
            procs: Vec::new(),
            keep_dir: false,
            _slot: slot,
        };

        // Certificates, tokens and kubeconfigs.
        let step = Instant::now();
        let pki = path.join("pki");
        if let Err(e) = make_pki(&pki) {
            c.fail(&format!("making certificates: {e}"));
        }
        let tokens: String = USERS
            .iter()
            .map(|(token, user, uid, groups)| format!("{token},{user},{uid},\"{groups}\"\n"))
            .collect();
        fs::write(path.join("tokens.csv"), tokens).expect("write tokens.csv");
        let server = format!("https://{api_addr}");
        for (file, user, token) in [
            ("admin.kubeconfig", "admin", ADMIN_TOKEN),
            (
                "kube-controller-manager.kubeconfig",
                "system:kube-controller-manager",
                CONTROLLER_MANAGER_TOKEN,
            ),
            (
                "kube-scheduler.kubeconfig",
                "system:kube-scheduler",
                SCHEDULER_TOKEN,
            ),
            ("alice.kubeconfig", "alice", ALICE_TOKEN),
            ("bob.kubeconfig", "bob", BOB_TOKEN),
        ] {
            fs::write(
                path.join(file),
                kubeconfig(&server, &c.ca_file, user, token),
            )
            .expect("write a kubeconfig");
        }
        c.timings
            .push(("certificates and kubeconfigs", step.elapsed()));

        // etcd.
        let step = Instant::now();
        let p = |s: &Path| s.display().to_string();
        c.spawn(
            &bin,
            "etcd",
            vec![
                "--name=muster-test".into(),
                format!("--data-dir={}", p(&path.join("etcd"))),
                format!("--listen-client-urls=http://127.0.0.1:{etcd_client}"),
                format!("--advertise-client-urls=http://127.0.0.1:{etcd_client}"),
                format!("--listen-peer-urls=http://127.0.0.1:{etcd_peer}"),
                format!("--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}"),
                format!("--initial-cluster=muster-test=http://127.0.0.1:{etcd_peer}"),
                "--initial-cluster-state=new".into(),
                // A test cluster's data is thrown away: no fsync.
                "--unsafe-no-fsync".into(),
                "--log-level=warn".into(),
            ],
        );
        c.wait_healthy(
            "etcd",
            Probe {
                addr: SocketAddr::from(([127, 0, 0, 1], etcd_client)),
                path: "/health",
                tls: false,
                token: None,
                body: Some("\"health\":\"true\""),
            },
        )
        .await;
        c.timings.push(("etcd", step.elapsed()));

        // kube-apiserver.
        let step = Instant::now();
        let sa_key = p(&pki.join("sa.key"));
        let mut args = vec![
            format!("--etcd-servers=http://127.0.0.1:{etcd_client}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            // The endpoint reconciler refuses a loopback advertise address;
            // nothing here reaches the API server through its Service.
            "--endpoint-reconciler-type=none".into(),
            format!("--secure-port={api_port}"),
            format!("--cert-dir={}", p(&pki)),
            format!("--tls-cert-file={}", p(&pki.join("apiserver.crt"))),
            format!("--tls-private-key-file={}", p(&pki.join("apiserver.key"))),
            format!("--client-ca-file={}", p(&c.ca_file)),
            format!("--token-auth-file={}", p(&path.join("tokens.csv"))),
            "--authorization-mode=Node,RBAC".into(),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            format!("--service-account-key-file={}", p(&pki.join("sa.pub"))),
            format!("--service-account-signing-key-file={sa_key}"),
            // Addresses handed to Services; nothing listens on or sends to them.
            "--service-cluster-ip-range=10.96.0.0/16".into(),
            format!("--feature-gates={FEATURE_GATES}"),
            format!("--runtime-config={RUNTIME_CONFIG}"),
            "--allow-privileged=true".into(),
            "--profiling=false".into(),
            // The plugin taints every new node `node.kubernetes.io/not-ready`
            // until node-lifecycle-controller sees it Ready; that controller
            // is not run (kwok's fake nodes are Ready from the start), so
            // nodes are created untainted.
            "--disable-admission-plugins=TaintNodesByCondition".into(),
        ];
        args.extend(options.apiserver_args.iter().cloned());
        c.spawn(&bin, "kube-apiserver", args);
        c.wait_healthy(
            "kube-apiserver",
            Probe {
                addr: api_addr,
                path: "/readyz",
                tls: true,
                token: Some(ADMIN_TOKEN),
                body: None,
            },
        )
        .await;
        c.timings.push(("kube-apiserver", step.elapsed()));

        // kube-controller-manager and kwok (and kube-scheduler), together.
        let step = Instant::now();
        let kcm_kubeconfig = p(&path.join("kube-controller-manager.kubeconfig"));
        c.spawn(
            &bin,
            "kube-controller-manager",
            vec![
                format!("--kubeconfig={kcm_kubeconfig}"),
                format!("--authentication-kubeconfig={kcm_kubeconfig}"),
                format!("--authorization-kubeconfig={kcm_kubeconfig}"),
                // No front proxy: no request-header CA to look up.
                "--authentication-skip-lookup=true".into(),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={kcm_port}"),
                format!("--cert-dir={}", p(&path.join("kube-controller-manager"))),
                format!("--controllers={}", CONTROLLERS.join(",")),
                format!("--service-account-private-key-file={sa_key}"),
                format!("--root-ca-file={}", p(&c.ca_file)),
                "--use-service-account-credentials=true".into(),
                "--leader-elect=false".into(),
                format!("--feature-gates={FEATURE_GATES}"),
            ]
            .into_iter()
            .chain(options.controller_manager_args.iter().cloned())
            .collect(),
        );
        c.spawn(
            &bin,
            "kwok",
            vec![
                format!("--kubeconfig={}", p(&c.kubeconfig)),
                format!("--config={}", p(&bin.join(KWOK_STAGES))),
                "--manage-all-nodes=false".into(),
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake".into(),
                "--node-ip=127.0.0.1".into(),
                "--node-lease-duration-seconds=40".into(),
                format!("--server-address=127.0.0.1:{kwok_port}"),
            ],
        );
        if options.kube_scheduler {
            let kubeconfig = p(&path.join("kube-scheduler.kubeconfig"));
            let mut args = vec![
                format!("--kubeconfig={kubeconfig}"),
                format!("--authentication-kubeconfig={kubeconfig}"),
                format!("--authorization-kubeconfig={kubeconfig}"),
                "--authentication-skip-lookup=true".into(),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={sched_port}"),
                format!("--cert-dir={}", p(&path.join("kube-scheduler"))),
                "--leader-elect=false".into(),
                format!("--feature-gates={FEATURE_GATES}"),
            ];
            if let Some(config) = &options.kube_scheduler_config {
                let mut config = config.clone();
                config["apiVersion"] = json!("kubescheduler.config.k8s.io/v1");
                config["kind"] = json!("KubeSchedulerConfiguration");
                config["clientConnection"]["kubeconfig"] = json!(kubeconfig);
                config["leaderElection"]["leaderElect"] = json!(false);
                let file = path.join("kube-scheduler-config.json");
                fs::write(&file, config.to_string()).expect("write kube-scheduler's config");
                args.push(format!("--config={}", p(&file)));
            }
            args.extend(options.kube_scheduler_args.iter().cloned());
            c.spawn(&bin, "kube-scheduler", args);
            c.kube_scheduler_addr = Some(SocketAddr::from(([127, 0, 0, 1], sched_port)));
        }
        let local = |port| SocketAddr::from(([127, 0, 0, 1], port));
        c.wait_healthy(
            "kube-controller-manager",
            Probe {
                addr: local(kcm_port),
                path: "/healthz",
                tls: true,
                token: None,
                body: None,
            },
        )
        .await;
        c.wait_healthy(
            "kwok",
            Probe {
                addr: local(kwok_port),
                path: "/healthz",
                tls: false,
                token: None,
                body: None,
            },
        )
        .await;
        if options.kube_scheduler {
            c.wait_healthy(
                "kube-scheduler",
                Probe {
                    addr: local(sched_port),
                    path: "/healthz",
                    tls: true,
                    token: None,
                    body: None,
                },
            )
            .await;
        }
        c.timings
            .push(("kube-controller-manager and kwok healthy", step.elapsed()));

        // The serviceaccount controller has made `default` in `default`:
        // before that the ServiceAccount admission plugin refuses pods there.
        let step = Instant::now();
        let client = c.client().await;
        c.wait_service_account(client, "default").await;
        c.timings.push(("default service account", step.elapsed()));
        c.timings.push(("total", began.elapsed()));
        eprintln!("real_cluster: started in {}", c.timings_text());
        c
    }

    /// The start's steps and their durations, one line.
    pub fn timings_text(&self) -> String {
        self.timings
            .iter()
            .map(|(what, d)| format!("{what} {:.2} s", d.as_secs_f64()))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// A client with the admin's token.
    pub async fn client(&self) -> kube::Client {
        self.client_with(&self.kubeconfig).await
    }

    /// A client for one of the static token file's users (`alice`, `bob`).
    pub async fn client_as(&self, user: &str) -> kube::Client {
        self.client_with(&self.path.join(format!("{user}.kubeconfig")))
            .await
    }

    /// A client authenticating with a bearer `token` (a service account's,
    /// from the TokenRequest API), under the name `name` in the cluster's
    /// directory.
    pub async fn client_with_token(&self, name: &str, token: &str) -> kube::Client {
        let path = self.path.join(format!("{name}.kubeconfig"));
        let server = format!("https://{}", self.api_addr);
        fs::write(&path, kubeconfig(&server, &self.ca_file, name, token))
            .expect("write a kubeconfig");
        self.client_with(&path).await
    }

    async fn client_with(&self, kubeconfig: &Path) -> kube::Client {
        let kc = Kubeconfig::read_from(kubeconfig).expect("read kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .expect("client configuration");
        kube::Client::try_from(config).expect("client")
    }

    /// The process id of component `name` (`etcd`, `kube-apiserver`,
    /// `kube-controller-manager`, `kwok`, `kube-scheduler`), if it runs.
    pub fn pid(&self, name: &str) -> Option<u32> {
        self.procs
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.child.id())
    }

    /// A file holding the admin's bearer token (for clients that read a
    /// token file, e.g. `muster load --scheduler-token-file`).
    pub fn admin_token_file(&self) -> PathBuf {
        let path = self.path.join("admin.token");
        fs::write(&path, ADMIN_TOKEN).expect("write the admin token");
        path
    }

    /// The directory holding the cluster's files and logs (`logs/NAME.log`).
    pub fn dir(&self) -> &Path {
        &self.path
    }

    /// Keeps the directory when the cluster is dropped (and says where).
    pub fn keep_dir(&mut self) {
        self.keep_dir = true;
    }

    /// The tail of each process's log.
    pub fn logs(&self, lines: usize) -> String {
        let mut out = String::new();
        for p in &self.procs {
            let text = fs::read_to_string(&p.log).unwrap_or_default();
            let all: Vec<&str> = text.lines().collect();
            let tail = &all[all.len().saturating_sub(lines)..];
            out.push_str(&format!(
                "--- {} ({}, last {} lines) ---\n{}\n",
                p.name,
                p.log.display(),
                tail.len(),
                tail.join("\n")
            ));
        }
        out
    }

    fn spawn(&mut self, bin: &Path, name: &'static str, args: Vec<String>) {
        let logs = self.path.join("logs");
        fs::create_dir_all(&logs).expect("logs directory");
        let log = logs.join(format!("{name}.log"));
        let out = File::create(&log).expect("log file");
        let err = out.try_clone().expect("log file");
        let mut cmd = Command::new(bin.join(name));
        cmd.args(&args)
            .current_dir(&self.path)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        die_with_parent(&mut cmd);
        match cmd.spawn() {
            Ok(child) => self.procs.push(Proc { name, child, log }),
            Err(e) => self.fail(&format!("cannot start {name}: {e}")),
        }
    }

    /// Polls `probe` until it answers 200 (and the expected body), failing
    /// at once when a process has exited, or at the hang guard.
    async fn wait_healthy(&mut self, what: &str, probe: Probe) {
        let began = Instant::now();
        loop {
            let last = match probe.get().await {
                Ok((200, body)) if probe.body.is_none_or(|b| body.contains(b)) => return,
                Ok((code, body)) => format!("HTTP {code}: {}", body.trim()),
                Err(e) => e.to_string(),
            };
            if let Some(exited) = self.exited() {
                self.fail(&format!("waiting for {what}: {exited}"));
            }
            if began.elapsed() > START_GUARD {
                self.fail(&format!(
                    "{what} was not healthy after {START_GUARD:?} (GET {}: {last})",
                    probe.path
                ));
            }
            // Health has no event stream; poll a few times a second.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Watches service accounts in `ns` until `default` exists.
    async fn wait_service_account(&mut self, client: kube::Client, ns: &str) {
        let api: Api<ServiceAccount> = Api::namespaced(client, ns);
        let wait = wait_objects(
            api,
            watcher::Config::default().fields("metadata.name=default"),
            |sas| sas.contains_key("default"),
        );
        // wait_objects panics at its own hang guard; report the logs with it.
        let waited =
            tokio::time::timeout(START_GUARD, async { tokio::spawn(wait).await.map(|_| ()) }).await;
        match waited {
            Ok(Ok(())) => {}
            Ok(Err(e)) => self.fail(&format!("waiting for service account {ns}/default: {e}")),
            Err(_) => self.fail(&format!("no service account {ns}/default")),
        }
    }

    /// A process of the cluster that has exited, if any.
    fn exited(&mut self) -> Option<String> {
        self.procs
            .iter_mut()
            .find_map(|p| match p.child.try_wait() {
                Ok(Some(status)) => Some(format!("{} exited ({status})", p.name)),
                _ => None,
            })
    }

    /// Fails the start (or a check of the cluster): keeps the directory and
    /// panics with every process's log tail.
    fn fail(&mut self, msg: &str) -> ! {
        self.keep_dir = true;
        panic!(
            "real cluster: {msg}\nfiles kept in {}\n{}",
            self.path.display(),
            self.logs(60)
        );
    }
}

impl Drop for RealCluster {
    fn drop(&mut self) {
        // Newest first: kwok and the controllers before the API server,
        // the API server before etcd.
        for p in self.procs.iter_mut().rev() {
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
        // Kept on a failed start or when asked; else removed as the TempDir drops.
        let keep = self.keep_dir || std::env::var_os("MUSTER_KEEP_CLUSTER_DIR").is_some();
        if let Some(dir) = self.dir.take()
            && keep
        {
            eprintln!("real_cluster: kept {}", dir.keep().display());
        }
    }
}

/// Asks Linux to kill a child when the thread that started it exits, so a
/// test process killed outright leaves no control plane behind.
fn die_with_parent(cmd: &mut Command) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        unsafe extern "C" {
            fn prctl(option: i32, ...) -> i32;
        }
        const PR_SET_PDEATHSIG: i32 = 1;
        const SIGKILL: u64 = 9;
        // SAFETY: prctl(PR_SET_PDEATHSIG) only sets a flag of the calling
        // process; it allocates nothing, which is what pre_exec requires.
        unsafe {
            cmd.pre_exec(|| {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cmd;
}

/// A health check: GET `path` on `addr`.
struct Probe {
    addr: SocketAddr,
    path: &'static str,
    tls: bool,
    token: Option<&'static str>,
    /// Text the body must contain, beside the status 200.
    body: Option<&'static str>,
}

impl Probe {
    async fn get(&self) -> std::io::Result<(u16, String)> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let auth = self
            .token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let request = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\n{auth}Connection: close\r\n\r\n",
            self.path, self.addr
        );
        let tcp = tokio::net::TcpStream::connect(self.addr).await?;
        let mut out = Vec::new();
        if self.tls {
            // Any certificate: the components' own are self-signed (the
            // clients below check the API server's against its CA).
            let config = muster::server::tls::client_config(None).map_err(std::io::Error::other)?;
            let name = rustls::pki_types::ServerName::try_from("localhost").expect("server name");
            let mut s = tokio_rustls::TlsConnector::from(Arc::new(config))
                .connect(name, tcp)
                .await?;
            s.write_all(request.as_bytes()).await?;
            // A peer that closes without close_notify still sent a whole response.
            if let Err(e) = s.read_to_end(&mut out).await
                && e.kind() != std::io::ErrorKind::UnexpectedEof
            {
                return Err(e);
            }
        } else {
            let mut s = tcp;
            s.write_all(request.as_bytes()).await?;
            s.read_to_end(&mut out).await?;
        }
        let text = String::from_utf8_lossy(&out);
        let code = text
            .get(9..12)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("no status line in {text:?}")))?;
        let body = text
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        Ok((code, body))
    }
}

/// A kubeconfig (JSON, which is YAML too) for one token user.
fn kubeconfig(server: &str, ca: &Path, user: &str, token: &str) -> String {
    serde_json::to_string_pretty(&json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "muster-test",
            "cluster": {"server": server, "certificate-authority": ca}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": user, "context": {"cluster": "muster-test", "user": user}}],
        "current-context": user,
    }))
    .expect("kubeconfig json")
}

/// A certificate authority, the API server's serving certificate for
/// 127.0.0.1 and localhost signed by it, and the service-account signing
/// key (and its public half), all P-256, made with the openssl command.
fn make_pki(dir: &Path) -> Result<(), String> {
    fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    fs::write(
        dir.join("openssl.cnf"),
        "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = muster-test\n\
         [ca]\nbasicConstraints = critical, CA:TRUE\nkeyUsage = critical, keyCertSign, cRLSign\n\
         subjectKeyIdentifier = hash\n\
         [server]\nbasicConstraints = critical, CA:FALSE\n\
         keyUsage = critical, digitalSignature, keyEncipherment\nextendedKeyUsage = serverAuth\n\
         subjectAltName = IP:127.0.0.1, DNS:localhost\nauthorityKeyIdentifier = keyid\n",
    )
    .map_err(|e| e.to_string())?;
    // Run in `dir`: every path below is relative to it.
    let ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1";
    let steps = [
        format!(
            "req -x509 -new -nodes {ec} -keyout ca.key -out ca.crt -days 7 \
             -config openssl.cnf -extensions ca -subj /CN=muster-test-ca"
        ),
        format!(
            "req -new -nodes {ec} -keyout apiserver.key -out apiserver.csr \
             -config openssl.cnf -subj /CN=kube-apiserver"
        ),
        "x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
         -out apiserver.crt -days 7 -extfile openssl.cnf -extensions server"
            .to_string(),
        "genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out sa.key".to_string(),
        "pkey -in sa.key -pubout -out sa.pub".to_string(),
    ];
    for step in steps {
        let args: Vec<&str> = step.split_whitespace().collect();
        let out = Command::new("openssl")
            .args(&args)
            .current_dir(dir)
            .output()
            .map_err(|e| format!("cannot run openssl (install the openssl command): {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "openssl {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// The simulated cluster's test shape (tests/e2e/mod.rs) on the real one.

pub struct Env {
    pub cluster: RealCluster,
    pub client: kube::Client,
}

/// A real cluster with the templates' nodes, each Ready (kwok) before this returns.
pub async fn cluster(templates: Vec<NodeTemplate>) -> Env {
    cluster_with(Options::default(), templates).await
}

pub async fn cluster_with(options: Options, templates: Vec<NodeTemplate>) -> Env {
    let cluster = RealCluster::start_with(options).await;
    let client = cluster.client().await;
    let mut env = Env { cluster, client };
    let step = Instant::now();
    let nodes = muster::kwok::templates::expand(&templates);
    let api: Api<Node> = Api::all(env.client.clone());
    let mut names = Vec::new();
    for n in nodes {
        let node: Node = serde_json::from_value(n).expect("node json");
        names.push(node.metadata.name.clone().unwrap_or_default());
        api.create(&PostParams::default(), &node)
            .await
            .expect("create node");
    }
    wait_nodes_ready(&env, &names).await;
    env.cluster.timings.push(("nodes Ready", step.elapsed()));
    env
}

/// A daemon serving plain HTTP, as the simulated cluster's tests run it.
pub async fn daemon(env: &Env, config: SchedulerConfig) -> RunningDaemon {
    let mut opts = DaemonOptions::new(config);
    opts.serving = muster::daemon::ServingOptions::Insecure;
    muster::daemon::start(env.client.clone(), opts)
        .await
        .expect("daemon starts")
}

/// Creates a fake node (kwok makes it Ready; [`wait_nodes_ready`] waits).
pub async fn add_node(env: &Env, name: &str, cpu: &str) {
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                     "labels": {"kubernetes.io/hostname": name, "type": "kwok"}},
        "status": {"capacity": {"cpu": cpu, "memory": "64Gi", "pods": "110"},
                   "allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"}}
    }))
    .expect("node json");
    Api::<Node>::all(env.client.clone())
        .create(&PostParams::default(), &node)
        .await
        .expect("create node");
}

pub fn node_ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Watches nodes until each of `names` is Ready.
pub async fn wait_nodes_ready(env: &Env, names: &[String]) -> BTreeMap<String, Node> {
    let api: Api<Node> = Api::all(env.client.clone());
    wait_objects(api, watcher::Config::default(), |nodes| {
        names.iter().all(|n| nodes.get(n).is_some_and(node_ready))
    })
    .await
}

/// Creates a v1beta1 PodGroup with a gang policy.
pub async fn create_podgroup(
    env: &Env,
    ns: &str,
    name: &str,
    min_count: u32,
    timeout_seconds: Option<u32>,
) {
    let mut annotations = serde_json::Map::new();
    if let Some(t) = timeout_seconds {
        annotations.insert(
            "muster.dev/schedule-timeout-seconds".into(),
            t.to_string().into(),
        );
    }
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    }))
    .expect("podgroup json");
    let api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), ns, &podgroup_resource());
    api.create(&PostParams::default(), &obj)
        .await
        .expect("create podgroup");
}

pub async fn create_pods(env: &Env, ns: &str, pods: Vec<Pod>) {
    let api: Api<Pod> = Api::namespaced(env.client.clone(), ns);
    for p in pods {
        api.create(&PostParams::default(), &p)
            .await
            .expect("create pod");
    }
}

/// Creates namespace `ns` and waits for its `default` service account (the
/// ServiceAccount admission plugin refuses pods before it exists).
pub async fn create_namespace(env: &Env, ns: &str) {
    let obj: k8s_openapi::api::core::v1::Namespace = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
    )
    .expect("namespace json");
    Api::all(env.client.clone())
        .create(&PostParams::default(), &obj)
        .await
        .expect("create namespace");
    let api: Api<ServiceAccount> = Api::namespaced(env.client.clone(), ns);
    wait_objects(
        api,
        watcher::Config::default().fields("metadata.name=default"),
        |sas| sas.contains_key("default"),
    )
    .await;
}

/// Watches pods in `ns` until `done` holds for the current set; returns it.
pub async fn wait_pods<F>(env: &Env, ns: &str, done: F) -> BTreeMap<String, Pod>
where
    F: FnMut(&BTreeMap<String, Pod>) -> bool,
{
    let api: Api<Pod> = Api::namespaced(env.client.clone(), ns);
    wait_objects(api, watcher::Config::default(), done).await
}

pub fn running(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|phase| phase == "Running")
}

/// A resource's JSON as the API server serves it (for discovery checks).
pub async fn get_json(env: &Env, path: &str) -> Value {
    let req = http::Request::get(path).body(Vec::new()).expect("request");
    env.client
        .request::<Value>(req)
        .await
        .unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

/// The state of namespace `ns` as text, for a failed wait: its pods (node,
/// phase, conditions), PodGroups (status) and events.
pub async fn describe(env: &Env, ns: &str) -> String {
    let mut out = String::new();
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), ns);
    for p in pods
        .list(&Default::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        let spec = p.spec.as_ref();
        let status = p.status.as_ref();
        out.push_str(&format!(
            "pod {}: scheduler={:?} node={:?} phase={:?} conditions={}\n",
            p.metadata.name.as_deref().unwrap_or_default(),
            spec.and_then(|s| s.scheduler_name.as_deref()),
            spec.and_then(|s| s.node_name.as_deref()),
            status.and_then(|s| s.phase.as_deref()),
            serde_json::to_string(&status.and_then(|s| s.conditions.as_ref())).unwrap_or_default(),
        ));
    }
    let groups: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), ns, &podgroup_resource());
    for g in groups
        .list(&Default::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        out.push_str(&format!(
            "podgroup {}: spec={} status={}\n",
            g.metadata.name.as_deref().unwrap_or_default(),
            g.data["spec"],
            g.data["status"]
        ));
    }
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(env.client.clone(), ns);
    for e in events
        .list(&Default::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        out.push_str(&format!(
            "event {} {:?}: {} {}\n",
            e.involved_object.name.as_deref().unwrap_or_default(),
            e.type_,
            e.reason.as_deref().unwrap_or_default(),
            e.message.as_deref().unwrap_or_default()
        ));
    }
    out
}

/// Waits for pods in `ns` as [`wait_pods`] does, but within `guard`, and
/// on timeout panics with [`describe`] of the namespace and the processes' logs.
pub async fn wait_pods_or_describe<F>(
    env: &Env,
    ns: &str,
    guard: Duration,
    done: F,
) -> BTreeMap<String, Pod>
where
    F: FnMut(&BTreeMap<String, Pod>) -> bool + Send + 'static,
{
    let api: Api<Pod> = Api::namespaced(env.client.clone(), ns);
    let waited =
        tokio::time::timeout(guard, wait_objects(api, watcher::Config::default(), done)).await;
    match waited {
        Ok(pods) => pods,
        Err(_) => panic!(
            "pods in {ns} did not reach the condition within {guard:?}:\n{}\n{}",
            describe(env, ns).await,
            env.cluster.logs(20)
        ),
    }
}

/// The real kubectl (v1.37, from .tools/) with the admin's kubeconfig.
pub fn kubectl(env: &Env) -> crate::common::kubectl::Kubectl {
    crate::common::kubectl::Kubectl::new(env.cluster.kubeconfig.clone())
}

/// Pods in `ns`, by name, listed once.
pub async fn list_pods(env: &Env, ns: &str) -> BTreeMap<String, Pod> {
    let api: Api<Pod> = Api::namespaced(env.client.clone(), ns);
    api.list(&Default::default())
        .await
        .expect("list pods")
        .items
        .into_iter()
        .map(|p| (p.metadata.name.clone().unwrap_or_default(), p))
        .collect()
}

/// Creates an object of resource `ar` (in `ns` when given) from JSON.
pub async fn create_object(env: &Env, ar: &kube::core::ApiResource, ns: Option<&str>, obj: Value) {
    let obj: DynamicObject = serde_json::from_value(obj).expect("object json");
    let api: Api<DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(env.client.clone(), ns, ar),
        None => Api::all_with(env.client.clone(), ar),
    };
    api.create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "create {} {}: {e}",
                ar.kind,
                obj.metadata.name.as_deref().unwrap_or_default()
            )
        });
}

/// An API resource by group, version, kind and plural.
pub fn resource(group: &str, version: &str, kind: &str, plural: &str) -> kube::core::ApiResource {
    kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk(group, version, kind),
        plural,
    )
}

/// Watches core/v1 events in `ns` until one matches (within the e2e hang
/// guard; on timeout panics with [`describe`] of the namespace).
pub async fn wait_event<F>(env: &Env, ns: &str, matches: F) -> k8s_openapi::api::core::v1::Event
where
    F: FnMut(&k8s_openapi::api::core::v1::Event) -> bool,
{
    let wait = crate::e2e::next_event(&env.client, ns, matches);
    match tokio::time::timeout(HANG_GUARD, wait).await {
        Ok(e) => e,
        Err(_) => panic!(
            "no matching event in {ns} within {HANG_GUARD:?}:\n{}",
            describe(env, ns).await
        ),
    }
}

/// Watches a v1beta1 PodGroup until its condition of `type_` satisfies
/// `pred`; returns the condition (on timeout panics with [`describe`]).
pub async fn wait_podgroup_condition<F>(
    env: &Env,
    ns: &str,
    name: &str,
    type_: &str,
    pred: F,
) -> Value
where
    F: FnMut(&Value) -> bool,
{
    let wait = crate::e2e::podgroup_condition(&env.client, ns, name, type_, pred);
    match tokio::time::timeout(HANG_GUARD, wait).await {
        Ok(c) => c,
        Err(_) => panic!(
            "podgroup {ns}/{name}: condition {type_} not reached within {HANG_GUARD:?}:\n{}",
            describe(env, ns).await
        ),
    }
}
