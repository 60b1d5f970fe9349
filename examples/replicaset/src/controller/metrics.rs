//! Prometheus metrics of the controllers: client-go's workqueue metrics
//! and controller-runtime's reconcile metrics.

use std::fmt;

use ctrlkit_runtime::manager::Manager;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::tracking_metrics::TrackingMetrics;

/// The metric families a controller records into, registered once per
/// registry and shareable between controllers (each labels its samples with
/// its queue name: `replicaset`, `replicationmanager`).
#[derive(Clone)]
pub struct ControllerMetrics {
    /// `workqueue_*` and `controller_runtime_reconcile_*`.
    runtime: ctrlkit_runtime::ControllerMetrics,
    deletion_age_ratio: Histogram,
    churn_backoffs: Counter,
    churn_failed_pods_deleted: Counter,
    /// Read-own-writes skips and lost creations.
    pub(crate) tracking: TrackingMetrics,
}

impl fmt::Debug for ControllerMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControllerMetrics").finish_non_exhaustive()
    }
}

impl ControllerMetrics {
    /// Registers the `workqueue_*` and `controller_runtime_reconcile_*`
    /// families and upstream's
    /// `replicaset_controller_sorting_deletion_age_ratio` histogram in
    /// `registry`, plus the churn guard's counters
    /// `replicaset_controller_churn_backoffs_total` and
    /// `replicaset_controller_churn_failed_pods_deleted_total`, and
    /// `replicaset_controller_stale_sync_skips_total` and
    /// `replicaset_controller_lost_creations_total`. Call it once per
    /// registry.
    pub fn register(registry: &mut Registry) -> Self {
        let runtime = ctrlkit_runtime::ControllerMetrics::register(registry);
        Self::register_beside(registry, runtime)
    }

    /// The metrics of the replica controllers on `manager`: registered in
    /// the manager's registry by the first of them added, shared by the
    /// next (a ReplicaSet and a ReplicationController controller on one
    /// manager export each family once, as in kube-controller-manager),
    /// with the manager's own `workqueue_*` and `controller_runtime_*`
    /// families ([`Manager::controller_metrics`]), which its other
    /// controllers record into too.
    pub fn on_manager(manager: &mut Manager) -> Self {
        if let Some(metrics) = manager.factory().extension::<Self>() {
            return metrics;
        }
        let runtime = manager.controller_metrics();
        let metrics = Self::register_beside(manager.registry_mut(), runtime);
        // Kept with the manager's factory, which lives as long as it.
        manager.factory().insert_extension(metrics.clone());
        metrics
    }

    /// This crate's own families in `registry`, beside `runtime`'s.
    fn register_beside(
        registry: &mut Registry,
        runtime: ctrlkit_runtime::ControllerMetrics,
    ) -> Self {
        let deletion_age_ratio = Histogram::new(exponential_buckets(0.25, 2.0, 6));
        registry.register(
            "replicaset_controller_sorting_deletion_age_ratio",
            "Age of each ready pod deleted by a ranked scale-down divided by the age of the youngest ready pod",
            deletion_age_ratio.clone(),
        );
        // The churn guard's counters (not in upstream).
        let churn_backoffs = Counter::default();
        registry.register(
            "replicaset_controller_churn_backoffs",
            "Syncs that saw pods fail right after creation and backed off pod creation for their owner",
            churn_backoffs.clone(),
        );
        let churn_failed_pods_deleted = Counter::default();
        registry.register(
            "replicaset_controller_churn_failed_pods_deleted",
            "Failed pods deleted by the churn guard because their owner kept more than the allowed number",
            churn_failed_pods_deleted.clone(),
        );
        let tracking = TrackingMetrics::register(registry);
        Self {
            tracking,
            churn_backoffs,
            churn_failed_pods_deleted,
            runtime,
            deletion_age_ratio,
        }
    }

    pub(crate) fn observe_deletion_age_ratios(&self, ratios: &[f64]) {
        for ratio in ratios {
            self.deletion_age_ratio.observe(*ratio);
        }
    }

    pub(crate) fn inc_churn_backoffs(&self) {
        self.churn_backoffs.inc();
    }

    pub(crate) fn inc_churn_failed_pods_deleted(&self, n: usize) {
        self.churn_failed_pods_deleted
            .inc_by(u64::try_from(n).unwrap_or(u64::MAX));
    }

    /// The runtime's families, for the controller builder.
    pub(crate) fn runtime(&self) -> &ctrlkit_runtime::ControllerMetrics {
        &self.runtime
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use ctrlkit_runtime::manager::{Manager, ManagerConfig};

    use crate::{ControllerOptions, ReplicaSetController, ReplicationManager};

    #[tokio::test]
    async fn both_replica_controllers_on_one_manager_export_each_family_once() {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let mut manager =
            Manager::with_client(client, ManagerConfig::new("replica-controllers")).unwrap();
        ReplicaSetController::add_to(&mut manager, ControllerOptions::default()).unwrap();
        ReplicationManager::add_to(&mut manager, ControllerOptions::default()).unwrap();
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, manager.registry()).unwrap();
        let families: Vec<&str> = text.lines().filter(|l| l.starts_with("# TYPE ")).collect();
        let distinct: HashSet<&&str> = families.iter().collect();
        assert_eq!(
            families.len(),
            distinct.len(),
            "a family exported twice:\n{text}"
        );
        for family in [
            "replicaset_controller_sorting_deletion_age_ratio",
            "replicaset_controller_churn_backoffs",
            "workqueue_adds",
        ] {
            assert!(text.contains(family), "{family} missing:\n{text}");
        }
    }
}
