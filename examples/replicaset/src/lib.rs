//! The ReplicaSet and ReplicationController controllers of the
//! kube-controller-manager, rebuilt from ctrlkit's crates.
//!
//! # What the controller does
//!
//! A ReplicaSet (or its predecessor, the ReplicationController) says "keep
//! `spec.replicas` pods matching `spec.selector` alive, made from
//! `spec.template`". The controller watches owners and pods through shared
//! informers and, for every owner that may need work, runs a *sync*:
//!
//! 1. **Read-own-writes, then expectations.** Until the informers show the
//!    resourceVersions of the pods this controller created, adopted or
//!    released for the owner and of its last status write, the sync is
//!    skipped and retried (Kubernetes 1.36; at most 30 s per write; see
//!    [`ControllerOptions::read_own_writes`]). If the owner is still waiting
//!    to *see* pods it created or deleted in an earlier sync, it does not
//!    create or delete more; it only reports status. Creations are tracked
//!    by UID, so only pods this controller created count (beyond upstream);
//!    expectations expire after 5 minutes in case a watch event was lost,
//!    and created pods never seen by then are reported as lost.
//! 2. **Find its pods.** The pods it controls plus the namespace's orphans,
//!    from an index on the pod cache (the cost is proportional to the
//!    owner's own pods, as upstream since 1.33). Finished and terminating
//!    pods do not count.
//! 3. **Claim.** Orphans matching the selector are adopted (after one live
//!    read confirming the owner still exists and is not being deleted);
//!    owned pods that stopped matching are released.
//! 4. **Manage.** Too few pods: create the difference, at most
//!    [`BURST_REPLICAS`] (500) per sync, in slow-start batches 1, 2, 4, …
//!    that stop at the first failure. Too many: delete the surplus, least
//!    valuable first (unscheduled, pending, not ready, low deletion cost,
//!    crowded node, recently ready, many restarts, young).
//! 5. **Status.** Write `replicas`, `fullyLabeledReplicas`, `readyReplicas`,
//!    `availableReplicas`, `terminatingReplicas` (ReplicaSets only),
//!    `observedGeneration` and a `ReplicaFailure` condition
//!    (`FailedCreate`/`FailedDelete`) while creating or deleting fails.
//!    Nothing is written when nothing changed; a failed write is retried
//!    once after a fresh read.
//! 6. **Requeue** when the next ready pod reaches `minReadySeconds` while
//!    some are not yet available, since nothing announces that moment (as
//!    upstream since 1.34).
//!
//! **Beyond upstream: the churn guard.** When pods fail right after
//! creation (the kubelet rejects them with `OutOfpods`, `NodeAffinity`, …),
//! upstream replaces them at once, for ever: thousands of `Failed` pods. By
//! default this controller backs off creating pods for that owner
//! exponentially, sets `ReplicaFailure` with reason
//! [`FAILED_POD_CHURN_REASON`], emits a Warning event, and keeps only the
//! newest few `Failed` pods; see [`ChurnGuardOptions`] (and
//! [`ChurnGuardOptions::disabled`] for upstream's behaviour).
//!
//! **Beyond upstream: invalid specs are reported on the owner.** Before
//! step 2, an owner whose selector cannot work (invalid, empty, or not
//! selecting its own template's pods) is refused: a Warning event and
//! `ReplicaFailure` with reason [`INVALID_SELECTOR_REASON`],
//! [`EMPTY_SELECTOR_REASON`] or [`SELECTOR_MISMATCH_REASON`] (upstream only
//! logs). It is not retried until the owner changes; the first sync after
//! the fix drops the condition. An owner found deleted mid-sync (status
//! write 404, or gone at the adoption recheck) ends the sync without an
//! error and drops its expectations ([`Error::OwnerGone`]).
//!
//! [`ReplicaSetController`] and [`ReplicationManager`] are the same generic
//! [`Controller`] over the [`ReplicaOwner`] trait, which both API types
//! implement.
//!
//! # Built on ctrlkit-runtime
//!
//! This crate holds only what is the replica controllers' own: the sync
//! (claim, manage, status), pod ranking, the churn guard, invalid-spec
//! handling and their flags ([`cli::ControllerArgs`]). The rest is
//! [`ctrlkit_runtime`]:
//!
//! - the controller — a `ctrlkit_runtime::Controller` over the owners that
//!   owns pods: orphans are offered to the owners whose selector matches
//!   them ([`owners_selecting`]), a pod update wakes its owner only if it
//!   changes what the sync acts on (labels, owner references, terminal
//!   phase, readiness and its time; docs/performance.md has the rule), a
//!   pod turning ready queues its owner again after `minReadySeconds`;
//!   an owner update that only brings back the status the controller last
//!   wrote wakes nobody (docs/performance.md); with
//!   [`ControllerOptions::slim_pod_cache`] pods are cached as
//!   [`slim_pod`] leaves them, with
//!   [`ControllerOptions::drop_owner_managed_fields`] owners without their
//!   `managedFields` (both on in the binaries); the
//!   owner cache is indexed by controller UID (related owners for ranking)
//!   and the pod cache by controller UID and orphan labels (a sync reads
//!   only its own pods and the orphans it could adopt); keys are typed
//!   [`ObjectKey`](ctrlkit_informer::ObjectKey)s; read-own-writes skips a
//!   sync until the caches show the controller's writes (each skip counted
//!   in `replicaset_controller_stale_sync_skips_total{resource}`); the
//!   churn guard's state is dropped when an owner is deleted;
//! - pod writes — a `KubePodControl` (`ctrlkit-childcontrol` underneath,
//!   events with the API server's messages), wrapped per sync in
//!   `Observed` + `RecordWrites` so creates and adoption patches are
//!   recorded for read-own-writes;
//! - the process — `ctrlkit_runtime::manager`: the binaries flatten its
//!   `ManagerArgs` next to [`cli::ControllerArgs`], call
//!   [`Controller::add_to`] and `run_main` (metrics, health, leader
//!   election, drain, logging). With `--leader-elect` every write (pod
//!   creates, deletes and patches, status writes, events) goes through
//!   the manager's fenced client and the pod writes through the fence as
//!   their write gate: once the lease may have expired (no successful
//!   renewal within the renew deadline, a paused process included) the
//!   controller sends nothing and its workers stop.
//!
//! # Example
//!
//! A unit-test style run: informers fed by hand, a fake pod control, and a
//! tiny in-memory [`OwnerClient`]. Against a cluster use
//! [`Controller::new`] with a [`SharedInformerFactory`](ctrlkit_informer::SharedInformerFactory)
//! and [`Controller::run`].
//!
//! ```
//! use std::sync::Arc;
//! use ctrlkit_informer::{Informer, ObjectKey};
//! use ctrlkit_podcontrol::FakePodControl;
//! use ctrlkit_replicaset::{ControllerOptions, OwnerClient, ReplicaSetController};
//! use k8s_openapi::api::{apps::v1::ReplicaSet, core::v1::Pod};
//! use kube::runtime::watcher::Event;
//!
//! /// Accepts every status write.
//! struct Accept;
//! #[async_trait::async_trait]
//! impl OwnerClient<ReplicaSet> for Accept {
//!     async fn get(&self, _: &str, _: &str) -> Result<Option<ReplicaSet>, kube::Error> {
//!         Ok(None)
//!     }
//!     async fn update_status(&self, rs: &ReplicaSet) -> Result<ReplicaSet, kube::Error> {
//!         Ok(rs.clone())
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let pods = Informer::<Pod>::manual().build();
//! let replica_sets = Informer::<ReplicaSet>::manual().build();
//! let fake = FakePodControl::new();
//! let controller = ReplicaSetController::from_parts(
//!     pods.clone(),
//!     replica_sets.clone(),
//!     Arc::new(fake.clone()),
//!     Arc::new(Accept),
//!     ControllerOptions::default(),
//! )
//! .unwrap();
//!
//! let rs: ReplicaSet = serde_json::from_value(serde_json::json!({
//!     "metadata": {"name": "web", "namespace": "default", "uid": "rs-1", "resourceVersion": "1"},
//!     "spec": {
//!         "replicas": 3,
//!         "selector": {"matchLabels": {"app": "web"}},
//!         "template": {
//!             "metadata": {"labels": {"app": "web"}},
//!             "spec": {"containers": [{"name": "app", "image": "nginx"}]}
//!         }
//!     }
//! })).unwrap();
//! replica_sets.apply_event(Event::Apply(rs));
//! // The add handler queued the ReplicaSet.
//! let key = ObjectKey::new("default", "web");
//! assert_eq!(controller.runtime().queue().try_get(), Some(key.clone()));
//!
//! controller.sync(&key).await.unwrap();
//! assert_eq!(fake.create_count(), 3);
//! // Until the informer shows the three pods, the next sync creates none.
//! controller.sync(&key).await.unwrap();
//! assert_eq!(fake.create_count(), 3);
//! # });
//! ```

pub mod cli;

/// With the `mimalloc` feature, mimalloc is the global allocator.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
mod compat;
mod controller;
mod error;
mod owner;

pub use controller::{
    BURST_REPLICAS, Controller, ControllerMetrics, ControllerOptions, DEFAULT_BATCH_PERIOD,
    DEFAULT_WORKERS, EMPTY_SELECTOR_REASON, FAILED_CREATE_REASON, FAILED_DELETE_REASON,
    INVALID_SELECTOR_REASON, KubeOwnerClient, OwnerClient, ReplicaSetController,
    ReplicationManager, SELECTOR_MISMATCH_REASON, calculate_status, desired_replicas,
    owners_selecting, slim_pod, status_unchanged,
};
pub use controller::{
    ChurnGuardOptions, DEFAULT_CHURN_BACKOFF_BASE, DEFAULT_CHURN_BACKOFF_MAX,
    DEFAULT_CHURN_REASONS, DEFAULT_CHURN_WINDOW, DEFAULT_FAILED_PODS_KEPT, FAILED_POD_CHURN_REASON,
};
pub use error::Error;
pub use owner::{REPLICA_FAILURE, ReplicaCondition, ReplicaOwner, ReplicaStatus};
