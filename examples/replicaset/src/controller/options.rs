//! The controllers' settings.

use std::time::Duration;

use ctrlkit_expectations::DEFAULT_EXPECTATIONS_TTL;
use ctrlkit_informer::Transform;
use k8s_openapi::api::core::v1::Pod;

use super::ChurnGuardOptions;
use super::slim_pod::slim_pod_transform;

/// How many pods one sync may create or delete at most: upstream's
/// `BurstReplicas`.
pub const BURST_REPLICAS: usize = 500;

/// How many keys are synced at once by default: the kube-controller-manager's
/// `--concurrent-replicaset-syncs` / `--concurrent-rc-syncs`.
pub const DEFAULT_WORKERS: usize = 5;

/// The binaries' `--batch-period` default (see
/// [`ControllerOptions::batch_period`] why); library users opt in.
pub const DEFAULT_BATCH_PERIOD: Duration = Duration::from_millis(250);

/// Settings of a [`Controller`](crate::Controller). `Default` gives upstream's numbers.
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
    /// Cache pods slimmed by [`slim_pod`](crate::slim_pod) to what the
    /// controller reads (default `false`: full pods, as other users of a
    /// shared pod informer may need them; the binaries turn it on).
    pub slim_pod_cache: bool,
    /// Cache owners without `metadata.managedFields`, skipped unread when
    /// the owner informer decodes them
    /// ([`Transform::drop_managed_fields`]): the controller never reads
    /// them, and a status write without them keeps the server's (the API
    /// server ignores the managedFields of a status subresource write).
    /// Default `false`: whoever shares the owner informer may read them;
    /// the binaries turn it on.
    pub drop_owner_managed_fields: bool,
    /// Events for one owner within this period of its last sync share one
    /// sync at the period's end; the first event of a quiet owner is synced
    /// at once ([`ctrlkit_runtime::ControllerBuilder::batch_period`]).
    /// Default zero: every event is queued at once, as upstream's
    /// ReplicaSet controller does. The binaries use
    /// [`DEFAULT_BATCH_PERIOD`] (250 ms): it folds the pod events of one
    /// burst (the creates of one sync, the pods turning ready a few
    /// milliseconds apart, the echo of the status write) into a few syncs,
    /// while a status lags its pods by at most a quarter second (upstream's
    /// Job controller waits a full second on every pod event).
    pub batch_period: Duration,
}

impl ControllerOptions {
    /// The transform the pod informer gets under these options: with
    /// [`slim_pod_cache`](Self::slim_pod_cache), [`slim_pod`](crate::slim_pod),
    /// each pod decoded straight into its slim form (the fields it drops
    /// are skipped in the JSON, not decoded and then dropped); otherwise
    /// none.
    pub fn pod_cache_transform(&self) -> Option<Transform<Pod>> {
        self.slim_pod_cache.then(slim_pod_transform)
    }
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
            slim_pod_cache: false,
            drop_owner_managed_fields: false,
            batch_period: Duration::ZERO,
        }
    }
}
