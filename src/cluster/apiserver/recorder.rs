//! Request recording: which API calls clients made, in the shape RBAC
//! authorizes them (verb, API group, resource, subresource, namespace), so a
//! test can derive the permissions a component needs by running it.
//!
//! Off unless [`super::SimConfig::record_requests`] is set. When on, each
//! resource request costs one insert into a deduplicated set behind a mutex;
//! the set stays small (distinct call shapes, not calls). Discovery and other
//! non-resource URLs (`/api`, `/apis/<group>/<version>`, `/version`) are not
//! recorded: every authenticated user may read them (`system:discovery`).

use std::collections::BTreeSet;
use std::sync::Mutex;

use axum::http::HeaderMap;

/// One kind of API call, as an RBAC rule would match it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ApiCall {
    /// The client's `User-Agent` header (empty when it sent none): tells the
    /// component under test apart from the test's own setup and checks.
    pub user_agent: String,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
    pub verb: String,
    /// API group; empty for the core group.
    pub group: String,
    /// Plural resource name, e.g. `pods`.
    pub resource: String,
    /// `status`, `binding`, or empty.
    pub subresource: String,
    /// Namespace of the request; empty for cluster-scoped and all-namespace requests.
    pub namespace: String,
}

/// The recorded calls (present only when recording is enabled).
#[derive(Debug, Default)]
pub(crate) struct Recorder {
    calls: Mutex<BTreeSet<ApiCall>>,
}

impl Recorder {
    pub fn record(
        &self,
        headers: &HeaderMap,
        verb: &str,
        group: &str,
        resource: &str,
        subresource: Option<&str>,
        namespace: Option<&str>,
    ) {
        let call = ApiCall {
            user_agent: headers
                .get("user-agent")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string(),
            verb: verb.to_string(),
            group: group.to_string(),
            resource: resource.to_string(),
            subresource: subresource.unwrap_or("").to_string(),
            namespace: namespace.unwrap_or("").to_string(),
        };
        self.lock().insert(call);
    }

    pub fn calls(&self) -> BTreeSet<ApiCall> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<ApiCall>> {
        // An insert cannot leave the set inconsistent, even after a panic.
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_each_call_shape_once_with_its_user_agent() {
        let r = Recorder::default();
        let mut headers = HeaderMap::new();
        headers.insert("user-agent", "muster".parse().unwrap());
        for _ in 0..3 {
            r.record(&headers, "create", "", "pods", Some("binding"), Some("a"));
        }
        r.record(&HeaderMap::new(), "list", "", "pods", None, None);
        let calls: Vec<_> = r.calls().into_iter().collect();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].user_agent, "");
        assert_eq!(calls[0].namespace, "");
        assert_eq!(
            (calls[1].verb.as_str(), calls[1].subresource.as_str()),
            ("create", "binding")
        );
        assert_eq!(calls[1].user_agent, "muster");
    }
}
