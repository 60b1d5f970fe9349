//! The largest delay of several limiters.

use std::fmt;
use std::time::Duration;

use super::RateLimiter;

/// Combines limiters by taking the largest delay.
///
/// Every call to [`when`](RateLimiter::when) is passed to **every** inner
/// limiter (so each records the failure, and a token bucket consumes a
/// token) and the maximum is returned. [`forget`](RateLimiter::forget) is
/// forwarded to all of them, and
/// [`num_requeues`](RateLimiter::num_requeues) is the maximum of theirs.
/// With no inner limiter the delay is zero and the count 0.
///
/// As in client-go, combining a token bucket with per-item limiters can make
/// the bucket's burst look exceeded: a token is consumed even when another
/// limiter's longer delay wins, so later items find fewer tokens than the
/// retries actually due.
pub struct MaxOfRateLimiter<T> {
    limiters: Vec<Box<dyn RateLimiter<T>>>,
}

impl<T> MaxOfRateLimiter<T> {
    /// A limiter answering the maximum of `limiters`.
    pub fn new(limiters: Vec<Box<dyn RateLimiter<T>>>) -> Self {
        Self { limiters }
    }
}

impl<T> RateLimiter<T> for MaxOfRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        // No short-circuit: every limiter must see every failure.
        self.limiters
            .iter()
            .map(|limiter| limiter.when(item))
            .fold(Duration::ZERO, Duration::max)
    }

    fn forget(&self, item: &T) {
        for limiter in &self.limiters {
            limiter.forget(item);
        }
    }

    fn num_requeues(&self, item: &T) -> u32 {
        self.limiters
            .iter()
            .map(|limiter| limiter.num_requeues(item))
            .max()
            .unwrap_or(0)
    }
}

impl<T> fmt::Debug for MaxOfRateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MaxOfRateLimiter")
            .field("limiters", &self.limiters.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rate_limiter::{ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter};

    const MS: Duration = Duration::from_millis(1);
    const S: Duration = Duration::from_secs(1);

    fn fast_slow_and_exponential() -> MaxOfRateLimiter<&'static str> {
        MaxOfRateLimiter::new(vec![
            Box::new(ItemFastSlowRateLimiter::new(5 * MS, 3 * S, 3)),
            Box::new(ItemExponentialFailureRateLimiter::new(MS, S)),
        ])
    }

    #[test]
    fn returns_the_largest_delay_and_forwards_forget() {
        let limiter = fast_slow_and_exponential();
        let one: Vec<_> = (0..5).map(|_| limiter.when(&"one")).collect();
        assert_eq!(one, [5 * MS, 5 * MS, 5 * MS, 3 * S, 3 * S]);
        assert_eq!(limiter.num_requeues(&"one"), 5);

        let two: Vec<_> = (0..2).map(|_| limiter.when(&"two")).collect();
        assert_eq!(two, [5 * MS, 5 * MS]);
        assert_eq!(limiter.num_requeues(&"two"), 2);

        limiter.forget(&"one");
        assert_eq!(limiter.num_requeues(&"one"), 0);
        assert_eq!(limiter.when(&"one"), 5 * MS);
    }

    #[test]
    fn every_inner_limiter_counts_every_failure() {
        // The fast/slow limiter wins the first three calls, yet the
        // exponential one must have counted them: its 4th answer is 8 ms.
        let limiter = MaxOfRateLimiter::new(vec![
            Box::new(ItemFastSlowRateLimiter::new(10 * MS, Duration::ZERO, 3)),
            Box::new(ItemExponentialFailureRateLimiter::new(MS, S)),
        ]);
        let delays: Vec<_> = (0..4).map(|_| limiter.when(&"x")).collect();
        assert_eq!(delays, [10 * MS, 10 * MS, 10 * MS, 8 * MS]);
    }

    #[test]
    fn empty_is_zero() {
        let limiter = MaxOfRateLimiter::<u8>::new(Vec::new());
        assert_eq!(limiter.when(&1), Duration::ZERO);
        assert_eq!(limiter.num_requeues(&1), 0);
        limiter.forget(&1);
    }
}
