//! Resource scopes as a trait bound: code generic over a kind that needs
//! to know whether its objects live in a namespace.

use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube::{Api, Client, Resource};

mod sealed {
    pub trait Sealed {}
    impl Sealed for k8s_openapi::NamespaceResourceScope {}
    impl Sealed for k8s_openapi::ClusterResourceScope {}
}

/// The scope of a kind whose objects can be watched, created and owned:
/// namespaced or cluster-wide.
///
/// Implemented for k8s-openapi's [`NamespaceResourceScope`] and
/// [`ClusterResourceScope`], the `Scope` of every k8s-openapi object kind
/// and of every `#[derive(CustomResource)]` type. Subresource kinds such as
/// `Scale` or `Eviction` (scope `SubResourceScope`) are not objects with
/// metadata of their own, so code bounded by `K::Scope: ObjectScope` does
/// not accept them. The trait is sealed.
///
/// ```
/// use ctrlkit_informer::ObjectScope;
/// use k8s_openapi::api::core::v1::{Namespace, Pod};
/// use kube::Resource;
///
/// fn namespaced<K: Resource>() -> bool
/// where
///     K::Scope: ObjectScope,
/// {
///     <K::Scope as ObjectScope>::NAMESPACED
/// }
/// assert!(namespaced::<Pod>());
/// assert!(!namespaced::<Namespace>());
/// ```
pub trait ObjectScope: sealed::Sealed + 'static {
    /// Whether objects of this scope live in a namespace.
    const NAMESPACED: bool;

    /// An [`Api`] for `K` in `namespace`, or across all namespaces with
    /// `None`. A cluster-scoped kind has no namespace, so `namespace` is
    /// ignored for it.
    fn api<K>(client: Client, namespace: Option<&str>) -> Api<K>
    where
        K: Resource<Scope = Self>,
        K::DynamicType: Default;
}

impl ObjectScope for NamespaceResourceScope {
    const NAMESPACED: bool = true;

    fn api<K>(client: Client, namespace: Option<&str>) -> Api<K>
    where
        K: Resource<Scope = Self>,
        K::DynamicType: Default,
    {
        match namespace {
            Some(ns) => Api::namespaced(client, ns),
            None => Api::all(client),
        }
    }
}

impl ObjectScope for ClusterResourceScope {
    const NAMESPACED: bool = false;

    fn api<K>(client: Client, _namespace: Option<&str>) -> Api<K>
    where
        K: Resource<Scope = Self>,
        K::DynamicType: Default,
    {
        Api::all(client)
    }
}
