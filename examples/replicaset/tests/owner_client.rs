//! `KubeOwnerClient` against the test cluster: the status write returns the
//! owner as stored (its new resourceVersion) without decoding the whole
//! response, and API errors keep their status.
#![allow(clippy::unwrap_used)]

use ctrlkit_replicaset::{KubeOwnerClient, OwnerClient};
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

fn replica_set(name: &str) -> ReplicaSet {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}
            }
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn a_status_write_returns_the_owner_at_its_stored_resource_version() {
    let cluster = TestCluster::start(TestClusterConfig::default())
        .await
        .unwrap();
    let api: Api<ReplicaSet> = Api::namespaced(cluster.client(), "default");
    let created = api
        .create(&PostParams::default(), &replica_set("web"))
        .await
        .unwrap();
    let client = KubeOwnerClient::new(cluster.client());

    let mut owner = created.clone();
    owner.status = Some(ReplicaSetStatus {
        replicas: 2,
        ready_replicas: Some(1),
        observed_generation: created.metadata.generation,
        ..Default::default()
    });
    let updated = client.update_status(&owner).await.unwrap();
    let stored = api.get("web").await.unwrap();
    assert_eq!(
        updated.metadata.resource_version, stored.metadata.resource_version,
        "the stored resourceVersion is returned"
    );
    assert_ne!(
        updated.metadata.resource_version,
        created.metadata.resource_version
    );
    assert_eq!(updated.metadata.generation, stored.metadata.generation);
    assert_eq!(updated.status, stored.status, "the status written");
    assert_eq!(updated.spec, stored.spec);
    assert_eq!(updated.metadata.uid, stored.metadata.uid);

    // The old resourceVersion is stale now: a 409 with its status kept.
    let err = client.update_status(&owner).await.unwrap_err();
    match err {
        kube::Error::Api(status) => assert_eq!(status.code, 409),
        other => panic!("expected a conflict, got {other:?}"),
    }
    // Gone: a 404.
    api.delete("web", &Default::default()).await.unwrap();
    match client.update_status(&updated).await.unwrap_err() {
        kube::Error::Api(status) => assert_eq!(status.code, 404),
        other => panic!("expected not found, got {other:?}"),
    }
    cluster.shutdown().await;
}

/// The binaries cache owners without `managedFields`
/// (`ControllerOptions::drop_owner_managed_fields`), so their status writes
/// carry none: the server keeps the owner's entries (kube-apiserver takes
/// a status subresource write's managedFields from the live object) and
/// adds or updates the writer's own `status` entry.
#[tokio::test]
async fn a_status_write_without_managed_fields_keeps_the_servers() {
    let cluster = TestCluster::start(TestClusterConfig::default())
        .await
        .unwrap();
    let api: Api<ReplicaSet> = Api::namespaced(cluster.client(), "default");
    let created = api
        .create(&PostParams::default(), &replica_set("web"))
        .await
        .unwrap();
    let before = created.metadata.managed_fields.clone().unwrap();
    assert!(!before.is_empty(), "the create has its entry");

    let mut owner = created.clone();
    owner.metadata.managed_fields = None;
    owner.status = Some(ReplicaSetStatus {
        replicas: 2,
        observed_generation: created.metadata.generation,
        ..Default::default()
    });
    KubeOwnerClient::new(cluster.client())
        .update_status(&owner)
        .await
        .unwrap();

    let after = api
        .get("web")
        .await
        .unwrap()
        .metadata
        .managed_fields
        .unwrap();
    for entry in &before {
        assert!(
            after.iter().any(|e| e.manager == entry.manager
                && e.operation == entry.operation
                && e.subresource == entry.subresource
                && e.fields_v1 == entry.fields_v1),
            "{entry:?} kept in {after:?}"
        );
    }
    assert!(
        after
            .iter()
            .any(|e| e.subresource.as_deref() == Some("status")),
        "the status write has its own entry: {after:?}"
    );
    cluster.shutdown().await;
}
