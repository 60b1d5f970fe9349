//! Counters of the store's fail-open decisions.

use std::sync::atomic::{AtomicU64, Ordering};

/// How often a [`ConsistencyStore`](crate::ConsistencyStore) let an owner
/// through without proof that its writes were observed. Totals since the
/// store was built; all clones of a store share them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsistencyStats {
    /// Writes given up on because the cache had not observed them within
    /// the maximum wait (each also logged as a warning).
    pub gave_up: u64,
    /// Writes treated as observed because the written and the observed
    /// resourceVersion could not be ordered.
    pub incomparable: u64,
    /// Writes ignored because no cache was registered for their resource.
    pub unknown_resource: u64,
    /// Writes not waited for because their cache did not report versions
    /// yet ([`ObservedVersions::reports_versions`](crate::ObservedVersions::reports_versions)).
    pub unsynced: u64,
}

#[derive(Debug, Default)]
pub(crate) struct StatsCounters {
    gave_up: AtomicU64,
    incomparable: AtomicU64,
    unknown_resource: AtomicU64,
    unsynced: AtomicU64,
}

impl StatsCounters {
    pub(crate) fn gave_up(&self) {
        self.gave_up.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn incomparable(&self) {
        self.incomparable.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn unknown_resource(&self) {
        self.unknown_resource.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn unsynced(&self) {
        self.unsynced.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> ConsistencyStats {
        ConsistencyStats {
            gave_up: self.gave_up.load(Ordering::Relaxed),
            incomparable: self.incomparable.load(Ordering::Relaxed),
            unknown_resource: self.unknown_resource.load(Ordering::Relaxed),
            unsynced: self.unsynced.load(Ordering::Relaxed),
        }
    }
}
