//! `TestCluster::apply_yaml` (multi-document manifests applied through
//! the generic machinery) and the injectable clock.
#![allow(clippy::unwrap_used)]

mod common;

use ctrlkit_testcluster::{Error, TestCluster, TestClusterConfig, TokioClock};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Api;
use serde_json::json;

const MANIFESTS: &str = r#"
apiVersion: v1
kind: Namespace
metadata:
  name: shop
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: shop
data:
  mode: fast
---
# a document with only a comment is skipped
---
apiVersion: v1
kind: List
items:
  - apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: web
    spec:
      selector:
        matchLabels: {app: web}
      template:
        metadata:
          labels: {app: web}
        spec:
          containers:
            - name: app
              image: nginx:1.27
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manifests_apply_and_reapply() {
    let cluster = common::start().await;
    let applied = cluster.apply_yaml(MANIFESTS).unwrap();
    let kinds: Vec<_> = applied
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["Namespace", "ConfigMap", "Deployment"]);
    let client = cluster.client();
    Api::<Namespace>::all(client.clone())
        .get("shop")
        .await
        .unwrap();
    let cm = Api::<ConfigMap>::namespaced(client.clone(), "shop")
        .get("settings")
        .await
        .unwrap();
    assert_eq!(cm.data.unwrap()["mode"], "fast");
    let deploy = Api::<Deployment>::namespaced(client.clone(), "default")
        .get("web")
        .await
        .unwrap();
    assert_eq!(deploy.metadata.generation, Some(1));
    let mf = serde_json::to_value(&deploy).unwrap()["metadata"]["managedFields"][0].clone();
    assert_eq!(mf["manager"], "testcluster-apply");
    assert_eq!(mf["operation"], "Apply");

    // Applying a changed manifest updates in place.
    let again = MANIFESTS.replace("mode: fast", "mode: slow");
    cluster.apply_yaml(&again).unwrap();
    let cm = Api::<ConfigMap>::namespaced(client.clone(), "shop")
        .get("settings")
        .await
        .unwrap();
    assert_eq!(cm.data.unwrap()["mode"], "slow");

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cm.yaml");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-file\n",
    )
    .unwrap();
    assert_eq!(
        cluster.apply_yaml_file(&path).unwrap()[0]["metadata"]["namespace"],
        "default"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_documents_are_named() {
    let cluster = common::start().await;
    let err = cluster
        .apply_yaml("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ok\n---\napiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n")
        .unwrap_err();
    assert!(
        matches!(&err, Error::Manifest { document: 1, reason } if reason.contains("Widget")),
        "{err}"
    );
    let err = cluster.apply_yaml("kind: [unclosed").unwrap_err();
    assert!(matches!(err, Error::Yaml { document: 0, .. }), "{err}");
    let err = cluster
        .apply_yaml("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers: []\n")
        .unwrap_err();
    assert!(
        matches!(&err, Error::Rejected { document: 0, code: 422, message, .. } if message.contains("spec.containers")),
        "{err}"
    );
    let err = cluster
        .apply_yaml("apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n")
        .unwrap_err();
    assert!(matches!(err, Error::Manifest { document: 0, .. }), "{err}");
    let missing = cluster
        .apply_yaml_file("/nonexistent/manifest.yaml")
        .unwrap_err();
    assert!(matches!(missing, Error::Read { .. }), "{missing}");
    // The first document of the failed stream was applied.
    Api::<ConfigMap>::namespaced(cluster.client(), "default")
        .get("ok")
        .await
        .unwrap();
    cluster.shutdown().await;
}

/// On paused tokio time, a `TokioClock` makes the cluster's timestamps
/// follow `tokio::time::advance`: no wall-clock waits.
#[tokio::test(start_paused = true)]
async fn timestamps_follow_a_tokio_clock_on_paused_time() {
    let start: jiff::Timestamp = "2030-06-01T12:00:00Z".parse().unwrap();
    let cluster =
        TestCluster::start(TestClusterConfig::default().with_clock(TokioClock::starting_at(start)))
            .await
            .unwrap();
    let first = cluster
        .apply_yaml("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v\n")
        .unwrap();
    assert_eq!(
        first[0]["metadata"]["creationTimestamp"],
        "2030-06-01T12:00:00Z"
    );
    assert_eq!(
        first[0]["metadata"]["managedFields"][0]["time"],
        "2030-06-01T12:00:00Z"
    );
    tokio::time::advance(std::time::Duration::from_secs(3600)).await;
    let second = cluster
        .apply_yaml("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: w\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n")
        .unwrap();
    assert_eq!(
        second[0]["metadata"]["managedFields"][0]["time"],
        "2030-06-01T13:00:00Z"
    );
    assert_eq!(
        second[1]["metadata"]["creationTimestamp"],
        "2030-06-01T13:00:00Z"
    );
    assert_eq!(
        json!(second[0]["metadata"]["creationTimestamp"]),
        json!("2030-06-01T12:00:00Z")
    );
    cluster.shutdown().await;
}
