//! Another limiter's delay, capped.

use std::time::Duration;

use super::RateLimiter;

/// Caps the delay of another limiter at `max_wait`.
///
/// [`when`](RateLimiter::when) asks the inner limiter (which records the
/// failure as usual) and returns the smaller of its answer and `max_wait`;
/// [`forget`](RateLimiter::forget) and
/// [`num_requeues`](RateLimiter::num_requeues) are passed through unchanged.
#[derive(Debug, Clone)]
pub struct WithMaxWaitRateLimiter<L> {
    limiter: L,
    max_wait: Duration,
}

impl<L> WithMaxWaitRateLimiter<L> {
    /// Wraps `limiter` so that no delay exceeds `max_wait`.
    pub fn new(limiter: L, max_wait: Duration) -> Self {
        Self { limiter, max_wait }
    }

    /// The wrapped limiter.
    pub fn inner(&self) -> &L {
        &self.limiter
    }
}

impl<T, L> RateLimiter<T> for WithMaxWaitRateLimiter<L>
where
    L: RateLimiter<T>,
{
    fn when(&self, item: &T) -> Duration {
        self.limiter.when(item).min(self.max_wait)
    }

    fn forget(&self, item: &T) {
        self.limiter.forget(item)
    }

    fn num_requeues(&self, item: &T) -> u32 {
        self.limiter.num_requeues(item)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    const S: Duration = Duration::from_secs(1);

    /// Answers `short` for its first `steps` calls, then `long`, whatever the item.
    struct Step {
        calls: AtomicU32,
        steps: u32,
        short: Duration,
        long: Duration,
    }

    impl RateLimiter<&'static str> for Step {
        fn when(&self, _: &&'static str) -> Duration {
            if self.calls.fetch_add(1, Ordering::Relaxed) < self.steps {
                self.short
            } else {
                self.long
            }
        }

        fn forget(&self, _: &&'static str) {
            self.calls.store(0, Ordering::Relaxed);
        }

        fn num_requeues(&self, _: &&'static str) -> u32 {
            self.calls.load(Ordering::Relaxed)
        }
    }

    #[test]
    fn caps_long_delays_and_keeps_short_ones() {
        let step = Step {
            calls: AtomicU32::new(0),
            steps: 100,
            short: Duration::from_millis(5),
            long: 1000 * S,
        };
        let limiter = WithMaxWaitRateLimiter::new(step, 500 * S);
        for call in 0..100 {
            assert_eq!(
                limiter.when(&"one"),
                Duration::from_millis(5),
                "call {call}"
            );
        }
        for call in 100..200 {
            assert_eq!(limiter.when(&"one"), 500 * S, "call {call}");
        }
        assert_eq!(limiter.num_requeues(&"one"), 200);
        limiter.forget(&"one");
        assert_eq!(limiter.num_requeues(&"one"), 0);
        assert_eq!(limiter.inner().steps, 100);
    }
}
