//! Plain counters of a controller, readable without a metrics registry
//! (tests, the demo).

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters shared by a controller's workers.
#[derive(Debug, Default)]
pub(crate) struct SyncCounters {
    stale_sync_skips: AtomicU64,
    /// The expectations' lost-creation total already reported, so each
    /// loss is reported once even when several workers notice it.
    lost_creations_reported: AtomicU64,
}

impl SyncCounters {
    pub(crate) fn stale_sync_skip(&self) {
        self.stale_sync_skips.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn stale_sync_skips(&self) -> u64 {
        self.stale_sync_skips.load(Ordering::Relaxed)
    }

    /// Given the current total of lost creations, how many are new since the
    /// last call (0 if another worker reported them already).
    pub(crate) fn newly_lost_creations(&self, total: u64) -> u64 {
        let reported = self
            .lost_creations_reported
            .fetch_max(total, Ordering::Relaxed);
        total.saturating_sub(reported)
    }

    pub(crate) fn lost_creations_reported(&self) -> u64 {
        self.lost_creations_reported.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_lost_creation_is_reported_once() {
        let c = SyncCounters::default();
        assert_eq!(c.newly_lost_creations(0), 0);
        assert_eq!(c.newly_lost_creations(2), 2);
        assert_eq!(c.newly_lost_creations(2), 0);
        // A worker with an older reading reports nothing.
        assert_eq!(c.newly_lost_creations(1), 0);
        assert_eq!(c.newly_lost_creations(3), 1);
        assert_eq!(c.lost_creations_reported(), 3);
    }
}
