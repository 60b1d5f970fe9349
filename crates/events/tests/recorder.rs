//! The recorder over a mock API server: constant work per event however
//! many were recorded, a bounded queue that drops rather than blocks,
//! retries of transport failures only, and the flush on shutdown.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{always, mock_client, normal, replicaset};
use ctrlkit_events::{PublishError, Recorder, RecorderConfig};

/// The correlator's cache work for `batch` events about new objects,
/// after `before` events were recorded.
async fn work_for_batch(before: usize, batch: usize) -> (u64, u64) {
    let (client, _) = mock_client(always(201));
    let recorder = Recorder::with_config(
        client,
        "bench-controller",
        RecorderConfig {
            queue_capacity: 20_000,
            ..RecorderConfig::default()
        },
    )
    .unwrap();
    for i in 0..before {
        recorder
            .publish(&normal("Filled", "x"), &replicaset(&format!("old-{i}")))
            .unwrap();
    }
    recorder.flush().await;
    let start = recorder.stats().cache_entries_touched;
    for i in 0..batch {
        recorder
            .publish(&normal("Measured", "x"), &replicaset(&format!("new-{i}")))
            .unwrap();
    }
    recorder.flush().await;
    let stats = recorder.stats();
    assert_eq!(stats.created as usize, before + batch, "{stats:?}");
    (stats.cache_entries_touched - start, stats.cache_entries)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_work_per_event_does_not_grow_with_the_events_recorded() {
    let (few, few_entries) = work_for_batch(100, 100).await;
    // Well past the caches' 4096 entries: they are full and evicting.
    let (many, many_entries) = work_for_batch(10_000, 100).await;
    assert!(few_entries <= 3 * 4096 && many_entries <= 3 * 4096);
    assert_eq!(many_entries, 3 * 4096, "the caches are full");
    // Four cache operations per new event (aggregate, count, spam filter,
    // the server's answer), plus one eviction each once the caches are
    // full: a constant, where a cache walk would cost 10,000 per event.
    assert_eq!(few, 4 * 100, "{few}");
    assert!(
        many <= 8 * 100,
        "{many} cache entries touched for 100 events"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_full_queue_drops_events_and_counts_them() {
    let (client, requests) = mock_client(always(201));
    let recorder = Recorder::with_config(
        client,
        "c",
        RecorderConfig {
            queue_capacity: 3,
            ..RecorderConfig::default()
        },
    )
    .unwrap();
    // On a current-thread runtime the writer cannot run while this test
    // publishes without awaiting: the queue fills.
    let results: Vec<_> = (0..5)
        .map(|i| recorder.publish(&normal("R", &format!("m{i}")), &replicaset("web")))
        .collect();
    assert!(results[..3].iter().all(Result::is_ok));
    for result in &results[3..] {
        assert!(
            matches!(result, Err(PublishError::QueueFull { capacity: 3 })),
            "{result:?}"
        );
    }
    recorder.flush().await;
    let stats = recorder.stats();
    assert_eq!((stats.published, stats.dropped, stats.created), (3, 2, 3));
    assert_eq!(requests.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn transport_failures_are_retried_and_api_refusals_are_not() {
    // Two transport failures, then success.
    let (client, requests) = mock_client(Arc::new(|n| (n >= 2).then_some(201)));
    let recorder = Recorder::new(client, "c");
    recorder
        .publish(&normal("R", "m"), &replicaset("web"))
        .unwrap();
    let started = tokio::time::Instant::now();
    recorder.flush().await;
    assert_eq!(requests.load(Ordering::SeqCst), 3);
    assert_eq!(recorder.stats().created, 1);
    // Paused between tries: a random part of 10 s, then 10 s.
    assert!(started.elapsed() >= Duration::from_secs(10));

    // The API server's answer is final.
    let (client, requests) = mock_client(always(500));
    let recorder = Recorder::new(client, "c");
    recorder
        .publish(&normal("R", "m"), &replicaset("web"))
        .unwrap();
    recorder.flush().await;
    assert_eq!(requests.load(Ordering::SeqCst), 1);
    assert_eq!(recorder.stats().failed, 1);

    // A transport failure that persists is given up after 12 tries.
    let (client, requests) = mock_client(Arc::new(|_| None));
    let recorder = Recorder::new(client, "c");
    recorder
        .publish(&normal("R", "m"), &replicaset("web"))
        .unwrap();
    recorder.flush().await;
    assert_eq!(requests.load(Ordering::SeqCst), 12);
    assert_eq!(recorder.stats().failed, 1);
}

#[tokio::test(start_paused = true)]
async fn shutdown_writes_what_is_queued_once_and_refuses_more() {
    let (client, requests) = mock_client(Arc::new(|_| None));
    let recorder = Recorder::new(client, "c");
    for i in 0..3 {
        recorder
            .publish(&normal("R", &format!("m{i}")), &replicaset("web"))
            .unwrap();
    }
    let started = tokio::time::Instant::now();
    recorder.shutdown().await;
    // One try each, no pauses between tries while shutting down.
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(requests.load(Ordering::SeqCst), 3);
    assert_eq!(recorder.stats().failed, 3);
    assert!(matches!(
        recorder.publish(&normal("R", "late"), &replicaset("web")),
        Err(PublishError::ShutDown)
    ));
    // Flushing a stopped recorder returns.
    recorder.flush().await;
}

#[tokio::test]
async fn an_object_without_a_name_is_refused() {
    let (client, requests) = mock_client(always(201));
    let recorder = Recorder::new(client, "c");
    let mut nameless = replicaset("x");
    nameless.name = None;
    let err = recorder.publish(&normal("R", "m"), &nameless).unwrap_err();
    assert!(err.to_string().contains("without a name"), "{err}");
    recorder.flush().await;
    assert_eq!(requests.load(Ordering::SeqCst), 0);
}

#[test]
fn publishing_outside_a_runtime_queues_until_one_is_at_hand() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // A kube client needs a runtime to be built, not to be held.
    let (client, requests) = {
        let _inside = runtime.enter();
        mock_client(always(201))
    };
    let recorder = Recorder::new(client, "c");
    recorder
        .publish(&normal("R", "m"), &replicaset("web"))
        .unwrap();
    assert_eq!(recorder.stats().published, 1);
    runtime.block_on(recorder.flush());
    assert_eq!(requests.load(Ordering::SeqCst), 1);
    assert_eq!(recorder.stats().created, 1);
}
