//! Graceful shutdown, grace periods, external queue shutdown, cancel safety.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{Calls, let_it_run, queue, start};
use ctrlkit_worker::{Action, Stopped, Workers};
use tokio::sync::{Semaphore, mpsc};

fn key(k: &str) -> String {
    k.to_string()
}

/// A sync that reports its start on `started` and then waits for a permit.
fn gated_sync(
    calls: Calls,
    queue: ctrlkit_workqueue::WorkQueue<String>,
    started: mpsc::UnboundedSender<String>,
    gate: Arc<Semaphore>,
    finished: Arc<AtomicUsize>,
) -> impl Fn(String) -> futures::future::BoxFuture<'static, Result<Action, String>> + Send + Sync + 'static
{
    move |key: String| {
        calls.record(&queue, &key);
        let (started, gate, finished) = (started.clone(), gate.clone(), finished.clone());
        Box::pin(async move {
            started.send(key).unwrap();
            gate.acquire().await.unwrap().forget();
            finished.fetch_add(1, Ordering::SeqCst);
            Ok(Action::done())
        })
    }
}

#[tokio::test(start_paused = true)]
async fn shutdown_waits_for_syncs_in_flight_and_starts_no_new_ones() {
    let queue = queue();
    let calls = Calls::default();
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let gate = Arc::new(Semaphore::new(0));
    let finished = Arc::new(AtomicUsize::new(0));
    let sync = gated_sync(
        calls.clone(),
        queue.clone(),
        started_tx,
        gate.clone(),
        finished.clone(),
    );
    let running = start(Workers::new(queue.clone(), sync).concurrency(2));
    for k in ["a", "b", "c", "d"] {
        queue.add(key(k));
    }
    let first = started.recv().await.unwrap();
    let second = started.recv().await.unwrap();
    assert_eq!((first.as_str(), second.as_str()), ("a", "b"));

    let run = running.request_stop_now();
    // However long the syncs take, `run` waits for them...
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert!(!run.is_finished());
    assert!(
        queue.is_shutting_down(),
        "the queue stops accepting adds at once"
    );
    queue.add(key("e"));

    // ...and returns once they finish, without starting the queued keys.
    gate.add_permits(10);
    assert_eq!(run.await.unwrap(), Stopped::Drained);
    assert_eq!(finished.load(Ordering::SeqCst), 2);
    assert_eq!(calls.total(), 2);
    assert!(started.try_recv().is_err());
}

#[tokio::test(start_paused = true)]
async fn the_grace_period_bounds_the_wait_and_cancels_the_rest() {
    let queue = queue();
    let calls = Calls::default();
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let gate = Arc::new(Semaphore::new(0));
    let finished = Arc::new(AtomicUsize::new(0));
    let sync = gated_sync(
        calls.clone(),
        queue.clone(),
        started_tx,
        gate.clone(),
        finished.clone(),
    );
    let running = start(
        Workers::new(queue.clone(), sync)
            .concurrency(3)
            .grace_period(Duration::from_secs(30)),
    );
    queue.add(key("a"));
    queue.add(key("b"));
    started.recv().await.unwrap();
    started.recv().await.unwrap();

    // Never released: the grace period ends the wait.
    let stopped = running.stop().await;
    assert_eq!(stopped, Stopped::GracePeriodElapsed { cancelled: 2 });
    assert_eq!(finished.load(Ordering::SeqCst), 0);
    // The gate's waiters were dropped with the cancelled syncs.
    assert_eq!(Arc::strong_count(&gate), 1);
}

#[tokio::test(start_paused = true)]
async fn a_grace_period_that_is_long_enough_drains() {
    let queue = queue();
    let sync = |_key: String| async {
        tokio::time::sleep(Duration::from_secs(5)).await;
        Ok::<_, String>(Action::done())
    };
    let running = start(Workers::new(queue.clone(), sync).grace_period(Duration::from_secs(30)));
    queue.add(key("a"));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(running.stop().await, Stopped::Drained);
}

#[tokio::test(start_paused = true)]
async fn an_external_queue_shutdown_processes_the_rest_and_ends_run() {
    let queue = queue();
    let calls = Calls::default();
    let sync = {
        let (queue, calls) = (queue.clone(), calls.clone());
        move |key: String| {
            calls.record(&queue, &key);
            async { Ok::<_, String>(Action::done()) }
        }
    };
    let workers = Workers::new(queue.clone(), sync).concurrency(2);
    for k in ["a", "b", "c"] {
        queue.add(key(k));
    }
    queue.shut_down();
    let stopped = workers.run(std::future::pending::<()>()).await;
    assert_eq!(stopped, Stopped::QueueShutDown);
    assert_eq!(
        calls.total(),
        3,
        "keys queued before shutdown are still synced"
    );
}

#[tokio::test(start_paused = true)]
async fn dropping_run_puts_the_keys_in_flight_back() {
    let queue = queue();
    let calls = Calls::default();
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let gate = Arc::new(Semaphore::new(0));
    let finished = Arc::new(AtomicUsize::new(0));
    let sync = gated_sync(
        calls.clone(),
        queue.clone(),
        started_tx.clone(),
        gate.clone(),
        finished.clone(),
    );
    let running = start(Workers::new(queue.clone(), sync).concurrency(2));
    queue.add(key("a"));
    queue.add(key("b"));
    started.recv().await.unwrap();
    started.recv().await.unwrap();

    running.handle.abort();
    let _ = running.handle.await;
    let_it_run().await;
    assert!(
        !queue.is_shutting_down(),
        "dropping run leaves the queue open"
    );
    assert_eq!(queue.len(), 2, "both interrupted keys are queued again");

    // A new run picks them up.
    gate.add_permits(10);
    let sync = gated_sync(
        calls.clone(),
        queue.clone(),
        started_tx,
        gate,
        finished.clone(),
    );
    let running = start(Workers::new(queue.clone(), sync).concurrency(2));
    let_it_run().await;
    assert_eq!(finished.load(Ordering::SeqCst), 2);
    assert_eq!(calls.count("a"), 2);
    assert_eq!(calls.count("b"), 2);
    assert_eq!(running.stop().await, Stopped::Drained);
}
