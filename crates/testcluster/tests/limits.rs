//! kube-apiserver's limits on what one request can do: body and object
//! sizes, nesting, content types, int32 fields, names, label selectors
//! and resourceVersions from the future. Each answer says which limit
//! was hit.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A guard against hangs, not a timing assertion.
const GUARD: Duration = Duration::from_secs(60);

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
const REPLICASETS: &str = "/apis/apps/v1/namespaces/default/replicasets";

fn configmap(name: &str, data_bytes: usize) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"blob": "x".repeat(data_bytes)},
    }))
    .unwrap()
}

/// What the server sent on `tcp` up to and including `needle`; fails if
/// the connection closes first.
async fn read_until(tcp: &mut tokio::net::TcpStream, needle: &str) -> String {
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&answer).contains(needle) {
        let n = tcp.read(&mut buf).await.unwrap();
        assert!(
            n > 0,
            "connection closed: {}",
            String::from_utf8_lossy(&answer)
        );
        answer.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&answer).into_owned()
}

fn rs_json(name: &str, spec_extra: Value) -> Value {
    let mut rs = json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        },
    });
    for (k, v) in spec_extra.as_object().unwrap() {
        rs["spec"][k] = v.clone();
    }
    rs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_over_3_mib_are_413_as_on_kube_apiserver() {
    let cluster = start().await;
    let client = cluster.client();
    // A 3.5 MiB create: refused before it is decoded.
    let (code, status) = raw(
        &client,
        "POST",
        CONFIGMAPS,
        "application/json",
        configmap("big", 3 * 1024 * 1024 + 512 * 1024),
    )
    .await;
    assert_eq!(code, 413, "{status}");
    assert_eq!(status["reason"], "RequestEntityTooLarge");
    assert_eq!(
        status["message"],
        "Request entity too large: limit is 3145728"
    );

    // A body announced as 100 MB is refused on its Content-Length, without
    // waiting for (or reading) the bytes.
    let addr = cluster.base_url().trim_start_matches("http://").to_string();
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.write_all(
        b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: 104857600\r\n\r\n{",
    )
    .await
    .unwrap();
    let text = tokio::time::timeout(GUARD, read_until(&mut tcp, "limit is 3145728"))
        .await
        .unwrap();
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");

    // The server is fine afterwards.
    let (code, _) = raw(
        &client,
        "POST",
        CONFIGMAPS,
        "application/json",
        configmap("small", 10),
    )
    .await;
    assert_eq!(code, 201);
    cluster.shutdown().await;
}

/// A client that writes its whole oversized body before it reads the answer
/// (as hyper's client does) gets the 413, not a connection reset under its
/// writes: the server reads and discards the rest of the body first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_body_is_drained_before_the_413() {
    let cluster = start().await;
    let body = configmap("big", 3 * 1024 * 1024 + 1);
    for chunked in [false, true] {
        let addr = cluster.base_url().trim_start_matches("http://").to_string();
        let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let framing = if chunked {
            "Transfer-Encoding: chunked".to_string()
        } else {
            format!("Content-Length: {}", body.len())
        };
        let head = format!(
            "POST {CONFIGMAPS} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n{framing}\r\n\r\n"
        );
        let text = tokio::time::timeout(GUARD, async {
            tcp.write_all(head.as_bytes()).await.unwrap();
            for (i, piece) in body.chunks(64 * 1024).enumerate() {
                if i == 1 {
                    // A slow uploader: a server that answers without
                    // draining has closed the connection by now. Passing
                    // does not depend on this pause; only failing does.
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                if chunked {
                    tcp.write_all(format!("{:x}\r\n", piece.len()).as_bytes())
                        .await
                        .unwrap();
                    tcp.write_all(piece).await.unwrap();
                    tcp.write_all(b"\r\n").await.unwrap();
                } else {
                    tcp.write_all(piece).await.unwrap();
                }
            }
            if chunked {
                tcp.write_all(b"0\r\n\r\n").await.unwrap();
            }
            read_until(&mut tcp, "limit is 3145728").await
        })
        .await
        .unwrap();
        assert!(
            text.starts_with("HTTP/1.1 413"),
            "chunked={chunked}: {text}"
        );
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_over_etcds_limit_are_refused_as_etcd_refuses_them() {
    let cluster = start().await;
    let client = cluster.client();
    // 2 MiB: within the body limit, over etcd's 1.5 MiB request limit.
    let (code, status) = raw(
        &client,
        "POST",
        CONFIGMAPS,
        "application/json",
        configmap("two-mib", 2 * 1024 * 1024),
    )
    .await;
    assert_eq!(code, 500, "{status}");
    let message = status["message"].as_str().unwrap();
    assert!(
        message.starts_with("etcdserver: request is too large"),
        "{message}"
    );
    assert!(
        message.contains("1572864 bytes"),
        "says the limit: {message}"
    );
    let (code, _) = raw(&client, "GET", &format!("{CONFIGMAPS}/two-mib"), "", "").await;
    assert_eq!(code, 404, "nothing was stored");

    // Just under the limit is stored; an update growing it past the
    // limit is refused and leaves it as it was.
    let (code, created) = raw(
        &client,
        "POST",
        CONFIGMAPS,
        "application/json",
        configmap("fits", 1024 * 1024),
    )
    .await;
    assert_eq!(code, 201);
    let mut grown = created.clone();
    grown["data"]["blob"] = json!("y".repeat(1600 * 1024));
    let (code, status) = raw(
        &client,
        "PUT",
        &format!("{CONFIGMAPS}/fits"),
        "application/json",
        serde_json::to_vec(&grown).unwrap(),
    )
    .await;
    assert_eq!(code, 500, "{status}");
    let (_, now) = raw(&client, "GET", &format!("{CONFIGMAPS}/fits"), "", "").await;
    assert_eq!(
        now["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    // Deleting it is fine (a delete stores nothing).
    let (code, _) = raw(&client, "DELETE", &format!("{CONFIGMAPS}/fits"), "", "").await;
    assert_eq!(code, 200);
    cluster.shutdown().await;
}

/// A megabyte of `[` (or of `{a: `): the shape that made the YAML
/// fallback spend seconds to minutes per request on the async workers.
fn nested(open: &str) -> Vec<u8> {
    open.repeat((1024 * 1024) / open.len()).into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_nesting_is_refused_at_once_and_stalls_nothing() {
    let cluster = start().await;
    let client = cluster.client();
    // More pathological requests than the runtime has workers, with every
    // content type that decodes structured text, and an unrelated list.
    let mut pathological = Vec::new();
    for (content_type, body) in [
        ("", nested("[")),
        ("application/json", nested("[")),
        ("application/json", nested("{a: ")),
        ("application/yaml", nested("{a: ")),
        ("application/yaml", nested("[")),
        ("application/yaml", nested("- ")),
    ] {
        let client = client.clone();
        pathological.push(tokio::spawn(async move {
            let answer = raw(&client, "POST", CONFIGMAPS, content_type, body).await;
            (content_type, answer)
        }));
    }
    let list = tokio::spawn({
        let client = client.clone();
        async move { raw(&client, "GET", "/api/v1/namespaces/default/pods", "", "").await }
    });
    let (code, pods) = tokio::time::timeout(GUARD, list).await.unwrap().unwrap();
    assert_eq!((code, pods["kind"].as_str()), (200, Some("PodList")));
    for request in pathological {
        let (content_type, (code, status)) =
            tokio::time::timeout(GUARD, request).await.unwrap().unwrap();
        assert_eq!(code, 400, "{content_type:?}: {status}");
        let message = status["message"].as_str().unwrap();
        assert!(
            message.starts_with("the object provided is unrecognized ("),
            "{message}"
        );
    }
    // The ones that are nested (rather than not JSON at all) say so.
    let (_, status) = raw(&client, "POST", CONFIGMAPS, "application/json", nested("[")).await;
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("nested more than 128 levels deep"),
        "{status}"
    );
    let (_, status) = raw(
        &client,
        "POST",
        CONFIGMAPS,
        "application/yaml",
        nested("{a: "),
    )
    .await;
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("nested more than 128 levels deep"),
        "{status}"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yaml_is_read_only_for_the_yaml_content_type() {
    let cluster = start().await;
    let client = cluster.client();
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  a: b\n";
    for content_type in ["", "application/json"] {
        let (code, status) = raw(&client, "POST", CONFIGMAPS, content_type, yaml).await;
        assert_eq!(code, 400, "{content_type:?}: {status}");
    }
    let (code, status) = raw(&client, "POST", CONFIGMAPS, "text/plain", yaml).await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (415, Some("UnsupportedMediaType"))
    );
    let (code, created) = raw(&client, "POST", CONFIGMAPS, "application/yaml", yaml).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["data"]["a"], "b");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn int32_fields_out_of_range_are_refused_as_kube_apiserver_refuses_them() {
    let cluster = start().await;
    let client = cluster.client();
    let post = |body: Value| {
        let client = client.clone();
        async move {
            raw(
                &client,
                "POST",
                REPLICASETS,
                "application/json",
                serde_json::to_vec(&body).unwrap(),
            )
            .await
        }
    };
    // Beyond int32: the body does not decode (400), and says why.
    let (code, status) = post(rs_json("big", json!({"replicas": 2147483648u64}))).await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (400, Some("BadRequest")),
        "{status}"
    );
    assert_eq!(
        status["message"],
        "ReplicaSet in version \"v1\" cannot be handled as a ReplicaSet: json: cannot unmarshal number 2147483648 into Go struct field ReplicaSetSpec.spec.replicas of type int32"
    );
    for spec in [
        json!({"minReadySeconds": 2147483648u64}),
        json!({"replicas": -2147483649i64}),
        json!({"replicas": 1.5}),
        json!({"replicas": "3"}),
    ] {
        let (code, status) = post(rs_json("bad", spec.clone())).await;
        assert_eq!(code, 400, "{spec}: {status}");
        assert!(
            status["message"]
                .as_str()
                .unwrap()
                .contains("of type int32"),
            "{status}"
        );
    }
    let mut port = rs_json("port", json!({}));
    port["spec"]["template"]["spec"]["containers"][0]["ports"] =
        json!([{"containerPort": 4294967296u64}]);
    let (code, status) = post(port).await;
    assert_eq!(code, 400);
    assert!(
        status["message"].as_str().unwrap().contains(
            "Go struct field ContainerPort.spec.template.spec.containers.ports.containerPort of type int32"
        ),
        "{status}"
    );
    // Negative counts are invalid (422), naming the field.
    let (code, status) = post(rs_json("neg", json!({"minReadySeconds": -1}))).await;
    assert_eq!(code, 422, "{status}");
    assert!(
        status["message"].as_str().unwrap().contains(
            "spec.minReadySeconds: Invalid value: -1: must be greater than or equal to 0"
        ),
        "{status}"
    );

    // The largest int32 is fine; a patch past it is a 422 (the patched
    // object does not decode), a scale or status write a 400.
    let (code, _) = post(rs_json("ok", json!({"replicas": 2147483647}))).await;
    assert_eq!(code, 201);
    let (code, status) = raw(
        &client,
        "PATCH",
        &format!("{REPLICASETS}/ok"),
        "application/merge-patch+json",
        r#"{"spec":{"replicas":2147483648}}"#,
    )
    .await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (422, Some("Invalid")),
        "{status}"
    );
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("of type int32")
    );
    let (code, status) = raw(
        &client,
        "PUT",
        &format!("{REPLICASETS}/ok/scale"),
        "application/json",
        r#"{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"ok","namespace":"default"},"spec":{"replicas":2147483648}}"#,
    )
    .await;
    assert_eq!(code, 400, "{status}");
    let (_, current) = raw(&client, "GET", &format!("{REPLICASETS}/ok"), "", "").await;
    let mut status_write = current.clone();
    status_write["status"] = json!({"replicas": 2147483648u64});
    let (code, status) = raw(
        &client,
        "PUT",
        &format!("{REPLICASETS}/ok/status"),
        "application/json",
        serde_json::to_vec(&status_write).unwrap(),
    )
    .await;
    assert_eq!(code, 400, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("ReplicaSetStatus.status.replicas of type int32")
    );
    // Nothing out of range was stored: a typed client lists them all.
    let rss = kube::Api::<k8s_openapi::api::apps::v1::ReplicaSet>::namespaced(client, "default");
    let list = rss.list(&Default::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].spec.replicas, Some(2147483647));
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_labels_and_annotations_say_which_limit_was_hit() {
    let cluster = start().await;
    let client = cluster.client();
    let long = "a".repeat(260);
    let pod = |meta: Value| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
               "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
    };
    let create = |path: &'static str, body: Value| {
        let client = client.clone();
        async move {
            raw(
                &client,
                "POST",
                path,
                "application/json",
                serde_json::to_vec(&body).unwrap(),
            )
            .await
        }
    };
    let pods = "/api/v1/namespaces/default/pods";
    let (code, status) = create(pods, pod(json!({"name": long}))).await;
    assert_eq!(code, 422);
    assert_eq!(
        status["message"],
        format!(
            "Pod \"{long}\" is invalid: metadata.name: Invalid value: \"{long}\": must be no more than 253 characters"
        )
    );
    let ns = "n".repeat(64);
    let (code, status) = create(
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
    )
    .await;
    assert_eq!(code, 422);
    // The name, and the label kube-apiserver sets to the name.
    assert_eq!(
        status["message"],
        format!(
            "Namespace \"{ns}\" is invalid: [metadata.name: Invalid value: \"{ns}\": must be no more than 63 characters, metadata.labels: Invalid value: \"{ns}\": must be no more than 63 characters]"
        ),
    );
    let (code, status) = create(
        pods,
        pod(json!({"name": "p", "labels": {"app": "v".repeat(64)}})),
    )
    .await;
    assert_eq!(code, 422);
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("metadata.labels: Invalid value: \"vvvv"),
        "{status}"
    );
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .ends_with("must be no more than 63 characters")
    );
    let (code, status) = create(
        pods,
        pod(json!({"name": "p", "annotations": {"big": "x".repeat(300 * 1024)}})),
    )
    .await;
    assert_eq!(code, 422);
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .ends_with("metadata.annotations: Too long: may not be more than 262144 bytes"),
        "{status}"
    );
    let (code, status) = create(
        "/api/v1/namespaces/default/services",
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "1web"},
               "spec": {"ports": [{"port": 80}]}}),
    )
    .await;
    assert_eq!(code, 422);
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("a DNS-1035 label"),
        "{status}"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_selectors_are_as_strict_as_apimachinerys() {
    let cluster = start().await;
    let client = cluster.client();
    for (selector, message) in [
        ("a%3Db%3Dc", "found '=', expected: ',' or 'end of string'"),
        (
            "app%3D(",
            "unable to parse requirement: found '(', expected: identifier",
        ),
        (
            "a!!%3Db",
            "unable to parse requirement: found '!', expected: in, notin, =, ==, !=, gt, lt",
        ),
    ] {
        for uri in [
            format!("/api/v1/namespaces/default/pods?labelSelector={selector}"),
            format!("/api/v1/namespaces/default/pods?watch=true&labelSelector={selector}"),
        ] {
            let (code, status) = raw(&client, "GET", &uri, "", "").await;
            assert_eq!(
                (code, status["reason"].as_str()),
                (400, Some("BadRequest")),
                "{uri}"
            );
            assert_eq!(status["message"], message, "{uri}");
        }
    }
    create_pod(&client, "web", json!({"app": "web", "n": "3"})).await;
    let (code, list) = raw(
        &client,
        "GET",
        "/api/v1/namespaces/default/pods?labelSelector=app%20in%20(web,db),n%3E2,!gone",
        "",
        "",
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absurd_watch_timeouts_neither_panic_nor_overflow() {
    let cluster = start().await;
    let client = cluster.client();
    // Not an int64: a 400 with Go's message, as kube-apiserver answers.
    let (code, status) = raw(
        &client,
        "GET",
        "/api/v1/pods?watch=true&timeoutSeconds=18446744073709551615",
        "",
        "",
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(
        status["message"],
        "strconv.ParseInt: parsing \"18446744073709551615\": value out of range"
    );
    // The largest int64 is a valid (practically endless) timeout.
    let (code, first) = tokio::time::timeout(
        GUARD,
        first_watch_event(
            &client,
            "/api/v1/namespaces?watch=true&timeoutSeconds=9223372036854775807",
        ),
    )
    .await
    .unwrap();
    assert_eq!(code, 200);
    assert_eq!(first.unwrap()["type"], "ADDED");
    // A negative one ends the watch at once.
    let (code, first) = tokio::time::timeout(
        GUARD,
        first_watch_event(
            &client,
            "/api/v1/pods?watch=true&resourceVersion=1&timeoutSeconds=-5",
        ),
    )
    .await
    .unwrap();
    assert_eq!((code, first), (200, None));
    // The server still answers.
    let (code, _) = raw(&client, "GET", "/api/v1/pods", "", "").await;
    assert_eq!(code, 200);
    cluster.shutdown().await;
}

fn assert_too_large(status: &Value, requested: u64) {
    assert_eq!(status["code"], 504, "{status}");
    assert_eq!(status["reason"], "Timeout");
    let message = status["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!(
            "Timeout: Too large resource version: {requested}, current: "
        )),
        "{message}"
    );
    assert_eq!(
        status["details"]["causes"][0],
        json!({"reason": "ResourceVersionTooLarge", "message": "Too large resource version"})
    );
    assert_eq!(status["details"]["retryAfterSeconds"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_gets_and_watches_from_a_future_version_are_too_large() {
    let cluster = start().await;
    // The answer is a 504, which kube-client would retry for a while.
    let client = client_without_retries(&cluster);
    create_pod(&client, "p", json!({})).await;
    let (_, list) = raw(&client, "GET", "/api/v1/namespaces/default/pods", "", "").await;
    let current: u64 = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let future = current + 1000;
    for uri in [
        format!("/api/v1/namespaces/default/pods?resourceVersion={future}"),
        format!(
            "/api/v1/namespaces/default/pods?resourceVersion={future}&resourceVersionMatch=NotOlderThan"
        ),
        format!(
            "/api/v1/namespaces/default/pods?resourceVersion={future}&resourceVersionMatch=Exact"
        ),
        format!("/api/v1/namespaces/default/pods/p?resourceVersion={future}"),
    ] {
        let (code, status) = raw(&client, "GET", &uri, "", "").await;
        assert_eq!(code, 504, "{uri}: {status}");
        assert_too_large(&status, future);
    }
    // A watch is accepted, and its one event is the error (a client that
    // resumed from a version this server does not have learns it must
    // relist, instead of waiting on a silent watch).
    for uri in [
        format!(
            "/api/v1/namespaces/default/pods?watch=true&resourceVersion={future}&timeoutSeconds=5"
        ),
        format!(
            "/api/v1/namespaces/default/pods?watch=true&resourceVersion={future}&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=5"
        ),
    ] {
        let (code, event) = tokio::time::timeout(GUARD, first_watch_event(&client, &uri))
            .await
            .unwrap();
        assert_eq!(code, 200);
        let event = event.unwrap_or_default();
        assert_eq!(event["type"], "ERROR", "{uri}: {event}");
        assert_too_large(&event["object"], future);
    }
    // From the current version, all is well.
    let (code, _) = raw(
        &client,
        "GET",
        &format!(
            "/api/v1/namespaces/default/pods?resourceVersion={current}&resourceVersionMatch=Exact"
        ),
        "",
        "",
    )
    .await;
    assert_eq!(code, 200);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_lists_are_served_at_their_version_or_expire() {
    let cluster = start().await;
    let client = cluster.client();
    create_pod(&client, "p", json!({})).await;
    let (_, list) = raw(&client, "GET", "/api/v1/namespaces/default/pods", "", "").await;
    let at = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    // Other kinds changing does not change the pods at `at`.
    raw(
        &client,
        "POST",
        CONFIGMAPS,
        "application/json",
        configmap("c", 1),
    )
    .await;
    let uri =
        format!("/api/v1/namespaces/default/pods?resourceVersion={at}&resourceVersionMatch=Exact");
    let (code, exact) = raw(&client, "GET", &uri, "", "").await;
    assert_eq!(code, 200);
    assert_eq!(exact["metadata"]["resourceVersion"], at.as_str());
    assert_eq!(exact["items"].as_array().unwrap().len(), 1);
    // Once pods changed, the state at `at` is gone.
    create_pod(&client, "q", json!({})).await;
    let (code, status) = raw(&client, "GET", &uri, "", "").await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (410, Some("Expired")),
        "{status}"
    );
    // Invalid combinations are kube-apiserver's 422.
    let (code, status) = raw(
        &client,
        "GET",
        "/api/v1/namespaces/default/pods?resourceVersionMatch=Exact",
        "",
        "",
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        status["message"],
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watch_history_is_bounded_in_bytes() {
    let budget = 256 * 1024;
    let cluster = ctrlkit_testcluster::TestCluster::start(
        ctrlkit_testcluster::TestClusterConfig::default().with_watch_history_bytes(budget),
    )
    .await
    .unwrap();
    let client = cluster.client();
    let first = cluster.watch_history().resource_version;
    // 40 objects of 64 KiB: 2.5 MiB of changes, ten times the budget.
    for i in 0..40 {
        let (code, _) = raw(
            &client,
            "POST",
            CONFIGMAPS,
            "application/json",
            configmap(&format!("c{i}"), 64 * 1024),
        )
        .await;
        assert_eq!(code, 201);
    }
    let history = cluster.watch_history();
    assert!(history.bytes <= budget, "{history:?}");
    assert!(history.events < 40, "{history:?}");
    assert!(history.oldest_resource_version > first, "{history:?}");
    // A watch from before the kept history is told to relist.
    let (code, event) = tokio::time::timeout(
        GUARD,
        first_watch_event(
            &client,
            &format!("{CONFIGMAPS}?watch=true&resourceVersion={first}&timeoutSeconds=5"),
        ),
    )
    .await
    .unwrap();
    assert_eq!(code, 200);
    let event = event.unwrap();
    assert_eq!(event["type"], "ERROR", "{event}");
    assert_eq!(event["object"]["code"], 410, "{event}");
    // Deletions carry the deleted object: still within the budget.
    let (code, _) = raw(&client, "DELETE", CONFIGMAPS, "", "").await;
    assert_eq!(code, 200);
    let history = cluster.watch_history();
    assert!(history.bytes <= budget, "{history:?}");
    cluster.shutdown().await;
}

const CRONTABS: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";

fn crontab(name: &str, image_bytes: usize) -> Vec<u8> {
    let mut object = common::crds::crontab_object(name, "* * * * */5");
    object["spec"]["image"] = json!("x".repeat(image_bytes));
    serde_json::to_vec(&object).unwrap()
}

/// Custom resources are served by the same machinery as built-in kinds,
/// and are held to the same limits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resources_are_held_to_the_same_limits() {
    let cluster = start().await;
    cluster.install_crd_value(common::crds::crontab()).unwrap();
    let client = client_without_retries(&cluster);
    let post = |content_type: &'static str, body: Vec<u8>| {
        let client = client.clone();
        async move { raw(&client, "POST", CRONTABS, content_type, body).await }
    };
    // Body over 3 MiB.
    let (code, status) = post("application/json", crontab("huge", 3 * 1024 * 1024 + 1)).await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (413, Some("RequestEntityTooLarge"))
    );
    // Object over etcd's limit.
    let (code, status) = post("application/json", crontab("big", 2 * 1024 * 1024)).await;
    assert_eq!(code, 500, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .starts_with("etcdserver: request is too large"),
        "{status}"
    );
    // Nesting, and YAML only for YAML.
    let (code, status) = post("application/json", nested("[")).await;
    assert_eq!(code, 400);
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("nested more than 128 levels deep"),
        "{status}"
    );
    let yaml = "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: from-yaml\nspec:\n  cronSpec: '* * * * */5'\n";
    let (code, _) = post("application/json", yaml.as_bytes().to_vec()).await;
    assert_eq!(code, 400);
    let (code, created) = post("application/yaml", yaml.as_bytes().to_vec()).await;
    assert_eq!(code, 201, "{created}");
    // A 260-character name says which limit it broke.
    let long = "a".repeat(260);
    let (code, status) = post("application/json", crontab(&long, 1)).await;
    assert_eq!(code, 422, "{status}");
    assert!(
        status["message"].as_str().unwrap().contains(&format!(
            "metadata.name: Invalid value: \"{long}\": must be no more than 253 characters"
        )),
        "{status}"
    );
    // Strict selectors, and versions from the future, on lists and watches.
    let (code, status) = raw(
        &client,
        "GET",
        &format!("{CRONTABS}?labelSelector=a!!%3Db"),
        "",
        "",
    )
    .await;
    assert_eq!(code, 400, "{status}");
    let future = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse::<u64>()
        .unwrap()
        + 1000;
    let (code, status) = raw(
        &client,
        "GET",
        &format!("{CRONTABS}?resourceVersion={future}"),
        "",
        "",
    )
    .await;
    assert_eq!(code, 504);
    assert_too_large(&status, future);
    let (_, event) = tokio::time::timeout(
        GUARD,
        first_watch_event(
            &client,
            &format!("{CRONTABS}?watch=true&resourceVersion={future}&timeoutSeconds=5"),
        ),
    )
    .await
    .unwrap();
    assert_too_large(&event.unwrap()["object"], future);
    // Query parameters beyond range are a 400, not a panic.
    let (code, _) = raw(
        &client,
        "GET",
        &format!("{CRONTABS}?watch=true&timeoutSeconds=18446744073709551615"),
        "",
        "",
    )
    .await;
    assert_eq!(code, 400);
    cluster.shutdown().await;
}
