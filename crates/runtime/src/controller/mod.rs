//! The controller: one owner kind, the kinds it owns and watches, a queue
//! of owner keys and the workers that reconcile them.

mod builder;
mod enqueue;
mod error;
mod handlers;
mod metrics;
pub mod predicates;
mod sources;

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ctrlkit_consistency::{ConsistencyStore, NotObservedYet};
use ctrlkit_expectations::ControllerExpectations;
use ctrlkit_informer::{EventHandler, Informer, ObjectKey, SharedInformerFactory, Store};
use ctrlkit_worker::{Action, Stopped, SyncError, Workers};
use ctrlkit_workqueue::WorkQueue;

pub use builder::{ControllerBuilder, Owns, Watches};
pub(crate) use enqueue::Admission;
pub use enqueue::LOW_PRIORITY;
pub use error::{BuildError, RunError};
pub use handlers::creation_id;
pub use metrics::ControllerMetrics;
pub use sources::Watchable;

pub(crate) use sources::Synced;

/// How soon a reconcile skipped because a cache has not shown the
/// controller's own write yet is retried at the latest; the informer event
/// carrying the write usually queues the key sooner.
pub const STALE_RECONCILE_REQUEUE: Duration = Duration::from_millis(500);

/// Told about each reconcile skipped for a cache that has not shown a
/// recorded write yet.
pub(crate) type StaleSkipFn = Arc<dyn Fn(&ObjectKey, &NotObservedYet) + Send + Sync>;

/// What `run` needs beyond the queue.
#[derive(Clone)]
struct RunSettings {
    workers: usize,
    timeout: Option<Duration>,
    max_retries: Option<u32>,
    grace_period: Option<Duration>,
    metrics: Option<ControllerMetrics>,
}

/// A controller for owner kind `K`: informers whose events become owner
/// keys on a [`WorkQueue`], and [`run`](Self::run), which reconciles each
/// key with your function on N workers.
///
/// Declared with [`Controller::builder`]; see the
/// [crate documentation](crate) for the whole picture and an example.
///
/// # What reaches the queue
///
/// | event | key queued | priority |
/// |---|---|---|
/// | owner added | the owner | low from the initial list, else normal |
/// | owner changed | the owner (if its UID changed — deleted and re-created unseen — the old owner's state is dropped first, as on a delete) | low on a resync (same resourceVersion), else normal |
/// | owner deleted | the owner (its expectations and read-own-writes records are dropped first, then the [owner-deleted hook](ControllerBuilder::on_owner_deleted) runs) | normal |
/// | owned child added / changed / deleted | its controller, if an owner of this controller in the cache with the referenced UID | as for the owner |
/// | owned child's controller changed | the former and the new owner | normal |
/// | orphan child | the keys of [`Owns::orphans`] | as for the owner |
/// | watched object | the keys of its mapper, for old and new state | as for the owner |
///
/// Low priority is [`LOW_PRIORITY`], as controller-runtime's priority
/// queue: after a restart, changes made meanwhile are reconciled before the
/// backlog of the initial list.
pub struct Controller<K> {
    name: Arc<str>,
    event_reporter: Arc<str>,
    owner_informer: Informer<K>,
    owners: Store<K>,
    queue: WorkQueue<ObjectKey>,
    expectations: Arc<ControllerExpectations>,
    consistency: ConsistencyStore,
    synced: Arc<[Arc<dyn Synced>]>,
    stores: Arc<HashMap<TypeId, Box<dyn Any + Send + Sync>>>,
    owner_handler: Arc<dyn EventHandler<K>>,
    owned_handlers: Arc<HashMap<TypeId, Box<dyn Any + Send + Sync>>>,
    settings: RunSettings,
    stale_skips: Arc<AtomicU64>,
    stale_skip: Option<StaleSkipFn>,
    /// The shard member gating the reconciles, when sharded.
    shard: Option<crate::shard::ShardMember>,
}

/// Clones are handles on the same controller (same queue, caches and
/// expectations): keep one to inspect the controller while another runs.
/// Run a controller once; a second `run` would share the queue with the
/// first.
impl<K> Clone for Controller<K> {
    fn clone(&self) -> Self {
        Self {
            name: Arc::clone(&self.name),
            event_reporter: Arc::clone(&self.event_reporter),
            owner_informer: self.owner_informer.clone(),
            owners: self.owners.clone(),
            queue: self.queue.clone(),
            expectations: Arc::clone(&self.expectations),
            consistency: self.consistency.clone(),
            synced: Arc::clone(&self.synced),
            stores: Arc::clone(&self.stores),
            owner_handler: Arc::clone(&self.owner_handler),
            owned_handlers: Arc::clone(&self.owned_handlers),
            settings: self.settings.clone(),
            stale_skips: Arc::clone(&self.stale_skips),
            stale_skip: self.stale_skip.clone(),
            shard: self.shard.clone(),
        }
    }
}

impl<K> fmt::Debug for Controller<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Controller")
            .field("name", &self.name)
            .field("informers", &self.synced.len())
            .field("workers", &self.settings.workers)
            .field("queue", &self.queue)
            .field("read_own_writes", &self.consistency.is_enabled())
            .finish_non_exhaustive()
    }
}

impl<K: Watchable> Controller<K> {
    /// Starts declaring a controller whose informers come from `factory`
    /// (shared with the other controllers of the process).
    pub fn builder(factory: &SharedInformerFactory) -> ControllerBuilder<'_, K> {
        ControllerBuilder::new(Some(builder::FactoryRef::Borrowed(factory)), None)
    }

    /// Starts declaring a controller that runs under `manager`: its
    /// informers come from the manager's factory, it watches the manager's
    /// namespace (`--namespace`) if one is set, and it records its metrics
    /// into the manager's shared [`ControllerMetrics`]
    /// ([`Manager::controller_metrics`]). Hand the built controller to
    /// [`Manager::add_controller`].
    ///
    /// [`Manager::controller_metrics`]: crate::Manager::controller_metrics
    /// [`Manager::add_controller`]: crate::Manager::add_controller
    pub fn builder_for(manager: &mut crate::Manager) -> ControllerBuilder<'static, K> {
        let factory = builder::FactoryRef::Shared(Arc::clone(manager.factory()));
        let mut builder =
            ControllerBuilder::new(Some(factory), None).metrics(&manager.controller_metrics());
        if let Some(namespace) = manager.namespace() {
            builder = builder.namespace(namespace);
        }
        builder
    }

    /// Starts declaring a controller over an owner informer you made (in
    /// unit tests, [`Informer::manual`] fed by hand); the informers of owned
    /// and watched kinds are then given with [`Owns::informer`] and
    /// [`Watches::informer`].
    pub fn builder_with(owners: Informer<K>) -> ControllerBuilder<'static, K> {
        ControllerBuilder::new(None, Some(owners))
    }

    /// The controller's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The reporter of the events recorded for this controller: its
    /// [`event_reporter`](ControllerBuilder::event_reporter), else its name.
    pub fn event_reporter(&self) -> &str {
        &self.event_reporter
    }

    /// The owner cache.
    pub fn store(&self) -> Store<K> {
        self.owners.clone()
    }

    /// The owner informer.
    pub fn informer(&self) -> &Informer<K> {
        &self.owner_informer
    }

    /// The cache of an owned or watched kind `C` (the first registered if
    /// `C` is both), or the owner cache for `K`; `None` for other kinds.
    pub fn store_of<C: Watchable>(&self) -> Option<Store<C>> {
        self.stores
            .get(&TypeId::of::<C>())
            .and_then(|s| s.downcast_ref::<Store<C>>())
            .cloned()
    }

    /// [`store_of`](Self::store_of) for the wiring: the cache of an owned
    /// or watched kind `C` (or the owner cache), or an error naming `C`
    /// that `?` passes on, so a context is built in one expression:
    ///
    /// ```text
    /// let ctx = Ctx { configmaps: controller.cache()?, services: controller.cache()?, .. };
    /// ```
    ///
    /// # Errors
    /// [`BuildError::NotCached`] if the controller neither owns nor
    /// watches `C`.
    pub fn cache<C: Watchable>(&self) -> Result<Store<C>, BuildError> {
        self.store_of().ok_or_else(|| BuildError::NotCached {
            kind: sources::kind_of::<C>(),
        })
    }

    /// The event handler the controller registered on the owner informer.
    /// Call it to drive the controller exactly as the informer does, with
    /// transitions a hand-fed informer cannot produce (an update from a
    /// state the cache never held, a tombstone): for unit tests.
    pub fn owner_handler(&self) -> Arc<dyn EventHandler<K>> {
        Arc::clone(&self.owner_handler)
    }

    /// The event handler the controller registered on the informer of the
    /// owned kind `C` (see [`owner_handler`](Self::owner_handler)); `None`
    /// if the controller does not own `C`.
    pub fn owned_handler<C: Watchable>(&self) -> Option<Arc<dyn EventHandler<C>>> {
        self.owned_handlers
            .get(&TypeId::of::<C>())
            .and_then(|h| h.downcast_ref::<Arc<dyn EventHandler<C>>>())
            .cloned()
    }

    /// The queue of owner keys. Handlers fill it; add keys yourself to have
    /// them reconciled (e.g. on an external trigger).
    pub fn queue(&self) -> &WorkQueue<ObjectKey> {
        &self.queue
    }

    /// The controller's expectations, keyed by owner key (the `Display` of
    /// its [`ObjectKey`], `namespace/name`). The handlers observe owned
    /// children appearing ([`creation_observed_id`] with
    /// [`creation_id`]) and going away ([`deletion_observed`] with the
    /// child's `namespace/name`), and drop an owner's expectations when it
    /// is deleted; a reconcile sets them before creating or deleting
    /// children and checks [`satisfied`] before acting on the cache.
    ///
    /// [`creation_observed_id`]: ControllerExpectations::creation_observed_id
    /// [`deletion_observed`]: ControllerExpectations::deletion_observed
    /// [`satisfied`]: ControllerExpectations::satisfied
    pub fn expectations(&self) -> &Arc<ControllerExpectations> {
        &self.expectations
    }

    /// The read-own-writes store ([`ControllerBuilder::read_own_writes`]);
    /// a disabled store, always ready, otherwise.
    pub fn consistency(&self) -> &ConsistencyStore {
        &self.consistency
    }

    /// Reconciles skipped so far because a cache had not shown a write
    /// recorded in the read-own-writes store yet (shared by all clones).
    pub fn stale_reconcile_skips(&self) -> u64 {
        self.stale_skips.load(Ordering::Relaxed)
    }

    /// Whether every informer of the controller has completed its first
    /// list (for a readiness probe).
    pub fn has_synced(&self) -> bool {
        self.synced.iter().all(|s| s.has_synced())
    }

    /// Every cache of the controller (owner, owned and watched kinds), for
    /// a sharded member's catch-up check.
    pub(crate) fn caches(&self) -> Arc<[Arc<dyn Synced>]> {
        Arc::clone(&self.synced)
    }

    /// Waits until every informer of the controller has completed its
    /// first list.
    ///
    /// Cancel-safe: dropping the future has no effect.
    ///
    /// # Errors
    /// [`RunError::CacheSync`] if an informer stops before it synced.
    pub async fn wait_for_cache_sync(&self) -> Result<(), RunError> {
        let waits: Vec<_> = self.synced.iter().map(|s| s.wait()).collect();
        futures::future::try_join_all(waits)
            .await
            .map(|_| ())
            .map_err(RunError::CacheSync)
    }

    /// Runs the controller until `shutdown` completes: waits for the
    /// informer caches, then reconciles keys on the configured number of
    /// workers and, on shutdown, lets the reconciles in flight finish (within
    /// the grace period, if set) and returns. The informers must be started
    /// by whoever owns them (`factory.start()`, or fed by hand).
    ///
    /// `reconcile(key, object, ctx)` gets the owner's key and the owner as
    /// cached, or `None` when it is not in the cache (deleted: clean up),
    /// and returns an [`Action`] or an error. Through `ctrlkit-worker`:
    /// a key is never reconciled twice at once; errors are retried with the
    /// rate limiter's backoff unless [terminal](SyncError::is_terminal); a
    /// panic or a [timeout](ControllerBuilder::timeout) is an error for that
    /// key only; each reconcile runs in a `sync` tracing span with the
    /// controller's name and the key. With
    /// [read-own-writes](ControllerBuilder::read_own_writes), a key whose
    /// recorded writes the caches have not shown yet is not reconciled but
    /// requeued after at most [`STALE_RECONCILE_REQUEUE`].
    ///
    /// `shutdown` is any future, e.g. a `CancellationToken`'s
    /// `cancelled_owned()`. If it completes before the caches synced, `run`
    /// shuts the queue down and returns [`Stopped::Drained`] without having
    /// reconciled anything.
    ///
    /// # Errors
    /// [`RunError::CacheSync`] if an informer stops before it synced.
    ///
    /// # Cancel safety
    /// Dropping the future cancels the reconciles in flight at their next
    /// `.await` (their keys are queued again) without shutting the queue
    /// down; completing `shutdown` is the graceful way to stop.
    pub async fn run<R, Fut, E, Ctx, F>(
        self,
        reconcile: R,
        ctx: Arc<Ctx>,
        shutdown: F,
    ) -> Result<Stopped, RunError>
    where
        R: Fn(ObjectKey, Option<Arc<K>>, Arc<Ctx>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: SyncError,
        Ctx: Send + Sync + 'static,
        F: Future,
    {
        let mut shutdown = std::pin::pin!(shutdown);
        tokio::select! {
            synced = self.wait_for_cache_sync() => synced?,
            _ = shutdown.as_mut() => {
                self.queue.shut_down();
                return Ok(Stopped::Drained);
            }
        }
        tracing::info!(
            controller = %self.name,
            workers = self.settings.workers,
            "caches synced; starting workers"
        );
        let reconciler = Arc::new(Reconciler {
            controller: self.clone(),
            reconcile,
            ctx,
        });
        let handler = move |key: ObjectKey| {
            let reconciler = Arc::clone(&reconciler);
            async move { reconciler.reconcile(key).await }
        };
        let settings = self.settings;
        let mut workers = Workers::new(self.queue.clone(), handler)
            .name(self.name.as_ref())
            .concurrency(settings.workers)
            .display_keys();
        if let Some(limit) = settings.timeout {
            workers = workers.timeout(limit);
        }
        if let Some(retries) = settings.max_retries {
            workers = workers.max_retries(retries);
        }
        if let Some(grace) = settings.grace_period {
            workers = workers.grace_period(grace);
        }
        if let Some(metrics) = &settings.metrics {
            workers = workers.metrics_provider(metrics.worker_provider());
        }
        let stopped = workers.run(shutdown).await;
        tracing::info!(controller = %self.name, ?stopped, "controller stopped");
        Ok(stopped)
    }
}

impl<K: Watchable> Controller<K> {
    /// Reconciles `key` once, now, as a worker of [`run`](Self::run) would
    /// (the read-own-writes check, then `reconcile` with the cached owner),
    /// without the queue's bookkeeping, retries, timeout or metrics: for
    /// unit tests that drive a controller step by step, and for tools that
    /// reconcile one object on demand.
    ///
    /// # Errors
    /// Whatever `reconcile` returns.
    pub async fn reconcile_once<R, Fut, E, Ctx>(
        &self,
        key: ObjectKey,
        reconcile: R,
        ctx: Arc<Ctx>,
    ) -> Result<Action, E>
    where
        R: Fn(ObjectKey, Option<Arc<K>>, Arc<Ctx>) -> Fut,
        Fut: Future<Output = Result<Action, E>>,
    {
        match self.cached_if_ready(&key) {
            Ok(object) => reconcile(key, object, ctx).await,
            Err(wait) => Ok(wait),
        }
    }

    /// The owner as cached, once the caches show every write recorded for
    /// `key` (read-own-writes); otherwise the skip is counted and the
    /// requeue to return instead of reconciling.
    fn cached_if_ready(&self, key: &ObjectKey) -> Result<Option<Arc<K>>, Action> {
        if self.consistency.is_enabled() {
            // Formatted on the stack: this runs before every reconcile.
            let ready = key.with_str(|owner_key| self.consistency.ensure_ready(owner_key));
            if let Err(why) = ready {
                self.stale_skips.fetch_add(1, Ordering::Relaxed);
                if let Some(hook) = &self.stale_skip {
                    hook(key, &why);
                }
                tracing::debug!(reason = %why, "skipping the reconcile until the cache shows our writes");
                return Err(Action::requeue_after(STALE_RECONCILE_REQUEUE));
            }
        }
        Ok(self.owners.get_by_key(key))
    }
}

/// What each reconcile needs: the controller's caches and read-own-writes
/// check, and the user's function and context.
struct Reconciler<K, R, Ctx> {
    controller: Controller<K>,
    reconcile: R,
    ctx: Arc<Ctx>,
}

impl<K, R, Fut, E, Ctx> Reconciler<K, R, Ctx>
where
    K: Watchable,
    R: Fn(ObjectKey, Option<Arc<K>>, Arc<Ctx>) -> Fut,
    Fut: Future<Output = Result<Action, E>>,
{
    async fn reconcile(&self, key: ObjectKey) -> Result<Action, E> {
        let object = match self.controller.cached_if_ready(&key) {
            Ok(object) => object,
            Err(wait) => return Ok(wait),
        };
        let ctx = Arc::clone(&self.ctx);
        match &self.controller.shard {
            None => (self.reconcile)(key, object, ctx).await,
            Some(member) => {
                member
                    .gated(key, object, |key, object| {
                        (self.reconcile)(key, object, ctx)
                    })
                    .await
            }
        }
    }
}
