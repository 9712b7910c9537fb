//! `GET /explain?namespace=NS&target=KIND/NAME`: the leading scheduler's
//! answer about a pod or gang (`muster_core::explain`), as JSON. The
//! handler asks the scheduling loop (which alone reads the engine) over a
//! channel and waits a bounded time; a standby, a loop that does not answer
//! in time, or a full channel is a 503 the caller may retry elsewhere.

use std::time::Duration;

use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tokio::sync::{mpsc, oneshot};

use super::ServerState;
use muster_core::engine::ExplainTarget;
use muster_core::explain::Explanation;

/// Requests waiting for the loop at most; more are refused (503).
pub const QUEUED_REQUESTS: usize = 64;
/// How long a request waits for the loop's answer.
const ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// One question for the scheduling loop.
pub struct ExplainRequest {
    pub target: ExplainTarget,
    pub reply: oneshot::Sender<Vec<Explanation>>,
}

pub type ExplainSender = mpsc::Sender<ExplainRequest>;

#[derive(Deserialize)]
pub(super) struct Params {
    #[serde(default)]
    namespace: Option<String>,
    target: String,
}

/// Every refusal is a Kubernetes `Status`, as clients of the API expect.
fn refuse(code: StatusCode, why: impl Into<String>) -> Response {
    let reason = match code {
        StatusCode::BAD_REQUEST => "BadRequest",
        StatusCode::NOT_FOUND => "NotFound",
        _ => "ServiceUnavailable",
    };
    let status = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": why.into(),
        "reason": reason,
        "code": code.as_u16(),
    });
    (code, Json(status)).into_response()
}

pub(super) async fn explain(State(s): State<ServerState>, Query(p): Query<Params>) -> Response {
    let Some(ask) = s.explain.clone() else {
        return refuse(StatusCode::NOT_FOUND, "this server does not explain");
    };
    let namespace = p
        .namespace
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or("default");
    if namespace.len() > 253 || p.target.len() > 512 {
        return refuse(StatusCode::BAD_REQUEST, "namespace or target too long");
    }
    let target = match ExplainTarget::parse(namespace, &p.target) {
        Ok(t) => t,
        Err(why) => return refuse(StatusCode::BAD_REQUEST, why),
    };
    if !s.health.leading.load(std::sync::atomic::Ordering::Relaxed) {
        return refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "this replica is a standby: only the leader's state is current; retry (the Service reaches the leader)",
        );
    }
    let (reply, answer) = oneshot::channel();
    if ask.try_send(ExplainRequest { target, reply }).is_err() {
        return refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many explain requests waiting; retry",
        );
    }
    match tokio::time::timeout(ANSWER_WITHIN, answer).await {
        Ok(Ok(answers)) => Json(answers).into_response(),
        Ok(Err(_)) => refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "the scheduling loop stopped",
        ),
        Err(_) => refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "the scheduling loop did not answer within {}s",
                ANSWER_WITHIN.as_secs()
            ),
        ),
    }
}
