//! Naming the kinds of objects a controller writes.

use std::fmt;

/// An API group and a resource (plural) name, such as `apps` /
/// `replicasets`: the same pair Kubernetes calls a `GroupResource`.
///
/// A [`ConsistencyStore`](crate::ConsistencyStore) keeps one cache per
/// `GroupResource` and one remembered write per owner and `GroupResource`.
/// The core group is the empty string. Two values are equal when both
/// names are equal; no normalisation is applied.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupResource {
    group: String,
    resource: String,
}

impl GroupResource {
    /// The resource `resource` (plural, lower case, as in the URL) of API
    /// group `group` (`""` for the core group).
    pub fn new(group: impl Into<String>, resource: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            resource: resource.into(),
        }
    }

    /// The `GroupResource` of a Kubernetes type: `GroupResource::of::<Pod>()`
    /// is `("", "pods")`, for a ReplicaSet it is `("apps", "replicasets")`.
    pub fn of<K: kube::Resource<DynamicType = ()>>() -> Self {
        Self::new(K::group(&()), K::plural(&()))
    }

    /// The API group; empty for the core group.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// The plural resource name.
    pub fn resource(&self) -> &str {
        &self.resource
    }
}

/// `pods` for the core group, `replicasets.apps` otherwise (kubectl's
/// spelling).
impl fmt::Display for GroupResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::{Pod, ReplicationController};

    #[test]
    fn names_kubernetes_types_as_kubectl_does() {
        assert_eq!(GroupResource::of::<Pod>(), GroupResource::new("", "pods"));
        assert_eq!(GroupResource::of::<Pod>().to_string(), "pods");
        assert_eq!(
            GroupResource::of::<ReplicaSet>().to_string(),
            "replicasets.apps"
        );
        assert_eq!(
            GroupResource::of::<ReplicationController>().resource(),
            "replicationcontrollers"
        );
        assert_eq!(GroupResource::of::<ReplicaSet>().group(), "apps");
    }
}
