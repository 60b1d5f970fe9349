//! What recording an event costs once many were recorded before, against
//! the in-process test cluster. Prints JSON lines.
//!
//! `cargo bench -p ctrlkit-events --bench publish`
//! (`... -- WORD...` runs only the phases whose name contains a WORD:
//! `ctrlkit`, `kube_runtime`).
//!
//! For each number of events already recorded (100 and 100,000 for
//! ctrlkit's recorder), the next 2,000 events (each about a new object) are
//! timed:
//! - `publish_ns`: the caller's cost of `Recorder::publish` (it queues);
//! - `end_to_end_us`: from the first publish until the writer has created
//!   them all on the cluster, per event;
//! - `cache_touched_per_event`: cache entries the correlator looked up,
//!   inserted or evicted per event: the work that must not grow with the
//!   events recorded before.
//!
//! `kube_runtime` runs the same with kube-runtime's `Recorder` (100 and
//! 10,000 before; it awaits each write and walks its whole cache on every
//! publish), for comparison.
#![allow(clippy::unwrap_used)]

use std::time::Instant;

use ctrlkit_events::{Event, EventType, Recorder, RecorderConfig};
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use k8s_openapi::api::core::v1::ObjectReference;

const MEASURED: usize = 2_000;
/// Events queued at most before the filler waits for the writer.
const FILL_CHUNK: usize = 1_000;

fn event(i: usize) -> Event {
    Event {
        type_: EventType::Normal,
        reason: "SuccessfulCreate".into(),
        note: Some(format!("Created pod: web-{i}")),
        action: "CreatePod".into(),
        secondary: None,
    }
}

fn object(prefix: &str, i: usize) -> ObjectReference {
    ObjectReference {
        api_version: Some("apps/v1".into()),
        kind: Some("ReplicaSet".into()),
        namespace: Some("default".into()),
        name: Some(format!("{prefix}-{i}")),
        uid: Some(format!("uid-{prefix}-{i}")),
        ..ObjectReference::default()
    }
}

async fn cluster() -> TestCluster {
    TestCluster::start(TestClusterConfig {
        managed_fields: false,
        ..TestClusterConfig::default()
    })
    .await
    .unwrap()
}

async fn ctrlkit_phase(before: usize) {
    let cluster = cluster().await;
    let recorder = Recorder::with_config(
        cluster.client(),
        "bench-controller",
        RecorderConfig {
            queue_capacity: FILL_CHUNK.max(MEASURED),
            ..RecorderConfig::default()
        },
    )
    .unwrap();
    let fill_started = Instant::now();
    for chunk in (0..before).collect::<Vec<_>>().chunks(FILL_CHUNK) {
        for &i in chunk {
            recorder.publish(&event(i), &object("old", i)).unwrap();
        }
        recorder.flush().await;
    }
    let fill_s = fill_started.elapsed().as_secs_f64();
    let touched_before = recorder.stats().cache_entries_touched;

    let started = Instant::now();
    let mut publish_ns = 0u128;
    for i in 0..MEASURED {
        let t = Instant::now();
        recorder.publish(&event(i), &object("new", i)).unwrap();
        publish_ns += t.elapsed().as_nanos();
    }
    recorder.flush().await;
    let end_to_end = started.elapsed();
    let stats = recorder.stats();
    assert_eq!(stats.created as usize, before + MEASURED, "{stats:?}");
    assert_eq!(stats.dropped, 0);
    println!(
        "{{\"phase\": \"ctrlkit\", \"recorded_before\": {before}, \"events\": {MEASURED}, \
         \"publish_ns\": {:.0}, \"end_to_end_us\": {:.1}, \"cache_touched_per_event\": {:.2}, \
         \"cache_entries\": {}, \"fill_s\": {fill_s:.1}}}",
        publish_ns as f64 / MEASURED as f64,
        end_to_end.as_secs_f64() * 1e6 / MEASURED as f64,
        (stats.cache_entries_touched - touched_before) as f64 / MEASURED as f64,
        stats.cache_entries,
    );
    recorder.shutdown().await;
}

async fn kube_runtime_phase(before: usize) {
    use kube::runtime::events::Recorder as KubeRecorder;
    let cluster = cluster().await;
    let recorder = KubeRecorder::new(cluster.client(), "bench-controller".into());
    for i in 0..before {
        recorder
            .publish(&event(i), &object("old", i))
            .await
            .unwrap();
    }
    let started = Instant::now();
    for i in 0..MEASURED {
        recorder
            .publish(&event(i), &object("new", i))
            .await
            .unwrap();
    }
    let end_to_end = started.elapsed();
    println!(
        "{{\"phase\": \"kube_runtime\", \"recorded_before\": {before}, \"events\": {MEASURED}, \
         \"end_to_end_us\": {:.1}}}",
        end_to_end.as_secs_f64() * 1e6 / MEASURED as f64,
    );
}

fn main() {
    let words: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted = |phase: &str| words.is_empty() || words.iter().any(|w| phase.contains(w));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        if wanted("ctrlkit") {
            for before in [100, 100_000] {
                ctrlkit_phase(before).await;
            }
        }
        if wanted("kube_runtime") {
            for before in [100, 10_000] {
                kube_runtime_phase(before).await;
            }
        }
    });
}
