//! When to look at an owner again so that pods crossing `minReadySeconds`
//! are counted as available (upstream 1.34).

use std::sync::Arc;
use std::time::Duration;

use ctrlkit_podcontrol::availability::find_min_next_pod_availability_check;
use ctrlkit_podcontrol::pod::is_pod_ready;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use crate::owner::ReplicaOwner;

/// The delay after which `owner` (as its status write left it) should be
/// synced again because one of its `active` pods becomes available.
///
/// Only when `minReadySeconds > 0` and some ready pods are not available
/// yet: then the delay until the *next* such pod is available, from its
/// Ready condition's `lastTransitionTime + minReadySeconds`, evaluated for
/// the pods as of `evaluated_at` (when the status was computed) and
/// measured from `now`; zero if that moment has passed meanwhile. If no pod
/// says when it became ready, `minReadySeconds` itself, as before 1.34.
/// `None` when nothing will become available by waiting.
pub(crate) fn availability_requeue<O: ReplicaOwner>(
    owner: &O,
    active: &[Arc<Pod>],
    evaluated_at: Timestamp,
    now: Timestamp,
) -> Option<Duration> {
    let min_ready = owner.min_ready_seconds();
    let status = owner.replica_status();
    if min_ready <= 0 || status.ready_replicas == status.available_replicas {
        return None;
    }
    let fallback = Duration::from_secs(u64::from(min_ready.unsigned_abs()));
    Some(
        find_min_next_pod_availability_check(active, min_ready, evaluated_at, now)
            .unwrap_or(fallback),
    )
}

/// After an update of a pod controlled by `owner`: when to look at the
/// owner again because the pod just became ready and will count as
/// available after `minReadySeconds`, which nothing announces. The extra
/// second absorbs clock skew between timers and timestamps.
pub(crate) fn min_ready_requeue<O: ReplicaOwner>(
    old: &Pod,
    new: &Pod,
    owner: &O,
) -> Option<Duration> {
    let min_ready = owner.min_ready_seconds();
    (min_ready > 0 && !is_pod_ready(old) && is_pod_ready(new))
        .then(|| Duration::from_secs(u64::from(min_ready.unsigned_abs()) + 1))
}
