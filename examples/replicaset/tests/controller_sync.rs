//! `sync`: counts of creates, deletes and patches, burst limits,
//! expectations, claiming, deletion ranking and bad input.
#![allow(clippy::unwrap_used)]

mod common;

use common::{Harness, NS, PodSpec, edit, replica_set, replication_controller};
use ctrlkit_podcontrol::{Operation, PodControlError};
use ctrlkit_replicaset::Error;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::ReplicationController;
use serde_json::json;

type RsHarness = Harness<ReplicaSet>;

#[tokio::test]
async fn a_replica_set_with_enough_pods_does_nothing() {
    let h = RsHarness::new();
    let rs = replica_set("web", 2, "web");
    h.owner(&rs);
    for i in 0..2 {
        h.pod(
            &PodSpec::running("web")
                .owned_by(&rs)
                .build(&format!("p{i}")),
        );
    }
    h.controller
        .sync(&common::key("default/web"))
        .await
        .unwrap();
    assert_eq!(
        (
            h.fake.create_count(),
            h.fake.delete_count(),
            h.fake.patch_count()
        ),
        (0, 0, 0)
    );
}

#[tokio::test]
async fn missing_pods_are_created_with_a_controller_reference() {
    let h = RsHarness::new();
    let rs = replica_set("web", 3, "web");
    h.owner(&rs);
    h.controller
        .sync(&common::key("default/web"))
        .await
        .unwrap();
    assert_eq!(h.fake.create_count(), 3);
    for r in h.fake.controller_refs() {
        assert_eq!(
            (r.api_version.as_str(), r.kind.as_str()),
            ("apps/v1", "ReplicaSet")
        );
        assert_eq!((r.name.as_str(), r.uid.as_str()), ("web", "uid-web"));
        assert_eq!(
            (r.controller, r.block_owner_deletion),
            (Some(true), Some(true))
        );
    }
    let created = h.fake.created_pods();
    assert_eq!(created[0].metadata.generate_name.as_deref(), Some("web-"));
    assert_eq!(created[0].metadata.labels.as_ref().unwrap()["app"], "web");
}

#[tokio::test]
async fn a_replication_controller_with_a_map_selector_creates_v1_owned_pods() {
    let h = Harness::<ReplicationController>::new();
    let rc = replication_controller("legacy", 2, "legacy");
    h.owner(&rc);
    // One orphan that matches: adopted, so only one pod is created.
    h.pod(&PodSpec::running("legacy").build("orphan"));
    h.controller
        .sync(&common::key("default/legacy"))
        .await
        .unwrap();
    assert_eq!(h.fake.patch_count(), 1);
    let patch = &h.fake.patches()[0].1;
    assert_eq!(
        patch["metadata"]["ownerReferences"][0]["kind"],
        "ReplicationController"
    );
    assert_eq!(patch["metadata"]["ownerReferences"][0]["apiVersion"], "v1");
    assert_eq!(h.fake.create_count(), 1);
    let r = &h.fake.controller_refs()[0];
    assert_eq!(
        (r.api_version.as_str(), r.kind.as_str()),
        ("v1", "ReplicationController")
    );
    // The status never carries terminatingReplicas for an RC.
    let status = h.client.last_status();
    assert_eq!(status["replicas"], 1);
    assert!(
        status
            .get("terminatingReplicas")
            .is_none_or(|v| v.is_null())
    );
}

#[tokio::test]
async fn creates_stop_after_the_first_failing_slow_start_batch() {
    let h = RsHarness::new();
    h.fake.set_create_limit(10);
    h.owner(&replica_set("web", 100, "web"));
    let err = h
        .controller
        .sync(&common::key("default/web"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::CreatePods(_)), "{err}");
    // Batches 1, 2, 4, 8: the fourth fails, the fifth never starts.
    assert!(h.fake.create_count() <= 15, "{}", h.fake.create_count());
    assert_eq!(h.fake.created_pods().len(), 10);
    // Failed and never-attempted creates were taken off the expectations.
    let exp = h
        .controller
        .runtime()
        .expectations()
        .get_expectations("default/web")
        .unwrap();
    assert_eq!(exp.add, 10);
}

/// Upstream's `doTestControllerBurstReplicas`: each sync creates (or
/// deletes) at most `burst` pods, then sleeps until the informer has shown
/// every one of them.
async fn burst_round_trip(burst: usize, replicas: usize) {
    let h = RsHarness::with_burst(burst);
    let rs = replica_set("web", i32::try_from(replicas).unwrap(), "web");
    h.owner(&rs);
    let mut have = 0;
    while have < replicas {
        h.controller
            .sync(&common::key("default/web"))
            .await
            .unwrap();
        let expected = (replicas - have).min(burst);
        let created = h.fake.created_pods();
        assert_eq!(created.len(), expected);
        h.fake.clear();
        // All but one show up: still dormant.
        for pod in &created[..expected - 1] {
            h.pod(pod);
        }
        let exp = h
            .controller
            .runtime()
            .expectations()
            .get_expectations("default/web")
            .unwrap();
        assert_eq!(exp.add, 1);
        h.controller
            .sync(&common::key("default/web"))
            .await
            .unwrap();
        assert_eq!(h.fake.create_count(), 0, "a dormant sync creates nothing");
        h.pod(&created[expected - 1]);
        have += expected;
    }
    assert_eq!(h.pods.store().len(), replicas);

    // Scale down to zero the same way.
    let rs0 = edit(&rs, |v| v["spec"]["replicas"] = json!(0));
    h.owner(&rs0);
    while have > 0 {
        h.controller
            .sync(&common::key("default/web"))
            .await
            .unwrap();
        let expected = have.min(burst);
        let deleted = h.fake.deleted_pod_keys();
        assert_eq!(deleted.len(), expected);
        h.fake.clear();
        let pending = h
            .controller
            .runtime()
            .expectations()
            .pending_deletions("default/web");
        assert_eq!(pending.len(), expected);
        let store = h.pods.store();
        let pods: Vec<_> = deleted
            .iter()
            .map(|k| store.get(NS, k.split('/').nth(1).unwrap()).unwrap())
            .collect();
        for pod in &pods[..expected - 1] {
            h.remove_pod(pod);
        }
        assert_eq!(
            h.controller
                .runtime()
                .expectations()
                .pending_deletions("default/web")
                .len(),
            1
        );
        h.controller
            .sync(&common::key("default/web"))
            .await
            .unwrap();
        assert_eq!(h.fake.delete_count(), 0, "a dormant sync deletes nothing");
        h.remove_pod(&pods[expected - 1]);
        have -= expected;
    }
    assert_eq!(h.pods.store().len(), 0);
}

#[tokio::test]
async fn bursts_cap_creates_and_deletes_per_sync() {
    burst_round_trip(5, 30).await;
    burst_round_trip(5, 12).await;
    burst_round_trip(3, 2).await;
}

#[tokio::test]
async fn expectations_block_creates_until_the_pods_are_observed() {
    let h = RsHarness::new();
    h.owner(&replica_set("web", 2, "web"));
    h.controller
        .sync(&common::key("default/web"))
        .await
        .unwrap();
    assert_eq!(h.fake.create_count(), 2);
    let created = h.fake.created_pods();
    h.fake.clear();
    h.controller
        .sync(&common::key("default/web"))
        .await
        .unwrap();
    assert_eq!(h.fake.create_count(), 0);
    assert!(
        !h.controller
            .runtime()
            .expectations()
            .satisfied("default/web")
    );
    assert_eq!(h.observe_created(), 0); // cleared above: nothing to feed
    // The informer shows the two pods the controller created.
    for pod in &created {
        h.pod(pod);
    }
    assert!(
        h.controller
            .runtime()
            .expectations()
            .satisfied("default/web")
    );
    h.controller
        .sync(&common::key("default/web"))
        .await
        .unwrap();
    assert_eq!(h.fake.create_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn expectations_expire_after_five_minutes() {
    let h = RsHarness::new();
    h.owner(&replica_set("web", 2, "web"));
    h.controller
        .sync(&common::key("default/web"))
        .await
        .unwrap();
    h.fake.clear();
    tokio::time::advance(std::time::Duration::from_secs(301)).await;
    // The watch events were lost: after the TTL the controller acts again.
    h.controller
        .sync(&common::key("default/web"))
        .await
        .unwrap();
    assert_eq!(h.fake.create_count(), 2);
}

#[tokio::test]
async fn the_sync_after_a_failed_create_creates_again() {
    let h = RsHarness::new();
    let rs = replica_set("web", 2, "web");
    h.owner(&rs);
    h.pod(&PodSpec::running("web").owned_by(&rs).build("a"));
    h.fake.fail_next_op(Operation::Create, 1, || {
        PodControlError::api_status(500, "InternalError", "fake error")
    });
    assert!(
        h.controller
            .sync(&common::key("default/web"))
            .await
            .is_err()
    );
    assert_eq!(h.fake.create_count(), 1);
    // The failed create lowered its expectation: not dormant.
    assert!(
        h.controller
            .runtime()
            .expectations()
            .satisfied("default/web")
    );
    h.fake.clear();
    h.controller
        .sync(&common::key("default/web"))
        .await
        .unwrap();
    assert_eq!(h.fake.create_count(), 1);
}

#[tokio::test]
async fn scale_down_deletes_not_ready_pods_first() {
    let h = RsHarness::new();
    let rs = replica_set("web", 2, "web");
    h.owner(&rs);
    h.pod(&PodSpec::running("web").owned_by(&rs).build("ready-1"));
    h.pod(
        &PodSpec::running("web")
            .owned_by(&rs)
            .not_ready()
            .build("not-ready"),
    );
    h.pod(
        &PodSpec::running("web")
            .owned_by(&rs)
            .pending()
            .unscheduled()
            .build("unscheduled"),
    );
    h.pod(&PodSpec::running("web").owned_by(&rs).build("ready-2"));
    h.controller
        .sync(&common::key("default/web"))
        .await
        .unwrap();
    let mut deleted = h.fake.deleted_pod_names();
    deleted.sort();
    assert_eq!(deleted, ["not-ready", "unscheduled"]);
    let mut pending = h
        .controller
        .runtime()
        .expectations()
        .pending_deletions("default/web");
    pending.sort();
    assert_eq!(pending, ["default/not-ready", "default/unscheduled"]);
}

#[tokio::test]
async fn scale_down_prefers_the_node_crowded_with_related_pods() {
    let h = RsHarness::new();
    // Two ReplicaSets of one Deployment: the old one has pods on node-2.
    let with_owner = |rs: ReplicaSet| {
        edit(&rs, |v| {
            v["metadata"]["ownerReferences"] = json!([{
                "apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "uid-d",
                "controller": true
            }]);
        })
    };
    let new = with_owner(replica_set("new", 1, "new"));
    let old = with_owner(replica_set("old", 2, "old"));
    h.owner(&old);
    h.owner(&new);
    h.pod(
        &PodSpec::running("new")
            .owned_by(&new)
            .on_node("node-1")
            .build("new-1"),
    );
    h.pod(
        &PodSpec::running("new")
            .owned_by(&new)
            .on_node("node-2")
            .build("new-2"),
    );
    h.pod(
        &PodSpec::running("old")
            .owned_by(&old)
            .on_node("node-2")
            .build("old-1"),
    );
    h.pod(
        &PodSpec::running("old")
            .owned_by(&old)
            .on_node("node-2")
            .build("old-2"),
    );
    assert_eq!(h.controller.related_pods(&new).len(), 4);
    h.controller
        .sync(&common::key("default/new"))
        .await
        .unwrap();
    assert_eq!(h.fake.deleted_pod_names(), ["new-2"]);
}

#[tokio::test]
async fn a_matching_orphan_is_adopted_instead_of_creating() {
    let h = RsHarness::new();
    h.owner(&replica_set("web", 1, "web"));
    h.pod(&PodSpec::running("web").build("orphan"));
    h.controller
        .sync(&common::key("default/web"))
        .await
        .unwrap();
    assert_eq!((h.fake.create_count(), h.fake.patch_count()), (0, 1));
    let (name, patch) = &h.fake.patches()[0];
    assert_eq!(name, "orphan");
    assert_eq!(patch["metadata"]["uid"], "uid-orphan");
    assert_eq!(patch["metadata"]["ownerReferences"][0]["uid"], "uid-web");
    // The live read before adopting happened once.
    assert_eq!(h.client.gets(), 1);
}

#[tokio::test]
async fn an_owned_pod_that_stops_matching_is_released_and_replaced() {
    let h = RsHarness::new();
    let rs = replica_set("web", 1, "web");
    h.owner(&rs);
    let mut spec = PodSpec::running("web").owned_by(&rs);
    spec.labels = json!({"app": "debug"});
    h.pod(&spec.build("relabelled"));
    h.controller
        .sync(&common::key("default/web"))
        .await
        .unwrap();
    assert_eq!((h.fake.create_count(), h.fake.patch_count()), (1, 1));
    let patch = &h.fake.patches()[0].1;
    assert_eq!(patch["metadata"]["ownerReferences"][0]["$patch"], "delete");
    assert_eq!(patch["metadata"]["ownerReferences"][0]["uid"], "uid-web");
}

#[tokio::test]
async fn pods_of_another_controller_are_never_touched() {
    let h = RsHarness::new();
    let rs = replica_set("web", 2, "web");
    let other = edit(&replica_set("other", 1, "web"), |_| {});
    h.owner(&rs);
    h.pod(&PodSpec::running("web").owned_by(&other).build("theirs"));
    h.controller
        .sync(&common::key("default/web"))
        .await
        .unwrap();
    assert_eq!(
        (
            h.fake.create_count(),
            h.fake.delete_count(),
            h.fake.patch_count()
        ),
        (2, 0, 0)
    );
}

#[tokio::test]
async fn failed_adoptions_fail_the_sync_without_creating() {
    let h = RsHarness::new();
    h.owner(&replica_set("web", 2, "web"));
    h.pod(&PodSpec::running("web").build("o1"));
    h.pod(&PodSpec::running("web").build("o2"));
    h.fake.fail_after_op(Operation::Patch, 0, || {
        PodControlError::api_status(500, "InternalError", "fake Error")
    });
    let err = h
        .controller
        .sync(&common::key("default/web"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("fake Error"), "{err}");
    assert_eq!(
        (
            h.fake.create_count(),
            h.fake.delete_count(),
            h.fake.patch_count()
        ),
        (0, 0, 2)
    );
    assert!(
        h.client.updates().is_empty(),
        "no status write after a claim error"
    );
}

#[tokio::test]
async fn an_owner_being_deleted_neither_adopts_nor_creates() {
    let h = RsHarness::new();
    let rs = edit(&replica_set("web", 2, "web"), |v| {
        v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    });
    h.owner(&rs);
    h.pod(&PodSpec::running("web").build("orphan"));
    h.controller
        .sync(&common::key("default/web"))
        .await
        .unwrap();
    assert_eq!(
        (
            h.fake.create_count(),
            h.fake.delete_count(),
            h.fake.patch_count()
        ),
        (0, 0, 0)
    );
}

#[tokio::test]
async fn a_deletion_seen_only_by_the_live_read_stops_adoption() {
    let h = RsHarness::new();
    let rs = replica_set("web", 2, "web");
    h.owner(&rs);
    // The cache lags: only the live read shows the deletion.
    *h.client.live.lock() = Some(edit(&rs, |v| {
        v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    }));
    h.pod(&PodSpec::running("web").build("orphan"));
    assert!(
        h.controller
            .sync(&common::key("default/web"))
            .await
            .is_err()
    );
    assert_eq!(
        (
            h.fake.create_count(),
            h.fake.delete_count(),
            h.fake.patch_count()
        ),
        (0, 0, 0)
    );
}

#[tokio::test]
async fn a_deleted_owner_drops_its_expectations() {
    let h = RsHarness::new();
    h.controller
        .runtime()
        .expectations()
        .expect_creations("default/gone", 3);
    let action = h
        .controller
        .sync(&common::key("default/gone"))
        .await
        .unwrap();
    assert_eq!(action, ctrlkit_worker::Action::done());
    assert!(
        h.controller
            .runtime()
            .expectations()
            .get_expectations("default/gone")
            .is_none()
    );
    assert!(h.client.calls.lock().is_empty());
}

#[tokio::test]
async fn an_invalid_key_is_a_terminal_error() {
    let h = RsHarness::new();
    let err = h
        .controller
        .sync(&common::key("no-slash"))
        .await
        .unwrap_err();
    assert!(err.is_terminal());
}

#[tokio::test]
async fn an_invalid_selector_is_a_terminal_error_for_that_key() {
    let h = RsHarness::new();
    let rs = edit(&replica_set("web", 2, "web"), |v| {
        v["spec"]["selector"] =
            json!({"matchExpressions": [{"key": "app", "operator": "Near", "values": ["web"]}]});
    });
    h.owner(&rs);
    let err = h
        .controller
        .sync(&common::key("default/web"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidSelector { .. }), "{err}");
    assert!(err.is_terminal());
    assert_eq!(h.fake.create_count(), 0);
}

#[tokio::test]
async fn a_selector_not_matching_the_template_is_refused() {
    let h = RsHarness::new();
    let rs = edit(&replica_set("web", 2, "web"), |v| {
        v["spec"]["template"]["metadata"]["labels"] = json!({"app": "other"});
    });
    h.owner(&rs);
    let err = h
        .controller
        .sync(&common::key("default/web"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::SelectorMismatch { .. }), "{err}");
    assert_eq!(h.fake.create_count(), 0);
}

#[tokio::test]
async fn an_empty_selector_is_refused_instead_of_adopting_everything() {
    let h = RsHarness::new();
    let rs = edit(&replica_set("web", 1, "web"), |v| {
        v["spec"]["selector"] = json!({})
    });
    h.owner(&rs);
    h.pod(&PodSpec::running("anything").build("unrelated"));
    let err = h
        .controller
        .sync(&common::key("default/web"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::EmptySelector { .. }), "{err}");
    assert!(err.is_terminal());
    assert_eq!((h.fake.create_count(), h.fake.patch_count()), (0, 0));
}

#[tokio::test]
async fn negative_replicas_count_as_zero() {
    let h = RsHarness::new();
    let rs = replica_set("web", -3, "web");
    h.owner(&rs);
    h.pod(&PodSpec::running("web").owned_by(&rs).build("a"));
    h.controller
        .sync(&common::key("default/web"))
        .await
        .unwrap();
    assert_eq!(h.fake.deleted_pod_names(), ["a"]);
}

#[tokio::test]
async fn absurd_replica_counts_create_one_burst_per_sync() {
    let h = RsHarness::new();
    h.owner(&replica_set("web", 1_000_000, "web"));
    h.controller
        .sync(&common::key("default/web"))
        .await
        .unwrap();
    assert_eq!(h.fake.create_count(), 500);
    let exp = h
        .controller
        .runtime()
        .expectations()
        .get_expectations("default/web")
        .unwrap();
    assert_eq!(exp.add, 500);
}

#[tokio::test]
async fn a_rejected_template_sets_failed_create_until_creates_succeed() {
    let h = RsHarness::new();
    h.owner(&replica_set("web", 2, "web"));
    h.fake.fail_after_op(Operation::Create, 0, || {
        PodControlError::api_status(
            422,
            "Invalid",
            "Pod \"web-x\" is invalid: spec.containers: Required value",
        )
    });
    let err = h
        .controller
        .sync(&common::key("default/web"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::CreatePods(_)));
    let status = h.client.last_status();
    let cond = &status["conditions"][0];
    assert_eq!(cond["type"], "ReplicaFailure");
    assert_eq!(cond["status"], "True");
    assert_eq!(cond["reason"], "FailedCreate");
    assert!(
        cond["message"].as_str().unwrap().contains("is invalid"),
        "{cond}"
    );

    // The next sync works: the condition is removed.
    h.fake.clear_failures();
    let written = h.client.updates().last().cloned().unwrap();
    h.owner(&serde_json::from_value::<ReplicaSet>(written).unwrap());
    h.controller
        .sync(&common::key("default/web"))
        .await
        .unwrap();
    assert_eq!(h.fake.created_pods().len(), 2);
    assert!(
        h.client
            .last_status()
            .get("conditions")
            .is_none_or(|c| c.is_null())
    );
}

#[tokio::test]
async fn a_terminating_namespace_is_not_a_create_failure() {
    let h = RsHarness::new();
    h.owner(&replica_set("web", 2, "web"));
    h.fake.fail_after_op(Operation::Create, 0, || {
        PodControlError::NamespaceTerminating {
            namespace: NS.into(),
        }
    });
    h.controller
        .sync(&common::key("default/web"))
        .await
        .unwrap();
    assert_eq!(h.fake.create_count(), 2);
    // Counted as successes: the expectation stays until the owner goes.
    let exp = h
        .controller
        .runtime()
        .expectations()
        .get_expectations("default/web")
        .unwrap();
    assert_eq!(exp.add, 2);
}

#[tokio::test]
async fn failed_deletes_set_failed_delete_and_lower_expectations() {
    let h = RsHarness::new();
    let rs = replica_set("web", 0, "web");
    h.owner(&rs);
    h.pod(&PodSpec::running("web").owned_by(&rs).build("a"));
    h.pod(&PodSpec::running("web").owned_by(&rs).build("b"));
    h.fake.fail_next_op(Operation::Delete, 1, || {
        PodControlError::api_status(500, "InternalError", "cannot delete")
    });
    let err = h
        .controller
        .sync(&common::key("default/web"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::DeletePods(_)));
    assert_eq!(h.fake.delete_count(), 2);
    assert_eq!(
        h.controller
            .runtime()
            .expectations()
            .pending_deletions("default/web")
            .len(),
        1
    );
    assert_eq!(
        h.client.last_status()["conditions"][0]["reason"],
        "FailedDelete"
    );
}

#[tokio::test]
async fn an_unchanged_status_is_not_written() {
    let h = RsHarness::new();
    let rs = replica_set("web", 1, "web");
    let rs = edit(&rs, |v| {
        v["status"] = json!({
            "replicas": 1, "fullyLabeledReplicas": 1, "readyReplicas": 1,
            "availableReplicas": 1, "terminatingReplicas": 0, "observedGeneration": 1
        });
    });
    h.owner(&rs);
    h.pod(&PodSpec::running("web").owned_by(&rs).build("a"));
    h.controller
        .sync(&common::key("default/web"))
        .await
        .unwrap();
    assert!(h.client.updates().is_empty());
}

#[tokio::test]
async fn a_failed_status_write_is_retried_once_after_a_fresh_read() {
    let h = RsHarness::new();
    h.owner(&replica_set("web", 0, "web"));
    h.client.update_failures.lock().extend([409]);
    h.controller
        .sync(&common::key("default/web"))
        .await
        .unwrap();
    assert_eq!((h.client.gets(), h.client.updates().len()), (1, 2));

    // Failing every time: one read, two writes, then the error.
    let h = RsHarness::new();
    h.owner(&replica_set("web", 0, "web"));
    h.client.update_failures.lock().extend([409, 500]);
    let err = h
        .controller
        .sync(&common::key("default/web"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::UpdateStatus { .. }), "{err}");
    assert_eq!((h.client.gets(), h.client.updates().len()), (1, 2));
    for update in h.client.updates() {
        assert_eq!(update["status"]["replicas"], 0);
        assert_eq!(update["status"]["observedGeneration"], 1);
    }
}

#[tokio::test]
async fn ready_but_unavailable_pods_requeue_when_they_become_available() {
    let h = RsHarness::new();
    let rs = edit(&replica_set("web", 1, "web"), |v| {
        v["spec"]["minReadySeconds"] = json!(30)
    });
    h.owner(&rs);
    h.pod(
        &PodSpec::running("web")
            .owned_by(&rs)
            .ready_since(1)
            .build("a"),
    );
    let action = h
        .controller
        .sync(&common::key("default/web"))
        .await
        .unwrap();
    // Ready 1 s ago with minReadySeconds 30: available in 29 s (1.34+), not
    // after a blind 30 s. The margin only absorbs a slow test machine.
    let delay = action.requeue_delay().unwrap();
    assert!(
        delay <= std::time::Duration::from_secs(29) && delay > std::time::Duration::from_secs(20),
        "{delay:?}"
    );
    let status = h.client.last_status();
    assert_eq!(
        (
            status["readyReplicas"].as_i64(),
            status["availableReplicas"].as_i64()
        ),
        (Some(1), Some(0))
    );

    // Long ready: available, no requeue.
    let h = RsHarness::new();
    h.owner(&rs);
    h.pod(
        &PodSpec::running("web")
            .owned_by(&rs)
            .ready_since(60)
            .build("a"),
    );
    let action = h
        .controller
        .sync(&common::key("default/web"))
        .await
        .unwrap();
    assert_eq!(action.requeue_delay(), None);
}

#[tokio::test]
async fn terminating_pods_are_reported_but_not_counted_as_replicas() {
    let h = RsHarness::new();
    let rs = replica_set("web", 1, "web");
    h.owner(&rs);
    h.pod(&PodSpec::running("web").owned_by(&rs).build("a"));
    h.pod(&PodSpec::running("web").owned_by(&rs).deleting().build("b"));
    h.pod(&PodSpec::running("web").owned_by(&rs).deleting().build("c"));
    h.controller
        .sync(&common::key("default/web"))
        .await
        .unwrap();
    assert_eq!(h.fake.create_count(), 0);
    let status = h.client.last_status();
    assert_eq!(status["replicas"], 1);
    assert_eq!(status["terminatingReplicas"], 2);
}

#[tokio::test]
async fn a_replication_controller_without_selector_selects_its_template_labels() {
    let h = Harness::<ReplicationController>::new();
    let rc = edit(&replication_controller("legacy", 2, "legacy"), |v| {
        v["spec"]["selector"] = json!(null);
    });
    h.owner(&rc);
    h.pod(&PodSpec::running("legacy").owned_by(&rc).build("a"));
    h.controller
        .sync(&common::key("default/legacy"))
        .await
        .unwrap();
    assert_eq!(h.fake.create_count(), 1);
    assert_eq!(h.client.last_status()["replicas"], 1);
}
