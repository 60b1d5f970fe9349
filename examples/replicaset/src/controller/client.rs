//! The two API calls the controller makes on its owners: a live read (for
//! the adoption recheck and the status retry) and the status write.

use std::fmt;

use async_trait::async_trait;
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
    /// Conflict) and returns the stored object.
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

    async fn update_status(&self, owner: &O) -> Result<O, kube::Error> {
        let meta = owner.meta();
        let namespace = meta.namespace.as_deref().unwrap_or_default();
        let name = meta.name.as_deref().unwrap_or_default();
        Api::<O>::namespaced(self.client.clone(), namespace)
            .replace_status(name, &PostParams::default(), owner)
            .await
    }
}
