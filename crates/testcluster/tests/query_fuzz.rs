//! No query parameter can knock the test cluster over: every verb, every
//! parameter the server reads (and one it does not), with values chosen to
//! break parsers and arithmetic (integer extremes, overflow, garbage,
//! invalid UTF-8, selectors that do not parse, a 10 KB value). Each request
//! gets an answer (a handler that panicked would drop the connection) that
//! is not a 500, and the cluster keeps serving.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use http_body_util::BodyExt;
use serde_json::json;

const PODS: &str = "/api/v1/namespaces/default/pods";

const PARAMS: &[&str] = &[
    "timeoutSeconds",
    "limit",
    "continue",
    "resourceVersion",
    "resourceVersionMatch",
    "labelSelector",
    "fieldSelector",
    "watch",
    "allowWatchBookmarks",
    "sendInitialEvents",
    "dryRun",
    "fieldManager",
    "fieldValidation",
    "force",
    "gracePeriodSeconds",
    "propagationPolicy",
    "orphanDependents",
    "pretty",
    "includeObject",
    "notAParameter",
];

fn values() -> Vec<String> {
    [
        "",
        "-1",
        "0",
        "18446744073709551615",
        "9223372036854775807",
        "-9223372036854775808",
        "99999999999999999999999999",
        "1e300",
        "true",
        "%00%FF%FE",
        "a%3Db%3Dc",
        "app%3D(",
        "x%20in%20(",
        "Exact",
    ]
    .iter()
    .map(|v| v.to_string())
    .chain(["x".repeat(10_000)])
    .collect()
}

/// The pod the verbs on one object act on.
async fn ensure_pod(client: &kube::Client) {
    let (code, _) = raw(
        client,
        "POST",
        PODS,
        "application/json",
        serde_json::to_vec(&pod("p", json!({"app": "p"}))).unwrap(),
    )
    .await;
    assert!(code == 201 || code == 409, "creating the pod: {code}");
}

/// Send `method uri` with `body` and return the status; the body of a
/// watch is not waited for.
async fn answer(
    client: &kube::Client,
    method: &str,
    uri: &str,
    content_type: &str,
    body: &[u8],
) -> u16 {
    let mut req = http::Request::builder().method(method).uri(uri);
    if !content_type.is_empty() {
        req = req.header(http::header::CONTENT_TYPE, content_type);
    }
    let req = req.body(kube::client::Body::from(body.to_vec())).unwrap();
    let resp = match client.send(req).await {
        Ok(resp) => resp,
        Err(e) => panic!("{method} {uri}: no answer: {e}"),
    };
    let code = resp.status().as_u16();
    if !uri.contains("watch=") {
        // Read it all: the connection is reused, and a response that
        // fails half-way is as bad as none.
        resp.into_body().collect().await.unwrap();
    }
    code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_query_parameter_breaks_any_verb() {
    let cluster = start().await;
    // 504s (a resourceVersion from the future) must not be retried.
    let client = client_without_retries(&cluster);
    ensure_pod(&client).await;
    let pod_body = serde_json::to_vec(&pod("p", json!({"app": "p"}))).unwrap();
    let new_pod = serde_json::to_vec(&json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "fuzz-"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
    }))
    .unwrap();
    let verbs: [(&str, &str, &str, &str, Vec<u8>); 9] = [
        ("get", "GET", "/p", "", vec![]),
        ("list", "GET", "", "", vec![]),
        ("watch", "GET", "", "watch=true&", vec![]),
        ("create", "POST", "", "", new_pod),
        ("update", "PUT", "/p", "", pod_body.clone()),
        (
            "patch",
            "PATCH",
            "/p",
            "",
            br#"{"metadata":{"labels":{"f":"z"}}}"#.to_vec(),
        ),
        ("status", "PUT", "/p/status", "", pod_body),
        ("delete", "DELETE", "/p", "", vec![]),
        ("deletecollection", "DELETE", "", "", vec![]),
    ];
    // One task per verb: the verbs run concurrently, as they would on a
    // real cluster (a delete racing a get is fine; a 500 is not).
    let mut tasks = Vec::new();
    for (verb, method, path, prefix, body) in verbs {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let content_type = match verb {
                "patch" => "application/merge-patch+json",
                "create" | "update" | "status" => "application/json",
                _ => "",
            };
            let mut requests = 0;
            for param in PARAMS {
                for value in values() {
                    let uri = format!("{PODS}{path}?{prefix}{param}={value}");
                    let code = answer(&client, method, &uri, content_type, &body).await;
                    requests += 1;
                    assert!(
                        code != 500 && code < 600,
                        "{verb} with {param}={:.40}: {code}",
                        value
                    );
                    if method == "DELETE" && code < 300 {
                        // Keep an object for the next request to act on.
                        ensure_pod(&client).await;
                    }
                }
            }
            requests
        }));
    }
    let mut requests = 0;
    for task in tasks {
        requests += task.await.unwrap();
    }
    assert_eq!(requests, 9 * PARAMS.len() * values().len());
    // Still serving, and the pod can be read with a typed client.
    let pods = kube::Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client, "default");
    assert!(
        !pods
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    cluster.shutdown().await;
}
