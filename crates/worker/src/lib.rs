//! The worker harness of a Kubernetes controller: N workers that take keys
//! from a [`ctrlkit_workqueue::WorkQueue`] and run the controller's sync
//! function on each, with retries, panic containment, timeouts, a graceful
//! drain and controller-runtime's metrics.
//!
//! # What a worker harness is, and why
//!
//! A controller's event handlers only put **keys** (such as
//! `namespace/name`) into a work queue. The actual work, "make the object
//! behind this key match its spec", happens in a **sync** function
//! (client-go's `syncHandler`, controller-runtime's `Reconcile`), run by a
//! few **workers**. Every controller needs the same loop around that
//! function, and getting it subtly wrong is easy:
//!
//! ```text
//! loop {
//!     key = queue.get()            // wait for work; stop when shut down
//!     match sync(key) {
//!         Ok        => queue.forget(key)            // reset the backoff
//!         Err       => queue.add_rate_limited(key)  // retry, later and later
//!     }
//!     queue.done(key)              // always: release the key
//! }
//! ```
//!
//! [`Workers`] is that loop, written once:
//!
//! - **One sync per key at a time.** The queue never hands a key to two
//!   workers at once, so `sync` never runs twice concurrently for the same
//!   object, while different keys are synced in parallel, up to the
//!   configured [`concurrency`](Workers::concurrency). A key that changes
//!   during its sync is synced again right after.
//! - **Errors are retried with backoff.** A failed sync puts its key back
//!   after the queue's rate limiter's delay (by default 5 ms doubling per
//!   consecutive failure up to 1000 s, within 10 retries per second
//!   overall); a success resets it. Errors that retrying cannot fix can be
//!   marked [terminal](SyncError::is_terminal), and a
//!   [retry limit](Workers::max_retries) can drop keys that keep failing.
//! - **Panics are contained.** A panicking sync is logged with its message
//!   and retried like an error; the worker, the other keys and the
//!   controller carry on.
//! - **Hangs are bounded** by an optional per-sync
//!   [`timeout`](Workers::timeout).
//! - **Shutdown is graceful.** When the shutdown future passed to
//!   [`run`](Workers::run) completes, workers stop taking keys, the queue is
//!   shut down, syncs in flight finish (within an optional
//!   [grace period](Workers::grace_period)), and `run` returns.
//! - **Observable.** Every sync runs in a `sync` tracing span with the
//!   controller's name and the key; its outcome is logged (errors at error
//!   level, successes at debug level with the duration). Metrics under
//!   controller-runtime's names (`controller_runtime_reconcile_total`, …)
//!   go through a [`MetricsProvider`]; the `prometheus` feature provides one
//!   for `prometheus-client`.
//!
//! A sync reports success with an [`Action`]: [`Action::done`], or
//! [`Action::requeue_after`] to look at the key again after a delay (e.g.
//! when a pod becomes available after `minReadySeconds`).
//!
//! # Example
//!
//! A sync closure that counts its calls and fails the first time it sees
//! one key; the harness retries that key, and stops when told to.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
//! use std::time::Duration;
//!
//! use ctrlkit_worker::{Action, Stopped, Workers};
//! use ctrlkit_workqueue::WorkQueue;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let queue = WorkQueue::<String>::new();
//! let calls = Arc::new(AtomicUsize::new(0));
//! let failed_once = Arc::new(AtomicBool::new(false));
//!
//! let sync = {
//!     let calls = Arc::clone(&calls);
//!     move |key: String| {
//!         let calls = Arc::clone(&calls);
//!         let failed_once = Arc::clone(&failed_once);
//!         async move {
//!             calls.fetch_add(1, Ordering::SeqCst);
//!             // Stands in for a conflict on the first update of this object.
//!             if key == "default/flaky" && !failed_once.swap(true, Ordering::SeqCst) {
//!                 return Err(format!("conflict updating {key}"));
//!             }
//!             Ok(Action::done())
//!         }
//!     }
//! };
//!
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! let workers = Workers::new(queue.clone(), sync)
//!     .name("example")
//!     .concurrency(2)
//!     .display_keys()
//!     .grace_period(Duration::from_secs(30));
//! let run = tokio::spawn(workers.run(async {
//!     let _ = stopped.await;
//! }));
//!
//! // Event handlers add keys; the workers pick them up.
//! queue.add("default/web".to_string());
//! queue.add("default/flaky".to_string());
//!
//! // (Paused time: this only lets the workers and the 5 ms retry run.)
//! tokio::time::sleep(Duration::from_secs(1)).await;
//! assert_eq!(calls.load(Ordering::SeqCst), 3, "web once, flaky twice");
//! assert_eq!(queue.num_requeues(&"default/flaky".to_string()), 0, "backoff reset");
//!
//! // Graceful shutdown: in-flight syncs finish, then `run` returns.
//! stop.send(()).unwrap();
//! assert_eq!(run.await.unwrap(), Stopped::Drained);
//! assert!(queue.is_shutting_down());
//! # }
//! ```
//!
//! # Differences from the Go anchors
//!
//! - One harness for what client-go controllers write by hand
//!   (`processNextWorkItem` in `wait.UntilWithContext`) and what
//!   controller-runtime's reconcile handler does; it needs no Kubernetes
//!   types, any queue key works.
//! - Panic recovery is always on (controller-runtime's `RecoverPanic`
//!   default since v0.19).
//! - A terminal error resets the key's backoff (controller-runtime leaves
//!   it); either way the key is not retried.
//! - The [`Action::requeue`] result (controller-runtime's deprecated
//!   `Requeue: true`) is kept for the `requeue` metric label.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod action;
mod error;
mod handler;
mod key;
pub mod metrics;
#[cfg(feature = "prometheus")]
#[cfg_attr(docsrs, doc(cfg(feature = "prometheus")))]
mod prometheus;
mod worker;
mod workers;

pub use action::Action;
pub use error::{Failure, SyncError};
pub use handler::SyncHandler;
pub use metrics::{MetricsProvider, ReconcileResult};
#[cfg(feature = "prometheus")]
pub use prometheus::PrometheusMetricsProvider;
pub use workers::{Stopped, Workers};

/// Compiles and runs the README's example as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
