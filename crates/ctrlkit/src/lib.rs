//! The machinery the kube-controller-manager is built from, for controllers
//! written with [kube-rs](https://kube.rs).
//!
//! `ctrlkit` is the facade over a set of small crates, one concept each. Add
//! this crate to get all of them; add a single `ctrlkit-*` crate if that is
//! all you need.
//!
//! | module | crate | what it gives you |
//! |---|---|---|
//! | [`runtime`] | `ctrlkit-runtime` | a controller for any resource in one builder: `Controller::builder(&factory).owns::<ConfigMap>().build()?.run(reconcile, ctx, shutdown)` |
//! | [`childcontrol`] | `ctrlkit-childcontrol` | children of any kind: `ChildControl<C>` (create from a template with a controller reference, delete, patch, with events on the owner), its kube implementation, a recording fake, a write gate |
//! | [`workqueue`] | `ctrlkit-workqueue` | a fair, deduplicating work queue with delays, per-key rate-limited retries, priorities and metrics |
//! | [`informer`] | `ctrlkit-informer` | a watch-driven cache with indexes and add/update/delete handlers that see old and new objects |
//! | [`worker`] | `ctrlkit-worker` | N workers running your sync function over the queue, with retries, panic containment and graceful drain |
//! | [`expectations`] | `ctrlkit-expectations` | "I created 3 pods and have not seen them yet": keeps a sync from acting on a stale cache |
//! | [`consistency`] | `ctrlkit-consistency` | read-own-writes: skip a sync until the informer caches show the resourceVersions this controller wrote |
//! | [`batch`] | `ctrlkit-batch` | `slow_start_batch`: create many objects in doubling batches, stopping at the first failure |
//! | [`podcontrol`] | `ctrlkit-podcontrol` | the `PodControl` trait (create/delete/patch pods with events), its kube implementation and a recording fake, pod predicates, the scale-down ranking |
//! | [`refmanager`] | `ctrlkit-refmanager` | adopting and releasing dependents through controller `ownerReferences` |
//!
//! # How a controller is put together
//!
//! [`runtime::Controller`] does the wiring for you: declare the owner kind,
//! the kinds it owns and watches, and write the reconcile function; see the
//! [`runtime`] crate's documentation for a complete controller. Underneath,
//! informer handlers turn watch events into keys (`namespace/name`) on a
//! work queue; workers take keys and call a sync function; the sync reads
//! only from informer stores, claims its pods with the ref manager, and
//! creates or deletes the difference through `PodControl` in slow-start
//! batches, recording expectations so that the next sync waits until the
//! informer has seen its own writes. A
//! [`ConsistencyStore`](consistency::ConsistencyStore) adds the same
//! guarantee for every write, status writes included, by comparing
//! resourceVersions. The repository's
//! `examples/replicaset` builds the ReplicaSet and ReplicationController
//! controllers exactly this way.
//!
//! # Example
//!
//! The core of a replica controller's sync, without a cluster: a worker
//! takes the owner's key from the queue, sees that two pods are missing,
//! raises expectations, creates them in slow-start batches through a
//! recording [`FakePodControl`](podcontrol::FakePodControl), and the next
//! sync of the same key waits until the creations have been observed.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use ctrlkit::prelude::*;
//! use ctrlkit::podcontrol::FakePodControl;
//! use k8s_openapi::api::core::v1::{ObjectReference, PodTemplateSpec};
//! use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let queue = WorkQueue::<String>::new();
//! let expectations = Arc::new(ControllerExpectations::new());
//! let pods = FakePodControl::new();
//!
//! let template = PodTemplateSpec {
//!     metadata: Some(ObjectMeta {
//!         labels: Some([("app".to_string(), "web".to_string())].into()),
//!         ..Default::default()
//!     }),
//!     ..Default::default()
//! };
//! let owner = ObjectReference {
//!     kind: Some("ReplicaSet".into()),
//!     name: Some("web".into()),
//!     namespace: Some("default".into()),
//!     ..Default::default()
//! };
//! let controller_ref = OwnerReference {
//!     api_version: "apps/v1".into(),
//!     kind: "ReplicaSet".into(),
//!     name: "web".into(),
//!     uid: "6b1c2f9e".into(),
//!     controller: Some(true),
//!     block_owner_deletion: Some(true),
//! };
//!
//! // The sync: skip while earlier creations are unobserved, else create the
//! // missing pods (here: always 2) in slow-start batches.
//! let sync = {
//!     let (expectations, pods) = (expectations.clone(), pods.clone());
//!     move |key: String| {
//!         let (expectations, pods) = (expectations.clone(), pods.clone());
//!         let (template, owner, controller_ref) =
//!             (template.clone(), owner.clone(), controller_ref.clone());
//!         async move {
//!             if !expectations.satisfied(&key) {
//!                 return Ok::<_, String>(Action::done());
//!             }
//!             let missing = 2;
//!             expectations.expect_creations(&key, missing);
//!             let created = slow_start_batch(missing, 1, |_| {
//!                 let pods = pods.clone();
//!                 let (template, owner, controller_ref) =
//!                     (template.clone(), owner.clone(), controller_ref.clone());
//!                 async move {
//!                     pods.create_pods("default", &template, &owner, &controller_ref)
//!                         .await
//!                         .map(|_pod| ())
//!                 }
//!             })
//!             .await;
//!             if let Err(err) = created {
//!                 // Creations that did not happen will never be observed.
//!                 expectations.lower(&key, err.unsuccessful() as i64, 0);
//!                 return Err(err.to_string());
//!             }
//!             Ok(Action::done())
//!         }
//!     }
//! };
//!
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! let workers = Workers::new(queue.clone(), sync).name("example").concurrency(2);
//! let run = tokio::spawn(workers.run(async {
//!     let _ = stopped.await;
//! }));
//!
//! queue.add("default/web".to_string());
//! tokio::time::sleep(Duration::from_millis(10)).await;
//! assert_eq!(pods.create_count(), 2);
//!
//! // A second event before the informer saw the new pods: the sync waits.
//! queue.add("default/web".to_string());
//! tokio::time::sleep(Duration::from_millis(10)).await;
//! assert_eq!(pods.create_count(), 2, "no duplicate pods off a stale cache");
//!
//! // The informer's pod-add handler observes both creations.
//! expectations.creation_observed("default/web");
//! expectations.creation_observed("default/web");
//! assert!(expectations.satisfied("default/web"));
//!
//! stop.send(()).unwrap();
//! run.await.unwrap();
//! # }
//! ```
//!
//! # Features
//!
//! - `prometheus`: Prometheus implementations of the workqueue's and the
//!   worker harness's metrics providers (`prometheus-client`).
//!
//! Like every kube-rs library, ctrlkit leaves the Kubernetes API version to
//! the application: enable one `k8s-openapi` version feature (e.g.
//! `k8s-openapi = { version = "0.29", features = ["v1_36"] }`) in your
//! binary.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub use ctrlkit_batch as batch;
pub use ctrlkit_childcontrol as childcontrol;
pub use ctrlkit_consistency as consistency;
pub use ctrlkit_expectations as expectations;
pub use ctrlkit_informer as informer;
pub use ctrlkit_podcontrol as podcontrol;
pub use ctrlkit_refmanager as refmanager;
pub use ctrlkit_runtime as runtime;
pub use ctrlkit_worker as worker;
pub use ctrlkit_workqueue as workqueue;

/// The names most controllers use, for a glob import:
/// `use ctrlkit::prelude::*;`.
pub mod prelude {
    pub use ctrlkit_batch::{BatchError, slow_start_batch};
    pub use ctrlkit_childcontrol::{
        ChildControl, ChildControlError, ChildControlExt, Ensured, FakeChildControl,
        KubeChildControl,
    };
    pub use ctrlkit_consistency::{ConsistencyStore, GroupResource};
    pub use ctrlkit_expectations::ControllerExpectations;
    pub use ctrlkit_informer::{
        DeletedObject, EventHandler, HandlerFns, Informer, ObjectKey, SharedInformerFactory, Store,
        Transform,
    };
    pub use ctrlkit_podcontrol::{PodControl, PodControlError};
    pub use ctrlkit_refmanager::{PodControllerRefManager, Selector};
    pub use ctrlkit_runtime::manager::{BoxError, Manager, ManagerArgs, block_on_main, run_main};
    pub use ctrlkit_runtime::{BuildError, Controller, ControllerMetrics, Owns, Watches};
    pub use ctrlkit_worker::{Action, SyncError, Workers};
    pub use ctrlkit_workqueue::{RateLimiter, WorkQueue, default_controller_rate_limiter};
}
