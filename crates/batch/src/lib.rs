//! Run many fallible async operations in doubling batches, stopping at the
//! first batch that has a failure: "slow start".
//!
//! # Why
//!
//! A controller that needs 500 new pods could fire 500 create requests at
//! once. If the namespace's quota allows none of them, that is 500 doomed
//! requests and 500 failure events, every time the controller retries. Slow
//! start sends one request first, then two, then four, and so on. When the
//! API server starts refusing, at most one batch of requests has been
//! wasted, and when everything works the number of round trips only grows
//! with the logarithm of the count: 500 creations take 9 batches.
//!
//! This is the batching the kube-controller-manager uses for ReplicaSet,
//! ReplicationController, DaemonSet and Job pod creation (its `slowStartBatch`
//! with an initial batch of 1). Here it is generic: the operation is any
//! `FnMut(usize) -> impl Future<Output = Result<(), E>>`; the index tells it
//! which item to work on.
//!
//! # The contract
//!
//! - Batches are `initial_batch`, `2 × initial_batch`, `4 × initial_batch`, …
//!   each capped by what remains ([`BatchSizes`]).
//! - The operations in one batch run concurrently on the caller's task; the
//!   next batch starts when the whole batch has finished.
//! - After a batch with any failure, no further batch starts. The result
//!   says how many operations succeeded, failed and never started, and
//!   carries the first error ([`BatchError`]).
//! - `count == 0` does nothing; `initial_batch == 0` is treated as 1.
//! - Dropping the future cancels the batch in flight (see
//!   [`slow_start_batch`] for exactly what may have run).
//!
//! # Example: creating pods and accounting for the ones that were not
//!
//! ```
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use ctrlkit_batch::{slow_start_batch, SLOW_START_INITIAL_BATCH_SIZE};
//!
//! # futures::executor::block_on(async {
//! let quota_left = AtomicUsize::new(6);
//! let create_pod = |_index: usize| {
//!     let quota_left = &quota_left;
//!     async move {
//!         // Stand-in for an API call: succeeds while quota remains.
//!         quota_left
//!             .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |q| q.checked_sub(1))
//!             .map(|_| ())
//!             .map_err(|_| "exceeded quota")
//!     }
//! };
//!
//! let wanted = 20;
//! let (created, error) = match slow_start_batch(wanted, SLOW_START_INITIAL_BATCH_SIZE, create_pod).await {
//!     Ok(created) => (created, None),
//!     Err(e) => (e.successes, Some(e.error)),
//! };
//! // Batches of 1, 2 and 4 were sent: 6 succeeded, 1 failed, 13 never started.
//! assert_eq!(created, 6);
//! assert_eq!(error, Some("exceeded quota"));
//! // A controller would now lower its creation expectations by
//! // `wanted - created` = 14, since those pods will never be observed.
//! assert_eq!(wanted - created, 14);
//! # });
//! ```

mod error;
mod run;
mod sizes;

pub use error::BatchError;
pub use run::{SLOW_START_INITIAL_BATCH_SIZE, slow_start_batch};
pub use sizes::BatchSizes;

/// Compiles and runs the README's example as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
