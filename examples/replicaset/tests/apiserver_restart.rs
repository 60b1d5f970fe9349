//! The API server restarts under a running controller (issue 15, item 3):
//! its resourceVersions start again lower, so an informer that resumes its
//! watch from the version it saw before is blind (kube-apiserver answers
//! "Too large resource version"; before that, the test cluster streamed
//! nothing). The informer must relist, and the controller must reconcile
//! a ReplicaSet created after the restart within 10 s.
//!
//! The cluster serves real HTTP, so the test runs on the real clock: the
//! deadline is measured from the restart and checked by polling, never by
//! a fixed sleep.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use ctrlkit_informer::SharedInformerFactory;
use ctrlkit_replicaset::{Controller, ControllerOptions};
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::core::Resource;
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Issue 15's bound: a new ReplicaSet is reconciled within 10 s of the
/// restart.
const AFTER_RESTART: Duration = Duration::from_secs(10);
/// A hang guard for the part before the restart.
const GUARD: Duration = Duration::from_secs(60);
const NS: &str = common::NS;

fn container() -> serde_json::Value {
    json!({"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9"}]})
}

/// The pods of `namespace` controlled by the object with `uid`.
async fn pods_of(pods: &Api<Pod>, uid: &str) -> usize {
    pods.list(&ListParams::default())
        .await
        .map(|list| {
            list.items
                .iter()
                .filter(|p| ctrlkit_podcontrol::pod::is_controlled_by(p, uid))
                .count()
        })
        // The cluster may be restarting: not yet.
        .unwrap_or(0)
}

fn resource_version<K: Resource>(object: &K) -> u64 {
    object
        .meta()
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_set_created_after_an_api_server_restart_gets_its_pods() {
    let cluster = TestCluster::start(TestClusterConfig::default())
        .await
        .unwrap();
    // The cluster's client reconnects to the restarted server.
    let client = cluster.client();
    let factory = SharedInformerFactory::new(client.clone());
    let options = ControllerOptions {
        workers: 2,
        namespace: Some(NS.into()),
        ..ControllerOptions::default()
    };
    let controller =
        Controller::<ReplicaSet>::new(client.clone(), &factory, options, None).unwrap();
    factory.start();
    let token = CancellationToken::new();
    let task = tokio::spawn(controller.run(token.clone()));

    let replica_sets = Api::<ReplicaSet>::namespaced(client.clone(), NS);
    let pods = Api::<Pod>::namespaced(client.clone(), NS);
    let before = replica_sets
        .create(
            &PostParams::default(),
            &common::live_replica_set("before", 2, container()),
        )
        .await
        .unwrap();
    let uid = before.meta().uid.clone().unwrap();
    common::eventually("the pods of the first ReplicaSet", GUARD, || {
        let pods = pods.clone();
        let uid = uid.clone();
        async move { pods_of(&pods, &uid).await == 2 }
    })
    .await;
    // Changes the ReplicaSet informer sees, so that the version it last
    // saw is well beyond anything the restarted cluster reaches during the
    // test (the stale ReplicaSet's syncs write there too until the
    // informers relist).
    for i in 0..100 {
        let patch = json!({"metadata": {"annotations": {"churn": i.to_string()}}});
        replica_sets
            .patch("before", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }
    let seen_before = resource_version(&replica_sets.get("before").await.unwrap());
    let last_before = cluster.watch_history().resource_version;

    let cluster = cluster.restart().await.unwrap();
    let restarted = tokio::time::Instant::now();
    let after = replica_sets
        .create(
            &PostParams::default(),
            &common::live_replica_set("after", 3, container()),
        )
        .await
        .unwrap();
    // The scenario is the one of the issue: the new ReplicaSet's version
    // is one the informers' watches have already passed.
    assert!(
        resource_version(&after) < seen_before,
        "{} is not below {seen_before} (last before the restart: {last_before})",
        resource_version(&after)
    );
    let uid = after.meta().uid.clone().unwrap();
    loop {
        let created = pods_of(&pods, &uid).await;
        if created == 3 {
            break;
        }
        assert!(
            restarted.elapsed() < AFTER_RESTART,
            "{created} of 3 pods {AFTER_RESTART:?} after the API server restarted: the informers did not relist"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    token.cancel();
    task.await.unwrap().unwrap();
    factory.shutdown().await;
    cluster.shutdown().await;
}
