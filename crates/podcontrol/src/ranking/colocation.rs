//! Co-location ranks: how crowded each pod's node is with related pods.

use std::borrow::Borrow;
use std::collections::HashMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::ActivePodsWithRanks;
use crate::pod::is_pod_active;

fn node_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("")
}

/// The co-location rank of each pod in `pods_to_rank`: how many **active**
/// pods of `related` run on the same node (unscheduled pods all share the
/// node `""`).
///
/// `related` is usually every pod of every owner that shares this owner's
/// controller (for a ReplicaSet: all ReplicaSets of its Deployment), this
/// owner's pods included. Deleting from the most crowded node first spreads
/// what remains. A pod need not be in `related` to get a rank.
pub fn rank_by_related_pods_on_same_node<P, R>(pods_to_rank: &[P], related: &[R]) -> Vec<usize>
where
    P: Borrow<Pod>,
    R: Borrow<Pod>,
{
    let mut per_node: HashMap<&str, usize> = HashMap::new();
    for pod in related
        .iter()
        .map(Borrow::borrow)
        .filter(|p| is_pod_active(p))
    {
        *per_node.entry(node_name(pod)).or_default() += 1;
    }
    pods_to_rank
        .iter()
        .map(|p| per_node.get(node_name(p.borrow())).copied().unwrap_or(0))
        .collect()
}

/// Chooses `count` pods of `pods` to delete, most deletable first.
///
/// When `count` is smaller than the number of pods, the pods are ranked by
/// [`rank_by_related_pods_on_same_node`] against `related`, sorted with
/// [`ActivePodsWithRanks`] at `now`, and the first `count` are returned.
/// Otherwise every pod is returned in its input order (upstream skips the
/// sort then too).
pub fn pods_to_delete<P, R>(pods: Vec<P>, related: &[R], count: usize, now: Timestamp) -> Vec<P>
where
    P: Borrow<Pod>,
    R: Borrow<Pod>,
{
    if count >= pods.len() {
        return pods;
    }
    let ranks = rank_by_related_pods_on_same_node(&pods, related);
    let mut ranked = ActivePodsWithRanks::new(pods, ranks, now);
    ranked.sort();
    let mut pods = ranked.into_pods();
    pods.truncate(count);
    pods
}
