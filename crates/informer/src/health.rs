//! Watch health: when an informer last heard from the API server, and how
//! many objects it could not decode.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use kube::runtime::watcher;
use parking_lot::Mutex;
use tokio::time::Instant;

/// The server-side timeout kube's watcher (and this informer) asks for on
/// each watch when [`watcher::Config::timeout`] is unset.
pub const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(290);

/// How long a watch may stay silent before the client gives up on the
/// connection: the watch timeout plus this margin (as kube's watcher).
pub(crate) const WATCH_IDLE_MARGIN: Duration = Duration::from_secs(5);

/// A sensible bound for [`Informer::health`](crate::Informer::health): twice
/// the longest a healthy watch stays silent (590 s).
///
/// A healthy informer hears from the server at least once per watch
/// request: kube-apiserver sends a bookmark about every minute and just
/// before the watch times out, and a watch that reaches its timeout and
/// ends cleanly counts too. With the default watch timeout (290 s) and the
/// client's 5 s margin for a dead connection, a healthy informer is never
/// silent for longer than 295 s; twice that tolerates one lost watch
/// without a false alarm, yet still notices a watch that went blind within
/// ten minutes. Informers configured with a longer watch timeout need a
/// proportionally longer bound.
pub const DEFAULT_WATCH_HEALTH_BOUND: Duration =
    Duration::from_secs(2 * (DEFAULT_WATCH_TIMEOUT.as_secs() + WATCH_IDLE_MARGIN.as_secs()));

/// An informer that has not heard from the API server for longer than the
/// bound it was checked against: no list page, watch event or bookmark, and
/// no watch that ran to its timeout.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "informer for {resource} has had no successful list or watch response for {}s (bound {}s)",
    silent_for.as_secs(),
    bound.as_secs()
)]
pub struct Unhealthy {
    /// Which informer: its resource, e.g. `replicasets.apps` or `pods`.
    pub resource: String,
    /// How long since its last successful response (or since it started,
    /// if it never had one).
    pub silent_for: Duration,
    /// The bound it was checked against.
    pub bound: Duration,
    /// The last list or watch error, if one occurred since the last
    /// successful response.
    #[source]
    pub last_error: Option<Arc<watcher::Error>>,
}

/// What an informer reports about itself, for metrics; see
/// [`Informer::stats`](crate::Informer::stats).
#[derive(Debug, Clone, PartialEq)]
pub struct InformerStats {
    /// The informer's resource, e.g. `replicasets.apps` or `pods`.
    pub resource: String,
    /// Objects that could not be decoded, counted every time one arrived
    /// (in a list or a watch event) since the informer was built.
    pub decode_errors: u64,
    /// Time since the last successful list or watch response (or since the
    /// start, without one); `None` if the informer is not running.
    pub silent_for: Option<Duration>,
}

/// The health record one informer keeps.
#[derive(Debug)]
pub(crate) struct Health {
    state: Mutex<HealthState>,
    decode_errors: AtomicU64,
    /// Whether the last check found the informer unhealthy, so the warning
    /// is logged once per episode rather than on every probe.
    reported: AtomicBool,
}

#[derive(Debug, Default)]
struct HealthState {
    /// When the informer started running; `None` when it is not running.
    running_since: Option<Instant>,
    last_response: Option<Instant>,
    last_error: Option<Arc<watcher::Error>>,
}

impl Health {
    pub(crate) fn new() -> Self {
        Self {
            state: Mutex::new(HealthState::default()),
            decode_errors: AtomicU64::new(0),
            reported: AtomicBool::new(false),
        }
    }

    pub(crate) fn started(&self) {
        let mut state = self.state.lock();
        state.running_since = Some(Instant::now());
        state.last_response = None;
        state.last_error = None;
    }

    pub(crate) fn stopped(&self) {
        self.state.lock().running_since = None;
    }

    /// A successful response arrived.
    pub(crate) fn responded(&self) {
        let mut state = self.state.lock();
        state.last_response = Some(Instant::now());
        state.last_error = None;
    }

    pub(crate) fn failed(&self, error: watcher::Error) {
        self.state.lock().last_error = Some(Arc::new(error));
    }

    pub(crate) fn decode_failed(&self) {
        self.decode_errors.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn decode_errors(&self) -> u64 {
        self.decode_errors.load(Ordering::Relaxed)
    }

    pub(crate) fn silent_for(&self) -> Option<Duration> {
        let state = self.state.lock();
        let since = state.last_response.or(state.running_since)?;
        state.running_since?;
        Some(since.elapsed())
    }

    /// `Err` when the running informer has been silent for longer than
    /// `bound`; logs the first failed check of an episode and the recovery.
    pub(crate) fn check(&self, resource: &str, bound: Duration) -> Result<(), Unhealthy> {
        let silent_for = self.silent_for();
        let unhealthy = silent_for
            .filter(|s| *s > bound)
            .map(|silent_for| Unhealthy {
                resource: resource.to_owned(),
                silent_for,
                bound,
                last_error: self.state.lock().last_error.clone(),
            });
        let was_reported = self.reported.swap(unhealthy.is_some(), Ordering::Relaxed);
        match unhealthy {
            Some(unhealthy) => {
                if !was_reported {
                    tracing::warn!(
                        resource,
                        silent_secs = unhealthy.silent_for.as_secs(),
                        bound_secs = bound.as_secs(),
                        last_error = unhealthy.last_error.as_ref().map(tracing::field::display),
                        "informer has had no successful list or watch response within the bound; not ready"
                    );
                }
                Err(unhealthy)
            }
            None => {
                if was_reported {
                    tracing::info!(resource, "informer is hearing from the API server again");
                }
                Ok(())
            }
        }
    }
}

impl fmt::Display for InformerStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} decode errors", self.resource, self.decode_errors)?;
        if let Some(silent) = self.silent_for {
            write!(f, ", last response {}s ago", silent.as_secs())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_bound_is_twice_the_idle_watch_window() {
        assert_eq!(DEFAULT_WATCH_HEALTH_BOUND, Duration::from_secs(590));
    }

    #[tokio::test(start_paused = true)]
    async fn silence_is_measured_from_the_last_response_or_the_start() {
        let health = Health::new();
        let bound = Duration::from_secs(10);
        // Not running: nothing to be unhealthy about.
        tokio::time::advance(Duration::from_secs(60)).await;
        assert!(health.check("pods", bound).is_ok());
        assert_eq!(health.silent_for(), None);

        health.started();
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(health.check("pods", bound).is_ok());
        tokio::time::advance(Duration::from_secs(1)).await;
        health.failed(watcher::Error::NoResourceVersion);
        let err = health.check("pods", bound).unwrap_err();
        assert_eq!(err.resource, "pods");
        assert_eq!(err.silent_for, Duration::from_secs(11));
        assert!(err.last_error.is_some());
        assert_eq!(
            err.to_string(),
            "informer for pods has had no successful list or watch response for 11s (bound 10s)"
        );

        health.responded();
        assert!(health.check("pods", bound).is_ok());
        tokio::time::advance(Duration::from_secs(11)).await;
        assert!(
            health
                .check("pods", bound)
                .unwrap_err()
                .last_error
                .is_none()
        );
        health.stopped();
        assert!(health.check("pods", bound).is_ok());
    }
}
