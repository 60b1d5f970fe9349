//! Deletion: preconditions, finalizers, graceful pod deletion, garbage
//! collection (background, foreground, orphan) and namespace teardown.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

/// Create `n` pods owned by the ReplicaSet `rs`.
async fn owned_pods(client: &Client, rs: &ReplicaSet, n: usize) {
    let pods = Api::<Pod>::namespaced(client.clone(), "default");
    for i in 0..n {
        let mut p = pod(
            &format!("{}-{i}", rs.name_any()),
            json!({"app": rs.name_any()}),
        );
        p.metadata.owner_references = Some(vec![
            serde_json::from_value(json!({
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs.name_any(),
                "uid": rs.uid().unwrap(), "controller": true, "blockOwnerDeletion": true
            }))
            .unwrap(),
        ]);
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
}

async fn pod_names(client: &Client) -> Vec<String> {
    Api::<Pod>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|p| p.name_any())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_deletion_collects_dependents() {
    let cluster = start().await;
    let client = cluster.client();
    let rss = Api::<ReplicaSet>::namespaced(client.clone(), "default");
    let rs = rss
        .create(&PostParams::default(), &replicaset("web", 2))
        .await
        .unwrap();
    owned_pods(&client, &rs, 2).await;
    create_pod(&client, "unowned", json!({})).await;
    rss.delete("web", &DeleteParams::background())
        .await
        .unwrap();
    eventually(|| {
        let client = client.clone();
        async move { pod_names(&client).await == ["unowned"] }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphan_deletion_keeps_dependents_without_the_owner_ref() {
    let cluster = start().await;
    let client = cluster.client();
    let rss = Api::<ReplicaSet>::namespaced(client.clone(), "default");
    let rs = rss
        .create(&PostParams::default(), &replicaset("web", 2))
        .await
        .unwrap();
    owned_pods(&client, &rs, 2).await;
    rss.delete("web", &DeleteParams::orphan()).await.unwrap();
    eventually(|| {
        let rss = rss.clone();
        async move { rss.get_opt("web").await.unwrap().is_none() }
    })
    .await;
    let pods = Api::<Pod>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(pods.items.len(), 2);
    for p in &pods.items {
        assert!(
            p.owner_references().is_empty(),
            "owner ref removed from {}",
            p.name_any()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_deletion_waits_for_dependents() {
    let cluster = start().await;
    let client = cluster.client();
    let rss = Api::<ReplicaSet>::namespaced(client.clone(), "default");
    let rs = rss
        .create(&PostParams::default(), &replicaset("web", 2))
        .await
        .unwrap();
    owned_pods(&client, &rs, 2).await;
    rss.delete("web", &DeleteParams::foreground())
        .await
        .unwrap();
    eventually(|| {
        let (rss, client) = (rss.clone(), client.clone());
        async move { rss.get_opt("web").await.unwrap().is_none() && pod_names(&client).await.is_empty() }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finalizers_hold_deletion_until_removed() {
    let cluster = start().await;
    let client = cluster.client();
    let pods = Api::<Pod>::namespaced(client.clone(), "default");
    let mut p = pod("a", json!({}));
    p.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    pods.create(&PostParams::default(), &p).await.unwrap();
    pods.delete("a", &DeleteParams::default()).await.unwrap();
    let held = pods.get("a").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    // No new finalizers on a terminating object.
    let add = Patch::Merge(
        json!({"metadata": {"finalizers": ["example.com/hold", "example.com/other"]}}),
    );
    assert_eq!(
        api_error(pods.patch("a", &PatchParams::default(), &add).await).code,
        422
    );
    let clear = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    pods.patch("a", &PatchParams::default(), &clear)
        .await
        .unwrap();
    assert_eq!(api_error(pods.get("a").await).code, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_deletion_only_for_bound_pods() {
    let cluster = start().await;
    let client = cluster.client();
    let pods = Api::<Pod>::namespaced(client.clone(), "default");
    create_pod(&client, "unbound", json!({})).await;
    pods.delete("unbound", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(
        api_error(pods.get("unbound").await).code,
        404,
        "an unbound pod goes at once"
    );

    let mut bound = pod("bound", json!({}));
    bound.spec.as_mut().unwrap().node_name = Some("node-1".into());
    pods.create(&PostParams::default(), &bound).await.unwrap();
    let deleted = pods
        .delete("bound", &DeleteParams::default())
        .await
        .unwrap();
    let terminating = deleted.left().expect("the pod is still there");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(30));
    assert!(
        pods.get("bound").await.is_ok(),
        "a bound pod waits for its kubelet"
    );
    // The kubelet (or a user) finishes it with a zero grace period.
    pods.delete(
        "bound",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(api_error(pods.get("bound").await).code, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_preconditions() {
    let cluster = start().await;
    let client = cluster.client();
    let pods = Api::<Pod>::namespaced(client.clone(), "default");
    let p = create_pod(&client, "a", json!({})).await;
    let wrong_uid = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("nope".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    assert_eq!(api_error(pods.delete("a", &wrong_uid).await).code, 409);
    let wrong_rv = DeleteParams {
        preconditions: Some(Preconditions {
            uid: None,
            resource_version: Some("1".into()),
        }),
        ..Default::default()
    };
    assert_eq!(api_error(pods.delete("a", &wrong_rv).await).code, 409);
    let right = DeleteParams {
        preconditions: Some(Preconditions {
            uid: p.uid(),
            resource_version: p.resource_version(),
        }),
        ..Default::default()
    };
    pods.delete("a", &right).await.unwrap();
    assert_eq!(api_error(pods.delete("a", &right).await).code, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_collection_and_namespace_teardown() {
    let cluster = start().await;
    let client = cluster.client();
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "tmp"}})).unwrap();
    let namespaces = Api::<Namespace>::all(client.clone());
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let pods = Api::<Pod>::namespaced(client.clone(), "tmp");
    for (i, app) in ["a", "a", "b"].iter().enumerate() {
        pods.create(
            &PostParams::default(),
            &pod(&format!("p{i}"), json!({"app": app})),
        )
        .await
        .unwrap();
    }
    pods.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("app=a"),
    )
    .await
    .unwrap();
    let left: Vec<_> = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|p| p.name_any())
        .collect();
    assert_eq!(left, ["p2"]);

    namespaces
        .delete("tmp", &DeleteParams::default())
        .await
        .unwrap();
    eventually(|| {
        let namespaces = namespaces.clone();
        async move { namespaces.get_opt("tmp").await.unwrap().is_none() }
    })
    .await;
    assert!(
        pods.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert_eq!(
        api_error(namespaces.delete("default", &DeleteParams::default()).await).code,
        403
    );
}
