//! Event handlers: which owner keys each pod and owner transition enqueues,
//! and what they record in the expectations.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Harness, NS, PodSpec, edit, replica_set, replication_controller};
use ctrlkit_informer::{DeletedFinalStateUnknown, DeletedObject, ObjectKey};
use ctrlkit_replicaset::owners_selecting;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use serde_json::json;

type RsHarness = Harness<ReplicaSet>;

fn tombstone<K: kube::Resource>(obj: K) -> DeletedObject<K> {
    DeletedObject::Tombstone(DeletedFinalStateUnknown {
        key: ObjectKey::from_object(&obj),
        last_known: Arc::new(obj),
    })
}

fn with_rv(pod: &Pod, rv: &str) -> Pod {
    edit(pod, |v| v["metadata"]["resourceVersion"] = json!(rv))
}

#[tokio::test]
async fn owner_add_update_and_delete_enqueue_the_owner() {
    let h = RsHarness::new();
    let rs = replica_set("web", 1, "web");
    h.owner(&rs);
    assert_eq!(h.drain_queue(), ["default/web"]);
    // Any update enqueues, even a resync with the same object.
    h.update_owner(&Arc::new(rs.clone()), &Arc::new(rs.clone()));
    assert_eq!(h.drain_queue(), ["default/web"]);

    h.controller
        .runtime()
        .expectations()
        .expect_creations("default/web", 1);
    h.delete_owner(&DeletedObject::Final(Arc::new(rs.clone())));
    assert_eq!(h.drain_queue(), ["default/web"]);
    assert!(
        h.controller
            .runtime()
            .expectations()
            .get_expectations("default/web")
            .is_none()
    );

    // Tombstones too.
    h.controller
        .runtime()
        .expectations()
        .expect_creations("default/web", 1);
    h.delete_owner(&tombstone(rs));
    assert_eq!(h.drain_queue(), ["default/web"]);
    assert!(
        h.controller
            .runtime()
            .expectations()
            .get_expectations("default/web")
            .is_none()
    );
}

#[tokio::test]
async fn an_owner_recreated_under_the_same_name_drops_old_expectations() {
    let h = RsHarness::new();
    let old = replica_set("web", 1, "web");
    let new = edit(&old, |v| v["metadata"]["uid"] = json!("uid-web-2"));
    h.controller
        .runtime()
        .expectations()
        .expect_creations("default/web", 1);
    h.update_owner(&Arc::new(old), &Arc::new(new));
    assert!(
        h.controller
            .runtime()
            .expectations()
            .get_expectations("default/web")
            .is_none()
    );
    assert_eq!(h.drain_queue(), ["default/web"]);
}

#[tokio::test]
async fn a_new_owned_pod_is_a_creation_observation() {
    let h = RsHarness::new();
    let rs = replica_set("web", 2, "web");
    h.owner(&rs);
    h.drain_queue();
    h.controller
        .runtime()
        .expectations()
        .expect_creations("default/web", 2);
    h.pod(&PodSpec::running("web").owned_by(&rs).build("a"));
    assert_eq!(h.drain_queue(), ["default/web"]);
    assert_eq!(
        h.controller
            .runtime()
            .expectations()
            .get_expectations("default/web")
            .unwrap()
            .add,
        1
    );
}

#[tokio::test]
async fn a_pod_whose_controller_uid_does_not_match_is_ignored() {
    let h = RsHarness::new();
    let rs = replica_set("web", 2, "web");
    h.owner(&rs);
    h.drain_queue();
    h.controller
        .runtime()
        .expectations()
        .expect_creations("default/web", 1);
    // Controlled by an earlier ReplicaSet with the same name.
    let stale = edit(&rs, |v| v["metadata"]["uid"] = json!("uid-old"));
    h.pod(&PodSpec::running("web").owned_by(&stale).build("a"));
    assert!(h.drain_queue().is_empty());
    assert_eq!(
        h.controller
            .runtime()
            .expectations()
            .get_expectations("default/web")
            .unwrap()
            .add,
        1
    );
    // A controller of another kind is ignored as well, whatever its name.
    let rc = replication_controller("web", 1, "web");
    h.pod(&PodSpec::running("web").owned_by(&rc).build("b"));
    assert!(h.drain_queue().is_empty());
}

#[tokio::test]
async fn an_orphan_enqueues_every_matching_owner_without_observing_a_creation() {
    let h = RsHarness::new();
    for name in ["a", "b"] {
        h.owner(&replica_set(name, 1, "web"));
    }
    h.owner(&replica_set("other", 1, "other"));
    h.drain_queue();
    h.controller
        .runtime()
        .expectations()
        .expect_creations("default/a", 1);
    h.pod(&PodSpec::running("web").build("orphan"));
    assert_eq!(h.drain_queue(), ["default/a", "default/b"]);
    assert_eq!(
        h.controller
            .runtime()
            .expectations()
            .get_expectations("default/a")
            .unwrap()
            .add,
        1
    );
    // A pod without labels matches nobody.
    let mut bare = PodSpec::running("web");
    bare.labels = json!({});
    h.pod(&bare.build("bare"));
    assert!(h.drain_queue().is_empty());
}

#[tokio::test]
async fn the_controller_reference_wins_over_overlapping_selectors() {
    let h = RsHarness::new();
    let owners: Vec<ReplicaSet> = (1..=9)
        .map(|i| replica_set(&format!("rs{i}"), 1, "web"))
        .collect();
    for rs in [3, 7, 0, 5, 1, 8, 2, 6, 4] {
        h.owner(&owners[rs]);
    }
    h.drain_queue();
    h.pod(&PodSpec::running("web").owned_by(&owners[3]).build("p"));
    assert_eq!(h.drain_queue(), ["default/rs4"]);
}

#[tokio::test]
async fn a_pod_seen_first_while_terminating_is_a_deletion_not_a_creation() {
    let h = RsHarness::new();
    let rs = replica_set("web", 1, "web");
    h.owner(&rs);
    h.drain_queue();
    h.controller
        .runtime()
        .expectations()
        .expect_deletions("default/web", ["default/p".to_string()]);
    h.pod(&PodSpec::running("web").owned_by(&rs).deleting().build("p"));
    assert_eq!(h.drain_queue(), ["default/web"]);
    assert!(
        h.controller
            .runtime()
            .expectations()
            .satisfied("default/web")
    );
}

#[tokio::test]
async fn deletion_timestamps_count_once_per_expected_pod() {
    // Upstream's TestDeletionTimestamp.
    let h = RsHarness::new();
    let rs = replica_set("web", 1, "web");
    h.owner(&rs);
    h.drain_queue();
    let exp = h.controller.runtime().expectations();
    let live = PodSpec::running("web").owned_by(&rs).build("p");
    let deleting = with_rv(
        &PodSpec::running("web").owned_by(&rs).deleting().build("p"),
        "2",
    );

    // Update that sets the deletion timestamp: observed.
    exp.expect_deletions("default/web", ["default/p".to_string()]);
    h.update_pod(&Arc::new(live.clone()), &Arc::new(deleting.clone()));
    assert_eq!(h.drain_queue(), ["default/web"]);
    assert!(exp.satisfied("default/web"));

    // Expecting another pod: updates and deletes of this one do not count.
    exp.expect_deletions("default/web", ["default/second".to_string()]);
    let deleting3 = with_rv(&deleting, "3");
    h.update_pod(&Arc::new(deleting.clone()), &Arc::new(deleting3.clone()));
    assert!(!exp.satisfied("default/web"));
    h.delete_pod(&DeletedObject::Final(Arc::new(deleting3)));
    assert!(!exp.satisfied("default/web"));
    let second = PodSpec::running("web").owned_by(&rs).build("second");
    h.drain_queue();
    h.delete_pod(&DeletedObject::Final(Arc::new(second)));
    assert_eq!(h.drain_queue(), ["default/web"]);
    assert!(exp.satisfied("default/web"));
}

#[tokio::test]
async fn a_resync_with_the_same_resource_version_is_ignored() {
    let h = RsHarness::new();
    let rs = replica_set("web", 1, "web");
    h.owner(&rs);
    let pod = Arc::new(PodSpec::running("web").owned_by(&rs).build("p"));
    h.pod(&pod);
    h.drain_queue();
    h.update_pod(&pod, &pod);
    assert!(h.drain_queue().is_empty());
}

/// An edit of a pod's JSON.
type Change = dyn Fn(&mut serde_json::Value);

#[tokio::test]
async fn owned_pod_updates_wake_the_owner_only_for_what_the_sync_acts_on() {
    let h = RsHarness::new();
    let rs = replica_set("web", 1, "web");
    h.owner(&rs);
    let base = PodSpec::running("web")
        .pending()
        .owned_by(&rs)
        .unscheduled()
        .build("p");
    h.pod(&base);
    h.drain_queue();
    let wakes = |change: &Change| {
        let new = with_rv(&edit(&base, change), "2");
        h.update_pod(&Arc::new(base.clone()), &Arc::new(new));
        !h.drain_queue().is_empty()
    };

    // Binding, starting, restarts, images, IPs, other conditions, other
    // annotations and the deletion cost: nothing the sync decides on.
    let ignored: [(&str, &Change); 7] = [
        ("bound", &|v| v["spec"]["nodeName"] = json!("node-7")),
        ("started", &|v| v["status"]["phase"] = json!("Running")),
        ("restarted", &|v| {
            v["status"]["containerStatuses"] = json!([{
                "name": "c", "image": "foo/bar", "imageID": "", "ready": false, "restartCount": 3
            }])
        }),
        ("ip", &|v| v["status"]["podIP"] = json!("10.0.0.7")),
        ("condition", &|v| {
            v["status"]["conditions"]
                .as_array_mut()
                .unwrap()
                .push(json!({"type": "PodScheduled", "status": "True"}))
        }),
        (
            "cost",
            &|v| {
                v["metadata"]["annotations"] =
                    json!({"controller.kubernetes.io/pod-deletion-cost": "5"})
            },
        ),
        ("not-ready time", &|v| {
            v["status"]["conditions"][0]["lastTransitionTime"] = json!("2020-01-01T00:00:00Z")
        }),
    ];
    for (what, change) in ignored {
        assert!(!wakes(change), "{what} woke the owner");
    }

    // Readiness, terminal phases, a failure reason, labels and owner
    // references do.
    let acted_on: [(&str, &Change); 5] = [
        ("ready", &|v| {
            v["status"]["conditions"][0]["status"] = json!("True")
        }),
        ("succeeded", &|v| v["status"]["phase"] = json!("Succeeded")),
        ("failed", &|v| {
            v["status"]["phase"] = json!("Failed");
            v["status"]["reason"] = json!("Evicted");
        }),
        ("labels", &|v| v["metadata"]["labels"]["tier"] = json!("fe")),
        ("owner references", &|v| {
            v["metadata"]["ownerReferences"]
                .as_array_mut()
                .unwrap()
                .push(json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "c"}))
        }),
    ];
    for (what, change) in acted_on {
        assert!(wakes(change), "{what} did not wake the owner");
    }

    // A ready pod whose Ready transition time moves (it went unready and
    // back between two watch events) is counted as available later.
    let ready = PodSpec::running("web").owned_by(&rs).build("q");
    h.pod(&ready);
    h.drain_queue();
    let moved = with_rv(
        &edit(&ready, |v| {
            v["status"]["conditions"][0]["lastTransitionTime"] = json!("2030-01-01T00:00:00Z")
        }),
        "2",
    );
    h.update_pod(&Arc::new(ready), &Arc::new(moved));
    assert_eq!(h.drain_queue(), ["default/web"]);
}

#[tokio::test]
async fn label_and_controller_changes_enqueue_old_and_new_owners() {
    // Upstream's TestUpdatePods.
    let h = RsHarness::new();
    let foo = replica_set("foobar", 1, "foo");
    let bar = replica_set("barfoo", 1, "bar");
    h.owner(&foo);
    h.owner(&bar);
    h.drain_queue();
    let relabel = |p: &Pod, app: &str| edit(p, |v| v["metadata"]["labels"] = json!({"app": app}));
    let orphan = |p: &Pod| edit(p, |v| v["metadata"]["ownerReferences"] = json!(null));

    // 1. Owned by foobar, labels change: only the owner.
    let old = PodSpec::running("foo").owned_by(&foo).build("p");
    let new = with_rv(&relabel(&old, "bar"), "2");
    h.update_pod(&Arc::new(old), &Arc::new(new));
    assert_eq!(h.drain_queue(), ["default/foobar"]);

    // 2. Owned by barfoo, reference removed: the former owner, plus the
    //    owners matching the new labels (barfoo again).
    let old = PodSpec::running("bar").owned_by(&bar).build("p");
    let new = with_rv(&orphan(&old), "2");
    h.update_pod(&Arc::new(old), &Arc::new(new));
    assert_eq!(h.drain_queue(), ["default/barfoo"]);

    // 3. Owned by foobar, reference removed and relabelled for barfoo: both.
    let old = PodSpec::running("foo").owned_by(&foo).build("p");
    let new = with_rv(&relabel(&orphan(&old), "bar"), "2");
    h.update_pod(&Arc::new(old), &Arc::new(new));
    assert_eq!(h.drain_queue(), ["default/barfoo", "default/foobar"]);

    // 4. An orphan whose labels did not change enqueues nobody.
    let old = PodSpec::running("foo").build("p");
    let new = with_rv(&old, "2");
    h.update_pod(&Arc::new(old), &Arc::new(new));
    assert!(h.drain_queue().is_empty());
}

#[tokio::test]
async fn a_relabelled_terminating_pod_counts_as_deleted_for_both_label_sets() {
    let h = RsHarness::new();
    let rs = replica_set("web", 1, "web");
    h.owner(&rs);
    h.drain_queue();
    h.controller
        .runtime()
        .expectations()
        .expect_deletions("default/web", ["default/p".to_string()]);
    let old = PodSpec::running("web").owned_by(&rs).build("p");
    let new = with_rv(
        &edit(
            &PodSpec::running("web").owned_by(&rs).deleting().build("p"),
            |v| v["metadata"]["labels"] = json!({"app": "x"}),
        ),
        "2",
    );
    h.update_pod(&Arc::new(old), &Arc::new(new));
    assert_eq!(h.drain_queue(), ["default/web"]);
    assert!(
        h.controller
            .runtime()
            .expectations()
            .satisfied("default/web")
    );
}

#[tokio::test(start_paused = true)]
async fn a_pod_turning_ready_requeues_after_min_ready_seconds_plus_one() {
    let h = RsHarness::new();
    let rs = edit(&replica_set("web", 1, "web"), |v| {
        v["spec"]["minReadySeconds"] = json!(10)
    });
    h.owner(&rs);
    let old = PodSpec::running("web").owned_by(&rs).not_ready().build("p");
    h.pod(&old);
    h.drain_queue();
    let new = with_rv(
        &PodSpec::running("web")
            .owned_by(&rs)
            .ready_since(0)
            .build("p"),
        "2",
    );
    h.update_pod(&Arc::new(old), &Arc::new(new));
    assert_eq!(h.drain_queue(), ["default/web"]);
    tokio::time::advance(Duration::from_secs(10)).await;
    tokio::task::yield_now().await;
    assert!(
        h.drain_queue().is_empty(),
        "not before minReadySeconds + 1 s"
    );
    tokio::time::advance(Duration::from_millis(1100)).await;
    tokio::task::yield_now().await;
    assert_eq!(h.drain_queue(), ["default/web"]);
}

#[tokio::test]
async fn deleting_an_orphan_enqueues_nothing_and_tombstones_are_deletes() {
    let h = RsHarness::new();
    let rs = replica_set("web", 1, "web");
    h.owner(&rs);
    h.drain_queue();
    h.delete_pod(&DeletedObject::Final(Arc::new(
        PodSpec::running("web").build("o"),
    )));
    assert!(h.drain_queue().is_empty());

    h.controller
        .runtime()
        .expectations()
        .expect_deletions("default/web", ["default/p".to_string()]);
    h.delete_pod(&tombstone(PodSpec::running("web").owned_by(&rs).build("p")));
    assert_eq!(h.drain_queue(), ["default/web"]);
    assert!(
        h.controller
            .runtime()
            .expectations()
            .satisfied("default/web")
    );
}

#[tokio::test]
async fn relists_deliver_tombstones_through_the_informer() {
    use kube::runtime::watcher::Event;
    let h = RsHarness::new();
    let rs = replica_set("web", 1, "web");
    h.owner(&rs);
    let pod = PodSpec::running("web").owned_by(&rs).build("p");
    h.pod(&pod);
    h.drain_queue();
    h.controller
        .runtime()
        .expectations()
        .expect_deletions("default/web", ["default/p".to_string()]);
    // A relist without the pod: the informer hands over a tombstone.
    h.pods.apply_event(Event::Init);
    h.pods.apply_event(Event::InitDone);
    assert_eq!(h.drain_queue(), ["default/web"]);
    assert!(
        h.controller
            .runtime()
            .expectations()
            .satisfied("default/web")
    );
    assert!(h.pods.store().get(NS, "p").is_none());
}

#[tokio::test]
async fn replication_controllers_match_orphans_by_their_map_selector() {
    let h = Harness::<ReplicationController>::new();
    h.owner(&replication_controller("legacy", 1, "legacy"));
    h.owner(&replication_controller("else", 1, "else"));
    h.drain_queue();
    h.pod(&PodSpec::running("legacy").build("orphan"));
    assert_eq!(h.drain_queue(), ["default/legacy"]);
}

#[tokio::test]
async fn owner_lookup_by_labels_stays_in_the_namespace_and_skips_empty_selectors() {
    let h = RsHarness::new();
    let elsewhere = edit(&replica_set("foo", 1, "web"), |v| {
        v["metadata"]["namespace"] = json!("other")
    });
    let empty = edit(&replica_set("basic", 1, "web"), |v| {
        v["spec"]["selector"] = json!({})
    });
    h.owner(&elsewhere);
    h.owner(&empty);
    let pod = PodSpec::running("web").build("p");
    let owners = h.controller.runtime().store();
    assert!(owners_selecting(&owners, &pod).is_empty());
    h.owner(&replica_set("bar", 1, "web"));
    let found: Vec<_> = owners_selecting(&owners, &pod)
        .iter()
        .map(|o| o.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(found, ["bar"]);
}

#[tokio::test]
async fn expectations_start_clean_when_an_owner_is_recreated() {
    // Upstream's TestExpectationsOnRecreate, through informer events.
    use kube::runtime::watcher::Event;
    let h = RsHarness::new();
    let rs = replica_set("web", 1, "web");
    h.owner(&rs);
    assert_eq!(h.drain_queue(), ["default/web"]);
    h.controller
        .sync(&common::key("default/web"))
        .await
        .unwrap();
    assert_eq!(h.fake.create_count(), 1);
    assert!(
        !h.controller
            .runtime()
            .expectations()
            .satisfied("default/web")
    );

    h.owners.apply_event(Event::Delete(rs.clone()));
    assert_eq!(h.drain_queue(), ["default/web"]);
    assert!(
        h.controller
            .runtime()
            .expectations()
            .get_expectations("default/web")
            .is_none()
    );

    let again = edit(&rs, |v| v["metadata"]["uid"] = json!("uid-web-2"));
    h.owner(&again);
    assert_eq!(h.drain_queue(), ["default/web"]);
    h.fake.clear();
    h.controller
        .sync(&common::key("default/web"))
        .await
        .unwrap();
    assert_eq!(h.fake.create_count(), 1);
    assert_eq!(h.fake.controller_refs()[0].uid, "uid-web-2");
    assert!(
        !h.controller
            .runtime()
            .expectations()
            .satisfied("default/web")
    );
}

/// The echo of the controller's own status write (only the status, the one
/// it wrote, at a new resourceVersion) queues nothing; a status someone
/// else wrote, a spec change and a resync still queue the owner.
#[tokio::test]
async fn the_echo_of_our_own_status_write_queues_nothing() {
    let h = RsHarness::new().synced();
    let rs = replica_set("web", 1, "web");
    h.owner(&rs);
    h.drain_queue();
    h.controller
        .sync(&common::key("default/web"))
        .await
        .unwrap();
    assert_eq!(h.client.updates().len(), 1, "the sync wrote the status");
    h.drain_queue();

    h.observe_status_write();
    assert!(h.drain_queue().is_empty(), "our own echo");
    let echo = h.controller.runtime().store().get(NS, "web").unwrap();

    // A resync of the same object still queues.
    h.update_owner(&echo, &echo);
    assert_eq!(h.drain_queue(), ["default/web"]);

    // Someone else's status.
    let foreign = Arc::new(edit(echo.as_ref(), |v| {
        v["metadata"]["resourceVersion"] = json!("900");
        v["status"]["readyReplicas"] = json!(7);
    }));
    h.update_owner(&echo, &foreign);
    assert_eq!(h.drain_queue(), ["default/web"]);

    // A spec change with our status.
    let scaled = Arc::new(edit(echo.as_ref(), |v| {
        v["metadata"]["resourceVersion"] = json!("901");
        v["spec"]["replicas"] = json!(3);
    }));
    h.update_owner(&echo, &scaled);
    assert_eq!(h.drain_queue(), ["default/web"]);

    // Deleted and re-created under the same name: the record is gone, so
    // the new owner's updates queue whatever their status.
    h.delete_owner(&DeletedObject::Final(Arc::clone(&echo)));
    h.drain_queue();
    let again = Arc::new(edit(echo.as_ref(), |v| {
        v["metadata"]["resourceVersion"] = json!("902");
    }));
    h.update_owner(&echo, &again);
    assert_eq!(h.drain_queue(), ["default/web"]);
}
