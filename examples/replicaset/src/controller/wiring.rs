//! The replica controllers on `ctrlkit-runtime`: the declaration (what
//! they own and watch, indexes, hooks), where they write through, how they
//! join a manager, and their API.

use std::sync::Arc;

use ctrlkit_events::Recorder;
use ctrlkit_informer::{
    BY_CONTROLLER_UID, BY_ORPHAN_LABEL, Informer, ObjectKey, SharedInformerFactory, Transform,
    index_by_controller_uid, index_orphans_by_label,
};
use ctrlkit_podcontrol::{KubePodControl, PodControl};
use ctrlkit_runtime::manager::Manager;
use ctrlkit_runtime::shard::slot_labeller_for;
use ctrlkit_runtime::{Action, ControllerBuilder, Owns};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use tokio_util::sync::CancellationToken;

use super::{
    ControllerMetrics, ControllerOptions, KubeOwnerClient, OwnerClient, PerOwner, Shared, Writers,
    availability, counters, pods, read_own_writes,
};
use crate::Error;
use crate::owner::ReplicaOwner;

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
    pub(super) shared: Arc<Shared<O>>,
}

/// The ReplicaSet controller (apps/v1 ReplicaSets; events from
/// `replicaset-controller`, queue `replicaset`).
pub type ReplicaSetController = Controller<ReplicaSet>;

/// The ReplicationController controller, upstream's `ReplicationManager`
/// (v1 ReplicationControllers; events from `replication-controller`, queue
/// `replicationmanager`).
pub type ReplicationManager = Controller<ReplicationController>;

impl<O: ReplicaOwner> std::fmt::Debug for Controller<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Controller").field(&self.runtime).finish()
    }
}

impl<O: ReplicaOwner> Controller<O> {
    /// Adds the controller to `manager`, which runs it while it leads:
    /// informers from its factory (in `--namespace`, if set), metrics in
    /// its registry (one set of families for every replica controller on
    /// it: [`ControllerMetrics::on_manager`]), and every write (pod
    /// creates, deletes and adoption patches, status writes, events)
    /// through its fenced client, pod writes also through the fence as
    /// their write gate ([`Manager::pod_control`]), so a replica that may
    /// have lost its lease writes nothing. An owner the informer
    /// cannot decode gets a `Warning` `DecodeFailed` event.
    ///
    /// # Errors
    /// [`Error::Build`] if the controller is declared twice on `manager`.
    pub fn add_to(manager: &mut Manager, mut options: ControllerOptions) -> Result<(), Error> {
        options.namespace = manager.namespace().map(str::to_owned);
        let pods = manager.pod_control(O::CONTROLLER_NAME);
        let writers = Writers {
            pod_control: Arc::new(pods.with_created_metadata_only()),
            owner_client: Arc::new(KubeOwnerClient::new(manager.client().clone())),
            recorder: Some(manager.event_recorder(O::CONTROLLER_NAME)),
        };
        let metrics = ControllerMetrics::on_manager(manager);
        let builder = ctrlkit_runtime::Controller::builder(manager.factory());
        let controller = Self::build(builder, Owns::new(), writers, &options, Some(metrics))?;
        manager.add_controller(controller.runtime, Shared::reconcile, controller.shared);
        Ok(())
    }

    /// A controller against the cluster behind `client`, with informers
    /// (pods and owners, all namespaces or `options.namespace`) from
    /// `factory`, which shares them with other controllers; the caller
    /// starts the factory (`factory.start()`) after building every
    /// controller. With a `registry`, the controller's metrics are
    /// registered in it (one registry per controller kind). A `factory`
    /// carrying a [`ShardMember`](ctrlkit_runtime::shard::ShardMember)
    /// extension shards the controller, and its pods are created with
    /// their owner's slot label, as on a `--shard-ring` manager.
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
        let builder = ctrlkit_runtime::Controller::builder(factory);
        let recorder = Recorder::new(client.clone(), O::CONTROLLER_NAME);
        let mut pods = KubePodControl::with_event_recorder(client.clone(), recorder.clone());
        if let Some(labeller) = slot_labeller_for(factory) {
            pods = pods.with_child_labeller(labeller);
        }
        let writers = Writers {
            pod_control: Arc::new(pods.with_created_metadata_only()),
            owner_client: Arc::new(KubeOwnerClient::new(client)),
            recorder: Some(recorder),
        };
        Self::build(builder, Owns::new(), writers, &options, metrics)
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
    /// selector matches them, pod updates wake their owner only for what
    /// the sync acts on, a pod turning ready looks again after
    /// `minReadySeconds`, cached pods slimmed if asked), the indexes the
    /// sync reads, read-own-writes, and the per-owner state dropped with
    /// the owner.
    fn build(
        builder: ControllerBuilder<'_, O>,
        owns: Owns<O, Pod>,
        writers: Writers<O>,
        options: &ControllerOptions,
        metrics: Option<ControllerMetrics>,
    ) -> Result<Self, Error> {
        let per_owner = Arc::new(PerOwner::new(options.churn_guard.clone()));
        let counters = Arc::new(counters::SyncCounters::default());
        let owns = match options.pod_cache_transform() {
            Some(transform) => owns.transform(transform),
            None => owns,
        };
        let owns = owns
            .orphans(pods::orphan_owner_keys)
            .update_filter(pods::pod_update_matters)
            .requeue_after(|old, new, owner: &O| availability::min_ready_requeue(old, new, owner))
            .index(BY_ORPHAN_LABEL, index_orphans_by_label);
        let (echoes, forget) = (Arc::clone(&per_owner), Arc::clone(&per_owner));
        let count_skip = read_own_writes::skip_counter::<O>(&counters, metrics.as_ref());
        let mut builder = builder
            .name(O::QUEUE_NAME)
            .event_reporter(O::CONTROLLER_NAME)
            .workers(options.workers.max(1))
            .expectations_ttl(options.expectations_ttl)
            .batch_period(options.batch_period)
            .index(BY_CONTROLLER_UID, index_by_controller_uid)
            .owns_with(owns)
            // The echo of the controller's own status write changes
            // nothing a sync decides (own_status.rs).
            .owner_update_filter(move |old, new| !echoes.own_status.is_echo(old, new))
            .on_owner_deleted(move |key| forget.forget(&key.to_string()))
            .on_stale_skip(count_skip);
        if options.drop_owner_managed_fields {
            builder = builder.transform(Transform::drop_managed_fields());
        }
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
        let shared = Arc::new(Shared {
            pods: runtime.store_of().ok_or(Error::MissingCache("pods"))?,
            owners: runtime.store(),
            expectations: Arc::clone(runtime.expectations()),
            writers,
            burst_replicas: options.burst_replicas.max(1),
            metrics,
            per_owner,
            consistency: runtime.consistency().clone(),
            counters,
        });
        Ok(Self { runtime, shared })
    }

    /// Waits for the informer caches, then runs the workers until
    /// `shutdown` is cancelled; syncs in flight then finish before it
    /// returns. The caller starts the informers (`factory.start()`).
    ///
    /// # Errors
    /// [`Error::Run`] if an informer stops before it synced.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), Error> {
        self.runtime
            .run(Shared::reconcile, self.shared, shutdown.cancelled_owned())
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
            .reconcile_once(key.clone(), Shared::reconcile, Arc::clone(&self.shared))
            .await
    }

    /// The runtime controller underneath: its caches (`store`,
    /// `store_of::<Pod>`), queue, expectations (keyed `namespace/name`),
    /// read-own-writes store, `has_synced`, and event handlers
    /// ([`owned_handler`](ctrlkit_runtime::Controller::owned_handler)
    /// drives it as the pod informer would, in tests).
    pub fn runtime(&self) -> &ctrlkit_runtime::Controller<O> {
        &self.runtime
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

    /// Pods of the owners sharing `owner`'s controller, used to rank pods
    /// for deletion by co-location (upstream's `getIndirectlyRelatedPods`).
    pub fn related_pods(&self, owner: &O) -> Vec<Arc<Pod>> {
        self.shared.related_pods(owner)
    }
}
