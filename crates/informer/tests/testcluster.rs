//! The informer against ctrlkit's simulated API server: a real kube-runtime
//! watcher over HTTP, including a relist forced by 410 Gone.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use ctrlkit_informer::{BY_CONTROLLER_UID, Informer, index_by_controller_uid, orphan_index_key};
use ctrlkit_testcluster::faults::{ErrorKind, ErrorRule, FaultConfig, FaultKind};
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use serde_json::json;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

/// Deadlock guard only; nothing here is expected to take long.
const GUARD: Duration = Duration::from_secs(60);

async fn next(seen: &mut UnboundedReceiver<Seen>) -> Seen {
    tokio::time::timeout(GUARD, seen.recv())
        .await
        .unwrap()
        .unwrap()
}

fn new_pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}
    }))
    .unwrap()
}

async fn relabel(pods: &Api<Pod>, name: &str, value: &str) -> Pod {
    let patch = json!({"metadata": {"labels": {"step": value}}});
    pods.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informer_follows_pods_through_changes_and_a_forced_relist() {
    let cluster = TestCluster::start(
        TestClusterConfig::default().with_bookmark_interval(Duration::from_secs(3600)),
    )
    .await
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    let existing = pods
        .create(&PostParams::default(), &new_pod("before"))
        .await
        .unwrap();

    let (rec, mut seen) = Recorder::forwarding();
    // Short server-side watch timeouts make the watcher re-watch every
    // second, which is when the faults below take effect.
    let informer = Informer::builder(pods.clone())
        .watcher_config(watcher::Config::default().timeout(1))
        .index(BY_CONTROLLER_UID, index_by_controller_uid)
        .handler(rec)
        .build();
    let cancel = CancellationToken::new();
    let task = informer.start(cancel.clone()).unwrap();
    tokio::time::timeout(GUARD, informer.wait_for_cache_sync())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        next(&mut seen).await,
        add("before", &existing.resource_version().unwrap(), true)
    );

    // Create, update, delete.
    let a = pods
        .create(&PostParams::default(), &new_pod("a"))
        .await
        .unwrap();
    let a_rv = a.resource_version().unwrap();
    assert_eq!(next(&mut seen).await, add("a", &a_rv, false));
    assert_eq!(
        informer.store().has_observed_resource_version(&a_rv),
        Ok(true)
    );
    let a2 = relabel(&pods, "a", "1").await;
    assert_eq!(
        next(&mut seen).await,
        update("a", &a_rv, &a2.resource_version().unwrap())
    );
    let b = pods
        .create(&PostParams::default(), &new_pod("b"))
        .await
        .unwrap();
    assert_eq!(
        next(&mut seen).await,
        add("b", &b.resource_version().unwrap(), false)
    );
    pods.delete("before", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    match next(&mut seen).await {
        Seen::Delete {
            name,
            tombstone: false,
            ..
        } => assert_eq!(name, "before"),
        other => panic!("expected a final delete, got {other:?}"),
    }
    let store = informer.store();
    assert_eq!(store.len(), 2);
    assert_eq!(
        store
            .by_index(BY_CONTROLLER_UID, &orphan_index_key("default"))
            .unwrap()
            .len(),
        2
    );

    // Cut the informer off: every watch request now fails. Once one has
    // failed, no watch is open, so the changes below go unseen...
    let faults = cluster.faults();
    faults.clear_log();
    faults.set_config(FaultConfig::none().with_error(ErrorRule::verb(
        "watch",
        1.0,
        ErrorKind::InternalError,
    )));
    tokio::time::timeout(GUARD, async {
        while !faults
            .log()
            .iter()
            .any(|f| f.verb == "watch" && matches!(f.kind, FaultKind::Error(_)))
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap();
    pods.delete("b", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let a3 = relabel(&pods, "a", "2").await;
    // ...until the next watch is answered with 410 Gone and the watcher
    // relists: the change is an update, the missed delete a tombstone.
    faults.force_gone_next_watch(Some("pods"));
    faults.set_config(FaultConfig::none());
    let mut after_relist = vec![next(&mut seen).await, next(&mut seen).await];
    after_relist.sort_by_key(|s| format!("{s:?}"));
    assert_eq!(
        after_relist,
        vec![
            delete("b", &b.resource_version().unwrap(), true),
            update(
                "a",
                &a2.resource_version().unwrap(),
                &a3.resource_version().unwrap()
            ),
        ]
    );
    assert!(
        faults
            .log()
            .iter()
            .any(|f| matches!(f.kind, FaultKind::ForcedGone))
    );
    assert_eq!(store.len(), 1);
    assert_eq!(
        store.has_observed_resource_version(&a3.resource_version().unwrap()),
        Ok(true)
    );

    cancel.cancel();
    tokio::time::timeout(GUARD, task).await.unwrap().unwrap();
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn factory_shares_one_watch_between_two_controllers() {
    let cluster = TestCluster::start(TestClusterConfig::default())
        .await
        .unwrap();
    let factory = ctrlkit_informer::SharedInformerFactory::new(cluster.client());
    let (first, mut first_seen) = Recorder::forwarding();
    let (second, mut second_seen) = Recorder::forwarding();
    // Two controllers each ask for the pod informer and register a handler.
    factory
        .namespaced::<Pod>("default", watcher::Config::default())
        .add_event_handler(first);
    factory
        .namespaced::<Pod>("default", watcher::Config::default())
        .add_event_handler(second);
    assert_eq!(factory.len(), 1);
    factory.start();
    tokio::time::timeout(GUARD, factory.wait_for_cache_sync())
        .await
        .unwrap()
        .unwrap();

    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    let p = pods
        .create(&PostParams::default(), &new_pod("shared"))
        .await
        .unwrap();
    let expected = add("shared", &p.resource_version().unwrap(), false);
    assert_eq!(next(&mut first_seen).await, expected);
    assert_eq!(next(&mut second_seen).await, expected);

    tokio::time::timeout(GUARD, factory.shutdown())
        .await
        .unwrap();
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_that_does_not_decode_is_skipped_and_the_others_are_cached() {
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use kube::api::{ApiResource, DynamicObject};
    use parking_lot::Mutex;
    use std::sync::Arc;

    let cluster = TestCluster::start(TestClusterConfig::default())
        .await
        .unwrap();
    let dynamic: Api<DynamicObject> = Api::namespaced_with(
        cluster.client(),
        "default",
        &ApiResource::erase::<ReplicaSet>(&()),
    );
    // `message_path` is the container's terminationMessagePath: a string in
    // the Rust type; the test cluster stores any JSON there (as a newer
    // API version's field or a webhook's mistake could put there).
    let replicaset = |name: &str, message_path: serde_json::Value| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{
                        "name": "c", "image": "busybox",
                        "terminationMessagePath": message_path,
                    }]}
                }
            }
        }))
        .unwrap()
    };
    // One ReplicaSet the Rust type cannot decode, between two ordinary ones.
    let path = json!("/dev/termination-log");
    for (name, message_path) in [("a", path.clone()), ("bad", json!(42)), ("b", path.clone())] {
        dynamic
            .create(&PostParams::default(), &replicaset(name, message_path))
            .await
            .unwrap();
    }

    let undecodable = Arc::new(Mutex::new(Vec::new()));
    let seen = undecodable.clone();
    let (added_tx, mut added) = tokio::sync::mpsc::unbounded_channel();
    let informer = Informer::builder(Api::<ReplicaSet>::namespaced(cluster.client(), "default"))
        .handler(
            ctrlkit_informer::HandlerFns::new()
                .on_add(move |rs: &Arc<ReplicaSet>, _| {
                    let _ = added_tx.send(rs.metadata.name.clone().unwrap_or_default());
                })
                .on_undecodable(move |bad| {
                    seen.lock()
                        .push((bad.key().unwrap().to_string(), bad.error().to_string()))
                }),
        )
        .build();
    let cancel = CancellationToken::new();
    let task = informer.start(cancel.clone()).unwrap();
    tokio::time::timeout(GUARD, informer.wait_for_cache_sync())
        .await
        .unwrap()
        .unwrap();

    let store = informer.store();
    let mut cached: Vec<_> = store
        .list()
        .iter()
        .filter_map(|rs| rs.metadata.name.clone())
        .collect();
    cached.sort();
    assert_eq!(cached, ["a", "b"]);
    assert_eq!(informer.stats().decode_errors, 1);
    {
        let undecodable = undecodable.lock();
        assert_eq!(undecodable.len(), 1);
        assert_eq!(undecodable[0].0, "default/bad");
        assert!(undecodable[0].1.contains("42"), "{}", undecodable[0].1);
    }
    assert!(informer.health(Duration::from_secs(60)).is_ok());

    // Fixed, the object enters the cache like any other.
    let fix = json!({"spec": {"replicas": 3, "template": {"spec": {"containers": [{
        "name": "c", "image": "busybox", "terminationMessagePath": path,
    }]}}}});
    dynamic
        .patch("bad", &PatchParams::default(), &Patch::Merge(&fix))
        .await
        .unwrap();
    let mut names = Vec::new();
    while !names.iter().any(|n| n == "bad") {
        names.push(
            tokio::time::timeout(GUARD, added.recv())
                .await
                .unwrap()
                .unwrap(),
        );
    }
    assert_eq!(store.get("default", "bad").unwrap().spec.replicas, Some(3));

    cancel.cancel();
    tokio::time::timeout(GUARD, task).await.unwrap().unwrap();
    cluster.shutdown().await;
}
