//! How the ref manager writes to dependents.

use std::fmt::Debug;
use std::marker::PhantomData;

use async_trait::async_trait;
use ctrlkit_podcontrol::{PodControl, PodControlError, status_is};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use kube::core::Status;
use serde_json::Value;

/// Classifies an API error the way the claim logic needs: a dependent that
/// is gone (NotFound) is not a failure, and a release refused as Invalid
/// (422) means there was nothing of ours to remove.
pub trait ApiErrorClass {
    /// Whether the target object does not exist (HTTP 404 / `NotFound`).
    fn is_not_found(&self) -> bool;
    /// Whether the API server refused the request as invalid (HTTP 422 /
    /// `Invalid`), e.g. because a patch's UID precondition failed.
    fn is_invalid(&self) -> bool;
}

impl ApiErrorClass for Status {
    fn is_not_found(&self) -> bool {
        status_is(self, "NotFound", 404)
    }

    fn is_invalid(&self) -> bool {
        status_is(self, "Invalid", 422)
    }
}

impl ApiErrorClass for kube::Error {
    fn is_not_found(&self) -> bool {
        matches!(self, kube::Error::Api(status) if ApiErrorClass::is_not_found(status.as_ref()))
    }

    fn is_invalid(&self) -> bool {
        matches!(self, kube::Error::Api(status) if ApiErrorClass::is_invalid(status.as_ref()))
    }
}

impl ApiErrorClass for PodControlError {
    fn is_not_found(&self) -> bool {
        self.status().is_some_and(ApiErrorClass::is_not_found)
    }

    fn is_invalid(&self) -> bool {
        self.status().is_some_and(ApiErrorClass::is_invalid)
    }
}

/// An in-memory patcher never fails.
impl ApiErrorClass for std::convert::Infallible {
    fn is_not_found(&self) -> bool {
        match *self {}
    }

    fn is_invalid(&self) -> bool {
        match *self {}
    }
}

/// Applies strategic merge patches to dependents of type `D`.
///
/// This is the only write the ref manager makes. Implemented for every
/// [`PodControl`] (so `Arc<dyn PodControl>` and `FakePodControl` work for
/// pods as they are) and by [`ApiPatcher`] for any namespaced kube resource;
/// implement it yourself to route patches elsewhere (a fake, a cache).
#[async_trait]
pub trait DependentControl<D>: Send + Sync {
    /// The error a failed patch returns.
    type Error: ApiErrorClass + std::error::Error + Send + Sync + 'static;

    /// Applies `patch`, a strategic merge patch, to the dependent
    /// `namespace/name`.
    async fn patch_dependent(
        &self,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<(), Self::Error>;
}

#[async_trait]
impl<P: PodControl + ?Sized> DependentControl<Pod> for P {
    type Error = PodControlError;

    async fn patch_dependent(
        &self,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<(), PodControlError> {
        self.patch_pod(namespace, name, patch).await.map(drop)
    }
}

/// A [`DependentControl`] for any namespaced resource type `K`, sending
/// `application/strategic-merge-patch+json` PATCH requests through a
/// [`kube::Client`].
///
/// Strategic merge patch is only defined for built-in types (pods,
/// ReplicaSets, …); custom resources reject it with 415.
pub struct ApiPatcher<K> {
    client: kube::Client,
    field_manager: Option<String>,
    _kind: PhantomData<fn() -> K>,
}

impl<K> ApiPatcher<K> {
    /// Patches through `client`.
    pub fn new(client: kube::Client) -> Self {
        ApiPatcher {
            client,
            field_manager: None,
            _kind: PhantomData,
        }
    }

    /// Sends `fieldManager=<name>` with every patch.
    #[must_use]
    pub fn with_field_manager(mut self, name: impl Into<String>) -> Self {
        self.field_manager = Some(name.into());
        self
    }
}

impl<K> Clone for ApiPatcher<K> {
    fn clone(&self) -> Self {
        ApiPatcher {
            client: self.client.clone(),
            field_manager: self.field_manager.clone(),
            _kind: PhantomData,
        }
    }
}

impl<K> Debug for ApiPatcher<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiPatcher")
            .field("field_manager", &self.field_manager)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl<K> DependentControl<K> for ApiPatcher<K>
where
    K: kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + Debug
        + k8s_openapi::serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    type Error = kube::Error;

    async fn patch_dependent(
        &self,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<(), kube::Error> {
        let api: Api<K> = Api::namespaced(self.client.clone(), namespace);
        let params = PatchParams {
            field_manager: self.field_manager.clone(),
            ..PatchParams::default()
        };
        api.patch(name, &params, &Patch::Strategic(patch))
            .await
            .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, reason: &str) -> Status {
        Status::failure("x", reason).with_code(code)
    }

    #[test]
    fn reason_wins_and_code_counts_only_without_a_known_reason() {
        assert!(ApiErrorClass::is_not_found(&status(404, "NotFound")));
        assert!(ApiErrorClass::is_not_found(&status(0, "NotFound")));
        assert!(ApiErrorClass::is_not_found(&status(404, "")));
        assert!(ApiErrorClass::is_not_found(&status(404, "SomethingNew")));
        assert!(!ApiErrorClass::is_not_found(&status(404, "Gone")));
        assert!(ApiErrorClass::is_invalid(&status(422, "")));
        assert!(ApiErrorClass::is_invalid(&status(400, "Invalid")));
        assert!(!ApiErrorClass::is_invalid(&status(422, "Conflict")));

        let err = PodControlError::api_status(404, "", "gone");
        assert!(ApiErrorClass::is_not_found(&err));
        assert!(!ApiErrorClass::is_invalid(&err));
        assert!(!ApiErrorClass::is_not_found(
            &PodControlError::InvalidTemplate("t".into())
        ));
    }
}
