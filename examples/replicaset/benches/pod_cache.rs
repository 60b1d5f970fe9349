//! Memory per cached pod, and the cost of decoding one, with each pod
//! cache transform the replica controllers can use.
//!
//! 1. Start a [`TestCluster`] with the kubelet simulation, create one pod
//!    from the `scale_out` template, wait until the kubelet reports it
//!    ready, and take its JSON as a watch event would carry it (with the
//!    cluster's managedFields).
//! 2. For each transform (`none`, `drop_managed_fields`, `slim_pod`, and
//!    `slim_pod_decoded_slim`: the binaries' pod cache transform, which
//!    decodes each pod straight into its slim form): decode
//!    `CTRLKIT_BENCH_PODS` (default 10,000) copies of that JSON (each with
//!    its own name) into `Arc<Pod>`s as the informer does, apply the
//!    transform and keep them all; report the heap bytes still held per
//!    pod (a counting global allocator) and the median nanoseconds per
//!    decode + transform over 5 rounds.
//!
//! `cargo bench -p ctrlkit-replicaset --bench pod_cache`;
//! `cargo test -p ctrlkit-replicaset --bench pod_cache` is a smoke run of
//! 100 pods.
#![allow(clippy::unwrap_used)]
// The counting global allocator below needs `unsafe impl GlobalAlloc`; it
// only forwards to the system allocator.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use ctrlkit_informer::{MaybeDecoded, Transform};
use ctrlkit_podcontrol::pod::is_pod_ready;
use ctrlkit_replicaset::{ControllerOptions, slim_pod};
use ctrlkit_testcluster::kubelet::KubeletConfig;
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::json;

/// The system allocator, counting the bytes currently allocated.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded to `System` unchanged; only a counter is
// updated besides.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: the caller's contract is passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// A ready pod of the `scale_out` shape, as the test cluster serves it.
async fn served_pod() -> String {
    let kubelet = KubeletConfig::with_nodes(1, 110)
        .schedule_delay(Duration::from_millis(1))
        .start_delay(Duration::from_millis(5))
        .ready_delay(Duration::from_millis(5));
    let cluster = TestCluster::start(TestClusterConfig::default().with_kubelet(kubelet))
        .await
        .unwrap();
    // The owner exists, or the cluster's garbage collector deletes the pod.
    let owners: Api<ReplicaSet> = Api::namespaced(cluster.client(), "default");
    let owner: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "rs-00001"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "rs-00001"}},
            "template": {"metadata": {"labels": {"app": "rs-00001"}},
                "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}}}
    }))
    .unwrap();
    let owner = owners.create(&PostParams::default(), &owner).await.unwrap();
    let api: Api<Pod> = Api::namespaced(cluster.client(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "rs-00001-x7k2p", "labels": {"app": "rs-00001"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": "rs-00001", "uid": owner.metadata.uid,
                "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}
    }))
    .unwrap();
    api.create(&PostParams::default(), &pod).await.unwrap();
    let started = Instant::now();
    let ready = loop {
        let pod = api.get("rs-00001-x7k2p").await.unwrap();
        if is_pod_ready(&pod) {
            break pod;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "pod never ready"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    cluster.shutdown().await;
    serde_json::to_string(&ready).unwrap()
}

/// Decodes one pod and applies a transform, as the informer does.
fn decoded(transform: &Transform<Pod>, json: &str) -> Pod {
    match transform.decode(json) {
        MaybeDecoded::Decoded(pod) => pod,
        MaybeDecoded::Undecodable(bad) => panic!("{bad}"),
    }
}

fn main() {
    let smoke = !std::env::args().any(|a| a == "--bench");
    let count: usize = std::env::var("CTRLKIT_BENCH_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if smoke { 100 } else { 10_000 });
    let json = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(served_pod());
    let bodies: Vec<String> = (0..count)
        .map(|i| json.replace("rs-00001-x7k2p", &format!("rs-00001-{i:05}")))
        .collect();
    let slim_options = ControllerOptions {
        slim_pod_cache: true,
        ..ControllerOptions::default()
    };
    let transforms = [
        ("none", Transform::new(|_: &mut Pod| {})),
        ("drop_managed_fields", Transform::drop_managed_fields()),
        ("slim_pod", Transform::new(slim_pod)),
        (
            "slim_pod_decoded_slim",
            slim_options.pod_cache_transform().unwrap(),
        ),
    ];
    for (name, transform) in transforms {
        let mut ns_per_pod = Vec::new();
        let mut bytes_per_pod = 0;
        for _ in 0..5 {
            let before = LIVE.load(Ordering::Relaxed);
            let started = Instant::now();
            let cache: Vec<Arc<Pod>> = bodies
                .iter()
                .map(|body| Arc::new(decoded(&transform, body)))
                .collect();
            ns_per_pod.push(started.elapsed().as_nanos() as f64 / count as f64);
            bytes_per_pod = (LIVE.load(Ordering::Relaxed) - before) / count as isize;
            drop(std::hint::black_box(cache));
        }
        ns_per_pod.sort_by(f64::total_cmp);
        println!(
            "{}",
            json!({
                "bench": "pod_cache",
                "transform": name,
                "pods": count,
                "pod_json_bytes": json.len(),
                "heap_bytes_per_cached_pod": bytes_per_pod,
                "decode_and_transform_ns_per_pod_median": ns_per_pod[2].round(),
            })
        );
    }
}
