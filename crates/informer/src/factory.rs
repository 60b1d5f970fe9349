//! The sharing factory: one informer (one watch) per resource, scope and
//! selectors, handed to every controller that asks for it.

use std::any::{Any, TypeId};
use std::fmt;
use std::fmt::Debug;
use std::time::Duration;

use futures::future::BoxFuture;
use hashbrown::HashMap;
use k8s_openapi::NamespaceResourceScope;
use kube::runtime::watcher;
use kube::{Api, Client, Resource};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error::InformerError;
use crate::health::{InformerStats, Unhealthy};
use crate::informer::Informer;
use crate::scope::ObjectScope;
use crate::server_versions::ServerVersions;

/// Hands out one shared [`Informer`] per (resource type, API path, label
/// selector, field selector), so several controllers watching pods share one
/// watch and one cache, each adding its own handlers and indexes.
///
/// The first request for a key creates the informer with that request's
/// full [`watcher::Config`] and the factory's default resync period; later
/// requests for the same key get the same informer (their other config
/// fields are ignored). The API path includes the group, version, plural and
/// namespace, so `Api::all` and `Api::namespaced` informers are distinct.
///
/// [`start`](Self::start) spawns the watch of every informer not yet
/// running (call it again after requesting more informers);
/// [`shutdown`](Self::shutdown) cancels them and waits for their tasks.
/// Dropping the factory cancels the watches too (without waiting). The
/// factory holds no global state: build one per process (or per test).
///
/// ```no_run
/// use ctrlkit_informer::{BY_CONTROLLER_UID, HandlerFns, SharedInformerFactory, index_by_controller_uid};
/// use k8s_openapi::api::{apps::v1::ReplicaSet, core::v1::Pod};
/// use kube::runtime::watcher;
///
/// # async fn wire(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
/// let factory = SharedInformerFactory::new(client);
///
/// // Two controllers ask for the pod informer; they get the same one.
/// let pods = factory.all::<Pod>(watcher::Config::default());
/// pods.add_index_if_absent(BY_CONTROLLER_UID, index_by_controller_uid);
/// pods.add_event_handler(HandlerFns::new().on_add(|_pod, _initial| { /* enqueue the owner */ }));
/// let replicasets = factory.all::<ReplicaSet>(watcher::Config::default());
/// replicasets.add_event_handler(HandlerFns::new());
///
/// factory.start();
/// factory.wait_for_cache_sync().await?;
/// // ... run the workers, reading from pods.store() and replicasets.store() ...
/// factory.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub struct SharedInformerFactory {
    client: Client,
    default_resync: Option<Duration>,
    cancel: CancellationToken,
    informers: Mutex<HashMap<Key, Box<dyn Shared>>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    extensions: Mutex<HashMap<TypeId, Box<dyn Any + Send + Sync>>>,
    /// One server, one version clock: shared by every informer created here.
    versions: ServerVersions,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    type_id: TypeId,
    url: String,
    labels: Option<String>,
    fields: Option<String>,
}

/// The type-erased view of an informer the factory needs.
trait Shared: Send + Sync {
    fn as_any(&self) -> &dyn Any;
    fn start_if_idle(&self, cancel: CancellationToken) -> Option<JoinHandle<()>>;
    fn wait_for_sync(&self) -> BoxFuture<'static, Result<(), InformerError>>;
    fn has_synced(&self) -> bool;
    fn health(&self, bound: Duration) -> Result<(), Unhealthy>;
    fn stats(&self) -> InformerStats;
}

impl<K> Shared for Informer<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn start_if_idle(&self, cancel: CancellationToken) -> Option<JoinHandle<()>> {
        self.start(cancel).ok()
    }

    fn wait_for_sync(&self) -> BoxFuture<'static, Result<(), InformerError>> {
        let store = self.store();
        Box::pin(async move { store.wait_for_cache_sync().await })
    }

    fn has_synced(&self) -> bool {
        Informer::has_synced(self)
    }

    fn health(&self, bound: Duration) -> Result<(), Unhealthy> {
        Informer::health(self, bound)
    }

    fn stats(&self) -> InformerStats {
        Informer::stats(self)
    }
}

impl fmt::Debug for SharedInformerFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedInformerFactory")
            .field("default_resync", &self.default_resync)
            .field("informers", &self.informers.lock().len())
            .field("cancelled", &self.cancel.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl SharedInformerFactory {
    /// A factory whose convenience constructors ([`all`](Self::all),
    /// [`namespaced`](Self::namespaced)) use `client`. No resync by default.
    pub fn new(client: Client) -> Self {
        Self {
            client,
            default_resync: None,
            cancel: CancellationToken::new(),
            informers: Mutex::new(HashMap::new()),
            tasks: Mutex::new(Vec::new()),
            extensions: Mutex::new(HashMap::new()),
            versions: ServerVersions::new(),
        }
    }

    /// Attaches `value` to the factory, one value per type (a second one
    /// replaces the first), for code that builds on the factory to find:
    /// process-wide context that belongs with the informers rather than in
    /// a global. The runtime's manager puts its shard member here, so every
    /// controller built on its factory is sharded.
    pub fn insert_extension<T: Any + Clone + Send + Sync>(&self, value: T) {
        self.extensions
            .lock()
            .insert(TypeId::of::<T>(), Box::new(value));
    }

    /// A clone of the value of type `T` attached with
    /// [`insert_extension`](Self::insert_extension), if any.
    pub fn extension<T: Any + Clone + Send + Sync>(&self) -> Option<T> {
        self.extensions
            .lock()
            .get(&TypeId::of::<T>())
            .and_then(|value| value.downcast_ref::<T>())
            .cloned()
    }

    /// Sets the resync period given to informers created from now on.
    pub fn with_default_resync(mut self, period: Option<Duration>) -> Self {
        self.default_resync = period;
        self
    }

    /// Makes the factory's watches stop when `parent` is cancelled (the
    /// factory uses a child token of it).
    pub fn with_parent_token(mut self, parent: &CancellationToken) -> Self {
        self.cancel = parent.child_token();
        self
    }

    /// The client the factory's convenience constructors use.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// What the factory's informers share about the server's
    /// resourceVersions (see [`ServerVersions`]); give it to an informer
    /// of the same server built elsewhere with
    /// [`InformerBuilder::server_versions`](crate::InformerBuilder::server_versions).
    pub fn server_versions(&self) -> &ServerVersions {
        &self.versions
    }

    /// The token that stops this factory's watches.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// The shared informer for `api` and the selectors in `config`, created
    /// on first request.
    pub fn informer<K>(&self, api: Api<K>, config: watcher::Config) -> Informer<K>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        let key = Key {
            type_id: TypeId::of::<K>(),
            url: api.resource_url().to_owned(),
            labels: config.label_selector.clone(),
            fields: config.field_selector.clone(),
        };
        let mut informers = self.informers.lock();
        // The key holds K's TypeId, so the downcast cannot fail in practice.
        if let Some(existing) = informers.get(&key)
            && let Some(informer) = existing.as_any().downcast_ref::<Informer<K>>()
        {
            return informer.clone();
        }
        let informer = Informer::builder(api)
            .watcher_config(config)
            .resync(self.default_resync)
            .server_versions(self.versions.clone())
            .build();
        informers.insert(key, Box::new(informer.clone()));
        informer
    }

    /// The shared informer for `K` across all namespaces (or for a
    /// cluster-scoped `K`).
    pub fn all<K>(&self, config: watcher::Config) -> Informer<K>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Default,
    {
        self.informer(Api::all(self.client.clone()), config)
    }

    /// The shared informer for the namespaced `K` in `namespace`.
    pub fn namespaced<K>(&self, namespace: &str, config: watcher::Config) -> Informer<K>
    where
        K: Resource<Scope = NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + Debug
            + Send
            + Sync
            + 'static,
        K::DynamicType: Default,
    {
        self.informer(Api::namespaced(self.client.clone(), namespace), config)
    }

    /// The shared informer for `K` in `namespace`, or across all namespaces
    /// with `None`; for a cluster-scoped `K` the namespace is ignored. The
    /// form for code generic over the kind's scope (see [`ObjectScope`]);
    /// [`all`](Self::all) and [`namespaced`](Self::namespaced) otherwise.
    pub fn scoped<K>(&self, namespace: Option<&str>, config: watcher::Config) -> Informer<K>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Default,
        K::Scope: ObjectScope,
    {
        let api = <K::Scope as ObjectScope>::api::<K>(self.client.clone(), namespace);
        self.informer(api, config)
    }

    /// The number of distinct informers handed out.
    pub fn len(&self) -> usize {
        self.informers.lock().len()
    }

    /// Whether no informer has been requested yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Spawns the watch of every informer that is not running yet. Safe to
    /// call repeatedly. Must be called within a tokio runtime.
    pub fn start(&self) {
        let informers = self.informers.lock();
        let mut tasks = self.tasks.lock();
        for informer in informers.values() {
            if let Some(task) = informer.start_if_idle(self.cancel.child_token()) {
                tasks.push(task);
            }
        }
    }

    /// Whether every informer handed out so far has synced.
    pub fn has_synced(&self) -> bool {
        self.informers.lock().values().all(|i| i.has_synced())
    }

    /// `Err` with the first running informer that has had no successful
    /// list or watch response for longer than `bound` (see
    /// [`Informer::health`]); every unhealthy informer is logged, once per
    /// episode. What a readiness check asks.
    pub fn health(&self, bound: Duration) -> Result<(), Unhealthy> {
        let informers = self.informers.lock();
        let mut first = None;
        // Every informer is checked, so each one's episode is logged.
        for informer in informers.values() {
            if let Err(unhealthy) = informer.health(bound) {
                first.get_or_insert(unhealthy);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// The [`InformerStats`] of every informer handed out, sorted by
    /// resource: what a metrics exporter reads.
    pub fn stats(&self) -> Vec<InformerStats> {
        let mut stats: Vec<_> = self.informers.lock().values().map(|i| i.stats()).collect();
        stats.sort_by(|a, b| a.resource.cmp(&b.resource));
        stats
    }

    /// Waits until every informer handed out so far has synced; fails if
    /// one stops first. Cancel-safe.
    pub async fn wait_for_cache_sync(&self) -> Result<(), InformerError> {
        let waits: Vec<_> = self
            .informers
            .lock()
            .values()
            .map(|i| i.wait_for_sync())
            .collect();
        futures::future::try_join_all(waits).await.map(|_| ())
    }

    /// Stops every watch and waits for the tasks to finish. Informers
    /// handed out keep their (now frozen) caches.
    pub async fn shutdown(&self) {
        self.cancel.cancel();
        let tasks = std::mem::take(&mut *self.tasks.lock());
        for task in tasks {
            if let Err(err) = task.await {
                tracing::error!(error = %err, "informer task failed");
            }
        }
    }
}

impl Drop for SharedInformerFactory {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}
