//! A work queue for Kubernetes controllers: deduplicating, delaying,
//! rate-limited and prioritised, with the semantics of client-go's
//! `util/workqueue` (the queue every controller in kube-controller-manager
//! uses).
//!
//! # Why a controller needs this queue
//!
//! A controller watches objects and, whenever something changes, must make
//! the world match the object's spec. Event handlers should not do that work
//! themselves: events arrive in bursts, the same object changes many times in
//! a row, and a sync that fails must be retried later without blocking
//! everything else. So handlers only compute a **key** (typically
//! `namespace/name`) and [`add`](WorkQueue::add) it to a queue; a few
//! **workers** take keys with [`get`](WorkQueue::get), read the current state
//! of that object from a cache, act, and report [`done`](WorkQueue::done).
//!
//! The queue makes that safe and cheap:
//!
//! - **Deduplication.** A key added ten times before a worker gets to it is
//!   processed once: the worker reads the latest state anyway.
//! - **One worker per key.** A key handed to a worker is not handed to
//!   another until `done`, so two workers never sync the same object at once.
//!   If the key is added while it is processed, it is queued again on `done`,
//!   so the latest change is never missed.
//! - **Fairness.** Keys are handed out in the order they were first added;
//!   with [`add_with_priority`](WorkQueue::add_with_priority), higher
//!   priorities go first (as controller-runtime's priority queue: e.g. put
//!   the initial list of objects at a low priority so live changes overtake
//!   it).
//! - **Delays.** [`add_after`](WorkQueue::add_after) queues a key later (for
//!   a periodic re-check, or when something becomes ready at a known time).
//! - **Retries with backoff.** When a sync fails,
//!   [`add_rate_limited`](WorkQueue::add_rate_limited) queues the key after a
//!   delay chosen by a [`RateLimiter`], by default
//!   per-key exponential backoff (5 ms doubling to 1000 s) combined with an
//!   overall budget of 10 retries per second. When it succeeds,
//!   [`forget`](WorkQueue::forget) resets the key's backoff.
//! - **Graceful shutdown.** [`shut_down`](WorkQueue::shut_down) stops new
//!   adds; workers finish the queued keys and then `get` returns `None`.
//!   [`shut_down_with_drain`](WorkQueue::shut_down_with_drain) also waits for
//!   the keys in flight.
//! - **Metrics** under client-go's names (`workqueue_depth`,
//!   `workqueue_adds_total`, …) through a [`MetricsProvider`]; the
//!   `prometheus` feature provides one for `prometheus-client`.
//!
//! # A worker loop
//!
//! ```
//! use std::time::Duration;
//! use ctrlkit_workqueue::WorkQueue;
//!
//! // Stands in for reading the object from a cache and acting on it.
//! async fn sync(key: &str, attempt: u32) -> Result<(), String> {
//!     if key == "default/flaky" && attempt < 2 {
//!         return Err("conflict".into());
//!     }
//!     Ok(())
//! }
//!
//! async fn worker(queue: WorkQueue<String>) {
//!     // `get` returns `None` once the queue is shut down and empty.
//!     while let Some(key) = queue.get().await {
//!         match sync(&key, queue.num_requeues(&key)).await {
//!             // Success: reset the key's backoff.
//!             Ok(()) => queue.forget(&key),
//!             // Failure: retry later, with a growing delay.
//!             Err(_) => queue.add_rate_limited(key.clone()),
//!         }
//!         // Always: release the key so it can be handed out again.
//!         queue.done(&key);
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let queue = WorkQueue::<String>::new();
//! let workers: Vec<_> = (0..2).map(|_| tokio::spawn(worker(queue.clone()))).collect();
//!
//! // Event handlers add keys; repeated adds collapse into one sync.
//! queue.add("default/web".to_string());
//! queue.add("default/web".to_string());
//! queue.add("default/flaky".to_string());
//! queue.add_after("default/cron".to_string(), Duration::from_secs(30));
//!
//! tokio::time::sleep(Duration::from_secs(60)).await;
//! assert!(queue.is_empty());
//! assert_eq!(queue.num_requeues(&"default/flaky".to_string()), 0);
//!
//! // Wait for in-flight keys, then stop the workers.
//! queue.shut_down_with_drain().await;
//! for worker in workers {
//!     worker.await.unwrap();
//! }
//! # }
//! ```
//!
//! # Using it as a stream
//!
//! [`WorkQueue::stream`] yields the keys as a [`futures_core::Stream`], so the
//! queue can feed kube-runtime's `applier` or any stream pipeline. The
//! consumer must still call [`done`](WorkQueue::done) for every key.
//!
//! # Differences from client-go
//!
//! - [`done`](WorkQueue::done) for an item that is not being processed does
//!   nothing; client-go queues a duplicate copy when the item is waiting.
//! - [`get`](WorkQueue::get) is an `async fn` and cancel-safe.
//! - Delays use tokio's clock, so tests can pause and advance time.
//! - Priorities (from controller-runtime) are built in; plain adds use
//!   priority 0 and behave exactly as client-go's FIFO.
//! - There is no pluggable storage (client-go's `Queue` interface with
//!   `Touch`): priorities cover its main use.
//!
//! # Performance
//!
//! The queue proper (queued and in-flight items, parked `get`s) sits behind
//! one `parking_lot` mutex, held for one short operation per call; items
//! waiting for a delay sit in a separate store under a lock of their own.
//!
//! - each known item is stored **once**, in a slab of cells (grown in
//!   fixed-size chunks, so a large backlog never stalls the lock with a
//!   copy) found through a compact hash index (hashbrown with its default,
//!   randomly seeded foldhash hasher); the priority lanes refer to cells,
//!   so handing an item out does not hash it again;
//! - a queued item costs its cell (the item and 12 bytes of state: 32
//!   bytes for a `u64` key, 40 plus the string's heap block for a
//!   `String`), its 32-bit hash (4 bytes), 5 to 10 bytes of index and 4
//!   bytes of lane: with a million `u64` keys queued at once the process's
//!   peak resident memory grows by about 52 bytes per key. Metrics add 8
//!   bytes per queued item (its add time), kept by cell rather than in a
//!   map of item copies;
//! - adding an item that is already queued is one hash lookup under the
//!   lock; steady-state `add`/`get`/`done` allocate nothing;
//! - `get` clones the item once (the queue keeps its own copy until
//!   `done`), so prefer keys that are cheap to clone (`Arc<str>`, small
//!   structs) over long `String`s if that matters;
//! - [`len`](WorkQueue::len) reads an atomic and takes no lock, so a
//!   producer can pace itself on the backlog for free;
//! - a contended lock is waited for by spinning (no system call) before
//!   blocking. `add` checks it often, `get` and `done` back off: under
//!   contention the producer goes first, and workers that come a little
//!   later find more repeated adds collapsed into one item;
//! - parked `get`s are woken oldest first, in a chain: one woken `get` is
//!   on its way while fewer than 256 items are queued (one more per 256
//!   beyond), and each woken `get` that takes an item wakes the next while
//!   items remain. No item waits while every `get` sleeps, but a fast
//!   producer does not wake every idle worker (each a thread wake-up and
//!   then lock contention between cores) for items one worker takes in a
//!   fraction of the time;
//! - `add_after` takes only the delay store's lock, so scheduling many
//!   delays does not compete with the workers. Delays are ordered in
//!   millisecond buckets sorted when they become due;
//! - **items are never handed out before their due time.** Due items are
//!   moved into the queue in batches by whichever comes first: the timer
//!   task (one per queue, one tokio `Sleep`), or a `get` — which looks at
//!   the clock when the queue is empty and every 32 calls otherwise, and
//!   only while delays are pending. A `get` on an empty queue whose next
//!   delayed item is due within 50 µs polls again (yielding to the other
//!   tasks of its thread, for at most 100 µs) instead of parking, so
//!   typical lateness is a few microseconds while workers keep up; a
//!   parked worker relies on tokio's timer, whose resolution is one
//!   millisecond (so up to about a millisecond late);
//! - `get` takes part in tokio's cooperative scheduling (one budget unit
//!   per 16 items), so a worker on a queue that never empties still lets
//!   the other tasks of its thread run;
//! - without a name and a metrics provider, the queue reads no clock except
//!   for `add_after` and while delays are pending.
//!
//! The `ctrlkit-benches` crate of the repository measures throughput,
//! dedup storms, delay lateness and wake-up latency (`workload` binary).
#![cfg_attr(docsrs, feature(doc_cfg))]

// The public handles.
mod builder;
mod queue;
mod stream;
// What the handles share, and the operations on it that need both locks or
// a runtime.
mod get;
mod shared_state;
mod timer_task;
mod tuning;
// Queued items (under the main lock).
mod item_state;
mod priority_lanes;
mod queue_state;
mod waiters;
// Delayed items (under the delay lock).
mod delay_store;
mod due_buckets;
// Storage used by both.
mod chunked;
mod item_store;
// Metrics and rate limiting.
pub mod metrics;
#[cfg(feature = "prometheus")]
#[cfg_attr(docsrs, doc(cfg(feature = "prometheus")))]
mod prometheus;
pub mod rate_limiter;

pub use builder::WorkQueueBuilder;
pub use metrics::MetricsProvider;
#[cfg(feature = "prometheus")]
pub use prometheus::PrometheusMetricsProvider;
pub use queue::WorkQueue;
pub use rate_limiter::{RateLimiter, default_controller_rate_limiter};
pub use stream::WorkQueueStream;
