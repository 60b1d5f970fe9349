//! Many producers and workers on a multi-thread runtime: an item is never
//! held by two workers at once, and every add is followed by a `get` of
//! that item (nothing is lost).
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::within;
use ctrlkit_workqueue::WorkQueue;

const KEYS: usize = 64;

struct Board {
    /// Bumped by a producer right before it adds the key.
    version: Vec<AtomicU64>,
    /// Highest version a worker read after getting the key.
    seen: Vec<AtomicU64>,
    /// Set while a worker holds the key.
    held: Vec<AtomicBool>,
}

async fn run(priorities: bool, delays: bool) {
    let queue = WorkQueue::<usize>::new();
    let board = Arc::new(Board {
        version: (0..KEYS).map(|_| AtomicU64::new(0)).collect(),
        seen: (0..KEYS).map(|_| AtomicU64::new(0)).collect(),
        held: (0..KEYS).map(|_| AtomicBool::new(false)).collect(),
    });
    let workers: Vec<_> = (0..6)
        .map(|_| {
            let queue = queue.clone();
            let board = board.clone();
            tokio::spawn(async move {
                while let Some(key) = queue.get().await {
                    assert!(
                        !board.held[key].swap(true, Ordering::SeqCst),
                        "key {key} handed to two workers"
                    );
                    let v = board.version[key].load(Ordering::SeqCst);
                    board.seen[key].fetch_max(v, Ordering::SeqCst);
                    if key % 3 == 0 {
                        tokio::task::yield_now().await;
                    }
                    board.held[key].store(false, Ordering::SeqCst);
                    queue.done(&key);
                }
            })
        })
        .collect();
    let producers: Vec<_> = (0..8u64)
        .map(|p| {
            let queue = queue.clone();
            let board = board.clone();
            tokio::spawn(async move {
                let mut x = p * 7 + 1;
                for i in 0..5_000u64 {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let key = (x >> 33) as usize % KEYS;
                    board.version[key].fetch_add(1, Ordering::SeqCst);
                    match (priorities, delays, i % 4) {
                        (true, _, 1) => queue.add_with_priority(key, (x % 5) as i32 - 2),
                        (_, true, 2) => queue.add_after(key, Duration::from_micros(x % 500)),
                        _ => queue.add(key),
                    }
                    if i % 64 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    for p in producers {
        within("producer", p).await.unwrap();
    }
    // Delayed adds still pending at shutdown would be dropped (by design):
    // wait until every key's last add was seen before shutting down.
    within("last adds processed", async {
        while (0..KEYS)
            .any(|k| board.seen[k].load(Ordering::SeqCst) < board.version[k].load(Ordering::SeqCst))
        {
            tokio::task::yield_now().await;
        }
    })
    .await;
    within("drain", queue.shut_down_with_drain()).await;
    for w in workers {
        within("worker", w).await.unwrap();
    }
    for key in 0..KEYS {
        let added = board.version[key].load(Ordering::SeqCst);
        let seen = board.seen[key].load(Ordering::SeqCst);
        assert_eq!(seen, added, "key {key}: its last add was never processed");
    }
    assert_eq!(queue.len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn plain_adds() {
    run(false, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_priorities() {
    run(true, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_delays() {
    run(false, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancelled_gets_lose_nothing() {
    // Workers that give up waiting (as in a select with a timeout) must not
    // strand items.
    let queue = WorkQueue::<u32>::new();
    let done = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let queue = queue.clone();
            let done = done.clone();
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        item = queue.get() => match item {
                            Some(item) => {
                                queue.done(&item);
                                done.fetch_add(1, Ordering::SeqCst);
                            }
                            None => return,
                        },
                        () = tokio::task::yield_now() => {}
                    }
                }
            })
        })
        .collect();
    for i in 0..2_000 {
        queue.add(i);
        if i % 16 == 0 {
            tokio::task::yield_now().await;
        }
    }
    within("all processed", async {
        while done.load(Ordering::SeqCst) < 2_000 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    queue.shut_down();
    for w in workers {
        within("worker", w).await.unwrap();
    }
}
