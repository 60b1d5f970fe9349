//! The trait controllers call to create, delete and patch their children.

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Preconditions};
use kube::api::Patch;

use crate::ChildControlError;

/// Which kind of write a call is: the three [`ChildControl`] methods.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// [`ChildControl::create`] (or `PodControl::create_pods`).
    Create,
    /// [`ChildControl::delete`] (or `PodControl::delete_pod`).
    Delete,
    /// [`ChildControl::patch`] (or `PodControl::patch_pod`).
    Patch,
}

impl Operation {
    /// `create`, `delete` or `patch`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Delete => "delete",
            Self::Patch => "patch",
        }
    }
}

/// The writes a controller makes on children of kind `C` on behalf of an
/// owner: what `PodControl` is for pods, for any kind (ConfigMaps,
/// Deployments, custom resources).
///
/// Controllers hold it as a trait object (`Arc<dyn ChildControl<C>>`) so
/// tests can substitute the recording [`FakeChildControl`](crate::FakeChildControl)
/// for the API-backed [`KubeChildControl`](crate::KubeChildControl).
///
/// # Cancel safety
///
/// The methods are not cancel-safe in the sense that matters for writes:
/// dropping a future after the request was sent does not undo the write,
/// and the caller cannot tell whether it happened. Level-triggered
/// controllers recover on their next sync (the informer shows what exists).
#[async_trait]
pub trait ChildControl<C>: Send + Sync {
    /// Creates one child in `namespace` from `template`, controlled by
    /// `controller_ref`, and returns the child as the API server stored it
    /// (with its name, UID and resourceVersion).
    ///
    /// The child is a copy of `template` with the namespace set to
    /// `namespace`, `controller_ref` as its controller owner reference (any
    /// other controller reference in the template is dropped, other owner
    /// references are kept) and the fields the API server sets itself
    /// cleared (UID, resourceVersion, creation and deletion timestamps,
    /// generation, managed fields). Its `name` or `generateName` is kept:
    /// the template must have one. `owner` is the object events are
    /// recorded against.
    ///
    /// # Errors
    ///
    /// [`ChildControlError::InvalidTemplate`] if no valid child can be built
    /// (neither name nor generateName, a `controller_ref` that is not a
    /// controlling reference); [`ChildControlError::WriteRefused`] if the
    /// write gate refused; [`ChildControlError::NamespaceTerminating`] if
    /// the namespace is being deleted; [`ChildControlError::Api`] for any
    /// other API failure.
    async fn create(
        &self,
        namespace: &str,
        template: &C,
        owner: &ObjectReference,
        controller_ref: &OwnerReference,
    ) -> Result<C, ChildControlError>;

    /// Deletes the child `namespace/name`; `owner` is the object events are
    /// recorded against. With `preconditions`, the API server deletes only
    /// the child with that UID and/or resourceVersion.
    ///
    /// A child that is already gone is not an error.
    ///
    /// # Errors
    ///
    /// [`ChildControlError::WriteRefused`] if the write gate refused;
    /// [`ChildControlError::Api`], e.g. a conflict when a precondition does
    /// not match ([`ChildControlError::is_conflict`]).
    async fn delete(
        &self,
        namespace: &str,
        name: &str,
        owner: &ObjectReference,
        preconditions: Option<&Preconditions>,
    ) -> Result<(), ChildControlError>;

    /// Applies `patch` to the child `namespace/name` and returns the patched
    /// child. Records no event.
    ///
    /// # Errors
    ///
    /// [`ChildControlError::WriteRefused`] if the write gate refused;
    /// [`ChildControlError::Api`], e.g. not found or conflict (a `uid` in
    /// the patch's metadata acts as a precondition on the child's UID).
    async fn patch(
        &self,
        namespace: &str,
        name: &str,
        patch: &Patch<serde_json::Value>,
    ) -> Result<C, ChildControlError>;
}

#[async_trait]
impl<C, T> ChildControl<C> for Arc<T>
where
    C: Send + Sync + 'static,
    T: ChildControl<C> + ?Sized,
{
    async fn create(
        &self,
        namespace: &str,
        template: &C,
        owner: &ObjectReference,
        controller_ref: &OwnerReference,
    ) -> Result<C, ChildControlError> {
        (**self)
            .create(namespace, template, owner, controller_ref)
            .await
    }

    async fn delete(
        &self,
        namespace: &str,
        name: &str,
        owner: &ObjectReference,
        preconditions: Option<&Preconditions>,
    ) -> Result<(), ChildControlError> {
        (**self).delete(namespace, name, owner, preconditions).await
    }

    async fn patch(
        &self,
        namespace: &str,
        name: &str,
        patch: &Patch<serde_json::Value>,
    ) -> Result<C, ChildControlError> {
        (**self).patch(namespace, name, patch).await
    }
}
