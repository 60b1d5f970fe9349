//! What the ref manager needs to know about a dependent object.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// An object that can be owned by a controller: anything with Kubernetes
/// object metadata (UID, name, namespace, labels, owner references, deletion
/// timestamp).
///
/// Every [`kube::Resource`] (so every k8s-openapi type such as `Pod` or
/// `ReplicaSet`, every `#[derive(CustomResource)]` type, `DynamicObject` and
/// `PartialObjectMeta`) implements it through a blanket impl. Implement it
/// yourself only for a type that carries an `ObjectMeta` but is not a
/// `kube::Resource`.
pub trait Dependent {
    /// The object's metadata.
    fn object_meta(&self) -> &ObjectMeta;
}

impl<K: kube::Resource> Dependent for K {
    fn object_meta(&self) -> &ObjectMeta {
        self.meta()
    }
}

/// The object's controller reference and "is it controlled by this UID?":
/// the workspace's one implementation, in `ctrlkit-informer` (an empty
/// owner UID never matches).
pub use ctrlkit_informer::{controller_ref, is_controlled_by};

/// The object's UID, treating an empty string as absent.
pub(crate) fn uid(meta: &ObjectMeta) -> Option<&str> {
    meta.uid.as_deref().filter(|u| !u.is_empty())
}

/// The object's namespace, `""` for cluster-scoped objects.
pub(crate) fn namespace(meta: &ObjectMeta) -> &str {
    meta.namespace.as_deref().unwrap_or_default()
}

/// The object's name, `""` when unset.
pub(crate) fn name(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn owner_ref(uid: &str, controller: Option<bool>) -> OwnerReference {
        OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "rs".into(),
            uid: uid.into(),
            controller,
            block_owner_deletion: None,
        }
    }

    #[test]
    fn controller_ref_is_first_reference_with_controller_true() {
        let meta = ObjectMeta {
            owner_references: Some(vec![
                owner_ref("plain", None),
                owner_ref("not", Some(false)),
                owner_ref("ctrl", Some(true)),
                owner_ref("second", Some(true)),
            ]),
            ..Default::default()
        };
        assert_eq!(controller_ref(&meta).map(|r| r.uid.as_str()), Some("ctrl"));
        assert!(is_controlled_by(&meta, "ctrl"));
        assert!(!is_controlled_by(&meta, "plain"));
        assert!(!is_controlled_by(&meta, ""));
    }

    #[test]
    fn no_references_means_orphan() {
        assert!(controller_ref(&ObjectMeta::default()).is_none());
        let meta = ObjectMeta {
            owner_references: Some(vec![owner_ref("", None)]),
            ..Default::default()
        };
        assert!(controller_ref(&meta).is_none());
    }

    #[test]
    fn controller_ref_without_uid_is_nobody_we_know() {
        let meta = ObjectMeta {
            owner_references: Some(vec![owner_ref("", Some(true))]),
            ..Default::default()
        };
        assert!(controller_ref(&meta).is_some());
        assert!(!is_controlled_by(&meta, ""));
        assert!(!is_controlled_by(&meta, "123"));
    }
}
