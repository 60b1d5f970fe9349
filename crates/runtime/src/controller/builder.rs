//! Declaring a controller: its owner kind, what it owns and watches, its
//! workers and queue.

use std::any::TypeId;
use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use ctrlkit_consistency::{ConsistencyStore, NotObservedYet};
use ctrlkit_expectations::{ControllerExpectations, DEFAULT_EXPECTATIONS_TTL};
use ctrlkit_informer::{
    EventHandler, Informer, ObjectKey, SharedInformerFactory, Store, Transform,
};
use ctrlkit_workqueue::{RateLimiter, WorkQueue};
use kube::runtime::watcher;

use super::enqueue::Enqueuer;
use super::error::BuildError;
use super::handlers::{Context, OwnerHandler};
use super::metrics::ControllerMetrics;
use super::sources::{
    InformerPlan, Installed, Mapping, OwnedSource, OwnersMapFn, Source, Watchable, WatchedSource,
    kind_of,
};
use super::{Controller, RunSettings};

/// Options of an owned kind, for
/// [`ControllerBuilder::owns_with`]: `K` is the owner kind, `C` the child
/// kind.
///
/// ```
/// use ctrlkit_informer::ObjectKey;
/// use ctrlkit_runtime::Owns;
/// use k8s_openapi::api::apps::v1::ReplicaSet;
/// use k8s_openapi::api::core::v1::Pod;
/// use kube::runtime::watcher;
///
/// let owns = Owns::<ReplicaSet, Pod>::new()
///     .watcher_config(watcher::Config::default().labels("managed-by=me"))
///     // Orphans go to every owner in their namespace that might adopt them.
///     .orphans(|pod, owners| {
///         let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
///         owners.list_namespace(ns).iter().map(|o| ObjectKey::from_object(o.as_ref())).collect()
///     })
///     // Resyncs of unchanged pods do not wake their owner.
///     .update_filter(|old, new| old.metadata.resource_version != new.metadata.resource_version);
/// # let _ = owns;
/// ```
pub struct Owns<K, C> {
    plan: InformerPlan<C>,
    orphans: Option<super::handlers::OrphanFn<K, C>>,
    update_filter: Option<super::handlers::UpdateFilter<C>>,
    requeue: Option<super::handlers::RequeueFn<K, C>>,
}

impl<K, C> fmt::Debug for Owns<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Owns")
            .field("informer_given", &self.plan.informer.is_some())
            .field("orphans", &self.orphans.is_some())
            .field("update_filter", &self.update_filter.is_some())
            .field("requeue", &self.requeue.is_some())
            .finish_non_exhaustive()
    }
}

impl<K, C> Default for Owns<K, C> {
    fn default() -> Self {
        Self {
            plan: InformerPlan::default(),
            orphans: None,
            update_filter: None,
            requeue: None,
        }
    }
}

impl<K: Watchable, C: Watchable> Owns<K, C> {
    /// The defaults: the factory's informer with the default watcher
    /// configuration, no orphan mapping, every update reaches the owner.
    pub fn new() -> Self {
        Self::default()
    }

    /// The watcher configuration (selectors, …) of the child informer taken
    /// from the factory. The factory shares one informer per kind, API path
    /// and selectors; a differently configured request gets its own.
    pub fn watcher_config(mut self, config: watcher::Config) -> Self {
        self.plan.config = config;
        self
    }

    /// Uses `informer` for the children instead of taking one from the
    /// factory: a manual informer in unit tests
    /// ([`Informer::manual`](ctrlkit_informer::Informer::manual)).
    pub fn informer(mut self, informer: Informer<C>) -> Self {
        self.plan.informer = Some(informer);
        self
    }

    /// Maps a child with no controller reference (an orphan) to the keys of
    /// owners that may adopt it (usually those whose selector matches it),
    /// given the owner cache. Called when an orphan appears, changes (as
    /// the [update filter](Self::update_filter) allows) or loses its
    /// controller. Without it orphans reach no owner.
    pub fn orphans(
        mut self,
        map: impl Fn(&C, &Store<K>) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> Self {
        self.orphans = Some(Arc::new(map));
        self
    }

    /// Whether an update of a child reaches its owner: `filter(old, new)`
    /// is asked for updates whose controller reference did not change
    /// (changes of controller always reach both owners, and deletions are
    /// always observed). Resyncs pass the same object twice. Without it
    /// every update does, resyncs at low priority.
    pub fn update_filter(
        mut self,
        filter: impl Fn(&C, &C) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.update_filter = Some(Arc::new(filter));
        self
    }

    /// After an update of a child, asks `requeue(old, new, owner)` whether
    /// to look at the owner again after a delay (`Some(delay)`), in
    /// addition to the immediate look: for changes that take effect later
    /// by themselves, e.g. a pod that became ready and will count as
    /// available after the owner's `minReadySeconds`.
    pub fn requeue_after(
        mut self,
        requeue: impl Fn(&C, &C, &K) -> Option<Duration> + Send + Sync + 'static,
    ) -> Self {
        self.requeue = Some(Arc::new(requeue));
        self
    }

    /// A transform applied to the children before they enter the cache
    /// (see [`Transform`]); replaces the builder's
    /// [`drop_managed_fields`](ControllerBuilder::drop_managed_fields) for
    /// this kind.
    pub fn transform(mut self, transform: impl Into<Transform<C>>) -> Self {
        self.plan.transform = Some(transform.into());
        self
    }

    /// Adds an index to the child informer (kept if a shared informer has
    /// one of that name already). The controller adds
    /// [`BY_CONTROLLER_UID`](ctrlkit_informer::BY_CONTROLLER_UID) itself.
    pub fn index(
        mut self,
        name: impl Into<String>,
        func: impl Fn(&C) -> Vec<String> + Send + Sync + 'static,
    ) -> Self {
        self.plan.indexes.push((name.into(), Arc::new(func)));
        self
    }
}

/// A watched kind and how its objects map to owner keys, for
/// [`ControllerBuilder::watches_with`].
pub struct Watches<W> {
    plan: InformerPlan<W>,
    map: Mapping<W>,
}

impl<W> fmt::Debug for Watches<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watches")
            .field("informer_given", &self.plan.informer.is_some())
            .finish_non_exhaustive()
    }
}

impl<W: Watchable> Watches<W> {
    /// Every add, change (old and new state) and delete of a `W` queues the
    /// keys `map` returns.
    pub fn new(map: impl Fn(&W) -> Vec<ObjectKey> + Send + Sync + 'static) -> Self {
        Self {
            plan: InformerPlan::default(),
            map: Mapping::Plain(Arc::new(map)),
        }
    }

    /// Like [`new`](Self::new), with the controller's owner cache given to
    /// `map` too: for mappings that depend on the owners, e.g. every owner
    /// in the object's namespace whose selector matches it (as
    /// controller-runtime's `EnqueueRequestsFromMapFunc` with a client).
    /// `K` must be the controller's owner kind, else `build` fails with
    /// [`BuildError::WatchOwnerMismatch`].
    ///
    /// ```
    /// use ctrlkit_informer::{ObjectKey, Store};
    /// use ctrlkit_runtime::Watches;
    /// use k8s_openapi::api::apps::v1::Deployment;
    /// use k8s_openapi::api::core::v1::Secret;
    ///
    /// // A Secret change reaches every Deployment in its namespace.
    /// let watches = Watches::with_owners(|secret: &Secret, deployments: &Store<Deployment>| {
    ///     let ns = secret.metadata.namespace.as_deref().unwrap_or_default();
    ///     deployments.list_namespace(ns).iter().map(|d| ObjectKey::from_object(d.as_ref())).collect()
    /// });
    /// # let _ = watches;
    /// ```
    pub fn with_owners<K: Watchable>(
        map: impl Fn(&W, &Store<K>) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> Self {
        let map: OwnersMapFn<K, W> = Arc::new(map);
        Self {
            plan: InformerPlan::default(),
            map: Mapping::WithOwners {
                map: Box::new(map),
                owner: TypeId::of::<K>(),
                owner_kind: kind_of::<K>(),
            },
        }
    }

    /// The watcher configuration of the informer taken from the factory.
    pub fn watcher_config(mut self, config: watcher::Config) -> Self {
        self.plan.config = config;
        self
    }

    /// Uses `informer` instead of taking one from the factory.
    pub fn informer(mut self, informer: Informer<W>) -> Self {
        self.plan.informer = Some(informer);
        self
    }

    /// A transform applied before objects enter the cache.
    pub fn transform(mut self, transform: impl Into<Transform<W>>) -> Self {
        self.plan.transform = Some(transform.into());
        self
    }

    /// Adds an index to the informer.
    pub fn index(
        mut self,
        name: impl Into<String>,
        func: impl Fn(&W) -> Vec<String> + Send + Sync + 'static,
    ) -> Self {
        self.plan.indexes.push((name.into(), Arc::new(func)));
        self
    }
}

/// Declares a [`Controller`] for owner kind `K`; start with
/// [`Controller::builder`] (informers from a [`SharedInformerFactory`]) or
/// [`Controller::builder_with`] (an owner informer you made, e.g. a manual
/// one in tests), end with [`build`](Self::build).
///
/// Nothing is registered on any informer until `build` succeeds, and
/// `build` reports every misuse as a [`BuildError`].
pub struct ControllerBuilder<'a, K> {
    factory: Option<FactoryRef<'a>>,
    owner: InformerPlan<K>,
    name: Option<String>,
    event_reporter: Option<String>,
    namespace: Option<String>,
    sources: Vec<Box<dyn Source<K>>>,
    workers: usize,
    rate_limiter: Option<Box<dyn RateLimiter<ObjectKey>>>,
    timeout: Option<Duration>,
    max_retries: Option<u32>,
    grace_period: Option<Duration>,
    drop_managed_fields: bool,
    metrics: Option<ControllerMetrics>,
    expectations_ttl: Duration,
    read_own_writes: Option<Duration>,
    owner_deleted: Option<super::handlers::OwnerDeletedFn>,
    stale_skip: Option<super::StaleSkipFn>,
    owner_update_filter: Option<super::handlers::UpdateFilter<K>>,
    batch_period: Duration,
    shard: Option<crate::shard::ShardMember>,
}

impl<K> fmt::Debug for ControllerBuilder<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControllerBuilder")
            .field("factory", &self.factory.is_some())
            .field("name", &self.name)
            .field("event_reporter", &self.event_reporter)
            .field("namespace", &self.namespace)
            .field("sources", &self.sources.len())
            .field("workers", &self.workers)
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .field("metrics", &self.metrics.is_some())
            .field("read_own_writes", &self.read_own_writes)
            .field("on_owner_deleted", &self.owner_deleted.is_some())
            .field("on_stale_skip", &self.stale_skip.is_some())
            .field("owner_update_filter", &self.owner_update_filter.is_some())
            .field("batch_period", &self.batch_period)
            .finish_non_exhaustive()
    }
}

/// Where the builder takes its informers from: a factory it borrows
/// ([`Controller::builder`]) or one it shares ([`Controller::builder_for`]).
pub(crate) enum FactoryRef<'a> {
    Borrowed(&'a SharedInformerFactory),
    Shared(Arc<SharedInformerFactory>),
}

impl FactoryRef<'_> {
    fn get(&self) -> &SharedInformerFactory {
        match self {
            Self::Borrowed(factory) => factory,
            Self::Shared(factory) => factory,
        }
    }
}

impl<'a, K: Watchable> ControllerBuilder<'a, K> {
    pub(crate) fn new(factory: Option<FactoryRef<'a>>, owner: Option<Informer<K>>) -> Self {
        Self {
            factory,
            owner: InformerPlan {
                informer: owner,
                ..InformerPlan::default()
            },
            name: None,
            event_reporter: None,
            namespace: None,
            sources: Vec::new(),
            workers: 1,
            rate_limiter: None,
            timeout: None,
            max_retries: None,
            grace_period: None,
            drop_managed_fields: false,
            metrics: None,
            expectations_ttl: DEFAULT_EXPECTATIONS_TTL,
            read_own_writes: None,
            owner_deleted: None,
            stale_skip: None,
            owner_update_filter: None,
            batch_period: Duration::ZERO,
            shard: None,
        }
    }

    /// Shards the controller with `member` ([`shard`](Self::shard)).
    pub(crate) fn shard_member(mut self, member: crate::shard::ShardMember) -> Self {
        self.shard = Some(member);
        self
    }

    /// Names the controller: the queue's name and the `name` label of its
    /// `workqueue_*` metrics, the `controller` label of its
    /// `controller_runtime_reconcile_*` metrics and of every reconcile's
    /// tracing span. Defaults to the owner kind in lower case (as
    /// controller-runtime does), e.g. `replicaset`. Use the same name as
    /// the reporter of the controller's events.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Names the reporter (`reportingController`) of the events the
    /// [`Manager`](crate::manager::Manager) records for this controller,
    /// such as the `DecodeFailed` warning on an owner its informer cannot
    /// decode. Defaults to the [name](Self::name); set it when the two
    /// differ, as upstream's do: the ReplicaSet controller's queue and
    /// metrics are `replicaset`, its events come from
    /// `replicaset-controller`.
    pub fn event_reporter(mut self, reporter: impl Into<String>) -> Self {
        self.event_reporter = Some(reporter.into());
        self
    }

    /// Watches only `namespace` (every informer the controller takes from
    /// the factory; cluster-scoped kinds are watched whole). Informers given
    /// by hand are used as they are.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// The watcher configuration of the owner informer taken from the
    /// factory (selectors, page size, …).
    pub fn watcher_config(mut self, config: watcher::Config) -> Self {
        self.owner.config = config;
        self
    }

    /// Owns children of kind `C`: each child event queues the key of its
    /// controller, found through its controller `ownerReference` (same kind
    /// and API group as `K`, in the owner cache with that UID), and the
    /// controller's [expectations](Controller::expectations) observe the
    /// children appearing (by [`creation_id`](crate::creation_id)) and going
    /// away (by `namespace/name`). The child informer gets the
    /// [`BY_CONTROLLER_UID`](ctrlkit_informer::BY_CONTROLLER_UID) index.
    pub fn owns<C: Watchable>(self) -> Self {
        self.owns_with(Owns::<K, C>::new())
    }

    /// [`owns`](Self::owns) with options: an orphan mapping for adoption, an
    /// update filter, a delayed requeue, the child informer's
    /// configuration.
    pub fn owns_with<C: Watchable>(mut self, owns: Owns<K, C>) -> Self {
        self.sources.push(Box::new(OwnedSource {
            plan: owns.plan,
            orphans: owns.orphans,
            update_filter: owns.update_filter,
            requeue: owns.requeue,
        }));
        self
    }

    /// Watches objects of any kind `W` and queues the keys `map` returns
    /// for each add, change and delete (e.g. the apps that mount a Secret).
    pub fn watches<W: Watchable>(
        self,
        map: impl Fn(&W) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> Self {
        self.watches_with(Watches::new(map))
    }

    /// [`watches`](Self::watches) with options.
    pub fn watches_with<W: Watchable>(mut self, watches: Watches<W>) -> Self {
        self.sources.push(Box::new(WatchedSource {
            plan: watches.plan,
            map: watches.map,
        }));
        self
    }

    /// How many keys are reconciled at once (controller-runtime's
    /// `MaxConcurrentReconciles`); 1 by default. Zero is a build error.
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers;
        self
    }

    /// Folds the events of one owner that arrive close together into one
    /// reconcile, without delaying the first: an event for an owner whose
    /// last reconcile was queued `period` or longer ago queues it at once
    /// (and opens a new period); any other event queues it for the end of
    /// the current period, where all of them share one reconcile. So each
    /// owner is reconciled at most about once per `period` while events
    /// keep coming, an owner that was quiet reacts at once, and no event
    /// waits longer than `period`. An event during a reconcile still gets a
    /// reconcile after it (the queue's usual rule).
    ///
    /// Off (zero) by default, as in controller-runtime, where every event
    /// queues its key at once. It suits controllers whose owners see bursts
    /// of child events, each needing no more than one look at the end:
    /// upstream's Job controller queues pod events after its one-second
    /// `syncJobBatchPeriod`, and the EndpointSlice controller has
    /// `--endpointslice-updates-batch-period`; those delay the first event
    /// too. Applies to every key the controller's event handlers queue (the
    /// owner's own events, its children's, watched objects'), not to
    /// requeues a reconcile asks for, retries, or the delayed looks of
    /// [`Owns::requeue_after`].
    pub fn batch_period(mut self, period: Duration) -> Self {
        self.batch_period = period;
        self
    }

    /// The rate limiter that spaces out retries of failing keys; by default
    /// client-go's controller rate limiter (5 ms doubling to 1000 s per key,
    /// at most 10 retries per second overall).
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<ObjectKey> + 'static) -> Self {
        self.rate_limiter = Some(Box::new(limiter));
        self
    }

    /// Cancels a reconcile that runs longer than `limit` and treats it as a
    /// retryable error for its key. Off by default; zero is a build error.
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = Some(limit);
        self
    }

    /// Gives up on a key after `retries` failed retries in a row (it comes
    /// back when something queues it again). Unlimited by default.
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.max_retries = Some(retries);
        self
    }

    /// On shutdown, how long reconciles in flight may take before they are
    /// cancelled; without it shutdown waits for them.
    pub fn grace_period(mut self, grace: Duration) -> Self {
        self.grace_period = Some(grace);
        self
    }

    /// A transform applied to the owners before they enter the cache (see
    /// [`Transform`]); replaces [`drop_managed_fields`](Self::drop_managed_fields)
    /// for the owner kind.
    pub fn transform(mut self, transform: impl Into<Transform<K>>) -> Self {
        self.owner.transform = Some(transform.into());
        self
    }

    /// Drops `metadata.managedFields` from every object of every informer
    /// this controller uses (owner, owned and watched kinds) before it is
    /// cached, unless that kind has a transform of its own. A shared
    /// informer refuses a different transform, so controllers sharing
    /// informers should agree on this.
    pub fn drop_managed_fields(mut self) -> Self {
        self.drop_managed_fields = true;
        self
    }

    /// Whether an update of an owner queues it: `filter(old, new)` is asked
    /// for every update, resyncs included (which pass the same object
    /// twice), like a controller-runtime update predicate on `For`. With
    /// [`predicates`](crate::predicates), e.g.
    /// `.owner_update_filter(|old, new| generation_changed(old, new) || labels_changed(old, new))`
    /// reconciles on spec and label changes but not on status writes.
    /// Always queued, whatever the filter says: adds, deletes, an owner
    /// found re-created under another UID, and the update that sets its
    /// `deletionTimestamp` (so finalizer cleanup runs even for kinds whose
    /// generation the API server does not bump then). Without it every
    /// update is queued, resyncs at low priority.
    pub fn owner_update_filter(
        mut self,
        filter: impl Fn(&K, &K) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.owner_update_filter = Some(Arc::new(filter));
        self
    }

    /// Adds an index to the owner informer (kept if a shared informer has
    /// one of that name already). Registering one name twice here is a
    /// build error.
    pub fn index(
        mut self,
        name: impl Into<String>,
        func: impl Fn(&K) -> Vec<String> + Send + Sync + 'static,
    ) -> Self {
        self.owner.indexes.push((name.into(), Arc::new(func)));
        self
    }

    /// Records the queue's and the reconciles' metrics into `metrics`,
    /// labelled with the controller's name.
    pub fn metrics(mut self, metrics: &ControllerMetrics) -> Self {
        self.metrics = Some(metrics.clone());
        self
    }

    /// How long the expectations wait for the informer before the
    /// controller may act anyway (5 minutes by default, upstream's).
    pub fn expectations_ttl(mut self, ttl: Duration) -> Self {
        self.expectations_ttl = ttl;
        self
    }

    /// Read-own-writes (Kubernetes 1.36, KEP-5647): the controller keeps a
    /// [`ConsistencyStore`] over its owner and owned caches
    /// ([`Controller::consistency`]), clears an owner's records when the
    /// owner is deleted, and skips a reconcile (requeued shortly) while a
    /// cache has not yet shown a write recorded for that key, waiting at
    /// most `max_wait` per write. Record writes with
    /// [`RecordWrites`](crate::child::RecordWrites) around the child
    /// controls and `wrote_at` for the owner's own status writes.
    pub fn read_own_writes(mut self, max_wait: Duration) -> Self {
        self.read_own_writes = Some(max_wait);
        self
    }

    /// Calls `hook(key)` when an owner is deleted (or found re-created
    /// under the same name with another UID), right after the controller
    /// dropped the owner's expectations and read-own-writes records: the
    /// place to drop per-owner state of your own (backoffs, caches), so a
    /// new owner with the same name starts clean even if no reconcile ever
    /// sees the old one gone. Runs on the informer's task: it must be cheap
    /// and must not block.
    pub fn on_owner_deleted(mut self, hook: impl Fn(&ObjectKey) + Send + Sync + 'static) -> Self {
        self.owner_deleted = Some(Arc::new(hook));
        self
    }

    /// With [read-own-writes](Self::read_own_writes): calls `hook(key,
    /// why)` each time a reconcile of `key` is skipped because a cache has
    /// not shown a recorded write yet (`why` names the resource), e.g. to
    /// count skips per resource in a metric of your own. The total is
    /// [`Controller::stale_reconcile_skips`] either way.
    pub fn on_stale_skip(
        mut self,
        hook: impl Fn(&ObjectKey, &NotObservedYet) + Send + Sync + 'static,
    ) -> Self {
        self.stale_skip = Some(Arc::new(hook));
        self
    }

    /// Checks the declaration, takes the informers, registers the indexes,
    /// transforms and event handlers, and returns the controller, ready to
    /// [`run`](Controller::run) once the informers are started
    /// (`factory.start()`).
    ///
    /// # Errors
    /// Every misuse, as a [`BuildError`]: an empty name or namespace, a name
    /// already used in the shared metrics, zero workers, a zero timeout, an
    /// index name empty or registered twice, a kind owned twice, a
    /// cluster-scoped kind owned by a namespaced owner, a kind without an
    /// informer (no factory and none given), an informer refusing the
    /// transform.
    pub fn build(mut self) -> Result<Controller<K>, BuildError> {
        let name = self
            .name
            .take()
            .unwrap_or_else(|| kind_of::<K>().to_lowercase());
        self.validate(&name)?;
        let namespace = self.namespace.as_deref();
        let factory_ref = self.factory.take();
        let factory = factory_ref.as_ref().map(FactoryRef::get);
        // A controller on a sharded manager's factory is sharded with its
        // member unless it was given one.
        let shard = self
            .shard
            .take()
            .or_else(|| factory.and_then(crate::manager::shard_member_of));
        let drop_fields = self.drop_managed_fields;
        self.owner.acquire(factory, namespace, drop_fields)?;
        for source in &mut self.sources {
            source.acquire(factory, namespace, drop_fields)?;
        }
        if let Some(metrics) = &self.metrics {
            metrics.claim_name(&name)?;
        }

        let owner_informer = self.owner.install()?;
        let owners = owner_informer.store();
        let consistency = match self.read_own_writes {
            None => ConsistencyStore::disabled(),
            Some(max_wait) => {
                let builder = ConsistencyStore::builder()
                    .cache(
                        ctrlkit_consistency::GroupResource::of::<K>(),
                        owners.clone(),
                    )
                    .max_wait(max_wait);
                self.sources
                    .iter()
                    .fold(builder, |b, s| s.consistency(b))
                    .build()
            }
        };
        let mut queue = WorkQueue::builder().name(name.clone());
        if let Some(limiter) = self.rate_limiter {
            queue = queue.rate_limiter(limiter);
        }
        if let Some(metrics) = &self.metrics {
            queue = queue.metrics_provider(metrics.queue_provider());
        }
        let queue = queue.build();
        let expectations = Arc::new(ControllerExpectations::with_ttl(self.expectations_ttl));
        let context = Arc::new(Context::new(
            owners.clone(),
            Enqueuer::with_admission(
                queue.clone(),
                shard.clone().map(|member| {
                    Arc::new(crate::shard::ShardAdmission(member)) as Arc<dyn super::Admission>
                }),
            )
            .with_batch_period(self.batch_period),
            Arc::clone(&expectations),
            consistency.clone(),
            self.owner_deleted,
        ));
        let mut installed = Installed::default();
        installed.add(owners.clone());
        for source in self.sources {
            source.install(&context, &mut installed)?;
        }
        let owner_handler: Arc<dyn EventHandler<K>> = Arc::new(OwnerHandler {
            context: Arc::clone(&context),
            update_filter: self.owner_update_filter,
        });
        owner_informer.add_event_handler_arc(Arc::clone(&owner_handler));
        let child_filters = std::mem::take(&mut installed.child_filters);
        let event_reporter = self.event_reporter.take().unwrap_or_else(|| name.clone());
        let controller = Controller {
            name: Arc::from(name),
            event_reporter: Arc::from(event_reporter),
            owner_informer,
            owners,
            queue,
            expectations,
            consistency,
            synced: installed.synced.into(),
            stores: Arc::new(installed.stores),
            owner_handler,
            owned_handlers: Arc::new(installed.owned_handlers),
            settings: RunSettings {
                workers: self.workers,
                timeout: self.timeout,
                max_retries: self.max_retries,
                grace_period: self.grace_period,
                metrics: self.metrics,
            },
            stale_skips: Arc::new(AtomicU64::new(0)),
            stale_skip: self.stale_skip,
            shard,
        };
        if let Some(member) = &controller.shard {
            member.attach_controller(&controller, child_filters);
        }
        Ok(controller)
    }

    /// Every check that needs no informer.
    fn validate(&self, name: &str) -> Result<(), BuildError> {
        if name.is_empty() {
            return Err(BuildError::EmptyName);
        }
        if let Some(metrics) = &self.metrics
            && metrics.has_name(name)
        {
            return Err(BuildError::DuplicateName {
                name: name.to_owned(),
            });
        }
        if self.workers == 0 {
            return Err(BuildError::ZeroWorkers);
        }
        if self.timeout.is_some_and(|t| t.is_zero()) {
            return Err(BuildError::ZeroTimeout);
        }
        if self.namespace.as_deref() == Some("") {
            return Err(BuildError::EmptyNamespace);
        }
        self.owner.validate(&[])?;
        let mut owned: HashSet<TypeId> = HashSet::new();
        for source in &self.sources {
            source.validate()?;
            if let Some(kind) = source.owned()
                && !owned.insert(kind)
            {
                return Err(BuildError::DuplicateOwns {
                    kind: source.kind(),
                });
            }
        }
        Ok(())
    }
}
