//! Every PATCH content type, through kube-client.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_patch_sets_and_removes_fields() {
    let cluster = start().await;
    create_pod(&cluster.client(), "a", json!({"keep": "1", "drop": "1"})).await;
    let pods = Api::<Pod>::namespaced(cluster.client(), "default");
    let patch = Patch::Merge(
        json!({"metadata": {"labels": {"drop": null, "new": "2"}, "annotations": {"a": "b"}}}),
    );
    let p = pods
        .patch("a", &PatchParams::default(), &patch)
        .await
        .unwrap();
    let labels = p.labels();
    assert_eq!(labels.get("keep").map(String::as_str), Some("1"));
    assert_eq!(labels.get("new").map(String::as_str), Some("2"));
    assert!(!labels.contains_key("drop"));
    assert_eq!(p.annotations().get("a").map(String::as_str), Some("b"));

    // A merge patch carrying a stale resourceVersion is a conflict.
    let stale = Patch::Merge(json!({"metadata": {"resourceVersion": "1", "labels": {"x": "y"}}}));
    let err = api_error(pods.patch("a", &PatchParams::default(), &stale).await);
    assert_eq!(err.code, 409);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strategic_merge_for_metadata_lists() {
    let cluster = start().await;
    let client = cluster.client();
    let pods = Api::<Pod>::namespaced(client.clone(), "default");
    let mut p = pod("a", json!({}));
    p.metadata.finalizers = Some(vec!["example.com/a".into()]);
    p.metadata.owner_references = Some(vec![
        serde_json::from_value(
            json!({"apiVersion": "example.com/v1", "kind": "Thing", "name": "o1", "uid": "uid-1"}),
        )
        .unwrap(),
        serde_json::from_value(
            json!({"apiVersion": "example.com/v1", "kind": "Thing", "name": "o2", "uid": "uid-2"}),
        )
        .unwrap(),
    ]);
    pods.create(&PostParams::default(), &p).await.unwrap();

    let patch = Patch::Strategic(json!({"metadata": {
        "finalizers": ["example.com/b"],
        "labels": {"l": "v"},
        "ownerReferences": [
            {"uid": "uid-1", "$patch": "delete"},
            {"apiVersion": "example.com/v1", "kind": "Thing", "name": "o3", "uid": "uid-3"}
        ]
    }}));
    let p = pods
        .patch("a", &PatchParams::default(), &patch)
        .await
        .unwrap();
    // Elements a patch adds come first, as kube-apiserver orders merged
    // lists (apimachinery's normalizeElementOrder).
    assert_eq!(
        p.finalizers(),
        ["example.com/b", "example.com/a"],
        "finalizers merge as a set"
    );
    let uids: Vec<_> = p.owner_references().iter().map(|r| r.uid.clone()).collect();
    assert_eq!(uids, ["uid-3", "uid-2"], "ownerReferences merge by uid");
    assert_eq!(p.labels().get("l").map(String::as_str), Some("v"));

    let remove = Patch::Strategic(
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/a"]}}),
    );
    let p = pods
        .patch("a", &PatchParams::default(), &remove)
        .await
        .unwrap();
    assert_eq!(p.finalizers(), ["example.com/b"]);

    // Containers merge by name.
    let containers =
        Patch::Strategic(json!({"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}));
    let p = pods
        .patch("a", &PatchParams::default(), &containers)
        .await
        .unwrap();
    let spec = p.spec.unwrap();
    assert_eq!(spec.containers.len(), 1);
    assert_eq!(spec.containers[0].image.as_deref(), Some("nginx:2"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_patch_with_test_operation() {
    let cluster = start().await;
    create_pod(&cluster.client(), "a", json!({"v": "1"})).await;
    let pods = Api::<Pod>::namespaced(cluster.client(), "default");
    let ok: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/labels/v", "value": "1"},
        {"op": "replace", "path": "/metadata/labels/v", "value": "2"},
        {"op": "add", "path": "/metadata/annotations", "value": {"k": "x"}}
    ]))
    .unwrap();
    let p = pods
        .patch("a", &PatchParams::default(), &Patch::<()>::Json(ok))
        .await
        .unwrap();
    assert_eq!(p.labels().get("v").map(String::as_str), Some("2"));
    assert_eq!(p.annotations().get("k").map(String::as_str), Some("x"));

    let failing: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/labels/v", "value": "1"},
        {"op": "replace", "path": "/metadata/labels/v", "value": "3"}
    ]))
    .unwrap();
    let err = api_error(
        pods.patch("a", &PatchParams::default(), &Patch::<()>::Json(failing))
            .await,
    );
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        pods.get("a")
            .await
            .unwrap()
            .labels()
            .get("v")
            .map(String::as_str),
        Some("2")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_creates_and_detects_conflicts() {
    let cluster = start().await;
    let leases = Api::<Lease>::namespaced(cluster.client(), "default");
    let apply = |holder: &str| {
        Patch::Apply(json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "l"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 10}
        }))
    };
    let l = leases
        .patch("l", &PatchParams::apply("mgr-a"), &apply("a"))
        .await
        .unwrap();
    assert_eq!(l.spec.unwrap().holder_identity.as_deref(), Some("a"));
    let err = api_error(
        leases
            .patch("l", &PatchParams::apply("mgr-b"), &apply("b"))
            .await,
    );
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));
    // The same value is no conflict; force takes ownership.
    leases
        .patch("l", &PatchParams::apply("mgr-b"), &apply("a"))
        .await
        .unwrap();
    let l = leases
        .patch("l", &PatchParams::apply("mgr-b").force(), &apply("b"))
        .await
        .unwrap();
    assert_eq!(l.spec.unwrap().holder_identity.as_deref(), Some("b"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_patch_type_is_415() {
    let cluster = start().await;
    let client = cluster.client();
    create_pod(&client, "a", json!({})).await;
    let req = http::Request::patch("/api/v1/namespaces/default/pods/a")
        .header("content-type", "text/plain")
        .body(b"x".to_vec())
        .unwrap();
    let err = api_error(client.request_text(req).await);
    assert_eq!(err.code, 415);
}

/// The conformance case "Replace and Patch tests" (ReplicaSet): after a
/// strategic-merge patch adding a container, the new one is first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strategic_merge_puts_added_list_elements_first() {
    let cluster = common::start().await;
    let client = cluster.client();
    let rss = Api::<k8s_openapi::api::apps::v1::ReplicaSet>::namespaced(client.clone(), "default");
    rss.create(&PostParams::default(), &common::replicaset("web", 1))
        .await
        .unwrap();
    let patch = Patch::Strategic(json!({"spec": {"replicas": 2, "template": {"spec": {
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "patched", "image": "busybox:1.36"}]}}}}));
    let rs = rss
        .patch("web", &PatchParams::default(), &patch)
        .await
        .unwrap();
    let rs = serde_json::to_value(&rs).unwrap();
    let names: Vec<_> = rs["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["patched", "c"]);

    // kubectl patch (strategic by default) sees the same order.
    let dir = tempfile::tempdir().unwrap();
    let k = common::kubectl::Kubectl::for_cluster(&cluster, dir.path());
    k.run_async(&[
        "patch",
        "rs",
        "web",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"third","image":"busybox"}]}}}}"#,
    ])
    .await;
    let names = k
        .run_async(&[
            "get",
            "rs",
            "web",
            "-o",
            "jsonpath={.spec.template.spec.containers[*].name}",
        ])
        .await;
    assert_eq!(names, "third patched c");
    cluster.shutdown().await;
}
