//! When to look at an owner again so a pod's `minReadySeconds` is noticed.
//!
//! A pod that is ready but not yet ready for `minReadySeconds` becomes
//! available later without any watch event announcing it. A controller that
//! reports available replicas therefore requeues its owner for the moment
//! the next pod crosses that line; these functions compute that delay.

use std::borrow::Borrow;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use crate::pod::{add_secs, is_pod_ready, pod_ready_time};

/// How long after `now` the pod becomes available.
///
/// `None` when that will not happen by waiting: the pod is not ready, does
/// not say when it became ready, `min_ready_seconds <= 0` (readiness alone
/// counts), or it is already available.
pub fn next_pod_availability_check(
    pod: &Pod,
    min_ready_seconds: i32,
    now: Timestamp,
) -> Option<Duration> {
    if min_ready_seconds <= 0 || !is_pod_ready(pod) {
        return None;
    }
    let available_at = add_secs(pod_ready_time(pod)?, min_ready_seconds);
    let wait = available_at.duration_since(now);
    wait.is_positive().then(|| wait.unsigned_abs())
}

/// The shortest [`next_pod_availability_check`] among `pods`, with the pod
/// it belongs to (the first such pod on ties). `None` if no pod is waiting.
pub fn find_min_next_pod_availability_simple_check<P: Borrow<Pod>>(
    pods: &[P],
    min_ready_seconds: i32,
    now: Timestamp,
) -> Option<(Duration, &P)> {
    let mut best: Option<(Duration, &P)> = None;
    for pod in pods {
        if let Some(wait) = next_pod_availability_check(pod.borrow(), min_ready_seconds, now)
            && best.is_none_or(|(shortest, _)| wait < shortest)
        {
            best = Some((wait, pod));
        }
    }
    best
}

/// The delay after which the owner should be synced again because a pod
/// becomes available.
///
/// `last_owner_status_evaluation` is when the owner's status was computed
/// (the pod set is evaluated as of then); `now` is the current time. The pod
/// that was next to become available then is checked again at `now`: the
/// remaining wait is returned, or `Some(Duration::ZERO)` if its moment has
/// already passed (sync immediately). `None` means no pod is waiting to
/// become available.
pub fn find_min_next_pod_availability_check<P: Borrow<Pod>>(
    pods: &[P],
    min_ready_seconds: i32,
    last_owner_status_evaluation: Timestamp,
    now: Timestamp,
) -> Option<Duration> {
    let (_, pod) = find_min_next_pod_availability_simple_check(
        pods,
        min_ready_seconds,
        last_owner_status_evaluation,
    )?;
    Some(next_pod_availability_check(pod.borrow(), min_ready_seconds, now).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::test_pods::*;
    use k8s_openapi::jiff::SignedDuration;

    fn now() -> Timestamp {
        ts("2026-05-01T10:00:00Z")
    }

    fn ready_ago(name: &str, secs: i64) -> Pod {
        ready(pod(name), Some(now() - SignedDuration::from_secs(secs)))
    }

    #[test]
    fn next_check_for_one_pod() {
        // TestNextPodAvailabilityCheck.
        let n = now();
        assert_eq!(next_pod_availability_check(&pod("a"), 10, n), None);
        assert_eq!(next_pod_availability_check(&ready_ago("a", 0), 0, n), None);
        assert_eq!(
            next_pod_availability_check(&ready(pod("a"), None), 1, n),
            None
        );
        assert_eq!(
            next_pod_availability_check(&ready_ago("a", 0), 1, n),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            next_pod_availability_check(&ready_ago("a", 20), 30, n),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            next_pod_availability_check(&ready_ago("a", 51), 50, n),
            None
        );
        assert_eq!(
            next_pod_availability_check(&ready_ago("a", 50), 50, n),
            None
        );
        assert_eq!(next_pod_availability_check(&ready_ago("a", 0), -5, n), None);
    }

    fn upstream_pods() -> Vec<Pod> {
        vec![
            pod("pod1"),
            ready_ago("pod2", 2),
            ready_ago("pod3", 0),
            ready_ago("pod4", 4),
            pod("pod5"),
        ]
    }

    #[test]
    fn simple_check_finds_the_soonest_pod() {
        // TestFindMinNextPodAvailabilitySimpleCheck.
        let n = now();
        let none: [Pod; 0] = [];
        assert!(find_min_next_pod_availability_simple_check(&none, 10, n).is_none());
        assert!(
            find_min_next_pod_availability_simple_check(&[pod("a"), pod("b")], 10, n).is_none()
        );
        assert!(find_min_next_pod_availability_simple_check(&upstream_pods(), 0, n).is_none());

        let pods = upstream_pods();
        let (wait, p) = find_min_next_pod_availability_simple_check(&pods, 10, n).unwrap();
        assert_eq!(wait, Duration::from_secs(6));
        assert_eq!(p.metadata.name.as_deref(), Some("pod4"));

        let available = [ready_ago("a", 15), ready_ago("b", 11), ready_ago("c", 10)];
        assert!(find_min_next_pod_availability_simple_check(&available, 10, n).is_none());

        // Ties keep the first pod.
        let tied = [ready_ago("first", 3), ready_ago("second", 3)];
        let (_, p) = find_min_next_pod_availability_simple_check(&tied, 10, n).unwrap();
        assert_eq!(p.metadata.name.as_deref(), Some("first"));

        // The full check at the same instant agrees.
        assert_eq!(
            find_min_next_pod_availability_check(&pods, 10, n, n),
            Some(Duration::from_secs(6))
        );
        assert_eq!(
            find_min_next_pod_availability_check(&available, 10, n, n),
            None
        );
    }

    #[test]
    fn full_check_accounts_for_time_since_evaluation() {
        // TestFindMinNextPodAvailability.
        let pods = upstream_pods();
        let later = |s| now() + SignedDuration::from_secs(s);
        assert_eq!(
            find_min_next_pod_availability_check(&pods, 10, now(), later(2)),
            Some(Duration::from_secs(4))
        );
        assert_eq!(
            find_min_next_pod_availability_check(&pods, 10, now(), later(7)),
            Some(Duration::ZERO)
        );
    }
}
