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
    /// The `Status` `details` (causes, retryAfterSeconds), if any; boxed
    /// to keep the error small in every `Result`.
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
        match self.details {
            None => status_response(self.code, self.reason, &self.message),
            Some(_) => status_body_response(self.code, self.to_status().to_string()),
        }
    }
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
    status_body_response(code, status_value(code, reason, message).to_string())
}

/// An HTTP response with the given code and a serialized `Status` body.
fn status_body_response(code: u16, body: String) -> Response<Body> {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() =
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}
