//! Informer event handlers: which owner keys an event on the owner, on an
//! owned child or on a watched object concerns, at which priority, and
//! what the expectations learn from it.
//!
//! They run synchronously on the informers' tasks, so they only read the
//! owner cache, touch the expectations and add keys; per event they
//! allocate nothing but the key that goes on the queue.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use ctrlkit_consistency::ConsistencyStore;
use ctrlkit_expectations::ControllerExpectations;
use ctrlkit_informer::{
    DeletedObject, EventHandler, ObjectKey, ObjectScope, Store, controller_ref, is_controlled_by,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;

use super::enqueue::{Enqueuer, Priority};

/// Maps a child without a controller (an orphan) to the owners that may
/// want to adopt it.
pub(crate) type OrphanFn<K, C> = Arc<dyn Fn(&C, &Store<K>) -> Vec<ObjectKey> + Send + Sync>;
/// Whether an update of a child (whose controller did not change) should
/// reach the owner.
pub(crate) type UpdateFilter<C> = Arc<dyn Fn(&C, &C) -> bool + Send + Sync>;
/// When to look at the owner again after an update of its child.
pub(crate) type RequeueFn<K, C> = Arc<dyn Fn(&C, &C, &K) -> Option<Duration> + Send + Sync>;
/// Maps an object of a watched kind to owner keys.
pub(crate) type MapFn<W> = Arc<dyn Fn(&W) -> Vec<ObjectKey> + Send + Sync>;
/// Told when an owner is gone, to drop what the controller keeps for it.
pub(crate) type OwnerDeletedFn = Arc<dyn Fn(&ObjectKey) + Send + Sync>;

/// The identity a created child is tracked by in the controller's
/// expectations: its UID (never reused), or `namespace/name` for an object
/// without one (hand-built test objects).
///
/// The controller's handlers report every child they see appear with
/// [`ControllerExpectations::creation_observed_id`] under this identity, so
/// a reconcile that uses tracked creations records each created child with
/// `expectations.record_creation(&key.to_string(), &creation_id(&created))`.
pub fn creation_id<C: Resource>(child: &C) -> Cow<'_, str> {
    let meta = child.meta();
    match meta.uid.as_deref() {
        Some(uid) if !uid.is_empty() => Cow::Borrowed(uid),
        _ => Cow::Owned(meta_key(meta).to_string()),
    }
}

fn meta_key(meta: &ObjectMeta) -> ObjectKey {
    ObjectKey::new(
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

thread_local! {
    /// Reused for the string keys the expectations are indexed by, so a
    /// handler does not allocate them per event.
    static KEYS: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Calls `f` with the expectations keys of `owner` and of `child` (empty
/// without one), formatted as [`ObjectKey`]'s `Display` does.
pub(crate) fn with_expectation_keys<R>(
    owner: &ObjectKey,
    child: Option<&ObjectMeta>,
    f: impl FnOnce(&str, &str) -> R,
) -> R {
    let fill = |buf: &mut String| {
        buf.clear();
        let _ = write!(buf, "{owner}");
        let split = buf.len();
        if let Some(meta) = child {
            let ns = meta.namespace.as_deref().unwrap_or_default();
            if !ns.is_empty() {
                buf.push_str(ns);
                buf.push('/');
            }
            buf.push_str(meta.name.as_deref().unwrap_or_default());
        }
        split
    };
    KEYS.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => {
            let split = fill(&mut buf);
            let (o, c) = buf.split_at(split);
            f(o, c)
        }
        // Only if `f` re-entered a handler on this thread; never in practice.
        Err(_) => {
            let mut buf = String::new();
            let split = fill(&mut buf);
            let (o, c) = buf.split_at(split);
            f(o, c)
        }
    })
}

/// What every handler of one controller shares.
pub(crate) struct Context<K> {
    pub(crate) owners: Store<K>,
    pub(crate) enqueue: Enqueuer,
    pub(crate) expectations: Arc<ControllerExpectations>,
    pub(crate) consistency: ConsistencyStore,
    pub(crate) owner_deleted: Option<OwnerDeletedFn>,
    owner_kind: String,
    owner_group: String,
    owner_namespaced: bool,
}

impl<K> Context<K>
where
    K: Resource<DynamicType = (), Scope: ObjectScope>,
{
    pub(crate) fn new(
        owners: Store<K>,
        enqueue: Enqueuer,
        expectations: Arc<ControllerExpectations>,
        consistency: ConsistencyStore,
        owner_deleted: Option<OwnerDeletedFn>,
    ) -> Self {
        Self {
            owners,
            enqueue,
            expectations,
            consistency,
            owner_deleted,
            owner_kind: K::kind(&()).into_owned(),
            owner_group: K::group(&()).into_owned(),
            owner_namespaced: <K::Scope as ObjectScope>::NAMESPACED,
        }
    }

    /// The owner a child's controller reference points at: same kind and
    /// API group as `K`, in the cache (in the child's namespace for a
    /// namespaced owner) and with the referenced UID, so a re-created owner
    /// with the same name does not count.
    fn resolve(&self, child: &ObjectMeta, cref: &OwnerReference) -> Option<Arc<K>> {
        if cref.kind != self.owner_kind || api_group(&cref.api_version) != self.owner_group {
            return None;
        }
        let namespace = if self.owner_namespaced {
            child.namespace.as_deref().unwrap_or_default()
        } else {
            ""
        };
        let owner = self.owners.get(namespace, &cref.name)?;
        let uid = owner.meta().uid.as_deref().unwrap_or_default();
        is_controlled_by(child, uid).then_some(owner)
    }
}

/// The group of an `apiVersion`: `apps` of `apps/v1`, empty for `v1`.
fn api_group(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

fn owner_uid<K: Resource>(owner: &K) -> Option<&str> {
    owner.meta().uid.as_deref()
}

/// Events on the owner kind: the owner's own key.
pub(crate) struct OwnerHandler<K>(pub(crate) Arc<Context<K>>);

impl<K> EventHandler<K> for OwnerHandler<K>
where
    K: Resource<DynamicType = (), Scope: ObjectScope> + Send + Sync,
{
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        self.0.enqueue.add(
            ObjectKey::from_object(obj.as_ref()),
            owner_uid(obj.as_ref()),
            Priority::of_add(is_in_initial_list),
        );
    }

    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        let key = ObjectKey::from_object(new.as_ref());
        if owner_uid(old.as_ref()) != owner_uid(new.as_ref()) {
            // Deleted and re-created while the watch was away: the old
            // owner is gone (as upstream's controllers treat it).
            self.0.forget(&key);
        }
        self.0
            .enqueue
            .add(key, owner_uid(new.as_ref()), Priority::of_update(old, new));
    }

    fn on_delete(&self, obj: &DeletedObject<K>) {
        let owner = obj.object();
        let key = ObjectKey::from_object(owner.as_ref());
        self.0.forget(&key);
        self.0
            .enqueue
            .add(key, owner_uid(owner.as_ref()), Priority::Normal);
    }
}

impl<K> Context<K> {
    /// Drops what is kept for a deleted owner, so a new owner with the same
    /// name starts clean: its expectations, its read-own-writes records,
    /// and whatever the [owner-deleted hook](crate::ControllerBuilder::on_owner_deleted)
    /// keeps.
    fn forget(&self, key: &ObjectKey) {
        with_expectation_keys(key, None, |owner_key, _| {
            self.expectations.delete_expectations(owner_key);
            self.consistency.clear(owner_key);
        });
        if let Some(hook) = &self.owner_deleted {
            hook(key);
        }
    }
}

/// Events on an owned kind: the key of the child's controller, if it is an
/// owner of this controller in the cache; the expectations observe the
/// child appearing and going away.
pub(crate) struct OwnedHandler<K, C> {
    pub(crate) context: Arc<Context<K>>,
    pub(crate) orphans: Option<OrphanFn<K, C>>,
    pub(crate) update_filter: Option<UpdateFilter<C>>,
    pub(crate) requeue: Option<RequeueFn<K, C>>,
}

impl<K, C> OwnedHandler<K, C>
where
    K: Resource<DynamicType = (), Scope: ObjectScope>,
    C: Resource,
{
    fn owner_of(&self, child: &C) -> Option<Arc<K>> {
        let meta = child.meta();
        self.context.resolve(meta, controller_ref(meta)?)
    }

    fn enqueue_owner(&self, owner: &K, priority: Priority) {
        self.context
            .enqueue
            .add(ObjectKey::from_object(owner), owner_uid(owner), priority);
    }

    fn enqueue_orphan(&self, child: &C, priority: Priority) {
        if let Some(orphans) = &self.orphans {
            for key in orphans(child, &self.context.owners) {
                self.context.enqueue.add(key, None, priority);
            }
        }
    }

    /// The child is gone or going: its owner's expected deletion is
    /// observed and the owner looked at.
    fn gone(&self, child: &C, priority: Priority) {
        let Some(owner) = self.owner_of(child) else {
            // Nobody of ours cares about an orphan going away.
            return;
        };
        let key = ObjectKey::from_object(owner.as_ref());
        with_expectation_keys(&key, Some(child.meta()), |owner_key, child_key| {
            self.context
                .expectations
                .deletion_observed(owner_key, child_key);
        });
        self.context
            .enqueue
            .add(key, owner_uid(owner.as_ref()), priority);
    }
}

impl<K, C> EventHandler<C> for OwnedHandler<K, C>
where
    K: Resource<DynamicType = (), Scope: ObjectScope> + Send + Sync,
    C: Resource + Send + Sync,
{
    fn on_add(&self, child: &Arc<C>, is_in_initial_list: bool) {
        let priority = Priority::of_add(is_in_initial_list);
        if child.meta().deletion_timestamp.is_some() {
            // First seen already terminating (e.g. after a restart): a
            // deletion, never a creation.
            self.gone(child, priority);
            return;
        }
        if controller_ref(child.meta()).is_none() {
            // An orphan: whoever may adopt it wants a look. Not a creation
            // of ours.
            self.enqueue_orphan(child, priority);
            return;
        }
        let Some(owner) = self.owner_of(child) else {
            return;
        };
        let key = ObjectKey::from_object(owner.as_ref());
        // Counts only if this controller recorded creating this child (with
        // tracked creations); an adopted or foreign one never stands in for
        // one of ours.
        with_expectation_keys(&key, None, |owner_key, _| {
            self.context
                .expectations
                .creation_observed_id(owner_key, &creation_id(child.as_ref()));
        });
        self.context
            .enqueue
            .add(key, owner_uid(owner.as_ref()), priority);
    }

    fn on_update(&self, old: &Arc<C>, new: &Arc<C>) {
        let priority = Priority::of_update(old, new);
        let old_ref = controller_ref(old.meta());
        let new_ref = controller_ref(new.meta());
        let ref_changed = old_ref != new_ref;
        if new.meta().deletion_timestamp.is_some() {
            // A graceful delete counts as the delete right away.
            self.gone(new, priority);
            if ref_changed {
                self.gone(old, priority);
            }
            return;
        }
        if ref_changed && let Some(former) = self.owner_of(old) {
            // The former owner lost a child.
            self.enqueue_owner(&former, Priority::Normal);
        }
        let wanted = ref_changed || self.update_filter.as_ref().is_none_or(|f| f(old, new));
        if new_ref.is_none() {
            if wanted {
                self.enqueue_orphan(new, priority);
            }
            return;
        }
        let Some(owner) = self.owner_of(new) else {
            return;
        };
        if wanted {
            self.enqueue_owner(&owner, priority);
        }
        if let Some(requeue) = &self.requeue
            && let Some(delay) = requeue(old, new, &owner)
        {
            self.context.enqueue.add_after(
                ObjectKey::from_object(owner.as_ref()),
                owner_uid(owner.as_ref()),
                delay,
            );
        }
    }

    fn on_delete(&self, child: &DeletedObject<C>) {
        self.gone(child.object(), Priority::Normal);
    }
}

/// Events on a watched kind: whatever keys the mapper returns.
pub(crate) struct WatchHandler<K, W> {
    pub(crate) context: Arc<Context<K>>,
    pub(crate) map: MapFn<W>,
}

impl<K, W> WatchHandler<K, W> {
    fn enqueue(&self, obj: &W, priority: Priority) {
        for key in (self.map)(obj) {
            self.context.enqueue.add(key, None, priority);
        }
    }
}

impl<K, W> EventHandler<W> for WatchHandler<K, W>
where
    K: Send + Sync,
    W: Resource + Send + Sync,
{
    fn on_add(&self, obj: &Arc<W>, is_in_initial_list: bool) {
        self.enqueue(obj, Priority::of_add(is_in_initial_list));
    }

    fn on_update(&self, old: &Arc<W>, new: &Arc<W>) {
        let priority = Priority::of_update(old, new);
        // Both states: an object that stops mapping to a key still
        // concerns that key once more (as controller-runtime maps both).
        self.enqueue(new, priority);
        if !Arc::ptr_eq(old, new) {
            self.enqueue(old, priority);
        }
    }

    fn on_delete(&self, obj: &DeletedObject<W>) {
        self.enqueue(obj.object(), Priority::Normal);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[test]
    fn api_groups_of_api_versions() {
        assert_eq!(api_group("apps/v1"), "apps");
        assert_eq!(api_group("v1"), "");
        assert_eq!(api_group("example.com/v1beta1"), "example.com");
    }

    #[test]
    fn creation_ids_prefer_the_uid() {
        let mut cm = ConfigMap::default();
        cm.metadata.namespace = Some("ns".into());
        cm.metadata.name = Some("a".into());
        assert_eq!(creation_id(&cm), "ns/a");
        cm.metadata.uid = Some("u-1".into());
        assert!(matches!(creation_id(&cm), Cow::Borrowed("u-1")));
    }

    #[test]
    fn expectation_keys_are_the_display_of_object_keys() {
        let owner = ObjectKey::new("ns", "web");
        let child = ObjectMeta {
            namespace: Some("ns".into()),
            name: Some("web-1".into()),
            ..Default::default()
        };
        with_expectation_keys(&owner, Some(&child), |o, c| {
            assert_eq!((o, c), ("ns/web", "ns/web-1"));
        });
        let cluster = ObjectKey::new("", "node-a");
        with_expectation_keys(&cluster, None, |o, c| assert_eq!((o, c), ("node-a", "")));
    }
}
