//! The owner side of the controller: what the generic replica logic needs to
//! know about a ReplicaSet or a ReplicationController.
//!
//! Upstream runs the ReplicationController through the ReplicaSet code by
//! converting objects on the way in and out. Here both types implement
//! [`ReplicaOwner`] instead, and the controller is generic over it.

mod replica_set;
mod replication_controller;
mod status;

use std::fmt::Debug;

use ctrlkit_refmanager::{Selector, SelectorError};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde::Serialize;
use serde::de::DeserializeOwned;

pub use status::{REPLICA_FAILURE, ReplicaCondition, ReplicaStatus};

/// An object that keeps a number of pod replicas alive from a template:
/// `ReplicaSet` (apps/v1) or `ReplicationController` (v1).
///
/// Implementations only translate fields; the behaviour lives in the
/// generic [`Controller`](crate::Controller). Reads never fail on missing
/// fields: they fall back to the API server's defaults.
pub trait ReplicaOwner:
    kube::Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + k8s_openapi::Resource<Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// The controller's name: event source (`replicaset-controller`,
    /// `replication-controller`) and worker metrics label.
    const CONTROLLER_NAME: &'static str;
    /// The workqueue's name (its metrics label): `replicaset`,
    /// `replicationmanager`.
    const QUEUE_NAME: &'static str;
    /// Whether the status has `terminatingReplicas` (ReplicaSet since 1.33;
    /// never for ReplicationControllers).
    const HAS_TERMINATING_REPLICAS: bool;
    /// Whether scale-down ranks pods by how crowded their node is with pods
    /// of owners sharing this owner's controller (a Deployment's
    /// ReplicaSets). Upstream's ReplicationController path never finds such
    /// owners, so it is `false` there.
    const RANKS_BY_RELATED_OWNERS: bool;

    /// The compiled pod selector.
    ///
    /// # Errors
    /// [`SelectorError`] if the selector is invalid (e.g. an unknown
    /// operator).
    fn selector(&self) -> Result<Selector, SelectorError>;

    /// `spec.replicas` as written; `None` when absent (the API server
    /// defaults it to 1).
    fn spec_replicas(&self) -> Option<i32>;

    /// `spec.minReadySeconds`, 0 when absent.
    fn min_ready_seconds(&self) -> i32;

    /// `spec.template`, if any.
    fn template(&self) -> Option<&PodTemplateSpec>;

    /// The status, normalised (absent counters read as 0).
    fn replica_status(&self) -> ReplicaStatus;

    /// Replaces the status with `status`. Fields the type does not have
    /// (`terminatingReplicas` on a ReplicationController) are dropped.
    fn set_replica_status(&mut self, status: ReplicaStatus);

    /// Whether `self` and `other` have the same spec (all of it).
    fn same_spec(&self, other: &Self) -> bool;
}
