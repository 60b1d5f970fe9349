//! Read-own-writes (Kubernetes 1.36, KEP-5647): the controller records the
//! resourceVersion of every pod it creates, adopts or releases and of every
//! status it writes, and skips an owner's sync until the informer caches
//! have observed those versions.
//!
//! Without it, a sync that runs before the watch delivered the previous
//! sync's writes works from a picture missing them: it writes the status
//! over an outdated copy of the owner (a 409 Conflict) and, once
//! expectations have expired, creates pods it already created.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ctrlkit_consistency::{ConsistencyStore, GroupResource};
use ctrlkit_informer::Store;
use ctrlkit_podcontrol::{PodControl, PodControlError};
use ctrlkit_worker::Action;
use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Preconditions};

use super::Shared;
use crate::owner::ReplicaOwner;

/// When a sync skipped for a stale cache is retried at the latest. The
/// informer event carrying the awaited write enqueues the owner sooner; this
/// only covers writes whose event never names the owner.
pub(crate) const STALE_SYNC_REQUEUE: Duration = Duration::from_millis(500);

/// The store for one controller: its pod cache and its owner cache, or a
/// disabled store when read-own-writes is off.
pub(crate) fn consistency_store<O: ReplicaOwner>(
    enabled: bool,
    max_wait: Duration,
    pods: &Store<Pod>,
    owners: &Store<O>,
) -> ConsistencyStore {
    if !enabled {
        return ConsistencyStore::disabled();
    }
    ConsistencyStore::builder()
        .cache(GroupResource::of::<Pod>(), pods.clone())
        .cache(GroupResource::of::<O>(), owners.clone())
        .max_wait(max_wait)
        .build()
}

impl<O: ReplicaOwner> Shared<O> {
    /// `Some(requeue)` when the caches have not observed this controller's
    /// last writes for `key` yet: the sync must not run now. Counts the skip.
    pub(crate) fn stale_sync_skip(&self, key: &str) -> Option<Action> {
        let why = self.consistency.ensure_ready(key).err()?;
        self.counters.stale_sync_skip();
        if let Some(metrics) = &self.metrics {
            metrics
                .tracking
                .inc_stale_sync_skips(O::QUEUE_NAME, &why.resource);
        }
        tracing::debug!(key, reason = %why, "skipping the sync until the cache shows our writes");
        Some(Action::requeue_after(STALE_SYNC_REQUEUE))
    }

    /// Records a pod this controller created or patched for `key`.
    pub(crate) fn wrote_pod(&self, key: &str, pod: &Pod) {
        if let Some(rv) = pod.metadata.resource_version.as_deref() {
            self.consistency
                .wrote_at(key, &GroupResource::of::<Pod>(), rv);
        }
    }

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
            return Arc::clone(&self.pod_control);
        }
        Arc::new(RecordingPodControl {
            inner: Arc::clone(&self.pod_control),
            consistency: self.consistency.clone(),
            owner_key: key.to_owned(),
        })
    }
}

/// A [`PodControl`] that records the resourceVersion of every pod a create
/// or a patch returns, under one owner key. Deletes return no object and are
/// not recorded (as upstream).
struct RecordingPodControl {
    inner: Arc<dyn PodControl>,
    consistency: ConsistencyStore,
    owner_key: String,
}

impl RecordingPodControl {
    fn record(&self, pod: &Pod) {
        if let Some(rv) = pod.metadata.resource_version.as_deref() {
            self.consistency
                .wrote_at(&self.owner_key, &GroupResource::of::<Pod>(), rv);
        }
    }
}

#[async_trait]
impl PodControl for RecordingPodControl {
    async fn create_pods(
        &self,
        namespace: &str,
        template: &PodTemplateSpec,
        owner: &ObjectReference,
        controller_ref: &OwnerReference,
    ) -> Result<Pod, PodControlError> {
        let pod = self
            .inner
            .create_pods(namespace, template, owner, controller_ref)
            .await?;
        self.record(&pod);
        Ok(pod)
    }

    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        owner: &ObjectReference,
        preconditions: Option<&Preconditions>,
    ) -> Result<(), PodControlError> {
        self.inner
            .delete_pod(namespace, name, owner, preconditions)
            .await
    }

    async fn patch_pod(
        &self,
        namespace: &str,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<Pod, PodControlError> {
        let pod = self.inner.patch_pod(namespace, name, patch).await?;
        self.record(&pod);
        Ok(pod)
    }
}
