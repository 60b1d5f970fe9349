//! N workers: one sync per key at a time, different keys in parallel.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{let_it_run, queue, start};
use ctrlkit_worker::{Action, Stopped, Workers};
use ctrlkit_workqueue::WorkQueue;

/// Tracks the keys being synced; any key entered twice is a violation.
#[derive(Clone, Default)]
struct InFlight {
    keys: Arc<Mutex<HashSet<String>>>,
    peak: Arc<AtomicUsize>,
    violations: Arc<Mutex<Vec<String>>>,
    syncs: Arc<AtomicUsize>,
}

impl InFlight {
    fn enter(&self, key: &str) {
        let mut keys = self.keys.lock().unwrap();
        if !keys.insert(key.to_string()) {
            self.violations.lock().unwrap().push(key.to_string());
        }
        self.peak.fetch_max(keys.len(), Ordering::SeqCst);
        self.syncs.fetch_add(1, Ordering::SeqCst);
    }

    fn leave(&self, key: &str) {
        self.keys.lock().unwrap().remove(key);
    }
}

/// A sync that holds the key for a while and re-adds it now and then, so
/// keys are often added while they are being synced.
fn tracking_sync(
    queue: WorkQueue<String>,
    in_flight: InFlight,
    hold: impl Fn() -> Duration + Send + Sync + 'static,
) -> impl Fn(String) -> futures::future::BoxFuture<'static, Result<Action, String>> + Send + Sync + 'static
{
    let hold = Arc::new(hold);
    move |key: String| {
        let (queue, in_flight, hold) = (queue.clone(), in_flight.clone(), hold.clone());
        Box::pin(async move {
            in_flight.enter(&key);
            let n = in_flight.syncs.load(Ordering::SeqCst);
            if n % 3 == 0 {
                queue.add(key.clone());
            }
            let pause = hold();
            if pause.is_zero() {
                for _ in 0..3 {
                    tokio::task::yield_now().await;
                }
            } else {
                tokio::time::sleep(pause).await;
            }
            in_flight.leave(&key);
            if n % 7 == 0 {
                Err("every seventh sync fails".to_string())
            } else {
                Ok(Action::done())
            }
        })
    }
}

#[tokio::test(start_paused = true)]
async fn no_key_is_synced_twice_at_once_and_up_to_n_keys_run_together() {
    const WORKERS: usize = 4;
    let queue = queue();
    let in_flight = InFlight::default();
    let sync = tracking_sync(queue.clone(), in_flight.clone(), || {
        Duration::from_millis(50)
    });
    let running = start(Workers::new(queue.clone(), sync).concurrency(WORKERS));
    for round in 0..5 {
        for k in 0..10 {
            queue.add(format!("key-{k}"));
        }
        tokio::time::sleep(Duration::from_millis(20 * round)).await;
    }
    let_it_run().await;

    assert!(in_flight.violations.lock().unwrap().is_empty());
    assert_eq!(
        in_flight.peak.load(Ordering::SeqCst),
        WORKERS,
        "10 distinct keys kept all workers busy, and never more"
    );
    assert!(in_flight.keys.lock().unwrap().is_empty());
    assert!(queue.is_empty());
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exclusivity_holds_on_a_multi_threaded_runtime() {
    const WORKERS: usize = 8;
    let queue = queue();
    let in_flight = InFlight::default();
    let sync = tracking_sync(queue.clone(), in_flight.clone(), || Duration::ZERO);
    let running = start(Workers::new(queue.clone(), sync).concurrency(WORKERS));
    let producers: Vec<_> = (0..4)
        .map(|p| {
            let queue = queue.clone();
            tokio::spawn(async move {
                for i in 0..500 {
                    queue.add(format!("key-{}", (i * 7 + p) % 16));
                    if i % 10 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    for producer in producers {
        producer.await.unwrap();
    }
    // The workers sync every key still queued, then `run` returns.
    queue.shut_down();
    let stopped = tokio::time::timeout(Duration::from_secs(120), running.handle)
        .await
        .expect("deadlock guard: the workers drained the queue")
        .unwrap();
    assert_eq!(stopped, Stopped::QueueShutDown);

    assert!(in_flight.violations.lock().unwrap().is_empty());
    assert!(in_flight.peak.load(Ordering::SeqCst) <= WORKERS);
    assert!(
        in_flight.syncs.load(Ordering::SeqCst) >= 16,
        "every key synced"
    );
}
