//! Which pods to give up first when a controller has too many.
//!
//! When a ReplicaSet scales down it must pick victims. The order is designed
//! to hurt least: pods that are not doing useful work yet (unscheduled,
//! pending, not ready) go first, then pods the user marked cheap with the
//! `controller.kubernetes.io/pod-deletion-cost` annotation, then pods on
//! nodes crowded with related pods, then the most recently ready, the most
//! crash-prone and the newest. [`deletes_before`] documents every step.
//!
//! Everything here is a pure function of the pods and an explicit `now`.
//!
//! ```
//! use ctrlkit_podcontrol::ranking::pods_to_delete;
//! use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
//! use k8s_openapi::jiff::Timestamp;
//!
//! fn pod(name: &str, node: Option<&str>, phase: &str) -> Pod {
//!     let mut p = Pod::default();
//!     p.metadata.name = Some(name.into());
//!     p.spec = Some(PodSpec { node_name: node.map(Into::into), ..Default::default() });
//!     p.status = Some(PodStatus { phase: Some(phase.into()), ..Default::default() });
//!     p
//! }
//!
//! let pods = vec![
//!     pod("running", Some("node-a"), "Running"),
//!     pod("pending", Some("node-a"), "Pending"),
//!     pod("unscheduled", None, "Pending"),
//! ];
//! let doomed = pods_to_delete(pods.clone(), &pods, 2, Timestamp::now());
//! let names: Vec<_> = doomed.iter().map(|p| p.metadata.name.as_deref().unwrap()).collect();
//! assert_eq!(names, ["unscheduled", "pending"]);
//! ```

mod age_ratio;
mod colocation;
mod compare;
mod cost;
mod ranked;
mod sort;

pub use age_ratio::deletion_age_ratios;
pub use colocation::{pods_to_delete, rank_by_related_pods_on_same_node};
pub use compare::{
    RankingOptions, active_pods_less, deletes_before, logarithmic_rank, logs_before,
};
pub use cost::{
    InvalidDeletionCost, POD_DELETION_COST_ANNOTATION, deletion_cost_from_annotations,
    pod_deletion_cost,
};
pub use ranked::ActivePodsWithRanks;
pub use sort::{sort_active_pods, sort_by_less, sort_for_deletion};

#[cfg(test)]
mod tests;
