//! Per-item exponential backoff.

use std::fmt;
use std::hash::Hash;
use std::time::Duration;

use hashbrown::HashMap;
use parking_lot::Mutex;

use super::RateLimiter;

/// Per-item exponential backoff: the n-th failure of an item (counting from
/// one) waits `base * 2^(n-1)`, capped at `max`.
///
/// With `base = 5 ms` the delays are 5 ms, 10 ms, 20 ms, ... Items are
/// tracked independently, and [`forget`](RateLimiter::forget) resets an
/// item to its first delay.
///
/// Guarantees:
/// - the delay never exceeds `max` and never decreases between two
///   [`forget`](RateLimiter::forget)s of an item;
/// - no overflow or panic however many failures accumulate: a delay that
///   would not fit in `i64::MAX` nanoseconds (about 292 years, the limit of
///   Go's `time.Duration`) is replaced by `max`, as client-go does;
/// - a zero `base` always gives zero; a `max` below `base` always gives `max`.
///
/// Memory grows with the number of distinct items that failed and were not
/// forgotten, so callers should `forget` items once they succeed.
pub struct ItemExponentialFailureRateLimiter<T> {
    failures: Mutex<HashMap<T, u32>>,
    base: Duration,
    max: Duration,
    /// `base` in nanoseconds, converted once (u128 to f64 is a libcall).
    base_nanos: f64,
}

impl<T> ItemExponentialFailureRateLimiter<T>
where
    T: Eq + Hash + Clone + Send + Sync,
{
    /// A limiter whose first delay for every item is `base`, doubling on
    /// every further failure up to `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            failures: Mutex::new(HashMap::new()),
            base,
            max,
            base_nanos: base.as_nanos() as f64,
        }
    }
}

impl<T> RateLimiter<T> for ItemExponentialFailureRateLimiter<T>
where
    T: Eq + Hash + Clone + Send + Sync,
{
    fn when(&self, item: &T) -> Duration {
        let previous = {
            let mut failures = self.failures.lock();
            match failures.get_mut(item) {
                Some(count) => {
                    let previous = *count;
                    *count = count.saturating_add(1);
                    previous
                }
                None => {
                    failures.insert(item.clone(), 1);
                    0
                }
            }
        };
        backoff(self.base_nanos, self.max, previous)
    }

    fn forget(&self, item: &T) {
        self.failures.lock().remove(item);
    }

    fn num_requeues(&self, item: &T) -> u32 {
        self.failures.lock().get(item).copied().unwrap_or(0)
    }
}

impl<T> fmt::Debug for ItemExponentialFailureRateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ItemExponentialFailureRateLimiter")
            .field("base", &self.base)
            .field("max", &self.max)
            .field("tracked_items", &self.failures.lock().len())
            .finish()
    }
}

/// `base_nanos * 2^exponent` nanoseconds, capped at `max`, computed in
/// floating point like client-go so that huge exponents saturate instead of
/// overflowing.
fn backoff(base_nanos: f64, max: Duration, exponent: u32) -> Duration {
    if base_nanos == 0.0 {
        // 0 * 2^exponent is 0 (and would be NaN once 2^exponent is infinite).
        return Duration::ZERO.min(max);
    }
    // 2^1100 is already infinite in f64; clamping keeps the exponent an i32.
    let factor = 2f64.powi(exponent.min(1100) as i32);
    let nanos = base_nanos * factor;
    // Go's time.Duration is an i64 of nanoseconds: anything beyond it is an
    // overflow, answered with the cap.
    if !nanos.is_finite() || nanos > i64::MAX as f64 {
        return max;
    }
    // Truncating, as Go's float-to-Duration conversion does.
    Duration::from_nanos(nanos as u64).min(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn delays<T>(limiter: &impl RateLimiter<T>, item: T, n: usize) -> Vec<Duration> {
        (0..n).map(|_| limiter.when(&item)).collect()
    }

    #[test]
    fn doubles_per_item_and_forget_resets() {
        let limiter = ItemExponentialFailureRateLimiter::new(MS, Duration::from_secs(1));
        assert_eq!(
            delays(&limiter, "one", 5),
            [MS, 2 * MS, 4 * MS, 8 * MS, 16 * MS]
        );
        assert_eq!(limiter.num_requeues(&"one"), 5);

        assert_eq!(delays(&limiter, "two", 2), [MS, 2 * MS]);
        assert_eq!(limiter.num_requeues(&"two"), 2);

        limiter.forget(&"one");
        assert_eq!(limiter.num_requeues(&"one"), 0);
        assert_eq!(limiter.when(&"one"), MS);
        // Forgetting one item leaves the others alone.
        assert_eq!(limiter.num_requeues(&"two"), 2);
    }

    #[test]
    fn unknown_items_have_no_requeues_and_forget_is_harmless() {
        let limiter = ItemExponentialFailureRateLimiter::<u64>::new(MS, MS);
        assert_eq!(limiter.num_requeues(&42), 0);
        limiter.forget(&42);
        assert_eq!(limiter.num_requeues(&42), 0);
    }

    #[test]
    fn caps_at_max_without_overflow_small_base() {
        let limiter = ItemExponentialFailureRateLimiter::new(MS, Duration::from_secs(1000));
        delays(&limiter, "one", 5);
        assert_eq!(limiter.when(&"one"), 32 * MS);

        delays(&limiter, "overflow1", 1000);
        assert_eq!(limiter.when(&"overflow1"), Duration::from_secs(1000));
    }

    #[test]
    fn caps_at_max_without_overflow_large_base() {
        let minute = Duration::from_secs(60);
        let hour = Duration::from_secs(3600);
        let limiter = ItemExponentialFailureRateLimiter::new(minute, 1000 * hour);
        delays(&limiter, "one", 2);
        assert_eq!(limiter.when(&"one"), 4 * minute);

        delays(&limiter, "overflow1", 1000);
        assert_eq!(limiter.when(&"overflow1"), 1000 * hour);
    }

    #[test]
    fn backoff_saturates_at_every_exponent() {
        let max = Duration::from_secs(1000);
        for exponent in [0, 1, 30, 62, 63, 64, 1023, 1024, 1100, 5000, u32::MAX] {
            let delay = backoff(1e6, max, exponent);
            assert!(delay <= max, "exponent {exponent}: {delay:?}");
        }
        assert_eq!(backoff(1e6, max, u32::MAX), max);
        // A cap beyond Go's Duration range is still honoured on overflow.
        assert_eq!(backoff(1e6, Duration::MAX, u32::MAX), Duration::MAX);
        // The largest exact result below i64::MAX nanoseconds is not capped.
        assert_eq!(
            backoff(1.0, Duration::MAX, 62),
            Duration::from_nanos(1 << 62)
        );
    }

    #[test]
    fn zero_base_and_small_max_are_handled() {
        let zero = ItemExponentialFailureRateLimiter::new(Duration::ZERO, Duration::from_secs(1));
        assert_eq!(delays(&zero, 1u8, 3), [Duration::ZERO; 3]);
        assert_eq!(
            backoff(0.0, Duration::from_secs(1), u32::MAX),
            Duration::ZERO
        );

        let capped = ItemExponentialFailureRateLimiter::new(Duration::from_secs(10), MS);
        assert_eq!(delays(&capped, 1u8, 2), [MS, MS]);
    }

    #[test]
    fn delays_never_decrease_until_forgotten() {
        let limiter = ItemExponentialFailureRateLimiter::new(
            Duration::from_nanos(3),
            Duration::from_secs(3600),
        );
        let all = delays(&limiter, (), 200);
        assert!(all.windows(2).all(|w| w[0] <= w[1]), "{all:?}");
        assert_eq!(all.last(), Some(&Duration::from_secs(3600)));
    }
}
