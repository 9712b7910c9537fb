//! API errors as Kubernetes `Status` objects: the code, reason and details a
//! real API server would answer with, so clients branch on them unchanged.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// A failed request, rendered as a `Status` body.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    /// `details`, when the error is about one object (boxed: errors travel
    /// in every `Result` of the server and should stay small).
    pub details: Option<Box<Details>>,
}

/// A `Status`'s `details`.
#[derive(Debug, Clone, Default)]
pub struct Details {
    pub name: String,
    pub group: String,
    pub kind: String,
    /// The fields a validation error is about.
    pub causes: Vec<Cause>,
}

/// One `details.causes` entry of a validation error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// `FieldValueInvalid`, as the real server's `field.ErrorType`.
    pub reason: &'static str,
    /// `spec.containers[0].resources.requests[cpu]`.
    pub field: String,
    /// `Invalid value: "-1": must be greater than or equal to 0`.
    pub message: String,
}

impl Cause {
    /// A value the field may not hold, and why.
    pub fn invalid(field: String, value: &str, why: &str) -> Self {
        Cause {
            reason: "FieldValueInvalid",
            field,
            message: format!("Invalid value: {value:?}: {why}"),
        }
    }
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    pub fn with_details(mut self, name: &str, group: &str, kind: &str) -> Self {
        self.details = Some(Box::new(Details {
            name: name.to_string(),
            group: group.to_string(),
            kind: kind.to_string(),
            causes: Vec::new(),
        }));
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// `plural` is the resource's plural as a real server words it, e.g. `pods`.
    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        let resource = qualified(group, plural);
        Self::new(404, "NotFound", format!("{resource} \"{name}\" not found"))
            .with_details(name, group, plural)
    }

    pub fn path_not_found(path: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
    }

    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        let resource = qualified(group, plural);
        Self::new(
            409,
            "AlreadyExists",
            format!("{resource} \"{name}\" already exists"),
        )
        .with_details(name, group, plural)
    }

    pub fn conflict(group: &str, plural: &str, name: &str, why: &str) -> Self {
        let resource = qualified(group, plural);
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {resource} \"{name}\": {why}"),
        )
        .with_details(name, group, plural)
    }

    pub fn invalid(group: &str, kind: &str, name: &str, why: &str) -> Self {
        Self::new(
            422,
            "Invalid",
            format!("{kind} \"{name}\" is invalid: {why}"),
        )
        .with_details(name, group, kind)
    }

    /// A 422 naming every invalid field: one cause reads `Pod "p" is
    /// invalid: <field>: <message>`, several `... is invalid: [<a>, <b>]`.
    pub fn invalid_fields(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        let mut all: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        let why = match all.len() {
            1 => all.remove(0),
            _ => format!("[{}]", all.join(", ")),
        };
        let mut e = Self::invalid(group, kind, name, &why);
        if let Some(d) = e.details.as_mut() {
            d.causes = causes;
        }
        e
    }

    /// RBAC denied the request (kube-apiserver's wording).
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/merge-patch+json, application/json-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml (got {content_type:?})"
            ),
        )
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// An injected fault: the code asked for, with the reason a server would give.
    pub fn injected(code: u16) -> Self {
        let reason = match code {
            409 => "Conflict",
            429 => "TooManyRequests",
            500 => "InternalError",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "InternalError",
        };
        Self::new(code, reason, format!("injected fault (code {code})"))
    }

    pub fn to_value(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            let mut details = json!({ "name": d.name, "kind": d.kind });
            if !d.group.is_empty() {
                details["group"] = json!(d.group);
            }
            if !d.causes.is_empty() {
                details["causes"] = d
                    .causes
                    .iter()
                    .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                    .collect();
            }
            status["details"] = details;
        }
        status
    }
}

fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = self.to_value().to_string();
        (code, [("content-type", "application/json")], body).into_response()
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
