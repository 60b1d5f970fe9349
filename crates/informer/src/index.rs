//! Secondary indexes: named functions from an object to index keys, and the
//! ready-made ones controllers need.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use hashbrown::HashMap;
use kube::Resource;

use crate::controller_ref::controller_ref;
use crate::key::ObjectKey;

/// An index function: the keys under which an object is listed in one index.
///
/// It must be deterministic (the store calls it again on the stored object to
/// remove the old entries when the object changes) and cheap, since it runs
/// under the store's write lock for every change. Returning no keys leaves the
/// object out of that index.
pub type IndexFn<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

/// Name of the index built by [`index_by_namespace`].
pub const BY_NAMESPACE: &str = "by-namespace";

/// Name of the index built by [`index_by_controller_uid`].
pub const BY_CONTROLLER_UID: &str = "by-controller-uid";

/// Index function: the object's namespace (empty for cluster-scoped objects).
pub fn index_by_namespace<K: Resource>(obj: &K) -> Vec<String> {
    vec![obj.meta().namespace.clone().unwrap_or_default()]
}

/// Index function: the object's controller, for "which objects does this
/// owner control?" lookups.
///
/// An object with a controller ownerReference (`controller: true`) is indexed
/// under [`controller_index_key`]`(namespace, owner_uid)`; an object without
/// one is indexed under [`orphan_index_key`]`(namespace)`. A sync can then
/// fetch an owner's objects plus its namespace's orphans (candidates for
/// adoption) at a cost proportional to those objects, not to the namespace;
/// see [`Store::by_controller`](crate::Store::by_controller). Upstream
/// Kubernetes indexes pods the same way since 1.33.
///
/// The namespace is part of the key, so an object naming an owner UID from
/// another namespace (ownerReferences are namespace-local) is never returned
/// for that owner.
///
/// An object whose controller reference has an empty UID is in neither
/// list: it is not an orphan (it has a controller reference, so nobody may
/// adopt it) and no owner controls it (see
/// [`is_controlled_by`](crate::is_controlled_by)).
pub fn index_by_controller_uid<K: Resource>(obj: &K) -> Vec<String> {
    let meta = obj.meta();
    let ns = meta.namespace.as_deref().unwrap_or_default();
    match controller_ref(meta) {
        None => vec![orphan_index_key(ns)],
        Some(r) if r.uid.is_empty() => Vec::new(),
        Some(r) => vec![controller_index_key(ns, &r.uid)],
    }
}

/// The [`BY_CONTROLLER_UID`] key of objects in `namespace` controlled by the
/// owner with UID `owner_uid`: `namespace/owner_uid`.
pub fn controller_index_key(namespace: &str, owner_uid: &str) -> String {
    concat_key(&[namespace, "/", owner_uid])
}

/// The [`BY_CONTROLLER_UID`] key of objects in `namespace` that have no
/// controller: `namespace/` (the controller key with an empty UID, which no
/// real owner has).
pub fn orphan_index_key(namespace: &str) -> String {
    concat_key(&[namespace, "/"])
}

/// `parts` joined into one string allocated at its final size: index keys
/// are built on every change an informer applies, where `format!`'s
/// machinery costs more than the copying.
pub(crate) fn concat_key(parts: &[&str]) -> String {
    let mut key = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    for part in parts {
        key.push_str(part);
    }
    key
}

/// The objects under one index key, by object key. The index holds the
/// objects themselves (shared `Arc`s) so a lookup needs no second trip
/// through the store's maps.
pub(crate) type Bucket<K> = HashMap<ObjectKey, Arc<K>>;

/// One named index: the function and the key → objects map it maintains.
pub(crate) struct Index<K> {
    func: IndexFn<K>,
    name: String,
    entries: HashMap<String, Bucket<K>>,
}

impl<K> Index<K> {
    pub(crate) fn new(name: String, func: IndexFn<K>) -> Self {
        Self {
            func,
            name,
            entries: HashMap::new(),
        }
    }

    /// Runs the index function, treating a panic as "no keys" so a buggy
    /// function cannot leave the store half-updated.
    fn keys_of(&self, obj: &K) -> Vec<String> {
        match catch_unwind(AssertUnwindSafe(|| (self.func)(obj))) {
            Ok(keys) => keys,
            Err(_) => {
                tracing::error!(index = %self.name, "index function panicked; object left out of this index");
                Vec::new()
            }
        }
    }

    pub(crate) fn insert(&mut self, key: &ObjectKey, obj: &Arc<K>) {
        for k in self.keys_of(obj) {
            self.upsert(k, key, obj);
        }
    }

    pub(crate) fn remove(&mut self, key: &ObjectKey, obj: &K) {
        for k in self.keys_of(obj) {
            self.remove_entry(&k, key);
        }
    }

    /// Re-indexes the object under `key` after it changed from `old` to
    /// `new`. Under the index keys both versions have (most updates change
    /// no indexed value: a pod keeps its controller) the entry stays where
    /// it is and only its object is replaced; the object leaves the keys
    /// only `old` had and joins those only `new` has.
    pub(crate) fn update(&mut self, key: &ObjectKey, old: &K, new: &Arc<K>) {
        let new_keys = self.keys_of(new);
        for k in self.keys_of(old) {
            if !new_keys.contains(&k) {
                self.remove_entry(&k, key);
            }
        }
        for k in new_keys {
            self.upsert(k, key, new);
        }
    }

    /// Lists `obj` under `index_key`, replacing the object an entry for
    /// `key` held there; the key is copied only for a new entry.
    fn upsert(&mut self, index_key: String, key: &ObjectKey, obj: &Arc<K>) {
        let bucket = self.entries.entry(index_key).or_default();
        match bucket.get_mut(key) {
            Some(slot) => *slot = Arc::clone(obj),
            None => {
                bucket.insert(key.clone(), Arc::clone(obj));
            }
        }
    }

    fn remove_entry(&mut self, index_key: &str, key: &ObjectKey) {
        if let Some(bucket) = self.entries.get_mut(index_key) {
            bucket.remove(key);
            if bucket.is_empty() {
                self.entries.remove(index_key);
            }
        }
    }

    pub(crate) fn get(&self, index_key: &str) -> Option<&Bucket<K>> {
        self.entries.get(index_key)
    }

    pub(crate) fn keys(&self) -> impl Iterator<Item = &String> {
        self.entries.keys()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    fn pod(ns: &str, owners: Vec<OwnerReference>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some(ns.into()),
                owner_references: Some(owners),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn owner(uid: &str, controller: Option<bool>) -> OwnerReference {
        OwnerReference {
            uid: uid.into(),
            controller,
            kind: "ReplicaSet".into(),
            name: "rs".into(),
            api_version: "apps/v1".into(),
            ..Default::default()
        }
    }

    #[test]
    fn controller_index_uses_only_the_controller_reference() {
        let p = pod("ns", vec![owner("a", None), owner("b", Some(true))]);
        assert_eq!(index_by_controller_uid(&p), vec!["ns/b".to_string()]);
        let orphan = pod("ns", vec![owner("a", Some(false))]);
        assert_eq!(
            index_by_controller_uid(&orphan),
            vec![orphan_index_key("ns")]
        );
        assert_ne!(orphan_index_key("ns"), controller_index_key("ns", "a"));
    }

    #[test]
    fn a_controller_reference_without_uid_is_neither_owned_nor_orphan() {
        let p = pod("ns", vec![owner("", Some(true))]);
        assert!(index_by_controller_uid(&p).is_empty());
    }

    #[test]
    fn key_formats() {
        assert_eq!(controller_index_key("ns", "uid-1"), "ns/uid-1");
        assert_eq!(orphan_index_key("ns"), "ns/");
        assert_eq!(orphan_index_key(""), "/");
        assert_eq!(
            crate::orphan_label_index_key("ns", "app", "web"),
            "ns/app=web"
        );
    }

    #[test]
    fn namespace_index() {
        assert_eq!(index_by_namespace(&pod("x", vec![])), vec!["x".to_string()]);
    }
}
