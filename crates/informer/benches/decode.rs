//! What decoding costs per object: kube's decoding (what the informer did
//! before it decoded objects one at a time) against the informer's, for a
//! pod watch event and a 100-pod list page, plus the fallback an
//! undecodable object takes.
//!
//! `cargo bench -p ctrlkit-informer --bench decode`
#![allow(missing_docs, clippy::unwrap_used)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use ctrlkit_informer::{MaybeDecoded, decode_list, decode_watch_line};
use k8s_openapi::api::core::v1::Pod;
use kube::core::{ObjectList, WatchEvent};
use serde_json::{Value, json};

/// A pod as a ReplicaSet controller's watch sees it once it runs: owner
/// reference, managed fields, a scheduled and started status.
fn pod(i: usize) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("web-7d9f8c6b5-{i:05}"), "namespace": "default",
            "generateName": "web-7d9f8c6b5-",
            "uid": format!("5f0c2a4e-0000-4000-8000-{i:012}"),
            "resourceVersion": format!("{}", 100_000 + i),
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": "web", "pod-template-hash": "7d9f8c6b5"},
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f8c6b5",
                "uid": "0b4e7a52-1111-4111-8111-000000000001",
                "controller": true, "blockOwnerDeletion": true
            }],
            "managedFields": [{
                "manager": "kube-controller-manager", "operation": "Update",
                "apiVersion": "v1", "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}},
                    "f:ownerReferences": {".": {}, "k:{\"uid\":\"0b4e7a52-1111-4111-8111-000000000001\"}": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {}}}}}
            }]
        },
        "spec": {
            "nodeName": "node-3", "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst", "serviceAccountName": "default", "schedulerName": "default-scheduler",
            "containers": [{
                "name": "web", "image": "nginx:1.27", "imagePullPolicy": "IfNotPresent",
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"
            }],
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            ]
        },
        "status": {
            "phase": "Running", "hostIP": "10.0.0.3", "podIP": format!("10.1.{}.{}", i / 250, i % 250),
            "startTime": "2026-01-01T00:00:01Z", "qosClass": "Burstable",
            "conditions": [
                {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:03Z"},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": "2026-01-01T00:00:03Z"},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
            ],
            "containerStatuses": [{
                "name": "web", "ready": true, "started": true, "restartCount": 0,
                "image": "nginx:1.27", "imageID": "docker-pullable://nginx@sha256:0000",
                "containerID": "containerd://0000",
                "state": {"running": {"startedAt": "2026-01-01T00:00:02Z"}}
            }]
        }
    })
}

fn watch_line(object: &Value) -> String {
    json!({"type": "MODIFIED", "object": object}).to_string()
}

fn list_body(items: Vec<Value>) -> String {
    json!({"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "200000"}, "items": items})
        .to_string()
}

fn decode(c: &mut Criterion) {
    let line = watch_line(&pod(1));
    let mut bad_pod = pod(2);
    bad_pod["spec"]["terminationGracePeriodSeconds"] = json!("thirty");
    let bad_line = watch_line(&bad_pod);
    // Sanity: the lines decode as intended.
    assert!(matches!(
        decode_watch_line::<Pod>(&line),
        Ok(Some(WatchEvent::Modified(MaybeDecoded::Decoded(_))))
    ));
    assert!(matches!(
        decode_watch_line::<Pod>(&bad_line),
        Ok(Some(WatchEvent::Modified(MaybeDecoded::Undecodable(_))))
    ));

    let mut group = c.benchmark_group("watch_event");
    group.bench_function("kube_watch_event", |b| {
        b.iter(|| serde_json::from_str::<WatchEvent<Pod>>(black_box(&line)).unwrap())
    });
    group.bench_function("informer", |b| {
        b.iter(|| decode_watch_line::<Pod>(black_box(&line)).unwrap())
    });
    group.bench_function("informer_undecodable", |b| {
        b.iter(|| decode_watch_line::<Pod>(black_box(&bad_line)).unwrap())
    });
    group.finish();

    let body = list_body((0..100).map(pod).collect());
    let mut with_bad: Vec<Value> = (0..100).map(pod).collect();
    with_bad[50] = bad_pod;
    let bad_body = list_body(with_bad);
    let mut group = c.benchmark_group("list_100_pods");
    group.bench_function("kube_object_list", |b| {
        b.iter(|| serde_json::from_str::<ObjectList<Pod>>(black_box(&body)).unwrap())
    });
    group.bench_function("informer", |b| {
        b.iter(|| decode_list::<Pod>(black_box(&body)).unwrap())
    });
    group.bench_function("informer_one_undecodable", |b| {
        b.iter(|| decode_list::<Pod>(black_box(&bad_body)).unwrap())
    });
    group.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);
