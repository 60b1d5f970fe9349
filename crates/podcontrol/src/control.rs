use std::sync::Arc;

use async_trait::async_trait;
use ctrlkit_childcontrol::{Observed, WriteObserver};
use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Preconditions};

use crate::PodControlError;

/// The pod operations a controller performs on behalf of an owner.
///
/// Mirrors kube-controller-manager's `PodControlInterface`. Controllers take
/// it as a trait object (`Arc<dyn PodControl>`) so tests can substitute a
/// recording fake for the real API-backed implementation.
#[async_trait]
pub trait PodControl: Send + Sync {
    /// Creates one pod in `namespace` from `template`, controlled by
    /// `controller_ref`, and returns the pod as the API server stored it
    /// (with its generated name, UID and resourceVersion).
    ///
    /// `owner` is the object events are recorded against.
    ///
    /// # Errors
    ///
    /// [`PodControlError::InvalidTemplate`] if no valid pod can be built
    /// (no labels, a `controller_ref` that is not a controlling reference,
    /// an owner name that cannot prefix a pod name);
    /// [`PodControlError::NamespaceTerminating`] if the namespace is being
    /// deleted; [`PodControlError::Api`] for any other API failure.
    async fn create_pods(
        &self,
        namespace: &str,
        template: &PodTemplateSpec,
        owner: &ObjectReference,
        controller_ref: &OwnerReference,
    ) -> Result<Pod, PodControlError>;

    /// Deletes the pod `namespace/name`; `owner` is the object events are
    /// recorded against. With `preconditions`, the API server deletes only
    /// the pod with that UID and/or resourceVersion.
    ///
    /// A pod that is already gone is not an error.
    ///
    /// # Errors
    ///
    /// [`PodControlError::Api`]: e.g. a conflict when a precondition does
    /// not match ([`PodControlError::is_conflict`]).
    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        owner: &ObjectReference,
        preconditions: Option<&Preconditions>,
    ) -> Result<(), PodControlError>;

    /// Applies `patch`, a strategic merge patch, to the pod `namespace/name`
    /// and returns the patched pod.
    ///
    /// # Errors
    ///
    /// [`PodControlError::Api`], e.g. not found or conflict (a `uid` in the
    /// patch's metadata acts as a precondition on the pod's UID).
    async fn patch_pod(
        &self,
        namespace: &str,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<Pod, PodControlError>;
}

#[async_trait]
impl<P: PodControl + ?Sized> PodControl for Arc<P> {
    async fn create_pods(
        &self,
        namespace: &str,
        template: &PodTemplateSpec,
        owner: &ObjectReference,
        controller_ref: &OwnerReference,
    ) -> Result<Pod, PodControlError> {
        (**self)
            .create_pods(namespace, template, owner, controller_ref)
            .await
    }

    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        owner: &ObjectReference,
        preconditions: Option<&Preconditions>,
    ) -> Result<(), PodControlError> {
        (**self)
            .delete_pod(namespace, name, owner, preconditions)
            .await
    }

    async fn patch_pod(
        &self,
        namespace: &str,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<Pod, PodControlError> {
        (**self).patch_pod(namespace, name, patch).await
    }
}

/// The generic observing wrapper over a pod control: `observer` is told
/// about every pod a successful create or patch returned and every
/// successful delete, e.g. [`RecordWrites<Pod>`](ctrlkit_childcontrol::RecordWrites)
/// for read-own-writes:
///
/// ```
/// use std::sync::Arc;
/// use ctrlkit_childcontrol::{Observed, RecordWrites};
/// use ctrlkit_consistency::ConsistencyStore;
/// use ctrlkit_podcontrol::{FakePodControl, PodControl};
/// use k8s_openapi::api::core::v1::Pod;
///
/// let pods: Arc<dyn PodControl> = Arc::new(FakePodControl::new());
/// let store = ConsistencyStore::disabled();
/// // For one sync of the owner "ns/web":
/// let recording: Arc<dyn PodControl> =
///     Arc::new(Observed::new(pods.clone(), RecordWrites::<Pod>::new(store, "ns/web")));
/// # let _ = recording;
/// ```
#[async_trait]
impl<P, O> PodControl for Observed<P, O>
where
    P: PodControl,
    O: WriteObserver<Pod>,
{
    async fn create_pods(
        &self,
        namespace: &str,
        template: &PodTemplateSpec,
        owner: &ObjectReference,
        controller_ref: &OwnerReference,
    ) -> Result<Pod, PodControlError> {
        let pod = self
            .inner()
            .create_pods(namespace, template, owner, controller_ref)
            .await?;
        self.observer().created(&pod);
        Ok(pod)
    }

    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        owner: &ObjectReference,
        preconditions: Option<&Preconditions>,
    ) -> Result<(), PodControlError> {
        self.inner()
            .delete_pod(namespace, name, owner, preconditions)
            .await?;
        self.observer().deleted(namespace, name);
        Ok(())
    }

    async fn patch_pod(
        &self,
        namespace: &str,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<Pod, PodControlError> {
        let pod = self.inner().patch_pod(namespace, name, patch).await?;
        self.observer().patched(&pod);
        Ok(pod)
    }
}
