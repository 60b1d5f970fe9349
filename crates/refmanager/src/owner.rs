//! The controller (owner) side of a claim.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};

/// Why an [`OwnerMeta`] could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OwnerError {
    /// The owner has no UID. Owner references are keyed by UID, so an owner
    /// that has not been stored by the API server cannot own anything.
    #[error("{kind} {name:?} has no uid: only objects read from the API server can own dependents")]
    MissingUid {
        /// The owner's kind.
        kind: String,
        /// The owner's name.
        name: String,
    },
    /// The owner has no name.
    #[error("{kind} with uid {uid:?} has no name")]
    MissingName {
        /// The owner's kind.
        kind: String,
        /// The owner's UID.
        uid: String,
    },
    /// The owner's kind or apiVersion is empty.
    #[error("owner {name:?} has an empty kind or apiVersion")]
    MissingType {
        /// The owner's name.
        name: String,
    },
}

/// Identity and state of the controller that claims dependents: what goes
/// into the controller reference (`apiVersion`, `kind`, `name`, `uid`), the
/// namespace it may adopt in, and whether it is being deleted.
///
/// Built from the owner as the controller's cache saw it at the start of a
/// sync; the fresh read used before adopting (see
/// [`RecheckOwner`](crate::RecheckOwner)) builds a second one to compare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerMeta {
    api_version: String,
    kind: String,
    name: String,
    namespace: Option<String>,
    uid: String,
    deletion_timestamp: Option<Time>,
}

impl OwnerMeta {
    /// An owner with the given type and identity, not being deleted.
    ///
    /// The owner is **cluster-scoped** (it may adopt in every namespace)
    /// until [`OwnerMeta::with_namespace`] says otherwise; prefer
    /// [`OwnerMeta::from_resource`], which copies the namespace.
    ///
    /// # Errors
    /// [`OwnerError`] if `uid`, `name`, `kind` or `api_version` is empty.
    pub fn new(
        api_version: impl Into<String>,
        kind: impl Into<String>,
        name: impl Into<String>,
        uid: impl Into<String>,
    ) -> Result<Self, OwnerError> {
        let (api_version, kind, name, uid) =
            (api_version.into(), kind.into(), name.into(), uid.into());
        if api_version.is_empty() || kind.is_empty() {
            return Err(OwnerError::MissingType { name });
        }
        if uid.is_empty() {
            return Err(OwnerError::MissingUid { kind, name });
        }
        if name.is_empty() {
            return Err(OwnerError::MissingName { kind, uid });
        }
        Ok(OwnerMeta {
            api_version,
            kind,
            name,
            namespace: None,
            uid,
            deletion_timestamp: None,
        })
    }

    /// Reads the owner's identity from a typed kube resource (e.g. a
    /// `ReplicaSet`), taking `apiVersion` and `kind` from its static type.
    ///
    /// # Errors
    /// [`OwnerError`] if the object has no UID or no name.
    pub fn from_resource<K>(owner: &K) -> Result<Self, OwnerError>
    where
        K: kube::Resource<DynamicType = ()>,
    {
        Self::from_resource_with(owner, &())
    }

    /// Like [`OwnerMeta::from_resource`] for resources whose type is known
    /// only at runtime (e.g. `DynamicObject` with its `ApiResource`).
    ///
    /// # Errors
    /// [`OwnerError`] if the object has no UID, no name, or an empty type.
    pub fn from_resource_with<K: kube::Resource>(
        owner: &K,
        dynamic_type: &K::DynamicType,
    ) -> Result<Self, OwnerError> {
        let meta = owner.meta();
        let mut this = Self::new(
            K::api_version(dynamic_type),
            K::kind(dynamic_type),
            meta.name.clone().unwrap_or_default(),
            meta.uid.clone().unwrap_or_default(),
        )?;
        this.namespace = meta.namespace.clone().filter(|ns| !ns.is_empty());
        this.deletion_timestamp = meta.deletion_timestamp.clone();
        Ok(this)
    }

    /// Sets the namespace; an empty string means cluster-scoped.
    #[must_use]
    pub fn with_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into()).filter(|ns| !ns.is_empty());
        self
    }

    /// Marks the owner as being deleted since `at`.
    #[must_use]
    pub fn with_deletion_timestamp(mut self, at: Time) -> Self {
        self.deletion_timestamp = Some(at);
        self
    }

    /// The owner's `apiVersion`, e.g. `apps/v1`, or `v1` for core types.
    pub fn api_version(&self) -> &str {
        &self.api_version
    }

    /// The owner's kind, e.g. `ReplicaSet`.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The owner's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The owner's namespace; `None` for a cluster-scoped owner, which may
    /// adopt dependents in any namespace.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The owner's UID (never empty).
    pub fn uid(&self) -> &str {
        &self.uid
    }

    /// When deletion of the owner was requested, if it was.
    pub fn deletion_timestamp(&self) -> Option<&Time> {
        self.deletion_timestamp.as_ref()
    }

    /// Whether the owner is being deleted. A deleting owner adopts and
    /// releases nothing; it keeps only what it already controls.
    pub fn is_being_deleted(&self) -> bool {
        self.deletion_timestamp.is_some()
    }

    /// The controller reference this owner puts on the dependents it adopts
    /// or creates: `controller: true` and `blockOwnerDeletion: true`, so
    /// foreground deletion of the owner waits for them.
    pub fn controller_ref(&self) -> OwnerReference {
        OwnerReference {
            api_version: self.api_version.clone(),
            kind: self.kind.clone(),
            name: self.name.clone(),
            uid: self.uid.clone(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::ReplicationController;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    #[test]
    fn from_typed_resource_takes_gvk_from_the_type() {
        let rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("default".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let owner = OwnerMeta::from_resource(&rs).unwrap();
        assert_eq!(owner.api_version(), "apps/v1");
        assert_eq!(owner.kind(), "ReplicaSet");
        assert_eq!(owner.namespace(), Some("default"));
        assert!(!owner.is_being_deleted());

        let rc = ReplicationController {
            metadata: rs.metadata.clone(),
            ..Default::default()
        };
        let owner = OwnerMeta::from_resource(&rc).unwrap();
        assert_eq!(owner.api_version(), "v1");
        assert_eq!(owner.kind(), "ReplicationController");
    }

    #[test]
    fn owner_without_uid_or_name_is_rejected() {
        let rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some("web".into()),
                uid: Some(String::new()),
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(matches!(
            OwnerMeta::from_resource(&rs),
            Err(OwnerError::MissingUid { .. })
        ));
        assert!(matches!(
            OwnerMeta::new("v1", "ReplicationController", "", "u"),
            Err(OwnerError::MissingName { .. })
        ));
        assert!(matches!(
            OwnerMeta::new("", "", "n", "u"),
            Err(OwnerError::MissingType { .. })
        ));
    }

    #[test]
    fn controller_ref_sets_controller_and_block_owner_deletion() {
        let r = OwnerMeta::new("apps/v1", "ReplicaSet", "web", "u1")
            .unwrap()
            .controller_ref();
        assert_eq!(r.controller, Some(true));
        assert_eq!(r.block_owner_deletion, Some(true));
        assert_eq!((r.name.as_str(), r.uid.as_str()), ("web", "u1"));
    }
}
