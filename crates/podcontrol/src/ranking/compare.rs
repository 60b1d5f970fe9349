//! The orderings themselves: which of two pods a controller gives up first.
//!
//! Each ordering is a chain of tie-breaks. A step either decides (the first
//! pod is or is not "less", i.e. deleted first) or passes to the next step.
//! These are upstream's `Less` functions, so they are not always total
//! orders (the logarithmic buckets can make them cyclic); sort with
//! [`sort_by_less`](super::sort_by_less), which tolerates that, rather than
//! with `slice::sort_by`, which may panic on such comparators.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::cost::pod_deletion_cost;
use crate::pod::{
    PHASE_PENDING, PHASE_RUNNING, PHASE_UNKNOWN, is_pod_ready, max_container_restarts, pod_phase,
    pod_ready_time,
};

/// Switches for the parts of the deletion order that upstream puts behind
/// feature gates. The default matches current Kubernetes (both on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RankingOptions {
    /// Honour the `controller.kubernetes.io/pod-deletion-cost` annotation
    /// (upstream gate `PodDeletionCost`, on by default since 1.22).
    pub use_deletion_cost: bool,
    /// Compare ready and creation times in power-of-two buckets of age, with
    /// the pod UID breaking ties inside a bucket (upstream gate
    /// `LogarithmicScaleDown`, locked on since 1.31). When off, the more
    /// recent time simply goes first.
    pub logarithmic_scale_down: bool,
}

impl Default for RankingOptions {
    fn default() -> Self {
        Self {
            use_deletion_cost: true,
            logarithmic_scale_down: true,
        }
    }
}

impl RankingOptions {
    /// Returns these options with [`use_deletion_cost`](Self::use_deletion_cost) set.
    pub fn with_deletion_cost(mut self, on: bool) -> Self {
        self.use_deletion_cost = on;
        self
    }

    /// Returns these options with
    /// [`logarithmic_scale_down`](Self::logarithmic_scale_down) set.
    pub fn with_logarithmic_scale_down(mut self, on: bool) -> Self {
        self.logarithmic_scale_down = on;
        self
    }
}

/// Pending (0) < Unknown (1) < Running (2); any other phase counts as 0.
fn phase_ordinal(pod: &Pod) -> u8 {
    match pod_phase(pod) {
        PHASE_UNKNOWN => 1,
        PHASE_RUNNING => 2,
        PHASE_PENDING => 0,
        _ => 0,
    }
}

fn node_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("")
}

fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or("")
}

fn created(pod: &Pod) -> Option<Timestamp> {
    pod.metadata.creation_timestamp.as_ref().map(|t| t.0)
}

/// "Is `t1` after `t2`", where a missing time counts as later than any
/// present one.
fn after_or_missing(t1: Option<Timestamp>, t2: Option<Timestamp>) -> bool {
    match (t1, t2) {
        (Some(a), Some(b)) => a > b,
        _ => t1.is_none(),
    }
}

/// Step 1 of every order: an unscheduled pod against a scheduled one.
/// Returns whether `a` is the unscheduled one, or `None` if the step does not
/// decide.
fn unscheduled_first(a: &Pod, b: &Pod) -> Option<bool> {
    let (na, nb) = (node_name(a), node_name(b));
    (na != nb && (na.is_empty() || nb.is_empty())).then_some(na.is_empty())
}

fn lower_phase_first(a: &Pod, b: &Pod) -> Option<bool> {
    let (pa, pb) = (phase_ordinal(a), phase_ordinal(b));
    (pa != pb).then_some(pa < pb)
}

fn not_ready_first(a: &Pod, b: &Pod) -> Option<bool> {
    let (ra, rb) = (is_pod_ready(a), is_pod_ready(b));
    (ra != rb).then_some(!ra)
}

/// More restarts first; regular containers, then sidecars.
fn more_restarts_first(a: &Pod, b: &Pod) -> Option<bool> {
    let (ra, rb) = (max_container_restarts(a), max_container_restarts(b));
    if ra.regular != rb.regular {
        Some(ra.regular > rb.regular)
    } else if ra.sidecar != rb.sidecar {
        Some(ra.sidecar > rb.sidecar)
    } else {
        None
    }
}

/// `floor(log2(age in nanoseconds))` of `t` at `now`, or -1 when `t` is not
/// in the past. Pods whose ages fall in the same power-of-two bucket count as
/// equally old.
pub fn logarithmic_rank(t: Timestamp, now: Timestamp) -> i64 {
    let age_ns = now.as_nanosecond() - t.as_nanosecond();
    if age_ns > 0 {
        // Through f64 like upstream, so bucket edges fall where theirs do.
        #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
        let rank = (age_ns as f64).log2() as i64;
        rank
    } else {
        -1
    }
}

/// Step 6/8 of the ranked order: the more recent of two different times goes
/// first, bucketed logarithmically when enabled and possible.
fn more_recent_first(
    ta: Option<Timestamp>,
    tb: Option<Timestamp>,
    a: &Pod,
    b: &Pod,
    now: Option<Timestamp>,
    options: RankingOptions,
) -> Option<bool> {
    if ta == tb {
        return None;
    }
    match (options.logarithmic_scale_down, now, ta, tb) {
        (true, Some(now), Some(ta), Some(tb)) => {
            let diff = logarithmic_rank(ta, now) - logarithmic_rank(tb, now);
            Some(if diff == 0 { uid(a) < uid(b) } else { diff < 0 })
        }
        _ => Some(after_or_missing(ta, tb)),
    }
}

/// Whether `a` should be deleted before `b` when scaling down (upstream's
/// `ActivePodsWithRanks.Less`). `rank_a`/`rank_b` are the pods' co-location
/// ranks (see [`rank_by_related_pods_on_same_node`](super::rank_by_related_pods_on_same_node));
/// `now` anchors the logarithmic age buckets (without it, plain time order is
/// used).
///
/// The first step that tells the pods apart decides:
///
/// 1. an unscheduled pod before a scheduled one;
/// 2. by phase: Pending, then Unknown, then Running;
/// 3. a not-ready pod before a ready one;
/// 4. the lower `pod-deletion-cost` first (unreadable costs count as 0);
/// 5. the higher co-location rank first;
/// 6. if both are ready and became ready at different times: the more
///    recently ready first (a missing time counts as most recent); with
///    logarithmic buckets, times in the same bucket are decided by the
///    smaller UID;
/// 7. more container restarts first (regular containers, then sidecars);
/// 8. different creation times: the newer first, bucketed as in step 6.
///
/// If no step decides, neither pod is less than the other.
pub fn deletes_before(
    a: &Pod,
    rank_a: usize,
    b: &Pod,
    rank_b: usize,
    now: Option<Timestamp>,
    options: RankingOptions,
) -> bool {
    unscheduled_first(a, b)
        .or_else(|| lower_phase_first(a, b))
        .or_else(|| not_ready_first(a, b))
        .or_else(|| {
            if !options.use_deletion_cost {
                return None;
            }
            let (ca, cb) = (pod_deletion_cost(a), pod_deletion_cost(b));
            (ca != cb).then_some(ca < cb)
        })
        .or_else(|| (rank_a != rank_b).then_some(rank_a > rank_b))
        .or_else(|| {
            if !(is_pod_ready(a) && is_pod_ready(b)) {
                return None;
            }
            more_recent_first(pod_ready_time(a), pod_ready_time(b), a, b, now, options)
        })
        .or_else(|| more_restarts_first(a, b))
        .or_else(|| more_recent_first(created(a), created(b), a, b, now, options))
        .unwrap_or(false)
}

/// Whether `a` comes before `b` in the unranked "least valuable first" order
/// (upstream's `ActivePods.Less`), used by controllers that do not weigh
/// deletion cost or co-location.
///
/// Steps: unscheduled first; Pending, Unknown, Running; not ready first; if
/// both are ready, the more recently ready first (missing time first); more
/// restarts first; the newer creation time first (missing first).
pub fn active_pods_less(a: &Pod, b: &Pod) -> bool {
    unscheduled_first(a, b)
        .or_else(|| lower_phase_first(a, b))
        .or_else(|| not_ready_first(a, b))
        .or_else(|| {
            if !(is_pod_ready(a) && is_pod_ready(b)) {
                return None;
            }
            let (ta, tb) = (pod_ready_time(a), pod_ready_time(b));
            (ta != tb).then(|| after_or_missing(ta, tb))
        })
        .or_else(|| more_restarts_first(a, b))
        .or_else(|| {
            let (ta, tb) = (created(a), created(b));
            (ta != tb).then(|| after_or_missing(ta, tb))
        })
        .unwrap_or(false)
}

/// Whether `a` is a better pod to show logs from than `b` (upstream's
/// `ByLogging.Less`, roughly the reverse of [`active_pods_less`]).
///
/// Steps: scheduled first; Running, then Unknown, then Pending; ready first;
/// if both are ready, the one ready for longer first (missing time last);
/// more restarts first (they are the interesting logs); the older creation
/// time first (missing last).
pub fn logs_before(a: &Pod, b: &Pod) -> bool {
    unscheduled_first(a, b)
        .map(|a_unscheduled| !a_unscheduled)
        .or_else(|| {
            let (pa, pb) = (phase_ordinal(a), phase_ordinal(b));
            (pa != pb).then_some(pa > pb)
        })
        .or_else(|| not_ready_first(a, b).map(|a_not_ready| !a_not_ready))
        .or_else(|| {
            if !(is_pod_ready(a) && is_pod_ready(b)) {
                return None;
            }
            let (ta, tb) = (pod_ready_time(a), pod_ready_time(b));
            (ta != tb).then(|| after_or_missing(tb, ta))
        })
        .or_else(|| more_restarts_first(a, b))
        .or_else(|| {
            let (ta, tb) = (created(a), created(b));
            (ta != tb).then(|| after_or_missing(tb, ta))
        })
        .unwrap_or(false)
}
