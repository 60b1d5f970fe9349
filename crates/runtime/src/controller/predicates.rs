//! Ready-made update filters for
//! [`ControllerBuilder::owner_update_filter`](crate::ControllerBuilder::owner_update_filter)
//! and [`Owns::update_filter`](crate::Owns::update_filter), as
//! controller-runtime's `predicate` package has them: each answers whether
//! an update from `old` to `new` matters. Combine them with `||` and `&&`
//! in a closure.
//!
//! ```
//! use ctrlkit_runtime::predicates::{generation_changed, labels_changed};
//! use k8s_openapi::api::core::v1::ConfigMap;
//!
//! let filter = |old: &ConfigMap, new: &ConfigMap| generation_changed(old, new) || labels_changed(old, new);
//! let mut old = ConfigMap::default();
//! old.metadata.generation = Some(1);
//! let mut new = old.clone();
//! new.metadata.resource_version = Some("2".into()); // e.g. a status write
//! assert!(!filter(&old, &new));
//! new.metadata.labels = Some([("tier".to_string(), "web".to_string())].into());
//! assert!(filter(&old, &new));
//! ```

use kube::Resource;

/// `metadata.generation` changed: the API server bumps it on spec changes
/// (for custom resources with a status subresource, on every change but
/// of status and metadata), not on status writes. controller-runtime's
/// `GenerationChangedPredicate`.
pub fn generation_changed<K: Resource>(old: &K, new: &K) -> bool {
    old.meta().generation != new.meta().generation
}

/// `metadata.labels` changed (an absent and an empty map are the same).
/// controller-runtime's `LabelChangedPredicate`.
pub fn labels_changed<K: Resource>(old: &K, new: &K) -> bool {
    old.meta().labels.as_ref().filter(|m| !m.is_empty())
        != new.meta().labels.as_ref().filter(|m| !m.is_empty())
}

/// `metadata.annotations` changed (an absent and an empty map are the
/// same). controller-runtime's `AnnotationChangedPredicate`.
pub fn annotations_changed<K: Resource>(old: &K, new: &K) -> bool {
    old.meta().annotations.as_ref().filter(|m| !m.is_empty())
        != new.meta().annotations.as_ref().filter(|m| !m.is_empty())
}
