//! The background writer's concurrency, over a mock API server on paused
//! time: writes about different objects overlap up to `max_in_flight`,
//! those about one object stay in order, a burst is written without drops
//! when the API server is slow per request but concurrent, a stalled one
//! makes the queue drop (counted), and flush and shutdown wait for the
//! writes under way.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Call, Hold, MockApi, always, normal, replicaset};
use ctrlkit_events::{ConfigError, PublishError, Recorder, RecorderConfig, RecorderStats};
use tokio::sync::Semaphore;

/// Every request takes `delay` (of tokio's clock) to be answered.
fn slow(delay: Duration) -> Hold {
    Arc::new(move |_| Box::pin(tokio::time::sleep(delay)))
}

/// Every request waits for a permit of `gate` (none until the test adds
/// them): the API server is stalled.
fn gated(gate: &Arc<Semaphore>) -> Hold {
    let gate = gate.clone();
    Arc::new(move |_| {
        let gate = gate.clone();
        Box::pin(async move { gate.acquire().await.unwrap().forget() })
    })
}

fn recorder_with(mock: &MockApi, queue_capacity: usize, max_in_flight: usize) -> Recorder {
    Recorder::with_config(
        mock.client.clone(),
        "c",
        RecorderConfig {
            queue_capacity,
            max_in_flight,
            ..RecorderConfig::default()
        },
    )
    .unwrap()
}

#[tokio::test(start_paused = true)]
async fn events_about_one_object_are_written_in_order_while_objects_overlap() {
    // Creates take a second, patches are answered at once: a repeat's
    // patch sent before the create it counts on would find no event (404),
    // create a second one, and the first create would then fail (409).
    let hold: Hold = Arc::new(|call: &Call| {
        let delay = if call.verb == "create" { 1000 } else { 0 };
        Box::pin(tokio::time::sleep(Duration::from_millis(delay)))
    });
    let mock = MockApi::new(always(201), Some(hold));
    let recorder = Recorder::new(mock.client.clone(), "c");
    let objects = ["a", "b", "c", "d"];
    for _ in 0..3 {
        for object in objects {
            recorder
                .publish(&normal("Repeated", "same message"), &replicaset(object))
                .unwrap();
        }
    }
    recorder.flush().await;

    let stats = recorder.stats();
    assert_eq!(
        (stats.created, stats.patched, stats.failed),
        (4, 8, 0),
        "{stats:?}"
    );
    let answered = mock.answered();
    for object in objects {
        let calls: Vec<_> = answered
            .iter()
            .filter(|(call, _)| call.object() == object)
            .map(|(call, code)| (call.verb, call.count, *code))
            .collect();
        assert_eq!(
            calls,
            [
                ("create", Some(1), 201),
                ("patch", Some(2), 200),
                ("patch", Some(3), 200)
            ],
            "requests about {object}"
        );
    }
    let stored = mock.stored();
    assert_eq!(stored.len(), 4, "one event per object");
    assert!(stored.values().all(|e| e["count"] == 3), "{stored:?}");
    // The four objects' creates were under way together.
    assert_eq!(mock.peak_in_flight(), 4);
}

#[tokio::test(start_paused = true)]
async fn max_in_flight_bounds_the_writes_under_way() {
    for max_in_flight in [1, 3] {
        let mock = MockApi::new(always(201), Some(slow(Duration::from_millis(10))));
        let recorder = recorder_with(&mock, 1000, max_in_flight);
        for i in 0..20 {
            recorder
                .publish(&normal("R", "m"), &replicaset(&format!("rs-{i}")))
                .unwrap();
        }
        recorder.flush().await;
        assert_eq!(recorder.stats().created, 20);
        assert_eq!(mock.peak_in_flight(), max_in_flight);
    }
}

/// `events` SuccessfulCreate events, one per millisecond, spread over 100
/// ReplicaSets (5 each, as pods created for them), against an API server
/// taking 10 ms per request.
async fn burst(events: usize, max_in_flight: usize) -> RecorderStats {
    let mock = MockApi::new(always(201), Some(slow(Duration::from_millis(10))));
    let recorder = recorder_with(&mock, 50, max_in_flight);
    for i in 0..events {
        let rs = format!("rs-{}", i % 100);
        let _ = recorder.publish(
            &normal("SuccessfulCreate", &format!("Created pod: {rs}-{i}")),
            &replicaset(&rs),
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    recorder.flush().await;
    let stats = recorder.stats();
    assert_eq!(stats.published + stats.dropped, events as u64, "{stats:?}");
    assert_eq!(stats.created, stats.published, "{stats:?}");
    assert_eq!(stats.queued, 0);
    stats
}

#[tokio::test(start_paused = true)]
async fn a_burst_is_written_without_drops_when_the_api_server_is_slow_but_concurrent() {
    // 16 writes of 10 ms at once keep up with one event per millisecond.
    let stats = burst(500, 16).await;
    assert_eq!((stats.created, stats.dropped), (500, 0), "{stats:?}");
    // One write at a time (client-go's writer) cannot: the queue of 50
    // overflows.
    let serial = burst(500, 1).await;
    assert!(serial.dropped > 0, "{serial:?}");
}

#[tokio::test(start_paused = true)]
async fn a_stalled_api_server_fills_the_queue_and_drops_are_counted() {
    let gate = Arc::new(Semaphore::new(0));
    let mock = MockApi::new(always(201), Some(gated(&gate)));
    let recorder = recorder_with(&mock, 10, 4);
    for i in 0..4 {
        recorder
            .publish(&normal("R", "m"), &replicaset(&format!("rs-{i}")))
            .unwrap();
    }
    // The writer takes up four writes, which hang.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(mock.requests(), 4);
    let results: Vec<_> = (4..100)
        .map(|i| recorder.publish(&normal("R", "m"), &replicaset(&format!("rs-{i}"))))
        .collect();
    assert!(results[..10].iter().all(Result::is_ok), "{results:?}");
    for result in &results[10..] {
        assert!(
            matches!(result, Err(PublishError::QueueFull { capacity: 10 })),
            "{result:?}"
        );
    }
    let stats = recorder.stats();
    assert_eq!(
        (stats.published, stats.dropped, stats.queued, stats.created),
        (14, 86, 10, 0)
    );

    gate.add_permits(1000);
    recorder.flush().await;
    let stats = recorder.stats();
    assert_eq!((stats.created, stats.queued, stats.dropped), (14, 0, 86));
}

#[tokio::test(start_paused = true)]
async fn events_waiting_for_an_earlier_write_about_their_object_count_as_queued() {
    let gate = Arc::new(Semaphore::new(0));
    let mock = MockApi::new(always(201), Some(gated(&gate)));
    let recorder = recorder_with(&mock, 5, 16);
    let results: Vec<_> = (0..8)
        .map(|i| recorder.publish(&normal("R", &format!("m{i}")), &replicaset("hot")))
        .collect();
    tokio::time::sleep(Duration::from_secs(60)).await;
    // One write about the object is under way; the rest wait for it.
    assert_eq!(mock.requests(), 1);
    assert_eq!(recorder.stats().queued, 4);
    assert_eq!(results.iter().filter(|r| r.is_err()).count(), 3);
    // Room for one more only.
    assert!(
        recorder
            .publish(&normal("R", "m8"), &replicaset("hot"))
            .is_ok()
    );
    assert!(matches!(
        recorder.publish(&normal("R", "m9"), &replicaset("hot")),
        Err(PublishError::QueueFull { .. })
    ));
    gate.add_permits(1000);
    recorder.flush().await;
    assert_eq!(recorder.stats().created, 6);
}

#[tokio::test(start_paused = true)]
async fn flush_waits_for_the_writes_under_way() {
    let gate = Arc::new(Semaphore::new(0));
    let mock = MockApi::new(always(201), Some(gated(&gate)));
    let recorder = recorder_with(&mock, 100, 16);
    for i in 0..3 {
        recorder
            .publish(&normal("R", "m"), &replicaset(&format!("rs-{i}")))
            .unwrap();
    }
    let flush = tokio::spawn({
        let recorder = recorder.clone();
        async move { recorder.flush().await }
    });
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(mock.requests(), 3, "all three under way");
    assert!(!flush.is_finished(), "flush returned with writes under way");
    assert_eq!(recorder.stats().created, 0);

    gate.add_permits(1000);
    flush.await.unwrap();
    assert_eq!(recorder.stats().created, 3);
}

#[tokio::test(start_paused = true)]
async fn shutdown_waits_for_the_writes_under_way_and_a_dropped_wait_can_be_resumed() {
    let gate = Arc::new(Semaphore::new(0));
    let mock = MockApi::new(always(201), Some(gated(&gate)));
    let recorder = recorder_with(&mock, 100, 2);
    for i in 0..5 {
        recorder
            .publish(&normal("R", "m"), &replicaset(&format!("rs-{i}")))
            .unwrap();
    }
    // The wait is given up; the shutdown is not.
    let waited = tokio::time::timeout(Duration::from_secs(3600), recorder.shutdown()).await;
    assert!(waited.is_err(), "shutdown returned with writes stalled");
    assert!(matches!(
        recorder.publish(&normal("R", "late"), &replicaset("rs-9")),
        Err(PublishError::ShutDown)
    ));
    assert_eq!(recorder.stats().created, 0);

    gate.add_permits(1000);
    recorder.shutdown().await;
    let stats = recorder.stats();
    assert_eq!((stats.created, stats.failed, stats.queued), (5, 0, 0));
    // Flushing a stopped recorder returns.
    recorder.flush().await;
}

#[tokio::test]
async fn zero_writes_in_flight_is_refused() {
    let mock = MockApi::new(always(201), None);
    let error = Recorder::with_config(
        mock.client.clone(),
        "c",
        RecorderConfig {
            max_in_flight: 0,
            ..RecorderConfig::default()
        },
    )
    .unwrap_err();
    assert!(matches!(error, ConfigError::ZeroMaxInFlight));
    assert!(error.to_string().contains("max_in_flight"), "{error}");
}
