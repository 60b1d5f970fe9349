//! Computing an owner's status from its pods, and writing it.

use std::collections::BTreeMap;
use std::sync::Arc;

use ctrlkit_podcontrol::pod::{is_pod_available, is_pod_ready};
use ctrlkit_podcontrol::status_is;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::core::response::reason;

use super::Shared;
use super::invalid_spec::is_invalid_spec_reason;
use super::key_of;
use crate::Error;
use crate::owner::{REPLICA_FAILURE, ReplicaCondition, ReplicaOwner, ReplicaStatus};

/// Reason of the `ReplicaFailure` condition when creating pods failed.
pub const FAILED_CREATE_REASON: &str = "FailedCreate";
/// Reason of the `ReplicaFailure` condition when deleting pods failed.
pub const FAILED_DELETE_REASON: &str = "FailedDelete";

/// How many times a failed status write is retried (after a fresh read).
const STATUS_UPDATE_RETRIES: usize = 1;

/// The owner's desired replica count: `spec.replicas`, 1 when absent (the
/// API default), and negative values read as 0.
pub fn desired_replicas<O: ReplicaOwner>(owner: &O) -> i32 {
    owner.spec_replicas().unwrap_or(1).max(0)
}

fn has_all_labels(pod: &Pod, wanted: &BTreeMap<String, String>) -> bool {
    let labels = pod.metadata.labels.as_ref();
    wanted
        .iter()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

/// The status an owner should report, upstream's `calculateStatus`.
///
/// - `active` are the owner's claimed active pods: they give `replicas`;
///   those carrying all the template's labels give `fullyLabeledReplicas`,
///   the ready ones `readyReplicas`, and those ready for `minReadySeconds`
///   at `now` `availableReplicas`.
/// - `terminating` is the number of terminating pods the owner controls,
///   reported only when the owner type has that field.
/// - A `ReplicaFailure` condition is added when `manage_error` is set and
///   none exists (reason `FailedCreate` when pods are missing,
///   `FailedDelete` when there are too many, empty otherwise), and removed
///   when `manage_error` is `None`. An existing condition is left as it is
///   while errors continue, except one saying the spec is invalid
///   (`InvalidSelector`, `EmptySelector`, `SelectorMismatch`): the status is
///   only calculated for owners with a valid spec, so that one is dropped.
///
/// `observedGeneration` is left unchanged: the status write sets it.
pub fn calculate_status<O: ReplicaOwner>(
    owner: &O,
    active: &[Arc<Pod>],
    terminating: Option<usize>,
    manage_error: Option<&Error>,
    now: Timestamp,
) -> ReplicaStatus {
    let mut status = owner.replica_status();
    let empty = BTreeMap::new();
    let template_labels = owner
        .template()
        .and_then(|t| t.metadata.as_ref()?.labels.as_ref())
        .unwrap_or(&empty);
    let min_ready = owner.min_ready_seconds();

    let (mut fully_labeled, mut ready, mut available) = (0i32, 0i32, 0i32);
    for pod in active {
        if has_all_labels(pod, template_labels) {
            fully_labeled += 1;
        }
        if is_pod_ready(pod) {
            ready += 1;
            if is_pod_available(pod, min_ready, now) {
                available += 1;
            }
        }
    }

    // An invalid-spec condition is stale here: only valid owners get this
    // far.
    if status
        .condition(REPLICA_FAILURE)
        .is_some_and(|c| is_invalid_spec_reason(c.reason.as_deref()))
    {
        status.remove_condition(REPLICA_FAILURE);
    }
    let failure = status.condition(REPLICA_FAILURE).is_some();
    match manage_error {
        Some(error) if !failure => {
            let diff = i64::try_from(active.len()).unwrap_or(i64::MAX)
                - i64::from(desired_replicas(owner));
            let reason = match diff {
                d if d < 0 => FAILED_CREATE_REASON,
                d if d > 0 => FAILED_DELETE_REASON,
                _ => "",
            };
            status.set_condition(ReplicaCondition {
                type_: REPLICA_FAILURE.into(),
                status: "True".into(),
                reason: Some(reason.into()),
                message: Some(error.to_string()),
                last_transition_time: Some(Time(now)),
            });
        }
        None if failure => status.remove_condition(REPLICA_FAILURE),
        _ => {}
    }

    status.replicas = saturating_i32(active.len());
    status.fully_labeled_replicas = fully_labeled;
    status.ready_replicas = ready;
    status.available_replicas = available;
    status.terminating_replicas = if O::HAS_TERMINATING_REPLICAS {
        terminating.map(saturating_i32)
    } else {
        None
    };
    status
}

fn saturating_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Whether writing `new` would change nothing: every counter and the
/// conditions equal, and the current generation already observed.
pub fn status_unchanged<O: ReplicaOwner>(owner: &O, new: &ReplicaStatus) -> bool {
    let old = owner.replica_status();
    old.replicas == new.replicas
        && old.fully_labeled_replicas == new.fully_labeled_replicas
        && old.ready_replicas == new.ready_replicas
        && old.available_replicas == new.available_replicas
        && old.terminating_replicas == new.terminating_replicas
        && owner.meta().generation.unwrap_or(0) == old.observed_generation
        && old.conditions == new.conditions
}

impl<O: ReplicaOwner> Shared<O> {
    /// Writes `status` (with `observedGeneration` set to the owner's
    /// generation) unless nothing changed; returns the owner as stored.
    ///
    /// On a failed write the owner is read again and the write retried
    /// once, so a sync makes at most two writes and one read (upstream's
    /// `updateReplicaSetStatus`).
    pub(crate) async fn update_status(
        &self,
        owner: Arc<O>,
        mut status: ReplicaStatus,
    ) -> Result<Arc<O>, Error> {
        if status_unchanged(owner.as_ref(), &status) {
            return Ok(owner);
        }
        let key = key_of(owner.as_ref());
        status.observed_generation = owner.meta().generation.unwrap_or(0);
        let mut current: O = (*owner).clone();
        let mut attempt = 0;
        loop {
            current.set_replica_status(status.clone());
            tracing::debug!(
                key,
                replicas = status.replicas,
                fully_labeled = status.fully_labeled_replicas,
                ready = status.ready_replicas,
                available = status.available_replicas,
                terminating = ?status.terminating_replicas,
                observed_generation = status.observed_generation,
                "updating status"
            );
            let error = match self.writers.owner_client.update_status(&current).await {
                Ok(updated) => {
                    self.wrote_owner(&key, &updated);
                    self.per_owner.own_status.wrote(&key, &updated);
                    return Ok(Arc::new(updated));
                }
                Err(kube::Error::Api(status)) if status_is(&status, reason::NOT_FOUND, 404) => {
                    return Err(Error::OwnerGone {
                        kind: <O as k8s_openapi::Resource>::KIND,
                        key,
                    });
                }
                Err(error) => error,
            };
            if attempt >= STATUS_UPDATE_RETRIES {
                return Err(Error::UpdateStatus { key, source: error });
            }
            attempt += 1;
            tracing::debug!(key, %error, "status update failed; reading the owner again");
            let meta = owner.meta();
            let (ns, name) = (
                meta.namespace.as_deref().unwrap_or_default(),
                meta.name.as_deref().unwrap_or_default(),
            );
            current = match self.writers.owner_client.get(ns, name).await {
                // A namesake must not get the status computed for its
                // predecessor.
                Ok(Some(fresh)) if fresh.meta().uid == meta.uid => fresh,
                Ok(_) => {
                    return Err(Error::OwnerGone {
                        kind: <O as k8s_openapi::Resource>::KIND,
                        key,
                    });
                }
                Err(get_error) => {
                    return Err(Error::UpdateStatus {
                        key,
                        source: get_error,
                    });
                }
            };
        }
    }
}
