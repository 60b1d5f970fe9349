//! Rate limiters decide how long an item waits before it is retried.
//!
//! When a controller fails to process an item it usually wants to try again,
//! but not immediately: a key that fails because the API server is
//! overloaded should back off, and a storm of failures across many keys
//! should not turn into a storm of retries. A [`RateLimiter`] answers the
//! question "how long should this item wait before its next attempt?" each
//! time the queue's `add_rate_limited` is called, and remembers per-item
//! failure counts until the caller calls `forget` (typically after a
//! successful sync).
//!
//! The building blocks, with the semantics of client-go's
//! `util/workqueue/default_rate_limiters.go`:
//!
//! | type | delay returned by `when` |
//! |---|---|
//! | [`ItemExponentialFailureRateLimiter`] | `base * 2^(failures so far)`, capped at `max` |
//! | [`ItemFastSlowRateLimiter`] | `fast` for the first attempts, `slow` afterwards |
//! | [`BucketRateLimiter`] | a token bucket shared by all items (overall retry rate) |
//! | [`MaxOfRateLimiter`] | the largest delay of several limiters |
//! | [`WithMaxWaitRateLimiter`] | another limiter's delay, capped at a maximum |
//!
//! [`default_controller_rate_limiter`] combines per-item exponential backoff
//! (5 ms doubling up to 1000 s) with an overall bucket of 10 retries per
//! second (burst 100), exactly as the Kubernetes controllers do.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use ctrlkit_workqueue::rate_limiter::{ItemExponentialFailureRateLimiter, RateLimiter};
//!
//! let limiter = ItemExponentialFailureRateLimiter::new(
//!     Duration::from_millis(5),
//!     Duration::from_secs(1),
//! );
//! // Every failure doubles the wait of that item...
//! assert_eq!(limiter.when(&"pod-a"), Duration::from_millis(5));
//! assert_eq!(limiter.when(&"pod-a"), Duration::from_millis(10));
//! assert_eq!(limiter.num_requeues(&"pod-a"), 2);
//! // ...other items are tracked separately...
//! assert_eq!(limiter.when(&"pod-b"), Duration::from_millis(5));
//! // ...and forgetting an item (after a successful sync) resets it.
//! limiter.forget(&"pod-a");
//! assert_eq!(limiter.when(&"pod-a"), Duration::from_millis(5));
//! ```

use std::sync::Arc;
use std::time::Duration;

mod bucket;
mod exponential;
mod fast_slow;
mod max_of;
mod max_wait;

pub use bucket::{BucketRateLimiter, InvalidBucketConfig};
pub use exponential::ItemExponentialFailureRateLimiter;
pub use fast_slow::ItemFastSlowRateLimiter;
pub use max_of::MaxOfRateLimiter;
pub use max_wait::WithMaxWaitRateLimiter;

/// The longest delay a limiter returns: `i64::MAX` nanoseconds, about 292
/// years, the same value as Go's `rate.InfDuration`.
///
/// [`BucketRateLimiter`] returns it when it can never grant a token (a rate
/// of zero once the burst is spent). Queues treat it as "not in the
/// foreseeable future"; it is small enough to be added to an
/// [`Instant`](std::time::Instant) without overflow on every supported
/// platform.
pub const NEVER: Duration = Duration::from_nanos(i64::MAX as u64);

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

/// A boxed limiter is a limiter, so `Box<dyn RateLimiter<T>>` can be passed
/// wherever a limiter is expected (for example to
/// [`WithMaxWaitRateLimiter::new`]).
impl<T, L> RateLimiter<T> for Box<L>
where
    L: RateLimiter<T> + ?Sized,
{
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }

    fn forget(&self, item: &T) {
        (**self).forget(item)
    }

    fn num_requeues(&self, item: &T) -> u32 {
        (**self).num_requeues(item)
    }
}

/// A shared limiter is a limiter: several queues can share one
/// [`BucketRateLimiter`] (and so one overall retry budget) through an `Arc`.
impl<T, L> RateLimiter<T> for Arc<L>
where
    L: RateLimiter<T> + ?Sized,
{
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }

    fn forget(&self, item: &T) {
        (**self).forget(item)
    }

    fn num_requeues(&self, item: &T) -> u32 {
        (**self).num_requeues(item)
    }
}

/// The limiter the Kubernetes controllers use: the larger of a per-item
/// exponential backoff (5 ms, doubling on every failure, capped at 1000 s)
/// and an overall token bucket of 10 retries per second with a burst of 100.
///
/// The first failure of an item waits 5 ms as long as fewer than 100 retries
/// were requested recently; beyond that retries are spaced 100 ms apart
/// overall. [`num_requeues`](RateLimiter::num_requeues) reports the
/// per-item failure count (the bucket reports 0) and
/// [`forget`](RateLimiter::forget) resets it.
pub fn default_controller_rate_limiter<T>() -> MaxOfRateLimiter<T>
where
    T: Eq + std::hash::Hash + Clone + Send + Sync + 'static,
{
    MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(1000),
        )),
        Box::new(BucketRateLimiter::new(10.0, 100)),
    ])
}

/// A per-item exponential backoff from 1 ms, capped at 1000 s, with no overall
/// limit (client-go's `DefaultItemBasedRateLimiter`).
pub fn default_item_based_rate_limiter<T>() -> ItemExponentialFailureRateLimiter<T>
where
    T: Eq + std::hash::Hash + Clone + Send + Sync,
{
    ItemExponentialFailureRateLimiter::new(Duration::from_millis(1), Duration::from_secs(1000))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn default_controller_limiter_backs_off_per_item_then_caps() {
        let limiter = default_controller_rate_limiter::<&str>();
        let delays: Vec<_> = (0..5).map(|_| limiter.when(&"one")).collect();
        assert_eq!(delays, [5 * MS, 10 * MS, 20 * MS, 40 * MS, 80 * MS]);
        assert_eq!(limiter.num_requeues(&"one"), 5);
        for _ in 0..100 {
            limiter.when(&"one");
        }
        assert_eq!(limiter.when(&"one"), Duration::from_secs(1000));
        limiter.forget(&"one");
        assert_eq!(limiter.num_requeues(&"one"), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn default_controller_limiter_spaces_retries_once_the_burst_is_spent() {
        let limiter = default_controller_rate_limiter::<u32>();
        // 100 distinct first failures fit in the burst: only the 5 ms backoff.
        for item in 0..100 {
            assert_eq!(limiter.when(&item), 5 * MS, "item {item}");
        }
        // Then the bucket dominates: 100 ms, 200 ms, ... in advance.
        assert_eq!(limiter.when(&100), 100 * MS);
        assert_eq!(limiter.when(&101), 200 * MS);
    }

    #[test]
    fn default_item_based_limiter_starts_at_one_millisecond() {
        let limiter = default_item_based_rate_limiter::<u8>();
        assert_eq!(limiter.when(&1), MS);
        assert_eq!(limiter.when(&1), 2 * MS);
    }

    #[test]
    fn boxed_and_shared_limiters_delegate() {
        let shared = Arc::new(ItemFastSlowRateLimiter::new(MS, 2 * MS, 1));
        let boxed: Box<dyn RateLimiter<u8>> = Box::new(Arc::clone(&shared));
        assert_eq!(boxed.when(&7), MS);
        assert_eq!(boxed.when(&7), 2 * MS);
        assert_eq!(shared.num_requeues(&7), 2);
        boxed.forget(&7);
        assert_eq!(shared.num_requeues(&7), 0);
    }

    #[test]
    fn never_fits_in_an_instant() {
        assert!(std::time::Instant::now().checked_add(NEVER).is_some());
    }
}
