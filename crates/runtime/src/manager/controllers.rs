//! Controllers on a manager: the shared controller metrics, fenced child
//! controls, and a [`Controller`] added as a runnable.

use std::future::Future;
use std::sync::Arc;

use ctrlkit_childcontrol::{ChildControl, ChildResource, KubeChildControl};
use ctrlkit_informer::ObjectKey;
use ctrlkit_worker::{Action, SyncError};

use super::lifecycle::Manager;
use super::runnable::FnRunnable;
use crate::{Controller, ControllerMetrics, Watchable};

impl Manager {
    /// The `workqueue_*` and `controller_runtime_*` metrics every
    /// controller of this manager records into, each under its own name;
    /// registered in the manager's [registry](Self::registry) on the first
    /// call, the same handle afterwards. [`Controller::builder_for`] uses
    /// it; do not also register a [`ControllerMetrics`] of your own in this
    /// registry (the families would be exported twice).
    pub fn controller_metrics(&mut self) -> ControllerMetrics {
        if let Some(metrics) = &self.controller_metrics {
            return metrics.clone();
        }
        let metrics = ControllerMetrics::register(self.registry_mut());
        self.controller_metrics = Some(metrics.clone());
        metrics
    }

    /// A child control for kind `C` on the manager's fenced
    /// [client](Self::client), with the manager's [fence](Self::fence) as
    /// its write gate (a stand-by or deposed leader refuses the write
    /// before building it, with no `FailedCreate` event), recording events
    /// as `reporter` (usually the controller's name, also the field
    /// manager).
    pub fn child_control<C: ChildResource>(&self, reporter: &str) -> Arc<dyn ChildControl<C>> {
        let control = KubeChildControl::new(self.client().clone(), reporter);
        Arc::new(control.with_write_gate(Arc::new(self.fence())))
    }

    /// Adds `controller` as a [`Runnable`](super::Runnable) named after it:
    /// it runs [`Controller::run`] with `reconcile` and `ctx` once this
    /// process leads (with leader election), stops when the manager shuts
    /// down, draining in-flight reconciles, and holds back readiness and
    /// the campaign for the lease until its caches (including informers
    /// given by hand) have synced. An error of `run` (an informer that
    /// stopped before it synced) stops the manager.
    pub fn add_controller<K, R, Fut, E, Ctx>(
        &mut self,
        controller: Controller<K>,
        reconcile: R,
        ctx: Arc<Ctx>,
    ) -> &mut Self
    where
        K: Watchable,
        R: Fn(ObjectKey, Option<Arc<K>>, Arc<Ctx>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: SyncError,
        Ctx: Send + Sync + 'static,
    {
        let synced = controller.clone();
        let runnable = FnRunnable::new(controller.name().to_owned(), move |stop| async move {
            controller
                .run(reconcile, ctx, stop.cancelled_owned())
                .await
                .map(drop)
        })
        .with_synced(move || synced.has_synced());
        self.add(runnable)
    }
}
