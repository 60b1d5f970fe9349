//! Creation tracking by identity (beyond upstream): the expectations count
//! only pods this controller created, recognised by UID, so a pod created
//! or adopted by someone else never stands in for one of ours, and a
//! created pod the informer never shows is reported as lost when the
//! expectations expire.

use std::time::Duration;

use ctrlkit_runtime::creation_id;
use k8s_openapi::api::core::v1::Pod;

use super::Shared;
use crate::owner::ReplicaOwner;

/// How long past the expectations' TTL the owner is looked at again, so the
/// expectation has expired (strictly older than the TTL) by then.
const EXPIRY_MARGIN: Duration = Duration::from_millis(100);

impl<O: ReplicaOwner> Shared<O> {
    /// A create for `key` returned `pod`: count it towards the tracked
    /// expectations, under the identity the runtime's pod handler reports
    /// it by ([`creation_id`]).
    pub(crate) fn created_pod(&self, key: &str, pod: &Pod) {
        self.expectations.record_creation(key, &creation_id(pod));
    }

    /// Reports creations found lost since the last report: pods this
    /// controller created and recorded that the informer had not shown when
    /// their expectations expired (a lost watch event). The expectations
    /// log each one with its owner key; this adds a warning naming the
    /// controller and counts them (plain counter and metric).
    pub(crate) fn report_lost_creations(&self, key: &str) {
        let lost = self
            .counters
            .newly_lost_creations(self.expectations.lost_creations());
        if lost == 0 {
            return;
        }
        tracing::warn!(
            kind = <O as k8s_openapi::Resource>::KIND,
            key,
            lost,
            ttl = ?self.expectations.ttl(),
            "created pods never appeared in the informer before the expectations expired; \
             their watch events were lost"
        );
        if let Some(metrics) = &self.metrics {
            metrics.tracking.inc_lost_creations(O::QUEUE_NAME, lost);
        }
    }

    /// While `key` waits for expectations, when to look again so that
    /// unfulfilled ones are noticed (and reported) at their expiry rather
    /// than at the next unrelated event. `None` if nothing is awaited or
    /// the expectations have expired already (they no longer hold the
    /// owner back).
    pub(crate) fn expectations_requeue(&self, key: &str) -> Option<Duration> {
        let expectation = self.expectations.get_expectations(key)?;
        if expectation.fulfilled() {
            return None;
        }
        let left = self
            .expectations
            .ttl()
            .checked_sub(expectation.set_at.elapsed())?;
        Some(left.saturating_add(EXPIRY_MARGIN))
    }
}
