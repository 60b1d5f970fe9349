//! `TestCluster::restart`: as kube-apiserver restarting on an emptied
//! etcd, objects are gone and resourceVersions start again lower; clients
//! made before keep working, and a watch resumed from a version the new
//! cluster has not reached is told so.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use serde_json::json;

const PODS: &str = "/api/v1/namespaces/default/pods";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_cluster_starts_empty_at_lower_versions() {
    let cluster = start().await;
    let client = cluster.client();
    let port = cluster.port();
    for i in 0..20 {
        create_pod(&client, &format!("p{i}"), json!({})).await;
    }
    let before = cluster.watch_history().resource_version;

    let cluster = cluster.restart().await.unwrap();
    assert_eq!(cluster.port(), port);
    // The old client reconnects; the pods are gone.
    let pods = Api::<Pod>::namespaced(client.clone(), "default");
    let list = pods.list(&Default::default()).await.unwrap();
    assert!(list.items.is_empty());
    let now: u64 = list.metadata.resource_version.unwrap().parse().unwrap();
    assert!(now < before, "{now} is not below {before}");
    // A watch resumed from before the restart gets "Too large resource
    // version" at once, rather than silence.
    let (code, event) = tokio::time::timeout(
        Duration::from_secs(60),
        first_watch_event(
            &client,
            &format!("{PODS}?watch=true&resourceVersion={before}&timeoutSeconds=30"),
        ),
    )
    .await
    .unwrap();
    assert_eq!(code, 200);
    let event = event.unwrap();
    assert_eq!(event["type"], "ERROR", "{event}");
    assert_eq!(event["object"]["code"], 504, "{event}");
    assert_eq!(
        event["object"]["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rbac_cluster_keeps_its_certificate_and_tokens_across_a_restart() {
    let cluster = TestCluster::start(TestClusterConfig::default().with_rbac(true))
        .await
        .unwrap();
    let admin = cluster.client();
    let user = cluster
        .client_for_user("alice", &["system:masters"])
        .unwrap();
    let kubeconfig = cluster.kubeconfig();

    let cluster = cluster.restart().await.unwrap();
    assert!(cluster.base_url().starts_with("https://"));
    // Both clients trust the served certificate and are still known.
    for (i, client) in [admin, user].iter().enumerate() {
        create_pod(client, &format!("p{i}"), json!({})).await;
    }
    assert_eq!(
        serde_json::to_value(cluster.kubeconfig().clusters).unwrap(),
        serde_json::to_value(kubeconfig.clusters).unwrap()
    );
    cluster.shutdown().await;
}
