//! The pod cache's transform (opt-in, [`ControllerOptions::slim_pod_cache`]):
//! pods keep only what the replica controllers read, so each cached pod
//! costs a fraction of its full size.
//!
//! [`ControllerOptions::slim_pod_cache`]: crate::ControllerOptions::slim_pod_cache

use k8s_openapi::api::core::v1::{
    Container, ContainerStatus, Pod, PodCondition, PodSpec, PodStatus,
};

use ctrlkit_podcontrol::ranking::POD_DELETION_COST_ANNOTATION;

/// Strips `pod` down to what the ReplicaSet and ReplicationController
/// syncs read, before it enters the cache:
///
/// - metadata: everything but `managedFields` and annotations other than
///   the deletion cost (names, UID, resourceVersion, labels, owner
///   references, timestamps stay);
/// - spec: `nodeName` (ranking by co-location) and the name and restart
///   policy of sidecar init containers (`restartPolicy: Always`, whose
///   restarts rank pods); the containers themselves are dropped;
/// - status: phase, reason and message (the churn guard), the `Ready`
///   condition (ready and available counts), and each container's name and
///   restart count (ranking).
///
/// Whoever shares the pod informer sees the same slim pods, so only turn it
/// on when every user of that informer reads no more than this.
pub fn slim_pod(pod: &mut Pod) {
    let meta = &mut pod.metadata;
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.retain(|k, _| k == POD_DELETION_COST_ANNOTATION);
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }
    pod.spec = pod.spec.take().map(|spec| PodSpec {
        node_name: spec.node_name,
        init_containers: spec.init_containers.map(|init| {
            init.into_iter()
                .filter(|c| c.restart_policy.as_deref() == Some("Always"))
                .map(|c| Container {
                    name: c.name,
                    restart_policy: c.restart_policy,
                    ..Container::default()
                })
                .collect()
        }),
        ..PodSpec::default()
    });
    pod.status = pod.status.take().map(|status| PodStatus {
        phase: status.phase,
        reason: status.reason,
        message: status.message,
        conditions: status.conditions.map(|conditions| {
            conditions
                .into_iter()
                .filter(|c| c.type_ == "Ready")
                .map(|c| PodCondition {
                    type_: c.type_,
                    status: c.status,
                    last_transition_time: c.last_transition_time,
                    ..PodCondition::default()
                })
                .collect()
        }),
        container_statuses: status.container_statuses.map(restarts_only),
        init_container_statuses: status.init_container_statuses.map(restarts_only),
        ..PodStatus::default()
    });
}

fn restarts_only(statuses: Vec<ContainerStatus>) -> Vec<ContainerStatus> {
    statuses
        .into_iter()
        .map(|s| ContainerStatus {
            name: s.name,
            restart_count: s.restart_count,
            ..ContainerStatus::default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use ctrlkit_podcontrol::pod::{
        is_pod_active, is_pod_available, is_pod_ready, max_container_restarts, pod_ready_time,
    };
    use ctrlkit_podcontrol::ranking::deletion_cost_from_annotations;
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    use super::*;

    /// A pod as a real API server returns it, with a sidecar.
    fn full_pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {
                "name": "web-x", "namespace": "ns", "uid": "u", "resourceVersion": "9",
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"app": "web"},
                "annotations": {
                    "controller.kubernetes.io/pod-deletion-cost": "7",
                    "kubectl.kubernetes.io/last-applied-configuration": "{...}"
                },
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": "web", "uid": "rs", "controller": true}],
                "managedFields": [{"manager": "kubelet", "operation": "Update"}]
            },
            "spec": {
                "nodeName": "n1",
                "initContainers": [
                    {"name": "proxy", "image": "envoy", "restartPolicy": "Always"},
                    {"name": "setup", "image": "busybox"}
                ],
                "containers": [{"name": "app", "image": "nginx", "env": [{"name": "A", "value": "b"}]}]
            },
            "status": {
                "phase": "Running", "podIP": "10.0.0.1", "qosClass": "BestEffort",
                "conditions": [
                    {"type": "PodScheduled", "status": "True"},
                    {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z"}
                ],
                "containerStatuses": [{"name": "app", "image": "nginx", "imageID": "sha",
                    "ready": true, "restartCount": 2, "state": {"running": {}}}],
                "initContainerStatuses": [{"name": "proxy", "image": "envoy", "imageID": "sha",
                    "ready": true, "restartCount": 4}]
            }
        }))
        .unwrap()
    }

    #[test]
    fn slim_pods_answer_every_question_the_controller_asks_as_full_ones_do() {
        let full = full_pod();
        let mut slim = full.clone();
        slim_pod(&mut slim);
        let now: Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        assert_eq!(slim.metadata.labels, full.metadata.labels);
        assert_eq!(
            slim.metadata.owner_references,
            full.metadata.owner_references
        );
        assert_eq!(
            slim.metadata.resource_version,
            full.metadata.resource_version
        );
        assert_eq!(
            slim.metadata.creation_timestamp,
            full.metadata.creation_timestamp
        );
        assert_eq!(
            deletion_cost_from_annotations(slim.metadata.annotations.as_ref()),
            Ok(7)
        );
        assert_eq!(is_pod_active(&slim), is_pod_active(&full));
        assert_eq!(is_pod_ready(&slim), is_pod_ready(&full));
        assert_eq!(pod_ready_time(&slim), pod_ready_time(&full));
        assert_eq!(
            is_pod_available(&slim, 30, now),
            is_pod_available(&full, 30, now)
        );
        assert_eq!(max_container_restarts(&slim), max_container_restarts(&full));
        assert_eq!(max_container_restarts(&slim).sidecar, 4);
        let node = |p: &Pod| p.spec.as_ref().and_then(|s| s.node_name.clone());
        assert_eq!(node(&slim), node(&full));
    }

    #[test]
    fn slim_pods_drop_what_the_controller_never_reads() {
        let mut slim = full_pod();
        slim_pod(&mut slim);
        assert!(slim.metadata.managed_fields.is_none());
        assert_eq!(slim.metadata.annotations.as_ref().map(|a| a.len()), Some(1));
        let spec = slim.spec.as_ref().unwrap();
        assert!(spec.containers.is_empty());
        assert_eq!(spec.init_containers.as_ref().map(Vec::len), Some(1));
        let status = slim.status.as_ref().unwrap();
        assert!(status.pod_ip.is_none() && status.qos_class.is_none());
        assert_eq!(status.conditions.as_ref().map(Vec::len), Some(1));
        assert_eq!(status.container_statuses.as_ref().unwrap()[0].image, "");
        // Slimming twice changes nothing (a relist re-applies it).
        let once = Arc::new(slim.clone());
        slim_pod(&mut slim);
        assert_eq!(&slim, once.as_ref());
    }
}
