//! The two API calls the controller makes on its owners: a live read (for
//! the adoption recheck and the status retry) and the status write.

use std::fmt;

use async_trait::async_trait;
use ctrlkit_runtime::child::ServerMetadata;
use kube::Api;
use kube::api::PostParams;

use crate::owner::ReplicaOwner;

/// Reads owners from, and writes their status to, the API server.
///
/// [`KubeOwnerClient`] is the real implementation; tests substitute a fake
/// that records calls and fails on cue (upstream's unit tests do the same
/// with a fake clientset).
#[async_trait]
pub trait OwnerClient<O>: Send + Sync {
    /// A live (uncached) read of the owner `namespace/name`; `Ok(None)` if
    /// it does not exist.
    ///
    /// # Errors
    /// The API error.
    async fn get(&self, namespace: &str, name: &str) -> Result<Option<O>, kube::Error>;

    /// Replaces the owner's status (a PUT of the `status` subresource
    /// carrying `owner`'s resourceVersion, so a stale object gets a 409
    /// Conflict) and returns the stored object: at least `owner` with the
    /// resourceVersion (and generation) the write was stored at.
    ///
    /// # Errors
    /// The API error.
    async fn update_status(&self, owner: &O) -> Result<O, kube::Error>;
}

/// [`OwnerClient`] over a [`kube::Client`].
#[derive(Clone)]
pub struct KubeOwnerClient {
    client: kube::Client,
}

impl fmt::Debug for KubeOwnerClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeOwnerClient").finish_non_exhaustive()
    }
}

impl KubeOwnerClient {
    /// Talks to the API server through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

#[async_trait]
impl<O: ReplicaOwner> OwnerClient<O> for KubeOwnerClient {
    async fn get(&self, namespace: &str, name: &str) -> Result<Option<O>, kube::Error> {
        Api::<O>::namespaced(self.client.clone(), namespace)
            .get_opt(name)
            .await
    }

    /// The response body is read for its resourceVersion and generation
    /// only, not decoded into a whole owner: the write carried `owner`'s
    /// resourceVersion, so the server stored exactly `owner`'s spec and
    /// metadata with the status sent, and the returned owner is `owner`
    /// with the stored resourceVersion and generation.
    async fn update_status(&self, owner: &O) -> Result<O, kube::Error> {
        let meta = owner.meta();
        let namespace = meta.namespace.as_deref().unwrap_or_default();
        let name = meta.name.as_deref().unwrap_or_default();
        let body = serde_json::to_vec(owner).map_err(kube::Error::SerdeError)?;
        let mut request = kube::core::Request::new(O::url_path(&(), Some(namespace)))
            .replace_subresource("status", name, &PostParams::default(), body)
            .map_err(kube::Error::BuildRequest)?;
        request.extensions_mut().insert("replace_status");
        let stored = ServerMetadata::request(&self.client, request).await?;
        let mut updated = owner.clone();
        stored.apply_to(updated.meta_mut());
        Ok(updated)
    }
}
