//! Each resource's default deletion propagation, as kube-apiserver's
//! strategies' `DefaultGarbageCollectionPolicy`: core/v1
//! ReplicationControllers and batch/v1 Jobs orphan their dependents when a
//! delete names no policy (kept for old clients); apps/v1 workloads and
//! everything else delete them in the background.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

/// Create `kind` `name` in default and two pods it owns; returns the api.
async fn owner_with_pods(
    client: &Client,
    (g, v, kind, plural): (&str, &str, &str, &str),
    body: Value,
) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(g, v, kind), plural);
    let api = Api::<DynamicObject>::namespaced_with(client.clone(), "default", &ar);
    let mut obj = body;
    obj["apiVersion"] = json!(ar.api_version);
    obj["kind"] = json!(kind);
    obj["metadata"] = json!({"name": "owner"});
    let owner = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(obj).unwrap(),
        )
        .await
        .unwrap();
    let pods = Api::<Pod>::namespaced(client.clone(), "default");
    for i in 0..2 {
        let mut p = pod(&format!("dep-{i}"), json!({"app": "x"}));
        p.metadata.owner_references = Some(vec![
            serde_json::from_value(json!({
                "apiVersion": ar.api_version, "kind": kind, "name": "owner",
                "uid": owner.uid().unwrap(), "controller": true, "blockOwnerDeletion": true
            }))
            .unwrap(),
        ]);
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
    api
}

async fn pods(client: &Client) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

async fn orphaned(client: &Client, owners: &Api<DynamicObject>) {
    eventually(|| {
        let owners = owners.clone();
        async move { owners.get_opt("owner").await.unwrap().is_none() }
    })
    .await;
    let left = pods(client).await;
    assert_eq!(left.len(), 2, "dependents kept");
    assert!(left.iter().all(|p| p.owner_references().is_empty()));
}

async fn collected(client: &Client) {
    eventually(|| {
        let client = client.clone();
        async move { pods(&client).await.is_empty() }
    })
    .await;
}

fn template() -> Value {
    json!({"metadata": {"labels": {"app": "x"}}, "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_controllers_and_jobs_orphan_by_default() {
    let cluster = start().await;
    let client = cluster.client();
    let rc = owner_with_pods(
        &client,
        ("", "v1", "ReplicationController", "replicationcontrollers"),
        json!({"spec": {"replicas": 2, "selector": {"app": "x"}, "template": template()}}),
    )
    .await;
    rc.delete("owner", &DeleteParams::default()).await.unwrap();
    orphaned(&client, &rc).await;
    for p in pods(&client).await {
        Api::<Pod>::namespaced(client.clone(), "default")
            .delete(&p.name_any(), &DeleteParams::default())
            .await
            .unwrap();
    }

    let jobs = owner_with_pods(
        &client,
        ("batch", "v1", "Job", "jobs"),
        json!({"spec": {"template": template()}}),
    )
    .await;
    jobs.delete("owner", &DeleteParams::default())
        .await
        .unwrap();
    orphaned(&client, &jobs).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_policy_overrides_the_default() {
    let cluster = start().await;
    let client = cluster.client();
    let rc = owner_with_pods(
        &client,
        ("", "v1", "ReplicationController", "replicationcontrollers"),
        json!({"spec": {"replicas": 2, "selector": {"app": "x"}, "template": template()}}),
    )
    .await;
    rc.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    collected(&client).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_v1_workloads_delete_dependents_by_default() {
    let cluster = start().await;
    let client = cluster.client();
    let selector = json!({"matchLabels": {"app": "x"}});
    let rs = owner_with_pods(
        &client,
        ("apps", "v1", "ReplicaSet", "replicasets"),
        json!({"spec": {"selector": selector, "template": template()}}),
    )
    .await;
    rs.delete("owner", &DeleteParams::default()).await.unwrap();
    collected(&client).await;
    let deploy = owner_with_pods(
        &client,
        ("apps", "v1", "Deployment", "deployments"),
        json!({"spec": {"selector": selector, "template": template()}}),
    )
    .await;
    deploy
        .delete("owner", &DeleteParams::default())
        .await
        .unwrap();
    collected(&client).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_delete_cascades_in_the_background() {
    // kubectl sends propagationPolicy=Background, so even a
    // ReplicationController's pods go.
    let cluster = start().await;
    let client = cluster.client();
    owner_with_pods(
        &client,
        ("", "v1", "ReplicationController", "replicationcontrollers"),
        json!({"spec": {"replicas": 2, "selector": {"app": "x"}, "template": template()}}),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let k = kubectl::Kubectl::for_cluster(&cluster, dir.path());
    k.run_async(&["delete", "rc", "owner"]).await;
    collected(&client).await;
    k.run_async(&["get", "rc"]).await;
    cluster.shutdown().await;
}
