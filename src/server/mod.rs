//! The daemon's HTTP endpoints: `/metrics`, `/healthz`, `/livez`, `/readyz` and
//! `/debug/queue`. Handlers read only what the scheduling loop publishes
//! (`Health` atomics, the metrics registry, a swapped debug snapshot); they
//! never lock the loop's state.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
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
    /// This replica holds the lease (or leader election is off).
    pub leading: AtomicBool,
    /// Unix millis of the scheduling loop's last iteration.
    pub loop_heartbeat_ms: AtomicU64,
    /// Set once shutdown has begun.
    pub shutting_down: AtomicBool,
}

/// A loop that has not iterated for this long is reported dead by `/livez`.
const LOOP_STALL_LIMIT: Duration = Duration::from_secs(60);

impl Health {
    pub fn beat(&self) {
        self.loop_heartbeat_ms.store(unix_ms(), Ordering::Relaxed);
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
}

pub fn router(state: ServerState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(livez))
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .route("/debug/queue", get(debug))
        .with_state(state)
}

/// Binds `addr` and serves until `shutdown` completes. Returns the bound address
/// through `on_bound` so callers can use port 0.
pub async fn serve(
    addr: SocketAddr,
    state: ServerState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<std::io::Result<()>>)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let handle = tokio::spawn(async move {
        axum::serve(listener, router(state))
            .with_graceful_shutdown(shutdown)
            .await
    });
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
    if s.health.loop_alive() {
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

async fn readyz(State(s): State<ServerState>) -> impl IntoResponse {
    let h = &s.health;
    let checks = [
        ("informer caches synced", h.synced.load(Ordering::Relaxed)),
        ("leading", h.leading.load(Ordering::Relaxed)),
        (
            "not shutting down",
            !h.shutting_down.load(Ordering::Relaxed),
        ),
        ("scheduling loop alive", h.loop_alive()),
    ];
    let body: String = checks
        .iter()
        .map(|(name, ok)| format!("[{}] {name}\n", if *ok { "+" } else { "-" }))
        .collect();
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

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        let code = out[9..12].parse().unwrap();
        (code, out)
    }

    #[tokio::test]
    async fn endpoints_reflect_published_state() {
        let state = ServerState {
            metrics: Arc::new(Metrics::new().unwrap()),
            health: Arc::new(Health::default()),
            debug: Arc::new(RwLock::new(Arc::new("queue: empty".into()))),
        };
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let (addr, handle) = serve("127.0.0.1:0".parse().unwrap(), state.clone(), async {
            let _ = rx.await;
        })
        .await
        .unwrap();

        assert_eq!(get(addr, "/livez").await.0, 200);
        let (code, body) = get(addr, "/readyz").await;
        assert_eq!(code, 503);
        assert!(body.contains("[-] informer caches synced"), "{body}");
        state.health.synced.store(true, Ordering::Relaxed);
        state.health.leading.store(true, Ordering::Relaxed);
        assert_eq!(get(addr, "/readyz").await.0, 200);
        let (code, body) = get(addr, "/metrics").await;
        assert_eq!(code, 200);
        assert!(body.contains("muster_gang_timeouts_total"));
        assert!(get(addr, "/debug/queue").await.1.contains("queue: empty"));

        let _ = tx.send(());
        handle.await.unwrap().unwrap();
    }
}
