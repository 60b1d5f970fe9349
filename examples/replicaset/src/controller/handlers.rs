//! Informer event handlers: decide which owners need a sync and record what
//! the informer has observed of the controller's own creates and deletes.
//!
//! They only read the caches, touch expectations and add keys to the queue;
//! they never block.

use std::sync::Arc;
use std::time::Duration;

use ctrlkit_informer::{DeletedFinalStateUnknown, DeletedObject, EventHandler, ObjectKey};
use ctrlkit_podcontrol::pod::{controller_of, is_pod_ready};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::Shared;
use super::creations::pod_identity;
use super::keys::{object_key, pod_key};
use crate::owner::ReplicaOwner;

impl<O: ReplicaOwner> Shared<O> {
    fn enqueue(&self, owner: &O) {
        self.queue.add(object_key(owner));
    }

    /// The owner a controller reference points at, if it is in the cache
    /// with that UID (a re-created namesake does not count).
    pub(crate) fn resolve_controller_ref(
        &self,
        namespace: &str,
        controller_ref: &OwnerReference,
    ) -> Option<Arc<O>> {
        if controller_ref.kind != O::kind(&()) {
            return None;
        }
        let owner = self.owners.get(namespace, &controller_ref.name)?;
        (owner.meta().uid.as_deref() == Some(controller_ref.uid.as_str())).then_some(owner)
    }

    /// Every owner in the pod's namespace whose selector matches the pod's
    /// labels (upstream's `GetPodReplicaSets`). Owners with an invalid or
    /// empty selector never match; a pod without labels matches nothing.
    pub(crate) fn owners_selecting(&self, pod: &Pod) -> Vec<Arc<O>> {
        let Some(labels) = pod.metadata.labels.as_ref().filter(|l| !l.is_empty()) else {
            return Vec::new();
        };
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let matching: Vec<Arc<O>> = self
            .owners
            .list_namespace(namespace)
            .into_iter()
            .filter(|owner| match owner.selector() {
                Ok(s) => !s.is_everything() && !s.is_nothing() && s.matches(labels),
                Err(_) => false,
            })
            .collect();
        if matching.len() > 1 {
            tracing::warn!(
                kind = O::kind(&()).as_ref(),
                namespace,
                ?labels,
                owners = matching.len(),
                "user error: more than one owner is selecting pods with these labels"
            );
        }
        matching
    }

    pub(crate) fn add_owner(&self, owner: &Arc<O>) {
        tracing::trace!(key = object_key(owner.as_ref()), "owner added");
        self.enqueue(owner);
    }

    pub(crate) fn update_owner(&self, old: &Arc<O>, new: &Arc<O>) {
        if old.meta().uid != new.meta().uid {
            // Deleted and re-created while unseen: the old one is gone.
            self.delete_owner(&DeletedObject::Tombstone(DeletedFinalStateUnknown {
                key: ObjectKey::from_object(old.as_ref()),
                last_known: Arc::clone(old),
            }));
        }
        if old.spec_replicas() != new.spec_replicas() {
            tracing::debug!(
                key = object_key(new.as_ref()),
                old = ?old.spec_replicas(),
                new = ?new.spec_replicas(),
                "replicas changed"
            );
        }
        // Always enqueue: a resync must retry owners whose creates stalled.
        self.enqueue(new);
    }

    pub(crate) fn delete_owner(&self, deleted: &DeletedObject<O>) {
        let key = object_key(deleted.object().as_ref());
        // A new owner with the same name must start clean.
        self.forget_owner(&key);
        self.queue.add(key);
    }

    /// Drops everything kept per owner (expectations, churn strikes, own
    /// writes awaited) once the owner is gone.
    pub(crate) fn forget_owner(&self, key: &str) {
        self.expectations.delete_expectations(key);
        self.churn.forget(key);
        self.consistency.clear(key);
    }

    pub(crate) fn add_pod(&self, pod: &Arc<Pod>) {
        if pod.metadata.deletion_timestamp.is_some() {
            // Seen for the first time already terminating (e.g. after a
            // restart): a deletion, never a creation.
            self.delete_pod(&DeletedObject::Final(Arc::clone(pod)));
            return;
        }
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        if let Some(controller_ref) = controller_of(pod) {
            let Some(owner) = self.resolve_controller_ref(namespace, controller_ref) else {
                return;
            };
            let key = object_key(owner.as_ref());
            // Counts only if this controller recorded creating this pod: an
            // adopted or foreign pod never stands in for one of ours.
            self.expectations
                .creation_observed_id(&key, &pod_identity(pod));
            self.queue.add(key);
            return;
        }
        // An orphan: every matching owner may want to adopt it. Not a
        // creation of ours.
        for owner in self.owners_selecting(pod) {
            self.enqueue(&owner);
        }
    }

    pub(crate) fn update_pod(&self, old: &Arc<Pod>, new: &Arc<Pod>) {
        if old.metadata.resource_version == new.metadata.resource_version {
            // A resync re-announcing an unchanged pod.
            return;
        }
        let labels_changed = old.metadata.labels != new.metadata.labels;
        if new.metadata.deletion_timestamp.is_some() {
            // A graceful delete counts as the delete right away.
            self.delete_pod(&DeletedObject::Final(Arc::clone(new)));
            if labels_changed {
                self.delete_pod(&DeletedObject::Final(Arc::clone(old)));
            }
            return;
        }
        let namespace = new.metadata.namespace.as_deref().unwrap_or_default();
        let new_ref = controller_of(new);
        let old_ref = controller_of(old);
        let ref_changed = new_ref != old_ref;
        if ref_changed
            && let Some(old_ref) = old_ref
            && let Some(owner) = self.resolve_controller_ref(namespace, old_ref)
        {
            // The former owner lost a pod.
            self.enqueue(&owner);
        }
        if let Some(new_ref) = new_ref {
            let Some(owner) = self.resolve_controller_ref(namespace, new_ref) else {
                return;
            };
            self.enqueue(&owner);
            let min_ready = owner.min_ready_seconds();
            if min_ready > 0 && !is_pod_ready(old) && is_pod_ready(new) {
                // Look again once the pod can count as available; the extra
                // second absorbs clock skew between timers and timestamps.
                let delay = Duration::from_secs(u64::from(min_ready.unsigned_abs()) + 1);
                self.queue.add_after(object_key(owner.as_ref()), delay);
            }
            return;
        }
        if labels_changed || ref_changed {
            for owner in self.owners_selecting(new) {
                self.enqueue(&owner);
            }
        }
    }

    pub(crate) fn delete_pod(&self, deleted: &DeletedObject<Pod>) {
        let pod = deleted.object();
        let Some(controller_ref) = controller_of(pod) else {
            // Nobody cares about an orphan going away.
            return;
        };
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let Some(owner) = self.resolve_controller_ref(namespace, controller_ref) else {
            return;
        };
        let key = object_key(owner.as_ref());
        self.expectations.deletion_observed(&key, &pod_key(pod));
        self.queue.add(key);
    }
}

/// Routes pod informer events to the controller.
pub(crate) struct PodHandler<O: ReplicaOwner>(pub(crate) Arc<Shared<O>>);

impl<O: ReplicaOwner> EventHandler<Pod> for PodHandler<O> {
    fn on_add(&self, obj: &Arc<Pod>, _is_in_initial_list: bool) {
        self.0.add_pod(obj);
    }

    fn on_update(&self, old: &Arc<Pod>, new: &Arc<Pod>) {
        self.0.update_pod(old, new);
    }

    fn on_delete(&self, obj: &DeletedObject<Pod>) {
        self.0.delete_pod(obj);
    }
}

/// Routes owner informer events to the controller.
pub(crate) struct OwnerHandler<O: ReplicaOwner>(pub(crate) Arc<Shared<O>>);

impl<O: ReplicaOwner> EventHandler<O> for OwnerHandler<O> {
    fn on_add(&self, obj: &Arc<O>, _is_in_initial_list: bool) {
        self.0.add_owner(obj);
    }

    fn on_update(&self, old: &Arc<O>, new: &Arc<O>) {
        self.0.update_owner(old, new);
    }

    fn on_delete(&self, obj: &DeletedObject<O>) {
        self.0.delete_owner(obj);
    }
}
