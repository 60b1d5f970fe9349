//! Request statistics through kube-client.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use ctrlkit_testcluster::kubelet::KubeletConfig;
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{PostParams, WatchParams};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_creates_conflicts_and_watches_by_verb() {
    let cluster = start().await;
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    let before = cluster.requests();
    for name in ["a", "b", "c"] {
        pods.create(&PostParams::default(), &pod(name, json!({})))
            .await
            .unwrap();
    }
    let stats = cluster.requests().since(&before);
    let creates = stats.count("create", "pods");
    assert_eq!(creates.success, 3);
    assert_eq!(creates.failed(), 0);
    assert_eq!(stats.code(201), 3);
    assert_eq!(stats.total().total(), 3);

    // A second create of the same name is a 409.
    let err = pods
        .create(&PostParams::default(), &pod("a", json!({})))
        .await
        .unwrap_err();
    assert!(matches!(err, kube::Error::Api(ref s) if s.code == 409));
    pods.get("missing").await.unwrap_err();
    let stats = cluster.requests().since(&before);
    assert_eq!(stats.count("create", "pods").success, 3);
    assert_eq!(stats.count("create", "pods").client_error, 1);
    assert_eq!(stats.count("get", "pods").client_error, 1);
    assert_eq!(stats.code(409), 1);
    assert_eq!(stats.code(404), 1);
    assert_eq!(stats.total().failed(), 2);
    assert_eq!(stats.by_verb()["create"].total(), 4);

    // A watch counts once, when it is opened, however many events it gets.
    let mut events = pods
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    for _ in 0..3 {
        events.next().await.unwrap().unwrap();
    }
    let stats = cluster.requests().since(&before);
    assert_eq!(stats.count("watch", "pods").success, 1);

    cluster.reset_requests();
    assert_eq!(cluster.requests().total().total(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelet_requests_are_counted_as_internal() {
    let config = TestClusterConfig::default().with_kubelet(KubeletConfig::default());
    let cluster = TestCluster::start(config).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    pods.create(&PostParams::default(), &pod("web", json!({})))
        .await
        .unwrap();
    // The kubelet binds the pod and writes its status: internal requests.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let stats = cluster.requests();
        if stats.internal_total().success > 0 && stats.internal_count("watch", "pods").success > 0 {
            // The test's own requests are the only external ones.
            assert_eq!(stats.count("create", "pods").success, 1);
            assert_eq!(stats.count("watch", "pods").total(), 0);
            assert_eq!(
                stats.total().total(),
                stats.count("create", "pods").total() + stats.count("get", "pods").total()
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no internal request seen: {stats}"
        );
        pods.get("web").await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
