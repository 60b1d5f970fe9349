//! The slow-start loop itself.

use std::future::Future;

use futures::future::join_all;

use crate::{BatchError, BatchSizes};

/// The initial batch size upstream controllers use (upstream's
/// `SlowStartInitialBatchSize`): batches go 1, 2, 4, 8, …
pub const SLOW_START_INITIAL_BATCH_SIZE: usize = 1;

/// Runs `op(0)`, `op(1)`, …, `op(count - 1)` in batches of growing size,
/// stopping after the first batch in which an operation fails.
///
/// Batch sizes follow [`BatchSizes`]: `initial_batch`, then double, each
/// capped by what remains (for `count` 10 and `initial_batch` 1: 1, 2, 4, 3).
/// The operations of one batch run concurrently; the next batch starts only
/// once every operation of the current one has finished.
///
/// # Returns
///
/// - `Ok(successes)` when every batch succeeded; `successes == count`.
/// - `Err(BatchError { successes, failures, not_started, error })` when a
///   batch had a failure: every operation of that batch still ran to
///   completion, no later batch was started, and `error` is the failure with
///   the lowest index in that batch.
///
/// `count == 0` returns `Ok(0)` without calling `op`. `initial_batch == 0` is
/// treated as 1 (upstream's loop would silently run nothing).
///
/// # How operations run
///
/// - `op` is called once per index, in increasing index order. All of a
///   batch's calls happen before any of its futures is first polled.
/// - The futures are polled on the caller's task (no spawning), so "runs
///   concurrently" means interleaved at `.await` points, not in parallel on
///   several threads. Operations that are CPU-bound or block should spawn
///   their own work.
/// - A panic in `op` or in one of its futures propagates to the caller.
///
/// # Cancellation
///
/// Dropping the returned future (for example on a timeout or shutdown)
/// drops the futures of the batch in flight. Operations of earlier batches
/// have completed; operations of the current batch may have done part of
/// their work (a request may have reached the server with its response never
/// read); operations of later batches were never started. The counts are
/// lost with the future, so a controller that set expectations before the
/// run must rely on their TTL (or reset them) after a cancellation.
///
/// # Example
///
/// ```
/// use ctrlkit_batch::{slow_start_batch, BatchError};
///
/// # futures::executor::block_on(async {
/// // Create 10 things; the API starts refusing at index 5 (quota exceeded).
/// let result = slow_start_batch(10, 1, |i| async move {
///     if i < 5 { Ok(()) } else { Err(format!("quota exceeded creating #{i}")) }
/// })
/// .await;
///
/// // Batches 1, 2 and 4 ran (indices 0..7); the third batch failed, so the
/// // last 3 operations never started.
/// let err: BatchError<String> = result.unwrap_err();
/// assert_eq!((err.successes, err.failures, err.not_started), (5, 2, 3));
/// assert_eq!(err.error, "quota exceeded creating #5");
/// assert_eq!(err.unsuccessful(), 5);
/// # });
/// ```
pub async fn slow_start_batch<F, Fut, E>(
    count: usize,
    initial_batch: usize,
    mut op: F,
) -> Result<usize, BatchError<E>>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    let mut started = 0usize;
    let mut successes = 0usize;
    for size in BatchSizes::new(count, initial_batch) {
        let batch: Vec<Fut> = (started..started + size).map(&mut op).collect();
        started += size;

        let mut failures = 0usize;
        let mut first_error = None;
        // join_all yields results in index order, so the first `Err` seen is
        // the lowest-index failure: deterministic, unlike completion order.
        for result in join_all(batch).await {
            match result {
                Ok(()) => successes += 1,
                Err(error) => {
                    failures += 1;
                    first_error.get_or_insert(error);
                }
            }
        }
        if let Some(error) = first_error {
            return Err(BatchError {
                successes,
                failures,
                not_started: count - started,
                error,
            });
        }
    }
    Ok(successes)
}
