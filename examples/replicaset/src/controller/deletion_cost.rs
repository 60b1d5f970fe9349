//! Telling users about `controller.kubernetes.io/pod-deletion-cost`
//! annotations the ranking cannot read.
//!
//! A malformed value (`"+5"`, `"007"`, `"high"`, out of the 32-bit range)
//! counts as cost 0, as upstream: a typo never blocks a scale-down. Upstream
//! says nothing about it; here each such pod is logged at warn level when a
//! scale-down ranks it, naming the pod and the value, so the user learns why
//! the annotation had no effect.

use std::sync::Arc;

use ctrlkit_podcontrol::ranking::deletion_cost_from_annotations;
use k8s_openapi::api::core::v1::Pod;

/// Logs every pod of `pods` whose deletion-cost annotation is malformed.
pub(crate) fn warn_malformed_deletion_costs(key: &str, pods: &[Arc<Pod>]) {
    for pod in pods {
        if let Err(error) = deletion_cost_from_annotations(pod.metadata.annotations.as_ref()) {
            tracing::warn!(
                key,
                pod = pod.metadata.name.as_deref().unwrap_or_default(),
                %error,
                "ignoring a malformed deletion cost: the pod ranks as cost 0"
            );
        }
    }
}
