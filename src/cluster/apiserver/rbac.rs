//! Authorization for delegating components: `POST
//! /apis/authorization.k8s.io/v1/subjectaccessreviews` (create only)
//! evaluated against the RBAC objects the cluster stores, as the RBAC
//! authorizer does; and of every resource request a token user makes
//! ([`authorize_request`]; the administrator's are all allowed):
//!
//! - ClusterRoleBindings grant their ClusterRole's rules everywhere, and are
//!   the only grants of non-resource URLs (`/metrics`; a trailing `*` in a
//!   rule matches a prefix).
//! - RoleBindings grant a Role (of their namespace) or a ClusterRole's rules
//!   for resources in their namespace only.
//! - Subjects are users, groups and ServiceAccounts
//!   (`system:serviceaccount:<ns>:<name>`); `*` matches any verb, group or
//!   resource; `resourceNames` limit a rule to named objects.
//! - `system:masters` is allowed everything, as on a real server.
//! - Aggregated ClusterRoles (`aggregationRule.clusterRoleSelectors`) hold
//!   the rules of every ClusterRole their selectors match. A real server's
//!   controller writes those rules into the object; here they are gathered
//!   when a decision is made, so decisions agree but `kubectl get` shows the
//!   aggregated role's own rules only.
//! - `POST selfsubjectaccessreviews` (`kubectl auth can-i`) answers for the
//!   requester: the token user its bearer token names, else the
//!   administrator.
//!
//! Not modelled: the default bootstrap roles (create the ones a test needs).

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::http::{HeaderMap, Method};
use axum::response::Response;
use serde_json::{Value, json};

use super::SimState;
use super::authn::{ReviewRequest, serve_review, service_account};
use super::status::ApiResult;
use muster_core::model::LabelSelector;
use muster_core::model::wire::LabelSelectorWire;

const GROUP: &str = "rbac.authorization.k8s.io";
/// The group of the access-review endpoints.
const REVIEW_GROUP: &str = "authorization.k8s.io";

/// What is asked: a SubjectAccessReview's spec, read leniently.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    pub user: String,
    pub groups: Vec<String>,
    pub verb: String,
    pub target: Target,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Resource {
        namespace: String,
        group: String,
        resource: String,
        subresource: String,
        name: String,
    },
    NonResource {
        path: String,
    },
}

impl Default for Target {
    fn default() -> Self {
        Target::NonResource {
            path: String::new(),
        }
    }
}

impl Request {
    /// From a SubjectAccessReview spec; `None` when it names neither
    /// resource nor non-resource attributes.
    pub fn from_spec(spec: &Value) -> Option<Request> {
        let s = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or("").to_string();
        let groups = spec
            .get("groups")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|g| g.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let (verb, target) =
            if let Some(r) = spec.get("resourceAttributes").filter(|v| v.is_object()) {
                (
                    s(r, "verb"),
                    Target::Resource {
                        namespace: s(r, "namespace"),
                        group: s(r, "group"),
                        resource: s(r, "resource"),
                        subresource: s(r, "subresource"),
                        name: s(r, "name"),
                    },
                )
            } else {
                let n = spec
                    .get("nonResourceAttributes")
                    .filter(|v| v.is_object())?;
                (s(n, "verb"), Target::NonResource { path: s(n, "path") })
            };
        Some(Request {
            user: s(spec, "user"),
            groups,
            verb,
            target,
        })
    }
}

/// The RBAC objects a decision reads.
#[derive(Debug, Default)]
pub struct Policy {
    pub cluster_roles: Vec<Value>,
    pub cluster_role_bindings: Vec<Value>,
    pub roles: Vec<Value>,
    pub role_bindings: Vec<Value>,
}

impl Policy {
    /// Every RBAC object in the store.
    fn from_store(state: &SimState) -> Policy {
        let all = |plural: &str| -> Vec<Value> {
            let key = format!("{GROUP}/v1/{plural}");
            let (items, _, _) = state.store.list(&key, None, None, None, |_| true);
            items.iter().map(|o| o.value()).collect()
        };
        Policy {
            cluster_roles: aggregate(all("clusterroles")),
            cluster_role_bindings: all("clusterrolebindings"),
            roles: all("roles"),
            role_bindings: all("rolebindings"),
        }
    }

    fn named<'a>(objs: &'a [Value], namespace: &str, name: &str) -> Option<&'a Value> {
        objs.iter().find(|o| {
            o.pointer("/metadata/name").and_then(Value::as_str) == Some(name)
                && o.pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    == namespace
        })
    }

    /// Allowed, and why (the binding that allows it), or denied.
    pub fn authorize(&self, req: &Request) -> (bool, String) {
        if req.groups.iter().any(|g| g == "system:masters") {
            return (true, "system:masters is a superuser".into());
        }
        for b in &self.cluster_role_bindings {
            if let Some(role) = self.role_of(b, "")
                && binds(b, "", req)
                && rules_allow(role, req)
            {
                return (true, reason("ClusterRoleBinding", b, req));
            }
        }
        if let Target::Resource { namespace, .. } = &req.target
            && !namespace.is_empty()
        {
            for b in self.role_bindings.iter().filter(|b| {
                b.pointer("/metadata/namespace").and_then(Value::as_str) == Some(namespace)
            }) {
                if let Some(role) = self.role_of(b, namespace)
                    && binds(b, namespace, req)
                    && rules_allow(role, req)
                {
                    return (true, reason("RoleBinding", b, req));
                }
            }
        }
        (false, String::new())
    }

    /// The role a binding refers to (a Role only from a RoleBinding of its
    /// namespace).
    fn role_of(&self, binding: &Value, namespace: &str) -> Option<&Value> {
        let name = binding.pointer("/roleRef/name").and_then(Value::as_str)?;
        match binding.pointer("/roleRef/kind").and_then(Value::as_str)? {
            "ClusterRole" => Self::named(&self.cluster_roles, "", name),
            "Role" if !namespace.is_empty() => Self::named(&self.roles, namespace, name),
            _ => None,
        }
    }
}

fn reason(kind: &str, binding: &Value, req: &Request) -> String {
    let name = binding
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let role = binding
        .pointer("/roleRef/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    format!(
        "RBAC: allowed by {kind} {name:?} of {role:?} to {:?}",
        req.user
    )
}

/// Whether one of the binding's subjects is the requester.
fn binds(binding: &Value, binding_ns: &str, req: &Request) -> bool {
    let Some(subjects) = binding.get("subjects").and_then(Value::as_array) else {
        return false;
    };
    subjects.iter().any(|s| {
        let field = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or("");
        match field("kind") {
            "User" => field("name") == req.user,
            "Group" => req.groups.iter().any(|g| g == field("name")),
            "ServiceAccount" => {
                let ns = match field("namespace") {
                    "" => binding_ns,
                    ns => ns,
                };
                service_account(&req.user) == Some((ns, field("name")))
            }
            _ => false,
        }
    })
}

fn rules_allow(role: &Value, req: &Request) -> bool {
    role.get("rules")
        .and_then(Value::as_array)
        .is_some_and(|rules| rules.iter().any(|r| rule_allows(r, req)))
}

fn list<'a>(rule: &'a Value, key: &str) -> Vec<&'a str> {
    rule.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn has(items: &[&str], want: &str) -> bool {
    items.iter().any(|i| *i == "*" || *i == want)
}

fn rule_allows(rule: &Value, req: &Request) -> bool {
    if !has(&list(rule, "verbs"), &req.verb) {
        return false;
    }
    match &req.target {
        Target::NonResource { path } => {
            list(rule, "nonResourceURLs")
                .iter()
                .any(|u| match u.strip_suffix('*') {
                    Some(prefix) => path.starts_with(prefix),
                    None => u == path,
                })
        }
        Target::Resource {
            group,
            resource,
            subresource,
            name,
            ..
        } => {
            let wanted = if subresource.is_empty() {
                resource.clone()
            } else {
                format!("{resource}/{subresource}")
            };
            let resources = list(rule, "resources");
            let resource_ok = resources.iter().any(|r| {
                *r == "*"
                    || *r == wanted
                    || (!subresource.is_empty() && *r == format!("*/{subresource}"))
            });
            let names = list(rule, "resourceNames");
            has(&list(rule, "apiGroups"), group)
                && resource_ok
                && (names.is_empty() || names.contains(&name.as_str()))
        }
    }
}

/// Fills each aggregated ClusterRole's rules with those of the ClusterRoles
/// its `clusterRoleSelectors` match (one level, as the controller does: an
/// aggregated role's own aggregated rules count once they are written).
fn aggregate(mut roles: Vec<Value>) -> Vec<Value> {
    let gathered: Vec<Option<Vec<Value>>> = roles
        .iter()
        .map(|role| {
            let selectors = role
                .pointer("/aggregationRule/clusterRoleSelectors")?
                .as_array()?;
            let rules = roles
                .iter()
                .filter(|other| !std::ptr::eq(*other, role))
                .filter(|other| {
                    let labels = other.pointer("/metadata/labels");
                    selectors.iter().any(|sel| selector_matches(sel, labels))
                })
                .filter_map(|other| other.get("rules").and_then(Value::as_array))
                .flatten()
                .cloned()
                .collect();
            Some(rules)
        })
        .collect();
    for (role, rules) in roles.iter_mut().zip(gathered) {
        if let Some(rules) = rules {
            role["rules"] = Value::Array(rules);
        }
    }
    roles
}

/// A metav1 LabelSelector object against a role's labels, read by the
/// model's selector. An empty or unreadable selector matches nothing here.
fn selector_matches(selector: &Value, labels: Option<&Value>) -> bool {
    let Ok(wire) = serde_json::from_value::<LabelSelectorWire>(selector.clone()) else {
        return false;
    };
    if wire.match_labels.is_empty() && wire.match_expressions.is_empty() {
        return false;
    }
    let labels: BTreeMap<String, String> = labels
        .and_then(|l| serde_json::from_value(l.clone()).ok())
        .unwrap_or_default();
    LabelSelector::from_wire(Some(&wire)).is_ok_and(|s| s.matches(&labels))
}

/// `POST selfsubjectaccessreviews`: a SubjectAccessReview for the requester.
pub(super) async fn serve_self_subject_access_review(
    state: &SimState,
    method: &Method,
    headers: &HeaderMap,
    body: &Bytes,
) -> ApiResult<Response> {
    let (user, groups) = super::authn::requester(state, headers);
    let request = ReviewRequest::new(method, headers, body);
    serve_review(
        state,
        request,
        REVIEW_GROUP,
        "selfsubjectaccessreviews",
        |review| {
            let mut spec = review["spec"].clone();
            if spec.is_object() {
                spec["user"] = json!(user);
                spec["groups"] = json!(groups);
            }
            decide(state, &spec)
        },
    )
    .await
}

/// `POST subjectaccessreviews`.
pub(super) async fn serve_subject_access_review(
    state: &SimState,
    method: &Method,
    headers: &HeaderMap,
    body: &Bytes,
) -> ApiResult<Response> {
    let request = ReviewRequest::new(method, headers, body);
    serve_review(
        state,
        request,
        REVIEW_GROUP,
        "subjectaccessreviews",
        |review| decide(state, &review["spec"]),
    )
    .await
}

/// What the request is, for [`authorize_request`].
pub(super) struct Asked<'a> {
    pub verb: &'a str,
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: Option<&'a str>,
    pub namespace: Option<&'a str>,
    pub name: Option<&'a str>,
}

/// Every resource request a token user makes is authorized against the
/// stored RBAC objects, as kube-apiserver's RBAC authorizer does (the
/// administrator, `system:masters`, is allowed everything); a denial is a
/// 403 worded as kube-apiserver words it.
pub(super) fn authorize_request(
    state: &SimState,
    headers: &HeaderMap,
    asked: &Asked<'_>,
) -> ApiResult<()> {
    let (user, groups) = super::authn::requester(state, headers);
    if groups.iter().any(|g| g == "system:masters") {
        return Ok(());
    }
    let req = Request {
        user: user.clone(),
        groups,
        verb: asked.verb.to_string(),
        target: Target::Resource {
            namespace: asked.namespace.unwrap_or("").to_string(),
            group: asked.group.to_string(),
            resource: asked.resource.to_string(),
            subresource: asked.subresource.unwrap_or("").to_string(),
            name: asked.name.unwrap_or("").to_string(),
        },
    };
    if Policy::from_store(state).authorize(&req).0 {
        return Ok(());
    }
    let resource = match asked.subresource {
        Some(s) => format!("{}/{s}", asked.resource),
        None => asked.resource.to_string(),
    };
    let object = match asked.name {
        Some(n) => format!("{resource} {n:?}"),
        None => resource.clone(),
    };
    let scope = match asked.namespace {
        Some(ns) => format!(" in the namespace {ns:?}"),
        None => " at the cluster scope".to_string(),
    };
    Err(super::status::ApiError::forbidden(format!(
        "{object} is forbidden: User {user:?} cannot {} resource {resource:?} in API group {:?}{scope}",
        asked.verb, asked.group
    )))
}

/// The status of a review of `spec`.
fn decide(state: &SimState, spec: &Value) -> Value {
    match Request::from_spec(spec) {
        Some(req) => {
            let (allowed, reason) = Policy::from_store(state).authorize(&req);
            json!({"allowed": allowed, "reason": reason})
        }
        None => json!({
            "allowed": false,
            "evaluationError": "spec needs resourceAttributes or nonResourceAttributes",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy {
            cluster_roles: vec![
                json!({"metadata": {"name": "metrics-reader"},
                       "rules": [{"nonResourceURLs": ["/metrics", "/debug/*"], "verbs": ["get"]}]}),
                json!({"metadata": {"name": "pod-reader"},
                       "rules": [{"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]}]}),
            ],
            cluster_role_bindings: vec![json!({
                "metadata": {"name": "prometheus"},
                "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "metrics-reader"},
                "subjects": [
                    {"kind": "ServiceAccount", "name": "prometheus", "namespace": "monitoring"},
                    {"kind": "Group", "name": "sre"},
                ]
            })],
            roles: vec![json!({"metadata": {"name": "lease", "namespace": "team-a"},
                "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                           "resourceNames": ["mine"], "verbs": ["get", "update"]}]})],
            role_bindings: vec![
                json!({"metadata": {"name": "lease", "namespace": "team-a"},
                       "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "lease"},
                       "subjects": [{"kind": "ServiceAccount", "name": "app"}]}),
                json!({"metadata": {"name": "pods", "namespace": "team-a"},
                       "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "pod-reader"},
                       "subjects": [{"kind": "User", "name": "alice", "apiGroup": GROUP}]}),
            ],
        }
    }

    #[test]
    fn aggregated_cluster_roles_gather_the_rules_they_select() {
        let roles = aggregate(vec![
            json!({"metadata": {"name": "monitoring"},
                   "aggregationRule": {"clusterRoleSelectors": [
                       {"matchLabels": {"rbac.example.com/aggregate-to-monitoring": "true"}}]},
                   "rules": []}),
            json!({"metadata": {"name": "metrics", "labels": {"rbac.example.com/aggregate-to-monitoring": "true"}},
                   "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}),
            json!({"metadata": {"name": "other", "labels": {"team": "x"}},
                   "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}),
            json!({"metadata": {"name": "by-expression"},
                   "aggregationRule": {"clusterRoleSelectors": [
                       {"matchExpressions": [{"key": "team", "operator": "In", "values": ["x", "y"]}]}]}}),
        ]);
        let policy = Policy {
            cluster_roles: roles,
            cluster_role_bindings: vec![
                json!({"metadata": {"name": "b"},
                       "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "monitoring"},
                       "subjects": [{"kind": "User", "name": "prom", "apiGroup": GROUP}]}),
                json!({"metadata": {"name": "c"},
                       "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "by-expression"},
                       "subjects": [{"kind": "User", "name": "eve", "apiGroup": GROUP}]}),
            ],
            ..Policy::default()
        };
        assert!(policy.authorize(&path("prom", &[], "get", "/metrics")).0);
        assert!(!policy.authorize(&path("prom", &[], "get", "/healthz")).0);
        let secrets = resource("eve", "get", "default", "", "secrets", "", "");
        assert!(policy.authorize(&secrets).0);
        let mut not_eve = secrets.clone();
        not_eve.user = "prom".into();
        assert!(!policy.authorize(&not_eve).0);
    }

    fn path(user: &str, groups: &[&str], verb: &str, p: &str) -> Request {
        Request {
            user: user.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            verb: verb.into(),
            target: Target::NonResource { path: p.into() },
        }
    }

    fn resource(
        user: &str,
        verb: &str,
        ns: &str,
        group: &str,
        res: &str,
        sub: &str,
        name: &str,
    ) -> Request {
        Request {
            user: user.into(),
            groups: vec![],
            verb: verb.into(),
            target: Target::Resource {
                namespace: ns.into(),
                group: group.into(),
                resource: res.into(),
                subresource: sub.into(),
                name: name.into(),
            },
        }
    }

    #[test]
    fn non_resource_urls_are_granted_by_cluster_role_bindings() {
        let p = policy();
        let prom = "system:serviceaccount:monitoring:prometheus";
        let (ok, why) = p.authorize(&path(prom, &[], "get", "/metrics"));
        assert!(ok && why.contains("prometheus"), "{why}");
        assert!(p.authorize(&path(prom, &[], "get", "/debug/queue")).0);
        assert!(!p.authorize(&path(prom, &[], "post", "/metrics")).0);
        assert!(!p.authorize(&path(prom, &[], "get", "/metricsx")).0);
        assert!(
            !p.authorize(&path(
                "system:serviceaccount:other:prometheus",
                &[],
                "get",
                "/metrics"
            ))
            .0
        );
        assert!(p.authorize(&path("carol", &["sre"], "get", "/metrics")).0);
        assert!(!p.authorize(&path("carol", &["dev"], "get", "/metrics")).0);
        assert!(
            p.authorize(&path("root", &["system:masters"], "delete", "/anything"))
                .0
        );
    }

    #[test]
    fn role_bindings_grant_only_in_their_namespace() {
        let p = policy();
        let app = "system:serviceaccount:team-a:app";
        let lease = |user: &str, verb: &str, ns: &str, name: &str| {
            p.authorize(&resource(
                user,
                verb,
                ns,
                "coordination.k8s.io",
                "leases",
                "",
                name,
            ))
            .0
        };
        assert!(lease(app, "get", "team-a", "mine"));
        assert!(!lease(app, "get", "team-a", "theirs"));
        assert!(!lease(app, "delete", "team-a", "mine"));
        assert!(!lease(app, "get", "team-b", "mine"));
        assert!(!lease(
            "system:serviceaccount:team-b:app",
            "get",
            "team-a",
            "mine"
        ));
        // A ClusterRole through a RoleBinding: that namespace only.
        assert!(
            p.authorize(&resource("alice", "list", "team-a", "", "pods", "", ""))
                .0
        );
        assert!(
            p.authorize(&resource("alice", "get", "team-a", "", "pods", "log", "x"))
                .0
        );
        assert!(
            !p.authorize(&resource("alice", "get", "team-a", "", "pods", "exec", "x"))
                .0
        );
        assert!(
            !p.authorize(&resource("alice", "list", "team-b", "", "pods", "", ""))
                .0
        );
        assert!(
            !p.authorize(&resource("alice", "list", "", "", "pods", "", ""))
                .0
        );
        // A namespaced grant never covers a non-resource URL.
        assert!(!p.authorize(&path("alice", &[], "get", "/metrics")).0);
    }

    #[test]
    fn specs_are_read_leniently() {
        let spec = json!({"user": "u", "groups": ["g"],
            "nonResourceAttributes": {"path": "/metrics", "verb": "get"}});
        assert_eq!(
            Request::from_spec(&spec),
            Some(path("u", &["g"], "get", "/metrics"))
        );
        let spec = json!({"user": "u", "resourceAttributes": {"namespace": "n", "verb": "list", "resource": "pods"}});
        assert_eq!(
            Request::from_spec(&spec),
            Some(resource("u", "list", "n", "", "pods", "", ""))
        );
        assert_eq!(Request::from_spec(&json!({"user": "u"})), None);
    }
}
