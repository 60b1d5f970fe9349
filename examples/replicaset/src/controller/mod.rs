//! The generic replica controller and its two instances.

mod availability;
mod churn;
mod client;
mod counters;
mod creations;
mod deletion_cost;
mod handlers;
mod invalid_spec;
mod keys;
mod manage;
mod metrics;
mod pods;
mod read_own_writes;
mod status;
mod sync;
mod tracking_metrics;

use std::fmt;
use std::sync::Arc;

use std::time::Duration;

use ctrlkit_consistency::ConsistencyStore;
use ctrlkit_expectations::{ControllerExpectations, DEFAULT_EXPECTATIONS_TTL};
use ctrlkit_informer::{
    BY_CONTROLLER_UID, DeletedObject, Informer, SharedInformerFactory, Store,
    index_by_controller_uid,
};
use ctrlkit_podcontrol::{KubePodControl, PodControl};
use ctrlkit_worker::{Action, Workers};
use ctrlkit_workqueue::WorkQueue;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use kube::runtime::events::Recorder;
use kube::runtime::watcher;
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::owner::ReplicaOwner;

pub use churn::{
    ChurnGuardOptions, DEFAULT_CHURN_BACKOFF_BASE, DEFAULT_CHURN_BACKOFF_MAX,
    DEFAULT_CHURN_REASONS, DEFAULT_CHURN_WINDOW, DEFAULT_FAILED_PODS_KEPT, FAILED_POD_CHURN_REASON,
};
pub use client::{KubeOwnerClient, OwnerClient};
pub use invalid_spec::{EMPTY_SELECTOR_REASON, INVALID_SELECTOR_REASON, SELECTOR_MISMATCH_REASON};
pub use keys::{object_key, split_key};
pub use metrics::ControllerMetrics;
pub use status::{
    FAILED_CREATE_REASON, FAILED_DELETE_REASON, calculate_status, desired_replicas,
    status_unchanged,
};

/// How many pods one sync may create or delete at most: upstream's
/// `BurstReplicas`.
pub const BURST_REPLICAS: usize = 500;

/// How many keys are synced at once by default: the kube-controller-manager's
/// `--concurrent-replicaset-syncs` / `--concurrent-rc-syncs`.
pub const DEFAULT_WORKERS: usize = 5;

/// Settings of a [`Controller`]. `Default` gives upstream's numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerOptions {
    /// Keys synced concurrently (default 5; 0 is treated as 1).
    pub workers: usize,
    /// Pods created or deleted per sync at most (default 500; 0 is treated
    /// as 1).
    pub burst_replicas: usize,
    /// Watch only this namespace; `None` watches all namespaces.
    pub namespace: Option<String>,
    /// The churn guard against pods that fail right after creation (on by
    /// default; [`ChurnGuardOptions::disabled`] behaves as upstream).
    pub churn_guard: ChurnGuardOptions,
    /// Read-own-writes (upstream 1.36, on by default): skip an owner's sync
    /// until the informers have observed the pods this controller created,
    /// adopted or released for it and its last status write. `false`
    /// behaves as a controller without it (upstream with the
    /// `StaleControllerConsistency*` gate off).
    pub read_own_writes: bool,
    /// How long read-own-writes waits at most for one write before syncing
    /// anyway (default [`ctrlkit_consistency::DEFAULT_MAX_WAIT`], 30 s).
    pub read_own_writes_max_wait: Duration,
    /// How long expectations wait for the informer before the controller
    /// acts anyway and reports the missing creations as lost (default 5
    /// minutes, upstream's `ExpectationsTimeout`).
    pub expectations_ttl: Duration,
}

impl Default for ControllerOptions {
    fn default() -> Self {
        Self {
            workers: DEFAULT_WORKERS,
            burst_replicas: BURST_REPLICAS,
            namespace: None,
            churn_guard: ChurnGuardOptions::default(),
            read_own_writes: true,
            read_own_writes_max_wait: ctrlkit_consistency::DEFAULT_MAX_WAIT,
            expectations_ttl: DEFAULT_EXPECTATIONS_TTL,
        }
    }
}

/// State shared by the handlers and the workers.
pub(crate) struct Shared<O: ReplicaOwner> {
    pub(crate) pods: Store<Pod>,
    pub(crate) owners: Store<O>,
    pub(crate) queue: WorkQueue<String>,
    pub(crate) expectations: ControllerExpectations,
    pub(crate) pod_control: Arc<dyn PodControl>,
    pub(crate) owner_client: Arc<dyn OwnerClient<O>>,
    pub(crate) burst_replicas: usize,
    pub(crate) recorder: Option<Recorder>,
    pub(crate) metrics: Option<ControllerMetrics>,
    pub(crate) churn: churn::ChurnTracker,
    pub(crate) consistency: ConsistencyStore,
    pub(crate) counters: counters::SyncCounters,
}

/// A controller that keeps each owner's (ReplicaSet's or
/// ReplicationController's) pod count at `spec.replicas`, the way the
/// kube-controller-manager does.
///
/// See the [crate documentation](crate) for the behaviour. Build it with
/// [`Controller::new`] (against a cluster) or [`Controller::from_parts`]
/// (tests, custom pod control), then [`run`](Controller::run) it.
pub struct Controller<O: ReplicaOwner> {
    shared: Arc<Shared<O>>,
    pod_informer: Informer<Pod>,
    owner_informer: Informer<O>,
    workers: usize,
    metrics: Option<ControllerMetrics>,
}

/// The ReplicaSet controller (apps/v1 ReplicaSets; events from
/// `replicaset-controller`, queue `replicaset`).
pub type ReplicaSetController = Controller<ReplicaSet>;

/// The ReplicationController controller, upstream's `ReplicationManager`
/// (v1 ReplicationControllers; events from `replication-controller`, queue
/// `replicationmanager`).
pub type ReplicationManager = Controller<ReplicationController>;

impl<O: ReplicaOwner> fmt::Debug for Controller<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Controller")
            .field("kind", &<O as k8s_openapi::Resource>::KIND)
            .field("workers", &self.workers)
            .field("burst_replicas", &self.shared.burst_replicas)
            .field("queue", &self.shared.queue)
            .finish_non_exhaustive()
    }
}

impl<O: ReplicaOwner> Controller<O> {
    /// A controller against the cluster behind `client`.
    ///
    /// Registers its informers (pods and owners, all namespaces or
    /// `options.namespace`) on `factory`, which shares them with other
    /// controllers (one watch per resource), adds the controller-UID index
    /// and the event handlers, and builds the queue (with the default
    /// controller rate limiter), the expectations and a [`KubePodControl`]
    /// recording events as `replicaset-controller` / `replication-controller`.
    /// With a `registry`, the workqueue and worker metrics are registered in
    /// it; two controllers sharing one registry should use
    /// [`Controller::new_with_metrics`] with one [`ControllerMetrics`].
    ///
    /// The caller starts the factory (`factory.start()`) after building
    /// every controller.
    ///
    /// # Errors
    /// None at present; the `Result` leaves room for validation.
    pub fn new(
        client: kube::Client,
        factory: &SharedInformerFactory,
        options: ControllerOptions,
        registry: Option<&mut prometheus_client::registry::Registry>,
    ) -> Result<Self, Error> {
        let metrics = registry.map(ControllerMetrics::register);
        Self::new_with_metrics(client, factory, options, metrics)
    }

    /// Like [`Controller::new`], recording metrics through `metrics` (which
    /// may be shared by several controllers) instead of registering them.
    ///
    /// # Errors
    /// None at present; the `Result` leaves room for validation.
    pub fn new_with_metrics(
        client: kube::Client,
        factory: &SharedInformerFactory,
        options: ControllerOptions,
        metrics: Option<ControllerMetrics>,
    ) -> Result<Self, Error> {
        let config = watcher::Config::default();
        let (pods, owners) = match &options.namespace {
            Some(ns) => (
                factory.namespaced::<Pod>(ns, config.clone()),
                factory.namespaced::<O>(ns, config),
            ),
            None => (factory.all::<Pod>(config.clone()), factory.all::<O>(config)),
        };
        let pod_control: Arc<dyn PodControl> =
            Arc::new(KubePodControl::new(client.clone(), O::CONTROLLER_NAME));
        let owner_client: Arc<dyn OwnerClient<O>> = Arc::new(KubeOwnerClient::new(client.clone()));
        let recorder = Recorder::new(client, O::CONTROLLER_NAME.into());
        let mut queue = WorkQueue::builder().name(O::QUEUE_NAME);
        if let Some(metrics) = &metrics {
            queue = queue.metrics_provider(metrics.queue_provider());
        }
        Ok(Self::assemble(
            pods,
            owners,
            pod_control,
            owner_client,
            &options,
            queue.build(),
            Some(recorder),
            metrics,
        ))
    }

    /// A controller over informers, pod control and owner client you
    /// provide: manual informers fed by hand and a
    /// [`FakePodControl`](ctrlkit_podcontrol::FakePodControl) in unit
    /// tests. Adds the controller-UID index and the event handlers to both
    /// informers; no events are recorded for invalid owners and no metrics
    /// are kept.
    pub fn from_parts(
        pods: Informer<Pod>,
        owners: Informer<O>,
        pod_control: Arc<dyn PodControl>,
        owner_client: Arc<dyn OwnerClient<O>>,
        options: ControllerOptions,
    ) -> Self {
        Self::assemble(
            pods,
            owners,
            pod_control,
            owner_client,
            &options,
            WorkQueue::new(),
            None,
            None,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn assemble(
        pods: Informer<Pod>,
        owners: Informer<O>,
        pod_control: Arc<dyn PodControl>,
        owner_client: Arc<dyn OwnerClient<O>>,
        options: &ControllerOptions,
        queue: WorkQueue<String>,
        recorder: Option<Recorder>,
        metrics: Option<ControllerMetrics>,
    ) -> Self {
        pods.add_index_if_absent(BY_CONTROLLER_UID, index_by_controller_uid);
        pods::add_orphan_label_index(&pods);
        owners.add_index_if_absent(BY_CONTROLLER_UID, index_by_controller_uid);
        let shared = Arc::new(Shared {
            pods: pods.store(),
            owners: owners.store(),
            queue,
            expectations: ControllerExpectations::with_ttl(options.expectations_ttl),
            pod_control,
            owner_client,
            burst_replicas: options.burst_replicas.max(1),
            recorder,
            metrics: metrics.clone(),
            churn: churn::ChurnTracker::new(options.churn_guard.clone()),
            consistency: read_own_writes::consistency_store(
                options.read_own_writes,
                options.read_own_writes_max_wait,
                &pods.store(),
                &owners.store(),
            ),
            counters: counters::SyncCounters::default(),
        });
        owners.add_event_handler(handlers::OwnerHandler(Arc::clone(&shared)));
        pods.add_event_handler(handlers::PodHandler(Arc::clone(&shared)));
        Self {
            shared,
            pod_informer: pods,
            owner_informer: owners,
            workers: options.workers.max(1),
            metrics,
        }
    }

    /// Whether both informer caches have completed their first list (for
    /// `/readyz`).
    pub fn has_synced(&self) -> bool {
        self.pod_informer.has_synced() && self.owner_informer.has_synced()
    }

    /// Waits for the informer caches, then runs the workers until
    /// `shutdown` is cancelled; syncs in flight then finish before it
    /// returns (the queue is shut down with drain). The caller starts the
    /// informers (`factory.start()`).
    ///
    /// # Errors
    /// [`Error::CacheSync`] if an informer stops before it synced.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), Error> {
        let kind = <O as k8s_openapi::Resource>::KIND;
        let synced = async {
            self.pod_informer.wait_for_cache_sync().await?;
            self.owner_informer.wait_for_cache_sync().await
        };
        tokio::select! {
            result = synced => result.map_err(Error::CacheSync)?,
            () = shutdown.cancelled() => {
                self.shared.queue.shut_down();
                return Ok(());
            }
        }
        tracing::info!(
            kind,
            workers = self.workers,
            "caches synced; starting workers"
        );
        let shared = Arc::clone(&self.shared);
        let handler = move |key: String| {
            let shared = Arc::clone(&shared);
            async move { shared.sync(&key).await }
        };
        let mut workers = Workers::new(self.shared.queue.clone(), handler)
            .name(O::QUEUE_NAME)
            .concurrency(self.workers)
            .display_keys();
        if let Some(metrics) = &self.metrics {
            workers = workers.metrics_provider(metrics.worker_provider());
        }
        let stopped = workers.run(shutdown.cancelled_owned()).await;
        tracing::info!(kind, ?stopped, "workers stopped");
        Ok(())
    }

    /// Syncs one key now, as a worker would (without the queue
    /// bookkeeping): reads the caches, claims pods, creates or deletes
    /// pods, writes the status.
    ///
    /// # Errors
    /// Whatever failed; see [`Error`].
    pub async fn sync(&self, key: &str) -> Result<Action, Error> {
        self.shared.sync(key).await
    }

    /// The controller's queue of owner keys.
    pub fn queue(&self) -> &WorkQueue<String> {
        &self.shared.queue
    }

    /// The controller's expectations, keyed by owner key.
    pub fn expectations(&self) -> &ControllerExpectations {
        &self.shared.expectations
    }

    /// The read-own-writes store: the writes of each owner the informers
    /// have not shown yet (a disabled store when the option is off).
    pub fn consistency(&self) -> &ConsistencyStore {
        &self.shared.consistency
    }

    /// Syncs skipped so far because an informer had not yet observed this
    /// controller's own writes (also `replicaset_controller_stale_sync_skips_total`).
    pub fn stale_sync_skips(&self) -> u64 {
        self.shared.counters.stale_sync_skips()
    }

    /// Pods this controller created that the informer never showed before
    /// their expectations expired, as reported so far (also
    /// `replicaset_controller_lost_creations_total`).
    pub fn lost_creations(&self) -> u64 {
        self.shared.counters.lost_creations_reported()
    }

    /// The pod informer's cache.
    pub fn pod_store(&self) -> Store<Pod> {
        self.shared.pods.clone()
    }

    /// The owner informer's cache.
    pub fn owner_store(&self) -> Store<O> {
        self.shared.owners.clone()
    }

    /// The owners whose selector matches the pod's labels (upstream's
    /// `getPodReplicaSets`): owners with an invalid or empty selector never
    /// match, a pod without labels matches none. More than one is a user
    /// error and logged as a warning.
    pub fn owners_selecting(&self, pod: &Pod) -> Vec<Arc<O>> {
        self.shared.owners_selecting(pod)
    }

    /// Pods of the owners sharing `owner`'s controller, used to rank pods
    /// for deletion by co-location (upstream's `getIndirectlyRelatedPods`).
    pub fn related_pods(&self, owner: &O) -> Vec<Arc<Pod>> {
        self.shared.related_pods(owner)
    }

    /// The pod-add handler (registered on the pod informer).
    pub fn add_pod(&self, pod: &Arc<Pod>) {
        self.shared.add_pod(pod);
    }

    /// The pod-update handler (registered on the pod informer).
    pub fn update_pod(&self, old: &Arc<Pod>, new: &Arc<Pod>) {
        self.shared.update_pod(old, new);
    }

    /// The pod-delete handler (registered on the pod informer); accepts
    /// tombstones.
    pub fn delete_pod(&self, pod: &DeletedObject<Pod>) {
        self.shared.delete_pod(pod);
    }

    /// The owner-add handler (registered on the owner informer).
    pub fn add_owner(&self, owner: &Arc<O>) {
        self.shared.add_owner(owner);
    }

    /// The owner-update handler (registered on the owner informer).
    pub fn update_owner(&self, old: &Arc<O>, new: &Arc<O>) {
        self.shared.update_owner(old, new);
    }

    /// The owner-delete handler (registered on the owner informer); accepts
    /// tombstones.
    pub fn delete_owner(&self, owner: &DeletedObject<O>) {
        self.shared.delete_owner(owner);
    }
}
