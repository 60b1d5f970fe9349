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

/// A client of `cluster` that does not retry (kube-client retries 429,
/// 503 and 504 answers by default), for tests of those answers.
pub(crate) fn client_without_retries(cluster: &TestCluster) -> Client {
    let mut config = kube::Config::new(cluster.base_url().parse().unwrap());
    config.default_retry = false;
    Client::try_from(config).unwrap()
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

/// Send a request as it is (no client-side checks) and return the status
/// and the body as JSON (`Null` when it is not JSON).
pub(crate) async fn raw(
    client: &Client,
    method: &str,
    uri: &str,
    content_type: &str,
    body: impl Into<Vec<u8>>,
) -> (u16, serde_json::Value) {
    use http_body_util::BodyExt;
    let mut req = http::Request::builder().method(method).uri(uri);
    if !content_type.is_empty() {
        req = req.header(http::header::CONTENT_TYPE, content_type);
    }
    let req = req.body(kube::client::Body::from(body.into())).unwrap();
    let resp = client.send(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null),
    )
}

/// The first line of a streamed (watch) response, as JSON, with the
/// response's status; `None` when the stream ends without one.
pub(crate) async fn first_watch_event(
    client: &Client,
    uri: &str,
) -> (u16, Option<serde_json::Value>) {
    use http_body_util::BodyExt;
    let req = http::Request::get(uri)
        .body(kube::client::Body::from(Vec::new()))
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let mut buf = Vec::new();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.unwrap().into_data() {
            buf.extend_from_slice(&data);
        }
        if let Some(end) = buf.iter().position(|b| *b == b'\n') {
            return (status, serde_json::from_slice(&buf[..end]).ok());
        }
    }
    (status, None)
}
