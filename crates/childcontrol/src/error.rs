//! Why a child operation failed, and how to classify API statuses.

use std::borrow::Cow;
use std::error::Error as StdError;
use std::fmt;

use kube::core::Status;
use kube::core::response::reason;
use thiserror::Error;

/// The `StatusCause` type the API server attaches to a create refused because
/// the namespace is being deleted.
pub(crate) const NAMESPACE_TERMINATING_CAUSE: &str = "NamespaceTerminating";

/// Why a [`ChildControl`](crate::ChildControl) call failed (also
/// `ctrlkit_podcontrol::PodControlError`, the same type).
///
/// The helper methods ([`is_not_found`](Self::is_not_found),
/// [`status_code`](Self::status_code), …) classify the error without making
/// callers match on `kube::Error` themselves; they return `false`/`None` for
/// errors that did not come from an API response.
///
/// An [`Api`](Self::Api) error displays as the API server's own message
/// (`Status.message`, e.g. `pods "web-x" is forbidden: exceeded quota`),
/// which is what Kubernetes' controllers put into events and conditions;
/// the full `kube::Error` stays available as the error's
/// [`source`](std::error::Error::source).
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ChildControlError {
    /// The template or owner reference cannot produce a valid object. No API
    /// request was made.
    #[error("invalid template: {0}")]
    InvalidTemplate(String),
    /// A patch could not be applied or produced an object of another shape.
    #[error("invalid patch: {0}")]
    InvalidPatch(String),
    /// The namespace is being deleted, so the API server refuses new objects
    /// in it. Controllers usually treat this as expected rather than as a
    /// failure.
    #[error("namespace {namespace} is terminating")]
    NamespaceTerminating {
        /// The namespace that is being deleted.
        namespace: String,
    },
    /// [`ensure`](crate::ChildControlExt::ensure) found the child's name
    /// taken by an object the owner does not control; it was left alone.
    #[error("{kind} {name} exists and is not controlled by this owner")]
    NotControlled {
        /// The child's kind.
        kind: String,
        /// The child's name.
        name: String,
    },
    /// The [write gate](crate::WriteGate) refused the write; no request was
    /// made and no event recorded.
    #[error(transparent)]
    WriteRefused(#[from] WriteRefused),
    /// The API server (or the transport to it) returned an error.
    #[error("{}", ApiMessage(.0))]
    Api(#[source] kube::Error),
}

/// A reconcile may return a `ChildControlError` as its error: retried with
/// backoff, except an invalid template or patch (a bug retrying cannot
/// fix) and a child another owner controls, which wait for the next event.
impl ctrlkit_worker::SyncError for ChildControlError {
    fn is_terminal(&self) -> bool {
        matches!(
            self,
            Self::InvalidTemplate(_) | Self::InvalidPatch(_) | Self::NotControlled { .. }
        )
    }
}

impl From<kube::Error> for ChildControlError {
    fn from(error: kube::Error) -> Self {
        Self::Api(error)
    }
}

/// Shows an API error the way Kubernetes' controllers do: the server's
/// message when there is one, else the transport error.
struct ApiMessage<'a>(&'a kube::Error);

impl fmt::Display for ApiMessage<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            kube::Error::Api(status) if !status.message.is_empty() => f.write_str(&status.message),
            other => write!(f, "API request failed: {other}"),
        }
    }
}

/// What to show of an API error in an event or a condition: the API
/// server's message when there is one (as upstream prints a
/// `StatusError`), else the error itself. Never a `Debug` dump.
pub fn api_error_message(error: &kube::Error) -> String {
    ApiMessage(error).to_string()
}

impl ChildControlError {
    /// Builds an [`Api`](Self::Api) error carrying a `Status` with the given
    /// HTTP `code`, machine-readable `reason` (e.g. `"NotFound"`,
    /// `"Conflict"`) and human-readable `message`, as the API server would
    /// return it.
    ///
    /// Mostly useful for failure injection in tests, e.g. with
    /// [`FakeChildControl::fail_next`](crate::FakeChildControl::fail_next).
    pub fn api_status(code: u16, reason: &str, message: &str) -> Self {
        Self::Api(kube::Error::Api(
            Status::failure(message, reason).with_code(code).boxed(),
        ))
    }

    /// The API `Status` behind this error, if it came from an API response.
    pub fn status(&self) -> Option<&Status> {
        match self {
            Self::Api(kube::Error::Api(status)) => Some(status),
            _ => None,
        }
    }

    /// The HTTP status code of the API response, if there was one.
    ///
    /// [`NamespaceTerminating`](Self::NamespaceTerminating) reports `403`, the
    /// code the API server answered with.
    pub fn status_code(&self) -> Option<u16> {
        match self {
            Self::NamespaceTerminating { .. } => Some(403),
            _ => self.status().map(|s| s.code).filter(|c| *c != 0),
        }
    }

    /// Whether the object did not exist (HTTP 404 / reason `NotFound`).
    pub fn is_not_found(&self) -> bool {
        self.status()
            .is_some_and(|s| status_is(s, reason::NOT_FOUND, 404))
    }

    /// Whether the request conflicted with the stored object (HTTP 409 /
    /// reason `Conflict`), e.g. a stale resourceVersion or a failed UID
    /// precondition.
    pub fn is_conflict(&self) -> bool {
        self.status()
            .is_some_and(|s| status_is(s, reason::CONFLICT, 409))
    }

    /// Whether an object with that name already exists (reason
    /// `AlreadyExists`).
    pub fn is_already_exists(&self) -> bool {
        self.status().is_some_and(Status::is_already_exists)
    }

    /// Whether the API server refused the request (HTTP 403 / reason
    /// `Forbidden`). Also true for [`NamespaceTerminating`](Self::NamespaceTerminating).
    pub fn is_forbidden(&self) -> bool {
        matches!(self, Self::NamespaceTerminating { .. })
            || self
                .status()
                .is_some_and(|s| status_is(s, reason::FORBIDDEN, 403))
    }

    /// Whether the request was rejected as invalid: an API validation error
    /// (HTTP 422 / reason `Invalid`) or a template/patch this crate refused
    /// before sending anything.
    pub fn is_invalid(&self) -> bool {
        matches!(self, Self::InvalidTemplate(_) | Self::InvalidPatch(_))
            || self
                .status()
                .is_some_and(|s| status_is(s, reason::INVALID, 422))
    }

    /// Whether the create was refused because the namespace is being deleted.
    ///
    /// True for [`NamespaceTerminating`](Self::NamespaceTerminating) and for a
    /// raw API error that [`is_namespace_terminating_status`] recognises.
    pub fn is_namespace_terminating(&self) -> bool {
        matches!(self, Self::NamespaceTerminating { .. })
            || self.status().is_some_and(is_namespace_terminating_status)
    }

    /// Whether the [write gate](crate::WriteGate) refused the write.
    pub fn is_write_refused(&self) -> bool {
        matches!(self, Self::WriteRefused(_))
    }
}

/// Recognises the API server's refusal to create an object in a namespace
/// that is being deleted.
///
/// The namespace lifecycle admission plugin answers `403 Forbidden` and adds a
/// `StatusCause` of type `NamespaceTerminating` (the check upstream uses).
/// Older servers and some proxies drop the details, so a `Forbidden` status
/// whose message says the namespace "is being terminated" counts too.
pub fn is_namespace_terminating_status(status: &Status) -> bool {
    let has_cause = status.details.as_ref().is_some_and(|d| {
        d.causes
            .iter()
            .any(|c| c.reason == NAMESPACE_TERMINATING_CAUSE)
    });
    has_cause
        || (status_is(status, reason::FORBIDDEN, 403)
            && status.message.contains("because it is being terminated"))
}

/// Whether `status` means `expected` (a `reason` such as `"NotFound"`), by
/// apimachinery's rule: the reason decides, and the HTTP `code` only counts
/// when the server sent no reason it knows.
///
/// kube-core 5's `Status::is_not_found` and friends test whether the
/// *expected* reason is known, which it always is, so a bare 404 with an
/// empty reason would not be recognised; use this instead.
pub fn status_is(status: &Status, expected: &str, code: u16) -> bool {
    status.reason == expected || (!reason::is_known(&status.reason) && status.code == code)
}

/// A [`WriteGate`](crate::WriteGate)'s refusal: why a write was not sent.
///
/// ```
/// use ctrlkit_childcontrol::{ChildControlError, WriteRefused};
///
/// let refused = WriteRefused::new("leadership lost");
/// let err = ChildControlError::from(refused);
/// assert!(err.is_write_refused());
/// assert_eq!(err.to_string(), "write refused: leadership lost");
/// ```
#[derive(Debug, Error)]
#[error("write refused: {reason}")]
pub struct WriteRefused {
    reason: Cow<'static, str>,
    #[source]
    source: Option<Box<dyn StdError + Send + Sync>>,
}

impl WriteRefused {
    /// A refusal for `reason` (shown in the error message).
    pub fn new(reason: impl Into<Cow<'static, str>>) -> Self {
        Self {
            reason: reason.into(),
            source: None,
        }
    }

    /// A refusal for `reason` caused by `source` (kept as the error's
    /// [`source`](std::error::Error::source)).
    pub fn with_source(
        reason: impl Into<Cow<'static, str>>,
        source: impl Into<Box<dyn StdError + Send + Sync>>,
    ) -> Self {
        Self {
            reason: reason.into(),
            source: Some(source.into()),
        }
    }

    /// Why the write was refused.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::response::{StatusCause, StatusDetails};

    #[test]
    fn falls_back_to_the_code_when_the_reason_is_missing_or_unknown() {
        let bare = ChildControlError::api_status(404, "", "not found");
        assert!(bare.is_not_found());
        let odd = ChildControlError::api_status(422, "SomethingNew", "bad");
        assert!(odd.is_invalid());
        // A known reason wins over the code.
        let conflict = ChildControlError::api_status(404, "Conflict", "odd proxy");
        assert!(conflict.is_conflict());
        assert!(!conflict.is_not_found());
    }

    #[test]
    fn classifies_api_statuses() {
        let nf = ChildControlError::api_status(404, "NotFound", "pods \"a\" not found");
        assert!(nf.is_not_found());
        assert!(!nf.is_conflict());
        assert_eq!(nf.status_code(), Some(404));

        let conflict = ChildControlError::api_status(409, "Conflict", "stale");
        assert!(conflict.is_conflict());
        assert!(!conflict.is_not_found());

        let invalid = ChildControlError::api_status(422, "Invalid", "bad");
        assert!(invalid.is_invalid());

        let template = ChildControlError::InvalidTemplate("x".into());
        assert!(template.is_invalid());
        assert_eq!(template.status_code(), None);
        assert!(template.status().is_none());
    }

    #[test]
    fn api_errors_display_the_server_message_and_keep_the_source() {
        let quota = ChildControlError::api_status(
            403,
            "Forbidden",
            "pods \"web-x\" is forbidden: exceeded quota: compute",
        );
        assert_eq!(
            quota.to_string(),
            "pods \"web-x\" is forbidden: exceeded quota: compute"
        );
        let source = quota.source().unwrap().to_string();
        assert!(source.contains("Forbidden"), "{source}");
        // No server message: the transport error, not a Debug dump.
        let bare = ChildControlError::api_status(500, "InternalError", "");
        assert!(
            bare.to_string().starts_with("API request failed: "),
            "{bare}"
        );
    }

    #[test]
    fn write_refusals_keep_their_reason_and_source() {
        let err = ChildControlError::from(WriteRefused::with_source(
            "fenced",
            std::io::Error::other("lease lost"),
        ));
        assert!(err.is_write_refused());
        assert!(!err.is_invalid() && err.status().is_none());
        assert_eq!(err.to_string(), "write refused: fenced");
        let ChildControlError::WriteRefused(refused) = &err else {
            panic!("{err:?}");
        };
        assert_eq!(refused.reason(), "fenced");
        assert_eq!(refused.source().unwrap().to_string(), "lease lost");
    }

    #[test]
    fn recognises_namespace_terminating_by_cause_or_message() {
        let by_cause = Status::failure("refused", "Forbidden")
            .with_code(403)
            .with_details(StatusDetails {
                name: String::new(),
                group: String::new(),
                kind: "pods".into(),
                uid: String::new(),
                causes: vec![StatusCause {
                    reason: "NamespaceTerminating".into(),
                    message: String::new(),
                    field: String::new(),
                }],
                retry_after_seconds: 0,
            });
        assert!(is_namespace_terminating_status(&by_cause));

        let by_message = Status::failure(
            "pods \"x\" is forbidden: unable to create new content in namespace ns because it is being terminated",
            "Forbidden",
        )
        .with_code(403);
        assert!(is_namespace_terminating_status(&by_message));

        let other_forbidden = Status::failure("quota exceeded", "Forbidden").with_code(403);
        assert!(!is_namespace_terminating_status(&other_forbidden));

        let e = ChildControlError::NamespaceTerminating {
            namespace: "ns".into(),
        };
        assert!(e.is_namespace_terminating());
        assert!(e.is_forbidden());
        assert_eq!(e.status_code(), Some(403));
    }
}
