//! The mutable state kept for one controller key.

use std::collections::HashSet;
use std::time::Duration;

use tokio::time::Instant;

use crate::Expectation;
use crate::creations::CreationTracker;

/// One controller's expectations. Replaced as a whole by every
/// `set`/`expect_*` call; `raise`/`lower` and observations edit it in place.
#[derive(Debug)]
pub(crate) struct Record {
    add: i64,
    del: i64,
    set_at: Instant,
    /// Pod keys whose deletion is expected and not yet observed.
    pending_deletions: HashSet<String>,
    /// `Some` when creations are tracked by identity.
    creations: Option<CreationTracker>,
    /// Set once the expiry of this record has been reported, so it is
    /// counted only once.
    expiry_reported: bool,
}

/// What was still outstanding when a record was found expired.
#[derive(Debug)]
pub(crate) struct ExpiryReport {
    pub(crate) add: i64,
    pub(crate) del: i64,
    pub(crate) lost_creations: Vec<String>,
    pub(crate) lost_deletions: Vec<String>,
}

impl Record {
    pub(crate) fn new(add: i64, del: i64, now: Instant) -> Self {
        Self {
            add,
            del,
            set_at: now,
            pending_deletions: HashSet::new(),
            creations: None,
            expiry_reported: false,
        }
    }

    pub(crate) fn with_tracked_creations(mut self) -> Self {
        self.creations = Some(CreationTracker::default());
        self
    }

    pub(crate) fn with_pending_deletions(mut self, keys: HashSet<String>) -> Self {
        self.pending_deletions = keys;
        self
    }

    pub(crate) fn fulfilled(&self) -> bool {
        self.add <= 0 && self.del <= 0
    }

    /// Strictly older than `ttl`, as upstream.
    pub(crate) fn expired(&self, now: Instant, ttl: Duration) -> bool {
        now.saturating_duration_since(self.set_at) > ttl
    }

    /// Saturating, so no sequence of calls can overflow and panic.
    pub(crate) fn add_counts(&mut self, add: i64, del: i64) {
        self.add = self.add.saturating_add(add);
        self.del = self.del.saturating_add(del);
    }

    pub(crate) fn subtract_counts(&mut self, add: i64, del: i64) {
        self.add = self.add.saturating_sub(add);
        self.del = self.del.saturating_sub(del);
    }

    pub(crate) fn tracks_creations(&self) -> bool {
        self.creations.is_some()
    }

    /// `None` when creations are not tracked by identity for this key.
    pub(crate) fn creations_mut(&mut self) -> Option<&mut CreationTracker> {
        self.creations.as_mut()
    }

    /// Removes `pod_key` from the pending deletions; `true` if it was there.
    pub(crate) fn take_pending_deletion(&mut self, pod_key: &str) -> bool {
        self.pending_deletions.remove(pod_key)
    }

    pub(crate) fn pending_deletions(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.pending_deletions.iter().cloned().collect();
        keys.sort_unstable();
        keys
    }

    pub(crate) fn outstanding_creations(&self) -> Vec<String> {
        self.creations
            .as_ref()
            .map(CreationTracker::outstanding)
            .unwrap_or_default()
    }

    /// Whether something tracked by identity is still awaited.
    pub(crate) fn awaits_tracked(&self) -> bool {
        !self.pending_deletions.is_empty() || !self.outstanding_creations().is_empty()
    }

    pub(crate) fn expiry_reported(&self) -> bool {
        self.expiry_reported
    }

    /// The report for an expired, unfulfilled record, once per record.
    pub(crate) fn take_expiry_report(
        &mut self,
        now: Instant,
        ttl: Duration,
    ) -> Option<ExpiryReport> {
        if self.expiry_reported || self.fulfilled() || !self.expired(now, ttl) {
            return None;
        }
        self.expiry_reported = true;
        Some(ExpiryReport {
            add: self.add,
            del: self.del,
            lost_creations: self.outstanding_creations(),
            lost_deletions: self.pending_deletions(),
        })
    }

    pub(crate) fn snapshot(&self) -> Expectation {
        Expectation {
            add: self.add,
            del: self.del,
            set_at: self.set_at,
            tracks_creations: self.tracks_creations(),
        }
    }
}
