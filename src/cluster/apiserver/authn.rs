//! Authentication for delegating components: `POST
//! /apis/authentication.k8s.io/v1/tokenreviews` (create only, cluster
//! scoped) answered from the cluster's token users.
//!
//! Token users are given at start (`--token-user name=token[,group…]`,
//! [`super::SimConfig::with_token_user`]) and written into the kubeconfig
//! `muster cluster` writes, one user and one context each, so `kubectl
//! --context <name>` acts as them. A user named
//! `system:serviceaccount:<ns>:<sa>` is that ServiceAccount, with its groups,
//! as a real server's ServiceAccount tokens are. Every token user is in
//! `system:authenticated`.
//!
//! The simulator itself does not check tokens on its own API (every request
//! is served): the reviews exist so that components which delegate, like
//! `muster run`'s secure serving, can be tested against it.

use std::collections::HashMap;
use std::str::FromStr;

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::fault::Target;

use super::SimState;
use super::status::{ApiError, ApiResult};

/// A user that authenticates with a bearer token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenUser {
    pub name: String,
    pub token: String,
    /// Groups besides `system:authenticated` (and a ServiceAccount's own).
    pub groups: Vec<String>,
}

impl TokenUser {
    pub fn new(name: &str, token: &str, groups: &[&str]) -> Self {
        TokenUser {
            name: name.to_string(),
            token: token.to_string(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    /// Every group the user is in, as a TokenReview reports them.
    pub fn all_groups(&self) -> Vec<String> {
        let mut groups = self.groups.clone();
        if let Some((ns, _)) = service_account(&self.name) {
            groups.push("system:serviceaccounts".into());
            groups.push(format!("system:serviceaccounts:{ns}"));
        }
        groups.push("system:authenticated".into());
        groups.dedup();
        groups
    }
}

/// `system:serviceaccount:<ns>:<name>` → (ns, name).
pub fn service_account(username: &str) -> Option<(&str, &str)> {
    let rest = username.strip_prefix("system:serviceaccount:")?;
    let (ns, name) = rest.split_once(':')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains(':')).then_some((ns, name))
}

/// `name=token[,group…]`.
impl FromStr for TokenUser {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (name, rest) = s
            .split_once('=')
            .ok_or_else(|| format!("--token-user {s:?}: expected name=token[,group...]"))?;
        let mut parts = rest.split(',');
        let token = parts.next().unwrap_or_default();
        if name.is_empty() || token.is_empty() {
            return Err(format!(
                "--token-user {s:?}: name and token must not be empty"
            ));
        }
        Ok(TokenUser {
            name: name.to_string(),
            token: token.to_string(),
            groups: parts
                .filter(|g| !g.is_empty())
                .map(str::to_string)
                .collect(),
        })
    }
}

/// Token → user.
#[derive(Debug, Default)]
pub(crate) struct Tokens(HashMap<String, TokenUser>);

impl Tokens {
    pub fn new(users: &[TokenUser]) -> Self {
        Tokens(users.iter().map(|u| (u.token.clone(), u.clone())).collect())
    }

    /// The user a bearer token names, with every group.
    pub fn user(&self, token: &str) -> Option<(String, Vec<String>)> {
        self.0.get(token).map(|u| (u.name.clone(), u.all_groups()))
    }

    /// The TokenReview status for `token`.
    pub fn review(&self, token: &str) -> Value {
        match self.0.get(token) {
            Some(user) => json!({
                "authenticated": true,
                "user": {
                    "username": user.name,
                    "uid": format!("muster-sim-{}", user.name),
                    "groups": user.all_groups(),
                },
            }),
            None => json!({"authenticated": false, "error": "invalid bearer token"}),
        }
    }
}

/// The user a request acts as: the token user its bearer token names;
/// anyone else is the kubeconfig's administrator (`system:masters`), since
/// the simulator serves every request (see the module comment).
pub(super) fn requester(state: &SimState, headers: &HeaderMap) -> (String, Vec<String>) {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .and_then(|token| state.tokens.user(token.trim()))
        .unwrap_or_else(|| {
            (
                "kubernetes-admin".to_string(),
                vec![
                    "system:masters".to_string(),
                    "system:authenticated".to_string(),
                ],
            )
        })
}

/// `POST tokenreviews`.
pub(super) async fn serve_token_review(
    state: &SimState,
    method: &Method,
    headers: &HeaderMap,
    body: &Bytes,
) -> ApiResult<Response> {
    let request = ReviewRequest::new(method, headers, body);
    serve_review(
        state,
        request,
        "authentication.k8s.io",
        "tokenreviews",
        |review| {
            let token = review
                .pointer("/spec/token")
                .and_then(Value::as_str)
                .unwrap_or_default();
            state.tokens.review(token)
        },
    )
    .await
}

/// One POST to a review endpoint, as received.
pub(super) struct ReviewRequest<'a> {
    pub method: &'a Method,
    pub headers: &'a HeaderMap,
    pub body: &'a Bytes,
}

impl<'a> ReviewRequest<'a> {
    pub fn new(method: &'a Method, headers: &'a HeaderMap, body: &'a Bytes) -> Self {
        ReviewRequest {
            method,
            headers,
            body,
        }
    }
}

/// What every review endpoint does: create only, recorded and subject to
/// faults like any resource request, a JSON body of the right kind, answered
/// `201` with the body, its apiVersion and kind filled in and `status` set
/// to what `answer` decides from it.
pub(super) async fn serve_review(
    state: &SimState,
    request: ReviewRequest<'_>,
    group: &str,
    plural: &str,
    answer: impl FnOnce(&Value) -> Value,
) -> ApiResult<Response> {
    let ReviewRequest {
        method,
        headers,
        body,
    } = request;
    if *method != Method::POST {
        return Err(ApiError::method_not_allowed(format!(
            "{plural} only supports create"
        )));
    }
    if let Some(r) = &state.recorder {
        r.record(headers, "create", group, plural, None, None);
    }
    let ua = super::request::user_agent(headers);
    state
        .faults
        .before(Target::new("create", group, plural, ua))
        .await?;
    let mut review: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))?;
    if !review.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    let kind = match plural {
        "tokenreviews" => "TokenReview",
        "selfsubjectaccessreviews" => "SelfSubjectAccessReview",
        _ => "SubjectAccessReview",
    };
    review["apiVersion"] = json!(format!("{group}/v1"));
    review["kind"] = json!(kind);
    review["status"] = answer(&review);
    Ok((StatusCode::CREATED, axum::Json(review)).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_users_parse_and_review() {
        let alice: TokenUser = "alice=s3cret,dev,ops".parse().unwrap();
        assert_eq!(alice, TokenUser::new("alice", "s3cret", &["dev", "ops"]));
        let sa: TokenUser = "system:serviceaccount:monitoring:prometheus=tok"
            .parse()
            .unwrap();
        assert_eq!(
            sa.all_groups(),
            [
                "system:serviceaccounts",
                "system:serviceaccounts:monitoring",
                "system:authenticated"
            ]
        );
        for bad in ["alice", "=tok", "alice="] {
            assert!(bad.parse::<TokenUser>().is_err(), "{bad}");
        }
        let tokens = Tokens::new(&[alice, sa]);
        let status = tokens.review("s3cret");
        assert_eq!(status["authenticated"], true);
        assert_eq!(status["user"]["username"], "alice");
        assert_eq!(
            status["user"]["groups"],
            json!(["dev", "ops", "system:authenticated"])
        );
        assert_eq!(tokens.review("guess")["authenticated"], false);
        assert_eq!(tokens.review("")["authenticated"], false);
        assert_eq!(
            service_account("system:serviceaccount:ns:sa"),
            Some(("ns", "sa"))
        );
        assert_eq!(service_account("system:serviceaccount:ns"), None);
    }
}
