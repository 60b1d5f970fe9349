//! The fixed set of resource types the test cluster serves.

/// Static description of one served resource type.
#[derive(Debug)]
pub(crate) struct ResourceDef {
    /// API group; empty for the core (legacy) group.
    pub(crate) group: &'static str,
    pub(crate) version: &'static str,
    /// `group/version`, or just `version` for the core group.
    pub(crate) api_version: &'static str,
    pub(crate) plural: &'static str,
    pub(crate) singular: &'static str,
    pub(crate) kind: &'static str,
    pub(crate) namespaced: bool,
    pub(crate) short_names: &'static [&'static str],
    /// Subresources beyond the main resource: `status`, `scale`, `binding`.
    pub(crate) subresources: &'static [&'static str],
    /// Whether `metadata.generation` is maintained (bumped on spec changes).
    pub(crate) tracks_generation: bool,
}

impl ResourceDef {
    pub(crate) fn has_subresource(&self, sub: &str) -> bool {
        self.subresources.contains(&sub)
    }
}

/// Index of namespaces in [`RESOURCES`].
pub(crate) const NAMESPACES: usize = 0;
/// Index of pods in [`RESOURCES`].
pub(crate) const PODS: usize = 1;

/// Every served resource; the index is the resource's id in the store.
pub(crate) const RESOURCES: &[ResourceDef] = &[
    ResourceDef {
        group: "",
        version: "v1",
        api_version: "v1",
        plural: "namespaces",
        singular: "namespace",
        kind: "Namespace",
        namespaced: false,
        short_names: &["ns"],
        subresources: &["status"],
        tracks_generation: false,
    },
    ResourceDef {
        group: "",
        version: "v1",
        api_version: "v1",
        plural: "pods",
        singular: "pod",
        kind: "Pod",
        namespaced: true,
        short_names: &["po"],
        subresources: &["status", "binding"],
        tracks_generation: true,
    },
    ResourceDef {
        group: "",
        version: "v1",
        api_version: "v1",
        plural: "replicationcontrollers",
        singular: "replicationcontroller",
        kind: "ReplicationController",
        namespaced: true,
        short_names: &["rc"],
        subresources: &["status", "scale"],
        tracks_generation: true,
    },
    ResourceDef {
        group: "",
        version: "v1",
        api_version: "v1",
        plural: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        short_names: &["ev"],
        subresources: &[],
        tracks_generation: false,
    },
    ResourceDef {
        group: "apps",
        version: "v1",
        api_version: "apps/v1",
        plural: "replicasets",
        singular: "replicaset",
        kind: "ReplicaSet",
        namespaced: true,
        short_names: &["rs"],
        subresources: &["status", "scale"],
        tracks_generation: true,
    },
    ResourceDef {
        group: "events.k8s.io",
        version: "v1",
        api_version: "events.k8s.io/v1",
        plural: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        short_names: &["ev"],
        subresources: &[],
        tracks_generation: false,
    },
    ResourceDef {
        group: "coordination.k8s.io",
        version: "v1",
        api_version: "coordination.k8s.io/v1",
        plural: "leases",
        singular: "lease",
        kind: "Lease",
        namespaced: true,
        short_names: &[],
        subresources: &[],
        tracks_generation: false,
    },
];

/// The resource with this group, version and plural name.
pub(crate) fn lookup(group: &str, version: &str, plural: &str) -> Option<usize> {
    RESOURCES
        .iter()
        .position(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The resource whose objects have this `apiVersion` and `kind`.
pub(crate) fn by_kind(api_version: &str, kind: &str) -> Option<usize> {
    RESOURCES
        .iter()
        .position(|r| r.api_version == api_version && r.kind == kind)
}
