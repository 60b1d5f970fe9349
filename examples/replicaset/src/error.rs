//! The controller's error type.

use ctrlkit_informer::InformerError;
use ctrlkit_podcontrol::PodControlError;
use ctrlkit_refmanager::{ClaimErrors, OwnerError, SelectorError};

/// Why building the controller or syncing one key failed.
///
/// A failed sync is retried with backoff unless the error is *terminal*
/// ([`Error::is_terminal`]): an invalid key or an owner whose spec cannot
/// work (bad selector, selector not matching the template's labels) is only
/// looked at again when the owner changes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The queue key has no namespace (owners are namespaced).
    #[error("invalid key {0:?}: expected namespace/name")]
    InvalidKey(String),
    /// The owner's selector cannot be compiled.
    #[error("invalid pod selector on {kind} {key}: {source}")]
    InvalidSelector {
        /// The owner's kind.
        kind: &'static str,
        /// The owner's key.
        key: String,
        /// What is wrong with the selector.
        #[source]
        source: SelectorError,
    },
    /// The owner's selector is empty: it would select (and adopt) every pod
    /// in the namespace. The API server rejects such owners; this guards
    /// against servers that do not validate.
    #[error("{kind} {key}: empty pod selector")]
    EmptySelector {
        /// The owner's kind.
        kind: &'static str,
        /// The owner's key.
        key: String,
    },
    /// The owner's selector does not select the pods its template makes
    /// (or there is no template): the owner would create pods for ever.
    #[error("{kind} {key}: selector does not match template labels")]
    SelectorMismatch {
        /// The owner's kind.
        kind: &'static str,
        /// The owner's key.
        key: String,
    },
    /// The owner cannot own pods (no UID or name).
    #[error(transparent)]
    Owner(#[from] OwnerError),
    /// Reading the informer cache failed (a missing index).
    #[error("reading the informer cache: {0}")]
    Cache(#[from] InformerError),
    /// Adopting or releasing pods failed.
    #[error(transparent)]
    Claim(#[from] ClaimErrors<PodControlError>),
    /// Creating pods failed; the message is the first failure's.
    #[error("{0}")]
    CreatePods(#[source] PodControlError),
    /// Deleting pods failed; the message is the first failure's.
    #[error("{0}")]
    DeletePods(#[source] PodControlError),
    /// Writing the owner's status failed (after the retry).
    #[error("updating status of {key}: {source}")]
    UpdateStatus {
        /// The owner's key.
        key: String,
        /// The last API error.
        #[source]
        source: kube::Error,
    },
    /// The owner is gone from the API server although the cache still has
    /// it: its status write answered 404 (or a fresh read found another
    /// object under its name), or the live read before adopting found it
    /// deleted or re-created. A sync ending so is not an error: the
    /// controller drops the owner's expectations and waits for the
    /// informer's delete event.
    #[error("{kind} {key} no longer exists")]
    OwnerGone {
        /// The owner's kind.
        kind: &'static str,
        /// The owner's key.
        key: String,
    },
    /// Declaring the controller on the runtime failed (e.g. a controller
    /// of the same kind already records into the same metrics).
    #[error("building the controller")]
    Build(#[from] ctrlkit_runtime::BuildError),
    /// The runtime found no cache of this kind for the controller (a bug).
    #[error("the controller has no {0} cache")]
    MissingCache(&'static str),
    /// Running the controller failed: its informer caches stopped before
    /// they synced.
    #[error("running the controller")]
    Run(#[from] ctrlkit_runtime::RunError),
}

impl Error {
    /// Whether retrying cannot help until the owner itself changes.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            Error::InvalidKey(_)
                | Error::InvalidSelector { .. }
                | Error::EmptySelector { .. }
                | Error::SelectorMismatch { .. }
                | Error::Owner(_)
                | Error::OwnerGone { .. }
        )
    }
}

impl ctrlkit_worker::SyncError for Error {
    fn is_terminal(&self) -> bool {
        Error::is_terminal(self)
    }
}
