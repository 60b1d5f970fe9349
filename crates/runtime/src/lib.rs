//! Controllers for any Kubernetes resource, built from ctrlkit's parts: the
//! layer kube-runtime's `Controller` and controller-runtime's builder
//! occupy.
//!
//! # The pieces
//!
//! - [`Controller`] — declared with [`Controller::builder`] for an owner
//!   kind `K` (any k8s-openapi kind, any `#[derive(CustomResource)]` type):
//!   [`owns`](ControllerBuilder::owns) children mapped to their owner
//!   through the controller `ownerReference`,
//!   [`watches`](ControllerBuilder::watches) other kinds mapped by a
//!   function, workers, rate limiter, timeout, transforms applied before
//!   objects are cached ([`drop_managed_fields`](ControllerBuilder::drop_managed_fields)),
//!   extra indexes, metrics under client-go's and controller-runtime's
//!   names, read-own-writes. [`Controller::run`] waits for the caches and
//!   reconciles keys on N workers with retries, panic containment and
//!   graceful drain. Keys are [`ObjectKey`]s; events from the initial list
//!   and resyncs are queued at [`LOW_PRIORITY`].
//! - [`child`] — children of any kind: [`ChildControl`] (create from a
//!   template with a controller reference, delete, patch, with
//!   `SuccessfulCreate` / `FailedCreate` / … events on the owner),
//!   [`KubeChildControl`], [`FakeChildControl`], a write gate and
//!   read-own-writes recording.
//! - [`manager`] — the process around controllers: one informer factory and
//!   metrics registry for several controllers, leader election with a write
//!   fence ([`LeaderFence`]), `/metrics` `/healthz` `/readyz`, graceful
//!   drain, logging and the flags binaries share ([`ManagerArgs`]).
//! - [`shard`] — sharded scale-out: replicas on a ring of Leases share the
//!   owners by the hash of their UID, handed over without overlap.
//!
//! # On a manager
//!
//! In a binary, a controller lives on a [`Manager`] in a few lines:
//!
//! ```text
//! let controller = Controller::<App>::builder_for(manager)  // factory, --namespace, metrics
//!     .owns::<ConfigMap>()
//!     .owner_update_filter(|old, new| predicates::generation_changed(old, new))
//!     .build()?;
//! let ctx = Arc::new(Ctx {
//!     configmaps: manager.child_control("app-controller"),     // fenced to the leader
//!     cache: controller.cache()?,                               // typed Store<ConfigMap>
//! });
//! manager.add_controller(controller, reconcile, ctx);           // runs once leading, drains on shutdown
//! ```
//!
//! and the reconcile writes each child from the object it wants with
//! [`ChildControlExt::ensure`](child::ChildControlExt::ensure) (created
//! with the controller reference if missing, patched if it drifted),
//! returning [`ChildControlError`] itself if it has no error type of its
//! own. The `webapp` example's README has the complete program in 30
//! lines.
//!
//! A reconcile gets the key, the owner as cached (or `None` once it is
//! gone, so cleanup can run) and your context, and returns an [`Action`]:
//!
//! ```text
//! async fn reconcile(key: ObjectKey, obj: Option<Arc<K>>, ctx: Arc<Ctx>) -> Result<Action, E>
//! ```
//!
//! # Example
//!
//! A controller that gives every Deployment a ConfigMap, unit-tested the
//! way any controller built on this crate can be: manual informers fed by
//! hand, a [`FakeChildControl`] instead of the API, and paused tokio time.
//! Against a cluster the same controller is built with
//! `Controller::builder(&factory)` and `KubeChildControl::new(client, name)`.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use ctrlkit_informer::{Informer, Store};
//! use ctrlkit_runtime::child::{ChildControl, FakeChildControl, controller_ref_for};
//! use ctrlkit_runtime::{Action, Controller, ObjectKey, Owns};
//! use k8s_openapi::api::apps::v1::Deployment;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::Resource;
//! use kube::runtime::watcher::Event;
//! use tokio_util::sync::CancellationToken;
//!
//! type Error = Box<dyn std::error::Error + Send + Sync>;
//!
//! struct Ctx {
//!     configmaps: Arc<dyn ChildControl<ConfigMap>>,
//!     cache: Store<ConfigMap>,
//! }
//!
//! async fn reconcile(key: ObjectKey, app: Option<Arc<Deployment>>, ctx: Arc<Ctx>) -> Result<Action, Error> {
//!     let Some(app) = app else {
//!         // Deleted: the garbage collector removes its ConfigMap.
//!         return Ok(Action::done());
//!     };
//!     let uid = app.meta().uid.as_deref().unwrap_or_default();
//!     if ctx.cache.by_controller(&key.namespace, uid, false)?.is_empty() {
//!         let mut template = ConfigMap::default();
//!         template.metadata.generate_name = Some(format!("{}-config-", key.name));
//!         let cref = controller_ref_for(app.as_ref()).ok_or("owner without UID")?;
//!         ctx.configmaps.create(&key.namespace, &template, &app.object_ref(&()), &cref).await?;
//!     }
//!     Ok(Action::requeue_after(Duration::from_secs(300)))
//! }
//!
//! fn deployment(name: &str, uid: &str) -> Deployment {
//!     let mut d = Deployment::default();
//!     d.metadata.namespace = Some("default".into());
//!     d.metadata.name = Some(name.into());
//!     d.metadata.uid = Some(uid.into());
//!     d.metadata.resource_version = Some("1".into());
//!     d
//! }
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let deployments = Informer::<Deployment>::manual().build();
//! let configmaps = Informer::<ConfigMap>::manual().build();
//! let controller = Controller::builder_with(deployments.clone())
//!     .name("config-controller")
//!     .owns_with(Owns::new().informer(configmaps.clone()))
//!     .workers(2)
//!     .timeout(Duration::from_secs(30))
//!     .build()?;
//!
//! let fake = FakeChildControl::<ConfigMap>::new();
//! let ctx = Arc::new(Ctx { configmaps: Arc::new(fake.clone()), cache: configmaps.store() });
//! let stop = CancellationToken::new();
//! let run = tokio::spawn(controller.run(reconcile, ctx, stop.clone().cancelled_owned()));
//!
//! // The informers' first lists: one Deployment, no ConfigMaps.
//! for event in [Event::Init, Event::InitApply(deployment("web", "uid-web")), Event::InitDone] {
//!     deployments.apply_event(event);
//! }
//! configmaps.apply_event(Event::Init);
//! configmaps.apply_event(Event::InitDone);
//! tokio::time::sleep(Duration::from_millis(10)).await;
//!
//! let created = fake.created();
//! assert_eq!(created.len(), 1);
//! assert_eq!(created[0].metadata.name.as_deref(), Some("web-config-0"));
//! assert_eq!(created[0].metadata.owner_references.as_ref().unwrap()[0].uid, "uid-web");
//!
//! // The informer shows the ConfigMap; the next reconcile finds it.
//! configmaps.apply_event(Event::Apply(created[0].clone()));
//! tokio::time::sleep(Duration::from_millis(10)).await;
//! assert_eq!(fake.create_count(), 1);
//!
//! stop.cancel();
//! run.await??;
//! # Ok(())
//! # }
//! ```
//!
//! # Guarantees
//!
//! - Handlers only read caches, touch expectations and queue keys; they
//!   never block and allocate only the key.
//! - `build` reports every misuse as a [`BuildError`]; nothing panics.
//! - A reconcile that panics or times out is an error for its key only.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod child;
mod controller;
pub mod manager;
pub mod shard;

pub use controller::predicates;
pub use controller::{
    BuildError, Controller, ControllerBuilder, ControllerMetrics, LOW_PRIORITY, Owns, RunError,
    STALE_RECONCILE_REQUEUE, Watchable, Watches, creation_id,
};
pub use ctrlkit_childcontrol::{
    ChildControl, ChildControlError, FakeChildControl, KubeChildControl,
};
pub use ctrlkit_informer::{ObjectKey, Transform, drop_managed_fields};
pub use ctrlkit_worker::{Action, Failure, Stopped, SyncError};
pub use manager::{LeaderFence, Manager, ManagerArgs, Runnable};
