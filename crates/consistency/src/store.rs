//! `ConsistencyStore`: the owners' unobserved writes and the check before a
//! sync.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use tokio::time::Instant;

use crate::cache::ObservedVersions;
use crate::record::{OwnerRecord, Pending};
use crate::stats::StatsCounters;
use crate::{ConsistencyStats, GroupResource, NotObservedYet};

/// How long an owner waits at most for a cache to show one of the
/// controller's writes before the store lets it through anyway: 30 seconds.
///
/// A healthy informer shows a write within milliseconds to a few seconds.
/// The bound exists for the cases where the version a cache reports never
/// reaches the written one (see the [crate documentation](crate)), so an
/// owner can never be stuck for good.
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(30);

/// Remembers, per owner, the newest resourceVersion this controller wrote
/// for each resource, and tells a sync whether the informer caches have
/// caught up with those writes.
///
/// See the [crate documentation](crate) for the idea and an example.
///
/// # Guarantees
///
/// - Cheap to clone; all clones share the same state. Thread-safe: every
///   method takes `&self`. No lock is held while a cache is queried, and
///   none across an `.await` (nothing here is async).
/// - Never panics; any string is a valid owner key and resourceVersion.
/// - **Bounded**: an owner is reported not ready for at most the maximum
///   wait ([`DEFAULT_MAX_WAIT`] unless set with
///   [`ConsistencyStoreBuilder::max_wait`]) after its oldest unobserved
///   write; then the store logs a warning, forgets that write and counts it
///   in [`stats`](Self::stats) (`gave_up`). Time comes from
///   [`tokio::time::Instant`], so paused test time drives it.
/// - **Fail-open** on what it cannot judge: a write of a resource without a
///   registered cache is ignored, an empty resourceVersion is ignored, and
///   a written version that cannot be ordered against the cache's
///   (non-integer resourceVersions) counts as observed, as does a write
///   whose cache does not report versions yet
///   ([`ObservedVersions::reports_versions`]). Each is counted.
/// - A [`disabled`](Self::disabled) store remembers nothing and is always
///   ready: upstream's behaviour without read-own-writes.
#[derive(Clone)]
pub struct ConsistencyStore {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    caches: Vec<(GroupResource, Arc<dyn ObservedVersions>)>,
    owners: DashMap<String, OwnerRecord>,
    max_wait: Duration,
    stats: StatsCounters,
}

impl fmt::Debug for ConsistencyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.inner {
            None => f.write_str("ConsistencyStore(disabled)"),
            Some(inner) => f
                .debug_struct("ConsistencyStore")
                .field(
                    "resources",
                    &inner.caches.iter().map(|(gr, _)| gr).collect::<Vec<_>>(),
                )
                .field("owners", &inner.owners.len())
                .field("max_wait", &inner.max_wait)
                .finish(),
        }
    }
}

/// Builds a [`ConsistencyStore`]: register the cache of every resource the
/// controller writes, then [`build`](Self::build).
pub struct ConsistencyStoreBuilder {
    caches: Vec<(GroupResource, Arc<dyn ObservedVersions>)>,
    max_wait: Duration,
}

impl fmt::Debug for ConsistencyStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConsistencyStoreBuilder")
            .field(
                "resources",
                &self.caches.iter().map(|(gr, _)| gr).collect::<Vec<_>>(),
            )
            .field("max_wait", &self.max_wait)
            .finish()
    }
}

impl ConsistencyStoreBuilder {
    /// Registers the cache that shows writes of `resource` (for example an
    /// informer's [`Store`](ctrlkit_informer::Store)). Registering a
    /// resource again replaces its cache.
    pub fn cache(
        mut self,
        resource: GroupResource,
        cache: impl ObservedVersions + 'static,
    ) -> Self {
        let cache: Arc<dyn ObservedVersions> = Arc::new(cache);
        match self.caches.iter_mut().find(|(gr, _)| *gr == resource) {
            Some(entry) => entry.1 = cache,
            None => self.caches.push((resource, cache)),
        }
        self
    }

    /// How long an owner waits at most for an unobserved write
    /// ([`DEFAULT_MAX_WAIT`] by default). `Duration::ZERO` never waits.
    pub fn max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = max_wait;
        self
    }

    /// The store.
    pub fn build(self) -> ConsistencyStore {
        ConsistencyStore {
            inner: Some(Arc::new(Inner {
                caches: self.caches,
                owners: DashMap::new(),
                max_wait: self.max_wait,
                stats: StatsCounters::default(),
            })),
        }
    }
}

/// One remembered write and what its cache said about it.
enum Verdict {
    Observed,
    Waiting(NotObservedYet),
}

impl ConsistencyStore {
    /// A builder with no caches and the default maximum wait.
    pub fn builder() -> ConsistencyStoreBuilder {
        ConsistencyStoreBuilder {
            caches: Vec::new(),
            max_wait: DEFAULT_MAX_WAIT,
        }
    }

    /// A store that remembers nothing and is always ready (read-own-writes
    /// turned off).
    pub fn disabled() -> Self {
        Self { inner: None }
    }

    /// `false` for a [`disabled`](Self::disabled) store.
    pub fn is_enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// The maximum wait; `None` for a disabled store.
    pub fn max_wait(&self) -> Option<Duration> {
        self.inner.as_ref().map(|inner| inner.max_wait)
    }

    /// The controller wrote an object of `resource` for `owner_key` (e.g.
    /// `namespace/name` of the owner) and the API server answered with
    /// `resource_version`.
    ///
    /// Keeps the highest version per owner and resource (a version that
    /// cannot be ordered against the remembered one is taken as the later
    /// write). The maximum wait runs from the oldest write not yet observed.
    /// Ignored (and counted as `unknown_resource`) if no cache is
    /// registered for `resource`; ignored if `resource_version` is empty.
    pub fn wrote_at(&self, owner_key: &str, resource: &GroupResource, resource_version: &str) {
        let Some(inner) = &self.inner else {
            return;
        };
        if resource_version.is_empty() {
            return;
        }
        let Some(cache) = inner.caches.iter().position(|(gr, _)| gr == resource) else {
            inner.stats.unknown_resource();
            tracing::debug!(
                owner_key,
                %resource,
                "write of a resource without a registered cache; not tracked"
            );
            return;
        };
        inner.owners.entry(owner_key.to_owned()).or_default().wrote(
            cache,
            resource_version,
            Instant::now(),
        );
    }

    /// Whether a sync of `owner_key` would see every write this controller
    /// recorded for it: `Ok(())` when each registered cache has observed
    /// the recorded version (or nothing is recorded), otherwise the first
    /// resource still behind.
    ///
    /// Writes found observed are forgotten, as are writes waiting longer
    /// than the maximum wait (logged as a warning and counted as
    /// `gave_up`) and writes whose versions cannot be ordered (counted as
    /// `incomparable`).
    ///
    /// # Errors
    /// [`NotObservedYet`] while a cache is behind: skip the sync and try
    /// again later (the informer event that shows the write usually
    /// enqueues the owner again).
    pub fn ensure_ready(&self, owner_key: &str) -> Result<(), NotObservedYet> {
        let Some(inner) = &self.inner else {
            return Ok(());
        };
        // Copied out so no map lock is held while the caches are queried.
        let pending: Vec<Pending> = match inner.owners.get(owner_key) {
            None => return Ok(()),
            Some(record) => record.pending().to_vec(),
        };
        let now = Instant::now();
        let mut settled = Vec::new();
        let mut first_waiting = None;
        for entry in pending {
            match inner.judge(owner_key, &entry, now) {
                Verdict::Observed => settled.push(entry),
                Verdict::Waiting(why) => {
                    first_waiting.get_or_insert(why);
                }
            }
        }
        if !settled.is_empty() {
            inner.owners.remove_if_mut(owner_key, |_, record| {
                for entry in &settled {
                    record.settle(entry.cache, &entry.version);
                }
                record.is_empty()
            });
        }
        match first_waiting {
            None => Ok(()),
            Some(why) => Err(why),
        }
    }

    /// Forgets everything recorded for `owner_key`; call it when the owner
    /// is deleted (a new owner with the same name starts clean).
    pub fn clear(&self, owner_key: &str) {
        if let Some(inner) = &self.inner {
            inner.owners.remove(owner_key);
        }
    }

    /// The writes recorded for `owner_key` and not yet found observed, as
    /// `(resource, resourceVersion)`, in registration order of the caches.
    pub fn pending(&self, owner_key: &str) -> Vec<(GroupResource, String)> {
        let Some(inner) = &self.inner else {
            return Vec::new();
        };
        let Some(record) = inner.owners.get(owner_key) else {
            return Vec::new();
        };
        let mut out: Vec<(usize, GroupResource, String)> = record
            .pending()
            .iter()
            .filter_map(|p| {
                let (gr, _) = inner.caches.get(p.cache)?;
                Some((p.cache, gr.clone(), p.version.clone()))
            })
            .collect();
        out.sort_by_key(|(cache, _, _)| *cache);
        out.into_iter().map(|(_, gr, rv)| (gr, rv)).collect()
    }

    /// Number of owners with recorded, not yet observed writes.
    pub fn len(&self) -> usize {
        self.inner.as_ref().map_or(0, |inner| inner.owners.len())
    }

    /// `true` when no owner has recorded, unobserved writes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Counters of fail-open decisions since the store was built.
    pub fn stats(&self) -> ConsistencyStats {
        self.inner
            .as_ref()
            .map_or_else(ConsistencyStats::default, |inner| inner.stats.snapshot())
    }
}

impl Inner {
    fn judge(&self, owner_key: &str, entry: &Pending, now: Instant) -> Verdict {
        // Indexes come from `caches`, which never changes after build.
        let Some((resource, cache)) = self.caches.get(entry.cache) else {
            return Verdict::Observed;
        };
        if !cache.reports_versions() {
            self.stats.unsynced();
            return Verdict::Observed;
        }
        match cache.has_observed(&entry.version) {
            Ok(true) => Verdict::Observed,
            Err(error) => {
                self.stats.incomparable();
                tracing::debug!(owner_key, %resource, %error, "cannot order resourceVersions; not waiting");
                Verdict::Observed
            }
            Ok(false) => {
                let waited = now.saturating_duration_since(entry.since);
                if waited >= self.max_wait {
                    self.stats.gave_up();
                    tracing::warn!(
                        owner_key,
                        %resource,
                        written = entry.version,
                        observed = cache.latest_observed().as_deref().unwrap_or(""),
                        ?waited,
                        "the cache has not shown this controller's write within the maximum wait; \
                         syncing anyway"
                    );
                    Verdict::Observed
                } else {
                    Verdict::Waiting(NotObservedYet {
                        resource: resource.clone(),
                        written: entry.version.clone(),
                        observed: cache.latest_observed(),
                        waited,
                    })
                }
            }
        }
    }
}
