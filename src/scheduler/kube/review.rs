//! The daemon's [`Reviewer`]: `TokenReview` (authentication.k8s.io/v1) and
//! `SubjectAccessReview` (authorization.k8s.io/v1) through its own client,
//! as kube-scheduler's delegating authenticator and authorizer do. Needs
//! `create` on both (kube-scheduler's `system:auth-delegator`).

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

use crate::server::auth::{Decision, NonResource, ReviewError, Reviewer, UserInfo};
use futures::future::BoxFuture;

pub struct KubeReviewer {
    client: kube::Client,
}

impl KubeReviewer {
    pub fn new(client: kube::Client) -> Self {
        KubeReviewer { client }
    }
}

impl Reviewer for KubeReviewer {
    fn authenticate<'a>(
        &'a self,
        token: &'a str,
    ) -> BoxFuture<'a, Result<Option<UserInfo>, ReviewError>> {
        Box::pin(async move {
            let review = TokenReview {
                spec: TokenReviewSpec {
                    token: token.to_string(),
                    audiences: None,
                },
                ..TokenReview::default()
            };
            let answer = Api::<TokenReview>::all(self.client.clone())
                .create(&PostParams::default(), &review)
                .await
                .map_err(|e| ReviewError(format!("TokenReview: {e}")))?;
            let status = answer.status.unwrap_or_default();
            if status.authenticated != Some(true) {
                return Ok(None);
            }
            let user = status.user.unwrap_or_default();
            let Some(username) = user.username.filter(|u| !u.is_empty()) else {
                // Authenticated as nobody: not a user anything can be granted to.
                return Ok(None);
            };
            Ok(Some(UserInfo {
                username,
                uid: user.uid.unwrap_or_default(),
                groups: user.groups.unwrap_or_default(),
                extra: user.extra.unwrap_or_default(),
            }))
        })
    }

    fn authorize<'a>(
        &'a self,
        user: &'a UserInfo,
        request: &'a NonResource,
    ) -> BoxFuture<'a, Result<Decision, ReviewError>> {
        Box::pin(async move {
            let review = SubjectAccessReview {
                spec: SubjectAccessReviewSpec {
                    user: Some(user.username.clone()),
                    uid: Some(user.uid.clone()).filter(|u| !u.is_empty()),
                    groups: Some(user.groups.clone()),
                    extra: Some(user.extra.clone()).filter(|e| !e.is_empty()),
                    non_resource_attributes: Some(NonResourceAttributes {
                        path: Some(request.path.clone()),
                        verb: Some(request.verb.clone()),
                    }),
                    resource_attributes: None,
                },
                ..SubjectAccessReview::default()
            };
            let answer = Api::<SubjectAccessReview>::all(self.client.clone())
                .create(&PostParams::default(), &review)
                .await
                .map_err(|e| ReviewError(format!("SubjectAccessReview: {e}")))?;
            let status = answer.status.unwrap_or_default();
            let reason = status
                .reason
                .or(status.evaluation_error)
                .unwrap_or_default();
            Ok(Decision {
                allowed: status.allowed,
                reason,
            })
        })
    }
}
