//! One sync of one owner key (upstream's `syncReplicaSet`).

use std::collections::BTreeMap;
use std::sync::Arc;

use ctrlkit_informer::ObjectKey;
use ctrlkit_podcontrol::PodControlError;
use ctrlkit_podcontrol::pod::{filter_active_pods, is_controlled_by, is_pod_terminating};
use ctrlkit_refmanager::{
    CanAdoptError, ClaimError, ClaimErrors, OwnerMeta, PodControllerRefManager, RecheckOwner,
    Selector,
};
use ctrlkit_worker::Action;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::Shared;
use super::availability::availability_requeue;
use super::churn::apply_churn_condition;
use super::invalid_spec::{
    EMPTY_SELECTOR_REASON, INVALID_SELECTOR_REASON, SELECTOR_MISMATCH_REASON,
};
use super::status::calculate_status;
use crate::Error;
use crate::owner::ReplicaOwner;

/// Why the live read before adopting failed.
#[derive(Debug, thiserror::Error)]
enum RecheckError {
    #[error(transparent)]
    Api(#[from] kube::Error),
    #[error(transparent)]
    Owner(#[from] ctrlkit_refmanager::OwnerError),
}

impl<O: ReplicaOwner> Shared<O> {
    /// Brings the owner behind `key` (`owner` as cached, `None` once it is
    /// gone) towards its desired state and writes its status. Reads only
    /// the informer caches (plus one live read of the owner before
    /// adopting, and the status write). The runtime has checked that the
    /// caches show this controller's last writes for `key`
    /// (read-own-writes) before reading `owner` from the cache, so the copy
    /// already holds our last status write.
    ///
    /// The controller's reconcile: the runtime calls it with each key.
    pub(crate) async fn reconcile(
        key: ObjectKey,
        owner: Option<Arc<O>>,
        shared: Arc<Self>,
    ) -> Result<Action, Error> {
        if key.namespace.is_empty() {
            return Err(Error::InvalidKey(key.to_string()));
        }
        // Built from the owned key, without formatting.
        let key = &String::from(key);
        let started = tokio::time::Instant::now();
        let result = match shared.sync_owner(key, owner).await {
            // Deleted behind the cache's back: the informer's delete event
            // will follow; retrying before it would only fail again.
            Err(Error::OwnerGone { .. }) => {
                tracing::debug!(key, "owner is gone from the API server");
                shared.expectations.delete_expectations(key);
                Ok(Action::done())
            }
            result => result,
        };
        // Creations held back by the churn guard resume when it ends.
        let result = result.map(|action| shared.with_churn_requeue(key, action));
        tracing::debug!(
            kind = O::kind(&()).as_ref(),
            key,
            elapsed = ?started.elapsed(),
            ok = result.is_ok(),
            "finished syncing"
        );
        result
    }

    async fn sync_owner(&self, key: &str, owner: Option<Arc<O>>) -> Result<Action, Error> {
        let Some(owner) = owner else {
            tracing::debug!(key, "owner has been deleted");
            self.forget_owner(key);
            return Ok(Action::done());
        };
        // Checked before reading the pods, so a pod appearing in between is
        // seen by the next sync rather than counted twice.
        let needs_sync = self.expectations.satisfied(key);
        self.report_lost_creations(key);

        let namespace = owner.meta().namespace.as_deref().unwrap_or_default();
        let selector = self.checked_selector(key, &owner).await?;
        let uid = owner.meta().uid.as_deref().unwrap_or_default();
        if let Some(replicas) = owner.spec_replicas().filter(|n| *n < 0) {
            tracing::warn!(key, replicas, "negative spec.replicas; treating it as 0");
        }

        // The owner's own pods plus the namespace's orphans its selector
        // could match, from the indexes.
        let all_pods = self.candidate_pods(namespace, uid, &selector)?;
        let terminating = O::HAS_TERMINATING_REPLICAS.then(|| {
            all_pods
                .iter()
                .filter(|p| {
                    is_pod_terminating(p)
                        && is_controlled_by(p, uid)
                        && selector.matches_meta(&p.metadata)
                })
                .count()
        });
        // Before managing: a pod that just churned must hold back creations.
        let churn = self.guard_churn(key, &owner, &all_pods).await;
        let active = filter_active_pods(all_pods);
        let active = self.claim_pods(key, &owner, selector, active).await?;

        let manage_error = if needs_sync && owner.meta().deletion_timestamp.is_none() {
            self.manage_replicas(key, &owner, &active).await.err()
        } else {
            None
        };

        let now = Timestamp::now();
        let mut status = calculate_status(
            owner.as_ref(),
            &active,
            terminating,
            manage_error.as_ref(),
            now,
        );
        apply_churn_condition(
            &mut status,
            owner.as_ref(),
            &churn,
            manage_error.is_some(),
            now,
        );
        let updated = self.update_status(owner, status).await?;
        if let Some(error) = manage_error {
            return Err(error);
        }

        // Look again when the next pod becomes available (nothing announces
        // it), and when unfulfilled expectations expire.
        let requeue = [
            availability_requeue(updated.as_ref(), &active, now, Timestamp::now()),
            self.expectations_requeue(key),
        ]
        .into_iter()
        .flatten()
        .min();
        Ok(requeue.map_or_else(Action::done, Action::requeue_after))
    }

    /// The owner's selector, refusing owners that could never converge.
    async fn checked_selector(&self, key: &str, owner: &Arc<O>) -> Result<Selector, Error> {
        let kind = <O as k8s_openapi::Resource>::KIND;
        let selector = match owner.selector() {
            Ok(s) => s,
            Err(source) => {
                let error = Error::InvalidSelector {
                    kind,
                    key: key.to_owned(),
                    source,
                };
                self.refuse(owner, INVALID_SELECTOR_REASON, &error).await;
                return Err(error);
            }
        };
        if selector.is_everything() {
            let error = Error::EmptySelector {
                kind,
                key: key.to_owned(),
            };
            self.refuse(owner, EMPTY_SELECTOR_REASON, &error).await;
            return Err(error);
        }
        let empty = BTreeMap::new();
        let template_labels = owner
            .template()
            .and_then(|t| t.metadata.as_ref()?.labels.as_ref())
            .unwrap_or(&empty);
        if !selector.matches(template_labels) {
            let error = Error::SelectorMismatch {
                kind,
                key: key.to_owned(),
            };
            self.refuse(owner, SELECTOR_MISMATCH_REASON, &error).await;
            return Err(error);
        }
        Ok(selector)
    }

    /// Reports an owner that can never converge: a Warning event and the
    /// `ReplicaFailure` condition (see [`super::invalid_spec`]).
    async fn refuse(&self, owner: &Arc<O>, reason: &str, error: &Error) {
        self.warn(owner, reason, error).await;
        self.report_invalid_spec(owner, reason, error).await;
    }

    async fn warn(&self, owner: &Arc<O>, reason: &str, error: &Error) {
        let Some(recorder) = &self.writers.recorder else {
            return;
        };
        let event = ctrlkit_events::Event {
            type_: ctrlkit_events::EventType::Warning,
            reason: reason.to_owned(),
            note: Some(error.to_string()),
            action: "Sync".to_owned(),
            secondary: None,
        };
        if let Err(e) = recorder.publish(&event, &owner.object_ref(&())) {
            tracing::debug!(error = %e, "failed to queue event");
        }
    }

    /// Adopts matching orphans and releases owned pods that stopped
    /// matching; returns the pods the owner controls afterwards.
    async fn claim_pods(
        &self,
        key: &str,
        owner: &Arc<O>,
        selector: Selector,
        pods: Vec<Arc<Pod>>,
    ) -> Result<Vec<Arc<Pod>>, Error> {
        let owner_meta = OwnerMeta::from_resource(owner.as_ref())?;
        let client = Arc::clone(&self.writers.owner_client);
        // Namespace and name are read from the cached copy when the recheck
        // runs: a claim that adopts nothing copies no strings.
        let cached = Arc::clone(owner);
        // Before the first adoption: is the owner still there, with the same
        // UID and not being deleted? The cache may lag, so read it live.
        let recheck = RecheckOwner::new(move || {
            let (client, cached) = (Arc::clone(&client), Arc::clone(&cached));
            async move {
                let meta = cached.meta();
                let namespace = meta.namespace.as_deref().unwrap_or_default();
                let name = meta.name.as_deref().unwrap_or_default();
                match client.get(namespace, name).await? {
                    Some(fresh) => Ok::<_, RecheckError>(Some(OwnerMeta::from_resource(&fresh)?)),
                    None => Ok(None),
                }
            }
        });
        let manager = PodControllerRefManager::new(
            // Adopt and release patches are own writes, like creates.
            self.recording_pod_control(key),
            owner_meta,
            selector,
            recheck,
        );
        match manager.claim_pods(pods, &[]).await.into_result() {
            Ok(claimed) => Ok(claimed),
            Err(errors) if owner_gone(&errors) => Err(Error::OwnerGone {
                kind: <O as k8s_openapi::Resource>::KIND,
                key: key.to_owned(),
            }),
            Err(errors) => Err(errors.into()),
        }
    }
}

/// Whether every claim error says the live read found the owner deleted or
/// replaced by a namesake.
fn owner_gone(errors: &ClaimErrors<PodControlError>) -> bool {
    let gone = |e: &ClaimError<PodControlError>| match e {
        ClaimError::CannotAdopt { source, .. } => matches!(
            **source,
            CanAdoptError::Gone { .. } | CanAdoptError::UidChanged { .. }
        ),
        _ => false,
    };
    !errors.errors().is_empty() && errors.errors().iter().all(gone)
}
