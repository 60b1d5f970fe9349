//! `add_after`: due times, dedup keeping the earliest time, firing order,
//! interaction with processing and shutdown. All on paused tokio time.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{s, settle, within};
use ctrlkit_workqueue::WorkQueue;
use tokio::time::{advance, sleep};

const MS: Duration = Duration::from_millis(1);

/// Moves paused time forward and lets the timer task run.
async fn step(by: Duration) {
    advance(by).await;
    settle().await;
}

#[tokio::test(start_paused = true)]
async fn an_item_is_queued_once_its_delay_has_passed() {
    let queue = WorkQueue::<String>::new();
    queue.add_after(s("foo"), 50 * MS);
    settle().await;
    assert_eq!(queue.len(), 0);
    step(49 * MS).await;
    assert_eq!(queue.len(), 0, "not yet due");
    step(11 * MS).await;
    assert_eq!(queue.len(), 1);
    let item = queue.get().await.unwrap();
    assert_eq!(item, "foo");
    queue.done(&item);
    step(Duration::from_secs(10)).await;
    assert_eq!(queue.len(), 0, "fired once only");
}

#[tokio::test(start_paused = true)]
async fn a_later_add_after_does_not_postpone_a_pending_one() {
    let queue = WorkQueue::<String>::new();
    queue.add_after(s("foo"), 50 * MS);
    queue.add_after(s("foo"), 70 * MS);
    step(60 * MS).await;
    assert_eq!(queue.len(), 1, "fired at the earlier time");
    let item = queue.get().await.unwrap();
    queue.done(&item);
    step(20 * MS).await;
    assert_eq!(queue.len(), 0, "the 70 ms request was merged, not kept");
}

#[tokio::test(start_paused = true)]
async fn an_earlier_add_after_moves_a_pending_one_forward() {
    let queue = WorkQueue::<String>::new();
    queue.add_after(s("foo"), 50 * MS);
    queue.add_after(s("foo"), 30 * MS);
    step(40 * MS).await;
    assert_eq!(queue.len(), 1, "the earlier time wins");
    let item = queue.get().await.unwrap();
    queue.done(&item);
    step(20 * MS).await;
    assert_eq!(queue.len(), 0, "the 50 ms request is gone");
}

#[tokio::test(start_paused = true)]
async fn items_fire_in_due_order() {
    let queue = WorkQueue::<String>::new();
    queue.add_after(s("foo"), Duration::from_secs(1));
    queue.add_after(s("bar"), 50 * MS);
    step(60 * MS).await;
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.get().await.unwrap(), "bar");
    queue.add_after(s("baz"), Duration::from_secs(2));
    step(Duration::from_secs(1)).await;
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.get().await.unwrap(), "foo");
    step(Duration::from_secs(2)).await;
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.get().await.unwrap(), "baz");
}

#[tokio::test(start_paused = true)]
async fn items_due_together_are_queued_in_due_order() {
    let queue = WorkQueue::<String>::new();
    queue.add_after(s("foo"), Duration::from_secs(1));
    queue.add_after(s("bar"), 500 * MS);
    queue.add_after(s("baz"), 250 * MS);
    step(Duration::from_secs(2)).await;
    assert_eq!(queue.len(), 3);
    assert_eq!(queue.try_get().unwrap(), "baz");
    assert_eq!(queue.try_get().unwrap(), "bar");
    assert_eq!(queue.try_get().unwrap(), "foo");
}

#[tokio::test(start_paused = true)]
async fn a_zero_delay_adds_immediately() {
    let queue = WorkQueue::<u32>::new();
    queue.add_after(1, Duration::ZERO);
    assert_eq!(queue.len(), 1, "no timer involved");
    assert_eq!(queue.try_get(), Some(1));
}

#[tokio::test(start_paused = true)]
async fn a_parked_get_receives_a_delayed_item() {
    let queue = WorkQueue::<u32>::new();
    let worker = tokio::spawn({
        let queue = queue.clone();
        async move { queue.get().await }
    });
    settle().await;
    let start = tokio::time::Instant::now();
    queue.add_after(7, Duration::from_secs(5));
    assert_eq!(within("worker", worker).await.unwrap(), Some(7));
    let waited = start.elapsed();
    assert!(waited >= Duration::from_secs(5), "{waited:?}");
    assert!(waited < Duration::from_secs(5) + 2 * MS, "{waited:?}");
}

#[tokio::test(start_paused = true)]
async fn sub_millisecond_delays_are_honoured() {
    let queue = WorkQueue::<u32>::new();
    let start = tokio::time::Instant::now();
    queue.add_after(1, Duration::from_micros(300));
    let got = within("get", queue.get()).await;
    assert_eq!(got, Some(1));
    assert!(start.elapsed() >= Duration::from_micros(300));
}

#[tokio::test(start_paused = true)]
async fn a_delay_is_independent_of_the_item_being_queued() {
    // As client-go: the pending delay is not cancelled by a plain add, so
    // the item is processed again when it fires.
    let queue = WorkQueue::<u32>::new();
    queue.add_after(1, 100 * MS);
    queue.add(1);
    let item = queue.get().await.unwrap();
    queue.done(&item);
    assert_eq!(queue.len(), 0);
    step(100 * MS).await;
    assert_eq!(queue.len(), 1, "the delayed add fired");
}

#[tokio::test(start_paused = true)]
async fn a_delay_firing_during_processing_requeues_on_done() {
    let queue = WorkQueue::<u32>::new();
    queue.add(1);
    let item = queue.get().await.unwrap();
    queue.add_after(1, 10 * MS);
    step(20 * MS).await;
    assert_eq!(queue.len(), 0, "still being processed");
    queue.done(&item);
    assert_eq!(queue.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn add_after_is_ignored_after_shutdown_and_shutdown_drops_pending_delays() {
    let queue = WorkQueue::<u32>::new();
    queue.add_after(1, 10 * MS);
    queue.shut_down();
    queue.add_after(2, 10 * MS);
    queue.add_after(3, Duration::ZERO);
    step(Duration::from_secs(1)).await;
    assert_eq!(queue.len(), 0);
    assert_eq!(queue.get().await, None);
}

#[tokio::test(start_paused = true)]
async fn the_timer_task_ends_on_shutdown_and_on_drop() {
    let metrics = tokio::runtime::Handle::current().metrics();
    let queue = WorkQueue::<u32>::new();
    assert_eq!(
        metrics.num_alive_tasks(),
        0,
        "no task until a delay is used"
    );
    queue.add_after(1, Duration::from_secs(3600));
    assert_eq!(metrics.num_alive_tasks(), 1);
    queue.shut_down();
    settle().await;
    assert_eq!(metrics.num_alive_tasks(), 0, "ended by shutdown");

    let queue = WorkQueue::<u32>::new();
    queue.add_after(1, Duration::from_secs(3600));
    settle().await;
    assert_eq!(metrics.num_alive_tasks(), 1);
    drop(queue);
    settle().await;
    assert_eq!(metrics.num_alive_tasks(), 0, "ended by dropping the queue");
}

#[test]
fn add_after_outside_a_runtime_fires_once_a_get_runs_in_one() {
    let queue = WorkQueue::<u32>::new();
    queue.add_after(1, 10 * MS);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let got = runtime.block_on(async { within("get", queue.get()).await });
    assert_eq!(got, Some(1));
}

#[tokio::test(start_paused = true)]
async fn huge_delays_do_not_overflow() {
    let queue = WorkQueue::<u32>::new();
    queue.add_after(1, Duration::MAX);
    queue.add_after(2, 10 * MS);
    sleep(20 * MS).await;
    settle().await;
    assert_eq!(queue.try_get(), Some(2));
    assert_eq!(queue.len(), 0);
}

#[tokio::test(start_paused = true)]
async fn many_delayed_items_all_fire_in_order() {
    let queue = WorkQueue::<u64>::new();
    // Insert in a scrambled order; they must come out sorted by delay.
    let n = 1000u64;
    for i in 0..n {
        let key = (i * 7919) % n;
        queue.add_after(key, Duration::from_micros(100 + key * 37));
    }
    let mut got = Vec::new();
    while got.len() < n as usize {
        let item = within("get", queue.get()).await.unwrap();
        queue.done(&item);
        got.push(item);
    }
    let mut sorted = got.clone();
    sorted.sort_unstable();
    assert_eq!(got, sorted);
}
