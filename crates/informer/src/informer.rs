//! The informer: applies watcher events to its store and notifies handlers.

use std::fmt;
use std::fmt::Debug;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures::{Stream, StreamExt};
use hashbrown::HashMap;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource};
use parking_lot::{Mutex, RwLock};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::decode::{Decoder, MaybeDecoded, UndecodableObject, lift_event};
use crate::error::InformerError;
use crate::handler::{EventHandler, HandlerId, Notification};
use crate::health::{Health, InformerStats, Unhealthy};
use crate::index::IndexFn;
use crate::key::ObjectKey;
use crate::list_watch::{ApiSource, ListWatch, Step, consistent_read, selected_list_watch};
use crate::server_versions::ServerVersions;
use crate::shard_selector::{ClientFilter, ShardSelectorSupport};
use crate::store::Store;
use crate::transform::Transform;

/// A watch-driven cache of one resource type with change notifications.
///
/// An `Informer` is a cheap handle: clones share the same cache, handlers
/// and watch. See the [crate documentation](crate) for the event semantics.
pub struct Informer<K> {
    inner: Arc<Inner<K>>,
}

struct Inner<K> {
    store: Store<K>,
    source: Option<(Arc<dyn ListWatch<K>>, watcher::Config)>,
    /// Which resource, for logs, metrics and health reports.
    resource: String,
    health: Health,
    resync: Option<Duration>,
    /// Copied on (rare) registration changes, so each notification takes
    /// the list with a reference count instead of copying it.
    handlers: RwLock<Arc<Vec<Registered<K>>>>,
    next_handler: AtomicU64,
    /// Serialises applying changes and notifying handlers, so notifications
    /// keep the order of the changes.
    dispatch: Mutex<Dispatch<K>>,
    started: AtomicBool,
    /// Shared with the other informers of the same API server.
    versions: ServerVersions,
}

type Registered<K> = (HandlerId, Arc<dyn EventHandler<K>>);

struct Dispatch<K> {
    /// Objects of a list in progress (between `Init` and `InitDone`).
    listing: Option<Listing<K>>,
    /// The server's resourceVersions went backwards: the next complete
    /// list starts the observed version over.
    reset_versions: bool,
    /// Whether a complete list has been applied already.
    listed_once: bool,
    /// Applied to every object before it enters the cache. Kept here so
    /// reading it costs nothing beyond the dispatch lock already held.
    transform: Option<Transform<K>>,
    /// Whether any event has been applied; a transform set afterwards would
    /// leave the cache half transformed.
    received: bool,
    /// The notifications of the event being applied: kept between events
    /// (empty) so that applying one allocates no list.
    notes: Vec<Notification<K>>,
}

/// Longest notification list kept for the next event; a relist's can be
/// as long as the cache, and is dropped.
const KEPT_NOTES: usize = 16;

/// A list in progress.
struct Listing<K> {
    objects: HashMap<ObjectKey, Arc<K>>,
    /// Listed objects that could not be decoded, with their UIDs.
    undecodable: HashMap<ObjectKey, Option<String>>,
}

impl<K> Default for Listing<K> {
    fn default() -> Self {
        Self {
            objects: HashMap::new(),
            undecodable: HashMap::new(),
        }
    }
}

impl<K> Clone for Informer<K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<K> fmt::Debug for Informer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Informer")
            .field("resource", &self.inner.resource)
            .field("store", &self.inner.store)
            .field("resync", &self.inner.resync)
            .field("handlers", &self.inner.handlers.read().len())
            .field("watches_api", &self.inner.source.is_some())
            .field("started", &self.inner.started.load(Ordering::Relaxed))
            .finish()
    }
}

/// Builds an [`Informer`]; obtained from [`Informer::builder`] or
/// [`Informer::manual`].
pub struct InformerBuilder<K> {
    source: Option<(Arc<dyn ListWatch<K>>, String)>,
    config: watcher::Config,
    resync: Option<Duration>,
    indexes: Vec<(String, IndexFn<K>)>,
    handlers: Vec<Arc<dyn EventHandler<K>>>,
    transform: Option<Transform<K>>,
    versions: Option<ServerVersions>,
}

impl<K> fmt::Debug for InformerBuilder<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InformerBuilder")
            .field("watches_api", &self.source.is_some())
            .field("config", &self.config)
            .field("resync", &self.resync)
            .field(
                "indexes",
                &self.indexes.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .field("handlers", &self.handlers.len())
            .field("transform", &self.transform.is_some())
            .field("server_versions", &self.versions.is_some())
            .finish()
    }
}

impl<K> InformerBuilder<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// Sets the watcher configuration (selectors, page size, list
    /// semantics, ...). Defaults to [`watcher::Config::default`].
    pub fn watcher_config(mut self, config: watcher::Config) -> Self {
        self.config = config;
        self
    }

    /// Sets the periodic resync: every `period` after the cache has synced,
    /// each handler receives `on_update(obj, obj)` for every cached object.
    /// `None` or a zero period disables it (the default).
    pub fn resync(mut self, period: Option<Duration>) -> Self {
        self.resync = period.filter(|p| !p.is_zero());
        self
    }

    /// Registers an index named `name`. A second index with the same name
    /// replaces the first.
    pub fn index(
        mut self,
        name: impl Into<String>,
        func: impl Fn(&K) -> Vec<String> + Send + Sync + 'static,
    ) -> Self {
        let name = name.into();
        self.indexes.retain(|(n, _)| *n != name);
        self.indexes.push((name, Arc::new(func)));
        self
    }

    /// Registers a handler; handlers are called in registration order.
    pub fn handler(mut self, handler: impl EventHandler<K> + 'static) -> Self {
        self.handlers.push(Arc::new(handler));
        self
    }

    /// Sets the [`Transform`] applied to every object before it enters the
    /// cache (a function `Fn(&mut K)` converts into one). A second call
    /// replaces the first.
    pub fn transform(mut self, transform: impl Into<Transform<K>>) -> Self {
        self.transform = Some(transform.into());
        self
    }

    /// Shares `versions` with the other informers watching the same API
    /// server, so that all of them relist as soon as one finds its
    /// resourceVersions gone backwards (see [`ServerVersions`]).
    /// [`SharedInformerFactory`](crate::SharedInformerFactory) does this
    /// for the informers it creates. Without it the informer finds out
    /// on its own.
    pub fn server_versions(mut self, versions: ServerVersions) -> Self {
        self.versions = Some(versions);
        self
    }

    /// Builds the informer. Nothing runs until [`Informer::start`] (or
    /// [`Informer::run`]) is called or events are fed by hand.
    pub fn build(self) -> Informer<K> {
        let (source, resource) = match self.source {
            Some((source, resource)) => (Some((source, self.config)), resource),
            None => (None, type_label::<K>()),
        };
        let informer = Informer {
            inner: Arc::new(Inner {
                store: Store::new(self.indexes),
                source,
                resource,
                health: Health::new(),
                resync: self.resync,
                handlers: RwLock::new(Arc::new(Vec::new())),
                next_handler: AtomicU64::new(0),
                dispatch: Mutex::new(Dispatch {
                    listing: None,
                    reset_versions: false,
                    listed_once: false,
                    transform: self.transform,
                    received: false,
                    notes: Vec::new(),
                }),
                started: AtomicBool::new(false),
                versions: self.versions.unwrap_or_default(),
            }),
        };
        for h in self.handlers {
            informer.add_event_handler_arc(h);
        }
        if informer.inner.source.is_some() {
            let weak = Arc::downgrade(&informer.inner);
            informer.inner.store.set_reader(Arc::new(move || {
                let inner = weak.upgrade();
                Box::pin(async move {
                    let Some(inner) = inner else {
                        return Err(kube::Error::Service("the informer was dropped".into()));
                    };
                    let informer = Informer { inner };
                    let Some((source, config)) = informer.inner.source.clone() else {
                        return Err(kube::Error::Service("the informer has no API".into()));
                    };
                    let (_, narrowing) = informer.inner.store.shard().current();
                    consistent_read(&*source, &config, &narrowing, informer.decoder()).await
                })
            }));
        }
        informer
    }
}

impl<K> Informer<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// Starts building an informer that watches `api` (whose namespace, if
    /// any, scopes the watch).
    pub fn builder(api: Api<K>) -> InformerBuilder<K> {
        let resource = url_label(api.resource_url());
        Self::with_source(Arc::new(ApiSource::new(&api)), resource)
    }

    /// An informer builder listing and watching `source`.
    pub(crate) fn with_source(
        source: Arc<dyn ListWatch<K>>,
        resource: String,
    ) -> InformerBuilder<K> {
        InformerBuilder {
            source: Some((source, resource)),
            ..Self::manual()
        }
    }

    /// Starts building an informer with no API behind it, fed by hand with
    /// [`apply_event`](Self::apply_event) or from any stream with
    /// [`run_stream`](Self::run_stream). This is how unit tests give a
    /// controller a cache without a cluster.
    pub fn manual() -> InformerBuilder<K> {
        InformerBuilder {
            source: None,
            config: watcher::Config::default(),
            resync: None,
            indexes: Vec::new(),
            handlers: Vec::new(),
            transform: None,
            versions: None,
        }
    }

    /// A read handle on the cache.
    pub fn store(&self) -> Store<K> {
        self.inner.store.clone()
    }

    /// The informer's resource, as its logs, metrics and health reports
    /// name it: `plural.group` (`replicasets.apps`), or the plural alone for
    /// the core group (`pods`); for an informer built with
    /// [`manual`](Self::manual), the type's name.
    pub fn resource(&self) -> &str {
        &self.inner.resource
    }

    /// `Err` when the informer is running and has had no successful list or
    /// watch response for longer than `bound` (see
    /// [`DEFAULT_WATCH_HEALTH_BOUND`](crate::DEFAULT_WATCH_HEALTH_BOUND) for
    /// what counts and a sensible bound). A running informer's first
    /// failed check of an episode is logged at warn level, naming it.
    /// `Ok` for an informer that is not running (never started, or
    /// stopped).
    pub fn health(&self, bound: Duration) -> Result<(), Unhealthy> {
        self.inner.health.check(&self.inner.resource, bound)
    }

    /// What the informer reports for metrics: its resource, the objects it
    /// could not decode, the time since its last successful response.
    pub fn stats(&self) -> InformerStats {
        InformerStats {
            resource: self.inner.resource.clone(),
            decode_errors: self.inner.health.decode_errors(),
            silent_for: self.inner.health.silent_for(),
        }
    }

    /// The resync period, if resyncs are enabled.
    pub fn resync_period(&self) -> Option<Duration> {
        self.inner.resync
    }

    /// Whether the two handles refer to the same informer.
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        Arc::ptr_eq(&a.inner, &b.inner)
    }

    /// Whether the first complete list has been applied; see
    /// [`Store::has_synced`].
    pub fn has_synced(&self) -> bool {
        self.inner.store.has_synced()
    }

    /// Waits for the first complete list; see [`Store::wait_for_cache_sync`].
    pub async fn wait_for_cache_sync(&self) -> Result<(), InformerError> {
        self.inner.store.wait_for_cache_sync().await
    }

    /// The newest resourceVersion the cache reflects; see
    /// [`Store::last_sync_resource_version`].
    pub fn last_sync_resource_version(&self) -> Option<String> {
        self.inner.store.last_sync_resource_version()
    }

    /// Registers a handler and returns its id.
    ///
    /// A handler added after objects are cached first receives an
    /// `on_add(obj, true)` for each of them (as client-go does), before any
    /// later notification, so it never misses an object.
    pub fn add_event_handler(&self, handler: impl EventHandler<K> + 'static) -> HandlerId {
        self.add_event_handler_arc(Arc::new(handler))
    }

    /// [`add_event_handler`](Self::add_event_handler) for a handler already
    /// in an `Arc` (e.g. shared with other informers).
    pub fn add_event_handler_arc(&self, handler: Arc<dyn EventHandler<K>>) -> HandlerId {
        let _dispatch = self.inner.dispatch.lock();
        let id = HandlerId(self.inner.next_handler.fetch_add(1, Ordering::Relaxed));
        let existing = self.inner.store.list();
        for obj in existing {
            deliver(id, &*handler, &Notification::Add(obj, true));
        }
        Arc::make_mut(&mut *self.inner.handlers.write()).push((id, handler));
        id
    }

    /// Unregisters a handler. Returns false if it was not registered. It
    /// receives no notification after this returns.
    pub fn remove_event_handler(&self, id: HandlerId) -> bool {
        let _dispatch = self.inner.dispatch.lock();
        let mut handlers = self.inner.handlers.write();
        let handlers = Arc::make_mut(&mut *handlers);
        let before = handlers.len();
        handlers.retain(|(h, _)| *h != id);
        handlers.len() != before
    }

    /// Registers an index on a live informer and fills it from the current
    /// contents. Fails if the name is taken.
    pub fn add_index(
        &self,
        name: impl Into<String>,
        func: impl Fn(&K) -> Vec<String> + Send + Sync + 'static,
    ) -> Result<(), InformerError> {
        self.inner
            .store
            .write()
            .add_index(name.into(), Arc::new(func))
    }

    /// Registers an index unless one with that name exists; returns whether
    /// it was added. Lets several controllers sharing an informer each ask
    /// for the index they need.
    pub fn add_index_if_absent(
        &self,
        name: impl Into<String>,
        func: impl Fn(&K) -> Vec<String> + Send + Sync + 'static,
    ) -> bool {
        self.add_index(name, func).is_ok()
    }

    /// Sets the [`Transform`] applied to every object before it enters the
    /// cache, on an informer that has not received anything yet: the
    /// factory's way of adding a transform to a shared informer.
    ///
    /// Setting the transform it already has (see
    /// [`Transform::same_as`]) succeeds and changes nothing, so several
    /// controllers sharing the informer may each ask for the same one.
    ///
    /// # Errors
    /// - [`InformerError::TransformConflict`] if a different transform is
    ///   set already (a shared informer has one transform; two controllers
    ///   wanting different ones need different informers);
    /// - [`InformerError::TransformAfterStart`] if the informer has been
    ///   started or has received an event already, since the objects cached
    ///   so far were not transformed.
    pub fn set_transform(&self, transform: impl Into<Transform<K>>) -> Result<(), InformerError> {
        let transform = transform.into();
        let mut dispatch = self.inner.dispatch.lock();
        self.transform_allowed(&dispatch, &transform)?;
        if dispatch.transform.is_none() {
            dispatch.transform = Some(transform);
        }
        Ok(())
    }

    /// Whether [`set_transform`](Self::set_transform) with `transform`
    /// would succeed now, without setting it: lets a caller check several
    /// informers before changing any.
    ///
    /// # Errors
    /// As [`set_transform`](Self::set_transform).
    pub fn check_transform(&self, transform: &Transform<K>) -> Result<(), InformerError> {
        let dispatch = self.inner.dispatch.lock();
        self.transform_allowed(&dispatch, transform)
    }

    /// Whether the informer has a transform.
    pub fn has_transform(&self) -> bool {
        self.inner.dispatch.lock().transform.is_some()
    }

    fn transform_allowed(
        &self,
        dispatch: &Dispatch<K>,
        transform: &Transform<K>,
    ) -> Result<(), InformerError> {
        match &dispatch.transform {
            Some(current) if current.same_as(transform) => Ok(()),
            Some(_) => Err(InformerError::TransformConflict),
            None if dispatch.received || self.is_started() => {
                Err(InformerError::TransformAfterStart)
            }
            None => Ok(()),
        }
    }

    /// Applies one watcher event to the cache and notifies the handlers
    /// before returning.
    ///
    /// This is the entry point for feeding an informer by hand in tests;
    /// the watch task does the same with
    /// [`apply_maybe_decoded`](Self::apply_maybe_decoded).
    /// Objects go through the informer's [`Transform`], if any, first.
    ///
    /// - `Apply`: add, or update (old, new); a different UID under the same
    ///   name is a tombstoned delete of the old object plus an add.
    /// - `Delete`: delete with the final state; ignored if not cached.
    /// - `Init` / `InitApply`: buffered; the cache is unchanged.
    /// - `InitDone`: the buffered list replaces the cache. On the first list
    ///   every object is an add with `is_in_initial_list = true` and the
    ///   informer is marked synced after the handlers ran; on later lists
    ///   new objects are adds, changed ones (resourceVersion differs)
    ///   updates, unchanged ones produce nothing and missing ones tombstoned
    ///   deletes.
    pub fn apply_event(&self, event: Event<K>) {
        self.apply_maybe_decoded(lift_event(event));
    }

    /// [`apply_event`](Self::apply_event) for an event whose object may not
    /// have decoded into `K` (see [`MaybeDecoded::from_json`]).
    ///
    /// An [`UndecodableObject`] is skipped and reported: a warn log naming
    /// it and the error, the [`stats`](Self::stats) decode error count, and
    /// [`EventHandler::on_undecodable`]. What the cache does with it:
    ///
    /// - in a watch event (`Apply`), the cache keeps the last version it
    ///   could decode, if any: dropping it would look like a delete to the
    ///   controllers (a ReplicaSet controller would replace a pod it can no
    ///   longer read). When the object becomes decodable again it is an
    ///   update from that version (or an add if none was cached). An
    ///   undecodable object with another UID than the cached one means the
    ///   cached incarnation is gone: tombstoned delete;
    /// - in a list, the object is not missing: the cached version stays as
    ///   above (a relist never mistakes it for a deleted object);
    /// - in a `Delete`, the object is gone: it leaves the cache and handlers
    ///   get a tombstone with the last version the cache knew;
    /// - an object whose name cannot be read is only reported.
    pub fn apply_maybe_decoded(&self, event: Event<MaybeDecoded<K>>) {
        let mut dispatch = self.inner.dispatch.lock();
        dispatch.received = true;
        let shard = self.inner.store.shard();
        let mut notes = std::mem::take(&mut dispatch.notes);
        let mut synced_now = false;
        match event {
            Event::Init => dispatch.listing = Some(Listing::default()),
            // Outside the client filter: not kept (not even as undecodable).
            Event::InitApply(obj) if !shard.keeps(obj.metadata()) => {}
            Event::InitApply(MaybeDecoded::Decoded(obj)) => {
                let obj = Arc::new(transformed(dispatch.transform.as_ref(), obj));
                dispatch
                    .listing
                    .get_or_insert_with(Listing::default)
                    .objects
                    .insert(ObjectKey::from_object(&*obj), obj);
            }
            Event::InitApply(MaybeDecoded::Undecodable(bad)) => {
                if let Some(key) = bad.key() {
                    dispatch
                        .listing
                        .get_or_insert_with(Listing::default)
                        .undecodable
                        .insert(key, bad.metadata().uid.clone());
                }
                self.report_undecodable(bad, &mut notes);
            }
            Event::InitDone => {
                let listed = dispatch.listing.take().unwrap_or_default();
                let initial = !dispatch.listed_once;
                dispatch.listed_once = true;
                synced_now = initial;
                let reset_versions = std::mem::take(&mut dispatch.reset_versions);
                self.inner.store.write().replace(
                    listed.objects,
                    &listed.undecodable,
                    initial,
                    reset_versions,
                    &mut notes,
                );
            }
            Event::Apply(MaybeDecoded::Decoded(obj)) if !shard.keeps(obj.meta()) => {
                // Left the client filter (or never in it): out of the cache
                // as a delete of its new state, as a server does for an
                // object that stops matching a label selector; nothing if
                // it was not cached.
                let transform = dispatch.transform.as_ref();
                self.inner.store.write().apply_filtered_out(
                    obj,
                    |obj| transformed(transform, obj),
                    &mut notes,
                );
            }
            Event::Apply(MaybeDecoded::Decoded(obj)) => {
                let obj = Arc::new(transformed(dispatch.transform.as_ref(), obj));
                self.inner.store.write().apply(obj, &mut notes);
            }
            Event::Apply(MaybeDecoded::Undecodable(bad)) if !shard.keeps(bad.metadata()) => {
                let (key, rv) = (bad.key(), bad.resource_version().map(str::to_owned));
                if let Some(key) = key {
                    self.inner
                        .store
                        .write()
                        .delete_undecodable(&key, rv.as_deref(), &mut notes);
                }
            }
            Event::Apply(MaybeDecoded::Undecodable(bad)) => {
                let (key, uid) = (bad.key(), bad.metadata().uid.clone());
                self.report_undecodable(bad, &mut notes);
                if let Some(key) = key {
                    self.inner
                        .store
                        .write()
                        .apply_undecodable(&key, uid.as_deref(), &mut notes);
                }
            }
            Event::Delete(MaybeDecoded::Decoded(obj)) => {
                let obj = Arc::new(transformed(dispatch.transform.as_ref(), obj));
                self.inner.store.write().delete(obj, &mut notes);
            }
            Event::Delete(MaybeDecoded::Undecodable(bad)) => {
                let (key, rv) = (bad.key(), bad.resource_version().map(str::to_owned));
                self.report_undecodable(bad, &mut notes);
                if let Some(key) = key {
                    self.inner
                        .store
                        .write()
                        .delete_undecodable(&key, rv.as_deref(), &mut notes);
                }
            }
        }
        self.notify(&notes);
        if synced_now {
            self.inner.store.mark_synced();
        }
        if notes.capacity() <= KEPT_NOTES {
            notes.clear();
            dispatch.notes = notes;
        }
        drop(dispatch);
    }

    /// Logs and counts an object that cannot be decoded and queues its
    /// notification.
    fn report_undecodable(&self, bad: UndecodableObject, notes: &mut Vec<Notification<K>>) {
        self.inner.health.decode_failed();
        let meta = bad.metadata();
        tracing::warn!(
            resource = %self.inner.resource,
            namespace = meta.namespace.as_deref().unwrap_or(""),
            name = meta.name.as_deref().unwrap_or(""),
            resource_version = meta.resource_version.as_deref().unwrap_or(""),
            error = %bad.error(),
            "object cannot be decoded; skipped (the cache keeps its last decodable version, if any)"
        );
        notes.push(Notification::Undecodable(bad));
    }

    /// Delivers `on_update(obj, obj)` for every cached object to every
    /// handler, as the periodic resync does. Does nothing before the first
    /// complete list.
    pub fn resync_now(&self) {
        let dispatch = self.inner.dispatch.lock();
        if !dispatch.listed_once {
            return;
        }
        let objects = self.inner.store.list();
        let notes: Vec<_> = objects
            .into_iter()
            .map(|o| Notification::Update(o.clone(), o))
            .collect();
        self.notify(&notes);
    }

    fn notify(&self, notes: &[Notification<K>]) {
        if notes.is_empty() {
            return;
        }
        let handlers = Arc::clone(&*self.inner.handlers.read());
        for note in notes {
            for (id, handler) in handlers.iter() {
                deliver(*id, &**handler, note);
            }
        }
    }

    /// Spawns the watch task (see [`run`](Self::run)) on the current tokio
    /// runtime. It stops when `cancel` is cancelled.
    ///
    /// Errors if the informer has no API ([`Informer::manual`]) or was
    /// already started. Must be called within a tokio runtime.
    pub fn start(&self, cancel: CancellationToken) -> Result<JoinHandle<()>, InformerError> {
        let stream = self.watch_stream()?;
        let this = self.clone();
        Ok(tokio::spawn(
            async move { this.drive(stream, cancel).await },
        ))
    }

    /// Runs the watch until `cancel` is cancelled: lists and watches the
    /// API (as kube-runtime's [`watcher`](watcher::watcher()) does, with its
    /// default backoff after errors, and decoding each object on its own),
    /// applies each event with
    /// [`apply_maybe_decoded`](Self::apply_maybe_decoded), and runs the
    /// periodic resync. Errors are logged at warn level and retried; they
    /// never end the loop. A watch answered with "Too large resource
    /// version" (the server's versions went backwards) or 410 Gone starts
    /// over with a fresh list.
    pub async fn run(&self, cancel: CancellationToken) -> Result<(), InformerError> {
        let stream = self.watch_stream()?;
        self.drive(stream, cancel).await;
        Ok(())
    }

    /// The list/watch stream [`start`](Self::start) and [`run`](Self::run)
    /// drive, once the informer is claimed as started.
    fn watch_stream(
        &self,
    ) -> Result<impl Stream<Item = Result<Step<K>, watcher::Error>> + Send + use<K>, InformerError>
    {
        let (source, config) = self.inner.source.clone().ok_or(InformerError::NoSource)?;
        self.claim_start()?;
        let selector = self.inner.store.shard().subscribe();
        let versions = self.inner.versions.clone();
        Ok(selected_list_watch(
            source,
            config,
            self.decoder(),
            selector,
            versions,
        ))
    }

    /// Like [`run`](Self::run) but reads events from `stream` instead of a
    /// watch; it also returns when the stream ends. Errors in the stream
    /// are logged and skipped. Every event counts as a successful response
    /// for [`health`](Self::health). Useful for tests and for custom
    /// sources.
    pub async fn run_stream<S>(
        &self,
        stream: S,
        cancel: CancellationToken,
    ) -> Result<(), InformerError>
    where
        S: Stream<Item = Result<Event<K>, watcher::Error>> + Send,
    {
        self.claim_start()?;
        let steps = stream.map(|event| event.map(|e| Step::event(lift_event(e))));
        self.drive(steps, cancel).await;
        Ok(())
    }

    /// How the watch reads objects: as the transform's smaller type (see
    /// [`Transform::decode_as`]) if it has one, else in full. Read when the
    /// watch starts; a transform set later is still applied to every
    /// object, decoded in full.
    fn decoder(&self) -> Decoder<K> {
        self.inner
            .dispatch
            .lock()
            .transform
            .as_ref()
            .and_then(Transform::decoder)
            .unwrap_or_else(Decoder::full)
    }

    fn claim_start(&self) -> Result<(), InformerError> {
        if self.inner.started.swap(true, Ordering::AcqRel) {
            return Err(InformerError::AlreadyStarted);
        }
        Ok(())
    }

    /// Lists and watches only the objects `selector` selects, a KEP-5866
    /// `shardSelector` such as
    /// `shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')`
    /// (`None`: every object). A running informer starts over with a fresh
    /// list: objects the new selector leaves out leave the cache as
    /// deletes (tombstones), new ones arrive as adds; until that list is
    /// complete the store reflects no resourceVersion
    /// ([`Store::has_observed_resource_version`], [`Store::reflects`]).
    ///
    /// Returns whether anything changes: not for the same selector, nor
    /// once a list showed that the server ignores the parameter (no
    /// matching `metadata.shardInfo`, see
    /// [`shard_selector_support`](Self::shard_selector_support)): its
    /// cache holds every object anyway, so filter on the client too.
    pub fn set_shard_selector(&self, selector: Option<String>) -> bool {
        self.inner.store.shard().set(selector)
    }

    /// Keeps in the cache only the objects `filter` keeps (`None`: every
    /// object the list and watch return): the client-side counterpart of
    /// [`set_shard_selector`](Self::set_shard_selector), for what the server
    /// cannot select (a sharded controller's children, placed by their
    /// controller reference's UID). The informer lists and watches every
    /// object, or those the filter's
    /// [label selector](ClientFilter::with_label_selector) selects (joined
    /// with the informer's own); listed objects the filter leaves out are dropped
    /// before they enter the cache, a watched object that stops passing
    /// leaves it as a delete of its new state (handlers get `on_delete`,
    /// as for an object that stops matching a label selector), and
    /// [`Store::consistent_read`] applies the filter to its list.
    ///
    /// A running informer starts over with a fresh list, as for a new
    /// selector: objects the new filter keeps arrive as adds, those it
    /// leaves out leave as deletes, and until that list is complete the
    /// store reflects no resourceVersion. Returns whether anything changes
    /// (not for a filter with the same [`id`](ClientFilter::id)).
    ///
    /// A shared informer has one filter: every user of it sees only what
    /// it keeps. An informer without an API ([`manual`](Self::manual))
    /// ignores filters (returns `false`): nothing could relist it for the
    /// objects a new filter keeps.
    pub fn set_client_filter(&self, filter: Option<ClientFilter>) -> bool {
        if self.inner.source.is_none() {
            return false;
        }
        self.inner.store.shard().set_filter(filter)
    }

    /// The shard selector the informer lists and watches with.
    pub fn shard_selector(&self) -> Option<String> {
        self.inner.store.shard().current().1.selector
    }

    /// Whether the API server applied the shard selector of the last list
    /// made with one.
    pub fn shard_selector_support(&self) -> ShardSelectorSupport {
        self.inner.store.shard().support()
    }

    /// Whether the informer's watch has been started (by `start`, `run` or
    /// `run_stream`).
    pub fn is_started(&self) -> bool {
        self.inner.started.load(Ordering::Acquire)
    }

    async fn drive<S>(&self, stream: S, cancel: CancellationToken)
    where
        S: Stream<Item = Result<Step<K>, watcher::Error>> + Send,
    {
        let mut stream = std::pin::pin!(stream);
        // One-hour placeholder when resync is off; the branch is disabled.
        let period = self.inner.resync.unwrap_or(Duration::from_secs(3600));
        let mut resync = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        resync.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let resync_enabled = self.inner.resync.is_some();
        let health = &self.inner.health;
        health.started();
        loop {
            tokio::select! {
                biased;
                () = cancel.cancelled() => break,
                step = stream.next() => match step {
                    Some(Ok(Step::Event(event))) => {
                        health.responded();
                        self.apply_maybe_decoded(*event);
                    }
                    Some(Ok(Step::Alive)) => health.responded(),
                    Some(Ok(Step::ListDone { generation })) => {
                        health.responded();
                        self.apply_maybe_decoded(Event::InitDone);
                        self.inner.store.shard().listed(generation);
                    }
                    Some(Ok(Step::ShardAnswer { sent, echoed })) => {
                        health.responded();
                        self.inner.store.shard().observe(&sent, echoed.as_deref());
                    }
                    Some(Ok(Step::VersionsReset { told })) => {
                        let seen_by = if told { "another informer of the server" } else { "this informer" };
                        tracing::warn!(
                            resource = %self.inner.resource,
                            seen_by,
                            "the API server's resourceVersions went backwards (too large resource version); relisting from scratch"
                        );
                        self.inner.dispatch.lock().reset_versions = true;
                    }
                    Some(Err(err)) => {
                        tracing::warn!(resource = %self.inner.resource, error = %err, "informer watch error; retrying");
                        health.failed(err);
                    }
                    None => break,
                },
                _ = resync.tick(), if resync_enabled => self.resync_now(),
            }
        }
        health.stopped();
        self.inner.store.mark_stopped();
    }
}

/// The resource label of an informer watching `url`: `plural.group`, or
/// the plural alone for the core group.
fn url_label(url: &str) -> String {
    let segments: Vec<&str> = url.split('/').filter(|s| !s.is_empty()).collect();
    let plural = segments.last().copied().unwrap_or_default();
    match segments.as_slice() {
        ["apis", group, ..] if segments.len() > 3 => format!("{plural}.{group}"),
        _ => plural.to_owned(),
    }
}

/// The resource label of an informer with no API: the type's name.
fn type_label<K>() -> String {
    let name = std::any::type_name::<K>();
    let name = name.split('<').next().unwrap_or(name);
    name.rsplit("::").next().unwrap_or(name).to_owned()
}

/// `obj` after `transform`, if any.
fn transformed<K>(transform: Option<&Transform<K>>, mut obj: K) -> K {
    if let Some(transform) = transform {
        transform.apply(&mut obj);
    }
    obj
}

/// Calls one handler, containing a panic so it cannot kill the watch task
/// or starve the other handlers.
fn deliver<K>(id: HandlerId, handler: &dyn EventHandler<K>, note: &Notification<K>) {
    if catch_unwind(AssertUnwindSafe(|| note.deliver(handler))).is_err() {
        tracing::error!(
            handler = id.0,
            event = note.kind(),
            "informer event handler panicked; continuing"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;

    #[test]
    fn resource_labels() {
        assert_eq!(url_label("/api/v1/pods"), "pods");
        assert_eq!(url_label("/api/v1/namespaces/default/pods"), "pods");
        assert_eq!(url_label("/apis/apps/v1/replicasets"), "replicasets.apps");
        assert_eq!(
            url_label("/apis/apps/v1/namespaces/ns/replicasets"),
            "replicasets.apps"
        );
        assert_eq!(type_label::<Pod>(), "Pod");
    }
}
