//! Wakeup batching (`--wakeup-batching`): before the runtime's thread goes
//! to sleep for want of work it waits a moment, so that the responses and
//! watch events arriving meanwhile are handled in one wakeup instead of
//! one each (docs/performance.md, 3i). The window is shared with the
//! runtime's park hook, so a shard member can widen it to its share of the
//! ring (docs/sharding.md, "Wakeups of a member").

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The longest window `--wakeup-batching` accepts, and the longest a
/// member's share widens it to: longer would be a delay users notice, not
/// a batching window.
pub const MAX_WAKEUP_BATCHING: Duration = Duration::from_millis(100);

/// How many times its base window a member waits at most, however small
/// its share: a member holding an eighth of the ring or less batches
/// fewer events per wakeup than one replica rather than react later.
pub const MAX_SHARE_SCALE: u32 = 8;

/// The window a runtime's thread waits before it sleeps, shared between
/// the runtime (see [`install`](Self::install)) and whoever adjusts it.
///
/// A shard member given this handle
/// ([`ShardConfig::wakeup_batching`](crate::shard::ShardConfig::wakeup_batching))
/// waits its base window times the ring's slots over the slots it holds
/// (at most [`MAX_SHARE_SCALE`] times, at most [`MAX_WAKEUP_BATCHING`]):
/// it is sent about that fraction of the events, so with the longer window
/// each wakeup handles about as many of them as one unsharded replica's
/// does. The handle is cheap to clone; clones share the window. Two
/// handles are equal when they are clones of one another.
///
/// ```
/// use std::time::Duration;
///
/// use ctrlkit_runtime::manager::WakeupBatching;
///
/// let batching = WakeupBatching::new(Duration::from_millis(1));
/// let mut builder = tokio::runtime::Builder::new_current_thread();
/// batching.install(&mut builder);
/// let runtime = builder.enable_all().build()?;
///
/// // A member holding a third of the ring's 1,024 slots waits three times
/// // as long; the runtime's thread reads the new window at its next park.
/// batching.follow_share(341, 1024);
/// assert_eq!(batching.window(), Duration::from_nanos(3_002_932));
/// runtime.block_on(async { tokio::time::sleep(Duration::from_millis(1)).await });
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone)]
pub struct WakeupBatching {
    window: Arc<Window>,
}

struct Window {
    base: Duration,
    nanos: AtomicU64,
}

impl WakeupBatching {
    /// A window of `base` (at most [`MAX_WAKEUP_BATCHING`]; zero turns
    /// batching off, and a zero window is never widened).
    pub fn new(base: Duration) -> Self {
        let base = base.min(MAX_WAKEUP_BATCHING);
        Self {
            window: Arc::new(Window {
                base,
                nanos: AtomicU64::new(nanos(base)),
            }),
        }
    }

    /// The window it was created with (cut to [`MAX_WAKEUP_BATCHING`]).
    pub fn base(&self) -> Duration {
        self.window.base
    }

    /// The window the runtime's thread waits now.
    pub fn window(&self) -> Duration {
        Duration::from_nanos(self.window.nanos.load(Ordering::Relaxed))
    }

    /// Sets the window for a member holding `held` of `of` slots: the base
    /// window times `of / held`, at least the base, at most
    /// [`MAX_SHARE_SCALE`] times it and at most [`MAX_WAKEUP_BATCHING`]. A
    /// member holding nothing (joining, leaving, or `held >= of`) waits the
    /// base window. Returns the new window when it changed.
    pub fn follow_share(&self, held: usize, of: usize) -> Option<Duration> {
        let base = self.window.base;
        let scaled = match held {
            0 => base,
            _ => {
                // Whole nanoseconds: u128 holds base × 1,024 slots with room.
                // `new` keeps base within MAX_WAKEUP_BATCHING, so cap >= base.
                let ns = base.as_nanos() * of as u128 / held as u128;
                let cap = (base * MAX_SHARE_SCALE).min(MAX_WAKEUP_BATCHING);
                Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX)).clamp(base, cap)
            }
        };
        let scaled_nanos = nanos(scaled);
        let before = self.window.nanos.swap(scaled_nanos, Ordering::Relaxed);
        (before != scaled_nanos).then_some(scaled)
    }

    /// Installs the wait on `builder`'s threads: before a thread parks for
    /// want of work, it sleeps the window current at that moment, so
    /// [`follow_share`](Self::follow_share) takes effect at the next park
    /// of a runtime that already runs. Nothing is installed when the base
    /// window is zero. The hook replaces any `on_thread_park` set before.
    pub fn install(&self, builder: &mut tokio::runtime::Builder) {
        if self.window.base.is_zero() {
            return;
        }
        let window = Arc::clone(&self.window);
        builder.on_thread_park(move || {
            let wait = Duration::from_nanos(window.nanos.load(Ordering::Relaxed));
            // A blocking sleep on purpose: I/O that arrives meanwhile is
            // picked up by the one driver poll that follows.
            if !wait.is_zero() {
                std::thread::sleep(wait);
            }
        });
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl fmt::Debug for WakeupBatching {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WakeupBatching")
            .field("base", &self.base())
            .field("window", &self.window())
            .finish()
    }
}

impl PartialEq for WakeupBatching {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.window, &other.window)
    }
}

impl Eq for WakeupBatching {}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_member_waits_its_base_window_times_the_ring_over_its_share() {
        let b = WakeupBatching::new(MS);
        assert_eq!(b.window(), MS);
        // A third of the slots: three times as long.
        assert_eq!(
            b.follow_share(341, 1024),
            Some(Duration::from_nanos(3_002_932))
        );
        assert_eq!(b.window(), Duration::from_nanos(3_002_932));
        // Unchanged share: nothing to report.
        assert_eq!(b.follow_share(341, 1024), None);
        // Half.
        assert_eq!(b.follow_share(512, 1024), Some(2 * MS));
        // Every slot, or none: the base window.
        assert_eq!(b.follow_share(1024, 1024), Some(MS));
        // A tenth: at most eight times.
        assert_eq!(b.follow_share(100, 1024), Some(8 * MS));
        assert_eq!(b.follow_share(0, 1024), Some(MS));
        assert_eq!(b.follow_share(2048, 1024), None);
        assert_eq!(b.base(), MS);
    }

    #[test]
    fn a_small_share_widens_the_window_at_most_eight_times_and_to_100ms() {
        let b = WakeupBatching::new(MS);
        assert_eq!(b.follow_share(1, 1024), Some(MAX_SHARE_SCALE * MS));
        let b = WakeupBatching::new(Duration::from_millis(30));
        assert_eq!(b.follow_share(1, 1024), Some(MAX_WAKEUP_BATCHING));
        // A base above the most is cut to it, and never widened.
        let b = WakeupBatching::new(Duration::from_secs(5));
        assert_eq!(b.base(), MAX_WAKEUP_BATCHING);
        assert_eq!(b.follow_share(1, 1024), None);
        assert_eq!(b.window(), MAX_WAKEUP_BATCHING);
    }

    #[test]
    fn batching_turned_off_stays_off_whatever_the_share() {
        let b = WakeupBatching::new(Duration::ZERO);
        assert_eq!(b.follow_share(1, 1024), None);
        assert_eq!(b.window(), Duration::ZERO);
    }

    #[test]
    fn clones_share_the_window_and_compare_equal() {
        let b = WakeupBatching::new(MS);
        let c = b.clone();
        b.follow_share(256, 1024);
        assert_eq!(c.window(), 4 * MS);
        assert_eq!(b, c);
        assert_ne!(b, WakeupBatching::new(MS));
        assert_eq!(
            format!("{c:?}"),
            "WakeupBatching { base: 1ms, window: 4ms }"
        );
    }
}
