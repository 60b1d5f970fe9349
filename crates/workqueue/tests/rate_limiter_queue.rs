//! Rate limiters plugged into queues: extreme delays and shared limiters,
//! with paused tokio time. (`add_rate_limited` / `forget` / `num_requeues`
//! basics are in `rate_limited_queue.rs`.)
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use ctrlkit_workqueue::WorkQueue;
use ctrlkit_workqueue::rate_limiter::{BucketRateLimiter, ItemExponentialFailureRateLimiter};
use tokio::time::timeout;

const MS: Duration = Duration::from_millis(1);
/// Deadlock guard; with paused time it costs nothing.
const GUARD: Duration = Duration::from_secs(3600);

#[tokio::test(start_paused = true)]
async fn a_bucket_that_never_refills_parks_the_item_without_panicking() {
    // Rate 0: one token, then every delay is `NEVER` (about 292 years).
    let queue = WorkQueue::builder()
        .rate_limiter(BucketRateLimiter::new(0.0, 1))
        .build();
    queue.add_rate_limited("first");
    assert_eq!(timeout(GUARD, queue.get()).await.unwrap(), Some("first"));
    queue.add_rate_limited("second");
    assert!(
        timeout(Duration::from_secs(3600), queue.get())
            .await
            .is_err()
    );
    assert_eq!(queue.len(), 0);
    // The queue still serves plain adds, and shuts down normally.
    queue.add("third");
    assert_eq!(timeout(GUARD, queue.get()).await.unwrap(), Some("third"));
    queue.shut_down();
    assert_eq!(timeout(GUARD, queue.get()).await.unwrap(), None);
}

#[tokio::test(start_paused = true)]
async fn exponential_backoff_capped_far_in_the_future_does_not_panic() {
    let queue = WorkQueue::builder()
        .rate_limiter(ItemExponentialFailureRateLimiter::new(MS, Duration::MAX))
        .build();
    // After 100 failures the delay is the cap: `Duration::MAX`.
    for _ in 0..100 {
        queue.add_rate_limited("x");
    }
    assert_eq!(queue.num_requeues(&"x"), 100);
    // The first (1 ms) wait still wins: waiting copies keep the earliest time.
    assert_eq!(timeout(GUARD, queue.get()).await.unwrap(), Some("x"));
}

#[tokio::test(start_paused = true)]
async fn queues_sharing_a_bucket_share_its_budget() {
    let bucket = Arc::new(BucketRateLimiter::new(10.0, 2));
    let a = WorkQueue::builder()
        .rate_limiter(Arc::clone(&bucket))
        .build();
    let b = WorkQueue::builder().rate_limiter(bucket).build();
    let start = tokio::time::Instant::now();
    a.add_rate_limited(1u32);
    b.add_rate_limited(2u32);
    // Both tokens are spent: the next retry, on either queue, waits 100 ms.
    a.add_rate_limited(3u32);
    assert_eq!(a.try_get(), Some(1));
    assert_eq!(b.try_get(), Some(2));
    assert_eq!(a.try_get(), None);
    assert_eq!(timeout(GUARD, a.get()).await.unwrap(), Some(3));
    let waited = start.elapsed();
    assert!(waited >= 100 * MS && waited <= 101 * MS, "{waited:?}");
}
