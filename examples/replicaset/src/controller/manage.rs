//! Creating and deleting pods to reach the desired count (upstream's
//! `manageReplicas`).

use std::sync::Arc;

use ctrlkit_batch::{SLOW_START_INITIAL_BATCH_SIZE, slow_start_batch};
use ctrlkit_podcontrol::pod::is_pod_active;
use ctrlkit_podcontrol::ranking::{
    ActivePodsWithRanks, deletion_age_ratios, rank_by_related_pods_on_same_node,
};
use ctrlkit_refmanager::OwnerMeta;
use futures::future::join_all;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::jiff::Timestamp;

use super::Shared;
use super::deletion_cost::warn_malformed_deletion_costs;
use super::key_of;
use super::status::desired_replicas;
use crate::Error;
use crate::owner::ReplicaOwner;

impl<O: ReplicaOwner> Shared<O> {
    /// Creates or deletes at most `burst_replicas` pods so that `active`
    /// (the owner's claimed active pods) moves towards the desired count.
    /// `key` is the owner's key (`namespace/name`), as its sync got it.
    ///
    /// Expectations are set before any call: creations as a count, lowered
    /// again for every create that failed or was never attempted;
    /// deletions by pod key, lowered for every delete that failed.
    pub(crate) async fn manage_replicas(
        &self,
        key: &str,
        owner: &Arc<O>,
        active: &[Arc<Pod>],
    ) -> Result<(), Error> {
        let desired = i64::from(desired_replicas(owner.as_ref()));
        let have = i64::try_from(active.len()).unwrap_or(i64::MAX);
        let burst = i64::try_from(self.burst_replicas).unwrap_or(i64::MAX);
        let diff = have - desired;
        if diff < 0 {
            let count = usize::try_from((-diff).min(burst)).unwrap_or(0);
            // Created pods keep failing at once: the churn guard holds
            // creations back (the sync is requeued when its backoff ends).
            let count = self.churn_allowance(key, active, count);
            if count == 0 {
                return Ok(());
            }
            tracing::debug!(key, need = -diff, creating = count, "too few replicas");
            self.create_pods(key, owner, count).await
        } else if diff > 0 {
            let count = usize::try_from(diff.min(burst)).unwrap_or(0);
            tracing::debug!(key, need = diff, deleting = count, "too many replicas");
            self.delete_pods(key, owner, active.to_vec(), count).await
        } else {
            Ok(())
        }
    }

    async fn create_pods(&self, key: &str, owner: &Arc<O>, count: usize) -> Result<(), Error> {
        let owner_meta = OwnerMeta::from_resource(owner.as_ref())?;
        let controller_ref = owner_meta.controller_ref();
        let object_ref = owner.object_ref(&());
        let namespace = owner.meta().namespace.clone().unwrap_or_default();
        let empty = PodTemplateSpec::default();
        let template = owner.template().unwrap_or(&empty);

        // Set before the first create so the informer's observations of
        // these pods are counted against it.
        // Tracked by identity: only the pods these creates return count.
        self.expectations.expect_tracked_creations(key, count);
        // Created pods are recorded for read-own-writes.
        let pod_control = &self.recording_pod_control(key);
        let result = slow_start_batch(count, SLOW_START_INITIAL_BATCH_SIZE, |_| {
            let (namespace, controller_ref, object_ref) =
                (&namespace, &controller_ref, &object_ref);
            async move {
                match pod_control
                    .create_pods(namespace, template, object_ref, controller_ref)
                    .await
                {
                    Ok(pod) => {
                        self.created_pod(key, &pod);
                        Ok(())
                    }
                    // The namespace is going away: nothing to retry, and
                    // the expectation stays until the owner is gone.
                    Err(e) if e.is_namespace_terminating() => Ok(()),
                    Err(e) => Err(e),
                }
            }
        })
        .await;
        match result {
            Ok(_) => Ok(()),
            Err(batch) => {
                let skipped = batch.unsuccessful();
                tracing::debug!(
                    key,
                    skipped,
                    "slow-start failure; skipping the remaining creates and lowering expectations"
                );
                // The informer will never show these pods.
                self.expectations
                    .lower(key, i64::try_from(skipped).unwrap_or(i64::MAX), 0);
                Err(Error::CreatePods(batch.error))
            }
        }
    }

    async fn delete_pods(
        &self,
        key: &str,
        owner: &Arc<O>,
        active: Vec<Arc<Pod>>,
        count: usize,
    ) -> Result<(), Error> {
        let victims = self.choose_victims(owner.as_ref(), active, count);
        let victim_keys: Vec<String> = victims.iter().map(|p| key_of(p.as_ref())).collect();
        // Set before the deletes, by key, so a pod seen terminating and then
        // gone counts once.
        self.expectations
            .expect_deletions(key, victim_keys.iter().cloned());
        let object_ref = owner.object_ref(&());
        let deletes = victims.iter().zip(&victim_keys).map(|(pod, pod_key)| {
            let object_ref = &object_ref;
            async move {
                let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
                let name = pod.metadata.name.as_deref().unwrap_or_default();
                let result = self
                    .writers
                    .pod_control
                    .delete_pod(namespace, name, object_ref, None)
                    .await;
                if let Err(error) = &result {
                    tracing::debug!(key, pod = pod_key, %error, "failed to delete pod");
                    // The informer will never show this deletion.
                    self.expectations.deletion_observed(key, pod_key);
                }
                result
            }
        });
        let first_error = join_all(deletes).await.into_iter().find_map(Result::err);
        match first_error {
            Some(error) => Err(Error::DeletePods(error)),
            None => Ok(()),
        }
    }

    /// The `count` pods to delete, most deletable first (upstream's
    /// `getPodsToDelete`): ranked by co-location with related pods and
    /// sorted only when not every pod goes. Records the age-ratio metric of
    /// a ranked scale-down.
    fn choose_victims(&self, owner: &O, active: Vec<Arc<Pod>>, count: usize) -> Vec<Arc<Pod>> {
        if count >= active.len() {
            return active;
        }
        warn_malformed_deletion_costs(&key_of(owner), &active);
        let related = self.related_pods(owner);
        let ranks = rank_by_related_pods_on_same_node(&active, &related);
        let now = Timestamp::now();
        let mut ranked = ActivePodsWithRanks::new(active, ranks, now);
        ranked.sort();
        let mut sorted = ranked.into_pods();
        if let Some(metrics) = &self.metrics {
            metrics.observe_deletion_age_ratios(&deletion_age_ratios(&sorted, count, now));
        }
        sorted.truncate(count);
        sorted
    }

    /// Pods of the owners that share this owner's controller (for a
    /// ReplicaSet: its Deployment's ReplicaSets), this owner included, for
    /// the co-location ranking. Empty for owners without a controller and
    /// for owner types that do not rank by related owners.
    ///
    /// Upstream lists each related owner's pods by label selector across
    /// the namespace; here each related owner's controlled pods come from
    /// the controller index and are kept if they match its selector, so the
    /// cost stays proportional to those owners' pods.
    pub(crate) fn related_pods(&self, owner: &O) -> Vec<Arc<Pod>> {
        if !O::RANKS_BY_RELATED_OWNERS {
            return Vec::new();
        }
        let meta = owner.meta();
        let namespace = meta.namespace.as_deref().unwrap_or_default();
        let Some(controller) = meta
            .owner_references
            .iter()
            .flatten()
            .find(|r| r.controller == Some(true))
        else {
            return Vec::new();
        };
        let related_owners = match self.owners.by_controller(namespace, &controller.uid, false) {
            Ok(owners) => owners,
            Err(error) => {
                tracing::warn!(%error, "cannot list related owners");
                return Vec::new();
            }
        };
        let mut seen = std::collections::HashSet::new();
        let mut pods = Vec::new();
        for related in related_owners {
            let Ok(selector) = related.selector() else {
                continue;
            };
            let Some(uid) = related.meta().uid.as_deref() else {
                continue;
            };
            let Ok(owned) = self.pods.by_controller(namespace, uid, false) else {
                continue;
            };
            for pod in owned {
                if is_pod_active(&pod)
                    && selector.matches_meta(&pod.metadata)
                    && seen.insert(pod.metadata.uid.clone().unwrap_or_default())
                {
                    pods.push(pod);
                }
            }
        }
        pods
    }
}
