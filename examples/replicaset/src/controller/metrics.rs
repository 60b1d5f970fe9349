//! Prometheus metrics of the controllers: client-go's workqueue metrics
//! and controller-runtime's reconcile metrics.

use std::fmt;
use std::sync::Arc;

use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The metric families a controller records into, registered once per
/// registry and shareable between controllers (each labels its samples with
/// its queue name: `replicaset`, `replicationmanager`).
#[derive(Clone)]
pub struct ControllerMetrics {
    queue: ctrlkit_workqueue::PrometheusMetricsProvider,
    workers: ctrlkit_worker::PrometheusMetricsProvider,
    deletion_age_ratio: Histogram,
}

impl fmt::Debug for ControllerMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControllerMetrics").finish_non_exhaustive()
    }
}

impl ControllerMetrics {
    /// Registers the `workqueue_*` and `controller_runtime_reconcile_*`
    /// families and upstream's
    /// `replicaset_controller_sorting_deletion_age_ratio` histogram in
    /// `registry`. Call it once per registry.
    pub fn register(registry: &mut Registry) -> Self {
        let deletion_age_ratio = Histogram::new(exponential_buckets(0.25, 2.0, 6));
        registry.register(
            "replicaset_controller_sorting_deletion_age_ratio",
            "Age of each ready pod deleted by a ranked scale-down divided by the age of the youngest ready pod",
            deletion_age_ratio.clone(),
        );
        Self {
            queue: ctrlkit_workqueue::PrometheusMetricsProvider::new(registry),
            workers: ctrlkit_worker::PrometheusMetricsProvider::new(registry),
            deletion_age_ratio,
        }
    }

    pub(crate) fn observe_deletion_age_ratios(&self, ratios: &[f64]) {
        for ratio in ratios {
            self.deletion_age_ratio.observe(*ratio);
        }
    }

    pub(crate) fn queue_provider(&self) -> Arc<dyn ctrlkit_workqueue::MetricsProvider> {
        Arc::new(self.queue.clone())
    }

    pub(crate) fn worker_provider(&self) -> Arc<dyn ctrlkit_worker::MetricsProvider> {
        Arc::new(self.workers.clone())
    }
}
