//! "Does my cache show everything the server holds now?" without waiting
//! for a watch event: a consistent (quorum) list of the informer's
//! resource, with the informer's own selectors, compared object by object
//! with the cache.
//!
//! A cache's resourceVersion only moves when one of its objects changes
//! (bookmarks do not count), so "the cache reached version T" never
//! becomes true in a quiet cluster. A consistent read at version L ≥ T
//! answers the same question at once: the cache reflects everything up to
//! L when it holds every listed object at the listed version or newer,
//! and holds no object the list no longer has unless it changed after L.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;

use crate::key::ObjectKey;
use crate::resource_version::{CompareError, compare_resource_versions};

/// What a consistent list of an informer's resource showed: its
/// resourceVersion and each object's UID and resourceVersion. Made by
/// [`Store::consistent_read`](crate::Store::consistent_read), checked by
/// [`Store::reflects`](crate::Store::reflects).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConsistentRead {
    pub(crate) resource_version: String,
    pub(crate) items: HashMap<ObjectKey, Listed>,
}

/// One listed object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Listed {
    pub(crate) uid: Option<String>,
    pub(crate) resource_version: String,
}

impl ConsistentRead {
    /// The list's resourceVersion.
    pub fn resource_version(&self) -> &str {
        &self.resource_version
    }

    /// How many objects the list held.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the list was empty.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The read a consistent list at `resource_version` returning
    /// `objects` gives; for tests and custom sources.
    pub fn from_objects<'a, K: Resource + 'a>(
        resource_version: impl Into<String>,
        objects: impl IntoIterator<Item = &'a K>,
    ) -> Self {
        let mut read = Self {
            resource_version: resource_version.into(),
            items: HashMap::new(),
        };
        for o in objects {
            read.insert(o.meta());
        }
        read
    }

    /// Records a listed object (one without a name is skipped: it cannot
    /// be in a cache).
    pub(crate) fn insert(&mut self, meta: &ObjectMeta) {
        let Some(name) = meta.name.as_deref() else {
            return;
        };
        self.items.insert(
            ObjectKey::new(meta.namespace.clone().unwrap_or_default(), name),
            Listed {
                uid: meta.uid.clone(),
                resource_version: meta.resource_version.clone().unwrap_or_default(),
            },
        );
    }

    /// Whether a cache holding `cached` (key → UID, resourceVersion)
    /// reflects this read: every listed object is cached with the same UID
    /// at the listed version or newer, and every cached object the list
    /// does not have was written after the list (it was created since).
    /// An object the list has but the cache lacks, or one the cache still
    /// holds that was deleted before the list, means "not yet".
    pub(crate) fn reflected_by<'a>(
        &self,
        cached: impl Iterator<Item = (&'a ObjectKey, Option<&'a str>, &'a str)>,
    ) -> Result<bool, CompareError> {
        let mut seen = 0usize;
        for (key, uid, rv) in cached {
            let written_since =
                |rv| compare_resource_versions(rv, &self.resource_version).map(Ordering::is_gt);
            match self.items.get(key) {
                Some(listed) if listed.uid.as_deref() == uid => {
                    if compare_resource_versions(rv, &listed.resource_version)?.is_lt() {
                        return Ok(false);
                    }
                    seen += 1;
                }
                // The listed object deleted and created again since.
                Some(_) if written_since(rv)? => seen += 1,
                // Created since the list.
                None if written_since(rv)? => {}
                _ => return Ok(false),
            }
        }
        Ok(seen == self.items.len())
    }
}

/// Makes a consistent read of an informer's resource.
pub(crate) type ReadFn =
    Arc<dyn Fn() -> BoxFuture<'static, Result<ConsistentRead, kube::Error>> + Send + Sync>;

#[cfg(test)]
mod tests {
    use super::*;

    fn read(rv: &str, items: &[(&str, &str, &str)]) -> ConsistentRead {
        ConsistentRead {
            resource_version: rv.into(),
            items: items
                .iter()
                .map(|(name, uid, rv)| {
                    (
                        ObjectKey::new("ns", *name),
                        Listed {
                            uid: Some((*uid).into()),
                            resource_version: (*rv).into(),
                        },
                    )
                })
                .collect(),
        }
    }

    fn check(read: &ConsistentRead, cache: &[(&str, &str, &str)]) -> Result<bool, CompareError> {
        let keys: Vec<_> = cache
            .iter()
            .map(|(n, u, r)| (ObjectKey::new("ns", *n), *u, *r))
            .collect();
        read.reflected_by(keys.iter().map(|(k, u, r)| (k, Some(*u), *r)))
    }

    #[test]
    fn a_cache_reflects_a_read_when_it_holds_every_listed_object_at_that_version_or_newer() {
        let r = read("50", &[("a", "ua", "10"), ("b", "ub", "20")]);
        assert_eq!(check(&r, &[("a", "ua", "10"), ("b", "ub", "20")]), Ok(true));
        assert_eq!(check(&r, &[("a", "ua", "10"), ("b", "ub", "60")]), Ok(true));
        // Created after the list: fine.
        assert_eq!(
            check(
                &r,
                &[("a", "ua", "10"), ("b", "ub", "20"), ("c", "uc", "55")]
            ),
            Ok(true)
        );
    }

    #[test]
    fn a_missing_an_older_or_a_deleted_object_is_not_reflected_yet() {
        let r = read("50", &[("a", "ua", "10"), ("b", "ub", "20")]);
        assert_eq!(check(&r, &[("a", "ua", "10")]), Ok(false), "b not seen");
        assert_eq!(
            check(&r, &[("a", "ua", "10"), ("b", "ub", "15")]),
            Ok(false),
            "b at an older version"
        );
        assert_eq!(
            check(
                &r,
                &[("a", "ua", "10"), ("b", "ub", "20"), ("c", "uc", "30")]
            ),
            Ok(false),
            "c was deleted before the list"
        );
        assert_eq!(
            check(&r, &[("a", "ua", "10"), ("b", "old", "5")]),
            Ok(false),
            "b re-created before the list, the cache holds the old one"
        );
        assert!(check(&r, &[("a", "ua", "x")]).is_err());
    }
}
