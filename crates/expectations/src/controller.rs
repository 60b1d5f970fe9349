//! `ControllerExpectations`: the per-controller-key store and its operations.

use std::collections::HashSet;
use std::time::Duration;

use dashmap::DashMap;
use tokio::time::Instant;

use crate::record::{ExpiryReport, Record};
use crate::stats::StatsCounters;
use crate::{Expectation, ExpectationStats};

/// How long expectations wait for the informer before the controller is
/// allowed to act anyway: 5 minutes, as upstream's `ExpectationsTimeout`.
pub const DEFAULT_EXPECTATIONS_TTL: Duration = Duration::from_secs(5 * 60);

/// Creations and deletions each controller is waiting to see in its
/// informer cache, keyed by controller key (`namespace/name`).
///
/// See the [crate documentation](crate) for the concept and the two ways of
/// counting creations. In short, per controller key it keeps an `add` and a
/// `del` counter, the time they were set, the pod keys of expected
/// deletions and, optionally, the identities of created objects.
///
/// # Guarantees
///
/// - Thread-safe: all methods take `&self`; share it in an `Arc`. Every
///   operation on one key is atomic with respect to the others (a sharded
///   lock, never held across an `.await`: nothing here is async).
/// - Never panics: any string is a valid key, unknown keys are no-ops,
///   counters saturate instead of overflowing.
/// - Time comes from [`tokio::time::Instant`], so in tests with paused tokio
///   time (`#[tokio::test(start_paused = true)]`) `tokio::time::advance`
///   moves expectations towards their TTL. Outside a tokio runtime it is the
///   system's monotonic clock.
/// - Records are only removed by [`delete_expectations`]; an expired record
///   stays (and stays satisfied) until it is replaced or deleted, as
///   upstream.
///
/// [`delete_expectations`]: Self::delete_expectations
#[derive(Debug)]
pub struct ControllerExpectations {
    records: DashMap<String, Record>,
    ttl: Duration,
    stats: StatsCounters,
}

impl Default for ControllerExpectations {
    fn default() -> Self {
        Self::new()
    }
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl ControllerExpectations {
    /// An empty store with the default TTL of 5 minutes
    /// ([`DEFAULT_EXPECTATIONS_TTL`]).
    pub fn new() -> Self {
        Self::with_ttl(DEFAULT_EXPECTATIONS_TTL)
    }

    /// An empty store whose expectations expire once they are strictly
    /// older than `ttl`.
    pub fn with_ttl(ttl: Duration) -> Self {
        Self {
            records: DashMap::new(),
            ttl,
            stats: StatsCounters::default(),
        }
    }

    /// The TTL after which unfulfilled expectations count as satisfied.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// A copy of the expectations for `key`, or `None` if none were set (or
    /// they were deleted). Expired expectations are still returned.
    pub fn get_expectations(&self, key: &str) -> Option<Expectation> {
        self.records.get(key).map(|record| record.snapshot())
    }

    /// Whether the controller for `key` may act on its cache: `true` when
    /// its expectations are fulfilled (`add <= 0 && del <= 0`), when they are
    /// strictly older than the TTL, or when there are none. Only "present,
    /// unfulfilled and not expired" gives `false`.
    ///
    /// When this finds an unfulfilled expectation expired it logs a warning
    /// and counts it (and any lost tracked creations and deletions) in
    /// [`stats`](Self::stats), once per expectation.
    pub fn satisfied(&self, key: &str) -> bool {
        let now = Instant::now();
        let Some(mut record) = self.records.get_mut(key) else {
            tracing::trace!(key, "no expectations recorded; sync");
            return true;
        };
        if record.fulfilled() {
            tracing::trace!(key, "expectations fulfilled");
            return true;
        }
        if record.expired(now, self.ttl) {
            let report = record.take_expiry_report(now, self.ttl);
            drop(record);
            if let Some(report) = report {
                self.report_expiry(key, report);
            }
            return true;
        }
        tracing::trace!(key, "still waiting on expectations");
        false
    }

    /// Removes everything recorded for `key` (counters, pending deletion
    /// keys, creation identities). Call it when the controller object is
    /// gone. Nothing is reported as lost.
    pub fn delete_expectations(&self, key: &str) {
        self.records.remove(key);
    }

    /// Replaces the expectations for `key` with `add` creations and `del`
    /// deletions, counted without identities, and restarts the TTL.
    ///
    /// Anything recorded before for `key` is dropped, including pending
    /// deletion keys: [`deletion_observed`](Self::deletion_observed) only
    /// lowers `del` for keys given to [`expect_deletions`](Self::expect_deletions),
    /// so count-only deletions are observed with
    /// [`lower(key, 0, 1)`](Self::lower).
    pub fn set_expectations(&self, key: &str, add: i64, del: i64) {
        self.replace(key, Record::new(add, del, Instant::now()));
    }

    /// Expects `adds` creations counted without identities: the same as
    /// `set_expectations(key, adds, 0)`, so it also resets `del` to 0 and
    /// restarts the TTL. Each [`creation_observed`](Self::creation_observed)
    /// or [`creation_observed_id`](Self::creation_observed_id) lowers `add`
    /// by one.
    pub fn expect_creations(&self, key: &str, adds: usize) {
        self.replace(key, Record::new(count(adds), 0, Instant::now()));
    }

    /// Expects `adds` creations tracked by identity (beyond upstream): like
    /// [`expect_creations`](Self::expect_creations), but
    /// [`creation_observed_id`](Self::creation_observed_id) only lowers `add`
    /// for objects the controller recorded with
    /// [`record_creation`](Self::record_creation), once each, and recorded
    /// objects never observed are reported as lost when the expectation
    /// expires. Resets `del` to 0 and restarts the TTL.
    pub fn expect_tracked_creations(&self, key: &str, adds: usize) {
        let record = Record::new(count(adds), 0, Instant::now()).with_tracked_creations();
        self.replace(key, record);
    }

    /// Expects the deletion of exactly these pods (`namespace/name` keys).
    /// Duplicates collapse: `del` becomes the number of distinct keys; `add`
    /// is reset to 0 and the TTL restarts. Only
    /// [`deletion_observed`](Self::deletion_observed) for one of these keys
    /// lowers `del`, once per key.
    ///
    /// Replacing expectations that still wait for deletions logs a warning
    /// (upstream logs "Clobbering existing delete keys"); this happens when a
    /// new scale-down starts after the previous one expired.
    pub fn expect_deletions<I, K>(&self, key: &str, pod_keys: I)
    where
        I: IntoIterator<Item = K>,
        K: Into<String>,
    {
        let keys: HashSet<String> = pod_keys.into_iter().map(Into::into).collect();
        let record = Record::new(0, count(keys.len()), Instant::now()).with_pending_deletions(keys);
        self.replace(key, record);
    }

    /// Adds `add` and `del` to the counters of `key` (saturating). No-op if
    /// `key` has no expectations. Does not restart the TTL.
    pub fn raise(&self, key: &str, add: i64, del: i64) {
        if let Some(mut record) = self.records.get_mut(key) {
            record.add_counts(add, del);
        }
    }

    /// Subtracts `add` and `del` from the counters of `key` (saturating).
    /// Counters may go below zero, as upstream. No-op if `key` has no
    /// expectations. Does not restart the TTL.
    pub fn lower(&self, key: &str, add: i64, del: i64) {
        if let Some(mut record) = self.records.get_mut(key) {
            record.subtract_counts(add, del);
        }
    }

    /// Lowers the expected creations of `key` by one, whatever the mode:
    /// upstream's `CreationObserved`. No-op if `key` has no expectations.
    ///
    /// Count-only controllers call it from the informer's add handler. Every
    /// controller also calls it (or [`lower`](Self::lower)) for each create
    /// that failed or was never attempted, since the informer will never
    /// show those objects.
    pub fn creation_observed(&self, key: &str) {
        self.lower(key, 1, 0);
    }

    /// The informer showed a new object `id` owned by `key`; `id` is whatever
    /// identity the controller passes to [`record_creation`](Self::record_creation)
    /// (the UID is best: it is never reused).
    ///
    /// - Count-only expectations: lowers `add` by one, like
    ///   [`creation_observed`](Self::creation_observed).
    /// - Tracked expectations: lowers `add` by one only if `id` was recorded
    ///   and not counted yet. An `id` not recorded (yet) is remembered, so a
    ///   later `record_creation` of it counts it then (the watch event may
    ///   beat the create response); if it is never recorded it was created
    ///   by someone else and never counts.
    /// - No expectations for `key`: no-op.
    pub fn creation_observed_id(&self, key: &str, id: &str) {
        let Some(mut record) = self.records.get_mut(key) else {
            return;
        };
        let counts = match record.creations_mut() {
            None => true,
            Some(tracker) => tracker.observe(id),
        };
        if counts {
            record.subtract_counts(1, 0);
        }
        tracing::trace!(key, id, counted = counts, "creation observed");
    }

    /// The controller created object `id` for `key` (call it after the
    /// create call returned the object). Only meaningful for expectations
    /// set with [`expect_tracked_creations`](Self::expect_tracked_creations);
    /// a no-op otherwise, and a no-op for an `id` already recorded. If the
    /// informer already showed `id`, the creation is counted now.
    pub fn record_creation(&self, key: &str, id: &str) {
        let Some(mut record) = self.records.get_mut(key) else {
            return;
        };
        let counts = match record.creations_mut() {
            None => {
                tracing::debug!(
                    key,
                    id,
                    "record_creation without tracked creation expectations; ignored"
                );
                false
            }
            Some(tracker) => tracker.record(id),
        };
        if counts {
            record.subtract_counts(1, 0);
        }
    }

    /// The informer showed pod `pod_key` deleted, or terminating (with a
    /// deletion timestamp). Lowers `del` by one only if `pod_key` was passed
    /// to [`expect_deletions`](Self::expect_deletions) and has not been
    /// observed since, so a pod seen terminating and then deleted counts
    /// once. Unknown keys and pods are ignored.
    pub fn deletion_observed(&self, key: &str, pod_key: &str) {
        let Some(mut record) = self.records.get_mut(key) else {
            return;
        };
        if record.take_pending_deletion(pod_key) {
            record.subtract_counts(0, 1);
            tracing::trace!(key, pod_key, "expected deletion observed");
        }
    }

    /// Pod keys given to [`expect_deletions`](Self::expect_deletions) for
    /// `key` whose deletion has not been observed, sorted. Empty if none (or
    /// no expectations). Upstream's `GetUIDs`.
    pub fn pending_deletions(&self, key: &str) -> Vec<String> {
        self.records
            .get(key)
            .map(|record| record.pending_deletions())
            .unwrap_or_default()
    }

    /// Identities passed to [`record_creation`](Self::record_creation) for
    /// `key` that the informer has not shown yet, sorted. Empty if none.
    pub fn pending_creations(&self, key: &str) -> Vec<String> {
        self.records
            .get(key)
            .map(|record| record.outstanding_creations())
            .unwrap_or_default()
    }

    /// Counters of expired expectations and lost creations and deletions.
    pub fn stats(&self) -> ExpectationStats {
        self.stats.snapshot()
    }

    /// Recorded creations never observed before their expectation expired
    /// (shorthand for `stats().lost_creations`).
    pub fn lost_creations(&self) -> u64 {
        self.stats.snapshot().lost_creations
    }

    /// Number of controller keys with expectations (expired ones included).
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// `true` if no controller key has expectations.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    fn replace(&self, key: &str, record: Record) {
        let now = Instant::now();
        let Some(mut old) = self.records.insert(key.to_owned(), record) else {
            return;
        };
        if let Some(report) = old.take_expiry_report(now, self.ttl) {
            self.report_expiry(key, report);
        } else if !old.expiry_reported() && old.awaits_tracked() {
            tracing::warn!(
                key,
                pending_deletions = ?old.pending_deletions(),
                pending_creations = ?old.outstanding_creations(),
                "replacing expectations that are still waiting for tracked objects"
            );
        }
    }

    fn report_expiry(&self, key: &str, report: ExpiryReport) {
        self.stats
            .record_expiry(report.lost_creations.len(), report.lost_deletions.len());
        tracing::warn!(
            key,
            add = report.add,
            del = report.del,
            lost_creations = ?report.lost_creations,
            lost_deletions = ?report.lost_deletions,
            ttl = ?self.ttl,
            "expectations expired before the informer showed every expected change; \
             a watch event may have been lost"
        );
    }
}
