//! Helpers shared by the integration tests.
#![allow(dead_code, clippy::unwrap_used)]

pub(crate) mod crds;
pub(crate) mod kubectl;

use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::json;

pub(crate) async fn start() -> TestCluster {
    TestCluster::start(TestClusterConfig::default())
        .await
        .unwrap()
}

pub(crate) fn pod(name: &str, labels: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
    }))
    .unwrap()
}

pub(crate) fn replicaset(name: &str, replicas: i32) -> ReplicaSet {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        },
    }))
    .unwrap()
}

pub(crate) async fn create_pod(client: &Client, name: &str, labels: serde_json::Value) -> Pod {
    Api::<Pod>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &pod(name, labels))
        .await
        .unwrap()
}

/// The API error of a failed call.
pub(crate) fn api_error<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> kube::core::Status {
    match r {
        Err(kube::Error::Api(e)) => *e,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Poll `f` until it returns true (deadlock guard: 30 s).
pub(crate) async fn eventually<F, Fut>(mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if f().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not reached within 30 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
