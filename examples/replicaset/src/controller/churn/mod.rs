//! The churn guard: what the controller does when the pods it creates fail
//! right after creation. Not in upstream; off with
//! [`ChurnGuardOptions::disabled`].
//!
//! The failure it guards against: the kubelet refuses to admit a pod (the
//! node is full, the pod names a node directly, a sysctl is forbidden, …)
//! and marks it `Failed` at once, e.g. with reason `OutOfpods`. A `Failed`
//! pod does not count as a replica, so upstream's controller creates a
//! replacement immediately, which fails the same way: thousands of `Failed`
//! pods within minutes (kubernetes issues #72593, #113907, #120160,
//! #131116). With the guard, each such pod is a strike against its owner
//! and the owner
//!
//! - creates no pods for an exponentially growing backoff
//!   ([`ChurnGuardOptions::backoff`]), is synced again when it ends, and
//!   then creates one probe pod at a time until one runs;
//! - reports `ReplicaFailure` with reason [`FAILED_POD_CHURN_REASON`] and a
//!   message naming the pods' failure reason, and emits a Warning event of
//!   that reason for each sync that saw new failures;
//! - keeps only its newest [`ChurnGuardOptions::failed_pods_kept`] `Failed`
//!   pods, deleting older ones;
//! - is back to normal (condition removed, no backoff) once a pod created
//!   after the last failed one runs.
//!
//! Detection uses only what the informer cache shows: a pod the owner
//! controls, `status.phase` `Failed`, `status.reason` in
//! [`ChurnGuardOptions::reasons`], seen failed less than
//! [`ChurnGuardOptions::window`] after its `creationTimestamp`. A pod first
//! seen long after it failed (e.g. after a controller restart) is not
//! counted.

mod options;
mod react;
mod tracker;

pub use options::{
    ChurnGuardOptions, DEFAULT_CHURN_BACKOFF_BASE, DEFAULT_CHURN_BACKOFF_MAX,
    DEFAULT_CHURN_REASONS, DEFAULT_CHURN_WINDOW, DEFAULT_FAILED_PODS_KEPT,
};
pub(crate) use react::apply_churn_condition;
pub(crate) use tracker::ChurnTracker;

/// Reason of the `ReplicaFailure` condition and of the Warning event when
/// the owner's pods fail right after creation.
pub const FAILED_POD_CHURN_REASON: &str = "FailedPodChurn";
