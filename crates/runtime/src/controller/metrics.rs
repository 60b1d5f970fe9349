//! Prometheus metrics shared by the controllers of a process.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;
use prometheus_client::registry::Registry;

use super::error::BuildError;

/// The metric families controllers record into: client-go's `workqueue_*`
/// (label `name`) and controller-runtime's `controller_runtime_reconcile_*`
/// (label `controller`), each labelled with the controller's name.
///
/// Register them once per registry with [`register`](Self::register) and
/// hand clones to every controller's builder
/// ([`ControllerBuilder::metrics`](crate::ControllerBuilder::metrics)):
/// registering twice in one registry would expose every family twice.
/// Controllers sharing one `ControllerMetrics` must have distinct names
/// (the builder refuses a second controller of the same name).
///
/// ```
/// use ctrlkit_informer::Informer;
/// use ctrlkit_runtime::{BuildError, Controller, ControllerMetrics, ObjectKey};
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use prometheus_client::registry::Registry;
///
/// let mut registry = Registry::default();
/// let metrics = ControllerMetrics::register(&mut registry);
/// let controller = Controller::builder_with(Informer::<ConfigMap>::manual().build())
///     .name("demo")
///     .metrics(&metrics)
///     .build()
///     .unwrap();
/// controller.queue().add(ObjectKey::new("ns", "a"));
///
/// let mut text = String::new();
/// prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
/// assert!(text.contains(r#"workqueue_adds_total{name="demo"} 1"#), "{text}");
///
/// // A second controller named "demo" would be indistinguishable.
/// let again = Controller::builder_with(Informer::<ConfigMap>::manual().build())
///     .name("demo")
///     .metrics(&metrics)
///     .build();
/// assert!(matches!(again, Err(BuildError::DuplicateName { .. })));
/// ```
#[derive(Clone)]
pub struct ControllerMetrics {
    queue: ctrlkit_workqueue::PrometheusMetricsProvider,
    workers: ctrlkit_worker::PrometheusMetricsProvider,
    names: Arc<Mutex<HashSet<String>>>,
}

impl fmt::Debug for ControllerMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControllerMetrics")
            .field("controllers", &self.names.lock().len())
            .finish_non_exhaustive()
    }
}

impl ControllerMetrics {
    /// Registers the `workqueue_*` and `controller_runtime_*` families in
    /// `registry`. Call it once per registry.
    pub fn register(registry: &mut Registry) -> Self {
        Self {
            queue: ctrlkit_workqueue::PrometheusMetricsProvider::new(registry),
            workers: ctrlkit_worker::PrometheusMetricsProvider::new(registry),
            names: Arc::default(),
        }
    }

    /// The provider for the workqueue metrics.
    pub fn queue_provider(&self) -> Arc<dyn ctrlkit_workqueue::MetricsProvider> {
        Arc::new(self.queue.clone())
    }

    /// The provider for the reconcile metrics.
    pub fn worker_provider(&self) -> Arc<dyn ctrlkit_worker::MetricsProvider> {
        Arc::new(self.workers.clone())
    }

    /// Reserves `name` for one controller.
    pub(crate) fn claim_name(&self, name: &str) -> Result<(), BuildError> {
        if self.names.lock().insert(name.to_owned()) {
            Ok(())
        } else {
            Err(BuildError::DuplicateName {
                name: name.to_owned(),
            })
        }
    }

    pub(crate) fn has_name(&self, name: &str) -> bool {
        self.names.lock().contains(name)
    }
}
