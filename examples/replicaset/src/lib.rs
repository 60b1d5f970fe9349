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
//! implement. The binaries and the operational shell (metrics, health,
//! leader election) are in [`ops`] and [`cli`].
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
//! use ctrlkit_informer::Informer;
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
//! );
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
//! assert_eq!(controller.queue().try_get().as_deref(), Some("default/web"));
//!
//! controller.sync("default/web").await.unwrap();
//! assert_eq!(fake.create_count(), 3);
//! // Until the informer shows the three pods, the next sync creates none.
//! controller.sync("default/web").await.unwrap();
//! assert_eq!(fake.create_count(), 3);
//! # });
//! ```

pub mod cli;
mod compat;
mod controller;
mod error;
pub mod ops;
mod owner;

pub use controller::{
    BURST_REPLICAS, Controller, ControllerMetrics, ControllerOptions, DEFAULT_WORKERS,
    EMPTY_SELECTOR_REASON, FAILED_CREATE_REASON, FAILED_DELETE_REASON, INVALID_SELECTOR_REASON,
    KubeOwnerClient, OwnerClient, ReplicaSetController, ReplicationManager,
    SELECTOR_MISMATCH_REASON, calculate_status, desired_replicas, object_key, split_key,
    status_unchanged,
};
pub use controller::{
    ChurnGuardOptions, DEFAULT_CHURN_BACKOFF_BASE, DEFAULT_CHURN_BACKOFF_MAX,
    DEFAULT_CHURN_REASONS, DEFAULT_CHURN_WINDOW, DEFAULT_FAILED_PODS_KEPT, FAILED_POD_CHURN_REASON,
};
pub use error::Error;
pub use owner::{REPLICA_FAILURE, ReplicaCondition, ReplicaOwner, ReplicaStatus};
