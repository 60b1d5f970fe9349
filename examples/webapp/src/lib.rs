//! # Writing an operator for a custom resource with ctrlkit
//!
//! This crate is `webapp-operator`, an operator for a `WebApp` custom
//! resource, written only against the `ctrlkit` facade (plus kube-rs,
//! k8s-openapi, schemars and clap, as any operator is). Read it top to
//! bottom as a tutorial; the README has the user's view (what a WebApp
//! becomes, how to deploy it) and a 40-line controller with the same
//! shape.
//!
//! A WebApp runs an image: the operator gives it a **ConfigMap** (its
//! config files), a **Deployment** (the image, the ConfigMap mounted) and a
//! **Service** (its port), registers its URL in a shared **routes
//! ConfigMap** in the operator's own namespace, and reports what it sees in
//! the WebApp's status.
//!
//! ## 1. The resource: [`resource`]
//!
//! `WebAppSpec` derives `kube::CustomResource`, which generates the
//! [`WebApp`](resource::WebApp) type and its CustomResourceDefinition:
//! group `example.ctrlkit.dev`, version `v1`, namespaced, short name `wa`,
//! category `all`, a status subresource ([`WebAppStatus`](resource::WebAppStatus))
//! and printer columns (`kubectl get wa` shows Replicas, Ready, Status and
//! Age). `schemars` attributes become the schema's validation
//! (`#[schemars(range(min = 0, max = 100))]` on `replicas`), serde defaults
//! its defaults, doc comments the descriptions `kubectl explain` shows.
//!
//! The CRD is never written by hand: `webapp-operator --print-crd` prints
//! [`resource::crd_yaml`], committed as `deploy/webapp-operator/crd.yaml`,
//! and `tests/crd.rs` fails when the two differ. The same test runs the CRD
//! through `ctrlkit-testcluster`'s copy of kube-apiserver's CRD validation,
//! so a schema the API server would refuse, or a bad spec it would let
//! through, fails `cargo test`.
//!
//! ## 2. Deciding, without I/O: [`validate`], [`children`], [`status`]
//!
//! Everything the reconcile decides is a pure function, tested on its own:
//!
//! - [`validate::validate`] lists what is wrong with a spec. The schema
//!   already rejects an empty image or 101 replicas on a real server, but
//!   the reconcile never trusts that (an object may predate a schema
//!   change; the name must also be a Service name; config keys must be
//!   ConfigMap keys). An invalid WebApp gets `Ready=False`,
//!   `Degraded=True` with reason `InvalidSpec` and every problem in the
//!   message, one Warning event, and nothing is built from it (what the
//!   last valid spec built keeps running). It is not retried: the fix is a
//!   spec change, which queues it again.
//! - [`children`] builds the ConfigMap, Deployment and Service a spec asks
//!   for, and [`children::merge_patch`] computes the JSON merge patch that
//!   brings an existing child back to it, or `None` when it already agrees
//!   (server defaults and other actors' fields are ignored). See that
//!   module for why it is a merge patch and not server-side apply.
//! - [`status::desired_status`] turns what happened into the conditions,
//!   keeping each condition's `lastTransitionTime` unless its status
//!   flips, so an unchanged status compares equal and is not written.
//!
//! ```
//! use ctrlkit_example_webapp::children::{desired_deployment, merge_patch};
//! use ctrlkit_example_webapp::resource::{WebApp, WebAppSpec};
//! use ctrlkit_example_webapp::validate::validate;
//!
//! let spec = WebAppSpec { image: "nginx:1.27".into(), replicas: 2, port: 80, config: None };
//! let mut app = WebApp::new("hello", spec);
//! assert!(validate(&app).is_ok());
//!
//! let running = desired_deployment(&app);
//! assert_eq!(merge_patch(&running, &running)?, None, "nothing to do");
//!
//! app.spec.replicas = 3;
//! let patch = merge_patch(&desired_deployment(&app), &running)?.expect("a change");
//! assert_eq!(patch["spec"]["replicas"], 3);
//!
//! app.spec.image.clear();
//! let invalid = validate(&app).unwrap_err();
//! assert_eq!(invalid.to_string(), "spec.image: Required value");
//! # Ok::<(), serde_json::Error>(())
//! ```
//!
//! ## 3. The reconcile: [`reconcile::reconcile`]
//!
//! ctrlkit calls `reconcile(key, Option<Arc<WebApp>>, Arc<Context>)` with
//! the WebApp as cached, or `None` once it is gone. It reads only the
//! informer caches in the [`Context`](reconcile::Context) and writes through
//! two kinds of handle:
//!
//! - `Arc<dyn ChildControl<C>>` for the children: `create` adds the
//!   controller reference (the garbage collector deletes the children with
//!   the WebApp) and records `SuccessfulCreate`/`FailedCreate` on it with
//!   the API server's own message; `patch` sends the merge patch.
//! - `Arc<dyn WebAppApi>` ([`api`]) for the rest: the finalizer (JSON
//!   patches that test before they change, as kube-runtime's finalizer
//!   helper does), the status (a merge patch of the status subresource),
//!   the routes ConfigMap and Warning events.
//!
//! Both are traits so tests substitute recording fakes. Every write's
//! resourceVersion goes into the controller's read-own-writes store, so
//! the next reconcile of that WebApp waits until the caches show the write
//! and never creates a child twice off a stale cache.
//!
//! The finalizer is the part a garbage collector cannot do: while a WebApp
//! is being deleted the reconcile removes its route entry, then the
//! finalizer, and the API server deletes the WebApp. A failed write is
//! reported in the status (`Degraded=True`, reason `FailedCreate`,
//! `FailedUpdate` or `ChildConflict`) and returned as an
//! [`Error`](reconcile::Error), which ctrlkit retries with backoff; writes
//! refused by the leader fence are retried without touching the status.
//!
//! ## 4. The wiring: [`controller`]
//!
//! [`controller::controller`] declares the controller on the manager
//! (its informer factory, its `--namespace` and its shared metrics):
//!
//! ```text
//! Controller::<WebApp>::builder_for(manager)
//!     .name("webapp-operator")
//!     .owns::<ConfigMap>().owns::<Deployment>().owns::<Service>()
//!     .watches_with(Watches::new(routes::owners_of).informer(routes))
//!     .workers(cli.workers)
//!     .drop_managed_fields()
//!     .read_own_writes(Duration::from_secs(10))
//! ```
//!
//! `owns` maps every child event to its WebApp through the controller
//! reference, so a Deployment becoming ready reconciles its WebApp;
//! `watches` maps a change of the routes ConfigMap to the WebApps named by
//! its entries, so a deleted entry is put back. `controller.cache()` hands
//! out the typed caches the reconcile reads. [`controller::add_to`] builds
//! the [`Context`](reconcile::Context) with the manager's child controls
//! (`manager.child_control(NAME)`: on its client, behind its leader fence)
//! and [`KubeWebAppApi`](api::KubeWebAppApi) (behind the same fence), and
//! hands controller, reconcile and context to `manager.add_controller`;
//! `main` is `block_on_main` with it ([`controller::Cli`] flattens the manager's
//! `ManagerArgs` next to the operator's own flags).
//!
//! ## 5. Testing
//!
//! `tests/reconcile.rs` runs the production declaration
//! ([`controller::controller`]) on a manager whose client is never used:
//! its factory's informers are not started but fed by hand with
//! `Informer::apply_event`, the writes go to `FakeChildControl`s and a fake
//! `WebAppApi`, and a small stand-in for the API server's watch feeds the
//! writes back into the informers. Time is tokio's paused clock. The tests
//! cover creation, updates after spec changes and hand edits, status and
//! conditions through a rollout, the finalizer on deletion, bad specs,
//! refused and conflicting writes, and a stand-by that must not write.
//! `tests/e2e.rs` runs the real binary's wiring end to end against
//! ctrlkit-testcluster in the test process (the CRD installed from the
//! type), or against the cluster of `CTRLKIT_E2E_KUBECONFIG` when set;
//! `tests/rbac.rs` does so under the shipped RBAC.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod api;
pub mod children;
mod compat;
pub mod controller;
pub mod reconcile;
pub mod resource;
pub mod routes;
pub mod status;
pub mod validate;

/// Compiles the README's 40-line controller as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
