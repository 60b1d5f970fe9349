//! `add_rate_limited`, `forget` and `num_requeues` on the queue.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::settle;
use ctrlkit_workqueue::WorkQueue;
use ctrlkit_workqueue::rate_limiter::ItemExponentialFailureRateLimiter;
use tokio::time::advance;

const MS: Duration = Duration::from_millis(1);

fn queue() -> WorkQueue<&'static str> {
    WorkQueue::builder()
        .rate_limiter(ItemExponentialFailureRateLimiter::new(
            MS,
            Duration::from_secs(1),
        ))
        .build()
}

#[tokio::test(start_paused = true)]
async fn add_rate_limited_waits_the_limiters_delay() {
    let queue = queue();
    queue.add_rate_limited("one"); // due in 1 ms
    queue.add_rate_limited("one"); // 2 ms: merged, the 1 ms wins
    assert_eq!(queue.num_requeues(&"one"), 2);
    queue.add_rate_limited("two"); // 1 ms
    queue.add_rate_limited("two"); // 2 ms
    assert_eq!(queue.num_requeues(&"two"), 2);
    assert_eq!(queue.len(), 0);
    advance(Duration::from_micros(900)).await;
    settle().await;
    assert_eq!(queue.len(), 0, "not due yet");
    advance(Duration::from_micros(200)).await;
    settle().await;
    assert_eq!(queue.len(), 2);

    queue.forget(&"one");
    assert_eq!(queue.num_requeues(&"one"), 0);
    assert_eq!(queue.num_requeues(&"two"), 2);
    let one = queue.try_get().unwrap();
    queue.add_rate_limited(one); // back to 1 ms, re-queued on done
    queue.done(&one);
    assert_eq!(queue.len(), 1, "only two is queued");
    advance(2 * MS).await;
    settle().await;
    assert_eq!(queue.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn the_delay_doubles_with_every_failure() {
    let queue = queue();
    let start = tokio::time::Instant::now();
    let mut fired_at = Vec::new();
    for _ in 0..4 {
        queue.add_rate_limited("flaky");
        let item = queue.get().await.unwrap();
        fired_at.push(start.elapsed());
        queue.done(&item);
    }
    // 1, 1+2, 1+2+4, 1+2+4+8 ms (timers have 1 ms resolution).
    let expected = [1, 3, 7, 15].map(|ms| ms * MS);
    for (got, want) in fired_at.iter().zip(expected) {
        assert!(*got >= want && *got < want + 2 * MS, "{fired_at:?}");
    }
    assert_eq!(queue.num_requeues(&"flaky"), 4);
    queue.forget(&"flaky");
    assert_eq!(queue.num_requeues(&"flaky"), 0);
}

#[test]
fn forget_does_not_touch_the_queue() {
    let queue = queue();
    queue.add("a");
    queue.forget(&"a");
    assert_eq!(queue.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_default_limiter_starts_at_five_milliseconds() {
    let queue = WorkQueue::<&str>::new();
    let start = tokio::time::Instant::now();
    queue.add_rate_limited("x");
    let item = queue.get().await.unwrap();
    let waited = start.elapsed();
    assert!(waited >= 5 * MS && waited < 7 * MS, "{waited:?}");
    assert_eq!(queue.num_requeues(&item), 1);
}
