//! Basic queue semantics: dedup, add while processing, shutdown and drain
//! (the scenarios of client-go's queue tests, plus the cases where this
//! queue deliberately differs).
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashSet;
use std::sync::Arc;

use common::{s, settle, within};
use ctrlkit_workqueue::WorkQueue;
use futures::StreamExt;
use parking_lot::Mutex;

const AFTER_SHUTDOWN: &str = "added after shutdown!";

/// Many producers and consumers; a key added after shutdown is never seen
/// and the queue ends empty. Run with both shutdown flavours.
async fn many_producers_and_consumers(drain: bool) {
    let queue = WorkQueue::<String>::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let producers: Vec<_> = (0..50)
        .map(|i| {
            let queue = queue.clone();
            tokio::spawn(async move {
                for _ in 0..50 {
                    queue.add(i.to_string());
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    let consumers: Vec<_> = (0..10)
        .map(|_| {
            let queue = queue.clone();
            let seen = seen.clone();
            tokio::spawn(async move {
                while let Some(item) = queue.get().await {
                    seen.lock().push(item.clone());
                    tokio::task::yield_now().await;
                    queue.done(&item);
                }
            })
        })
        .collect();
    for p in producers {
        p.await.unwrap();
    }
    if drain {
        within("drain", queue.shut_down_with_drain()).await;
    } else {
        queue.shut_down();
    }
    queue.add(s(AFTER_SHUTDOWN));
    for c in consumers {
        within("consumer", c).await.unwrap();
    }
    let seen = seen.lock();
    assert!(!seen.iter().any(|i| i == AFTER_SHUTDOWN));
    let distinct: HashSet<_> = seen.iter().collect();
    assert_eq!(distinct.len(), 50, "every producer's key was processed");
    assert_eq!(queue.len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn basic_with_shut_down() {
    many_producers_and_consumers(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn basic_with_shut_down_with_drain() {
    many_producers_and_consumers(true).await;
}

/// Consumers re-add each item while processing it; everything terminates.
async fn add_while_processing(drain: bool) {
    let queue = WorkQueue::<u32>::new();
    for i in 0..50 {
        queue.add(i);
    }
    let processed = Arc::new(Mutex::new(Vec::new()));
    let consumers: Vec<_> = (0..10)
        .map(|_| {
            let queue = queue.clone();
            let processed = processed.clone();
            tokio::spawn(async move {
                let mut counters = std::collections::HashMap::new();
                while let Some(item) = queue.get().await {
                    let count = counters.entry(item).or_insert(0);
                    *count += 1;
                    if *count < 2 {
                        queue.add(item);
                    }
                    processed.lock().push(item);
                    queue.done(&item);
                }
            })
        })
        .collect();
    // Let the re-adds happen before shutting down: every item is then
    // processed at least twice (by the same or another worker).
    while processed.lock().len() < 100 {
        tokio::task::yield_now().await;
    }
    if drain {
        within("drain", queue.shut_down_with_drain()).await;
    } else {
        queue.shut_down();
    }
    for c in consumers {
        within("consumer", c).await.unwrap();
    }
    assert_eq!(queue.len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn add_while_processing_with_shut_down() {
    add_while_processing(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn add_while_processing_with_shut_down_with_drain() {
    add_while_processing(true).await;
}

#[test]
fn len_counts_distinct_waiting_items() {
    let queue = WorkQueue::<String>::new();
    queue.add(s("foo"));
    assert_eq!(queue.len(), 1);
    queue.add(s("bar"));
    assert_eq!(queue.len(), 2);
    queue.add(s("foo"));
    assert_eq!(queue.len(), 2);
    assert!(!queue.is_empty());
}

#[test]
fn reinsert_while_processing_requeues_on_done() {
    let queue = WorkQueue::<String>::new();
    queue.add(s("foo"));
    let item = queue.try_get().unwrap();
    assert_eq!(item, "foo");
    queue.add(item.clone());
    assert_eq!(queue.len(), 0, "not queued while being processed");
    assert_eq!(queue.try_get(), None, "never handed to a second worker");
    queue.done(&item);
    assert_eq!(queue.len(), 1);
    let again = queue.try_get().unwrap();
    assert_eq!(again, "foo");
    queue.done(&again);
    assert_eq!(queue.len(), 0);
    assert_eq!(queue.try_get(), None);
}

#[test]
fn repeated_adds_collapse() {
    let queue = WorkQueue::<String>::new();
    queue.add(s("bar"));
    queue.add(s("bar"));
    assert_eq!(queue.try_get().unwrap(), "bar");
    queue.done(&s("bar"));
    assert_eq!(queue.len(), 0);
    assert_eq!(queue.try_get(), None);
}

#[test]
fn repeated_add_keeps_first_position() {
    let queue = WorkQueue::<&str>::new();
    queue.add("a");
    queue.add("b");
    queue.add("a");
    assert_eq!(queue.try_get(), Some("a"));
    assert_eq!(queue.try_get(), Some("b"));
}

#[tokio::test(start_paused = true)]
async fn collapse_while_processing_blocks_get_until_done() {
    let queue = WorkQueue::<String>::new();
    queue.add(s("foo"));
    let item = queue.get().await.unwrap();
    queue.add(s("foo"));
    queue.add(s("foo"));
    let waiter = tokio::spawn({
        let queue = queue.clone();
        async move {
            let item = queue.get().await.unwrap();
            queue.done(&item);
            item
        }
    });
    settle().await;
    assert!(!waiter.is_finished(), "foo must not be handed out twice");
    queue.done(&item);
    assert_eq!(within("second get", waiter).await.unwrap(), "foo");
    assert_eq!(queue.len(), 0);
    assert_eq!(queue.try_get(), None, "the two re-adds collapsed into one");
}

#[tokio::test(start_paused = true)]
async fn shut_down_with_drain_waits_for_in_flight_items() {
    let queue = WorkQueue::<String>::new();
    queue.add(s("foo"));
    queue.add(s("bar"));
    let foo = queue.get().await.unwrap();
    let bar = queue.get().await.unwrap();
    let drain = tokio::spawn({
        let queue = queue.clone();
        async move { queue.shut_down_with_drain().await }
    });
    settle().await;
    assert!(queue.is_shutting_down());
    assert_eq!(queue.get().await, None);
    assert!(!drain.is_finished(), "two items are still in flight");
    queue.done(&foo);
    settle().await;
    assert!(!drain.is_finished(), "one item is still in flight");
    queue.done(&bar);
    within("drain", drain).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn shut_down_does_not_wait_for_in_flight_items() {
    let queue = WorkQueue::<String>::new();
    queue.add(s("foo"));
    queue.add(s("bar"));
    let _foo = queue.get().await.unwrap();
    let _bar = queue.get().await.unwrap();
    queue.shut_down();
    assert!(queue.is_shutting_down());
    assert_eq!(queue.get().await, None);
}

#[tokio::test(start_paused = true)]
async fn shut_down_ends_a_pending_drain() {
    let queue = WorkQueue::<String>::new();
    queue.add(s("foo"));
    queue.add(s("bar"));
    let _foo = queue.get().await.unwrap();
    let _bar = queue.get().await.unwrap();
    let drain = tokio::spawn({
        let queue = queue.clone();
        async move { queue.shut_down_with_drain().await }
    });
    settle().await;
    assert_eq!(queue.get().await, None);
    assert!(!drain.is_finished());
    queue.shut_down();
    within("drain", drain).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn drain_hands_out_an_item_requeued_by_done() {
    let queue = WorkQueue::<String>::new();
    queue.add(s("foo"));
    let item = queue.get().await.unwrap();
    queue.add(s("foo"));
    let drain = tokio::spawn({
        let queue = queue.clone();
        async move { queue.shut_down_with_drain().await }
    });
    settle().await;
    assert!(queue.is_shutting_down());
    queue.done(&item);
    let again = queue.get().await;
    assert_eq!(again.as_deref(), Some("foo"), "re-queued before shutdown");
    settle().await;
    assert!(!drain.is_finished());
    queue.done(&s("foo"));
    assert_eq!(queue.get().await, None);
    within("drain", drain).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn queued_items_are_handed_out_after_shut_down() {
    let queue = WorkQueue::<u32>::new();
    queue.add(1);
    queue.add(2);
    queue.shut_down();
    queue.add(3);
    assert_eq!(queue.len(), 2);
    assert_eq!(queue.get().await, Some(1));
    assert_eq!(queue.get().await, Some(2));
    assert_eq!(queue.get().await, None);
    queue.shut_down(); // idempotent
    assert_eq!(queue.get().await, None);
}

#[tokio::test(start_paused = true)]
async fn shut_down_wakes_parked_gets() {
    let queue = WorkQueue::<u32>::new();
    let parked: Vec<_> = (0..3)
        .map(|_| {
            let queue = queue.clone();
            tokio::spawn(async move { queue.get().await })
        })
        .collect();
    settle().await;
    queue.shut_down();
    for p in parked {
        assert_eq!(within("parked get", p).await.unwrap(), None);
    }
}

#[test]
fn done_on_an_item_not_being_processed_is_ignored() {
    // client-go pushes a second copy here; this queue does not.
    let queue = WorkQueue::<String>::new();
    queue.add(s("foo"));
    queue.done(&s("foo"));
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.try_get().unwrap(), "foo");
    assert_eq!(queue.try_get(), None, "no duplicate copy");
    queue.done(&s("foo"));
    queue.done(&s("foo"));
    queue.done(&s("never added"));
    assert_eq!(queue.len(), 0);
    queue.add(s("foo"));
    assert_eq!(queue.len(), 1);
}

#[test]
fn the_queue_keeps_no_copy_of_finished_items() {
    let queue = WorkQueue::<Arc<str>>::new();
    let item: Arc<str> = Arc::from("foo");
    queue.add(item.clone());
    queue.add_with_priority(item.clone(), 3);
    let got = queue.try_get().unwrap();
    queue.add(item.clone());
    queue.done(&got);
    drop(got);
    let got = queue.try_get().unwrap();
    queue.done(&got);
    drop(got);
    queue.add_after(item.clone(), std::time::Duration::from_secs(1));
    queue.shut_down();
    assert_eq!(
        Arc::strong_count(&item),
        1,
        "every internal copy was dropped"
    );
}

#[tokio::test(start_paused = true)]
async fn parked_gets_are_woken_in_order_one_per_item() {
    let queue = WorkQueue::<u32>::new();
    let order = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..3)
        .map(|w| {
            let queue = queue.clone();
            let order = order.clone();
            tokio::spawn(async move {
                let item = queue.get().await.unwrap();
                order.lock().push((w, item));
            })
        })
        .collect();
    settle().await;
    queue.add(10);
    settle().await;
    assert_eq!(order.lock().len(), 1, "one item wakes one worker");
    queue.add(11);
    queue.add(12);
    for w in workers {
        within("worker", w).await.unwrap();
    }
    let mut got: Vec<u32> = order.lock().iter().map(|(_, i)| *i).collect();
    got.sort_unstable();
    assert_eq!(got, vec![10, 11, 12]);
    assert_eq!(order.lock()[0].0, 0, "the longest-parked worker goes first");
}

/// Parked gets are woken one after the other (each woken get that takes an
/// item wakes the next while items remain), so a burst added at once still
/// reaches every parked get.
#[tokio::test(start_paused = true)]
async fn a_burst_reaches_every_parked_get() {
    let queue = WorkQueue::<u32>::new();
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let queue = queue.clone();
            tokio::spawn(async move { queue.get().await.unwrap() })
        })
        .collect();
    settle().await;
    for i in 0..8 {
        queue.add(i);
    }
    let mut got = Vec::new();
    for w in workers {
        got.push(within("worker", w).await.unwrap());
    }
    got.sort_unstable();
    assert_eq!(got, (0..8).collect::<Vec<_>>());
    assert!(queue.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_get_loses_no_item() {
    let queue = WorkQueue::<u32>::new();
    // A get that loses a select must not take the item with it.
    tokio::select! {
        biased;
        _ = queue.get() => panic!("nothing is queued"),
        _ = tokio::task::yield_now() => {}
    }
    queue.add(1);
    assert_eq!(queue.len(), 1);

    // A get chosen to take an item but dropped before it ran passes the
    // wake-up on to another parked get.
    let q2 = queue.clone();
    assert_eq!(q2.try_get(), Some(1));
    let mut first = Box::pin(queue.get());
    assert!(futures::poll!(first.as_mut()).is_pending());
    let second = tokio::spawn({
        let queue = queue.clone();
        async move { queue.get().await }
    });
    settle().await;
    queue.add(2); // chooses `first`, the longest parked
    drop(first);
    assert_eq!(within("second get", second).await.unwrap(), Some(2));
}

#[tokio::test(start_paused = true)]
async fn stream_yields_items_and_ends_after_shutdown() {
    let queue = WorkQueue::<u32>::new();
    queue.add(1);
    queue.add(2);
    let mut stream = queue.stream();
    assert_eq!(stream.next().await, Some(1));
    queue.done(&1);
    assert_eq!(stream.next().await, Some(2));
    queue.add(1);
    queue.shut_down();
    assert_eq!(stream.next().await, Some(1));
    assert_eq!(stream.next().await, None);
    assert_eq!(stream.next().await, None, "fused");
    stream.queue().done(&2);
}

#[tokio::test(start_paused = true)]
async fn stream_feeds_a_concurrent_consumer() {
    let queue = WorkQueue::<u32>::new();
    for i in 0..20 {
        queue.add(i);
    }
    let consumer = tokio::spawn({
        let queue = queue.clone();
        async move {
            queue
                .stream()
                .map(|item| {
                    queue.done(&item);
                    item
                })
                .collect::<Vec<_>>()
                .await
        }
    });
    settle().await;
    queue.shut_down();
    let items = within("stream", consumer).await.unwrap();
    assert_eq!(items, (0..20).collect::<Vec<_>>());
}

#[test]
fn default_and_builder_give_working_queues() {
    let queue: WorkQueue<u8> = WorkQueue::default();
    queue.add(1);
    assert_eq!(queue.try_get(), Some(1));
    let queue = WorkQueue::<u8>::builder().name("named").build();
    queue.add(2);
    assert_eq!(queue.try_get(), Some(2));
    assert!(format!("{queue:?}").contains("processing: 1"));
}
