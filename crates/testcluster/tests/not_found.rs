//! Paths nothing serves and methods a path does not take: kube-apiserver's
//! 404 and 405 `Status` bodies.
#![allow(clippy::unwrap_used)]

mod common;

use common::kubectl::Kubectl;
use serde_json::{Value, json};

async fn send(
    cluster: &ctrlkit_testcluster::TestCluster,
    method: &str,
    path: &str,
) -> (u16, Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(kube::client::Body::from(b"{}".to_vec()))
        .unwrap();
    let resp = cluster.client().send(req).await.unwrap();
    let code = resp.status().as_u16();
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    (code, serde_json::from_slice(&body).unwrap())
}

fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "details": {}, "code": code})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_paths_are_404_and_unsupported_methods_405() {
    let cluster = common::start().await;
    let not_found = status(
        404,
        "NotFound",
        "the server could not find the requested resource",
    );
    for (method, path) in [
        ("GET", "/api/v1/foos"),
        ("POST", "/api/v1/namespaces/default/foos"),
        ("GET", "/apis/nope.example.com/v1/things"),
        ("GET", "/apis/apps/v2/deployments"),
        ("GET", "/api/v1/namespaces/default/pods/p/nosuchsub"),
        ("GET", "/api/v1/namespaces/default/configmaps/c/status"),
        ("GET", "/nothing/here"),
    ] {
        assert_eq!(
            send(&cluster, method, path).await,
            (404, not_found.clone()),
            "{method} {path}"
        );
    }
    let not_allowed = status(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
    );
    for (method, path) in [
        ("POST", "/api/v1/namespaces/default/configmaps/c"),
        ("PUT", "/api/v1/namespaces/default/configmaps"),
        (
            "DELETE",
            "/apis/apps/v1/namespaces/default/deployments/d/status",
        ),
        (
            "POST",
            "/apis/apps/v1/namespaces/default/deployments/d/scale",
        ),
        ("GET", "/api/v1/namespaces/default/pods/p/binding"),
    ] {
        assert_eq!(
            send(&cluster, method, path).await,
            (405, not_allowed.clone()),
            "{method} {path}"
        );
    }
    // A known object that does not exist is the object's own 404.
    let (code, body) = send(
        &cluster,
        "GET",
        "/api/v1/namespaces/default/configmaps/missing",
    )
    .await;
    assert_eq!(code, 404);
    assert_eq!(body["message"], "configmaps \"missing\" not found");
    // POST to a collection of a served kind creates.
    let req = http::Request::post("/api/v1/namespaces/default/configmaps")
        .header("content-type", "application/json")
        .body(kube::client::Body::from(
            br#"{"metadata":{"name":"made"}}"#.to_vec(),
        ))
        .unwrap();
    assert_eq!(
        cluster.client().send(req).await.unwrap().status().as_u16(),
        201
    );

    let dir = tempfile::tempdir().unwrap();
    let k = Kubectl::for_cluster(&cluster, dir.path());
    let err = k.fail_async(&["get", "foos"]).await;
    assert!(
        err.contains("the server doesn't have a resource type \"foos\""),
        "{err}"
    );
    let err = k
        .fail_async(&["get", "--raw", "/apis/nope.example.com/v1/things"])
        .await;
    assert!(
        err.contains("NotFound")
            && err.contains("the server could not find the requested resource"),
        "{err}"
    );
    cluster.shutdown().await;
}
