//! Read-own-writes for Kubernetes controllers: before syncing an owner, wait
//! until the informer caches show the writes this controller made for it.
//!
//! # The problem
//!
//! A controller reads the world from informer caches, which lag behind the
//! API server. When a sync creates pods or writes the owner's status, the
//! next sync of the same owner may run before the watch events of those
//! writes reached the caches. It then acts on a picture that does not
//! include its own work: it creates pods it already created, or writes a
//! status on top of an outdated copy of the owner and gets a
//! `409 Conflict`. Expectations (`ctrlkit-expectations`) cover the
//! creates and deletes they count, but only until their time-to-live runs
//! out, and not the owner's own status.
//!
//! # The idea
//!
//! Every object the API server returns carries a `resourceVersion`, and on
//! etcd-backed servers those versions increase with every write. So the
//! controller remembers, per owner, the highest version it wrote for each
//! resource ([`ConsistencyStore::wrote_at`]), and an informer cache knows
//! the newest version it has applied. At the start of a sync,
//! [`ConsistencyStore::ensure_ready`] compares the two: if some cache has
//! not reached the written version yet, the sync is skipped and retried a
//! little later (the watch event that brings the write usually enqueues
//! the owner again). Once observed, the record is dropped. When the owner
//! is deleted, [`ConsistencyStore::clear`] forgets it.
//!
//! This is Kubernetes 1.36's "read your own writes" for controllers
//! (KEP-5647, the `ConsistencyStore` of the ReplicaSet, Job and DaemonSet
//! controllers), written for ctrlkit's informer.
//!
//! # When the store lets a sync through anyway
//!
//! The store must never wedge an owner, so it fails open:
//!
//! - **Versions it cannot order.** Kubernetes documents resourceVersions as
//!   opaque; they are compared as integers (true of every etcd-backed API
//!   server). If either side is not an integer the write counts as observed,
//!   as upstream does.
//! - **A cache that never catches up.** ctrlkit's informer learns versions
//!   only from the objects it applies: after a relist, a pod that was
//!   created and deleted while the watch was down leaves no trace, and in a
//!   quiet namespace nothing may move the cache past that pod's version.
//!   So each owner waits at most a bounded time ([`DEFAULT_MAX_WAIT`],
//!   configurable) from its oldest unobserved write; then the store logs a
//!   warning, forgets the write and lets the sync run, which is exactly
//!   what a controller without read-own-writes would have done.
//! - **Resources without a registered cache** are not tracked, and a cache
//!   that has not completed its first list yet is not consulted (upstream
//!   skips a store without a sync version the same way).
//!
//! Each case is counted in [`ConsistencyStore::stats`].
//!
//! # Example
//!
//! ```
//! use ctrlkit_consistency::{ConsistencyStore, GroupResource};
//! use ctrlkit_informer::Informer;
//! use k8s_openapi::api::core::v1::Pod;
//! use kube::runtime::watcher::Event;
//!
//! fn pod(name: &str, rv: &str) -> Pod {
//!     let mut p = Pod::default();
//!     p.metadata.namespace = Some("default".into());
//!     p.metadata.name = Some(name.into());
//!     p.metadata.resource_version = Some(rv.into());
//!     p
//! }
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! // An informer cache of pods (fed by hand here; a watch in a controller),
//! // after its first (here empty) list.
//! let pods = Informer::<Pod>::manual().build();
//! pods.apply_event(Event::Init);
//! pods.apply_event(Event::InitDone);
//! let store = ConsistencyStore::builder()
//!     .cache(GroupResource::of::<Pod>(), pods.store())
//!     .build();
//! let owner = "default/web";
//!
//! // Nothing written yet: the owner may be synced.
//! assert!(store.ensure_ready(owner).is_ok());
//!
//! // The sync created a pod; the API server stored it at version 12.
//! store.wrote_at(owner, &GroupResource::of::<Pod>(), "12");
//!
//! // The watch has not delivered it: the next sync must wait.
//! let why = store.ensure_ready(owner).unwrap_err();
//! assert_eq!(why.written, "12");
//!
//! // The informer shows the pod: ready again, and the record is gone.
//! pods.apply_event(Event::Apply(pod("web-x7k2p", "12")));
//! assert!(store.ensure_ready(owner).is_ok());
//! assert!(store.is_empty());
//!
//! // The owner was deleted: forget whatever was still recorded.
//! store.wrote_at(owner, &GroupResource::of::<Pod>(), "20");
//! store.clear(owner);
//! assert!(store.ensure_ready(owner).is_ok());
//! # }
//! ```

mod cache;
mod error;
mod record;
mod resource;
mod stats;
mod store;

pub use cache::ObservedVersions;
pub use error::NotObservedYet;
pub use resource::GroupResource;
pub use stats::ConsistencyStats;
pub use store::{ConsistencyStore, ConsistencyStoreBuilder, DEFAULT_MAX_WAIT};

/// Compiles and runs the README's example as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
