//! The generic replica controller, its two instances, and their wiring on
//! `ctrlkit-runtime`.

mod availability;
mod churn;
mod client;
mod counters;
mod creations;
mod deletion_cost;
mod invalid_spec;
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
    BY_CONTROLLER_UID, BY_ORPHAN_LABEL, Informer, ObjectKey, SharedInformerFactory, Store,
    index_by_controller_uid, index_orphans_by_label,
};
use ctrlkit_podcontrol::{KubePodControl, PodControl};
use ctrlkit_runtime::manager::{FnRunnable, Manager};
use ctrlkit_runtime::{Action, ControllerBuilder, Owns};
use ctrlkit_workqueue::WorkQueue;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use kube::runtime::events::Recorder;
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::owner::ReplicaOwner;

pub use churn::{
    ChurnGuardOptions, DEFAULT_CHURN_BACKOFF_BASE, DEFAULT_CHURN_BACKOFF_MAX,
    DEFAULT_CHURN_REASONS, DEFAULT_CHURN_WINDOW, DEFAULT_FAILED_PODS_KEPT, FAILED_POD_CHURN_REASON,
};
pub use client::{KubeOwnerClient, OwnerClient};
pub use invalid_spec::{EMPTY_SELECTOR_REASON, INVALID_SELECTOR_REASON, SELECTOR_MISMATCH_REASON};
pub use metrics::ControllerMetrics;
pub use pods::owners_selecting;
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

/// What every sync of one controller shares: the reconcile's context.
pub(crate) struct Shared<O: ReplicaOwner> {
    pub(crate) pods: Store<Pod>,
    pub(crate) owners: Store<O>,
    pub(crate) expectations: Arc<ControllerExpectations>,
    pub(crate) pod_control: Arc<dyn PodControl>,
    pub(crate) owner_client: Arc<dyn OwnerClient<O>>,
    pub(crate) burst_replicas: usize,
    pub(crate) recorder: Option<Recorder>,
    pub(crate) metrics: Option<ControllerMetrics>,
    pub(crate) churn: Arc<churn::ChurnTracker>,
    pub(crate) consistency: ConsistencyStore,
    pub(crate) counters: Arc<counters::SyncCounters>,
}

/// The API side of a controller: how it writes pods, reads and writes its
/// owners, and records events.
struct Writers<O> {
    pod_control: Arc<dyn PodControl>,
    owner_client: Arc<dyn OwnerClient<O>>,
    recorder: Option<Recorder>,
}

impl<O: ReplicaOwner> Writers<O> {
    /// Writers through `client`; pod writes also pass `gate`, if any.
    fn kube(client: kube::Client, gate: Option<ctrlkit_runtime::manager::LeaderFence>) -> Self {
        let mut pods = KubePodControl::new(client.clone(), O::CONTROLLER_NAME);
        if let Some(fence) = gate {
            pods = pods.with_write_gate(Arc::new(fence));
        }
        Self {
            pod_control: Arc::new(pods),
            owner_client: Arc::new(KubeOwnerClient::new(client.clone())),
            recorder: Some(Recorder::new(client, O::CONTROLLER_NAME.into())),
        }
    }
}

/// A controller that keeps each owner's (ReplicaSet's or
/// ReplicationController's) pod count at `spec.replicas`, the way the
/// kube-controller-manager does: a [`ctrlkit_runtime::Controller`] over
/// the owners, owning pods, with this crate's sync as its reconcile.
///
/// See the [crate documentation](crate) for the behaviour. Add it to a
/// [`Manager`] with [`Controller::add_to`] (the binaries), build it with
/// [`Controller::new`] (against a cluster) or [`Controller::from_parts`]
/// (tests, custom pod control), then [`run`](Controller::run) it.
pub struct Controller<O: ReplicaOwner> {
    runtime: ctrlkit_runtime::Controller<O>,
    shared: Arc<Shared<O>>,
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
            .field("runtime", &self.runtime)
            .field("burst_replicas", &self.shared.burst_replicas)
            .finish_non_exhaustive()
    }
}

/// The expectations and churn key of an object: `namespace/name`.
pub(crate) fn key_of<K: kube::Resource>(obj: &K) -> String {
    ObjectKey::from_object(obj).to_string()
}

impl<O: ReplicaOwner> Shared<O> {
    /// Drops everything kept per owner (expectations, churn strikes, own
    /// writes awaited) once the owner is gone.
    pub(crate) fn forget_owner(&self, key: &str) {
        self.expectations.delete_expectations(key);
        self.churn.forget(key);
        self.consistency.clear(key);
    }
}

/// The reconcile the runtime calls for each key.
async fn reconcile<O: ReplicaOwner>(
    key: ObjectKey,
    owner: Option<Arc<O>>,
    shared: Arc<Shared<O>>,
) -> Result<Action, Error> {
    shared.sync(&key, owner).await
}

impl<O: ReplicaOwner> Controller<O> {
    /// Adds the controller to `manager`, which runs it while it leads:
    /// informers from its factory (in `--namespace`, if set), metrics in
    /// its registry, and every write — pod creates, deletes and adoption
    /// patches, status writes, events — through its fenced client, pod
    /// writes also through the fence as their write gate, so a replica
    /// that may have lost its lease writes nothing.
    ///
    /// # Errors
    /// [`Error::Build`] if the controller is declared twice on `manager`.
    pub fn add_to(manager: &mut Manager, mut options: ControllerOptions) -> Result<(), Error> {
        options.namespace = manager.namespace().map(str::to_owned);
        let writers = Writers::kube(manager.client().clone(), Some(manager.fence()));
        let metrics = ControllerMetrics::register(manager.registry_mut());
        let builder = ctrlkit_runtime::Controller::builder(manager.factory());
        let controller = Self::build(builder, Owns::new(), writers, &options, Some(metrics))?;
        manager.add(FnRunnable::new(O::QUEUE_NAME, move |stop| {
            controller.run(stop)
        }));
        Ok(())
    }

    /// A controller against the cluster behind `client`, with informers
    /// (pods and owners, all namespaces or `options.namespace`) from
    /// `factory`, which shares them with other controllers; the caller
    /// starts the factory (`factory.start()`) after building every
    /// controller. With a `registry`, the controller's metrics are
    /// registered in it; two controllers sharing one registry should use
    /// [`Controller::new_with_metrics`] with one [`ControllerMetrics`].
    ///
    /// # Errors
    /// [`Error::Build`] for an empty `options.namespace`.
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
    /// may be shared by several controllers of different kinds).
    ///
    /// # Errors
    /// As [`Controller::new`], and [`Error::Build`] if `metrics` already
    /// serves a controller of this kind.
    pub fn new_with_metrics(
        client: kube::Client,
        factory: &SharedInformerFactory,
        options: ControllerOptions,
        metrics: Option<ControllerMetrics>,
    ) -> Result<Self, Error> {
        let builder = ctrlkit_runtime::Controller::builder(factory);
        Self::build(
            builder,
            Owns::new(),
            Writers::kube(client, None),
            &options,
            metrics,
        )
    }

    /// A controller over informers, pod control and owner client you
    /// provide: manual informers fed by hand and a
    /// [`FakePodControl`](ctrlkit_podcontrol::FakePodControl) in unit
    /// tests. No events are recorded for invalid owners and no metrics are
    /// kept.
    ///
    /// # Errors
    /// [`Error::Build`] if an informer already has a different transform
    /// or index of the names the controller uses.
    pub fn from_parts(
        pods: Informer<Pod>,
        owners: Informer<O>,
        pod_control: Arc<dyn PodControl>,
        owner_client: Arc<dyn OwnerClient<O>>,
        options: ControllerOptions,
    ) -> Result<Self, Error> {
        let writers = Writers {
            pod_control,
            owner_client,
            recorder: None,
        };
        let builder = ctrlkit_runtime::Controller::builder_with(owners);
        Self::build(builder, Owns::new().informer(pods), writers, &options, None)
    }

    /// The wiring: owners and their pods (orphans reach the owners whose
    /// selector matches them, unchanged pods do not wake their owner, a pod
    /// turning ready looks again after `minReadySeconds`), the indexes the
    /// sync reads, read-own-writes, and the per-owner state dropped with
    /// the owner.
    fn build(
        builder: ControllerBuilder<'_, O>,
        owns: Owns<O, Pod>,
        writers: Writers<O>,
        options: &ControllerOptions,
        metrics: Option<ControllerMetrics>,
    ) -> Result<Self, Error> {
        let churn = Arc::new(churn::ChurnTracker::new(options.churn_guard.clone()));
        let counters = Arc::new(counters::SyncCounters::default());
        let owns = owns
            .orphans(|pod, owners| {
                owners_selecting(owners, pod)
                    .iter()
                    .map(|o| ObjectKey::from_object(o.as_ref()))
                    .collect()
            })
            .update_filter(pods::pod_update_matters)
            .requeue_after(|old, new, owner: &O| availability::min_ready_requeue(old, new, owner))
            .index(BY_ORPHAN_LABEL, index_orphans_by_label);
        let forget = Arc::clone(&churn);
        let skipped = (Arc::clone(&counters), metrics.clone());
        let mut builder = builder
            .name(O::QUEUE_NAME)
            .workers(options.workers.max(1))
            .expectations_ttl(options.expectations_ttl)
            .index(BY_CONTROLLER_UID, index_by_controller_uid)
            .owns_with(owns)
            .on_owner_deleted(move |key| forget.forget(&key.to_string()))
            .on_stale_skip(move |_, why| {
                read_own_writes::count_skip::<O>(&skipped.0, skipped.1.as_ref(), why)
            });
        if options.read_own_writes {
            builder = builder.read_own_writes(options.read_own_writes_max_wait);
        }
        if let Some(namespace) = &options.namespace {
            builder = builder.namespace(namespace.clone());
        }
        if let Some(metrics) = &metrics {
            builder = builder.metrics(metrics.runtime());
        }
        let runtime = builder.build()?;
        let pods = runtime
            .store_of::<Pod>()
            .ok_or(Error::MissingCache("pods"))?;
        let shared = Arc::new(Shared {
            pods,
            owners: runtime.store(),
            expectations: Arc::clone(runtime.expectations()),
            pod_control: writers.pod_control,
            owner_client: writers.owner_client,
            burst_replicas: options.burst_replicas.max(1),
            recorder: writers.recorder,
            metrics,
            churn,
            consistency: runtime.consistency().clone(),
            counters,
        });
        Ok(Self { runtime, shared })
    }

    /// Whether both informer caches have completed their first list (for
    /// `/readyz`).
    pub fn has_synced(&self) -> bool {
        self.runtime.has_synced()
    }

    /// Waits for the informer caches, then runs the workers until
    /// `shutdown` is cancelled; syncs in flight then finish before it
    /// returns. The caller starts the informers (`factory.start()`).
    ///
    /// # Errors
    /// [`Error::Run`] if an informer stops before it synced.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), Error> {
        self.runtime
            .run(reconcile::<O>, self.shared, shutdown.cancelled_owned())
            .await?;
        Ok(())
    }

    /// Syncs one key now, as a worker would (without the queue
    /// bookkeeping): reads the caches, claims pods, creates or deletes
    /// pods, writes the status.
    ///
    /// # Errors
    /// Whatever failed; see [`Error`].
    pub async fn sync(&self, key: &ObjectKey) -> Result<Action, Error> {
        self.runtime
            .reconcile_once(key.clone(), reconcile::<O>, Arc::clone(&self.shared))
            .await
    }

    /// The runtime controller underneath: its caches, queue and event
    /// handlers ([`owned_handler`](ctrlkit_runtime::Controller::owned_handler)
    /// drives it as the pod informer would, in tests).
    pub fn runtime(&self) -> &ctrlkit_runtime::Controller<O> {
        &self.runtime
    }

    /// The controller's queue of owner keys.
    pub fn queue(&self) -> &WorkQueue<ObjectKey> {
        self.runtime.queue()
    }

    /// The controller's expectations, keyed by owner key (`namespace/name`).
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

    /// The owners whose selector matches the pod's labels (see
    /// [`owners_selecting`]).
    pub fn owners_selecting(&self, pod: &Pod) -> Vec<Arc<O>> {
        owners_selecting(&self.shared.owners, pod)
    }

    /// Pods of the owners sharing `owner`'s controller, used to rank pods
    /// for deletion by co-location (upstream's `getIndirectlyRelatedPods`).
    pub fn related_pods(&self, owner: &O) -> Vec<Arc<Pod>> {
        self.shared.related_pods(owner)
    }
}
