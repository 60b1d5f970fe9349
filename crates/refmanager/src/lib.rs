//! Adopt and release dependents by owner reference: the controller-ref
//! manager of kube-controller-manager (`ClaimObject`, `ClaimPods`) for
//! kube-rs.
//!
//! # Owner references in one page
//!
//! Every Kubernetes object can list **owner references** in
//! `metadata.ownerReferences`: "this pod belongs to ReplicaSet `web`
//! (uid `1234…`)". The garbage collector uses them to delete dependents
//! when their owner is deleted. At most one of those references may carry
//! `controller: true`; that owner is the object's **controller**, the one
//! controller process that manages it. A reference is identified by the
//! owner's **UID**, not its name, so a re-created owner with the same name
//! owns nothing of its predecessor's.
//!
//! A ReplicaSet does not find its pods by owner reference alone; it finds
//! them by **label selector** (`spec.selector`). The two can disagree:
//!
//! - a pod matching the selector may have no controller (an **orphan**:
//!   created by hand, or released by a previous owner) — the ReplicaSet
//!   **adopts** it by adding its controller reference;
//! - a pod the ReplicaSet controls may stop matching (someone relabelled
//!   it) — the ReplicaSet **releases** it by removing its reference, and
//!   the pod lives on as an orphan;
//! - a pod controlled by another controller is never touched, whatever its
//!   labels.
//!
//! Doing this at the start of every sync is called **claiming**. The pods
//! claimed are the ones the controller counts and manages.
//!
//! # The rules
//!
//! [`BaseRefManager::decide`] is the decision table, identical to
//! upstream's `ClaimObject`:
//!
//! | object | matches | owner being deleted | result |
//! |---|---|---|---|
//! | controlled by another UID | any | any | skip |
//! | controlled by us | yes | any | **keep** (claimed, no write) |
//! | controlled by us | no | yes | skip (no release while deleting) |
//! | controlled by us | no | no | **release** |
//! | orphan | any | yes | skip |
//! | orphan | no | no | skip |
//! | orphan being deleted | yes | no | skip |
//! | orphan in another namespace (namespaced owner) | yes | no | skip |
//! | orphan | yes | no | **adopt** |
//!
//! Writes are strategic merge patches ([`adoption_patch`],
//! [`release_patch`]) that carry the dependent's UID as a precondition, so
//! a patch aimed at a deleted pod can never land on a new pod that took its
//! name. A release removes only our own reference. A dependent that is gone
//! (NotFound) is simply not claimed; a release refused as Invalid (nothing
//! of ours left to remove) is not an error either.
//!
//! Before the first adoption of a pass, the manager makes sure the owner
//! still exists with the same UID and is not being deleted, through a
//! [`CanAdopt`] check — usually a live read ([`ApiRecheck`],
//! [`RecheckOwner`]) since the informer cache may lag. The check runs **at
//! most once per manager**, and never if nothing needs adopting, so build a
//! new manager for every sync.
//!
//! Errors do not stop a pass: each failed object is reported in
//! [`ClaimOutcome::errors`] and left out of [`ClaimOutcome::claimed`];
//! [`ClaimOutcome::into_result`] turns them into one [`ClaimErrors`].
//!
//! # Pieces
//!
//! - [`Selector`]: a validated label selector (`matchLabels` +
//!   `matchExpressions`, or a ReplicationController's plain map).
//! - [`OwnerMeta`]: the owner's identity (`apiVersion`, `kind`, name, UID,
//!   namespace, deletion timestamp).
//! - [`Dependent`]: anything with `ObjectMeta`; every `kube::Resource`.
//! - [`DependentControl`]: how patches are sent; implemented for every
//!   [`PodControl`](ctrlkit_podcontrol::PodControl) and by [`ApiPatcher`].
//! - [`ControllerRefManager`] (aliases [`PodControllerRefManager`],
//!   [`ReplicaSetControllerRefManager`]): the claim pass over a list of
//!   dependents.
//! - [`BaseRefManager::claim_object`]: the same rules with writes of your
//!   own.
//!
//! # Example
//!
//! ```
//! use std::collections::BTreeMap;
//! use std::sync::Arc;
//!
//! use ctrlkit_podcontrol::FakePodControl;
//! use ctrlkit_refmanager::{AlwaysAdopt, OwnerMeta, PodControllerRefManager, Selector};
//! use k8s_openapi::api::core::v1::Pod;
//! use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
//!
//! fn pod(name: &str, tier: &str) -> Pod {
//!     Pod {
//!         metadata: ObjectMeta {
//!             name: Some(name.into()),
//!             namespace: Some("default".into()),
//!             uid: Some(format!("uid-{name}")),
//!             labels: Some(BTreeMap::from([("tier".into(), tier.into())])),
//!             ..Default::default()
//!         },
//!         ..Default::default()
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let owner = OwnerMeta::new("apps/v1", "ReplicaSet", "web", "rs-uid")?.with_namespace("default");
//! let selector = Selector::from_map(&BTreeMap::from([("tier".into(), "web".into())]))?;
//! let pods = FakePodControl::new();
//!
//! let manager =
//!     PodControllerRefManager::new(Arc::new(pods.clone()), owner, selector, AlwaysAdopt);
//! let candidates = vec![pod("a", "web"), pod("b", "db")];
//! let claimed = manager.claim_pods(&candidates, &[]).await.into_result()?;
//!
//! // The orphan with matching labels was adopted; the other one left alone.
//! assert_eq!(claimed.len(), 1);
//! assert_eq!(claimed[0].metadata.name.as_deref(), Some("a"));
//! let patches = pods.patches();
//! assert_eq!(patches.len(), 1);
//! assert_eq!(patches[0].0, "a");
//! assert_eq!(patches[0].1["metadata"]["uid"], "uid-a");
//! assert_eq!(patches[0].1["metadata"]["ownerReferences"][0]["controller"], true);
//! # Ok(())
//! # }
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]

mod base;
mod can_adopt;
mod control;
mod dependent;
mod error;
mod label_syntax;
mod manager;
mod owner;
mod patch;
mod selector;

pub use base::{BaseRefManager, Decision, SkipReason};
pub use can_adopt::{AlwaysAdopt, ApiRecheck, CanAdopt, CanAdoptError, RecheckOwner};
pub use control::{ApiErrorClass, ApiPatcher, DependentControl};
pub use dependent::{Dependent, controller_ref, is_controlled_by};
pub use error::{ClaimAction, ClaimError, ClaimErrors, ClaimOutcome};
pub use manager::{
    ControllerRefManager, Filter, PodControllerRefManager, ReplicaSetControllerRefManager,
};
pub use owner::{OwnerError, OwnerMeta};
pub use patch::{adoption_patch, release_patch};
pub use selector::{Operator, Selector, SelectorError};

// Compiles the README's example so it cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
