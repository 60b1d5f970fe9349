//! Why an owner is not ready to be synced.

use std::time::Duration;

use crate::GroupResource;

/// An owner's sync would read a cache that has not yet observed the
/// controller's own last write: [`ConsistencyStore::ensure_ready`]'s
/// answer when the sync should wait.
///
/// [`ConsistencyStore::ensure_ready`]: crate::ConsistencyStore::ensure_ready
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the {resource} cache has not observed resourceVersion {written} written by this controller \
     yet (it reflects {observed}); waited {waited:?}",
    observed = .observed.as_deref().unwrap_or("nothing")
)]
pub struct NotObservedYet {
    /// The resource whose cache is behind.
    pub resource: GroupResource,
    /// The newest resourceVersion the controller wrote for this owner.
    pub written: String,
    /// The newest resourceVersion the cache reflects, if any.
    pub observed: Option<String>,
    /// How long the oldest unobserved write of this resource has been
    /// waiting.
    pub waited: Duration,
}
