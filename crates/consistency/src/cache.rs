//! What the store needs to know about an informer cache.

use ctrlkit_informer::{CompareError, Store};

/// A cache that can say whether it already reflects a given
/// resourceVersion: the question read-own-writes asks after every write.
///
/// Implemented for [`ctrlkit_informer::Store`]. Implement it for another
/// cache by tracking the newest resourceVersion it has applied (from
/// objects, and from list results and watch bookmarks if your watcher
/// exposes them).
pub trait ObservedVersions: Send + Sync {
    /// `Ok(true)` once the cache reflects `resource_version` or a newer
    /// one, `Ok(false)` before. An error means the two versions cannot be
    /// ordered (Kubernetes calls resourceVersions opaque; etcd-backed API
    /// servers use integers); the store then treats the write as observed.
    ///
    /// # Errors
    /// [`CompareError`] when the versions cannot be ordered.
    fn has_observed(&self, resource_version: &str) -> Result<bool, CompareError>;

    /// The newest resourceVersion the cache reflects, if any; only used in
    /// messages.
    fn latest_observed(&self) -> Option<String>;

    /// Whether the cache's answers can be relied on yet. While `false`
    /// (an informer before its first complete list), writes of this
    /// resource are not waited for, as upstream skips a store that reports
    /// no sync version. Defaults to `true`.
    fn reports_versions(&self) -> bool {
        true
    }
}

impl<K: kube::Resource + Send + Sync> ObservedVersions for Store<K> {
    fn has_observed(&self, resource_version: &str) -> Result<bool, CompareError> {
        self.has_observed_resource_version(resource_version)
    }

    fn latest_observed(&self) -> Option<String> {
        self.last_sync_resource_version()
    }

    /// Only once the informer has completed its first list (a store fed by
    /// hand without a list, as in unit tests, is never waited for).
    fn reports_versions(&self) -> bool {
        self.has_synced()
    }
}
