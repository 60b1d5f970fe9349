//! Creating, deleting and patching children of any kind on behalf of an
//! owning controller: what `PodControl` does for pods, for ConfigMaps,
//! Deployments, Services or your own custom resources.
//!
//! # What this is for
//!
//! An operator's owner object (say an `App` custom resource) is realised
//! by *children*: objects the controller creates, that carry a controller
//! owner reference to the owner (so garbage collection deletes them with
//! it and `kubectl describe` shows who made them), and whose creation and
//! deletion the owner's events should report. Kubernetes' own controllers
//! route these writes through one small interface per kind; this crate is
//! that interface for every kind:
//!
//! - [`ChildControl<C>`] — the trait: `create`, `delete`, `patch`.
//!   Controllers hold an `Arc<dyn ChildControl<C>>`, so the API-backed
//!   implementation can be swapped for a fake in tests.
//! - [`KubeChildControl<C>`] — the real implementation over a
//!   [`kube::Client`]. It builds each child from a template
//!   ([`child_from_template`]: namespace set, the owner as controller, the
//!   server-set fields cleared), and records Kubernetes events on the owner
//!   with upstream's reasons ([`SUCCESSFUL_CREATE_REASON`],
//!   [`FAILED_CREATE_REASON`], [`SUCCESSFUL_DELETE_REASON`],
//!   [`FAILED_DELETE_REASON`]) and messages (`Created configmap: web-1`,
//!   `Error creating: <the API server's message>`). A create refused
//!   because the namespace is being deleted is
//!   [`ChildControlError::NamespaceTerminating`], without an event.
//! - [`FakeChildControl<C>`] — records every call and fails on cue, for
//!   unit tests of controllers.
//! - [`ChildControlExt`] — [`create_for`](ChildControlExt::create_for) an
//!   owner object, and [`ensure`](ChildControlExt::ensure): create a child
//!   from the object the owner wants, or patch it when it drifted.
//! - [`WriteGate`] — a check before every write that can refuse it (for
//!   fencing writes when leadership is lost).
//! - [`Observed`] with a [`WriteObserver`] — one delegating wrapper that
//!   sees every successful write; [`RecordWrites`] records the returned
//!   resourceVersions for read-own-writes (`ctrlkit-consistency`).
//!
//! `ctrlkit-podcontrol`'s `KubePodControl` is this crate's
//! `KubeChildControl<Pod>` with a pod template in front, and its
//! `PodControlError` is [`ChildControlError`].
//!
//! # Example
//!
//! A controller step written against the trait, tested with the fake (no
//! cluster needed):
//!
//! ```
//! use ctrlkit_childcontrol::{ChildControl, ChildControlError, FakeChildControl, controller_ref_for};
//! use k8s_openapi::api::apps::v1::Deployment;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::Resource;
//!
//! /// Makes sure the owner has its ConfigMap; returns its name.
//! async fn ensure_config(
//!     configmaps: &dyn ChildControl<ConfigMap>,
//!     owner: &Deployment,
//! ) -> Result<String, ChildControlError> {
//!     let mut template = ConfigMap::default();
//!     template.metadata.generate_name = Some("web-config-".into());
//!     template.data = Some([("mode".to_string(), "fast".to_string())].into());
//!     let cref = controller_ref_for(owner)
//!         .ok_or_else(|| ChildControlError::InvalidTemplate("owner not stored yet".into()))?;
//!     let namespace = owner.metadata.namespace.as_deref().unwrap_or("default");
//!     let created = configmaps.create(namespace, &template, &owner.object_ref(&()), &cref).await?;
//!     Ok(created.metadata.name.unwrap_or_default())
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let mut owner = Deployment::default();
//! owner.metadata.name = Some("web".into());
//! owner.metadata.namespace = Some("default".into());
//! owner.metadata.uid = Some("6b1c0a4e-0000-4000-8000-000000000001".into());
//!
//! let fake = FakeChildControl::<ConfigMap>::new();
//! assert_eq!(ensure_config(&fake, &owner).await.unwrap(), "web-config-0");
//! let created = &fake.created()[0];
//! assert_eq!(created.metadata.namespace.as_deref(), Some("default"));
//! assert_eq!(created.metadata.owner_references.as_ref().unwrap()[0].kind, "Deployment");
//!
//! // The next create fails as if the API server refused it.
//! fake.fail_next(1, || ChildControlError::api_status(403, "Forbidden", "exceeded quota: cms"));
//! let err = ensure_config(&fake, &owner).await.unwrap_err();
//! assert_eq!(err.to_string(), "exceeded quota: cms");
//! # });
//! ```
//!
//! Against a cluster, pass `KubeChildControl::<ConfigMap>::new(client,
//! "my-controller")` instead of the fake.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod control;
mod ensure;
mod error;
mod events;
mod fake;
mod gate;
mod kube_control;
mod labeller;
mod observe;
mod template;

pub use control::{ChildControl, Operation};
pub use ensure::{ChildControlExt, Ensured};
pub use error::{
    ChildControlError, WriteRefused, api_error_message, is_namespace_terminating_status, status_is,
};
pub use events::{
    FAILED_CREATE_REASON, FAILED_DELETE_REASON, SUCCESSFUL_CREATE_REASON, SUCCESSFUL_DELETE_REASON,
};
pub use fake::{FakeChildControl, RecordedCreate, RecordedDelete, RecordedPatch};
pub use gate::{WriteAttempt, WriteGate};
pub use kube_control::{ChildResource, DEFAULT_FIELD_MANAGER, KubeChildControl};
pub use labeller::ChildLabeller;
pub use observe::{Observed, RecordWrites, WriteObserver};
// In `ctrlkit-informer`, so the event recorder shares it.
pub use ctrlkit_informer::ServerMetadata;
pub use template::{child_from_template, controller_ref_for, validate_controller_ref};

/// Compiles the README's example as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
