//! Rate limiters decide how long an item waits before it is retried.

use std::time::Duration;

/// Decides how long an item must wait before it is re-queued after a failure.
///
/// Mirrors client-go's `TypedRateLimiter`. Implementations must be cheap and
/// must not block: [`when`](RateLimiter::when) is called on the caller's task
/// by `add_rate_limited`.
pub trait RateLimiter<T>: Send + Sync {
    /// Records one more failure of `item` and returns how long it should wait
    /// before it is processed again.
    fn when(&self, item: &T) -> Duration;

    /// Stops tracking `item`: it succeeded, or the caller gave up on it.
    fn forget(&self, item: &T);

    /// How many failures of `item` are being tracked.
    fn num_requeues(&self, item: &T) -> u32;
}
