//! The last check before adopting: is the owner still there and alive?
//!
//! A controller decides from its informer cache, which may lag. If the owner
//! was deleted a moment ago, adopting orphans now would attach them to an
//! owner the garbage collector is about to remove, and they would be deleted
//! with it. So before the first adoption of a claim pass the manager asks a
//! [`CanAdopt`] check, typically an uncached read of the owner
//! ([`RecheckOwner`], [`ApiRecheck`]). The manager runs it at most once per
//! pass and only if something is to be adopted.

use std::error::Error as StdError;
use std::fmt::Debug;
use std::future::Future;

use kube::Api;

use crate::OwnerMeta;

type BoxError = Box<dyn StdError + Send + Sync>;

/// Why adoption was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CanAdoptError {
    /// The fresh read of the owner failed.
    #[error("can't recheck whether {owner} is being deleted: {source}")]
    ReadFailed {
        /// `Kind namespace/name` of the owner.
        owner: String,
        /// The read error.
        #[source]
        source: BoxError,
    },
    /// The fresh read found no owner under that name.
    #[error("original {owner} is gone: not found")]
    Gone {
        /// `Kind namespace/name` of the owner.
        owner: String,
    },
    /// The name now belongs to a different object: the owner was deleted and
    /// re-created.
    #[error("original {owner} is gone: got uid {got}, wanted {wanted}")]
    UidChanged {
        /// `Kind namespace/name` of the owner.
        owner: String,
        /// The UID found by the fresh read.
        got: String,
        /// The UID the claim pass started with.
        wanted: String,
    },
    /// The fresh read shows the owner is being deleted.
    #[error("{owner} has just been deleted at {at}")]
    BeingDeleted {
        /// `Kind namespace/name` of the owner.
        owner: String,
        /// The owner's deletion timestamp (RFC 3339).
        at: String,
    },
    /// A custom [`CanAdopt`] check refused.
    #[error("{0}")]
    Refused(#[source] BoxError),
}

/// Decides whether the owner may adopt right now.
///
/// The ref manager calls it at most once per claim pass (it caches the
/// verdict) and only when it is about to adopt. Implementations are usually
/// [`AlwaysAdopt`] (tests, or owners that are never deleted), [`RecheckOwner`]
/// (a fresh read you supply) or [`ApiRecheck`] (a fresh read through
/// `kube::Api`).
pub trait CanAdopt: Send + Sync {
    /// `Ok(())` if `owner`, as the claim pass knows it, may adopt.
    ///
    /// # Errors
    /// A [`CanAdoptError`] saying why not; the manager reports it for every
    /// object it would have adopted in this pass and sends no patch.
    fn can_adopt(
        &self,
        owner: &OwnerMeta,
    ) -> impl Future<Output = Result<(), CanAdoptError>> + Send;
}

/// Adopts without checking: the equivalent of upstream's nil `CanAdopt`.
#[derive(Debug, Clone, Copy, Default)]
pub struct AlwaysAdopt;

impl CanAdopt for AlwaysAdopt {
    async fn can_adopt(&self, _owner: &OwnerMeta) -> Result<(), CanAdoptError> {
        Ok(())
    }
}

/// Re-reads the owner with a function you supply and refuses adoption if
/// it is gone, has another UID (deleted and re-created) or is being deleted.
///
/// The function returns `Ok(None)` when the owner does not exist. It should
/// bypass caches (a live GET): the point is to see a deletion the informer
/// has not delivered yet.
///
/// ```
/// use ctrlkit_refmanager::{CanAdopt, CanAdoptError, OwnerMeta, RecheckOwner};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let owner = OwnerMeta::new("apps/v1", "ReplicaSet", "web", "uid-1")?;
/// let check = RecheckOwner::new(|| async {
///     // Pretend the live GET found an object with another UID.
///     OwnerMeta::new("apps/v1", "ReplicaSet", "web", "uid-2").map(Some)
/// });
/// assert!(matches!(
///     check.can_adopt(&owner).await,
///     Err(CanAdoptError::UidChanged { .. })
/// ));
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RecheckOwner<F> {
    read: F,
}

impl<F> RecheckOwner<F> {
    /// Wraps the fresh-read function.
    pub fn new(read: F) -> Self {
        RecheckOwner { read }
    }
}

impl<F> Debug for RecheckOwner<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecheckOwner").finish_non_exhaustive()
    }
}

impl<F, Fut, E> CanAdopt for RecheckOwner<F>
where
    F: Fn() -> Fut + Send + Sync,
    Fut: Future<Output = Result<Option<OwnerMeta>, E>> + Send,
    E: Into<BoxError>,
{
    async fn can_adopt(&self, owner: &OwnerMeta) -> Result<(), CanAdoptError> {
        let fresh = (self.read)().await.map_err(|e| CanAdoptError::ReadFailed {
            owner: describe(owner),
            source: e.into(),
        })?;
        verify_fresh(owner, fresh.as_ref())
    }
}

/// A [`RecheckOwner`] through `kube::Api`: a live GET of the owner by name.
///
/// Give it an `Api` scoped to the owner's namespace (or an `all`/cluster
/// `Api` for cluster-scoped owners).
pub struct ApiRecheck<K> {
    api: Api<K>,
}

impl<K> ApiRecheck<K> {
    /// Re-reads owners through `api`.
    pub fn new(api: Api<K>) -> Self {
        ApiRecheck { api }
    }
}

impl<K> Debug for ApiRecheck<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiRecheck").finish_non_exhaustive()
    }
}

impl<K> CanAdopt for ApiRecheck<K>
where
    K: kube::Resource
        + Clone
        + Debug
        + k8s_openapi::serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
    K::DynamicType: Default,
{
    async fn can_adopt(&self, owner: &OwnerMeta) -> Result<(), CanAdoptError> {
        let read_failed = |source: BoxError| CanAdoptError::ReadFailed {
            owner: describe(owner),
            source,
        };
        let fresh = self
            .api
            .get_opt(owner.name())
            .await
            .map_err(|e| read_failed(e.into()))?;
        let fresh = match fresh {
            None => None,
            Some(obj) => Some(
                OwnerMeta::from_resource_with(&obj, &K::DynamicType::default())
                    .map_err(|e| read_failed(e.into()))?,
            ),
        };
        verify_fresh(owner, fresh.as_ref())
    }
}

/// Compares the owner a claim pass started with against a fresh read.
pub(crate) fn verify_fresh(
    owner: &OwnerMeta,
    fresh: Option<&OwnerMeta>,
) -> Result<(), CanAdoptError> {
    let Some(fresh) = fresh else {
        return Err(CanAdoptError::Gone {
            owner: describe(owner),
        });
    };
    if fresh.uid() != owner.uid() {
        return Err(CanAdoptError::UidChanged {
            owner: describe(owner),
            got: fresh.uid().to_owned(),
            wanted: owner.uid().to_owned(),
        });
    }
    if let Some(at) = fresh.deletion_timestamp() {
        return Err(CanAdoptError::BeingDeleted {
            owner: describe(owner),
            at: at.0.to_string(),
        });
    }
    Ok(())
}

/// `Kind namespace/name`, or `Kind name` when cluster-scoped.
pub(crate) fn describe(owner: &OwnerMeta) -> String {
    match owner.namespace() {
        Some(ns) => format!("{} {}/{}", owner.kind(), ns, owner.name()),
        None => format!("{} {}", owner.kind(), owner.name()),
    }
}
