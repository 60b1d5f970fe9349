//! Controllers on a manager: the shared controller metrics, one event
//! recorder per reporter, fenced child and pod controls, and a [`Controller`]
//! added as a runnable.

use std::future::Future;
use std::sync::Arc;

use ctrlkit_childcontrol::{ChildControl, ChildLabeller, ChildResource, KubeChildControl};
use ctrlkit_events::{Recorder, undecodable_warning};
use ctrlkit_informer::ObjectKey;
use ctrlkit_podcontrol::KubePodControl;
use ctrlkit_worker::{Action, SyncError};
use k8s_openapi::api::core::v1::Pod;

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

    /// The event recorder writing as `reporter` (usually a controller's
    /// name) through the manager's fenced [client](Self::client): created
    /// on the first call, the same recorder afterwards, so every child
    /// control and warning of one reporter shares its aggregation and
    /// spam-filter caches. The manager writes what is still queued once its
    /// runnables have drained, before it releases the lease (bounded by
    /// [`EVENT_FLUSH_TIMEOUT`](super::EVENT_FLUSH_TIMEOUT)).
    pub fn event_recorder(&self, reporter: &str) -> Recorder {
        let mut recorders = self
            .recorders
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        recorders
            .entry(reporter.to_owned())
            .or_insert_with(|| Recorder::new(self.client().clone(), reporter.to_owned()))
            .clone()
    }

    /// A child control for kind `C` on the manager's fenced
    /// [client](Self::client), with the manager's [fence](Self::fence) as
    /// its write gate (a stand-by or deposed leader refuses the write
    /// before building it, with no `FailedCreate` event), recording events
    /// through [`event_recorder(reporter)`](Self::event_recorder)
    /// (`reporter` is usually the controller's name, also the field
    /// manager).
    ///
    /// On a sharded manager (`--shard-ring`) the children it creates carry
    /// the slot label ([`child_labeller`](Self::child_labeller)).
    pub fn child_control<C: ChildResource>(&self, reporter: &str) -> Arc<dyn ChildControl<C>> {
        Arc::new(self.kube_child_control(reporter))
    }

    /// A [`PodControl`](ctrlkit_podcontrol::PodControl) on the manager's
    /// fenced client, written as [`child_control::<Pod>`](Self::child_control)
    /// writes: the manager's fence as its write gate, events through
    /// [`event_recorder(reporter)`](Self::event_recorder), the slot label
    /// on a sharded manager. Returned as the concrete type, so a
    /// controller can still set its own options (e.g.
    /// [`with_created_metadata_only`](KubePodControl::with_created_metadata_only)).
    pub fn pod_control(&self, reporter: &str) -> KubePodControl {
        KubePodControl::from(self.kube_child_control::<Pod>(reporter))
    }

    fn kube_child_control<C: ChildResource>(&self, reporter: &str) -> KubeChildControl<C> {
        let recorder = self.event_recorder(reporter);
        let mut control = KubeChildControl::with_event_recorder(self.client().clone(), recorder);
        if let Some(labeller) = self.child_labeller() {
            control = control.with_child_labeller(labeller);
        }
        control.with_write_gate(Arc::new(self.fence()))
    }

    /// What a child control of this manager labels the children it creates
    /// with: on a sharded manager (`--shard-ring`), the slot label
    /// ([`shard::slot_labeller`](crate::shard::slot_labeller)), so each
    /// member's child informers receive only their slots' children; `None`
    /// otherwise. Give it to child controls built by hand
    /// (`KubeChildControl::with_child_labeller`,
    /// `KubePodControl::with_child_labeller`).
    pub fn child_labeller(&self) -> Option<Arc<dyn ChildLabeller>> {
        crate::shard::slot_labeller_for(self.factory())
    }

    /// Adds `controller` as a [`Runnable`](super::Runnable) named after it:
    /// it runs [`Controller::run`] with `reconcile` and `ctx` once this
    /// process leads (with leader election), stops when the manager shuts
    /// down, draining in-flight reconciles, and holds back readiness and
    /// the campaign for the lease until its caches (including informers
    /// given by hand) have synced. An error of `run` (an informer that
    /// stopped before it synced) stops the manager. An owner the informer
    /// cannot decode gets a `Warning` `DecodeFailed` event from the
    /// controller's [recorder](Self::event_recorder) (as its
    /// [`event_reporter`](Controller::event_reporter)), besides the
    /// informer's log line and metric.
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
        controller
            .informer()
            .add_event_handler(undecodable_warning::<K>(
                self.event_recorder(controller.event_reporter()),
            ));
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
