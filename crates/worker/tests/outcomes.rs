//! What the workers do with each outcome of a sync.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{BASE_DELAY, Calls, let_it_run, queue, start};
use ctrlkit_worker::{Action, Failure, Stopped, SyncHandler, Workers};
use ctrlkit_workqueue::WorkQueue;

fn key(k: &str) -> String {
    k.to_string()
}

#[tokio::test(start_paused = true)]
async fn errors_are_retried_with_growing_backoff_and_success_forgets() {
    let queue = queue();
    let calls = Calls::default();
    let sync = {
        let (queue, calls) = (queue.clone(), calls.clone());
        move |key: String| {
            let attempt = calls.record(&queue, &key);
            async move {
                if attempt < 3 {
                    Err(format!("attempt {attempt} failed"))
                } else {
                    Ok(Action::done())
                }
            }
        }
    };
    let running = start(Workers::new(queue.clone(), sync));
    queue.add(key("default/web"));
    let_it_run().await;

    let seen = calls.of("default/web");
    assert_eq!(seen.len(), 4, "three failures, then a success");
    // Each failure was counted by the limiter before the retry...
    let requeues: Vec<_> = seen.iter().map(|c| c.requeues).collect();
    assert_eq!(requeues, [0, 1, 2, 3]);
    // ...and the key came back only after the limiter's delay: 10, 20, 40 ms.
    for (i, pair) in seen.windows(2).enumerate() {
        let waited = pair[1].at - pair[0].at;
        assert!(
            waited >= BASE_DELAY * 2u32.pow(i as u32),
            "retry {i} after {waited:?}"
        );
    }
    // The success reset the backoff and nothing is left queued.
    assert_eq!(queue.num_requeues(&key("default/web")), 0);
    assert!(queue.is_empty());
    assert_eq!(running.stop().await, Stopped::Drained);
}

#[tokio::test(start_paused = true)]
async fn requeue_after_forgets_and_syncs_again_after_the_delay() {
    let queue = queue();
    let calls = Calls::default();
    let delay = Duration::from_secs(5);
    let sync = {
        let (queue, calls) = (queue.clone(), calls.clone());
        move |key: String| {
            let attempt = calls.record(&queue, &key);
            async move {
                match attempt {
                    0 => Err("transient".to_string()),
                    1 => Ok(Action::requeue_after(delay)),
                    _ => Ok(Action::done()),
                }
            }
        }
    };
    let running = start(Workers::new(queue.clone(), sync));
    queue.add(key("default/rs"));
    let_it_run().await;

    let seen = calls.of("default/rs");
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[1].requeues, 1, "the error was counted");
    assert_eq!(seen[2].requeues, 0, "requeue_after forgot the backoff");
    assert!(seen[2].at - seen[1].at >= delay);
    assert!(queue.is_empty());
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn requeue_keeps_the_backoff_growing() {
    let queue = queue();
    let calls = Calls::default();
    let sync = {
        let (queue, calls) = (queue.clone(), calls.clone());
        move |key: String| {
            let attempt = calls.record(&queue, &key);
            async move {
                Ok::<_, String>(if attempt < 2 {
                    Action::requeue()
                } else {
                    Action::done()
                })
            }
        }
    };
    let running = start(Workers::new(queue.clone(), sync));
    queue.add(key("a"));
    let_it_run().await;

    let requeues: Vec<_> = calls.of("a").iter().map(|c| c.requeues).collect();
    assert_eq!(requeues, [0, 1, 2]);
    assert_eq!(queue.num_requeues(&key("a")), 0);
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn terminal_errors_are_not_retried_and_forget_the_backoff() {
    let queue = queue();
    let calls = Calls::default();
    let sync = {
        let (queue, calls) = (queue.clone(), calls.clone());
        move |key: String| {
            let attempt = calls.record(&queue, &key);
            async move {
                if attempt == 0 {
                    Err(Failure::Retry("conflict"))
                } else {
                    Err(Failure::Terminal("invalid selector"))
                }
            }
        }
    };
    let running = start(Workers::new(queue.clone(), sync));
    queue.add(key("default/bad"));
    let_it_run().await;

    assert_eq!(calls.count("default/bad"), 2, "one retry, then given up");
    assert_eq!(queue.num_requeues(&key("default/bad")), 0);
    assert!(queue.is_empty());

    // It is synced again when something adds it.
    queue.add(key("default/bad"));
    let_it_run().await;
    assert_eq!(calls.count("default/bad"), 3);
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_panicking_sync_is_retried_and_the_worker_keeps_going() {
    let queue = queue();
    let calls = Calls::default();
    let sync = {
        let (queue, calls) = (queue.clone(), calls.clone());
        move |key: String| {
            let attempt = calls.record(&queue, &key);
            async move {
                tokio::task::yield_now().await;
                if key == "default/bad" && attempt < 2 {
                    panic!("index out of bounds in {key}");
                }
                Ok::<_, String>(Action::done())
            }
        }
    };
    // One worker: if the panic killed it, nothing else would be synced.
    let running = start(Workers::new(queue.clone(), sync).concurrency(1));
    queue.add(key("default/bad"));
    queue.add(key("default/good-1"));
    let_it_run().await;
    queue.add(key("default/good-2"));
    let_it_run().await;

    let bad = calls.of("default/bad");
    assert_eq!(bad.len(), 3, "two panics, then a success");
    assert_eq!(bad[1].requeues, 1, "a panic counts as a failure");
    assert_eq!(bad[2].requeues, 2);
    assert_eq!(calls.count("default/good-1"), 1);
    assert_eq!(calls.count("default/good-2"), 1);
    assert_eq!(queue.num_requeues(&key("default/bad")), 0);
    assert_eq!(running.stop().await, Stopped::Drained);
}

#[tokio::test(start_paused = true)]
async fn a_panic_before_the_first_await_is_caught_too() {
    let queue = queue();
    let calls = Calls::default();
    let sync = {
        let (queue, calls) = (queue.clone(), calls.clone());
        move |key: String| {
            // The closure's synchronous part panics, before any future exists.
            if calls.record(&queue, &key) == 0 {
                panic!("panic while building the future");
            }
            async { Ok::<_, String>(Action::done()) }
        }
    };
    let running = start(Workers::new(queue.clone(), sync));
    queue.add(key("k"));
    let_it_run().await;
    assert_eq!(calls.count("k"), 2);
    assert_eq!(running.stop().await, Stopped::Drained);
}

#[tokio::test(start_paused = true)]
async fn a_sync_that_times_out_is_cancelled_and_retried() {
    let queue = queue();
    let calls = Calls::default();
    let first_dropped = Arc::new(AtomicBool::new(false));
    let sync = {
        let (queue, calls, first_dropped) = (queue.clone(), calls.clone(), first_dropped.clone());
        move |key: String| {
            let attempt = calls.record(&queue, &key);
            let first_dropped = first_dropped.clone();
            async move {
                if attempt == 0 {
                    let _flag = SetOnDrop(first_dropped);
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                }
                Ok::<_, String>(Action::done())
            }
        }
    };
    let running = start(Workers::new(queue.clone(), sync).timeout(Duration::from_secs(1)));
    queue.add(key("slow"));
    let_it_run().await;

    let seen = calls.of("slow");
    assert_eq!(seen.len(), 2);
    assert!(
        first_dropped.load(Ordering::SeqCst),
        "the timed-out sync was cancelled"
    );
    assert_eq!(seen[1].requeues, 1, "the timeout counted as a failure");
    assert!(seen[1].at - seen[0].at >= Duration::from_secs(1));
    assert_eq!(queue.num_requeues(&key("slow")), 0);
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn max_retries_drops_a_key_that_keeps_failing() {
    let queue = queue();
    let calls = Calls::default();
    let sync = {
        let (queue, calls) = (queue.clone(), calls.clone());
        move |key: String| {
            calls.record(&queue, &key);
            async { Err::<Action, _>("always fails") }
        }
    };
    let running = start(Workers::new(queue.clone(), sync).max_retries(2));
    queue.add(key("doomed"));
    let_it_run().await;

    assert_eq!(calls.count("doomed"), 3, "the first try and two retries");
    assert_eq!(queue.num_requeues(&key("doomed")), 0, "forgotten");
    assert!(queue.is_empty());

    // Added again later, it gets a fresh budget.
    queue.add(key("doomed"));
    let_it_run().await;
    assert_eq!(calls.count("doomed"), 6);
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn zero_max_retries_never_retries() {
    let queue = queue();
    let calls = Calls::default();
    let sync = {
        let (queue, calls) = (queue.clone(), calls.clone());
        move |key: String| {
            calls.record(&queue, &key);
            async { Err::<Action, _>("fails") }
        }
    };
    let running = start(Workers::new(queue.clone(), sync).max_retries(0));
    queue.add(key("once"));
    let_it_run().await;
    assert_eq!(calls.count("once"), 1);
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_key_added_during_its_sync_is_synced_again_afterwards() {
    let queue = queue();
    let calls = Calls::default();
    let sync = {
        let (queue, calls) = (queue.clone(), calls.clone());
        move |key: String| {
            let attempt = calls.record(&queue, &key);
            let queue = queue.clone();
            async move {
                if attempt == 0 {
                    // An event arrives while the key is being synced.
                    queue.add(key);
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Ok::<_, String>(Action::done())
            }
        }
    };
    let running = start(Workers::new(queue.clone(), sync).concurrency(3));
    queue.add(key("k"));
    let_it_run().await;
    let seen = calls.of("k");
    assert_eq!(seen.len(), 2);
    assert!(
        seen[1].at - seen[0].at >= Duration::from_secs(1),
        "not concurrently"
    );
    running.stop().await;
}

/// A controller type implementing the trait with an `async fn`.
struct Controller {
    queue: WorkQueue<String>,
    calls: Calls,
}

#[derive(Debug)]
enum ControllerError {
    NotFound,
    Invalid,
}

impl std::fmt::Display for ControllerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

impl ctrlkit_worker::SyncError for ControllerError {
    fn is_terminal(&self) -> bool {
        matches!(self, Self::Invalid)
    }
}

impl SyncHandler<String> for Controller {
    type Error = ControllerError;

    async fn sync(&self, key: String) -> Result<Action, ControllerError> {
        let attempt = self.calls.record(&self.queue, &key);
        tokio::task::yield_now().await;
        match (key.as_str(), attempt) {
            ("missing", 0) => Err(ControllerError::NotFound),
            ("invalid", _) => Err(ControllerError::Invalid),
            _ => Ok(Action::done()),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_controller_type_can_implement_the_handler_trait() {
    let queue = queue();
    let calls = Calls::default();
    let controller = Controller {
        queue: queue.clone(),
        calls: calls.clone(),
    };
    let running = start(Workers::new(queue.clone(), controller).display_keys());
    queue.add(key("missing"));
    queue.add(key("invalid"));
    let_it_run().await;
    assert_eq!(calls.count("missing"), 2, "a retryable error, then success");
    assert_eq!(calls.count("invalid"), 1, "terminal");
    running.stop().await;
}

struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}
