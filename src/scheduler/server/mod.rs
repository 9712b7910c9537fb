//! The daemon's HTTP endpoints: `/metrics`, `/healthz`, `/livez`, `/readyz`,
//! `/debug/queue`, `/debug/leader` and `/explain` ([`explain`], the one
//! endpoint that asks the loop rather than reading what it published). Handlers read only what the scheduling
//! loop publishes (`Health` atomics, the metrics registry, a swapped debug
//! snapshot); they never lock the loop's state.
//!
//! Readiness means "this replica can serve": caches synced, loop alive, not
//! shutting down. It does not depend on leadership, as kube-scheduler's does
//! not: a standby is ready (so a rolling update can bring a new replica up
//! while the old leader still runs), and leadership is reported by the
//! `muster_leader` metric and `/debug/leader` instead.
//!
//! [`Serving::Secure`] (what `muster run` does unless `--insecure-serving`)
//! serves them over TLS ([`tls`]) behind delegated authentication and
//! authorization ([`auth`]): every tenant's pod and group names are in
//! `/debug/queue`, so only those RBAC allows may read them.

pub mod auth;
mod cache;
pub mod explain;
pub mod tls;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;

use crate::metrics::Metrics;

/// Liveness and readiness facts the loop and the leader elector publish.
#[derive(Debug, Default)]
pub struct Health {
    /// Informer caches have completed their initial list.
    pub synced: AtomicBool,
    /// This replica holds the lease (or leader election is off). Reported by
    /// `/debug/leader`; not a readiness condition.
    pub leading: AtomicBool,
    /// Unix millis of the scheduling loop's last iteration.
    pub loop_heartbeat_ms: AtomicU64,
    /// Set once shutdown has begun.
    pub shutting_down: AtomicBool,
    /// Why the daemon cannot go on (a critical task stopped): fails both
    /// readiness and liveness until the process exits.
    pub failed: OnceLock<String>,
}

/// A loop that has not iterated for this long is reported dead by `/livez`.
const LOOP_STALL_LIMIT: Duration = Duration::from_secs(60);

impl Health {
    pub fn beat(&self) {
        self.loop_heartbeat_ms.store(unix_ms(), Ordering::Relaxed);
    }

    /// Records why the daemon cannot go on; the first reason stays.
    pub fn fail(&self, why: String) {
        let _ = self.failed.set(why);
    }

    fn loop_alive(&self) -> bool {
        let last = self.loop_heartbeat_ms.load(Ordering::Relaxed);
        last == 0 || unix_ms().saturating_sub(last) < LOOP_STALL_LIMIT.as_millis() as u64
    }
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Everything the handlers read.
#[derive(Clone)]
pub struct ServerState {
    pub metrics: Arc<Metrics>,
    pub health: Arc<Health>,
    /// A text rendering of queue and gang state, replaced by the loop periodically.
    pub debug: Arc<RwLock<Arc<String>>>,
    /// Where `/explain` asks the scheduling loop; `None` serves no `/explain`.
    pub explain: Option<explain::ExplainSender>,
}

pub fn router(state: ServerState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(livez))
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .route("/debug/queue", get(debug))
        .route("/debug/leader", get(debug_leader))
        .route("/explain", get(explain::explain))
        .with_state(state)
}

/// How the endpoints are served.
pub enum Serving {
    /// Plain HTTP, no authentication: for local use (`muster simulate`,
    /// in-process tests), never exposed beyond the machine.
    Insecure,
    /// HTTPS, and every path not always allowed needs a token RBAC allows.
    Secure {
        tls: Arc<rustls::ServerConfig>,
        auth: Arc<auth::Auth>,
    },
}

/// Binds `addr` and serves until `shutdown` completes. Returns the bound
/// address, so callers can use port 0.
pub async fn serve(
    addr: SocketAddr,
    state: ServerState,
    serving: Serving,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<std::io::Result<()>>)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let handle = match serving {
        Serving::Insecure => tokio::spawn(async move {
            axum::serve(listener, router(state))
                .with_graceful_shutdown(shutdown)
                .await
        }),
        Serving::Secure { tls, auth } => {
            let app = router(state).layer(axum::middleware::from_fn_with_state(auth, auth::guard));
            let listener = tls::TlsListener::new(listener, tls)?;
            tokio::spawn(async move {
                axum::serve(listener, app)
                    .with_graceful_shutdown(shutdown)
                    .await
            })
        }
    };
    Ok((bound, handle))
}

async fn metrics(State(s): State<ServerState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        s.metrics.render(),
    )
}

async fn livez(State(s): State<ServerState>) -> impl IntoResponse {
    if let Some(why) = s.health.failed.get() {
        (StatusCode::SERVICE_UNAVAILABLE, format!("failed: {why}"))
    } else if s.health.loop_alive() {
        (StatusCode::OK, "ok".to_string())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "scheduling loop stalled for more than {}s",
                LOOP_STALL_LIMIT.as_secs()
            ),
        )
    }
}

/// kube-scheduler's readiness checks. Leadership is deliberately not one: a
/// standby that would fail readiness makes every rolling update stall (the new
/// replica cannot lead while the old leader lives).
async fn readyz(State(s): State<ServerState>) -> impl IntoResponse {
    let h = &s.health;
    let checks = [
        ("informer caches synced", h.synced.load(Ordering::Relaxed)),
        (
            "not shutting down",
            !h.shutting_down.load(Ordering::Relaxed),
        ),
        ("scheduling loop alive", h.loop_alive()),
        ("critical tasks running", h.failed.get().is_none()),
    ];
    let mut body: String = checks
        .iter()
        .map(|(name, ok)| format!("[{}] {name}\n", if *ok { "+" } else { "-" }))
        .collect();
    if let Some(why) = h.failed.get() {
        body.push_str(&format!("failed: {why}\n"));
    }
    let status = if checks.iter().all(|(_, ok)| *ok) {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, body)
}

async fn debug(State(s): State<ServerState>) -> impl IntoResponse {
    let snapshot = s
        .debug
        .read()
        .map(|g| g.clone())
        .unwrap_or_else(|p| p.into_inner().clone());
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        (*snapshot).clone(),
    )
}

/// Whether this replica leads: `leading` or `standby`, one line, always 200
/// (a standby is healthy; this is a fact, not a check).
async fn debug_leader(State(s): State<ServerState>) -> impl IntoResponse {
    let role = if s.health.leading.load(Ordering::Relaxed) {
        "leading\n"
    } else {
        "standby\n"
    };
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], role)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    fn state() -> ServerState {
        ServerState {
            metrics: Arc::new(Metrics::new().unwrap()),
            health: Arc::new(Health::default()),
            debug: Arc::new(RwLock::new(Arc::new("queue: empty".into()))),
            explain: None,
        }
    }

    /// One request through the router, no socket.
    async fn get(state: &ServerState, path: &str) -> (StatusCode, String) {
        let request = Request::get(path).body(Body::empty()).unwrap();
        let response = router(state.clone()).oneshot(request).await.unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    /// A heartbeat older than the stall limit.
    fn stall(h: &Health) {
        let long_ago = unix_ms() - LOOP_STALL_LIMIT.as_millis() as u64 - 1_000;
        h.loop_heartbeat_ms.store(long_ago, Ordering::Relaxed);
    }

    #[tokio::test]
    async fn liveness_follows_the_loop_heartbeat() {
        let s = state();
        for path in ["/healthz", "/livez"] {
            assert_eq!(get(&s, path).await, (StatusCode::OK, "ok".into()));
        }
        s.health.beat();
        assert_eq!(get(&s, "/livez").await.0, StatusCode::OK);
        stall(&s.health);
        for path in ["/healthz", "/livez"] {
            let (code, body) = get(&s, path).await;
            assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
            assert!(body.contains("stalled"), "{body}");
        }
    }

    #[tokio::test]
    async fn readiness_is_sync_and_liveness_not_leadership() {
        let s = state();
        let (code, body) = get(&s, "/readyz").await;
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("[-] informer caches synced"), "{body}");

        // A synced standby is ready, and says nothing about leading.
        s.health.synced.store(true, Ordering::Relaxed);
        let (code, body) = get(&s, "/readyz").await;
        assert_eq!(code, StatusCode::OK, "{body}");
        assert!(!body.contains("lead"), "{body}");
        s.health.leading.store(true, Ordering::Relaxed);
        assert_eq!(get(&s, "/readyz").await.0, StatusCode::OK);

        s.health.beat();
        stall(&s.health);
        let (code, body) = get(&s, "/readyz").await;
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("[-] scheduling loop alive"), "{body}");
        s.health.beat();

        s.health.shutting_down.store(true, Ordering::Relaxed);
        let (code, body) = get(&s, "/readyz").await;
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("[-] not shutting down"), "{body}");
        assert!(body.contains("[+] informer caches synced"), "{body}");
    }

    #[tokio::test]
    async fn a_failed_daemon_is_neither_ready_nor_live_and_says_why() {
        let s = state();
        s.health.synced.store(true, Ordering::Relaxed);
        s.health.beat();
        assert_eq!(get(&s, "/readyz").await.0, StatusCode::OK);
        s.health.fail("critical task pods panicked: boom".into());
        s.health.fail("a later reason".into());
        let (code, body) = get(&s, "/readyz").await;
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("[-] critical tasks running"), "{body}");
        assert!(
            body.contains("failed: critical task pods panicked: boom"),
            "{body}"
        );
        assert_eq!(
            get(&s, "/livez").await,
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "failed: critical task pods panicked: boom".into()
            )
        );
    }

    #[tokio::test]
    async fn debug_pages_show_the_queue_and_the_role() {
        let s = state();
        assert_eq!(
            get(&s, "/debug/queue").await,
            (StatusCode::OK, "queue: empty".into())
        );
        *s.debug.write().unwrap() = Arc::new("queue: 3 active".into());
        assert_eq!(get(&s, "/debug/queue").await.1, "queue: 3 active");
        assert_eq!(
            get(&s, "/debug/leader").await,
            (StatusCode::OK, "standby\n".into())
        );
        s.health.leading.store(true, Ordering::Relaxed);
        assert_eq!(get(&s, "/debug/leader").await.1, "leading\n");
    }

    #[tokio::test]
    async fn metrics_are_prometheus_text() {
        let s = state();
        let request = Request::get("/metrics").body(Body::empty()).unwrap();
        let response = router(s.clone()).oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let content_type = response.headers()[header::CONTENT_TYPE].to_str().unwrap();
        assert!(
            content_type.starts_with("text/plain; version=0.0.4"),
            "{content_type}"
        );
        let (_, body) = get(&s, "/metrics").await;
        assert!(body.contains("muster_gang_timeouts_total"), "{body}");
        assert_eq!(get(&s, "/nope").await.0, StatusCode::NOT_FOUND);
    }

    #[tokio::test]
    async fn serve_binds_port_zero_and_stops_on_shutdown() {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let (addr, handle) = serve(
            "127.0.0.1:0".parse().unwrap(),
            state(),
            Serving::Insecure,
            async {
                let _ = rx.await;
            },
        )
        .await
        .unwrap();
        assert_ne!(addr.port(), 0);
        let _ = tx.send(());
        handle.await.unwrap().unwrap();
    }
}
