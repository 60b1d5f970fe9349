//! Transforms: a function applied to every object before it enters the
//! cache (client-go's `SetTransform`).

use std::any::TypeId;
use std::fmt;
use std::sync::Arc;

use kube::Resource;
use serde::de::DeserializeOwned;

use crate::decode::{Converted, Decoder, MaybeDecoded};
use crate::skip_managed_fields::WithoutManagedFields;

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
/// # Decoding into less
///
/// A transform that drops most of an object still pays for decoding all
/// of it. [`decode_as`](Transform::decode_as) names a smaller type that
/// holds only what the transform keeps; the informer then decodes each
/// listed and watched object as that type and converts it, skipping the
/// rest of the JSON unread.
///
/// [`Informer::set_transform`]: crate::Informer::set_transform
pub struct Transform<K> {
    func: TransformFn<K>,
    identity: Identity,
    decoder: Option<Decoder<K>>,
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
            decoder: self.decoder,
        }
    }
}

impl<K> fmt::Debug for Transform<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transform")
            .field("identity", &self.identity)
            .field("decodes_as_shape", &self.decoder.is_some())
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
        Self {
            func,
            identity,
            decoder: None,
        }
    }

    /// Makes the informer decode each listed and watched object as `S`
    /// and convert it into `K` (`S: Into<K>`), instead of decoding all of
    /// `K`; JSON fields `S` does not have are skipped unread. The transform
    /// still runs on the converted object, as on any other.
    ///
    /// `S` must keep everything the transform keeps: for any object,
    /// converting its `S` and applying the transform must give what
    /// decoding all of `K` and applying the transform gives. Then the cache
    /// and the handlers see the same objects, for less CPU and allocation.
    /// One difference remains: an object is undecodable only if `S` cannot
    /// be decoded, so a bad value in a field `S` skips does not make it
    /// undecodable.
    ///
    /// It applies to objects the informer reads from the API server (its
    /// list and watch), not to events fed by hand. It does not change the
    /// transform's [identity](Self#identity): a shared informer takes the
    /// decoder of the first transform set on it.
    ///
    /// ```
    /// use ctrlkit_informer::Transform;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    ///
    /// /// What the transform below keeps of a ConfigMap: its metadata.
    /// #[derive(serde::Deserialize)]
    /// struct MetadataOnly {
    ///     metadata: ObjectMeta,
    /// }
    ///
    /// impl From<MetadataOnly> for ConfigMap {
    ///     fn from(m: MetadataOnly) -> Self {
    ///         ConfigMap { metadata: m.metadata, ..ConfigMap::default() }
    ///     }
    /// }
    ///
    /// let transform = Transform::new(|cm: &mut ConfigMap| {
    ///     *cm = ConfigMap { metadata: std::mem::take(&mut cm.metadata), ..ConfigMap::default() }
    /// })
    /// .decode_as::<MetadataOnly>();
    /// assert!(transform.decodes_as_shape());
    /// ```
    pub fn decode_as<S>(mut self) -> Self
    where
        S: DeserializeOwned + Into<K>,
    {
        self.decoder = Some(Decoder::shaped::<Converted<S>>());
        self
    }
}

impl<K> Transform<K> {
    /// Applies the transform to `obj`.
    pub fn apply(&self, obj: &mut K) {
        (self.func)(obj);
    }

    /// Whether the informer decodes objects as a smaller type for this
    /// transform (see [`decode_as`](Self::decode_as)).
    pub fn decodes_as_shape(&self) -> bool {
        self.decoder.is_some()
    }

    /// The decoder set by [`decode_as`](Self::decode_as), if any.
    pub(crate) fn decoder(&self) -> Option<Decoder<K>> {
        self.decoder
    }

    /// Whether `self` and `other` are the same transform (see
    /// [Identity](Self#identity)).
    pub fn same_as(&self, other: &Self) -> bool {
        self.identity == other.identity
    }
}

impl<K: DeserializeOwned> Transform<K> {
    /// Decodes one object from its JSON text as an informer with this
    /// transform does: as the [`decode_as`](Self::decode_as) shape if one
    /// is set, otherwise all of `K` (see [`MaybeDecoded::from_json`]), then
    /// the transform applied.
    ///
    /// ```
    /// use ctrlkit_informer::{MaybeDecoded, Transform};
    /// use k8s_openapi::api::core::v1::Pod;
    ///
    /// let json = r#"{"metadata": {"name": "a", "managedFields": [{"manager": "kubelet"}]}}"#;
    /// let MaybeDecoded::Decoded(pod) = Transform::<Pod>::drop_managed_fields().decode(json) else {
    ///     unreachable!("a valid pod")
    /// };
    /// assert!(pod.metadata.managed_fields.is_none());
    /// ```
    pub fn decode(&self, json: &str) -> MaybeDecoded<K> {
        let decoded = match self.decoder {
            Some(decoder) => (decoder.object)(json),
            None => MaybeDecoded::from_json(json),
        };
        match decoded {
            MaybeDecoded::Decoded(mut obj) => {
                self.apply(&mut obj);
                MaybeDecoded::Decoded(obj)
            }
            undecodable => undecodable,
        }
    }
}

impl<K: Resource + DeserializeOwned + 'static> Transform<K> {
    /// The transform that removes `metadata.managedFields`: the
    /// server-side-apply bookkeeping that controllers almost never read and
    /// that can make up half of an object's size. Every call returns the
    /// same transform.
    ///
    /// The informer skips `managedFields` in the JSON it reads, unread,
    /// instead of decoding it and dropping it (as
    /// [`decode_as`](Self::decode_as) does with a shape); the objects are
    /// the same. Like any shape, a bad value there then does not make an
    /// object undecodable.
    pub fn drop_managed_fields() -> Self {
        let mut transform = Self::new(drop_managed_fields::<K>);
        transform.decoder = Some(Decoder::shaped::<WithoutManagedFields<K>>());
        transform
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
