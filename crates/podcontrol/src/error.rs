use thiserror::Error;

/// Why a [`PodControl`](crate::PodControl) call failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PodControlError {
    /// The pod template or owner reference cannot produce a valid pod.
    #[error("invalid pod template: {0}")]
    InvalidTemplate(String),
    /// The namespace is being deleted, so the API server refuses new pods in
    /// it. Controllers usually treat this as expected rather than as a failure.
    #[error("namespace {namespace} is terminating")]
    NamespaceTerminating {
        /// The namespace that is being deleted.
        namespace: String,
    },
    /// The API server (or the transport to it) returned an error.
    #[error("API request failed: {0}")]
    Api(#[from] kube::Error),
}
