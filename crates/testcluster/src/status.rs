//! `Status` error bodies, the shape kube-client parses into `ErrorResponse`.

use axum::body::Body;
use http::{Response, StatusCode, header};
use serde_json::{Value, json};

/// An API error: the HTTP code, the machine-readable `reason` and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiError {
    pub(crate) code: u16,
    pub(crate) reason: &'static str,
    pub(crate) message: String,
    /// The `Status`'s `details` (a 422's causes, a 403's kind and name,
    /// retryAfterSeconds); `None` writes `{}`. Boxed to keep the error
    /// small in every `Result`.
    pub(crate) details: Option<Box<Value>>,
}

impl ApiError {
    pub(crate) fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    /// This error with `details` in its `Status`.
    pub(crate) fn with_details(mut self, details: Value) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    /// The error a complete `Status` body describes (as the `crd` and
    /// `rbac` modules build them), keeping its `details`.
    pub(crate) fn from_status(status: &Value) -> Self {
        let code = status
            .get("code")
            .and_then(Value::as_u64)
            .and_then(|c| u16::try_from(c).ok())
            .unwrap_or(500);
        let reason = match status.get("reason").and_then(Value::as_str) {
            Some("Invalid") => "Invalid",
            Some("Forbidden") => "Forbidden",
            Some("Unauthorized") => "Unauthorized",
            Some("NotFound") => "NotFound",
            Some("BadRequest") => "BadRequest",
            Some("Conflict") => "Conflict",
            Some("AlreadyExists") => "AlreadyExists",
            Some("MethodNotAllowed") => "MethodNotAllowed",
            _ => "InternalError",
        };
        let message = status
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let mut err = Self::new(code, reason, message);
        err.details = status
            .get("details")
            .filter(|d| d.as_object().is_some_and(|m| !m.is_empty()))
            .map(|d| Box::new(d.clone()));
        err
    }

    pub(crate) fn not_found(resource: &str, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{resource} \"{name}\" not found"))
    }

    pub(crate) fn already_exists(resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{resource} \"{name}\" already exists"),
        )
    }

    pub(crate) fn conflict(resource: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {resource} \"{name}\": {why}"),
        )
    }

    pub(crate) fn invalid(kind: &str, name: &str, why: impl std::fmt::Display) -> Self {
        Self::new(
            422,
            "Invalid",
            format!("{kind} \"{name}\" is invalid: {why}"),
        )
    }

    /// The 404 for a path no handler serves, with kube-apiserver's message.
    pub(crate) fn not_found_path() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub(crate) fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// kube-apiserver's answer to a list or watch from a resourceVersion
    /// it does not have yet (`storage.NewTooLargeResourceVersionError`
    /// with the watch cache's one-second retry): a 504 `Timeout` whose
    /// cause `ResourceVersionTooLarge` tells clients to relist.
    pub(crate) fn too_large_resource_version(requested: u64, current: u64) -> Self {
        Self::new(
            504,
            "Timeout",
            format!("Timeout: Too large resource version: {requested}, current: {current}"),
        )
        .with_details(json!({
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1,
        }))
    }

    /// kube-apiserver's answer to a request body over its limit
    /// (`MaxRequestBodyBytes`).
    pub(crate) fn request_entity_too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    /// The `Status` object for this error.
    pub(crate) fn to_status(&self) -> Value {
        let mut status = status_value(self.code, self.reason, &self.message);
        if let Some(details) = &self.details {
            status["details"] = (**details).clone();
        }
        status
    }

    /// The HTTP response carrying this error.
    pub(crate) fn into_response(self) -> Response<Body> {
        if self.details.is_some() {
            return value_response(self.code, &self.to_status());
        }
        status_response(self.code, self.reason, &self.message)
    }
}

/// An HTTP response with the given code and a JSON `Status` body.
pub(crate) fn value_response(code: u16, status: &Value) -> Response<Body> {
    let mut response = Response::new(Body::from(status.to_string()));
    *response.status_mut() =
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// A `Status` object with `status: Failure`.
pub(crate) fn status_value(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": {},
        "code": code,
    })
}

/// An HTTP response with the given code and a `Status` JSON body, as
/// kube-apiserver answers failed requests.
pub(crate) fn status_response(code: u16, reason: &str, message: &str) -> Response<Body> {
    value_response(code, &status_value(code, reason, message))
}
