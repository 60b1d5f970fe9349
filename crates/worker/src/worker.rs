//! One worker: take a key, sync it, settle the outcome with the queue.

use std::any::Any;
use std::fmt;
use std::hash::Hash;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use ctrlkit_workqueue::WorkQueue;
use futures::FutureExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, Level};

use crate::action::ActionKind;
use crate::key::{KeyField, KeyFormatter};
use crate::metrics::{ReconcileResult, Recorder};
use crate::{Action, SyncError, SyncHandler};

/// Everything the workers of one run share.
pub(crate) struct Inner<T, H> {
    pub(crate) queue: WorkQueue<T>,
    pub(crate) handler: H,
    pub(crate) name: Arc<str>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) max_retries: Option<u32>,
    pub(crate) key_format: KeyFormatter<T>,
    pub(crate) metrics: Option<Recorder>,
}

/// How one sync ended.
enum Attempt<E> {
    Finished(Result<Action, E>),
    Panicked(String),
    TimedOut(Duration),
}

impl<T, H> Inner<T, H>
where
    T: Eq + Hash + Clone + Send + Sync + 'static,
    H: SyncHandler<T>,
{
    /// The worker loop: runs until `stop` is cancelled (checked before
    /// every key, so a running sync is never interrupted by it) or the queue
    /// is shut down and empty.
    pub(crate) async fn work(self: Arc<Self>, stop: CancellationToken) {
        loop {
            let key = tokio::select! {
                biased;
                () = stop.cancelled() => return,
                // Cancel-safe: losing the race to `stop` leaves the key queued.
                key = self.queue.get() => match key {
                    Some(key) => key,
                    None => return,
                },
            };
            self.process(key).await;
        }
    }

    async fn process(&self, key: T) {
        let guard = InFlight::new(self, key);
        let span = tracing::info_span!(
            "sync",
            controller = %self.name,
            key = %KeyField { key: &guard.key, format: self.key_format },
        );
        // The clock is read only when someone consumes the duration.
        let start = (self.metrics.is_some() || tracing::enabled!(Level::DEBUG)).then(Instant::now);
        let attempt = self
            .attempt(guard.key.clone())
            .instrument(span.clone())
            .await;
        let elapsed = start.map_or(Duration::ZERO, |start| start.elapsed());
        span.in_scope(|| self.settle(&guard.key, attempt, elapsed));
        guard.finish();
    }

    /// Runs the sync, turning a panic or a timeout into an outcome.
    async fn attempt(&self, key: T) -> Attempt<H::Error> {
        // The handler is called inside the caught future so that a panic
        // before its first `.await` (in a closure's synchronous part) is
        // caught as well.
        let sync = AssertUnwindSafe(async { self.handler.sync(key).await }).catch_unwind();
        let caught = match self.timeout {
            Some(limit) => match tokio::time::timeout(limit, sync).await {
                Ok(caught) => caught,
                Err(_elapsed) => return Attempt::TimedOut(limit),
            },
            None => sync.await,
        };
        match caught {
            Ok(result) => Attempt::Finished(result),
            Err(payload) => Attempt::Panicked(panic_message(payload.as_ref())),
        }
    }

    /// Tells the queue what to do with `key` after `attempt`, logs it and
    /// records the metrics. Called inside the sync's span.
    fn settle(&self, key: &T, attempt: Attempt<H::Error>, elapsed: Duration) {
        let result = match attempt {
            Attempt::Finished(Ok(action)) => self.succeeded(key, action, elapsed),
            Attempt::Finished(Err(error)) if error.is_terminal() => {
                self.queue.forget(key);
                if let Some(metrics) = &self.metrics {
                    metrics.terminal();
                }
                tracing::error!(
                    error = %error,
                    ?elapsed,
                    "sync failed with a terminal error; not retrying"
                );
                ReconcileResult::Error
            }
            Attempt::Finished(Err(error)) => self.failed(key, &error, elapsed),
            Attempt::Panicked(message) => {
                if let Some(metrics) = &self.metrics {
                    metrics.panicked();
                }
                self.failed(key, &format_args!("sync panicked: {message}"), elapsed)
            }
            Attempt::TimedOut(limit) => self.failed(
                key,
                &format_args!("sync timed out after {limit:?}"),
                elapsed,
            ),
        };
        if let Some(metrics) = &self.metrics {
            metrics.observe(result, elapsed);
        }
    }

    fn succeeded(&self, key: &T, action: Action, elapsed: Duration) -> ReconcileResult {
        match action.kind() {
            ActionKind::Done => {
                self.queue.forget(key);
                tracing::debug!(?elapsed, "sync succeeded");
                ReconcileResult::Success
            }
            ActionKind::RequeueAfter(delay) => {
                self.queue.forget(key);
                self.queue.add_after(key.clone(), delay);
                tracing::debug!(?elapsed, ?delay, "sync succeeded; requeued after a delay");
                ReconcileResult::RequeueAfter
            }
            ActionKind::Requeue => {
                self.queue.add_rate_limited(key.clone());
                tracing::debug!(?elapsed, "sync succeeded; requeued with backoff");
                ReconcileResult::Requeue
            }
        }
    }

    /// A retryable failure: retry with backoff, or give up after
    /// `max_retries`.
    fn failed(&self, key: &T, error: &dyn fmt::Display, elapsed: Duration) -> ReconcileResult {
        let retries = self.queue.num_requeues(key);
        match self.max_retries {
            Some(max) if retries >= max => {
                self.queue.forget(key);
                tracing::error!(
                    error = %error,
                    ?elapsed,
                    retries,
                    "sync failed; dropping the key after too many retries"
                );
            }
            _ => {
                self.queue.add_rate_limited(key.clone());
                tracing::error!(error = %error, ?elapsed, retries, "sync failed; retrying");
            }
        }
        ReconcileResult::Error
    }
}

/// A key being processed: always released with `done`, even if the worker
/// is cancelled or unwinds in the middle of it.
struct InFlight<'a, T, H>
where
    T: Eq + Hash + Clone + Send + Sync + 'static,
{
    inner: &'a Inner<T, H>,
    key: T,
    finished: bool,
}

impl<'a, T, H> InFlight<'a, T, H>
where
    T: Eq + Hash + Clone + Send + Sync + 'static,
{
    fn new(inner: &'a Inner<T, H>, key: T) -> Self {
        if let Some(metrics) = &inner.metrics {
            metrics.sync_began();
        }
        Self {
            inner,
            key,
            finished: false,
        }
    }

    /// The outcome was settled: release the key.
    fn finish(mut self) {
        self.finished = true;
    }
}

impl<T, H> Drop for InFlight<'_, T, H>
where
    T: Eq + Hash + Clone + Send + Sync + 'static,
{
    fn drop(&mut self) {
        let queue = &self.inner.queue;
        if !self.finished {
            // Cancelled (run dropped, grace period over) or a bug unwound
            // through the worker: the sync may not have finished, so the key
            // must be looked at again. Added while processing, it is queued
            // again by `done` (ignored once the queue is shut down).
            if std::thread::panicking() {
                queue.add_rate_limited(self.key.clone());
            } else {
                queue.add(self.key.clone());
            }
        }
        queue.done(&self.key);
        if let Some(metrics) = &self.inner.metrics {
            metrics.sync_ended();
        }
    }
}

/// The message of a panic payload (`panic!` with a literal or a format
/// string); other payloads have none.
fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(message) = payload.downcast_ref::<&'static str>() {
        (*message).to_string()
    } else if let Some(message) = payload.downcast_ref::<String>() {
        message.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panic_messages_are_extracted() {
        let literal = std::panic::catch_unwind(|| panic!("boom")).unwrap_err();
        assert_eq!(panic_message(literal.as_ref()), "boom");
        let formatted = std::panic::catch_unwind(|| panic!("boom {}", 42)).unwrap_err();
        assert_eq!(panic_message(formatted.as_ref()), "boom 42");
        let other = std::panic::catch_unwind(|| std::panic::panic_any(7_u8)).unwrap_err();
        assert_eq!(
            panic_message(other.as_ref()),
            "panic with a non-string payload"
        );
    }
}
