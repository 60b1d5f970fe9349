//! One delegating wrapper that tells an observer about every successful
//! write, and the read-own-writes observer built on it.

use std::fmt;
use std::marker::PhantomData;

use async_trait::async_trait;
use ctrlkit_consistency::{ConsistencyStore, GroupResource};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Preconditions};
use kube::Resource;
use kube::api::Patch;

use crate::{ChildControl, ChildControlError};

/// Told about every write a wrapped child control made successfully (see
/// [`Observed`]). All methods default to doing nothing. They run on the
/// caller's task right after the write returned, so they must be cheap and
/// must not block.
pub trait WriteObserver<C>: Send + Sync {
    /// A create returned `child`, as the API server stored it.
    fn created(&self, child: &C) {
        let _ = child;
    }

    /// A patch returned `child`, as the API server stored it.
    fn patched(&self, child: &C) {
        let _ = child;
    }

    /// The child `namespace/name` was deleted (or was already gone).
    fn deleted(&self, namespace: &str, name: &str) {
        let _ = (namespace, name);
    }
}

/// A child control that delegates every call to `inner` and tells
/// `observer` about each one that succeeded: the one wrapper for "also do X
/// after each write" (read-own-writes recording with [`RecordWrites`],
/// counting, auditing), instead of a hand-written pass-through per use.
///
/// Failed calls are passed through untouched and not observed. It
/// implements [`ChildControl<C>`] when `inner` does, and
/// `ctrlkit_podcontrol::PodControl` for pods when `inner` is a pod control.
///
/// ```
/// use ctrlkit_childcontrol::{ChildControl, FakeChildControl, Observed, RecordWrites};
/// use ctrlkit_consistency::{ConsistencyStore, GroupResource};
/// use ctrlkit_informer::Informer;
/// use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let configmaps = Informer::<ConfigMap>::manual().build();
/// let store = ConsistencyStore::builder()
///     .cache(GroupResource::of::<ConfigMap>(), configmaps.store())
///     .build();
///
/// // Per sync of owner "ns/web": record what its writes return.
/// let fake = FakeChildControl::<ConfigMap>::new();
/// let control = Observed::new(fake.clone(), RecordWrites::<ConfigMap>::new(store.clone(), "ns/web"));
/// let mut template = ConfigMap::default();
/// template.metadata.name = Some("web-config".into());
/// let cref = OwnerReference {
///     api_version: "example.com/v1".into(), kind: "App".into(), name: "web".into(),
///     uid: "app-uid".into(), controller: Some(true), block_owner_deletion: Some(true),
/// };
/// let created = control.create("ns", &template, &ObjectReference::default(), &cref).await.unwrap();
/// let rv = created.metadata.resource_version.unwrap();
/// assert_eq!(store.pending("ns/web"), vec![(GroupResource::of::<ConfigMap>(), rv)]);
/// # });
/// ```
#[derive(Clone)]
pub struct Observed<I, O> {
    inner: I,
    observer: O,
}

impl<I, O> fmt::Debug for Observed<I, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observed").finish_non_exhaustive()
    }
}

impl<I, O> Observed<I, O> {
    /// Wraps `inner`, telling `observer` about its successful writes.
    pub fn new(inner: I, observer: O) -> Self {
        Self { inner, observer }
    }

    /// The wrapped control.
    pub fn inner(&self) -> &I {
        &self.inner
    }

    /// The observer.
    pub fn observer(&self) -> &O {
        &self.observer
    }
}

#[async_trait]
impl<C, I, O> ChildControl<C> for Observed<I, O>
where
    C: Send + Sync + 'static,
    I: ChildControl<C>,
    O: WriteObserver<C>,
{
    async fn create(
        &self,
        namespace: &str,
        template: &C,
        owner: &ObjectReference,
        controller_ref: &OwnerReference,
    ) -> Result<C, ChildControlError> {
        let child = self
            .inner
            .create(namespace, template, owner, controller_ref)
            .await?;
        self.observer.created(&child);
        Ok(child)
    }

    async fn delete(
        &self,
        namespace: &str,
        name: &str,
        owner: &ObjectReference,
        preconditions: Option<&Preconditions>,
    ) -> Result<(), ChildControlError> {
        self.inner
            .delete(namespace, name, owner, preconditions)
            .await?;
        self.observer.deleted(namespace, name);
        Ok(())
    }

    async fn patch(
        &self,
        namespace: &str,
        name: &str,
        patch: &Patch<serde_json::Value>,
    ) -> Result<C, ChildControlError> {
        let child = self.inner.patch(namespace, name, patch).await?;
        self.observer.patched(&child);
        Ok(child)
    }
}

/// Read-own-writes recording (Kubernetes 1.36, KEP-5647): a
/// [`WriteObserver`] that records the resourceVersion of every child a
/// create or a patch returned, under one owner key, in a
/// [`ConsistencyStore`]. Deletes return no object and are not recorded
/// (as upstream).
///
/// Build one per sync of an owner and wrap the controller's child control
/// in it with [`Observed`]; the next sync of that owner then calls
/// [`ConsistencyStore::ensure_ready`] to wait until the informer shows
/// those versions. The store must have a cache registered for `C`'s
/// resource, or the writes are not tracked.
pub struct RecordWrites<C> {
    store: ConsistencyStore,
    owner_key: String,
    resource: GroupResource,
    _child: PhantomData<fn(&C)>,
}

impl<C> Clone for RecordWrites<C> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            owner_key: self.owner_key.clone(),
            resource: self.resource.clone(),
            _child: PhantomData,
        }
    }
}

impl<C> fmt::Debug for RecordWrites<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordWrites")
            .field("owner_key", &self.owner_key)
            .field("resource", &self.resource)
            .finish_non_exhaustive()
    }
}

impl<C: Resource<DynamicType = ()>> RecordWrites<C> {
    /// Records writes of `C` children in `store` under `owner_key` (the
    /// owner's `namespace/name`, the key its syncs check).
    pub fn new(store: ConsistencyStore, owner_key: impl Into<String>) -> Self {
        Self {
            store,
            owner_key: owner_key.into(),
            resource: GroupResource::of::<C>(),
            _child: PhantomData,
        }
    }

    /// The owner key the writes are recorded under.
    pub fn owner_key(&self) -> &str {
        &self.owner_key
    }

    fn record(&self, child: &C) {
        if let Some(rv) = child.meta().resource_version.as_deref() {
            self.store.wrote_at(&self.owner_key, &self.resource, rv);
        }
    }
}

impl<C: Resource<DynamicType = ()>> WriteObserver<C> for RecordWrites<C> {
    fn created(&self, child: &C) {
        self.record(child);
    }

    fn patched(&self, child: &C) {
        self.record(child);
    }
}
