//! Smoke tests of the workload driver's workloads at a tiny scale: every
//! item is accounted for and nothing hangs. (Timings are not asserted.)
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use ctrlkit_benches::workloads::{DuePattern, Pacing, delayed, keyed_throughput, latency};

/// Deadlock guard only; the workloads take milliseconds.
const GUARD: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throughput_processes_every_distinct_key() {
    for pacing in [Pacing::Backlog(64), Pacing::YieldEvery(100)] {
        for workers in [1, 4] {
            let r = tokio::time::timeout(GUARD, keyed_throughput(5_000, 5_000, workers, pacing))
                .await
                .unwrap();
            assert_eq!(r.adds, 5_000);
            assert_eq!(r.processed, 5_000, "{pacing} with {workers} workers");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dedup_storm_processes_each_key_at_least_once_and_collapses_adds() {
    let r = tokio::time::timeout(GUARD, keyed_throughput(20_000, 100, 4, Pacing::default()))
        .await
        .unwrap();
    assert!(r.processed >= 100, "processed {}", r.processed);
    assert!(r.processed <= 20_000);
    assert!(r.max_backlog <= 100);
}

#[tokio::test(start_paused = true)]
async fn delayed_hands_out_every_item_within_a_timer_tick_of_its_due_time() {
    for pattern in [DuePattern::Uniform, DuePattern::Burst] {
        let r = tokio::time::timeout(
            GUARD,
            delayed(2_000, Duration::from_millis(50), 2, 7, pattern),
        )
        .await
        .unwrap();
        assert_eq!(r.processed, 2_000, "{pattern}");
        assert_eq!(r.lateness.count, 2_000, "{pattern}");
        // The due time is taken just before `add_after`, so an item can
        // never be handed out before it.
        assert!(r.lateness.p50_ns >= 0, "{pattern}: {:?}", r.lateness);
        // With paused time nothing else competes for the CPU: what is left
        // is the queue's own timer resolution, which must stay within
        // tokio's 1 ms timer tick (W3's lateness budget builds on it).
        assert!(
            r.lateness.max_ns <= 1_000_000,
            "{pattern}: {:?}",
            r.lateness
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_measures_every_round() {
    let d = tokio::time::timeout(GUARD, latency(1_000, 4))
        .await
        .unwrap();
    assert_eq!(d.count, 1_000);
}
