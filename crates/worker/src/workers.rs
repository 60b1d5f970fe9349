//! Configuring and running the workers.

use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use ctrlkit_workqueue::WorkQueue;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::SyncHandler;
use crate::key::{KeyFormatter, debug_key, display_key};
use crate::metrics::{MetricsProvider, Recorder};
use crate::worker::Inner;

/// N workers that take keys from a [`WorkQueue`] and sync them with a
/// [`SyncHandler`], until shutdown.
///
/// Build with [`Workers::new`], adjust with the builder methods, start with
/// [`run`](Self::run). See the [crate documentation](crate) for the
/// guarantees and an example.
pub struct Workers<T, H> {
    queue: WorkQueue<T>,
    handler: H,
    name: String,
    concurrency: usize,
    timeout: Option<Duration>,
    max_retries: Option<u32>,
    grace_period: Option<Duration>,
    metrics: Option<Arc<dyn MetricsProvider>>,
    key_format: KeyFormatter<T>,
}

impl<T, H> fmt::Debug for Workers<T, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Workers")
            .field("name", &self.name)
            .field("concurrency", &self.concurrency)
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .field("grace_period", &self.grace_period)
            .field("metrics", &self.metrics.is_some())
            .finish_non_exhaustive()
    }
}

/// How [`Workers::run`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Stopped {
    /// The shutdown future completed; every sync in flight then finished
    /// and the queue drained within the grace period (if any).
    Drained,
    /// The queue was shut down by someone else (its `shut_down` or
    /// `shut_down_with_drain`), the workers synced every key still queued,
    /// and all of them returned.
    QueueShutDown,
    /// The shutdown future completed, but the grace period ended first:
    /// `cancelled` syncs still in flight were cancelled at their next
    /// `.await`.
    GracePeriodElapsed {
        /// How many syncs were cancelled.
        cancelled: usize,
    },
}

impl<T, H> Workers<T, H>
where
    T: Eq + Hash + Clone + fmt::Debug + Send + Sync + 'static,
    H: SyncHandler<T>,
{
    /// Workers for `queue` that sync each key with `handler`.
    ///
    /// Defaults: one worker, no name (so no metrics), no timeout, unlimited
    /// retries, no grace period (shutdown waits for every sync in flight),
    /// keys shown with their `Debug` format.
    pub fn new(queue: WorkQueue<T>, handler: H) -> Self {
        Self {
            queue,
            handler,
            name: String::new(),
            concurrency: 1,
            timeout: None,
            max_retries: None,
            grace_period: None,
            metrics: None,
            key_format: debug_key::<T>,
        }
    }

    /// Names the controller: the `controller` field of every sync's span
    /// and the `controller` label of its metrics. Metrics are recorded only
    /// with a non-empty name (as the workqueue's).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// How many keys are synced at the same time (controller-runtime's
    /// `MaxConcurrentReconciles`, the controller manager's `--concurrent-*-syncs`,
    /// 5 for ReplicaSets). Each worker is a tokio task. Defaults to 1; 0 is
    /// treated as 1.
    pub fn concurrency(mut self, workers: usize) -> Self {
        self.concurrency = workers.max(1);
        self
    }

    /// Cancels a sync that runs longer than `limit` and treats it as a
    /// (retryable) error for its key. The sync's future is dropped at its
    /// current `.await`, so it must tolerate stopping half-way (level-based
    /// syncs do). Off by default.
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = Some(limit);
        self
    }

    /// Gives up on a key after `retries` failed retries in a row: when a
    /// sync fails and the queue's
    /// [`num_requeues`](WorkQueue::num_requeues) for the key has reached
    /// `retries`, the key is forgotten and not queued again (it comes back
    /// only when something adds it), and an error is logged. So a key is
    /// synced at most `retries + 1` times in a row without success. With
    /// `0`, failures are never retried.
    ///
    /// Counting relies on the queue's rate limiter tracking failures (all
    /// per-item limiters and the default one do; a bare
    /// [`BucketRateLimiter`](ctrlkit_workqueue::rate_limiter::BucketRateLimiter)
    /// always reports 0, so the limit would never be reached). Unlimited by
    /// default.
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.max_retries = Some(retries);
        self
    }

    /// After shutdown is requested, how long [`run`](Self::run) waits for
    /// the syncs in flight before cancelling them. Without it, `run` waits
    /// as long as they take.
    pub fn grace_period(mut self, grace: Duration) -> Self {
        self.grace_period = Some(grace);
        self
    }

    /// Records controller-runtime's reconcile metrics through `provider`.
    /// Takes effect only together with a non-empty [`name`](Self::name).
    /// Without it the workers record nothing and read no clock for metrics.
    pub fn metrics_provider(mut self, provider: Arc<dyn MetricsProvider>) -> Self {
        self.metrics = Some(provider);
        self
    }

    /// Shows keys in spans and logs with their `Display` format (for
    /// example `default/web` rather than `"default/web"`).
    pub fn display_keys(mut self) -> Self
    where
        T: fmt::Display,
    {
        self.key_format = display_key::<T>;
        self
    }

    /// Shows keys in spans and logs with `format` (a function or a
    /// non-capturing closure), for keys without a suitable `Display`.
    pub fn format_keys(mut self, format: fn(&T, &mut fmt::Formatter<'_>) -> fmt::Result) -> Self {
        self.key_format = format;
        self
    }

    /// Runs the workers until `shutdown` completes (its output is ignored;
    /// for example a tokio-util `CancellationToken`'s `cancelled_owned()`,
    /// a oneshot receiver, or `tokio::signal::ctrl_c()`) or the queue is
    /// shut down by someone else, then returns how it ended. Must be called within a tokio runtime; each worker is a
    /// spawned task, so a multi-threaded runtime syncs keys in parallel.
    ///
    /// Each worker loops: [`get`](WorkQueue::get) a key, sync it, then
    ///
    /// - `Ok(`[`Action`](crate::Action)`)`: [`forget`](WorkQueue::forget)
    ///   the key's backoff and requeue it as the action says;
    /// - a retryable error, a panic or a timeout:
    ///   [`add_rate_limited`](WorkQueue::add_rate_limited) (or drop the key
    ///   after [`max_retries`](Self::max_retries));
    /// - a terminal error: `forget`, not retried;
    ///
    /// and always [`done`](WorkQueue::done).
    ///
    /// # Shutdown
    ///
    /// When `shutdown` completes, `run`
    ///
    /// 1. stops the workers from taking new keys (keys still queued or
    ///    waiting for a delay are not synced; they go with the queue),
    /// 2. shuts the queue down with
    ///    [`shut_down_with_drain`](WorkQueue::shut_down_with_drain), so
    ///    later adds, including retries asked for by the syncs still
    ///    running, are ignored,
    /// 3. waits for the syncs in flight to finish and the drain to complete
    ///    (which also waits for keys that other consumers of the same queue
    ///    hold), at most for the [grace period](Self::grace_period) if one
    ///    is set; when it ends, the remaining syncs are cancelled at their
    ///    next `.await`,
    ///
    /// and returns. The queue stays shut down: a controller that stops does
    /// not come back with the same queue.
    ///
    /// If the queue is shut down by someone else while `run` waits for
    /// `shutdown`, the workers sync the keys still queued and `run` returns
    /// [`Stopped::QueueShutDown`] once all of them are done.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future returned by `run` cancels every sync in flight at
    /// its next `.await` and stops the workers. No key is lost: each
    /// interrupted key is marked done and queued again (unless the queue is
    /// shut down). The queue itself is *not* shut down, so another `run`
    /// can pick up where this one stopped. Prefer completing `shutdown` for
    /// a graceful stop.
    ///
    /// # Panics
    ///
    /// A panicking sync never brings a worker down: it is caught, logged at
    /// error level with its message and counted as an error for the key. A
    /// worker task that dies for another reason (a panicking metrics
    /// provider, say) is logged and replaced. Panics cannot be caught when
    /// the binary is built with `panic = "abort"`.
    pub async fn run<F>(self, shutdown: F) -> Stopped
    where
        F: Future,
    {
        let metrics = match &self.metrics {
            Some(provider) if !self.name.is_empty() => {
                Some(Recorder::new(provider.as_ref(), &self.name))
            }
            _ => None,
        };
        if let Some(metrics) = &metrics {
            metrics.started(self.concurrency);
        }
        let inner = Arc::new(Inner {
            queue: self.queue,
            handler: self.handler,
            name: Arc::from(self.name),
            timeout: self.timeout,
            max_retries: self.max_retries,
            key_format: self.key_format,
            metrics,
        });
        let stop = CancellationToken::new();
        let mut workers = JoinSet::new();
        for _ in 0..self.concurrency {
            workers.spawn(Arc::clone(&inner).work(stop.clone()));
        }
        tracing::info!(controller = %inner.name, workers = self.concurrency, "workers started");

        let queue_shut_down = tokio::select! {
            _ = shutdown => false,
            () = supervise(&mut workers, &inner, &stop) => true,
        };
        if queue_shut_down {
            tracing::info!(controller = %inner.name, "queue shut down; workers stopped");
            return Stopped::QueueShutDown;
        }

        tracing::info!(controller = %inner.name, "shutting down workers");
        stop.cancel();
        let finish = async {
            // Polled together, so the queue is shut down at once and adds
            // made by the syncs still running are ignored.
            tokio::join!(
                reap(&mut workers, &inner.name),
                inner.queue.shut_down_with_drain()
            );
        };
        let finished = match self.grace_period {
            Some(grace) => tokio::time::timeout(grace, finish).await.is_ok(),
            None => {
                finish.await;
                true
            }
        };
        if finished {
            tracing::info!(controller = %inner.name, "workers stopped");
            return Stopped::Drained;
        }

        while workers.try_join_next().is_some() {}
        let cancelled = workers.len();
        workers.abort_all();
        // End the drain for any consumer besides our workers, too.
        inner.queue.shut_down();
        reap(&mut workers, &inner.name).await;
        tracing::warn!(
            controller = %inner.name,
            cancelled,
            "grace period elapsed; cancelled the syncs in flight"
        );
        Stopped::GracePeriodElapsed { cancelled }
    }
}

/// Waits until every worker has returned, replacing any worker that died
/// by a panic unless the workers are being stopped.
async fn supervise<T, H>(
    workers: &mut JoinSet<()>,
    inner: &Arc<Inner<T, H>>,
    stop: &CancellationToken,
) where
    T: Eq + Hash + Clone + Send + Sync + 'static,
    H: SyncHandler<T>,
{
    while let Some(joined) = workers.join_next().await {
        if let Err(error) = joined
            && error.is_panic()
        {
            tracing::error!(controller = %inner.name, %error, "worker panicked; restarting it");
            if !stop.is_cancelled() {
                workers.spawn(Arc::clone(inner).work(stop.clone()));
            }
        }
    }
}

/// Waits until every worker has returned.
async fn reap(workers: &mut JoinSet<()>, name: &str) {
    while let Some(joined) = workers.join_next().await {
        if let Err(error) = joined
            && error.is_panic()
        {
            tracing::error!(controller = %name, %error, "worker panicked while stopping");
        }
    }
}
