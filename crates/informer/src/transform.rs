//! Transforms: a function applied to every object before it enters the
//! cache (client-go's `SetTransform`).

use std::any::TypeId;
use std::fmt;
use std::sync::Arc;

use kube::Resource;

type TransformFn<K> = Arc<dyn Fn(&mut K) + Send + Sync>;

/// A function the informer applies to every object it receives, before the
/// object enters the cache and before any handler sees it (client-go's
/// `SharedIndexInformer.SetTransform`).
///
/// Use it to drop what the controller never reads, so the cache holds less:
/// [`Transform::drop_managed_fields`] removes `metadata.managedFields`,
/// often the largest part of an object. It applies to listed objects,
/// changes and the final state of deletes alike. It must be cheap and must
/// not change the object's namespace or name (the cache key) or its UID
/// and resourceVersion (the informer compares them).
///
/// # Identity
///
/// Several controllers may share one informer, and a shared informer has
/// one transform. To tell "the same transform again" (fine) from "another
/// transform" (an error, see [`Informer::set_transform`]), a transform
/// made from a function item or a closure that captures nothing is
/// identified by its type: two controllers passing `drop_managed_fields`
/// get the same transform. A closure that captures state is identified by
/// its allocation: only clones of the same `Transform` value are the same.
///
/// ```
/// use ctrlkit_informer::{Informer, Transform};
/// use k8s_openapi::api::core::v1::Pod;
/// use kube::runtime::watcher::Event;
///
/// let informer = Informer::<Pod>::manual()
///     .transform(Transform::drop_managed_fields())
///     .build();
/// let mut pod = Pod::default();
/// pod.metadata.name = Some("a".into());
/// pod.metadata.managed_fields = Some(vec![Default::default()]);
/// informer.apply_event(Event::Apply(pod));
/// assert!(informer.store().get("", "a").unwrap().metadata.managed_fields.is_none());
/// ```
///
/// [`Informer::set_transform`]: crate::Informer::set_transform
pub struct Transform<K> {
    func: TransformFn<K>,
    identity: Identity,
}

/// What makes two transforms the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Identity {
    /// A stateless function: its type says everything.
    Type(TypeId),
    /// A function with state: only this allocation.
    Allocation(usize),
}

impl<K> Clone for Transform<K> {
    fn clone(&self) -> Self {
        Self {
            func: Arc::clone(&self.func),
            identity: self.identity,
        }
    }
}

impl<K> fmt::Debug for Transform<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transform")
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

impl<K: 'static> Transform<K> {
    /// A transform that calls `f` on each object.
    pub fn new<F>(f: F) -> Self
    where
        F: Fn(&mut K) + Send + Sync + 'static,
    {
        let func: TransformFn<K> = Arc::new(f);
        let identity = if size_of::<F>() == 0 {
            Identity::Type(TypeId::of::<F>())
        } else {
            // The data pointer of the allocation; the vtable part of the fat
            // pointer is not compared (it is not guaranteed unique).
            Identity::Allocation(Arc::as_ptr(&func).cast::<()>() as usize)
        };
        Self { func, identity }
    }
}

impl<K> Transform<K> {
    /// Applies the transform to `obj`.
    pub fn apply(&self, obj: &mut K) {
        (self.func)(obj);
    }

    /// Whether `self` and `other` are the same transform (see
    /// [Identity](Self#identity)).
    pub fn same_as(&self, other: &Self) -> bool {
        self.identity == other.identity
    }
}

impl<K: Resource + 'static> Transform<K> {
    /// The transform that removes `metadata.managedFields`: the
    /// server-side-apply bookkeeping that controllers almost never read and
    /// that can make up half of an object's size. Every call returns the
    /// same transform.
    pub fn drop_managed_fields() -> Self {
        Self::new(drop_managed_fields::<K>)
    }
}

impl<K: 'static, F> From<F> for Transform<K>
where
    F: Fn(&mut K) + Send + Sync + 'static,
{
    fn from(f: F) -> Self {
        Self::new(f)
    }
}

/// Removes `metadata.managedFields` from `obj`; the function behind
/// [`Transform::drop_managed_fields`].
pub fn drop_managed_fields<K: Resource>(obj: &mut K) {
    obj.meta_mut().managed_fields = None;
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Pod};

    #[test]
    fn stateless_transforms_are_the_same_by_type() {
        let a = Transform::<Pod>::drop_managed_fields();
        let b = Transform::<Pod>::drop_managed_fields();
        assert!(a.same_as(&b));
        let c: Transform<Pod> = drop_managed_fields::<Pod>.into();
        assert!(a.same_as(&c));
        let other = Transform::<Pod>::new(|p: &mut Pod| p.metadata.annotations = None);
        assert!(!a.same_as(&other));
        assert!(other.same_as(&other.clone()));
    }

    #[test]
    fn transforms_with_state_are_the_same_only_as_their_clones() {
        let make = |label: &'static str| {
            let label = label.to_owned();
            Transform::<ConfigMap>::new(move |c: &mut ConfigMap| {
                c.metadata.labels = Some([(label.clone(), String::new())].into());
            })
        };
        let a = make("x");
        let b = make("x");
        assert!(!a.same_as(&b), "same closure type, different state");
        assert!(a.same_as(&a.clone()));
        let mut cm = ConfigMap::default();
        a.apply(&mut cm);
        assert!(cm.metadata.labels.unwrap().contains_key("x"));
    }
}
