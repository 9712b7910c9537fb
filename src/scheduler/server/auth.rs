//! Delegated authentication and authorization for the daemon's endpoints,
//! as kube-scheduler does it (k8s.io/apiserver's delegating authn/authz): a
//! bearer token is checked with a `TokenReview`, the request with a
//! `SubjectAccessReview` for the non-resource URL (`/metrics` → path
//! `/metrics`, verb = the lowercased HTTP method, `get`).
//!
//! - Always-allowed paths (`--authorization-always-allow-paths`, by default
//!   `/healthz`, `/readyz`, `/livez`) skip both, so probes need no token.
//! - No token, or one the API server does not accept → 401. Unlike
//!   kube-scheduler there is no anonymous user: a request without a token is
//!   never sent to authorization.
//! - Authenticated but not allowed → 403.
//! - A review that fails (API unreachable, an error status) → 500: never
//!   allowed on error, and errors are not cached.
//!
//! Results are cached briefly and in bounded caches ([`CacheTtls`]) so that
//! scrapes do not cost two API calls each.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;

use super::cache::TtlCache;

/// Who a token belongs to (a TokenReview's `status.user`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    pub username: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// What is asked of authorization: a non-resource URL and a verb.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NonResource {
    pub path: String,
    pub verb: String,
}

/// A SubjectAccessReview's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    /// The authorizer's reason, shown in a 403's body when not empty.
    pub reason: String,
}

/// A review that could not be made or answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewError(pub String);

impl std::fmt::Display for ReviewError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Asks the API server about tokens and access. The daemon's implementation
/// is `crate::kube::review::KubeReviewer`; tests use a fake.
pub trait Reviewer: Send + Sync + 'static {
    /// `Ok(None)` when the token is not accepted.
    fn authenticate<'a>(
        &'a self,
        token: &'a str,
    ) -> BoxFuture<'a, Result<Option<UserInfo>, ReviewError>>;

    fn authorize<'a>(
        &'a self,
        user: &'a UserInfo,
        request: &'a NonResource,
    ) -> BoxFuture<'a, Result<Decision, ReviewError>>;
}

/// How long review results are kept. kube-scheduler keeps both for 10 s;
/// refusals are kept shorter here so a fix to RBAC shows up sooner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheTtls {
    pub authenticated: Duration,
    pub unauthenticated: Duration,
    pub allowed: Duration,
    pub denied: Duration,
}

impl Default for CacheTtls {
    fn default() -> Self {
        CacheTtls {
            authenticated: Duration::from_secs(10),
            unauthenticated: Duration::from_secs(2),
            allowed: Duration::from_secs(10),
            denied: Duration::from_secs(2),
        }
    }
}

/// Entries per cache: enough for every scraper and operator at once; a flood
/// of distinct bad tokens only evicts, it does not grow memory.
const CACHE_CAPACITY: usize = 1024;

/// `--authorization-always-allow-paths`: exact paths, or prefixes written
/// with a trailing `*` (`/debug/*`), as in k8s.io/apiserver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowPaths(Vec<String>);

impl AllowPaths {
    pub fn new<I: IntoIterator<Item = S>, S: Into<String>>(paths: I) -> Self {
        AllowPaths(
            paths
                .into_iter()
                .map(Into::into)
                .filter(|p| !p.is_empty())
                .collect(),
        )
    }

    pub fn allows(&self, path: &str) -> bool {
        self.0.iter().any(|p| match p.strip_suffix('*') {
            Some(prefix) => path.starts_with(prefix),
            None => path == p,
        })
    }
}

/// The authentication and authorization state shared by every request.
pub struct Auth {
    reviewer: Arc<dyn Reviewer>,
    always_allow: AllowPaths,
    ttls: CacheTtls,
    /// Token → user (`None`: not accepted).
    tokens: TtlCache<String, Option<UserInfo>>,
    /// User and request → decision.
    decisions: TtlCache<String, Decision>,
}

impl Auth {
    pub fn new(reviewer: Arc<dyn Reviewer>, always_allow: AllowPaths, ttls: CacheTtls) -> Self {
        Auth {
            reviewer,
            always_allow,
            ttls,
            tokens: TtlCache::new(CACHE_CAPACITY),
            decisions: TtlCache::new(CACHE_CAPACITY),
        }
    }

    async fn user(&self, token: &str) -> Result<Option<UserInfo>, ReviewError> {
        if let Some(cached) = self.tokens.get(&token.to_string()) {
            return Ok(cached);
        }
        let user = self.reviewer.authenticate(token).await?;
        let ttl = if user.is_some() {
            self.ttls.authenticated
        } else {
            self.ttls.unauthenticated
        };
        self.tokens.insert(token.to_string(), user.clone(), ttl);
        Ok(user)
    }

    async fn decide(
        &self,
        user: &UserInfo,
        request: &NonResource,
    ) -> Result<Decision, ReviewError> {
        let key = decision_key(user, request);
        if let Some(cached) = self.decisions.get(&key) {
            return Ok(cached);
        }
        let decision = self.reviewer.authorize(user, request).await?;
        let ttl = if decision.allowed {
            self.ttls.allowed
        } else {
            self.ttls.denied
        };
        self.decisions.insert(key, decision.clone(), ttl);
        Ok(decision)
    }

    /// The response that refuses `request`, or `None` to let it through.
    async fn check(&self, method: &str, path: &str, headers: &HeaderMap) -> Option<Response> {
        if self.always_allow.allows(path) {
            return None;
        }
        let Some(token) = bearer_token(headers) else {
            return Some(unauthorized());
        };
        let user = match self.user(token).await {
            Ok(Some(user)) => user,
            Ok(None) => return Some(unauthorized()),
            Err(e) => {
                tracing::warn!(error = %e, "TokenReview failed");
                return Some(review_failed());
            }
        };
        let request = NonResource {
            path: path.to_string(),
            verb: method.to_ascii_lowercase(),
        };
        match self.decide(&user, &request).await {
            Ok(d) if d.allowed => None,
            Ok(d) => Some(forbidden(&user, &request, &d.reason)),
            Err(e) => {
                tracing::warn!(error = %e, "SubjectAccessReview failed");
                Some(review_failed())
            }
        }
    }
}

/// Everything that identifies a decision: user, groups, uid, extra, request.
fn decision_key(user: &UserInfo, request: &NonResource) -> String {
    let extra: Vec<String> = user
        .extra
        .iter()
        .map(|(k, v)| format!("{k}={}", v.join(",")))
        .collect();
    [
        request.verb.as_str(),
        request.path.as_str(),
        user.username.as_str(),
        user.uid.as_str(),
        &user.groups.join("\u{0}"),
        &extra.join("\u{0}"),
    ]
    .join("\u{1}")
}

/// The token of `Authorization: Bearer <token>`, if there is one.
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        "Unauthorized\n",
    )
        .into_response()
}

fn forbidden(user: &UserInfo, request: &NonResource, reason: &str) -> Response {
    let mut body = format!(
        "forbidden: User {:?} cannot {} path {:?}",
        user.username, request.verb, request.path
    );
    if !reason.is_empty() {
        body.push_str(": ");
        body.push_str(reason);
    }
    body.push('\n');
    (StatusCode::FORBIDDEN, body).into_response()
}

fn review_failed() -> Response {
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        "Internal Server Error: the request could not be authenticated or authorized\n",
    )
        .into_response()
}

/// The middleware: refuses or passes each request (`axum::middleware::from_fn_with_state`).
pub async fn guard(State(auth): State<Arc<Auth>>, request: Request<Body>, next: Next) -> Response {
    let refusal = auth
        .check(
            request.method().as_str(),
            request.uri().path(),
            request.headers(),
        )
        .await;
    match refusal {
        Some(response) => response,
        None => next.run(request).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;
    use crate::server::{Health, ServerState, router};
    use axum::http::Request;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Mutex, RwLock};
    use tower::ServiceExt;

    /// Tokens: `good` is alice (may get /metrics and /debug/*), `reader` is
    /// bob (nothing), `broken` makes authentication fail, and alice on
    /// `/debug/leader` makes authorization fail.
    #[derive(Default)]
    struct Fake {
        token_reviews: AtomicUsize,
        access_reviews: AtomicUsize,
        asked: Mutex<Vec<NonResource>>,
    }

    impl Reviewer for Fake {
        fn authenticate<'a>(
            &'a self,
            token: &'a str,
        ) -> BoxFuture<'a, Result<Option<UserInfo>, ReviewError>> {
            self.token_reviews.fetch_add(1, Ordering::Relaxed);
            let user = |name: &str| UserInfo {
                username: name.into(),
                groups: vec!["system:authenticated".into()],
                ..UserInfo::default()
            };
            let answer = match token {
                "good" => Ok(Some(user("alice"))),
                "reader" => Ok(Some(user("bob"))),
                "broken" => Err(ReviewError("connection refused".into())),
                _ => Ok(None),
            };
            Box::pin(async move { answer })
        }

        fn authorize<'a>(
            &'a self,
            user: &'a UserInfo,
            request: &'a NonResource,
        ) -> BoxFuture<'a, Result<Decision, ReviewError>> {
            self.access_reviews.fetch_add(1, Ordering::Relaxed);
            self.asked.lock().unwrap().push(request.clone());
            let answer = if request.path == "/debug/leader" {
                Err(ReviewError("503".into()))
            } else {
                Ok(Decision {
                    allowed: user.username == "alice" && request.verb == "get",
                    reason: if user.username == "bob" {
                        "no RBAC policy matched".into()
                    } else {
                        String::new()
                    },
                })
            };
            Box::pin(async move { answer })
        }
    }

    fn app(fake: Arc<Fake>) -> axum::Router {
        let state = ServerState {
            metrics: Arc::new(Metrics::new().unwrap()),
            health: Arc::new(Health::default()),
            debug: Arc::new(RwLock::new(Arc::new("queue: pod team-a/secret-0\n".into()))),
            explain: None,
        };
        state.health.synced.store(true, Ordering::Relaxed);
        let auth = Auth::new(
            fake,
            AllowPaths::new(["/healthz", "/readyz", "/livez"]),
            CacheTtls::default(),
        );
        router(state).layer(axum::middleware::from_fn_with_state(Arc::new(auth), guard))
    }

    async fn call(
        app: &axum::Router,
        method: &str,
        path: &str,
        token: Option<&str>,
    ) -> (u16, String) {
        let mut request = Request::builder().method(method).uri(path);
        if let Some(t) = token {
            request = request.header("authorization", format!("Bearer {t}"));
        }
        let response = app
            .clone()
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = response.status().as_u16();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn tokens_and_rbac_decide_who_reads_what() {
        let fake = Arc::new(Fake::default());
        let app = app(fake.clone());
        for path in ["/metrics", "/debug/queue"] {
            let (code, body) = call(&app, "GET", path, Some("good")).await;
            assert_eq!(code, 200, "{path}: {body}");
            let (code, body) = call(&app, "GET", path, Some("reader")).await;
            assert_eq!(code, 403, "{path}");
            assert!(
                body.contains("User \"bob\" cannot get path") && body.contains("no RBAC"),
                "{body}"
            );
            assert!(!body.contains("secret-0"), "{body}");
            for token in [None, Some("nobody"), Some("")] {
                let (code, body) = call(&app, "GET", path, token).await;
                assert_eq!(code, 401, "{path} {token:?}");
                assert!(!body.contains("secret-0"), "{body}");
            }
        }
        // Probes need no token, whatever they send.
        for path in ["/healthz", "/livez", "/readyz"] {
            assert_eq!(call(&app, "GET", path, None).await.0, 200, "{path}");
            assert_eq!(
                call(&app, "GET", path, Some("nobody")).await.0,
                200,
                "{path}"
            );
        }
        // Not an allowed path: an unknown one is refused before it is a 404.
        assert_eq!(call(&app, "GET", "/readyz/extra", None).await.0, 401);
        assert_eq!(call(&app, "GET", "/nope", Some("good")).await.0, 404);
        // Non-resource verbs are the lowercased method, as in k8s.io/apiserver.
        assert_eq!(call(&app, "POST", "/metrics", Some("good")).await.0, 403);
        let asked = fake.asked.lock().unwrap().clone();
        assert!(asked.contains(&NonResource {
            path: "/metrics".into(),
            verb: "get".into()
        }));
        assert!(asked.contains(&NonResource {
            path: "/metrics".into(),
            verb: "post".into()
        }));
    }

    #[tokio::test]
    async fn review_failures_refuse_with_500_and_are_not_cached() {
        let fake = Arc::new(Fake::default());
        let app = app(fake.clone());
        for _ in 0..2 {
            assert_eq!(call(&app, "GET", "/metrics", Some("broken")).await.0, 500);
            assert_eq!(
                call(&app, "GET", "/debug/leader", Some("good")).await.0,
                500
            );
        }
        assert_eq!(
            fake.token_reviews.load(Ordering::Relaxed),
            3,
            "broken twice, good once"
        );
        assert_eq!(fake.access_reviews.load(Ordering::Relaxed), 2);
    }

    #[tokio::test]
    async fn repeated_scrapes_are_answered_from_the_caches() {
        let fake = Arc::new(Fake::default());
        let app = app(fake.clone());
        for _ in 0..5 {
            assert_eq!(call(&app, "GET", "/metrics", Some("good")).await.0, 200);
            assert_eq!(call(&app, "GET", "/metrics", Some("reader")).await.0, 403);
            assert_eq!(call(&app, "GET", "/metrics", Some("nobody")).await.0, 401);
        }
        assert_eq!(fake.token_reviews.load(Ordering::Relaxed), 3);
        assert_eq!(fake.access_reviews.load(Ordering::Relaxed), 2);
        // Another path is another decision, for the same cached user.
        assert_eq!(call(&app, "GET", "/debug/queue", Some("good")).await.0, 200);
        assert_eq!(fake.token_reviews.load(Ordering::Relaxed), 3);
        assert_eq!(fake.access_reviews.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn bearer_tokens_and_allowed_paths_parse() {
        let headers = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, v.parse().unwrap());
            h
        };
        assert_eq!(bearer_token(&headers("Bearer abc")), Some("abc"));
        assert_eq!(bearer_token(&headers("bearer  abc ")), Some("abc"));
        assert_eq!(bearer_token(&headers("Basic abc")), None);
        assert_eq!(bearer_token(&headers("Bearer ")), None);
        assert_eq!(bearer_token(&HeaderMap::new()), None);
        let allow = AllowPaths::new(["/healthz", "/debug/*", ""]);
        assert!(allow.allows("/healthz") && allow.allows("/debug/queue"));
        assert!(!allow.allows("/healthz/x") && !allow.allows("/metrics") && !allow.allows(""));
    }
}
