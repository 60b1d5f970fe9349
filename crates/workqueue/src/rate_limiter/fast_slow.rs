//! A fixed fast delay for the first attempts, then a fixed slow one.

use std::fmt;
use std::hash::Hash;
use std::time::Duration;

use hashbrown::HashMap;
use parking_lot::Mutex;

use super::RateLimiter;

/// Retries an item quickly a few times, then slowly.
///
/// The first `max_fast_attempts` failures of an item wait `fast`; every later
/// failure waits `slow`, until [`forget`](RateLimiter::forget) resets the
/// item. Useful when a failure is usually transient (retry fast) but may be
/// lasting (then stop hammering).
///
/// Failure counts saturate at `u32::MAX`; nothing overflows or panics.
pub struct ItemFastSlowRateLimiter<T> {
    failures: Mutex<HashMap<T, u32>>,
    fast: Duration,
    slow: Duration,
    max_fast_attempts: u32,
}

impl<T> ItemFastSlowRateLimiter<T>
where
    T: Eq + Hash + Clone + Send + Sync,
{
    /// A limiter that answers `fast` for the first `max_fast_attempts`
    /// failures of each item and `slow` afterwards (same argument order as
    /// client-go's `NewItemFastSlowRateLimiter`).
    pub fn new(fast: Duration, slow: Duration, max_fast_attempts: u32) -> Self {
        Self {
            failures: Mutex::new(HashMap::new()),
            fast,
            slow,
            max_fast_attempts,
        }
    }
}

impl<T> RateLimiter<T> for ItemFastSlowRateLimiter<T>
where
    T: Eq + Hash + Clone + Send + Sync,
{
    fn when(&self, item: &T) -> Duration {
        let count = {
            let mut failures = self.failures.lock();
            match failures.get_mut(item) {
                Some(count) => {
                    *count = count.saturating_add(1);
                    *count
                }
                None => {
                    failures.insert(item.clone(), 1);
                    1
                }
            }
        };
        if count <= self.max_fast_attempts {
            self.fast
        } else {
            self.slow
        }
    }

    fn forget(&self, item: &T) {
        self.failures.lock().remove(item);
    }

    fn num_requeues(&self, item: &T) -> u32 {
        self.failures.lock().get(item).copied().unwrap_or(0)
    }
}

impl<T> fmt::Debug for ItemFastSlowRateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ItemFastSlowRateLimiter")
            .field("fast", &self.fast)
            .field("slow", &self.slow)
            .field("max_fast_attempts", &self.max_fast_attempts)
            .field("tracked_items", &self.failures.lock().len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);
    const S: Duration = Duration::from_secs(1);

    #[test]
    fn fast_then_slow_per_item_and_forget_resets() {
        let limiter = ItemFastSlowRateLimiter::new(5 * MS, 10 * S, 3);
        let one: Vec<_> = (0..5).map(|_| limiter.when(&"one")).collect();
        assert_eq!(one, [5 * MS, 5 * MS, 5 * MS, 10 * S, 10 * S]);
        assert_eq!(limiter.num_requeues(&"one"), 5);

        let two: Vec<_> = (0..2).map(|_| limiter.when(&"two")).collect();
        assert_eq!(two, [5 * MS, 5 * MS]);
        assert_eq!(limiter.num_requeues(&"two"), 2);

        limiter.forget(&"one");
        assert_eq!(limiter.num_requeues(&"one"), 0);
        assert_eq!(limiter.when(&"one"), 5 * MS);
    }

    #[test]
    fn zero_fast_attempts_is_always_slow() {
        let limiter = ItemFastSlowRateLimiter::new(MS, S, 0);
        assert_eq!(limiter.when(&1u8), S);
        assert_eq!(limiter.num_requeues(&1u8), 1);
    }
}
