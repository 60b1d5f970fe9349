//! The recorder's errors.

use std::fmt;

/// Why [`Recorder::publish`](crate::Recorder::publish) did not queue an
/// event. The event is lost; an event never blocks or fails the operation
/// it reports, so callers usually only log this.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PublishError {
    /// The queue to the background writer is full (the API server is slow
    /// or unreachable); the event was dropped and counted in
    /// [`RecorderStats::dropped`](crate::RecorderStats::dropped).
    #[error("event queue full ({capacity} events waiting): event dropped")]
    QueueFull {
        /// The queue's capacity.
        capacity: usize,
    },
    /// The recorder was shut down.
    #[error("event recorder is shut down: event dropped")]
    ShutDown,
    /// The object the event is about has no name, so no event can name it.
    #[error("cannot record an event on an object without a name (kind {kind:?})")]
    UnnamedObject {
        /// The object's kind, if known.
        kind: Option<String>,
    },
}

/// A [`RecorderConfig`](crate::RecorderConfig) that
/// [`Recorder::with_config`](crate::Recorder::with_config) refuses.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `max_in_flight` is 0: no event could ever be written.
    #[error("max_in_flight must be at least 1 (writes under way at once), got 0")]
    ZeroMaxInFlight,
}

/// A write of an event to the API server that failed. Logged by the
/// background writer (with its source), never returned to the code that
/// published the event.
#[derive(Debug, thiserror::Error)]
#[error("{verb} event {namespace}/{name} failed")]
pub struct WriteError {
    pub(crate) verb: Verb,
    pub(crate) namespace: String,
    pub(crate) name: String,
    #[source]
    pub(crate) source: kube::Error,
}

/// The request that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verb {
    Create,
    Patch,
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verb::Create => "create",
            Verb::Patch => "patch",
        })
    }
}

impl WriteError {
    /// The client's error.
    pub fn kube_error(&self) -> &kube::Error {
        &self.source
    }

    /// Whether trying again may succeed, as client-go's `recordEvent`
    /// decides: an answer from the API server (any status) or a request
    /// that cannot be built will fail the same way again; a transport
    /// failure may not.
    pub fn is_retriable(&self) -> bool {
        !matches!(
            self.source,
            kube::Error::Api(_)
                | kube::Error::SerdeError(_)
                | kube::Error::BuildRequest(_)
                | kube::Error::HttpError(_)
        )
    }

    /// Whether the API server refused it for a reason client-go does not
    /// report loudly: the event exists already, or its namespace is being
    /// deleted.
    pub(crate) fn is_expected_refusal(&self) -> bool {
        let kube::Error::Api(status) = &self.source else {
            return false;
        };
        status.is_already_exists()
            || status
                .details
                .as_ref()
                .is_some_and(|d| d.causes.iter().any(|c| c.reason == "NamespaceTerminating"))
    }
}
