//! Field accesses that differ between the Kubernetes API versions this crate
//! builds against (feature `v1_36`, the default, or `latest`, 1.37).
//!
//! In k8s-openapi 0.29, 1.37 made `ReplicaSet.spec` a plain field (it is an
//! `Option` up to 1.36) and made `ReplicaSetCondition.status`/`type_`
//! optional. Everything else in the crate goes through these helpers, so
//! only this file knows about the difference.

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetCondition, ReplicaSetSpec};

/// The ReplicaSet's spec, if it has one.
#[cfg(not(feature = "latest"))]
pub(crate) fn replica_set_spec(rs: &ReplicaSet) -> Option<&ReplicaSetSpec> {
    rs.spec.as_ref()
}

/// The ReplicaSet's spec, if it has one.
#[cfg(feature = "latest")]
pub(crate) fn replica_set_spec(rs: &ReplicaSet) -> Option<&ReplicaSetSpec> {
    Some(&rs.spec)
}

/// A condition's `(type, status)`; missing values read as empty strings.
#[cfg(not(feature = "latest"))]
pub(crate) fn condition_type_status(c: &ReplicaSetCondition) -> (String, String) {
    (c.type_.clone(), c.status.clone())
}

/// A condition's `(type, status)`; missing values read as empty strings.
#[cfg(feature = "latest")]
pub(crate) fn condition_type_status(c: &ReplicaSetCondition) -> (String, String) {
    (
        c.type_.clone().unwrap_or_default(),
        c.status.clone().unwrap_or_default(),
    )
}

/// Builds a ReplicaSet condition with only `type` and `status` set.
#[cfg(not(feature = "latest"))]
pub(crate) fn new_condition(type_: String, status: String) -> ReplicaSetCondition {
    ReplicaSetCondition {
        type_,
        status,
        ..Default::default()
    }
}

/// Builds a ReplicaSet condition with only `type` and `status` set.
#[cfg(feature = "latest")]
pub(crate) fn new_condition(type_: String, status: String) -> ReplicaSetCondition {
    ReplicaSetCondition {
        type_: Some(type_),
        status: Some(status),
        ..Default::default()
    }
}
