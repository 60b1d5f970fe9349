//! The cluster's clock: every timestamp the server writes
//! (`creationTimestamp`, `deletionTimestamp`, managedFields times,
//! condition times, the kubelet simulation's times) and the ages in Table
//! output come from it.
//!
//! [`SystemClock`] is the default. [`TokioClock`] follows tokio's clock, so
//! a test on paused time (`#[tokio::test(start_paused = true)]`,
//! `tokio::time::advance`) sees the cluster's timestamps move with it and
//! needs no wall-clock waits.

use std::fmt::Debug;

/// A source of the current time.
pub trait Clock: Send + Sync + Debug {
    /// The current time.
    fn now(&self) -> jiff::Timestamp;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> jiff::Timestamp {
        jiff::Timestamp::now()
    }
}

/// A clock that starts at a given time and advances with tokio's clock
/// (`tokio::time::Instant`), which stands still while tokio's time is
/// paused and jumps with `tokio::time::advance`.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    start: jiff::Timestamp,
    since: tokio::time::Instant,
}

impl TokioClock {
    /// A clock reading `start` now (then following tokio's clock of the
    /// runtime it is called in).
    pub fn starting_at(start: jiff::Timestamp) -> TokioClock {
        TokioClock {
            start,
            since: tokio::time::Instant::now(),
        }
    }

    /// A clock reading the system time now, then following tokio's clock.
    pub fn new() -> TokioClock {
        TokioClock::starting_at(jiff::Timestamp::now())
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        TokioClock::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> jiff::Timestamp {
        let elapsed = tokio::time::Instant::now().saturating_duration_since(self.since);
        let elapsed = jiff::SignedDuration::try_from(elapsed).unwrap_or(jiff::SignedDuration::MAX);
        self.start
            .checked_add(elapsed)
            .unwrap_or(jiff::Timestamp::MAX)
    }
}

/// `ts` as Kubernetes writes timestamps: RFC 3339 in UTC, second precision.
pub(crate) fn format(ts: jiff::Timestamp) -> String {
    thread_local! {
        // Every create stamps the time; formatting once per second (per
        // thread) is enough at second precision.
        static LAST: std::cell::RefCell<(i64, String)> =
            const { std::cell::RefCell::new((i64::MIN, String::new())) };
    }
    let second = ts.as_second();
    LAST.with_borrow_mut(|(at, text)| {
        if *at != second {
            *at = second;
            *text = ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        }
        text.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_tokio_clock_moves_with_paused_time() {
        let start: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let clock = TokioClock::starting_at(start);
        assert_eq!(format(clock.now()), "2026-01-01T00:00:00Z");
        tokio::time::advance(std::time::Duration::from_secs(90)).await;
        assert_eq!(format(clock.now()), "2026-01-01T00:01:30Z");
    }
}
