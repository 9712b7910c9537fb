//! A resource request as the handlers see it: the URL parsed into resource,
//! namespace, name and subresource, the query and the body, and what the
//! handlers read from them (body decoding, selectors, resource versions).

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{HeaderMap, Method};
use serde_json::Value;

use super::fields::Mode;
use super::protobuf;
use super::registry::ResourceDef;
use super::selectors::{FieldSelector, LabelSelector};
use super::status::{ApiError, ApiResult};
use super::table::{self, Include};
use super::views;

/// How often a write that lost a race with another writer is retried.
pub(super) const RETRIES: usize = 16;

/// A request for a resource, its URL parsed.
pub struct ResourceRequest {
    pub def: Arc<ResourceDef>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub sub: Option<String>,
    pub query: HashMap<String, String>,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// The request's `User-Agent`, empty when none was sent.
pub fn user_agent(headers: &HeaderMap) -> &str {
    headers
        .get("user-agent")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

impl ResourceRequest {
    pub fn user_agent(&self) -> &str {
        user_agent(&self.headers)
    }

    pub fn param(&self, key: &str) -> Option<&str> {
        self.query
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    pub fn content_type(&self) -> &str {
        self.headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/json")
    }

    pub fn accept(&self) -> &str {
        self.headers
            .get("accept")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    /// The table printing asked for, if any (`kubectl get` without `-o`).
    pub fn table(&self) -> Option<Include> {
        table::wanted(self.accept()).then(|| Include::from_param(self.param("includeObject")))
    }

    /// The body as JSON (or YAML when the content type says so).
    pub fn json_body(&self) -> ApiResult<Value> {
        if self.body.is_empty() {
            return Err(ApiError::bad_request("the request body is empty"));
        }
        let ct = self.content_type();
        // Objects are schemaless here: protobuf is understood only for the
        // kinds kubectl's generators send, CBOR not at all.
        if ct.contains("protobuf") {
            return protobuf::decode(&self.body).map_err(|message| ApiError {
                code: 415,
                reason: "UnsupportedMediaType",
                message,
                details: None,
            });
        }
        if ct.contains("cbor") {
            return Err(ApiError::unsupported_media_type(ct));
        }
        if ct.contains("yaml") {
            serde_norway::from_slice(&self.body)
                .map_err(|e| ApiError::bad_request(format!("invalid YAML body: {e}")))
        } else {
            serde_json::from_slice(&self.body)
                .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))
        }
    }

    /// The Kubernetes verb for this method and URL shape.
    pub fn verb(&self, method: &Method) -> &'static str {
        let named = self.name.is_some();
        match *method {
            Method::GET if named => "get",
            Method::GET if self.is_watch() => "watch",
            Method::GET => "list",
            Method::POST => "create",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE if named => "delete",
            Method::DELETE => "deletecollection",
            _ => "unknown",
        }
    }

    /// What unknown fields in the body get (`fieldValidation`).
    pub fn field_validation(&self) -> ApiResult<Mode> {
        Mode::from_param(self.param("fieldValidation"))
    }

    pub fn is_watch(&self) -> bool {
        matches!(self.param("watch"), Some("true" | "1"))
    }
}

pub(super) fn ns_key(req: &ResourceRequest) -> &str {
    req.namespace.as_deref().unwrap_or("")
}

pub(super) fn name_of(req: &ResourceRequest) -> ApiResult<&str> {
    req.name
        .as_deref()
        .ok_or_else(|| ApiError::bad_request("a resource name is required"))
}

/// Selectors from the query string; a malformed one is a 400.
pub(super) fn selectors(req: &ResourceRequest) -> ApiResult<(LabelSelector, FieldSelector)> {
    let labels = LabelSelector::parse(req.param("labelSelector").unwrap_or(""))
        .map_err(|e| ApiError::bad_request(format!("unable to parse labelSelector: {e}")))?;
    let fields = views::field_selector(&req.def, req.param("fieldSelector").unwrap_or(""));
    let fields = FieldSelector::parse(&fields)
        .map_err(|e| ApiError::bad_request(format!("unable to parse fieldSelector: {e}")))?;
    Ok((labels, fields))
}

pub(super) fn parse_rv(s: &str) -> ApiResult<u64> {
    s.parse().map_err(|_| {
        ApiError::bad_request(format!("invalid resourceVersion {s:?}: must be an integer"))
    })
}
