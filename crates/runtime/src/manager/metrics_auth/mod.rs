//! Who may scrape `/metrics` with `--metrics-secure`: bearer tokens
//! authenticated and requests authorized by the API server, with the
//! answers cached (see [secure metrics](super#secure-metrics)).

mod cache;
mod filter;
mod kube;

use std::collections::BTreeMap;
use std::time::Duration;

pub use self::kube::KubeMetricsAuth;
pub(crate) use filter::MetricsAuthFilter;

use super::runnable::BoxError;

/// Who a bearer token authenticates: the `user` of a TokenReview's status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct UserInfo {
    /// The user name, e.g. `system:serviceaccount:monitoring:prometheus`.
    pub username: String,
    /// A unique identifier of the user, if the authenticator gives one.
    pub uid: String,
    /// The groups the user is in. The filter adds `system:authenticated`
    /// when it is missing, as kube-apiserver's delegating authenticator
    /// does.
    pub groups: Vec<String>,
    /// Any other information the authenticator provides (e.g. the pod a
    /// ServiceAccount token is bound to).
    pub extra: BTreeMap<String, Vec<String>>,
}

/// A request to a non-resource URL, as a SubjectAccessReview's
/// `nonResourceAttributes` describe it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NonResourceRequest {
    /// The lower-cased HTTP method (`get` for a scrape).
    pub verb: String,
    /// The URL path (`/metrics`).
    pub path: String,
}

/// The authorizer's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessDecision {
    /// Whether the request may go on.
    pub allowed: bool,
    /// Why, when the authorizer says (logged at debug level on a denial).
    pub reason: String,
}

/// Why a request could not be authenticated or authorized (answered with
/// `500`; never cached).
#[derive(Debug, thiserror::Error)]
pub enum MetricsAuthError {
    /// Creating the TokenReview failed.
    #[error("TokenReview failed")]
    TokenReview(#[source] ::kube::Error),
    /// Creating the SubjectAccessReview failed.
    #[error("SubjectAccessReview failed")]
    SubjectAccessReview(#[source] ::kube::Error),
    /// The API server answered a review without a status.
    #[error("the API server answered the {kind} without a status")]
    NoStatus {
        /// `TokenReview` or `SubjectAccessReview`.
        kind: &'static str,
    },
    /// The review took too long.
    #[error("the {kind} was not answered within {}s", timeout.as_secs())]
    Timeout {
        /// `TokenReview` or `SubjectAccessReview`.
        kind: &'static str,
        /// How long the filter waited.
        timeout: Duration,
    },
    /// A custom [`MetricsAuth`] failed.
    #[error("metrics authentication failed")]
    Other(#[source] BoxError),
}

/// Authenticates bearer tokens and authorizes requests to non-resource
/// URLs for the secure `/metrics` endpoint. [`KubeMetricsAuth`] asks the
/// API server; tests and other setups can plug in their own.
///
/// The filter caches both answers (see [secure
/// metrics](super#secure-metrics)), so an implementation need not.
#[async_trait::async_trait]
pub trait MetricsAuth: Send + Sync + 'static {
    /// The user `token` authenticates, or `Ok(None)` when the token is not
    /// valid (the request is then answered `401`).
    async fn authenticate(&self, token: &str) -> Result<Option<UserInfo>, MetricsAuthError>;

    /// Whether `user` may make `request`.
    async fn authorize(
        &self,
        user: &UserInfo,
        request: &NonResourceRequest,
    ) -> Result<AccessDecision, MetricsAuthError>;
}
