//! The generic replica controller: its sync and what it keeps, and its
//! two instances.

mod availability;
mod churn;
mod client;
mod counters;
mod creations;
mod deletion_cost;
mod invalid_spec;
mod manage;
mod metrics;
mod options;
mod own_status;
mod pods;
mod read_own_writes;
mod slim_pod;
mod status;
mod sync;
mod tracking_metrics;
mod wiring;

use std::sync::Arc;

use ctrlkit_consistency::ConsistencyStore;
use ctrlkit_events::Recorder;
use ctrlkit_expectations::ControllerExpectations;
use ctrlkit_informer::{ObjectKey, Store};
use ctrlkit_podcontrol::PodControl;
use k8s_openapi::api::core::v1::Pod;

use crate::owner::ReplicaOwner;

pub use churn::{
    ChurnGuardOptions, DEFAULT_CHURN_BACKOFF_BASE, DEFAULT_CHURN_BACKOFF_MAX,
    DEFAULT_CHURN_REASONS, DEFAULT_CHURN_WINDOW, DEFAULT_FAILED_PODS_KEPT, FAILED_POD_CHURN_REASON,
};
pub use client::{KubeOwnerClient, OwnerClient};
pub use invalid_spec::{EMPTY_SELECTOR_REASON, INVALID_SELECTOR_REASON, SELECTOR_MISMATCH_REASON};
pub use metrics::ControllerMetrics;
pub use options::{BURST_REPLICAS, ControllerOptions, DEFAULT_BATCH_PERIOD, DEFAULT_WORKERS};
pub use pods::owners_selecting;
pub use slim_pod::slim_pod;
pub use status::{
    FAILED_CREATE_REASON, FAILED_DELETE_REASON, calculate_status, desired_replicas,
    status_unchanged,
};
pub use wiring::{Controller, ReplicaSetController, ReplicationManager};

/// What every sync of one controller shares: the reconcile's context.
pub(crate) struct Shared<O: ReplicaOwner> {
    pub(crate) pods: Store<Pod>,
    pub(crate) owners: Store<O>,
    pub(crate) expectations: Arc<ControllerExpectations>,
    pub(crate) writers: Writers<O>,
    pub(crate) burst_replicas: usize,
    pub(crate) metrics: Option<ControllerMetrics>,
    pub(crate) per_owner: Arc<PerOwner>,
    pub(crate) consistency: ConsistencyStore,
    pub(crate) counters: Arc<counters::SyncCounters>,
}

/// The API side of a controller: how it writes pods, reads and writes its
/// owners, and records events (none in unit tests built from parts).
pub(crate) struct Writers<O> {
    pub(crate) pod_control: Arc<dyn PodControl>,
    pub(crate) owner_client: Arc<dyn OwnerClient<O>>,
    pub(crate) recorder: Option<Recorder>,
}

/// What a controller keeps per owner besides its expectations, dropped
/// with the owner (by the informer's delete, or a sync that finds it gone).
pub(crate) struct PerOwner {
    /// Pods failing right after creation, for the churn guard.
    pub(crate) churn: churn::ChurnTracker,
    /// The last status written, so its echo queues nothing.
    pub(crate) own_status: own_status::OwnStatusWrites,
}

impl PerOwner {
    fn new(churn_guard: ChurnGuardOptions) -> Self {
        Self {
            churn: churn::ChurnTracker::new(churn_guard),
            own_status: own_status::OwnStatusWrites::default(),
        }
    }

    fn forget(&self, key: &str) {
        self.churn.forget(key);
        self.own_status.forget(key);
    }
}

/// The expectations and churn key of an object: `namespace/name`.
pub(crate) fn key_of<K: kube::Resource>(obj: &K) -> String {
    String::from(ObjectKey::from_object(obj))
}

impl<O: ReplicaOwner> Shared<O> {
    /// Drops everything kept per owner (expectations, churn strikes, own
    /// status write, own writes awaited) once the owner is gone.
    pub(crate) fn forget_owner(&self, key: &str) {
        self.expectations.delete_expectations(key);
        self.per_owner.forget(key);
        self.consistency.clear(key);
    }
}
