//! Throughput of the test cluster through kube-client. Prints JSON lines.
//!
//! `cargo bench -p ctrlkit-testcluster --bench throughput`
//!
//! Every line carries the process CPU seconds of its phase, so figures
//! from a shared machine can be judged by rate per CPU-second too.
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

/// Wall-clock and process CPU seconds of one phase.
struct Phase {
    wall: Instant,
    cpu: f64,
}

impl Phase {
    fn start() -> Phase {
        Phase {
            wall: Instant::now(),
            cpu: cpu_seconds(),
        }
    }

    /// (wall seconds, process CPU seconds) since the start.
    fn end(&self) -> (f64, f64) {
        (self.wall.elapsed().as_secs_f64(), cpu_seconds() - self.cpu)
    }
}

async fn namespace(client: &Client, ns: &str) -> String {
    let n: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &n)
        .await
        .unwrap();
    Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
}

fn create_line(bench: &str, stored: usize, watchers: &str, (wall, cpu): (f64, f64)) {
    println!(
        "{}",
        json!({"bench": bench, "tasks": TASKS, "pods": PODS, "stored_before": stored, "watchers": watchers,
               "creates_per_sec": (PODS as f64 / wall).round(), "process_cpu_sec": (cpu * 100.0).round() / 100.0,
               "creates_per_process_cpu_sec": (PODS as f64 / cpu).round()})
    );
}

/// Creates with `WATCHERS` live watchers on the namespace, raw HTTP
/// (`raw`) or kube-client; prints the create and delivery rates.
async fn create_with_watchers(client: &Client, ns: &str, prefix: &str, raw: bool, stored: usize) {
    let rv = namespace(client, ns).await;
    let delivered = Arc::new(AtomicUsize::new(0));
    let mut watchers = Vec::new();
    for _ in 0..WATCHERS {
        if raw {
            let path = format!("/api/v1/namespaces/{ns}/pods?watch=true&resourceVersion={rv}");
            watchers.push(tokio::spawn(raw_watch(client.clone(), path, PODS)));
            continue;
        }
        let api = Api::<Pod>::namespaced(client.clone(), ns);
        let stream = api
            .watch(&WatchParams::default().disable_bookmarks(), &rv)
            .await
            .unwrap();
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
    let phase = Phase::start();
    create_pods(client, ns, prefix).await;
    let creates = phase.end();
    for w in watchers {
        tokio::time::timeout(Duration::from_secs(300), w)
            .await
            .unwrap()
            .unwrap();
    }
    let (wall, cpu) = phase.end();
    let kind = if raw { "raw_http" } else { "kube_client" };
    create_line(
        "create_pods",
        stored,
        &format!("{WATCHERS} {kind}"),
        creates,
    );
    println!(
        "{}",
        json!({"bench": format!("watch_live_{kind}"), "watchers": WATCHERS, "events": WATCHERS * PODS,
               "events_per_sec": ((WATCHERS * PODS) as f64 / wall).round(), "process_cpu_sec": (cpu * 100.0).round() / 100.0,
               "note": "bounded by the concurrent create rate (the process CPU includes the creates)"})
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let config = TestClusterConfig::default().with_watch_history(8 * PODS);
        let cluster = TestCluster::start(config).await.unwrap();
        let client = cluster.client();
        let start_rv = namespace(&client, "bench-a").await;
        let pods_a = Api::<Pod>::namespaced(client.clone(), "bench-a");

        // 1. Creates into an empty store.
        let rss_before = rss_bytes();
        let phase = Phase::start();
        create_pods(&client, "bench-a", "p").await;
        create_line("create_pods", 0, "none", phase.end());
        let rss_after = rss_bytes();
        println!(
            "{}",
            json!({"bench": "memory_per_stored_pod", "rss_delta_bytes_per_pod": (rss_after.saturating_sub(rss_before)) / PODS as u64,
                   "note": "process RSS delta over 10,000 creates; includes the watch history entry per create and client-side garbage"})
        );

        // 2. The target: creates with 10,000 pods stored.
        namespace(&client, "bench-b").await;
        let phase = Phase::start();
        create_pods(&client, "bench-b", "q").await;
        create_line("create_pods", PODS, "none", phase.end());

        // 3. The same over raw HTTP (no client-side serde): the server's rate.
        namespace(&client, "bench-raw").await;
        let phase = Phase::start();
        create_pods_raw(&client, "bench-raw", "r").await;
        create_line("create_pods_raw_http", 2 * PODS, "none", phase.end());

        // 4. Live watch delivery while creating: raw HTTP watchers (the
        // server's cost), then kube-client watchers (which decode every
        // event into a Pod in this process).
        create_with_watchers(&client, "bench-c", "s", true, 3 * PODS).await;
        create_with_watchers(&client, "bench-d", "t", false, 4 * PODS).await;

        // 5. Replay delivery: 10 watchers replay 10,000 kept events each.
        let phase = Phase::start();
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
        let (wall, cpu) = phase.end();
        println!(
            "{}",
            json!({"bench": "watch_replay_kube_client", "watchers": WATCHERS, "events": WATCHERS * PODS,
                   "events_per_sec": ((WATCHERS * PODS) as f64 / wall).round(), "events_per_process_cpu_sec": ((WATCHERS * PODS) as f64 / cpu).round()})
        );

        // 6. The same replay over raw HTTP (frames counted, not decoded): the server's delivery rate.
        let phase = Phase::start();
        let mut handles = Vec::new();
        for _ in 0..WATCHERS {
            let path = format!("/api/v1/namespaces/bench-a/pods?watch=true&resourceVersion={start_rv}");
            handles.push(tokio::spawn(raw_watch(client.clone(), path, PODS)));
        }
        for h in handles {
            h.await.unwrap();
        }
        let (wall, cpu) = phase.end();
        println!(
            "{}",
            json!({"bench": "watch_replay_raw_http", "watchers": WATCHERS, "events": WATCHERS * PODS,
                   "events_per_sec": ((WATCHERS * PODS) as f64 / wall).round(), "events_per_process_cpu_sec": ((WATCHERS * PODS) as f64 / cpu).round()})
        );

        // 7. A full list of 10,000 pods.
        let start = Instant::now();
        let list = pods_a.list(&ListParams::default()).await.unwrap();
        assert_eq!(list.items.len(), PODS);
        println!("{}", json!({"bench": "list_10000_pods_kube_client", "millis": start.elapsed().as_millis()}));

        // Every request succeeded; requests by verb.
        let stats = cluster.requests();
        assert_eq!(stats.total().failed(), 0, "failed requests:\n{stats}");
        let by_verb: serde_json::Map<String, serde_json::Value> = stats
            .by_verb()
            .into_iter()
            .map(|(verb, c)| (verb.to_string(), json!(c.total())))
            .collect();
        println!("{}", json!({"bench": "requests", "by_verb": by_verb, "failed": 0}));
        cluster.shutdown().await;
    });
}
