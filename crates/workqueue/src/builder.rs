//! Configuring a [`WorkQueue`].

use std::fmt;
use std::hash::Hash;
use std::sync::Arc;

use crate::WorkQueue;
use crate::delay_store::DelayStore;
use crate::metrics::{MetricsProvider, QueueMetrics, new_retries};
use crate::queue_state::QueueState;
use crate::rate_limiter::{RateLimiter, default_controller_rate_limiter};
use crate::shared_state::SharedState;
use crate::timer_task;

/// Builds a [`WorkQueue`]; start with [`WorkQueue::builder`].
///
/// Without any setting it builds the same queue as [`WorkQueue::new`]:
/// the default controller rate limiter and no metrics.
pub struct WorkQueueBuilder<T> {
    name: Option<String>,
    limiter: Option<Box<dyn RateLimiter<T>>>,
    metrics: Option<Arc<dyn MetricsProvider>>,
}

impl<T> fmt::Debug for WorkQueueBuilder<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkQueueBuilder")
            .field("name", &self.name)
            .field("custom_rate_limiter", &self.limiter.is_some())
            .field("metrics", &self.metrics.is_some())
            .finish()
    }
}

impl<T> Default for WorkQueueBuilder<T>
where
    T: Eq + Hash + Clone + Send + Sync + 'static,
{
    fn default() -> Self {
        Self::new()
    }
}

impl<T> WorkQueueBuilder<T>
where
    T: Eq + Hash + Clone + Send + Sync + 'static,
{
    /// A builder with no name, the default rate limiter and no metrics.
    pub fn new() -> Self {
        Self {
            name: None,
            limiter: None,
            metrics: None,
        }
    }

    /// Names the queue. The name is the `name` label of its metrics; a queue
    /// without a name (or with an empty one) records no metrics, as in
    /// client-go.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets the rate limiter used by
    /// [`add_rate_limited`](WorkQueue::add_rate_limited),
    /// [`forget`](WorkQueue::forget) and
    /// [`num_requeues`](WorkQueue::num_requeues). Defaults to
    /// [`default_controller_rate_limiter`].
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<T> + 'static) -> Self {
        self.limiter = Some(Box::new(limiter));
        self
    }

    /// Records the queue's metrics through `provider`. Takes effect only
    /// together with a non-empty [`name`](Self::name).
    pub fn metrics_provider(mut self, provider: Arc<dyn MetricsProvider>) -> Self {
        self.metrics = Some(provider);
        self
    }

    /// Builds the queue. When it records metrics and a tokio runtime is
    /// current, this also starts the task that refreshes the
    /// work-in-progress gauges (otherwise the first parked `get` starts it).
    pub fn build(self) -> WorkQueue<T> {
        let (metrics, retries) = match (&self.name, &self.metrics) {
            (Some(name), Some(provider)) if !name.is_empty() => (
                Some(QueueMetrics::new(provider.as_ref(), name)),
                Some(new_retries(provider.as_ref(), name)),
            ),
            _ => (None, None),
        };
        let limiter = self
            .limiter
            .unwrap_or_else(|| Box::new(default_controller_rate_limiter()));
        let shared = Arc::new(SharedState::new(
            QueueState::new(metrics),
            DelayStore::new(retries),
            limiter,
        ));
        timer_task::ensure_started(&shared);
        WorkQueue { shared }
    }
}
