//! What a sync does about churn: warn, delete surplus `Failed` pods, hold
//! back creations, and report the `ReplicaFailure` condition.

use std::sync::Arc;

use ctrlkit_worker::Action;
use futures::future::join_all;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Preconditions, Time};
use k8s_openapi::jiff::Timestamp;
use kube::runtime::events::{Event, EventType};
use tokio::time::Instant;

use super::FAILED_POD_CHURN_REASON;
use super::tracker::{Assessment, ChurnedPod};
use crate::controller::Shared;
use crate::controller::status::desired_replicas;
use crate::owner::{REPLICA_FAILURE, ReplicaCondition, ReplicaOwner, ReplicaStatus};

/// The `ReplicaFailure` message for an owner whose pods churn: names the
/// failure reason and the kubelet's message, not the pod, so that it stays
/// the same (and the status is not rewritten) while the same failure goes
/// on.
fn condition_message(latest: &ChurnedPod) -> String {
    let mut message = format!(
        "pods fail right after creation with reason {}",
        latest.reason
    );
    if !latest.message.is_empty() {
        message.push_str(": ");
        message.push_str(&latest.message);
    }
    message.push_str("; new pods are created with exponential backoff");
    message
}

/// Sets the `FailedPodChurn` `ReplicaFailure` condition on `status` (the
/// status [`calculate_status`](crate::calculate_status) computed for
/// `owner`) while the owner has strikes and misses replicas. A create or
/// delete error of the same sync takes precedence
/// (`FailedCreate`/`FailedDelete`). Otherwise nothing is added, so the
/// condition `calculate_status` dropped stays dropped: an owner with all
/// its replicas (scaled down, or its pods run again) reports no failure.
///
/// The previous condition's transition time is kept while it was already
/// a churn condition, and the condition is kept as it was while the message
/// is unchanged, so repeated syncs do not rewrite the status.
pub(crate) fn apply_churn_condition<O: ReplicaOwner>(
    status: &mut ReplicaStatus,
    owner: &O,
    assessment: &Assessment,
    manage_failed: bool,
    now: Timestamp,
) {
    if manage_failed || status.replicas >= desired_replicas(owner) {
        return;
    }
    let Some(latest) = &assessment.latest else {
        return;
    };
    let previous = owner.replica_status();
    let message = condition_message(latest);
    let earlier = previous
        .condition(REPLICA_FAILURE)
        .filter(|c| c.reason.as_deref() == Some(FAILED_POD_CHURN_REASON) && c.status == "True");
    let condition = match earlier {
        Some(c) if c.message.as_deref() == Some(message.as_str()) => c.clone(),
        Some(c) => ReplicaCondition {
            message: Some(message),
            ..c.clone()
        },
        None => ReplicaCondition {
            type_: REPLICA_FAILURE.into(),
            status: "True".into(),
            reason: Some(FAILED_POD_CHURN_REASON.into()),
            message: Some(message),
            last_transition_time: Some(Time(now)),
        },
    };
    status.remove_condition(REPLICA_FAILURE);
    status.conditions.push(condition);
}

impl<O: ReplicaOwner> Shared<O> {
    /// Runs the churn guard for the owner `key` over `pods` (the sync's
    /// cached pods): counts newly churned pods, warns about them (log,
    /// Warning event `FailedPodChurn`, metric) and deletes the `Failed`
    /// pods beyond the kept number. Returns what it found; a disabled guard
    /// finds nothing and does nothing.
    pub(crate) async fn guard_churn(
        &self,
        key: &str,
        owner: &Arc<O>,
        pods: &[Arc<Pod>],
    ) -> Assessment {
        let uid = owner.meta().uid.as_deref().unwrap_or_default();
        let assessment =
            self.per_owner
                .churn
                .assess(key, uid, pods, Instant::now(), Timestamp::now());
        if let Some(latest) = assessment.churned.last() {
            let backoff = assessment.backoff.unwrap_or_default();
            tracing::warn!(
                key,
                pod = latest.name,
                reason = latest.reason,
                age = ?latest.age,
                new = assessment.churned.len(),
                strikes = assessment.strikes,
                ?backoff,
                "pods fail right after creation; backing off pod creation"
            );
            if let Some(metrics) = &self.metrics {
                metrics.inc_churn_backoffs();
            }
            let note = format!(
                "pod {} failed {}s after creation with reason {}{}{}; \
                 creating no pods for {}s ({} such failures)",
                latest.name,
                latest.age.as_secs(),
                latest.reason,
                if latest.message.is_empty() { "" } else { ": " },
                latest.message,
                backoff.as_secs(),
                assessment.strikes,
            );
            self.publish_churn_event(owner, note).await;
        } else if assessment.cleared {
            tracing::info!(key, "created pods survive again; churn backoff cleared");
        }
        self.delete_failed_pods(key, owner, &assessment.excess_failed)
            .await;
        assessment
    }

    /// Whether creations for `key` must wait, and how long.
    pub(crate) fn churn_backoff(&self, key: &str) -> Option<std::time::Duration> {
        self.per_owner.churn.creation_backoff(key, Instant::now())
    }

    /// How many of the `wanted` pods `key` may create now: all while its
    /// pods do not churn; none during the backoff; after it, one probe, and
    /// none while that probe is neither `Running` nor `Failed` (see
    /// [`ChurnTracker::probe_limit`](super::ChurnTracker)).
    pub(crate) fn churn_allowance(&self, key: &str, active: &[Arc<Pod>], wanted: usize) -> usize {
        if let Some(backoff) = self.churn_backoff(key) {
            tracing::debug!(key, wanted, ?backoff, "pod creation backed off");
            return 0;
        }
        match self.per_owner.churn.probe_limit(key, active) {
            Some(limit) if limit < wanted => {
                tracing::debug!(key, wanted, limit, "creating a probe pod only");
                limit
            }
            _ => wanted,
        }
    }

    /// `action` adjusted so that the owner is synced again when its churn
    /// backoff ends (the earlier of the two delays wins); a rate-limited
    /// requeue is left as it is.
    pub(crate) fn with_churn_requeue(&self, key: &str, action: Action) -> Action {
        let Some(backoff) = self.churn_backoff(key) else {
            return action;
        };
        match action.requeue_delay() {
            Some(delay) => Action::requeue_after(delay.min(backoff)),
            None if action == Action::done() => Action::requeue_after(backoff),
            None => action,
        }
    }

    async fn publish_churn_event(&self, owner: &Arc<O>, note: String) {
        let Some(recorder) = &self.writers.recorder else {
            return;
        };
        let event = Event {
            type_: EventType::Warning,
            reason: FAILED_POD_CHURN_REASON.to_owned(),
            note: Some(note),
            action: "Create".to_owned(),
            secondary: None,
        };
        if let Err(error) = recorder.publish(&event, &owner.object_ref(&())) {
            tracing::debug!(%error, "failed to queue event");
        }
    }

    /// Deletes `pods` (at most `burst_replicas` per sync), each only if it
    /// still has the UID seen in the cache. Failures are logged; the next
    /// sync tries again.
    async fn delete_failed_pods(&self, key: &str, owner: &Arc<O>, pods: &[Arc<Pod>]) {
        if pods.is_empty() {
            return;
        }
        let object_ref = owner.object_ref(&());
        let deletes = pods.iter().take(self.burst_replicas).map(|pod| {
            let object_ref = &object_ref;
            async move {
                let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
                let name = pod.metadata.name.as_deref().unwrap_or_default();
                let preconditions = Preconditions {
                    uid: pod.metadata.uid.clone(),
                    resource_version: None,
                };
                let result = self
                    .writers
                    .pod_control
                    .delete_pod(namespace, name, object_ref, Some(&preconditions))
                    .await;
                if let Err(error) = &result {
                    tracing::debug!(key, pod = name, %error, "failed to delete a failed pod");
                }
                result.is_ok()
            }
        });
        let deleted = join_all(deletes).await.into_iter().filter(|ok| *ok).count();
        tracing::debug!(key, deleted, "deleted failed pods beyond the kept number");
        if let Some(metrics) = &self.metrics {
            metrics.inc_churn_failed_pods_deleted(deleted);
        }
    }
}
