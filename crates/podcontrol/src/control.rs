use async_trait::async_trait;
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
    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        owner: &ObjectReference,
        preconditions: Option<&Preconditions>,
    ) -> Result<(), PodControlError>;

    /// Applies `patch`, a strategic merge patch, to the pod `namespace/name`
    /// and returns the patched pod.
    async fn patch_pod(
        &self,
        namespace: &str,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<Pod, PodControlError>;
}
