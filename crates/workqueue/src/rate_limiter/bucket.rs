//! An overall token bucket, shared by all items.

use std::fmt;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use super::{NEVER, RateLimiter};

/// Limits the overall retry rate, whatever the item, with a token bucket.
///
/// The bucket holds up to `burst` tokens and refills at `qps` tokens per
/// second; it starts full. Every call to [`when`](RateLimiter::when) takes
/// one token *in advance*: while tokens remain the delay is zero, and once
/// the bucket is empty each call reserves the next token to be produced, so
/// calls made at the same instant get delays of `1/qps`, `2/qps`, ... This is
/// the behaviour of Go's `rate.Limiter::Reserve().Delay()`, which client-go
/// uses. Delays are rounded to the nearest nanosecond.
///
/// The bucket does not track items: [`forget`](RateLimiter::forget) does
/// nothing and [`num_requeues`](RateLimiter::num_requeues) is always 0.
///
/// Time is read from [`tokio::time::Instant`], so a test with paused tokio
/// time controls the refill exactly.
///
/// # Unusual configurations
///
/// [`try_new`](Self::try_new) rejects them; [`new`](Self::new) accepts every
/// input without panicking and behaves as follows:
/// - `qps` is `+inf`: no limit, every delay is zero;
/// - `qps` is zero, negative or NaN: the bucket never refills, so the first
///   `burst` calls get zero and every later call gets [`NEVER`];
/// - `burst` is 0: treated as 1 (a bucket that can hold no token could never
///   grant one);
/// - a rate so small that a delay exceeds [`NEVER`] answers [`NEVER`].
pub struct BucketRateLimiter {
    bucket: Mutex<Bucket>,
    /// Tokens per second; 0 for "never refills", `+inf` for "no limit".
    qps: f64,
    burst: u32,
}

/// [`NEVER`] in nanoseconds, as a float (2^63).
const NEVER_NANOS: f64 = i64::MAX as f64;

struct Bucket {
    /// Tokens available at `last`; negative once tokens are reserved ahead.
    tokens: f64,
    last: Instant,
}

/// Why [`BucketRateLimiter::try_new`] refused a configuration.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidBucketConfig {
    /// The rate was zero, negative or NaN.
    #[error("token bucket rate must be a positive number of tokens per second, got {0}")]
    Rate(f64),
    /// The burst was zero.
    #[error("token bucket burst must be at least 1")]
    ZeroBurst,
}

impl BucketRateLimiter {
    /// A full bucket of `burst` tokens refilled at `qps` tokens per second.
    ///
    /// Never panics; see the type's documentation for how a non-positive or
    /// NaN rate and a zero burst behave. Use [`try_new`](Self::try_new) to
    /// reject them instead.
    pub fn new(qps: f64, burst: u32) -> Self {
        // NaN and non-positive rates all mean "never refills".
        let qps = if qps > 0.0 { qps } else { 0.0 };
        let burst = burst.max(1);
        Self {
            bucket: Mutex::new(Bucket {
                tokens: f64::from(burst),
                last: Instant::now(),
            }),
            qps,
            burst,
        }
    }

    /// Like [`new`](Self::new), but refuses a rate that is zero, negative or
    /// NaN, and a zero burst. An infinite rate is accepted (no limit).
    pub fn try_new(qps: f64, burst: u32) -> Result<Self, InvalidBucketConfig> {
        if qps.is_nan() || qps <= 0.0 {
            return Err(InvalidBucketConfig::Rate(qps));
        }
        if burst == 0 {
            return Err(InvalidBucketConfig::ZeroBurst);
        }
        Ok(Self::new(qps, burst))
    }

    /// The refill rate in tokens per second as used by the bucket: 0 if the
    /// configured rate was zero, negative or NaN.
    pub fn qps(&self) -> f64 {
        self.qps
    }

    /// The bucket's capacity as used by the bucket (at least 1).
    pub fn burst(&self) -> u32 {
        self.burst
    }

    /// Takes one token at `now` and returns how long until it is available.
    fn reserve(&self, now: Instant) -> Duration {
        if self.qps == f64::INFINITY {
            return Duration::ZERO;
        }
        let mut bucket = self.bucket.lock();
        if self.qps == 0.0 {
            // Nothing refills: hand out what is left, then refuse forever
            // without reserving.
            if bucket.tokens >= 1.0 {
                bucket.tokens -= 1.0;
                return Duration::ZERO;
            }
            return NEVER;
        }
        let elapsed = now.saturating_duration_since(bucket.last);
        let refilled = bucket.tokens + elapsed.as_secs_f64() * self.qps;
        let tokens = refilled.min(f64::from(self.burst)) - 1.0;
        bucket.tokens = tokens;
        // `now` never goes backwards, but keep the latest instant regardless.
        bucket.last = bucket.last.max(now);
        if tokens >= 0.0 {
            return Duration::ZERO;
        }
        // Rounded to the nearest nanosecond; `+ 0.5` then truncation avoids
        // a libm call (the value is positive).
        let nanos = -tokens / self.qps * 1e9 + 0.5;
        if nanos < NEVER_NANOS {
            Duration::from_nanos(nanos as u64)
        } else {
            // Also catches an infinite wait (a vanishingly small rate).
            NEVER
        }
    }
}

impl<T> RateLimiter<T> for BucketRateLimiter {
    fn when(&self, _item: &T) -> Duration {
        self.reserve(Instant::now())
    }

    fn forget(&self, _item: &T) {}

    fn num_requeues(&self, _item: &T) -> u32 {
        0
    }
}

impl fmt::Debug for BucketRateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BucketRateLimiter")
            .field("qps", &self.qps)
            .field("burst", &self.burst)
            .field("tokens", &self.bucket.lock().tokens)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn when(limiter: &BucketRateLimiter) -> Duration {
        RateLimiter::<&str>::when(limiter, &"any")
    }

    #[tokio::test(start_paused = true)]
    async fn burst_then_reservations_spaced_by_the_rate() {
        let limiter = BucketRateLimiter::new(10.0, 100);
        for call in 0..100 {
            assert_eq!(when(&limiter), Duration::ZERO, "call {call}");
        }
        // The bucket is empty: each call reserves the next token, 100 ms apart.
        let ahead: Vec<_> = (0..4).map(|_| when(&limiter)).collect();
        assert_eq!(ahead, [100 * MS, 200 * MS, 300 * MS, 400 * MS]);
    }

    #[tokio::test(start_paused = true)]
    async fn refills_at_the_rate() {
        let limiter = BucketRateLimiter::new(10.0, 100);
        for _ in 0..100 {
            when(&limiter);
        }
        // Steady state at exactly the rate: one free token every 100 ms.
        for _ in 0..20 {
            tokio::time::advance(100 * MS).await;
            assert_eq!(when(&limiter), Duration::ZERO);
            assert_eq!(when(&limiter), 100 * MS);
            tokio::time::advance(100 * MS).await;
        }
        // Reservations made in advance are paid back by the refill.
        assert_eq!(when(&limiter), 100 * MS);
        assert_eq!(when(&limiter), 200 * MS);
        tokio::time::advance(250 * MS).await;
        assert_eq!(when(&limiter), 50 * MS);
    }

    #[tokio::test(start_paused = true)]
    async fn refill_is_capped_at_the_burst() {
        let limiter = BucketRateLimiter::new(10.0, 5);
        for _ in 0..5 {
            when(&limiter);
        }
        tokio::time::advance(Duration::from_secs(3600)).await;
        for call in 0..5 {
            assert_eq!(when(&limiter), Duration::ZERO, "call {call}");
        }
        assert_eq!(when(&limiter), 100 * MS);
    }

    #[tokio::test(start_paused = true)]
    async fn does_not_track_items() {
        let limiter = BucketRateLimiter::new(1.0, 1);
        assert_eq!(limiter.when(&"a"), Duration::ZERO);
        assert_eq!(limiter.num_requeues(&"a"), 0);
        // Forgetting gives no token back.
        limiter.forget(&"a");
        assert_eq!(limiter.when(&"b"), Duration::from_secs(1));
        assert_eq!(limiter.num_requeues(&"b"), 0);
    }

    #[test]
    fn try_new_rejects_unusable_configurations() {
        assert_eq!(
            BucketRateLimiter::try_new(0.0, 1).err(),
            Some(InvalidBucketConfig::Rate(0.0))
        );
        assert_eq!(
            BucketRateLimiter::try_new(-1.0, 1).err(),
            Some(InvalidBucketConfig::Rate(-1.0))
        );
        assert!(matches!(
            BucketRateLimiter::try_new(f64::NAN, 1),
            Err(InvalidBucketConfig::Rate(r)) if r.is_nan()
        ));
        assert_eq!(
            BucketRateLimiter::try_new(10.0, 0).err(),
            Some(InvalidBucketConfig::ZeroBurst)
        );
        let err = BucketRateLimiter::try_new(-2.5, 1)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("token bucket rate must be a positive number of tokens per second, got -2.5")
        );
        assert!(BucketRateLimiter::try_new(f64::INFINITY, 1).is_ok());
        assert!(BucketRateLimiter::try_new(10.0, 100).is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn new_with_a_non_positive_rate_spends_the_burst_then_never() {
        for qps in [0.0, -3.0, f64::NAN, f64::NEG_INFINITY] {
            let limiter = BucketRateLimiter::new(qps, 2);
            assert_eq!(limiter.qps(), 0.0);
            assert_eq!(when(&limiter), Duration::ZERO, "qps {qps}");
            assert_eq!(when(&limiter), Duration::ZERO, "qps {qps}");
            assert_eq!(when(&limiter), NEVER, "qps {qps}");
            tokio::time::advance(Duration::from_secs(3600)).await;
            assert_eq!(when(&limiter), NEVER, "qps {qps}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn new_with_zero_burst_holds_one_token() {
        let limiter = BucketRateLimiter::new(10.0, 0);
        assert_eq!(limiter.burst(), 1);
        assert_eq!(when(&limiter), Duration::ZERO);
        assert_eq!(when(&limiter), 100 * MS);
    }

    #[tokio::test(start_paused = true)]
    async fn extreme_rates_do_not_panic() {
        let unlimited = BucketRateLimiter::new(f64::INFINITY, 1);
        for _ in 0..1000 {
            assert_eq!(when(&unlimited), Duration::ZERO);
        }
        let huge = BucketRateLimiter::new(f64::MAX, 1);
        assert_eq!(when(&huge), Duration::ZERO);
        assert_eq!(when(&huge), Duration::ZERO);
        let tiny = BucketRateLimiter::new(f64::MIN_POSITIVE, 1);
        assert_eq!(when(&tiny), Duration::ZERO);
        assert_eq!(when(&tiny), NEVER);
        assert_eq!(when(&tiny), NEVER);
    }
}
