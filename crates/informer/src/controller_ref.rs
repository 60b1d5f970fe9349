//! Controller references: which owner, if any, controls an object.
//!
//! This is the one implementation of the rule for the whole workspace; the
//! pod helpers (`ctrlkit-podcontrol`), the ref manager (`ctrlkit-refmanager`)
//! and the controller runtime re-export or wrap it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// The object's controller reference: its first owner reference with
/// `controller: true`, or `None` for an orphan.
///
/// References with `controller` unset or `false` are ordinary owners (for
/// garbage collection only) and do not make the object controlled. The API
/// server refuses objects with more than one controller reference, so "the
/// first" only matters for hand-built objects.
///
/// A controller reference with an empty UID is still returned: such an
/// object is not an orphan (nobody may adopt it), but it is controlled by
/// no owner either, since [`is_controlled_by`] never matches an empty UID.
///
/// ```
/// use ctrlkit_informer::controller_ref;
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
///
/// let meta = ObjectMeta {
///     owner_references: Some(vec![OwnerReference {
///         api_version: "apps/v1".into(),
///         kind: "ReplicaSet".into(),
///         name: "web".into(),
///         uid: "rs-uid".into(),
///         controller: Some(true),
///         ..Default::default()
///     }]),
///     ..Default::default()
/// };
/// assert_eq!(controller_ref(&meta).map(|r| r.name.as_str()), Some("web"));
/// assert!(controller_ref(&ObjectMeta::default()).is_none());
/// ```
pub fn controller_ref(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
}

/// Whether `meta` is controlled by the owner with UID `owner_uid`: its
/// [`controller_ref`] carries exactly that UID.
///
/// An empty `owner_uid` never matches, so an owner that has not been stored
/// yet (no UID) cannot be mistaken for the controller of objects whose
/// controller reference lacks a UID, and such objects belong to nobody.
pub fn is_controlled_by(meta: &ObjectMeta, owner_uid: &str) -> bool {
    !owner_uid.is_empty() && controller_ref(meta).is_some_and(|r| r.uid == owner_uid)
}

/// Whether `meta` has no controller reference at all: an orphan that an
/// owner whose selector matches it may adopt.
pub fn is_orphan(meta: &ObjectMeta) -> bool {
    controller_ref(meta).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn meta(refs: Vec<OwnerReference>) -> ObjectMeta {
        ObjectMeta {
            owner_references: Some(refs),
            ..Default::default()
        }
    }

    #[test]
    fn the_controller_is_the_first_reference_with_controller_true() {
        let m = meta(vec![
            owner_ref("plain", None),
            owner_ref("not", Some(false)),
            owner_ref("ctrl", Some(true)),
            owner_ref("second", Some(true)),
        ]);
        assert_eq!(controller_ref(&m).map(|r| r.uid.as_str()), Some("ctrl"));
        assert!(is_controlled_by(&m, "ctrl"));
        assert!(!is_controlled_by(&m, "plain"));
        assert!(!is_controlled_by(&m, "second"));
        assert!(!is_orphan(&m));
    }

    #[test]
    fn objects_without_a_controller_reference_are_orphans() {
        assert!(is_orphan(&ObjectMeta::default()));
        let m = meta(vec![owner_ref("gc-only", None)]);
        assert!(is_orphan(&m));
        assert!(!is_controlled_by(&m, "gc-only"));
    }

    #[test]
    fn an_empty_uid_never_matches_on_either_side() {
        let no_uid = meta(vec![owner_ref("", Some(true))]);
        assert!(controller_ref(&no_uid).is_some());
        assert!(
            !is_orphan(&no_uid),
            "a controller ref without UID is not an orphan"
        );
        assert!(!is_controlled_by(&no_uid, ""));
        assert!(!is_controlled_by(&no_uid, "123"));
        let owned = meta(vec![owner_ref("123", Some(true))]);
        assert!(!is_controlled_by(&owned, ""));
    }
}
