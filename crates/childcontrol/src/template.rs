//! Turning a template plus a controller reference into the child to create.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Resource;

use crate::ChildControlError;

/// Checks that `controller_ref` can be the controlling owner reference of a
/// new child.
///
/// It must name its API version, kind, name and UID, and set both
/// `controller` and `blockOwnerDeletion` to `true`: a controller that creates
/// children owns them, and garbage collection of the owner must wait for
/// them. (Upstream checks the API version, kind and the two flags; the name
/// and UID checks are ours, since the API server rejects such a reference
/// anyway.)
///
/// # Errors
///
/// [`ChildControlError::InvalidTemplate`] naming the first problem found.
pub fn validate_controller_ref(controller_ref: &OwnerReference) -> Result<(), ChildControlError> {
    let problem = if controller_ref.api_version.is_empty() {
        "controllerRef has empty apiVersion"
    } else if controller_ref.kind.is_empty() {
        "controllerRef has empty kind"
    } else if controller_ref.name.is_empty() {
        "controllerRef has empty name"
    } else if controller_ref.uid.is_empty() {
        "controllerRef has empty uid"
    } else if controller_ref.controller != Some(true) {
        "controllerRef.controller is not set to true"
    } else if controller_ref.block_owner_deletion != Some(true) {
        "controllerRef.blockOwnerDeletion is not set to true"
    } else {
        return Ok(());
    };
    Err(ChildControlError::InvalidTemplate(problem.to_owned()))
}

/// The controller reference a child of `owner` carries: the owner's API
/// version, kind, name and UID with `controller` and `blockOwnerDeletion`
/// set, as [`validate_controller_ref`] requires.
///
/// `None` when the owner has no name or no UID (an object that was never
/// stored; objects from an informer or the API always have both).
///
/// ```
/// use ctrlkit_childcontrol::{controller_ref_for, validate_controller_ref};
/// use k8s_openapi::api::apps::v1::ReplicaSet;
///
/// let mut rs = ReplicaSet::default();
/// rs.metadata.name = Some("web".into());
/// rs.metadata.uid = Some("rs-uid".into());
/// let r = controller_ref_for(&rs).unwrap();
/// assert_eq!((r.api_version.as_str(), r.kind.as_str()), ("apps/v1", "ReplicaSet"));
/// assert!(validate_controller_ref(&r).is_ok());
/// ```
pub fn controller_ref_for<K: Resource<DynamicType = ()>>(owner: &K) -> Option<OwnerReference> {
    let mut r = owner.controller_owner_ref(&())?;
    if r.uid.is_empty() || r.name.is_empty() {
        return None;
    }
    r.block_owner_deletion = Some(true);
    Some(r)
}

/// Builds the child to create from `template` (taken by value, so no copy
/// is made): `namespace` set (cleared when empty, for cluster-scoped
/// kinds), `controller_ref` as its controller reference (any other
/// controller reference dropped, other owner references kept), and the
/// fields only the API server sets cleared (UID, resourceVersion,
/// creation and deletion timestamps, deletion grace period, generation,
/// managed fields). `name` and `generateName` are kept.
///
/// # Errors
///
/// [`ChildControlError::InvalidTemplate`] when `controller_ref` fails
/// [`validate_controller_ref`] or the template has neither a name nor a
/// generateName.
pub fn child_from_template<C: Resource>(
    mut template: C,
    namespace: &str,
    controller_ref: &OwnerReference,
) -> Result<C, ChildControlError> {
    validate_controller_ref(controller_ref)?;
    let meta = template.meta_mut();
    let named = meta.name.as_deref().is_some_and(|n| !n.is_empty())
        || meta.generate_name.as_deref().is_some_and(|n| !n.is_empty());
    if !named {
        return Err(ChildControlError::InvalidTemplate(
            "the template has neither a name nor a generateName".to_owned(),
        ));
    }
    meta.namespace = (!namespace.is_empty()).then(|| namespace.to_owned());
    let refs = meta.owner_references.get_or_insert_with(Vec::new);
    refs.retain(|r| r.controller != Some(true) && r.uid != controller_ref.uid);
    refs.push(controller_ref.clone());
    meta.uid = None;
    meta.resource_version = None;
    meta.creation_timestamp = None;
    meta.deletion_timestamp = None;
    meta.deletion_grace_period_seconds = None;
    meta.generation = None;
    meta.managed_fields = None;
    Ok(template)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn controller_ref() -> OwnerReference {
        OwnerReference {
            api_version: "example.com/v1".into(),
            kind: "App".into(),
            name: "web".into(),
            uid: "uid-1".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    fn template() -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                generate_name: Some("web-".into()),
                namespace: Some("elsewhere".into()),
                uid: Some("stale".into()),
                resource_version: Some("12".into()),
                generation: Some(3),
                creation_timestamp: Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
                labels: Some([("app".to_string(), "web".to_string())].into()),
                owner_references: Some(vec![
                    OwnerReference {
                        uid: "other-controller".into(),
                        controller: Some(true),
                        ..controller_ref()
                    },
                    OwnerReference {
                        uid: "gc-owner".into(),
                        controller: None,
                        ..controller_ref()
                    },
                ]),
                ..Default::default()
            },
            data: Some([("k".to_string(), "v".to_string())].into()),
            ..Default::default()
        }
    }

    #[test]
    fn sets_namespace_and_controller_and_clears_server_fields() {
        let child = child_from_template(template(), "ns", &controller_ref()).unwrap();
        let m = &child.metadata;
        assert_eq!(m.namespace.as_deref(), Some("ns"));
        assert_eq!(m.generate_name.as_deref(), Some("web-"));
        assert_eq!(m.labels, template().metadata.labels);
        assert_eq!(child.data, template().data);
        let refs = m.owner_references.as_ref().unwrap();
        let uids: Vec<_> = refs.iter().map(|r| r.uid.as_str()).collect();
        assert_eq!(uids, ["gc-owner", "uid-1"], "one controller, ours");
        assert_eq!(refs[1], controller_ref());
        assert_eq!((m.uid.as_ref(), m.resource_version.as_ref()), (None, None));
        assert_eq!((m.generation, m.creation_timestamp.as_ref()), (None, None));
    }

    #[test]
    fn keeps_a_fixed_name_and_clears_the_namespace_of_cluster_objects() {
        let mut t = template();
        t.metadata.generate_name = None;
        t.metadata.name = Some("web-config".into());
        let child = child_from_template(t, "", &controller_ref()).unwrap();
        assert_eq!(child.metadata.name.as_deref(), Some("web-config"));
        assert_eq!(child.metadata.namespace, None);
    }

    #[test]
    fn refuses_unnamed_templates_and_bad_controller_refs() {
        let mut t = template();
        t.metadata.generate_name = Some(String::new());
        let err = child_from_template(t, "ns", &controller_ref()).unwrap_err();
        assert!(
            err.to_string()
                .contains("neither a name nor a generateName"),
            "{err}"
        );

        type Breaker = fn(&mut OwnerReference);
        let cases: [(Breaker, &str); 6] = [
            (|r| r.api_version.clear(), "apiVersion"),
            (|r| r.kind.clear(), "kind"),
            (|r| r.name.clear(), "name"),
            (|r| r.uid.clear(), "uid"),
            (|r| r.controller = Some(false), "controller is not set"),
            (|r| r.block_owner_deletion = None, "blockOwnerDeletion"),
        ];
        for (breaker, expected) in cases {
            let mut r = controller_ref();
            breaker(&mut r);
            let err = child_from_template(template(), "ns", &r).unwrap_err();
            assert!(matches!(err, ChildControlError::InvalidTemplate(_)));
            assert!(err.to_string().contains(expected), "{err} lacks {expected}");
        }
    }

    #[test]
    fn controller_ref_for_needs_a_stored_owner() {
        let mut owner = ConfigMap::default();
        owner.metadata.name = Some("cm".into());
        assert!(controller_ref_for(&owner).is_none(), "no UID");
        owner.metadata.uid = Some("u".into());
        let r = controller_ref_for(&owner).unwrap();
        assert_eq!(r.api_version, "v1");
        assert_eq!(r.controller, Some(true));
        assert_eq!(r.block_owner_deletion, Some(true));
    }
}
