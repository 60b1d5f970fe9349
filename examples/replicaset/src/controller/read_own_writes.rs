//! Read-own-writes (Kubernetes 1.36, KEP-5647): the controller records the
//! resourceVersion of every pod it creates, adopts or releases and of every
//! status it writes, and the runtime skips an owner's sync until the
//! informer caches have observed those versions.
//!
//! Without it, a sync that runs before the watch delivered the previous
//! sync's writes works from a picture missing them: it writes the status
//! over an outdated copy of the owner (a 409 Conflict) and, once
//! expectations have expired, creates pods it already created.

use std::sync::Arc;

use ctrlkit_consistency::{GroupResource, NotObservedYet};
use ctrlkit_informer::ObjectKey;
use ctrlkit_podcontrol::PodControl;
use ctrlkit_runtime::child::{Observed, RecordWrites};
use k8s_openapi::api::core::v1::Pod;

use super::Shared;
use super::counters::SyncCounters;
use super::metrics::ControllerMetrics;
use crate::owner::ReplicaOwner;

/// What the runtime calls for a sync it skipped because a cache had not
/// shown a write yet: counts it in the plain counter and in
/// `replicaset_controller_stale_sync_skips_total{resource}`.
pub(super) fn skip_counter<O: ReplicaOwner>(
    counters: &Arc<SyncCounters>,
    metrics: Option<&ControllerMetrics>,
) -> impl Fn(&ObjectKey, &NotObservedYet) + Send + Sync + 'static {
    let (counters, metrics) = (Arc::clone(counters), metrics.cloned());
    move |_, why| {
        counters.stale_sync_skip();
        if let Some(metrics) = &metrics {
            metrics
                .tracking
                .inc_stale_sync_skips(O::QUEUE_NAME, &why.resource);
        }
    }
}

impl<O: ReplicaOwner> Shared<O> {
    /// Records the owner as its status write returned it.
    pub(crate) fn wrote_owner(&self, key: &str, owner: &O) {
        if let Some(rv) = owner.meta().resource_version.as_deref() {
            self.consistency
                .wrote_at(key, &GroupResource::of::<O>(), rv);
        }
    }

    /// The pod control for one sync of `key`: the controller's own, wrapped
    /// so that the pods returned by creates and by the claim's adopt and
    /// release patches are recorded under `key`.
    pub(crate) fn recording_pod_control(&self, key: &str) -> Arc<dyn PodControl> {
        if !self.consistency.is_enabled() {
            return Arc::clone(&self.writers.pod_control);
        }
        let record = RecordWrites::<Pod>::new(self.consistency.clone(), key);
        Arc::new(Observed::new(Arc::clone(&self.writers.pod_control), record))
    }
}
