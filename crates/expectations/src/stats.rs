//! Counters of expectations that ran out, readable through the API.

use std::sync::atomic::{AtomicU64, Ordering};

/// What [`ControllerExpectations`](crate::ControllerExpectations) has seen
/// expire since it was built. The counters only grow.
///
/// Expiry is noticed lazily: an expectation is counted when
/// [`satisfied`](crate::ControllerExpectations::satisfied) finds it expired
/// and unfulfilled, or when new expectations replace it in that state. Each
/// expectation is counted at most once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExpectationStats {
    /// Expectations that reached their TTL before being fulfilled.
    pub expired: u64,
    /// Creations recorded with `record_creation` that the informer never
    /// showed before their expectation expired: most likely a lost watch
    /// event (or an object deleted before it was seen).
    pub lost_creations: u64,
    /// Pod keys passed to `expect_deletions` whose deletion was never
    /// observed before their expectation expired.
    pub lost_deletions: u64,
}

#[derive(Debug, Default)]
pub(crate) struct StatsCounters {
    expired: AtomicU64,
    lost_creations: AtomicU64,
    lost_deletions: AtomicU64,
}

impl StatsCounters {
    pub(crate) fn record_expiry(&self, lost_creations: usize, lost_deletions: usize) {
        self.expired.fetch_add(1, Ordering::Relaxed);
        self.lost_creations
            .fetch_add(as_u64(lost_creations), Ordering::Relaxed);
        self.lost_deletions
            .fetch_add(as_u64(lost_deletions), Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> ExpectationStats {
        ExpectationStats {
            expired: self.expired.load(Ordering::Relaxed),
            lost_creations: self.lost_creations.load(Ordering::Relaxed),
            lost_deletions: self.lost_deletions.load(Ordering::Relaxed),
        }
    }
}

fn as_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}
