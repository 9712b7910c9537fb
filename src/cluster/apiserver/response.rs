//! Responses shared by every handler: an object, a list assembled from
//! stored bytes, a Table for kubectl, JSON, and the Status for a failed
//! commit.

use std::sync::Arc;

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::{BufMut, Bytes, BytesMut};
use serde_json::Value;

use super::registry::ResourceDef;
use super::status::ApiError;
use super::store::{CommitError, Stored};
use super::table::{self, Include};
use super::views;

pub(super) fn object_response(code: StatusCode, def: &ResourceDef, obj: &Stored) -> Response {
    let body = views::render(def, obj);
    (code, [("content-type", "application/json")], body).into_response()
}

/// Adds one `Warning` header per warning, as a real server words them
/// (`299 - "unknown field \"spec.foo\""`); kubectl prints each.
pub(super) fn with_warnings(mut response: Response, warnings: &[String]) -> Response {
    for w in warnings {
        let quoted = w.replace('\\', "\\\\").replace('"', "\\\"");
        // A field name a header cannot carry is left out of the headers
        // (the field is still dropped).
        if let Ok(value) = HeaderValue::from_str(&format!("299 - \"{quoted}\"")) {
            response.headers_mut().append("warning", value);
        }
    }
    response
}

pub(super) fn commit_error(def: &ResourceDef, name: &str, e: CommitError) -> ApiError {
    match e {
        CommitError::NotFound => ApiError::not_found(&def.group, &def.plural, name),
        CommitError::AlreadyExists => ApiError::already_exists(&def.group, &def.plural, name),
        CommitError::Conflict => ApiError::conflict(
            &def.group,
            &def.plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        ),
        CommitError::Encode(e) => ApiError::internal(e),
    }
}

/// A Table of the objects for kubectl's human-readable output.
pub(super) fn table_response(
    def: &ResourceDef,
    metadata: Value,
    objs: &[Arc<Stored>],
    include: Include,
) -> Response {
    let rows: Vec<Value> = objs
        .iter()
        .map(|o| views::to_view(def, o.value()))
        .collect();
    let body = table::table(def, metadata, &rows, include, true).to_string();
    ([("content-type", table::CONTENT_TYPE)], body).into_response()
}

/// Writes `{..head.., "items": [obj, obj, ...]}` by concatenating each
/// object's stored bytes: no per-object serialization.
pub(super) fn list_body(head: Value, def: &ResourceDef, items: &[Arc<Stored>]) -> Response {
    let head = head.to_string();
    let items: Vec<Bytes> = items.iter().map(|o| views::render(def, o)).collect();
    let total: usize = items.iter().map(|o| o.len() + 1).sum();
    let mut out = BytesMut::with_capacity(head.len() + total + 16);
    out.put_slice(&head.as_bytes()[..head.len() - 1]);
    out.put_slice(b",\"items\":[");
    for (i, o) in items.iter().enumerate() {
        if i > 0 {
            out.put_u8(b',');
        }
        out.put_slice(o);
    }
    out.put_slice(b"]}");
    ([("content-type", "application/json")], out.freeze()).into_response()
}

pub fn json_response(v: Value) -> Response {
    ([("content-type", "application/json")], v.to_string()).into_response()
}
