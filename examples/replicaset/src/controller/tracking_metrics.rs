//! Metrics of read-own-writes and creation tracking.

use ctrlkit_consistency::GroupResource;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

type Labels = Vec<(&'static str, String)>;

/// `replicaset_controller_stale_sync_skips_total{controller,group,resource}`
/// (upstream 1.36 has the same name with `group` and `resource`) and
/// `replicaset_controller_lost_creations_total{controller}` (beyond
/// upstream).
#[derive(Clone, Default)]
pub(crate) struct TrackingMetrics {
    stale_sync_skips: Family<Labels, Counter>,
    lost_creations: Family<Labels, Counter>,
}

impl TrackingMetrics {
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "replicaset_controller_stale_sync_skips",
            "Syncs skipped because an informer cache had not yet observed the controller's own writes",
            metrics.stale_sync_skips.clone(),
        );
        registry.register(
            "replicaset_controller_lost_creations",
            "Pods the controller created that its informer never showed before the expectations expired",
            metrics.lost_creations.clone(),
        );
        metrics
    }

    pub(crate) fn inc_stale_sync_skips(&self, controller: &str, resource: &GroupResource) {
        self.stale_sync_skips
            .get_or_create(&vec![
                ("controller", controller.to_owned()),
                ("group", resource.group().to_owned()),
                ("resource", resource.resource().to_owned()),
            ])
            .inc();
    }

    pub(crate) fn inc_lost_creations(&self, controller: &str, n: u64) {
        self.lost_creations
            .get_or_create(&vec![("controller", controller.to_owned())])
            .inc_by(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_exposed_under_upstreams_name_and_ours() {
        let mut registry = Registry::default();
        let metrics = TrackingMetrics::register(&mut registry);
        metrics.inc_stale_sync_skips("replicaset", &GroupResource::new("", "pods"));
        metrics.inc_stale_sync_skips("replicaset", &GroupResource::new("", "pods"));
        metrics.inc_lost_creations("replicationmanager", 3);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains(
                r#"replicaset_controller_stale_sync_skips_total{controller="replicaset",group="",resource="pods"} 2"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"replicaset_controller_lost_creations_total{controller="replicationmanager"} 3"#
            ),
            "{text}"
        );
    }
}
