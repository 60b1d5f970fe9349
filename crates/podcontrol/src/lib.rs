//! Creating, deleting and patching pods on behalf of an owning controller,
//! and deciding which pods to give up first.
//!
//! # What this is for
//!
//! A workload controller (a ReplicaSet, a Job, your own operator) keeps a
//! number of pods alive for an *owner* object. When it needs more pods it
//! stamps them out of the owner's pod template; when it has too many it
//! deletes some; when it adopts or releases a pod it patches the pod's owner
//! references. Kubernetes' own controllers route all of that through one
//! small interface, and this crate is that interface for kube-rs:
//!
//! - [`PodControl`] — the trait: `create_pods`, `delete_pod`, `patch_pod`.
//!   Controllers hold an `Arc<dyn PodControl>`, so the API-backed
//!   implementation can be swapped for a fake in tests.
//! - [`KubePodControl`] — the real implementation over a [`kube::Client`]:
//!   `ctrlkit-childcontrol`'s generic `KubeChildControl<Pod>` with a pod
//!   template in front.
//!   It builds each pod from the template ([`pod_from_template`]): the
//!   template's labels, annotations, finalizers and spec, a `generateName` of
//!   `<owner>-` so the API server picks unique names, and an owner reference
//!   marking the owner as the pod's *controller*, so garbage collection
//!   deletes the pods with their owner. It records Kubernetes events on the
//!   owner (`SuccessfulCreate`, `FailedCreate`, `SuccessfulDelete`,
//!   `FailedDelete`) so `kubectl describe` shows what the controller did.
//! - [`FakePodControl`] — records every call and fails on cue, for unit
//!   tests of controllers.
//! - [`pod`] — predicates every controller needs: is a pod active, ready,
//!   available (ready for `minReadySeconds`), terminating.
//! - [`availability`] — when to requeue an owner so that a pod crossing
//!   its `minReadySeconds` is noticed without a watch event.
//! - [`ranking`] — the order in which to delete surplus pods (unscheduled and
//!   not-ready pods first, then by `pod-deletion-cost`, crowding on nodes,
//!   age in logarithmic buckets, restarts), matching the kube-controller-manager.
//!
//! Any pod control can be wrapped in `ctrlkit-childcontrol`'s `Observed`
//! (e.g. with `RecordWrites<Pod>` for read-own-writes), and
//! `Arc<dyn PodControl>` is itself a `PodControl`.
//!
//! Errors are [`PodControlError`]s (the same type as
//! `ctrlkit_childcontrol::ChildControlError`), with helpers such as
//! [`is_not_found`](PodControlError::is_not_found) and
//! [`is_namespace_terminating`](PodControlError::is_namespace_terminating).
//! Deleting a pod that is already gone is not an error.
//!
//! # Example
//!
//! A controller step written against the trait, tested with the fake (no
//! cluster needed):
//!
//! ```
//! use std::collections::BTreeMap;
//! use ctrlkit_podcontrol::{FakePodControl, PodControl, PodControlError};
//! use k8s_openapi::api::core::v1::{ObjectReference, PodTemplateSpec};
//! use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
//!
//! /// Creates `missing` pods; returns how many were created.
//! async fn scale_up(
//!     pods: &dyn PodControl,
//!     missing: usize,
//!     template: &PodTemplateSpec,
//!     owner: &ObjectReference,
//!     controller_ref: &OwnerReference,
//! ) -> Result<usize, PodControlError> {
//!     for created in 0..missing {
//!         if let Err(e) = pods.create_pods("default", template, owner, controller_ref).await {
//!             // The namespace is being deleted: nothing left to do.
//!             if e.is_namespace_terminating() {
//!                 return Ok(created);
//!             }
//!             return Err(e);
//!         }
//!     }
//!     Ok(missing)
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let template = PodTemplateSpec {
//!     metadata: Some(ObjectMeta {
//!         labels: Some(BTreeMap::from([("app".to_string(), "web".to_string())])),
//!         ..Default::default()
//!     }),
//!     spec: Some(Default::default()),
//! };
//! let owner = ObjectReference {
//!     api_version: Some("apps/v1".into()),
//!     kind: Some("ReplicaSet".into()),
//!     name: Some("web".into()),
//!     namespace: Some("default".into()),
//!     uid: Some("6b1c0a4e-0000-4000-8000-000000000001".into()),
//!     ..Default::default()
//! };
//! let controller_ref = OwnerReference {
//!     api_version: "apps/v1".into(),
//!     kind: "ReplicaSet".into(),
//!     name: "web".into(),
//!     uid: "6b1c0a4e-0000-4000-8000-000000000001".into(),
//!     controller: Some(true),
//!     block_owner_deletion: Some(true),
//! };
//!
//! let fake = FakePodControl::new();
//! // The third create fails as if the API server were overloaded.
//! fake.fail_after(2, || PodControlError::api_status(429, "TooManyRequests", "slow down"));
//!
//! let err = scale_up(&fake, 3, &template, &owner, &controller_ref).await.unwrap_err();
//! assert_eq!(err.status_code(), Some(429));
//! assert_eq!(fake.create_count(), 3); // attempts, the failed one included
//! let names: Vec<_> = fake.created_pods().iter().map(|p| p.metadata.name.clone().unwrap()).collect();
//! assert_eq!(names, ["web-0", "web-1"]);
//! # });
//! ```
//!
//! Against a cluster, pass
//! `KubePodControl::new(client, "my-controller")` instead of the fake.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod control;
mod error;
mod fake;
mod kube_control;
mod template;

pub mod availability;
pub mod pod;
pub mod ranking;

pub use control::PodControl;
/// What [`KubePodControl::with_child_labeller`] takes (from `ctrlkit-childcontrol`).
pub use ctrlkit_childcontrol::ChildLabeller;
pub use error::{PodControlError, is_namespace_terminating_status, status_is};
pub use fake::{FakePodControl, Operation, RecordedCreate, RecordedDelete, RecordedPatch};
pub use kube_control::{
    FAILED_CREATE_POD_REASON, FAILED_DELETE_POD_REASON, KubePodControl,
    SUCCESSFUL_CREATE_POD_REASON, SUCCESSFUL_DELETE_POD_REASON,
};
pub use template::{
    MAX_GENERATED_NAME_PREFIX_LEN, generate_name_prefix, pod_from_template, validate_controller_ref,
};
