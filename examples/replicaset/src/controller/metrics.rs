//! Prometheus metrics of the controllers: client-go's workqueue metrics
//! and controller-runtime's reconcile metrics.

use std::fmt;
use std::sync::Arc;

use prometheus_client::registry::Registry;

/// The metric families a controller records into, registered once per
/// registry and shareable between controllers (each labels its samples with
/// its queue name: `replicaset`, `replicationmanager`).
#[derive(Clone)]
pub struct ControllerMetrics {
    queue: ctrlkit_workqueue::PrometheusMetricsProvider,
    workers: ctrlkit_worker::PrometheusMetricsProvider,
}

impl fmt::Debug for ControllerMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControllerMetrics").finish_non_exhaustive()
    }
}

impl ControllerMetrics {
    /// Registers the `workqueue_*` and `controller_runtime_reconcile_*`
    /// families in `registry`. Call it once per registry.
    pub fn register(registry: &mut Registry) -> Self {
        Self {
            queue: ctrlkit_workqueue::PrometheusMetricsProvider::new(registry),
            workers: ctrlkit_worker::PrometheusMetricsProvider::new(registry),
        }
    }

    pub(crate) fn queue_provider(&self) -> Arc<dyn ctrlkit_workqueue::MetricsProvider> {
        Arc::new(self.queue.clone())
    }

    pub(crate) fn worker_provider(&self) -> Arc<dyn ctrlkit_worker::MetricsProvider> {
        Arc::new(self.workers.clone())
    }
}
