//! Throughput of the test cluster through kube-client. Prints JSON lines.
//!
//! `cargo bench -p ctrlkit-testcluster --bench throughput`
//!
//! Client and server share the process (and the machine's cores), so the
//! figures are end-to-end: they include kube-client's own serialization.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use futures::StreamExt;
use http_body_util::BodyExt;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{ListParams, PostParams, WatchEvent, WatchParams};
use kube::{Api, Client};
use serde_json::json;

const PODS: usize = 10_000;
const TASKS: usize = 8;
const WATCHERS: usize = 10;

fn pod(name: &str, owner_uid: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"app": "bench", "pod-template-hash": "5d8f7c9b6"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "bench",
                                 "uid": owner_uid, "controller": true}]
        },
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.0",
                                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]},
    }))
    .unwrap()
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// CPU time (user + system) this process has used so far, in seconds.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields overall, in clock ticks (100 per second on Linux).
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11..13).map_or(0.0, |f| {
        f.iter().filter_map(|x| x.parse::<f64>().ok()).sum()
    });
    ticks / 100.0
}

/// Create `PODS` pods named `{prefix}-{i}` in `ns` from `TASKS` tasks.
async fn create_pods(client: &Client, ns: &str, prefix: &str) -> f64 {
    // The pods are owned by a real ReplicaSet, so the garbage collector
    // leaves them alone (it deletes pods whose owners do not exist).
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "bench"},
        "spec": {"replicas": PODS, "selector": {"matchLabels": {"app": "bench"}},
                 "template": {"metadata": {"labels": {"app": "bench"}},
                              "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.0"}]}}}
    }))
    .unwrap();
    let rs = Api::<ReplicaSet>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &rs)
        .await
        .unwrap();
    let owner_uid = rs.metadata.uid.unwrap();
    let start = Instant::now();
    let mut handles = Vec::new();
    for t in 0..TASKS {
        let api = Api::<Pod>::namespaced(client.clone(), ns);
        let prefix = prefix.to_string();
        let owner_uid = owner_uid.clone();
        handles.push(tokio::spawn(async move {
            for i in (t..PODS).step_by(TASKS) {
                api.create(
                    &PostParams::default(),
                    &pod(&format!("{prefix}-{i}"), &owner_uid),
                )
                .await
                .unwrap();
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    PODS as f64 / start.elapsed().as_secs_f64()
}

/// Create `PODS` pods over raw HTTP from `TASKS` tasks: bodies serialized
/// up front and responses not decoded, so this is mostly the server's cost.
async fn create_pods_raw(client: &Client, ns: &str, prefix: &str) -> f64 {
    let bodies: Vec<Vec<u8>> = (0..PODS)
        .map(|i| {
            let mut p = serde_json::to_value(pod(&format!("{prefix}-{i}"), "none")).unwrap();
            p["metadata"]
                .as_object_mut()
                .unwrap()
                .remove("ownerReferences");
            serde_json::to_vec(&p).unwrap()
        })
        .collect();
    let bodies = Arc::new(bodies);
    let start = Instant::now();
    let mut handles = Vec::new();
    for t in 0..TASKS {
        let client = client.clone();
        let bodies = bodies.clone();
        let path = format!("/api/v1/namespaces/{ns}/pods");
        handles.push(tokio::spawn(async move {
            for i in (t..PODS).step_by(TASKS) {
                let req = http::Request::post(path.as_str())
                    .header("content-type", "application/json")
                    .body(kube::client::Body::from(bodies[i].clone()))
                    .unwrap();
                let resp = client.send(req).await.unwrap();
                assert_eq!(resp.status(), http::StatusCode::CREATED);
                resp.into_body().collect().await.unwrap();
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    PODS as f64 / start.elapsed().as_secs_f64()
}

/// Count watch frames on a raw HTTP watch until `want` were received.
async fn raw_watch(client: Client, path: String, want: usize) {
    let req = http::Request::get(path)
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let mut body = resp.into_body();
    let mut seen = 0;
    while seen < want {
        let frame = body.frame().await.unwrap().unwrap();
        if let Ok(data) = frame.into_data() {
            seen += data.iter().filter(|b| **b == b'\n').count();
        }
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let config = TestClusterConfig::default().with_watch_history(4 * PODS);
        let cluster = TestCluster::start(config).await.unwrap();
        let client = cluster.client();
        let namespaces = Api::<Namespace>::all(client.clone());
        for ns in ["bench-a", "bench-b"] {
            let n: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
            namespaces.create(&PostParams::default(), &n).await.unwrap();
        }
        let pods_a = Api::<Pod>::namespaced(client.clone(), "bench-a");
        let start_rv = pods_a.list(&ListParams::default()).await.unwrap().metadata.resource_version.unwrap();

        // 1. Creates into an empty store, then with 10,000 pods stored.
        let rss_before = rss_bytes();
        let cpu = cpu_seconds();
        let rate_empty = create_pods(&client, "bench-a", "p").await;
        let cpu = cpu_seconds() - cpu;
        let rss_after = rss_bytes();
        println!(
            "{}",
            json!({"bench": "create_pods", "tasks": TASKS, "pods": PODS, "stored_before": 0, "creates_per_sec": rate_empty.round(),
                   "process_cpu_sec": cpu, "creates_per_process_cpu_sec": (PODS as f64 / cpu).round()})
        );
        println!(
            "{}",
            json!({"bench": "memory_per_stored_pod", "rss_delta_bytes_per_pod": (rss_after.saturating_sub(rss_before)) / PODS as u64,
                   "note": "process RSS delta over 10,000 creates; includes the watch history entry per create and client-side garbage"})
        );

        // 1b. The same over raw HTTP (no client-side serde): the server's rate.
        let n: Namespace = serde_json::from_value(json!({"metadata": {"name": "bench-raw"}})).unwrap();
        namespaces.create(&PostParams::default(), &n).await.unwrap();
        let cpu = cpu_seconds();
        let rate_raw = create_pods_raw(&client, "bench-raw", "r").await;
        let cpu = cpu_seconds() - cpu;
        println!(
            "{}",
            json!({"bench": "create_pods_raw_http", "tasks": TASKS, "pods": PODS, "stored_before": PODS, "creates_per_sec": rate_raw.round(),
                   "process_cpu_sec": cpu, "creates_per_process_cpu_sec": (PODS as f64 / cpu).round()})
        );

        // 2. Live watch delivery: 10 kube-client watchers while 10,000 more pods are created.
        let rv_b = Api::<Pod>::namespaced(client.clone(), "bench-b").list(&ListParams::default()).await.unwrap().metadata.resource_version.unwrap();
        let delivered = Arc::new(AtomicUsize::new(0));
        let mut watchers = Vec::new();
        for _ in 0..WATCHERS {
            let api = Api::<Pod>::namespaced(client.clone(), "bench-b");
            let stream = api.watch(&WatchParams::default().disable_bookmarks(), &rv_b).await.unwrap();
            let delivered = delivered.clone();
            watchers.push(tokio::spawn(async move {
                let mut stream = stream.boxed();
                let mut seen = 0;
                while seen < PODS {
                    if let Some(Ok(WatchEvent::Added(_))) = stream.next().await {
                        seen += 1;
                        delivered.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
        let start = Instant::now();
        let rate_full = create_pods(&client, "bench-b", "q").await;
        for w in watchers {
            tokio::time::timeout(Duration::from_secs(300), w).await.unwrap().unwrap();
        }
        let elapsed = start.elapsed().as_secs_f64();
        println!(
            "{}",
            json!({"bench": "create_pods", "tasks": TASKS, "pods": PODS, "stored_before": PODS, "watchers": WATCHERS, "creates_per_sec": rate_full.round()})
        );
        println!(
            "{}",
            json!({"bench": "watch_live_kube_client", "watchers": WATCHERS, "events": delivered.load(Ordering::Relaxed),
                   "events_per_sec": (delivered.load(Ordering::Relaxed) as f64 / elapsed).round(),
                   "note": "bounded by the concurrent create rate; events decoded into Pod by kube-client"})
        );

        // 3. Replay delivery: 10 watchers replay 10,000 kept events each.
        let start = Instant::now();
        let mut handles = Vec::new();
        for _ in 0..WATCHERS {
            let api = Api::<Pod>::namespaced(client.clone(), "bench-a");
            let rv = start_rv.clone();
            handles.push(tokio::spawn(async move {
                let mut stream = api.watch(&WatchParams::default().disable_bookmarks(), &rv).await.unwrap().boxed();
                let mut seen = 0;
                while seen < PODS {
                    if let Some(Ok(WatchEvent::Added(_))) = stream.next().await {
                        seen += 1;
                    }
                }
            }));
        }
        for h in handles {
            h.await.unwrap();
        }
        let rate = (WATCHERS * PODS) as f64 / start.elapsed().as_secs_f64();
        println!(
            "{}",
            json!({"bench": "watch_replay_kube_client", "watchers": WATCHERS, "events": WATCHERS * PODS, "events_per_sec": rate.round()})
        );

        // 4. The same replay over raw HTTP (frames counted, not decoded): the server's delivery rate.
        let start = Instant::now();
        let mut handles = Vec::new();
        for _ in 0..WATCHERS {
            let path = format!("/api/v1/namespaces/bench-a/pods?watch=true&resourceVersion={start_rv}");
            handles.push(tokio::spawn(raw_watch(client.clone(), path, PODS)));
        }
        for h in handles {
            h.await.unwrap();
        }
        let rate = (WATCHERS * PODS) as f64 / start.elapsed().as_secs_f64();
        println!(
            "{}",
            json!({"bench": "watch_replay_raw_http", "watchers": WATCHERS, "events": WATCHERS * PODS, "events_per_sec": rate.round()})
        );

        // 5. A full list of 10,000 pods.
        let start = Instant::now();
        let list = pods_a.list(&ListParams::default()).await.unwrap();
        assert_eq!(list.items.len(), PODS);
        println!("{}", json!({"bench": "list_10000_pods_kube_client", "millis": start.elapsed().as_millis()}));
        cluster.shutdown().await;
    });
}
