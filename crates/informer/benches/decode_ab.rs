//! kube's decoding against the informer's, interleaved round by round so
//! that a loaded machine slows both alike: the median of the per-round
//! ratios (informer / kube) is the figure to read. Criterion's `decode`
//! bench measures one after the other and drifts with the load.
//!
//! `cargo bench -p ctrlkit-informer --bench decode_ab`
#![allow(missing_docs, clippy::unwrap_used)]
use ctrlkit_informer::{decode_list, decode_watch_line};
use k8s_openapi::api::core::v1::Pod;
use kube::core::{ObjectList, WatchEvent};
use serde_json::{Value, json};
use std::hint::black_box;
use std::time::Instant;
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

fn main() {
    let line = watch_line(&pod(1));
    let body = list_body((0..100).map(pod).collect());
    let mut ev = (Vec::new(), Vec::new());
    let mut li = (Vec::new(), Vec::new());
    for _ in 0..30 {
        let t = Instant::now();
        for _ in 0..300 {
            black_box(serde_json::from_str::<WatchEvent<Pod>>(black_box(&line)).unwrap());
        }
        ev.0.push(t.elapsed().as_secs_f64() / 300.0);
        let t = Instant::now();
        for _ in 0..300 {
            black_box(decode_watch_line::<Pod>(black_box(&line)).unwrap());
        }
        ev.1.push(t.elapsed().as_secs_f64() / 300.0);
        let t = Instant::now();
        for _ in 0..5 {
            black_box(serde_json::from_str::<ObjectList<Pod>>(black_box(&body)).unwrap());
        }
        li.0.push(t.elapsed().as_secs_f64() / 5.0);
        let t = Instant::now();
        for _ in 0..5 {
            black_box(decode_list::<Pod>(black_box(&body)).unwrap());
        }
        li.1.push(t.elapsed().as_secs_f64() / 5.0);
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    let ratios = |a: &Vec<f64>, b: &Vec<f64>| {
        let mut r: Vec<f64> = a.iter().zip(b).map(|(x, y)| y / x).collect();
        r.sort_by(|a, b| a.partial_cmp(b).unwrap());
        r[r.len() / 2]
    };
    let (er, lr) = (ratios(&ev.0, &ev.1), ratios(&li.0, &li.1));
    println!(
        "watch event: kube {:.2} us, informer {:.2} us, median round ratio {:.3}",
        med(&mut ev.0) * 1e6,
        med(&mut ev.1) * 1e6,
        er
    );
    println!(
        "list 100 pods: kube {:.3} ms, informer {:.3} ms, median round ratio {:.3}",
        med(&mut li.0) * 1e3,
        med(&mut li.1) * 1e3,
        lr
    );
}
