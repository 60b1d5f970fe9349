//! Properties of the deletion order over arbitrary pods.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use ctrlkit_podcontrol::pod::is_pod_ready;
use ctrlkit_podcontrol::ranking::{
    ActivePodsWithRanks, POD_DELETION_COST_ANNOTATION, RankingOptions, deletes_before,
    pods_to_delete, sort_active_pods,
};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodCondition, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;

fn now() -> Timestamp {
    "2026-06-01T00:00:00Z".parse().unwrap()
}

prop_compose! {
    fn arb_pod()(
        id in 0u32..1_000_000,
        node in prop::option::of(prop::sample::select(vec!["n1", "n2", "n3"])),
        phase in prop::sample::select(vec!["", "Pending", "Running", "Unknown", "Succeeded", "Failed"]),
        ready in any::<bool>(),
        ready_ago in prop::option::of(-100i64..10_000_000),
        created_ago in prop::option::of(-100i64..10_000_000),
        restarts in 0i32..4,
        uid in prop::sample::select(vec!["", "a", "b", "c"]),
        cost in prop::option::of(prop::sample::select(vec![
            "0", "1", "-1", "100", "+5", "007", "", "x", "99999999999", "-2147483648",
        ])),
    ) -> Pod {
        let at = |secs: i64| Time(now() - SignedDuration::from_secs(secs));
        Pod {
            metadata: ObjectMeta {
                name: Some(format!("pod-{id}")),
                uid: Some(uid.to_owned()),
                creation_timestamp: created_ago.map(at),
                annotations: cost.map(|c| {
                    BTreeMap::from([(POD_DELETION_COST_ANNOTATION.to_owned(), c.to_owned())])
                }),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec { node_name: node.map(str::to_owned), ..PodSpec::default() }),
            status: Some(PodStatus {
                phase: Some(phase.to_owned()).filter(|p| !p.is_empty()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    last_transition_time: ready_ago.map(at),
                    ..PodCondition::default()
                }]),
                container_statuses: Some(vec![ContainerStatus {
                    name: "c".into(),
                    restart_count: restarts,
                    ..ContainerStatus::default()
                }]),
                ..PodStatus::default()
            }),
        }
    }
}

/// The first three steps (scheduled, phase, readiness) form a consistent
/// key, so a sorted list must be ordered by it.
fn leading_key(pod: &Pod) -> (bool, u8, bool) {
    let scheduled = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_ref())
        .is_some();
    let phase = match pod.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some("Unknown") => 1,
        Some("Running") => 2,
        _ => 0,
    };
    (scheduled, phase, is_pod_ready(pod))
}

fn names(pods: &[Pod]) -> Vec<String> {
    let mut v: Vec<String> = pods
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    v.sort();
    v
}

proptest! {
    #[test]
    fn sorting_permutes_and_respects_the_leading_steps(
        pods in prop::collection::vec(arb_pod(), 0..40),
        ranks in prop::collection::vec(0usize..4, 0..40),
    ) {
        let mut ranked = ActivePodsWithRanks::new(pods.clone(), ranks, now());
        ranked.sort();
        prop_assert_eq!(ranked.ranks.len(), pods.len());
        prop_assert_eq!(names(&ranked.pods), names(&pods));
        for w in ranked.pods.windows(2) {
            prop_assert!(leading_key(&w[0]) <= leading_key(&w[1]));
        }

        let mut plain = pods.clone();
        sort_active_pods(&mut plain);
        prop_assert_eq!(names(&plain), names(&pods));
        for w in plain.windows(2) {
            prop_assert!(leading_key(&w[0]) <= leading_key(&w[1]));
        }
    }

    #[test]
    fn no_pod_is_deleted_before_itself(pod in arb_pod(), rank in 0usize..5) {
        for options in [
            RankingOptions::default(),
            RankingOptions::default().with_deletion_cost(false),
            RankingOptions::default().with_logarithmic_scale_down(false),
        ] {
            prop_assert!(!deletes_before(&pod, rank, &pod, rank, Some(now()), options));
            prop_assert!(!deletes_before(&pod, rank, &pod, rank, None, options));
        }
    }

    #[test]
    fn pods_to_delete_returns_the_requested_count(
        pods in prop::collection::vec(arb_pod(), 0..30),
        count in 0usize..35,
    ) {
        let chosen = pods_to_delete(pods.clone(), &pods, count, now());
        prop_assert_eq!(chosen.len(), count.min(pods.len()));
        if count >= pods.len() {
            prop_assert_eq!(chosen, pods);
        }
    }
}
