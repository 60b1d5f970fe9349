//! The cache: objects by namespace and name, secondary indexes, the observed
//! resourceVersion and the sync flag.

use std::fmt;
use std::sync::{Arc, OnceLock};

use hashbrown::HashMap;
use kube::Resource;
use parking_lot::RwLock;
use tokio::sync::watch;

use crate::consistent::{ConsistentRead, ReadFn};
use crate::error::InformerError;
use crate::handler::{DeletedFinalStateUnknown, DeletedObject, Notification};
use crate::index::{
    BY_CONTROLLER_UID, Bucket, Index, IndexFn, controller_index_key, orphan_index_key,
};
use crate::key::ObjectKey;
use crate::orphan_label::{BY_ORPHAN_LABEL, is_orphan_with_labels, orphan_label_index_key};
use crate::resource_version::{CompareError, ObservedVersion};
use crate::shard_selector::ShardFilter;

/// Where the informer is in its life, as seen by cache-sync waiters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SyncState {
    Pending,
    Synced,
    StoppedBeforeSync,
}

/// A read handle on an informer's cache.
///
/// Cloning is cheap and every clone sees the same, live cache. Reads take a
/// shared lock for the duration of the call only and return `Arc`s to the
/// cached objects, which are immutable snapshots: a later change replaces the
/// `Arc` in the cache and never mutates an object handed out.
///
/// Cluster-scoped objects live under the empty namespace `""`.
pub struct Store<K> {
    shared: Arc<Shared<K>>,
}

struct Shared<K> {
    state: RwLock<State<K>>,
    sync: watch::Sender<SyncState>,
    /// Lists the informer's resource consistently, when an API server is
    /// behind the store (set once, when the informer is built).
    reader: OnceLock<ReadFn>,
    /// The informer's shard selector (KEP-5866) and whether its cache was
    /// listed with the one wanted now.
    shard: ShardFilter,
}

pub(crate) struct State<K> {
    /// namespace → name → object. Two levels so `list_namespace` costs in
    /// proportion to the namespace and lookups need no allocation.
    objects: HashMap<String, HashMap<String, Arc<K>>>,
    len: usize,
    indexes: HashMap<String, Index<K>>,
    observed: ObservedVersion,
}

impl<K> Clone for Store<K> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<K> fmt::Debug for Store<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.shared.state.read();
        f.debug_struct("Store")
            .field("len", &state.len)
            .field("indexes", &state.indexes.keys().collect::<Vec<_>>())
            .field("resource_version", &state.observed.latest())
            .field("sync", &*self.shared.sync.borrow())
            .finish()
    }
}

impl<K: Resource> Store<K> {
    pub(crate) fn new(indexes: Vec<(String, IndexFn<K>)>) -> Self {
        let (sync, _) = watch::channel(SyncState::Pending);
        let indexes = indexes
            .into_iter()
            .map(|(name, func)| (name.clone(), Index::new(name, func)))
            .collect();
        Self {
            shared: Arc::new(Shared {
                state: RwLock::new(State {
                    objects: HashMap::new(),
                    len: 0,
                    indexes,
                    observed: ObservedVersion::default(),
                }),
                sync,
                reader: OnceLock::new(),
                shard: ShardFilter::default(),
            }),
        }
    }

    /// The object `name` in `namespace` (`""` for cluster-scoped objects).
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        self.shared.state.read().get(namespace, name).cloned()
    }

    /// The object under `key`.
    pub fn get_by_key(&self, key: &ObjectKey) -> Option<Arc<K>> {
        self.get(&key.namespace, &key.name)
    }

    /// Every cached object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        let state = self.shared.state.read();
        let mut out = Vec::with_capacity(state.len);
        out.extend(state.objects.values().flat_map(|m| m.values().cloned()));
        out
    }

    /// The cached objects in `namespace`, in no particular order. Costs in
    /// proportion to that namespace's objects.
    pub fn list_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        let state = self.shared.state.read();
        state
            .objects
            .get(namespace)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// The number of cached objects.
    pub fn len(&self) -> usize {
        self.shared.state.read().len
    }

    /// Whether the cache holds no objects.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The objects listed under `index_key` in the index `index_name`, in no
    /// particular order. Costs in proportion to the result, not the store.
    ///
    /// An unknown index is an error (not an empty result), so a misspelt
    /// name cannot pass for "no objects".
    pub fn by_index(
        &self,
        index_name: &str,
        index_key: &str,
    ) -> Result<Vec<Arc<K>>, InformerError> {
        let state = self.shared.state.read();
        let mut out = Vec::new();
        state.collect_index(index_name, index_key, &mut out)?;
        Ok(out)
    }

    /// The objects controlled by the owner with UID `owner_uid` in
    /// `namespace`, then (if `include_orphans`) the namespace's objects with
    /// no controller, which the owner may adopt.
    ///
    /// Reads the [`BY_CONTROLLER_UID`] index, which must have been registered
    /// with [`index_by_controller_uid`](crate::index_by_controller_uid);
    /// costs in proportion to the result. Objects controlled by other owners
    /// are never returned.
    pub fn by_controller(
        &self,
        namespace: &str,
        owner_uid: &str,
        include_orphans: bool,
    ) -> Result<Vec<Arc<K>>, InformerError> {
        let state = self.shared.state.read();
        let mut out = Vec::new();
        state.collect_index(
            BY_CONTROLLER_UID,
            &controller_index_key(namespace, owner_uid),
            &mut out,
        )?;
        if include_orphans {
            state.collect_index(BY_CONTROLLER_UID, &orphan_index_key(namespace), &mut out)?;
        }
        Ok(out)
    }

    /// The objects controlled by the owner with UID `owner_uid` in
    /// `namespace`, then the namespace's orphans that carry every label in
    /// `orphan_labels` (`(key, value)` pairs): the adoption candidates of
    /// an owner whose selector requires those labels by equality.
    ///
    /// The result is exact: it holds every such orphan and no other object,
    /// whichever index served it. With no labels it is every orphan of the
    /// namespace, the same objects as
    /// [`by_controller(namespace, owner_uid, true)`](Self::by_controller);
    /// a caller whose selector has only set-based requirements (`In` with
    /// several values, `NotIn`, `Exists`, `DoesNotExist`) passes none and
    /// filters the orphans itself.
    ///
    /// Cost: in proportion to the owned objects plus, when the
    /// [`BY_ORPHAN_LABEL`] index is registered (with
    /// [`index_orphans_by_label`](crate::index_orphans_by_label)) and labels
    /// are given, the orphans carrying the least common of those labels, so
    /// orphans with other labels are never visited. Without that index, or
    /// with no labels, every orphan of the namespace is visited.
    ///
    /// # Errors
    /// [`InformerError::UnknownIndex`] if the [`BY_CONTROLLER_UID`] index
    /// is not registered.
    ///
    /// # Example
    /// ```
    /// use ctrlkit_informer::{
    ///     BY_CONTROLLER_UID, BY_ORPHAN_LABEL, Informer, index_by_controller_uid,
    ///     index_orphans_by_label,
    /// };
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kube::runtime::watcher::Event;
    ///
    /// fn orphan(name: &str, app: &str) -> Pod {
    ///     let mut p = Pod::default();
    ///     p.metadata.namespace = Some("default".into());
    ///     p.metadata.name = Some(name.into());
    ///     p.metadata.labels = Some([("app".to_string(), app.to_string())].into());
    ///     p
    /// }
    ///
    /// let informer = Informer::<Pod>::manual()
    ///     .index(BY_CONTROLLER_UID, index_by_controller_uid)
    ///     .index(BY_ORPHAN_LABEL, index_orphans_by_label)
    ///     .build();
    /// informer.apply_event(Event::Apply(orphan("web-x", "web")));
    /// informer.apply_event(Event::Apply(orphan("db-y", "db")));
    ///
    /// let store = informer.store();
    /// // A ReplicaSet selecting app=web sees only the orphan it could adopt.
    /// let pods = store
    ///     .by_controller_with_labelled_orphans("default", "rs-uid", &[("app", "web")])
    ///     .unwrap();
    /// assert_eq!(pods.len(), 1);
    /// assert_eq!(pods[0].metadata.name.as_deref(), Some("web-x"));
    /// // No labels: every orphan, as `by_controller(.., true)`.
    /// assert_eq!(store.by_controller_with_labelled_orphans("default", "rs-uid", &[]).unwrap().len(), 2);
    /// ```
    pub fn by_controller_with_labelled_orphans(
        &self,
        namespace: &str,
        owner_uid: &str,
        orphan_labels: &[(&str, &str)],
    ) -> Result<Vec<Arc<K>>, InformerError> {
        let state = self.shared.state.read();
        let mut out = Vec::new();
        state.collect_index(
            BY_CONTROLLER_UID,
            &controller_index_key(namespace, owner_uid),
            &mut out,
        )?;
        state.collect_labelled_orphans(namespace, orphan_labels, &mut out)?;
        Ok(out)
    }

    /// The keys that currently have objects in the index `index_name`.
    pub fn index_keys(&self, index_name: &str) -> Result<Vec<String>, InformerError> {
        let state = self.shared.state.read();
        let index = state.index(index_name)?;
        Ok(index.keys().cloned().collect())
    }

    /// Whether an index named `index_name` is registered.
    pub fn has_index(&self, index_name: &str) -> bool {
        self.shared.state.read().indexes.contains_key(index_name)
    }

    /// The newest resourceVersion this cache reflects, if any.
    ///
    /// It is the highest `metadata.resourceVersion` among the objects the
    /// cache has applied (added, updated, deleted or listed). A version that
    /// is not a decimal integer replaces it unconditionally.
    ///
    /// Limits: watch bookmarks and list resourceVersions do not count, so
    /// this value advances only when an object this informer watches
    /// changes. During quiet periods it lags the server's version, and
    /// writes to objects outside the informer's selectors are never
    /// reflected. A version is reported only once the store contents
    /// reflect it (objects of an in-progress relist count once it
    /// completes; an object that could not be decoded does not count). It
    /// only moves forward, except when the server's versions went backwards
    /// ("Too large resource version"): the relist that follows starts it
    /// over from the listed objects.
    pub fn last_sync_resource_version(&self) -> Option<String> {
        self.shared
            .state
            .read()
            .observed
            .latest()
            .map(str::to_owned)
    }

    /// Whether the cache reflects resourceVersion `rv` or newer: the
    /// read-own-writes check ("has the informer seen my write yet?").
    ///
    /// resourceVersions are opaque strings in Kubernetes; they are compared
    /// as unsigned integers, which holds for etcd-backed API servers. When
    /// either side is not an integer the answer is an error, and a caller
    /// should fail open as upstream does. `Ok(false)` before anything has been
    /// observed.
    ///
    /// `Ok(false)` while the informer relists for a new shard selector
    /// ([`Informer::set_shard_selector`](crate::Informer::set_shard_selector))
    /// or client filter
    /// ([`Informer::set_client_filter`](crate::Informer::set_client_filter)):
    /// the cache still holds the old shard.
    pub fn has_observed_resource_version(&self, rv: &str) -> Result<bool, CompareError> {
        if !self.shared.shard.is_current() {
            return Ok(false);
        }
        self.shared.state.read().observed.has_observed(rv)
    }

    /// A consistent (quorum) list of the informer's resource, with its
    /// selectors (and only the objects its client filter keeps), to compare
    /// with the cache ([`reflects`](Self::reflects));
    /// `Ok(None)` for a store with no API server behind it (an informer
    /// built with [`Informer::manual`](crate::Informer::manual)).
    ///
    /// # Errors
    /// The list request's error.
    pub async fn consistent_read(&self) -> Result<Option<ConsistentRead>, kube::Error> {
        let Some(read) = self.shared.reader.get().cloned() else {
            return Ok(None);
        };
        read().await.map(Some)
    }

    /// Whether the cache reflects `read`: it has observed the read's
    /// resourceVersion, or, object by object, it holds every listed object
    /// at its listed version or newer and nothing the list no longer had
    /// unless written since. Unlike
    /// [`has_observed_resource_version`](Self::has_observed_resource_version),
    /// this becomes true in a quiet cluster, where no event moves the
    /// cache's version past the read's.
    ///
    /// # Errors
    /// [`CompareError`] when a resourceVersion is not an integer.
    pub fn reflects(&self, read: &ConsistentRead) -> Result<bool, CompareError> {
        if !self.shared.shard.is_current() {
            return Ok(false);
        }
        let state = self.shared.state.read();
        if state.observed.has_observed(read.resource_version())? {
            return Ok(true);
        }
        let cached = state.objects.values().flat_map(|names| names.values());
        let keyed: Vec<(ObjectKey, &K)> = cached
            .map(|o| (ObjectKey::from_object(o.as_ref()), o.as_ref()))
            .collect();
        read.reflected_by(keyed.iter().map(|(key, o)| {
            let meta = o.meta();
            (
                key,
                meta.uid.as_deref(),
                meta.resource_version.as_deref().unwrap_or(""),
            )
        }))
    }

    /// Whether the informer is relisting for a new shard selector or
    /// client filter
    /// ([`Informer::set_shard_selector`](crate::Informer::set_shard_selector),
    /// [`Informer::set_client_filter`](crate::Informer::set_client_filter)):
    /// the cache still holds the old shard, and may lack every object of
    /// the new one, until the list completes.
    pub fn is_relisting(&self) -> bool {
        !self.shared.shard.is_current()
    }

    pub(crate) fn shard(&self) -> &ShardFilter {
        &self.shared.shard
    }

    pub(crate) fn set_reader(&self, reader: ReadFn) {
        let _ = self.shared.reader.set(reader);
    }

    /// Whether the informer has completed its first full list. Stays true
    /// afterwards, across relists and after the informer stops.
    pub fn has_synced(&self) -> bool {
        *self.shared.sync.borrow() == SyncState::Synced
    }

    /// Waits until the informer has completed its first full list.
    ///
    /// Cancel-safe: dropping the future has no effect. Returns
    /// [`InformerError::StoppedBeforeSync`] if the informer stops before
    /// syncing. It waits for ever on an informer that is never started or
    /// fed; wrap it in [`tokio::time::timeout`] if that can happen.
    pub async fn wait_for_cache_sync(&self) -> Result<(), InformerError> {
        let mut rx = self.shared.sync.subscribe();
        let state = match rx.wait_for(|s| *s != SyncState::Pending).await {
            Ok(s) => *s,
            // The sender lives as long as this store; unreachable in practice.
            Err(_) => SyncState::StoppedBeforeSync,
        };
        match state {
            SyncState::Synced => Ok(()),
            _ => Err(InformerError::StoppedBeforeSync),
        }
    }

    pub(crate) fn write(&self) -> parking_lot::RwLockWriteGuard<'_, State<K>> {
        self.shared.state.write()
    }

    pub(crate) fn mark_synced(&self) {
        self.shared.sync.send_if_modified(|s| {
            let changed = *s != SyncState::Synced;
            *s = SyncState::Synced;
            changed
        });
    }

    pub(crate) fn mark_stopped(&self) {
        self.shared.sync.send_if_modified(|s| {
            let pending = *s == SyncState::Pending;
            if pending {
                *s = SyncState::StoppedBeforeSync;
            }
            pending
        });
    }
}

impl<K: Resource> State<K> {
    fn get(&self, namespace: &str, name: &str) -> Option<&Arc<K>> {
        self.objects.get(namespace)?.get(name)
    }

    fn index(&self, name: &str) -> Result<&Index<K>, InformerError> {
        self.indexes
            .get(name)
            .ok_or_else(|| InformerError::UnknownIndex {
                name: name.to_owned(),
            })
    }

    fn collect_index(
        &self,
        name: &str,
        key: &str,
        out: &mut Vec<Arc<K>>,
    ) -> Result<(), InformerError> {
        if let Some(bucket) = self.index(name)?.get(key) {
            out.extend(bucket.values().cloned());
        }
        Ok(())
    }

    /// Appends the orphans of `namespace` carrying every label in `labels`,
    /// read from the smallest [`BY_ORPHAN_LABEL`] bucket when possible.
    fn collect_labelled_orphans(
        &self,
        namespace: &str,
        labels: &[(&str, &str)],
        out: &mut Vec<Arc<K>>,
    ) -> Result<(), InformerError> {
        let candidates = match self.indexes.get(BY_ORPHAN_LABEL) {
            Some(by_label) if !labels.is_empty() => {
                let mut smallest: Option<&Bucket<K>> = None;
                for (key, value) in labels {
                    // No orphan carries this label, so none carries them all.
                    let Some(bucket) = by_label.get(&orphan_label_index_key(namespace, key, value))
                    else {
                        return Ok(());
                    };
                    if smallest.is_none_or(|s| bucket.len() < s.len()) {
                        smallest = Some(bucket);
                    }
                }
                smallest
            }
            _ => self
                .index(BY_CONTROLLER_UID)?
                .get(&orphan_index_key(namespace)),
        };
        if let Some(bucket) = candidates {
            out.extend(
                bucket
                    .values()
                    .filter(|o| is_orphan_with_labels(o.meta(), namespace, labels))
                    .cloned(),
            );
        }
        Ok(())
    }

    /// Registers an index and fills it from the current contents.
    pub(crate) fn add_index(
        &mut self,
        name: String,
        func: IndexFn<K>,
    ) -> Result<(), InformerError> {
        if self.indexes.contains_key(&name) {
            return Err(InformerError::IndexExists { name });
        }
        let mut index = Index::new(name.clone(), func);
        for (ns, names) in &self.objects {
            for (n, obj) in names {
                index.insert(&ObjectKey::new(ns.clone(), n.clone()), obj);
            }
        }
        self.indexes.insert(name, index);
        Ok(())
    }

    fn insert(&mut self, key: &ObjectKey, obj: Arc<K>) -> Option<Arc<K>> {
        let names = self.objects.entry_ref(key.namespace.as_str()).or_default();
        // An update (the common case) replaces the object in place: the
        // name is copied only for a new entry.
        let old = match names.get_mut(key.name.as_str()) {
            Some(slot) => Some(std::mem::replace(slot, Arc::clone(&obj))),
            None => names.insert(key.name.clone(), Arc::clone(&obj)),
        };
        match &old {
            Some(old) => {
                for index in self.indexes.values_mut() {
                    index.update(key, old, &obj);
                }
            }
            None => {
                self.len += 1;
                for index in self.indexes.values_mut() {
                    index.insert(key, &obj);
                }
            }
        }
        old
    }

    fn remove(&mut self, key: &ObjectKey) -> Option<Arc<K>> {
        let names = self.objects.get_mut(key.namespace.as_str())?;
        let old = names.remove(key.name.as_str())?;
        if names.is_empty() {
            self.objects.remove(key.namespace.as_str());
        }
        self.len -= 1;
        for index in self.indexes.values_mut() {
            index.remove(key, &old);
        }
        Some(old)
    }

    fn observe(&mut self, obj: &K) {
        if let Some(rv) = obj.meta().resource_version.as_deref() {
            self.observed.observe(rv);
        }
    }

    /// Applies an added or modified object.
    pub(crate) fn apply(&mut self, obj: Arc<K>, out: &mut Vec<Notification<K>>) {
        self.observe(&obj);
        let key = ObjectKey::from_object(&*obj);
        match self.insert(&key, obj.clone()) {
            None => out.push(Notification::Add(obj, false)),
            Some(old) if same_uid(&*old, &*obj) => out.push(Notification::Update(old, obj)),
            Some(old) => {
                out.push(tombstone(key, old));
                out.push(Notification::Add(obj, false));
            }
        }
    }

    /// Applies a delete event; an object the cache never held is ignored.
    pub(crate) fn delete(&mut self, obj: Arc<K>, out: &mut Vec<Notification<K>>) {
        self.observe(&obj);
        let key = ObjectKey::from_object(&*obj);
        if self.remove(&key).is_some() {
            out.push(Notification::Delete(DeletedObject::Final(obj)));
        } else {
            tracing::debug!(%key, "delete event for an object not in the cache; ignored");
        }
    }

    /// Applies an object the client filter leaves out: its
    /// resourceVersion is observed; if it was cached (it just stopped
    /// passing) it leaves as a delete of its new state, built by `cached`
    /// only then: most such objects were never cached, and they cost no
    /// allocation.
    pub(crate) fn apply_filtered_out(
        &mut self,
        obj: K,
        cached: impl FnOnce(K) -> K,
        out: &mut Vec<Notification<K>>,
    ) {
        self.observe(&obj);
        let meta = obj.meta();
        let namespace = meta.namespace.as_deref().unwrap_or_default();
        if self
            .get(namespace, meta.name.as_deref().unwrap_or_default())
            .is_some()
        {
            self.delete(Arc::new(cached(obj)), out);
        }
    }

    /// Applies a watch event whose object could not be decoded: the cache
    /// keeps the last version it could decode, unless that was another
    /// incarnation (a different UID), which is gone: tombstoned.
    pub(crate) fn apply_undecodable(
        &mut self,
        key: &ObjectKey,
        uid: Option<&str>,
        out: &mut Vec<Notification<K>>,
    ) {
        if self
            .get(&key.namespace, &key.name)
            .is_some_and(|old| !uid_matches(&**old, uid))
            && let Some(old) = self.remove(key)
        {
            out.push(tombstone(key.clone(), old));
        }
    }

    /// Applies a delete event whose object could not be decoded: the object
    /// is gone, its final state unknown, so the last version the cache knew
    /// is delivered as a tombstone.
    pub(crate) fn delete_undecodable(
        &mut self,
        key: &ObjectKey,
        resource_version: Option<&str>,
        out: &mut Vec<Notification<K>>,
    ) {
        if let Some(rv) = resource_version {
            self.observed.observe(rv);
        }
        if let Some(old) = self.remove(key) {
            out.push(tombstone(key.clone(), old));
        }
    }

    /// Replaces the contents with a complete list: new objects are adds,
    /// changed ones updates, unchanged ones (same UID and resourceVersion)
    /// nothing, and missing ones tombstoned deletes.
    ///
    /// `undecodable` holds the listed objects that could not be decoded,
    /// with their UIDs: they are not missing, so the version the cache
    /// holds stays (unless it is another incarnation). With
    /// `reset_versions` the observed resourceVersion starts over from this
    /// list (the server's versions went backwards).
    pub(crate) fn replace(
        &mut self,
        listed: HashMap<ObjectKey, Arc<K>>,
        undecodable: &HashMap<ObjectKey, Option<String>>,
        initial: bool,
        reset_versions: bool,
        out: &mut Vec<Notification<K>>,
    ) {
        if reset_versions {
            self.observed = ObservedVersion::default();
        }
        let vanished: Vec<ObjectKey> = self
            .objects
            .iter()
            .flat_map(|(ns, names)| names.iter().map(move |(n, obj)| (ns, n, obj)))
            .filter(|(ns, n, obj)| {
                let key = ObjectKey::new((*ns).clone(), (*n).clone());
                !listed.contains_key(&key)
                    && undecodable
                        .get(&key)
                        .is_none_or(|uid| !uid_matches(&***obj, uid.as_deref()))
            })
            .map(|(ns, n, _)| ObjectKey::new(ns.clone(), n.clone()))
            .collect();
        for (key, obj) in listed {
            self.observe(&obj);
            match self.get(&key.namespace, &key.name) {
                None => {
                    self.insert(&key, obj.clone());
                    out.push(Notification::Add(obj, initial));
                }
                Some(old) if !same_uid(&**old, &*obj) => {
                    if let Some(old) = self.insert(&key, obj.clone()) {
                        out.push(tombstone(key, old));
                    }
                    out.push(Notification::Add(obj, false));
                }
                Some(old) if old.meta().resource_version == obj.meta().resource_version => {}
                Some(_) => {
                    if let Some(old) = self.insert(&key, obj.clone()) {
                        out.push(Notification::Update(old, obj));
                    }
                }
            }
        }
        for key in vanished {
            if let Some(old) = self.remove(&key) {
                out.push(tombstone(key, old));
            }
        }
    }
}

fn tombstone<K>(key: ObjectKey, last_known: Arc<K>) -> Notification<K> {
    Notification::Delete(DeletedObject::Tombstone(DeletedFinalStateUnknown {
        key,
        last_known,
    }))
}

/// Objects are "the same" unless both carry UIDs and they differ (hand-built
/// test objects often have none).
fn same_uid<K: Resource>(a: &K, b: &K) -> bool {
    uid_matches(a, b.meta().uid.as_deref())
}

/// [`same_uid`] against a UID that may be unknown.
fn uid_matches<K: Resource>(obj: &K, uid: Option<&str>) -> bool {
    match (obj.meta().uid.as_deref(), uid) {
        (Some(x), Some(y)) => x == y,
        _ => true,
    }
}
